//===- NCCL.cpp - NCCL communicators of one GPU rank ----------------------===//
//
// See NCCL.h. Every communicator is created non-blocking (config.blocking =
// 0): a call may answer ncclInProgress, after which ncclCommGetAsyncError is
// polled until it settles, so a dead or failed peer is noticed instead of
// waited for. The bootstrap's id file PATH has a failure note beside it,
// PATH.failed: the first rank to fail writes its reason there, tagged with
// this launch's id, and every poll of its peers looks for it. Each rank
// also publishes its place among the collectives (NCCL.h, at()) in a shared
// memory segment named by the id, /fsdp-places-TAG, for --timeout's report;
// its name is unlinked once the world communicator is formed.
//
//===----------------------------------------------------------------------===//
#include "runtime/communicators/NCCL.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#if FSDP_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace fsdp::runtime;

namespace {

constexpr char kIdMagic[8] = {'F', 'S', 'D', 'P', 'N', 'C', 'I', 'D'};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void idle() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

ncclComm_t asComm(void *c) { return static_cast<ncclComm_t>(c); }

// Every group's communicator is split from the world's: each is destroyed
// or aborted before it.
constexpr Group kChildrenFirst[] = {Group::TpGrad,  Group::Tp,    Group::Reshard,
                                    Group::Replica, Group::Shard, Group::World};

ncclDataType_t ncclType(NcclComms::DType t) {
  switch (t) {
  case NcclComms::DType::U8:
    return ncclUint8;
  case NcclComms::DType::F32:
    return ncclFloat32;
  case NcclComms::DType::BF16:
    return ncclBfloat16;
  case NcclComms::DType::F64:
    return ncclFloat64;
  }
  return ncclUint8;
}

uint64_t fnv(const void *data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string ncclText(ncclResult_t r, ncclComm_t comm) {
  std::string s = std::string("NCCL: ") + ncclGetErrorString(r);
  const char *last = ncclGetLastError(comm);
  if (last && *last)
    s += ": " + std::string(last);
  return s;
}

std::string failurePath(const NcclBootstrap &b) { return b.idFile + ".failed"; }

// One rank's slot of the shared segment of places: written by its rank
// only, under a sequence count (odd while writing), read by any peer.
struct Place {
  std::atomic<uint64_t> seq;
  double beat; // now() when written: the clock is the node's, shared
  Whereabouts where;
};

std::string secondsText(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

// Rank 0's side of the file bootstrap: the id through a temporary renamed
// into place, so a reader sees the whole file or none.
std::string writeId(const std::string &path, const ncclUniqueId &id) {
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  FILE *f = std::fopen(tmp.c_str(), "wb");
  bool ok = f && std::fwrite(kIdMagic, 1, 8, f) == 8 &&
            std::fwrite(&id, 1, sizeof id, f) == sizeof id && std::fflush(f) == 0 &&
            ::fsync(fileno(f)) == 0;
  if (f)
    ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    return path + ": cannot write the NCCL id: " + err;
  }
  return "";
}

// The other ranks' side: polls for the file until the timeout.
std::string readId(const NcclBootstrap &b, ncclUniqueId *id) {
  double deadline = now() + b.timeoutS;
  for (;;) {
    FILE *f = std::fopen(b.idFile.c_str(), "rb");
    if (f) {
      char magic[8];
      bool ok = std::fread(magic, 1, 8, f) == 8 && std::memcmp(magic, kIdMagic, 8) == 0 &&
                std::fread(id, 1, sizeof *id, f) == sizeof *id;
      std::fclose(f);
      if (ok)
        return "";
      return b.idFile + ": not an NCCL id written by fsdp-run";
    }
    if (now() > deadline) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", b.timeoutS);
      return b.idFile + ": no NCCL id after " + secs +
             " s (rank 0 writes it: start rank 0 with the same --nccl-id-file)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

} // namespace

int fsdp::runtime::ncclLocalRank(const NcclBootstrap &b) {
  switch (b.kind) {
  case NcclBootstrap::Kind::Single:
    return 0;
  case NcclBootstrap::Kind::File:
    return b.rank;
  case NcclBootstrap::Kind::Mpi: {
#if FSDP_HAVE_MPI
    MPI_Comm local;
    int localRank = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, b.rank, MPI_INFO_NULL, &local) !=
        MPI_SUCCESS)
      return b.rank;
    MPI_Comm_rank(local, &localRank);
    MPI_Comm_free(&local);
    return localRank;
#else
    return b.rank;
#endif
  }
  }
  return 0;
}

int NcclComms::groupSize(Group g) const { return mesh.groupSize(g); }

int NcclComms::memberIndex(Group g) const { return mesh.memberIndex(g, myRank); }

void *NcclComms::comm(Group g) const { return comms[(int)g]; }

std::string NcclComms::peerFailure() {
  if (boot.kind != NcclBootstrap::Kind::File)
    return "";
  double t = now();
  if (t - lastPeerCheck < 0.01)
    return "";
  lastPeerCheck = t;
  std::ifstream in(failurePath(boot));
  if (!in)
    return "";
  std::string tagLine, message;
  std::getline(in, tagLine);
  std::getline(in, message);
  if (tagLine != std::to_string(tag)) // a note of another launch
    return "";
  return message.empty() ? "a peer stopped" : message;
}

std::string NcclComms::check() {
  if (isAborted)
    return why.empty() ? "stopped" : why;
  for (auto g = std::rbegin(kChildrenFirst); g != std::rend(kChildrenFirst); ++g) {
    void *c = comm(*g);
    if (!c)
      continue;
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(asComm(c), &state);
    if (r != ncclSuccess)
      return ncclText(r, asComm(c));
    if (state != ncclSuccess && state != ncclInProgress)
      return ncclText(state, asComm(c));
  }
  // Marked as the peer's, as the other backends mark it: this rank's own
  // hints (FSDP_CUDA_SYNC) do not apply to it.
  std::string peer = peerFailure();
  return peer.empty() ? peer : "stopped: " + peer;
}

// Settles a non-blocking call: polls the communicator until it leaves
// ncclInProgress, watching the peers (and, for initialisation, the clock).
std::string NcclComms::waitReady(void *c, const char *what, double timeoutS) {
  double deadline = timeoutS > 0 ? now() + timeoutS : 0;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(asComm(c), &state);
    if (r != ncclSuccess)
      return std::string(what) + ": " + ncclText(r, asComm(c));
    if (state == ncclSuccess)
      return "";
    if (state != ncclInProgress)
      return std::string(what) + ": " + ncclText(state, asComm(c));
    std::string peer = peerFailure();
    if (!peer.empty())
      return std::string(what) + ": stopped: " + peer;
    if (deadline > 0 && now() > deadline) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeoutS);
      return std::string(what) + ": not complete after " + secs +
             " s (does every rank run with the same plan and bootstrap?)";
    }
    idle();
  }
}

