#!/usr/bin/python3
"""Stops one MPI rank's process with SIGSTOP, as a user's kill -STOP would.

usage: stop-rank.py RANK PATTERN LIMIT -- COMMAND...

Runs COMMAND (an mpirun line) in a session of its own, copying its output
(stdout and stderr together) to stdout. At the first line containing
PATTERN it finds the process of rank RANK among the command's descendants
(by OMPI_COMM_WORLD_RANK in its environment) and sends it SIGSTOP. It then
waits for the command to exit, at most LIMIT seconds after the stop, and
prints what happened: "stop-rank: stopped rank R", then either "stop-rank:
the job ended" (and whether the stopped process was left behind) or
"stop-rank: the job did NOT end within LIMIT s". Whatever is left of the
job afterwards gets SIGCONT and SIGKILL, so nothing outlives the test. Exits
with the command's status, or 1 when the rank was never found or the job
had to be killed.
"""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import descendants, rank_of  # noqa: E402


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.exit(__doc__)
    rank, pattern, limit = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    p = subprocess.Popen(sys.argv[5:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    stopped = None
    # The output is read on a thread of its own, so that the deadline holds
    # even when the job hangs without printing.
    lines = []
    seen = threading.Event()

    def read():
        for line in p.stdout:
            lines.append(line)
            sys.stdout.write(line)
            sys.stdout.flush()
            if pattern in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    status = 0
    if not seen.wait(limit * 4):
        print(f"stop-rank: '{pattern}' never appeared")
        status = 1
    else:
        for pid in descendants(p.pid):
            if rank_of(pid) == rank:
                os.kill(pid, signal.SIGSTOP)
                stopped = pid
                break
        if stopped is None:
            print(f"stop-rank: no process of rank {rank} found")
            status = 1
        else:
            print(f"stop-rank: stopped rank {rank}", flush=True)
    try:
        rc = p.wait(timeout=limit)
        reader.join(timeout=5)
        if stopped is not None:
            left = alive(stopped)
            print("stop-rank: the job ended" +
                  (", but the stopped process was left behind" if left else ""))
            status = status or (1 if left else rc)
    except subprocess.TimeoutExpired:
        print(f"stop-rank: the job did NOT end within {limit:g} s")
        status = 1
    # Nothing outlives the test: what is left of the job (the ranks run in
    # process groups of their own) gets SIGCONT, then SIGKILL.
    # Only pids known to be the job's: a pid that exited may be reused.
    left = descendants(p.pid) + [p.pid] if p.poll() is None else []
    if stopped is not None and stopped not in left and rank_of(stopped) == rank:
        left.append(stopped)
    for sig in (signal.SIGCONT, signal.SIGKILL):
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    p.wait()
    sys.exit(status)


if __name__ == "__main__":
    main()
