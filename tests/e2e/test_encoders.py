#!/usr/bin/env python3
"""Checks the BERT and ViT references of encoders.py before fsdp is compared
with them:

- the published configs of models/ give the published parameter counts;
- ViTForImageClassification equals torchvision's VisionTransformer (an
  independent implementation of the same model) on the same weights, output
  and gradients;
- a BERT layer equals torch.nn.TransformerEncoderLayer (post-LN, erf GELU)
  on the same weights;
- splitmix64 gives SplitMix64's published first outputs, and the masked-LM
  selection picks about 3 tokens in 20;
- the image normalisation and the row-major patch order agree with a
  convolution of stride = kernel = patch;
- the training loop of encoder_reference.py: f32 and f64 agree, gradient
  accumulation changes nothing, the masked loss is HF's, and the loss falls
  on GPL-3 bytes (bert-tiny) and on make_images.py's shapes (vit-tiny).

usage: test_encoders.py   (exit 0: all pass)
"""
import functools
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bounds  # noqa: E402
import encoders  # noqa: E402
import models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def config(name):
    cfg = json.load(open(os.path.join(ROOT, "models", name, "config.json")))
    for k in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        cfg[k] = 0.0  # the published BERT configs set 0.1; fsdp trains without
    return cfg


# Published counts: BertForMaskedLM (no pooler; the decoder tied, its bias
# cls.predictions.bias) and ViTForImageClassification (no pooler, 1000
# classes), as transformers' num_parameters() and timm's vit_*_patch16_224
# report them.
PUBLISHED = {
    "bert-base-uncased": 109514298,
    "bert-large-uncased": 335174458,
    "vit-base-patch16-224": 86567656,
    "vit-large-patch16-224": 304326632,
}
for name, count in PUBLISHED.items():
    m = encoders.build_encoder(config(name))
    n = sum(p.numel() for p in m.parameters())
    check(n == count, f"{name}: {n:,} parameters (published {count:,})")
    del m


def init(model, seed):
    models.init_weights(model, seed, std=0.2)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # non-trivial norms and biases, so that a swap shows
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model


# ViT against torchvision.
from torchvision.models.vision_transformer import VisionTransformer  # noqa: E402

cfg = config("vit-tiny")
ours = init(encoders.ViTForImageClassification(cfg, torch.float64), 7)
d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
tv = VisionTransformer(image_size=cfg["image_size"], patch_size=cfg["patch_size"], num_layers=L,
                       num_heads=cfg["num_attention_heads"], hidden_dim=d,
                       mlp_dim=cfg["intermediate_size"], num_classes=encoders.vit_classes(cfg),
                       norm_layer=functools.partial(torch.nn.LayerNorm, eps=cfg["layer_norm_eps"])).double()
sd = dict(ours.named_parameters())
mapped = {
    "class_token": sd["vit.embeddings.cls_token"],
    "conv_proj.weight": sd["vit.embeddings.patch_embeddings.projection.weight"],
    "conv_proj.bias": sd["vit.embeddings.patch_embeddings.projection.bias"],
    "encoder.pos_embedding": sd["vit.embeddings.position_embeddings"],
    "encoder.ln.weight": sd["vit.layernorm.weight"], "encoder.ln.bias": sd["vit.layernorm.bias"],
    "heads.head.weight": sd["classifier.weight"], "heads.head.bias": sd["classifier.bias"],
}
for i in range(L):
    h, t = f"vit.encoder.layer.{i}.", f"encoder.layers.encoder_layer_{i}."
    a = h + "attention.attention."
    mapped.update({
        t + "ln_1.weight": sd[h + "layernorm_before.weight"], t + "ln_1.bias": sd[h + "layernorm_before.bias"],
        t + "ln_2.weight": sd[h + "layernorm_after.weight"], t + "ln_2.bias": sd[h + "layernorm_after.bias"],
        t + "self_attention.in_proj_weight": torch.cat([sd[a + n + ".weight"] for n in ("query", "key", "value")]),
        t + "self_attention.in_proj_bias": torch.cat([sd[a + n + ".bias"] for n in ("query", "key", "value")]),
        t + "self_attention.out_proj.weight": sd[h + "attention.output.dense.weight"],
        t + "self_attention.out_proj.bias": sd[h + "attention.output.dense.bias"],
        t + "mlp.0.weight": sd[h + "intermediate.dense.weight"], t + "mlp.0.bias": sd[h + "intermediate.dense.bias"],
        t + "mlp.3.weight": sd[h + "output.dense.weight"], t + "mlp.3.bias": sd[h + "output.dense.bias"],
    })
