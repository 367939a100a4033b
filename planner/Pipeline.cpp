//===- Pipeline.cpp -------------------------------------------------------===//
#include "planner/Pipeline.h"
#include "planner/Buffers.h"
#include "planner/Passes.h"
#include "planner/PlanUtils.h"
#include "support/InputFile.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

#include <cmath>

using namespace mlir;
using namespace fsdp;

int64_t PlanOptions::resolvedShardSize() const {
  std::optional<plan::Strategy> s = plan::parseStrategyFlagName(strategy);
  int64_t dp = tp > 0 ? worldSize / tp : worldSize;
  return s ? shardSizeOf(*s, dp, shardSize) : dp;
}

LogicalResult fsdp::runPlanPipeline(ModuleOp module, const PlanOptions &o) {
  // The options as the command line spells them, to the passes' enums.
  std::optional<plan::Strategy> strategy = plan::parseStrategyFlagName(o.strategy);
  if (!strategy)
    return module.emitError() << "unknown strategy '" << o.strategy
                              << "'; expected full-shard, shard-grad-op, no-shard or "
                                 "hybrid-shard";
  std::optional<plan::Checkpointing> checkpointing =
      plan::symbolizeCheckpointing(o.activationCheckpointing);
  if (!checkpointing)
    return module.emitError() << "activation checkpointing must be none, blocks or selective, not '"
                              << o.activationCheckpointing << "'";
  std::optional<plan::BackwardPrefetch> backwardPrefetch =
      plan::symbolizeBackwardPrefetch(o.backwardPrefetch);
  if (!backwardPrefetch)
    return module.emitError() << "backward-prefetch must be pre, post or none, not '"
                              << o.backwardPrefetch << "'";
  std::optional<plan::Dtype> paramDtype = plan::symbolizeDtype(o.paramDtype);
  std::optional<plan::Dtype> reduceDtype = plan::symbolizeDtype(o.reduceDtype);
  std::optional<plan::Dtype> computeDtype = plan::symbolizeDtype(o.resolvedComputeDtype());
  if (!paramDtype || !reduceDtype || !computeDtype)
    return module.emitError() << "mixed precision dtypes are f32 or bf16, not '"
                              << (!paramDtype    ? o.paramDtype
                                  : !reduceDtype ? o.reduceDtype
                                                 : o.resolvedComputeDtype())
                              << "'";

  std::optional<plan::GradSync> gradSync = plan::symbolizeGradSync(o.gradSync);
  if (!gradSync)
    return module.emitError() << "grad-sync must be every or last, not '" << o.gradSync << "'";

  PassManager pm(module.getContext());
  pm.addPass(createTensorParallel({o.tp, o.sequenceParallel}));
  pm.addPass(createTrainingStep());
  pm.addPass(createActivationCheckpointing({*checkpointing, o.checkpointedBlocks}));
  pm.addPass(createWrapUnits({o.wrap, o.resolvedShardSize()}));
  pm.addPass(createInsertCollectives({*strategy, o.worldSize, o.resolvedShardSize(), *gradSync,
                                      o.reshardAfterBackward, o.reshardAfterForward, o.tp}));
  pm.addPass(createMixedPrecision({*paramDtype, *reduceDtype, *computeDtype}));
  pm.addPass(createPrefetch({o.forwardPrefetch, *backwardPrefetch, o.maxInflightGathers}));
  std::optional<plan::Offload> offload = plan::symbolizeOffload(o.offload);
  if (!offload)
    return module.emitError() << "offload must be none, optimizer or all, not '" << o.offload
                              << "'";
  pm.addPass(
      createMemoryPlan({o.microBatch, o.seqLen,
                        o.target == "cuda" ? plan::Target::Cuda : plan::Target::Cpu, *offload}));
  pm.addPass(createVerifyPlan());
  return pm.run(module);
}

