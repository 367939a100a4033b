#!/usr/bin/env python3
"""End-to-end for the mixtures of experts (issue 32): fsdp-plan + fsdp-run of
mixtral-tiny and qwen3_moe-tiny against their PyTorch references
(tests/e2e/models.py, written from HF's modeling files; routing, ties, the
combine order and the load-balancing loss as docs/training-semantics.md,
"Mixture of experts", states them), GLOBAL_BATCH 12 sequences of SEQ 32
tokens a step, 10 steps, weights of std 0.02 (matrix.py's and families.py's).
Every bound is families.py's: 4x the f32 reference's spread to its f64 run
and to itself under other BLAS kernels (matrix.F32Bounds, bounds.py), and for
bf16 compute 4x the spread of its correct alternatives
(matrix.check_bf16_compute); every fsdp run's measured peak arena bytes must
equal the plan's prediction, byte for byte, whatever the routing (the packed
buffers are sized by B, S and k alone).

The load-balancing loss is computed per micro-batch of one rank, so a run at
micro_batch M = GLOBAL_BATCH / (world x grad_accum) is held to the reference
with --aux-micro-batch M: one reference per M (qwen3_moe-tiny has the loss
on, output_router_logits true; mixtral-tiny has it off, so one reference
serves every world size).

Covered, per model:
  * f32: world 1, 2, 4 full-shard, and shard-grad-op, no-shard, hybrid-shard
    (shard size 2) at world 4; losses and final weights;
  * mixtral-tiny with the loss on (its config with output_router_logits
    true, written to WORK_DIR), world 2 full-shard; the control: the loss on
    moves the losses by over 10x the bound;
  * qwen3_moe-tiny: the control that the term's micro-batch matters: the
    references at micro-batch 12 (world 1) and 3 (world 4) over 10x a bound
    apart; and eval_loss (with the term, per eval micro-batch) at world 2;
  * forced routing: every router gate weight zeroed in the initial
    safetensors, so every logit is 0 and every token picks experts 0..k-1 in
    step 1 (checked on the reference, in this process), the worst imbalance
    the packed buffers meet; one step at world 4 full-shard, its loss and
    weights against the reference and the peak exact. One step only: with
    Mixtral's renormalisation the unchosen experts' gate rows get a gradient
    that is rounding alone (exactly 0 in exact arithmetic), which AdamW's
    first step turns into moves of +-lr whose signs no two correct runs
    share; the weights' bound allows them (reference.py
    --save-adam-allowance), the next step's routing could not;
  * a checkpoint saved at world 2 after 5 steps, resumed at world 4 to step
    10 (matrix.py's resharding): both legs' losses and the final weights
    against the uninterrupted reference; qwen3_moe-tiny saves from world 2
    with grad_accum 2 (micro_batch 3) so that both legs have the micro-batch
    of the world-4 leg, and with it the reference's M;
  * bf16 compute (--param-dtype bf16) against the bf16 reference, with the
    f32-compute control: mixtral-tiny at world 1 and 2 full-shard and world 4
    hybrid-shard; qwen3_moe-tiny at world 4 full-shard and hybrid-shard (one
    M, so one set of references).
Not covered here (to keep the suite near 3 minutes on 2 cores): world 2
strategies other than full-shard, grad_accum but in the resume, clipping and
schedules (matrix.py covers them for the dense models; none touches the
experts), bf16 at every M.

--reference-only runs every reference invocation, bound and reference-side
check, and skips fsdp-plan and fsdp-run (the reference side alone).

usage: moe_e2e.py BIN_DIR WORK_DIR [--steps 10] [--models mixtral-tiny,qwen3_moe-tiny]
                  [--reference-only]
"""
import argparse
import json
import os
import shutil
import sys

import bounds
import matrix
from matrix import HERE, PY, ROOT, GLOBAL_BATCH, SEQ, run, compare, read_metrics, gap_text

RUNS = [(1, "full-shard", 0), (2, "full-shard", 0), (4, "full-shard", 0),
        (4, "shard-grad-op", 0), (4, "no-shard", 0), (4, "hybrid-shard", 2)]
ROW = "%-16s %5s %-20s %14s %14s %10s %s"


