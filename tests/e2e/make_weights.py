#!/usr/bin/python3
"""Random initial weights for an HF config, with HF names and layouts, as f32 safetensors.

usage: make_weights.py CONFIG OUT.safetensors [--seed S] [--std 0.02]

bert and vit configs: encoders.py's BertForMaskedLM and ViTForImageClassification
(no tied decoder copy: cls.predictions.decoder.* is not written).
Init (deterministic from the seed): normal(0, std) for every parameter with >= 2 dims
(embeddings and matrices), 1 for norm weights, 0 for biases. GPT-2 with a tied head
writes only transformer.wte.weight (no lm_head.weight).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import encoders  # noqa: E402
import models  # noqa: E402
import safetensors_io  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02)
    a = ap.parse_args(argv)
    cfg = models.load_config(a.config)
    build = encoders.build_encoder if cfg.get("model_type") in ("bert", "vit") else models.build_model
    model = models.init_weights(build(cfg, torch.float32), a.seed, a.std)
    sd = {n: p.detach() for n, p in model.named_parameters()}
    safetensors_io.save(sd, a.out, metadata={"format": "pt"})
    print(f"{a.out}: {len(sd)} tensors, {sum(t.numel() for t in sd.values())} parameters")


if __name__ == "__main__":
    main()
