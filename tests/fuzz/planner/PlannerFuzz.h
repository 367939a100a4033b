//===- PlannerFuzz.h - what the planner's fuzz harnesses share -*- C++ -*-===//
//
// One MLIRContext a process (building one per input costs more than most
// inputs), a diagnostic handler that counts errors, and the contract every
// harness checks: an importer or a pass that fails has said why; whatever the
// importers accept and is small enough plans at world size 2 (the passes, the
// plan verifier, the prediction and the lowering, whose program the runtime's
// loader must accept) or fails with a diagnostic.
// A broken contract calls violation(), which prints what broke and aborts, so
// libFuzzer keeps the input.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TESTS_FUZZ_PLANNER_PLANNERFUZZ_H
#define FSDP_TESTS_FUZZ_PLANNER_PLANNERFUZZ_H

#include "dialect/FSDP/FSDPDialect.h"
#include "dialect/NN/NNDialect.h"
#include "planner/CostModel.h"
#include "planner/Import/Import.h"
#include "planner/KernelScratch.h"
#include "planner/LowerToProgram.h"
#include "planner/ModelSummary.h"
#include "planner/Pipeline.h"
#include "planner/PlanUtils.h"
#include "runtime/Program.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <unistd.h>

namespace fsdp::fuzz {

[[noreturn]] inline void violation(const std::string &what) {
  std::fprintf(stderr, "fuzz harness: contract broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline bool verbose() {
  static bool v = std::getenv("FSDP_FUZZ_VERBOSE") != nullptr;
  return v;
}

/// Errors reported through MLIR diagnostics since the process started.
inline unsigned &diagnosticErrors() {
  static unsigned n = 0;
  return n;
}

/// The process's context, with the dialects loaded and a handler that counts
/// errors (printed with FSDP_FUZZ_VERBOSE set, silent otherwise).
inline mlir::MLIRContext &context() {
  static mlir::MLIRContext *ctx = [] {
    auto *c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    loadPlannerDialects(*c);
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
        ++diagnosticErrors();
      if (verbose())
        llvm::errs() << d.getLocation() << ": " << d << "\n";
      return mlir::success();
    });
    return c;
  }();
  return *ctx;
}

/// An importer's failure: it must have said what is wrong, and a message of
/// its own names the line and column of the JSON it read.
inline void checkImportFailure(const ImportError &error, unsigned errorsBefore,
                               const char *importer) {
  if (error.message.empty()) {
    if (diagnosticErrors() == errorsBefore)
      violation(std::string(importer) + " failed without an error message or diagnostic");
    return;
  }
  if (error.line == 0 || error.col == 0)
    violation(std::string(importer) + " error without a line and column: " + error.str());
}

/// Whether a model is small enough to plan within a fraction of a second.
inline bool smallEnough(nn::GraphOp graph, int64_t maxParams = 1 << 22, size_t maxOps = 400) {
  int64_t params = 0;
  size_t ops = 0;
  for (mlir::Operation &op : graph.getBody().front()) {
    if (++ops > maxOps)
      return false;
    if (auto p = llvm::dyn_cast<nn::ParamOp>(op)) {
      auto t = llvm::cast<mlir::RankedTensorType>(p.getResult().getType());
      if (!t.hasStaticShape())
        return false;
      int64_t n = 1;
      for (int64_t d : t.getShape()) {
        if (d <= 0 || d > maxParams || n > maxParams / d)
          return false;
        n *= d;
      }
      params += n;
      if (params > maxParams)
        return false;
    }
  }
  return (int64_t)graph.getMaxSeqLen() >= 1 && (int64_t)graph.getNumBlocks() >= 0 &&
         (int64_t)graph.getNumBlocks() <= 64;
}

inline void checkPrediction(const Prediction &p, const char *what) {
  for (double x : {p.stepTimeS, p.microStepTimeS, p.optimizerTimeS, p.computeS, p.commS,
                   p.exposedCommS, p.tokensPerS, p.mfu, p.modelFlopsPerStep})
    if (!std::isfinite(x) || x < 0)
      violation(std::string(what) + ": a prediction that is not a finite, non-negative time");
}

