//===- Search.h - the plans fsdp-plan searches for ---------------*- C++ -*-===//
//
// `--wrap auto` (the fastest plan that fits) and `--micro-batch max` (the
// largest micro-batch that fits): each probe plans a clone of the model.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_SEARCH_H
#define FSDP_PLANNER_SEARCH_H

#include "planner/Pipeline.h"

namespace fsdp {

/// One plan the --wrap auto search tried.
struct Candidate {
  PlanOptions options;
  PlanFigures figures;
  bool fits = false;
};

/// --wrap auto: plans every combination of strategy, unit boundaries (a
/// block, several blocks, everything), forward prefetch depth, and the
/// fewest checkpointed blocks that fit, on clones of `model`; returns them
/// fastest first, those that fit before those that do not.
std::vector<Candidate> searchPlans(mlir::ModuleOp model, const PlanOptions &base,
                                   const Cluster &cluster, int64_t gradAccum,
                                   std::optional<int64_t> budget, int64_t numBlocks,
                                   int64_t blockParams);

/// What --micro-batch max found: the largest micro-batch whose plan fits,
/// and the next one tried, which does not.
struct MicroBatchSearch {
  int64_t largest = 0;
  int64_t next = 0, nextPeakBytes = 0;
};

/// --micro-batch max: plans clones of `model` with `base` at micro-batches
/// 1, 2, 4, ... until one does not fit `budget`, then bisects. A probe that
/// fails to plan has reported why; the search then fails with an empty
/// `error`. When no micro-batch fits, or every one up to 2^20 does, it fails
/// with `error` saying so.
mlir::FailureOr<MicroBatchSearch> searchMicroBatch(mlir::ModuleOp model, const PlanOptions &base,
                                                   int64_t budget, std::string &error);

} // namespace fsdp

#endif
