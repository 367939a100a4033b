#!/usr/bin/python3
"""Write a small runnable masked-LM program (docs/program-format.md, inputs
kind "masked_tokens") for fsdp-run's flag and data checks, before the BERT
graph and its masked loss exist.

usage: make_masked_program.py OUT.json --vocab V --seq-len S --micro-batch B
                              --world-size R

The model is one table "embed.weight" [V, V] whose rows are the logits of
each input token (embedding, cross_entropy over the inputs, and their
gradients). Its loss reads the inputs, not the masked targets: the loader
refuses a masked program whose ops index by its targets until fsdp-run
combines a masked loss (docs/program-format.md, "Inputs"), so the loss it
reports is no masked-LM loss.
What it exercises is the runtime around the model (the masked batches, the
per-step selected count and its error, the flags).
"""
import argparse

from hand_program import OneUnit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    a = ap.parse_args(argv)
    B, S, R, V = a.micro_batch, a.seq_len, a.world_size, a.vocab
    u = OneUnit("embed", "embed.weight", [V, V], R)
    take, gathered, grads = u.take, u.gathered, u.grads
    tensors = [
        {"offset": take(B * S * 8), "shape": [B, S], "dtype": "i64"},     # 0 tokens
        {"offset": take(B * S * 8), "shape": [B, S], "dtype": "i64"},     # 1 targets
        {"offset": take(4), "shape": [], "dtype": "f32"},                 # 2 loss
        {"offset": take(B * S * V * 4), "shape": [B, S, V], "dtype": "f32"},  # 3 logits
        {"offset": take(B * S * V * 4), "shape": [B, S, V], "dtype": "f32"},  # 4 dlogits
        {"offset": gathered, "shape": [V, V], "dtype": "f32"},            # 5 the table
        {"offset": grads, "shape": [V, V], "dtype": "f32"},               # 6 its gradient
    ]
    compute = [
        {"op": "record", "event": 0},
        {"op": "wait", "event": 1, "phase": "forward"},
        {"op": "embedding", "module": "embed", "in": [0, 5], "out": [3], "unit": 0,
         "phase": "forward"},
        {"op": "cross_entropy", "in": [3, 0], "out": [2], "phase": "forward"},
        {"op": "cross_entropy_grad", "in": [3, 0], "out": [4], "phase": "backward"},
        {"op": "free", "kind": "params", "unit": 0, "phase": "backward"},
        {"op": "alloc", "kind": "grads", "unit": 0, "dst": grads, "zero_from": 0,
         "phase": "backward"},
        {"op": "embedding_grad", "module": "embed", "in": [4, 0], "out": [6],
         "phase": "backward"},
        {"op": "record", "event": 2},
        {"op": "wait", "event": 3, "phase": "backward"},
        {"op": "free", "kind": "grads", "unit": 0, "phase": "backward"},
    ]
    u.write(a.out, {"name": "masked-table", "model_type": "bert"}, B, S,
            {"kind": "masked_tokens", "tokens": 0, "targets": 1},
            tensors, compute)


if __name__ == "__main__":
    main()
