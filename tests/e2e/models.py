"""Plain-torch GPT2LMHeadModel and LlamaForCausalLM, with the LLaMA variants
MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM and the mixtures of
experts MixtralForCausalLM and Qwen3MoeForCausalLM (forward only; autograd
does the rest).

Parameters carry exactly the names, shapes and layouts of transformers' state dicts:

GPT-2 (Conv1D weights are [in, out], y = x @ W + b):
  transformer.wte.weight [V,D], transformer.wpe.weight [P,D],
  transformer.h.{i}.ln_1.{weight,bias} [D], .attn.c_attn.{weight [D,3D], bias [3D]},
  .attn.c_proj.{weight [D,D], bias [D]}, .ln_2.{weight,bias},
  .mlp.c_fc.{weight [D,I], bias [I]}, .mlp.c_proj.{weight [I,D], bias [D]},
  transformer.ln_f.{weight,bias}; the head is tied to wte unless
  tie_word_embeddings is false (then lm_head.weight [V,D]).
LLaMA (nn.Linear weights are [out, in], y = x @ W.T, no biases):
  model.embed_tokens.weight [V,D], model.layers.{i}.self_attn.{q,k,v,o}_proj.weight,
  .mlp.{gate,up,down}_proj.weight, .input_layernorm.weight, .post_attention_layernorm.weight,
  model.norm.weight, lm_head.weight [V,D] unless tie_word_embeddings.
  qwen2 adds .self_attn.{q,k,v}_proj.bias; qwen3 adds .self_attn.{q,k}_norm.weight [head_dim]
  (an RMSNorm over each head of q and k before RoPE); mistral masks keys more than
  sliding_window - 1 positions before the query (HF's sliding-window causal mask).
Mixtral (mistral's attention) and Qwen3-MoE (qwen3's) replace a layer's .mlp by a
sparse MLP (SparseMoeBlock, "Mixture of experts" below):
  mixtral:   model.layers.{i}.block_sparse_moe.gate.weight [E,D],
             .block_sparse_moe.experts.{e}.{w1,w2,w3}.weight ([I,D], [D,I], [I,D]) in every layer;
  qwen3_moe: model.layers.{i}.mlp.gate.weight [E,D], .mlp.experts.{e}.{gate,up,down}_proj.weight
             in layer i iff i is not in mlp_only_layers and (i+1) % decoder_sparse_step == 0
             (and num_experts > 0); the other layers keep the dense .mlp of intermediate_size.

Config defaults follow transformers (and planner/Import/Families/).
Everything is computed in the dtype the model is built with (f32 or f64); in f32
the RoPE tables are computed in f32 as HF does, in f64 they are computed in f64.
"""
import json
import math

import torch
import torch.nn.functional as F
from torch import nn


class ConfigError(ValueError):
    pass


def load_config(path):
    with open(path) as f:
        cfg = json.load(f)
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: an HF config must be a JSON object")
    return cfg


def _get(cfg, key, default):
    v = cfg.get(key, default)
    return default if v is None else v


LLAMA_TYPES = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe")


def dropout_keys(cfg):
    """(key, value) of every non-zero dropout probability the model would use."""
    mt = cfg.get("model_type")
    if mt == "gpt2":
        keys, dflt = ("resid_pdrop", "embd_pdrop", "attn_pdrop"), 0.1
    elif mt in LLAMA_TYPES:
        keys, dflt = ("attention_dropout",), 0.0
    else:
        return []
    return [(k, _get(cfg, k, dflt)) for k in keys if _get(cfg, k, dflt) != 0]


# Two correct bf16 runs differ in the stored values whose f32 sums land on
# the other side of a bf16 rounding boundary ("flips"). While FLIP_SENSITIVITY
# is a list (reference.py, step 1), each rounding of a value an op stores adds
# to it max |dL/dy| * ulp(y) over its elements: the first-order change of the
# loss if one of them rounded one bf16 ulp the other way (tests/e2e/bounds.py,
# bf16_loss1). A parameter's bf16 copy is left out: at step 1 every run
# rounds the same f32 weights.
FLIP_SENSITIVITY = None


def bf16_ulp(y):
    """The spacing of bf16 values at each element of y (already bf16): 8
    significant bits, so 2^(e-8) for y = m 2^e with 0.5 <= |m| < 1; 0 at 0."""
    _, e = torch.frexp(y)
    return torch.where(y != 0, torch.ldexp(torch.ones_like(y), e - 8), torch.zeros_like(y))


