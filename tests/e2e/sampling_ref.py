#!/usr/bin/python3
"""--shuffle's permutation written from docs/sampling.md alone, checked
against fsdp's (fsdp-dump-batches window) on many sizes, seeds and epochs.

usage: sampling_ref.py BIN_DIR"""
import subprocess
import sys

M = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def shuffled_window(seed, epoch, x, n):
    bits = 2
    while (1 << bits) < n:
        bits += 1
    h = (bits + 1) // 2
    mask = (1 << h) - 1
    keys = [splitmix64(seed ^ splitmix64((4 * epoch + r) & M)) for r in range(4)]
    while True:
        left, right = x >> h, x & mask
        for k in keys:
            left, right = right, left ^ (splitmix64(k ^ right) & mask)
        x = (left << h) | right
        if x < n:
            return x


def main():
    tool = sys.argv[1] + "/fsdp-dump-batches"
    checked = 0
    for n in (1, 2, 3, 5, 16, 17, 124, 1000, 4099):
        for seed in (0, 7, 2**63 + 11):
            for epoch in (0, 1, 5):
                out = subprocess.run([tool, "window", str(seed), str(epoch), str(n), str(n)],
                                     check=True, capture_output=True, text=True).stdout.split()
                got = [int(v) for v in out]
                want = [shuffled_window(seed, epoch, x, n) for x in range(n)]
                if got != want:
                    k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
                    sys.exit("sampling_ref: n %d seed %d epoch %d: position %d is window %d in "
                             "fsdp, %d by docs/sampling.md" % (n, seed, epoch, k, got[k], want[k]))
                if sorted(got) != list(range(n)):
                    sys.exit("sampling_ref: n %d seed %d epoch %d: not a permutation" % (n, seed, epoch))
                checked += n
    print("sampling_ref: %d positions equal to docs/sampling.md's formula, every epoch a permutation"
          % checked)


if __name__ == "__main__":
    main()
