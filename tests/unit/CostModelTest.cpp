//===- CostModelTest.cpp - collectives, prediction, published setups -------===//
#include "planner/CostModel.h"
#include "planner/Buffers.h"
#include "planner/Import/Import.h"
#include "planner/KernelScratch.h"
#include "planner/Pipeline.h"
#include "planner/PlanUtils.h"

#include "mlir/IR/MLIRContext.h"
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <unistd.h>

using namespace fsdp;

namespace {

std::string path(const std::string &rel) { return std::string(FSDP_SOURCE_DIR) + "/" + rel; }

// nccl-tests: time = size / algbw, busbw = algbw (n-1)/n for all-gather and
// reduce-scatter, 2 (n-1)/n for all-reduce; here with no latency the bus
// bandwidth is the link's.
TEST(CostModel, CollectivesFollowNcclTestsBusBandwidth) {
  Link link{100e9, 0, 1.0};
  for (int64_t n : {2, 4, 8, 64, 1024})
    for (double bytes : {1e6, 256e6, 4e9}) {
      double busbw = link.bandwidth;
      double ag = bytes / (busbw * n / (n - 1.0));
      double ar = bytes / (busbw * n / (2.0 * (n - 1)));
      EXPECT_NEAR(collectiveSeconds(CollectiveKind::AllGather, bytes, n, link), ag, ag * 1e-12);
      EXPECT_NEAR(collectiveSeconds(CollectiveKind::ReduceScatter, bytes, n, link), ag, ag * 1e-12);
      EXPECT_NEAR(collectiveSeconds(CollectiveKind::AllReduce, bytes, n, link), ar, ar * 1e-12);
    }
  EXPECT_EQ(collectiveSeconds(CollectiveKind::AllGather, 1e9, 1, link), 0);
}

TEST(CostModel, LatencyTermsAndTreeAllReduce) {
  Link link{50e9, 10e-6, 0.8};
  // A ring all-gather takes n-1 steps of latency.
  EXPECT_NEAR(collectiveSeconds(CollectiveKind::AllGather, 0, 8, link), 7 * 10e-6, 1e-12);
  // A small all-reduce over many ranks takes the tree's log2 n depth.
  EXPECT_NEAR(collectiveSeconds(CollectiveKind::AllReduce, 0, 1024, link), 2 * 10 * 10e-6, 1e-12);
  // Efficiency scales the bandwidth.
  EXPECT_NEAR(collectiveSeconds(CollectiveKind::ReduceScatter, 1e9, 2, {50e9, 0, 0.8}),
              1e9 * 0.5 / (50e9 * 0.8), 1e-12);
}

struct Planned {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  PlanFigures figures;
};

Planned planFile(const std::string &file, PlanOptions o, const std::string &hardware);

Planned plan(const std::string &model, PlanOptions o, const std::string &hardware) {
  return planFile(path("models/" + model + "/config.json"), o, hardware);
}

Planned planFile(const std::string &file, PlanOptions o, const std::string &hardware) {
  Planned p;
  p.context = std::make_unique<mlir::MLIRContext>();
  loadPlannerDialects(*p.context);
  ImportError error;
  ImportOptions io;
  io.noDropout = true;
  p.module = loadModel(file, p.context.get(), io, error);
  EXPECT_TRUE(p.module) << error.str();
  EXPECT_TRUE(mlir::succeeded(runPlanPipeline(*p.module, o)));
  Cluster c;
  EXPECT_EQ(loadCluster(path("models/hardware/" + hardware + ".json"), c), "");
  p.figures = planFigures(*p.module, c, 1);
  return p;
}

TEST(CostModel, HardwareFilesLoad) {
  for (const char *h : {"A100-80GB-SXM", "H100-SXM", "H200-SXM", "cpu-local"}) {
    Cluster c;
    EXPECT_EQ(loadCluster(path("models/hardware/") + h + ".json", c), "") << h;
    EXPECT_GT(c.bf16Flops, 0) << h;
  }
  Cluster c;
  EXPECT_NE(loadCluster(path("models/gpt2/config.json"), c), "");
}

// Found by fuzzing (tests/fuzz/planner/cluster): a number past int64, a
// string where a rate belongs and a zero efficiency reached nlohmann's
// conversions or a division; each is now refused at its line and column.
// Across nodes NCCL runs a ring over every NIC of a node (a channel each):
// a group crossing nodes alone moves at the NICs' sum, the groups crossing
// at once (hybrid-shard's replica groups) share them, and no ring is faster
// than the node's own link.
TEST(CostModel, CrossNodeRingsUseEveryNic) {
  Cluster c;
  c.ranksPerNode = 8;
  c.intraNode = {450e9, 4e-6, 0.8};
  c.interNode = {50e9, 1e-5, 0.8};
  c.interNode.nics = 8;
  auto rate = [](const Link &l) { return l.bandwidth * l.efficiency; };
  EXPECT_DOUBLE_EQ(rate(groupLink(c, 8, 8, 1)), 360e9);    // within a node
  EXPECT_DOUBLE_EQ(rate(groupLink(c, 16, 8, 1)), 320e9);   // 8 NICs x 50 GB/s x 0.8
  EXPECT_DOUBLE_EQ(groupLink(c, 16, 8, 1).latencyS, 1e-5); // the NICs' latency
  EXPECT_DOUBLE_EQ(rate(groupLink(c, 4, 1, 8)), 40e9);     // 8 replica groups: a NIC each
  EXPECT_DOUBLE_EQ(rate(groupLink(c, 4, 1, 16)), 20e9);    // more groups than NICs
  c.interNode.nics = 16;
  EXPECT_DOUBLE_EQ(rate(groupLink(c, 16, 8, 1)), 360e9); // capped by NVLink
  // The hardware files say how many NICs a node has.
  Cluster h;
  ASSERT_EQ(loadCluster(FSDP_SOURCE_DIR "/models/hardware/H100-SXM.json", h), "");
  EXPECT_EQ(h.interNode.nics, 8);
}

TEST(CostModel, BadClusterFilesNameTheValue) {
  std::string text;
  {
    std::ifstream in(path("models/hardware/cpu-local.json"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto load = [&](const std::string &from, const std::string &to) {
    std::string t = text;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    // Per process: other checkouts run this test in the same TempDir.
    std::string file = ::testing::TempDir() + std::to_string(::getpid()) + "-cluster-bad.json";
    std::ofstream(file) << t;
    Cluster c;
    std::string err = loadCluster(file, c);
    std::remove(file.c_str());
    return err.empty() ? err : err.substr(err.find("cluster-bad.json"));
  };
  EXPECT_EQ(load("\"memory_bytes\": 25769803776", "\"memory_bytes\": 1e30"),
            "cluster-bad.json:8:19: memory_bytes must be an integer, but is 1e+30 (number)");
  // What a process needs beyond the plan: 0 or its parts, each sourced.
  EXPECT_EQ(load("\"reserved_bytes\": 0", "\"reserved_bytes\": -5"),
            "cluster-bad.json:8:50: reserved_bytes must be 0 or an object of parts, each "
            "{\"bytes\": N, \"source\": \"...\"}, but is -5 (number)");
  EXPECT_EQ(load("\"reserved_bytes\": 0", "\"reserved_bytes\": {\"context\": {\"bytes\": 1}}"),
            "cluster-bad.json:8:62: missing key 'reserved_bytes.context.source'");
  EXPECT_EQ(load("\"f32_flops\": 100e9", "\"f32_flops\": \"fast\""),
            "cluster-bad.json:10:18: compute.f32_flops must be a number, but is \"fast\" (string)");
  EXPECT_EQ(load("\"matmul_efficiency\": 0.8", "\"matmul_efficiency\": 0"),
            "cluster-bad.json:12:26: compute.matmul_efficiency must lie in (0, 1], but is 0.0");
  EXPECT_EQ(load("\"intra_node\": {\"bandwidth\": 5e9, \"latency_s\": 5e-6",
                 "\"intra_node\": {\"bandwidth\": 5e9, \"latency_s\": -1"),
            "cluster-bad.json:17:49: intra_node.latency_s must not be negative, but is -1.0");
  EXPECT_EQ(load("\"device\": \"cpu\"", "\"device\": \"gpu\""),
            "cluster-bad.json:4:13: device must be \"cpu\" or \"cuda\", but is \"gpu\"");
  EXPECT_EQ(load("\"version\": 1", "\"version\": 2"),
            "cluster-bad.json:3:14: not an fsdp-cluster file of version 1");
  EXPECT_EQ(load("\"op_overhead_s\": 2e-6",
                 "\"op_overhead_s\": 2e-6, \"op_efficiency\": {\"attention\": 0.5}"),
            "cluster-bad.json:15:59: unknown op kind 'attention' in compute.op_efficiency "
            "(attention_forward, attention_backward, norm, elementwise, loss)");
  EXPECT_EQ(
      load("\"op_overhead_s\": 2e-6", "\"op_overhead_s\": 2e-6, \"op_efficiency\": {\"norm\": 2}"),
      "cluster-bad.json:15:54: compute.op_efficiency.norm must lie in (0, 1], but is 2.0");
  EXPECT_EQ(load("\"op_overhead_s\": 2e-6", "\"op_overhead_s\": 2e-6, \"comm_interference\": 1"),
            "cluster-bad.json:15:49: compute.comm_interference must lie in [0, 1), but is 1.0");
  EXPECT_EQ(load("\"op_overhead_s\": 2e-6", "\"op_overhead_s\": 2e-6, \"gemm_rates\": [[1, 2, 3]]"),
            "cluster-bad.json:15:43: compute.gemm_rates[0] must be [m, k, n, FLOP/s], but is "
            "[1,2,3] (array)");
}

// Attention is priced by 64-row query tiles; past 1024 tiles (65536 tokens)
// by 1024 runs of tiles, so that a context of 2^30 tokens plans in well
// under a second (it walked 2e9 tiles an op before). The price stays
// continuous at the switch and quadratic in the sequence.
TEST(CostModel, LongSequencesArePricedQuickly) {
  std::string text;
  {
    std::ifstream in(path("models/llama-tiny/config.json"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  size_t at = text.find("\"max_position_embeddings\": 128");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 30, "\"max_position_embeddings\": 1073741824");
  mlir::MLIRContext ctx;
  loadPlannerDialects(ctx);
  Cluster c;
  ASSERT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), c), "");
  auto compute = [&](int64_t seqLen) {
    ImportError error;
    ImportOptions io;
    auto module = importHFConfig(text, "config.json", &ctx, io, error);
    EXPECT_TRUE(module) << error.str();
    PlanOptions o;
    o.worldSize = 2;
    o.seqLen = seqLen;
    EXPECT_TRUE(mlir::succeeded(runPlanPipeline(*module, o)));
    return planFigures(*module, c, 1).predicted->computeS;
  };
  double exact = compute(65536), sampled = compute(65536 + 64);
  EXPECT_GT(sampled, exact);
  EXPECT_LT(sampled, exact * 1.01);
  double quarter = compute(int64_t(1) << 28), full = compute(int64_t(1) << 30);
  EXPECT_GT(full / quarter, 15.0); // attention, quadratic, dominates
  EXPECT_LT(full / quarter, 16.1);
}

// Bidirectional attention (nn.attention) attends all S x S query-key pairs,
// causal attention S (S + 1) / 2: the same model with its attention made
// bidirectional prices each attention op (forward and backward) about twice
// as long (the kernels' 64-row query tiles: 16 x 1024 keys against
// 64 x (1 + ... + 16) at S = 1024, 1.88x), and nothing else differently.
TEST(CostModel, BidirectionalAttentionAttendsEveryPair) {
  auto attentionSeconds = [](bool bidirectional, double &other) {
    mlir::MLIRContext ctx;
    loadPlannerDialects(ctx);
    ImportError error;
    ImportOptions io;
    io.noDropout = true;
    auto module = loadModel(path("models/gpt2/config.json"), &ctx, io, error);
    EXPECT_TRUE(module) << error.str();
    int swapped = 0;
    if (bidirectional)
      module->walk([&](nn::CausalAttentionOp a) {
        mlir::OpBuilder b(a);
        auto n = b.create<nn::AttentionOp>(a.getLoc(), a.getResult().getType(), a.getQuery(),
                                           a.getKey(), a.getValue(), a.getNumHeadsAttr(),
                                           a.getNumKvHeadsAttr(), a.getModuleAttr());
        a.replaceAllUsesWith(n.getResult());
        a.erase();
        ++swapped;
      });
    EXPECT_EQ(swapped, bidirectional ? 12 : 0);
    PlanOptions o;
    o.worldSize = 1;
    o.microBatch = 1;
    o.seqLen = 1024;
    EXPECT_TRUE(mlir::succeeded(runPlanPipeline(*module, o)));
    Cluster c;
    EXPECT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), c), "");
    Prediction pr = predict(*module, c, 1);
    double attention = 0;
    other = 0;
    int ops = 0;
    for (const TraceEvent &e : pr.events) {
      if (e.stream != 0)
        continue;
      bool isAttention = e.name == (bidirectional ? "attention" : "causal_attention") ||
                         e.name == (bidirectional ? "attention_grad" : "causal_attention_grad");
      EXPECT_EQ(e.name.find(bidirectional ? "causal" : "nn.attention"), std::string::npos);
      (isAttention ? attention : other) += e.duration;
      ops += isAttention;
    }
    EXPECT_EQ(ops, 24); // twelve blocks, forward and backward
    return attention;
  };
  double causalOther = 0, bidirOther = 0;
  double causal = attentionSeconds(false, causalOther), bidir = attentionSeconds(true, bidirOther);
  EXPECT_GT(bidir / causal, 1.8);
  EXPECT_LT(bidir / causal, 2.05);
  EXPECT_NEAR(bidirOther, causalOther, 1e-9 * causalOther);
}

