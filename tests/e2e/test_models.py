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


# ---------------------------------------------------------------------------- mixture of experts

MIXTRAL = models.load_config(os.path.join(ROOT, "models/mixtral-tiny/config.json"))
QWEN3_MOE = models.load_config(os.path.join(ROOT, "models/qwen3_moe-tiny/config.json"))


def check_moe_names():
    # HF's names, shapes and order, and the parameter counts summed (the
    # totals fsdp-plan prints for these configs).
    m = models.build_model(MIXTRAL)
    names = [(n, tuple(p.shape)) for n, p in m.named_parameters()]
    layer0 = [(n[len("model.layers.0."):], s) for n, s in names if n.startswith("model.layers.0.")]
    want = [("self_attn.q_proj.weight", (64, 64)), ("self_attn.k_proj.weight", (32, 64)),
            ("self_attn.v_proj.weight", (32, 64)), ("self_attn.o_proj.weight", (64, 64)),
            ("block_sparse_moe.gate.weight", (4, 64))]
    for e in range(4):
        want += [(f"block_sparse_moe.experts.{e}.w1.weight", (96, 64)),
                 (f"block_sparse_moe.experts.{e}.w2.weight", (64, 96)),
                 (f"block_sparse_moe.experts.{e}.w3.weight", (96, 64))]
    want += [("input_layernorm.weight", (64,)), ("post_attention_layernorm.weight", (64,))]
    assert layer0 == want, layer0
    assert names[0] == ("model.embed_tokens.weight", (503, 64))
    assert names[-2:] == [("model.norm.weight", (64,)), ("lm_head.weight", (503, 64))]
    n = sum(p.numel() for p in m.parameters())
    assert n == 237248, n
    q = models.build_model(QWEN3_MOE)
    shapes = {n: tuple(p.shape) for n, p in q.named_parameters()}
    for i in (0, 2):  # sparse; layer 1 is in mlp_only_layers
        p = f"model.layers.{i}.mlp."
        assert shapes[p + "gate.weight"] == (8, 64)
        for e in range(8):
            assert shapes[p + f"experts.{e}.gate_proj.weight"] == (32, 64)
            assert shapes[p + f"experts.{e}.up_proj.weight"] == (32, 64)
            assert shapes[p + f"experts.{e}.down_proj.weight"] == (64, 32)
        assert p + "gate_proj.weight" not in shapes
    assert shapes["model.layers.1.mlp.gate_proj.weight"] == (128, 64)
    assert shapes["model.layers.1.mlp.down_proj.weight"] == (64, 128)
    assert not any(n.startswith("model.layers.1.mlp.experts") for n in shapes)
    assert shapes["model.layers.2.self_attn.q_proj.weight"] == (96, 64)
    assert shapes["model.layers.2.self_attn.k_norm.weight"] == (24,)
    keys = [n for n in shapes if n.startswith("model.layers.0.")]
    assert keys.index("model.layers.0.self_attn.k_norm.weight") + 1 == keys.index("model.layers.0.mlp.gate.weight")
    assert keys[keys.index("model.layers.0.mlp.gate.weight") + 1:][:3] == [
        "model.layers.0.mlp.experts.0." + w + ".weight" for w in ("gate_proj", "up_proj", "down_proj")]
    n = sum(p.numel() for p in q.parameters())
    assert n == 244176, n
    # Which layers are sparse: (i+1) % decoder_sparse_step == 0, not in mlp_only_layers.
    sparse = lambda cfg: [hasattr(l.mlp, "gate") and not hasattr(l.mlp, "gate_proj")
                          for l in models.build_model(cfg).model.layers]
    assert sparse(QWEN3_MOE) == [True, False, True]
    assert sparse(dict(QWEN3_MOE, decoder_sparse_step=3, mlp_only_layers=None)) == [False, False, True]
    assert sparse(dict(QWEN3_MOE, decoder_sparse_step=2, mlp_only_layers=[])) == [False, True, False]
    assert models.build_model(dict(QWEN3_MOE, num_experts=0)).moe is None
    assert models.build_model(dict(MIXTRAL, sliding_window=16)).c["window"] == 16
    assert models.build_model(MIXTRAL).c["window"] == 0


