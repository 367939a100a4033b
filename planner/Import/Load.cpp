//===- Load.cpp - one entry point for the three input kinds ---------------===//
#include "planner/Import/Import.h"
#include "support/InputFile.h"

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

namespace {
bool holdsOneGraph(ModuleOp module, ImportError &error) {
  size_t count = llvm::range_size(module.getOps<nn::GraphOp>());
  if (count == 1)
    return true;
  error.line = error.col = 0;
  error.message = "expected exactly one nn.graph, but the input has " + std::to_string(count);
  return false;
}
} // namespace

OwningOpRef<ModuleOp> fsdp::importMLIR(StringRef text, StringRef file, MLIRContext *context,
                                       ImportError &error, llvm::raw_ostream &diagnostics) {
  context->getOrLoadDialect<nn::NNDialect>();
  error = ImportError();
  error.file = file.str();
  llvm::SourceMgr sourceMgr;
  // A copy: MLIR's lexer reads up to the NUL that ends a MemoryBuffer.
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, file), llvm::SMLoc());
  // The parser, the verifiers and the checks below report here, with the
  // line and column.
  SourceMgrDiagnosticHandler handler(sourceMgr, context, diagnostics);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(context));
  if (!module || !holdsOneGraph(*module, error))
    return nullptr;
  // A model, not a plan: anything beside the graph (units, a step) would meet
  // the passes' own.
  for (Operation &op : *module->getBody())
    if (!isa<nn::GraphOp>(op)) {
      op.emitError() << "a model holds one nn.graph and nothing else, but '" << op.getName()
                     << "' is here";
      return nullptr;
    }
  if (failed(verifyModelGraph(getGraph(*module))))
    return nullptr;
  return module;
}

OwningOpRef<ModuleOp> fsdp::loadModel(StringRef path, MLIRContext *context,
                                      const ImportOptions &options, ImportError &error) {
  context->getOrLoadDialect<nn::NNDialect>();
  error = ImportError();
  error.file = path.str();
  // A regular file of bounded size (a FIFO or /dev/zero is refused at once).
  std::string contents;
  std::string err =
      support::readRegularFile(path.str(), support::kMaxJsonBytes, "model", &contents);
  if (!err.empty()) {
    error.message = err.substr(path.size() + 2); // ImportError::str() names the file
    return nullptr;
  }
  StringRef text = contents;

  if (llvm::sys::path::extension(path) == ".mlir") {
    error.message = support::checkMlirDepth(contents, &error.line, &error.col);
    if (!error.message.empty())
      return nullptr;
    return importMLIR(text, path, context, error);
  }

  // Deep nesting is refused before any parser (recursive ones overflow).
  error.message = support::checkJsonDepth(contents, &error.line, &error.col);
  if (!error.message.empty())
    return nullptr;

  // JSON: a graph says "format": "fsdp-graph"; anything else is read as an
  // HF config, whose importer explains what is missing.
  auto peek = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                    /*allow_exceptions=*/false);
  bool isGraph = peek.is_object() && peek.contains("format");
  OwningOpRef<ModuleOp> module = isGraph ? importGraphJSON(text, path, context, error)
                                         : importHFConfig(text, path, context, options, error);
  if (!module || !holdsOneGraph(*module, error))
    return nullptr;
  return module;
}
