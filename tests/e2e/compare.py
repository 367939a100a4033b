#!/usr/bin/python3
"""Compare two training runs: their metrics files and/or their final weights.

usage: compare.py [--metrics A.jsonl B.jsonl] [--weights A.safetensors B.safetensors]
                  (--bound-from A64.jsonl [A64.safetensors] | --spread-from X.jsonl
                   | --loss-tol X [--grad-norm-tol X] [--eval-loss-tol X] [--weight-tol X])
                  [--zero-gradient REGEX LR EPS K] [--steps K] [--show]

Every bound is either measured or analysed (tests/e2e/bounds.py); none has a
default:
--bound-from A64.jsonl [A64.safetensors]: measured. A is an f32 reference and
  A64 the same reference computed in f64, run in the same test; the bound on
  each quantity is bounds.f32_loss (loss, eval_loss), bounds.f32_grad_norm
  (grad_norm) or bounds.f32_weight (weights, at the scale of A's largest
  weight) of A's largest gap to A64, and B (the run under test) is held to it.
  Every quantity A holds is checked (eval_loss where A has it, the weights
  when --weights is given, which then needs A64.safetensors).
--spread-from X.jsonl: measured. X is another correct alternative of run A,
  known to differ from it as B may (e.g. A with bf16 parameters, X the same
  run with f32 ones, B a run resumed from A's state with f32 ones); the bound
  on loss and grad_norm is bounds.bf16 (4x, floor 64 f32 ulps) of A's largest
  gap to X.
--loss-tol etc: analysed bounds given by the caller, who states the analysis
  beside the command (0: bit-identical, both sides running the same kernels
  on the same values in the same order).
--zero-gradient REGEX LR EPS K: analysed, for the tensors whose names match
  REGEX and whose true gradient is exactly 0 (the softmax cancels them): one
  side may compute that 0 exactly and the other as the rounding left of a
  zero sum of K terms, at most K f32 ulps of the step's gradient norm, which
  AdamW (learning rate LR, eps EPS, both constant) turns into moves of up to
  LR x that / EPS a step. Their bound is the weight bound plus the sum over
  the steps of those moves, with B's grad norms.
--metrics: per step, the relative difference |a-b| / max(|a|, |b|) of "loss"
  (and "grad_norm", "eval_loss" where bounded); both files must list the same
  steps (the first K with --steps K).
--weights: both files must hold the same names with the same shapes; the max
  absolute difference over every tensor is compared (in f64).
Prints each measured gap beside its bound and the rule that gave it; exits 1
on a mismatch, naming the step or tensor, 2 on a usage or file error.
"""
import argparse
import json
import math
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bounds  # noqa: E402
import safetensors_io  # noqa: E402

KEYS = ("loss", "grad_norm", "eval_loss")


def read_metrics(path):
    rows = []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"compare.py: {path}:{ln}: not JSON: {e}") from None
    return rows


def rel(a, b):
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def metric_gaps(pa, pb, steps, keys, show=False):
    """({key: (largest relative gap, its step, how many steps had it)}, fails)
    for the keys of A; a key in only one of the two files at a step fails."""
    ra, rb = read_metrics(pa), read_metrics(pb)
    if steps is not None:
        ra, rb = ra[:steps], rb[:steps]
        if len(ra) < steps or len(rb) < steps:
            return {}, [f"metrics: asked for {steps} steps but {pa} has {len(ra)}, {pb} has {len(rb)}"]
    fails = []
    if len(ra) != len(rb):
        fails.append(f"metrics: {pa} has {len(ra)} steps, {pb} has {len(rb)}")
    worst = {}
    for a, b in zip(ra, rb):
        step = a.get("step")
        if step != b.get("step"):
            fails.append(f"metrics: step numbers differ: {step} vs {b.get('step')}")
            break
        if show:
            print(f"  step {step}: loss {a.get('loss')!r:<20} vs {b.get('loss')!r:<20} "
                  f"grad_norm {a.get('grad_norm')!r:<20} vs {b.get('grad_norm')!r}")
        for key in keys:
            if key not in a and key not in b:
                if key == "loss":
                    fails.append(f"metrics: step {step}: 'loss' missing")
                continue
            if key not in a or key not in b:
                fails.append(f"metrics: step {step}: '{key}' in only one of them")
                continue
            d = rel(float(a[key]), float(b[key]))
            w = worst.setdefault(key, [0.0, step, 0, []])
            w[2] += 1
            w[3].append((step, a[key], b[key], d))
            if d > w[0]:
                w[0], w[1] = d, step
    return worst, fails