def check_moe_config_errors():
    bad = [(MIXTRAL, "router_jitter_noise", 0.01), (MIXTRAL, "num_local_experts", 1),
           (MIXTRAL, "num_experts_per_tok", 5), (MIXTRAL, "num_experts_per_tok", 0),
           (MIXTRAL, "router_aux_loss_coef", -0.1), (MIXTRAL, "output_router_logits", "true"),
           (MIXTRAL, "num_local_experts", 4.0),
           (QWEN3_MOE, "num_experts", 1), (QWEN3_MOE, "num_experts", -2),
           (QWEN3_MOE, "num_experts_per_tok", 9), (QWEN3_MOE, "norm_topk_prob", 1),
           (QWEN3_MOE, "mlp_only_layers", [3]), (QWEN3_MOE, "mlp_only_layers", 1),
           (QWEN3_MOE, "decoder_sparse_step", 0), (QWEN3_MOE, "moe_intermediate_size", 0),
           (QWEN3_MOE, "use_sliding_window", True), (QWEN3_MOE, "attention_bias", True)]
    for cfg, key, value in bad:
        try:
            models.build_model(dict(cfg, **{key: value}))
        except models.ConfigError as e:
            assert key in str(e) or key == "use_sliding_window" or key == "attention_bias", (key, e)
            continue
        raise AssertionError(f"{cfg['model_type']} {key} = {value!r} was accepted")
    assert models.dropout_keys(dict(MIXTRAL, attention_dropout=0.1)) == [("attention_dropout", 0.1)]
    assert models.dropout_keys(dict(QWEN3_MOE, attention_dropout=0.1)) == [("attention_dropout", 0.1)]


def moe_block(normalize, expert, seed, d=6, E=4, k=2, inter=5, std=0.5):
    """A SparseMoeBlock in f64 with random weights."""
    blk = models.SparseMoeBlock(d, dict(top_k=k, normalize=normalize, E=E, inter=inter,
                                        expert=expert), D64)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in blk.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=D64) * std)
    return blk


def moe_loop(blk, x):
    """HF's loop form (MixtralSparseMoeBlock.forward, written again): the top
    k of each token by a Python sort on (-p, expert), then for each expert the
    tokens routed to it, weighted, index_add-ed into the output."""
    B, S, D = x.shape
    h = x.reshape(-1, D)
    p = torch.softmax(h @ blk.gate.weight.t(), dim=-1)
    E, k = p.shape[1], blk.top_k
    sel = torch.tensor([sorted(range(E), key=lambda e: (-float(p[t, e]), e))[:k]
                        for t in range(h.shape[0])])
    w = p.gather(1, sel)
    if blk.normalize:
        w = w / w.sum(-1, keepdim=True)
    out = torch.zeros_like(h)
    mask = F.one_hot(sel, E).permute(2, 1, 0)  # [E, k, T]
    for e in range(E):
        j, tok = torch.where(mask[e])
        if tok.numel():
            out = out.index_add(0, tok, blk.experts[e](h[tok]) * w[tok, j, None])
    return out.view(B, S, D), sel


def check_moe_routing():
    # The block against HF's loop form, forward and autograd gradients, for
    # both expert kinds, both normalisations and k = 1, 2, 3 (f64; 1e-12
    # covers sums of a few terms in another grouping).
    for normalize in (False, True):
        for expert, k in ((models.MixtralExpert, 2), (models.LlamaMLP, 1), (models.LlamaMLP, 3)):
            blk = moe_block(normalize, expert, 10 + k, k=k)
            x = torch.randn(2, 9, 6, dtype=D64, generator=torch.Generator().manual_seed(k),
                            requires_grad=True)
            y = blk(x)
            want, sel = moe_loop(blk, x)
            assert torch.allclose(y, want, rtol=0, atol=1e-12), (y - want).abs().max()
            chosen = torch.zeros(18, 4, dtype=torch.bool)
            chosen[torch.arange(18).unsqueeze(1), sel] = True
            assert torch.equal(blk.last_chosen, chosen)
            r = torch.randn(2, 9, 6, dtype=D64, generator=torch.Generator().manual_seed(5))
            g1 = torch.autograd.grad((y * r).sum(), [x] + list(blk.parameters()))
            g2 = torch.autograd.grad((want * r).sum(), [x] + list(blk.parameters()))
            for a, b in zip(g1, g2):
                assert torch.allclose(a, b, rtol=0, atol=1e-12)
    # k = E with renormalisation: the dense mixture sum_e p_e expert_e(x).
    blk = moe_block(True, models.LlamaMLP, 3, k=4)
    x = torch.randn(1, 5, 6, dtype=D64, generator=torch.Generator().manual_seed(2))
    p = torch.softmax(x @ blk.gate.weight.t(), -1)
    want = sum(p[..., e:e + 1] * blk.experts[e](x) for e in range(4))
    assert torch.allclose(blk(x), want, rtol=0, atol=1e-12)


