//===- LowerToProgram.h - a verified plan as the runtime's program -*- C++ -*-===//
#ifndef FSDP_PLANNER_LOWERTOPROGRAM_H
#define FSDP_PLANNER_LOWERTOPROGRAM_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace fsdp {

/// Writes the program (docs/program-format.md) of a module on which the whole
/// pipeline, memory plan included, has run. Errors are emitted at the op.
mlir::LogicalResult lowerToProgram(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace fsdp

#endif