class Suite:
    def __init__(self, args, data):
        self.args, self.data = args, data
        self.total = self.failures = self.skipped = 0
        self.refs = {}

    def row(self, model, world, what, loss="", weight="", peak="", problem=None):
        self.total += 1
        self.failures += problem is not None
        print(ROW % (model, world, what, loss, weight, peak, "ok" if problem is None else
                     "FAILED " + problem))

    def skip(self, model, world, what):
        self.skipped += 1
        print(ROW % (model, world, what, "", "", "", "skipped (--reference-only)"))

    def reference(self, model, tag, config, weights, aux_mb, steps=None, what="reference"):
        """The f32 reference of `config` from `weights` (with --aux-micro-batch
        aux_mb unless None), run once per tag: (metrics, weights, F32Bounds)."""
        if tag in self.refs:
            return self.refs[tag]
        a = self.args
        metrics = os.path.join(a.work, tag + ".ref.jsonl")
        final = os.path.join(a.work, tag + ".ref.safetensors")
        cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
               "--data", self.data, "--steps", str(steps or a.steps),
               "--global-batch", str(GLOBAL_BATCH), "--seq-len", str(SEQ), "--metrics", metrics,
               "--save-weights", final, "--quiet"]
        if aux_mb is not None:
            cmd += ["--aux-micro-batch", str(aux_mb)]
        run(cmd)
        tol = matrix.f32_bounds(a, tag, cmd, metrics, final)
        print(ROW % (model, "-", what + ("" if aux_mb is None else " M=%d" % aux_mb),
                     "", "", "", tol.describe()))
        self.refs[tag] = (metrics, final, tol)
        return self.refs[tag]

    def check(self, model, what, world, ref, metrics, final, m, steps):
        """One fsdp run against its reference: losses, weights, peaks."""
        ref_metrics, ref_weights, tol = ref
        loss_diff, w_diff, problem = compare(ref_metrics, metrics, ref_weights, final, tol)
        exact = all(x["peak_bytes"] == x["predicted_peak_bytes"] for x in m)
        if problem is None and len(m) != steps:
            problem = "%d steps, not %d" % (len(m), steps)
        if problem is None and not exact:
            problem = "measured peak != predicted"
        self.row(model, world, what, gap_text(loss_diff, tol.loss), gap_text(w_diff, tol.weight),
                 "exact" if exact else "%d != %d" % (m[-1]["peak_bytes"], m[-1]["predicted_peak_bytes"]),
                 problem)

    def train(self, model, config, tag, world, strategy, shard, weights, ref, what=None,
              steps=None, accum=1):
        what = what or strategy
        if self.args.reference_only:
            return self.skip(model, world, what)
        a = argparse.Namespace(**vars(self.args))
        a.steps = steps or self.args.steps
        metrics, final, m = matrix.train_plan(a, config, tag, world, strategy, shard, weights,
                                              self.data, accum=accum)
        self.check(model, what, world, ref, metrics, final, m, a.steps)


def aux_micro_batch(aux, world, accum=1):
    """--aux-micro-batch of a run at `world` ranks (None without the loss)."""
    return GLOBAL_BATCH // (world * accum) if aux else None


def check_eval(s, model, config, weights, world):
    """eval_loss, which holds the load-balancing term per eval micro-batch,
    against the reference's at world 2 full-shard: bounds.f32_loss of the
    reference's spread to its f64 run and other BLAS kernels, as matrix.py's
    schedule+eval runs."""
    a = s.args
    eval_data = os.path.join(a.work, "apache2.bin")
    run([PY, os.path.join(HERE, "make_data.py"), eval_data, "--text",
         "/usr/share/common-licenses/Apache-2.0"])
    flags = ["--eval-data", eval_data, "--eval-every", "5", "--eval-batches", "2"]
    mb = aux_micro_batch(True, world)
    tag = "%s.eval.m%d" % (model, mb)
    ref_cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
               "--data", s.data, "--steps", str(a.steps), "--global-batch", str(GLOBAL_BATCH),
               "--seq-len", str(SEQ), "--aux-micro-batch", str(mb), "--quiet"] + flags
    ref_metrics, alts = matrix.references(a, tag, ref_cmd, [("f64", ["--dtype", "f64"], {})] +
                                          matrix.blas_alternates())
    ref = read_metrics(ref_metrics)
    gap = max((abs(x["eval_loss"] - y["eval_loss"]) / abs(x["eval_loss"]) for path in alts.values()
               for x, y in zip(ref, read_metrics(path)) if "eval_loss" in x), default=0.0)
    tol = bounds.f32_loss(gap)
    if a.reference_only:
        return s.skip(model, world, "eval loss")
    plan = os.path.join(a.work, tag + ".w%d.plan.json" % world)
    run([os.path.join(a.bin, "fsdp-plan"), config, "--world-size", str(world),
         "--micro-batch", str(mb), "--seq-len", str(SEQ), "-o", plan])
    metrics = plan + ".jsonl"
    run([os.path.join(a.bin, "fsdp-run"), plan, "--weights", weights, "--data", s.data,
         "--steps", str(a.steps), "--metrics", metrics, "--quiet"] + flags)
    got = read_metrics(metrics)
    worst, problem = 0.0, None
    for x, y in zip(ref, got):
        if ("eval_loss" in x) != ("eval_loss" in y):
            problem = "step %d: eval_loss in one run only" % x["step"]
        elif "eval_loss" in x:
            worst = max(worst, abs(x["eval_loss"] - y["eval_loss"]) / abs(x["eval_loss"]))
    if problem is None and len(got) != len(ref):
        problem = "%d steps against %d" % (len(got), len(ref))
    if problem is None and worst > tol:
        problem = "eval_loss differs by %.3g relative, over %.2g" % (worst, tol)
    exact = all(x["peak_bytes"] == x["predicted_peak_bytes"] for x in got)
    if problem is None and not exact:
        problem = "measured peak != predicted"
    s.row(model, world, "eval loss", gap_text(worst, tol), "", "exact" if exact else "DIFFERENT",
          problem)


