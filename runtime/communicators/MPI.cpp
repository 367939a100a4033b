//===- MPI.cpp - one process a rank, collectives through OpenMPI ----------===//
//
// Each group kind is an MPI communicator split from the world by the mesh
// (Communicator::groupIndex, memberIndex): shard, replica and reshard groups
// over the data-parallel ranks of one tp index, and under tensor parallelism
// two of the tp group's, one a stream (Tp for the compute stream's
// activations, TpGrad for the comm stream's sums), so each keeps its own
// order. The comm stream's thread makes the FSDP collectives, the compute
// thread the tensor-parallel ones and the step's bookkeeping reductions: both
// may wait at once, so every MPI call is made holding one mutex
// (MPI_THREAD_SERIALIZED: never two calls at once), and a wait releases it
// between polls, each poll progressing every outstanding collective. A rank
// that fails says why and aborts the job: mpirun then stops every rank,
// naming the one that aborted.
//
// Collectives are nonblocking and polled with a deadline (--timeout), sleeping
// between polls once a wait is long, so a rank waiting on a peer neither
// spins a core nor waits forever. At the deadline it asks the group's members
// on a communicator of its own which collectives they have reached (a member
// answers whenever it polls); those that do not answer, or have not reached
// this one, are named, and the job is aborted.
//
// Start-up is bounded too: MPI_Init and the communicators' creation block
// until every rank takes part, so a watchdog thread ends the job when they
// pass --timeout, and before the communicators are made every rank reports to
// rank 0 in a polled roll call, which names the ranks that did not.
//
//===----------------------------------------------------------------------===//
#include "runtime/Communicator.h"
#include "runtime/kernels/cpu.h"

// The C API only; OpenMPI would otherwise pull in its deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace fsdp::runtime;

namespace {

// Sums bf16 values pairwise in f32, rounding each partial sum to bf16, as a
// bf16 reduction does.
void sumBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = fsdp::kernels::floatToBf16(fsdp::kernels::bf16ToFloat(a[i]) +
                                      fsdp::kernels::bf16ToFloat(b[i]));
}

