#!/usr/bin/env python3
"""Training-step benchmark: fsdp-run against PyTorch 1.13 eager, one thread.

GPT-2 with 6 layers, d=384, 6 heads, vocab 4096; 8 x 128 tokens a step. Prints
the median step time of each (after WARMUP steps: PyTorch's caching allocator
and fsdp-run's first touch of its arena both make the first steps slow,
PyTorch's for two or three), their ratio, fsdp's model FLOP/s against this
machine's single-core sgemm rate, the step's matmul floor (its projection and
head products alone through OpenBLAS: the bound on any speed-up over PyTorch,
which makes the same products), and, at world size 4 on the threads backend,
the step time of full-shard against no-shard.

usage: train_bench.py BIN_DIR [--steps 12]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
E2E = os.path.join(ROOT, "tests", "e2e")
CONFIG = os.path.join(HERE, "models", "gpt2-6l-384", "config.json")
PY = "/usr/bin/python3"
WARMUP = 3  # steps left out of each median


def sh(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if r.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stdout))
    return r.stdout


def fsdp_step_time(bin_dir, work, world, strategy, steps, weights, data, env=None, flags=()):
    tag = "%d-%s%s" % (world, strategy, "".join(flags).replace("-", ""))
    plan = os.path.join(work, "plan-%s.json" % tag)
    sh([os.path.join(bin_dir, "fsdp-plan"), CONFIG, "--world-size", str(world),
        "--micro-batch", str(8 // world), "--seq-len", "128", "--strategy", strategy, "-o", plan]
       + list(flags))
    metrics = os.path.join(work, "m-%s.jsonl" % tag)
    sh([os.path.join(bin_dir, "fsdp-run"), plan, "--weights", weights, "--data", data,
        "--steps", str(steps), "--metrics", metrics, "--quiet"], env=env)
    times = [json.loads(l)["step_time_s"] for l in open(metrics)][WARMUP:]
    peak = json.loads(open(metrics).readlines()[-1])["peak_bytes"]
    return statistics.median(times), peak


def torch_step_time(steps, weights, data, env=None):
    # torch.set_num_threads(1) does not reach OpenBLAS, which would use every
    # core for the matmuls: one thread means one thread for the BLAS too.
    env = dict(env or os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    code = r"""
import sys, time, json, statistics
sys.path.insert(0, %r)
import torch
torch.set_num_threads(1)
import models, safetensors_io
cfg = models.load_config(%r)
model = models.build_model(cfg, torch.float32)
import reference
reference.load_weights(model, %r)
decay = [p for p in model.parameters() if p.dim() >= 2]
other = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.95), eps=1e-8, foreach=False)
import array
tokens = array.array("H"); tokens.frombytes(open(%r, "rb").read())
tokens = torch.tensor(tokens.tolist(), dtype=torch.int64)
times = []
for step in range(%d):
    x = torch.stack([tokens[i * 128:(i + 1) * 128] for i in range(8)])
    y = torch.stack([tokens[i * 128 + 1:(i + 1) * 128 + 1] for i in range(8)])
    t0 = time.perf_counter()
    loss = models.lm_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    times.append(time.perf_counter() - t0)