std::string NcclComms::finishCall(int result, void *c, const char *what) {
  ncclResult_t r = static_cast<ncclResult_t>(result);
  if (r == ncclInProgress)
    return waitReady(c, what, waitLimitS());
  if (r != ncclSuccess)
    return std::string(what) + ": " + ncclText(r, asComm(c));
  return "";
}

std::string NcclComms::create(const NcclBootstrap &b, int shardSize, int reshardSize, int tp,
                              std::unique_ptr<NcclComms> *out) {
  std::unique_ptr<NcclComms> c(new NcclComms());
  c->boot = b;
  c->myRank = b.rank;
  c->size = b.worldSize;
  c->mesh = {b.worldSize, shardSize, reshardSize, tp};
  if (tp < 1 || b.worldSize % tp != 0)
    return "tp " + std::to_string(tp) + " does not divide the world of " +
           std::to_string(b.worldSize);
  if (shardSize < 1 || (b.worldSize / tp) % shardSize != 0)
    return "shard size " + std::to_string(shardSize) + " does not divide the " +
           std::to_string(b.worldSize / tp) + " data-parallel ranks";
  if (reshardSize < 0 || (reshardSize > 0 && shardSize % reshardSize != 0))
    return "reshard size " + std::to_string(reshardSize) + " does not divide the shard size " +
           std::to_string(shardSize);

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (b.rank == 0 || b.kind == NcclBootstrap::Kind::Single) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      return std::string("ncclGetUniqueId: NCCL: ") + ncclGetErrorString(r);
  }
  if (b.kind == NcclBootstrap::Kind::Mpi) {
#if FSDP_HAVE_MPI
    if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
      return "MPI_Bcast of the NCCL id failed";
#else
    return "this fsdp-run was built without MPI: start the ranks with --rank R --nccl-id-file PATH";
#endif
  } else if (b.kind == NcclBootstrap::Kind::File) {
    if (b.rank == 0) {
      // A note of an earlier launch must not stop this one.
      std::remove(failurePath(b).c_str());
      std::string err = writeId(b.idFile, id);
      if (!err.empty())
        return err;
    } else {
      std::string err = readId(b, &id);
      if (!err.empty())
        return err;
    }
  }
  c->tag = fnv(&id, sizeof id);
  c->openPlaces();

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t world = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&world, b.worldSize, id, b.rank, &config);
  c->comms[(int)Group::World] = world;
  std::string err;
  if (r != ncclSuccess && r != ncclInProgress)
    err = "ncclCommInitRankConfig: " + ncclText(r, world);
  else
    err = c->waitReady(world, "ncclCommInitRankConfig", b.timeoutS);
  // Every rank has opened the places once the world is formed (or none
  // will be: the launch fails); the name goes, the mappings stay.
  c->closePlaces();
  if (err.empty() && b.kind == NcclBootstrap::Kind::File && b.rank == 0)
    std::remove(b.idFile.c_str()); // every rank has joined: the id is spent
  // The groups, one split at a time (a non-blocking parent takes one call at
  // a time). On a non-blocking parent, ncclCommSplit answers ncclInProgress
  // with *newcomm still NULL: NCCL's init job stores the child there when it
  // completes (the parent, whose polling completes the job, reads
  // ncclInProgress until then). So the child is read only after the parent
  // has settled, from a slot that outlives this call (the job may still write
  // it after a failure here; it is leaked then, the process is ending).
  auto split = [&](int color, int key, void **child, const char *what) {
    if (!err.empty())
      return;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t *slot = new ncclComm_t(nullptr);
    ncclResult_t sr = ncclCommSplit(world, color, key, slot, &cfg);
    if (sr != ncclSuccess && sr != ncclInProgress) {
      err = std::string(what) + ": " + ncclText(sr, world);
      return;
    }
    err = c->waitReady(world, what, b.timeoutS);
    ncclComm_t newComm = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    // Should the parent settle before the job's store, poll on (bounded).
    for (double deadline = now() + b.timeoutS; err.empty() && !newComm;) {
      if (now() > deadline) {
        err = std::string(what) + ": NCCL gave no communicator";
        break;
      }
      idle();
      err = c->waitReady(world, what, b.timeoutS);
      newComm = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    }
    if (err.empty())
      err = c->waitReady(newComm, what, b.timeoutS);
    *child = newComm; // aborted with the others if anything failed
    if (err.empty())
      delete slot;
  };
  // Each group kind split by the mesh (Communicator.h): color its group,
  // key its member index.
  auto splitBy = [&](Group g, const char *what) {
    split(c->mesh.groupIndex(g, b.rank), c->mesh.memberIndex(g, b.rank), &c->comms[(int)g], what);
  };
  splitBy(Group::Shard, "ncclCommSplit (shard group)");
  splitBy(Group::Replica, "ncclCommSplit (replica group)");
  if (reshardSize > 0)
    splitBy(Group::Reshard, "ncclCommSplit (reshard group)");
  if (tp > 1) {
    splitBy(Group::Tp, "ncclCommSplit (tp group)");
    splitBy(Group::TpGrad, "ncclCommSplit (tp group, comm stream)");
  }
  if (!err.empty()) {
    c->abort("rank " + std::to_string(b.rank) + ": " + err);
    return err;
  }
  *out = std::move(c);
  return "";
}

