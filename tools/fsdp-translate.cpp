//===- fsdp-translate.cpp - model graphs between JSON, HF configs and MLIR ===//
//
//   fsdp-translate --import-hf-config config.json      -> nn.graph in MLIR
//   fsdp-translate --import-graph-json model.json      -> nn.graph in MLIR
//   fsdp-translate --export-graph-json model.mlir      -> JSON graph format
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/LowerToProgram.h"
#include "planner/PlanUtils.h"
#include "tools/LLVMTool.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace fsdp;

static llvm::cl::opt<bool> noDropout(
    "no-dropout",
    llvm::cl::desc("treat an HF config's dropout as 0 (fsdp trains without it); default off"),
    llvm::cl::init(false));

static OwningOpRef<Operation *> reportOrReturn(OwningOpRef<ModuleOp> module,
                                               const ImportError &error, MLIRContext *context) {
  if (!module && !error.message.empty()) {
    Location loc = error.line
                       ? Location(FileLineColLoc::get(context, error.file, error.line, error.col))
                       : Location(FileLineColLoc::get(context, error.file, 0, 0));
    emitError(loc) << error.message;
  }
  if (!module)
    return nullptr;
  return OwningOpRef<Operation *>(module.release());
}

static StringRef bufferName(llvm::SourceMgr &sm) {
  return sm.getMemoryBuffer(sm.getMainFileID())->getBufferIdentifier();
}

int main(int argc, char **argv) {
  fsdp::tools::printFsdpVersion("fsdp-translate");
  fsdp::tools::hideLibraryOptions();
  noDropout.setHiddenFlag(llvm::cl::NotHidden); // this tool's own
  TranslateToMLIRRegistration importHF(
      "import-hf-config", "HF config.json to an nn.graph",
      [](llvm::SourceMgr &sm, MLIRContext *context) {
        ImportError error;
        ImportOptions options;
        options.noDropout = noDropout;
        auto text = sm.getMemoryBuffer(sm.getMainFileID())->getBuffer();
        return reportOrReturn(importHFConfig(text, bufferName(sm), context, options, error), error,
                              context);
      },
      [](DialectRegistry &registry) { registry.insert<nn::NNDialect>(); });

  TranslateToMLIRRegistration importJSON(
      "import-graph-json", "JSON graph format to an nn.graph",
      [](llvm::SourceMgr &sm, MLIRContext *context) {
        ImportError error;
        auto text = sm.getMemoryBuffer(sm.getMainFileID())->getBuffer();
        return reportOrReturn(importGraphJSON(text, bufferName(sm), context, error), error,
                              context);
      },
      [](DialectRegistry &registry) { registry.insert<nn::NNDialect>(); });

  TranslateFromMLIRRegistration exportJSON(
      "export-graph-json", "an nn.graph to the JSON graph format",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        nn::GraphOp graph = module ? getGraph(module) : nn::GraphOp();
        if (!graph)
          return op->emitError("expected a module holding an nn.graph");
        if (failed(verifyModelGraph(graph)))
          return failure();
        exportGraphJSON(graph, os);
        return success();
      },
      [](DialectRegistry &registry) { registry.insert<nn::NNDialect>(); });

  TranslateFromMLIRRegistration exportProgram(
      "export-program", "a verified plan to the runtime's JSON program",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a module holding a plan");
        return lowerToProgram(module, os);
      },
      [](DialectRegistry &registry) { registry.insert<nn::NNDialect, plan::FSDPDialect>(); });

  return failed(mlirTranslateMain(argc, argv, "fsdp translation driver"));
}
