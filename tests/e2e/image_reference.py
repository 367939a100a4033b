#!/usr/bin/python3
"""Single-process PyTorch reference of the image program make_image_program.py
writes: a classifier whose logits are conv2d(image, kernel) with kernel =
stride = the whole image (HF's patch embedding, one patch), trained on the
images and labels as docs/training-semantics.md says fsdp-run takes them.

usage: image_reference.py --images I.npy --labels L.npy --weights INIT.safetensors
                          --steps T --global-batch G [--lr X] [--weight-decay X]
                          [--eval-images I.npy --eval-labels L.npy]
                          --metrics OUT.jsonl --save-weights OUT.safetensors

Sample g of step t is image (t*G + g) mod N; a pixel enters as
(x.float()/255 - 0.5)/0.5; the loss is the mean cross-entropy over the G
images; AdamW as fsdp-run's defaults (betas 0.9, 0.95, eps 1e-8, weight decay
0.1 on the 2-D weight). The weight "classifier.weight" is [K, C*H*W] in the
file and viewed as the Conv2d kernel [K, C, H, W]. eval_loss (after the last
step) is the mean loss over the first G samples of the eval images.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def batch(images, labels, G, t, dtype=torch.float32):
    idx = [(t * G + g) % len(images) for g in range(G)]
    x = torch.from_numpy(images[idx]).permute(0, 3, 1, 2)
    x = (x.to(dtype) / 255 - 0.5) / 0.5
    return x, torch.from_numpy(labels[idx].astype(np.int64))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--eval-images")
    ap.add_argument("--eval-labels")
    ap.add_argument("--weights", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--global-batch", type=int, required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--save-weights", required=True)
    ap.add_argument("--dtype", choices=("f32", "f64"), default="f32",
                    help="f64: the same reference in float64, whose gap to the f32 one bounds "
                         "fsdp's (compare.py --bound-from)")
    a = ap.parse_args(argv)
    dtype = torch.float64 if a.dtype == "f64" else torch.float32
    images, labels = np.load(a.images), np.load(a.labels)
    _, H, W, C = images.shape
    flat = safetensors_io.load(a.weights)["classifier.weight"].to(dtype)
    kernel = torch.nn.Parameter(flat.reshape(flat.shape[0], C, H, W).clone())
    opt = torch.optim.AdamW([kernel], lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=a.weight_decay, foreach=False)
    G = a.global_batch
    with open(a.metrics, "w") as out:
        for t in range(a.steps):
            x, y = batch(images, labels, G, t, dtype)
            loss = F.cross_entropy(F.conv2d(x, kernel, stride=(H, W)).flatten(1), y)
            opt.zero_grad()
            loss.backward()
            norm = float(kernel.grad.norm())
            opt.step()
            row = {"step": t + 1, "loss": float(loss), "grad_norm": norm}
            if a.eval_images and t + 1 == a.steps:
                ex, ey = batch(np.load(a.eval_images), np.load(a.eval_labels), G, 0, dtype)
                with torch.no_grad():
                    row["eval_loss"] = float(F.cross_entropy(
                        F.conv2d(ex, kernel, stride=(H, W)).flatten(1), ey))
            out.write(json.dumps(row) + "\n")
    safetensors_io.save({"classifier.weight": kernel.detach().reshape(flat.shape).float().contiguous()},
                        a.save_weights)


if __name__ == "__main__":
    main()
