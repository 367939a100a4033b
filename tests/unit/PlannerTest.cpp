//===- PlannerTest.cpp - the memory plan against closed forms -------------===//
#include "planner/Import/Import.h"
#include "planner/Pipeline.h"
#include "planner/PlanUtils.h"

#include "mlir/IR/MLIRContext.h"
#include <gtest/gtest.h>

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
  p.context->loadDialect<nn::NNDialect, plan::FSDPDialect>();
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

TEST(MemoryPlan, SizeParsing) {
  EXPECT_EQ(parseSize("80GiB"), 80LL << 30);
  EXPECT_EQ(parseSize("1.5 MiB"), 1572864);
  EXPECT_EQ(parseSize("4096"), 4096);
  EXPECT_EQ(parseSize("2GB"), 2000000000LL);
  EXPECT_FALSE(parseSize("lots"));
  EXPECT_FALSE(parseSize("12 parsecs"));
}

} // namespace
