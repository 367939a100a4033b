//===- ProgramTest.cpp - the program loader's checks ----------------------===//
//
// program::issueOrder: the order in which one thread issues a phase's two
// lists (the CUDA executor enqueues in it; the loader refuses programs for
// which none exists, as they would deadlock), and loadProgram on programs
// that fsdp-plan wrote, for every backend's use.
//
//===----------------------------------------------------------------------===//
#include "runtime/Program.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

using namespace fsdp::program;

namespace {

Instruction inst(Op op, int64_t event = -1) {
  Instruction i;
  i.op = op;
  i.event = event;
  return i;
}

// compute and comm from short codes: "r3" records event 3, "w3" waits for
// it, "x" is any other instruction.
Phase phaseOf(const std::vector<std::string> &compute, const std::vector<std::string> &comm) {
  Phase s;
  auto fill = [](const std::vector<std::string> &codes, std::vector<Instruction> &out) {
    for (const std::string &c : codes) {
      Instruction i = c[0] == 'r'   ? inst(Op::Record, std::stoi(c.substr(1)))
                      : c[0] == 'w' ? inst(Op::Wait, std::stoi(c.substr(1)))
                                    : inst(Op::Free);
      i.index = out.size();
      out.push_back(i);
    }
  };
  fill(compute, s.compute);
  fill(comm, s.comm);
  return s;
}

// The order keeps each list's own order, holds every instruction once, and
// issues each record before every wait on its event.
void expectValid(const Phase &s, const std::vector<Slot> &order) {
  ASSERT_EQ(order.size(), s.compute.size() + s.comm.size());
  size_t next[2] = {0, 0};
  std::map<int64_t, bool> issued;
  for (const Slot &slot : order) {
    ASSERT_EQ(slot.index, next[slot.stream]) << "stream " << slot.stream << " out of order";
    ++next[slot.stream];
    const Instruction &i = (slot.stream ? s.comm : s.compute)[slot.index];
    if (i.op == Op::Record)
      issued[i.event] = true;
    if (i.op == Op::Wait)
      EXPECT_TRUE(issued[i.event]) << "wait for event " << i.event << " before its record";
  }
}

TEST(IssueOrder, GatherPrefetchPattern) {
  // comm: gather unit 0, record 0; wait for compute's record 1, gather unit
  // 1, record 2. compute: wait 0, forward 0, record 1 (frees), wait 2, ...
  Phase s = phaseOf({"w0", "x", "r1", "w2", "x", "r3"}, {"x", "r0", "w1", "x", "r2", "w3", "x"});
  std::vector<Slot> order;
  ASSERT_EQ(issueOrder(s, order), "");
  expectValid(s, order);
}

TEST(IssueOrder, CommWaitsForComputeFirst) {
  Phase s = phaseOf({"x", "x", "r0", "x", "w1"}, {"w0", "x", "r1"});
  std::vector<Slot> order;
  ASSERT_EQ(issueOrder(s, order), "");
  expectValid(s, order);
  // Compute runs up to its wait (4 instructions, its record among them),
  // then comm (whose first instruction waits for that record), then the rest.
  std::vector<int> streams;
  for (const Slot &slot : order)
    streams.push_back(slot.stream);
  EXPECT_EQ(streams, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 0}));
}

TEST(IssueOrder, EmptyAndOneSidedLists) {
  std::vector<Slot> order;
  EXPECT_EQ(issueOrder(phaseOf({}, {}), order), "");
  EXPECT_TRUE(order.empty());
  Phase s = phaseOf({"x", "r0", "w0", "x"}, {});
  ASSERT_EQ(issueOrder(s, order), "");
  expectValid(s, order);
}

TEST(IssueOrder, CrossedWaitsDeadlock) {
  // Each list waits for what the other records only after its own wait.
  Phase s = phaseOf({"x", "w1", "r0"}, {"w0", "r1"});
  std::vector<Slot> order;
  EXPECT_EQ(issueOrder(s, order),
            "deadlock: compute[1] waits for event 1 while comm[0] waits for event 0; no record "
            "of these events can be issued before these waits");
}

