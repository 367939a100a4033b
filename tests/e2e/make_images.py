#!/usr/bin/python3
"""Write tiny images and labels as .npy files (ViT's --data and --labels).

usage: make_images.py IMAGES.npy LABELS.npy --count N --height H --width W
                      [--channels C] [--classes K] [--seed S]
                      [--label-dtype int64|int32] [--version 1|2|3]

Images: uint8 [N, H, W, C] uniform in [0, 256) from numpy's default_rng(S);
labels: [N] uniform in [0, K) (default K = 10), of --label-dtype (default
int64). --version: the .npy format version written (default 1, np.save's).
"""
import argparse

import numpy as np
from numpy.lib import format as npy_format


def write(path, array, version):
    with open(path, "wb") as f:
        npy_format.write_array(f, array, version=(version, 0))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images")
    ap.add_argument("labels")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label-dtype", choices=("int64", "int32"), default="int64")
    ap.add_argument("--version", type=int, choices=(1, 2, 3), default=1)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    images = rng.integers(0, 256, size=(a.count, a.height, a.width, a.channels), dtype=np.uint8)
    labels = rng.integers(0, a.classes, size=(a.count,)).astype("<i8" if a.label_dtype == "int64"
                                                                 else "<i4")
    write(a.images, images, a.version)
    write(a.labels, labels, a.version)


if __name__ == "__main__":
    main()
