//===- Search.cpp - the plans fsdp-plan searches for ----------------------===//
#include "planner/Search.h"

#include "mlir/IR/Diagnostics.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace fsdp;

namespace {

constexpr int64_t kMaxMicroBatch = int64_t(1) << 20;

/// The largest micro-batch whose `peakFor` fits `budget` (see
/// searchMicroBatch); `peakFor` plans one, nullopt where that fails.
FailureOr<MicroBatchSearch>
largestThatFits(llvm::function_ref<std::optional<int64_t>(int64_t)> peakFor, int64_t budget,
                std::string &error, int64_t hint) {
  error.clear();
  // A hint that is the answer needs two plans: it fits, one more does not.
  if (hint >= 2) {
    std::optional<int64_t> at = peakFor(hint);
    if (!at)
      return failure();
    int64_t other = *at <= budget ? hint + 1 : hint - 1;
    std::optional<int64_t> next = peakFor(other);
    if (!next)
      return failure();
    if (*at <= budget && *next > budget)
      return MicroBatchSearch{hint, other, *next};
    if (*at > budget && *next <= budget)
      return MicroBatchSearch{other, hint, *at};
  }
  std::optional<int64_t> first = peakFor(1);
  if (!first)
    return failure();
  if (*first > budget) {
    error = "no micro-batch fits the budget of " + humanBytes(budget) +
            ": a micro-batch of 1 already needs " + humanBytes(*first) + " per rank";
    return failure();
  }
  std::optional<int64_t> second = peakFor(2);
  if (!second)
    return failure();
  if (*second > budget)
    return MicroBatchSearch{1, 2, *second};
  // lo fits; hi, where known, does not. The peak grows about linearly with
  // the micro-batch (activations), so each probe is where the line through
  // the last two points meets the budget (a secant search: a handful of
  // plans where the line is right), and a probe that does not halve the
  // bracket is followed by a bisection: never slower than bisecting twice.
  int64_t prev = 1, prevPeak = *first, lo = 2, loPeak = *second, hi = 0, hiPeak = 0;
  bool bisect = false;
  while (!hi || hi - lo > 1) {
    int64_t b;
    if (!hi) {
      if (lo >= kMaxMicroBatch) {
        error = "every micro-batch up to " + std::to_string(kMaxMicroBatch) + " fits the budget";
        return failure();
      }
      double slope = double(loPeak - prevPeak) / double(lo - prev);
      double guess = slope > 0 ? lo + double(budget - loPeak) / slope : 2.0 * lo;
      b = (int64_t)std::min<double>(std::max<double>(guess, lo + 1), kMaxMicroBatch);
    } else if (bisect) {
      b = lo + (hi - lo) / 2;
    } else {
      double guess = lo + double(budget - loPeak) * double(hi - lo) / double(hiPeak - loPeak);
      b = std::clamp<int64_t>((int64_t)guess, lo + 1, hi - 1);
    }
    int64_t width = hi ? hi - lo : 0;
    std::optional<int64_t> peak = peakFor(b);
    if (!peak)
      return failure();
    if (*peak <= budget) {
      prev = lo, prevPeak = loPeak;
      lo = b, loPeak = *peak;
    } else {
      hi = b, hiPeak = *peak;
    }
    bisect = width && 2 * (hi - lo) > width;
  }
  return MicroBatchSearch{lo, hi, hiPeak};
}

} // namespace

namespace {
std::vector<SearchSetting> settingsAtTp(const PlanOptions &base, const SearchFixed &fixed,
                                        const Cluster &cluster, int64_t numBlocks,
                                        int64_t blockParams, bool experts);
} // namespace

