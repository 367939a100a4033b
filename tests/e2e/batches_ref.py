"""The sample rules (docs/training-semantics.md) for the encoder families, in plain Python: the
reference the runtime's batches (runtime/data/Batches.h) are checked against
(tests/e2e/check_batches.py, and the expected numbers in
tests/unit/BatchesTest.cpp, which were printed by `python3 batches_ref.py`).
"""
import sys

MASK64 = (1 << 64) - 1
IGNORE = -100  # the target of a position not selected (torch's ignore_index)


def splitmix64(p):
    z = (p + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def selected(p):
    return splitmix64(p) % 20 < 3


def window_start(n, S, G, t, g):
    return ((t * G + g) * S) % (n - S - 1)


def sample(B, R, micro, rank, row):
    """The sample index g of row `row` of rank `rank`'s micro-step `micro`."""
    return micro * B * R + rank * B + row


def masked_batch(tokens, S, B, R, A, t, micro, rank, mask_id):
    n = len(tokens)
    inputs, targets = [], []
    for b in range(B):
        start = window_start(n, S, B * R * A, t, sample(B, R, micro, rank, b))
        for s in range(S):
            p = start + s
            if selected(p):
                inputs.append(mask_id)
                targets.append(tokens[p])
            else:
                inputs.append(tokens[p])
                targets.append(IGNORE)
    return inputs, targets


def masked_count(n, S, G, t):
    total = 0
    for g in range(G):
        start = window_start(n, S, G, t, g)
        total += sum(selected(start + s) for s in range(S))
    return total


def image_index(n, G, t, g):
    return (t * G + g) % n


if __name__ == "__main__":
    # The numbers BatchesTest.cpp states.
    for p in (0, 1, 2, 3, 1000, 2**32, 2**63, MASK64):
        print("splitmix64(%d) = 0x%016x" % (p, splitmix64(p)))
    print("selected in [0, 64):", [p for p in range(64) if selected(p)])
    print("selected in [0, 100000):", sum(selected(p) for p in range(100000)))
    # n = 1000 tokens, S = 16, B = 2, R = 2, A = 3 (G = 12)
    for t in (0, 1, 7, 10**15):
        print("masked_count(n=1000, S=16, G=12, t=%d) = %d" % (t, masked_count(1000, 16, 12, t)))
    sys.exit(0)