NcclComms::~NcclComms() {
  if (places)
    ::munmap(places, sizeof(Place) * size_t(size));
  if (isAborted)
    return; // ncclCommAbort released them
  for (const Named &n : ledger)
    for (cudaEvent_t e : {n.begin, n.end})
      if (e)
        cudaEventDestroy(e);
  for (cudaEvent_t e : spare)
    cudaEventDestroy(e);
  // An orderly end: finalize (flushes, non-blocking: polled), then destroy,
  // children before their parent.
  for (Group g : kChildrenFirst) {
    void *c = comm(g);
    if (!c)
      continue;
    ncclResult_t r = ncclCommFinalize(asComm(c));
    std::string err = r == ncclInProgress ? waitReady(c, "ncclCommFinalize", boot.timeoutS)
                      : r == ncclSuccess  ? ""
                                          : ncclText(r, asComm(c));
    if (!err.empty()) {
      ncclCommAbort(asComm(c));
      continue;
    }
    ncclCommDestroy(asComm(c));
  }
}

std::string NcclComms::allGather(Group g, const void *src, void *dst, int64_t count, DType t,
                                 cudaStream_t stream) {
  void *c = comm(g);
  bracket(stream, true);
  std::string err = finishCall(
      ncclAllGather(src, dst, size_t(count), ncclType(t), asComm(c), stream), c, "ncclAllGather");
  bracket(stream, false);
  return err;
}