TEST(IssueOrder, WaitBeforeItsOwnRecord) {
  Phase s = phaseOf({"w0", "r0"}, {"x"});
  std::vector<Slot> order;
  EXPECT_EQ(issueOrder(s, order), "deadlock: compute[0] waits for event 0; no record of these "
                                  "events can be issued before these waits");
}

// Every program fsdp-plan lowers has an order: the loader accepts them.
TEST(LoadProgram, PlannedProgramsHaveAnIssueOrder) {
  std::string bin = FSDP_BINARY_DIR "/bin/fsdp-plan";
  for (const char *strategy : {"full-shard", "shard-grad-op", "no-shard", "hybrid-shard"}) {
    std::string out =
        ::testing::TempDir() + "/program-" + std::to_string(::getpid()) + "-" + strategy + ".json";
    std::string cmd = bin + " " FSDP_SOURCE_DIR "/models/llama-tiny/config.json --world-size 4 " +
                      "--micro-batch 2 --seq-len 16 --strategy " + strategy +
                      (std::string(strategy) == "hybrid-shard" ? " --shard-size 2" : "") + " -o " +
                      out + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    Program p;
    ASSERT_EQ(loadProgram(out, p), "") << strategy;
    for (const Phase *s : {&p.microStep, &p.optimizer}) {
      std::vector<Slot> order;
      ASSERT_EQ(issueOrder(*s, order), "");
      expectValid(*s, order);
    }
    std::remove(out.c_str());
  }
  // With --grad-sync last, the last micro-step's own lists too.
  std::string out = ::testing::TempDir() + "/program-" + std::to_string(::getpid()) + "-last.json";
  std::string cmd = bin + " " FSDP_SOURCE_DIR "/models/llama-tiny/config.json --world-size 4 " +
                    "--micro-batch 2 --seq-len 16 --grad-accum 2 --grad-sync last -o " + out +
                    " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Program p;
  ASSERT_EQ(loadProgram(out, p), "");
  ASSERT_TRUE(p.syncsAtLastMicroStep());
  for (const Phase *s : {&p.microStep, &p.lastMicroStep, &p.optimizer}) {
    std::vector<Slot> order;
    ASSERT_EQ(issueOrder(*s, order), "");
    expectValid(*s, order);
  }
  std::remove(out.c_str());
}