PlanFigures fsdp::planFigures(ModuleOp module) {
  PlanFigures f;
  plan::StepOp step = getStep(module);
  if (plan::MemoryAttr mem = step.getMemoryAttr()) {
    f.peakBytes = mem.getPeakBytes();
    f.livePeakBytes = mem.getLivePeakBytes();
    f.paramsBytes = mem.getParamsBytes();
    f.gradsBytes = mem.getGradsBytes();
    f.optimizerBytes = mem.getOptimizerBytes();
    f.unshardedBytes = mem.getUnshardedBytes();
    f.activationsBytes = mem.getActivationsBytes();
    f.fragmentationBytes = mem.getFragmentationBytes();
  }
  f.hostBytes = step.getHostBytes().value_or(0);
  for (plan::UnitOp u : getUnits(module)) {
    if (step.offloadsOptimizer()) {
      f.hostMomentsBytes += 2 * u.getShardNumel() * 4;
      f.hostMasterBytes += u.getShardNumel() * 4;
      f.hostGradBytes += u.getShardNumel() * 4;
      if (u.getHostGatherOffset())
        f.hostGatherBytes += u.getShardNumel() * 2;
    }
    ArrayAttr params = u.getParams();
    auto name = [&](size_t i) { return cast<StringAttr>(params[i]).getValue().str(); };
    f.units.push_back({u.getSymName().str(), u.getModule().str(), params.empty() ? "" : name(0),
                       params.empty() ? "" : name(params.size() - 1), u.getNumel(),
                       u.getPaddedNumel(), u.getShardNumel()});
  }
  // Bytes each rank's buffers hold per collective (nccl-tests' "size"); a
  // reduce-scatter over a group of one is a local copy, not communication.
  auto byName = unitsByName(module);
  for (Operation &op : step.getBody().front()) {
    plan::UnitOp u = unitOfOp(&op, byName);
    if (isa<plan::ReshardOp>(op))
      ++f.reshardedUnits;
    if (auto g = dyn_cast<plan::AllGatherOp>(op)) {
      f.allGatherBytes += u.getPaddedNumel() * collectiveElementBytes(&op);
      if (g.getGroup() == plan::Group::reshard)
        f.allGatherReshardBytes += u.getPaddedNumel() * collectiveElementBytes(&op);
    } else if (isa<plan::ReduceScatterOp>(op) && u.getShardSize() > 1)
      f.reduceScatterBytes += u.getPaddedNumel() * collectiveElementBytes(&op);
    else if (auto ar = dyn_cast<plan::AllReduceOp>(op)) {
      if (ar.getGroup() == plan::Group::tp)
        f.tpGradAllReduceBytes += tpPartialShardNumel(u) * 4;
      else
        f.allReduceBytes += u.getShardNumel() * 4;
    } else if (isa<plan::TpAllReduceOp, plan::TpAllGatherOp, plan::TpReduceScatterOp>(op)) {
      // The whole activation's bytes (nccl-tests' "size").
      Value whole = isa<plan::TpAllGatherOp>(op) ? op.getResult(0) : op.getOperand(0);
      f.tpActivationBytes += tensorBytes(whole.getType(), step.getMicroBatch().value_or(1),
                                         step.getSeqLen().value_or(1));
    }
  }
  return f;
}

PlanFigures fsdp::planFigures(ModuleOp module, const Cluster &cluster, int64_t gradAccum) {
  PlanFigures f = planFigures(module);
  f.predicted = predict(module, cluster, gradAccum);
  f.clusterName = cluster.name;
  return f;
}

bool fsdp::fitsHostMemory(const PlanFigures &f, const Cluster &cluster, int64_t worldSize) {
  if (!f.hostBytes || !cluster.hostMemoryBytes)
    return true;
  int64_t ranks = std::min(cluster.ranksPerNode, worldSize);
  return f.hostBytes <= cluster.hostMemoryBytes / ranks;
}

nlohmann::ordered_json fsdp::reshardAfterForwardValue(const PlanOptions &o) {
  if (o.reshardAfterForward)
    return o.reshardAfterForward;
  return o.strategy != "shard-grad-op";
}