print(json.dumps(statistics.median(times[%d:])))
""" % (E2E, CONFIG, weights, data, steps, WARMUP)
    return float(sh([PY, "-c", code], env=env).strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="fsdp-bench-")
    weights = os.path.join(work, "w.safetensors")
    data = os.path.join(work, "data.bin")
    sh([PY, os.path.join(E2E, "make_weights.py"), CONFIG, weights, "--seed", "1"])
    sh([PY, os.path.join(E2E, "make_data.py"), data, "--random", "200000", "--vocab", "4096"])

    cfg = json.load(open(CONFIG))
    L, d, V, S, T = cfg["n_layer"], cfg["n_embd"], cfg["vocab_size"], 128, 8 * 128
    # Matmul FLOPs of a training step (forward x 3): per token and layer 24 d^2
    # for the projections and 2 S d for causal attention (QK and AV, half the
    # square), plus 2 d V for the head.
    flops = 3 * T * (L * (24 * d * d + 2 * S * d) + 2 * d * V)

    # Which OpenBLAS kernels: the library's own choice for this CPU (it falls
    # back to generic ones on CPUs it does not know), and fsdp-run's (which
    # names better ones then, runtime/Blas.h). An OPENBLAS_CORETYPE in the
    # environment would pin both: it is set aside here, and reported.
    pinned = os.environ.get("OPENBLAS_CORETYPE")
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    sh([os.path.join(args.bin, "fsdp-plan"), CONFIG, "--world-size", "1", "--micro-batch", "1",
        "--seq-len", "16", "-o", os.path.join(work, "probe.json")])

    def probe(env):
        out = sh([os.path.join(args.bin, "fsdp-run"), os.path.join(work, "probe.json"),
                  "--steps", "1", "--data", data], env=env)
        return out.split("OpenBLAS ")[1].split(" kernels")[0]

    library_core = probe(dict(base, FSDP_KEEP_BLAS_CORE="1"))
    core = probe(base)
    print("GPT-2 6 layers, d=384, 6 heads, vocab 4096; 8 x 128 tokens a step; one thread")
    if pinned:
        print(" (OPENBLAS_CORETYPE=%s in the environment: set aside for this benchmark)" % pinned)
    print(" OpenBLAS's own kernels for this CPU: %s; fsdp-run's: %s" % (library_core, core))
    # The comparison of everything but the BLAS: the same kernels for both
    # (PyTorch and the sgemm yardstick too).
    configs = [("OpenBLAS %s kernels for both" % core, dict(base, OPENBLAS_CORETYPE=core))]
    if core != library_core:
        configs.append(("OpenBLAS's own choice for this CPU (%s) for both" % library_core,
                        dict(base, OPENBLAS_CORETYPE=library_core)))
        # As each runs when installed: fsdp-run picks its kernels, PyTorch
        # keeps the library's choice.
        fsdp_auto, _ = fsdp_step_time(args.bin, work, 1, "full-shard", args.steps, weights, data,
                                      base)
        torch_default = torch_step_time(args.steps, weights, data, base)
        print(" as installed (fsdp-run: OpenBLAS %s kernels; PyTorch: %s):" % (core, library_core))
        print("  fsdp-run (world size 1)   %.3f s/step" % fsdp_auto)
        print("  PyTorch 1.13 eager        %.3f s/step" % torch_default)
        print("  speed-up                  %.2fx (target >= 1.5x)" % (torch_default / fsdp_auto))
    if pinned and pinned not in (core, library_core):
        configs.append(("OpenBLAS %s kernels (the environment's) for both" % pinned,
                        dict(base, OPENBLAS_CORETYPE=pinned)))
    for label, env in configs:
        sgemm = sh([os.path.join(args.bin, "fsdp-sgemm-bench")], env=env).strip()
        sgemm_rate = float(sgemm.split(":")[1].split()[0]) * 1e9
        # The step's projection and head products alone, each timed by itself
        # with warm caches: no step that makes them with this OpenBLAS is
        # faster, PyTorch's or ours.
        floor_out = sh([os.path.join(args.bin, "fsdp-sgemm-bench"), "--gpt2", str(L), str(d),
                        str(V), str(T)], env=env)
        floor = float(floor_out.split("matmul floor: ")[1].split()[0]) / 1e3
        fsdp1, _ = fsdp_step_time(args.bin, work, 1, "full-shard", args.steps, weights, data, env)
        torch1 = torch_step_time(args.steps, weights, data, env)
        print(" %s:" % label)
        print("  fsdp-run (world size 1)   %.3f s/step" % fsdp1)
        print("  PyTorch 1.13 eager        %.3f s/step" % torch1)
        print("  speed-up                  %.2fx (target >= 1.5x)" % (torch1 / fsdp1))
        print("  model FLOP/s              %.1f GFLOP/s = %.0f%% of %s (target >= 50%%)" % (
            flops / fsdp1 / 1e9, 100 * flops / fsdp1 / sgemm_rate, sgemm))
        print("  matmul floor              %.3f s/step: the step's projection and head sgemm calls"
              " alone, each at its best (fsdp-sgemm-bench --gpt2)" % floor)
        print("  PyTorch / floor           %.2fx: the most any step making these products with"
              " this OpenBLAS can gain on PyTorch" % (torch1 / floor))
        print("  fsdp-run beyond the floor %.3f s/step (PyTorch %.3f)" % (fsdp1 - floor,
                                                                        torch1 - floor))
    full, full_peak = fsdp_step_time(args.bin, work, 4, "full-shard", args.steps, weights, data,
                                     configs[0][1])
    ddp, ddp_peak = fsdp_step_time(args.bin, work, 4, "no-shard", args.steps, weights, data,
                                   configs[0][1])
    print("World size 4 on the threads backend (2 x 128 tokens per rank):")
    print("  full-shard  %.3f s/step, peak %.1f MiB per rank" % (full, full_peak / 2**20))
    print("  no-shard    %.3f s/step, peak %.1f MiB per rank" % (ddp, ddp_peak / 2**20))
    print("  the cost of sharding: %+.1f%% step time for %.1fx less memory" % (
        100 * (full / ddp - 1), ddp_peak / full_peak))
    # bf16 compute on the CPU: bf16 activations and matmul operands (sgemm on
    # f32 panels converted from bf16: Debian's OpenBLAS has no sbgemm)
    # against f32 compute of the same bf16 parameters, world size 1.
    f32c, f32_peak = fsdp_step_time(args.bin, work, 1, "full-shard", args.steps, weights, data,
                                    configs[0][1], ["--param-dtype", "bf16", "--compute-dtype",
                                                    "f32"])
    bf16c, bf16_peak = fsdp_step_time(args.bin, work, 1, "full-shard", args.steps, weights, data,
                                      configs[0][1], ["--param-dtype", "bf16"])
    print("bf16 parameters, world size 1 (8 x 128 tokens):")
    print("  f32 compute   %.3f s/step, peak %.1f MiB" % (f32c, f32_peak / 2**20))
    print("  bf16 compute  %.3f s/step, peak %.1f MiB" % (bf16c, bf16_peak / 2**20))
    print("  bf16 / f32    %.2fx the time, %.2fx the memory (the conversions to and from"
          " f32 panels: fsdp-sgemm-bench --bf16)" % (bf16c / f32c, bf16_peak / f32_peak))


if __name__ == "__main__":
    main()
