"""The bound rules of the comparisons between two floating-point
implementations (fsdp against PyTorch, bf16 against its references, threads
against MPI, resumed against uninterrupted): one definition, imported by every
suite that compares (tests/README.md lists them, with their controls).

No bound here is a constant tuned until a test passed. Each is one of:
  * measured: a factor times the largest gap measured in the same run between
    two correct references (f32 against f64 accumulation; the f32 reference
    under other BLAS kernels; a gradient summed from per-rank partials or from
    one), with a floor from a stated analysis for when the references happen to
    agree;
  * analysed: a stated error analysis (0 where both sides run the same kernels
    on the same values in the same order).
OpenBLAS picks its kernels, and so its summation order, by CPU: a measured
bound moves with the machine, which is the point (tests/e2e/cross_cpu.sh runs
the suites under the other kernels this CPU can run).
"""

U32 = 2.0 ** -24    # f32 unit roundoff (half an ulp at 1)
UBF16 = 2.0 ** -8   # bf16 unit roundoff

# --- f32 against f32 --------------------------------------------------------
# fsdp and the f32 reference each round in f32, in summation orders of their
# own; the f32 reference's gap from the f64 one is one such error. Their gap
# is at most the sum of two errors of that kind (2x), and 2x again for the
# spread between two samples of an error's size: 4x.
F32_FACTOR = 4.0
# When the f32 and f64 references happen to agree closely: a loss (a mean of
# per-token losses, each a log-sum-exp over the vocabulary) summed in another
# order moves by a few ulps per level of a pairwise sum of up to 2^16 terms;
# 64 ulps (3.8e-6 relative) holds that with room and stays under the smallest
# model error the suites catch (a GELU swapped: 2.2e-5 on the losses).
F32_LOSS_FLOOR = 64 * U32
# Weights after AdamW: an update is lr * m / (sqrt(v) + eps), of size lr
# where the gradient's sign is steady; f32 rounding of the gradient moves m
# and v by ulps, so an update by ~U32 * lr per step, weights of scale 1 by an
# ulp per step: 64 ulps of scale 1.
F32_WEIGHT_FLOOR = 64 * U32


def measured(gap, factor, floor):
    """A measured bound: factor x the gap of two correct references, or floor."""
    return max(factor * gap, floor)


def f32_loss(ref_gap):
    """Relative loss bound of an f32 run given the f32-vs-f64 reference gap."""
    return measured(ref_gap, F32_FACTOR, F32_LOSS_FLOOR)


def f32_weight(ref_gap, scale=1.0):
    """Absolute weight bound of an f32 run given the f32-vs-f64 weight gap."""
    return measured(ref_gap, F32_FACTOR, F32_WEIGHT_FLOOR * max(1.0, scale))