// The question "which collectives have you reached?" and its answer travel on
// the communicator `probe`: these tags never meet a collective's messages.
constexpr int kAskTag = 1, kAnswerTag = 2;
// The start-up roll call's, on MPI_COMM_WORLD, which carries nothing else.
constexpr int kHereTag = 3, kGoTag = 4;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Ends the job when the blocking start-up step it watches (MPI_Init, the
// communicators' creation) has not finished within --timeout: a rank that
// never started, died or stopped holds up every other one there.
class StartupWatchdog {
public:
  StartupWatchdog(int rank, double timeoutS, const char *step) {
    thread = std::thread([=] {
      std::unique_lock<std::mutex> lock(mu);
      if (cv.wait_for(lock, std::chrono::duration<double>(timeoutS), [&] { return done; }))
        return;
      std::fprintf(stderr,
                   "fsdp-run: error: rank %d: waited %s s (--timeout) in MPI start-up (%s) for "
                   "the other ranks; one did not start, died or stopped\n",
                   rank, seconds(timeoutS).c_str(), step);
      std::fflush(stderr);
      // mpirun ends every rank once one exits before MPI_Finalize. Not
      // MPI_Abort: the main thread is inside MPI, which this thread may not
      // enter at MPI_THREAD_SERIALIZED.
      _exit(1);
    });
  }
  ~StartupWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_all();
    thread.join();
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread thread;
};

class MPICommunicator : public Communicator {
public:
  MPICommunicator(int shardSize, double timeoutS, int reshardSize, int tp)
      : Communicator(shardSize, reshardSize, tp), timeoutS(timeoutS) {
    MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (stallHere(myRank, 0))
      std::raise(SIGSTOP);
    rollCall();
    // Every rank has answered; the blocking creation below is watched still.
    StartupWatchdog watch(myRank, timeoutS, "creating the communicators");
    MPI_Comm_dup(MPI_COMM_WORLD, &probe);
    std::fill(comms, comms + kGroupKinds, MPI_COMM_NULL);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[(int)Group::World]);
    // The mesh's groups: no reshard groups without reshard_after_forward N,
    // no tp groups without tp.
    for (Group g : {Group::Shard, Group::Replica, Group::Reshard, Group::Tp, Group::TpGrad})
      if ((g != Group::Reshard || reshardSize > 0) &&
          ((g != Group::Tp && g != Group::TpGrad) || tp > 1))
        MPI_Comm_split(MPI_COMM_WORLD, groupIndex(g), memberIndex(g), &comms[(int)g]);
    MPI_Op_create(&sumBf16, /*commute=*/1, &bf16Sum);
  }
  ~MPICommunicator() override {
    MPI_Op_free(&bf16Sum);
    for (MPI_Comm &c : comms)
      if (c != MPI_COMM_NULL)
        MPI_Comm_free(&c);
    MPI_Comm_free(&probe);
  }

  int rank() const override { return myRank; }
  int worldSize() const override { return size; }

  bool allGather(Group g, const void *src, void *dst, int64_t bytes) override {
    int me = memberIndex(g);
    bool inPlace = static_cast<const char *>(src) == static_cast<char *>(dst) + me * bytes;
    MPI_Request req;
    {
      Lock lock(mu);
      if (!begin(g, "all_gather") ||
          !check(MPI_Iallgather(inPlace ? MPI_IN_PLACE : src, (int)bytes, MPI_BYTE, dst, (int)bytes,
                                MPI_BYTE, comm(g), &req)))
        return false;
    }
    return wait(&req, g, "all_gather");
  }

  bool reduceScatterAdd(Group g, const float *src, float *dst, int64_t count) override {
    std::vector<char> &buf = stagingOf(g, count * 4);
    float *part = reinterpret_cast<float *>(buf.data());
    MPI_Request req;
    {
      Lock lock(mu);
      if (!begin(g, "reduce_scatter") ||
          !check(
              MPI_Ireduce_scatter_block(src, part, (int)count, MPI_FLOAT, MPI_SUM, comm(g), &req)))
        return false;
    }
    if (!wait(&req, g, "reduce_scatter"))
      return false;
    for (int64_t k = 0; k < count; ++k)
      dst[k] += part[k];
    return true;
  }

  bool reduceScatterAddBf16(Group g, const uint16_t *src, float *dst, int64_t count) override {
    std::vector<char> &buf = stagingOf(g, count * 2);
    uint16_t *part = reinterpret_cast<uint16_t *>(buf.data());
    MPI_Request req;
    {
      Lock lock(mu);
      if (!begin(g, "reduce_scatter") ||
          !check(MPI_Ireduce_scatter_block(src, part, (int)count, MPI_UINT16_T, bf16Sum, comm(g),
                                           &req)))
        return false;
    }
    if (!wait(&req, g, "reduce_scatter"))
      return false;
    for (int64_t k = 0; k < count; ++k)
      dst[k] += fsdp::kernels::bf16ToFloat(part[k]);
    return true;
  }

  bool allReduce(Group g, float *buf, int64_t count) override {
    MPI_Request req;
    {
      Lock lock(mu);
      if (!begin(g, "all_reduce") ||
          !check(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, comm(g), &req)))
        return false;
    }
    return wait(&req, g, "all_reduce");
  }

  bool allReduceScalar(Group g, double *value) override {
    MPI_Request req;
    {
      Lock lock(mu);
      if (!begin(g, "all_reduce of a scalar") ||
          !check(MPI_Iallreduce(MPI_IN_PLACE, value, 1, MPI_DOUBLE, MPI_SUM, comm(g), &req)))
        return false;
    }
    return wait(&req, g, "all_reduce of a scalar");
  }

  void abort(const std::string &why) override {
    std::fprintf(stderr, "fsdp-run: error: %s\n", why.c_str());
    std::fflush(stderr);
    Lock lock(mu);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::string error() const override {
    Lock lock(mu);
    return reason;
  }
  int64_t stagingBytes() const override { return staging[0].capacity() + staging[1].capacity(); }

private:
  using Lock = std::lock_guard<std::recursive_mutex>;
  MPI_Comm comm(Group g) const { return comms[(int)g]; }
  // A reduce-scatter's received part: the compute stream's (over Tp) apart
  // from the comm stream's, which may wait at the same time.
  std::vector<char> &stagingOf(Group g, int64_t bytes) {
    std::vector<char> &buf = staging[g == Group::Tp ? 1 : 0];
    if ((int64_t)buf.size() < bytes)
      buf.resize(bytes);
    return buf;
  }
  // Counts the collective on its group; a test's stalled rank
  // (FSDP_TEST_STALL) stops its process here, before it begins. Under `mu`.
  bool begin(Group g, const char *what) {
    if (stallHere(myRank, ++collectives))
      std::raise(SIGSTOP);
    ++reached[(int)g];
    began(g, what);
    return true;
  }

  // Polls `req` until it completes, answering peers' questions meanwhile;
  // past the deadline, names who did not arrive and aborts the job. Holds
  // `mu` for each poll only, so that the other stream's thread polls too.
  bool wait(MPI_Request *req, Group g, const char *what) {
    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(timeoutS));
    auto nap = std::chrono::microseconds(0);
    for (;;) {
      auto now = Clock::now();
      {
        Lock lock(mu);
        int done = 0;
        if (!check(MPI_Test(req, &done, MPI_STATUS_IGNORE)))
          return false;
        if (done) {
          ended(g);
          return true;
        }
        answer();
        if (now >= deadline)
          timedOut(g, what);
      }
      // A short wait spins (collectives take microseconds); a long one naps,
      // up to half a millisecond between polls.
      if (now - start > std::chrono::microseconds(200)) {
        nap = std::min(std::chrono::microseconds(500), nap + std::chrono::microseconds(20));
        std::this_thread::sleep_for(nap);
      }
    }
  }

  // Every rank reports to rank 0, which answers all once all have: polled
  // with the deadline, so that a rank that did not start its communicator
  // (stopped, or still busy past --timeout) is named rather than waited for.
  void rollCall() {
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(timeoutS));
    auto pollAll = [&](std::vector<MPI_Request> &reqs, Clock::time_point until) {
      for (;;) {
        int all = 0;
        MPI_Testall((int)reqs.size(), reqs.data(), &all, MPI_STATUSES_IGNORE);
        if (all || Clock::now() >= until)
          return all != 0;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    };
    int one = 1;
    if (myRank == 0) {
      std::vector<int> here(size, 0);
      std::vector<MPI_Request> reqs(size - 1);
      for (int r = 1; r < size; ++r)
        MPI_Irecv(&here[r], 1, MPI_INT, r, kHereTag, MPI_COMM_WORLD, &reqs[r - 1]);
      if (!pollAll(reqs, deadline)) {
        std::vector<int> missing;
        for (int r = 1; r < size; ++r) {
          int done = 0;
          MPI_Test(&reqs[r - 1], &done, MPI_STATUS_IGNORE);
          if (!done)
            missing.push_back(r);
        }
        abort("rank 0: waited " + seconds(timeoutS) + " s (--timeout) in MPI start-up for " +
              rankList(missing) + ", which did not arrive");
      }
      std::vector<MPI_Request> go(size - 1);
      for (int r = 1; r < size; ++r)
        MPI_Isend(&one, 1, MPI_INT, r, kGoTag, MPI_COMM_WORLD, &go[r - 1]);
      pollAll(go, deadline + std::chrono::seconds(3));
    } else {
      // Rank 0 names who is missing; the others wait a little longer so
      // that its report comes first.
      int go = 0;
      std::vector<MPI_Request> reqs(2);
      MPI_Isend(&one, 1, MPI_INT, 0, kHereTag, MPI_COMM_WORLD, &reqs[0]);
      MPI_Irecv(&go, 1, MPI_INT, 0, kGoTag, MPI_COMM_WORLD, &reqs[1]);
      if (!pollAll(reqs, deadline + std::chrono::seconds(3)))
        abort("rank " + std::to_string(myRank) + ": waited " + seconds(timeoutS) +
              " s (--timeout) in MPI start-up for rank 0, which did not answer");
    }
  }

  // Answers every pending question with the collectives reached per group
  // and where this rank waits.
  struct Answer {
    long long reached[kGroupKinds];
    Whereabouts where;
  };
  void answer() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kAskTag, probe, &flag, &st);
      if (!flag)
        return;
      int q = 0;
      MPI_Recv(&q, 1, MPI_INT, st.MPI_SOURCE, kAskTag, probe, MPI_STATUS_IGNORE);
      Answer a{};
      std::copy(reached, reached + kGroupKinds, a.reached);
      a.where = whereabouts();
      MPI_Send(&a, (int)sizeof a, MPI_BYTE, st.MPI_SOURCE, kAnswerTag, probe);
    }
  }

  // Asks every rank (not only the group's members: the one holding the
  // group up may wait on another group) where it is, names the members that
  // did not answer or have not reached this collective, says where the
  // ranks are, and aborts the job.
  [[noreturn]] void timedOut(Group g, const char *what) {
    std::vector<int> members = groupRanks(*this, g);
    std::vector<Answer> answers(size);
    std::vector<MPI_Request> asks, replies(size, MPI_REQUEST_NULL);
    int q = 0;
    for (int r = 0; r < size; ++r)
      if (r != myRank) {
        MPI_Irecv(&answers[r], (int)sizeof(Answer), MPI_BYTE, r, kAnswerTag, probe, &replies[r]);
        asks.emplace_back();
        MPI_Isend(&q, 1, MPI_INT, r, kAskTag, probe, &asks.back());
      }
    // A rank that is polling answers within milliseconds; give them a
    // second, answering the others' questions meanwhile.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (int all = 0; !all && std::chrono::steady_clock::now() < until;) {
      MPI_Testall((int)replies.size(), replies.data(), &all, MPI_STATUSES_IGNORE);
      answer();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<const Whereabouts *> where(size);
    answers[myRank].where = whereabouts();
    for (int r = 0; r < size; ++r) {
      int done = r == myRank;
      if (!done)
        MPI_Test(&replies[r], &done, MPI_STATUS_IGNORE);
      if (done)
        where[r] = &answers[r].where;
    }
    std::vector<int> missing;
    for (int r : members)
      if (r != myRank && (!where[r] || answers[r].reached[(int)g] < reached[(int)g]))
        missing.push_back(r);
    std::string at = whereRanksAre(where);
    std::string why = "rank " + std::to_string(myRank) + ": waited " + seconds(timeoutS) +
                      " s (--timeout) at " + what + " over " + groupName(g) + " for " +
                      (missing.empty() ? std::string("its peers")
                                       : rankList(missing) + ", which did not arrive") +
                      (at.empty() ? "" : "; " + at);
    abort(why);
    std::abort(); // MPI_Abort does not return
  }

  bool check(int rc) {
    if (rc == MPI_SUCCESS)
      return true;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    reason = std::string("MPI: ") + std::string(text, len);
    return false;
  }

  double timeoutS;
  int myRank = 0, size = 1;
  MPI_Comm comms[kGroupKinds]; // each Group's; MPI_COMM_NULL where the mesh has none
  MPI_Comm probe;
  mutable std::recursive_mutex mu;     // held by every MPI call (see the top)
  long long reached[kGroupKinds] = {}; // collectives begun per Group
  int64_t collectives = 0;
  MPI_Op bf16Sum;
  std::vector<char> staging[2]; // the comm stream's, the compute stream's
  std::string reason;
};

} // namespace

bool fsdp::runtime::initMPI(int *argc, char ***argv, int *rank, int *size, double timeoutS) {
  // The launcher's rank, for the watchdog's message before MPI knows it.
  const char *launcherRank = std::getenv("OMPI_COMM_WORLD_RANK");
  int before = launcherRank ? std::atoi(launcherRank) : 0;
  if (stallHere(before, -1))
    std::raise(SIGSTOP);
  int provided = 0;
  {
    StartupWatchdog watch(before, timeoutS, "MPI_Init");
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      return false;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return provided >= MPI_THREAD_SERIALIZED;
}

void fsdp::runtime::finalizeMPI() { MPI_Finalize(); }

void fsdp::runtime::abortMPI() { MPI_Abort(MPI_COMM_WORLD, 1); }

std::unique_ptr<Communicator> fsdp::runtime::mpiCommunicator(int shardSize, double timeoutS,
                                                             int reshardSize, int tp) {
  return std::make_unique<MPICommunicator>(shardSize, timeoutS, reshardSize, tp);
}
