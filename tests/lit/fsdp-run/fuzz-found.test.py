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


def tensor(p, shape, dtype="f32", offset=0):
    p["tensors"].append({"id": len(p["tensors"]), "offset": offset, "shape": shape, "dtype": dtype})
    return len(p["tensors"]) - 1


def append(name, make):
    """A program with one more compute instruction, make(p) -> instruction,
    over tensors of its own at the start of the arena (or its end)."""
    write(name, lambda p: p["micro_step"]["compute"].append(make(p)))


# A shape whose size wraps around int64 to a few bytes.
write("wraps", lambda p: tensor(p, [2**31, 2**31, 4, 4]))
# Kernels that read or write past their tensors (the end of the arena):
# gelu reads f32 from a bf16 tensor; layer_norm_grad's weight is one float;
# embedding_grad reads a row per id from a one-row gradient.
end = good["arena_bytes"]
append("gelu-bf16", lambda p: {"op": "gelu", "in": [tensor(p, [8], "bf16", end - 16)],
                               "out": [tensor(p, [8])]})
append("layer-norm-grad", lambda p: {
    "op": "layer_norm_grad", "eps": 1e-5,
    "in": [tensor(p, [2, 8]), tensor(p, [2, 8]), tensor(p, [1], offset=end - 4)],
    "out": [tensor(p, [2, 8]), tensor(p, [8]), tensor(p, [8])]})
append("embedding-grad", lambda p: {"op": "embedding_grad",
                                    "in": [tensor(p, [64], offset=end - 256), p["inputs"]["tokens"]],
                                    "out": [tensor(p, [128, 64])]})
# split cuts equal parts: unequal ones would overrun the smaller.
append("split", lambda p: {"op": "split", "in": [tensor(p, [2, 8])],
                           "out": [tensor(p, [2, 6]), tensor(p, [2, 2], offset=end - 16)]})
# Rows of zero elements: the kernel divides by the row's length.
append("zero-width", lambda p: {"op": "linear", "layout": "in_out",
                                "in": [tensor(p, [1, 0]), tensor(p, [0, 4])],
                                "out": [tensor(p, [1, 4])]})


# Indices must fit their table: the token embedding swapped for the position
# embedding (128 rows for a vocabulary of 503), and an embedding indexed by a
# tensor that holds no ids at all.
def swap_table(p):
    wte = next(i for i in p["micro_step"]["compute"]
               if i["op"] == "embedding" and i["in"][0] == p["inputs"]["tokens"])
    wpe = next(i for i in p["micro_step"]["compute"]
               if i["op"] == "embedding" and i["in"][0] != p["inputs"]["tokens"])
    wte["in"][1] = wpe["in"][1]


write("vocab", swap_table)
append("ids", lambda p: {"op": "embedding", "in": [tensor(p, [2, 16], "i64"), tensor(p, [4, 8])],
                         "out": [tensor(p, [2, 16, 8])]})
