"""Writes faulty copies of a program for program-validation.test."""
import copy
import json
import os
import sys

plan, out = sys.argv[1], sys.argv[2]
good = json.load(open(plan))
micro = good["micro_step"]
# The shape this test relies on: compute records 0 then waits for 1; comm
# waits for 0 first, then records 1.
assert (micro["compute"][1]["op"], micro["compute"][1]["event"]) == ("record", 0)
assert (micro["comm"][0]["op"], micro["comm"][0]["event"]) == ("wait", 0)
assert (micro["comm"][2]["op"], micro["comm"][2]["event"]) == ("record", 1)


def write(name, edit):
    p = copy.deepcopy(good)
    edit(p["micro_step"])
    json.dump(p, open(os.path.join(out, name + ".json"), "w"))


write("deadlock", lambda m: m["compute"].insert(0, {"op": "wait", "event": 1}))
write("unrecorded", lambda m: m["compute"][2].update(event=17))
write("twice", lambda m: m["compute"][3].update(op="record", event=0))
write("range", lambda m: m["comm"][2].update(event=99))
write("unknown", lambda m: m["compute"][4].update(op="conv2d"))


def first(m, op):
    return next(i for i in m["compute"] if i["op"] == op)


# GELU's form is "tanh" or "none"; bidirectional attention has no window.
write("gelu-form", lambda m: first(m, "gelu").update(approximate="erf"))
write("attention-window", lambda m: first(m, "causal_attention").update(op="attention", window=4))
