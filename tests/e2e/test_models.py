#!/usr/bin/python3
"""Self-checks of models.py and reference.py's batching against independent formulations."""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
import reference  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GPT2 = models.load_config(os.path.join(ROOT, "models/gpt2-tiny/config.json"))
LLAMA = models.load_config(os.path.join(ROOT, "models/llama-tiny/config.json"))
D64 = torch.float64


def check_names():
    g = models.build_model(GPT2)
    names = {n: tuple(p.shape) for n, p in g.named_parameters()}
    assert names["transformer.wte.weight"] == (503, 64)
    assert names["transformer.wpe.weight"] == (128, 64)
    assert names["transformer.h.1.attn.c_attn.weight"] == (64, 192)
    assert names["transformer.h.1.attn.c_attn.bias"] == (192,)
    assert names["transformer.h.0.mlp.c_fc.weight"] == (64, 256)
    assert names["transformer.h.0.mlp.c_proj.weight"] == (256, 64)
    assert names["transformer.ln_f.bias"] == (64,)
    assert "lm_head.weight" not in names and len(names) == 4 + 12 * 2
    u = models.build_model(dict(GPT2, tie_word_embeddings=False))
    assert dict(u.named_parameters())["lm_head.weight"].shape == (503, 64)
    m = models.build_model(LLAMA)
    names = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert names["model.layers.1.self_attn.q_proj.weight"] == (64, 64)
    assert names["model.layers.1.self_attn.k_proj.weight"] == (32, 64)
    assert names["model.layers.1.self_attn.v_proj.weight"] == (32, 64)
    assert names["model.layers.1.self_attn.o_proj.weight"] == (64, 64)
    assert names["model.layers.0.mlp.gate_proj.weight"] == (176, 64)
    assert names["model.layers.0.mlp.down_proj.weight"] == (64, 176)
    assert names["lm_head.weight"] == (503, 64) and len(names) == 3 + 9 * 2
    t = models.build_model(dict(LLAMA, tie_word_embeddings=True))
    assert "lm_head.weight" not in dict(t.named_parameters())


def check_pieces():
    x = torch.randn(5, 7, dtype=D64)
    assert torch.allclose(models.gelu_new(x), F.gelu(x, approximate="tanh"), rtol=0, atol=1e-14)
    w = torch.randn(7, dtype=D64)
    want = x / torch.sqrt((x * x).sum(-1, keepdim=True) / 7 + 1e-5) * w
    assert torch.allclose(models.rms_norm(x, w, 1e-5), want, rtol=1e-13, atol=0)
    # rotate_half on (x1, x2) -> (-x2, x1)
    assert models.rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])).tolist() == [-3.0, -4.0, 1.0, 2.0]
    # inv_freq default and llama3 (Llama 3.1: head_dim 128, theta 5e5, factor 8, 1, 4, 8192)
    f = models.rope_inv_freq(16, 10000.0, None, D64)
    assert torch.allclose(f, torch.tensor([10000.0 ** (-i / 16) for i in range(0, 16, 2)], dtype=D64))
    sc = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    base = models.rope_inv_freq(128, 500000.0, None, D64)
    l3 = models.rope_inv_freq(128, 500000.0, sc, D64)
    for b, s in zip(base.tolist(), l3.tolist()):
        wl = 2 * math.pi / b
        if wl < 8192 / 4:
            assert s == b
        elif wl > 8192:
            assert math.isclose(s, b / 8, rel_tol=1e-15)
        else:
            sm = (8192 / wl - 1) / 3
            assert math.isclose(s, (1 - sm) * b / 8 + sm * b, rel_tol=1e-13)
    assert (l3 != base).any() and (l3 == base).any()


