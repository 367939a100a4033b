#!/usr/bin/env python3
"""End-to-end for 2D parallelism (issue 34): fsdp-plan --tp N + fsdp-run
(threads, and one mesh under mpirun) against single-process PyTorch, 10 steps of the global batch of
12 sequences of 32 tokens, on gpt2-tiny (GPT-2's fused c_attn, cut in 3
sections), llama-tiny (GQA: 2 key/value heads, shared by 2 ranks at tp 4)
and qwen3-tiny (q/k norms, tied head): losses and final weights within the
f32 bounds derived from the reference's spread to its f64 run and other
BLAS kernels (matrix.F32Bounds, bounds.py), and every step's measured peak
arena bytes equal to the plan's prediction.

The runs load the reference's initial weights (--weights: each rank reads
its pieces of the whole tensors) and write their final ones whole
(--save-weights: the pieces put together), so the comparison is of whole
tensors. Checkpoints saved at one mesh resume at others (dp x tp 2 x 2 to
4 x 1 and 1 x 4, and 4 x 1 to 2 x 2), the whole run held to the same
bounds.

usage: tp_e2e.py BIN_DIR WORK_DIR [--steps 10] [--models gpt2-tiny,llama-tiny,qwen3-tiny]
"""
import argparse
import os
import shutil
import sys

import matrix
from matrix import HERE, PY, GLOBAL_BATCH, SEQ, run, compare, read_metrics

# (world size, tp, strategy, shard size, sequence parallel, backend): the
# mesh's shapes (dp x tp) 1 x 2, 2 x 2, 1 x 4, without sequence parallelism,
# and hybrid-shard (dp 4 in shard groups of 2) and shard-grad-op over dp, on
# threads; 2 x 2 under mpirun, one process a rank.
RUNS = [(2, 2, "full-shard", 0, True, "threads"), (4, 2, "full-shard", 0, True, "threads"),
        (4, 4, "full-shard", 0, True, "threads"), (2, 2, "full-shard", 0, False, "threads"),
        (8, 2, "hybrid-shard", 2, True, "threads"), (4, 2, "shard-grad-op", 0, True, "threads"),
        (4, 2, "full-shard", 0, True, "mpi")]
MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def plan_of(args, config, tag, world, tp, strategy="full-shard", shard=0, sp=True):
    dp = world // tp
    plan = os.path.join(args.work, tag + ".plan.json")
    cmd = [os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world), "--tp", str(tp),
           "--micro-batch", str(GLOBAL_BATCH // dp), "--seq-len", str(SEQ), "--strategy", strategy,
           "-o", plan]
    if tp > 1:
        cmd += ["--sequence-parallel", "true" if sp else "false"]
    if shard:
        cmd += ["--shard-size", str(shard)]
    run(cmd)
    return plan


def train(args, config, tag, world, tp, strategy, shard, sp, weights, data, backend):
    plan = plan_of(args, config, tag, world, tp, strategy, shard, sp)
    metrics = os.path.join(args.work, tag + ".jsonl")
    final = os.path.join(args.work, tag + ".safetensors")
    launch = (["mpirun", "-np", str(world), "--oversubscribe"] if backend == "mpi" else [])
    run(launch + [os.path.join(args.bin, "fsdp-run"), plan, "--backend", backend, "--weights",
                  weights, "--data", data, "--steps", str(args.steps), "--metrics", metrics,
                  "--save-weights", final, "--quiet"], MPIRUN_ENV if backend == "mpi" else None)
    return metrics, final, read_metrics(metrics)