// bf16 gathers, one sequence a rank.
PlanOptions bf16Options(int64_t world, int64_t seqLen) {
  PlanOptions o;
  o.worldSize = world;
  o.microBatch = 1;
  o.seqLen = seqLen;
  o.paramDtype = "bf16";
  return o;
}

TEST(CostModel, PredictionIsConsistent) {
  PlanOptions o = bf16Options(8, 2048);
  Planned p = plan("Meta-Llama-3-8B", o, "H100-SXM");
  const Prediction &pr = *p.figures.predicted;
  EXPECT_GT(pr.stepTimeS, 0);
  EXPECT_LE(pr.exposedCommS, pr.commS + 1e-12);
  EXPECT_GE(pr.microStepTimeS + 1e-12, pr.computeS);
  EXPECT_GT(pr.mfu, 0.05);
  EXPECT_LT(pr.mfu, 0.7); // never above the matmul efficiency
  EXPECT_NEAR(pr.tokensPerS, 8 * 2048 / pr.stepTimeS, 1e-6 * pr.tokensPerS);
  // More ranks over the slow inter-node links cost more exposed communication.
  o.worldSize = 64;
  Planned wide = plan("Meta-Llama-3-8B", o, "H100-SXM");
  EXPECT_GT(wide.figures.predicted->commS, pr.commS);
}

