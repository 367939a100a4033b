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
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_graph_ref  # noqa: E402

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


def step_loss(w, data, step, G, S):
    n = len(data)
    starts = [((step * G + g) * S) % (n - S - 1) for g in range(G)]
    tokens = torch.tensor(np.stack([data[s:s + S] for s in starts]))
    targets = torch.tensor(np.stack([data[s + 1:s + S + 1] for s in starts]))
    return F.cross_entropy(forward(w, tokens).reshape(G * S, V), targets.reshape(G * S))


def check(w):
    # Row 1 of the token types is never read: its gradient is 0.
    assert float(w[E + "token_type_embeddings.weight"].grad[1].abs().sum()) == 0.0


def main(argv=None):
    return tiny_graph_ref.main(argv, SHAPES, lambda n: n.endswith("LayerNorm.weight"), step_loss,
                               seq_len=True, check=check)


if __name__ == "__main__":
    sys.exit(main())