class _Bf16(torch.autograd.Function):
    """x rounded to bf16 (held in x's dtype); its gradient rounded the same way."""

    @staticmethod
    def forward(ctx, x):
        y = x.to(torch.bfloat16).to(x.dtype)
        ctx.measure = FLIP_SENSITIVITY is not None and not isinstance(x, nn.Parameter)
        if ctx.measure:
            ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        if ctx.measure and FLIP_SENSITIVITY is not None:
            (y,) = ctx.saved_tensors
            FLIP_SENSITIVITY.append(float((g.abs() * bf16_ulp(y)).max()))
        return g.to(torch.bfloat16).to(g.dtype)


# bf16 compute (--compute-dtype bf16, docs/training-semantics.md): every value
# an op stores, every activation gradient and each use of a parameter are
# rounded to bf16, where fsdp's kernels store bf16; everything between two
# roundings is computed in the model's dtype (f32, or f64 to measure how much
# the accumulation precision alone moves a bf16 run).
BF16_COMPUTE = False
# Where an activation feeds several ops (the residual stream into a norm and
# the residual add, a norm's output into q, k and v, an MLP's input into gate
# and up), its gradient is a sum of one contribution per use. PyTorch's
# autograd sums them in the model's dtype and the producer's R rounds the sum
# once; fsdp stores each contribution in bf16 (docs/training-semantics.md: every activation
# gradient is stored in bf16) and sums those. Both are correct bf16 training;
# BF16_EACH_USE makes the reference round each contribution too (U), so the
# gap between the two measures what that placement of roundings moves.
BF16_EACH_USE = False


def R(x):
    return _Bf16.apply(x) if BF16_COMPUTE else x


def U(x):
    """x as one of two uses: with BF16_EACH_USE its gradient contribution
    is rounded to bf16 before autograd sums it with the other (x is already
    bf16, so the forward is unchanged)."""
    return _Bf16.apply(x) if BF16_COMPUTE and BF16_EACH_USE else x


def uses(x, n):
    """x for its n uses, in forward order. With BF16_EACH_USE the gradient
    reaching x is summed as fsdp sums it (planner/TrainingStep.cpp): the last
    use's contribution first, then each earlier one added, every partial sum
    rounded to bf16. A chain of roundings does it: use k reads a rounding of
    the k-th link, and link k's gradient (use k's plus all later ones') is
    rounded as it passes to link k-1."""
    if not (BF16_COMPUTE and BF16_EACH_USE):
        return [x] * n
    out, link = [], x
    for _ in range(n):
        link = _Bf16.apply(link)
        out.append(_Bf16.apply(link))
    return out


class _Weight(nn.Module):
    """A module holding `weight` (and optionally `bias`) so the state-dict names match HF."""

    def __init__(self, wshape, bshape=None, dtype=torch.float32):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(wshape, dtype=dtype))
        if bshape is not None:
            self.bias = nn.Parameter(torch.empty(bshape, dtype=dtype))


# ---------------------------------------------------------------------------- GPT-2

