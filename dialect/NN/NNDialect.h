//===- NNDialect.h - the model-graph dialect ---------------------*- C++ -*-===//
#ifndef FSDP_DIALECT_NN_NNDIALECT_H
#define FSDP_DIALECT_NN_NNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialect/NN/NNDialect.h.inc"
#include "dialect/NN/NNEnums.h.inc"
#include "dialect/NN/NNInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialect/NN/NNOps.h.inc"

#endif
