"""Plain-torch BertForMaskedLM and ViTForImageClassification (forward only;
autograd does the rest), and the data rules of docs/training-semantics.md for them: the
masked-LM selection and the image normalisation.

Parameters carry exactly the names, shapes and layouts of transformers' state
dicts (nn.Linear weights [out, in], y = x @ W.T + b):

BERT (post-LN blocks, bidirectional attention, exact erf GELU):
  bert.embeddings.{word_embeddings [V,D], position_embeddings [P,D],
  token_type_embeddings [T,D]}.weight, bert.embeddings.LayerNorm.{weight,bias},
  bert.encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias},
  .attention.output.dense.{weight,bias}, .attention.output.LayerNorm.{weight,bias},
  .intermediate.dense.{weight [I,D], bias}, .output.dense.{weight [D,I], bias},
  .output.LayerNorm.{weight,bias};
  cls.predictions.transform.dense.{weight,bias},
  cls.predictions.transform.LayerNorm.{weight,bias}, cls.predictions.bias [V];
  the decoder is tied to the word embeddings (cls.predictions.decoder.weight
  is that tensor; its bias is cls.predictions.bias).
ViT (pre-LN blocks, bidirectional attention, exact erf GELU):
  vit.embeddings.cls_token [1,1,D], vit.embeddings.position_embeddings [1,P+1,D],
  vit.embeddings.patch_embeddings.projection.{weight [D,C,p,p], bias [D]},
  vit.encoder.layer.{i}.layernorm_before.{weight,bias},
  .attention.attention.{query,key,value}.{weight,bias},
  .attention.output.dense.{weight,bias}, .layernorm_after.{weight,bias},
  .intermediate.dense.{weight,bias}, .output.dense.{weight,bias};
  vit.layernorm.{weight,bias}, classifier.{weight [classes,D], bias}.

Config defaults follow transformers. R() rounds to bf16 where fsdp stores
bf16 under --compute-dtype bf16 (models.BF16_COMPUTE).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import batches_ref
import models
from models import ConfigError, _get, _Weight


def R(x):
    return models.R(x)


def _linear(lin, x):
    return R(F.linear(x, R(lin.weight), R(lin.bias)))


def _layer_norm(ln, x, eps):
    return R(F.layer_norm(x, (x.shape[-1],), R(ln.weight), R(ln.bias), eps))


def gelu_erf(x):
    """HF's "gelu": 0.5 x (1 + erf(x / sqrt 2))."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class SelfAttention(nn.Module):
    """query/key/value with biases; every query sees every key."""

    def __init__(self, d, heads, bias, dtype):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.query = _Weight((d, d), (d,) if bias else None, dtype)
        self.key = _Weight((d, d), (d,) if bias else None, dtype)
        self.value = _Weight((d, d), (d,) if bias else None, dtype)

    def forward(self, xq, xk=None, xv=None):
        """xq, xk, xv: the input, or its three uses (models.uses)."""
        if xk is None:
            xq, xk, xv = models.uses(xq, 3)
        B, S, D = xq.shape

        def split(lin, x):
            return _linear(lin, x).view(B, S, self.heads, self.hd).transpose(1, 2)

        q, k, v = split(self.query, xq), split(self.key, xk), split(self.value, xv)
        att = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd), dim=-1)
        return R(torch.matmul(att, v)).transpose(1, 2).reshape(B, S, D)


def _check_encoder(cfg, family):
    d, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    if d % heads:
        raise ConfigError(f"hidden_size = {d} is not divisible by num_attention_heads = {heads}")
    act = _get(cfg, "hidden_act", "gelu")
    if act != "gelu":
        raise ConfigError(f"hidden_act '{act}' is not supported ({family}: gelu, exact erf)")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if _get(cfg, key, 0.1 if family == "bert" else 0.0) != 0:
            raise ConfigError(f"{key} = {cfg[key]}: dropout is not supported")
    return d, heads


# ---------------------------------------------------------------------------- BERT

class BertLayer(nn.Module):
    def __init__(self, d, heads, inter, dtype):
        super().__init__()
        self.attention = nn.Module()
        self.attention.self = SelfAttention(d, heads, True, dtype)
        self.attention.output = nn.Module()
        self.attention.output.dense = _Weight((d, d), (d,), dtype)
        self.attention.output.LayerNorm = _Weight((d,), (d,), dtype)
        self.intermediate = nn.Module()
        self.intermediate.dense = _Weight((inter, d), (inter,), dtype)
        self.output = nn.Module()
        self.output.dense = _Weight((d, inter), (d,), dtype)
        self.output.LayerNorm = _Weight((d,), (d,), dtype)

    def forward(self, x, eps):
        a = self.attention
        xq, xk, xv, xr = models.uses(x, 4)  # q, k, v, then the residual
        x = _layer_norm(a.output.LayerNorm, R(xr + _linear(a.output.dense, a.self(xq, xk, xv))), eps)
        h = R(gelu_erf(_linear(self.intermediate.dense, models.U(x))))
        return _layer_norm(self.output.LayerNorm, R(x + _linear(self.output.dense, h)), eps)


