//===- fsdp-opt.cpp - mlir-opt with the project's dialects and passes -----===//
//
// MlirOptMain would open the input itself (a FIFO blocks it, /dev/zero fills
// memory, MLIR nested 20000 deep overflows the parser's stack); the input is
// read and checked here (LLVMTool.h) and handed to it as a buffer.
//
//===----------------------------------------------------------------------===//
#include "planner/KernelScratch.h"
#include "planner/Passes.h"
#include "tools/LLVMTool.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  fsdp::tools::printFsdpVersion("fsdp-opt");
  fsdp::tools::hideLibraryOptions();
  mlir::registerTransformsPasses();
  fsdp::registerFSDPPasses();
  mlir::DialectRegistry registry;
  fsdp::registerPlannerDialects(registry);
  registry.insert<mlir::func::FuncDialect>();
  llvm::InitLLVM y(argc, argv);
  auto [input, output] =
      mlir::registerAndParseCLIOptions(argc, argv, "fsdp optimizer driver\n", registry);
  auto config = mlir::MlirOptMainConfig::createFromCLOptions();
  // --show-dialects reads no input.
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, input, output, registry));
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      fsdp::tools::readInput("fsdp-opt", input, /*mlir=*/true);
  if (!buffer)
    return 1;
  std::string error;
  auto out = mlir::openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << "fsdp-opt: error: " << error << "\n";
    return 1;
  }
  if (failed(mlir::MlirOptMain(out->os(), std::move(buffer), registry, config)))
    return 1;
  out->keep();
  return 0;
}