// --grad-sync last: a step is A - 1 micro-steps without their reductions
// and one with them. Collectives are priced by their bytes alone, so the
// step's communication is every's less A - 1 micro-steps' reductions,
// exactly; the optimizer is unchanged; the figures stay consistent.
TEST(CostModel, GradSyncLastPricesOneReductionAStep) {
  for (auto [accum, seq] : {std::pair<int64_t, int64_t>{2, 1024}, {4, 1024}, {4, 4096}}) {
    PlanOptions o = bf16Options(64, seq);
    Planned every = plan("Meta-Llama-3-8B", o, "H100-SXM");
    o.gradSync = "last";
    Planned last = plan("Meta-Llama-3-8B", o, "H100-SXM");
    Cluster c;
    ASSERT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), c), "");
    Prediction e = predict(*every.module, c, accum), l = predict(*last.module, c, accum);
    double reductions = 0;
    for (const TraceEvent &ev : e.events)
      if (ev.stream == 1 && (ev.name == "reduce_scatter" || ev.name == "all_reduce") &&
          ev.phase != "optimizer")
        reductions += ev.duration;
    ASSERT_GT(reductions, 0);
    double a = (double)accum;
    // Both sides sum the same non-negative durations (at most one per
    // event, and a few products) in other orders: each rounding is at most
    // one ulp of the total, so they differ by under 4 (events + 8) ulps.
    double ulps = 4 * (double(e.events.size()) + 8) * std::numeric_limits<double>::epsilon();
    EXPECT_NEAR(a * l.commS, a * e.commS - (a - 1) * reductions, ulps * a * e.commS) << accum;
    EXPECT_NEAR(l.optimizerTimeS, e.optimizerTimeS, ulps * e.stepTimeS) << accum;
    EXPECT_NEAR(l.stepTimeS, a * l.microStepTimeS + l.optimizerTimeS, ulps * l.stepTimeS) << accum;
    EXPECT_NEAR(l.tokensPerS, 64.0 * seq * a / l.stepTimeS, ulps * l.tokensPerS) << accum;
    // The trade: at 1024 tokens the reductions across 8 nodes are exposed
    // and skipping them pays; at 4096 compute hides them, and each
    // micro-step's accumulate (its gradients and the f32 sum through
    // memory) costs more than they did.
    if (seq == 1024)
      EXPECT_LT(l.stepTimeS, e.stepTimeS) << accum;
    else
      EXPECT_GT(l.stepTimeS, e.stepTimeS) << accum;
  }
}