def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gelu_exact(x):
    """HF's gelu (BERT, ViT): 0.5 x (1 + erf(x / sqrt 2)), written out."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class GPT2Attention(nn.Module):
    def __init__(self, d, heads, dtype):
        super().__init__()
        self.d, self.heads, self.hd = d, heads, d // heads
        self.causal = True  # False: bidirectional, every query sees every key (encoder_ops.py)
        self.c_attn = _Weight((d, 3 * d), (3 * d,), dtype)
        self.c_proj = _Weight((d, d), (d,), dtype)

    def forward(self, x):
        B, S, D = x.shape
        qkv = R(torch.addmm(R(self.c_attn.bias), x.reshape(-1, D), R(self.c_attn.weight))).view(B, S, 3 * D)
        q, k, v = qkv.split(D, dim=2)
        q, k, v = (t.view(B, S, self.heads, self.hd).permute(0, 2, 1, 3) for t in (q, k, v))
        att = torch.matmul(q, k.transpose(-1, -2)) / (self.hd ** 0.5)
        if self.causal:
            mask = torch.ones(S, S, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = R(torch.matmul(att, v)).permute(0, 2, 1, 3).reshape(B * S, D)
        return R(torch.addmm(R(self.c_proj.bias), y, R(self.c_proj.weight))).view(B, S, D)


class GPT2MLP(nn.Module):
    def __init__(self, d, inner, dtype):
        super().__init__()
        self.act = gelu_new  # gelu_exact in encoder_ops.py's variant
        self.c_fc = _Weight((d, inner), (inner,), dtype)
        self.c_proj = _Weight((inner, d), (d,), dtype)

    def forward(self, x):
        B, S, D = x.shape
        h = R(self.act(R(torch.addmm(R(self.c_fc.bias), x.reshape(-1, D), R(self.c_fc.weight)))))
        return R(torch.addmm(R(self.c_proj.bias), h, R(self.c_proj.weight))).view(B, S, D)


class GPT2Block(nn.Module):
    def __init__(self, d, heads, inner, eps, dtype):
        super().__init__()
        self.eps = eps
        self.ln_1 = _Weight((d,), (d,), dtype)
        self.attn = GPT2Attention(d, heads, dtype)
        self.ln_2 = _Weight((d,), (d,), dtype)
        self.mlp = GPT2MLP(d, inner, dtype)

    def forward(self, x):
        d = x.shape[-1]
        x = R(x + self.attn(R(F.layer_norm(U(x), (d,), R(self.ln_1.weight), R(self.ln_1.bias), self.eps))))
        x = R(x + self.mlp(R(F.layer_norm(U(x), (d,), R(self.ln_2.weight), R(self.ln_2.bias), self.eps))))
        return x


class GPT2Transformer(nn.Module):
    def __init__(self, c, dtype):
        super().__init__()
        self.wte = _Weight((c["vocab"], c["d"]), None, dtype)
        self.wpe = _Weight((c["positions"], c["d"]), None, dtype)
        self.h = nn.ModuleList(GPT2Block(c["d"], c["heads"], c["inner"], c["eps"], dtype)
                               for _ in range(c["layers"]))
        self.ln_f = _Weight((c["d"],), (c["d"],), dtype)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        d = int(cfg["n_embd"])
        heads = int(cfg["n_head"])
        if d % heads:
            raise ConfigError(f"n_embd = {d} is not divisible by n_head = {heads}")
        act = _get(cfg, "activation_function", "gelu_new")
        if act not in ("gelu_new", "gelu_pytorch_tanh"):
            raise ConfigError(f"activation_function '{act}' is not supported (GELU tanh only)")
        for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
            if _get(cfg, flag, False):
                raise ConfigError(f"{flag} = true is not supported")
        if not _get(cfg, "scale_attn_weights", True):
            raise ConfigError("scale_attn_weights = false is not supported")
        self.c = dict(vocab=int(cfg["vocab_size"]), d=d, heads=heads,
                      layers=int(cfg["n_layer"]),
                      positions=int(_get(cfg, "n_positions", 1024)),
                      inner=int(_get(cfg, "n_inner", 4 * d)),
                      eps=float(_get(cfg, "layer_norm_epsilon", 1e-5)))
        self.tied = bool(_get(cfg, "tie_word_embeddings", True))
        self.max_seq_len = self.c["positions"]
        self.transformer = GPT2Transformer(self.c, dtype)
        if not self.tied:
            self.lm_head = _Weight((self.c["vocab"], d), None, dtype)

    def head_weight(self):
        return self.transformer.wte.weight if self.tied else self.lm_head.weight

    def forward(self, ids):
        B, S = ids.shape
        if S > self.max_seq_len:
            raise ValueError(f"sequence length {S} exceeds n_positions = {self.max_seq_len}")
        t = self.transformer
        x = R(R(R(t.wte.weight)[ids]) + R(R(t.wpe.weight)[:S].unsqueeze(0)))
        for blk in t.h:
            x = blk(x)
        x = R(F.layer_norm(x, (self.c["d"],), R(t.ln_f.weight), R(t.ln_f.bias), self.c["eps"]))
        return R(torch.matmul(x, R(self.head_weight()).t()))


# ---------------------------------------------------------------------------- LLaMA

def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_parameters(head_dim, theta, scaling, dtype, max_positions, seq_len=None):
    """(inv_freq, attention_factor) as transformers' modeling_rope_utils computes them
    (transformers 4.57: _compute_default_rope_parameters, or the _compute_*_parameters of
    scaling's rope_type, their code with dim = head_dim and the tensors in `dtype`).
    max_positions: max_position_embeddings. seq_len: the longest sequence the table is for;
    dynamic NTK's dynamic_rope_update recomputes the frequencies for one past
    max_position_embeddings (fsdp refuses such sequences), else keeps those computed at
    initialisation (seq_len None, so max_position_embeddings)."""
    dim = head_dim

    def default(base):
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype) / dim))

    if scaling is None:
        return default(theta), 1.0
    kind, factor = scaling["rope_type"], scaling["factor"]
    if kind == "linear":
        inv_freq = default(theta)
        inv_freq /= factor
        return inv_freq, 1.0
    if kind == "dynamic":
        n = max_positions if seq_len is None else max(seq_len, max_positions)
        base = theta * ((factor * n / max_positions) - (factor - 1)) ** (dim / (dim - 2))
        return default(base), 1.0
    if kind == "yarn":
        return yarn_parameters(dim, theta, scaling, dtype, max_positions)
    # llama3 (_compute_llama3_parameters)
    inv_freq = default(theta)
    lo, hi = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old / lo
    high_freq_wavelen = old / hi
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama), 1.0


def yarn_parameters(dim, base, rs, dtype, max_positions):
    """transformers' _compute_yarn_parameters (4.57), its code as it stands."""
    factor = rs["factor"]
    attention_factor = rs.get("attention_factor")
    mscale = rs.get("mscale")
    mscale_all_dim = rs.get("mscale_all_dim")
    original_max_position_embeddings = rs.get("original_max_position_embeddings") or max_positions

    def get_mscale(scale, mscale=1):
        if scale <= 1:
            return 1.0
        return 0.1 * mscale * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast = rs.get("beta_fast") or 32
    beta_slow = rs.get("beta_slow") or 1

    def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings, truncate):
        low = find_correction_dim(low_rot, dim, base, max_position_embeddings)
        high = find_correction_dim(high_rot, dim, base, max_position_embeddings)
        if truncate:
            low = math.floor(low)
            high = math.ceil(high)
        return max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(min, max, dim):
        if min == max:
            max += 0.001  # Prevent singularity
        # float32 in transformers; `dtype` here (f64 for the f64 reference)
        linear_func = (torch.arange(dim, dtype=dtype) - min) / (max - min)
        return torch.clamp(linear_func, 0, 1)

    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=dtype) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    truncate = rs.get("truncate", True)
    low, high = find_correction_range(beta_fast, beta_slow, dim, base,
                                      original_max_position_embeddings, truncate)
    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2).to(dtype=dtype)
    inv_freq = (inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
                + inv_freq_extrapolation * inv_freq_extrapolation_factor)
    return inv_freq, attention_factor