def config_of(model):
    return os.path.join(ROOT, "models", model, "config.json")


def zero_gates(weights, out):
    """`weights` with every router gate weight zero, written to `out`."""
    import safetensors_io
    t = safetensors_io.load(weights)
    gates = [n for n in t if n.endswith(("block_sparse_moe.gate.weight", "mlp.gate.weight"))]
    assert gates, "no router gate in %s" % weights
    for n in gates:
        t[n] = t[n] * 0.0
    safetensors_io.save(t, out, metadata={"format": "pt"})
    return len(gates)


def forced_routing_problem(config, weights, data):
    """None if the reference's step-1 forward from `weights` routes every
    token of every sparse layer to experts 0..k-1, else what it does."""
    import torch
    import models
    import reference
    cfg = models.load_config(config)
    model = models.build_model(cfg)
    reference.load_weights(model, weights)
    tokens = reference.load_tokens(data, model.c["vocab"])
    x, _ = reference.batch(tokens, 0, GLOBAL_BATCH, SEQ)
    with torch.no_grad():
        model(x)
    k = model.moe["top_k"]
    blocks = [m for m in model.modules() if isinstance(m, models.SparseMoeBlock)]
    for i, blk in enumerate(blocks):
        want = torch.zeros_like(blk.last_chosen)
        want[:, :k] = True
        if not torch.equal(blk.last_chosen, want):
            return "sparse layer %d: %d tokens route elsewhere" % (
                i, int((blk.last_chosen != want).any(-1).sum()))
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--models", default="mixtral-tiny,qwen3_moe-tiny")
    ap.add_argument("--reference-only", action="store_true",
                    help="run the references, bounds and reference-side checks, not fsdp")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "gpl3.bin")
    run([PY, os.path.join(HERE, "make_data.py"), data, "--text", "/usr/share/common-licenses/GPL-3"])
    s = Suite(args, data)
    print(ROW % ("model", "world", "run", "loss rel/bound", "weight abs/bd", "peak", "result"))
    bf16_models = []
    for model in args.models.split(","):
        config = config_of(model)
        cfg = json.load(open(config))
        aux = bool(cfg.get("output_router_logits"))
        weights = os.path.join(args.work, model + ".init.safetensors")
        run([PY, os.path.join(HERE, "make_weights.py"), config, weights, "--seed", "7",
             "--std", "0.02"])

        def ref_at(world, accum=1):
            mb = aux_micro_batch(aux, world, accum)
            tag = model if mb is None else "%s.m%d" % (model, mb)
            return s.reference(model, tag, config, weights, mb)

        # f32, every world size and strategy.
        for world, strategy, shard in RUNS:
            s.train(model, config, "%s.w%d.%s" % (model, world, strategy), world, strategy, shard,
                    weights, ref_at(world))

        if aux:
            check_eval(s, model, config, weights, 2)
            # Control: the term's micro-batch matters. The references of
            # world 1 (M = 12) and world 4 (M = 3) must be over 10x a bound
            # apart, so a run computing the term over another batch than its
            # micro-batch fails.
            r1, r4 = ref_at(1), ref_at(4)
            loss, w, _ = compare(r4[0], r1[0], r4[1], r1[1], r4[2])
            s.row(model, "", "aux at M=12 vs M=3", gap_text(loss, r4[2].loss),
                  gap_text(w, r4[2].weight), "",
                  None if loss >= 10 * r4[2].loss or w >= 10 * r4[2].weight else
                  "the term's micro-batch moves nothing by 10x a bound")
        else:
            # The same model with the load-balancing loss on, at world 2.
            on = dict(cfg, output_router_logits=True)
            on_config = os.path.join(args.work, model + ".aux.config.json")
            with open(on_config, "w") as f:
                json.dump(on, f, indent=2)
            mb = aux_micro_batch(True, 2)
            on_ref = s.reference(model, "%s.aux.m%d" % (model, mb), on_config, weights, mb,
                                 what="ref. aux on")
            s.train(model, on_config, "%s.aux.w2" % model, 2, "full-shard", 0, weights, on_ref,
                    what="aux loss on")
            # Control: the term moves the losses by over 10x the bound.
            off = ref_at(1)
            moved = max(abs(x["loss"] - y["loss"]) / abs(x["loss"])
                        for x, y in zip(read_metrics(on_ref[0]), read_metrics(off[0])))
            s.row(model, "", "aux on vs off", "%.3g" % moved, "", "",
                  None if moved >= 10 * on_ref[2].loss else
                  "the term moves the losses by under 10x the bound %.2g" % on_ref[2].loss)

        # Forced routing: zero gates, one step at world 4.
        forced = os.path.join(args.work, model + ".zero-gates.safetensors")
        zero_gates(weights, forced)
        problem = forced_routing_problem(config, forced, data)
        s.row(model, "", "zero gates: 0..k-1", "reference", "", "", problem)
        mb = aux_micro_batch(aux, 4)
        tag = model + ".forced" + ("" if mb is None else ".m%d" % mb)
        forced_ref = s.reference(model, tag, config, forced, mb, steps=1, what="ref. zero gates")
        s.train(model, config, tag + ".w4", 4, "full-shard", 0, forced, forced_ref,
                what="forced routing", steps=1)

        # Resume: save at world 2 after half the steps, resume at world 4.
        save_accum = 2 if aux else 1
        ref = ref_at(4)
        what = "resume w2%s -> w4" % (" accum 2" if save_accum > 1 else "")
        if args.reference_only:
            s.skip(model, 4, what)
        else:
            tag = model + ".resume"
            ckpt = os.path.join(args.work, tag + ".ckpt")
            shutil.rmtree(ckpt, ignore_errors=True)
            plans = {}
            for world, accum in ((2, save_accum), (4, 1)):
                plans[world] = os.path.join(args.work, "%s.w%d.plan.json" % (tag, world))
                run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world),
                     "--micro-batch", str(GLOBAL_BATCH // world // accum), "--seq-len", str(SEQ),
                     "--strategy", "full-shard", "--grad-accum", str(accum), "-o", plans[world]])
            first = os.path.join(args.work, tag + ".first.jsonl")
            run([os.path.join(args.bin, "fsdp-run"), plans[2], "--weights", weights, "--data", data,
                 "--steps", str(args.steps // 2), "--metrics", first, "--save", ckpt, "--quiet"])
            second = os.path.join(args.work, tag + ".second.jsonl")
            final = os.path.join(args.work, tag + ".safetensors")
            run([os.path.join(args.bin, "fsdp-run"), plans[4], "--data", data,
                 "--steps", str(args.steps), "--resume", ckpt, "--metrics", second,
                 "--save-weights", final, "--quiet"])
            both = os.path.join(args.work, tag + ".both.jsonl")
            with open(both, "w") as f:
                f.write(open(first).read() + open(second).read())
            s.check(model, what, 4, ref, both, final, read_metrics(both), args.steps)
        bf16_models.append((model, weights, aux))

    # bf16 compute against the bf16 reference (matrix.check_bf16_compute):
    # its bounds, and the f32-compute control outside them.
    for model, weights, aux in bf16_models:
        if aux:
            mb = aux_micro_batch(True, 4)
            cases = [(4, "full-shard", 0, "bf16", ["--param-dtype", "bf16"]),
                     (4, "hybrid-shard", 2, "bf16", ["--param-dtype", "bf16"]),
                     (4, "full-shard", 0, "f32", ["--param-dtype", "bf16", "--compute-dtype", "f32"])]
            flags, label = ["--aux-micro-batch", str(mb)], "%s.m%d" % (model, mb)
        else:
            cases = [(1, "full-shard", 0, "bf16", ["--param-dtype", "bf16"]),
                     (2, "full-shard", 0, "bf16", ["--param-dtype", "bf16"]),
                     (4, "hybrid-shard", 2, "bf16", ["--param-dtype", "bf16"]),
                     (2, "full-shard", 0, "f32", ["--param-dtype", "bf16", "--compute-dtype", "f32"])]
            flags, label = [], model
        worlds = [c[0] for c in cases]
        if args.reference_only:
            for c in cases:
                s.skip(label, c[0], "bf16 " + c[1] if c[3] == "bf16" else "f32 compute")
            cases = []
        checks, failed = matrix.check_bf16_compute(args, data, model, weights, cases,
                                                   ref_flags=flags, label=label, worlds=worlds)
        s.total += checks
        s.failures += failed
    print("%d of %d checks ok%s" % (s.total - s.failures, s.total,
                                    "; %d fsdp runs skipped" % s.skipped if s.skipped else ""))
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())
