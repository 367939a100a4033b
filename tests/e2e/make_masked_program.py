#!/usr/bin/python3
"""Write a small runnable masked-LM program (docs/program-format.md, inputs
kind "masked_tokens") for fsdp-run's flag and data checks, before the BERT
graph and its masked loss exist.

usage: make_masked_program.py OUT.json --vocab V --seq-len S --micro-batch B
                              --world-size R

The model is one table "embed.weight" [V, V] whose rows are the logits of
each input token (embedding, cross_entropy over the inputs, and their
gradients). Its loss reads the inputs, not the masked targets: today's
cross_entropy does not skip the targets' -100s, and the loader refuses a
masked program whose ops index by its targets. Nor is its loss tensor the
sum over the selected positions that fsdp-run divides by the step's count
(docs/program-format.md, "Inputs"): the loss it reports is no masked-LM loss.
What it exercises is the runtime around the model (the masked batches, the
per-step selected count and its error, the flags).
"""
import argparse
import json


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
    numel = V * V
    padded = -(-numel // R) * R
    shard = padded // R
    offset = 0

    def take(nbytes):
        nonlocal offset
        at = offset
        offset += (nbytes + 15) // 16 * 16
        return at

    unit = {"name": "unit0", "module": "embed", "numel": numel, "padded_numel": padded,
            "shard_size": R, "shard_numel": shard}
    for key in ("shard_offset", "grad_shard_offset", "exp_avg_offset", "exp_avg_sq_offset"):
        unit[key] = take(shard * 4)
    unit["params"] = [{"name": "embed.weight", "shape": [V, V], "offset": 0, "numel": numel,
                       "decay": True}]
    gathered = take(padded * 4)
    grads = take(padded * 4)
    tensors = [
        {"offset": take(B * S * 8), "shape": [B, S], "dtype": "i64"},     # 0 tokens
        {"offset": take(B * S * 8), "shape": [B, S], "dtype": "i64"},     # 1 targets
        {"offset": take(4), "shape": [], "dtype": "f32"},                 # 2 loss
        {"offset": take(B * S * V * 4), "shape": [B, S, V], "dtype": "f32"},  # 3 logits
        {"offset": take(B * S * V * 4), "shape": [B, S, V], "dtype": "f32"},  # 4 dlogits
        {"offset": gathered, "shape": [V, V], "dtype": "f32"},            # 5 the table
        {"offset": grads, "shape": [V, V], "dtype": "f32"},               # 6 its gradient
    ]
    for i, t in enumerate(tensors):
        t["id"] = i
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
    comm = [
        {"op": "wait", "event": 0},
        {"op": "all_gather", "unit": 0, "dst": gathered, "phase": "forward"},
        {"op": "record", "event": 1},
        {"op": "wait", "event": 2},
        {"op": "reduce_scatter", "unit": 0, "src": grads, "phase": "backward"},
        {"op": "record", "event": 3},
    ]
    program = {
        "format": "fsdp-program", "version": 1,
        "model": {"name": "masked-table", "model_type": "bert", "parameters": numel},
        "world_size": R, "strategy": "full-shard", "shard_size": R,
        "micro_batch": B, "seq_len": S, "arena_bytes": offset,
        "memory": {"peak_bytes": offset}, "events": 6,
        "inputs": {"kind": "masked_tokens", "tokens": 0, "targets": 1},
        "loss": 2, "units": [unit], "tensors": tensors,
        "micro_step": {"compute": compute, "comm": comm},
        "optimizer": {"compute": [{"op": "record", "event": 4},
                                  {"op": "wait", "event": 5, "phase": "optimizer"},
                                  {"op": "optimizer_step", "unit": 0, "phase": "optimizer"}],
                      "comm": [{"op": "wait", "event": 4},
                               {"op": "grad_norm", "phase": "optimizer"},
                               {"op": "record", "event": 5}]},
    }
    with open(a.out, "w") as f:
        json.dump(program, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
