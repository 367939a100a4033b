//===- StreamOrderTest.cpp - what a phase's events must order -------------===//
//
// runtime/StreamOrder.h on small phases made by hand (a conflicting pair
// nothing orders, waits that order nothing, the join of two phases) and on
// every program fsdp-plan lowers: those order every conflicting pair, and
// each of their waits is needed.
//
//===----------------------------------------------------------------------===//
#include "runtime/StreamOrder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace fsdp::program;

namespace {

// Eight f32 tensors of 16 elements, tensor k at bytes [64k, 64k + 64); two
// units of 16 elements over 2 ranks, their shards from byte 1024 and 2048.
Program smallProgram() {
  Program p;
  for (int k = 0; k < 8; ++k) {
    Tensor t;
    t.offset = 64 * k;
    t.shape = {16};
    p.tensors.push_back(t);
  }
  for (int k = 0; k < 2; ++k) {
    Unit u;
    u.name = "u" + std::to_string(k);
    u.numel = u.paddedNumel = 16;
    u.shardSize = 2;
    u.shardNumel = 8;
    u.shardOffset = 1024 * (k + 1);
    u.gradShardOffset = u.shardOffset + 32;
    u.expAvgOffset = u.shardOffset + 64;
    u.expAvgSqOffset = u.shardOffset + 96;
    p.units.push_back(u);
  }
  p.tokens = 6;
  p.targets = 7;
  p.loss = 5;
  return p;
}

Instruction event(Op op, int64_t e) {
  Instruction i;
  i.op = op;
  i.event = e;
  return i;
}
Instruction add(int64_t a, int64_t b, int64_t out) {
  Instruction i;
  i.op = Op::Add;
  i.in = {a, b};
  i.out = {out};
  return i;
}
// A collective of unit u on tensor k's bytes: an all_gather writes them, a
// reduce_scatter reads its gradients there.
Instruction collective(Op op, int64_t u, int64_t k) {
  Instruction i;
  i.op = op;
  i.unit = u;
  (op == Op::AllGather ? i.dst : i.src) = 64 * k;
  return i;
}
Instruction gather(int64_t u, int64_t into) { return collective(Op::AllGather, u, into); }
Instruction reduceScatter(int64_t u, int64_t from) {
  return collective(Op::ReduceScatter, u, from);
}

Phase phase(std::vector<Instruction> compute, std::vector<Instruction> comm) {
  Phase s;
  s.compute = std::move(compute);
  s.comm = std::move(comm);
  for (auto *list : {&s.compute, &s.comm})
    for (size_t k = 0; k < list->size(); ++k)
      (*list)[k].index = int64_t(k);
  return s;
}

std::vector<Op> ops(const std::vector<Instruction> &list) {
  std::vector<Op> out;
  for (const Instruction &i : list)
    out.push_back(i.op);
  return out;
}

TEST(StreamOrder, UnorderedConflictNamesBothAndTheBytes) {
  Program p = smallProgram();
  // The add reads tensor 0 while the gather may still be writing it.
  Phase s = phase({add(0, 1, 2)}, {gather(0, 0)});
  EXPECT_EQ(checkStreamOrder(p, s), "compute[0] (add) reads arena bytes [0, 64) that comm[0] "
                                    "(all_gather) writes, and no event orders the two");
  // A wait for the gather's record orders them; so does the other direction.
  EXPECT_EQ(checkStreamOrder(
                p, phase({event(Op::Wait, 0), add(0, 1, 2)}, {gather(0, 0), event(Op::Record, 0)})),
            "");
  EXPECT_EQ(checkStreamOrder(
                p, phase({add(0, 1, 2), event(Op::Record, 0)}, {event(Op::Wait, 0), gather(0, 0)})),
            "");
  // A record before the add orders nothing of it.
  EXPECT_NE(checkStreamOrder(
                p, phase({event(Op::Record, 0), add(0, 1, 2)}, {event(Op::Wait, 0), gather(0, 0)})),
            "");
  // Two reads do not conflict: the gather reads its shard, the add too.
  p.tensors.push_back(Tensor{1024, {8}, DType::F32}); // unit 0's shard
  Instruction readsShard = add(8, 8, 2);
  EXPECT_EQ(checkStreamOrder(p, phase({readsShard}, {gather(0, 0)})), "");
}

TEST(StreamOrder, DropsWaitsAnotherCovers) {
  Program p = smallProgram();
  // Compute waits for both gathers before the first use: the wait for the
  // first gather is redundant (the second's record comes after it on comm),
  // and so is its record; the wait for the second is needed.
  Phase s = phase({event(Op::Wait, 0), event(Op::Wait, 1), add(0, 1, 2), add(3, 3, 4)},
                  {gather(0, 0), event(Op::Record, 0), gather(1, 3), event(Op::Record, 1)});
  ASSERT_EQ(checkStreamOrder(p, s), "");
  EXPECT_EQ(dropRedundantWaits(p, s), 1);
  EXPECT_EQ(ops(s.compute), (std::vector<Op>{Op::Wait, Op::Add, Op::Add}));
  EXPECT_EQ(s.compute[0].event, 1);
  EXPECT_EQ(ops(s.comm), (std::vector<Op>{Op::AllGather, Op::AllGather, Op::Record}));
  for (auto *list : {&s.compute, &s.comm})
    for (size_t k = 0; k < list->size(); ++k)
      EXPECT_EQ((*list)[k].index, int64_t(k));
  EXPECT_EQ(checkStreamOrder(p, s), "");
  // What is left is needed: nothing more to drop.
  EXPECT_EQ(dropRedundantWaits(p, s), 0);
}

TEST(StreamOrder, DropsWaitsThatOrderNoConflict) {
  Program p = smallProgram();
  // The reduce-scatter reads tensor 3, which compute writes before the
  // record: needed. Compute's later wait for it orders nothing after it
  // that touches its bytes.
  Phase s = phase({add(0, 1, 3), event(Op::Record, 0), event(Op::Wait, 1), add(0, 1, 2)},
                  {event(Op::Wait, 0), reduceScatter(0, 3), event(Op::Record, 1)});
  EXPECT_EQ(dropRedundantWaits(p, s), 1);
  EXPECT_EQ(ops(s.compute), (std::vector<Op>{Op::Add, Op::Record, Op::Add}));
  EXPECT_EQ(ops(s.comm), (std::vector<Op>{Op::Wait, Op::ReduceScatter}));
  // Had the second add written tensor 3, that wait would be needed.
  Phase t = phase({add(0, 1, 3), event(Op::Record, 0), event(Op::Wait, 1), add(0, 1, 3)},
                  {event(Op::Wait, 0), reduceScatter(0, 3), event(Op::Record, 1)});
  EXPECT_EQ(dropRedundantWaits(p, t), 0);
}

TEST(StreamOrder, JoinsOnlyWhatCrossesTheBoundary) {
  Program p = smallProgram();
  // A micro-step: comm gathers unit 1 into tensor 0, which compute reads
  // last; compute writes tensor 3 (gradients), which comm reduce-scatters
  // last, after the record compute waits for.
  Phase micro =
      phase({add(1, 1, 3), event(Op::Record, 0), event(Op::Wait, 1), add(0, 1, 2)},
            {gather(1, 0), event(Op::Record, 1), event(Op::Wait, 0), reduceScatter(0, 3)});
  ASSERT_EQ(checkStreamOrder(p, micro), "");
  // The next micro-step's first add writes tensor 3 before any wait, while
  // the reduce-scatter may still read it: compute waits for comm. Its first
  // gather writes tensor 0 while the last add may still read it: comm waits
  // for compute.
  PhaseJoin j = phaseJoin(p, micro, micro);
  EXPECT_TRUE(j.computeWaits);
  EXPECT_TRUE(j.commWaits);
  // Had compute waited for a record after the reduce-scatter, that wait
  // would order it before the next micro-step's compute already.
  Phase waited =
      phase({add(1, 1, 3), event(Op::Record, 0), event(Op::Wait, 1), add(0, 1, 2)},
            {gather(1, 0), event(Op::Wait, 0), reduceScatter(0, 3), event(Op::Record, 1)});
  ASSERT_EQ(checkStreamOrder(p, waited), "");
  EXPECT_FALSE(phaseJoin(p, waited, waited).computeWaits);
  // An optimizer that waits for its grad_norm first needs neither.
  Instruction norm;
  norm.op = Op::GradNorm;
  Instruction step;
  step.op = Op::OptimizerStep;
  step.unit = 0;
  Phase opt = phase({event(Op::Wait, 2), step}, {norm, event(Op::Record, 2)});
  ASSERT_EQ(checkStreamOrder(p, opt), "");
  p.microStep = micro;
  p.optimizer = opt;
  j = phaseJoin(p, p.microStep, p.optimizer);
  EXPECT_FALSE(j.computeWaits);
  EXPECT_FALSE(j.commWaits);
  // The next micro-step's inputs are copied on compute: a comm instruction
  // reading the targets' bytes at the end of a micro-step needs the join.
  Phase readsTargets = phase({}, {reduceScatter(0, 7)});
  p.microStep = readsTargets;
  EXPECT_TRUE(phaseJoin(p, p.microStep, p.microStep).computeWaits);
  EXPECT_FALSE(phaseJoin(p, p.microStep, p.optimizer).computeWaits);
}

// Every program fsdp-plan lowers orders its conflicting pairs (the loader
// would refuse it), and lowering left no wait that orders nothing.
TEST(StreamOrder, PlannedProgramsNeedEachWait) {
  const std::string bin = FSDP_BINARY_DIR "/bin/fsdp-plan";
  const char *cases[] = {
      "gpt2-tiny/config.json --world-size 2 --micro-batch 2",
      "gpt2-tiny/config.json --world-size 4 --micro-batch 2 --strategy shard-grad-op",
      "gpt2-tiny/config.json --world-size 4 --micro-batch 2 --strategy hybrid-shard "
      "--shard-size 2 --param-dtype bf16 --reduce-dtype bf16",
      "llama-tiny/config.json --world-size 2 --micro-batch 2 --strategy no-shard",
      "llama-tiny/config.json --world-size 4 --micro-batch 2 --activation-checkpointing blocks "
      "--cluster " FSDP_SOURCE_DIR "/models/hardware/H100-SXM.json --param-dtype bf16",
      "bert-tiny/config.json --world-size 2 --micro-batch 2",
      "vit-tiny/config.json --world-size 4 --micro-batch 2",
  };
  for (const char *c : cases) {
    std::string out =
        ::testing::TempDir() + "/stream-order-" + std::to_string(::getpid()) + ".json";
    std::string cmd = bin + " " FSDP_SOURCE_DIR "/models/" + c +
                      (std::string(c).find("vit") == std::string::npos ? " --seq-len 16" : "") +
                      " -o " + out + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    Program p;
    ASSERT_EQ(loadProgram(out, p), "") << cmd;
    int64_t waits = 0;
    for (Phase *s : {&p.microStep, &p.optimizer}) {
      EXPECT_EQ(checkStreamOrder(p, *s), "") << cmd;
      for (const Instruction &i : s->compute)
        waits += i.op == Op::Wait;
      for (const Instruction &i : s->comm)
        waits += i.op == Op::Wait;
      EXPECT_EQ(dropRedundantWaits(p, *s), 0) << cmd;
    }
    EXPECT_GT(waits, 0) << cmd;
    std::remove(out.c_str());
  }
}

} // namespace
