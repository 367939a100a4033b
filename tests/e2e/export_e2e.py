#!/usr/bin/env python3
"""End-to-end: the folder `fsdp-run --save-weights DIR` writes loads as
transformers' from_pretrained loads it (hf_load.py, its rules), into the
PyTorch reference model, and gives fsdp's own last eval loss.

For gpt2-tiny (f32, tied head) and llama-tiny (planned --param-dtype bf16
--compute-dtype f32, untied head): plan from the HF config at 2 ranks, train
3 steps from seeded weights with --eval-data (so the last step's eval_loss
is computed after the last update), --save-weights DIR --max-shard-size 40KB
(several shards). Checks:
  * DIR has config.json, equal to the input config but for torch_dtype,
    which is the saved dtype's ("float32"; "bfloat16", the default of a bf16
    plan); generation_config.json as GenerationConfig.from_model_config
    derives it (the config's token ids and "_from_model_config": true);
    shards named model-0000i-of-0000N.safetensors, N > 1, every tensor in
    the dtype config.json names;
  * the reference built from DIR alone (hf_load.load) gives, on eval batch 0
    of --eval-data, fsdp's last eval_loss within bounds.f32_loss of the gap
    between that reference in f32 and in f64 on the same weights: both
    sides evaluate the same function of the same values (the saved bf16
    values are exactly what fsdp's bf16 gather rounds the masters to and
    its f32 compute reads), so what differs is f32 rounding, in two
    summation orders (bounds.py, F32_FACTOR: 4x the measured gap, floor 64
    ulps);
  * a second run, the same but for --save-dtype (bf16 for gpt2-tiny, f32 for
    llama-tiny; the threads backend is deterministic, bit for bit): every
    BF16 tensor is the F32 tensor's torch .to(torch.bfloat16), bit for bit
    (round to nearest even);
  * controls, so that the comparison can fail: the initial weights' eval
    loss lies outside the bound (a folder of untrained weights is caught);
    for the bf16 save, the f32 masters' loss lies outside it too (a bf16
    folder not rounded as fsdp's compute reads it is caught); and the loader
    refuses DIR without config.json.

usage: export_e2e.py BIN_DIR WORK_DIR
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch

import bounds
import hf_load
import models
import reference
from matrix import HERE, PY, ROOT, GLOBAL_BATCH, SEQ, run, read_metrics

WORLD = 2
STEPS = 3
CASES = [  # model, fsdp-plan flags, the default save's torch_dtype, the other --save-dtype
    ("gpt2-tiny", [], "float32", "bf16"),
    ("llama-tiny", ["--param-dtype", "bf16", "--compute-dtype", "f32"], "bfloat16", "f32"),
]

failures = 0


def check(ok, what):
    global failures
    print(("ok:   " if ok else "FAIL: ") + what)
    failures += 0 if ok else 1


def eval_loss(model, tokens):
    """Eval batch 0 (what step 0 would take: reference.batch), the mean
    cross-entropy over its GLOBAL_BATCH x SEQ tokens, as fsdp-run's
    eval_loss (every rank's micro-batch the same count of tokens)."""
    x, y = reference.batch(tokens, 0, GLOBAL_BATCH, SEQ)
    with torch.no_grad():
        return models.lm_loss(model(x), y).item()


def expected_generation_config(cfg):
    want = {"_from_model_config": True}
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "transformers_version"):
        if cfg.get(key) is not None:
            want[key] = cfg[key]
    return want