def check_moe_ties():
    # Ties go to the lower expert index, and order lists the choices by
    # descending p, ties lower index first.
    p = torch.tensor([[0.3, 0.3, 0.2, 0.2], [0.1, 0.3, 0.3, 0.3], [0.25] * 4, [0.1, 0.2, 0.3, 0.4]])
    chosen, order = models.topk_mask(p, 3)
    assert order.tolist() == [[0, 1, 2], [1, 2, 3], [0, 1, 2], [3, 2, 1]], order
    assert chosen.tolist() == [[True, True, True, False], [False, True, True, True],
                               [True, True, True, False], [False, True, True, True]]
    # All gate weights zero: every logit is 0, every p equal, and every token
    # picks experts 0..k-1, in the block and in the load-balancing loss; the
    # unchosen experts' gradients are zero tensors, not None (fsdp writes zeros,
    # which AdamW then decays and steps).
    for cfg in (MIXTRAL, QWEN3_MOE):
        m = models.init_weights(models.build_model(cfg), 3)
        with torch.no_grad():
            for name, p in m.named_parameters():
                if name.endswith(("block_sparse_moe.gate.weight", "mlp.gate.weight")):
                    p.zero_()
        ids = torch.randint(0, 503, (2, 16), generator=torch.Generator().manual_seed(4))
        loss = models.causal_lm_loss(m, ids, ids)
        loss.backward()
        k = m.moe["top_k"]
        blocks = [l.mlp if cfg is QWEN3_MOE else l.block_sparse_moe for l in m.model.layers
                  if not hasattr(l, "mlp") or isinstance(l.mlp, models.SparseMoeBlock)]
        assert len(blocks) == 2
        for blk in blocks:
            want = torch.zeros(32, m.moe["E"], dtype=torch.bool)
            want[:, :k] = True
            assert torch.equal(blk.last_chosen, want)
            for e, ex in enumerate(blk.experts):
                for p in ex.parameters():
                    assert p.grad is not None and (e < k) == bool(p.grad.abs().max() > 0)
        router = []
        with torch.no_grad():
            m(ids, router)
        chosen, _ = models.topk_mask(torch.softmax(torch.cat([r.reshape(-1, r.shape[-1])
                                                               for r in router]), -1), k)
        assert chosen[:, :k].all() and not chosen[:, k:].any()


def hf_aux_loss(logits, E, k):
    """transformers' load_balancing_loss_func (no attention mask), written
    from its definition: a tuple of per-layer [T, E] logits concatenated,
    softmax, torch.topk, one_hot [rows, k, E], tokens_per_expert the mean of
    it over rows [k, E], router_prob_per_expert the mean of p [E], E * the
    sum of their product."""
    cat = torch.cat(logits, dim=0)
    p = torch.softmax(cat, dim=-1)
    _, selected = torch.topk(p, k, dim=-1)
    mask = F.one_hot(selected, E)
    tokens_per_expert = torch.mean(mask.to(p.dtype), dim=0)
    router_prob_per_expert = torch.mean(p, dim=0)
    return torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0)) * E


