//===- CostModel.h - predicted time of a plan on a cluster -------*- C++ -*-===//
//
// Every op costs its launch overhead plus the larger of its FLOPs at the
// sustained matmul rate and its bytes at the sustained memory bandwidth (a
// roofline); every collective costs an alpha-beta ring (or tree, for
// all-reduce, when cheaper) with nccl-tests' bus-bandwidth factors, over the
// links its group spans. The step is then simulated on a compute and a
// communication stream joined by the plan's events.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_COSTMODEL_H
#define FSDP_PLANNER_COSTMODEL_H

#include "mlir/IR/BuiltinOps.h"
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace fsdp {

struct Link {
  double bandwidth = 0, latencyS = 0, efficiency = 1;
  /// inter_node: the NICs of a node, each of `bandwidth` (NCCL runs a ring
  /// over each); 1 for a link that is one path.
  int64_t nics = 1;
};

struct Cluster {
  std::string name;
  /// The devices' kernels: "cpu" or "cuda" (a GPU cluster file): what a
  /// plan for this cluster is planned for (its scratch, its backend).
  std::string device = "cpu";
  int64_t ranksPerNode = 8, cores = 0; // cores: ranks beyond share them (CPU)
  int64_t memoryBytes = 0;
  /// What a process needs on the device beyond the plan's memory (the CUDA
  /// context, NCCL's buffers, the allocator's rounding): `reserved_bytes`,
  /// part by part, each with its source. The default memory budget is
  /// memoryBytes - reservedBytes.
  struct ReservedPart {
    std::string name, source;
    int64_t bytes = 0;
  };
  std::vector<ReservedPart> reserved;
  int64_t reservedBytes = 0; // the parts' sum
  double f32Flops = 0, bf16Flops = 0, matmulEfficiency = 1;
  double memoryBandwidth = 0, memoryEfficiency = 1, opOverheadS = 0;
  /// Rate of the element-wise arithmetic outside matmuls (exp, tanh, norms),
  /// in FLOP/s by the cost model's per-element counts; 0: not limiting.
  double vectorFlops = 0;
  /// Sustained efficiencies by kind of op, where one figure is wrong for
  /// all (`compute.op_efficiency`; 0: the general figure). Attention's are
  /// fractions of the compute dtype's peak (in place of matmul_efficiency);
  /// the others fractions of memory_bandwidth (in place of
  /// memory_efficiency), these ops being bound by their bytes.
  struct OpEfficiency {
    double attentionForward = 0, attentionBackward = 0;
    double norm = 0, elementwise = 0, loss = 0;
  };
  OpEfficiency opEfficiency;
  /// How much slower compute runs while a collective is in flight on the
  /// same device (NCCL's kernels take SMs and memory bandwidth from it):
  /// an op overlapped by communication for t seconds takes t x this
  /// longer; 0 (the default): overlap is free.
  double commInterference = 0;
  /// How fast each of `cores` ranks runs when all run at once, against one
  /// alone (CPU; measured by fsdp-calibrate); 1 where unknown.
  double parallelEfficiency = 1;
  Link intraNode, interNode;
  /// Host memory and its link to a device, for --offload: `host_link`
  /// (one direction, per device; bandwidth 0: the file gives none), a
  /// node's host memory (`host.memory_bytes`; 0: unknown) and the AdamW
  /// elements a second one rank's share of the host updates while every
  /// rank of the node steps at once (`host.adamw_elements_per_s`; 0: none).
  Link hostLink{0, 0, 1};
  int64_t hostMemoryBytes = 0;
  double hostAdamwRate = 0;
  bool hasHost() const { return hostLink.bandwidth > 0 && hostAdamwRate > 0; }
  /// Measured matmul rates by shape (m, k, n, FLOP/s): when given, a matmul
  /// runs at the rate of the nearest measured shape instead of peak x
  /// efficiency (fsdp-calibrate writes them, on data not in cache).
  struct GemmRate {
    double m, k, n, rate;
  };
  std::vector<GemmRate> gemmRates;
};

/// The link a group of `groupSize` ranks collects over, as NCCL runs it:
/// within a node, the node's; across nodes, a ring over every NIC of the
/// node, shared by the `concurrentPerNode` groups that cross nodes from it
/// at once (hybrid-shard's replica groups), and never faster than the
/// node's own link.
Link groupLink(const Cluster &c, int64_t groupSize, int64_t ranksPerGroupPerNode,
               int64_t concurrentPerNode);

/// Reads a cluster file (models/hardware/*.json); "" or the error.
std::string loadCluster(const std::string &path, Cluster &cluster);
/// models/hardware/cpu-local.json's figures, when no --cluster is given.
Cluster defaultCluster();

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce };

/// Seconds for a collective whose full buffer is `bytes` (nccl-tests'
/// "size") over a group of `ranks`, on the given link.
double collectiveSeconds(CollectiveKind kind, double bytes, int64_t ranks, const Link &link);

struct TraceEvent {
  std::string name, unit, phase, module;
  int stream = 0; // 0 compute, 1 comm
  double start = 0, duration = 0;
};

struct Prediction {
  double stepTimeS = 0, microStepTimeS = 0, optimizerTimeS = 0;
  // per micro-step; under grad_sync = last, the means over a step's
  // micro-steps (the last one reduces, the others do not)
  double computeS = 0, commS = 0, exposedCommS = 0;
  double tokensPerS = 0, mfu = 0, modelFlopsPerStep = 0;
  std::vector<TraceEvent> events; // one micro-step (the last of a step), then the optimizer
  std::vector<std::pair<double, int64_t>> liveBytes; // (time, bytes)
};

/// Simulates one optimizer step (`gradAccum` micro-steps) of a planned module.
Prediction predict(mlir::ModuleOp module, const Cluster &cluster, int64_t gradAccum = 1);

/// Chrome trace (Perfetto) of a prediction: a pid per rank (the first
/// `maxRanks`), compute and comm threads, memory counters.
nlohmann::ordered_json predictedTrace(const Prediction &p, int64_t worldSize,
                                      int64_t maxRanks = 16);

} // namespace fsdp

#endif