def check_rope_scaling():
    """rope_parameters' linear, dynamic and yarn against their formulas written out here
    (f64), and parse_rope_scaling's refusals."""
    d = 16
    base = models.rope_inv_freq(d, 10000.0, None, D64)
    # linear: every frequency divided by the factor.
    lin, af = models.rope_parameters(d, 10000.0, {"rope_type": "linear", "factor": 2.5}, D64, 128)
    assert torch.equal(lin, base / 2.5) and af == 1.0
    # dynamic: the default up to max_position_embeddings; past it, the base grows by
    # (factor S / M - (factor - 1))^(d / (d - 2)).
    dyn = {"rope_type": "dynamic", "factor": 3.0}
    for S in (1, 32, 128):
        f, af = models.rope_parameters(d, 10000.0, dyn, D64, 128, S)
        assert torch.equal(f, base) and af == 1.0
    f, _ = models.rope_parameters(d, 10000.0, dyn, D64, 128, 256)
    grown = 10000.0 * (3.0 * 256 / 128 - 2.0) ** (d / (d - 2))
    assert torch.allclose(f, torch.tensor([grown ** (-i / d) for i in range(0, d, 2)], dtype=D64),
                          rtol=1e-14, atol=0)
    # yarn (YaRN's paper, section 3.2): dims below low keep their frequency, above high take
    # it over the factor, a linear ramp between; low and high from the rotations beta_fast
    # and beta_slow over the original context L: d ln(L / (2 pi beta)) / (2 ln theta).
    for L, fast, slow, trunc in ((32, 32, 1, True), (64, 8, 0.5, False), (32768, 32, 1, True)):
        rs = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": L,
              "beta_fast": fast, "beta_slow": slow, "truncate": trunc}
        dim = 128 if L == 32768 else d
        theta = 1e6 if L == 32768 else 10000.0
        f, af = models.rope_parameters(dim, theta, rs, D64, 4 * L)
        lo = dim * math.log(L / (2 * math.pi * fast)) / (2 * math.log(theta))
        hi = dim * math.log(L / (2 * math.pi * slow)) / (2 * math.log(theta))
        if trunc:
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        want = []
        for k, i in enumerate(range(0, dim, 2)):
            r = min(max((k - lo) / (hi - lo), 0.0), 1.0)
            want.append(theta ** (-i / dim) * ((1 - r) + r / 4.0))
        assert torch.allclose(f, torch.tensor(want, dtype=D64), rtol=1e-14, atol=0), (L, f, want)
        assert af == 0.1 * math.log(4.0) + 1
    _, af = models.rope_parameters(d, 10000.0, {"rope_type": "yarn", "factor": 8.0, "mscale": 1.0,
                                                "mscale_all_dim": 0.5}, D64, 128)
    assert af == (0.1 * math.log(8.0) + 1) / (0.05 * math.log(8.0) + 1)
    # type and rope_type, and what is refused.
    assert models.parse_rope_scaling({"rope_scaling": {"type": "yarn", "factor": 4.0}})[
        "rope_type"] == "yarn"
    assert models.parse_rope_scaling({"rope_scaling": {"rope_type": "default"}}) is None
    for bad in ({"type": "linear", "factor": 2.0, "beta_fast": 32}, {"type": "longrope"},
                {"type": "yarn", "rope_type": "linear", "factor": 2.0}, {"type": "linear"}):
        try:
            models.parse_rope_scaling({"rope_scaling": bad})
        except models.ConfigError:
            continue
        raise AssertionError("accepted %r" % bad)


def check_causal(cfg):
    m = models.init_weights(models.build_model(cfg, D64), 3, 0.2)
    ids = torch.randint(0, 503, (2, 12), generator=torch.Generator().manual_seed(1))
    ids2 = ids.clone()
    ids2[:, 7] = (ids2[:, 7] + 1) % 503
    with torch.no_grad():
        a, b = m(ids), m(ids2)
    assert torch.equal(a[:, :7], b[:, :7]) and not torch.allclose(a[:, 7:], b[:, 7:])
    # one sample at a time gives the same logits as the batch
    with torch.no_grad():
        assert torch.allclose(m(ids[1:]), a[1:], rtol=0, atol=1e-12)


def check_gqa():
    # GQA with 2 kv heads == MHA with 4 kv heads whose kv head h copies GQA kv head h // 2.
    g = models.init_weights(models.build_model(LLAMA, D64), 5, 0.2)
    mha_cfg = dict(LLAMA, num_key_value_heads=4)
    m = models.build_model(mha_cfg, D64)
    gp = dict(g.named_parameters())
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith(("k_proj.weight", "v_proj.weight")):
                src = gp[n].view(2, 16, 64)
                p.copy_(src[torch.tensor([0, 0, 1, 1])].reshape(64, 64))
            else:
                p.copy_(gp[n])
        ids = torch.randint(0, 503, (2, 10), generator=torch.Generator().manual_seed(2))
        assert torch.allclose(g(ids), m(ids), rtol=0, atol=1e-12)


