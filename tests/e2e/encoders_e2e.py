#!/usr/bin/env python3
"""End-to-end for the encoders: fsdp-plan + fsdp-run on bert-tiny
(BertForMaskedLM) and vit-tiny (ViTForImageClassification) from their HF
configs, against the PyTorch reference (reference.py, which hands encoder
configs to encoder_reference.py), at world sizes 1, 2 and 4 and every
strategy, 10 steps: losses and final weights within the f32 bounds derived
from the reference's spread to its f64 run and other BLAS kernels
(matrix.F32Bounds, bounds.py),
measured peak arena bytes = the plan's prediction.

bert-tiny trains masked-LM on the GPL-3 as bytes (make_data.py), S = 32, mask
token 256 (the first id above the bytes; its vocabulary is 503, so fsdp-run's
default 103 would be a byte of the text). vit-tiny trains on make_images.py's
labelled shapes (16 x 16 x 3, 10 classes; its sequence is 16 patches and the
CLS token, so no --seq-len). Weights std 0.02 (make_weights.py), seed 7.

Besides the matrix, per model: gradient accumulation (world 2, 2 micro-steps)
with evaluation every 5 steps on held-out data (the Apache-2.0 text; other
shapes), losses, eval losses and weights against the reference doing the
same; and bf16 compute at world sizes 1, 2 and 4 (hybrid-shard) against the
bf16-rounding reference, with bounds from the spread of its correct
alternatives measured in the run (vit-tiny's is wide: AdamW's first step
turns bf16 rounding in gradients near zero, half of them the key biases',
whose true gradient is 0, into full-lr moves of the other sign) and an
f32-compute control that must fall outside them
(matrix.check_bf16_compute). For bert, a
weights file that also holds the tied decoder copy and the pretraining heads
(bert.pooler.*, cls.seq_relationship.*) trains exactly as one without them,
and --save-weights writes each tensor once.

usage: encoders_e2e.py BIN_DIR WORK_DIR [--steps 10] [--models bert-tiny,vit-tiny]
"""
import argparse
import os
import sys

import bounds
import matrix
from matrix import HERE, PY, ROOT, GLOBAL_BATCH, SEQ, run, compare, read_metrics

MASK_ID = 256
RUNS = [(1, "full-shard", 0), (2, "full-shard", 0), (4, "full-shard", 0),
        (2, "shard-grad-op", 0), (4, "shard-grad-op", 0),
        (2, "no-shard", 0), (4, "no-shard", 0), (4, "hybrid-shard", 2)]
ROW = "%-10s %5s %-22s %14s %14s %10s %s"


def inputs(args, model):
    """(data, flags both fsdp-run and reference.py need, eval flags, seq-len)."""
    w = lambda name: os.path.join(args.work, name)
    if model.startswith("bert"):
        run([PY, os.path.join(HERE, "make_data.py"), w("gpl3.bin"), "--text",
             "/usr/share/common-licenses/GPL-3"])
        run([PY, os.path.join(HERE, "make_data.py"), w("apache2.bin"), "--text",
             "/usr/share/common-licenses/Apache-2.0"])
        return w("gpl3.bin"), ["--mask-token-id", str(MASK_ID)], ["--eval-data", w("apache2.bin")], SEQ
    for name, count, seed in (("shapes", 240, 1), ("shapes-eval", 96, 2)):
        run([PY, os.path.join(HERE, "make_images.py"), w(name + ".npy"), w(name + "-labels.npy"),
             "--shapes", "--count", str(count), "--height", "16", "--width", "16", "--seed", str(seed)])
    return (w("shapes.npy"), ["--labels", w("shapes-labels.npy")],
            ["--eval-data", w("shapes-eval.npy"), "--eval-labels", w("shapes-eval-labels.npy")], None)


