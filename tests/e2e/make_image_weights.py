#!/usr/bin/python3
"""Initial weights of make_image_program.py's classifier: "classifier.weight"
[K, C*H*W] normal(0, 0.05) from torch.manual_seed(S), as safetensors.

usage: make_image_weights.py OUT.safetensors --classes K --values V [--seed S]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--classes", type=int, required=True)
    ap.add_argument("--values", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)
    safetensors_io.save({"classifier.weight": torch.randn(a.classes, a.values) * 0.05}, a.out)


if __name__ == "__main__":
    main()