def check_attention_gpt2():
    # GPT-2 attention against an explicit per-head loop.
    torch.manual_seed(0)
    att = models.GPT2Attention(8, 2, D64)
    for p in att.parameters():
        torch.nn.init.normal_(p)
    x = torch.randn(1, 5, 8, dtype=D64)
    qkv = x[0] @ att.c_attn.weight + att.c_attn.bias
    q, k, v = qkv[:, :8], qkv[:, 8:16], qkv[:, 16:]
    outs = []
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        s = q[:, sl] @ k[:, sl].T / 2.0
        s = s + torch.triu(torch.full((5, 5), float("-inf"), dtype=D64), 1)
        outs.append(torch.softmax(s, -1) @ v[:, sl])
    want = torch.cat(outs, -1) @ att.c_proj.weight + att.c_proj.bias
    assert torch.allclose(att(x)[0], want, rtol=0, atol=1e-12)


def check_families():
    # qwen2: q/k/v biases; qwen3: q_norm/k_norm of head_dim (24 here, not 64/4).
    q2 = models.build_model(models.load_config(os.path.join(ROOT, "models/qwen2-tiny/config.json")))
    names = {n: tuple(p.shape) for n, p in q2.named_parameters()}
    assert names["model.layers.0.self_attn.q_proj.bias"] == (64,)
    assert names["model.layers.0.self_attn.k_proj.bias"] == (32,)
    assert "model.layers.0.self_attn.o_proj.bias" not in names
    q3cfg = models.load_config(os.path.join(ROOT, "models/qwen3-tiny/config.json"))
    q3 = models.build_model(q3cfg)
    names = {n: tuple(p.shape) for n, p in q3.named_parameters()}
    assert names["model.layers.1.self_attn.q_proj.weight"] == (96, 64)
    assert names["model.layers.1.self_attn.q_norm.weight"] == (24,)
    assert names["model.layers.1.self_attn.k_norm.weight"] == (24,)
    # q_norm normalises each head: scaling one head of q_proj's rows leaves the logits
    # (up to eps = 1e-6 in the rms).
    m = models.init_weights(models.build_model(q3cfg, D64), 4, 0.2)
    ids = torch.randint(0, 503, (2, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        a = m(ids)
        m.model.layers[0].self_attn.q_proj.weight[24:48] *= 3.0
        assert (m(ids) - a).abs().max() < 1e-5
    # mistral: with window 3 and 2 layers, token 2 reaches positions 2..6 only.
    mcfg = dict(models.load_config(os.path.join(ROOT, "models/mistral-tiny/config.json")),
                sliding_window=3)
    m = models.init_weights(models.build_model(mcfg, D64), 3, 0.2)
    ids = torch.randint(0, 503, (2, 12), generator=torch.Generator().manual_seed(1))
    ids2 = ids.clone()
    ids2[:, 2] = (ids2[:, 2] + 1) % 503
    with torch.no_grad():
        a, b = m(ids), m(ids2)
    assert torch.equal(a[:, :2], b[:, :2]) and torch.equal(a[:, 7:], b[:, 7:])
    assert not torch.allclose(a[:, 6], b[:, 6])


def check_batches():
    data = torch.arange(100)
    G, S, n = 3, 8, 100
    for t in range(5):
        x, y = reference.batch(data, t, G, S)
        for g in range(G):
            s = ((t * G + g) * S) % (n - S - 1)
            assert x[g].tolist() == list(range(s, s + S)) and y[g].tolist() == list(range(s + 1, s + S + 1))


def main():
    check_names()
    check_pieces()
    check_rope_scaling()
    check_causal(GPT2)
    check_causal(LLAMA)
    check_gqa()
    check_attention_gpt2()
    check_families()
    check_batches()
    print("models: HF names/shapes, gelu_new, RMSNorm, rotate_half, RoPE inv_freq (default, llama3, "
          "linear, dynamic, yarn), "
          "causality (gpt2, llama), GQA == repeated-kv MHA, GPT-2 attention vs per-head loop, "
          "qwen2 biases, qwen3 per-head q/k norms, mistral's window, "
          "sample offsets: OK")


if __name__ == "__main__":
    main()
