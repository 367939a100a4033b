#!/usr/bin/env python3
"""End-to-end for --grad-sync last (issue 33; FSDP's no-sync accumulation),
--reshard-after-backward false (FSDP2's, gathering once a step),
--reshard-after-forward N (FSDP2's int, ZeRO++'s hpZ) and --offload optimizer
(ZeRO-Offload's; the host's AdamW over a host pool):
fsdp-plan + fsdp-run against single-process PyTorch accumulating over the
same micro-steps (reference.py --grad-accum), GLOBAL_BATCH 12 sequences of
SEQ 32 tokens a step in 3 micro-steps, 10 steps.

With grad-sync last each rank sums its three micro-steps' unsharded
gradients in f32 and the ranks' sums are reduced once, where with every
each micro-step's gradients are reduced and added to the gradient shard:
the same sum in another order, so every f32 bound is matrix.py's (4x the
f32 reference's spread to its f64 run and to itself under other BLAS
kernels, bounds.py); every run's measured peak must equal the plan's, byte
for byte.

Covered, per model (gpt2-tiny, llama-tiny):
  * f32: world 1 full-shard, 2 full-shard, 2 no-shard (DDP's no_sync), 4
    shard-grad-op and 4 hybrid-shard (shard size 2); losses and weights;
    and with --reshard-after-backward false (each unit gathered at a step's
    first micro-step and kept), world 2 full-shard with sync last and world
    4 hybrid-shard with every; and with every, world 2 no-shard and world 4
    hybrid-shard (the replica groups' all-reduce, once a step); and with
    --reshard-after-forward 2, world 4 full-shard with every and with last
    (a world of 2 has no reshard group smaller than its shard group, and
    GLOBAL_BATCH does not split over 8 ranks in 3 micro-steps); and with
    --offload optimizer, world 2 full-shard with every and world 4 with
    last, and --offload all at world 4 (each run's host pool peak the
    plan's, byte for byte, too);
  * the same plan with every at world 2, for its peak: last's is larger by
    what the plan says (the sums);
  * a checkpoint saved at world 2 (last) after 5 steps, resumed at world 4
    (last) to step 10: both legs against the uninterrupted reference (the
    sums are zero at a step's end, so a checkpoint holds none);
  * bf16 compute (--param-dtype bf16) at world 2 full-shard and world 4
    hybrid-shard with sync last, and at world 4 full-shard with
    --reshard-after-forward 2 (the copies and the gathers over the reshard
    group in bf16), at world 2 with --offload optimizer and at world 4 with
    --offload all (the gathers send the host's bf16 copies), against the bf16
    reference with the same accumulation
    (matrix.check_bf16_compute), with the f32-compute control.

usage: grad_sync_e2e.py BIN_DIR WORK_DIR [--steps 10] [--models gpt2-tiny,llama-tiny]
"""
import argparse
import os
import shutil
import sys

import matrix
from matrix import (GLOBAL_BATCH, HERE, PY, SEQ, compare, gap_text, peaks_exact,
                    read_metrics, run)