std::string NcclComms::reduceScatter(Group g, const void *src, void *dst, int64_t count, DType t,
                                     cudaStream_t stream) {
  void *c = comm(g);
  bracket(stream, true);
  std::string err = finishCall(
      ncclReduceScatter(src, dst, size_t(count), ncclType(t), ncclSum, asComm(c), stream), c,
      "ncclReduceScatter");
  bracket(stream, false);
  return err;
}

std::string NcclComms::allReduce(Group g, const void *src, void *dst, int64_t count, DType t,
                                 cudaStream_t stream) {
  void *c = comm(g);
  bracket(stream, true);
  std::string err =
      finishCall(ncclAllReduce(src, dst, size_t(count), ncclType(t), ncclSum, asComm(c), stream), c,
                 "ncclAllReduce");
  bracket(stream, false);
  return err;
}

// Polls `query` (cudaEventQuery or cudaStreamQuery) until the work is done,
// checking NCCL's and the peers' errors between polls: a peer that failed
// stops the wait instead of hanging it. The clock restarts whenever a named
// collective completes: --timeout bounds a wait on the peers, not a step.
std::string NcclComms::poll(const std::function<int()> &query) {
  double limit = waitLimitS(), start = now(), lastPublished = 0;
  int64_t progress = settled;
  for (;;) {
    cudaError_t e = cudaError_t(query());
    if (e == cudaSuccess) {
      publish();
      return "";
    }
    if (e != cudaErrorNotReady)
      return std::string("CUDA: ") + cudaGetErrorString(e);
    std::string err = check();
    if (!err.empty())
      return err;
    double t = now();
    if (t - lastPublished > 0.002) { // the events' queries cost a little
      Whereabouts w = publish();
      lastPublished = t;
      // Only a wait on the peers counts: the clock restarts when a named
      // collective completes, and while the device is busy before the next
      // one (the emulated device's compute alone may take seconds).
      if (settled != progress || (!ledger.empty() && w.state == Whereabouts::Before)) {
        progress = settled;
        start = t;
      }
    }
    if (limit > 0 && t - start > limit)
      return timedOut(limit);
    idle();
  }
}

