"""What failed, in brief, from CTest's log (Testing/Temporary/LastTest.log):
for a failing lit test the command that failed and what it printed (its
last RUN line onward), for any other failing test its last lines. A CI log
keeps its head and its tail; this puts the failure in the tail."""
import re
import sys

KEEP = 40  # lines per failure
WIDTH = 400  # characters per line


def cut(lines):
    lines = [l if len(l) <= WIDTH else l[:WIDTH] + " [...]" for l in lines]
    if len(lines) > KEEP:
        lines = lines[:KEEP // 2] + ["[... %d lines ...]" % (len(lines) - KEEP)] + lines[-KEEP // 2:]
    return lines


def lit_failures(output):
    """Each failing lit test's name and its last RUN line onward."""
    out = []
    for m in re.finditer(r"^\*{20} TEST '([^']+)' FAILED \*{20}$(.*?)^\*{20}$", output,
                         re.M | re.S):
        body = [l for l in m.group(2).splitlines() if not l.startswith("+ ")]
        runs = [i for i, l in enumerate(body) if l.startswith("RUN: at line")]
        out.append((m.group(1), body[runs[-1]:] if runs else body))
    return out


def main(path):
    text = open(path, errors="replace").read()
    # One entry per test: its name, output and verdict.
    tests = re.findall(r'^\d+/\d+ Test: (\S+)\n.*?^Output:\n-+\n(.*?)^<end of output>\n'
                       r'.*?^Test (Passed|Failed)', text, re.M | re.S)
    failed = [(name, output) for name, output, verdict in tests if verdict == "Failed"]
    if not failed:
        return
    print("\n=== what failed, in brief (scripts/failed-tests.py) ===")
    for name, output in failed:
        lit = lit_failures(output)
        if lit:
            for test, lines in lit:
                print("--- %s: lit test %s: the command that failed, and its output" % (name, test))
                print("\n".join(cut(lines)))
        else:
            print("--- %s: its last lines" % name)
            print("\n".join(cut(output.splitlines()[-KEEP:])))


if __name__ == "__main__":
    main(sys.argv[1])
