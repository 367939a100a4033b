#!/usr/bin/python3
"""Two runs, one --save folder: the first (long, slow: many steps) holds the
lock; the second must be refused at once, naming it; once the first is killed
(SIGKILL: its lock is released by the kernel, whatever it left), a third run
saves there.

usage: lock-holder.py PROGRAM.json DATA.bin DIR
"""
import os
import signal
import subprocess
import sys
import time

plan, data, folder = sys.argv[1:4]
holder = subprocess.Popen(["fsdp-run", plan, "--data", data, "--steps", "1000000",
                           "--save", folder, "--quiet"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
lock = os.path.join(folder, "lock")
deadline = time.time() + 60
while time.time() < deadline and not (os.path.exists(lock) and os.path.getsize(lock) > 0):
    time.sleep(0.05)
start = time.time()
second = subprocess.run(["fsdp-run", plan, "--data", data, "--steps", "2", "--save", folder],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
waited = time.time() - start
print("second run: exit %d: %s" % (second.returncode, second.stdout.strip()))
print("holder was process %d" % holder.pid)
if waited > 10:
    print("FAILED: the second run took %.1f s to be refused" % waited)
holder.send_signal(signal.SIGKILL)
holder.wait()
third = subprocess.run(["fsdp-run", plan, "--data", data, "--steps", "2", "--save", folder,
                        "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=60)
print("after the holder was killed: exit %d %s" % (third.returncode, third.stdout.strip()))
