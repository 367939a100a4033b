//===- PlanUtils.h - shared queries over a plan ------------------*- C++ -*-===//
#ifndef FSDP_PLANNER_PLANUTILS_H
#define FSDP_PLANNER_PLANUTILS_H

#include "dialect/FSDP/FSDPDialect.h"
#include "dialect/NN/NNDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <vector>

namespace fsdp {

/// The module's training step, or null.
plan::StepOp getStep(mlir::ModuleOp module);

/// Units in index order.
std::vector<plan::UnitOp> getUnits(mlir::ModuleOp module);

/// The unit holding each parameter, by parameter name.
llvm::StringMap<plan::UnitOp> unitsByParam(mlir::ModuleOp module);

/// Units by symbol name (a symbol-table lookup per op would scan the module).
llvm::StringMap<plan::UnitOp> unitsByName(mlir::ModuleOp module);

/// The unit an op's `unit` attribute names, or null.
plan::UnitOp unitOfOp(mlir::Operation *op, const llvm::StringMap<plan::UnitOp> &byName);

/// The unit whose parameter `v` is, or null if `v` is not a parameter.
plan::UnitOp unitOfValue(mlir::Value v, const llvm::StringMap<plan::UnitOp> &units);

/// The unit an op works for: the unit of a parameter it reads (directly or
/// through fsdp.upcast), the unit it names, or its block by module path;
/// otherwise "root".
std::string unitNameOf(mlir::Operation *op, const llvm::StringMap<plan::UnitOp> &byParam,
                       llvm::StringRef blockPrefix);

/// The first op of the backward pass: the op after the forward's loss.
mlir::Operation *backwardStart(plan::StepOp step);

/// Position of every op in the step's block.
llvm::DenseMap<mlir::Operation *, int64_t> positions(plan::StepOp step);

/// Ranks one copy of the model is sharded over: the world for full_shard and
/// shard_grad_op, one for no_shard, `shardSize` for hybrid_shard (0: the world).
int64_t shardSizeOf(plan::Strategy strategy, int64_t worldSize, int64_t shardSize);

/// Tensor parallelism: the most elements of partial parameters
/// (`tp_partial`) that one rank's shard of `u` holds, which its
/// `fsdp.all_reduce over tp` sums; 0 for a unit without.
int64_t tpPartialShardNumel(plan::UnitOp u);

/// Bytes of one element an all_gather or reduce_scatter sends and its buffer
/// holds: 2 in bf16 (mixed precision), else 4.
int64_t collectiveElementBytes(mlir::Operation *op);

/// Bytes of one element of a tensor type.
int64_t elementBytes(mlir::Type type);

} // namespace fsdp

#endif