def reference(args, config, weights, data, flags, seq, metrics, save=None, extra=()):
    cmd = [PY, os.path.join(HERE, "reference.py"), "--config", config, "--weights", weights,
           "--data", data, "--steps", str(args.steps), "--global-batch", str(GLOBAL_BATCH),
           *matrix.seq_flags(seq), "--metrics", metrics, "--quiet", *flags, *extra]
    if save:
        cmd += ["--save-weights", save]
    run(cmd)
    return cmd


def peak(m):
    exact = all(x["peak_bytes"] == x["predicted_peak_bytes"] for x in m)
    return exact, "exact" if exact else "%d != %d" % (m[-1]["peak_bytes"], m[-1]["predicted_peak_bytes"])


def with_extra_tensors(src, dst):
    """src's weights plus the tied decoder copy and BERT's pretraining heads."""
    sys.path.insert(0, HERE)
    import torch
    import safetensors_io
    t = safetensors_io.load(src)
    t["cls.predictions.decoder.weight"] = t["bert.embeddings.word_embeddings.weight"].clone()
    t["cls.predictions.decoder.bias"] = t["cls.predictions.bias"].clone()
    d = t["bert.embeddings.word_embeddings.weight"].shape[1]
    g = torch.Generator().manual_seed(3)
    t["bert.pooler.dense.weight"] = torch.randn(d, d, generator=g)
    t["bert.pooler.dense.bias"] = torch.zeros(d)
    t["cls.seq_relationship.weight"] = torch.randn(2, d, generator=g)
    t["cls.seq_relationship.bias"] = torch.zeros(2)
    safetensors_io.save(t, dst, metadata={"format": "pt"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--models", default="bert-tiny,vit-tiny")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = total = 0
    worst = {"loss": 0.0, "weight": 0.0}
    print(ROW % ("model", "world", "strategy", "loss rel/bound", "weight abs/bd", "peak", "result"))

    def report(model, world, what, loss_diff, w_diff, peak_text, ok, problem, tol=None):
        nonlocal failures, total
        total += 1
        failures += not ok
        if loss_diff is not None:
            worst["loss"] = max(worst["loss"], loss_diff)
        if w_diff is not None:
            worst["weight"] = max(worst["weight"], w_diff)
        print(ROW % (model, world, what, matrix.gap_text(loss_diff, tol and tol.loss),
                     matrix.gap_text(w_diff, tol and tol.weight), peak_text,
                     "ok" if ok else "FAILED " + (problem or "")))

    for model in args.models.split(","):
        config = os.path.join(ROOT, "models", model, "config.json")
        data, flags, eval_flags, seq = inputs(args, model)
        weights = os.path.join(args.work, model + ".init.safetensors")
        run([PY, os.path.join(HERE, "make_weights.py"), config, weights, "--seed", "7", "--std", "0.02"])
        ref_metrics = os.path.join(args.work, model + ".ref.jsonl")
        ref_weights = os.path.join(args.work, model + ".ref.safetensors")
        ref_cmd = reference(args, config, weights, data, flags, seq, ref_metrics, ref_weights)
        tol = matrix.f32_bounds(args, model, ref_cmd, ref_metrics, ref_weights)
        ref = read_metrics(ref_metrics)
        print(ROW % (model, "-", "PyTorch reference", "", "", "", "loss %.4f -> %.4f" % (
            ref[0]["loss"], ref[-1]["loss"])))
        print("%-10s %5s %s" % (model, "-", tol.describe()))
        for world, strategy, shard in RUNS:
            tag = "%s.w%d.%s" % (model, world, strategy)
            metrics, final, m = matrix.train_plan(args, config, tag, world, strategy, shard, weights,
                                                  data, run_extra=flags, seq=seq)
            loss_diff, w_diff, problem = compare(ref_metrics, metrics, ref_weights, final, tol)
            exact, peak_text = peak(m)
            report(model, world, strategy, loss_diff, w_diff, peak_text,
                   exact and len(m) == args.steps and problem is None, problem, tol)
        # Tensor parallelism (masked tokens: each tp rank's loss weighted by
        # the selected positions of its part, or counted once without
        # sequence parallelism). ViT's class token reads tokens by position,
        # and fsdp-run takes no images under tp yet.
        for world, tp, sp in ((4, 2, True), (4, 2, False), (4, 4, True)):
            if not model.startswith("bert"):
                break
            what = "dp %d x tp %d%s" % (world // tp, tp, "" if sp else " no-SP")
            tag = "%s.w%d.tp%d%s" % (model, world, tp, "" if sp else ".nosp")
            metrics, final, m = matrix.train_plan(
                args, config, tag, world, "full-shard", 0, weights, data, run_extra=flags, seq=seq,
                tp=tp, extra=["--sequence-parallel", "true" if sp else "false"])
            loss_diff, w_diff, problem = compare(ref_metrics, metrics, ref_weights, final, tol)
            exact, peak_text = peak(m)
            report(model, world, what, loss_diff, w_diff, peak_text,
                   exact and len(m) == args.steps and problem is None, problem, tol)

        # Gradient accumulation with evaluation on held-out data.
        accum = 2
        sched = eval_flags + ["--eval-every", "5", "--eval-batches", "2"]
        tag = "%s.accum%d.eval" % (model, accum)
        acc_metrics = os.path.join(args.work, tag + ".ref.jsonl")
        acc_weights = os.path.join(args.work, tag + ".ref.safetensors")
        acc_cmd = reference(args, config, weights, data, flags, seq, acc_metrics, acc_weights,
                            extra=sched + ["--grad-accum", str(accum)])
        acc_tol = matrix.f32_bounds(args, tag, acc_cmd, acc_metrics, acc_weights)
        # The eval loss's bound from the f32 reference's spread as well.
        eval_ref_gap = max(abs(x["eval_loss"] - y["eval_loss"]) / abs(x["eval_loss"])
                           for _, path, _ in acc_tol.alternatives
                           for x, y in zip(read_metrics(acc_metrics), read_metrics(path))
                           if "eval_loss" in x)
        eval_tol = bounds.f32_loss(eval_ref_gap)
        metrics, final, m = matrix.train_plan(args, config, tag, 2, "full-shard", 0, weights, data,
                                              run_extra=flags + sched, seq=seq, accum=accum)
        loss_diff, w_diff, problem = compare(acc_metrics, metrics, acc_weights, final, acc_tol)
        want = read_metrics(acc_metrics)
        evals = [(x["eval_loss"], y.get("eval_loss")) for x, y in zip(want, m) if "eval_loss" in x]
        eval_gap = max((abs(x - y) / abs(x) if y is not None else float("inf")) for x, y in evals)
        if problem is None and (len(evals) != 2 or sum("eval_loss" in y for y in m) != 2):
            problem = "evaluated at steps %s, not 5 and 10" % [y["step"] for y in m if "eval_loss" in y]
        elif problem is None and eval_gap > eval_tol:
            problem = "eval loss differs by %.3g relative, over %.2g" % (eval_gap, eval_tol)
        # A classifier's accuracy: a count of argmaxes, so equal to the
        # reference's unless a sample's two largest logits lie within the
        # logits' f32 gap of each other; the reference reports its smallest
        # such margin (eval_margin), and where it is above the eval bound
        # (a relative gap of the loss, of logits of order 1) every
        # prediction is the same in both, so the accuracy must be equal.
        for x, y in zip(want, m):
            if problem is None and "eval_accuracy" in x:
                if "eval_accuracy" not in y:
                    problem = "step %d: no eval_accuracy" % y["step"]
                # Equal counts: equal to --metrics' 9 digits (1e-6 is far
                # below one sample of any eval set under a million).
                elif x["eval_margin"] > eval_tol and abs(x["eval_accuracy"] -
                                                         y["eval_accuracy"]) > 1e-6:
                    problem = "step %d: eval accuracy %.4f, the reference's %.4f (its smallest " \
                              "margin %.2g is above the bound %.2g)" % (
                                  y["step"], y["eval_accuracy"], x["eval_accuracy"],
                                  x["eval_margin"], eval_tol)
                else:
                    print("%-10s %5s eval accuracy at step %d: %.4f, the reference's %.4f "
                          "(smallest margin %.2g, bound %.2g)" % (
                              model, "-", y["step"], y["eval_accuracy"], x["eval_accuracy"],
                              x["eval_margin"], eval_tol))
        exact, peak_text = peak(m)
        report(model, 2, "accum %d + eval (%.2g)" % (accum, eval_gap), loss_diff, w_diff, peak_text,
               exact and problem is None, problem, acc_tol)
        print("%-10s %5s %s; eval %.2g (%.2g)" % (model, "-", acc_tol.describe(), eval_tol,
                                                  eval_ref_gap))

        if model.startswith("bert"):
            # The tied decoder copy and the pretraining heads in the weights file.
            extra_weights = os.path.join(args.work, model + ".init+heads.safetensors")
            with_extra_tensors(weights, extra_weights)
            tag = "%s.w1.heads" % model
            metrics, final, m = matrix.train_plan(args, config, tag, 1, "full-shard", 0, extra_weights,
                                                  data, run_extra=flags, seq=seq)
            plain_metrics = os.path.join(args.work, "%s.w1.full-shard.jsonl" % model)
            plain_weights = os.path.join(args.work, "%s.w1.full-shard.safetensors" % model)
            same = [(x["loss"], x["grad_norm"]) for x in m] == \
                [(x["loss"], x["grad_norm"]) for x in read_metrics(plain_metrics)]
            loss_diff, w_diff, problem = compare(plain_metrics, metrics, plain_weights, final, tol=0.0)
            if problem is None and not same:
                problem = "grad norms differ"
            report(model, 1, "+decoder copy, heads", loss_diff, w_diff, "identical" if same else "",
                   problem is None, problem)

    # bf16 compute against the bf16-rounding reference, with bounds from the
    # spread of its correct alternatives measured here (matrix.check_bf16_compute),
    # and an f32-compute control that must fall outside them.
    for model in args.models.split(","):
        data, flags, _, seq = inputs(args, model)
        weights = os.path.join(args.work, model + ".init.safetensors")
        cases = [(w, st, sh, "bf16", ["--param-dtype", "bf16"])
                 for w, st, sh in ((1, "full-shard", 0), (2, "full-shard", 0), (4, "hybrid-shard", 2))]
        cases.append((2, "full-shard", 0, "f32", ["--param-dtype", "bf16", "--compute-dtype", "f32"]))
        # More terms a step: a step-1 loss is a mean over few terms (bert's
        # masked tokens, vit's 12 images), so at the matrix's batch a single
        # bf16 flip in the worst place moves it past the whole gap of f32
        # compute (bert: 5.6e-6 against 4.1e-6; vit: 4.5e-5 against 5.3e-5)
        # and the bounds could barely tell the two apart; with n times the
        # terms one flip's step is n times smaller. vit at 48 images a step;
        # bert at sequence 64 (one flip 2.5e-6, f32 compute 3.9e-6 and 2.9x
        # the grad-norm bound): at 128 its step-1 grad norm sat at 0.87 of
        # its bound (2.7e-4, a difference of rounding placement that none of
        # the alternatives models; the token types' gradient, a sum over
        # every token, is 16% of the norm).
        seq4, batch4 = (64, GLOBAL_BATCH) if model.startswith("bert") else (seq, 4 * GLOBAL_BATCH)
        checks, failed = matrix.check_bf16_compute(args, data, model, weights, cases,
                                                   run_flags=flags, seq=seq4, batch=batch4)
        total += checks
        failures += failed
    print("%d of %d runs ok; largest f32 loss gap %.3g, weight gap %.3g" % (
        total - failures, total, worst["loss"], worst["weight"]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