// A query that says done shows the work finished; the synchronization after
// it (immediate then) is what orders the host's next work after it. The
// emulated device's checker counts only that (tests/cuda-emu/emu.cpp), so
// that an order which holds only because the host happened to look (the
// hang diagnosis queries its collectives' events) is not taken for one.
std::string NcclComms::waitEvent(cudaEvent_t event) {
  std::string err = poll([&] { return int(cudaEventQuery(event)); });
  if (err.empty() && cudaEventSynchronize(event) != cudaSuccess)
    err = std::string("CUDA: ") + cudaGetErrorString(cudaGetLastError());
  return err;
}

std::string NcclComms::waitStream(cudaStream_t stream) {
  std::string err = poll([&] { return int(cudaStreamQuery(stream)); });
  if (err.empty() && cudaStreamSynchronize(stream) != cudaSuccess)
    err = std::string("CUDA: ") + cudaGetErrorString(cudaGetLastError());
  return err;
}

// The shared segment of places, named by the launch's tag: opened by every
// rank before the world communicator's initialisation and unlinked by every
// rank once it has completed (every rank has opened it then), so that
// nothing is left in /dev/shm.
void NcclComms::openPlaces() {
  if (size < 2)
    return;
  char name[64];
  std::snprintf(name, sizeof name, "/fsdp-places-%016llx", (unsigned long long)tag);
  placesName = name;
  int fd = ::shm_open(name, O_RDWR | O_CREAT, 0600);
  if (fd < 0)
    return; // no report of the peers' places, the rest works
  size_t bytes = sizeof(Place) * size_t(size);
  void *p = ::ftruncate(fd, off_t(bytes)) == 0
                ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  ::close(fd);
  places = p == MAP_FAILED ? nullptr : p;
}

void NcclComms::closePlaces() {
  if (!placesName.empty())
    ::shm_unlink(placesName.c_str());
  placesName.clear();
}

// Before (begin) or after a named collective on `stream`: an event there.
void NcclComms::bracket(cudaStream_t stream, bool begin) {
  if (!naming)
    return;
  cudaEvent_t &e = begin ? next.begin : next.end;
  if (spare.empty()) {
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
      e = nullptr;
  } else {
    e = spare.back();
    spare.pop_back();
  }
  if (e && cudaEventRecord(e, stream) != cudaSuccess) {
    cudaEventDestroy(e);
    e = nullptr;
  }
  if (!begin) {
    ledger.push_back(next);
    naming = false;
  }
}

void NcclComms::countCollective(const char *what, const std::function<void()> &named) {
  hostWhat = what;
  if (!stallHere(myRank, ++collectives))
    return;
  // A test's stalled rank: its earlier work done (as a rank busy before
  // this collective would have), its place published, then stopped.
  cudaDeviceSynchronize();
  named();
  publish();
  std::raise(SIGSTOP);
}

void NcclComms::at(Group g, const std::string &site, const char *what) {
  if (!host.comm)
    return;
  // Named first: a stalled rank "has not reached" it.
  host.comm->at(g, site);
  countCollective(what, [] {});
  next = Named();
  next.what = what;
  next.where = host.count(g, what);
  naming = true;
  // The place as the host knows it now: a rank stopped while enqueuing
  // is found at its device's collective, not at its last wait.
  publish();
}