std::vector<SearchSetting> fsdp::searchSettings(const PlanOptions &base, const SearchFixed &fixed,
                                                const Cluster &cluster, int64_t numBlocks,
                                                int64_t blockParams, bool experts) {
  // Tensor parallelism within a node: the degrees Megatron and torchtitan
  // use, each with every FSDP setting over its data-parallel ranks. Without
  // a model's blocks (numBlocks 0: nothing to split) only the one given.
  std::vector<int64_t> degrees = {base.tp};
  if (!fixed.tp && numBlocks > 0)
    for (int64_t tp : {2, 4, 8})
      if (tp <= cluster.ranksPerNode && base.worldSize % tp == 0 && !experts)
        degrees.push_back(tp);
  std::vector<SearchSetting> out;
  for (int64_t tp : degrees) {
    PlanOptions o = base;
    o.tp = tp;
    // A hybrid-shard group given is of the data-parallel ranks: a degree
    // it does not divide into is not searched.
    if (fixed.shardSize && base.shardSize > 0 && (base.worldSize / tp) % base.shardSize != 0)
      continue;
    std::vector<SearchSetting> at =
        settingsAtTp(o, fixed, cluster, numBlocks, blockParams, experts);
    out.insert(out.end(), at.begin(), at.end());
  }
  return out;
}

namespace {
std::vector<SearchSetting> settingsAtTp(const PlanOptions &base, const SearchFixed &fixed,
                                        const Cluster &cluster, int64_t numBlocks,
                                        int64_t blockParams, bool experts) {
  // The strategies' groups are of the data-parallel ranks (--tp N: world /
  // N of them, ranksPerNode / N of them a node).
  const int64_t world = base.worldSize / base.tp,
                perNode = std::max<int64_t>(1, cluster.ranksPerNode / base.tp);
  // hybrid-shard's groups: the one given, else a node's ranks where the world
  // spans whole nodes; asked for by name, the power-of-two groups otherwise.
  std::vector<int64_t> groups;
  if (fixed.shardSize) {
    groups.push_back(base.shardSize);
  } else if (perNode > 1 && perNode < world && world % perNode == 0) {
    groups.push_back(perNode);
  } else if (fixed.strategy) {
    for (int64_t g = 2; g < world; g *= 2)
      if (world % g == 0)
        groups.push_back(g);
    if (groups.empty())
      groups.push_back(world);
  }
  std::vector<std::pair<std::string, int64_t>> strategies;
  if (fixed.strategy && base.strategy != "hybrid-shard") {
    strategies.push_back({base.strategy, 0});
  } else if (!fixed.strategy) {
    for (const char *s : {"full-shard", "shard-grad-op", "no-shard"}) {
      PlanOptions o = base;
      o.strategy = s;
      o.shardSize = 0;
      if (!fixed.shardSize || o.resolvedShardSize() == base.shardSize)
        strategies.push_back({s, 0});
    }
  }
  if (fixed.strategy && base.strategy == "hybrid-shard") {
    for (int64_t g : groups)
      strategies.push_back({"hybrid-shard", g});
  } else if (!fixed.strategy) {
    // A group of one rank or of the world is no-shard's or full-shard's.
    for (int64_t g : groups)
      if (g > 1 && g < world && world % g == 0)
        strategies.push_back({"hybrid-shard", g});
  }

  std::vector<std::string> wraps = {"block", "none"};
  if (experts)
    wraps.push_back("experts");
  for (int64_t k : {2, 4})
    if (numBlocks >= 2 * k && blockParams > 0)
      wraps.push_back("size:" + std::to_string(k * blockParams));
  std::vector<int64_t> forward = {0, 1, 2};
  if (fixed.forwardPrefetch)
    forward = {base.forwardPrefetch};
  std::vector<std::string> backward = {"pre", "post", "none"};
  if (fixed.backwardPrefetch)
    backward = {base.backwardPrefetch};

  std::vector<std::string> syncs = {"every", "last"};
  if (fixed.gradSync)
    syncs = {base.gradSync};
  // Kept across micro-steps, a unit is kept within them: full-shard kept
  // is shard-grad-op kept, which the search tries instead.
  auto keeps = [&](const std::string &strategy) -> std::vector<bool> {
    if (fixed.reshardAfterBackward)
      return {base.reshardAfterBackward};
    if (strategy == "shard-grad-op" || strategy == "hybrid-shard")
      return {true, false};
    return {true};
  };

  // Resharded after forward to a node's ranks (hpZ): where the shard group
  // spans whole nodes, its backward gathers stay within one.
  auto hpz = [&](const std::string &strategy, int64_t shardSize, bool kept) {
    if (fixed.reshardAfterForward)
      return std::vector<int64_t>{base.reshardAfterForward};
    PlanOptions o = base;
    o.strategy = strategy;
    o.shardSize = shardSize;
    int64_t g = o.resolvedShardSize();
    if (!kept && (strategy == "full-shard" || strategy == "hybrid-shard") && perNode > 1 &&
        g > perNode && g % perNode == 0)
      return std::vector<int64_t>{0, perNode};
    return std::vector<int64_t>{0};
  };

  std::vector<SearchSetting> out;
  for (const std::string &sync : syncs)
    for (auto &[strategy, shardSize] : strategies)
      for (bool reshard : keeps(strategy))
        for (int64_t reshardForward : hpz(strategy, shardSize, !reshard))
          for (const std::string &wrap : wraps)
            for (const std::string &bwd : backward)
              for (int64_t fwd : forward) {
                SearchSetting s{base, !fixed.activationCheckpointing && numBlocks > 0};
                PlanOptions &o = s.options;
                o.strategy = strategy;
                o.shardSize = shardSize;
                o.shardSize = o.resolvedShardSize();
                o.wrap = wrap;
                o.forwardPrefetch = fwd;
                o.backwardPrefetch = bwd;
                o.gradSync = sync;
                o.reshardAfterBackward = reshard;
                o.reshardAfterForward = reshardForward;
                if (!fixed.activationCheckpointing) {
                  o.activationCheckpointing = "none";
                  o.checkpointedBlocks = -1;
                }
                out.push_back(s);
              }
  return out;
}
} // namespace