// One owner of the format: what lowering writes is writeProgram's text, and
// loadProgram(writeProgram(p)) is p, field for field, for every program of
// the test matrix (both models, every strategy, bf16 gathers and reductions,
// activation checkpointing, RoPE scaling of each kind).
TEST(WriteProgram, RoundTripsEveryPlannedProgram) {
  std::string bin = FSDP_BINARY_DIR "/bin/fsdp-plan";
  struct Case {
    const char *model, *flags;
  };
  const Case cases[] = {
      {"gpt2-tiny", "--world-size 1 --micro-batch 4"},
      {"gpt2-tiny", "--world-size 4 --micro-batch 3 --strategy shard-grad-op"},
      {"gpt2-tiny", "--world-size 4 --micro-batch 3 --strategy hybrid-shard --shard-size 2 "
                    "--param-dtype bf16 --reduce-dtype bf16"},
      {"llama-tiny", "--world-size 2 --micro-batch 2 --strategy no-shard"},
      {"llama-tiny", "--world-size 3 --micro-batch 2 --activation-checkpointing blocks"},
      {"gpt2-tiny", "--world-size 2 --micro-batch 2 --activation-checkpointing selective"},
      {"llama-tiny", "--world-size 2 --micro-batch 2 --param-dtype bf16 --wrap none"},
      {"llama-tiny", "--world-size 2 --micro-batch 2 --param-dtype bf16 --cluster " FSDP_SOURCE_DIR
                     "/models/hardware/H100-SXM.json"},
      {"Llama-3.1-405B", "--world-size 1024 --micro-batch 1 --seq-len 64"},
      {"llama-tiny-linear", "--world-size 2 --micro-batch 2"},
      {"llama-tiny-dynamic", "--world-size 1 --micro-batch 2 --param-dtype bf16"},
      {"llama-tiny-yarn", "--world-size 2 --micro-batch 2 --strategy shard-grad-op"},
      // no-sync accumulation: grad_sync, the sums' offsets, last_micro_step
      {"gpt2-tiny", "--world-size 2 --micro-batch 2 --grad-accum 2 --grad-sync last"},
      {"gpt2-tiny", "--world-size 2 --micro-batch 2 --grad-accum 3 --reshard-after-backward false"},
      {"llama-tiny", "--world-size 4 --micro-batch 1 --grad-accum 3 --grad-sync last --strategy "
                     "hybrid-shard --shard-size 2 --param-dtype bf16"},
      // the host pool: offload, host_bytes, the units' host offsets
      {"gpt2-tiny", "--world-size 2 --micro-batch 2 --offload optimizer"},
      {"llama-tiny", "--world-size 2 --micro-batch 2 --offload optimizer --param-dtype bf16 "
                     "--cluster " FSDP_SOURCE_DIR "/models/hardware/H100-SXM.json"},
      // no parameter shard in the arena; the gathers' bf16 copies
      {"llama-tiny", "--world-size 4 --micro-batch 1 --offload all --param-dtype bf16 "
                     "--reshard-after-forward 2"},
  };
  for (const Case &c : cases) {
    std::string out = ::testing::TempDir() + "/roundtrip-" + std::to_string(::getpid()) + ".json";
    std::string cmd =
        bin + " " FSDP_SOURCE_DIR "/models/" + c.model + "/config.json " + c.flags +
        (std::string(c.flags).find("--seq-len") == std::string::npos ? " --seq-len 16" : "") +
        " --no-dropout -o " + out + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    Program p, q;
    ASSERT_EQ(loadProgram(out, p), "") << cmd;
    std::string text = writeProgram(p);
    ASSERT_EQ(parseProgram(text, "written", q), "") << cmd;
    EXPECT_TRUE(p == q) << cmd;
    // The planner's file is writeProgram's text, byte for byte.
    std::ifstream file(out);
    std::stringstream planned;
    planned << file.rdbuf();
    EXPECT_EQ(planned.str(), text) << cmd;
    std::remove(out.c_str());
  }
}

