"""usage: wrap-auto-progress.test.py FSDP-PLAN ARGS...

Runs fsdp-plan with its stderr on a pseudo-terminal (stdout to /dev/null)
and prints what the terminal received, each carriage return and escape
shown as \\r and \\e, one update a line.
"""
import os
import pty
import subprocess
import sys

master, slave = pty.openpty()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
data = b""
while True:
    try:
        chunk = os.read(master, 4096)
    except OSError:  # EIO: the other side closed
        break
    if not chunk:
        break
    data += chunk
proc.wait()
text = data.decode("utf-8", "replace").replace("\r\n", "\n")
text = text.replace("\x1b", "\\e").replace("\r", "\n\\r")
print(text)
print("exit", proc.returncode)
