//===- fsdp-translate.cpp - model graphs between JSON, HF configs and MLIR ===//
//
//   fsdp-translate --import-hf-config config.json      -> nn.graph in MLIR
//   fsdp-translate --import-graph-json model.json      -> nn.graph in MLIR
//   fsdp-translate --export-graph-json model.mlir      -> JSON graph format
//   fsdp-translate --export-program plan.mlir          -> the runtime's program
//
// Not mlirTranslateMain, which opens the input itself (a FIFO blocks it,
// /dev/zero fills memory, MLIR nested 20000 deep overflows the parser's
// stack): the input is read and checked first (LLVMTool.h), then handed to
// the one translation asked for as a buffer.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/KernelScratch.h"
#include "planner/LowerToProgram.h"
#include "planner/PlanUtils.h"
#include "tools/LLVMTool.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

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

// The translations that read JSON (the others parse MLIR), by description.
static const char kImportHFConfig[] = "HF config.json to an nn.graph";
static const char kImportGraphJSON[] = "JSON graph format to an nn.graph";

static StringRef bufferName(llvm::SourceMgr &sm) {
  return sm.getMemoryBuffer(sm.getMainFileID())->getBufferIdentifier();
}

int main(int argc, char **argv) {
  fsdp::tools::printFsdpVersion("fsdp-translate");
  fsdp::tools::hideLibraryOptions();
  noDropout.setHiddenFlag(llvm::cl::NotHidden); // this tool's own
  TranslateToMLIRRegistration importHF(
      "import-hf-config", kImportHFConfig,
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
      "import-graph-json", kImportGraphJSON,
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
      [](DialectRegistry &registry) { registerPlannerDialects(registry); });

  llvm::InitLLVM y(argc, argv);
  static llvm::cl::opt<std::string> inputPath(llvm::cl::Positional, llvm::cl::desc("<input file>"),
                                              llvm::cl::init("-"));
  static llvm::cl::opt<std::string> outputPath("o", llvm::cl::desc("Output filename"),
                                               llvm::cl::value_desc("filename"),
                                               llvm::cl::init("-"));
  llvm::cl::opt<const Translation *, false, TranslationParser> translation(
      llvm::cl::desc("Translation to perform"), llvm::cl::Required);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerTranslationCLOptions();
  llvm::cl::ParseCommandLineOptions(argc, argv, "fsdp translation driver");

  // The importers read JSON; the exporters parse MLIR.
  bool mlirInput = translation->getDescription() != kImportHFConfig &&
                   translation->getDescription() != kImportGraphJSON;
  std::unique_ptr<llvm::MemoryBuffer> input =
      tools::readInput("fsdp-translate", inputPath, mlirInput);
  if (!input)
    return 1;
  std::string error;
  auto output = openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "fsdp-translate: error: " << error << "\n";
    return 1;
  }
  MLIRContext context;
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  sourceMgr->AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(*sourceMgr, &context);
  if (failed((*translation)(sourceMgr, output->os(), &context)))
    return 1;
  output->keep();
  return 0;
}
