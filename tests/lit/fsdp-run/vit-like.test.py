"""Writes faulty copies of vit-like.test's program: the loader must refuse
each, naming the instruction, before anything runs."""
import copy
import json
import os
import sys

plan, out = sys.argv[1], sys.argv[2]
good = json.load(open(plan))
compute = good["micro_step"]["compute"]


def find(op, **match):
    for i, inst in enumerate(compute):
        if inst["op"] == op and all(inst.get(k) == v for k, v in match.items()):
            return i
    raise SystemExit(f"no {op} {match} in {plan}")


def write(name, edit):
    p = copy.deepcopy(good)
    edit(p["micro_step"]["compute"], p)
    json.dump(p, open(os.path.join(out, name + ".json"), "w"))


ct = find("class_token")
ft = find("first_token")
patch = find("linear", module="vit.embeddings.patch_embeddings.projection")


def swap_cls_positions(c, p):
    ins = c[ct]["in"]
    ins[1], ins[2] = ins[2], ins[1]


# class_token's cls and positions swapped.
write("class-token-swapped", swap_cls_positions)
# first_token writing into the class token's output [B, 2, D].
write("first-token-out", lambda c, p: c[ft].update(out=c[ct]["out"]))
# The 4-D patch kernel read as an in_out weight.
write("patch-in-out", lambda c, p: c[patch].update(layout="in_out"))
