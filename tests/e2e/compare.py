#!/usr/bin/python3
"""Compare two training runs: their metrics files and/or their final weights.

usage: compare.py [--metrics A.jsonl B.jsonl] [--weights A.safetensors B.safetensors]
                  [--loss-tol 1e-4] [--weight-tol 1e-4] [--grad-norm-tol X]
                  [--eval-loss-tol X] [--steps K] [--show]

--metrics: per step, the relative difference |a-b| / max(|a|, |b|) of "loss" must be
  <= --loss-tol; both files must list the same steps (the first K with --steps K).
  grad_norm differences are printed, and checked when --grad-norm-tol is given.
  With --eval-loss-tol, "eval_loss" must be on the same steps of both and within it.
--weights: both files must hold the same names with the same shapes; the max absolute
  difference over every tensor must be <= --weight-tol (compared in f64).
Prints the largest differences found; exits 1 on a mismatch, naming the step or
tensor, 2 on a usage or file error.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


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


def compare_metrics(pa, pb, loss_tol, gn_tol, steps, show=False, eval_tol=None):
    ra, rb = read_metrics(pa), read_metrics(pb)
    if steps is not None:
        ra, rb = ra[:steps], rb[:steps]
        if len(ra) < steps or len(rb) < steps:
            return [f"metrics: asked for {steps} steps but {pa} has {len(ra)}, {pb} has {len(rb)}"]
    fails = []
    if len(ra) != len(rb):
        fails.append(f"metrics: {pa} has {len(ra)} steps, {pb} has {len(rb)}")
    worst_loss = (0.0, None)
    worst_gn = (0.0, None)
    evals = []
    for a, b in zip(ra, rb):
        step = a.get("step")
        if step != b.get("step"):
            fails.append(f"metrics: step numbers differ: {step} vs {b.get('step')}")
            break
        if show:
            print(f"  step {step}: loss {a.get('loss')!r:<20} vs {b.get('loss')!r:<20} "
                  f"grad_norm {a.get('grad_norm')!r:<20} vs {b.get('grad_norm')!r}")
        for key in ("loss", "grad_norm"):
            if key not in a or key not in b:
                if key == "loss" or gn_tol is not None:
                    fails.append(f"metrics: step {step}: '{key}' missing")
                continue
            d = rel(float(a[key]), float(b[key]))
            worst = worst_loss if key == "loss" else worst_gn
            if worst[1] is None or d > worst[0]:
                worst = (d, step)
            if key == "loss":
                worst_loss = worst
            else:
                worst_gn = worst
            tol = loss_tol if key == "loss" else gn_tol
            if tol is not None and not d <= tol:
                fails.append(f"metrics: step {step}: {key} {a[key]!r} vs {b[key]!r}, "
                             f"relative difference {d:.3g} > {tol:g}")
        if eval_tol is not None and ("eval_loss" in a or "eval_loss" in b):
            if "eval_loss" not in a or "eval_loss" not in b:
                fails.append(f"metrics: step {step}: 'eval_loss' in only one of them")
            else:
                d = rel(float(a["eval_loss"]), float(b["eval_loss"]))
                evals.append(d)
                if not d <= eval_tol:
                    fails.append(f"metrics: step {step}: eval_loss {a['eval_loss']!r} vs "
                                 f"{b['eval_loss']!r}, relative difference {d:.3g} > {eval_tol:g}")
    print(f"metrics: {min(len(ra), len(rb))} steps; max relative loss difference "
          f"{worst_loss[0]:.3g} (step {worst_loss[1]}); max relative grad_norm difference "
          f"{worst_gn[0]:.3g} (step {worst_gn[1]})")
    if eval_tol is not None:
        print(f"metrics: {len(evals)} eval losses; max relative difference "
              f"{max(evals, default=0.0):.3g}")
    return fails


def compare_weights(pa, pb, tol):
    wa, wb = safetensors_io.load(pa), safetensors_io.load(pb)
    fails = []
    only_a, only_b = sorted(set(wa) - set(wb)), sorted(set(wb) - set(wa))
    if only_a:
        fails.append(f"weights: only in {pa}: {', '.join(only_a[:10])}")
    if only_b:
        fails.append(f"weights: only in {pb}: {', '.join(only_b[:10])}")
    worst = (0.0, None)
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
        if worst[1] is None or d > worst[0]:
            worst = (d, name)
        if not d <= tol:
            fails.append(f"weights: '{name}': max absolute difference {d:.3g} > {tol:g}")
    print(f"weights: {len(set(wa) & set(wb))} tensors; max absolute difference "
          f"{worst[0]:.3g} ({worst[1]})")
    return fails


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", nargs=2, metavar=("A", "B"))
    ap.add_argument("--weights", nargs=2, metavar=("A", "B"))
    ap.add_argument("--loss-tol", type=float, default=1e-4)
    ap.add_argument("--weight-tol", type=float, default=1e-4)
    ap.add_argument("--grad-norm-tol", type=float)
    ap.add_argument("--eval-loss-tol", type=float)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--show", action="store_true", help="print both runs' metrics step by step")
    a = ap.parse_args(argv)
    if not a.metrics and not a.weights:
        ap.error("give --metrics A B and/or --weights A B")
    fails = []
    try:
        if a.metrics:
            fails += compare_metrics(*a.metrics, a.loss_tol, a.grad_norm_tol, a.steps, a.show,
                                     a.eval_loss_tol)
        if a.weights:
            fails += compare_weights(*a.weights, a.weight_tol)
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
