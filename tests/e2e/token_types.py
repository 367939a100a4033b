#!/usr/bin/python3
"""The token-type test graph (tests/lit/Inputs/token-types-tiny.json) in
PyTorch, to check nn.token_type_ids end to end.

usage: token_types.py init OUT.safetensors [--seed S]
       token_types.py train --weights W.safetensors --data FILE --steps K
                   --global-batch G --seq-len S --lr X --metrics OUT.jsonl
                   [--save-weights OUT.safetensors]

HF BertEmbeddings with its default token types (all 0): word embeddings plus
token-type embeddings (a [2, D] table, of which only row 0 is read), plus
position embeddings 0..S-1, then LayerNorm (eps 1e-12); a BERT block with no
attention (intermediate dense, exact GELU, output dense, residual,
LayerNorm); the decoder tied to the word embeddings plus
`cls.predictions.bias`; the cross-entropy against the next token. Sample g
of step t is the S tokens from ((t*G + g)*S) mod (n - S - 1), its targets the
S after each (docs/program-format.md, Inputs); the loss is the mean over the
G*S tokens. AdamW as torch's, decay on 2+ dimensions; computed in float64.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

V, D, MAX_SEQ, TYPES, FF, EPS = 10, 8, 16, 2, 16, 1e-12
E, L = "bert.embeddings.", "bert.encoder.layer.0."
SHAPES = {
    E + "word_embeddings.weight": (V, D),
    E + "position_embeddings.weight": (MAX_SEQ, D),
    E + "token_type_embeddings.weight": (TYPES, D),
    E + "LayerNorm.weight": (D,), E + "LayerNorm.bias": (D,),
    L + "intermediate.dense.weight": (FF, D), L + "intermediate.dense.bias": (FF,),
    L + "output.dense.weight": (D, FF), L + "output.dense.bias": (D,),
    L + "output.LayerNorm.weight": (D,), L + "output.LayerNorm.bias": (D,),
    "cls.predictions.bias": (V,),
}


def forward(w, tokens):
    B, S = tokens.shape

    def ln(name, v):
        return F.layer_norm(v, (D,), w[name + ".weight"], w[name + ".bias"], EPS)

    def lin(name, v):
        return F.linear(v, w[name + ".weight"], w[name + ".bias"])

    # HF BertEmbeddings: token_type_ids default to zeros.
    token_type_ids = torch.zeros_like(tokens)
    positions = torch.arange(S).expand(B, S)
    x = w[E + "word_embeddings.weight"][tokens] + w[E + "token_type_embeddings.weight"][token_type_ids]
    x = x + w[E + "position_embeddings.weight"][positions]
    x = ln(E + "LayerNorm", x)
    h = F.gelu(lin(L + "intermediate.dense", x), approximate="none")
    x = ln(L + "output.LayerNorm", lin(L + "output.dense", h) + x)
    return F.linear(x, w[E + "word_embeddings.weight"], w["cls.predictions.bias"])  # [B, S, V]


def main(argv=None):
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
    t.add_argument("--seq-len", type=int, required=True)
    t.add_argument("--lr", type=float, required=True)
    t.add_argument("--save-weights")
    a = ap.parse_args(argv)
    if a.cmd == "init":
        g = torch.Generator().manual_seed(a.seed)
        ws = {n: torch.randn(s, generator=g, dtype=torch.float64).float() * 0.5 for n, s in SHAPES.items()}
        for n in ws:
            if n.endswith("LayerNorm.weight"):
                ws[n] = 1 + 0.1 * ws[n]
        safetensors_io.save(ws, a.out)
        return 0
    loaded = safetensors_io.load(a.weights)
    w = {n: loaded[n].to(torch.float64).clone().requires_grad_(True) for n in SHAPES}
    decay = [p for p in w.values() if p.dim() >= 2]
    rest = [p for p in w.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    data = np.fromfile(a.data, dtype="<u2").astype(np.int64)
    n, G, S = len(data), a.global_batch, a.seq_len
    with open(a.metrics, "w") as out:
        for step in range(a.steps):
            starts = [((step * G + g) * S) % (n - S - 1) for g in range(G)]
            tokens = torch.tensor(np.stack([data[s:s + S] for s in starts]))
            targets = torch.tensor(np.stack([data[s + 1:s + S + 1] for s in starts]))
            opt.zero_grad()
            loss = F.cross_entropy(forward(w, tokens).reshape(G * S, V), targets.reshape(G * S))
            loss.backward()
            # Row 1 of the token types is never read: its gradient is 0.
            assert float(w[E + "token_type_embeddings.weight"].grad[1].abs().sum()) == 0.0
            norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in w.values()))
            opt.step()
            out.write(json.dumps({"step": step + 1, "loss": float(loss), "grad_norm": norm}) + "\n")
    if a.save_weights:
        safetensors_io.save({n: p.detach().float() for n, p in w.items()}, a.save_weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