def rope_inv_freq(head_dim, theta, scaling, dtype, max_positions=2048):
    """rope_parameters' inv_freq alone."""
    return rope_parameters(head_dim, theta, scaling, dtype, max_positions)[0]


# The keys each rope_type reads besides rope_type / type (transformers' _validate_*).
ROPE_SCALING_KEYS = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "yarn": ("factor", "attention_factor", "beta_fast", "beta_slow",
             "original_max_position_embeddings", "mscale", "mscale_all_dim", "truncate"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}
ROPE_SCALING_REQUIRED = {"linear": ("factor",), "dynamic": ("factor",), "yarn": ("factor",),
                         "llama3": ROPE_SCALING_KEYS["llama3"]}


def parse_rope_scaling(cfg):
    """rope_scaling with its rope_type (transformers' configs copy `type` to `rope_type`), or
    None for none or "default"."""
    rs = cfg.get("rope_scaling")
    if rs is None:
        return None
    if not isinstance(rs, dict):
        raise ConfigError("rope_scaling must be an object or null")
    if "type" in rs and "rope_type" in rs and rs["type"] != rs["rope_type"]:
        raise ConfigError("rope_scaling's type and rope_type differ")
    kind = rs.get("rope_type", rs.get("type"))
    if kind not in ROPE_SCALING_KEYS:
        raise ConfigError(f"rope_scaling type '{kind}' is not supported "
                          f"(supported: {', '.join(ROPE_SCALING_KEYS)})")
    for k in rs:
        if k not in ("type", "rope_type") + ROPE_SCALING_KEYS[kind]:
            raise ConfigError(f"rope_scaling.{k} is not a parameter of rope_type '{kind}'")
    for k in ROPE_SCALING_REQUIRED.get(kind, ()):
        if k not in rs:
            raise ConfigError(f"rope_scaling lacks '{k}'")
    if kind == "default":
        return None
    return dict(rs, rope_type=kind)


