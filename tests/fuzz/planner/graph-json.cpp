//===- graph-json.cpp - fuzz the JSON graph importer ----------------------===//
//
// The input is a graph in the format of docs/model-format.md. The importer
// must accept it (a verified nn.graph) or say what is wrong at a line and
// column (its own checks) or at an op (the dialect's verifiers); an accepted
// small graph is summarised, exported back to JSON (which must import to the
// same text) and planned at world size 2 like fsdp-plan does, which must
// succeed or fail with a diagnostic.
//
//===----------------------------------------------------------------------===//
#include "PlannerFuzz.h"

#include <exception>

using namespace fsdp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    mlir::MLIRContext &ctx = fuzz::context();
    llvm::StringRef text(reinterpret_cast<const char *>(data), size);
    ImportError error;
    unsigned before = fuzz::diagnosticErrors();
    auto module = importGraphJSON(text, "fuzz.json", &ctx, error);
    if (!module) {
      fuzz::checkImportFailure(error, before, "importGraphJSON");
      return 0;
    }
    if (mlir::failed(mlir::verify(*module)))
      fuzz::violation("importGraphJSON returned a module that does not verify");
    fuzz::summarise(*module);
    nn::GraphOp graph = getGraph(*module);

    // Export and import again: the same text (docs/model-format.md).
    std::string exported;
    {
      llvm::raw_string_ostream os(exported);
      exportGraphJSON(graph, os);
    }
    ImportError again;
    auto reimported = importGraphJSON(exported, "exported.json", &ctx, again);
    if (!reimported)
      fuzz::violation("the export of an accepted graph does not import: " + again.str());
    std::string exportedAgain;
    {
      llvm::raw_string_ostream os(exportedAgain);
      exportGraphJSON(getGraph(*reimported), os);
    }
    if (exported != exportedAgain)
      fuzz::violation("JSON -> IR -> JSON -> IR -> JSON does not give back the same text");

    fuzz::planIfSmall(*module, data, size);
  } catch (const std::exception &e) {
    fuzz::violation(std::string("an exception escaped: ") + e.what());
  } catch (...) {
    fuzz::violation("an exception escaped");
  }
  return 0;
}