def bf16_of(values):
    """torch's round to nearest even of f32 values, as stored bf16 bits."""
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16)
    return t.view(torch.int16).numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    data = os.path.join(args.work, "gpl3.bin")
    run([PY, os.path.join(HERE, "make_data.py"), data, "--text", "/usr/share/common-licenses/GPL-3"])
    eval_data = os.path.join(args.work, "apache2.bin")
    run([PY, os.path.join(HERE, "make_data.py"), eval_data, "--text",
         "/usr/share/common-licenses/Apache-2.0"])

    for model_name, plan_flags, torch_dtype, other_dtype in CASES:
        print(f"== {model_name} ({torch_dtype})")
        config = os.path.join(ROOT, "models", model_name, "config.json")
        with open(config) as f:
            input_cfg = json.load(f)
        init = os.path.join(args.work, model_name + ".init.safetensors")
        run([PY, os.path.join(HERE, "make_weights.py"), config, init, "--seed", "7"])
        plan = os.path.join(args.work, model_name + ".plan.json")
        run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(WORLD),
             "--micro-batch", str(GLOBAL_BATCH // WORLD), "--seq-len", str(SEQ), "-o", plan,
             *plan_flags])

        def train(tag, extra=()):
            out = os.path.join(args.work, f"{model_name}.{tag}")
            shutil.rmtree(out, ignore_errors=True)
            metrics = out + ".jsonl"
            run([os.path.join(args.bin, "fsdp-run"), plan, "--weights", init, "--data", data,
                 "--eval-data", eval_data, "--steps", str(STEPS), "--metrics", metrics,
                 "--save-weights", out, "--max-shard-size", "40KB", "--quiet", *extra])
            return out, read_metrics(metrics)

        folder, metrics = train("saved")
        other, other_metrics = train("other", ["--save-dtype", other_dtype])
        fsdp_eval = metrics[-1].get("eval_loss")
        check(fsdp_eval is not None and metrics[-1]["step"] == STEPS,
              f"fsdp's step {STEPS} has an eval_loss ({fsdp_eval})")
        trained = [(m["loss"], m["grad_norm"], m.get("eval_loss")) for m in metrics]
        check(trained == [(m["loss"], m["grad_norm"], m.get("eval_loss")) for m in other_metrics],
              "the --save-dtype run trained the same, bit for bit")

        # The files, as transformers reads them.
        try:
            model, cfg, info = hf_load.load(folder)
        except hf_load.LoadError as e:
            check(False, f"{folder} loads: {e}")
            continue
        check(len(info["shards"]) > 1 and all(hf_load.SHARD.match(s) for s in info["shards"]),
              f"{len(info['shards'])} shards named model-0000i-of-0000N.safetensors")
        check(info["torch_dtype"] == torch_dtype and
              info["dtypes"] == [hf_load.TORCH_DTYPES[torch_dtype]],
              f"config.json's torch_dtype {info['torch_dtype']}, the tensors {info['dtypes']}")
        check({k: v for k, v in cfg.items() if k != "torch_dtype"} ==
              {k: v for k, v in input_cfg.items() if k != "torch_dtype"},
              "config.json is the input config but for torch_dtype")
        gen_path = os.path.join(folder, "generation_config.json")
        gen = json.load(open(gen_path)) if os.path.exists(gen_path) else None
        check(gen == expected_generation_config(input_cfg),
              f"generation_config.json is from_model_config's: {gen}")

        # The loss of the folder's model against fsdp's, under the f32 bound
        # measured on the same weights.
        tokens = reference.load_tokens(eval_data, model.c["vocab"])
        loss32 = eval_loss(model, tokens)
        model64, _, _ = hf_load.load(folder, torch.float64)
        loss64 = eval_loss(model64, tokens)
        bound = bounds.f32_loss(abs(loss32 - loss64) / abs(loss64))
        gap = abs(fsdp_eval - loss32) / abs(loss32)
        check(gap <= bound, f"eval loss from the folder {loss32:.9g}, fsdp's {fsdp_eval:.9g}: "
                            f"relative gap {gap:.3g} <= bound {bound:.3g} (f32 vs f64 "
                            f"{abs(loss32 - loss64) / abs(loss64):.3g})")
        # Control: the untrained weights are told apart.
        init_model = models.build_model(input_cfg)
        init_tensors = hf_load.read_safetensors(init)
        with torch.no_grad():
            for name, p in init_model.named_parameters():
                p.copy_(torch.from_numpy(np.array(init_tensors[name][2])))
        init_gap = abs(fsdp_eval - eval_loss(init_model, tokens)) / abs(fsdp_eval)
        check(init_gap > bound, f"control: the initial weights' loss is {init_gap:.3g} away, "
                                f"outside the bound")

        # The other dtype's folder: the same model, each BF16 value the
        # round to nearest even of its F32 value.
        try:
            other_model, other_cfg, other_info = hf_load.load(other)
        except hf_load.LoadError as e:
            check(False, f"{other} loads: {e}")
            continue
        f32_dir, bf16_dir = (folder, other) if torch_dtype == "float32" else (other, folder)
        _, f32_tensors, _ = hf_load.read_folder(f32_dir)
        _, bf16_tensors, bf16_info = hf_load.read_folder(bf16_dir)
        same = sorted(f32_tensors) == sorted(bf16_tensors) and all(
            np.array_equal(bf16_of(f32_tensors[n][2]),
                           (bf16_tensors[n][2].view(np.uint32) >> 16).astype(np.uint16)
                           .view(np.int16))
            for n in f32_tensors)
        check(same and bf16_info["torch_dtype"] == "bfloat16",
              f"{os.path.basename(bf16_dir)}: {len(bf16_tensors)} BF16 tensors, each torch's "
              f".to(torch.bfloat16) of {os.path.basename(f32_dir)}'s F32, bit for bit")
        if torch_dtype == "bfloat16":
            master_gap = abs(fsdp_eval - eval_loss(other_model, tokens)) / abs(fsdp_eval)
            check(master_gap > bound, f"control: the unrounded f32 masters' loss is "
                                      f"{master_gap:.3g} away, outside the bound")

        # A folder without config.json does not load.
        bare = os.path.join(args.work, model_name + ".no-config")
        shutil.rmtree(bare, ignore_errors=True)
        shutil.copytree(folder, bare)
        os.remove(os.path.join(bare, "config.json"))
        try:
            hf_load.load(bare)
            check(False, "the loader refuses a folder without config.json")
        except hf_load.LoadError as e:
            check("config.json" in str(e), f"the loader refuses a folder without config.json: {e}")

    print(f"export: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
