//===- nccl_emu.cpp - NCCL emulated over POSIX shared memory --------------===//
//
// A test tool (tests/cuda-emu/include/nccl.h), never part of what users run.
// A communicator is a shared-memory segment named by the unique id (and the
// world size), so its ranks may be threads of one process or processes
// started by mpirun or by `fsdp-run --rank R --nccl-id-file F`. The segment
// holds, per rank, a record (pid, state, the last barrier phase reached, why
// it failed) and two data slots of kSlotBytes. A collective moves its data
// in chunks: each rank copies its chunk into its slot, waits at a barrier
// for every peer, then reads all the slots and writes its own result, the
// sums taken in rank order (so the result is deterministic and identical on
// every rank). The slots alternate between consecutive barriers, so one
// barrier per chunk suffices: a rank that passed barrier p knows every peer
// has finished reading the slots of p - 1, which it writes next.
//
// No wait is unbounded: a waiting rank sleeps on a futex in the segment for
// at most kPollNs, then checks its own communicator (ncclCommAbort, from any
// thread, wakes it) and every peer it still waits for (failed, aborted,
// destroyed, or its process gone), and answers ncclRemoteError naming the
// peer instead of waiting on. Collectives run as cuda_emu::enqueue work on
// the stream's thread (emu_device.h), in the order the host issued them.
//
// The segment's name is unlinked as soon as every rank has mapped it (or a
// rank leaves before that), so no /dev/shm entry outlives the communicator's
// set-up, even when a rank is killed.
//
// FSDP_EMU_NCCL_FAULT=RANK:N (read by this library only): the N-th
// collective that rank RANK issues (counting its world communicator and the
// communicators split from it) fails with ncclSystemError, as a transport
// failure would; its peers get ncclRemoteError naming RANK.
//
//===----------------------------------------------------------------------===//
#include "tests/cuda-emu/emu_device.h"

#include <nccl.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr char kIdMagic[8] = {'F', 'S', 'D', 'P', 'E', 'M', 'U', '1'};
constexpr unsigned kConfigMagic = 0xcafebeef;
// One rank's data slot (two per rank). Large transfers take several chunks;
// tmpfs backs only the pages touched.
constexpr size_t kSlotBytes = size_t(1) << 20;
constexpr int kMaxRanks = 4096;
// How long a wait sleeps before it checks its peers again.
constexpr long kPollNs = 5 * 1000 * 1000;
// A blocking ncclCommInitRankConfig has no handle to abort it with: its
// wait for the other ranks is bounded by this instead.
constexpr double kBlockingInitS = 300;

enum RankState : int32_t { Absent = 0, Joined = 1, Left = 2, Failed = 3 };

// What a rank's current call is, compared at every barrier: ranks that
// issue different collectives stop with an error naming both calls, instead
// of exchanging unrelated bytes.
struct Signature {
  uint64_t call; // this communicator's calls, from 1
  int32_t kind;  // an index into kCallNames
  int32_t dtype;
  uint64_t count;
  int32_t root;
  int32_t unused;
};

const char *const kCallNames[] = {"ncclAllGather", "ncclReduceScatter", "ncclAllReduce",
                                  "ncclBroadcast", "ncclCommSplit"};

struct alignas(64) RankRecord {
  Signature signature[2]; // by barrier phase, alternating as the slots do
  std::atomic<int32_t> claimed;
  std::atomic<int32_t> state;
  std::atomic<int32_t> pid;
  std::atomic<int32_t> worldRank;
  std::atomic<uint64_t> arrived; // the last barrier phase it reached
  char why[448];                 // written before state becomes Failed
};

struct Header {
  char magic[8];
  std::atomic<uint32_t> futex; // bumped by every change a waiter may await
  std::atomic<int32_t> joined;
};

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

size_t headerBytes(int n) {
  size_t b = 64 + size_t(n) * sizeof(RankRecord);
  return (b + 4095) & ~size_t(4095);
}

