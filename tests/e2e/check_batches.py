#!/usr/bin/python3
"""The runtime's encoder batches against PyTorch and docs/training-semantics.md.

usage: check_batches.py BIN_DIR WORK_DIR

Runs BIN_DIR/fsdp-dump-batches (the batches fsdp-run's executors take,
runtime/data/Batches.h) and checks:
- images: for several image, patch and batch shapes, every rank's patches
  equal the pixels normalised as torch does ((x.float()/255 - 0.5)/0.5),
  bit for bit, cut into patches in row-major order with (C, ph, pw) values;
  patches x W^T, with a random Conv2d kernel [D, C, ph, pw] viewed as
  [D, C*ph*pw], equals torch.nn.functional.conv2d(stride = kernel = patch)
  (to f32 rounding); the targets are the labels of images (t*G + g) mod N;
- masked tokens: every rank's tokens and targets equal batches_ref.py's
  (splitmix64 selection by absolute index, -100 where not selected), and the
  step's selected count its masked_count.
Exits 1 naming the first mismatch.
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import batches_ref  # noqa: E402
import make_images  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def run(tool, *args):
    subprocess.run([tool] + [str(a) for a in args], check=True)


def images_case(tool, work, N, H, W, C, ph, pw, classes, B, R, A, step, version, label_dtype):
    name = f"{N}x{H}x{W}x{C}-p{ph}x{pw}-B{B}R{R}A{A}-t{step}"
    im, lb, out = (os.path.join(work, name + s) for s in (".images.npy", ".labels.npy", ".bin"))
    make_images.main([im, lb, "--count", str(N), "--height", str(H), "--width", str(W),
                      "--channels", str(C), "--classes", str(classes), "--seed", str(N + H),
                      "--version", str(version), "--label-dtype", label_dtype])
    run(tool, "images", im, lb, H, W, C, ph, pw, classes, B, R, A, step, out)
    images, labels = np.load(im), np.load(lb)
    P, K = (H // ph) * (W // pw), C * ph * pw
    raw = open(out, "rb").read()
    per = B * P * K * 4 + B * 8
    check(len(raw) == A * R * per, f"{name}: {len(raw)} bytes, not {A * R * per}")
    G = B * R * A
    torch.manual_seed(0)
    kernel = torch.randn(7, C, ph, pw)
    worst = 0.0
    for a in range(A):
        for r in range(R):
            at = (a * R + r) * per
            patches = torch.from_numpy(
                np.frombuffer(raw, dtype="<f4", count=B * P * K, offset=at).reshape(B, P, K).copy())
            targets = np.frombuffer(raw, dtype="<i8", count=B, offset=at + B * P * K * 4)
            idx = [batches_ref.image_index(N, G, step, batches_ref.sample(B, R, a, r, b))
                   for b in range(B)]
            x = torch.from_numpy(images[idx]).permute(0, 3, 1, 2)  # NCHW uint8
            x = (x.float() / 255 - 0.5) / 0.5
            # Patches as torch cuts them: [B, C*ph*pw, P], (C, ph, pw) order, row-major patches.
            want = F.unfold(x, kernel_size=(ph, pw), stride=(ph, pw)).transpose(1, 2)
            check(torch.equal(patches, want),
                  f"{name}: micro-step {a} rank {r}: patches differ from torch's "
                  f"(max {float((patches - want).abs().max()):.3g})")
            conv = F.conv2d(x, kernel, stride=(ph, pw)).flatten(2).transpose(1, 2)  # [B, P, D]
            flat = kernel.reshape(7, -1)
            linear = patches @ flat.t()
            # Analysed: each is an f32 dot product of the same n = C*ph*pw terms
            # in some order, within gamma_n * sum |x_i w_i| of the exact value
            # (Higham, gamma_n = n u / (1 - n u)), so they differ by at most
            # twice that, element by element, whatever the kernels' order.
            n, u = flat.shape[1], 2.0 ** -24
            bound = 2 * (n * u / (1 - n * u)) * (patches.double().abs() @ flat.double().abs().t())
            excess = float(((conv - linear).double().abs() - bound).max())
            diff = float((conv - linear).abs().max())
            worst = max(worst, diff)
            check(excess <= 0,
                  f"{name}: micro-step {a} rank {r}: patches x W^T differs from conv2d by {diff:.3g}, "
                  f"over 2 gamma_{n} sum |x w| somewhere")
            check(list(targets) == [int(labels[i]) for i in idx],
                  f"{name}: micro-step {a} rank {r}: targets {list(targets)} are not the labels "
                  f"of images {idx}")
    print(f"images {name}: patches equal torch's; conv2d vs patches x W^T max difference "
          f"{worst:.3g}")


def masked_case(tool, work, n, vocab, S, B, R, A, step, mask_id):
    name = f"n{n}-S{S}-B{B}R{R}A{A}-t{step}"
    data, out = os.path.join(work, name + ".bin"), os.path.join(work, name + ".masked")
    tokens = np.random.default_rng(n).integers(0, vocab, size=n).astype("<u2")
    tokens.tofile(data)
    run(tool, "masked", data, vocab, S, B, R, A, step, mask_id, out)
    raw = open(out, "rb").read()
    got = np.frombuffer(raw, dtype="<i8")
    check(len(got) == A * R * 2 * B * S + 1, f"{name}: {len(got)} values")
    toks = [int(t) for t in tokens]
    at = 0
    for a in range(A):
        for r in range(R):
            want_in, want_tgt = batches_ref.masked_batch(toks, S, B, R, A, step, a, r, mask_id)
            check(list(got[at:at + B * S]) == want_in,
                  f"{name}: micro-step {a} rank {r}: tokens differ from batches_ref.py")
            check(list(got[at + B * S:at + 2 * B * S]) == want_tgt,
                  f"{name}: micro-step {a} rank {r}: targets differ from batches_ref.py")
            at += 2 * B * S
    count = batches_ref.masked_count(n, S, B * R * A, step)
    check(int(got[-1]) == count, f"{name}: selected count {int(got[-1])}, not {count}")
    print(f"masked {name}: tokens, targets and the count ({count}) equal batches_ref.py's")


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    tool = os.path.join(argv[1], "fsdp-dump-batches")
    work = argv[2]
    os.makedirs(work, exist_ok=True)
    # N, H, W, C, ph, pw, classes, B, R, A, step, .npy version, label dtype
    images_case(tool, work, 7, 8, 12, 3, 4, 4, 10, 2, 2, 2, 0, 1, "int64")
    images_case(tool, work, 5, 6, 6, 1, 2, 3, 3, 3, 1, 2, 3, 2, "int32")
    images_case(tool, work, 11, 4, 8, 2, 4, 2, 4, 1, 3, 1, 10**12, 3, "int64")
    images_case(tool, work, 3, 2, 2, 4, 1, 1, 2, 4, 2, 1, 5, 1, "int32")
    # n, vocab, S, B, R, A, step, mask id
    masked_case(tool, work, 997, 300, 16, 2, 2, 3, 0, 299)
    masked_case(tool, work, 5000, 1000, 32, 3, 1, 2, 41, 103)
    masked_case(tool, work, 200, 50, 7, 1, 4, 1, 10**15, 0)
    if failures:
        print(f"check_batches.py: {len(failures)} mismatches")
        return 1
    print("check_batches.py: all batches match")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