// --reshard-after-backward false: the micro-steps after the first gather
// nothing, so the step's communication is the resharding plan's less
// A - 1 micro-steps' gathers, where the plans gather alike (shard-grad-op
// gathers each unit once a micro-step, as kept does once a step).
TEST(CostModel, KeptGatheredParametersPriceOneGatherAStep) {
  for (int64_t accum : {2, 3, 5}) {
    PlanOptions o = bf16Options(64, 1024);
    o.strategy = "shard-grad-op";
    Planned each = plan("Meta-Llama-3-8B", o, "H100-SXM");
    o.reshardAfterBackward = false;
    Planned kept = plan("Meta-Llama-3-8B", o, "H100-SXM");
    Cluster c;
    ASSERT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), c), "");
    Prediction e = predict(*each.module, c, accum), k = predict(*kept.module, c, accum);
    double gathers = 0;
    for (const TraceEvent &ev : e.events)
      if (ev.stream == 1 && ev.name == "all_gather")
        gathers += ev.duration;
    ASSERT_GT(gathers, 0);
    double a = (double)accum;
    // As above: the same durations summed in other orders.
    double ulps = 4 * (double(e.events.size()) + 8) * std::numeric_limits<double>::epsilon();
    EXPECT_NEAR(a * k.commS, a * e.commS - (a - 1) * gathers, ulps * a * e.commS) << accum;
    EXPECT_NEAR(k.stepTimeS, a * k.microStepTimeS + k.optimizerTimeS, ulps * k.stepTimeS) << accum;
    EXPECT_LE(k.stepTimeS, e.stepTimeS) << accum;
  }
}

