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

#define GET_ATTRDEF_CLASSES
#include "dialect/FSDP/FSDPAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/FSDP/FSDPTypes.h.inc"

namespace fsdp::plan {

/// An attribute of `op` that is neither one it declares nor one of another
/// dialect (`dialect.name`), or null.
std::optional<mlir::NamedAttribute> undeclaredAttr(mlir::Operation *op);

/// The plan's ops carry the attributes they declare and no others: one they
/// do not declare would be read by no pass, no verifier and no lowering.
template <typename ConcreteType>
class OnlyDeclaredAttrs : public mlir::OpTrait::TraitBase<ConcreteType, OnlyDeclaredAttrs> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    if (auto a = undeclaredAttr(op))
      return op->emitOpError() << "has attribute '" << a->getName().getValue()
                               << "', which it does not declare (another dialect's "
                                  "attributes are named 'dialect.name')";
    return mlir::success();
  }
};

/// The names the command line, the program (docs/program-format.md) and the
/// report use: `full-shard`, `shard-grad-op`, `no-shard`, `hybrid-shard`.
llvm::StringRef strategyFlagName(Strategy strategy);
std::optional<Strategy> parseStrategyFlagName(llvm::StringRef name);

} // namespace fsdp::plan

#define GET_OP_CLASSES
#include "dialect/FSDP/FSDPOps.h.inc"

#endif
