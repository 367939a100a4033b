"""The `init` and `train` commands of the float64 PyTorch references of the
hand-written test graphs (vit_like.py, token_types.py): one copy of their
initialisation, optimizer and loop.

init: every tensor normal(0, 1) * 0.5 from torch's generator seeded with
--seed (drawn in float64, stored as f32), norm weights 1 + 0.1 of that.
train: the weights in --dtype (f64 by default; f32 gives the f32 reference
whose gap to the f64 one bounds fsdp's, compare.py --bound-from), AdamW as torch's (betas 0.9, 0.95, weight
decay 0.1 on tensors of two or more dimensions, --eps), one line of metrics
a step (loss, gradient norm), and the final weights as f32.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def main(argv, shapes, is_norm_weight, step_loss, seq_len=False, check=None):
    """shapes: name -> shape; is_norm_weight(name); step_loss(w, data, step, G, S)
    the step's loss from the uint16 data (S None without --seq-len);
    check(w) runs after each backward."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("out")
    i.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("train")
    for k in ("--weights", "--data", "--metrics"):
        t.add_argument(k, required=True)
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--global-batch", type=int, required=True)
    if seq_len:
        t.add_argument("--seq-len", type=int, required=True)
    t.add_argument("--lr", type=float, required=True)
    t.add_argument("--save-weights")
    t.add_argument("--eps", type=float, default=1e-8)
    t.add_argument("--dtype", choices=("f32", "f64"), default="f64")
    a = ap.parse_args(argv)
    if a.cmd == "init":
        g = torch.Generator().manual_seed(a.seed)
        ws = {n: torch.randn(s, generator=g, dtype=torch.float64).float() * 0.5 for n, s in shapes.items()}
        for n in ws:
            if is_norm_weight(n):
                ws[n] = 1 + 0.1 * ws[n]
        safetensors_io.save(ws, a.out)
        return 0
    loaded = safetensors_io.load(a.weights)
    dtype = torch.float64 if a.dtype == "f64" else torch.float32
    w = {n: loaded[n].to(dtype).clone().requires_grad_(True) for n in shapes}
    decay = [p for p in w.values() if p.dim() >= 2]
    rest = [p for p in w.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=a.eps, foreach=False)
    data = np.fromfile(a.data, dtype="<u2").astype(np.int64)
    with open(a.metrics, "w") as out:
        for step in range(a.steps):
            opt.zero_grad()
            loss = step_loss(w, data, step, a.global_batch, a.seq_len if seq_len else None)
            loss.backward()
            if check:
                check(w)
            norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in w.values()))
            opt.step()
            out.write(json.dumps({"step": step + 1, "loss": float(loss), "grad_norm": norm}) + "\n")
    if a.save_weights:
        safetensors_io.save({n: p.detach().float() for n, p in w.items()}, a.save_weights)
    return 0