/// What fsdp-plan does with every model it loads: summarise it.
inline void summarise(mlir::ModuleOp module) {
  nn::GraphOp graph = getGraph(module);
  if (!graph)
    violation("an importer succeeded without a graph");
  ModelSummary model = summarize(graph);
  std::string text;
  llvm::raw_string_ostream os(text);
  printSummary(model, os);
  (void)summaryJson(model).dump();
}

/// What fsdp-plan writes, fsdp-run must load: the runtime's loader checks
/// every offset, shape and event of a program against what its kernels do.
inline void checkProgramLoads(const std::string &text) {
  static const std::string path = [] {
    const char *base = std::getenv("TMPDIR");
    std::string dir = std::string(base && *base ? base : "/tmp") + "/fsdp-fuzz-plan-XXXXXX";
    if (!::mkdtemp(dir.data()))
      violation("cannot make a temporary folder " + dir);
    return dir + "/plan.json";
  }();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out)
      violation("cannot write " + path);
  }
  program::Program p;
  std::string error = program::loadProgram(path, p);
  if (!error.empty())
    violation("fsdp-run refuses the program fsdp-plan wrote: " + error);
}

/// Plans `module` (holding one verified nn.graph) as fsdp-plan does at world
/// size 2, predicts it on `cluster` and lowers it to a program. A failure
/// must come with a diagnostic.
inline void planAndLower(mlir::ModuleOp module, const Cluster &cluster,
                         const PlanOptions &options) {
  unsigned before = diagnosticErrors();
  if (mlir::failed(runPlanPipeline(module, options))) {
    if (diagnosticErrors() == before)
      violation("the plan pipeline failed without a diagnostic");
    return;
  }
  if (mlir::failed(mlir::verify(module)))
    violation("the planned module does not verify");
  PlanFigures figures = planFigures(module, cluster, /*gradAccum=*/2);
  if (verbose())
    llvm::errs() << "planned: " << options.strategy << ", seq " << options.seqLen << ", peak "
                 << figures.peakBytes << " bytes, step " << figures.predicted->stepTimeS << " s\n";
  checkPrediction(*figures.predicted, "a planned model");
  (void)predictedTrace(*figures.predicted, options.worldSize);
  std::string program;
  llvm::raw_string_ostream os(program);
  before = diagnosticErrors();
  if (mlir::failed(lowerToProgram(module, os))) {
    if (diagnosticErrors() == before)
      violation("lowering failed without a diagnostic");
    return;
  }
  checkProgramLoads(program);
}

/// fsdp-plan's options for a fuzzed model: world size 2, one sequence of the
/// model's maximum length (fsdp-plan's default) or of at most 16 tokens;
/// `variant` (from the input) picks these, the strategy, precision,
/// checkpointing and wrapping, so that the passes see more than one
/// configuration.
inline PlanOptions fuzzOptions(nn::GraphOp graph, unsigned variant) {
  PlanOptions o;
  o.worldSize = 2;
  o.microBatch = 1;
  o.seqLen = (int64_t)graph.getMaxSeqLen();
  if (variant / 24 % 2)
    o.seqLen = std::min<int64_t>(o.seqLen, 16);
  static const char *strategies[] = {"full-shard", "shard-grad-op", "no-shard"};
  o.strategy = strategies[variant % 3];
  if (variant / 3 % 2)
    o.paramDtype = o.reduceDtype = "bf16";
  if (variant / 6 % 2)
    o.activationCheckpointing = variant / 48 % 2 ? "selective" : "blocks";
  if (variant / 12 % 2)
    o.wrap = "none";
  return o;
}

inline unsigned hashBytes(const uint8_t *data, size_t size) {
  unsigned h = 2166136261u;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 16777619u;
  return h;
}

/// What fsdp-plan does with a model it accepted, where the model is small
/// enough to plan quickly: plan and lower it with options the input picks.
inline void planIfSmall(mlir::ModuleOp module, const uint8_t *data, size_t size) {
  nn::GraphOp graph = getGraph(module);
  if (smallEnough(graph))
    planAndLower(module, defaultCluster(), fuzzOptions(graph, hashBytes(data, size)));
}

} // namespace fsdp::fuzz

#endif