missing = set(tv.state_dict()) - set(mapped)
check(not missing, f"every torchvision ViT tensor mapped (missing: {sorted(missing)})")
tv.load_state_dict({k: v.detach().clone() for k, v in mapped.items()}, strict=False)
rng = np.random.default_rng(3)
images = rng.integers(0, 256, size=(3, cfg["image_size"], cfg["image_size"], 3), dtype=np.uint8)
x = encoders.normalise_images(images).double()
labels = torch.tensor([1, 4, 9])
lo = torch.nn.functional.cross_entropy(ours(x), labels)
lt = torch.nn.functional.cross_entropy(tv(x), labels)
lo.backward()
lt.backward()
check(abs(lo.item() - lt.item()) < 1e-12 * abs(lt.item()) + 1e-12,
      f"ViT loss equals torchvision's: {lo.item():.15f} vs {lt.item():.15f}")
gap = max((sd[h].grad - dict(tv.named_parameters())[k].grad).abs().max().item()
          for k, h in [("conv_proj.weight", "vit.embeddings.patch_embeddings.projection.weight"),
                       ("class_token", "vit.embeddings.cls_token"),
                       ("encoder.pos_embedding", "vit.embeddings.position_embeddings"),
                       ("heads.head.weight", "classifier.weight")])
check(gap < 1e-12, f"ViT gradients equal torchvision's (max gap {gap:.1e})")

