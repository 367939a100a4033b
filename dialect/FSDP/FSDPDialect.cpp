//===- FSDPDialect.cpp - the plan dialect ---------------------------------===//
#include "dialect/FSDP/FSDPDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fsdp::plan;

#include "dialect/FSDP/FSDPDialect.cpp.inc"
#include "dialect/FSDP/FSDPEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/FSDP/FSDPTypes.cpp.inc"

void FSDPDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialect/FSDP/FSDPTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialect/FSDP/FSDPOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// UnitOp
//===----------------------------------------------------------------------===//

LogicalResult UnitOp::verify() {
  int64_t n = getParams().size();
  if ((int64_t)getOffsets().size() != n || (int64_t)getSizes().size() != n)
    return emitOpError() << "has " << n << " params but " << getOffsets().size()
                         << " offsets and " << getSizes().size() << " sizes";
  int64_t expected = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (getOffsets()[i] != expected)
      return emitOpError() << "parameter " << cast<StringAttr>(getParams()[i])
                           << " must start at element " << expected << ", but starts at "
                           << getOffsets()[i];
    if (getSizes()[i] <= 0)
      return emitOpError() << "parameter " << cast<StringAttr>(getParams()[i])
                           << " has size " << getSizes()[i];
    expected += getSizes()[i];
  }
  int64_t numel = getNumelAttr().getInt(), padded = getPaddedNumelAttr().getInt();
  int64_t count = getShardCountAttr().getInt();
  if (numel != expected)
    return emitOpError() << "numel = " << numel << " but its parameters hold " << expected;
  if (count <= 0)
    return emitOpError() << "shard_count must be positive, but is " << count;
  if (padded < numel || padded % count != 0 || padded - numel >= count)
    return emitOpError() << "padded_numel = " << padded
                         << " must be the least multiple of shard_count = " << count
                         << " that holds numel = " << numel;
  return success();
}

//===----------------------------------------------------------------------===//
// StepOp
//===----------------------------------------------------------------------===//

ParseResult StepOp::parse(OpAsmParser &parser, OperationState &result) {
  auto buildType = [](Builder &b, ArrayRef<Type> args, ArrayRef<Type> results,
                      function_interface_impl::VariadicFlag, std::string &) {
    return b.getFunctionType(args, results);
  };
  return function_interface_impl::parseFunctionOp(
      parser, result, /*allowVariadic=*/false, getFunctionTypeAttrName(result.name), buildType,
      getArgAttrsAttrName(result.name), getResAttrsAttrName(result.name));
}

void StepOp::print(OpAsmPrinter &p) {
  function_interface_impl::printFunctionOp(p, *this, /*isVariadic=*/false,
                                           getFunctionTypeAttrName(), getArgAttrsAttrName(),
                                           getResAttrsAttrName());
}

void StepOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  if (region.empty() || region.front().getNumArguments() != 2)
    return;
  setNameFn(region.front().getArgument(0), "tokens");
  setNameFn(region.front().getArgument(1), "targets");
}

//===----------------------------------------------------------------------===//
// ReturnOp
//===----------------------------------------------------------------------===//

LogicalResult ReturnOp::verify() {
  auto results = (*this)->getParentOfType<StepOp>().getFunctionType().getResults();
  if (getOperands().size() != results.size())
    return emitOpError() << "returns " << getOperands().size()
                         << " values, but the step declares " << results.size();
  for (auto [v, t] : llvm::zip(getOperands(), results))
    if (v.getType() != t)
      return emitOpError() << "returns " << v.getType() << ", but the step declares " << t;
  return success();
}

//===----------------------------------------------------------------------===//
// UpcastOp
//===----------------------------------------------------------------------===//

LogicalResult UpcastOp::verify() {
  if (!getParam().getDefiningOp() ||
      getParam().getDefiningOp()->getName().getStringRef() != "nn.param")
    return emitOpError() << "reads a parameter (an nn.param)";
  if (getParam().getType() != getResult().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must be the parameter's " << getParam().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// AllGatherOp, ReduceScatterOp
//===----------------------------------------------------------------------===//

// A collective's dtype is the mixed-precision one; f32, the default, is
// written without one.
static LogicalResult verifyCollectiveDtype(Operation *op, std::optional<StringRef> dtype) {
  if (dtype && *dtype != "bf16")
    return op->emitOpError() << "dtype must be \"bf16\" (f32, the default, is written "
                                "without a dtype), but is \""
                             << *dtype << "\"";
  return success();
}

LogicalResult AllGatherOp::verify() { return verifyCollectiveDtype(*this, getDtype()); }

LogicalResult ReduceScatterOp::verify() { return verifyCollectiveDtype(*this, getDtype()); }

//===----------------------------------------------------------------------===//
// AllocOp
//===----------------------------------------------------------------------===//

LogicalResult AllocOp::verify() {
  if (getKind() != BufferKind::grads)
    return emitOpError() << "only gradient buffers are allocated explicitly; parameters "
                            "come to life with their all_gather";
  return success();
}

#define GET_OP_CLASSES
#include "dialect/FSDP/FSDPOps.cpp.inc"
