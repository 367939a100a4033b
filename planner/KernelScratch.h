//===- KernelScratch.h - an op's kernel scratch, per target ------*- C++ -*-===//
//
// KernelScratchOpInterface and its model for nn's compute ops, which every
// tool and test that plans registers (registerPlannerDialects, or
// registerKernelScratchModel on a registry of its own): the dialect leaves
// scratch to the planner, so that the IR library needs nothing of the
// runtime.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_KERNELSCRATCH_H
#define FSDP_PLANNER_KERNELSCRATCH_H

#include "runtime/Program.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpDefinition.h"

#include "planner/KernelScratch.h.inc"

namespace fsdp {

/// Attaches KernelScratchOpInterface to every nn compute op (nn::ComputeOp)
/// once the nn dialect is loaded: the runtime's kernelScratchBytes over the
/// call the op lowers to (runtime/Program.h's decodeCall).
void registerKernelScratchModel(mlir::DialectRegistry &registry);

/// The gradient rules of fsdp's tensor-parallel ops (fsdp.tp_copy,
/// fsdp.tp_all_reduce), nn's GradientOpInterface attached as external
/// models: the plan dialect does not link nn's rules (TensorParallel.cpp).
void registerTensorParallelGradients(mlir::DialectRegistry &registry);

/// The planner's dialects (nn and fsdp) with the models the planner attaches
/// to them: what a context needs to plan.
void registerPlannerDialects(mlir::DialectRegistry &registry);
/// The same, loaded into `context`.
void loadPlannerDialects(mlir::MLIRContext &context);

} // namespace fsdp

#endif
