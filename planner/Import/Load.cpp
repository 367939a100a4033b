//===- Load.cpp - one entry point for the three input kinds ---------------===//
#include "planner/Import/Import.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <nlohmann/json.hpp>

using namespace mlir;
using namespace fsdp;

nn::GraphOp fsdp::getGraph(ModuleOp module) {
  auto graphs = module.getOps<nn::GraphOp>();
  return graphs.empty() ? nn::GraphOp() : *graphs.begin();
}

OwningOpRef<ModuleOp> fsdp::loadModel(StringRef path, MLIRContext *context,
                                      const ImportOptions &options, ImportError &error) {
  context->getOrLoadDialect<nn::NNDialect>();
  error = ImportError();
  error.file = path.str();
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (std::error_code ec = buffer.getError()) {
    error.message = "cannot read the model: " + ec.message();
    return nullptr;
  }
  StringRef text = (*buffer)->getBuffer();

  OwningOpRef<ModuleOp> module;
  if (llvm::sys::path::extension(path) == ".mlir") {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
    SourceMgrDiagnosticHandler handler(sourceMgr, context);
    module = parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(context));
    if (!module) {
      error.message.clear(); // the parser has reported it, with its line and column
      return nullptr;
    }
  } else {
    // JSON: a graph says "format": "fsdp-graph"; anything else is read as an
    // HF config, whose importer explains what is missing.
    bool isGraph = false;
    auto peek = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                      /*allow_exceptions=*/false);
    if (peek.is_object() && peek.contains("format"))
      isGraph = true;
    module = isGraph ? importGraphJSON(text, path, context, error)
                     : importHFConfig(text, path, context, options, error);
    if (!module)
      return nullptr;
  }

  size_t count = llvm::range_size(module->getOps<nn::GraphOp>());
  if (count != 1) {
    error.line = error.col = 0;
    error.message = "expected exactly one nn.graph, but the input has " + std::to_string(count);
    return nullptr;
  }
  return module;
}
