//===- NNDialect.cpp - the model-graph dialect ----------------------------===//
#include "dialect/NN/NNDialect.h"

using namespace mlir;
using namespace fsdp::nn;

#include "dialect/NN/NNDialect.cpp.inc"
#include "dialect/NN/NNEnums.cpp.inc"
#include "dialect/NN/NNInterfaces.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/NN/NNOps.cpp.inc"
      >();
}
