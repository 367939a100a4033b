//===- NCCL.h - the NCCL communicators of one GPU rank -----------*- C++ -*-===//
//
// One process a rank, one GPU a rank. The communicators are NCCL's, split
// from the world into Communicator.h's groups by its Mesh (color: the group,
// key: the member index), under tensor parallelism one tp communicator a
// stream (Group::Tp on the compute stream, Group::TpGrad on the comm
// stream), as the other backends have. They are created
// non-blocking, so that no call waits without bound: every wait here polls
// NCCL's asynchronous errors and the peers' failure notes, and a rank that
// fails aborts its communicators and tells its peers (under mpirun by
// MPI_Abort, with a shared id file by a note beside it), so that they stop
// with its reason instead of hanging.
//
// Plain C++: the CUDA and NCCL types stay in NCCL.cpp (cudaStream_t and
// cudaEvent_t are forward-declared as cuda_runtime_api.h declares them).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_BACKENDS_NCCL_H
#define FSDP_RUNTIME_BACKENDS_NCCL_H

#include "runtime/Communicator.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

namespace fsdp::runtime {

/// How the ranks find each other (how the NCCL unique id travels).
struct NcclBootstrap {
  enum class Kind {
    Single, // world size 1: no other rank
    Mpi,    // under mpirun: rank 0's id by MPI_Bcast (initMPI must have run)
    File,   // one node, no MPI: rank 0 writes the id to idFile, the others read it
  };
  Kind kind = Kind::Single;
  int rank = 0, worldSize = 1;
  std::string idFile;
  /// Seconds to wait for the id file and for NCCL's initialisation.
  double timeoutS = 300;
};

/// This process's rank on its node (the GPU it takes is this modulo the
/// device count): under MPI from the shared-memory split of the world, with an
/// id file the rank itself (one node), else 0.
int ncclLocalRank(const NcclBootstrap &bootstrap);

class NcclComms {
public:
  enum class DType { U8, F32, BF16, F64 };

  /// Creates the world communicator and its shard and replica groups (and,
  /// with a reshardSize N, its reshard groups of N consecutive ranks; with
  /// tp > 1, its two tp groups) on the current CUDA device. Returns "" or the
  /// error (naming the id file, the timeout or NCCL's reason).
  static std::string create(const NcclBootstrap &bootstrap, int shardSize, int reshardSize, int tp,
                            std::unique_ptr<NcclComms> *out);
  ~NcclComms();

  int rank() const { return myRank; }
  int worldSize() const { return size; }
  int groupSize(Group g) const;
  int memberIndex(Group g) const;

  // Collectives, enqueued on `stream` (sums for the reductions); "" or the
  // error. In place where the pointers say so, as NCCL defines it.
  std::string allGather(Group g, const void *src, void *dst, int64_t countPerMember, DType t,
                        cudaStream_t stream);
  std::string reduceScatter(Group g, const void *src, void *dst, int64_t countPerMember, DType t,
                            cudaStream_t stream);
  std::string allReduce(Group g, const void *src, void *dst, int64_t count, DType t,
                        cudaStream_t stream);

  /// "" while every communicator is healthy and no peer has stopped; else
  /// why (NCCL's asynchronous error, or "stopped: " and the failing peer's
  /// own message).
  std::string check();
  /// Waits for `event` (or everything enqueued on `stream`), polling
  /// check(): "" or why it cannot complete. With peers, no wait lasts longer
  /// than the bootstrap's timeout (--timeout) without a collective
  /// completing: a peer killed or stopped leaves no note and NCCL may not
  /// notice it. Such a wait ends with --timeout's report of where every rank
  /// is ("waited S s (--timeout) at ..."; see at()).
  std::string waitEvent(cudaEvent_t event);
  std::string waitStream(cudaStream_t stream);
  /// The longest a wait may last (0: no bound, a world of one).
  double waitLimitS() const { return size > 1 ? boot.timeoutS : 0; }

  /// --timeout's report by instruction (Communicator.h's Whereabouts). The device
  /// executor names the next collective it enqueues (`what`: its kind, as
  /// the other backends name it, "all_gather"); that collective, enqueued by
  /// the next allGather/reduceScatter/allReduce call, is then bracketed by
  /// two events, so that the rank's place is the first named collective its
  /// device has not finished (waiting in it, or not yet at it), else the
  /// host communicator's. Each rank publishes its place in a shared memory
  /// segment named by the NCCL id, which a peer reads when its wait times
  /// out: a stopped rank's last place stays readable, and no question goes
  /// through a communicator that may be the stuck one.
  void at(Group g, const std::string &site, const char *what);
  /// The host communicator's part: it counts its own collectives (and a
  /// test's FSDP_TEST_STALL stops this process before the one named) and
  /// numbers the device's on its groups, so that one sequence orders both.
  struct HostHooks {
    Communicator *comm = nullptr;
    /// Begins and ends a collective on the host communicator's count.
    std::function<Whereabouts(Group, const char *)> count;
  };
  void setHostHooks(HostHooks hooks) { host = std::move(hooks); }
  /// Counts a collective (of either kind); FSDP_TEST_STALL=R:N stops rank
  /// R's process (SIGSTOP) before its Nth, after its device has drained and
  /// its place ("has not reached" that collective) is published.
  void countCollective(const char *what, const std::function<void()> &named);
  /// This rank's place now; publish() writes it for the peers (and
  /// returns it).
  Whereabouts whereabouts();
  Whereabouts publish();

  /// Stops this rank: aborts every communicator (ncclCommAbort) and tells
  /// the peers why (the first cause only). Under MPI it prints `why` as
  /// fsdp-run's error and ends the job (MPI_Abort), as the MPI backend does.
  void abort(const std::string &why);
  bool aborted() const { return isAborted; }
  /// What was sent to the peers, or came from one.
  const std::string &reason() const { return why; }

private:
  NcclComms() = default;
  std::string finishCall(int result, void *comm, const char *what);
  std::string waitReady(void *comm, const char *what, double timeoutS);
  std::string peerFailure();
  void *comm(Group g) const;
  std::string poll(const std::function<int()> &query); // a cudaError_t
  std::string timedOut(double waitedS);
  void openPlaces();
  void closePlaces();
  void bracket(cudaStream_t stream, bool begin);

  NcclBootstrap boot;
  int myRank = 0, size = 1;
  Mesh mesh;
  void *comms[kGroupKinds] = {}; // each Group's ncclComm_t; null where the mesh has none
  uint64_t tag = 0;              // identifies this launch in the failure note
  bool isAborted = false;
  std::string why;
  double lastPeerCheck = 0;

  // --timeout's report: the named device collectives not yet known to be
  // complete, oldest first, and spare events for the next ones.
  struct Named {
    Whereabouts where;
    const char *what;
    cudaEvent_t begin = nullptr, end = nullptr;
  };
  std::deque<Named> ledger;
  std::vector<cudaEvent_t> spare;
  bool naming = false; // at() named the next collective enqueued
  Named next;
  int64_t settled = 0, collectives = 0;
  const char *hostWhat = "";
  HostHooks host;
  void *places = nullptr; // the shared segment: one slot a rank
  std::string placesName;
};

/// Communicator.h's Communicator over NCCL for host memory: the step's
/// bookkeeping (barriers, the reported loss) and runtime/io's checkpoints and
/// full weights. Each call copies through a device staging buffer on its own
/// stream and waits (polling) for the result.
std::unique_ptr<Communicator> ncclHostCommunicator(NcclComms &comms, int shardSize,
                                                   int reshardSize = 0, int tp = 1);

} // namespace fsdp::runtime

#endif
