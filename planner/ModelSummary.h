//===- ModelSummary.h - parameter counts per module --------------*- C++ -*-===//
#ifndef FSDP_PLANNER_MODELSUMMARY_H
#define FSDP_PLANNER_MODELSUMMARY_H

#include "dialect/NN/NNDialect.h"

#include "llvm/Support/raw_ostream.h"
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace fsdp {

/// Parameters of one module: a transformer block (`transformer.h.3`) or a
/// module outside the blocks (`transformer.wte`, `lm_head`).
struct ModuleRow {
  std::string module;
  int64_t params = 0; // elements
  int64_t bytes = 0;  // in the stored dtype
  int64_t tensors = 0;
  std::vector<std::string> alsoUsedBy; // modules that reuse a weight (tied heads)
};

struct ModelSummary {
  std::string name, modelType;
  int64_t numBlocks = 0, maxSeqLen = 0;
  std::string inputsKind = "tokens"; // nn.graph's inputs_kind
  int64_t parameters = 0, paramBytes = 0, paramTensors = 0;
  /// The parameters a token's forward uses: all but the experts it is not
  /// routed to (k of each sparse layer's E); `parameters` without experts.
  int64_t activeParameters = 0;
  std::vector<ModuleRow> modules; // in declaration order
  // Each distinct frequency scaling of the model's nn.rope ops: `scaling`
  // (the kind) and its parameters, by their attribute names.
  std::vector<nlohmann::ordered_json> ropeScalings;
};

ModelSummary summarize(nn::GraphOp graph);
void printSummary(const ModelSummary &summary, llvm::raw_ostream &os);
nlohmann::ordered_json summaryJson(const ModelSummary &summary);

/// "124,439,808"
std::string withCommas(int64_t n);
/// "474.7 MiB"
std::string humanBytes(int64_t bytes);

} // namespace fsdp

#endif