// --reshard-after-forward 8 on 64 H100 (8 a node): the forward gathers
// are full-shard's over the 64 ranks, and each backward gather is priced as
// an all-gather over the 8 ranks of a node on its link; the communication
// shrinks by what that saves, and the copies cost compute-stream time.
TEST(CostModel, ReshardedBackwardGathersPriceOverTheReshardGroup) {
  PlanOptions o = bf16Options(64, 4096);
  Planned full = plan("Meta-Llama-3-8B", o, "H100-SXM");
  o.reshardAfterForward = 8;
  Planned hpz = plan("Meta-Llama-3-8B", o, "H100-SXM");
  ASSERT_TRUE(full.module && hpz.module);
  Cluster c;
  ASSERT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), c), "");
  ASSERT_EQ(c.ranksPerNode, 8);
  Prediction f = predict(*full.module, c, 1), h = predict(*hpz.module, c, 1);
  auto byName = unitsByName(*hpz.module);
  double expected = 0, expectedFull = 0;
  int64_t overReshard = 0;
  for (mlir::Operation &op : getStep(*hpz.module).getBody().front())
    if (auto g = llvm::dyn_cast<plan::AllGatherOp>(op); g && g.getGroup()) {
      double bytes = unitOfOp(&op, byName).getPaddedNumel() * 2.0;
      expected += collectiveSeconds(CollectiveKind::AllGather, bytes, 8, c.intraNode);
      expectedFull += collectiveSeconds(CollectiveKind::AllGather, bytes, 64,
                                        groupLink(c, 64, c.ranksPerNode, 1));
      ++overReshard;
    }
  ASSERT_GT(overReshard, 0);
  auto backwardGathers = [](const Prediction &p) {
    double s = 0;
    for (const TraceEvent &e : p.events)
      if (e.stream == 1 && e.name == "all_gather" && e.phase == "backward")
        s += e.duration;
    return s;
  };
  // The same durations summed in another order: a few ulps of the sum.
  double ulps = 4 * (double(h.events.size()) + 8) * std::numeric_limits<double>::epsilon();
  EXPECT_NEAR(backwardGathers(h), expected, ulps * expectedFull);
  EXPECT_NEAR(backwardGathers(f), expectedFull, ulps * expectedFull);
  EXPECT_LT(expected, expectedFull);
  EXPECT_NEAR(h.commS, f.commS - (expectedFull - expected), ulps * f.commS);
  EXPECT_GT(hpz.figures.peakBytes, full.figures.peakBytes);
}

