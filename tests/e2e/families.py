#!/usr/bin/env python3
"""End-to-end for the LLaMA variants (issue 18): fsdp-plan + fsdp-run against
the PyTorch reference of each family (tests/e2e/models.py, written from HF's
definitions) on its tiny model, at world sizes 1, 2 and 4 and every strategy,
10 steps: losses and final weights within the f32 bounds derived from the
reference's spread to its f64 run and other BLAS kernels (matrix.F32Bounds,
bounds.py), measured peak
arena bytes = the plan's prediction.

Weights are drawn with std 0.02 as in matrix.py, but 0.2 for mistral-tiny: at
0.02 the scores are nearly uniform and the sliding window moved the first
loss by only 7.5e-5 relative, under the tolerance; at 0.2 by 8.8e-3, which the
run checks (the window must matter). Not 0.2 for qwen2-tiny: k_proj.bias adds
the same q·b to every score of a row, so its true gradient is 0 and AdamW
turns the rounding noise in it into updates of ~lr; at 0.2 that noise reached
1.06e-4 in the final k_proj.bias (every other tensor within 3.6e-5), and the
f32 reference's own spread, which sets the weight bound, would
grow with it and blunt the check of every other weight.

mistral-tiny: sliding window 16, shorter than the 32-token sequences.
qwen2-tiny: biases on q, k, v. qwen3-tiny: head_dim 24 with hidden 64 and 4
heads (not hidden/heads), q_norm/k_norm before RoPE, tied head.

usage: families.py BIN_DIR WORK_DIR [--steps 10] [--models mistral-tiny,qwen2-tiny,qwen3-tiny]
"""
import argparse
import os
import sys

import matrix
from matrix import HERE, PY, ROOT, GLOBAL_BATCH, SEQ, run, compare, read_metrics

STD = {"mistral-tiny": 0.2}  # others 0.02
RUNS = [(1, "full-shard", 0), (2, "full-shard", 0), (4, "full-shard", 0),
        (2, "shard-grad-op", 0), (4, "shard-grad-op", 0),
        (2, "no-shard", 0), (4, "no-shard", 0), (4, "hybrid-shard", 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--models", default="mistral-tiny,qwen2-tiny,qwen3-tiny")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "gpl3.bin")
    run([PY, os.path.join(HERE, "make_data.py"), data, "--text", "/usr/share/common-licenses/GPL-3"])
    failures = total = 0
    worst = 0.0
    print("%-11s %5s %-14s %14s %14s %10s %s" % ("model", "world", "strategy", "loss rel/bound",
                                              "weight abs/bd", "peak", "result"))
    for model in args.models.split(","):
        config, weights, ref_metrics, ref_weights, tol = matrix.f32_reference(
            args, model, data, std=STD.get(model, 0.02))
        print("%-11s %5s %s" % (model, "-", tol.describe()))
        if model.startswith("mistral"):
            # The same weights under full causal attention (llama-tiny has
            # mistral-tiny's shapes): the window must change the losses.
            full = os.path.join(args.work, model + ".full-causal.jsonl")
            run([PY, os.path.join(HERE, "reference.py"), "--config",
                 os.path.join(ROOT, "models", "llama-tiny", "config.json"), "--weights", weights,
                 "--data", data, "--steps", "1", "--global-batch", str(GLOBAL_BATCH),
                 "--seq-len", str(SEQ), "--metrics", full, "--quiet"])
            a, b = read_metrics(ref_metrics)[0]["loss"], read_metrics(full)[0]["loss"]
            moved = abs(a - b) / abs(b)
            # Power: fsdp ignoring the window would be caught only if the
            # window moves the loss past the bound, 10x for margin.
            total += 1
            failures += moved < 10 * tol.loss
            print("%-11s %5s %-14s %14.3g %14s %10s %s" % (
                model, "", "window vs full", moved, "", "", "ok" if moved >= 10 * tol.loss else
                "FAILED: the window moves the first loss by under 10x the bound %.2g" % tol.loss))
        for world, strategy, shard in RUNS:
            tag = "%s.w%d.%s" % (model, world, strategy)
            metrics, final, m = matrix.train_plan(args, config, tag, world, strategy, shard, weights, data)
            loss_diff, w_diff, problem = compare(ref_metrics, metrics, ref_weights, final, tol)
            exact = all(x["peak_bytes"] == x["predicted_peak_bytes"] for x in m)
            ok = exact and len(m) == args.steps and problem is None
            if loss_diff is not None:
                worst = max(worst, loss_diff)
            total += 1
            failures += not ok
            print("%-11s %5d %-14s %14s %14s %10s %s" % (
                model, world, strategy, matrix.gap_text(loss_diff, tol.loss),
                matrix.gap_text(w_diff, tol.weight),
                "exact" if exact else "%d != %d" % (m[-1]["peak_bytes"], m[-1]["predicted_peak_bytes"]),
                "ok" if ok else "FAILED " + (problem or "")))

    # bf16 compute against the reference rounding where fsdp stores bf16,
    # with bounds from the spread of its correct alternatives measured here
    # (matrix.check_bf16_compute). Weights of std 0.02 for every model: at 0.2
    # the references themselves spread mistral-tiny's losses by 3.3e-4 (step
    # 1: 2.2e-5), as wide as the f32-compute control's gap, so the bounds
    # could not tell bf16 from f32 compute.
    for model in args.models.split(","):
        config = os.path.join(ROOT, "models", model, "config.json")
        weights = os.path.join(args.work, model + ".init.safetensors")
        if STD.get(model, 0.02) != 0.02:
            weights = os.path.join(args.work, model + ".init-0.02.safetensors")
            run([PY, os.path.join(HERE, "make_weights.py"), config, weights, "--seed", "7",
                 "--std", "0.02"])
        cases = [(w, st, sh, "bf16", ["--param-dtype", "bf16"])
                 for w, st, sh in ((1, "full-shard", 0), (2, "full-shard", 0),
                                   (4, "hybrid-shard", 2))]
        checks, failed = matrix.check_bf16_compute(args, data, model, weights, cases)
        total += checks
        failures += failed
    print("%d of %d runs ok; largest f32 loss gap %.3g" % (total - failures, total, worst))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