class BertForMaskedLM(nn.Module):
    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        d, heads = _check_encoder(cfg, "bert")
        if _get(cfg, "position_embedding_type", "absolute") != "absolute":
            raise ConfigError("position_embedding_type other than absolute is not supported")
        for key in ("is_decoder", "add_cross_attention"):
            if _get(cfg, key, False):
                raise ConfigError(f"{key} = true is not supported")
        if not _get(cfg, "tie_word_embeddings", True):
            raise ConfigError("tie_word_embeddings = false is not supported")
        V, P = int(cfg["vocab_size"]), int(_get(cfg, "max_position_embeddings", 512))
        T, inter = int(_get(cfg, "type_vocab_size", 2)), int(cfg["intermediate_size"])
        self.eps = float(_get(cfg, "layer_norm_eps", 1e-12))
        self.max_seq_len = P
        self.bert = nn.Module()
        e = self.bert.embeddings = nn.Module()
        e.word_embeddings = _Weight((V, d), None, dtype)
        e.position_embeddings = _Weight((P, d), None, dtype)
        e.token_type_embeddings = _Weight((T, d), None, dtype)
        e.LayerNorm = _Weight((d,), (d,), dtype)
        self.bert.encoder = nn.Module()
        self.bert.encoder.layer = nn.ModuleList(
            BertLayer(d, heads, inter, dtype) for _ in range(int(cfg["num_hidden_layers"])))
        self.cls = nn.Module()
        p = self.cls.predictions = nn.Module()
        p.transform = nn.Module()
        p.transform.dense = _Weight((d, d), (d,), dtype)
        p.transform.LayerNorm = _Weight((d,), (d,), dtype)
        p.bias = nn.Parameter(torch.empty(V, dtype=dtype))

    def forward(self, ids):
        B, S = ids.shape
        if S > self.max_seq_len:
            raise ValueError(f"sequence length {S} exceeds max_position_embeddings = {self.max_seq_len}")
        e = self.bert.embeddings
        # HF's order: words + token types (all 0: row 0 of the table, added
        # to every position), then + positions.
        x = R(R(e.word_embeddings.weight)[ids] + R(e.token_type_embeddings.weight)[0])
        x = R(x + R(R(e.position_embeddings.weight)[:S].unsqueeze(0)))
        x = _layer_norm(e.LayerNorm, x, self.eps)
        for layer in self.bert.encoder.layer:
            x = layer(x, self.eps)
        t = self.cls.predictions.transform
        h = _layer_norm(t.LayerNorm, R(gelu_erf(_linear(t.dense, x))), self.eps)
        return R(F.linear(h, R(e.word_embeddings.weight), R(self.cls.predictions.bias)))


def mlm_selected(positions):
    """True where a token at absolute file index p is selected
    (batches_ref.selected: splitmix64(p) mod 20 < 3), for an array of them."""
    pos = np.asarray(positions)
    return np.array([batches_ref.selected(int(p)) for p in pos.flat], dtype=bool).reshape(pos.shape)


def mlm_batch(tokens, starts, S, mask_id, ignore=batches_ref.IGNORE):
    """Inputs and targets of masked-LM samples of S tokens from each start:
    a selected token's input is mask_id, its target the original; other
    targets are `ignore`."""
    pos = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(S, dtype=np.int64)[None, :]
    orig = np.asarray(tokens)[pos].astype(np.int64)
    sel = mlm_selected(pos)
    inputs = np.where(sel, mask_id, orig)
    targets = np.where(sel, orig, ignore)
    return torch.from_numpy(inputs), torch.from_numpy(targets), int(sel.sum())


