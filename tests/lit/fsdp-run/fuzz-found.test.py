"""Writes the faulty programs of fuzz-found.test: each is a program fsdp-plan
wrote with one edit that once got past the loader (tests/fuzz/runtime)."""
import copy
import json
import os
import sys

plan, out = sys.argv[1], sys.argv[2]
good = json.load(open(plan))


def write(name, edit):
    p = copy.deepcopy(good)
    edit(p)
    json.dump(p, open(os.path.join(out, name + ".json"), "w"))


def first(p, op):
    return next(i for i in p["micro_step"]["compute"] if i["op"] == op)


# A dimension written as a float far past int64 (undefined behaviour in the
# conversion), and a fractional micro-batch (silently truncated).
write("float-dim", lambda p: p["tensors"][3].update(shape=[2.5e49, 64]))
write("fraction", lambda p: p.update(micro_batch=2.5))
