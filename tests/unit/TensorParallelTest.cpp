//===- TensorParallelTest.cpp - the mesh's groups and a piece's elements --===//
//
// The runtime's side of tensor parallelism: which ranks make up each group
// of a (dp x tp) mesh, collectives on two groups at once from two threads
// of each rank (the compute stream's tp group, the comm stream's shard
// group), and where each element of a rank's piece of a cut parameter lies
// in the whole parameter.
//
//===----------------------------------------------------------------------===//
#include "runtime/Communicator.h"
#include "runtime/Program.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

using namespace fsdp;
using namespace fsdp::runtime;

namespace {

std::vector<int> ranksOf(const Communicator &c, Group g) { return groupRanks(c, g); }

} // namespace

// World 8 as dp 4 x tp 2, shard groups of 2 dp ranks: rank 5 is dp 2, tp 1.
TEST(TensorParallel, TheMeshGroupsRanksByDimension) {
  auto world = createThreadsWorld(8, 2, 5, 0, 2);
  auto c = threadsCommunicator(world, 5);
  EXPECT_EQ(c->tpSize(), 2);
  EXPECT_EQ(ranksOf(*c, Group::Tp), (std::vector<int>{4, 5}));
  EXPECT_EQ(ranksOf(*c, Group::TpGrad), (std::vector<int>{4, 5}));
  EXPECT_EQ(ranksOf(*c, Group::Shard), (std::vector<int>{5, 7}));   // dp 2, 3 at tp 1
  EXPECT_EQ(ranksOf(*c, Group::Replica), (std::vector<int>{1, 5})); // dp 0, 2 at tp 1
  EXPECT_EQ(c->memberIndex(Group::Tp), 1);
  EXPECT_EQ(c->memberIndex(Group::Shard), 0);
  EXPECT_EQ(c->memberIndex(Group::Replica), 1);
  EXPECT_EQ(c->groupSize(Group::World), 8);
  // A rank is the member its index says, and its group's members share
  // the group's index.
  std::vector<std::unique_ptr<Communicator>> all;
  for (int r = 0; r < 8; ++r)
    all.push_back(threadsCommunicator(world, r));
  for (Group g : {Group::Shard, Group::Replica, Group::Tp})
    for (int r = 0; r < 8; ++r) {
      std::vector<int> members = ranksOf(*all[r], g);
      EXPECT_EQ(members[all[r]->memberIndex(g)], r);
      for (int m : members)
        EXPECT_EQ(all[m]->groupIndex(g), all[r]->groupIndex(g));
    }
}

// Each rank sums over its tp group on one thread while a second thread sums
// over its shard group: each stream's group keeps its own order and
// staging, and every member gets the same sum.
TEST(TensorParallel, TwoStreamsSumOverTwoGroupsAtOnce) {
  const int W = 8, tp = 2, G = 2, n = 1000;
  auto world = createThreadsWorld(W, G, 30, 0, tp);
  std::vector<std::vector<float>> tpBuf(W, std::vector<float>(n)), shardBuf = tpBuf;
  std::vector<std::thread> ranks;
  std::vector<int> ok(W * 2, 0);
  for (int r = 0; r < W; ++r)
    ranks.emplace_back([&, r] {
      auto c = threadsCommunicator(world, r);
      for (int k = 0; k < n; ++k) {
        tpBuf[r][k] = float(r * n + k);
        shardBuf[r][k] = float(1000 * r + k);
      }
      std::thread other([&] {
        ok[2 * r + 1] = 1;
        for (int rep = 0; rep < 20 && ok[2 * r + 1]; ++rep)
          ok[2 * r + 1] = c->allReduce(Group::Shard, shardBuf[r].data(), n) ? 1 : 0;
      });
      ok[2 * r] = 1;
      for (int rep = 0; rep < 20 && ok[2 * r]; ++rep)
        ok[2 * r] = c->allReduce(Group::Tp, tpBuf[r].data(), n) ? 1 : 0;
      other.join();
    });
  for (auto &t : ranks)
    t.join();
  for (int v : ok)
    ASSERT_EQ(v, 1);
  for (int r = 0; r < W; ++r) {
    int d = r / tp, t = r % tp;
    for (int k = 0; k < n; k += 97) {
      // 20 sums of two members: 2^19 times the members' first values' sum.
      double tpSum = 0, shardSum = 0;
      for (int m = 0; m < tp; ++m)
        tpSum += double((d * tp + m) * n + k);
      for (int m = 0; m < G; ++m)
        shardSum += double(1000 * ((d / G * G + m) * tp + t) + k);
      EXPECT_EQ(tpBuf[r][k], float(tpSum * (1 << 19))) << r << " " << k;
      EXPECT_EQ(shardBuf[r][k], float(shardSum * (1 << 19))) << r << " " << k;
    }
  }
}

