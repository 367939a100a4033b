#!/usr/bin/python3
"""Runs a command and checks how soon it exits after a line of its output.

usage: exit-within.py SECONDS PATTERN -- COMMAND...

Copies the command's output (stdout and stderr together) to stdout; measures
from the first line containing PATTERN to the command's exit and prints it,
"within SECONDS s" or "PAST the limit"; exits 1 when it took longer or
PATTERN never appeared, else with the command's exit status (a test of a
failing command checks the printed verdict). The clock starts at the line, not at the
launch, so a slow start on a loaded machine does not count.
"""
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit(__doc__)
    limit, pattern, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[4:]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = None
    for line in p.stdout:
        sys.stdout.write(line)
        if seen is None and pattern in line:
            seen = time.monotonic()
    rc = p.wait()
    if seen is None:
        print(f"exit-within: '{pattern}' never appeared")
        sys.exit(1)
    took = time.monotonic() - seen
    verdict = f"within {limit:g} s" if took <= limit else f"PAST the limit of {limit:g} s"
    print(f"exit-within: exited {took:.1f} s after '{pattern}', {verdict}")
    sys.exit(1 if took > limit else rc)


if __name__ == "__main__":
    main()