nlohmann::ordered_json fsdp::planReport(const ModelSummary &model, const PlanOptions &o,
                                        const PlanFigures &f, std::optional<int64_t> budget,
                                        const Headroom *headroom) {
  nlohmann::ordered_json r;
  r["model"] = model.name;
  r["model_type"] = model.modelType;
  r["parameters"] = model.parameters;
  r["world_size"] = o.worldSize;
  r["mesh"] = {{"dp", o.worldSize / o.tp},
               {"tp", o.tp},
               {"sequence_parallel", o.tp > 1 && o.sequenceParallel}};
  r["strategy"] = o.strategy;
  r["shard_size"] = o.resolvedShardSize();
  r["wrap"] = o.wrap;
  r["micro_batch"] = o.microBatch;
  r["seq_len"] = o.seqLen;
  r["forward_prefetch"] = o.forwardPrefetch;
  r["backward_prefetch"] = o.backwardPrefetch;
  r["max_inflight_gathers"] = o.maxInflightGathers;
  r["activation_checkpointing"] = o.activationCheckpointing;
  r["param_dtype"] = o.paramDtype;
  r["reduce_dtype"] = o.reduceDtype;
  r["compute_dtype"] = o.resolvedComputeDtype();
  r["grad_sync"] = o.gradSync;
  r["reshard_after_backward"] = o.reshardAfterBackward;
  r["reshard_after_forward"] = reshardAfterForwardValue(o);
  r["offload"] = o.offload;
  nlohmann::ordered_json units = nlohmann::ordered_json::array();
  for (const auto &u : f.units)
    units.push_back({{"name", u.name},
                     {"module", u.module},
                     {"params", u.params},
                     {"bytes", u.params * 4},
                     {"padded_numel", u.paddedNumel},
                     {"shard_numel", u.shardNumel}});
  r["units"] = units;
  r["memory"] = {{"peak_bytes", f.peakBytes},
                 {"params_bytes", f.paramsBytes},
                 {"grads_bytes", f.gradsBytes},
                 {"optimizer_bytes", f.optimizerBytes},
                 {"activations_bytes", f.activationsBytes},
                 {"unsharded_bytes", f.unshardedBytes},
                 {"fragmentation_bytes", f.fragmentationBytes},
                 {"live_peak_bytes", f.livePeakBytes}};
  if (o.offload != "none") // the host pool, apart from the device's arena
    r["host_memory"] = {{"host_bytes", f.hostBytes},
                        {"optimizer_bytes", f.hostMomentsBytes},
                        {"master_params_bytes", f.hostMasterBytes},
                        {"grads_bytes", f.hostGradBytes},
                        {"gather_copies_bytes", f.hostGatherBytes}};
  r["comm"] = {{"all_gather", f.allGatherBytes},
               {"reduce_scatter", f.reduceScatterBytes},
               {"all_reduce", f.allReduceBytes}};
  if (o.reshardAfterForward) // of all_gather's bytes, those within the reshard groups
    r["comm"]["all_gather_reshard"] = f.allGatherReshardBytes;
  if (o.tp > 1) { // within the tensor-parallel groups
    r["comm"]["tp_activations"] = f.tpActivationBytes;
    r["comm"]["all_reduce_tp"] = f.tpGradAllReduceBytes;
  }
  if (f.predicted) {
    const Prediction &p = *f.predicted;
    r["predicted"] = {{"cluster", f.clusterName},
                      {"step_time_s", p.stepTimeS},
                      {"micro_step_time_s", p.microStepTimeS},
                      {"optimizer_time_s", p.optimizerTimeS},
                      {"exposed_comm_s", p.exposedCommS},
                      {"tokens_per_s", p.tokensPerS},
                      {"tokens_per_s_per_device", p.tokensPerS / double(o.worldSize)},
                      {"mfu", p.mfu}};
  }
  if (headroom) {
    nlohmann::ordered_json parts = nlohmann::ordered_json::array();
    for (const Cluster::ReservedPart &p : headroom->parts)
      parts.push_back({{"part", p.name}, {"bytes", p.bytes}, {"source", p.source}});
    r["headroom"] = {{"cluster_file", headroom->file},
                     {"device_memory_bytes", headroom->deviceBytes},
                     {"reserved_bytes", headroom->reservedBytes},
                     {"reserved", parts},
                     {"budget_from", headroom->budgetFromDevice ? "device memory less reserved"
                                     : budget                   ? "--memory-budget"
                                                                : "none (--memory-budget none)"}};
  }
  if (budget)
    r["memory_budget"] = *budget;
  r["fits"] = !budget || f.peakBytes <= *budget;
  return r;
}

// A budget not from the device: --memory-budget's.
static std::string memoryBudgetLabel(const Headroom *headroom) {
  return headroom ? "budget (--memory-budget)" : "budget";
}