namespace {

/// Plans of one search: each a clone of the model, planned quietly (an
/// infeasible setting is just not a candidate).
struct Prober {
  mutable ModuleOp model; // ModuleOp's accessors are not const
  const Cluster &cluster;
  int64_t gradAccum;
  std::optional<int64_t> budget;
  SearchProgress *progress = nullptr;

  std::optional<Candidate> evaluate(const PlanOptions &o) const {
    if (progress) {
      ++progress->priced;
      if (progress->onProgress)
        progress->onProgress(*progress);
    }
    OwningOpRef<ModuleOp> copy = model.clone();
    ScopedDiagnosticHandler quiet(model.getContext(), [](Diagnostic &) { return success(); });
    if (failed(runPlanPipeline(*copy, o)))
      return std::nullopt;
    Candidate c{o, planFigures(*copy, cluster, gradAccum), false};
    c.fits = (!budget || c.figures.peakBytes <= *budget) &&
             fitsHostMemory(c.figures, cluster, o.worldSize);
    return c;
  }

  /// The fewest of the first blocks checkpointed by `mode` (blocks or
  /// selective) that make `o` fit, where checkpointing all of them does
  /// (memory falls as blocks are checkpointed, time rises); else the plan
  /// with all of them.
  std::optional<Candidate> fewestCheckpointed(PlanOptions o, int64_t numBlocks,
                                              const std::string &mode) const {
    o.activationCheckpointing = mode;
    o.checkpointedBlocks = numBlocks;
    std::optional<Candidate> best = evaluate(o);
    if (!best || !best->fits)
      return best;
    int64_t lo = 0, hi = numBlocks; // lo does not fit, hi does
    while (hi - lo > 1) {
      int64_t mid = (lo + hi) / 2;
      o.checkpointedBlocks = mid;
      std::optional<Candidate> c = evaluate(o);
      if (c && c->fits) {
        hi = mid;
        best = c;
      } else {
        lo = mid;
      }
    }
    return best;
  }

