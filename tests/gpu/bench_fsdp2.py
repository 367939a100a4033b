#!/usr/bin/env python3
"""GPT-2 medium on one GPU: fsdp-run --backend nccl against PyTorch FSDP2.

usage: bench_fsdp2.py BIN STAGE WORK RESULTS [--steps 6]

fsdp: STAGE/plans/gpt2-medium-bf16.json (world size 1, micro-batch 8, 1024
tokens, bf16 parameters and bf16 compute, as --param-dtype bf16 plans it:
bf16 matmul operands and activations, GEMMs on tensor cores through
cublasGemmEx with f32 accumulation, f32 norms, softmax and loss; f32 master
weights, gradient shards and AdamW, f32 reductions), the seeded initialisation,
STAGE/data.bin. PyTorch: the same model shape (GPT-2 medium, tied head, no
dropout) built here with F.scaled_dot_product_attention, wrapped per block and
at the root with torch.distributed.fsdp.fully_shard (FSDP2) and
MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32), a world of
one process over NCCL (env init), torch.optim.AdamW, the same batch shape
(random tokens). Tokens/s are medians over the steps after the first (the
warm-up); MFU counts 6 N + 12 L S D FLOPs a token (N parameters, L layers,
S tokens, D width) against the H200's dense bf16 peak (989 TFLOP/s), and,
for reference, against its f32 peak (67 TFLOP/s). Both sides compute in bf16:
like for like.

Writes RESULTS/bench.json (after fsdp's run, and again at the end); prints
a line per system. With FSDP_GPU_DEADLINE (seconds since the epoch, from
run-all.sh) fsdp-run gets at most 60% of the time left, PyTorch the rest.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIG = os.path.join(ROOT, "models", "gpt2-medium", "config.json")
BF16_PEAK = 989e12
F32_PEAK = 67e12
B, S = 8, 1024
DEADLINE = float(os.environ.get("FSDP_GPU_DEADLINE", "0") or 0)


def model_flops_per_token(n_params, layers, d):
    return 6 * n_params + 12 * layers * S * d


def fsdp_run(bin_dir, stage, work, steps):
    plan = os.path.join(stage, "plans", "gpt2-medium-bf16.json")
    m = os.path.join(work, "bench.fsdp.jsonl")
    if os.path.exists(m):
        os.remove(m)
    cmd = [os.path.join(bin_dir, "fsdp-run"), plan, "--backend", "nccl", "--data",
           os.path.join(stage, "data.bin"), "--steps", str(steps), "--metrics", m]
    t0 = time.time()
    timeout = 300
    if DEADLINE:
        timeout = max(20, min(timeout, 0.6 * (DEADLINE - t0)))
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        code, text = r.returncode, r.stdout
    except subprocess.TimeoutExpired as e:
        text = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        code, text = 124, text + "\n[killed after %.0f s]" % timeout
    print(text.rstrip()[-3000:], flush=True)
    res = {"exit": code, "wall_s": round(time.time() - t0, 1)}
    rows = [json.loads(x) for x in open(m) if x.strip()] if os.path.exists(m) else []
    if code != 0 or len(rows) < 2:
        res["ok"] = False
        res["tail"] = text.strip().splitlines()[-3:]
        res["steps_done"] = len(rows)
        return res
    times = [x["step_time_s"] for x in rows[1:]]
    t = statistics.median(times)
    plan_json = json.load(open(plan))
    res.update({"ok": True, "step_time_s": t, "step_times_s": [x["step_time_s"] for x in rows],
                "tokens_per_s": B * S / t, "losses": [x["loss"] for x in rows],
                "peak_bytes": rows[-1]["peak_bytes"],
                "predicted_peak_bytes": rows[-1]["predicted_peak_bytes"],
                "outside_arena_bytes": rows[-1].get("outside_arena_bytes"),
                "predicted_step_time_s": rows[-1].get("predicted_step_time_s"),
                "parameters": plan_json["model"]["parameters"]})
    return res


def torch_fsdp2(steps):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    cfg = json.load(open(CONFIG))
    V, P, D, H, L = (cfg["vocab_size"], cfg["n_positions"], cfg["n_embd"], cfg["n_head"],
                     cfg["n_layer"])
    eps = cfg["layer_norm_epsilon"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(D, eps=eps)
            self.c_attn = nn.Linear(D, 3 * D)
            self.c_proj = nn.Linear(D, D)
            self.ln_2 = nn.LayerNorm(D, eps=eps)
            self.c_fc = nn.Linear(D, 4 * D)
            self.mlp_proj = nn.Linear(4 * D, D)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)
            q, k, v = (t.view(b, s, H, D // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, s, D))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, D)
            self.wpe = nn.Embedding(P, D)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(D, eps=eps)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.h:
                x = blk(x)
            return F.linear(self.ln_f(x), self.wte.weight)  # tied head

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=0, world_size=1, init_method="env://")
    torch.cuda.set_device(0)
    torch.manual_seed(0)
    model = GPT2().cuda()
    n_params = sum(p.numel() for p in model.parameters())
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in model.h:
        fully_shard(blk, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    g = torch.Generator(device="cuda").manual_seed(0)
    times, losses = [], []
    for _ in range(steps):
        tok = torch.randint(0, V, (B, S + 1), device="cuda", generator=g)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = model(tok[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, V), tok[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    peak = torch.cuda.max_memory_allocated()
    dist.destroy_process_group()
    t = statistics.median(times[1:])
    return {"ok": True, "step_time_s": t, "step_times_s": times, "tokens_per_s": B * S / t,
            "losses": losses, "peak_bytes": peak, "parameters": n_params,
            "torch": torch.__version__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("stage")
    ap.add_argument("work")
    ap.add_argument("results")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    cfg = json.load(open(CONFIG))
    L, D = cfg["n_layer"], cfg["n_embd"]
    out = {"model": "gpt2-medium", "micro_batch": B, "seq_len": S, "world_size": 1,
           "mfu_flops_per_token": "6 N + 12 L S D", "bf16_peak_flops": BF16_PEAK,
           "f32_peak_flops": F32_PEAK}
    fs = fsdp_run(a.bin, a.stage, a.work, a.steps)
    out["fsdp"] = fs
    out["pytorch_fsdp2"] = {"ok": False, "why": "not run yet"}
    with open(os.path.join(a.results, "bench.json"), "w") as f:
        json.dump(out, f, indent=1)
    try:
        import torch
        if torch.cuda.is_available():
            out["pytorch_fsdp2"] = torch_fsdp2(a.steps)
        else:
            out["pytorch_fsdp2"] = {"ok": False, "why": "torch.cuda.is_available() is False"}
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        out["pytorch_fsdp2"] = {"ok": False, "why": "%s: %s" % (type(e).__name__, e)}
    for key in ("fsdp", "pytorch_fsdp2"):
        r = out[key]
        if r.get("ok"):
            fpt = model_flops_per_token(r["parameters"], L, D)
            r["mfu_vs_bf16_peak"] = r["tokens_per_s"] * fpt / BF16_PEAK
            r["mfu_vs_f32_peak"] = r["tokens_per_s"] * fpt / F32_PEAK
            print("%s: %.0f tokens/s, %.3f s a step, MFU %.1f%% of bf16 peak (%.1f%% of f32)" %
                  (key, r["tokens_per_s"], r["step_time_s"], 100 * r["mfu_vs_bf16_peak"],
                   100 * r["mfu_vs_f32_peak"]), flush=True)
        else:
            print("%s: FAILED %s" % (key, r.get("why", r.get("tail", ""))), flush=True)
    if out["fsdp"].get("ok") and out["pytorch_fsdp2"].get("ok"):
        out["fsdp_over_pytorch_tokens_per_s"] = (out["fsdp"]["tokens_per_s"] /
                                                 out["pytorch_fsdp2"]["tokens_per_s"])
    with open(os.path.join(a.results, "bench.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0 if out["fsdp"].get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