Whereabouts NcclComms::whereabouts() {
  // The collectives the device has finished leave the ledger.
  while (!ledger.empty()) {
    Named &n = ledger.front();
    if (n.end && cudaEventQuery(n.end) == cudaErrorNotReady)
      break;
    for (cudaEvent_t e : {n.begin, n.end})
      if (e)
        spare.push_back(e);
    ledger.pop_front();
    ++settled;
  }
  if (ledger.empty())
    return host.comm ? host.comm->whereabouts() : Whereabouts();
  Whereabouts w = ledger.front().where;
  if (ledger.front().begin && cudaEventQuery(ledger.front().begin) == cudaErrorNotReady) {
    w.state = Whereabouts::Before;
    --w.begun;
  } else {
    w.state = Whereabouts::Waiting;
  }
  return w;
}

Whereabouts NcclComms::publish() {
  Whereabouts w = whereabouts();
  if (!places)
    return w;
  Place &slot = static_cast<Place *>(places)[myRank];
  uint64_t seq = slot.seq.load(std::memory_order_relaxed);
  slot.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.beat = now();
  std::memcpy(&slot.where, &w, sizeof w);
  slot.seq.store(seq + 2, std::memory_order_release);
  return w;
}

// --timeout's report, as the threads and MPI backends give it: where this
// rank waits, the members of that collective's group that have not reached
// it, and where every rank is (from the shared segment: a rank that never
// published, or cannot be read, did not answer).
std::string NcclComms::timedOut(double waitedS) {
  publish();
  Whereabouts me = whereabouts();
  const char *what = ledger.empty() ? hostWhat : ledger.front().what;
  std::vector<Whereabouts> all(size);
  std::vector<const Whereabouts *> seen(size);
  std::vector<int> quiet;
  double t = now();
  for (int r = 0; r < size && places; ++r) {
    Place &slot = static_cast<Place *>(places)[r];
    for (int tries = 0; tries < 1000; ++tries) {
      uint64_t before = slot.seq.load(std::memory_order_acquire);
      if (before == 0)
        break; // never published
      if (before & 1) {
        idle();
        continue;
      }
      double beat = slot.beat;
      std::memcpy(&all[r], &slot.where, sizeof all[r]);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (slot.seq.load(std::memory_order_relaxed) != before)
        continue;
      all[r].site[sizeof all[r].site - 1] = 0;
      seen[r] = &all[r];
      // A rank waiting publishes every few milliseconds.
      if (r != myRank && t - beat > std::min(1.0, waitedS / 2))
        quiet.push_back(r);
      break;
    }
  }
  all[myRank] = me;
  seen[myRank] = &all[myRank];
  Group g = me.group < 0 ? Group::World : Group(me.group);
  // The members behind this rank did not arrive; those level with it that
  // went quiet stopped in the collective (a stopped process's device stops
  // with it).
  std::vector<int> missing, stuck;
  int n = groupSize(g);
  for (int m = 0; m < n; ++m) {
    int r = mesh.memberRank(g, myRank, m);
    if (r == myRank)
      continue;
    if (!seen[r] || seen[r]->progress() < me.progress())
      missing.push_back(r);
    else if (std::find(quiet.begin(), quiet.end(), r) != quiet.end())
      stuck.push_back(r);
  }
  std::string peers;
  if (!missing.empty())
    peers = rankList(missing) + ", which did not arrive";
  if (!stuck.empty())
    peers += (peers.empty() ? "" : ", and ") + rankList(stuck) + ", which stopped in it";
  std::string where = whereRanksAre(seen);
  if (where.empty() && me.group >= 0)
    where = std::string(size == 2 ? "both ranks" : "every rank") +
            (me.state == Whereabouts::Waiting ? " wait at " : " are at ") + me.site +
            " (collective #" + std::to_string(me.number) + " on " + groupName(g) + ")";
  std::string s = "waited " + secondsText(waitedS) + " s (--timeout) at " + what + " over " +
                  groupName(g) + " for " + (peers.empty() ? "its peers" : peers) +
                  (where.empty() ? "" : "; " + where);
  if (!quiet.empty())
    s += "; " + rankList(quiet) + (quiet.size() == 1 ? " has" : " have") + " not updated " +
         (quiet.size() == 1 ? "its" : "their") +
         " place for over a second (stopped, or busy outside a collective)";
  return s;
}