def mlm_loss(logits, targets, count, ignore=batches_ref.IGNORE):
    """Sum of cross-entropy over the selected tokens, divided by `count`, the
    selected tokens of the whole global batch (so that every world size and
    micro-batching trains the same model)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=ignore, reduction="sum") / count


# ---------------------------------------------------------------------------- ViT

def _pair(v, key):
    if isinstance(v, int):
        return v, v
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return v[0], v[1]
    raise ConfigError(f"{key} must be an int or [h, w], but is {v!r}")


def vit_classes(cfg):
    if cfg.get("id2label"):
        return len(cfg["id2label"])
    return int(_get(cfg, "num_labels", 2))


class ViTLayer(nn.Module):
    def __init__(self, d, heads, inter, bias, dtype):
        super().__init__()
        self.layernorm_before = _Weight((d,), (d,), dtype)
        self.attention = nn.Module()
        self.attention.attention = SelfAttention(d, heads, bias, dtype)
        self.attention.output = nn.Module()
        self.attention.output.dense = _Weight((d, d), (d,), dtype)
        self.layernorm_after = _Weight((d,), (d,), dtype)
        self.intermediate = nn.Module()
        self.intermediate.dense = _Weight((inter, d), (inter,), dtype)
        self.output = nn.Module()
        self.output.dense = _Weight((d, inter), (d,), dtype)

    def forward(self, x, eps):
        a = self.attention
        x = R(x + _linear(a.output.dense, a.attention(_layer_norm(self.layernorm_before, models.U(x), eps))))
        h = R(gelu_erf(_linear(self.intermediate.dense, _layer_norm(self.layernorm_after, models.U(x), eps))))
        return R(x + _linear(self.output.dense, h))


class ViTForImageClassification(nn.Module):
    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        d, heads = _check_encoder(cfg, "vit")
        if not _get(cfg, "qkv_bias", True):
            raise ConfigError("qkv_bias = false is not supported")
        self.image = _pair(_get(cfg, "image_size", 224), "image_size")
        self.patch = _pair(_get(cfg, "patch_size", 16), "patch_size")
        if self.image[0] % self.patch[0] or self.image[1] % self.patch[1]:
            raise ConfigError(f"image_size {self.image} is not a multiple of patch_size {self.patch}")
        self.channels = int(_get(cfg, "num_channels", 3))
        self.num_patches = (self.image[0] // self.patch[0]) * (self.image[1] // self.patch[1])
        self.eps = float(_get(cfg, "layer_norm_eps", 1e-12))
        inter, classes = int(cfg["intermediate_size"]), vit_classes(cfg)
        self.vit = nn.Module()
        e = self.vit.embeddings = nn.Module()
        e.cls_token = nn.Parameter(torch.empty(1, 1, d, dtype=dtype))
        e.position_embeddings = nn.Parameter(torch.empty(1, self.num_patches + 1, d, dtype=dtype))
        e.patch_embeddings = nn.Module()
        e.patch_embeddings.projection = _Weight((d, self.channels) + self.patch, (d,), dtype)
        self.vit.encoder = nn.Module()
        self.vit.encoder.layer = nn.ModuleList(
            ViTLayer(d, heads, inter, True, dtype) for _ in range(int(cfg["num_hidden_layers"])))
        self.vit.layernorm = _Weight((d,), (d,), dtype)
        self.classifier = _Weight((classes, d), (classes,), dtype)

    def forward(self, pixels):
        """pixels: [B, C, H, W], already normalised (normalise_images)."""
        B = pixels.shape[0]
        e = self.vit.embeddings
        proj = e.patch_embeddings.projection
        x = R(F.conv2d(pixels, R(proj.weight), R(proj.bias), stride=self.patch))
        x = x.flatten(2).transpose(1, 2)  # [B, P, D], patches in row-major order
        x = torch.cat([R(e.cls_token).expand(B, -1, -1), x], dim=1)
        x = R(x + R(e.position_embeddings))
        for layer in self.vit.encoder.layer:
            x = layer(x, self.eps)
        x = _layer_norm(self.vit.layernorm, x, self.eps)
        return R(F.linear(x[:, 0], R(self.classifier.weight), R(self.classifier.bias)))


def normalise_images(images_nhwc_uint8):
    """docs/training-semantics.md: a pixel enters as (x/255 - 0.5)/0.5; [N,H,W,C] uint8 -> [N,C,H,W]."""
    x = torch.from_numpy(np.ascontiguousarray(images_nhwc_uint8)).to(torch.float32)
    return ((x / 255.0 - 0.5) / 0.5).permute(0, 3, 1, 2).contiguous()


def build_encoder(cfg, dtype=torch.float32):
    mt = cfg.get("model_type")
    if mt == "bert":
        return BertForMaskedLM(cfg, dtype)
    if mt == "vit":
        return ViTForImageClassification(cfg, dtype)
    raise ConfigError(f"not an encoder model_type: {mt!r}")
