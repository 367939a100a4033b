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
# own; the f32 reference's gap from the f64 one is one such error, its gap
# to itself under other BLAS kernels (blas_alternates) the gap of two such
# errors; the suites take the largest (matrix.F32Bounds; compare.py's
# --bound-from, the f64 run alone). fsdp's gap is at most the sum of two
# errors of that kind (2x), and 2x again for the spread between two samples
# of an error's size: 4x. (Seen needed: encoder_ops.py's weights at std 0.2
# under Zen kernels sat 6x the f64 gap alone, 1e-5 against 1.7e-6.)
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


# --- bf16 compute against its references ------------------------------------
# Two correct bf16 runs differ where an f32 sum in another order lands on the
# other side of a bf16 rounding boundary (a "flip"), and where they round in
# other places. The spread is the largest gap, in the same run, between the
# f32-accumulating reference and each correct alternative: the same reference
# accumulating in f64, under other BLAS kernels (blas_alternates), rounding
# each use's gradient contribution of an activation used twice as fsdp stores
# it (reference.py --bf16-each-use), with the parameter gradients summed from
# per-rank partials as W ranks compute them (--grad-accum W). fsdp is one more
# such alternative: 4x the spread, as for f32 (the gap of two alternatives is
# at most the sum of two of theirs, 2x, and 2x for the spread of one sample).
BF16_FACTOR = 4.0
# Where every alternative agrees (no flip anywhere), a bf16 run is held no
# closer than an f32 one.
BF16_FLOOR = F32_LOSS_FLOOR


def bf16(spread):
    """Relative bound of a bf16-compute quantity given the references' spread."""
    return measured(spread, BF16_FACTOR, BF16_FLOOR)


# The step-1 loss (the forward alone) moves in steps: each flip of a stored
# value moves it by |dL/dy| * ulp(y) of that value, and at the step-1 loss
# the alternatives often agree exactly (no flip at all). Its floor is the
# largest such step, measured on the reference in the same run
# (models.FLIP_SENSITIVITY, reference.py's step-1 "flip_sensitivity"): fsdp
# may flip the one value the alternatives all kept, in the worst place.
def bf16_loss1(spread, flip_sensitivity):
    """Relative bound of the step-1 loss of a bf16-compute run."""
    return measured(spread, BF16_FACTOR, flip_sensitivity)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def blas_alternates():
    """Other kernels this CPU runs, as (label, environment) pairs for a
    reference's process. Debian's OpenBLAS is built for every x86-64 CPU and
    picks kernels at load time; OPENBLAS_CORETYPE forces a set (Nehalem: SSE
    kernels, which every x86-64-v2 CPU runs; Sandybridge: AVX), and
    ATEN_CPU_CAPABILITY=default makes torch's own vectorised ops (softmax,
    norms, reductions) scalar. The machine's own choice (Haswell, Zen,
    SkylakeX, SapphireRapids) is a third: the reference run without them."""
    alts = [("sse", {"OPENBLAS_CORETYPE": "Nehalem", "ATEN_CPU_CAPABILITY": "default"})]
    if "avx" in cpu_flags():
        alts.append(("avx", {"OPENBLAS_CORETYPE": "Sandybridge"}))
    return alts


# --- compare.py: one run against an f32 reference and its f64 run -----------
# The loss and eval_loss take f32_loss. The gradient norm is the square root
# of a sum of squares over every parameter, each gradient itself a sum over
# the batch: summed in another order it moves by a few ulps per level of a
# pairwise sum, as a loss does, so the same rule and floor (64 ulps relative).
def f32_grad_norm(ref_gap):
    """Relative grad-norm bound of an f32 run given the f32-vs-f64 reference gap."""
    return measured(ref_gap, F32_FACTOR, F32_LOSS_FLOOR)
