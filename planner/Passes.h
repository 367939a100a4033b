//===- Passes.h - the planner's passes ---------------------------*- C++ -*-===//
#ifndef FSDP_PLANNER_PASSES_H
#define FSDP_PLANNER_PASSES_H

#include "dialect/FSDP/FSDPDialect.h"
#include "dialect/NN/NNDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace fsdp {

#define GEN_PASS_DECL
#include "planner/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/Passes.h.inc"

} // namespace fsdp

#endif
