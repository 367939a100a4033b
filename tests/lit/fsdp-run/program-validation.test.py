"""Writes faulty copies of a program for program-validation.test."""
import copy
import json
import os
import sys

plan, out = sys.argv[1], sys.argv[2]
good = json.load(open(plan))
micro = good["micro_step"]
# The shape this test relies on: compute[1] waits for the gather of unit 0
# (comm[0], its record comm[1]); compute[6] records event 4, for which
# comm[4] waits before comm[5] gathers and comm[6] records event 5.
assert (micro["compute"][1]["op"], micro["compute"][1]["event"]) == ("wait", 1)
assert (micro["comm"][1]["op"], micro["comm"][1]["event"]) == ("record", 1)
assert (micro["compute"][6]["op"], micro["compute"][6]["event"]) == ("record", 4)
assert (micro["comm"][4]["op"], micro["comm"][4]["event"]) == ("wait", 4)
assert (micro["comm"][6]["op"], micro["comm"][6]["event"]) == ("record", 5)


def write(name, edit):
    p = copy.deepcopy(good)
    edit(p["micro_step"])
    json.dump(p, open(os.path.join(out, name + ".json"), "w"))


write("deadlock", lambda m: m["compute"].insert(0, {"op": "wait", "event": 5}))
write("unrecorded", lambda m: m["compute"][1].update(event=17))
write("twice", lambda m: m["compute"].__setitem__(7, {"op": "record", "event": 4}))
write("range", lambda m: m["comm"][1].update(event=99))
# The embedding no longer waits for the gather of the parameters it reads.
write("unordered", lambda m: m["compute"].pop(1))
write("unknown", lambda m: m["compute"][4].update(op="conv2d"))


def first(m, op):
    return next(i for i in m["compute"] if i["op"] == op)


# GELU's form is "tanh" or "none"; bidirectional attention has no window.
write("gelu-form", lambda m: first(m, "gelu").update(approximate="erf"))
write("attention-window", lambda m: first(m, "causal_attention").update(op="attention", window=4))
