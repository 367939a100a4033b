//===- WhereaboutsTest.cpp - where a rank is, for --timeout's report -----===//
//
// A communicator's whereabouts through a collective's life (named, begun,
// ended), names that hold for several collectives, and the report that
// places the ranks, least progress first.
//
//===----------------------------------------------------------------------===//
#include "runtime/Communicator.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace fsdp::runtime;

namespace {

Whereabouts at(const char *site, Group g, int32_t state, int64_t number, int64_t begun) {
  Whereabouts w;
  std::snprintf(w.site, sizeof w.site, "%s", site);
  w.group = (int32_t)g;
  w.state = state;
  w.number = number;
  w.begun = begun;
  return w;
}

TEST(Whereabouts, FollowsACollective) {
  auto world = createThreadsWorld(1, 1, 5);
  auto comm = threadsCommunicator(world, 0);
  Whereabouts w = comm->whereabouts();
  EXPECT_EQ(w.group, -1);
  EXPECT_EQ(w.begun, 0);

  comm->at(Group::World, "step 1: the step's loss all-reduce");
  w = comm->whereabouts();
  EXPECT_EQ(w.state, Whereabouts::Before);
  EXPECT_EQ(w.number, 1);
  EXPECT_STREQ(w.site, "step 1: the step's loss all-reduce");
  EXPECT_EQ(w.progress(), 0);

  double v = 1;
  ASSERT_TRUE(comm->allReduceScalar(Group::World, &v));
  w = comm->whereabouts();
  EXPECT_EQ(w.state, Whereabouts::Past);
  EXPECT_EQ(w.number, 1);
  EXPECT_EQ(w.begun, 1);
  EXPECT_EQ(w.group, (int32_t)Group::World);
  EXPECT_STREQ(w.site, "step 1: the step's loss all-reduce");

  // Not named: the backend's name, numbered on its own group.
  float buf[2] = {1, 2};
  ASSERT_TRUE(comm->allGather(Group::Shard, buf, buf, 4));
  w = comm->whereabouts();
  EXPECT_STREQ(w.site, "all_gather");
  EXPECT_EQ(w.number, 1);
  EXPECT_EQ(w.begun, 2);

  // A name given for several holds until the next.
  comm->at(Group::World, "step 1: the checkpoint save", true);
  ASSERT_TRUE(comm->allReduceScalar(Group::World, &v));
  ASSERT_TRUE(comm->allReduceScalar(Group::World, &v));
  w = comm->whereabouts();
  EXPECT_STREQ(w.site, "step 1: the checkpoint save");
  EXPECT_EQ(w.within, 1);
  EXPECT_EQ(w.number, 3);
  comm->at(Group::World, "step 1: the stop agreement");
  ASSERT_TRUE(comm->allReduceScalar(Group::World, &v));
  ASSERT_TRUE(comm->allReduceScalar(Group::World, &v));
  w = comm->whereabouts();
  EXPECT_STREQ(w.site, "all_reduce of a scalar");
  EXPECT_EQ(w.within, 0);
  EXPECT_EQ(w.begun, 6);
}

TEST(Whereabouts, AllAtOnePlaceSaysNothing) {
  Whereabouts a = at("x", Group::Shard, Whereabouts::Waiting, 3, 5);
  EXPECT_EQ(whereRanksAre({&a, &a, &a}), "");
}

TEST(Whereabouts, NamesTheRankBehindFirst) {
  Whereabouts ahead = at("step 3 micro_step 1/1 comm[14] reduce_scatter unit 'h.1'", Group::Shard,
                         Whereabouts::Waiting, 58, 60);
  Whereabouts behind = at("step 3 micro_step 1/1 comm[12] all_gather unit 'h.2'", Group::Shard,
                          Whereabouts::Waiting, 57, 59);
  EXPECT_EQ(whereRanksAre({&ahead, &behind, &ahead, &ahead}),
            "rank 1 is behind: it waits at step 3 micro_step 1/1 comm[12] all_gather unit 'h.2' "
            "(collective #57 on the shard group); ranks 0, 2, 3 wait at step 3 micro_step 1/1 "
            "comm[14] reduce_scatter unit 'h.1' (collective #58 on the shard group)");
}

TEST(Whereabouts, NotReachedIsBehindWaitingThere) {
  // Waiting at collective 20 is ahead of not having begun it.
  Whereabouts waits = at("c", Group::World, Whereabouts::Waiting, 4, 20);
  Whereabouts before = at("c", Group::World, Whereabouts::Before, 4, 19);
  Whereabouts past = at("b", Group::World, Whereabouts::Past, 3, 19);
  EXPECT_LT(before.progress(), waits.progress());
  EXPECT_EQ(before.progress(), past.progress());
  EXPECT_EQ(
      whereRanksAre({&waits, &before, &past}),
      "rank 1 is behind: it has not reached c (collective #4 on the world); rank 2 is behind: "
      "it is past b (collective #3 on the world), at no collective since; rank 0 waits at "
      "c (collective #4 on the world)");
}

TEST(Whereabouts, AnAbsentRankNamesNoneBehind) {
  Whereabouts a = at("x", Group::Replica, Whereabouts::Waiting, 1, 5);
  Whereabouts b = at("y", Group::Shard, Whereabouts::Waiting, 4, 4);
  EXPECT_EQ(whereRanksAre({&a, &a, &b, nullptr}),
            "rank 3 did not answer (stopped, or busy outside a collective); rank 2 waits at y "
            "(collective #4 on the shard group); ranks 0, 1 wait at x (collective #1 on the "
            "replica group)");
  EXPECT_EQ(whereRanksAre({&a, nullptr}),
            "rank 1 did not answer (stopped, or busy outside a collective); rank 0 waits at x "
            "(collective #1 on the replica group)");
}

TEST(Whereabouts, ManyRanksAsRanges) {
  // 2048 ranks: rank 1000 behind, the others in runs.
  Whereabouts a = at("x", Group::Shard, Whereabouts::Waiting, 9, 9);
  Whereabouts b = at("y", Group::Shard, Whereabouts::Before, 8, 8);
  std::vector<const Whereabouts *> all(2048, &a);
  all[1000] = &b;
  all[1002] = nullptr;
  all[5] = all[7] = nullptr;
  all[8] = nullptr;
  EXPECT_EQ(whereRanksAre(all),
            "ranks 5, 7, 8, 1002 did not answer (stopped, or busy outside a collective); rank 1000 "
            "has not reached y (collective #8 on the shard group); ranks 0-4, 6, 9-999, 1001, "
            "1003-2047 wait at x (collective #9 on the shard group)");
}

} // namespace
