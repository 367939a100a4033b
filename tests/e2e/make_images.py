#!/usr/bin/python3
"""Write tiny images and labels as .npy files (ViT's --data and --labels).

usage: make_images.py IMAGES.npy LABELS.npy --count N --height H --width W
                      [--channels C] [--classes K] [--seed S]
                      [--label-dtype int64|int32] [--version 1|2|3] [--shapes]

Images: uint8 [N, H, W, C] uniform in [0, 256) from numpy's default_rng(S);
labels: [N] uniform in [0, K) (default K = 10), of --label-dtype (default
int64). --version: the .npy format version written (default 1, np.save's).

--shapes: a labelled data set to learn from instead of noise (C = 3, K <= 10,
H and W >= 8): image i holds one filled shape on a dark noisy background; its
label k (uniform in [0, K)) is shape k // 2 of SHAPES (square, circle,
triangle, plus, ring) in colour k % 2 of COLOURS (warm: red to orange;
cool: blue to cyan), of random size, position and shade. So a classifier
must tell both the shape and the colour. The same seed gives the same files.
"""
import argparse

import numpy as np
from numpy.lib import format as npy_format

SHAPES = ("square", "circle", "triangle", "plus", "ring")
COLOURS = ("warm", "cool")


def write(path, array, version):
    with open(path, "wb") as f:
        npy_format.write_array(f, array, version=(version, 0))


def shape_mask(shape, dy, dx, r):
    """Pixels (offsets dy, dx from the centre, arrays) inside `shape` of half-size r."""
    ay, ax = np.abs(dy), np.abs(dx)
    if shape == "square":
        return (ay <= r * 0.8) & (ax <= r * 0.8)
    if shape == "circle":
        return dy * dy + dx * dx <= r * r
    if shape == "triangle":  # apex up, base down
        return (dy >= -r) & (dy <= r * 0.8) & (ax <= (dy + r) * 0.55)
    if shape == "plus":
        arm = max(r / 3.0, 0.75)
        return ((ax <= arm) & (ay <= r)) | ((ay <= arm) & (ax <= r))
    if shape == "ring":
        d2 = dy * dy + dx * dx
        return (d2 <= r * r) & (d2 >= (r - 1.6) ** 2)
    raise ValueError(shape)


def shapes(rng, count, height, width, classes):
    """(images uint8 [count, height, width, 3], labels int64 [count])."""
    if not 1 <= classes <= 2 * len(SHAPES):
        raise ValueError(f"--shapes draws at most {2 * len(SHAPES)} classes, not {classes}")
    if min(height, width) < 8:
        raise ValueError("--shapes needs images of at least 8 x 8")
    labels = rng.integers(0, classes, size=count).astype(np.int64)
    # Dark noisy background, a little colour cast per image.
    images = rng.integers(0, 48, size=(count, height, width, 3)).astype(np.float64)
    images += rng.integers(0, 24, size=(count, 1, 1, 3))
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float64) + 0.5
    small = min(height, width)
    for i, k in enumerate(labels):
        shape, colour = SHAPES[k // 2], COLOURS[k % 2]
        r = rng.uniform(0.22, 0.4) * small
        cy = rng.uniform(r, height - r)
        cx = rng.uniform(r, width - r)
        mask = shape_mask(shape, ys - cy, xs - cx, r)
        if colour == "warm":
            rgb = (rng.uniform(190, 255), rng.uniform(30, 150), rng.uniform(0, 60))
        else:
            rgb = (rng.uniform(0, 60), rng.uniform(60, 200), rng.uniform(190, 255))
        images[i][mask] = np.array(rgb) + rng.normal(0, 8, size=(int(mask.sum()), 3))
    return np.clip(np.rint(images), 0, 255).astype(np.uint8), labels


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
    ap.add_argument("--shapes", action="store_true",
                    help="labelled shapes in two colours (see above) instead of noise")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    if a.shapes:
        if a.channels != 3:
            ap.error("--shapes draws colour images: --channels 3")
        try:
            images, labels = shapes(rng, a.count, a.height, a.width, a.classes)
        except ValueError as e:
            ap.error(str(e))
    else:
        images = rng.integers(0, 256, size=(a.count, a.height, a.width, a.channels), dtype=np.uint8)
        labels = rng.integers(0, a.classes, size=(a.count,))
    labels = labels.astype("<i8" if a.label_dtype == "int64" else "<i4")
    write(a.images, images, a.version)
    write(a.labels, labels, a.version)


if __name__ == "__main__":
    main()