def reshard(args, config, model, weights, data, ref_metrics, ref_weights, tol):
    """Checkpoints reshard across tp as across dp: saved at dp 2 x tp 2 after
    half the steps, resumed at 4 x 1 and 1 x 4 (the same global batch); the
    whole run (both legs' losses, the final weights) within the reference's
    bounds, every peak the predicted one. Then the other way: saved at 4 x 1,
    resumed at 2 x 2. Yields a row a run."""
    half = args.steps // 2
    for saved_mesh, resumed in (((4, 2), ((4, 1), (4, 4))), ((4, 1), ((4, 2),))):
        world, tp = saved_mesh
        tag = "%s.ckpt.dp%d.tp%d" % (model, world // tp, tp)
        plan = plan_of(args, config, tag, world, tp)
        ckpt = os.path.join(args.work, tag)
        shutil.rmtree(ckpt, ignore_errors=True)
        first = os.path.join(args.work, tag + ".first.jsonl")
        run([os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data,
             "--steps", str(half), "--metrics", first, "--save", ckpt, "--quiet"])
        for world2, tp2 in resumed:
            what = "%d x %d from %d x %d" % (world2 // tp2, tp2, world // tp, tp)
            tag2 = "%s.from-dp%d-tp%d" % (tag, world2 // tp2, tp2)
            plan2 = plan_of(args, config, tag2, world2, tp2)
            second = os.path.join(args.work, tag2 + ".second.jsonl")
            final = os.path.join(args.work, tag2 + ".safetensors")
            run([os.path.join(args.bin, "fsdp-run"), plan2, "--data", data, "--steps",
                 str(args.steps), "--resume", ckpt, "--metrics", second, "--save-weights", final,
                 "--quiet"])
            both = os.path.join(args.work, tag2 + ".both.jsonl")
            with open(both, "w") as f:
                f.write(open(first).read() + open(second).read())
            m = read_metrics(second)
            loss_diff, w_diff, problem = compare(ref_metrics, both, ref_weights, final, tol)
            exact = matrix.peaks_exact(m)
            ok = exact and len(m) == args.steps - half and problem is None
            yield what, loss_diff, w_diff, exact, m, ok, problem


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--models", default="gpt2-tiny,llama-tiny,qwen3-tiny")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "gpl3.bin")
    run([PY, os.path.join(HERE, "make_data.py"), data, "--text", "/usr/share/common-licenses/GPL-3"])
    failures = total = 0
    print("%-11s %-10s %-14s %14s %14s %7s %s" % ("model", "dp x tp", "strategy", "loss rel/bound",
                                               "weight abs/bd", "peak", "result"))
    for model in args.models.split(","):
        config, weights, ref_metrics, ref_weights, tol = matrix.f32_reference(args, model, data)
        print("%-11s %-10s %s" % (model, "-", tol.describe()))
        for world, tp, strategy, shard, sp, backend in RUNS:
            mesh = "%d x %d%s%s" % (world // tp, tp, "" if sp else " no-SP",
                                    " mpi" if backend == "mpi" else "")
            tag = "%s.dp%d.tp%d.%s%s.%s" % (model, world // tp, tp, strategy,
                                            "" if sp else ".nosp", backend)
            metrics, final, m = train(args, config, tag, world, tp, strategy, shard, sp, weights,
                                      data, backend)
            loss_diff, w_diff, problem = compare(ref_metrics, metrics, ref_weights, final, tol)
            exact = matrix.peaks_exact(m)
            ok = exact and len(m) == args.steps and problem is None
            total += 1
            failures += not ok
            print("%-11s %-10s %-14s %14s %14s %7s %s" % (
                model, mesh, strategy + (" %d" % shard if shard else ""),
                matrix.gap_text(loss_diff, tol.loss), matrix.gap_text(w_diff, tol.weight),
                "exact" if exact else "%d != %d" % (m[-1]["peak_bytes"], m[-1]["predicted_peak_bytes"]),
                "ok" if ok else "FAILED " + (problem or "")))
        for what, loss_diff, w_diff, exact, m, ok, problem in reshard(
                args, config, model, weights, data, ref_metrics, ref_weights, tol):
            total += 1
            failures += not ok
            print("%-11s %-10s %-14s %14s %14s %7s %s" % (
                model, what.split(" from ")[0], "resumed from " + what.split(" from ")[1],
                matrix.gap_text(loss_diff, tol.loss), matrix.gap_text(w_diff, tol.weight),
                "exact" if exact else "%d != %d" % (m[-1]["peak_bytes"],
                                                    m[-1]["predicted_peak_bytes"]),
                "ok" if ok else "FAILED " + (problem or "")))
    print("%d of %d tensor-parallel runs within the f32 bounds with exact peaks" % (
        total - failures, total))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