class LlamaAttention(nn.Module):
    def __init__(self, c, dtype):
        super().__init__()
        d, heads, kv, hd = c["d"], c["heads"], c["kv"], c["hd"]
        self.heads, self.kv, self.hd = heads, kv, hd
        self.eps, self.window = c["eps"], c["window"]
        bias = c["qkv_bias"]  # qwen2
        self.q_proj = _Weight((heads * hd, d), (heads * hd,) if bias else None, dtype)
        self.k_proj = _Weight((kv * hd, d), (kv * hd,) if bias else None, dtype)
        self.v_proj = _Weight((kv * hd, d), (kv * hd,) if bias else None, dtype)
        self.o_proj = _Weight((d, heads * hd), None, dtype)
        if c["qk_norm"]:  # qwen3
            self.q_norm = _Weight((hd,), None, dtype)
            self.k_norm = _Weight((hd,), None, dtype)

    def proj(self, lin, x, heads):
        B, S, _ = x.shape
        b = getattr(lin, "bias", None)
        y = R(F.linear(x, R(lin.weight), None if b is None else R(b)))
        return y.view(B, S, heads, self.hd)

    def forward(self, x, cos, sin):
        B, S, _ = x.shape
        xq, xk, xv = uses(x, 3)
        q = self.proj(self.q_proj, xq, self.heads)
        k = self.proj(self.k_proj, xk, self.kv)
        v = self.proj(self.v_proj, xv, self.kv).transpose(1, 2)
        if hasattr(self, "q_norm"):  # Qwen3: RMSNorm over head_dim, before RoPE
            q = R(rms_norm(q, R(self.q_norm.weight), self.eps))
            k = R(rms_norm(k, R(self.k_norm.weight), self.eps))
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q = R(q * cos + rotate_half(q) * sin)
        k = R(k * cos + rotate_half(k) * sin)
        rep = self.heads // self.kv
        if rep > 1:  # HF repeat_kv: query head h uses kv head h // rep
            k = k[:, :, None].expand(B, self.kv, rep, S, self.hd).reshape(B, self.heads, S, self.hd)
            v = v[:, :, None].expand(B, self.kv, rep, S, self.hd).reshape(B, self.heads, S, self.hd)
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        mask = torch.ones(S, S, dtype=torch.bool).tril()
        if self.window:  # Mistral: key j is seen from query i iff i - W < j <= i
            mask &= torch.ones(S, S, dtype=torch.bool).triu(-(self.window - 1))
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = R(torch.matmul(att, v)).transpose(1, 2).reshape(B, S, self.heads * self.hd)
        return R(F.linear(y, R(self.o_proj.weight)))


def swiglu(x, gate, up, down):
    """down(silu(gate x) * up x): LLaMA's MLP, and each expert of a sparse one."""
    h = R(F.silu(R(F.linear(U(x), R(gate.weight)))) * R(F.linear(U(x), R(up.weight))))
    return R(F.linear(h, R(down.weight)))


class LlamaMLP(nn.Module):
    def __init__(self, d, inter, dtype):
        super().__init__()
        self.gate_proj = _Weight((inter, d), None, dtype)
        self.up_proj = _Weight((inter, d), None, dtype)
        self.down_proj = _Weight((d, inter), None, dtype)

    def forward(self, x, router=None):
        return swiglu(x, self.gate_proj, self.up_proj, self.down_proj)


class LlamaLayer(nn.Module):
    """A decoder layer; `ffn` (default the dense LlamaMLP) is registered as
    `ffn_name` (Mixtral's sparse MLP is `block_sparse_moe`), between the
    attention and the norms as in HF's state dict."""

    def __init__(self, c, dtype, ffn=None, ffn_name="mlp"):
        super().__init__()
        self.eps = c["eps"]
        self.self_attn = LlamaAttention(c, dtype)
        self.ffn_name = ffn_name
        setattr(self, ffn_name, ffn if ffn is not None else LlamaMLP(c["d"], c["inter"], dtype))
        self.input_layernorm = _Weight((c["d"],), None, dtype)
        self.post_attention_layernorm = _Weight((c["d"],), None, dtype)

    def forward(self, x, cos, sin, router=None):
        ffn = getattr(self, self.ffn_name)
        x = R(x + self.self_attn(R(rms_norm(U(x), R(self.input_layernorm.weight), self.eps)), cos, sin))
        x = R(x + ffn(R(rms_norm(U(x), R(self.post_attention_layernorm.weight), self.eps)), router))
        return x


