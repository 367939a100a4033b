//===- Scratch.h - what each op's kernel needs beyond its operands -*- C++ -*-===//
//
// The one definition of the memory a program's kernels use beyond their
// tensors, per target (the CPU kernels of kernels/cpu.h, the CUDA kernels of
// kernels/cuda.h): the planner's memory plan places exactly these bytes in
// the arena (planner/Buffers.cpp, through the planner's KernelScratchOpInterface), the
// loader checks each instruction gives at least them (OpChecks.cpp), and the
// executors use them and nothing else. Plain C++: the planner links it with
// the program format; the formulas are the kernels' own inline bounds.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SCRATCH_H
#define FSDP_RUNTIME_SCRATCH_H

#include "runtime/Program.h"

#include <cstdint>
#include <optional>
#include <string>

namespace fsdp::program {

/// Scratch bytes of compute op `op` over storage `dtype` (its float
/// tensors') with the decoded call `c`, on `target`.
int64_t kernelScratchBytes(Target target, Op op, DType dtype, const Call &c);

/// The comm stream's staging of a unit's reduce_scatter: on cuda, the
/// reduced part (shard_numel elements of the reduction's dtype) lands there
/// before it is added to the gradient shard; on both, bf16 gradients reduced
/// in f32 are first widened into f32 of the unit's padded size (after the
/// part, 64-byte aligned).
int64_t reduceScatterScratchBytes(Target target, int64_t paddedNumel, int64_t shardNumel,
                                  bool gradsBf16, bool reduceBf16);
/// Where the widened gradients start within that staging.
int64_t reduceScatterWidenOffset(Target target, int64_t shardNumel, bool reduceBf16);

/// The grad_norm's scratch on cuda: the sum of squares' partial sums, one
/// double a unit and their total; none on the CPU.
int64_t gradNormScratchBytes(Target target, int64_t units);
/// Where the per-unit doubles and the total start within it.
int64_t gradNormPartsOffset();

/// cuBLAS's workspace, handed to it for the whole step (its recommendation
/// for Hopper): a buffer of the plan on cuda, none on the CPU.
inline constexpr int64_t kCublasWorkspaceBytes = int64_t(32) << 20;
inline int64_t stepWorkspaceBytes(Target target) {
  return target == Target::Cuda ? kCublasWorkspaceBytes : 0;
}

} // namespace fsdp::program

#endif