void fsdp::printPlanSummary(const ModelSummary &model, const PlanOptions &o, const PlanFigures &f,
                            std::optional<int64_t> budget, llvm::raw_ostream &os,
                            const Headroom *headroom) {
  os << "model " << model.name << " (" << model.modelType << "): " << withCommas(model.parameters)
     << " parameters, " << humanBytes(model.paramBytes) << "\n";
  os << "plan: " << o.strategy << " over " << o.worldSize << " ranks";
  if (o.tp > 1)
    os << " as a mesh of dp " << o.worldSize / o.tp << " x tp " << o.tp << " (tensor parallel "
       << "within groups of " << o.tp << " consecutive ranks: attention by heads, MLP by "
       << "columns, "
       << (o.sequenceParallel ? "each rank 1/" + std::to_string(o.tp) +
                                    " of the tokens between them (sequence parallel)"
                              : std::string("whole activations between them"))
       << "; FSDP over the " << o.worldSize / o.tp << " ranks of each tp index)";
  os << " (shard groups of " << o.resolvedShardSize() << "), wrap " << o.wrap << " ("
     << f.units.size() << " units), " << o.microBatch << " x " << o.seqLen
     << (o.tp > 1 ? " tokens per tp group per micro-step\n" : " tokens per rank per micro-step\n");
  os << "prefetch: forward " << o.forwardPrefetch << ", backward " << o.backwardPrefetch
     << ", at most " << o.maxInflightGathers << " gathers in flight; activation checkpointing "
     << o.activationCheckpointing << "; parameters " << o.paramDtype << ", compute "
     << o.resolvedComputeDtype() << ", reductions " << o.reduceDtype
     << " (master weights and optimizer f32)\n";
  if (o.gradSync == "last")
    os << "gradient sync: last (each micro-step adds its unsharded gradients to an f32 sum "
          "kept across the step; the last micro-step reduces it)\n";
  if (!o.reshardAfterBackward)
    os << "reshard after backward: false (each unit gathered at the step's first micro-step "
          "and kept for all of them)\n";
  if (o.reshardAfterForward)
    os << "reshard after forward: " << o.reshardAfterForward << " (" << f.reshardedUnits << " of "
       << f.units.size() << " units keep 1/" << o.reshardAfterForward
       << " of their parameters from forward to backward and gather them within groups of "
       << o.reshardAfterForward << " consecutive ranks; the unit computing last in forward "
       << "stays gathered)\n";
  if (o.offload == "optimizer")
    os << "offload: optimizer (Adam's moments and an f32 master copy of each parameter shard in "
          "host memory; each optimizer step copies the gradient shard out, runs AdamW on the host "
          "and copies the parameter shard back)\n";
  if (o.offload == "all")
    os << "offload: all (the parameter shards and Adam's moments in host memory; each gather "
          "copies the rank's shard in from the host"
       << (o.paramDtype == "bf16" ? " (its bf16 copy, rounded there after each update)" : "")
       << ", each optimizer step copies the gradient shard out and runs AdamW on the host; the "
          "gradient shards stay on the device)\n";
  os << "\n";

  // A unit of one module is named by it; one that spans several (size:N,
  // none) by its first and last parameter, not every module it holds.
  auto spans = [](const PlanFigures::Unit &u) {
    if (!u.module.empty() && u.module.find(',') == std::string::npos)
      return std::make_pair(u.module, u.module.size());
    if (u.firstParam == u.lastParam)
      return std::make_pair(u.firstParam, u.firstParam.size());
    // "…" is three bytes in UTF-8 and one column.
    return std::make_pair(u.firstParam + " \u2026 " + u.lastParam,
                          u.firstParam.size() + 3 + u.lastParam.size());
  };
  size_t w = 4;
  for (const auto &u : f.units)
    w = std::max(w, u.name.size());
  size_t mw = 6;
  for (const auto &u : f.units)
    mw = std::max(mw, spans(u).second);
  os << llvm::left_justify("unit", w) << "  " << llvm::left_justify("module", mw) << "  "
     << llvm::right_justify("params", 15) << "  " << llvm::right_justify("padded", 15) << "  "
     << llvm::right_justify("shard/rank", 15) << "\n";
  for (const auto &u : f.units) {
    auto [what, columns] = spans(u);
    os << llvm::left_justify(u.name, w) << "  " << what << std::string(mw - columns, ' ') << "  "
       << llvm::right_justify(withCommas(u.params), 15) << "  "
       << llvm::right_justify(withCommas(u.paddedNumel), 15) << "  "
       << llvm::right_justify(withCommas(u.shardNumel), 15) << "\n";
  }

  os << "\nmemory per rank at the peak\n";
  auto row = [&](StringRef what, int64_t bytes) {
    os << "  " << llvm::left_justify(what, 40) << llvm::right_justify(withCommas(bytes), 18) << "  "
       << llvm::right_justify(humanBytes(bytes), 10) << "\n";
  };
  row("parameter shards", f.paramsBytes);
  row(o.gradSync == "last" ? "gradient shards and f32 sums (no-sync)" : "gradient shards",
      f.gradsBytes);
  row("optimizer state (Adam m, v)", f.optimizerBytes);
  row("unsharded parameters and grads", f.unshardedBytes);
  row("activations and temporaries", f.activationsBytes);
  row("arena fragmentation", f.fragmentationBytes);
  row("peak (the arena)", f.peakBytes);
  if (o.offload != "none") {
    os << "\nhost memory per rank (--offload " << o.offload << ")\n";
    row("optimizer state (Adam m, v)", f.hostMomentsBytes);
    row(o.offload == "all" ? "parameter shards (f32)" : "master parameter shards (f32)",
        f.hostMasterBytes);
    if (f.hostGatherBytes)
      row("their bf16 copies for the gathers", f.hostGatherBytes);
    row("gradient shards' copies", f.hostGradBytes);
    row("host pool", f.hostBytes);
  }
  // The device and what a process needs there beyond the plan, part by
  // part (their sources are in the cluster file and the report).
  if (headroom) {
    os << "\ndevice memory per rank (" << headroom->file << ")\n";
    row("device memory", headroom->deviceBytes);
    row("reserved beyond the plan", headroom->reservedBytes);
    for (const Cluster::ReservedPart &p : headroom->parts)
      row("  " + p.name, p.bytes);
  }
  if (budget) {
    std::string from = headroom && headroom->budgetFromDevice ? "budget = device - reserved"
                                                              : memoryBudgetLabel(headroom);
    row(from + (f.peakBytes <= *budget ? " (fits)" : " (does NOT fit)"), *budget);
  }
  // grad_sync last: the reductions run once a step, at its last micro-step.
  const char *reductions = o.gradSync == "last" ? " (the last micro-step's only)" : "";
  os << "\ncommunication per rank per micro-step: all_gather " << humanBytes(f.allGatherBytes)
     << (o.reshardAfterBackward ? "" : " (the first micro-step's only)")
     << (f.allGatherReshardBytes
             ? " (" + humanBytes(f.allGatherReshardBytes) + " within reshard groups of " +
                   std::to_string(o.reshardAfterForward) + ")"
             : std::string())
     << ", reduce_scatter " << humanBytes(f.reduceScatterBytes) << reductions << ", all_reduce "
     << humanBytes(f.allReduceBytes) << reductions << "\n";
  if (o.tp > 1)
    os << "tensor-parallel communication per rank per micro-step: activations "
       << humanBytes(f.tpActivationBytes)
       << (o.sequenceParallel ? " (tp_all_gather and tp_reduce_scatter" : " (tp_all_reduce")
       << ", forward and backward, within groups of " << o.tp << "), all_reduce over tp "
       << humanBytes(f.tpGradAllReduceBytes)
       << " (partial gradients; the last micro-step's only)\n";
  if (f.predicted) {
    const Prediction &p = *f.predicted;
    os << llvm::format(
        "\npredicted on %s:\n  step %.4f s (micro-step %.4f s: compute %.4f s, "
        "communication %.4f s of which %.4f s exposed; optimizer %.4f s)\n"
        "  %.0f tokens/s per device (rank), %.0f in total over %lld ranks; MFU %.1f%%\n",
        f.clusterName.c_str(), p.stepTimeS, p.microStepTimeS, p.computeS, p.commS, p.exposedCommS,
        p.optimizerTimeS, p.tokensPerS / double(o.worldSize), p.tokensPerS, (long long)o.worldSize,
        100 * p.mfu);
  }
}

std::optional<int64_t> fsdp::parseSize(llvm::StringRef text) {
  int64_t bytes = support::parseByteSize(text.str());
  return bytes < 0 ? std::nullopt : std::optional<int64_t>(bytes);
}