class LlamaModel(nn.Module):
    def __init__(self, c, dtype, moe=None):
        super().__init__()
        self.embed_tokens = _Weight((c["vocab"], c["d"]), None, dtype)
        self.layers = nn.ModuleList(
            LlamaLayer(c, dtype, SparseMoeBlock(c["d"], moe, dtype), moe["module"])
            if moe and moe["sparse"][i] else LlamaLayer(c, dtype)
            for i in range(c["layers"]))
        self.norm = _Weight((c["d"],), None, dtype)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        d = int(cfg["hidden_size"])
        heads = int(cfg["num_attention_heads"])
        kv = int(_get(cfg, "num_key_value_heads", heads))
        if heads % kv:
            raise ConfigError(f"num_attention_heads = {heads} is not a multiple of "
                              f"num_key_value_heads = {kv}")
        if cfg.get("head_dim") is None and d % heads:
            raise ConfigError(f"hidden_size = {d} is not divisible by num_attention_heads = {heads}")
        hd = int(_get(cfg, "head_dim", d // heads))
        if hd % 2:
            raise ConfigError(f"head dimension {hd} must be even for rotary embeddings")
        act = _get(cfg, "hidden_act", "silu")
        if act != "silu":
            raise ConfigError(f"hidden_act '{act}' is not supported (SwiGLU/silu only)")
        mt = cfg.get("model_type", "llama")
        for flag in ("attention_bias", "mlp_bias"):
            if _get(cfg, flag, False):
                raise ConfigError(f"{flag} = true is not supported")
        if mt in ("qwen2", "qwen3", "qwen3_moe") and _get(cfg, "use_sliding_window", False):
            raise ConfigError("use_sliding_window = true is not supported")
        self.c = dict(vocab=int(cfg["vocab_size"]), d=d, heads=heads, kv=kv, hd=hd,
                      layers=int(cfg["num_hidden_layers"]),
                      inter=int(cfg["intermediate_size"]),
                      eps=float(_get(cfg, "rms_norm_eps", 1e-6)),
                      theta=float(_get(cfg, "rope_theta", 10000.0)),
                      qkv_bias=mt == "qwen2", qk_norm=mt in ("qwen3", "qwen3_moe"),
                      window=int(_get(cfg, "sliding_window", 0)) if mt in ("mistral", "mixtral")
                      else 0)
        self.max_seq_len = int(_get(cfg, "max_position_embeddings", 2048))
        self.rope_scaling = parse_rope_scaling(cfg)
        self.tied = bool(_get(cfg, "tie_word_embeddings", False))
        # The sparse MLPs (parse_moe); None: every layer dense (also a
        # qwen3_moe config without a sparse layer, as fsdp imports it).
        self.moe = parse_moe(cfg, self.c)
        self.model = LlamaModel(self.c, dtype, self.moe)
        if not self.tied:
            self.lm_head = _Weight((self.c["vocab"], d), None, dtype)

    def head_weight(self):
        return self.model.embed_tokens.weight if self.tied else self.lm_head.weight

    def rope(self, S, dtype):
        # f32: exactly HF's tables (computed in f32); f64: the same formulas in f64. The
        # attention factor (yarn's; else 1) multiplies cos and sin, as HF's rotary embedding.
        cdt = torch.float64 if dtype == torch.float64 else torch.float32
        inv_freq, attention_factor = rope_parameters(self.c["hd"], self.c["theta"],
                                                     self.rope_scaling, cdt, self.max_seq_len, S)
        pos = torch.arange(S, dtype=torch.int64).to(cdt)
        freqs = torch.outer(pos, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * attention_factor
        sin = emb.sin() * attention_factor
        return cos.to(dtype), sin.to(dtype)

    def forward(self, ids, router=None):
        """Logits [B,S,V]. router: a list to which each sparse layer appends
        its router logits [B,S,E] as the load-balancing loss uses them."""
        B, S = ids.shape
        m = self.model
        x = R(R(m.embed_tokens.weight)[ids])
        cos, sin = self.rope(S, x.dtype)
        for layer in m.layers:
            x = layer(x, cos, sin, router)
        x = R(rms_norm(x, R(m.norm.weight), self.c["eps"]))
        return R(F.linear(x, R(self.head_weight())))


class MixtralForCausalLM(LlamaForCausalLM):
    """Mixtral: Mistral's attention (a window iff sliding_window is set; HF's
    default is none) and a sparse MLP of num_local_experts SwiGLU experts
    (w1 gate, w3 up, w2 down, of intermediate_size) in every layer,
    renormalised top-k routing."""


class Qwen3MoeForCausalLM(LlamaForCausalLM):
    """Qwen3-MoE: Qwen3's attention (head_dim, q_norm/k_norm) and a sparse
    MLP of num_experts experts of moe_intermediate_size where parse_moe says,
    the dense MLP of intermediate_size elsewhere."""


# ---------------------------------------------------------------------------- mixture of experts
#
# A sparse MLP over the T = B*S tokens of a forward (docs/training-semantics.md,
# "Mixture of experts"; fsdp's moe_route, moe_permute, moe_linear, moe_combine,
# moe_aux_loss):
#   logits = gate(x) [T,E], in the compute dtype (bf16: rounded, a linear's output);
#   p = softmax(logits) in the model's dtype (f32: fsdp's f32; f64 to measure);
#   each token's k largest p, ties to the LOWER expert index (topk_mask: an
#   explicit rank, not torch.topk, whose order among ties is unspecified);
#   w_j = p[e_j], divided by their sum when `normalize` (Mixtral always,
#   Qwen3-MoE iff norm_topk_prob), then stored in the compute dtype (bf16: rounded);
#   y[t] = sum over the chosen experts in ASCENDING expert index of
#   w_j * expert_{e_j}(x[t]), accumulated in the model's dtype from the stored
#   (bf16) values and stored once (bf16: rounded once).
# Every expert runs, on its rows or on none, so each expert's gradient is a
# tensor (zeros when no token chose it) as fsdp writes it: AdamW then decays
# and steps that expert as fsdp does (torch skips a parameter whose .grad is None).
# bf16 gradients, by the rounding points above (R's backward): d(weights) is
# the f32 dot product of dy and the expert's output, rounded; d(logits) comes
# through the f32 renormalisation and softmax and is rounded; with the
# load-balancing loss the logits have two uses (routing, the loss), each use's
# gradient rounded with --bf16-each-use (fsdp's moe_route_grad and
# moe_aux_loss_grad each store theirs). An expert's rows are used twice (gate,
# up: swiglu's U) and their summed gradient is one stored row per choice (U
# on the gathered rows); the k rows of a token are summed back in f32
# (moe_permute_grad) and rounded by the producer, as any activation gradient.


def parse_moe(cfg, c):
    """The sparse MLPs of a mixtral or qwen3_moe config as fsdp imports them
    (planner/Import/Families/Llama.cpp), the keys read strictly (ConfigError
    naming the key); None for another model_type or a config without a sparse
    layer. c: the LLaMA sizes (LlamaForCausalLM.c)."""
    mt = cfg.get("model_type")

    def integer(key, default, lo):
        v = _get(cfg, key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"{key} = {v!r} must be an integer >= {lo}")
        return v

    def boolean(key, default):
        v = _get(cfg, key, default)
        if not isinstance(v, bool):
            raise ConfigError(f"{key} = {v!r} must be true or false")
        return v

    def number(key, default):
        v = _get(cfg, key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"{key} = {v!r} must be a finite number")
        return float(v)

    L = c["layers"]
    if mt == "mixtral":
        jitter = number("router_jitter_noise", 0.0)
        if jitter != 0:
            raise ConfigError(f"router_jitter_noise = {jitter} is not supported (it multiplies the "
                              "hidden states by random noise in training); set it to 0.0")
        E = integer("num_local_experts", 8, 2)
        moe = dict(E=E, inter=c["inter"], normalize=True, sparse=[True] * L,
                   module="block_sparse_moe", expert=MixtralExpert,
                   top_k=integer("num_experts_per_tok", 2, 1))
    elif mt == "qwen3_moe":
        E = integer("num_experts", 128, 0)
        if E == 1:
            raise ConfigError("num_experts must be 0 (no sparse layers) or at least 2")
        inter = integer("moe_intermediate_size", 768, 1)
        step = integer("decoder_sparse_step", 1, 1)
        normalize = boolean("norm_topk_prob", False)
        only = _get(cfg, "mlp_only_layers", [])
        if not isinstance(only, list):
            raise ConfigError(f"mlp_only_layers must be a list of layer indices, but is {only!r}")
        for i, v in enumerate(only):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < L:
                raise ConfigError(f"mlp_only_layers[{i}] = {v!r} is not a layer index in [0, {L})")
        moe = dict(E=E, inter=inter, normalize=normalize,
                   sparse=[i not in only and E > 0 and (i + 1) % step == 0 for i in range(L)],
                   module="mlp", expert=LlamaMLP, top_k=integer("num_experts_per_tok", 8, 1))
    else:
        return None
    if E > 0 and moe["top_k"] > E:
        raise ConfigError(f"num_experts_per_tok = {moe['top_k']} exceeds the {E} experts")
    moe["coef"] = number("router_aux_loss_coef", 0.001)
    if moe["coef"] < 0:
        raise ConfigError("router_aux_loss_coef must be finite and >= 0")
    moe["aux"] = boolean("output_router_logits", False)
    return moe if any(moe["sparse"]) else None


def topk_mask(p, k):
    """(chosen [T,E] bool, order [T,k]) of the rows of p [T,E]: each row's k
    largest, ties to the lower index; order lists them by descending p (ties:
    lower index first). Explicit: expert e's rank is the number of experts
    with a larger p plus those of a lower index with an equal one."""
    E = p.shape[-1]
    idx = torch.arange(E)
    above = p.unsqueeze(-2) > p.unsqueeze(-1)  # [t, e, i]: p[t, i] > p[t, e]
    tied_before = (p.unsqueeze(-2) == p.unsqueeze(-1)) & (idx.view(1, E) < idx.view(E, 1))
    rank = above.sum(-1) + tied_before.sum(-1)  # each row a permutation of 0..E-1
    return rank < k, rank.argsort(-1)[..., :k]


def route(logits, k, normalize):
    """(p, chosen, weights) of router logits [T,E]: p = softmax in their
    dtype, chosen = topk_mask(p), weights [T,E] = p on the chosen experts
    (divided by their sum with `normalize`), 0 elsewhere."""
    p = torch.softmax(logits, -1)
    chosen, _ = topk_mask(p.detach(), k)
    w = p * chosen.to(p.dtype)
    if normalize:
        w = w / w.sum(-1, keepdim=True)
    return p, chosen, w


def moe_aux_loss(logits, k):
    """transformers' load_balancing_loss_func (no attention mask) over one
    micro-batch: logits, each sparse layer's router logits [B,S,E]; over the
    rows of all of them, p = softmax, f[e] = the share of rows that chose e
    (among their k), P[e] = the mean of p: E * sum f[e] P[e] (HF sums
    f[j,e] P[e] over each choice j: the same sum). The choice is a constant:
    the gradient flows through P."""
    rows = torch.cat([x.reshape(-1, x.shape[-1]) for x in logits])
    E = rows.shape[-1]
    p = torch.softmax(rows, -1)
    chosen, _ = topk_mask(p.detach(), k)
    return E * (chosen.to(p.dtype).mean(0) * p.mean(0)).sum()


class MixtralExpert(nn.Module):
    """MixtralBlockSparseTop2MLP: w2(silu(w1 x) * w3 x), in HF's order w1, w2, w3."""

    def __init__(self, d, inter, dtype):
        super().__init__()
        self.w1 = _Weight((inter, d), None, dtype)
        self.w2 = _Weight((d, inter), None, dtype)
        self.w3 = _Weight((inter, d), None, dtype)

    def forward(self, x):
        return swiglu(x, self.w1, self.w3, self.w2)


class SparseMoeBlock(nn.Module):
    """HF's MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock (gate, experts)."""

    def __init__(self, d, moe, dtype):
        super().__init__()
        self.top_k, self.normalize = moe["top_k"], moe["normalize"]
        self.gate = _Weight((moe["E"], d), None, dtype)
        self.experts = nn.ModuleList(moe["expert"](d, moe["inter"], dtype) for _ in range(moe["E"]))
        self.last_chosen = None  # the last forward's choices [T,E] (tests, moe_e2e.py)

    def forward(self, x, router=None):
        B, S, D = x.shape
        x_gate, x_experts = uses(x.reshape(B * S, D), 2)
        logits = R(F.linear(x_gate, R(self.gate.weight)))
        if router is not None:  # the load-balancing loss's use of the logits
            logits, for_aux = uses(logits, 2)
            router.append(for_aux.view(B, S, -1))
        _, chosen, w = route(logits, self.top_k, self.normalize)
        w = R(w)
        self.last_chosen = chosen
        y = torch.zeros_like(x_experts)
        for e, expert in enumerate(self.experts):  # ascending e: each token's sum in that order
            rows = chosen[:, e].nonzero().squeeze(1)
            y = y.index_add(0, rows, w[rows, e:e + 1] * expert(U(x_experts[rows])))
        return R(y).view(B, S, D)


# ---------------------------------------------------------------------------- common

def build_model(cfg, dtype=torch.float32):
    mt = cfg.get("model_type")
    if mt == "gpt2":
        return GPT2LMHeadModel(cfg, dtype)
    if mt in ("llama", "mistral", "qwen2", "qwen3"):
        return LlamaForCausalLM(cfg, dtype)
    if mt == "mixtral":
        return MixtralForCausalLM(cfg, dtype)
    if mt == "qwen3_moe":
        return Qwen3MoeForCausalLM(cfg, dtype)
    raise ConfigError(f"unknown model_type {mt!r}; supported: gpt2, {', '.join(LLAMA_TYPES)}")


def lm_loss(logits, targets):
    """Mean cross-entropy over all tokens: logits [B,S,V], targets [B,S]."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def has_aux_loss(model):
    """Whether the model's loss adds the load-balancing term (a sparse layer
    and output_router_logits)."""
    return getattr(model, "moe", None) is not None and model.moe["aux"]


def causal_lm_loss(model, x, y, aux_chunk=None):
    """The loss of one forward over the samples x [B,S] with targets y: the
    mean cross-entropy, plus, when has_aux_loss(model), router_aux_loss_coef
    times the mean over the consecutive chunks of aux_chunk samples (default
    all B) of each chunk's load-balancing loss (moe_aux_loss): fsdp computes
    the term per micro-batch of one rank, whose chunks these are
    (docs/training-semantics.md, "Mixture of experts")."""
    if not has_aux_loss(model):
        return lm_loss(model(x), y)
    router = []
    logits = model(x, router)
    B = x.shape[0]
    M = B if aux_chunk is None else aux_chunk
    if M < 1 or B % M:
        raise ValueError(f"{B} samples do not split into chunks of {M}")
    aux = sum(moe_aux_loss([r[c * M:(c + 1) * M] for r in router], model.moe["top_k"])
              for c in range(B // M)) / (B // M)
    return lm_loss(logits, y) + model.moe["coef"] * aux


def init_weights(model, seed, std=0.02):
    """Deterministic init: normal(0, std) for >=2-dim params, ones for norm weights, zeros
    for biases. Draws in named_parameters() order from a torch.Generator seeded with `seed`."""
    g = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * std)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                p.fill_(1.0)
    return model
