"""Writes corruptions of a tensor-parallel plan (verify-plan-tp.test)."""
import re
import sys

plan, out = sys.argv[1], sys.argv[2]
with open(plan) as f:
    text = f.read()


def write(name, t):
    assert t != text, name
    with open(f"{out}/{name}.mlir", "w") as f:
        f.write(t)


# block0's all_reduce over tp and its wait.
m = re.search(r"\n *(%[0-9]+) = fsdp\.all_reduce @block0 over tp\n", text)
event = m.group(1)
no_sum = text.replace(m.group(0), "\n").replace(f"fsdp.wait {event}\n", "", 1)
write("no-sum", no_sum)
write("two-sums", text.replace(m.group(0), m.group(0) + m.group(0).replace(event, "%extra_sum") +
                               "    fsdp.wait %extra_sum\n", 1))
# block0's input norm said whole with a complete gradient on the unit.
unit = re.search(r"fsdp\.unit @block0 \{.*\}", text).group(0)
partial = re.search(r"tp_partial = array<i1: ([a-z, ]*)>", unit).group(1).split(", ")
partial[7] = "false"
write("cut", text.replace(unit, re.sub(r"tp_partial = array<i1: [a-z, ]*>",
                                       "tp_partial = array<i1: " + ", ".join(partial) + ">",
                                       unit)))
write("uncut", text.replace(unit, re.sub(r", tp_dims = .*tp_sections = array<i64: [0-9, ]*>",
                                         "", unit)))
# Without tp, and the world the shard group (which full-shard needs).
write("no-tp", re.sub(r"tp = 2 : i64, ", "", text, count=1).replace("world_size = 4", "world_size = 2"))
