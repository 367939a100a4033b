#!/usr/bin/env bash
# The encoders, as demo.sh does GPT-2: install, build, then plan and train on 4
# CPU ranks (full-shard)
#  - ViT (models/vit-tiny) on generated 16x16 images of labelled shapes (5
#    shapes x 2 colours, tests/e2e/make_images.py --shapes), evaluated on
#    other shapes: eval loss, and accuracy from the saved weights;
#  - BERT (models/bert-tiny) masked-LM on real text (the GPL-3 that every
#    Debian system ships, as bytes), evaluated on the Apache-2.0 text (it
#    reaches about the bytes' unigram entropy in this run);
# printing the loss falling, the peak memory per rank measured beside the
# plan's prediction, and the first steps' losses beside single-process
# PyTorch training the same model on the same batches
# (tests/e2e/encoder_reference.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
D=build/demo-encoders
PY=/usr/bin/python3
mkdir -p "$D"
run() { echo; echo "== $*"; "$@"; }

# ---- ViT on shapes: 4096 training images, 512 held out; 64 images a step.
$PY tests/e2e/make_images.py "$D/shapes.npy" "$D/shapes-labels.npy" --shapes \
  --count 4096 --height 16 --width 16 --seed 1
$PY tests/e2e/make_images.py "$D/shapes-eval.npy" "$D/shapes-eval-labels.npy" --shapes \
  --count 512 --height 16 --width 16 --seed 2
$PY tests/e2e/make_weights.py models/vit-tiny/config.json "$D/vit-init.safetensors" --seed 1
run build/bin/fsdp-plan models/vit-tiny/config.json --world-size 4 --micro-batch 16 \
  --strategy full-shard --summary -o "$D/vit.json"
run build/bin/fsdp-run "$D/vit.json" --weights "$D/vit-init.safetensors" \
  --data "$D/shapes.npy" --labels "$D/shapes-labels.npy" \
  --eval-data "$D/shapes-eval.npy" --eval-labels "$D/shapes-eval-labels.npy" \
  --eval-every 300 --eval-batches 8 --steps 1500 --lr 2e-3 --clip-grad-norm 1.0 \
  --log-every 100 --metrics "$D/vit.jsonl" --save-weights "$D/vit-final.safetensors"

# ---- BERT masked-LM on bytes: mask token 256 (above the bytes, below the
# vocabulary of 503); 4 x 8 sequences of 64 tokens a step.
$PY tests/e2e/make_data.py "$D/gpl3.bin" --text /usr/share/common-licenses/GPL-3
$PY tests/e2e/make_data.py "$D/apache2.bin" --text /usr/share/common-licenses/Apache-2.0
$PY tests/e2e/make_weights.py models/bert-tiny/config.json "$D/bert-init.safetensors" --seed 1
run build/bin/fsdp-plan models/bert-tiny/config.json --world-size 4 --micro-batch 8 --seq-len 64 \
  --strategy full-shard --summary -o "$D/bert.json"
run build/bin/fsdp-run "$D/bert.json" --weights "$D/bert-init.safetensors" --data "$D/gpl3.bin" \
  --mask-token-id 256 --eval-data "$D/apache2.bin" --eval-every 200 --eval-batches 4 \
  --steps 1000 --lr 2e-3 --clip-grad-norm 1.0 --log-every 100 \
  --metrics "$D/bert.jsonl" --save-weights "$D/bert-final.safetensors"

$PY - "$D" <<'PY'
import argparse, json, os, sys
sys.path.insert(0, "tests/e2e")
import numpy as np
import torch
import encoder_reference, encoders, models, reference

D = sys.argv[1]
mib = lambda b: "%.2f MiB" % (b / 2**20)
CHECK = 5  # steps of PyTorch beside fsdp's
for name, model in (("ViT", "vit-tiny"), ("BERT", "bert-tiny")):
    short = model.split("-")[0]
    steps = [json.loads(l) for l in open(os.path.join(D, short + ".jsonl"))]
    evals = [s for s in steps if "eval_loss" in s]
    print()
    print("%s: loss %.3f at step 1 -> %.3f at step %d; eval loss %s" % (
        name, steps[0]["loss"], steps[-1]["loss"], steps[-1]["step"],
        " -> ".join("%.3f" % s["eval_loss"] for s in evals)))
    print("%s: memory per rank %s measured, %s predicted" % (
        name, mib(steps[-1]["peak_bytes"]), mib(steps[-1]["predicted_peak_bytes"])))
    # The same model, weights and batches in single-process PyTorch.
    cfg = models.load_config("models/%s/config.json" % model)
    torch_model = encoders.build_encoder(cfg)
    encoder_reference.load_weights(torch_model, os.path.join(D, short + "-init.safetensors"))
    if short == "vit":
        data = encoder_reference.Images(np.load(os.path.join(D, "shapes.npy")),
                                        np.load(os.path.join(D, "shapes-labels.npy")))
        G = 64
    else:
        data = encoder_reference.MaskedText(
            reference.load_tokens(os.path.join(D, "gpl3.bin"), cfg["vocab_size"]), 64, 256)
        G = 32
    opt = argparse.Namespace(lr=2e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
                             clip_grad_norm=1.0, lr_schedule="constant", warmup_steps=0, min_lr=0.0)
    ref = encoder_reference.train(torch_model, data, opt, CHECK, G)
    gap = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(ref, steps))
    print("%s: steps 1-%d in PyTorch: losses %s; fsdp's within %.1e (relative)" % (
        name, CHECK, " ".join("%.4f" % r["loss"] for r in ref), gap))
    if short == "vit":
        final = encoders.build_encoder(cfg)
        encoder_reference.load_weights(final, os.path.join(D, "vit-final.safetensors"))
        images = np.load(os.path.join(D, "shapes-eval.npy"))
        labels = np.load(os.path.join(D, "shapes-eval-labels.npy"))
        with torch.no_grad():
            pred = final(encoders.normalise_images(images)).argmax(-1).numpy()
        print("ViT: accuracy on the %d held-out shapes %.1f%% (chance 10%%)" % (
            len(labels), 100.0 * (pred == labels).mean()))
    else:
        counts = np.bincount(data.tokens)
        p = counts[counts > 0] / counts.sum()
        print("BERT: from ln(503) = %.2f (uniform) to about the text's byte entropy, %.2f nats "
              "(each masked byte guessed by its frequency); below it takes context, and "
              "35 KB of text is soon memorised" % (np.log(cfg["vocab_size"]), -(p * np.log(p)).sum()))
PY
