#!/usr/bin/env python3
"""End-to-end for rope_scaling's kinds (issue 32 item 6): fsdp-plan + fsdp-run
on llama-tiny with each scaling against the PyTorch reference
(tests/e2e/models.py's transcription of transformers' modeling_rope_utils),
10 steps: losses and final weights within the f32 bounds derived from the
reference's spread to its f64 run and other BLAS kernels (matrix.F32Bounds,
bounds.py), measured peak arena bytes = the plan's prediction.

  llama-tiny-linear   {"factor": 4.0, "rope_type": "linear"}
  llama-tiny-dynamic  {"factor": 2.0, "type": "dynamic"}
  llama-tiny-yarn     {"factor": 4.0, "original_max_position_embeddings": 32,
                       "type": "yarn"} (Qwen2.5's form: its attention factor
                       0.1 ln 4 + 1, dims 0-2 of 8 on the ramp)

One run each, at world size 2 (full-shard): the scaling is each rank's own
compute, and families.py covers the strategies. Sequences of 32 tokens
(max_position_embeddings 128).

Power: linear's and yarn's scaling must move the first loss of the reference
by more than 10x the loss bound from llama-tiny's (the same model unscaled, on
the same weights): fsdp ignoring the scaling would fall outside the bound.
Weights of std 0.2 for that, as families.py's mistral-tiny (at 0.02 the scores
are nearly uniform and positions barely matter). Dynamic NTK at sequences up
to max_position_embeddings is transformers' default frequencies (its base at
seq_len = max_position_embeddings is rope_theta itself): its reference and
llama-tiny's must be equal, bit for bit, and so must fsdp's two runs.

usage: rope_scaling.py BIN_DIR WORK_DIR [--steps 10]
"""
import argparse
import os
import sys

import matrix
from matrix import HERE, PY, ROOT, GLOBAL_BATCH, SEQ, run, compare, read_metrics

MODELS = ("llama-tiny-linear", "llama-tiny-dynamic", "llama-tiny-yarn")
STD = 0.2
WORLD = 2


def reference(args, config, weights, data, tag, steps):
    metrics = os.path.join(args.work, tag + ".jsonl")
    final = os.path.join(args.work, tag + ".safetensors")
    cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
           "--data", data, "--steps", str(steps), "--global-batch", str(GLOBAL_BATCH),
           "--seq-len", str(SEQ), "--metrics", metrics, "--save-weights", final, "--quiet"]
    run(cmd)
    return cmd, metrics, final


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "gpl3.bin")
    run([PY, os.path.join(HERE, "make_data.py"), data, "--text", "/usr/share/common-licenses/GPL-3"])
    plain = os.path.join(ROOT, "models", "llama-tiny", "config.json")
    # One set of weights: every model here has llama-tiny's parameters.
    weights = os.path.join(args.work, "init.safetensors")
    run([PY, os.path.join(HERE, "make_weights.py"), plain, weights, "--seed", "7", "--std", str(STD)])
    _, plain_ref, _ = reference(args, plain, weights, data, "llama-tiny.ref", args.steps)
    plain_run, plain_final, _ = matrix.train_plan(args, plain, "llama-tiny.w%d" % WORLD, WORLD, "full-shard",
                                        0, weights, data)
    failures = total = 0
    print("%-18s %-26s %14s %14s %10s %s" % ("model", "check", "loss rel/bound", "weight abs/bd",
                                             "peak", "result"))
    for model in MODELS:
        config = os.path.join(ROOT, "models", model, "config.json")
        ref_cmd, ref_metrics, ref_weights = reference(args, config, weights, data, model + ".ref",
                                                      args.steps)
        tol = matrix.f32_bounds(args, model, ref_cmd, ref_metrics, ref_weights)
        print("%-18s %s" % (model, tol.describe()))

        a, b = read_metrics(ref_metrics)[0]["loss"], read_metrics(plain_ref)[0]["loss"]
        moved = abs(a - b) / abs(b)
        total += 1
        if model == "llama-tiny-dynamic":
            ok = a == b
            why = "" if ok else "FAILED: dynamic's first loss is not llama-tiny's"
        else:
            ok = moved >= 10 * tol.loss
            why = "" if ok else "FAILED: the scaling moves the first loss by under 10x the bound"
        failures += not ok
        print("%-18s %-26s %14.3g %14s %10s %s" % (model, "reference vs unscaled", moved, "", "",
                                                   "ok" if ok else why))

        tag = "%s.w%d" % (model, WORLD)
        metrics, final, m = matrix.train_plan(args, config, tag, WORLD, "full-shard", 0, weights,
                                              data)
        loss_diff, w_diff, problem = compare(ref_metrics, metrics, ref_weights, final, tol)
        exact = all(x["peak_bytes"] == x["predicted_peak_bytes"] for x in m)
        ok = exact and len(m) == args.steps and problem is None
        total += 1
        failures += not ok
        print("%-18s %-26s %14s %14s %10s %s" % (
            model, "fsdp w%d full-shard" % WORLD, matrix.gap_text(loss_diff, tol.loss),
            matrix.gap_text(w_diff, tol.weight),
            "exact" if exact else "%d != %d" % (m[-1]["peak_bytes"], m[-1]["predicted_peak_bytes"]),
            "ok" if ok else "FAILED " + (problem or "")))
        if model == "llama-tiny-dynamic":
            # The same kernels on the same values in the same order: 0.
            key = lambda path: [(x["loss"], x["grad_norm"]) for x in read_metrics(path)]
            same = key(metrics) == key(plain_run) and \
                matrix.read_f32_tensors(final) == matrix.read_f32_tensors(plain_final)
            total += 1
            failures += not same
            print("%-18s %-26s %14s %14s %10s %s" % (
                model, "fsdp vs fsdp unscaled", "0" if same else "differs", "", "",
                "ok" if same else "FAILED: dynamic's run is not llama-tiny's, bit for bit"))
    print("%d of %d checks ok" % (total - failures, total))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
