#!/usr/bin/python3
"""Write a small runnable masked-LM program (docs/program-format.md, inputs
kind "masked_tokens"), before the BERT graph exists, and optionally its
initial weights.

usage: make_masked_program.py OUT.json --vocab V --seq-len S --micro-batch B
                              --world-size R [--weights INIT.safetensors [--seed N]]

The model is two tables in one unit: "embed.weight" [V, V], whose row for
an input token (the mask id at a selected position) is that position's
logits, plus "position.weight" [S, V], a row of logits for each position:
logits[b, s] = embed[tokens[b, s]] + position[s]. Its loss is cross_entropy
over the masked targets (the original token at a selected position, -100
elsewhere), so fsdp-run reports and trains the masked-LM loss: the kernels'
mean over each rank's selected positions, combined over ranks and
micro-steps by their counts (docs/program-format.md, "Inputs").
masked_reference.py is the same model in PyTorch.

--weights: both tables normal(0, 0.5) from torch.manual_seed(N) (default 0),
as safetensors, embed.weight drawn first.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hand_program import OneUnit  # noqa: E402

EMBED, POSITION = "embed.weight", "position.weight"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--weights")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    B, S, R, V = a.micro_batch, a.seq_len, a.world_size, a.vocab
    u = OneUnit("embed,position", EMBED, [V, V], R, more=[(POSITION, [S, V])])
    take = u.take
    tensors = [
        {"offset": take(B * S * 8), "shape": [B, S], "dtype": "i64"},     # 0 tokens
        {"offset": take(B * S * 8), "shape": [B, S], "dtype": "i64"},     # 1 targets
        {"offset": take(4), "shape": [], "dtype": "f32"},                 # 2 loss
        {"offset": take(B * S * V * 4), "shape": [B, S, V], "dtype": "f32"},  # 3 token rows
        {"offset": take(B * S * V * 4), "shape": [B, S, V], "dtype": "f32"},  # 4 dlogits
        {"offset": u.at[EMBED], "shape": [V, V], "dtype": "f32"},         # 5 embed
        {"offset": u.grad_at[EMBED], "shape": [V, V], "dtype": "f32"},    # 6 its gradient
        {"offset": take(B * S * 8), "shape": [B, S], "dtype": "i64"},     # 7 positions
        {"offset": take(B * S * V * 4), "shape": [B, S, V], "dtype": "f32"},  # 8 position rows
        {"offset": u.at[POSITION], "shape": [S, V], "dtype": "f32"},      # 9 position
        {"offset": u.grad_at[POSITION], "shape": [S, V], "dtype": "f32"},  # 10 its gradient
        {"offset": take(B * S * V * 4), "shape": [B, S, V], "dtype": "f32"},  # 11 logits
    ]
    compute = [
        {"op": "record", "event": 0},
        {"op": "wait", "event": 1, "phase": "forward"},
        {"op": "embedding", "module": "embed", "in": [0, 5], "out": [3], "unit": 0,
         "phase": "forward"},
        {"op": "position_ids", "in": [0], "out": [7], "phase": "forward"},
        {"op": "embedding", "module": "position", "in": [7, 9], "out": [8], "unit": 0,
         "phase": "forward"},
        {"op": "add", "in": [3, 8], "out": [11], "phase": "forward"},
        {"op": "cross_entropy", "in": [11, 1], "out": [2], "phase": "forward"},
        {"op": "cross_entropy_grad", "in": [11, 1], "out": [4], "phase": "backward"},
        {"op": "free", "kind": "params", "unit": 0, "phase": "backward"},
        {"op": "alloc", "kind": "grads", "unit": 0, "dst": u.grads, "zero_from": 0,
         "phase": "backward"},
        {"op": "embedding_grad", "module": "embed", "in": [4, 0], "out": [6],
         "phase": "backward"},
        {"op": "embedding_grad", "module": "position", "in": [4, 7], "out": [10],
         "phase": "backward"},
        {"op": "record", "event": 2},
        {"op": "wait", "event": 3, "phase": "backward"},
        {"op": "free", "kind": "grads", "unit": 0, "phase": "backward"},
    ]
    u.write(a.out, {"name": "masked-table", "model_type": "bert"}, B, S,
            {"kind": "masked_tokens", "tokens": 0, "targets": 1},
            tensors, compute)
    if a.weights:
        import torch
        import safetensors_io
        torch.manual_seed(a.seed)
        embed = torch.randn(V, V) * 0.5
        safetensors_io.save({EMBED: embed, POSITION: torch.randn(S, V) * 0.5}, a.weights)


if __name__ == "__main__":
    main()
