//===- hf-config.cpp - fuzz the HF config.json importer -------------------===//
//
// The input is a config.json's text. The importer must accept it (a verified
// nn.graph) or say what is wrong at a line and column; an accepted small
// model is then summarised and planned at world size 2 like fsdp-plan does,
// which must succeed or fail with a diagnostic.
//
//===----------------------------------------------------------------------===//
#include "PlannerFuzz.h"

#include <exception>

using namespace fsdp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    mlir::MLIRContext &ctx = fuzz::context();
    llvm::StringRef text(reinterpret_cast<const char *>(data), size);
    ImportOptions options;
    options.noDropout = size % 2; // both ways: the published GPT-2 configs set dropout
    ImportError error;
    unsigned before = fuzz::diagnosticErrors();
    auto module = importHFConfig(text, "models/fuzz/config.json", &ctx, options, error);
    if (!module) {
      fuzz::checkImportFailure(error, before, "importHFConfig");
      return 0;
    }
    if (mlir::failed(mlir::verify(*module)))
      fuzz::violation("importHFConfig returned a module that does not verify");
    fuzz::summarise(*module);
    fuzz::planIfSmall(*module, data, size);
  } catch (const std::exception &e) {
    fuzz::violation(std::string("an exception escaped: ") + e.what());
  } catch (...) {
    fuzz::violation("an exception escaped");
  }
  return 0;
}