// --tp 8 on 64 H100 (Llama-3-8B): with sequence parallelism each region's
// fsdp.tp_all_gather and fsdp.tp_reduce_scatter, and without it each
// fsdp.tp_all_reduce, is that collective of the whole activation over the 8
// ranks of a node, on the compute stream; the FSDP gathers run over the 8
// data-parallel ranks of a tp index, one a node, 8 groups crossing each node
// at once; the step's tokens are the 8 dp ranks'; a block unit holds 1/8 of
// the heads' and columns' parameters.
TEST(CostModel, TensorParallelPricesItsCollectivesWithinTheNode) {
  PlanOptions o = bf16Options(64, 4096);
  Planned oneD = plan("Meta-Llama-3-8B", o, "H100-SXM");
  o.tp = 8;
  Planned twoD = plan("Meta-Llama-3-8B", o, "H100-SXM");
  o.sequenceParallel = false;
  Planned whole = plan("Meta-Llama-3-8B", o, "H100-SXM");
  ASSERT_TRUE(oneD.module && twoD.module && whole.module);
  Cluster c;
  ASSERT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), c), "");
  for (Planned *planned : {&twoD, &whole}) {
    Prediction p = predict(*planned->module, c, 1);
    plan::StepOp step = getStep(*planned->module);
    ASSERT_EQ(step.getTpOr1(), 8);
    ASSERT_EQ(step.getShardSizeOr1(), 8);
    int64_t B = *step.getMicroBatch(), S = *step.getSeqLen();
    double expected = 0;
    int64_t collectives = 0;
    for (mlir::Operation &op : step.getBody().front()) {
      std::optional<CollectiveKind> kind;
      mlir::Value full;
      if (llvm::isa<plan::TpAllReduceOp>(op))
        kind = CollectiveKind::AllReduce, full = op.getResult(0);
      else if (llvm::isa<plan::TpAllGatherOp>(op))
        kind = CollectiveKind::AllGather, full = op.getResult(0);
      else if (llvm::isa<plan::TpReduceScatterOp>(op))
        kind = CollectiveKind::ReduceScatter, full = op.getOperand(0);
      if (!kind)
        continue;
      expected += c.opOverheadS +
                  collectiveSeconds(*kind, tensorBytes(full.getType(), B, S), 8, c.intraNode);
      ++collectives;
    }
    // Two regions a block, forward and backward: an all-reduce each, or a
    // gather and a reduce-scatter.
    EXPECT_EQ(collectives, (planned == &twoD ? 8 : 4) * 32);
    double measured = 0;
    for (const TraceEvent &e : p.events)
      if (e.name == "tp_all_reduce" || e.name == "tp_all_gather" || e.name == "tp_reduce_scatter")
        measured += e.duration;
    double ulps = 4 * (double(p.events.size()) + 8) * std::numeric_limits<double>::epsilon();
    EXPECT_NEAR(measured, expected, ulps * expected);
  }
  Prediction p = predict(*twoD.module, c, 1);
  plan::StepOp step = getStep(*twoD.module);
  int64_t B = *step.getMicroBatch(), S = *step.getSeqLen();
  double ulps = 4 * (double(p.events.size()) + 8) * std::numeric_limits<double>::epsilon();
  // The shard group: one rank a node, 8 groups sharing the node's NICs.
  auto byName = unitsByName(*twoD.module);
  double gathers = 0, expectedGathers = 0;
  for (mlir::Operation &op : step.getBody().front())
    if (llvm::isa<plan::AllGatherOp>(op))
      expectedGathers +=
          collectiveSeconds(CollectiveKind::AllGather, unitOfOp(&op, byName).getPaddedNumel() * 2.0,
                            8, groupLink(c, 8, 1, 8));
  for (const TraceEvent &e : p.events)
    if (e.name == "all_gather")
      gathers += e.duration;
  EXPECT_NEAR(gathers, expectedGathers, ulps * expectedGathers);
  // A tp group shares its micro-batch: the tokens of 8 data-parallel ranks.
  EXPECT_NEAR(p.tokensPerS * p.stepTimeS, double(B) * S * 8, 1e-6 * B * S * 8);
  // A block's parameters: 1/8 of its linears', all of its two norms'.
  int64_t H = 4096, I = 14336, kvDim = 1024;
  int64_t linears = H * H + 2 * kvDim * H + H * H + 3 * H * I;
  for (const PlanFigures::Unit &u : twoD.figures.units)
    if (u.name.rfind("block", 0) == 0)
      EXPECT_EQ(u.params, linears / 8 + 2 * H) << u.name;
  // And the whole: the model FLOPs per step are those of 1D's over 1/8
  // the tokens (the same model, one micro-batch per tp group).
  Prediction q = predict(*oneD.module, c, 1);
  EXPECT_NEAR(p.modelFlopsPerStep * 8, q.modelFlopsPerStep, 1e-9 * q.modelFlopsPerStep);
  // Sequence parallelism keeps 1/8 of the activations between the regions.
  EXPECT_LT(twoD.figures.activationsBytes, whole.figures.activationsBytes);
}