  /// `o` at the largest micro-batch that fits; at 1, not fitting, where
  /// none does. `hint`: the last one found, which the next setting's often
  /// is.
  std::optional<Candidate> largestMicroBatch(PlanOptions o, int64_t &hint) const {
    // Each probe is predicted too: the one found is the candidate.
    std::map<int64_t, Candidate> planned;
    auto peakFor = [&](int64_t b) -> std::optional<int64_t> {
      o.microBatch = b;
      std::optional<Candidate> c = evaluate(o);
      if (!c)
        return std::nullopt;
      planned[b] = *c;
      return c->figures.peakBytes;
    };
    std::string why;
    FailureOr<MicroBatchSearch> found = largestThatFits(peakFor, *budget, why, hint);
    if (failed(found)) {
      std::optional<Candidate> c;
      if (planned.count(1))
        c = planned[1];
      return c && !c->fits ? c : std::nullopt;
    }
    hint = found->largest;
    std::optional<Candidate> c = planned[found->largest];
    if (c) {
      c->nextMicroBatch = found->next;
      c->nextPeakBytes = found->nextPeakBytes;
    }
    return c;
  }
};

// Plans that differ only in settings that change nothing (a prefetch depth
// the schedule cannot use) have identical figures.
bool sameFigures(const Candidate &a, const Candidate &b) {
  const PlanOptions &x = a.options, &y = b.options;
  const PlanFigures &f = a.figures, &g = b.figures;
  return x.strategy == y.strategy && x.shardSize == y.shardSize && x.tp == y.tp &&
         x.wrap == y.wrap && x.gradSync == y.gradSync &&
         x.reshardAfterBackward == y.reshardAfterBackward &&
         x.reshardAfterForward == y.reshardAfterForward && x.offload == y.offload &&
         x.microBatch == y.microBatch && x.activationCheckpointing == y.activationCheckpointing &&
         x.checkpointedBlocks == y.checkpointedBlocks && f.peakBytes == g.peakBytes &&
         f.livePeakBytes == g.livePeakBytes && f.unshardedBytes == g.unshardedBytes &&
         f.activationsBytes == g.activationsBytes && f.allGatherBytes == g.allGatherBytes &&
         f.reduceScatterBytes == g.reduceScatterBytes && f.allReduceBytes == g.allReduceBytes &&
         f.predicted->stepTimeS == g.predicted->stepTimeS &&
         f.predicted->exposedCommS == g.predicted->exposedCommS;
}

} // namespace