def weight_gap(pa, pb):
    """(largest absolute gap, its tensor, per-tensor gaps, largest |a|, fails)."""
    wa, wb = safetensors_io.load(pa), safetensors_io.load(pb)
    fails = []
    only_a, only_b = sorted(set(wa) - set(wb)), sorted(set(wb) - set(wa))
    if only_a:
        fails.append(f"weights: only in {pa}: {', '.join(only_a[:10])}")
    if only_b:
        fails.append(f"weights: only in {pb}: {', '.join(only_b[:10])}")
    worst, per, scale = (0.0, None), {}, 0.0
    for name in sorted(set(wa) & set(wb)):
        a, b = wa[name], wb[name]
        if tuple(a.shape) != tuple(b.shape):
            fails.append(f"weights: '{name}': shape {list(a.shape)} vs {list(b.shape)}")
            continue
        if a.numel() == 0:
            continue
        a64, b64 = a.to(torch.float64), b.to(torch.float64)
        if not (torch.isfinite(a64).all() and torch.isfinite(b64).all()):
            d = math.inf if not torch.equal(a64, b64) else 0.0
        else:
            d = float((a64 - b64).abs().max())
            scale = max(scale, float(a64.abs().max()))
        per[name] = d
        if worst[1] is None or d > worst[0]:
            worst = (d, name)
    return worst[0], worst[1], per, scale, fails


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", nargs=2, metavar=("A", "B"))
    ap.add_argument("--weights", nargs=2, metavar=("A", "B"))
    ap.add_argument("--bound-from", nargs="+", metavar="A64",
                    help="A64.jsonl [A64.safetensors]: the f64 run of reference A; derive every bound")
    ap.add_argument("--spread-from", metavar="X",
                    help="X.jsonl: a correct alternative of A; bound loss and grad_norm by "
                         "bounds.bf16 of A's gap to it")
    ap.add_argument("--loss-tol", type=float)
    ap.add_argument("--weight-tol", type=float)
    ap.add_argument("--grad-norm-tol", type=float)
    ap.add_argument("--eval-loss-tol", type=float)
    ap.add_argument("--zero-gradient", nargs=4, metavar=("REGEX", "LR", "EPS", "K"),
                    help="tensors with a true gradient of 0, and the AdamW lr and eps and the "
                         "reduction length that bound their rounding-driven moves")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--show", action="store_true", help="print both runs' metrics step by step")
    a = ap.parse_args(argv)
    if not a.metrics and not a.weights:
        ap.error("give --metrics A B and/or --weights A B")
    given = {"loss": a.loss_tol, "grad_norm": a.grad_norm_tol, "eval_loss": a.eval_loss_tol}
    if a.bound_from and a.spread_from:
        ap.error("give one of --bound-from and --spread-from")
    if a.spread_from:
        if any(v is not None for v in given.values()) or a.weight_tol is not None or a.weights:
            ap.error("--spread-from bounds the metrics alone: give no --*-tol or --weights with it")
        if not a.metrics:
            ap.error("--spread-from needs --metrics A B")
    elif a.bound_from:
        if any(v is not None for v in given.values()) or a.weight_tol is not None:
            ap.error("--bound-from derives every bound: give no --*-tol with it")
        if len(a.bound_from) > 2:
            ap.error("--bound-from takes A64.jsonl and optionally A64.safetensors")
        if not a.metrics:
            ap.error("--bound-from needs --metrics A B (A the f32 reference)")
        if a.weights and len(a.bound_from) < 2:
            ap.error("--weights with --bound-from needs A64.safetensors")
    else:
        if a.metrics and a.loss_tol is None:
            ap.error("--metrics needs --loss-tol (an analysed bound) or --bound-from (a measured one)")
        if a.weights and a.weight_tol is None:
            ap.error("--weights needs --weight-tol (an analysed bound) or --bound-from (a measured one)")
    zero_gradient = None
    if a.zero_gradient:
        if not (a.metrics and a.weights):
            ap.error("--zero-gradient needs --weights A B and --metrics A B (B's grad norms)")
        try:
            zero_gradient = (re.compile(a.zero_gradient[0]), float(a.zero_gradient[1]),
                             float(a.zero_gradient[2]), int(a.zero_gradient[3]))
        except (re.error, ValueError) as e:
            ap.error(f"--zero-gradient REGEX LR EPS K: {e}")
        if not (zero_gradient[1] > 0 and zero_gradient[2] > 0 and zero_gradient[3] > 0):
            ap.error("--zero-gradient: LR, EPS and K must be positive")
    fails = []
    try:
        tol, rule = {}, {}
        if a.spread_from:
            ref, ref_fails = metric_gaps(a.metrics[0], a.spread_from, a.steps, ("loss", "grad_norm"))
            if ref_fails:
                for f in ref_fails:
                    print(f"compare.py: A vs its alternative: {f}", file=sys.stderr)
                return 2
            for key, (g, step, _, _) in ref.items():
                tol[key] = bounds.bf16(g)
                rule[key] = (f"= max({bounds.BF16_FACTOR:g} x gap of A to its alternative {g:.2g} "
                             f"(step {step}), floor {bounds.BF16_FLOOR:.2g})")
        elif a.bound_from:
            ref, ref_fails = metric_gaps(a.metrics[0], a.bound_from[0], a.steps, KEYS)
            if ref_fails:
                for f in ref_fails:
                    print(f"compare.py: f32 vs f64 reference: {f}", file=sys.stderr)
                return 2
            for key, (g, step, _, _) in ref.items():
                fn = bounds.f32_grad_norm if key == "grad_norm" else bounds.f32_loss
                floor = fn(0.0)
                tol[key] = fn(g)
                rule[key] = (f"= max({bounds.F32_FACTOR:g} x f32-vs-f64 reference gap {g:.2g} "
                             f"(step {step}), floor {floor:.2g})")
            if a.weights:
                g, name, _, scale, wf = weight_gap(a.weights[0], a.bound_from[1])
                if wf:
                    for f in wf:
                        print(f"compare.py: f32 vs f64 reference: {f}", file=sys.stderr)
                    return 2
                tol["weights"] = bounds.f32_weight(g, scale)
                rule["weights"] = (f"= max({bounds.F32_FACTOR:g} x f32-vs-f64 reference gap {g:.2g} "
                                   f"({name}), floor {bounds.f32_weight(0.0, scale):.2g} "
                                   f"at weight scale {scale:.2g})")
        else:
            for key, v in given.items():
                if v is not None:
                    tol[key], rule[key] = v, "(given: analysed" + (", bit-identical)" if v == 0 else ")")
            if a.weight_tol is not None:
                tol["weights"], rule["weights"] = a.weight_tol, (
                    "(given: analysed" + (", bit-identical)" if a.weight_tol == 0 else ")"))
        if a.metrics:
            keys = [k for k in KEYS if k in tol]
            worst, mf = metric_gaps(*a.metrics, a.steps, keys, a.show)
            fails += mf
            for key in keys:
                if key not in worst:
                    if key != "loss" and (a.bound_from or a.spread_from):
                        continue
                    fails.append(f"metrics: no '{key}' in {a.metrics[1]}")
                    continue
                g, step, n, rows = worst[key]
                print(f"{key} gap {g:.3g} (step {step}, {n} steps), bound {tol[key]:.3g} {rule[key]}")
                for s, x, y, d in rows:
                    if not d <= tol[key]:
                        fails.append(f"metrics: step {s}: {key} {x!r} vs {y!r}, "
                                     f"relative difference {d:.3g} > {tol[key]:.3g}")
        if a.weights:
            g, name, per, _, wf = weight_gap(*a.weights)
            fails += wf
            print(f"weights gap {g:.3g} ({name}, {len(per)} tensors), bound {tol['weights']:.3g} "
                  f"{rule['weights']}")
            zero, zero_bound = None, None
            if a.zero_gradient:
                zero, lr, eps, k = zero_gradient
                norms = [float(r["grad_norm"]) for r in read_metrics(a.metrics[1])[:a.steps]]
                moves = sum(lr * k * bounds.U32 * n / eps for n in norms)
                zero_bound = tol["weights"] + moves
                held = {n: d for n, d in per.items() if zero.search(n)}
                if not held:
                    fails.append(f"weights: --zero-gradient '{zero.pattern}' matches no tensor")
                print(f"zero-gradient tensors ({len(held)}) gap {max(held.values(), default=0):.3g}, "
                      f"bound {zero_bound:.3g} = weight bound + {len(norms)} steps of "
                      f"lr x {k} f32 ulps of the grad norm / eps ({moves:.2g})")
            for n, d in per.items():
                b = zero_bound if zero is not None and zero.search(n) else tol["weights"]
                if not d <= b:
                    fails.append(f"weights: '{n}': max absolute difference {d:.3g} > {b:.3g}")
    except (OSError, safetensors_io.SafetensorsError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    if fails:
        for f in fails[:20]:
            print(f"FAIL {f}", file=sys.stderr)
        if len(fails) > 20:
            print(f"FAIL ... and {len(fails) - 20} more", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