def check_moe_aux():
    g = torch.Generator().manual_seed(8)
    for E, k in ((4, 2), (8, 2), (8, 3)):
        logits = [torch.randn(2, 7, E, dtype=D64, generator=g) for _ in range(3)]
        ours = models.moe_aux_loss(logits, k)
        want = hf_aux_loss([x.reshape(-1, E) for x in logits], E, k)
        # Two f64 orderings of sums of at most 3*14 positive terms: each
        # within 42 u64 (5e-15) relative of the exact value.
        assert abs(float(ours - want)) <= 1e-14 * abs(float(want)), (ours, want)
    # A forward's loss: the mean over its chunks of the chunk's cross-entropy
    # plus coef x the chunk's aux loss (each sample's forward is independent
    # of the others', so a chunk run alone has the same router logits).
    m = models.init_weights(models.build_model(QWEN3_MOE, D64), 5, 0.2)
    ids = torch.randint(0, 503, (6, 8), generator=torch.Generator().manual_seed(6))
    tg = torch.randint(0, 503, (6, 8), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        for M in (1, 2, 3, 6):
            whole = float(models.causal_lm_loss(m, ids, tg, M))
            parts = []
            for c in range(6 // M):
                router = []
                logits = m(ids[c * M:(c + 1) * M], router)
                aux = hf_aux_loss([r.reshape(-1, 8) for r in router], 8, 2)
                parts.append(float(models.lm_loss(logits, tg[c * M:(c + 1) * M])) + 0.01 * float(aux))
            # The same f64 forward of each sample, summed in two groupings:
            # a loss near 6 over at most 48 tokens' terms moves by ~1e-14.
            assert abs(whole - sum(parts) / len(parts)) <= 1e-12, (M, whole, parts)
        plain = models.build_model(dict(QWEN3_MOE, output_router_logits=False), D64)
        plain.load_state_dict(m.state_dict())
        ce = float(models.lm_loss(plain(ids), tg))
        assert float(models.causal_lm_loss(plain, ids, tg, 2)) == ce
        assert float(models.causal_lm_loss(m, ids, tg, 6)) > ce  # the term is there


def finite_difference_check(f, params, label, h=1e-5):
    """Autograd's gradient of the scalar f() against central differences,
    every element: |D(h) - g| <= |D(2h) - D(h)| (the truncation, O(h^2),
    estimated as Richardson does) + 8 u |f| / h (the rounding of f's values,
    u = 2^-53; 8e5 u |f| at h = 1e-5), far above autograd's own f64
    rounding of g (a few hundred operations here, about u |g| each)."""
    grads = torch.autograd.grad(f(), params, allow_unused=True)
    for p, g in zip(params, grads):
        g = torch.zeros_like(p) if g is None else g
        flat, gflat = p.data.view(-1), g.reshape(-1)
        for i in range(flat.numel()):
            v = flat[i].item()
            vals = {}
            with torch.no_grad():
                for s in (-2, -1, 1, 2):
                    flat[i] = v + s * h
                    vals[s] = float(f())
                flat[i] = v
            d1 = (vals[1] - vals[-1]) / (2 * h)
            d2 = (vals[2] - vals[-2]) / (4 * h)
            scale = max(abs(x) for x in vals.values())
            tol = abs(d2 - d1) + 8 * 2.0 ** -53 * scale / h
            assert abs(d1 - float(gflat[i])) <= tol, (label, i, d1, float(gflat[i]), tol)


def check_moe_gradients():
    # f64 finite differences: the router (softmax, top-k weights, the
    # renormalisation or none) through the block's output, for the gate
    # weights and the input; and the load-balancing loss for its logits. The
    # choices must stay as they are within +-2h (asserted: no near-tie).
    for normalize in (False, True):
        blk = moe_block(normalize, models.LlamaMLP, 21)
        x = torch.randn(1, 6, 6, dtype=D64, generator=torch.Generator().manual_seed(9),
                        requires_grad=True)
        r = torch.randn(1, 6, 6, dtype=D64, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            blk(x)
        base = blk.last_chosen.clone()

        def f():
            y = (blk(x) * r).sum()
            assert torch.equal(blk.last_chosen, base), "a choice moved within the step"
            return y
        finite_difference_check(f, [blk.gate.weight, x], "router, normalize=%s" % normalize)
    logits = torch.randn(2, 5, 4, dtype=D64, generator=torch.Generator().manual_seed(3),
                         requires_grad=True)
    other = torch.randn(2, 5, 4, dtype=D64, generator=torch.Generator().manual_seed(4),
                        requires_grad=True)
    base = models.topk_mask(torch.softmax(torch.cat([logits, other]).view(-1, 4), -1), 2)[0]

    def aux():
        rows = torch.cat([logits, other]).view(-1, 4)
        assert torch.equal(models.topk_mask(torch.softmax(rows, -1), 2)[0], base)
        return models.moe_aux_loss([logits, other], 2)
    finite_difference_check(aux, [logits, other], "aux loss")


def check_moe_as_dense():
    # Mixtral whose experts are all one SwiGLU MLP (renormalised weights sum
    # to 1) is that dense model: a LLaMA with the same attention, norms and
    # MLP; Qwen3-MoE without experts is Qwen3. Checks the wiring around the
    # block (attention reused, residuals, norms, head).
    mix = models.init_weights(models.build_model(MIXTRAL, D64), 6, 0.2)
    dense_cfg = {k: v for k, v in MIXTRAL.items() if k not in (
        "num_local_experts", "num_experts_per_tok", "router_aux_loss_coef",
        "output_router_logits", "router_jitter_noise")}
    dense = models.build_model(dict(dense_cfg, model_type="mistral"), D64)
    mp = dict(mix.named_parameters())
    with torch.no_grad():
        for name, p in dense.named_parameters():
            for ours, theirs in (("mlp.gate_proj", "w1"), ("mlp.up_proj", "w3"), ("mlp.down_proj", "w2")):
                if ours in name:
                    src = mp[name.replace(ours, "block_sparse_moe.experts.0." + theirs)]
                    p.copy_(src)
                    for e in range(1, 4):
                        mp[name.replace(ours, f"block_sparse_moe.experts.{e}.{theirs}")].copy_(src)
                    break
            else:
                p.copy_(mp[name])
        ids = torch.randint(0, 503, (2, 12), generator=torch.Generator().manual_seed(2))
        assert torch.allclose(mix(ids), dense(ids), rtol=0, atol=1e-12)
        q = models.init_weights(models.build_model(dict(QWEN3_MOE, num_experts=0), D64), 4, 0.2)
        q3 = models.build_model(dict(QWEN3_MOE, model_type="qwen3"), D64)
        q3.load_state_dict(q.state_dict())
        assert torch.equal(q(ids), q3(ids))


def check_moe_bf16():
    # bf16 compute: the block's output, routing weights and the gate's
    # gradient are bf16 values; the output is the weighted sum of the bf16
    # expert outputs in ascending expert order in f32, rounded once.
    models.BF16_COMPUTE = True
    try:
        blk = moe_block(True, models.MixtralExpert, 31, d=16, E=4, k=2, inter=8, std=0.3)
        for p in blk.parameters():
            p.data = p.data.float()
        x = torch.randn(1, 10, 16, generator=torch.Generator().manual_seed(3))
        x = x.to(torch.bfloat16).float().requires_grad_()
        y = blk(x)
        bf = lambda t: t.to(torch.bfloat16).float()
        assert torch.equal(y, bf(y))
        h = x.view(10, 16)
        logits = bf(h @ bf(blk.gate.weight).t())
        _, chosen, w = models.route(logits, 2, True)
        w = bf(w)
        want = torch.zeros(10, 16)
        for e in range(4):
            out = blk.experts[e](h)
            want = want + torch.where(chosen[:, e:e + 1], w[:, e:e + 1] * out, torch.zeros(()))
        assert torch.equal(y.view(10, 16), bf(want))
        y.sum().backward()
        g = blk.gate.weight.grad
        assert torch.equal(g, bf(g)) and g.abs().max() > 0
    finally:
        models.BF16_COMPUTE = False


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
    check_moe_names()
    check_moe_config_errors()
    check_moe_routing()
    check_moe_ties()
    check_moe_aux()
    check_moe_gradients()
    check_moe_as_dense()
    check_moe_bf16()
    print("models: HF names/shapes, gelu_new, RMSNorm, rotate_half, RoPE inv_freq (default, llama3, "
          "linear, dynamic, yarn), "
          "causality (gpt2, llama), GQA == repeated-kv MHA, GPT-2 attention vs per-head loop, "
          "qwen2 biases, qwen3 per-head q/k norms, mistral's window, "
          "sample offsets: OK")
    print("models, MoE: mixtral/qwen3_moe names, order, counts (237,248, 244,176), sparse layers, "
          "config errors; routing vs HF's loop (k 1-3, renormalised or not); ties to the lower "
          "expert, zero gates pick 0..k-1, unchosen experts' zero gradients; aux loss vs HF's "
          "formula and per chunk; router and aux gradients vs f64 finite differences; identical "
          "experts == dense mistral, no experts == qwen3; bf16 rounding points: OK")


if __name__ == "__main__":
    main()
