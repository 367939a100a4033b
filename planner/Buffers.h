//===- Buffers.h - every buffer of a rank, with its lifetime -----*- C++ -*-===//
//
// The memory plan, the verifier and the lowering share one view of memory:
// positions are op indices in the step's block; a buffer is live on the
// closed interval [start, end].
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_BUFFERS_H
#define FSDP_PLANNER_BUFFERS_H

#include "planner/PlanUtils.h"
#include "runtime/Program.h"

#include <string>
#include <vector>

namespace fsdp {

enum class BufferCategory {
  Params,      // parameter shards
  Grads,       // gradient shards (accumulated over micro-steps) and, under
               // grad_sync = last, the unsharded accumulation buffers
  Optimizer,   // Adam's two moments
  Unsharded,   // gathered parameters and unsharded gradients
  Activations, // inputs, activations saved for backward, temporaries, scratch
};
const char *categoryName(BufferCategory c);

enum class BufferRole {
  UnitShard,
  UnitGradShard,
  UnitExpAvg,
  UnitExpAvgSq,    // owner: the unit
  UnitAccumulated, // owner: the unit (grad_sync = last)
  UnitHostShard,   // owner: the unit (offload = optimizer): the master copy
  UnitHostGrad,    // owner: the unit (offload = optimizer): the gradient's copy
  UnitHostGather,  // owner: the unit (offload = all, bf16): the master's bf16 copy
  Gathered,        // owner: the all_gather
  Resharded,       // owner: the reshard (reshard_after_forward = N)
  GradsFull,       // owner: the alloc
  Input,           // owner: null; index: argument
  Value,           // owner: op; index: result
  Scratch,         // owner: op
};

struct Buffer {
  std::string name;
  BufferCategory category;
  BufferRole role;
  int64_t bytes = 0;
  int64_t start = 0, end = 0;
  mlir::Operation *owner = nullptr;
  int64_t index = 0;
  int64_t offset = -1;
  /// In the rank's host pool (offload = optimizer), not the device's arena.
  bool host = false;
};

struct BufferModel {
  std::vector<Buffer> buffers;
  int64_t numPositions = 0;
  int64_t microBatch = 0, seqLen = 0;
};

/// The offset the memory plan recorded for `b` (a unit's shard
/// offsets, a gather's or alloc's `offset`, the step's input offsets, an
/// op's `offsets` and `scratch_offset`), or nullopt where none is: in the
/// arena, or for a host buffer (b.host) in the host pool.
std::optional<int64_t> recordedOffset(const Buffer &b, plan::StepOp step);

/// Ops whose results get buffers of their own: the nn compute ops and
/// fsdp.upcast.
bool producesTensors(mlir::Operation *op);

/// Every buffer of the step for a micro-batch of B sequences of S tokens.
mlir::FailureOr<BufferModel> collectBuffers(mlir::ModuleOp module, int64_t B, int64_t S);

/// Bytes of a tensor type with its dynamic dimensions set to B then S.
int64_t tensorBytes(mlir::Type type, int64_t B, int64_t S);

/// Shape with dynamic dimensions set to B then S.
llvm::SmallVector<int64_t> concreteShape(mlir::Type type, int64_t B, int64_t S);

/// The kernels a step is planned for (its `target`).
program::Target kernelTarget(plan::StepOp step);

/// Scratch bytes an op's kernel needs beyond its operands and results on
/// its step's target (KernelScratchOpInterface; 0 for ops that are not nn
/// compute ops). Fails, having said so, where the context has no model.
mlir::FailureOr<int64_t> scratchBytes(mlir::Operation *op, int64_t B, int64_t S);

/// Whether cast `c` is its gathered parameter itself (a bf16 cast of a
/// parameter gathered in bf16): no buffer and no instruction of its own.
bool castIsGatheredValue(plan::CastOp c, const llvm::StringMap<plan::UnitOp> &byParam);

/// Bytes of an element of the gathered parameters (and of their resharded
/// copies): the parameter dtype's.
int64_t gatheredElementBytes(plan::StepOp step);
/// Bytes of an element of the unsharded gradient buffers: the compute dtype's.
int64_t gradElementBytes(plan::StepOp step);
/// Bytes of an element of what a reduce_scatter reads: the unsharded
/// gradients', or under grad_sync = last the f32 accumulation buffer's.
int64_t reducedElementBytes(plan::StepOp step);
/// Whether a buffer of this role lives for the whole step (and across its
/// micro-steps): the units' shards, moments, accumulation buffers and host
/// copies.
bool isPersistent(BufferRole role);

/// Bytes of staging a reduce_scatter needs on its step's target
/// (runtime/Scratch.h: the reduced part on cuda, the widened bf16 gradients
/// of a reduction in f32).
int64_t reduceScatterStagingBytes(plan::ReduceScatterOp rs, plan::UnitOp u);

constexpr int64_t kAlignment = 64;
inline int64_t alignUp(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

} // namespace fsdp

#endif
