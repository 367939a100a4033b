//===- Pipeline.h - fsdp-plan's pass pipeline and report ---------*- C++ -*-===//
#ifndef FSDP_PLANNER_PIPELINE_H
#define FSDP_PLANNER_PIPELINE_H

#include "planner/CostModel.h"
#include "planner/ModelSummary.h"

#include "mlir/IR/BuiltinOps.h"
#include <nlohmann/json.hpp>

#include <string>

namespace fsdp {

struct PlanOptions {
  int64_t worldSize = 1;
  int64_t microBatch = 1;
  int64_t seqLen = 0; // 0: the model's maximum
  std::string strategy = "full-shard";
  int64_t shardSize = 0; // the shard group's; 0: the strategy's (shardSizeOf)
  std::string wrap = "block";
  int64_t forwardPrefetch = 1;
  std::string backwardPrefetch = "pre";
  int64_t maxInflightGathers = 2;
  std::string activationCheckpointing = "none";
  int64_t checkpointedBlocks = -1; // with blocks or selective: the first N (-1: all)
  std::string paramDtype = "f32", reduceDtype = "f32";
  std::string computeDtype;         // "": paramDtype's
  std::string target = "cpu";       // cpu or cuda: whose kernels (from --cluster)
  std::string gradSync = "every";   // every or last: when gradients are reduced
  bool reshardAfterBackward = true; // false: gathered parameters kept across micro-steps
  // N: after forward each unit keeps 1/N of its gathered parameters, which
  // its backward gathers over groups of N consecutive ranks (hpZ); 0: the
  // strategy's behaviour (full-shard frees them, shard-grad-op keeps them).
  int64_t reshardAfterForward = 0;
  // none, optimizer or all: whether Adam's moments and a master copy of
  // each parameter shard live in host memory, AdamW running on the host
  // (optimizer), and the parameter shards too (all).
  std::string offload = "none";
  // Tensor-parallel ranks, innermost in a (worldSize / tp) x tp mesh: each
  // attention split by heads, each MLP by columns (fsdp-tensor-parallel);
  // the strategy's groups are of the data-parallel dimension.
  int64_t tp = 1;
  // With tp > 1: between the regions each rank holds its part of the tokens
  // (Megatron's sequence parallelism); false: whole activations.
  bool sequenceParallel = true;

  /// The shard group's size: shardSize, or the strategy's where it is 0.
  int64_t resolvedShardSize() const;
  /// The compute dtype: computeDtype, or paramDtype where it is "".
  const std::string &resolvedComputeDtype() const {
    return computeDtype.empty() ? paramDtype : computeDtype;
  }
};

/// Runs training-step, wrap-units, insert-collectives, prefetch,
/// memory-plan and verify-plan on a module holding an nn.graph.
mlir::LogicalResult runPlanPipeline(mlir::ModuleOp module, const PlanOptions &options);

/// Per-rank memory and communication of a planned module.
struct PlanFigures {
  int64_t peakBytes = 0, livePeakBytes = 0;
  int64_t paramsBytes = 0, gradsBytes = 0, optimizerBytes = 0, unshardedBytes = 0,
          activationsBytes = 0, fragmentationBytes = 0;
  int64_t allGatherBytes = 0, reduceScatterBytes = 0, allReduceBytes = 0;
  int64_t allGatherReshardBytes = 0; // of allGatherBytes, over the reshard groups
  // tp > 1: the activations the tp group sums or gathers (fsdp.tp_all_reduce,
  // or tp_all_gather and tp_reduce_scatter: the whole activation's bytes,
  // forward and backward) and the partial gradients' (all_reduce over tp)
  int64_t tpActivationBytes = 0, tpGradAllReduceBytes = 0;
  int64_t reshardedUnits = 0; // units resharded after forward (fsdp.reshard)
  // offload optimizer: the host pool (host_bytes) and its parts, a rank's
  int64_t hostBytes = 0, hostMomentsBytes = 0, hostMasterBytes = 0, hostGradBytes = 0;
  int64_t hostGatherBytes = 0; // offload all, bf16 parameters: the gathers' copies
  struct Unit {
    std::string name, module;
    std::string firstParam, lastParam; // in the unit's flat order
    int64_t params = 0, paddedNumel = 0, shardNumel = 0;
  };
  std::vector<Unit> units;
  std::optional<Prediction> predicted;
  std::string clusterName;
};
PlanFigures planFigures(mlir::ModuleOp module);
/// The same, with the step time predicted on `cluster`.
PlanFigures planFigures(mlir::ModuleOp module, const Cluster &cluster, int64_t gradAccum);

/// Whether a plan's host pool (--offload) fits the host memory of a node of
/// `cluster`, which the node's ranks (at most the world's) share; true
/// where the plan has none or the cluster does not say.
bool fitsHostMemory(const PlanFigures &f, const Cluster &cluster, int64_t worldSize);

/// The device a --cluster file describes, as the budget sees it: its
/// memory, what a process needs there beyond the plan (reserved_bytes, by
/// part), and whether the budget is the difference (no --memory-budget).
struct Headroom {
  std::string file; // the cluster file
  int64_t deviceBytes = 0, reservedBytes = 0;
  std::vector<Cluster::ReservedPart> parts;
  bool budgetFromDevice = false;
};

/// The report's `reshard_after_forward`: N, or whether the strategy frees
/// gathered parameters after forward (false: shard-grad-op).
nlohmann::ordered_json reshardAfterForwardValue(const PlanOptions &options);

/// The report of docs/program-format.md's `--report`; `headroom` with
/// --cluster.
nlohmann::ordered_json planReport(const ModelSummary &model, const PlanOptions &options,
                                  const PlanFigures &figures, std::optional<int64_t> budget,
                                  const Headroom *headroom = nullptr);

void printPlanSummary(const ModelSummary &model, const PlanOptions &options,
                      const PlanFigures &figures, std::optional<int64_t> budget,
                      llvm::raw_ostream &os, const Headroom *headroom = nullptr);

/// "80GiB", "1.5 TiB", "4096" (bytes); nullopt if it does not parse
/// (support::parseByteSize, which fsdp-run's --max-shard-size reads too).
std::optional<int64_t> parseSize(llvm::StringRef text);

} // namespace fsdp

#endif
