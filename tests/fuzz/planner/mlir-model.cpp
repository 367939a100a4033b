//===- mlir-model.cpp - fuzz the MLIR model reader ------------------------===//
//
// The input is a `.mlir` model as a user writes or edits it: importMLIR
// (what fsdp-plan runs for a .mlir file) parses it, runs the dialects'
// verifiers and wants exactly one nn.graph. It must accept it or say what is
// wrong: an error printed as "file:line:col: error: ..." by the parser or a
// verifier, or an ImportError of its own. An accepted model must print and
// parse back, is summarised and exported to the JSON graph format (which
// must import back to the same text, docs/model-format.md), and when it is
// small it is planned at world size 2 like fsdp-plan does, which must succeed
// or fail with a diagnostic.
//
//===----------------------------------------------------------------------===//
#include "PlannerFuzz.h"

#include "mlir/IR/AsmState.h"
#include "mlir/Parser/Parser.h"

#include <exception>

using namespace fsdp;

namespace {

std::string exportJSON(nn::GraphOp graph) {
  std::string text;
  llvm::raw_string_ostream os(text);
  exportGraphJSON(graph, os);
  return text;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    mlir::MLIRContext &ctx = fuzz::context();
    llvm::StringRef text(reinterpret_cast<const char *>(data), size);
    ImportError error;
    std::string diagnostics;
    llvm::raw_string_ostream diagOS(diagnostics);
    auto module = importMLIR(text, "fuzz.mlir", &ctx, error, diagOS);
    if (fuzz::verbose() && !diagnostics.empty())
      llvm::errs() << diagnostics;
    if (!module) {
      if (error.message.empty() && !llvm::StringRef(diagnostics).contains("error: "))
        fuzz::violation("importMLIR failed without an error message or diagnostic");
      return 0;
    }
    if (!error.message.empty())
      fuzz::violation("importMLIR succeeded with an error message: " + error.str());
    if (mlir::failed(mlir::verify(*module)))
      fuzz::violation("importMLIR returned a module that does not verify");
    nn::GraphOp graph = getGraph(*module);

    // What fsdp-translate and fsdp-opt print must parse back (in a plain
    // parse, since the context's handler counts but does not print).
    {
      std::string printed;
      llvm::raw_string_ostream os(printed);
      module->print(os);
      ImportError again;
      std::string againDiagnostics;
      llvm::raw_string_ostream againOS(againDiagnostics);
      if (!importMLIR(printed, "printed.mlir", &ctx, again, againOS))
        fuzz::violation("the printed form of an accepted model does not load: " + againDiagnostics +
                        again.str() + "\n" + printed);
    }

    fuzz::summarise(*module);

    // IR -> JSON -> IR -> JSON: the same text (fsdp-translate --export-graph-json).
    std::string exported = exportJSON(graph);
    ImportError jsonError;
    unsigned before = fuzz::diagnosticErrors();
    auto reimported = importGraphJSON(exported, "exported.json", &ctx, jsonError);
    if (!reimported)
      fuzz::violation("the JSON export of an accepted model does not import: " +
                      (jsonError.message.empty()
                           ? std::to_string(fuzz::diagnosticErrors() - before) + " diagnostics"
                           : jsonError.str()) +
                      "\n" + exported);
    if (exportJSON(getGraph(*reimported)) != exported)
      fuzz::violation("MLIR -> JSON -> IR -> JSON does not give back the same text");

    fuzz::planIfSmall(*module, data, size);
  } catch (const std::exception &e) {
    fuzz::violation(std::string("an exception escaped: ") + e.what());
  } catch (...) {
    fuzz::violation("an exception escaped");
  }
  return 0;
}