std::vector<Candidate> fsdp::searchPlans(ModuleOp model, const PlanOptions &base,
                                         const SearchFixed &fixed, const Cluster &cluster,
                                         int64_t gradAccum, std::optional<int64_t> budget,
                                         int64_t numBlocks, int64_t blockParams,
                                         SearchProgress *progress) {
  Prober probe{model, cluster, gradAccum, budget, progress};
  // Selective recomputes less than blocks (faster) and keeps more (larger):
  // both are tried, and the ranking picks.
  const char *modes[] = {"selective", "blocks"};
  int64_t plainHint = 0, checkpointedHint[2] = {0, 0};
  std::vector<Candidate> out;
  auto keep = [&](std::optional<Candidate> c) {
    if (!c)
      return;
    for (const Candidate &k : out)
      if (sameFigures(k, *c))
        return;
    out.push_back(*c);
  };
  bool experts = false;
  model.walk([&](nn::MoeLinearOp) { experts = true; });
  std::vector<SearchSetting> settings =
      searchSettings(base, fixed, cluster, numBlocks, blockParams, experts);
  if (progress)
    progress->settings = settings.size();
  bool tryOffload = !fixed.offload && cluster.hasHost();
  // Plans setting `s`; returns whether memory binds it.
  auto plan = [&](const SearchSetting &s) -> bool {
    if (!fixed.microBatch && budget) {
      // Jointly: the largest micro-batch as set, and, where blocks may be
      // checkpointed, for each mode the largest with all of them at the
      // fewest that fit it.
      std::optional<Candidate> plain = probe.largestMicroBatch(s.options, plainHint);
      keep(plain);
      if (!s.mayCheckpoint)
        return true;
      for (int m = 0; m < 2; ++m) {
        PlanOptions all = s.options;
        all.activationCheckpointing = modes[m];
        all.checkpointedBlocks = numBlocks;
        std::optional<Candidate> most = probe.largestMicroBatch(all, checkpointedHint[m]);
        if (!most || !most->fits ||
            (plain && plain->fits && most->options.microBatch <= plain->options.microBatch))
          continue;
        std::optional<Candidate> fewest =
            probe.fewestCheckpointed(most->options, numBlocks, modes[m]);
        if (fewest) {
          fewest->nextMicroBatch = most->nextMicroBatch;
          fewest->nextPeakBytes = most->nextPeakBytes;
        }
        keep(fewest);
      }
      return true;
    }
    std::optional<Candidate> plain = probe.evaluate(s.options);
    if (!plain || plain->fits || !budget || !s.mayCheckpoint) {
      keep(plain);
      return plain && !plain->fits;
    }
    bool any = false;
    for (const char *mode : modes) {
      std::optional<Candidate> fewest = probe.fewestCheckpointed(s.options, numBlocks, mode);
      if (fewest && fewest->fits) {
        keep(fewest);
        any = true;
      }
    }
    if (!any)
      keep(plain);
    return true;
  };
  for (const SearchSetting &s : settings) {
    if (progress)
      ++progress->settingsDone; // the one being planned, counted from 1
    size_t before = out.size();
    if (!plan(s) || !tryOffload)
      continue;
    // The optimizer's state offloaded, then the parameter shards too: each
    // frees more of the device and costs more time.
    for (const char *level : {"optimizer", "all"}) {
      SearchSetting offloaded = s;
      offloaded.options.offload = level;
      if (!fixed.microBatch || !budget) {
        plan(offloaded);
        continue;
      }
      // With the micro-batch fixed, the offloaded setting as set (its
      // checkpointing) is its fastest plan: checkpointing more only adds
      // recomputation. Where that already fits it is the one; where it is
      // no faster than a plan this setting found fitting with less
      // offloaded, no plan of it at this level is.
      std::optional<Candidate> plain = probe.evaluate(offloaded.options);
      if (!plain) // offload all with no-shard: nothing to gather
        continue;
      double fastest = 0;
      for (size_t k = before; k < out.size(); ++k)
        if (out[k].fits)
          fastest = std::max(fastest, out[k].figures.predicted->tokensPerS);
      if (fastest > 0 && plain->figures.predicted->tokensPerS <= fastest)
        continue;
      if (plain->fits || !s.mayCheckpoint) {
        keep(plain);
        continue;
      }
      plan(offloaded);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate &a, const Candidate &b) {
    if (a.fits != b.fits)
      return a.fits;
    if (!a.fits)
      return a.figures.peakBytes < b.figures.peakBytes;
    if (a.figures.predicted->tokensPerS != b.figures.predicted->tokensPerS)
      return a.figures.predicted->tokensPerS > b.figures.predicted->tokensPerS;
    return a.figures.peakBytes < b.figures.peakBytes; // as fast, in less memory
  });
  return out;
}

FailureOr<MicroBatchSearch> fsdp::searchMicroBatch(ModuleOp model, const PlanOptions &base,
                                                   int64_t budget, std::string &error,
                                                   int64_t hint) {
  // Each probe is a whole plan, of a clone: the model is read once.
  auto peakFor = [&](int64_t b) -> std::optional<int64_t> {
    OwningOpRef<ModuleOp> probe = model.clone();
    PlanOptions o = base;
    o.microBatch = b;
    if (failed(runPlanPipeline(*probe, o)))
      return std::nullopt;
    return planFigures(*probe).peakBytes;
  };
  return largestThatFits(peakFor, budget, error, hint);
}
