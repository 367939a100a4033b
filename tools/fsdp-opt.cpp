//===- fsdp-opt.cpp - mlir-opt with the project's dialects and passes -----===//
#include "dialect/FSDP/FSDPDialect.h"
#include "dialect/NN/NNDialect.h"
#include "planner/Passes.h"
#include "tools/LLVMTool.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  fsdp::tools::printFsdpVersion("fsdp-opt");
  fsdp::tools::hideLibraryOptions();
  mlir::registerTransformsPasses();
  fsdp::registerFSDPPasses();
  mlir::DialectRegistry registry;
  registry.insert<fsdp::nn::NNDialect, fsdp::plan::FSDPDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "fsdp optimizer driver\n", registry));
}