// The encoders' ops in a planned program: gpt2-tiny's JSON graph with
// bidirectional attention and exact GELU round-trips through writeProgram and
// parseProgram, its attention ops decode as not causal and its GELUs as exact;
// tanh, the default, is the one form left unwritten.
TEST(WriteProgram, RoundTripsEncoderOps) {
  const std::string bin = FSDP_BINARY_DIR "/bin/", dir = ::testing::TempDir();
  const std::string mlir = dir + "/enc-gpt2.mlir", gpt2 = dir + "/enc-gpt2.json",
                    graph = dir + "/enc.json", out = dir + "/enc-program.json";
  const std::string cmd =
      bin +
      "fsdp-translate --import-hf-config " FSDP_SOURCE_DIR "/models/gpt2-tiny/config.json -o " +
      mlir + " && " + bin + "fsdp-translate --export-graph-json " + mlir + " -o " + gpt2 +
      " && sed -e 's/\"op\":\"causal_attention\"/\"op\":\"attention\"/' -e "
      "'s/\"op\":\"gelu\",/\"op\":\"gelu\",\"approximate\":\"none\",/' " +
      gpt2 + " > " + graph + " && " + bin + "fsdp-plan " + graph +
      " --world-size 2 --micro-batch 2 --seq-len 16 -o " + out + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Program p, q;
  ASSERT_EQ(loadProgram(out, p), "");
  int attention = 0, attentionGrad = 0, exact = 0, tanh = 0;
  for (const Instruction &i : p.microStep.compute) {
    EXPECT_NE(i.op, Op::CausalAttention);
    EXPECT_NE(i.op, Op::CausalAttentionGrad);
    if (i.op == Op::Attention || i.op == Op::AttentionGrad) {
      (i.op == Op::Attention ? attention : attentionGrad)++;
      EXPECT_FALSE(i.call.causal);
      EXPECT_EQ(i.call.window, 0);
    }
    if (i.op == Op::Gelu || i.op == Op::GeluGrad) {
      (i.call.approximate == GeluApproximate::None ? exact : tanh)++;
      EXPECT_EQ(i.call.approximate, i.approximate);
    }
  }
  EXPECT_EQ(attention, 2); // gpt2-tiny's two blocks
  EXPECT_EQ(attentionGrad, 2);
  EXPECT_EQ(exact, 4); // two gelu, two gelu_grad
  EXPECT_EQ(tanh, 0);
  const std::string text = writeProgram(p);
  ASSERT_EQ(parseProgram(text, "written", q), "");
  EXPECT_TRUE(p == q);
  EXPECT_NE(text.find("\"approximate\":\"none\""), std::string::npos);
  for (Instruction &i : p.microStep.compute)
    i.approximate = GeluApproximate::Tanh;
  EXPECT_EQ(writeProgram(p).find("approximate"), std::string::npos);
  for (const std::string &f : {mlir, gpt2, graph, out})
    std::remove(f.c_str());
}

// A program whose embedding reads the ids `idsOp` writes, from a table of
// `rows` rows of 4.
std::string idsProgram(const std::string &idsOp, int rows) {
  return R"({"format": "fsdp-program", "version": 1,
  "model": {"name": "bert-tiny", "model_type": "bert", "parameters": 0},
  "world_size": 1, "strategy": "full-shard", "shard_size": 1,
  "micro_batch": 2, "seq_len": 5, "arena_bytes": 600, "events": 0,
  "inputs": {"tokens": 0, "targets": 5}, "loss": 1,
  "tensors": [{"id": 0, "offset": 0, "shape": [2, 5], "dtype": "i64"},
              {"id": 1, "offset": 80, "shape": [], "dtype": "f32"},
              {"id": 2, "offset": 88, "shape": [2, 5], "dtype": "i64"},
              {"id": 3, "offset": 168, "shape": [)" +
         std::to_string(rows) + R"(, 4], "dtype": "f32"},
              {"id": 4, "offset": 280, "shape": [2, 5, 4], "dtype": "f32"},
              {"id": 5, "offset": 440, "shape": [2, 5], "dtype": "i64"}],
  "units": [],
  "micro_step": {"compute": [{"op": ")" +
         idsOp + R"(", "in": [0], "out": [2]},
                             {"op": "embedding", "in": [2, 3], "out": [4]}], "comm": []},
  "optimizer": {"compute": [], "comm": []}})";
}

// token_type_ids writes zeros: any table of a row or more takes them (and
// position_ids' positions 0..4 need 5 rows).
TEST(LoadProgram, TokenTypesIndexAnyTableOfARow) {
  Program p;
  EXPECT_EQ(parseProgram(idsProgram("token_type_ids", 1), "p.json", p), "");
  EXPECT_EQ(p.microStep.compute[0].op, Op::TokenTypeIds);
  EXPECT_EQ(p.microStep.compute[0].call.B, 2);
  EXPECT_EQ(p.microStep.compute[0].call.S, 5);
  EXPECT_EQ(parseProgram(idsProgram("token_type_ids", 0), "p.json", p),
            "p.json: micro_step.compute[1] (embedding): token types (0) index an embedding of "
            "0 rows");
  EXPECT_EQ(parseProgram(idsProgram("position_ids", 4), "p.json", p),
            "p.json: micro_step.compute[1] (embedding): positions up to 4 index an embedding of "
            "4 rows");
  EXPECT_EQ(parseProgram(idsProgram("position_ids", 5), "p.json", p), "");
}

