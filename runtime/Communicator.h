//===- Communicator.h - collectives behind one interface ---------*- C++ -*-===//
//
// One Communicator per rank. With tensor parallelism of degree T (the
// program's tp; 1 without) rank r sits at data-parallel index d = r / T and
// tensor-parallel index t = r % T, and the FSDP groups are over the ranks of
// one t: shard groups of `shardSize` G consecutive d (member d % G), replica
// groups of the ranks holding the same shard (member d / G) and, with a
// `reshardSize` N (reshard_after_forward = N, which divides G), reshard
// groups of N consecutive d (member d % N). A tp group is the T ranks of
// one d (member t); the compute stream's tensor-parallel collectives run on
// Group::Tp, the comm stream's (partial gradients' sums, the grad norm's)
// on Group::TpGrad, the same ranks: each stream keeps its own order. Every
// collective either completes on every member or fails on every member:
// a rank that stops aborts its peers, which then report it instead of
// waiting forever.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_COMMUNICATOR_H
#define FSDP_RUNTIME_COMMUNICATOR_H

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fsdp::runtime {

enum class Group { Shard, Replica, World, Reshard, Tp, TpGrad };
inline constexpr int kGroupKinds = 6;

/// The mesh of a world (above): each group kind's size, and rank r's group
/// (which one, from 0: a backend's key), member index and peers. One
/// definition for every backend.
struct Mesh {
  int worldSize = 1, shardSize = 1, reshardSize = 0, tp = 1;
  int groupSize(Group g) const;
  int memberIndex(Group g, int rank) const;
  int groupIndex(Group g, int rank) const;
  /// The world rank of member `m` of rank `rank`'s group of kind `g`.
  int memberRank(Group g, int rank, int m) const;
};

/// Where a rank is among its collectives, for --timeout's report. Plain
/// bytes: the MPI backend sends it to a rank that asks.
struct Whereabouts {
  enum State : int32_t { Before, Waiting, Past };
  /// What the caller named it (Communicator::at): the program instruction
  /// ("step 2 micro_step 1/2 comm[3] all_gather unit 'h.0'") or a collective
  /// outside the program ("step 2: the step's loss all-reduce"); else the
  /// backend's name of the collective.
  char site[512] = "";
  int32_t group = -1;   // its Group; -1: no collective yet
  int32_t state = Past; // Before: named but not begun (busy or stopped before it)
  int32_t within = 0;   // `site` names several collectives (at's `several`)
  int64_t number = 0;   // its number on its group, counted from 1
  int64_t begun = 0;    // collectives begun in all: the rank's progress
  /// Comparable across ranks: every rank makes the same collectives in the
  /// same order, so a smaller value is behind.
  int64_t progress() const { return 2 * begun - (state == Waiting ? 1 : 0); }
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  Mesh mesh() const { return {worldSize(), shardSize, reshardSize, tp}; }
  int groupSize(Group g) const { return mesh().groupSize(g); }
  int memberIndex(Group g) const { return mesh().memberIndex(g, rank()); }
  /// Which group of kind `g` this rank is in, from 0 (a backend's key).
  int groupIndex(Group g) const { return mesh().groupIndex(g, rank()); }
  /// The world rank of member `m` of this rank's group of kind `g`.
  int memberRank(Group g, int m) const { return mesh().memberRank(g, rank(), m); }
  int tpSize() const { return tp; }
  /// This rank's data-parallel index, r / tp (its rank without tp).
  int dpRank() const { return rank() / tp; }

  /// dst[j*bytes .. (j+1)*bytes) = member j's src, for every member j. src
  /// may be this member's own slot of dst (in place).
  virtual bool allGather(Group g, const void *src, void *dst, int64_t bytes) = 0;
  /// dst[k] += sum over members j of member j's src[m*count + k], m this member.
  virtual bool reduceScatterAdd(Group g, const float *src, float *dst, int64_t count) = 0;
  /// The same over bf16 values: the sum over members is rounded to bf16
  /// (round to nearest even) and added to the f32 dst.
  virtual bool reduceScatterAddBf16(Group g, const uint16_t *src, float *dst, int64_t count) = 0;
  /// buf = sum over members of their buf, in place.
  virtual bool allReduce(Group g, float *buf, int64_t count) = 0;
  virtual bool allReduceScalar(Group g, double *value) = 0;

  /// Stops every peer's current and future collectives with `why`.
  virtual void abort(const std::string &why) = 0;
  /// Why collectives fail, once they do.
  virtual std::string error() const = 0;
  /// Bytes this rank's communicator holds outside the arena.
  virtual int64_t stagingBytes() const = 0;

  /// Names the collective this rank makes next on `g` (with `several`, the
  /// ones after it too, until the next call: a save makes several), for
  /// --timeout's report of where each rank waits.
  void at(Group g, const std::string &site, bool several = false);
  Whereabouts whereabouts() const;

protected:
  Communicator(int shardSize, int reshardSize = 0, int tp = 1)
      : shardSize(shardSize), reshardSize(reshardSize), tp(tp) {}
  /// The backends' part: a collective on `g` begins (`what` names it when
  /// the caller did not) and ends.
  void began(Group g, const char *what);
  void ended(Group g);
  int shardSize;
  int reshardSize; // 0: no reshard groups
  int tp;          // the tensor-parallel degree (1: none)

private:
  // Two places: the compute stream's tensor-parallel collectives (Group::Tp)
  // are made by another thread than the rest, and both may wait at once.
  static int placeOf(Group g) { return g == Group::Tp ? 1 : 0; }
  mutable std::mutex whereMu; // a peer's thread reads it at its timeout
  Whereabouts where[2];
  bool named[2] = {}; // `where[i].site` names the next collective
  bool holds[2] = {}; // ... and the ones after it; else the backend names them
  int64_t numbers[kGroupKinds] = {};
  int64_t begun = 0; // collectives begun on either
};

/// N ranks as threads of this process, collectives through shared memory. A
/// rank that waits on its peers longer than `timeoutS` (--timeout) stops every
/// rank, naming the members that did not arrive.
class ThreadsWorld;
std::shared_ptr<ThreadsWorld> createThreadsWorld(int worldSize, int shardSize,
                                                 double timeoutS = 600, int reshardSize = 0,
                                                 int tp = 1);
std::unique_ptr<Communicator> threadsCommunicator(std::shared_ptr<ThreadsWorld> world, int rank);

/// One process a rank under mpirun (OpenMPI). initMPI is called first and
/// says whether MPI gives the thread support the two streams need. MPI_Init
/// blocks until every rank takes part: past `timeoutS` a watchdog says so and
/// ends the job (as mpiCommunicator's start-up does, naming the ranks that
/// did not arrive).
bool initMPI(int *argc, char ***argv, int *rank, int *size, double timeoutS = 600);
void finalizeMPI();
void abortMPI();
/// Every collective is nonblocking and polled: a wait longer than `timeoutS`
/// asks the group who is there, names those that did not answer or have not
/// reached this collective, and aborts the job.
std::unique_ptr<Communicator> mpiCommunicator(int shardSize, double timeoutS = 600,
                                              int reshardSize = 0, int tp = 1);

/// The world ranks of the members of `comm`'s group `g`, in member order.
std::vector<int> groupRanks(const Communicator &comm, Group g);
/// "the shard group", "the replica group", "the world", "the reshard group",
/// "the tp group", "the tp group's comm stream".
const char *groupName(Group g);
/// "rank 1", "ranks 1, 3".
std::string rankList(const std::vector<int> &ranks);
/// --timeout's report of where the world is: which ranks are behind (the
/// least progress) and where, then where the others wait, grouped by place;
/// `all[r]` is rank r's whereabouts, or absent when it did not answer.
/// "" when every rank that answered is at the same place and none is absent.
std::string whereRanksAre(const std::vector<const Whereabouts *> &all);
/// Test-only, for the --timeout tests: with FSDP_TEST_STALL=R:N in the
/// environment, true at rank R's Nth collective (counted from 1), which then
/// stops arriving (a thread waits until the world is aborted; an MPI process
/// stops itself with SIGSTOP). Under MPI, N = 0 stops rank R in start-up
/// after MPI_Init (before its communicators) and N = -1 before MPI_Init.
bool stallHere(int rank, int64_t collective);

} // namespace fsdp::runtime

#endif