// GPT-2's c_attn: [in 2, out 12] (in_out), its 12 outputs in 3 sections (q,
// k, v), cut along dimension 1 into 2 pieces, each of each section's half.
TEST(TensorParallel, APieceOfSectionsIsEachSectionsPart) {
  program::Param prm;
  prm.shape = {2, 6}; // the piece
  prm.tpDim = 1, prm.tpPieces = 2, prm.tpSections = 3;
  EXPECT_EQ(prm.wholeShape(), (std::vector<int64_t>{2, 12}));
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 6; ++j) {
        int section = j / 2, within = j % 2;
        int wholeCol = section * 4 + t * 2 + within;
        EXPECT_EQ(prm.wholeElement(r * 6 + j, t, 2), r * 12 + wholeCol) << t << r << j;
      }
}

// GQA at tp 4 with 2 key/value heads: k_proj [kv 2 x Dh 3, in 5] cut along
// dimension 0 into 2 pieces, ranks 0, 1 holding head 0 and ranks 2, 3 head 1.
TEST(TensorParallel, ASharedPieceIsHeldByConsecutiveRanks) {
  program::Param prm;
  prm.shape = {3, 5};
  prm.tpDim = 0, prm.tpPieces = 2, prm.tpSections = 1;
  for (int t = 0; t < 4; ++t)
    for (int e = 0; e < 15; ++e)
      EXPECT_EQ(prm.wholeElement(e, t, 4), (t / 2) * 15 + e) << t << " " << e;
  program::Param whole;
  whole.shape = {7};
  EXPECT_FALSE(whole.isCut());
  EXPECT_EQ(whole.wholeElement(5, 3, 4), 5);
}

// pieceElement inverts wholeElement: every element of the whole parameter
// is in exactly one piece, once (what a checkpoint's resharded load reads).
TEST(TensorParallel, PieceElementInvertsWholeElement) {
  struct Cut {
    std::vector<int64_t> piece;
    int64_t dim, pieces, sections;
  };
  for (const Cut &c : {Cut{{2, 6}, 1, 2, 3}, Cut{{3, 5}, 0, 2, 1}, Cut{{2, 3, 4}, 1, 3, 1},
                       Cut{{4, 2}, 0, 4, 2}}) {
    program::Param prm;
    prm.shape = c.piece;
    prm.tpDim = c.dim, prm.tpPieces = c.pieces, prm.tpSections = c.sections;
    int64_t numel = 1;
    for (int64_t d : c.piece)
      numel *= d;
    std::vector<int> seen(size_t(numel * c.pieces), 0);
    for (int64_t k = 0; k < c.pieces; ++k)
      for (int64_t e = 0; e < numel; ++e) {
        int64_t w = prm.wholeElement(e, k, c.pieces), back = -1;
        ASSERT_GE(w, 0);
        ASSERT_LT(w, numel * c.pieces);
        ++seen[size_t(w)];
        EXPECT_EQ(prm.pieceElement(w, &back), e) << k << " " << e;
        EXPECT_EQ(back, k) << k << " " << e;
      }
    for (int n : seen)
      EXPECT_EQ(n, 1);
  }
  program::Param whole;
  whole.shape = {7};
  int64_t k = -1;
  EXPECT_EQ(whole.pieceElement(5, &k), 5);
  EXPECT_EQ(k, 0);
}