// A program of one rope instruction over x [1, S, 8] (2 heads of 8 / 2 = 4),
// its attributes those of `scaling` (JSON members after "theta", or none).
std::string ropeProgram(const std::string &scaling, int S = 4) {
  const int x = S * 8 * 4, tokens = S * 8;
  return R"({"format": "fsdp-program", "version": 1,
  "model": {"name": "llama-tiny", "model_type": "llama", "parameters": 0},
  "world_size": 1, "strategy": "full-shard", "shard_size": 1,
  "micro_batch": 1, "seq_len": )" +
         std::to_string(S) + R"(, "arena_bytes": )" + std::to_string(2 * tokens + 8 + 2 * x) +
         R"(, "events": 0,
  "inputs": {"tokens": 0, "targets": 4}, "loss": 1,
  "tensors": [{"id": 0, "offset": 0, "shape": [1, )" +
         std::to_string(S) + R"(], "dtype": "i64"},
              {"id": 1, "offset": )" +
         std::to_string(tokens) + R"(, "shape": [], "dtype": "f32"},
              {"id": 2, "offset": )" +
         std::to_string(tokens + 8) + R"(, "shape": [1, )" + std::to_string(S) +
         R"(, 8], "dtype": "f32"},
              {"id": 3, "offset": )" +
         std::to_string(tokens + 8 + x) + R"(, "shape": [1, )" + std::to_string(S) +
         R"(, 8], "dtype": "f32"},
              {"id": 4, "offset": )" +
         std::to_string(tokens + 8 + 2 * x) + R"(, "shape": [1, )" + std::to_string(S) +
         R"(], "dtype": "i64"}],
  "units": [],
  "micro_step": {"compute": [{"op": "rope", "num_heads": 2, "theta": 10000.0)" +
         (scaling.empty() ? "" : ", " + scaling) + R"(, "in": [2], "out": [3]}], "comm": []},
  "optimizer": {"compute": [], "comm": []}})";
}

// A rope's scaling: its kind and the parameters the kind reads, each
// required and no other; values the kernels compute; dynamic's only up to
// its original_max_position.
TEST(LoadProgram, RopeScaling) {
  Program p;
  const std::string yarn = R"("scaling": "yarn", "scaling_factor": 4.0,
      "original_max_position": 32, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
      "attention_factor": 1.1386294361119891)";
  ASSERT_EQ(parseProgram(ropeProgram(yarn), "p.json", p), "");
  const Instruction &rope = p.microStep.compute[0];
  ASSERT_TRUE(rope.ropeScaling);
  EXPECT_EQ(rope.ropeScaling->kind, fsdp::support::RopeScalingKind::Yarn);
  EXPECT_EQ(rope.ropeScaling->originalMaxPosition, 32);
  EXPECT_FALSE(rope.ropeScaling->truncate);
  EXPECT_EQ(rope.ropeScaling->attentionFactor, 1.1386294361119891);
  // Written back as read.
  Program q;
  ASSERT_EQ(parseProgram(writeProgram(p), "written", q), "");
  EXPECT_TRUE(p == q);
  q.microStep.compute[0].ropeScaling->betaSlow = 2.0;
  EXPECT_FALSE(p == q);
  ASSERT_EQ(parseProgram(ropeProgram(""), "p.json", p), "");
  EXPECT_FALSE(p.microStep.compute[0].ropeScaling);

  const std::string where = "p.json: micro_step.compute[0]: ";
  EXPECT_EQ(parseProgram(ropeProgram(R"("scaling": "ntk", "scaling_factor": 2.0)"), "p.json", p),
            where + "'scaling' must be one of linear, dynamic, yarn, llama3, not \"ntk\"");
  EXPECT_EQ(parseProgram(ropeProgram(R"("scaling_factor": 2.0)"), "p.json", p),
            where + "'scaling_factor' is given without 'scaling'");
  EXPECT_EQ(parseProgram(ropeProgram(R"("scaling": "linear", "scaling_factor": 2.0,
                                        "beta_fast": 32.0)"),
                         "p.json", p),
            where + "'beta_fast' is not a parameter of linear scaling (its parameters: "
                    "scaling_factor)");
  EXPECT_EQ(
      parseProgram(ropeProgram(R"("scaling": "dynamic", "scaling_factor": 2.0)"), "p.json", p),
      where + "missing 'original_max_position'");
  EXPECT_EQ(
      parseProgram(ropeProgram(R"("scaling": "linear", "scaling_factor": -2.0)"), "p.json", p),
      where + "linear scaling needs a finite scaling_factor > 0, but it is -2");
  EXPECT_EQ(parseProgram(ropeProgram(R"("scaling": "yarn", "scaling_factor": 4.0,
      "original_max_position": 32, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": 1,
      "attention_factor": 1.0)"),
                         "p.json", p),
            where + "'truncate' has the wrong type: 1");
  // A program of before scaling had kinds is refused, not run unscaled.
  EXPECT_EQ(parseProgram(ropeProgram(R"("llama3_factor": 8.0, "llama3_low_freq_factor": 1.0,
      "llama3_high_freq_factor": 4.0, "llama3_original_max_position": 8192)"),
                         "p.json", p),
            where + "'llama3_factor' is the key Llama 3.1's rope scaling had before scaling kinds "
                    "(docs/program-format.md); plan the model again");
  // Dynamic NTK holds transformers' frequencies for sequences up to its
  // original_max_position (max_position_embeddings): 4 here, and 5 is
  // refused.
  const std::string dynamic =
      R"("scaling": "dynamic", "scaling_factor": 2.0, "original_max_position": 4)";
  EXPECT_EQ(parseProgram(ropeProgram(dynamic, 4), "p.json", p), "");
  const std::string longer = parseProgram(ropeProgram(dynamic, 5), "p.json", p);
  EXPECT_NE(longer.find("dynamic rope scaling holds for sequences of at most "
                        "original_max_position = 4 (max_position_embeddings) tokens, but this "
                        "one is 5 long"),
            std::string::npos)
      << longer;
  const std::string theta = parseProgram(
      ropeProgram(yarn).replace(ropeProgram(yarn).find("10000.0"), 7, "1.0"), "p.json", p);
  EXPECT_NE(theta.find("yarn rope scaling needs theta > 0 other than 1"), std::string::npos)
      << theta;
}

// A change anywhere is seen: the comparison is not vacuous.
TEST(WriteProgram, EqualityNoticesOneField) {
  Program p;
  p.microStep.compute.push_back(Instruction{});
  Program q = p;
  EXPECT_TRUE(p == q);
  q.microStep.compute[0].eps = 1e-5;
  EXPECT_FALSE(p == q);
  q = p;
  q.microStep.compute[0].approximate = GeluApproximate::None;
  EXPECT_FALSE(p == q);
  q = p;
  q.memory.push_back({"peak_bytes", 1});
  EXPECT_FALSE(p == q);
  q = p;
  q.lastMicroStep.comm.push_back(Instruction{});
  EXPECT_FALSE(p == q);
  q = p;
  q.gradSync = "last";
  EXPECT_FALSE(p == q);
  q = p;
  q.offload = Offload::Optimizer;
  EXPECT_FALSE(p == q);
  q = p;
  q.hostBytes = 64;
  EXPECT_FALSE(p == q);
  q = p;
  q.units.push_back(Unit{});
  Program r = q;
  r.units[0].hostGradOffset = 0;
  EXPECT_FALSE(q == r);
}

} // namespace