size_t segmentBytes(int n) { return headerBytes(n) + size_t(n) * 2 * kSlotBytes; }

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string hex(const void *data, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

uint64_t fnv(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

void futexWake(std::atomic<uint32_t> *word) {
  word->fetch_add(1, std::memory_order_seq_cst);
  // Not FUTEX_PRIVATE: the word is shared between processes.
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
          0);
}

void futexWait(std::atomic<uint32_t> *word, uint32_t seen) {
  timespec ts{0, kPollNs};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

// Whether process `pid` is gone. A zombie (killed, not yet reaped by its
// parent) is gone too: kill(pid, 0) still succeeds on it.
bool processGone(int32_t pid) {
  if (pid <= 0 || pid == getpid())
    return false;
  if (kill(pid, 0) != 0)
    return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return false;
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size())
    return false;
  char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

// The last error of calls without a communicator (NCCL keeps one too).
std::mutex globalErrorMutex;
char globalError[512];

void setGlobalError(const std::string &msg) {
  std::lock_guard<std::mutex> g(globalErrorMutex);
  std::snprintf(globalError, sizeof globalError, "%s", msg.c_str());
}

ncclResult_t refuse(ncclResult_t r, const std::string &msg) {
  setGlobalError(msg);
  return r;
}

// A world communicator and those split from it: one rank's collectives, as
// FSDP_EMU_NCCL_FAULT counts them.
struct Family {
  int worldRank = 0;
  long faultAt = 0; // 0: no fault for this rank
  std::string faultSpec;
  std::atomic<long> issued{0};
};

struct CommState {
  std::string prefix; // "/fsdpemu-PID-": the names of a family share it
  std::string name;
  int nranks = 0, rank = 0;
  bool blocking = true;
  std::shared_ptr<Family> family;

  char *base = nullptr;
  size_t bytes = 0;
  bool claimedMine = false;

  std::atomic<bool> aborted{false};
  std::atomic<int> error{ncclSuccess};
  std::mutex errorMutex;
  char lastError[512] = {0};
  std::atomic<bool> jobPending{false};

  // Issue order: ticket t runs once turn == t.
  std::mutex issueMutex; // a ticket and its enqueue, together
  std::atomic<uint64_t> nextTicket{0};
  std::mutex mu;
  std::condition_variable cv;
  uint64_t turn = 0;
  bool running = false, finalizing = false;
  std::shared_ptr<CommState> splitting; // a child being joined (abort stops it)

  // Touched only by the holder of the turn.
  uint64_t phase = 0;
  uint64_t splits = 0;
  uint64_t calls = 0;
  Signature current{};

  ~CommState() {
    if (base)
      munmap(base, bytes);
  }
  Header *header() const { return reinterpret_cast<Header *>(base); }
  RankRecord *record(int q) const { return reinterpret_cast<RankRecord *>(base + 64) + q; }
  char *slot(uint64_t phase, int q) const {
    return base + headerBytes(nranks) + (size_t(q) * 2 + phase % 2) * kSlotBytes;
  }
  std::string who(int q) const {
    int w = record(q)->worldRank.load(std::memory_order_acquire);
    return w == q ? "rank " + std::to_string(w)
                  : "rank " + std::to_string(w) + " (rank " + std::to_string(q) +
                        " of this communicator)";
  }
  std::string me() const { return "rank " + std::to_string(family->worldRank); }
};

void setError(CommState &s, ncclResult_t code, const std::string &msg) {
  std::lock_guard<std::mutex> g(s.errorMutex);
  if (s.error.load() != ncclSuccess)
    return; // the first cause stays
  std::snprintf(s.lastError, sizeof s.lastError, "%s", msg.c_str());
  s.error.store(code, std::memory_order_release);
  // Peers waiting for this rank stop too, naming it.
  if (s.base && s.claimedMine) {
    RankRecord *r = s.record(s.rank);
    std::snprintf(r->why, sizeof r->why, "%s", msg.c_str());
    r->state.store(Failed, std::memory_order_release);
    futexWake(&s.header()->futex);
  }
}

// Waits until ready(q) holds for every rank q, or something stops the wait:
// this communicator aborted (ncclInvalidUsage, not reported: the handle is
// gone), a peer not ready that failed, left or died (ncclRemoteError), the
// deadline (0: none) passed (ncclSystemError).
template <typename Ready>
ncclResult_t waitAll(CommState &s, Ready ready, const char *what, double deadline,
                     std::string *why) {
  Header *h = s.header();
  for (;;) {
    uint32_t seen = h->futex.load(std::memory_order_acquire);
    // States before readiness: a peer records its arrival before it leaves.
    std::vector<int32_t> states(s.nranks);
    for (int q = 0; q < s.nranks; ++q)
      states[q] = s.record(q)->state.load(std::memory_order_acquire);
    int notReady = -1;
    for (int q = 0; q < s.nranks && notReady < 0; ++q)
      if (!ready(q))
        notReady = q;
    if (notReady < 0)
      return ncclSuccess;
    if (s.aborted.load()) {
      *why = std::string(what) + ": aborted (ncclCommAbort)";
      return ncclInvalidUsage;
    }
    for (int q = 0; q < s.nranks; ++q) {
      if (q == s.rank || ready(q))
        continue;
      if (states[q] == Failed) {
        *why = std::string(what) + ": " + s.who(q) + " failed: " + s.record(q)->why;
        return ncclRemoteError;
      }
      if (states[q] == Left) {
        *why = std::string(what) + ": " + s.who(q) + " destroyed its communicator while " + s.me() +
               " waited for it";
        return ncclRemoteError;
      }
      int32_t pid = s.record(q)->pid.load(std::memory_order_acquire);
      if (states[q] == Joined && processGone(pid)) {
        *why = std::string(what) + ": " + s.who(q) + " (pid " + std::to_string(pid) +
               ") exited while " + s.me() + " waited for it";
        return ncclRemoteError;
      }
    }
    if (deadline > 0 && now() > deadline) {
      *why = std::string(what) + ": " + s.who(notReady) + " did not arrive within " +
             std::to_string(int(kBlockingInitS)) + " s";
      return ncclSystemError;
    }
    futexWait(&h->futex, seen);
  }
}

const char *typeName(int32_t t) {
  static const char *const names[] = {"int8",    "uint8",    "int32",   "uint32",
                                      "int64",   "uint64",   "float16", "float32",
                                      "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return t >= 0 && t < 12 ? names[t] : "an unknown type";
}

std::string describe(const Signature &g) {
  if (g.kind < 0 || g.kind > 4)
    return "an unknown call";
  std::string d = std::string(kCallNames[g.kind]) + " (call " + std::to_string(g.call) + ")";
  if (g.kind == 4)
    return d;
  d += " of " + std::to_string(g.count) + " x " + typeName(g.dtype);
  if (g.kind == 3)
    d += " from root " + std::to_string(g.root);
  return d;
}

ncclResult_t barrier(CommState &s, const char *what, std::string *why) {
  uint64_t p = ++s.phase;
  RankRecord *mine = s.record(s.rank);
  mine->signature[p % 2] = s.current;
  mine->arrived.store(p, std::memory_order_release);
  futexWake(&s.header()->futex);
  ncclResult_t r = waitAll(
      s, [&](int q) { return s.record(q)->arrived.load(std::memory_order_acquire) >= p; }, what, 0,
      why);
  if (r != ncclSuccess)
    return r;
  for (int q = 0; q < s.nranks; ++q) {
    const Signature &g = s.record(q)->signature[p % 2];
    if (std::memcmp(&g, &s.current, sizeof g) != 0) {
      *why = std::string(what) + ": ranks disagree: " + s.me() + " calls " + describe(s.current) +
             ", " + s.who(q) + " " + describe(g) +
             " (every rank must issue the same calls in the same order)";
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

// Starts a call of the holder of the turn: the signature its barriers carry.
void beginCall(CommState &s, const char *what, ncclDataType_t t, size_t count, int root) {
  int kind = 0;
  while (std::strcmp(kCallNames[kind], what) != 0)
    ++kind;
  s.current = Signature{++s.calls, kind, int32_t(t), uint64_t(count), root, 0};
}

// Maps the segment, claims this rank's record, waits for the others.
ncclResult_t join(CommState &s, double deadline, std::string *why) {
  int fd = shm_open(s.name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) {
    *why = "shm_open(" + s.name + "): " + std::strerror(errno);
    return ncclSystemError;
  }
  size_t bytes = segmentBytes(s.nranks);
  struct stat st;
  // The name carries the world size, so every rank asks for the same size.
  if (fstat(fd, &st) != 0 || (size_t(st.st_size) < bytes && ftruncate(fd, bytes) != 0)) {
    *why = "sizing " + s.name + ": " + std::strerror(errno);
    close(fd);
    shm_unlink(s.name.c_str());
    return ncclSystemError;
  }
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *why = "mmap(" + s.name + "): " + std::strerror(errno);
    shm_unlink(s.name.c_str());
    return ncclSystemError;
  }
  s.base = static_cast<char *>(p);
  s.bytes = bytes;
  Header *h = s.header();
  RankRecord *mine = s.record(s.rank);
  if (mine->claimed.exchange(1) != 0) {
    *why = "rank " + std::to_string(s.rank) + " of " + std::to_string(s.nranks) +
           " joined twice (does every rank have a rank of its own?)";
    return ncclInvalidArgument;
  }
  s.claimedMine = true;
  mine->pid.store(getpid(), std::memory_order_relaxed);
  mine->worldRank.store(s.family->worldRank, std::memory_order_relaxed);
  mine->state.store(Joined, std::memory_order_release);
  if (h->joined.fetch_add(1) + 1 == s.nranks)
    shm_unlink(s.name.c_str()); // all have it mapped: the name is spent
  futexWake(&h->futex);
  std::string err;
  ncclResult_t r = waitAll(
      s, [&](int q) { return s.record(q)->state.load(std::memory_order_acquire) != Absent; },
      "joining", deadline, &err);
  if (r != ncclSuccess)
    *why = err;
  return r;
}

// This rank stops taking part: peers waiting for it stop too.
void leave(CommState &s, RankState how, const std::string &why) {
  if (!s.base)
    return;
  if (s.claimedMine) {
    RankRecord *r = s.record(s.rank);
    if (how == Failed && r->state.load() != Failed) {
      std::snprintf(r->why, sizeof r->why, "%s", why.c_str());
      r->state.store(Failed, std::memory_order_release);
    } else if (how == Left && r->state.load() == Joined) {
      r->state.store(Left, std::memory_order_release);
    }
  }
  // Set-up can no longer complete: nobody else may be left to unlink it.
  if (s.header()->joined.load() < s.nranks)
    shm_unlink(s.name.c_str());
  futexWake(&s.header()->futex);
}

} // namespace

struct ncclComm {
  std::shared_ptr<CommState> state;
  std::thread job; // a non-blocking initialisation or split
};

namespace {

void joinJob(ncclComm *c) {
  if (c->job.joinable() && c->job.get_id() != std::this_thread::get_id())
    c->job.join();
}

// Runs `body` when ticket `t` has its turn (after every call issued before
// it on this communicator), unless the communicator aborted or failed first.
template <typename Body> void withTurn(CommState &s, uint64_t t, Body body) {
  {
    std::unique_lock<std::mutex> lk(s.mu);
    s.cv.wait(lk, [&] { return s.turn == t || s.aborted.load(); });
    if (s.aborted.load())
      return;
    s.running = true;
  }
  if (s.error.load(std::memory_order_acquire) == ncclSuccess)
    body();
  std::lock_guard<std::mutex> lk(s.mu);
  s.running = false;
  ++s.turn;
  s.cv.notify_all();
}

size_t elementBytes(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
  case ncclFloat8e4m3:
  case ncclFloat8e5m2:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

bool summable(ncclDataType_t t) {
  return elementBytes(t) != 0 && t != ncclFloat16 && t != ncclFloat8e4m3 && t != ncclFloat8e5m2;
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1); // round to nearest, ties to even
  return uint16_t(bits >> 16);
}

template <typename T, typename Acc = T>
void sumTyped(void *out, const std::vector<const char *> &src, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, src[0] + i * sizeof(T), sizeof(T));
    Acc acc = Acc(v);
    for (size_t q = 1; q < src.size(); ++q) {
      std::memcpy(&v, src[q] + i * sizeof(T), sizeof(T));
      acc = Acc(acc + Acc(v));
    }
    T r = T(acc);
    std::memcpy(static_cast<char *>(out) + i * sizeof(T), &r, sizeof(T));
  }
}

// out[i] = src[0][i] + src[1][i] + ... in rank order (bfloat16 in float,
// rounded once, to nearest even).
void sumInRankOrder(ncclDataType_t t, void *out, const std::vector<const char *> &src,
                    size_t count) {
  switch (t) {
  case ncclInt8:
    return sumTyped<int8_t>(out, src, count);
  case ncclUint8:
    return sumTyped<uint8_t>(out, src, count);
  case ncclInt32:
    return sumTyped<int32_t, uint32_t>(out, src, count); // wraps, as on the device
  case ncclUint32:
    return sumTyped<uint32_t>(out, src, count);
  case ncclInt64:
    return sumTyped<int64_t, uint64_t>(out, src, count);
  case ncclUint64:
    return sumTyped<uint64_t>(out, src, count);
  case ncclFloat32:
    return sumTyped<float>(out, src, count);
  case ncclFloat64:
    return sumTyped<double>(out, src, count);
  case ncclBfloat16:
    for (size_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, src[0] + i * 2, 2);
      float acc = bf16ToFloat(h);
      for (size_t q = 1; q < src.size(); ++q) {
        std::memcpy(&h, src[q] + i * 2, 2);
        acc += bf16ToFloat(h);
      }
      h = floatToBf16(acc);
      std::memcpy(static_cast<char *>(out) + i * 2, &h, 2);
    }
    return;
  default:
    return;
  }
}

// The collective of one rank, run on the stream's thread under its turn.
// Returns "" or why it stopped (the code in *code).
using Body = std::string (*)(CommState &, const char *, const void *, void *, size_t,
                             ncclDataType_t, int, ncclResult_t *);

std::string runAllGather(CommState &s, const char *what, const void *send, void *recv, size_t count,
                         ncclDataType_t t, int, ncclResult_t *code) {
  size_t per = count * elementBytes(t);
  for (size_t off = 0; off < per; off += kSlotBytes) {
    size_t c = std::min(kSlotBytes, per - off);
    uint64_t p = s.phase + 1;
    std::memcpy(s.slot(p, s.rank), static_cast<const char *>(send) + off, c);
    std::string why;
    if ((*code = barrier(s, what, &why)) != ncclSuccess)
      return why;
    for (int q = 0; q < s.nranks; ++q)
      std::memcpy(static_cast<char *>(recv) + q * per + off, s.slot(p, q), c);
  }
  return "";
}

std::string runReduceScatter(CommState &s, const char *what, const void *send, void *recv,
                             size_t count, ncclDataType_t t, int, ncclResult_t *code) {
  size_t e = elementBytes(t), per = count * e;
  size_t piece = kSlotBytes / s.nranks / e * e; // each rank's block, per chunk
  for (size_t off = 0; off < per; off += piece) {
    size_t c = std::min(piece, per - off);
    uint64_t p = s.phase + 1;
    for (int b = 0; b < s.nranks; ++b)
      std::memcpy(s.slot(p, s.rank) + b * c, static_cast<const char *>(send) + b * per + off, c);
    std::string why;
    if ((*code = barrier(s, what, &why)) != ncclSuccess)
      return why;
    std::vector<const char *> src;
    for (int q = 0; q < s.nranks; ++q)
      src.push_back(s.slot(p, q) + s.rank * c);
    sumInRankOrder(t, static_cast<char *>(recv) + off, src, c / e);
  }
  return "";
}

std::string runAllReduce(CommState &s, const char *what, const void *send, void *recv, size_t count,
                         ncclDataType_t t, int, ncclResult_t *code) {
  size_t e = elementBytes(t), per = count * e, piece = kSlotBytes / e * e;
  for (size_t off = 0; off < per; off += piece) {
    size_t c = std::min(piece, per - off);
    uint64_t p = s.phase + 1;
    std::memcpy(s.slot(p, s.rank), static_cast<const char *>(send) + off, c);
    std::string why;
    if ((*code = barrier(s, what, &why)) != ncclSuccess)
      return why;
    std::vector<const char *> src;
    for (int q = 0; q < s.nranks; ++q)
      src.push_back(s.slot(p, q));
    sumInRankOrder(t, static_cast<char *>(recv) + off, src, c / e);
  }
  return "";
}

std::string runBroadcast(CommState &s, const char *what, const void *send, void *recv, size_t count,
                         ncclDataType_t t, int root, ncclResult_t *code) {
  size_t per = count * elementBytes(t);
  for (size_t off = 0; off < per; off += kSlotBytes) {
    size_t c = std::min(kSlotBytes, per - off);
    uint64_t p = s.phase + 1;
    if (s.rank == root)
      std::memcpy(s.slot(p, s.rank), static_cast<const char *>(send) + off, c);
    std::string why;
    if ((*code = barrier(s, what, &why)) != ncclSuccess)
      return why;
    std::memcpy(static_cast<char *>(recv) + off, s.slot(p, root), c);
  }
  return "";
}

// Checks a call on `comm`, then enqueues the collective on `stream`.
ncclResult_t issue(ncclComm_t comm, const char *what, const void *send, void *recv, size_t count,
                   ncclDataType_t t, int root, cudaStream_t stream,
                   std::vector<cuda_emu::Access> accesses, Body body) {
  if (!comm)
    return refuse(ncclInvalidArgument, std::string(what) + ": the communicator is NULL");
  std::shared_ptr<CommState> s = comm->state;
  ncclResult_t err = ncclResult_t(s->error.load(std::memory_order_acquire));
  if (err != ncclSuccess)
    return err; // its lastError says why
  if (s->jobPending.load())
    return refuse(ncclInvalidUsage, std::string(what) + ": the communicator is not ready yet "
                                                        "(ncclCommGetAsyncError answers "
                                                        "ncclInProgress)");
  bool sends = root < 0 || s->rank == root; // a broadcast's other ranks send nothing
  if (count > 0 && (!recv || (sends && !send)))
    return refuse(ncclInvalidArgument, std::string(what) + ": a NULL buffer");
  long n = s->family->issued.fetch_add(1) + 1;
  bool injected = s->family->faultAt == n;
  // Not s->mu, which the work takes: an enqueue may run it at once.
  std::lock_guard<std::mutex> lk(s->issueMutex);
  uint64_t t0 = s->nextTicket.load();
  bool ok = cuda_emu::enqueue(stream, what, std::move(accesses), [=] {
    withTurn(*s, t0, [&] {
      if (injected) {
        setError(*s, ncclSystemError,
                 "FSDP_EMU_NCCL_FAULT=" + s->family->faultSpec + ": " + s->me() + "'s collective " +
                     std::to_string(n) + " (" + what + ") failed as injected");
        return;
      }
      ncclResult_t code = ncclSuccess;
      beginCall(*s, what, t, count, root);
      std::string why = body(*s, what, send, recv, count, t, root, &code);
      if (code != ncclSuccess && !s->aborted.load())
        setError(*s, code, why);
    });
  });
  if (!ok)
    return refuse(ncclUnhandledCudaError,
                  std::string(what) + ": the stream refused the work (a sticky CUDA error, or "
                                      "not a valid stream)");
  ++s->nextTicket;
  return ncclSuccess;
}

std::shared_ptr<CommState> newState(const std::string &prefix, const std::string &name, int nranks,
                                    int rank, const ncclConfig_t *config,
                                    std::shared_ptr<Family> family) {
  auto s = std::make_shared<CommState>();
  s->prefix = prefix;
  s->name = name;
  s->nranks = nranks;
  s->rank = rank;
  s->blocking = !(config && config->blocking == 0);
  s->family = std::move(family);
  return s;
}

// Parses FSDP_EMU_NCCL_FAULT=RANK:N; "" or why it is malformed.
std::string parseFault(int worldRank, int nranks, Family *f) {
  const char *env = std::getenv("FSDP_EMU_NCCL_FAULT");
  if (!env || !*env)
    return "";
  std::string spec = env;
  // Digits, one colon, digits: nothing strtol would skip or sign.
  size_t colon = spec.find(':');
  auto digits = [](const std::string &d) {
    return !d.empty() && d.size() <= 9 &&
           std::all_of(d.begin(), d.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  };
  bool ok =
      colon != std::string::npos && digits(spec.substr(0, colon)) && digits(spec.substr(colon + 1));
  long rank = ok ? std::stol(spec.substr(0, colon)) : -1;
  long nth = ok ? std::stol(spec.substr(colon + 1)) : 0;
  if (!ok || nth < 1)
    return "FSDP_EMU_NCCL_FAULT='" + spec +
           "': expected RANK:N (a rank, and which of its collectives fails, from 1)";
  if (rank >= nranks)
    return "FSDP_EMU_NCCL_FAULT='" + spec + "': rank " + std::to_string(rank) +
           " is not in a world of " + std::to_string(nranks);
  f->faultSpec = spec;
  if (rank == worldRank)
    f->faultAt = nth;
  return "";
}

} // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  if (!version)
    return refuse(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (!uniqueId)
    return refuse(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  std::memset(uniqueId, 0, sizeof *uniqueId);
  std::memcpy(uniqueId->internal, kIdMagic, 8);
  int32_t pid = getpid();
  std::memcpy(uniqueId->internal + 8, &pid, 4);
  unsigned char random[16];
  if (getrandom(random, sizeof random, 0) != ssize_t(sizeof random))
    return refuse(ncclSystemError, std::string("ncclGetUniqueId: getrandom: ") + strerror(errno));
  std::memcpy(uniqueId->internal + 12, random, sizeof random);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config) {
  if (!comm)
    return refuse(ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
  *comm = nullptr;
  if (std::memcmp(commId.internal, kIdMagic, 8) != 0)
    return refuse(ncclInvalidArgument,
                  "ncclCommInitRankConfig: not an id of ncclGetUniqueId (emulated)");
  if (nranks < 1 || nranks > kMaxRanks)
    return refuse(ncclInvalidArgument, "ncclCommInitRankConfig: nranks " + std::to_string(nranks) +
                                           " is not in 1.." + std::to_string(kMaxRanks));
  if (rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, "ncclCommInitRankConfig: rank " + std::to_string(rank) +
                                           " is not in 0.." + std::to_string(nranks - 1));
  if (config && config->magic != kConfigMagic)
    return refuse(ncclInvalidArgument,
                  "ncclCommInitRankConfig: config not set from NCCL_CONFIG_INITIALIZER");
  auto family = std::make_shared<Family>();
  family->worldRank = rank;
  std::string bad = parseFault(rank, nranks, family.get());
  if (!bad.empty())
    return refuse(ncclInvalidArgument, "ncclCommInitRankConfig: " + bad);
  int32_t pid;
  std::memcpy(&pid, commId.internal + 8, 4);
  std::string prefix = "/fsdpemu-" + std::to_string(pid) + "-";
  std::string name = prefix + hex(commId.internal + 12, 16) + "-n" + std::to_string(nranks);
  auto s = newState(prefix, name, nranks, rank, config, family);
  auto *c = new ncclComm{s, {}};
  if (s->blocking) {
    std::string why;
    ncclResult_t r = join(*s, now() + kBlockingInitS, &why);
    if (r != ncclSuccess) {
      leave(*s, Failed, why);
      delete c;
      return refuse(r, "ncclCommInitRankConfig: " + why);
    }
    *comm = c;
    return ncclSuccess;
  }
  s->jobPending = true;
  c->job = std::thread([s] {
    std::string why;
    ncclResult_t r = join(*s, 0, &why);
    if (r != ncclSuccess && !s->aborted.load())
      setError(*s, r, why);
    s->jobPending = false;
  });
  *comm = c;
  return ncclInProgress;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
  if (!comm || !newcomm)
    return refuse(ncclInvalidArgument, "ncclCommSplit: comm or newcomm is NULL");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return refuse(ncclInvalidArgument,
                  "ncclCommSplit: color " + std::to_string(color) + " is negative");
  if (config && config->magic != kConfigMagic)
    return refuse(ncclInvalidArgument,
                  "ncclCommSplit: config not set from NCCL_CONFIG_INITIALIZER");
  std::shared_ptr<CommState> s = comm->state;
  ncclResult_t err = ncclResult_t(s->error.load(std::memory_order_acquire));
  if (err != ncclSuccess)
    return err;
  if (s->jobPending.load())
    return refuse(ncclInvalidUsage, "ncclCommSplit: the parent is not ready yet");
  joinJob(comm);
  ncclConfig_t childConfig = NCCL_CONFIG_INITIALIZER;
  if (config)
    childConfig = *config;
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lk(s->issueMutex);
    ticket = s->nextTicket++;
  }
  // Every rank of the parent takes part: an all-gather of (color, key).
  auto body = [s, ticket, color, key, newcomm,
               childConfig]() -> std::pair<ncclResult_t, std::string> {
    ncclResult_t code = ncclSuccess;
    std::string why;
    withTurn(*s, ticket, [&] {
      int32_t mine[2] = {color, key};
      std::vector<int32_t> all(2 * s->nranks);
      beginCall(*s, "ncclCommSplit", ncclInt32, 2, -1);
      why = runAllGather(*s, "ncclCommSplit", mine, all.data(), 2, ncclInt32, 0, &code);
      if (code != ncclSuccess)
        return;
      std::vector<int> members;
      for (int q = 0; q < s->nranks; ++q)
        if (all[2 * q] == color)
          members.push_back(q);
      std::stable_sort(members.begin(), members.end(),
                       [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
      uint64_t seq = s->splits++;
      if (color == NCCL_SPLIT_NOCOLOR) {
        __atomic_store_n(newcomm, nullptr, __ATOMIC_RELEASE);
        return;
      }
      int k = int(members.size());
      int newRank = int(std::find(members.begin(), members.end(), s->rank) - members.begin());
      char tag[17];
      std::snprintf(tag, sizeof tag, "%016llx",
                    (unsigned long long)fnv(s->name + "/" + std::to_string(seq) + "/" +
                                            std::to_string(color)));
      auto child = newState(s->prefix, s->prefix + tag + "-n" + std::to_string(k), k, newRank,
                            &childConfig, s->family);
      {
        std::lock_guard<std::mutex> lk(s->mu);
        s->splitting = child;
      }
      code = join(*child, 0, &why);
      {
        std::lock_guard<std::mutex> lk(s->mu);
        s->splitting.reset();
      }
      if (code != ncclSuccess) {
        leave(*child, Failed, why);
        why = "ncclCommSplit: " + why;
        return;
      }
      __atomic_store_n(newcomm, new ncclComm{child, {}}, __ATOMIC_RELEASE);
    });
    return {code, why};
  };
  if (s->blocking) {
    auto r = body();
    if (r.first != ncclSuccess && !s->aborted.load()) {
      setError(*s, r.first, r.second);
      return r.first;
    }
    return ncclSuccess;
  }
  s->jobPending = true;
  comm->job = std::thread([s, body] {
    auto r = body();
    if (r.first != ncclSuccess && !s->aborted.load())
      setError(*s, r.first, r.second);
    s->jobPending = false;
  });
  return ncclInProgress;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm)
    return refuse(ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
  CommState &s = *comm->state;
  std::unique_lock<std::mutex> lk(s.mu);
  s.finalizing = true;
  if (!s.blocking)
    return s.turn == s.nextTicket ? ncclSuccess : ncclInProgress;
  // Blocking: until every issued call ran (a failure or an abort stops it).
  s.cv.wait(lk, [&] {
    return s.turn == s.nextTicket || s.aborted.load() || s.error.load() != ncclSuccess;
  });
  return ncclResult_t(s.error.load());
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  joinJob(comm);
  leave(*comm->state, Left, "");
  delete comm; // queued work keeps the state (and the mapping) while it needs it
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  std::shared_ptr<CommState> s = comm->state;
  s->aborted = true;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->splitting)
      s->splitting->aborted = true;
    s->cv.notify_all();
  }
  // A set-up job sees the flag at its next check; after it ends, the
  // mapping it made may be read here.
  joinJob(comm);
  if (s->base)
    futexWake(&s->header()->futex);
  {
    // The running collective sees the abort at its next check (at most
    // kPollNs later) and stops before it touches the buffers again.
    std::unique_lock<std::mutex> lk(s->mu);
    s->cv.wait(lk, [&] { return !s->running; });
  }
  leave(*s, Failed, s->me() + " aborted its communicator (ncclCommAbort)");
  delete comm;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError:
    return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError:
    return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t comm) {
  if (comm && comm->state->error.load(std::memory_order_acquire) != ncclSuccess)
    return comm->state->lastError; // set once, before the error code
  std::lock_guard<std::mutex> g(globalErrorMutex);
  return globalError;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (!comm || !asyncError)
    return refuse(ncclInvalidArgument, "ncclCommGetAsyncError: comm or asyncError is NULL");
  CommState &s = *comm->state;
  ncclResult_t e = ncclResult_t(s.error.load(std::memory_order_acquire));
  if (e == ncclSuccess && s.jobPending.load())
    e = ncclInProgress;
  if (e == ncclSuccess) {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.finalizing && s.turn != s.nextTicket)
      e = ncclInProgress;
  }
  *asyncError = e;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (!comm || !count)
    return refuse(ncclInvalidArgument, "ncclCommCount: comm or count is NULL");
  *count = comm->state->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  if (!comm || !rank)
    return refuse(ncclInvalidArgument, "ncclCommUserRank: comm or rank is NULL");
  *rank = comm->state->rank;
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  size_t e = elementBytes(datatype);
  if (!e)
    return refuse(ncclInvalidArgument,
                  "ncclAllGather: unknown datatype " + std::to_string(datatype));
  size_t n = comm ? size_t(comm->state->nranks) : 0;
  return issue(comm, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype, -1, stream,
               {{sendbuff, sendcount * e, false}, {recvbuff, sendcount * e * n, true}},
               runAllGather);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (!summable(datatype))
    return refuse(ncclInvalidArgument, "ncclReduceScatter: datatype " + std::to_string(datatype) +
                                           " is not summed here");
  if (op != ncclSum)
    return refuse(ncclInvalidArgument,
                  "ncclReduceScatter: only ncclSum is emulated, not op " + std::to_string(op));
  size_t e = elementBytes(datatype);
  size_t n = comm ? size_t(comm->state->nranks) : 0;
  return issue(comm, "ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, -1, stream,
               {{sendbuff, recvcount * e * n, false}, {recvbuff, recvcount * e, true}},
               runReduceScatter);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  if (!summable(datatype))
    return refuse(ncclInvalidArgument,
                  "ncclAllReduce: datatype " + std::to_string(datatype) + " is not summed here");
  if (op != ncclSum)
    return refuse(ncclInvalidArgument,
                  "ncclAllReduce: only ncclSum is emulated, not op " + std::to_string(op));
  size_t e = elementBytes(datatype);
  return issue(comm, "ncclAllReduce", sendbuff, recvbuff, count, datatype, -1, stream,
               {{sendbuff, count * e, false}, {recvbuff, count * e, true}}, runAllReduce);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  size_t e = elementBytes(datatype);
  if (!e)
    return refuse(ncclInvalidArgument,
                  "ncclBroadcast: unknown datatype " + std::to_string(datatype));
  if (comm && (root < 0 || root >= comm->state->nranks))
    return refuse(ncclInvalidArgument, "ncclBroadcast: root " + std::to_string(root) +
                                           " is not a rank of the communicator");
  std::vector<cuda_emu::Access> accesses{{recvbuff, count * e, true}};
  if (comm && comm->state->rank == root)
    accesses.insert(accesses.begin(), {sendbuff, count * e, false});
  return issue(comm, "ncclBroadcast", sendbuff, recvbuff, count, datatype, root, stream,
               std::move(accesses), runBroadcast);
}

// Calls are enqueued as they are made, each on its stream's thread, so a
// group needs no aggregation to avoid a deadlock; only the nesting is kept.
static thread_local int groupDepth = 0;

ncclResult_t ncclGroupStart(void) {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (groupDepth == 0)
    return refuse(ncclInvalidUsage, "ncclGroupEnd: without ncclGroupStart");
  --groupDepth;
  return ncclSuccess;
}

} // extern "C"