// --offload optimizer on 64 H100: each unit's optimizer_step costs the
// gradient shard's copy to the host and the master shard's back over the
// cluster's host_link, and the shard at the host's AdamW rate, in place of
// AdamW's 28 bytes an element at the device's memory bandwidth; the
// micro-step is unchanged.
TEST(CostModel, OffloadedOptimizerStepPricesTheHostLinkAndAdamW) {
  PlanOptions o = bf16Options(64, 4096);
  Planned none = plan("Meta-Llama-3-8B", o, "H100-SXM");
  o.offload = "optimizer";
  Planned off = plan("Meta-Llama-3-8B", o, "H100-SXM");
  ASSERT_TRUE(none.module && off.module);
  Cluster c;
  ASSERT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), c), "");
  ASSERT_TRUE(c.hasHost());
  EXPECT_DOUBLE_EQ(c.hostLink.bandwidth, 63e9);
  EXPECT_DOUBLE_EQ(c.hostAdamwRate, 1.9e9);
  Prediction n = predict(*none.module, c, 1), f = predict(*off.module, c, 1);
  double expected = 0, device = 0;
  for (plan::UnitOp u : getUnits(*off.module)) {
    double shard = u.getShardNumel() * 4.0;
    expected += c.opOverheadS +
                2 * (c.hostLink.latencyS + shard / (c.hostLink.bandwidth * c.hostLink.efficiency)) +
                shard / 4 / c.hostAdamwRate;
    device += c.opOverheadS + 7 * shard / (c.memoryBandwidth * c.memoryEfficiency);
  }
  auto steps = [](const Prediction &p) {
    double s = 0;
    for (const TraceEvent &e : p.events)
      if (e.name == "optimizer_step")
        s += e.duration;
    return s;
  };
  double ulps = 4 * (double(f.events.size()) + 8) * std::numeric_limits<double>::epsilon();
  EXPECT_NEAR(steps(f), expected, ulps * expected);
  EXPECT_NEAR(steps(n), device, ulps * device);
  EXPECT_GT(expected, device);
  EXPECT_DOUBLE_EQ(f.microStepTimeS, n.microStepTimeS);
  EXPECT_LT(off.figures.peakBytes, none.figures.peakBytes);

  // --offload all: each gather first copies the rank's shard (bf16 here)
  // in from the host on the comm stream; the optimizer step copies nothing
  // back.
  o.offload = "all";
  Planned all = plan("Meta-Llama-3-8B", o, "H100-SXM");
  ASSERT_TRUE(all.module);
  Prediction a = predict(*all.module, c, 1);
  double copiesIn = 0, allSteps = 0;
  auto byName = unitsByName(*all.module);
  for (mlir::Operation &op : getStep(*all.module).getBody().front())
    if (llvm::isa<plan::AllGatherOp>(op)) {
      plan::UnitOp u = unitOfOp(&op, byName);
      copiesIn += c.hostLink.latencyS +
                  u.getShardNumel() * 2.0 / (c.hostLink.bandwidth * c.hostLink.efficiency);
    }
  for (plan::UnitOp u : getUnits(*all.module)) {
    double shard = u.getShardNumel() * 4.0;
    allSteps += c.opOverheadS + c.hostLink.latencyS +
                shard / (c.hostLink.bandwidth * c.hostLink.efficiency) +
                shard / 4 / c.hostAdamwRate;
  }
  auto gathers = [](const Prediction &p) {
    double s = 0;
    for (const TraceEvent &e : p.events)
      if (e.stream == 1 && e.name == "all_gather")
        s += e.duration;
    return s;
  };
  EXPECT_NEAR(gathers(a), gathers(f) + copiesIn, ulps * (gathers(f) + copiesIn));
  EXPECT_NEAR(steps(a), allSteps, ulps * allSteps);
  EXPECT_LT(all.figures.peakBytes, off.figures.peakBytes);
  EXPECT_EQ(all.figures.paramsBytes, 0);
}

// Per-op efficiencies (issue 20, point 2): each kind of op is priced at its
// own fraction, and only that kind moves; a collective in flight slows the
// compute it overlaps by compute.comm_interference; a parameter cast that
// lowers to nothing costs nothing.
TEST(CostModel, OpEfficienciesPriceTheirOwnKind) {
  PlanOptions o = bf16Options(16, 4096);
  o.computeDtype = "bf16";
  Planned p = plan("Llama-2-7b", o, "H100-SXM");
  Cluster base;
  ASSERT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), base), "");
  EXPECT_DOUBLE_EQ(base.opEfficiency.attentionForward, 0.35);
  EXPECT_DOUBLE_EQ(base.commInterference, 0.15);
  base.opEfficiency = {};
  base.commInterference = 0;
  auto byName = [](const Prediction &pr) {
    std::map<std::string, double> t;
    for (const TraceEvent &e : pr.events)
      if (e.stream == 0)
        t[e.name] += e.duration;
    return t;
  };
  Prediction plain = predict(*p.module, base, 1);
  auto t0 = byName(plain);
  ASSERT_GT(t0["causal_attention"], 0);
  ASSERT_GT(t0["rms_norm"], 0);
  EXPECT_EQ(t0.count("cast"), 0u); // bf16 gathers are what compute reads

  Cluster c = base;
  c.opEfficiency.attentionForward = base.matmulEfficiency / 2;
  c.opEfficiency.attentionBackward = base.matmulEfficiency / 4;
  c.opEfficiency.norm = base.memoryEfficiency / 10;
  c.opEfficiency.loss = base.memoryEfficiency / 5;
  auto t1 = byName(predict(*p.module, c, 1));
  int64_t layers = 32;
  // Attention is all matmul: its time doubles (and quadruples in backward)
  // but for the launch overhead.
  EXPECT_NEAR(t1["causal_attention"] - layers * base.opOverheadS,
              2 * (t0["causal_attention"] - layers * base.opOverheadS),
              1e-9 * t0["causal_attention"]);
  EXPECT_NEAR(t1["causal_attention_grad"] - layers * base.opOverheadS,
              4 * (t0["causal_attention_grad"] - layers * base.opOverheadS),
              1e-9 * t0["causal_attention_grad"]);
  // Norms are bound by their bytes: ten times slower; 2 per block + the
  // final one.
  double norms = 2 * layers + 1;
  EXPECT_NEAR(t1["rms_norm"] - norms * base.opOverheadS,
              10 * (t0["rms_norm"] - norms * base.opOverheadS), 1e-9 * t1["rms_norm"]);
  EXPECT_NEAR(t1["cross_entropy"] - base.opOverheadS, 5 * (t0["cross_entropy"] - base.opOverheadS),
              1e-9 * t1["cross_entropy"]);
  // The rest did not move.
  for (const char *same : {"linear", "linear_grad_input", "linear_grad_weight", "silu_mul", "add"})
    EXPECT_DOUBLE_EQ(t1[same], t0[same]) << same;
  c = base;
  c.opEfficiency.elementwise = base.memoryEfficiency / 2;
  auto t2 = byName(predict(*p.module, c, 1));
  EXPECT_GT(t2["silu_mul"], 1.9 * t0["silu_mul"]);
  EXPECT_DOUBLE_EQ(t2["rms_norm"], t0["rms_norm"]);

  // Interference: compute overlapped by communication for t seconds takes
  // f t longer. Over the whole micro-step the compute grows by f times
  // the overlap, which is at most the communication.
  c = base;
  c.commInterference = 0.2;
  Prediction slowed = predict(*p.module, c, 1);
  EXPECT_GT(slowed.computeS, plain.computeS);
  EXPECT_LE(slowed.computeS - plain.computeS, 0.2 * slowed.commS * 1.0000001);
  EXPECT_GT(slowed.computeS - plain.computeS, 0.05 * 0.2 * slowed.commS);
}

