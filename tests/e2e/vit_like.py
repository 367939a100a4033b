#!/usr/bin/python3
"""The ViT-like test graph (tests/lit/Inputs/vit-like-tiny.json) in PyTorch,
built from HF ViT's pieces, to check fsdp's ViT ops end to end.

usage: vit_like.py init OUT.safetensors [--seed S]
       vit_like.py train --weights W.safetensors --data FILE --steps K
                   --global-batch G --lr X --metrics OUT.jsonl
                   [--save-weights OUT.safetensors] [--eps 1e-8]

Each sample is one "image" of one patch, C x p x p = 3 x 2 x 2: the row of
`pixels.weight` its token picks, in (C, ph, pw) order. The patch embedding is
HF's Conv2d (kernel = stride = p) over that image, so fsdp's out_in linear of
the 4-D kernel is checked against a convolution, not against a flat matmul;
then the class token before the patch and the positions added (HF's
ViTEmbeddings), one pre-LN ViT layer (encoders.ViTLayer's order) with causal
attention and tanh GELU (the ops fsdp has today), the final LayerNorm, the
classifier on the class token's row (HF's ViTForImageClassification) plus the
patch embedding (the graph's add, so that the patch reaches the loss under
causal attention), and the cross-entropy against the next token. Sample g of step t is the token at
((t*G + g)*1) mod (n - 2) and its target the one after (docs/training-semantics.md). AdamW as
torch's, decay on 2+ dimensions; computed in float64.
"""
import os
import sys

import math
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_graph_ref  # noqa: E402

D, H, C, P, V, FF, EPS = 16, 2, 3, 2, 10, 32, 1e-12
L = "vit.encoder.layer.0."
SHAPES = {
    "pixels.weight": (V, C * P * P),
    "vit.embeddings.patch_embeddings.projection.weight": (D, C, P, P),
    "vit.embeddings.patch_embeddings.projection.bias": (D,),
    "vit.embeddings.cls_token": (1, 1, D),
    "vit.embeddings.position_embeddings": (1, 2, D),
    L + "layernorm_before.weight": (D,), L + "layernorm_before.bias": (D,),
    L + "attention.attention.query.weight": (D, D), L + "attention.attention.query.bias": (D,),
    L + "attention.attention.key.weight": (D, D), L + "attention.attention.key.bias": (D,),
    L + "attention.attention.value.weight": (D, D), L + "attention.attention.value.bias": (D,),
    L + "attention.output.dense.weight": (D, D), L + "attention.output.dense.bias": (D,),
    L + "layernorm_after.weight": (D,), L + "layernorm_after.bias": (D,),
    L + "intermediate.dense.weight": (FF, D), L + "intermediate.dense.bias": (FF,),
    L + "output.dense.weight": (D, FF), L + "output.dense.bias": (D,),
    "vit.layernorm.weight": (D,), "vit.layernorm.bias": (D,),
    "classifier.weight": (V, D), "classifier.bias": (V,),
}


def forward(w, tokens):
    B = tokens.shape[0]
    img = w["pixels.weight"][tokens].view(B, C, P, P)  # (C, ph, pw) order
    x = F.conv2d(img, w["vit.embeddings.patch_embeddings.projection.weight"],
                 w["vit.embeddings.patch_embeddings.projection.bias"], stride=P)
    x = x.flatten(2).transpose(1, 2)  # [B, patches, D], HF's ViTPatchEmbeddings
    patch = x
    x = torch.cat([w["vit.embeddings.cls_token"].expand(B, -1, -1), x], dim=1)
    x = x + w["vit.embeddings.position_embeddings"]
    S = x.shape[1]

    def ln(name, v):
        return F.layer_norm(v, (D,), w[name + ".weight"], w[name + ".bias"], EPS)

    def lin(name, v):
        return F.linear(v, w[name + ".weight"], w[name + ".bias"])

    a = ln(L + "layernorm_before", x)
    q, k, v = (lin(L + "attention.attention." + n, a).view(B, S, H, D // H).transpose(1, 2)
               for n in ("query", "key", "value"))
    s = q @ k.transpose(2, 3) / math.sqrt(D // H)
    s = s.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
    o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, S, D)
    x = x + lin(L + "attention.output.dense", o)
    h = F.gelu(lin(L + "intermediate.dense", ln(L + "layernorm_after", x)), approximate="tanh")
    x = x + lin(L + "output.dense", h)
    x = ln("vit.layernorm", x)
    # The class token's row, plus the patch embedding (the graph's add: under
    # causal attention the class token sees only itself).
    return lin("classifier", x[:, 0, :] + patch[:, 0, :])  # [B, V]


def step_loss(w, data, step, G, S):
    n = len(data)
    starts = [((step * G + g) * 1) % (n - 2) for g in range(G)]
    tokens = torch.tensor([data[s] for s in starts])
    targets = torch.tensor([data[s + 1] for s in starts])
    return F.cross_entropy(forward(w, tokens), targets)


def is_norm_weight(n):
    return n.endswith("layernorm_before.weight") or n.endswith("layernorm_after.weight") or \
        n == "vit.layernorm.weight"


def main(argv=None):
    return tiny_graph_ref.main(argv, SHAPES, is_norm_weight, step_loss)


if __name__ == "__main__":
    sys.exit(main())
