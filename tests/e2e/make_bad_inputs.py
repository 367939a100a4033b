#!/usr/bin/env python3
"""Writes broken inputs for fsdp-run's bad-input tests into a folder:
missing-tensor, wrong-shape and wrong-dtype weights, a data file shorter than
one sample and one with a token outside the vocabulary.

usage: make_bad_inputs.py GOOD_WEIGHTS.safetensors OUT_DIR
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import torch  # noqa: E402


def main():
    good, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    w = safetensors_io.load(good)
    missing = dict(w)
    del missing["transformer.h.1.mlp.c_fc.bias"]
    safetensors_io.save(missing, os.path.join(out, "missing.safetensors"))
    shape = dict(w)
    shape["transformer.h.0.attn.c_attn.weight"] = shape["transformer.h.0.attn.c_attn.weight"].t().contiguous()
    safetensors_io.save(shape, os.path.join(out, "shape.safetensors"))
    dtype = dict(w)
    dtype["transformer.ln_f.weight"] = torch.zeros(dtype["transformer.ln_f.weight"].shape, dtype=torch.int64)
    safetensors_io.save(dtype, os.path.join(out, "dtype.safetensors"))
    with open(os.path.join(out, "short.bin"), "wb") as f:
        f.write(struct.pack("<10H", *range(10)))
    tokens = [i % 100 for i in range(1000)]
    tokens[777] = 60000
    with open(os.path.join(out, "vocab.bin"), "wb") as f:
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


if __name__ == "__main__":
    main()