// ViT's ops: a linear's product has its activation's rows (B x 2 in the
// block of a class token and one patch, B after first_token, not B x S) and
// the weight read flat (the patch kernel [16, 3, 2, 2] is 16 x 12), and
// attention its query's sequence.
TEST(CostModel, ViTOpsArePricedByTheirShapes) {
  PlanOptions o;
  o.worldSize = 2;
  o.microBatch = 3;
  o.seqLen = 1;
  Planned p = planFile(path("tests/lit/Inputs/vit-like-tiny.json"), o, "H100-SXM");
  Cluster c;
  ASSERT_EQ(loadCluster(path("models/hardware/H100-SXM.json"), c), "");
  Prediction pr = predict(*p.module, c, 1);
  const double B = 3, D = 16, F = 32, V = 10, K = 12;
  double patch = 2 * B * K * D;              // [B, 12] x [12, 16]
  double block = 4 * (2 * (2 * B) * D * D) + // q, k, v, o over 2B rows
                 2 * (2 * (2 * B) * D * F);  // the MLP's two
  double attention = 4 * B * D * 3;          // (query, key) pairs of 2 rows: 3
  double head = 2 * B * D * V;               // the class token's row
  EXPECT_DOUBLE_EQ(pr.modelFlopsPerStep, 3 * (patch + block + attention + head) * o.worldSize);
}

// Published setups (docs/cost-model.md): what trained fits; raising the
// micro-batch until model states and activations plainly exceed the memory
// does not.
TEST(CostModel, PublishedSetupsFitAndOverloadedOnesDoNot) {
  struct Setup {
    const char *model, *hardware;
    int64_t world, microBatch, seq;
    const char *checkpointing;
    int64_t overload; // a micro-batch that must not fit
  };
  for (Setup s : {Setup{"Llama-2-7b", "A100-80GB-SXM", 8, 1, 4096, "blocks", 64},
                  Setup{"Llama-2-70b", "A100-80GB-SXM", 64, 1, 4096, "blocks", 128},
                  Setup{"Meta-Llama-3-8B", "H100-SXM", 8, 1, 8192, "blocks", 64},
                  Setup{"gpt2-xl", "A100-80GB-SXM", 8, 8, 1024, "none", 256}}) {
    PlanOptions o;
    o.worldSize = s.world;
    o.microBatch = s.microBatch;
    o.seqLen = s.seq;
    o.paramDtype = "bf16";
    o.activationCheckpointing = s.checkpointing;
    Planned fits = plan(s.model, o, s.hardware);
    Cluster c;
    loadCluster(path(std::string("models/hardware/") + s.hardware + ".json"), c);
    EXPECT_LE(fits.figures.peakBytes, c.memoryBytes - c.reservedBytes) << s.model << " should fit";
    o.microBatch = s.overload;
    Planned over = plan(s.model, o, s.hardware);
    EXPECT_GT(over.figures.peakBytes, c.memoryBytes - c.reservedBytes)
        << s.model << " should not fit";
  }
}

} // namespace