# The patch order: a linear over each patch's (C, ph, pw) values, patches in
# row-major order, equals the convolution.
p = cfg["patch_size"]
W = sd["vit.embeddings.patch_embeddings.projection.weight"].detach()
conv = torch.nn.functional.conv2d(x, W, stride=p).flatten(2).transpose(1, 2)
N, C, H, Wd = x.shape
patches = x.reshape(N, C, H // p, p, Wd // p, p).permute(0, 2, 4, 1, 3, 5).reshape(N, -1, C * p * p)
lin = patches @ W.reshape(W.shape[0], -1).t()
check(torch.allclose(conv, lin, rtol=0, atol=1e-12), "patches x flattened kernel equal the convolution")
check(abs(x.min().item() + 1) < 1e-12 or x.min().item() >= -1, "pixels normalised into [-1, 1]")
check(encoders.normalise_images(np.full((1, 1, 1, 1), 255, np.uint8)).item() == 1.0
      and encoders.normalise_images(np.zeros((1, 1, 1, 1), np.uint8)).item() == -1.0,
      "(x/255 - 0.5)/0.5 maps 0 to -1 and 255 to 1")

# A BERT layer against torch's TransformerEncoderLayer (post-LN).
cfg = config("bert-tiny")
bert = init(encoders.BertForMaskedLM(cfg, torch.float64), 11)
layer = bert.bert.encoder.layer[0]
ref = torch.nn.TransformerEncoderLayer(cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"],
                                       dropout=0.0, activation="gelu", layer_norm_eps=cfg["layer_norm_eps"],
                                       batch_first=True, norm_first=False).double()
s = layer.attention.self
with torch.no_grad():
    ref.self_attn.in_proj_weight.copy_(torch.cat([s.query.weight, s.key.weight, s.value.weight]))
    ref.self_attn.in_proj_bias.copy_(torch.cat([s.query.bias, s.key.bias, s.value.bias]))
    ref.self_attn.out_proj.weight.copy_(layer.attention.output.dense.weight)
    ref.self_attn.out_proj.bias.copy_(layer.attention.output.dense.bias)
    ref.norm1.weight.copy_(layer.attention.output.LayerNorm.weight)
    ref.norm1.bias.copy_(layer.attention.output.LayerNorm.bias)
    ref.linear1.weight.copy_(layer.intermediate.dense.weight)
    ref.linear1.bias.copy_(layer.intermediate.dense.bias)
    ref.linear2.weight.copy_(layer.output.dense.weight)
    ref.linear2.bias.copy_(layer.output.dense.bias)
    ref.norm2.weight.copy_(layer.output.LayerNorm.weight)
    ref.norm2.bias.copy_(layer.output.LayerNorm.bias)
h = torch.randn(2, 9, cfg["hidden_size"], dtype=torch.float64, generator=torch.Generator().manual_seed(5))
ref.train(False)  # no fast path differences: eval uses the same maths in f64
gap = (layer(h, cfg["layer_norm_eps"]) - ref(h)).abs().max().item()
check(gap < 1e-10, f"BERT layer equals nn.TransformerEncoderLayer(norm_first=False, gelu) (gap {gap:.1e})")

# splitmix64: SplitMix64 seeded with 0 first returns 0xE220A8397B1DCDAF.
import batches_ref  # noqa: E402

z = batches_ref.splitmix64(0)
check(z == 0xE220A8397B1DCDAF, f"splitmix64(0) = {z:#018x}")
sel = encoders.mlm_selected(np.arange(200_000))
frac = sel.mean()
check(abs(frac - 0.15) < 0.003, f"masked-LM selection picks {frac:.4f} of tokens (3/20 = 0.15)")
tokens = np.arange(100) % 50
inp, tgt, count = encoders.mlm_batch(tokens, [0, 40], 20, mask_id=7)
want = encoders.mlm_selected(np.concatenate([np.arange(20), np.arange(40, 60)])).sum()
check(count == want and (inp[tgt != -100] == 7).all() and (tgt != -100).sum().item() == count,
      f"masked-LM batch: {count} selected, inputs masked, others ignored")

# A BERT forward on masked inputs runs and its loss is finite.
logits = bert(inp)
loss = encoders.mlm_loss(logits, tgt, count)
check(bool(torch.isfinite(loss)), f"BERT masked-LM loss {loss.item():.4f}")

# The training loop (encoder_reference.train) as fsdp-run trains: f32 against
# f64, accumulation against none, the masked loss as HF computes it for one
# batch, and the loss falling on real data (GPL-3 bytes; make_images.py's
# shapes).
import argparse  # noqa: E402

import encoder_reference  # noqa: E402
import make_images  # noqa: E402

OPT = argparse.Namespace(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
                         clip_grad_norm=0.0, lr_schedule="constant", warmup_steps=0, min_lr=0.0)
text = np.frombuffer(open("/usr/share/common-licenses/GPL-3", "rb").read(), np.uint8).astype(np.int64)
shape_images, shape_labels = make_images.shapes(np.random.default_rng(5), 96, 16, 16, 10)


def trained(name, dtype, steps, G, A=1, opt=OPT):
    cfg = config(name)
    model = models.init_weights(encoders.build_encoder(cfg, dtype), 7, 0.02)
    if name == "bert-tiny":
        data = encoder_reference.MaskedText(text, 16, 256)
    else:
        data = encoder_reference.Images(shape_images, shape_labels, dtype)
    return model, data, encoder_reference.train(model, data, opt, steps, G, A)


for name in ("bert-tiny", "vit-tiny"):
    _, _, m32 = trained(name, torch.float32, 3, 4)
    m64model, data, m64 = trained(name, torch.float64, 3, 4)
    _, _, m64a = trained(name, torch.float64, 3, 4, 2)
    gap = max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(m32, m64))
    # Analysed: the loss of 3 steps sits at the end of about 8 reductions of
    # at most 512 terms (the vocabulary's log-sum-exp, the hidden and
    # intermediate matmuls, the norms), each off by about sqrt(512) f32 ulps
    # in a random walk of roundings (1.3e-6): 8 of them, 1e-5 (bounds.U32).
    check(gap < 8 * 512 ** 0.5 * bounds.U32, f"{name}: 3 steps in f32 and f64 agree (loss gap {gap:.1e})")
    gap = max(abs(a["loss"] - b["loss"]) / b["loss"] + abs(a["grad_norm"] - b["grad_norm"])
              for a, b in zip(m64a, m64))
    # Analysed: the same sums in f64 in another grouping, ~1e4 f64 ulps at most.
    check(gap < 1e-12, f"{name}: grad-accum 2 gives the losses and norms of 1 (gap {gap:.1e})")
    steps = 30
    _, _, m = trained(name, torch.float32, steps, 12, 1, argparse.Namespace(**{**vars(OPT), "lr": 3e-3}))
    first, last = m[0]["loss"], sum(x["loss"] for x in m[-5:]) / 5
    check(last < 0.9 * first, f"{name}: the loss falls over {steps} steps ({first:.3f} -> {last:.3f})")

# The masked loss of one batch is HF's (mean cross-entropy over the targets
# not -100), and a step's divisor the batch's selected count.
cfg = config("bert-tiny")
model = models.init_weights(encoders.BertForMaskedLM(cfg, torch.float64), 3, 0.02)
data = encoder_reference.MaskedText(text, 16, 256)
x, y, count = data.batch(2, 6)
got = encoder_reference.batch_loss(model, data, x, y, count).item()
want = torch.nn.functional.cross_entropy(model(x).reshape(-1, cfg["vocab_size"]), y.reshape(-1)).item()
check(abs(got - want) < 1e-12 and count == int((y != -100).sum()),
      f"masked loss of a batch is HF's ({got:.12f}, {count} selected)")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
