//===- PlannerTest.cpp - the memory plan against closed forms -------------===//
#include "planner/Buffers.h"
#include "planner/Import/Import.h"
#include "planner/KernelScratch.h"
#include "planner/Pipeline.h"
#include "planner/PlanUtils.h"
#include "planner/Search.h"

#include "mlir/IR/MLIRContext.h"
#include <gtest/gtest.h>

#include <set>

using namespace fsdp;

namespace {

std::string model(const std::string &name) {
  return std::string(FSDP_SOURCE_DIR) + "/models/" + name + "/config.json";
}

struct Planned {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  PlanFigures figures;
};

Planned plan(const std::string &name, PlanOptions o) {
  Planned p;
  p.context = std::make_unique<mlir::MLIRContext>();
  loadPlannerDialects(*p.context);
  ImportError error;
  p.module = loadModel(model(name), p.context.get(), {}, error);
  EXPECT_TRUE(p.module) << error.str();
  if (!p.module)
    return p;
  EXPECT_TRUE(mlir::succeeded(runPlanPipeline(*p.module, o)));
  p.figures = planFigures(*p.module);
  return p;
}

PlanOptions options(int64_t world, const std::string &strategy = "full-shard") {
  PlanOptions o;
  o.worldSize = world;
  o.strategy = strategy;
  o.microBatch = 1;
  o.seqLen = 16;
  return o;
}

// Full-shard in f32: each unit keeps ceil(P_unit / N) elements of parameter,
// gradient and two Adam moments per rank.
TEST(MemoryPlan, ModelStateIsTheClosedFormForEveryWorldSize) {
  for (const char *name : {"gpt2-tiny", "llama-tiny"}) {
    for (int64_t n = 1; n <= 1024; ++n) {
      Planned p = plan(name, options(n));
      ASSERT_TRUE(p.module);
      int64_t expected = 0;
      for (const auto &u : p.figures.units)
        expected += (u.params + n - 1) / n * 4;
      ASSERT_EQ(p.figures.paramsBytes, expected) << name << " at world size " << n;
      ASSERT_EQ(p.figures.gradsBytes, expected) << name << " at world size " << n;
      ASSERT_EQ(p.figures.optimizerBytes, 2 * expected) << name << " at world size " << n;
    }
  }
}

TEST(MemoryPlan, PeakFallsAsTheWorldGrowsUnderFullShard) {
  int64_t previous = INT64_MAX;
  for (int64_t n = 1; n <= 1024; n *= 2) {
    Planned p = plan("Llama-2-7b", options(n));
    ASSERT_TRUE(p.module);
    EXPECT_LT(p.figures.peakBytes, previous) << "at world size " << n;
    previous = p.figures.peakBytes;
  }
}

TEST(MemoryPlan, FullShardBelowShardGradOpBelowNoShardAtEightRanks) {
  Planned full = plan("Llama-2-7b", options(8, "full-shard"));
  Planned zero2 = plan("Llama-2-7b", options(8, "shard-grad-op"));
  Planned ddp = plan("Llama-2-7b", options(8, "no-shard"));
  ASSERT_TRUE(full.module && zero2.module && ddp.module);
  EXPECT_LT(full.figures.peakBytes, zero2.figures.peakBytes);
  EXPECT_LT(zero2.figures.peakBytes, ddp.figures.peakBytes);
  // DDP keeps everything: 16 bytes of model state per parameter.
  EXPECT_EQ(ddp.figures.paramsBytes + ddp.figures.gradsBytes + ddp.figures.optimizerBytes,
            16 * 6738415616LL);
}

TEST(MemoryPlan, HybridShardsWithinTheGroup) {
  PlanOptions o = options(16, "hybrid-shard");
  o.shardSize = 4;
  Planned hybrid = plan("llama-tiny", o);
  Planned full4 = plan("llama-tiny", options(4));
  ASSERT_TRUE(hybrid.module && full4.module);
  // A rank of a group of 4 holds what a rank of a 4-way full-shard holds.
  EXPECT_EQ(hybrid.figures.paramsBytes, full4.figures.paramsBytes);
  EXPECT_GT(hybrid.figures.allReduceBytes, 0);
}

TEST(MemoryPlan, PrefetchCostsUnshardedMemory) {
  PlanOptions none = options(8);
  none.forwardPrefetch = 0;
  none.backwardPrefetch = "none";
  PlanOptions deep = options(8);
  deep.forwardPrefetch = 2;
  deep.maxInflightGathers = 3;
  Planned a = plan("Llama-2-7b", none), b = plan("Llama-2-7b", deep);
  ASSERT_TRUE(a.module && b.module);
  EXPECT_LT(a.figures.unshardedBytes + a.figures.activationsBytes,
            b.figures.unshardedBytes + b.figures.activationsBytes);
}

// --grad-sync last: each unit's f32 sum of its padded size is persistent
// gradient memory; the unsharded gradient buffers it replaces in every's
// plan die no later than there (at the accumulate, not after the
// reduction's wait), and the staging of a reduction reads f32 either way,
// so at every point of the step last's live bytes are at most every's plus
// the sums: so is its live peak.
TEST(MemoryPlan, GradSyncLastAddsTheSumsAndNothingElse) {
  for (const char *name : {"gpt2-tiny", "llama-tiny"})
    for (const char *strategy : {"full-shard", "shard-grad-op", "no-shard", "hybrid-shard"})
      for (int64_t n : {1, 2, 4, 8}) {
        PlanOptions o = options(n, strategy);
        if (std::string(strategy) == "hybrid-shard") {
          if (n < 4)
            continue;
          o.shardSize = 2;
        }
        for (const char *compute : {"f32", "bf16"}) {
          o.paramDtype = compute;
          Planned every = plan(name, o);
          o.gradSync = "last";
          Planned last = plan(name, o);
          o.gradSync = "every";
          ASSERT_TRUE(every.module && last.module);
          int64_t sums = 0;
          for (const auto &u : last.figures.units)
            sums += u.paddedNumel * 4;
          std::string what = std::string(name) + " " + strategy + " at " + std::to_string(n) +
                             " ranks, " + compute;
          EXPECT_EQ(last.figures.gradsBytes, every.figures.gradsBytes + sums) << what;
          EXPECT_EQ(last.figures.paramsBytes, every.figures.paramsBytes) << what;
          EXPECT_EQ(last.figures.optimizerBytes, every.figures.optimizerBytes) << what;
          EXPECT_LE(last.figures.livePeakBytes, every.figures.livePeakBytes + sums) << what;
          EXPECT_GT(last.figures.livePeakBytes, every.figures.livePeakBytes) << what;
          // What is reduced is the same per step.
          EXPECT_EQ(last.figures.reduceScatterBytes, every.figures.reduceScatterBytes) << what;
          EXPECT_EQ(last.figures.allReduceBytes, every.figures.allReduceBytes) << what;
        }
      }
}

// --reshard-after-backward false: every sharded unit's gathered buffer is
// alive for the whole step, so at the peak the unsharded bytes hold all of
// them; the shards are unchanged.
TEST(MemoryPlan, KeptGatheredParametersLiveAllStep) {
  for (const char *name : {"gpt2-tiny", "llama-tiny"})
    for (const char *strategy : {"full-shard", "shard-grad-op"})
      for (const char *param : {"f32", "bf16"}) {
        PlanOptions o = options(4, strategy);
        o.paramDtype = param;
        Planned resharded = plan(name, o);
        o.reshardAfterBackward = false;
        Planned kept = plan(name, o);
        ASSERT_TRUE(resharded.module && kept.module);
        int64_t gathered = 0;
        for (const auto &u : kept.figures.units)
          gathered += u.paddedNumel * (std::string(param) == "bf16" ? 2 : 4);
        std::string what = std::string(name) + " " + strategy + " " + param;
        EXPECT_GE(kept.figures.unshardedBytes, gathered) << what;
        EXPECT_EQ(kept.figures.paramsBytes, resharded.figures.paramsBytes) << what;
        EXPECT_EQ(kept.figures.gradsBytes, resharded.figures.gradsBytes) << what;
        EXPECT_GE(kept.figures.livePeakBytes, resharded.figures.livePeakBytes) << what;
      }
}

// --reshard-after-forward N: each resharded unit's copy is exactly 1/N of
// its gathered buffer, every unit but the root (kept from forward to
// backward) has one, the model state is full-shard's, and the live peak
// grows by at most the copies (they are the only buffers added).
TEST(MemoryPlan, ReshardedCopiesAreOneNthOfTheGathered) {
  for (const char *name : {"gpt2-tiny", "llama-tiny"})
    for (auto [world, n] : {std::pair<int64_t, int64_t>{4, 2}, {8, 2}, {8, 4}})
      for (const char *param : {"f32", "bf16"}) {
        PlanOptions o = options(world);
        o.paramDtype = param;
        Planned full = plan(name, o);
        o.reshardAfterForward = n;
        Planned hpz = plan(name, o);
        ASSERT_TRUE(full.module && hpz.module);
        std::string what = std::string(name) + " world " + std::to_string(world) + " N " +
                           std::to_string(n) + " " + param;
        auto model = collectBuffers(*hpz.module, 1, 16);
        ASSERT_TRUE(mlir::succeeded(model)) << what;
        int64_t elem = std::string(param) == "bf16" ? 2 : 4, copies = 0;
        std::set<std::string> resharded;
        for (const Buffer &b : model->buffers) {
          if (b.role != BufferRole::Resharded)
            continue;
          plan::UnitOp u = unitOfOp(b.owner, unitsByName(*hpz.module));
          ASSERT_TRUE(u) << what;
          EXPECT_EQ(b.bytes, u.getPaddedNumel() / n * elem) << what << " " << b.name;
          EXPECT_EQ(b.category, BufferCategory::Unsharded) << what;
          EXPECT_LT(b.start, b.end) << what;
          EXPECT_TRUE(resharded.insert(u.getSymName().str()).second) << what;
          copies += b.bytes;
        }
        EXPECT_EQ(resharded.size(), hpz.figures.units.size() - 1) << what;
        EXPECT_FALSE(resharded.count("root")) << what;
        EXPECT_EQ(hpz.figures.paramsBytes, full.figures.paramsBytes) << what;
        EXPECT_EQ(hpz.figures.gradsBytes, full.figures.gradsBytes) << what;
        EXPECT_EQ(hpz.figures.optimizerBytes, full.figures.optimizerBytes) << what;
        EXPECT_GE(hpz.figures.livePeakBytes, full.figures.livePeakBytes) << what;
        EXPECT_LE(hpz.figures.livePeakBytes, full.figures.livePeakBytes + copies) << what;
        EXPECT_EQ(hpz.figures.allGatherBytes, full.figures.allGatherBytes) << what;
        EXPECT_GT(hpz.figures.allGatherReshardBytes, 0) << what;
      }
}

// --offload optimizer: the moments leave the arena for the host pool, which
// also holds each unit's master shard and gradient copy; the device's live
// peak falls by exactly the moments, the arena by them aligned (the
// persistent buffers are laid out first, the rest as before), and the host
// pool is the four shard buffers of every unit, one after another.
TEST(MemoryPlan, OffloadMovesTheOptimizerStateToTheHostPool) {
  for (const char *name : {"gpt2-tiny", "llama-tiny"})
    for (int64_t world : {1, 2, 3, 4, 8})
      for (const char *param : {"f32", "bf16"}) {
        PlanOptions o = options(world);
        o.paramDtype = param;
        Planned none = plan(name, o);
        o.offload = "optimizer";
        Planned off = plan(name, o);
        ASSERT_TRUE(none.module && off.module);
        std::string what = std::string(name) + " world " + std::to_string(world) + " " + param;
        int64_t moments = 0, alignedMoments = 0, host = 0, end = 0;
        for (const auto &u : none.figures.units) {
          int64_t bytes = u.shardNumel * 4;
          moments += 2 * bytes;
          alignedMoments += 2 * alignUp(bytes);
          end = host + 3 * alignUp(bytes) + bytes; // the unit's last buffer's end
          host += 4 * alignUp(bytes);
        }
        EXPECT_EQ(none.figures.optimizerBytes, moments) << what;
        EXPECT_EQ(off.figures.optimizerBytes, 0) << what;
        EXPECT_EQ(off.figures.paramsBytes, none.figures.paramsBytes) << what;
        EXPECT_EQ(off.figures.gradsBytes, none.figures.gradsBytes) << what;
        EXPECT_EQ(none.figures.livePeakBytes - off.figures.livePeakBytes, moments) << what;
        EXPECT_EQ(none.figures.peakBytes - off.figures.peakBytes, alignedMoments) << what;
        EXPECT_EQ(off.figures.hostBytes, end) << what;
        EXPECT_EQ(off.figures.hostMomentsBytes, moments) << what;
        EXPECT_EQ(off.figures.hostMasterBytes, moments / 2) << what;
        EXPECT_EQ(off.figures.hostGradBytes, moments / 2) << what;
        EXPECT_EQ(none.figures.hostBytes, 0) << what;
        auto model = collectBuffers(*off.module, 1, 16);
        ASSERT_TRUE(mlir::succeeded(model)) << what;
        int64_t onHost = 0;
        for (const Buffer &b : model->buffers)
          if (b.host) {
            EXPECT_TRUE(isPersistent(b.role)) << what << " " << b.name;
            ++onHost;
          }
        EXPECT_EQ(onHost, 4 * (int64_t)off.figures.units.size()) << what;
        // --offload all (where there are gathers): no parameter shard on the
        // device either; the host pool as before and, with bf16
        // parameters, each unit's bf16 copy after its four buffers.
        if (world < 2)
          continue;
        o.offload = "all";
        Planned all = plan(name, o);
        ASSERT_TRUE(all.module) << what;
        bool bf16 = std::string(param) == "bf16";
        int64_t shards = 0, allHost = 0, allEnd = 0;
        for (const auto &u : none.figures.units) {
          int64_t bytes = u.shardNumel * 4;
          shards += alignUp(bytes);
          allEnd = allHost + 3 * alignUp(bytes) + (bf16 ? alignUp(bytes) + bytes / 2 : bytes);
          allHost += 4 * alignUp(bytes) + (bf16 ? alignUp(bytes / 2) : 0);
        }
        EXPECT_EQ(all.figures.paramsBytes, 0) << what;
        EXPECT_EQ(all.figures.optimizerBytes, 0) << what;
        EXPECT_EQ(off.figures.livePeakBytes - all.figures.livePeakBytes, none.figures.paramsBytes)
            << what;
        EXPECT_EQ(off.figures.peakBytes - all.figures.peakBytes, shards) << what;
        EXPECT_EQ(all.figures.hostBytes, allEnd) << what;
        EXPECT_EQ(all.figures.hostGatherBytes, bf16 ? moments / 4 : 0) << what;
      }
}

TEST(MemoryPlan, SizeParsing) {
  EXPECT_EQ(parseSize("80GiB"), 80LL << 30);
  EXPECT_EQ(parseSize("1.5 MiB"), 1572864);
  EXPECT_EQ(parseSize("4096"), 4096);
  EXPECT_EQ(parseSize("2GB"), 2000000000LL);
  EXPECT_FALSE(parseSize("lots"));
  EXPECT_FALSE(parseSize("12 parsecs"));
}

// --wrap auto's settings: what the user set stays as set; the rest is searched.
std::set<std::string> strategiesOf(const std::vector<SearchSetting> &settings) {
  std::set<std::string> out;
  for (const SearchSetting &s : settings)
    out.insert(s.options.strategy + ":" + std::to_string(s.options.resolvedShardSize()));
  return out;
}

Cluster eightPerNode() {
  Cluster c;
  c.ranksPerNode = 8;
  return c;
}

TEST(Search, NothingFixedSearchesEveryStrategyAndPrefetch) {
  PlanOptions base = options(64);
  std::vector<SearchSetting> settings =
      searchSettings(base, SearchFixed{}, eightPerNode(), 32, 1000);
  EXPECT_EQ(strategiesOf(settings), (std::set<std::string>{"full-shard:64", "shard-grad-op:64",
                                                           "no-shard:1", "hybrid-shard:8"}));
  std::set<int64_t> forward;
  std::set<std::string> backward, wraps;
  for (const SearchSetting &s : settings) {
    forward.insert(s.options.forwardPrefetch);
    backward.insert(s.options.backwardPrefetch);
    wraps.insert(s.options.wrap);
    EXPECT_EQ(s.options.activationCheckpointing, "none");
    EXPECT_TRUE(s.mayCheckpoint);
  }
  EXPECT_EQ(forward, (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(backward, (std::set<std::string>{"pre", "post", "none"}));
  EXPECT_EQ(wraps, (std::set<std::string>{"block", "none", "size:2000", "size:4000"}));
}

TEST(Search, GradSyncIsSearchedOnlyWhenNotGiven) {
  PlanOptions base = options(64);
  SearchFixed fixed;
  fixed.gradSync = false; // --grad-accum above 1, --grad-sync not given
  std::set<std::string> syncs;
  size_t searched = 0;
  for (const SearchSetting &s : searchSettings(base, fixed, eightPerNode(), 32, 1000)) {
    syncs.insert(s.options.gradSync);
    ++searched;
  }
  EXPECT_EQ(syncs, (std::set<std::string>{"every", "last"}));
  fixed.gradSync = true; // given, or nothing to accumulate
  base.gradSync = "last";
  std::vector<SearchSetting> kept = searchSettings(base, fixed, eightPerNode(), 32, 1000);
  EXPECT_EQ(2 * kept.size(), searched);
  for (const SearchSetting &s : kept)
    EXPECT_EQ(s.options.gradSync, "last");
}

TEST(Search, KeptGatheredParametersAreSearchedWhereTheyDiffer) {
  PlanOptions base = options(64);
  SearchFixed fixed;
  fixed.reshardAfterBackward = false;
  std::set<std::string> kept;
  for (const SearchSetting &s : searchSettings(base, fixed, eightPerNode(), 32, 1000))
    if (!s.options.reshardAfterBackward)
      kept.insert(s.options.strategy);
  // full-shard kept is shard-grad-op kept; no-shard gathers nothing.
  EXPECT_EQ(kept, (std::set<std::string>{"shard-grad-op", "hybrid-shard"}));
  fixed.reshardAfterBackward = true;
  for (const SearchSetting &s : searchSettings(base, fixed, eightPerNode(), 32, 1000))
    EXPECT_TRUE(s.options.reshardAfterBackward);
}

// Resharding after forward to a node's ranks (hpZ) pays only where the
// shard group spans nodes: full-shard over 64 ranks at 8 a node, not
// hybrid-shard within a node, not the strategies that do not reshard.
TEST(Search, ReshardAfterForwardIsSearchedWhereGroupsSpanNodes) {
  PlanOptions base = options(64);
  std::set<std::string> hpz;
  size_t searched = 0;
  for (const SearchSetting &s : searchSettings(base, SearchFixed{}, eightPerNode(), 32, 1000)) {
    ++searched;
    if (s.options.reshardAfterForward) {
      EXPECT_EQ(s.options.reshardAfterForward, 8);
      EXPECT_TRUE(s.options.reshardAfterBackward);
      hpz.insert(s.options.strategy + ":" + std::to_string(s.options.resolvedShardSize()));
    }
  }
  EXPECT_EQ(hpz, (std::set<std::string>{"full-shard:64"}));
  SearchFixed fixed;
  fixed.reshardAfterForward = true; // given: --reshard-after-forward true
  std::vector<SearchSetting> given = searchSettings(base, fixed, eightPerNode(), 32, 1000);
  for (const SearchSetting &s : given)
    EXPECT_EQ(s.options.reshardAfterForward, 0);
  // One setting more for each full-shard one.
  size_t fullShard = 0;
  for (const SearchSetting &s : given)
    fullShard += s.options.strategy == "full-shard";
  EXPECT_GT(fullShard, 0u);
  EXPECT_EQ(searched, given.size() + fullShard);
}

TEST(Search, GivenSettingsStayAsGiven) {
  PlanOptions base = options(64, "full-shard");
  base.forwardPrefetch = 2;
  base.backwardPrefetch = "post";
  base.activationCheckpointing = "blocks";
  base.paramDtype = "bf16";
  SearchFixed fixed;
  fixed.strategy = fixed.forwardPrefetch = fixed.backwardPrefetch = true;
  fixed.activationCheckpointing = true;
  std::vector<SearchSetting> settings = searchSettings(base, fixed, eightPerNode(), 32, 1000);
  ASSERT_FALSE(settings.empty());
  EXPECT_EQ(strategiesOf(settings), (std::set<std::string>{"full-shard:64"}));
  for (const SearchSetting &s : settings) {
    EXPECT_EQ(s.options.forwardPrefetch, 2);
    EXPECT_EQ(s.options.backwardPrefetch, "post");
    EXPECT_EQ(s.options.activationCheckpointing, "blocks");
    EXPECT_EQ(s.options.checkpointedBlocks, -1); // all of them, as the flag says
    EXPECT_FALSE(s.mayCheckpoint);
    EXPECT_EQ(s.options.paramDtype, "bf16"); // dtypes are never searched
  }
}

TEST(Search, AGivenShardSizeLimitsTheStrategies) {
  PlanOptions base = options(64);
  SearchFixed fixed;
  fixed.shardSize = true;
  base.shardSize = 16;
  EXPECT_EQ(strategiesOf(searchSettings(base, fixed, eightPerNode(), 32, 1000)),
            (std::set<std::string>{"hybrid-shard:16"}));
  base.shardSize = 64;
  EXPECT_EQ(strategiesOf(searchSettings(base, fixed, eightPerNode(), 32, 1000)),
            (std::set<std::string>{"full-shard:64", "shard-grad-op:64"}));
  base.shardSize = 1;
  EXPECT_EQ(strategiesOf(searchSettings(base, fixed, eightPerNode(), 32, 1000)),
            (std::set<std::string>{"no-shard:1"}));
}

TEST(Search, HybridShardGivenWithoutAGroupSearchesGroups) {
  PlanOptions base = options(64, "hybrid-shard");
  SearchFixed fixed;
  fixed.strategy = true;
  // The world spans nodes: a node's ranks.
  EXPECT_EQ(strategiesOf(searchSettings(base, fixed, eightPerNode(), 32, 1000)),
            (std::set<std::string>{"hybrid-shard:8"}));
  // Within one node: the power-of-two groups.
  base.worldSize = 8;
  EXPECT_EQ(strategiesOf(searchSettings(base, fixed, eightPerNode(), 32, 1000)),
            (std::set<std::string>{"hybrid-shard:2", "hybrid-shard:4"}));
}

// The search's plans are distinct, keep what was given, and the first fits.
TEST(Search, PlansAreDistinctAndKeepTheGivenStrategy) {
  mlir::MLIRContext context;
  loadPlannerDialects(context);
  ImportError error;
  auto module = loadModel(model("gpt2-tiny"), &context, {}, error);
  ASSERT_TRUE(module) << error.str();
  PlanOptions base = options(4, "shard-grad-op");
  base.microBatch = 4;
  base.seqLen = 64;
  SearchFixed fixed;
  fixed.strategy = true;
  std::vector<Candidate> found =
      searchPlans(*module, base, fixed, defaultCluster(), 1, std::nullopt, 2, 49984);
  ASSERT_FALSE(found.empty());
  for (size_t i = 0; i < found.size(); ++i) {
    EXPECT_EQ(found[i].options.strategy, "shard-grad-op");
    EXPECT_TRUE(found[i].fits);
    if (i > 0)
      EXPECT_GE(found[i - 1].figures.predicted->tokensPerS, found[i].figures.predicted->tokensPerS);
    for (size_t j = 0; j < i; ++j)
      EXPECT_FALSE(found[i].options.wrap == found[j].options.wrap &&
                   found[i].figures.peakBytes == found[j].figures.peakBytes &&
                   found[i].figures.predicted->stepTimeS == found[j].figures.predicted->stepTimeS)
          << "plans " << j << " and " << i << " are the same plan";
  }
}

// --wrap auto and --offload: llama-tiny at world 4 (2 x 16 tokens) under a
// budget that no plan keeping the optimizer on the device meets, even with
// every block checkpointed, but the offloaded block-wrapped plan does: the
// search offers offloaded plans only, the first of which fits. Offload
// adds time only, so where memory does not bind it is never planned; and
// kept as given (none), nothing fits.
TEST(Search, OffloadIsFoundWhereOnlyItFits) {
  mlir::MLIRContext context;
  loadPlannerDialects(context);
  ImportError error;
  auto module = loadModel(model("llama-tiny"), &context, {}, error);
  ASSERT_TRUE(module) << error.str();
  PlanOptions base = options(4);
  base.microBatch = 2;
  base.seqLen = 16;
  const int64_t budget = 1500000;
  std::vector<Candidate> found =
      searchPlans(*module, base, SearchFixed{}, defaultCluster(), 1, budget, 2, 46208);
  ASSERT_FALSE(found.empty());
  EXPECT_TRUE(found.front().fits);
  EXPECT_NE(found.front().options.offload, "none");
  for (const Candidate &c : found) {
    if (c.fits) {
      EXPECT_NE(c.options.offload, "none");
      EXPECT_LE(c.figures.peakBytes, budget);
      EXPECT_GT(c.figures.hostBytes, 0);
    }
  }
  std::vector<Candidate> unbound =
      searchPlans(*module, base, SearchFixed{}, defaultCluster(), 1, std::nullopt, 2, 46208);
  for (const Candidate &c : unbound)
    EXPECT_EQ(c.options.offload, "none");
  SearchFixed kept;
  kept.offload = true;
  for (const Candidate &c :
       searchPlans(*module, base, kept, defaultCluster(), 1, budget, 2, 46208)) {
    EXPECT_FALSE(c.fits) << c.options.strategy << " " << c.options.wrap;
    EXPECT_EQ(c.options.offload, "none");
  }
}

// --micro-batch max: the largest micro-batch that fits, as planning each shows.
TEST(Search, LargestMicroBatchWithAndWithoutAHint) {
  mlir::MLIRContext context;
  loadPlannerDialects(context);
  ImportError error;
  auto module = loadModel(model("gpt2-tiny"), &context, {}, error);
  ASSERT_TRUE(module) << error.str();
  PlanOptions base = options(4);
  base.seqLen = 128;
  for (int64_t hint : {0, 2, 6, 7, 8, 9, 100}) {
    std::string why;
    mlir::FailureOr<MicroBatchSearch> found = searchMicroBatch(*module, base, 12 << 20, why, hint);
    ASSERT_TRUE(mlir::succeeded(found)) << why;
    EXPECT_EQ(found->largest, 7) << "hint " << hint;
    EXPECT_EQ(found->next, 8) << "hint " << hint;
  }
}

} // namespace
