//===- FSDPDialect.h - the plan dialect --------------------------*- C++ -*-===//
#ifndef FSDP_DIALECT_FSDP_FSDPDIALECT_H
#define FSDP_DIALECT_FSDP_FSDPDIALECT_H

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

#include "dialect/FSDP/FSDPDialect.h.inc"
#include "dialect/FSDP/FSDPEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/FSDP/FSDPTypes.h.inc"

#define GET_OP_CLASSES
#include "dialect/FSDP/FSDPOps.h.inc"

#endif