void NcclComms::abort(const std::string &reason) {
  if (isAborted)
    return;
  isAborted = true;
  why = reason;
  for (Group g : kChildrenFirst)
    if (void *c = comm(g))
      ncclCommAbort(asComm(c));
  if (boot.kind == NcclBootstrap::Kind::File) {
    // The first cause only: a peer that stops because of it leaves it be.
    struct stat st;
    std::string path = failurePath(boot);
    if (::stat(path.c_str(), &st) != 0) {
      std::string tmp = path + ".tmp" + std::to_string(::getpid());
      std::ofstream(tmp) << tag << "\n" << reason << "\n";
      std::rename(tmp.c_str(), path.c_str());
    }
  }
#if FSDP_HAVE_MPI
  if (boot.kind == NcclBootstrap::Kind::Mpi) {
    std::fprintf(stderr, "fsdp-run: error: %s\n", reason.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
#endif
}

namespace {

// Communicator.h's interface over host memory: a device staging buffer, a stream
// of its own, a polled wait after every collective (before the copy back,
// which from pageable memory would otherwise block without bound).
class NcclHostCommunicator : public Communicator {
public:
  NcclHostCommunicator(NcclComms &comms, int shardSize, int reshardSize, int tp)
      : Communicator(shardSize, reshardSize, tp), comms(comms) {
    // The device's collectives numbered with these, in one sequence.
    comms.setHostHooks({this, [this](Group g, const char *what) {
                          began(g, what);
                          Whereabouts w = whereabouts();
                          ended(g);
                          return w;
                        }});
  }
  ~NcclHostCommunicator() override {
    comms.setHostHooks({});
    if (stream && !comms.aborted())
      cudaStreamDestroy(stream);
    if (staging && !comms.aborted())
      cudaFree(staging);
  }

  int rank() const override { return comms.rank(); }
  int worldSize() const override { return comms.worldSize(); }

  bool allGather(Group g, const void *src, void *dst, int64_t bytes) override {
    int n = comms.groupSize(g), me = comms.memberIndex(g);
    char *buf = prepare(bytes * n);
    if (!buf)
      return false;
    char *slot = buf + me * bytes;
    return copy(slot, src, bytes, cudaMemcpyHostToDevice) && begin(g, "all_gather") &&
           run(comms.allGather(g, slot, buf, bytes, NcclComms::DType::U8, stream)) && finish() &&
           copy(dst, buf, bytes * n, cudaMemcpyDeviceToHost) && finish() && end(g);
  }

  bool reduceScatterAdd(Group g, const float *src, float *dst, int64_t count) override {
    int n = comms.groupSize(g);
    char *buf = prepare((n + 1) * count * 4);
    if (!buf)
      return false;
    float *part = reinterpret_cast<float *>(buf) + n * count;
    std::vector<float> host(count);
    if (!(copy(buf, src, n * count * 4, cudaMemcpyHostToDevice) && begin(g, "reduce_scatter") &&
          run(comms.reduceScatter(g, buf, part, count, NcclComms::DType::F32, stream)) &&
          finish() && copy(host.data(), part, count * 4, cudaMemcpyDeviceToHost) && finish() &&
          end(g)))
      return false;
    for (int64_t k = 0; k < count; ++k)
      dst[k] += host[k];
    return true;
  }

  bool reduceScatterAddBf16(Group g, const uint16_t *src, float *dst, int64_t count) override {
    int n = comms.groupSize(g);
    char *buf = prepare((n + 1) * count * 2);
    if (!buf)
      return false;
    uint16_t *part = reinterpret_cast<uint16_t *>(buf) + n * count;
    std::vector<uint16_t> host(count);
    if (!(copy(buf, src, n * count * 2, cudaMemcpyHostToDevice) && begin(g, "reduce_scatter") &&
          run(comms.reduceScatter(g, buf, part, count, NcclComms::DType::BF16, stream)) &&
          finish() && copy(host.data(), part, count * 2, cudaMemcpyDeviceToHost) && finish() &&
          end(g)))
      return false;
    for (int64_t k = 0; k < count; ++k) {
      uint32_t bits = uint32_t(host[k]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      dst[k] += f;
    }
    return true;
  }

  bool allReduce(Group g, float *buf, int64_t count) override {
    char *dev = prepare(count * 4);
    return dev && copy(dev, buf, count * 4, cudaMemcpyHostToDevice) && begin(g, "all_reduce") &&
           run(comms.allReduce(g, dev, dev, count, NcclComms::DType::F32, stream)) && finish() &&
           copy(buf, dev, count * 4, cudaMemcpyDeviceToHost) && finish() && end(g);
  }

  bool allReduceScalar(Group g, double *value) override {
    char *dev = prepare(8);
    return dev && copy(dev, value, 8, cudaMemcpyHostToDevice) &&
           begin(g, "all_reduce of a scalar") &&
           run(comms.allReduce(g, dev, dev, 1, NcclComms::DType::F64, stream)) && finish() &&
           copy(value, dev, 8, cudaMemcpyDeviceToHost) && finish() && end(g);
  }

  void abort(const std::string &why) override { comms.abort(why); }
  std::string error() const override {
    if (!reason.empty())
      return reason;
    return comms.reason();
  }
  int64_t stagingBytes() const override { return capacity; }

private:
  char *prepare(int64_t bytes) {
    if (!reason.empty() || comms.aborted()) {
      if (reason.empty())
        reason = comms.reason().empty() ? "stopped" : comms.reason();
      return nullptr;
    }
    if (!stream) {
      cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      if (e != cudaSuccess)
        return cudaFailed("cudaStreamCreateWithFlags", e);
    }
    if (bytes > capacity) {
      if (staging)
        cudaFree(staging);
      staging = nullptr;
      capacity = 0;
      cudaError_t e = cudaMalloc(&staging, size_t(std::max<int64_t>(bytes, 256)));
      if (e != cudaSuccess)
        return cudaFailed("cudaMalloc of " + std::to_string(bytes) + " staging bytes", e);
      capacity = std::max<int64_t>(bytes, 256);
    }
    return static_cast<char *>(staging);
  }
  char *cudaFailed(const std::string &what, cudaError_t e) {
    reason = what + ": CUDA: " + cudaGetErrorString(e);
    return nullptr;
  }
  bool copy(void *dst, const void *src, int64_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0)
      return true;
    cudaError_t e = cudaMemcpyAsync(dst, src, size_t(bytes), kind, stream);
    if (e != cudaSuccess) {
      cudaFailed("cudaMemcpyAsync", e);
      return false;
    }
    return true;
  }
  bool run(const std::string &err) {
    if (!err.empty())
      reason = err;
    return err.empty();
  }
  bool finish() { return run(comms.waitStream(stream)); }
  // --timeout's report: the collective counted (a test's stalled rank stops
  // here, before it) and begun on this communicator's sequence.
  bool begin(Group g, const char *what) {
    comms.countCollective(what, [] {});
    began(g, what);
    comms.publish();
    return true;
  }
  bool end(Group g) {
    ended(g);
    return true;
  }

  NcclComms &comms;
  cudaStream_t stream = nullptr;
  void *staging = nullptr;
  int64_t capacity = 0;
  std::string reason;
};

} // namespace

std::unique_ptr<Communicator> fsdp::runtime::ncclHostCommunicator(NcclComms &comms, int shardSize,
                                                                  int reshardSize, int tp) {
  return std::make_unique<NcclHostCommunicator>(comms, shardSize, reshardSize, tp);
}
