#!/usr/bin/env python3
"""End-to-end: fsdp-plan + fsdp-run against single-process PyTorch.

For each model, one PyTorch reference run (the global batch is fixed, so it is
the same for every world size and strategy), then fsdp-run for every world
size and strategy. Checks, per run: losses (relative) and final weights
(largest absolute difference) within bounds derived in the same run from the
f32 reference's spread to its f64 run and other BLAS kernels (F32Bounds;
the rules in bounds.py), and
the measured peak arena bytes equal to the plan's prediction, byte for byte.

usage: matrix.py BIN_DIR WORK_DIR [--steps 10] [--models gpt2-tiny,llama-tiny]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import bounds

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"

# (world size, strategy, shard size) ; global batch 12 divides by 1, 2, 3 and 4.
RUNS = [(1, "full-shard", 0), (2, "full-shard", 0), (3, "full-shard", 0), (4, "full-shard", 0),
        (2, "shard-grad-op", 0), (3, "shard-grad-op", 0), (4, "shard-grad-op", 0),
        (2, "no-shard", 0), (3, "no-shard", 0), (4, "no-shard", 0),
        (4, "hybrid-shard", 2)]
GLOBAL_BATCH = 12
SEQ = 32


def peaks_exact(m):
    """Every step's measured peaks the plan's: the arena's, and the host
    pool's where the plan has one (--offload)."""
    return all(x["peak_bytes"] == x["predicted_peak_bytes"] and
               x.get("host_peak_bytes") == x.get("predicted_host_peak_bytes") for x in m)


