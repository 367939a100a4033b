//===- Search.cpp - the plans fsdp-plan searches for ----------------------===//
#include "planner/Search.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace fsdp;

std::vector<Candidate> fsdp::searchPlans(ModuleOp model, const PlanOptions &base,
                                         const Cluster &cluster, int64_t gradAccum,
                                         std::optional<int64_t> budget, int64_t numBlocks,
                                         int64_t blockParams) {
  std::vector<Candidate> out;
  auto evaluate = [&](PlanOptions o) -> std::optional<Candidate> {
    OwningOpRef<ModuleOp> copy = model.clone();
    // Search probes fail quietly: an infeasible setting is just not a candidate.
    ScopedDiagnosticHandler quiet(model.getContext(), [](Diagnostic &) { return success(); });
    if (failed(runPlanPipeline(*copy, o)))
      return std::nullopt;
    Candidate c{o, planFigures(*copy, cluster, gradAccum), false};
    c.fits = !budget || c.figures.peakBytes <= *budget;
    return c;
  };
  std::vector<std::pair<std::string, int64_t>> strategies = {
      {"full-shard", 0}, {"shard-grad-op", 0}, {"no-shard", 0}};
  if (base.worldSize > cluster.ranksPerNode && base.worldSize % cluster.ranksPerNode == 0)
    strategies.push_back({"hybrid-shard", cluster.ranksPerNode});
  std::vector<std::string> wraps = {"block", "none"};
  for (int64_t k : {2, 4})
    if (numBlocks >= 2 * k && blockParams > 0)
      wraps.push_back("size:" + std::to_string(k * blockParams));
  for (auto &[strategy, shardSize] : strategies)
    for (const std::string &wrap : wraps)
      for (int64_t prefetch : {0, 1, 2}) {
        PlanOptions o = base;
        o.strategy = strategy;
        o.shardSize = shardSize;
        o.shardSize = o.resolvedShardSize();
        o.wrap = wrap;
        o.forwardPrefetch = prefetch;
        o.activationCheckpointing = "none";
        o.checkpointedBlocks = -1;
        auto plain = evaluate(o);
        if (!plain)
          continue;
        if (plain->fits || !budget || numBlocks == 0) {
          out.push_back(*plain);
          continue;
        }
        // The fewest checkpointed blocks that fit: memory falls as blocks
        // are checkpointed, time rises.
        o.activationCheckpointing = "blocks";
        o.checkpointedBlocks = numBlocks;
        auto all = evaluate(o);
        if (!all || !all->fits) {
          out.push_back(all ? *all : *plain);
          continue;
        }
        int64_t lo = 0, hi = numBlocks; // lo does not fit, hi does
        Candidate best = *all;
        while (hi - lo > 1) {
          int64_t mid = (lo + hi) / 2;
          o.checkpointedBlocks = mid;
          auto c = evaluate(o);
          if (c && c->fits) {
            hi = mid;
            best = *c;
          } else {
            lo = mid;
          }
        }
        out.push_back(best);
      }
  std::stable_sort(out.begin(), out.end(), [](const Candidate &a, const Candidate &b) {
    if (a.fits != b.fits)
      return a.fits;
    return a.figures.predicted->stepTimeS < b.figures.predicted->stepTimeS;
  });
  return out;
}

FailureOr<MicroBatchSearch> fsdp::searchMicroBatch(ModuleOp model, const PlanOptions &base,
                                                   int64_t budget, std::string &error) {
  error.clear();
  // Each probe is a whole plan, of a clone: the model is read once.
  auto peakFor = [&](int64_t b) -> std::optional<int64_t> {
    OwningOpRef<ModuleOp> probe = model.clone();
    PlanOptions o = base;
    o.microBatch = b;
    if (failed(runPlanPipeline(*probe, o)))
      return std::nullopt;
    return planFigures(*probe).peakBytes;
  };
  std::optional<int64_t> first = peakFor(1);
  if (!first)
    return failure();
  if (*first > budget) {
    error = "no micro-batch fits the budget of " + humanBytes(budget) +
            ": a micro-batch of 1 already needs " + humanBytes(*first) + " per rank";
    return failure();
  }
  // Doubling, then bisecting: lo fits, hi does not.
  int64_t lo = 1, hi = 2;
  std::optional<int64_t> hiPeak;
  for (;; hi *= 2) {
    hiPeak = peakFor(hi);
    if (!hiPeak)
      return failure();
    if (*hiPeak > budget || hi >= (1 << 20))
      break;
    lo = hi;
  }
  if (*hiPeak <= budget) {
    error = "every micro-batch up to " + std::to_string(hi) + " fits the budget";
    return failure();
  }
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    std::optional<int64_t> peak = peakFor(mid);
    if (!peak)
      return failure();
    if (*peak <= budget) {
      lo = mid;
    } else {
      hi = mid;
      hiPeak = peak;
    }
  }
  return MicroBatchSearch{lo, hi, *hiPeak};
}
