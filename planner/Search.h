//===- Search.h - the plans fsdp-plan searches for ---------------*- C++ -*-===//
//
// `--wrap auto` (the fastest plan that fits) and `--micro-batch max` (the
// largest micro-batch that fits): each probe plans a clone of the model.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_SEARCH_H
#define FSDP_PLANNER_SEARCH_H

#include "planner/Pipeline.h"

#include <functional>
#include <optional>

namespace fsdp {

/// What the user set: --wrap auto keeps each of these as given (the value in
/// the base options) and searches the rest. The dtypes are never searched:
/// precision changes the numbers trained, not only the speed and memory, so
/// the search keeps the given dtypes, or f32.
struct SearchFixed {
  bool strategy = false;
  /// --shard-size: with a strategy, its group; without, it limits the
  /// strategies to those that shard over that many ranks.
  bool shardSize = false;
  bool forwardPrefetch = false, backwardPrefetch = false;
  bool activationCheckpointing = false;
  /// --grad-sync given, or nothing to accumulate (--grad-accum 1): not
  /// searched.
  bool gradSync = true;
  /// --reshard-after-backward given, or --grad-accum 1: not searched.
  bool reshardAfterBackward = true;
  /// --reshard-after-forward given: not searched.
  bool reshardAfterForward = false;
  /// --offload given: not searched (else optimizer is tried where memory
  /// binds and the cluster file describes the host).
  bool offload = false;
  /// false with --tp auto: 1, 2, 4 and 8 that divide the world and fit in
  /// a node are searched (a degree the model's heads do not take plans
  /// nothing); else the degree given (default 1), since fsdp-run does not
  /// run tp > 1 yet.
  bool tp = true;
  /// false with --micro-batch max: each setting gets the largest micro-batch
  /// that fits, and the search ranks them by tokens/s.
  bool microBatch = true;
};

/// One setting the search plans: `options` with its checkpointing, and
/// whether the search may checkpoint blocks to make it fit.
struct SearchSetting {
  PlanOptions options;
  bool mayCheckpoint = false;
};

/// The settings --wrap auto plans, before checkpointing and micro-batch:
/// every strategy (hybrid-shard with a node's ranks as the group, where the
/// world spans whole nodes), unit boundaries (a block, several blocks,
/// everything), forward prefetch 0 to 2 and backward prefetch pre, post and
/// none, and gradient sync every and last micro-step and, for shard-grad-op
/// and hybrid-shard, gathered parameters kept across micro-steps (where
/// they are not fixed; full-shard kept so is shard-grad-op kept so), and,
/// for full-shard and hybrid-shard whose shard group spans several nodes,
/// resharding after forward to a node's ranks (hpZ) or not; each
/// setting in `fixed` only as `base` has it. With `experts` (a
/// model with sparse MLPs) also each block's experts a unit of their own.
/// Each of these for every tensor-parallel degree searched (SearchFixed's
/// `tp`), the strategies over its data-parallel ranks.
std::vector<SearchSetting> searchSettings(const PlanOptions &base, const SearchFixed &fixed,
                                          const Cluster &cluster, int64_t numBlocks,
                                          int64_t blockParams, bool experts = false);

/// One plan the --wrap auto search tried.
struct Candidate {
  PlanOptions options;
  PlanFigures figures;
  bool fits = false;
  /// With --micro-batch max: the next micro-batch, which does not fit, and
  /// its peak (0: none was tried).
  int64_t nextMicroBatch = 0, nextPeakBytes = 0;
};

/// How far a --wrap auto search has gone: the settings planned of all, and
/// the plans priced so far (each setting prices one or more: checkpointing
/// and micro-batch are searched within it). `onProgress`, where set, is
/// called after each plan priced.
struct SearchProgress {
  size_t settingsDone = 0, settings = 0;
  int64_t priced = 0;
  std::function<void(const SearchProgress &)> onProgress;
};

/// --wrap auto: plans every setting of searchSettings on clones of `model`,
/// with the fewest checkpointed blocks that fit, by blocks and by selective
/// checkpointing (where checkpointing is not
/// fixed) and, without a fixed micro-batch, the largest micro-batch that
/// fits, with and without checkpointing. Returns the distinct plans (of
/// plans with identical figures, the first tried: the least prefetch), those
/// that fit first, fastest (tokens/s) first and, as fast, smallest first;
/// then those that do not fit, smallest first. Where memory binds a setting
/// (it does not fit as set, needs checkpointing, or its micro-batch is
/// searched) and the offload is not fixed, the setting is planned again
/// with the optimizer offloaded to the host, then with everything (when
/// the cluster describes the host; with a fixed micro-batch, a level only
/// where its plan without checkpointing is faster than what the setting
/// found with less offloaded): offloading frees memory and adds copies.
std::vector<Candidate> searchPlans(mlir::ModuleOp model, const PlanOptions &base,
                                   const SearchFixed &fixed, const Cluster &cluster,
                                   int64_t gradAccum, std::optional<int64_t> budget,
                                   int64_t numBlocks, int64_t blockParams,
                                   SearchProgress *progress = nullptr);

/// What --micro-batch max found: the largest micro-batch whose plan fits,
/// and the next one tried, which does not.
struct MicroBatchSearch {
  int64_t largest = 0;
  int64_t next = 0, nextPeakBytes = 0;
};

/// --micro-batch max: plans clones of `model` with `base` at micro-batches
/// 1 and 2, then where the line through the last two meets `budget`, then
/// bisects where that does not narrow it. A probe that
/// fails to plan has reported why; the search then fails with an empty
/// `error`. When no micro-batch fits, or every one up to 2^20 does, it fails
/// with `error` saying so. A `hint` (the answer for a similar plan) is tried
/// first: where it is right, two plans find it.
mlir::FailureOr<MicroBatchSearch> searchMicroBatch(mlir::ModuleOp model, const PlanOptions &base,
                                                   int64_t budget, std::string &error,
                                                   int64_t hint = 0);

} // namespace fsdp

#endif