def run(cmd, env=None):
    """Runs cmd (with `env` added to this process's environment); its output,
    or exits naming the command."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env={**os.environ, **env} if env else None)
    if r.returncode != 0:
        print("FAILED: " + "".join("%s=%s " % kv for kv in (env or {}).items()) + " ".join(cmd) +
              "\n" + r.stdout)
        sys.exit(1)
    return r.stdout


def read_f32_tensors(path):
    """name -> array('f'), without torch (which takes a second to import)."""
    import array
    import struct
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (path, name, info["dtype"])
        a = array.array("f")
        a.frombytes(data[info["data_offsets"][0]:info["data_offsets"][1]])
        out[name] = (info["shape"], a)
    return out


def gaps(ref_metrics, metrics, ref_weights, weights, held=None, allowance=None):
    """(largest relative loss gap, largest absolute weight gap, largest gap of
    the held elements, problem): held(name, index, shape) picks the elements
    held to a bound of their own (a parameter whose true gradient is zero,
    where AdamW turns rounding into updates of ~lr); allowance (name ->
    per-element amounts, reference.py --save-adam-allowance) is taken off
    each element's gap first; problem names a mismatch of steps, names or
    shapes."""
    a, b = read_metrics(ref_metrics), read_metrics(metrics)
    if len(a) != len(b):
        return None, None, None, "%d steps against %d" % (len(a), len(b))
    loss = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b))
    wa, wb = read_f32_tensors(ref_weights), read_f32_tensors(weights)
    if sorted(wa) != sorted(wb):
        return loss, None, None, "tensor names differ"
    worst = held_gap = 0.0
    for name in wa:
        (shape, x), (shape_b, y) = wa[name], wb[name]
        if shape != shape_b:
            return loss, None, None, "shape of %s differs" % name
        allow = allowance.get(name) if allowance else None
        for i, (u, v) in enumerate(zip(x, y)):
            d = abs(u - v) if allow is None else max(0.0, abs(u - v) - allow[i])
            if held and held(name, i, shape):
                held_gap = max(held_gap, d)
            else:
                worst = max(worst, d)
    return loss, worst, held_gap, None


class F32Bounds:
    """The bounds of an f32 run against the f32 reference, from that
    reference's largest gaps, measured in this run, to its correct
    alternatives: the same reference in f64 and in f32 under other BLAS
    kernels (bounds.f32_loss, bounds.f32_weight).
    alternatives: [(label, metrics, weights)]."""

    def __init__(self, ref_metrics, ref_weights, alternatives, held=None, allowance=None):
        self.held_picks, self.alternatives = held, alternatives
        self.allowance = ({n: a for n, (_, a) in read_f32_tensors(allowance).items()}
                          if allowance else None)
        self.ref_gaps, self.which = [0.0, 0.0, 0.0], [None, None, None]
        for label, m, w in alternatives:
            got = gaps(ref_metrics, m, ref_weights, w, held, self.allowance)
            if got[3]:
                raise SystemExit("the f32 reference and its %s run differ in shape: %s" % (label, got[3]))
            for i in range(3):
                if self.which[i] is None or got[i] > self.ref_gaps[i]:
                    self.ref_gaps[i], self.which[i] = got[i], label
        l, w, h = self.ref_gaps
        self.loss, self.weight = bounds.f32_loss(l), bounds.f32_weight(w)
        self.held = bounds.f32_weight(h) if held else None

    def describe(self):
        held = ", held %.2g (%.2g %s)" % (self.held, self.ref_gaps[2], self.which[2]) \
            if self.held is not None else ""
        if self.allowance:
            n = sum(1 for a in self.allowance.values() for v in a if v > 0)
            held += "; %d elements with a gradient within rounding of 0, up to %.2g more" % (
                n, max((v for a in self.allowance.values() for v in a), default=0.0))
        return "bounds (4x the f32 reference's spread): loss %.2g (%.2g %s), weights %.2g (%.2g %s)%s" % (
            self.loss, self.ref_gaps[0], self.which[0], self.weight, self.ref_gaps[1], self.which[1], held)


def f32_bounds(args, tag, ref_cmd, ref_metrics, ref_weights, held=None):
    """Runs ref_cmd (reference.py's command of the f32 reference, which wrote
    ref_metrics and ref_weights) again in f64 and under the other BLAS
    kernels this CPU runs (bounds.blas_alternates), and returns the
    F32Bounds."""
    alts = []
    allowance = os.path.join(args.work, "%s.ref-allowance.safetensors" % tag)
    for label, flags, env in [("f64", ["--dtype", "f64", "--save-adam-allowance", allowance],
                               {})] + blas_alternates():
        name = label.split()[0]
        m = os.path.join(args.work, "%s.ref-%s.jsonl" % (tag, name))
        w = os.path.join(args.work, "%s.ref-%s.safetensors" % (tag, name))
        cmd = list(ref_cmd)
        for flag, value in (("--metrics", m), ("--save-weights", w)):
            cmd[cmd.index(flag) + 1] = value
        run(cmd + flags, env)
        alts.append((label, m, w))
    return F32Bounds(ref_metrics, ref_weights, alts, held, allowance)


def f32_reference(args, model, data, std=None, ref_flags=()):
    """The f32 PyTorch reference of `model` from its seed-7 initial weights
    (make_weights.py's std, or `std`; GLOBAL_BATCH sequences of SEQ tokens a
    step, args.steps steps, and reference.py's `ref_flags`) and its bounds
    (f32_bounds): (config, initial weights, the reference's metrics, its
    final weights, F32Bounds)."""
    config = os.path.join(ROOT, "models", model, "config.json")
    weights = os.path.join(args.work, model + ".init.safetensors")
    run([PY, os.path.join(HERE, "make_weights.py"), config, weights, "--seed", "7"] +
        (["--std", str(std)] if std is not None else []))
    ref_metrics = os.path.join(args.work, model + ".ref.jsonl")
    ref_weights = os.path.join(args.work, model + ".ref.safetensors")
    ref_cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
               "--data", data, "--steps", str(args.steps), "--global-batch", str(GLOBAL_BATCH),
               "--seq-len", str(SEQ), *ref_flags, "--metrics", ref_metrics,
               "--save-weights", ref_weights, "--quiet"]
    run(ref_cmd)
    tol = f32_bounds(args, model, ref_cmd, ref_metrics, ref_weights)
    return config, weights, ref_metrics, ref_weights, tol


def compare(ref_metrics, metrics, ref_weights, weights, tol, held=None):
    """Largest relative loss difference and largest absolute weight
    difference, and what is outside its bound. tol: an F32Bounds, or one
    analysed bound for both (0: bit-identical). held: (picks(name, index,
    shape), bound, what) for elements held to a bound of their own; with an
    F32Bounds that picks them, its measured held bound."""
    loss_tol, weight_tol = (tol.loss, tol.weight) if isinstance(tol, F32Bounds) else (tol, tol)
    picks = held[0] if held else (tol.held_picks if isinstance(tol, F32Bounds) else None)
    loss, worst, held_gap, problem = gaps(ref_metrics, metrics, ref_weights, weights, picks,
                                          tol.allowance if isinstance(tol, F32Bounds) else None)
    if problem:
        return loss, worst, problem
    held_bound = held[1] if held else (tol.held if isinstance(tol, F32Bounds) else None)
    what = held[2] if held else "held elements"
    if loss > loss_tol:
        problem = "loss differs by %.3g relative, over %.2g" % (loss, loss_tol)
    elif worst > weight_tol:
        problem = "weights differ by %.3g, over %.2g" % (worst, weight_tol)
    elif picks and held_gap > held_bound:
        problem = "%s differ by %.3g, over %.3g" % (what, held_gap, held_bound)
    return loss, worst, problem


def gap_text(gap, bound=None):
    """A measured gap beside its bound: "gap/bound" ("gap" for an unbounded one)."""
    if gap is None:
        return "?"
    return "%.3g" % gap if bound is None else "%.3g/%.2g" % (gap, bound)


def seq_flags(seq):
    """fsdp-plan's and reference.py's --seq-len, or nothing (seq None: the model's
    own, as a ViT's patches and CLS token)."""
    return [] if seq is None else ["--seq-len", str(seq)]


def train_plan(args, config, tag, world, strategy, shard, weights, data, extra=(), run_extra=(),
               seq=SEQ, accum=1, tp=1):
    """Plans `config` at `world` ranks (GLOBAL_BATCH sequences a step, in `accum`
    micro-steps, over the world / tp data-parallel ranks) and trains it
    args.steps steps; returns its metrics file, final weights and metrics.
    extra: more fsdp-plan flags; run_extra: more fsdp-run flags (--labels,
    --mask-token-id, --eval-data, ...)."""
    plan = os.path.join(args.work, tag + ".plan.json")
    cmd = [os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world),
           *(["--tp", str(tp)] if tp > 1 else []),
           "--micro-batch", str(GLOBAL_BATCH // (world // tp) // accum), *seq_flags(seq),
           "--strategy", strategy, "--grad-accum", str(accum), "-o", plan, *extra]
    if shard:
        cmd += ["--shard-size", str(shard)]
    run(cmd)
    metrics = os.path.join(args.work, tag + ".jsonl")
    final = os.path.join(args.work, tag + ".safetensors")
    # The accumulation is the program's (fsdp-plan --grad-accum).
    cmd = [os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data,
           "--steps", str(args.steps), "--metrics", metrics, "--save-weights", final, "--quiet",
           *run_extra]
    run(cmd)
    return metrics, final, read_metrics(metrics)


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# bf16 compute (--compute-dtype bf16, the default with --param-dtype bf16)
# against the PyTorch reference rounding to bf16 where fsdp stores bf16
# (reference.py --bf16-compute), every strategy at world sizes 1, 2 and 4.
# Three quantities: the step-1 loss (the forward alone), the step-1 grad norm
# (one backward) and every step's loss. Each bound is bounds.bf16 of the
# spread, measured in this run, between the f32-accumulating reference and
# the correct alternatives (bf16_alternates). The control: the same
# reference computing in f32 (--bf16-params without --bf16-compute) must sit
# outside a bound, and so must an fsdp run with --compute-dtype f32, which
# proves the bf16 path ran and the bounds can tell.
QUANTITIES = ("loss1", "norm1", "loss")


def blas_alternates():
    """bounds.blas_alternates as references() takes them."""
    return [("%s kernels" % label, [], env) for label, env in bounds.blas_alternates()]


def references(args, tag, ref_cmd, alternates):
    """Runs ref_cmd (reference.py's flags, without --metrics) as the
    reference and once per alternative (label, more flags, environment);
    returns the reference's metrics and {label: metrics}."""
    ref = os.path.join(args.work, tag + ".ref.jsonl")
    run(ref_cmd + ["--metrics", ref])
    alts = {}
    for label, flags, env in alternates:
        alts[label] = os.path.join(args.work, "%s.ref-%s.jsonl" % (tag, label.replace(" ", "-")))
        run(ref_cmd + list(flags) + ["--metrics", alts[label]], env)
    return ref, alts


def bf16_gaps(ref, other):
    """Relative gaps of `other`'s metrics from `ref`'s: {loss1: step-1 loss,
    norm1: step-1 grad norm, loss: the largest loss gap}; whether the step
    counts match; other's metrics."""
    a, b = read_metrics(ref), read_metrics(other)
    rel = lambda key, x, y: abs(x[key] - y[key]) / abs(x[key])
    return ({"loss1": rel("loss", a[0], b[0]), "norm1": rel("grad_norm", a[0], b[0]),
             "loss": max(rel("loss", x, y) for x, y in zip(a, b))}, len(a) == len(b), b)


def bf16_spread(ref, alts):
    """Per quantity, the largest gap of an alternative from the reference,
    and which alternative it was."""
    spread, which = {}, {}
    for label, path in alts.items():
        g = bf16_gaps(ref, path)[0]
        for q, v in g.items():
            if q not in spread or v > spread[q]:
                spread[q], which[q] = v, label
    return spread, which


def describe_spread(spread, keys=QUANTITIES, which=None):
    return ", ".join("%s %.2g%s" % (q, spread[q], " (%s)" % which[q] if which else "")
                     for q in keys)


def bf16_alternates(worlds, ref_flags):
    """The correct alternatives to the f32-accumulating bf16 reference
    (bounds.py, bf16): f64 accumulation, other BLAS kernels, each use's
    gradient contribution rounded (fsdp's placement), and with it the
    parameter gradients summed from the W per-rank partials of each world
    size W > 1 among the cases (what W ranks compute)."""
    alts = [("f64", ["--dtype", "f64"], {})] + [
        (label, flags, env) for label, flags, env in blas_alternates()]
    alts.append(("each use", ["--bf16-each-use"], {}))
    for w in sorted(set(worlds)):
        if w > 1 and "--grad-accum" not in ref_flags:
            alts.append(("each use, %d partials" % w, ["--bf16-each-use", "--grad-accum", str(w)], {}))
    return alts


def check_bf16_compute(args, data, model, weights, cases, plan_input=None, ref_flags=(),
                       label=None, run_flags=(), seq=SEQ, batch=GLOBAL_BATCH, worlds=None,
                       accum=1):
    """Plans and runs `model` for each case (world, strategy, shard size,
    "bf16" or "f32" compute, fsdp-plan flags) against the f32-accumulating
    bf16 reference, with bounds from its spread to the correct alternatives
    (bf16_alternates, bounds.bf16); prints the spread, the bounds, the
    f32-compute reference's gaps (which must fall outside) and a line per
    case. An f32-compute case is the control that must fall outside.
    Returns (checks, failures).
    plan_input: what fsdp-plan reads instead of the model's config (a JSON
    graph of a variant), ref_flags what reference.py then needs to match it,
    label the name its files and lines go by (default: the model's),
    run_flags what both fsdp-run and reference.py need besides (--labels,
    --mask-token-id), seq the sequence length (None: the model's own), batch
    the global batch (sequences a step), worlds the world sizes whose
    per-rank partials are alternatives (default: the cases'; given, the
    references can run without a case, as moe_e2e.py --reference-only),
    accum the micro-steps of a step (the plans' --grad-accum; ref_flags must
    give the reference the same)."""
    config = os.path.join(ROOT, "models", model, "config.json")
    label = label or model
    ref_cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
               "--data", data, "--steps", str(args.steps), "--global-batch", str(batch),
               *seq_flags(seq), "--quiet"] + list(ref_flags) + list(run_flags)
    ref, alts = references(args, label + ".bf16c", ref_cmd + ["--bf16-compute"],
                           bf16_alternates([c[0] for c in cases] if worlds is None else worlds,
                                           ref_flags))
    spread, which = bf16_spread(ref, alts)
    tol = {q: bounds.bf16(spread[q]) for q in QUANTITIES}
    flip = read_metrics(ref)[0]["flip_sensitivity"]
    tol["loss1"] = bounds.bf16_loss1(spread["loss1"], flip)
    print("%-11s %5s %-14s %s" % (label, "-", "bf16 spread", describe_spread(spread, which=which)))
    print("%-11s %5s %-14s %s (one flip moves the step-1 loss by up to %.2g)" % (
        label, "-", "bf16 bounds", describe_spread(tol), flip))
    # The control's reference: bf16 parameters, f32 compute.
    f32c = os.path.join(args.work, label + ".bf16c.ref-f32-compute.jsonl")
    run(ref_cmd + ["--bf16-params", "--metrics", f32c])
    g = bf16_gaps(ref, f32c)[0]
    outside = [q for q in QUANTITIES if g[q] > tol[q]]
    total, failures = 1, not outside
    print("%-11s %5s %-14s %s: %s" % (label, "-", "f32 compute ref", describe_spread(g),
                                      "outside on " + ", ".join(outside) if outside
                                      else "FAILED: inside every bound (the bounds cannot tell)"))
    for world, strategy, shard, compute, flags in cases:
        tag = "%s.w%d.%s.c%s" % (label, world, strategy, compute)
        plan = os.path.join(args.work, tag + ".plan.json")
        cmd = [os.path.join(args.bin, "fsdp-plan"), plan_input or config, "--world-size", str(world),
               "--micro-batch", str(batch // world // accum), "--grad-accum", str(accum),
               *seq_flags(seq),
               "--strategy", strategy, "-o", plan] + flags
        if shard:
            cmd += ["--shard-size", str(shard)]
        run(cmd)
        metrics = os.path.join(args.work, tag + ".jsonl")
        run([os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data,
             "--steps", str(args.steps), "--metrics", metrics, "--quiet"] + list(run_flags))
        g, same_len, m = bf16_gaps(ref, metrics)
        exact = peaks_exact(m)
        outside = [q for q in QUANTITIES if g[q] > tol[q]]
        if compute == "bf16":
            ok = not outside and exact and same_len
        else:  # the f32-compute control must fall outside a bound
            ok = bool(outside) and exact
        total += 1
        failures += not ok
        print("%-11s %5d %-14s %14s %14s %10s %s" % (
            label, world, strategy if compute == "bf16" else "f32 compute",
            gap_text(g["loss"], tol["loss"]), "step 1: %s %s" % (
                gap_text(g["loss1"], tol["loss1"]), gap_text(g["norm1"], tol["norm1"])),
            "exact" if exact else "DIFFERENT",
            ("ok" if ok else "FAILED") + (" (outside on %s)" % ", ".join(outside) if outside else
                                         "" if compute == "bf16" else " (inside)")))
    return total, failures


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
    failures = 0
    print("%-11s %5s %-14s %14s %14s %10s %s" % ("model", "world", "strategy", "loss rel/bound",
                                              "weight abs/bd", "peak", "result"))
    ref_bounds = {}  # model -> F32Bounds of its f32 reference
    for model in args.models.split(","):
        config, weights, ref_metrics, ref_weights, ref_bounds[model] = f32_reference(
            args, model, data)
        print("%-11s %5s %s" % (model, "-", ref_bounds[model].describe()))
        for world, strategy, shard in RUNS:
            tag = "%s.w%d.%s" % (model, world, strategy)
            metrics, final, m = train_plan(args, config, tag, world, strategy, shard, weights, data)
            loss_diff, w_diff, problem = compare(ref_metrics, metrics, ref_weights, final,
                                                 ref_bounds[model])
            exact = peaks_exact(m)
            ok = exact and len(m) == args.steps and problem is None
            loss_diff = gap_text(loss_diff, ref_bounds[model].loss)
            w_diff = gap_text(w_diff, ref_bounds[model].weight)
            failures += not ok
            print("%-11s %5d %-14s %14s %14s %10s %s" % (
                model, world, strategy, loss_diff, w_diff,
                "exact" if exact else "%d != %d" % (m[-1]["peak_bytes"], m[-1]["predicted_peak_bytes"]),
                "ok" if ok else "FAILED " + (problem or "")))
    total = len(RUNS) * len(args.models.split(","))

    # Gradient accumulation and clipping, against PyTorch doing the same.
    model = args.models.split(",")[0]
    config = os.path.join(ROOT, "models", model, "config.json")
    weights = os.path.join(args.work, model + ".init.safetensors")
    for accum, clip in ((2, 0.0), (3, 0.5)):
        tag = "%s.accum%d.clip%g" % (model, accum, clip)
        ref_metrics = os.path.join(args.work, tag + ".ref.jsonl")
        ref_weights = os.path.join(args.work, tag + ".ref.safetensors")
        ref_cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
                   "--data", data, "--steps", str(args.steps), "--global-batch", str(GLOBAL_BATCH),
                   "--seq-len", str(SEQ), "--grad-accum", str(accum), "--clip-grad-norm", str(clip),
                   "--metrics", ref_metrics, "--save-weights", ref_weights, "--quiet"]
        run(ref_cmd)
        acc_bounds = f32_bounds(args, tag, ref_cmd, ref_metrics, ref_weights)
        world = 2
        plan = os.path.join(args.work, tag + ".plan.json")
        run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world),
             "--micro-batch", str(GLOBAL_BATCH // world // accum), "--seq-len", str(SEQ),
             "--grad-accum", str(accum), "-o", plan])
        metrics = os.path.join(args.work, tag + ".jsonl")
        final = os.path.join(args.work, tag + ".safetensors")
        run([os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data,
             "--steps", str(args.steps), "--clip-grad-norm", str(clip),
             "--metrics", metrics, "--save-weights", final, "--quiet"])
        loss_diff, w_diff, problem = compare(ref_metrics, metrics, ref_weights, final, acc_bounds)
        total += 1
        failures += problem is not None
        print("%-11s %5d %-14s %14s %14s %10s %s" % (
            model, world, "accum %d clip %g" % (accum, clip), gap_text(loss_diff, acc_bounds.loss),
            gap_text(w_diff, acc_bounds.weight), "", "ok" if not problem else "FAILED " + problem))
        print("%-11s %5s %-14s %s" % ("", "", "", acc_bounds.describe()))

    # Resume: 5 steps, save, resume to 10: the losses of the uninterrupted run.
    tag = "%s.resume" % model
    plan = os.path.join(args.work, tag + ".plan.json")
    run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", "3",
         "--micro-batch", str(GLOBAL_BATCH // 3), "--seq-len", str(SEQ), "-o", plan])
    ckpt = os.path.join(args.work, tag + ".ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    whole = os.path.join(args.work, tag + ".whole.jsonl")
    first = os.path.join(args.work, tag + ".first.jsonl")
    second = os.path.join(args.work, tag + ".second.jsonl")
    common = [os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data, "--quiet"]
    run(common + ["--steps", str(args.steps), "--metrics", whole])
    run(common + ["--steps", str(args.steps // 2), "--metrics", first, "--save", ckpt])
    # The resumed leg's weights are the checkpoint's (--weights with --resume
    # is an error).
    run([c for c in common if c not in ("--weights", weights)] +
        ["--steps", str(args.steps), "--metrics", second, "--resume", ckpt])
    a = [x["loss"] for x in read_metrics(whole)]
    b = [x["loss"] for x in read_metrics(first)] + [x["loss"] for x in read_metrics(second)]
    same = a == b
    total += 1
    failures += not same
    print("%-11s %5d %-14s %14s %14s %10s %s" % (model, 3, "resume at %d" % (args.steps // 2),
                                              "identical" if same else "differ", "", "",
                                              "ok" if same else "FAILED %s vs %s" % (a, b)))

    # Resharding: a checkpoint saved at world size 4 (full-shard) resumes under
    # other world sizes, strategies, shard sizes and wraps with the same global
    # batch; the whole run matches the uninterrupted PyTorch reference.
    for model in args.models.split(","):
        config = os.path.join(ROOT, "models", model, "config.json")
        weights = os.path.join(args.work, model + ".init.safetensors")
        ref_metrics = os.path.join(args.work, model + ".ref.jsonl")
        ref_weights = os.path.join(args.work, model + ".ref.safetensors")
        tag = "%s.reshard" % model
        ckpt = os.path.join(args.work, tag + ".ckpt")
        shutil.rmtree(ckpt, ignore_errors=True)
        saved = os.path.join(args.work, "%s.w4.full-shard.plan.json" % model)
        first = os.path.join(args.work, tag + ".first.jsonl")
        run([os.path.join(args.bin, "fsdp-run"), saved, "--weights", weights, "--data", data,
             "--steps", str(args.steps // 2), "--metrics", first, "--save", ckpt, "--quiet"])
        for world, strategy, extra in ((2, "full-shard", []), (3, "shard-grad-op", []),
                                       (4, "hybrid-shard", ["--shard-size", "2"]),
                                       (2, "full-shard", ["--wrap", "none"]),
                                       (1, "no-shard", ["--wrap", "size:20000"])):
            what = "from w4 %s%s" % (strategy, " " + " ".join(extra) if extra else "")
            plan = os.path.join(args.work, "%s.w%d.%s.%s.plan.json" % (tag, world, strategy,
                                                                     "-".join(extra) or "block"))
            run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world),
                 "--micro-batch", str(GLOBAL_BATCH // world), "--seq-len", str(SEQ),
                 "--strategy", strategy, "-o", plan] + extra)
            second = plan + ".second.jsonl"
            final = plan + ".safetensors"
            run([os.path.join(args.bin, "fsdp-run"), plan, "--data", data, "--steps", str(args.steps),
                 "--resume", ckpt, "--metrics", second, "--save-weights", final, "--quiet"])
            both = plan + ".both.jsonl"
            with open(both, "w") as f:
                f.write(open(first).read() + open(second).read())
            loss_diff, w_diff, problem = compare(ref_metrics, both, ref_weights, final,
                                                 ref_bounds[model])
            m = read_metrics(second)
            exact = peaks_exact(m)
            ok = problem is None and exact and len(m) == args.steps - args.steps // 2
            total += 1
            failures += not ok
            print("%-11s %5d %-14s %14s %14s %10s %s" % (
                model, world, what, gap_text(loss_diff, ref_bounds[model].loss),
                gap_text(w_diff, ref_bounds[model].weight),
                "exact" if exact else "DIFFERENT", "ok" if ok else "FAILED " + (problem or "")))
    # Learning-rate schedules (with warmup) and the held-out loss, against
    # PyTorch doing the same, at world sizes 1, 2 and 4 (with accumulation at
    # 2); and training is the same with and without evaluation.
    eval_data = os.path.join(args.work, "apache2.bin")
    run([PY, os.path.join(HERE, "make_data.py"), eval_data, "--text",
         "/usr/share/common-licenses/Apache-2.0"])
    for model, schedule, warmup, min_lr, accum in (("gpt2-tiny", "cosine", 3, 1e-4, 1),
                                                  ("llama-tiny", "linear", 2, 2e-4, 3)):
        config = os.path.join(ROOT, "models", model, "config.json")
        weights = os.path.join(args.work, model + ".init.safetensors")
        sched = ["--lr-schedule", schedule, "--warmup-steps", str(warmup), "--min-lr", str(min_lr),
                 "--eval-data", eval_data, "--eval-every", "4", "--eval-batches", "2"]
        tag = "%s.%s" % (model, schedule)
        ref_cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
                   "--data", data, "--steps", str(args.steps), "--global-batch", str(GLOBAL_BATCH),
                   "--seq-len", str(SEQ), "--grad-accum", str(accum), "--quiet"] + sched
        ref_metrics, alts = references(args, tag, ref_cmd,
                                       [("f64", ["--dtype", "f64"], {})] + blas_alternates())
        ref = read_metrics(ref_metrics)
        # Each key's bound from the f32 reference's largest gap to its f64
        # run and to itself under other BLAS kernels (bounds.f32_loss); lr is
        # the same formula in all, so only the floor (an f32 or f64
        # evaluation of it).
        ref_gap = {key: max((abs(x[key] - y[key]) / abs(x[key]) for path in alts.values()
                             for x, y in zip(ref, read_metrics(path)) if key in x), default=0.0)
                   for key in ("loss", "lr", "eval_loss")}
        tol = {key: bounds.f32_loss(gap) for key, gap in ref_gap.items()}
        print("%-11s %5s %-14s bounds (4x the f32 reference's spread): loss %.2g (%.2g), eval %.2g "
              "(%.2g), lr %.2g (%.2g)" % (model, "-", "%s+eval" % schedule, tol["loss"],
                                          ref_gap["loss"], tol["eval_loss"], ref_gap["eval_loss"],
                                          tol["lr"], ref_gap["lr"]))
        for world in (1, 2, 4):
            plan = os.path.join(args.work, "%s.w%d.plan.json" % (tag, world))
            run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world),
                 "--micro-batch", str(GLOBAL_BATCH // world // accum), "--seq-len", str(SEQ),
                 "--grad-accum", str(accum), "-o", plan])
            common = [os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data,
                      "--steps", str(args.steps), "--quiet"]
            metrics = plan + ".jsonl"
            run(common + sched + ["--metrics", metrics])
            got = read_metrics(metrics)
            worst = {"loss": 0.0, "lr": 0.0, "eval_loss": 0.0}
            problem = None if len(got) == len(ref) else "%d steps against %d" % (len(got), len(ref))
            for x, y in zip(ref, got):
                for key in worst:
                    if (key in x) != (key in y):
                        problem = "step %d: %s in one run only" % (x["step"], key)
                    elif key in x:
                        worst[key] = max(worst[key], abs(x[key] - y[key]) / abs(x[key]))
            evaluated = sum("eval_loss" in y for y in got)
            if problem is None and (any(worst[k] > tol[k] for k in worst) or evaluated != 3):
                problem = "differs (%s), %d evaluations" % (worst, evaluated)
            # Without evaluation: the same training losses, bit for bit.
            plain = plan + ".noeval.jsonl"
            run(common + sched[:6] + ["--metrics", plain])
            if problem is None and [x["loss"] for x in read_metrics(plain)] != [x["loss"] for x in got]:
                problem = "evaluation changed the training losses"
            total += 1
            failures += problem is not None
            print("%-11s %5d %-14s %14s %14s %10s %s" % (
                model, world, "%s+eval%s" % (schedule, " accum %d" % accum if accum > 1 else ""),
                "%.3g" % worst["loss"], "eval %.3g" % worst["eval_loss"], "lr %.1g" % worst["lr"],
                "ok" if problem is None else "FAILED " + problem))

    # Mixed precision: bf16 parameters (f32 reductions) against PyTorch doing
    # the same rounding, at world sizes 1, 2 and 4; the peak stays exact. The
    # bound: bounds.bf16 of the spread of the f32 reference to its f64 run
    # and to itself under other BLAS kernels (an f32 master weight that lands
    # on the other side of a bf16 boundary flips its bf16 copy).
    for model in args.models.split(","):
        config = os.path.join(ROOT, "models", model, "config.json")
        weights = os.path.join(args.work, model + ".init.safetensors")
        ref_cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
                   "--data", data, "--steps", str(args.steps), "--global-batch", str(GLOBAL_BATCH),
                   "--seq-len", str(SEQ), "--bf16-params", "--quiet"]
        ref_metrics, alts = references(args, model + ".bf16", ref_cmd,
                                       [("f64", ["--dtype", "f64"], {})] + blas_alternates())
        spread, _ = bf16_spread(ref_metrics, alts)
        tol = bounds.bf16(spread["loss"])
        print("%-11s %5s %-14s bound %.2g: %s" % (model, "-", "bf16 params", tol,
                                                  describe_spread(spread, ("loss",))))
        for world in (1, 2, 4):
            tag = "%s.w%d.bf16" % (model, world)
            plan = os.path.join(args.work, tag + ".plan.json")
            run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world),
                 "--micro-batch", str(GLOBAL_BATCH // world), "--seq-len", str(SEQ),
                 "--param-dtype", "bf16", "--compute-dtype", "f32", "-o", plan])
            metrics = os.path.join(args.work, tag + ".jsonl")
            run([os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data,
                 "--steps", str(args.steps), "--metrics", metrics, "--quiet"])
            a, b = read_metrics(ref_metrics), read_metrics(metrics)
            loss = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b))
            exact = all(x["peak_bytes"] == x["predicted_peak_bytes"] for x in b)
            ok = loss <= tol and exact and len(b) == args.steps
            total += 1
            failures += not ok
            print("%-11s %5d %-14s %14.3g %14s %10s %s" % (
                model, world, "bf16 params", loss, "bound %.2g" % tol,
                "exact" if exact else "DIFFERENT", "ok" if ok else "FAILED"))

    # bf16 compute against the PyTorch reference (check_bf16_compute), every
    # strategy at world sizes 1, 2 and 4, and an f32-compute control.
    for model in args.models.split(","):
        weights = os.path.join(args.work, model + ".init.safetensors")
        cases = [(w, st, sh, "bf16", ["--param-dtype", "bf16"])
                 for w, st, sh in RUNS if w in (1, 2, 4)]
        cases.append((2, "full-shard", 0, "f32", ["--param-dtype", "bf16", "--compute-dtype", "f32"]))
        checks, failed = check_bf16_compute(args, data, model, weights, cases)
        total += checks
        failures += failed

    # bf16 compute halves the activations (a GPT-2 124M plan, no checkpointing),
    # and with it activation checkpointing is bit-identical to none.
    reports = {}
    for compute in ("f32", "bf16"):
        reports[compute] = os.path.join(args.work, "gpt2.act-%s.json" % compute)
        run([os.path.join(args.bin, "fsdp-plan"), os.path.join(ROOT, "models", "gpt2", "config.json"),
             "--no-dropout", "--world-size", "8", "--micro-batch", "8", "--seq-len", "1024",
             "--param-dtype", "bf16",
             "--compute-dtype", compute, "--report", reports[compute]])
    act = {c: json.load(open(r))["memory"]["activations_bytes"] for c, r in reports.items()}
    ratio = act["bf16"] / act["f32"]
    ok = 0.45 <= ratio <= 0.55
    total += 1
    failures += not ok
    print("%-11s %5d %-14s %14s %14s %10s %s" % ("gpt2", 8, "activations", "%.3f of f32" % ratio,
                                               "", "", "ok" if ok else "FAILED"))
    model = args.models.split(",")[0]
    config = os.path.join(ROOT, "models", model, "config.json")
    weights = os.path.join(args.work, model + ".init.safetensors")
    losses = {}
    for ac in ("none", "blocks", "selective"):
        tag = "%s.bf16c.ac-%s" % (model, ac)
        plan = os.path.join(args.work, tag + ".plan.json")
        run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", "2", "--micro-batch", "4",
             "--seq-len", "64", "--param-dtype", "bf16", "--activation-checkpointing", ac, "-o", plan])
        metrics = os.path.join(args.work, tag + ".jsonl")
        run([os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data,
             "--steps", str(args.steps), "--metrics", metrics, "--quiet"])
        losses[ac] = [(x["loss"], x["grad_norm"]) for x in read_metrics(metrics)]
    for ac in ("blocks", "selective"):
        ok = losses["none"] == losses[ac]
        total += 1
        failures += not ok
        print("%-11s %5d %-14s %14s %14s %10s %s" % (model, 2, "bf16 " + ac, "identical" if ok
                                                   else "differ", "", "", "ok" if ok else "FAILED"))

    # Activation checkpointing, blocks and selective: the same losses and
    # gradient norms bit for bit (the recompute runs the same kernels on the
    # same inputs), the measured peak the predicted one, and so lower by what
    # the plan predicted; selective's activations between none's and blocks'.
    model = args.models.split(",")[0]
    config = os.path.join(ROOT, "models", model, "config.json")
    weights = os.path.join(args.work, model + ".init.safetensors")
    peaks, losses, act = {}, {}, {}
    for ac in ("none", "blocks", "selective"):
        tag = "%s.ac-%s" % (model, ac)
        plan = os.path.join(args.work, tag + ".plan.json")
        report = os.path.join(args.work, tag + ".report.json")
        run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", "2",
             "--micro-batch", "4", "--seq-len", "128", "--activation-checkpointing", ac,
             "-o", plan, "--report", report])
        metrics = os.path.join(args.work, tag + ".jsonl")
        run([os.path.join(args.bin, "fsdp-run"), plan, "--weights", weights, "--data", data,
             "--steps", str(args.steps), "--metrics", metrics, "--quiet"])
        m = read_metrics(metrics)
        losses[ac] = [(x["loss"], x["grad_norm"]) for x in m]
        mem = json.load(open(report))["memory"]
        peaks[ac] = (m[-1]["peak_bytes"], mem["peak_bytes"])
        act[ac] = mem["activations_bytes"]
    for ac in ("blocks", "selective"):
        saved_measured = peaks["none"][0] - peaks[ac][0]
        saved_predicted = peaks["none"][1] - peaks[ac][1]
        exact = peaks[ac][0] == peaks[ac][1]
        ok = losses["none"] == losses[ac] and exact and saved_measured == saved_predicted > 0
        if ac == "selective":
            ok = ok and act["blocks"] < act["selective"] < act["none"]
        total += 1
        failures += not ok
        print("%-11s %5d %-14s %14s %14s %10s %s" % (
            model, 2, "ckpt " + ac, "identical" if losses["none"] == losses[ac] else "differ",
            "-%d B" % saved_measured, "predicted" if saved_measured == saved_predicted and exact
            else "-%d B predicted" % saved_predicted, "ok" if ok else "FAILED"))
    print("%-11s %5d %-14s activations none %d, selective %d, blocks %d bytes" % (
        model, 2, "ckpt saving", act["none"], act["selective"], act["blocks"]))
    print("%d passed, %d failed" % (total - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