ACCUM = 3
# (world, strategy, shard size, fsdp-plan flags)
LAST = ["--grad-sync", "last"]
KEPT = ["--reshard-after-backward", "false"]
HPZ = ["--reshard-after-forward", "2"]
OFFLOAD = ["--offload", "optimizer"]
ALL = ["--offload", "all"]
RUNS = [(1, "full-shard", 0, LAST), (2, "full-shard", 0, LAST), (2, "no-shard", 0, LAST),
        (4, "shard-grad-op", 0, LAST), (4, "hybrid-shard", 2, LAST),
        # gathered once a step: with no-sync, and with every micro-step reducing
        (2, "full-shard", 0, LAST + KEPT), (4, "hybrid-shard", 2, KEPT),
        # every micro-step reducing, with replica groups: their all-reduce
        # sums each gradient shard whole, once a step (at each micro-step it
        # added the earlier ones again: grad norms 2.6x PyTorch's)
        (2, "no-shard", 0, []), (4, "hybrid-shard", 2, []),
        # resharded after forward to pairs of ranks, gathered from them in backward
        (4, "full-shard", 0, HPZ), (4, "full-shard", 0, LAST + HPZ),
        # the optimizer's state in a host pool, AdamW on the host
        (2, "full-shard", 0, OFFLOAD), (4, "full-shard", 0, LAST + OFFLOAD),
        # the parameter shards there too, each gather copying its shard in
        (4, "full-shard", 0, ALL)]



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--models", default="gpt2-tiny,llama-tiny")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "gpl3.bin")
    run([PY, os.path.join(HERE, "make_data.py"), data, "--text", "/usr/share/common-licenses/GPL-3"])
    total = failures = 0
    print("%-11s %5s %-22s %14s %14s %10s %s" % ("model", "world", "strategy", "loss rel/bound",
                                              "weight abs/bd", "peak", "result"))

    def report(model, world, what, loss, weight, bounds, peak, ok, problem=None):
        nonlocal total, failures
        total += 1
        failures += not ok
        print("%-11s %5d %-22s %14s %14s %10s %s" % (
            model, world, what, gap_text(loss, bounds.loss) if loss is not None else "",
            gap_text(weight, bounds.weight) if weight is not None else "", peak,
            "ok" if ok else "FAILED " + (problem or "")))

    for model in args.models.split(","):
        config, weights, ref_metrics, ref_weights, tol = matrix.f32_reference(
            args, model, data, ref_flags=["--grad-accum", str(ACCUM)])
        print("%-11s %5s %s" % (model, "-", tol.describe()))

        peaks = {}
        for world, strategy, shard, flags in RUNS:
            what = strategy + (" last" if "last" in flags else " every") + (
                " kept" if "false" in flags else "") + (" hpZ2" if HPZ[0] in flags else "") + (
                " offload " + flags[flags.index(OFFLOAD[0]) + 1] if OFFLOAD[0] in flags else "")
            tag = "%s.w%d.%s" % (model, world, what.replace(" ", "."))
            metrics, final, m = matrix.train_plan(args, config, tag, world, strategy, shard, weights,
                                                  data, extra=flags, accum=ACCUM)
            loss, weight, problem = compare(ref_metrics, metrics, ref_weights, final, tol)
            exact = peaks_exact(m)
            peaks[(world, what)] = m[-1]["peak_bytes"]
            report(model, world, what, loss, weight, tol,
                   "exact" if exact else "DIFFERENT",
                   exact and problem is None and len(m) == args.steps, problem)

        # every at world 2: the same losses within the same bounds, and a
        # peak smaller by the sums the plan adds for last.
        tag = "%s.w2.full-shard.every" % model
        metrics, final, m = matrix.train_plan(args, config, tag, 2, "full-shard", 0, weights, data,
                                              accum=ACCUM)
        loss, weight, problem = compare(ref_metrics, metrics, ref_weights, final, tol)
        exact = peaks_exact(m)
        report(model, 2, "full-shard every", loss, weight, tol, "exact" if exact else "DIFFERENT",
               exact and problem is None, problem)
        every_peak = m[-1]["peak_bytes"]
        import json
        plan = json.load(open(os.path.join(args.work, "%s.w2.full-shard.last.plan.json" % model)))
        sums = sum(4 * u["padded_numel"] for u in plan["units"])
        grew = peaks[(2, "full-shard last")] - every_peak
        # The sums are persistent; the gradient buffers they replace in the
        # every plan lived only from a unit's first gradient to its
        # reduction, so the peak grows by at most the sums.
        ok = 0 < grew <= sums
        report(model, 2, "last's peak - every's", None, None, tol,
               "+%d B" % grew, ok, "the peak grew by %d, the sums are %d bytes" % (grew, sums))

        # Resume across world sizes with last.
        tag = "%s.resume.last" % model
        ckpt = os.path.join(args.work, tag + ".ckpt")
        shutil.rmtree(ckpt, ignore_errors=True)
        plans = {}
        for world in (2, 4):
            plans[world] = os.path.join(args.work, "%s.w%d.plan.json" % (tag, world))
            run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world),
                 "--micro-batch", str(GLOBAL_BATCH // world // ACCUM), "--seq-len", str(SEQ),
                 "--grad-accum", str(ACCUM), "--grad-sync", "last", "-o", plans[world]])
        first = os.path.join(args.work, tag + ".first.jsonl")
        second = os.path.join(args.work, tag + ".second.jsonl")
        final = os.path.join(args.work, tag + ".safetensors")
        run([os.path.join(args.bin, "fsdp-run"), plans[2], "--weights", weights, "--data", data,
             "--steps", str(args.steps // 2), "--metrics", first, "--save", ckpt, "--quiet"])
        run([os.path.join(args.bin, "fsdp-run"), plans[4], "--data", data, "--steps", str(args.steps),
             "--resume", ckpt, "--metrics", second, "--save-weights", final, "--quiet"])
        both = os.path.join(args.work, tag + ".both.jsonl")
        with open(both, "w") as f:
            f.write(open(first).read() + open(second).read())
        loss, weight, problem = compare(ref_metrics, both, ref_weights, final, tol)
        m = read_metrics(both)
        exact = peaks_exact(m)
        report(model, 4, "resumed from w2, last", loss, weight, tol,
               "exact" if exact else "DIFFERENT",
               exact and problem is None and len(m) == args.steps, problem)

        # bf16 compute with the same accumulation.
        cases = [(2, "full-shard", 0, "bf16", ["--param-dtype", "bf16", "--grad-sync", "last"]),
                 (4, "hybrid-shard", 2, "bf16", ["--param-dtype", "bf16", "--grad-sync", "last"]),
                 (4, "full-shard", 0, "bf16", ["--param-dtype", "bf16"] + HPZ),
                 (2, "full-shard", 0, "bf16", ["--param-dtype", "bf16"] + OFFLOAD),
                 (4, "full-shard", 0, "bf16", ["--param-dtype", "bf16"] + ALL),
                 (2, "full-shard", 0, "f32", ["--param-dtype", "bf16", "--compute-dtype", "f32",
                                              "--grad-sync", "last"])]
        checks, failed = matrix.check_bf16_compute(args, data, model, weights, cases,
                                                   ref_flags=["--grad-accum", str(ACCUM)],
                                                   label=model + "-accum", accum=ACCUM)
        total += checks
        failures += failed
    print("%d passed, %d failed" % (total - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
