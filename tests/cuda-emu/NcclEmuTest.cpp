//===- NcclEmuTest.cpp - The emulated NCCL against rank-order sums --------===//
//
// tests/cuda-emu/nccl_emu.cpp on its own: 2 and 4 ranks as threads of this
// process and as forked processes, every collective compared bit for bit
// with a sum in rank order computed here, bfloat16 rounding, in-place calls,
// split communicators, ncclCommAbort waking a waiting rank, a killed peer,
// FSDP_EMU_NCCL_FAULT, the refusals, and no /dev/shm entry left behind.
//
// The emulated CUDA runtime is not linked: this file gives the library the
// one thing it needs from it, cuda_emu::enqueue (emu_device.h), as a thread
// per stream running its work in order.
//
//===----------------------------------------------------------------------===//
#include "tests/cuda-emu/emu_device.h"

#include <nccl.h>

#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// A bound on every wait of the tests, so that a hang fails instead of
// stalling CI (far above what any step takes).
constexpr double kGuardS = 30;

// A stream as emu_device.h describes it: a thread running its work in order.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool busy = false, stop = false;
  int started = 0;
  std::vector<std::pair<std::string, std::vector<cuda_emu::Access>>> log;
  std::thread thread;

  Stream() : thread([this] { loop(); }) {}
  ~Stream() {
    {
      std::unique_lock<std::mutex> lk(mu);
      // Work still waiting at a collective would block the join for good:
      // a failure, not a hang.
      if (!cv.wait_for(lk, std::chrono::duration<double>(kGuardS),
                       [&] { return queue.empty() && !busy; })) {
        std::fprintf(stderr, "a stream's work did not finish within %g s\n", kGuardS);
        std::_Exit(2);
      }
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
  void loop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || !queue.empty(); });
      if (queue.empty())
        return;
      auto work = std::move(queue.front());
      queue.pop_front();
      busy = true;
      ++started;
      cv.notify_all();
      lk.unlock();
      work();
      lk.lock();
      busy = false;
      cv.notify_all();
    }
  }
};

// The streams of this process (a forked child makes its own).
class Streams {
public:
  Streams() { current = this; }
  ~Streams() { current = nullptr; }
  static Streams *current;

  cudaStream_t make() {
    std::lock_guard<std::mutex> g(mu);
    streams.push_back(std::make_unique<Stream>());
    return reinterpret_cast<cudaStream_t>(streams.back().get());
  }
  static Stream &of(cudaStream_t s) { return *reinterpret_cast<Stream *>(s); }

  // Whether everything enqueued on `s` ran (false after kGuardS).
  static bool sync(cudaStream_t s) {
    Stream &st = of(s);
    std::unique_lock<std::mutex> lk(st.mu);
    return st.cv.wait_for(lk, std::chrono::duration<double>(kGuardS),
                          [&] { return st.queue.empty() && !st.busy; });
  }
  // Waits until the stream has started its n-th work.
  static bool started(cudaStream_t s, int n) {
    Stream &st = of(s);
    std::unique_lock<std::mutex> lk(st.mu);
    return st.cv.wait_for(lk, std::chrono::duration<double>(kGuardS),
                          [&] { return st.started >= n; });
  }

private:
  std::mutex mu;
  std::vector<std::unique_ptr<Stream>> streams;
};
Streams *Streams::current = nullptr;

// A stream that refuses work, as a device with a sticky error does.
cudaStream_t const kBrokenStream = reinterpret_cast<cudaStream_t>(uintptr_t(8));

} // namespace

bool cuda_emu::enqueue(cudaStream_t stream, const char *what, std::vector<Access> accesses,
                       std::function<void()> work) {
  if (!Streams::current || stream == kBrokenStream || !stream)
    return false;
  Stream &st = Streams::of(stream);
  std::lock_guard<std::mutex> g(st.mu);
  st.log.emplace_back(what, std::move(accesses));
  st.queue.push_back(std::move(work));
  st.cv.notify_all();
  return true;
}

namespace {

std::string text(ncclResult_t r) { return ncclGetErrorString(r); }

// Polls a non-blocking communicator until it settles, as runtime/communicators/
// NCCL.cpp does.
ncclResult_t settle(ncclComm_t comm) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kGuardS);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess)
      return r;
    if (state != ncclInProgress)
      return state;
    if (std::chrono::steady_clock::now() > deadline)
      return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

ncclComm_t initNonBlocking(int n, const ncclUniqueId &id, int rank, std::string *err) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    *err = "init: " + text(r) + ": " + ncclGetLastError(nullptr);
    return nullptr;
  }
  r = settle(comm);
  if (r != ncclSuccess) {
    *err = "init settles: " + text(r) + ": " + ncclGetLastError(comm);
    ncclCommAbort(comm);
    return nullptr;
  }
  return comm;
}

// The split of runtime/communicators/NCCL.cpp: non-blocking parent and child, the
// child read from its slot once the parent has settled.
ncclComm_t splitNonBlocking(ncclComm_t parent, int color, int key, std::string *err) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t child = nullptr;
  ncclResult_t r = ncclCommSplit(parent, color, key, &child, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    *err = "split: " + text(r);
    return nullptr;
  }
  r = settle(parent);
  if (r != ncclSuccess) {
    *err = "split settles: " + text(r) + ": " + ncclGetLastError(parent);
    return nullptr;
  }
  child = __atomic_load_n(&child, __ATOMIC_ACQUIRE);
  if (color != NCCL_SPLIT_NOCOLOR && (!child || settle(child) != ncclSuccess))
    *err = "split: no child";
  return child;
}

// Runs a collective's work to its end and reports the communicator's state.
std::string finish(ncclResult_t r, ncclComm_t comm, cudaStream_t s, const char *what) {
  if (r != ncclSuccess)
    return std::string(what) + ": " + text(r) + ": " + ncclGetLastError(comm);
  if (!Streams::sync(s))
    return std::string(what) + ": the stream did not drain";
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(comm, &state);
  if (state != ncclSuccess)
    return std::string(what) + ": " + text(state) + ": " + ncclGetLastError(comm);
  return "";
}

bool finalizeAndDestroy(ncclComm_t comm) {
  ncclResult_t r = ncclCommFinalize(comm);
  if (r == ncclInProgress)
    r = settle(comm);
  ncclCommDestroy(comm);
  return r == ncclSuccess;
}

// Values whose sums depend on their order: mantissas of 21 bits over
// exponents 2^-20..2^20, signs mixed.
float value(int rank, size_t i, int salt) {
  uint64_t h = (uint64_t(rank) * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull) ^
               (uint64_t(salt) * 0x94d049bb133111ebull);
  h ^= h >> 31;
  h *= 0xd6e9e3c3c4f5a1b7ull;
  h ^= h >> 29;
  float m = float(int64_t(h % (1u << 21)) - (1 << 20));
  return std::ldexp(m, int((h >> 32) % 41) - 40);
}

std::vector<float> values(int rank, size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = value(rank, i, salt);
  return v;
}

uint16_t toBf16(float f) { // round to nearest even, written apart from the library's
  uint32_t b;
  std::memcpy(&b, &f, 4);
  uint32_t lower = b & 0xffff, upper = b >> 16;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1)))
    ++upper;
  return uint16_t(upper);
}

float fromBf16(uint16_t h) {
  uint32_t b = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

template <typename T>
std::string firstDifference(const std::vector<T> &got, const std::vector<T> &want,
                            const char *what) {
  if (got.size() != want.size())
    return std::string(what) + ": sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return std::string(what) + ": element " + std::to_string(i) + " differs";
  return "";
}

// Every collective of one rank of n, checked bit for bit. "" or the first
// failure.
std::string collectivesRank(int rank, int n, ncclUniqueId id, cudaStream_t s) {
  std::string err;
  ncclComm_t comm = initNonBlocking(n, id, rank, &err);
  if (!comm)
    return err;
  int count = 0, me = -1;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &me);
  if (count != n || me != rank)
    return "ncclCommCount/ncclCommUserRank";
#define CHECK(expr)                                                                                \
  do {                                                                                             \
    std::string e_ = (expr);                                                                       \
    if (!e_.empty())                                                                               \
      return e_;                                                                                   \
  } while (0)

  // ncclAllGather, f32, its accesses as declared to the stream.
  {
    const size_t c = 1000;
    std::vector<float> send = values(rank, c, 1), recv(c * n), want;
    for (int q = 0; q < n; ++q) {
      auto v = values(q, c, 1);
      want.insert(want.end(), v.begin(), v.end());
    }
    CHECK(finish(ncclAllGather(send.data(), recv.data(), c, ncclFloat32, comm, s), comm, s,
                 "ncclAllGather"));
    CHECK(firstDifference(recv, want, "ncclAllGather f32"));
    auto &acc = Streams::of(s).log.back().second;
    if (Streams::of(s).log.back().first != "ncclAllGather" || acc.size() != 2 ||
        acc[0].ptr != send.data() || acc[0].bytes != c * 4 || acc[0].write ||
        acc[1].ptr != recv.data() || acc[1].bytes != c * 4 * n || !acc[1].write)
      return "ncclAllGather: the accesses declared to enqueue";
  }
  // ncclAllGather, bytes, more than one chunk, in place.
  {
    const size_t c = (size_t(1) << 20) + 4099;
    std::vector<uint8_t> buf(c * n), want(c * n);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < c; ++i) {
        want[q * c + i] = uint8_t(i * 7 + q * 31);
        if (q == rank)
          buf[q * c + i] = want[q * c + i];
      }
    CHECK(finish(ncclAllGather(buf.data() + rank * c, buf.data(), c, ncclUint8, comm, s), comm, s,
                 "ncclAllGather in place"));
    CHECK(firstDifference(buf, want, "ncclAllGather u8 in place"));
  }
  // ncclReduceScatter, f32, several chunks.
  {
    const size_t c = 300000;
    std::vector<std::vector<float>> all;
    for (int q = 0; q < n; ++q)
      all.push_back(values(q, c * n, 2));
    std::vector<float> recv(c), want(c);
    for (size_t i = 0; i < c; ++i) {
      float acc = all[0][rank * c + i];
      for (int q = 1; q < n; ++q)
        acc += all[q][rank * c + i];
      want[i] = acc;
    }
    CHECK(finish(ncclReduceScatter(all[rank].data(), recv.data(), c, ncclFloat32, ncclSum, comm, s),
                 comm, s, "ncclReduceScatter"));
    CHECK(firstDifference(recv, want, "ncclReduceScatter f32"));
  }
  // ncclAllReduce, f32, out of place and in place; f64.
  {
    const size_t c = 70000;
    std::vector<float> send = values(rank, c, 3), recv(c), want(c);
    for (size_t i = 0; i < c; ++i) {
      float acc = value(0, i, 3);
      for (int q = 1; q < n; ++q)
        acc += value(q, i, 3);
      want[i] = acc;
    }
    CHECK(finish(ncclAllReduce(send.data(), recv.data(), c, ncclFloat32, ncclSum, comm, s), comm, s,
                 "ncclAllReduce"));
    CHECK(firstDifference(recv, want, "ncclAllReduce f32"));
    CHECK(finish(ncclAllReduce(send.data(), send.data(), c, ncclFloat32, ncclSum, comm, s), comm, s,
                 "ncclAllReduce in place"));
    CHECK(firstDifference(send, want, "ncclAllReduce f32 in place"));

    std::vector<double> d(c), dwant(c);
    for (size_t i = 0; i < c; ++i) {
      d[i] = double(value(rank, i, 4)) * 1e-3 + double(value(rank, i, 5));
      double acc = 0;
      for (int q = 0; q < n; ++q) {
        double v = double(value(q, i, 4)) * 1e-3 + double(value(q, i, 5));
        acc = q == 0 ? v : acc + v;
      }
      dwant[i] = acc;
    }
    CHECK(finish(ncclAllReduce(d.data(), d.data(), c, ncclFloat64, ncclSum, comm, s), comm, s,
                 "ncclAllReduce f64"));
    CHECK(firstDifference(d, dwant, "ncclAllReduce f64"));
  }
  // bfloat16: summed in f32, rounded once to nearest even. The first two
  // elements are ties (1 + 2^-8 rounds down to 1, 1.0078125 + 2^-8 up to
  // 1.015625): rounding by truncation gives 1.0078125 for the second.
  {
    const size_t c = 5000;
    auto bf = [&](int q) {
      std::vector<uint16_t> v(c * n);
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = toBf16(value(q, i, 6));
      v[0] = toBf16(q == 0 ? 1.0f : q == 1 ? 0.00390625f : 0.0f);
      v[1] = toBf16(q == 0 ? 1.0078125f : q == 1 ? 0.00390625f : 0.0f);
      return v;
    };
    std::vector<std::vector<uint16_t>> all;
    for (int q = 0; q < n; ++q)
      all.push_back(bf(q));
    std::vector<uint16_t> want(c * n);
    for (size_t i = 0; i < want.size(); ++i) {
      float acc = fromBf16(all[0][i]);
      for (int q = 1; q < n; ++q)
        acc += fromBf16(all[q][i]);
      want[i] = toBf16(acc);
    }
    if (fromBf16(want[0]) != 1.0f || fromBf16(want[1]) != 1.015625f)
      return "the test's own bfloat16 rounding";
    std::vector<uint16_t> buf = all[rank];
    CHECK(finish(ncclAllReduce(buf.data(), buf.data(), c * n, ncclBfloat16, ncclSum, comm, s), comm,
                 s, "ncclAllReduce bf16"));
    CHECK(firstDifference(buf, want, "ncclAllReduce bf16 in place"));
    // ncclReduceScatter in place: this rank's block of its own buffer.
    buf = all[rank];
    CHECK(finish(
        ncclReduceScatter(buf.data(), buf.data() + rank * c, c, ncclBfloat16, ncclSum, comm, s),
        comm, s, "ncclReduceScatter bf16"));
    std::vector<uint16_t> mine(buf.begin() + rank * c, buf.begin() + (rank + 1) * c),
        wantMine(want.begin() + rank * c, want.begin() + (rank + 1) * c);
    CHECK(firstDifference(mine, wantMine, "ncclReduceScatter bf16 in place"));
  }
  // ncclBroadcast from the last rank, then in place from rank 0.
  {
    const size_t c = 3000;
    std::vector<float> send = values(rank, c, 7), recv(c, -1.0f);
    CHECK(finish(ncclBroadcast(send.data(), recv.data(), c, ncclFloat32, n - 1, comm, s), comm, s,
                 "ncclBroadcast"));
    CHECK(firstDifference(recv, values(n - 1, c, 7), "ncclBroadcast"));
    CHECK(finish(ncclBroadcast(send.data(), send.data(), c, ncclFloat32, 0, comm, s), comm, s,
                 "ncclBroadcast in place"));
    CHECK(firstDifference(send, values(0, c, 7), "ncclBroadcast in place"));
  }
  // Integers wrap, as on the device.
  {
    std::vector<uint8_t> b = {uint8_t(200 + rank), uint8_t(rank)};
    CHECK(finish(ncclAllReduce(b.data(), b.data(), 2, ncclUint8, ncclSum, comm, s), comm, s,
                 "ncclAllReduce u8"));
    int sum = 0;
    for (int q = 0; q < n; ++q)
      sum += 200 + q;
    if (b[0] != uint8_t(sum) || b[1] != uint8_t(n * (n - 1) / 2))
      return "ncclAllReduce u8: no wrap-around";
  }
#undef CHECK
  if (!finalizeAndDestroy(comm))
    return "ncclCommFinalize";
  return "";
}

using RankFn = std::function<std::string(int rank, int n, ncclUniqueId id, cudaStream_t s)>;

// n ranks as threads of this process, each with a stream of its own.
std::vector<std::string> runThreads(int n, const RankFn &fn) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  Streams streams;
  std::vector<cudaStream_t> s(n);
  for (auto &x : s)
    x = streams.make();
  std::vector<std::string> out(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] { out[r] = fn(r, n, id, s[r]); });
  for (auto &t : ts)
    t.join();
  return out;
}

// n ranks as forked processes of this binary; a rank's failure is its exit
// status and its text on a pipe.
std::vector<std::string> runProcesses(int n, const RankFn &fn) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int r = 0; r < n; ++r) {
    int fd[2];
    if (pipe(fd) != 0)
      return {"pipe"};
    pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      std::string err;
      {
        Streams streams;
        err = fn(r, n, id, streams.make());
      }
      if (!err.empty() && write(fd[1], err.data(), err.size()) < 0)
        _exit(3);
      _exit(err.empty() ? 0 : 1);
    }
    close(fd[1]);
    pids.push_back(pid);
    pipes.push_back(fd[0]);
  }
  std::vector<std::string> out(n);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kGuardS);
  for (int r = 0; r < n; ++r) {
    int status = 0;
    while (waitpid(pids[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids)
          kill(p, SIGKILL);
        waitpid(pids[r], &status, 0);
        out[r] = "hung";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    char buf[512];
    ssize_t got = read(pipes[r], buf, sizeof buf);
    close(pipes[r]);
    if (out[r].empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
      out[r] = "exit status " + std::to_string(status) + ": " +
               std::string(buf, got > 0 ? size_t(got) : 0);
  }
  return out;
}

// The /dev/shm entries of this process's communicators (their names carry
// the pid of the process that made the id).
std::vector<std::string> leftovers() {
  std::vector<std::string> found;
  std::string prefix = "fsdpemu-" + std::to_string(getpid()) + "-";
  if (DIR *d = opendir("/dev/shm")) {
    while (dirent *e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0)
        found.push_back(e->d_name);
    closedir(d);
  }
  return found;
}

void expectAllPassed(const std::vector<std::string> &out) {
  for (size_t r = 0; r < out.size(); ++r)
    EXPECT_EQ(out[r], "") << "rank " << r;
  EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

TEST(NcclEmu, CollectivesTwoThreads) { expectAllPassed(runThreads(2, collectivesRank)); }
TEST(NcclEmu, CollectivesFourThreads) { expectAllPassed(runThreads(4, collectivesRank)); }
TEST(NcclEmu, CollectivesTwoProcesses) { expectAllPassed(runProcesses(2, collectivesRank)); }
TEST(NcclEmu, CollectivesFourProcesses) { expectAllPassed(runProcesses(4, collectivesRank)); }

// A world of 4 split as runtime/communicators/NCCL.cpp splits it (shard groups of
// 2, replica groups of 2), then in one group of 4 in reverse order (whose sum
// differs from the forward one), and with one rank left out.
std::string splitRank(int rank, int n, ncclUniqueId id, cudaStream_t s) {
  std::string err;
  ncclComm_t world = initNonBlocking(n, id, rank, &err);
  if (!world)
    return err;
  ncclComm_t shard = splitNonBlocking(world, rank / 2, rank % 2, &err);
  ncclComm_t replica = err.empty() ? splitNonBlocking(world, rank % 2, rank / 2, &err) : nullptr;
  ncclComm_t reversed = err.empty() ? splitNonBlocking(world, 0, n - 1 - rank, &err) : nullptr;
  ncclComm_t some =
      err.empty() ? splitNonBlocking(world, rank == 0 ? NCCL_SPLIT_NOCOLOR : 5, 0, &err) : nullptr;
  if (!err.empty())
    return err;
  int count = 0, me = -1;
  if (ncclCommCount(shard, &count) != ncclSuccess || count != 2 ||
      ncclCommUserRank(shard, &me) != ncclSuccess || me != rank % 2)
    return "shard group: size or rank";
  if (ncclCommCount(replica, &count) != ncclSuccess || count != n / 2 ||
      ncclCommUserRank(replica, &me) != ncclSuccess || me != rank / 2)
    return "replica group: size or rank";
  if (ncclCommUserRank(reversed, &me) != ncclSuccess || me != n - 1 - rank)
    return "reversed group: rank";
  if ((rank == 0) != (some == nullptr))
    return "NCCL_SPLIT_NOCOLOR: a communicator given, or none to the others";

  const size_t c = 4096;
  std::vector<float> x = values(rank, c, 8), got(c);
  // Shard group: ranks 2g and 2g+1.
  std::string e = finish(ncclAllReduce(x.data(), got.data(), c, ncclFloat32, ncclSum, shard, s),
                         shard, s, "shard ncclAllReduce");
  if (!e.empty())
    return e;
  for (size_t i = 0; i < c; ++i) {
    int g = rank / 2 * 2;
    if (got[i] != value(g, i, 8) + value(g + 1, i, 8))
      return "shard group sum";
  }
  // Reversed group: rank n-1 first.
  e = finish(ncclAllReduce(x.data(), got.data(), c, ncclFloat32, ncclSum, reversed, s), reversed, s,
             "reversed ncclAllReduce");
  if (!e.empty())
    return e;
  bool orderShows = false;
  for (size_t i = 0; i < c; ++i) {
    float back = value(n - 1, i, 8), fwd = value(0, i, 8);
    for (int q = n - 2; q >= 0; --q)
      back += value(q, i, 8);
    for (int q = 1; q < n; ++q)
      fwd += value(q, i, 8);
    if (std::memcmp(&got[i], &back, 4) != 0)
      return "reversed group: not summed in its rank order";
    orderShows |= back != fwd;
  }
  if (n > 2 && !orderShows)
    return "the test's values do not show the order of a sum";
  // The replica group still works after the others were used.
  e = finish(ncclAllReduce(x.data(), got.data(), c, ncclFloat32, ncclSum, replica, s), replica, s,
             "replica ncclAllReduce");
  if (!e.empty())
    return e;
  for (ncclComm_t c2 : {some, reversed, replica, shard, world})
    if (c2 && !finalizeAndDestroy(c2))
      return "finalize";
  return "";
}

TEST(NcclEmu, SplitFourThreads) { expectAllPassed(runThreads(4, splitRank)); }
TEST(NcclEmu, SplitFourProcesses) { expectAllPassed(runProcesses(4, splitRank)); }

// Blocking communicators (ncclCommInitRank, a split without a config, a
// blocking ncclCommFinalize): the same results, nothing in progress.
TEST(NcclEmu, BlockingCallsTwoThreads) {
  expectAllPassed(runThreads(2, [](int rank, int n, ncclUniqueId id, cudaStream_t s) {
    ncclComm_t world = nullptr, child = nullptr;
    if (ncclCommInitRank(&world, n, id, rank) != ncclSuccess)
      return std::string("ncclCommInitRank: ") + ncclGetLastError(nullptr);
    if (ncclCommSplit(world, 0, -rank, &child, nullptr) != ncclSuccess || !child)
      return std::string("ncclCommSplit: ") + ncclGetLastError(world);
    int me = -1;
    ncclCommUserRank(child, &me);
    if (me != n - 1 - rank)
      return std::string("ncclCommSplit: key order");
    std::vector<float> x = values(rank, 100, 9);
    std::string e = finish(ncclAllReduce(x.data(), x.data(), 100, ncclFloat32, ncclSum, child, s),
                           child, s, "blocking ncclAllReduce");
    for (size_t i = 0; e.empty() && i < x.size(); ++i)
      if (x[i] != value(1, i, 9) + value(0, i, 9))
        e = "blocking ncclAllReduce: element " + std::to_string(i);
    if (ncclCommFinalize(child) != ncclSuccess || ncclCommFinalize(world) != ncclSuccess)
      e += "blocking ncclCommFinalize";
    ncclCommDestroy(child);
    ncclCommDestroy(world);
    return e;
  }));
}

// Ranks that issue different calls (another collective, or another count)
// stop with ncclInvalidUsage naming both calls, instead of exchanging
// unrelated bytes.
TEST(NcclEmu, MismatchedCallsNamed) {
  struct Case {
    bool gather;
    size_t count;
    const char *want0, *want1;
  };
  const Case cases[] = {
      {true, 5,
       "ncclAllReduce: ranks disagree: rank 0 calls ncclAllReduce (call 1) of 100 x float32, "
       "rank 1 ncclAllGather (call 1) of 5 x float32",
       "ncclAllGather: ranks disagree: rank 1 calls ncclAllGather (call 1) of 5 x float32, "
       "rank 0 ncclAllReduce (call 1) of 100 x float32"},
      {false, 101,
       "ncclAllReduce: ranks disagree: rank 0 calls ncclAllReduce (call 1) of 100 x float32, "
       "rank 1 ncclAllReduce (call 1) of 101 x float32",
       "ncclAllReduce: ranks disagree: rank 1 calls ncclAllReduce (call 1) of 101 x float32, "
       "rank 0 ncclAllReduce (call 1) of 100 x float32"}};
  for (const Case &c : cases) {
    auto out = runThreads(2, [&](int rank, int n, ncclUniqueId id, cudaStream_t s) {
      std::string err;
      ncclComm_t comm = initNonBlocking(n, id, rank, &err);
      if (!comm)
        return err;
      std::vector<float> x(400, 1.0f);
      ncclResult_t r =
          rank == 0  ? ncclAllReduce(x.data(), x.data(), 100, ncclFloat32, ncclSum, comm, s)
          : c.gather ? ncclAllGather(x.data(), x.data() + 200, c.count, ncclFloat32, comm, s)
                     : ncclAllReduce(x.data(), x.data(), c.count, ncclFloat32, ncclSum, comm, s);
      if (r != ncclSuccess || !Streams::sync(s))
        return std::string("not issued");
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm, &state);
      std::string last = ncclGetLastError(comm);
      ncclCommAbort(comm);
      if (state != ncclInvalidUsage || last.find(rank == 0 ? c.want0 : c.want1) != 0)
        return text(state) + ": " + last;
      if (x[0] != 1.0f)
        return std::string("a mismatched call wrote its result");
      return std::string();
    });
    expectAllPassed(out);
  }
}

// A rank waiting at a collective that its peer never joins is woken by
// ncclCommAbort from another thread; the peer then gets ncclRemoteError
// naming the aborted rank instead of waiting for it.
TEST(NcclEmu, AbortWakesAWaitingRank) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  Streams streams;
  cudaStream_t s0 = streams.make(), s1 = streams.make();
  ncclComm_t c0 = nullptr, c1 = nullptr;
  std::string e0, e1;
  std::thread t([&] { c1 = initNonBlocking(2, id, 1, &e1); });
  c0 = initNonBlocking(2, id, 0, &e0);
  t.join();
  ASSERT_TRUE(c0 && c1) << e0 << e1;

  std::vector<float> x(100, 1.0f);
  ASSERT_EQ(ncclAllReduce(x.data(), x.data(), 100, ncclFloat32, ncclSum, c0, s0), ncclSuccess);
  ASSERT_TRUE(Streams::started(s0, 1));
  ASSERT_EQ(ncclCommAbort(c0), ncclSuccess); // returns once the waiting work stopped
  EXPECT_TRUE(Streams::sync(s0));
  EXPECT_EQ(x[0], 1.0f) << "an aborted collective wrote its result";

  // Rank 0 may have posted its data before the abort: rank 1's matching call
  // then completes, and its next one finds rank 0 gone.
  ncclResult_t state = ncclSuccess;
  for (int call = 0; call < 2 && state == ncclSuccess; ++call) {
    ASSERT_EQ(ncclAllReduce(x.data(), x.data(), 100, ncclFloat32, ncclSum, c1, s1), ncclSuccess);
    ASSERT_TRUE(Streams::sync(s1));
    ASSERT_EQ(ncclCommGetAsyncError(c1, &state), ncclSuccess);
    if (state == ncclSuccess) {
      EXPECT_EQ(x[0], 2.0f);
    }
  }
  EXPECT_EQ(state, ncclRemoteError);
  EXPECT_NE(std::string(ncclGetLastError(c1)).find("rank 0 failed: rank 0 aborted"),
            std::string::npos)
      << ncclGetLastError(c1);
  // A failed communicator refuses further calls with its error.
  EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 100, ncclFloat32, ncclSum, c1, s1), ncclRemoteError);
  ASSERT_EQ(ncclCommAbort(c1), ncclSuccess);
  EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

// A rank whose peers never come is aborted during set-up; the segment it
// made is gone with it.
TEST(NcclEmu, AbortDuringInitLeavesNothing) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 3, id, 1, &config), ncclInProgress);
  ASSERT_NE(comm, nullptr);
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  // Its segment exists while it waits (so the check below can fail).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kGuardS);
  while (leftovers().empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(leftovers().size(), 1u);
  ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

// A peer process killed with SIGKILL (still a zombie: not reaped yet) is
// noticed by the rank waiting for it, as ncclRemoteError naming it.
TEST(NcclEmu, KilledPeerIsDetected) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  pid_t child = fork();
  if (child == 0) {
    std::string err;
    Streams streams;
    cudaStream_t s = streams.make();
    ncclComm_t c = initNonBlocking(2, id, 1, &err);
    float x = 1;
    if (!c || !finish(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, s), c, s, "").empty())
      _exit(1);
    for (;;)
      pause();
  }
  ASSERT_GT(child, 0);
  Streams streams;
  cudaStream_t s = streams.make();
  std::string err;
  ncclComm_t c = initNonBlocking(2, id, 0, &err);
  ASSERT_NE(c, nullptr) << err;
  float x = 2;
  ASSERT_EQ(finish(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, s), c, s, "first"), "");
  EXPECT_EQ(x, 3.0f);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, s), ncclSuccess);
  ASSERT_TRUE(Streams::sync(s));
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(c, &state), ncclSuccess);
  EXPECT_EQ(state, ncclRemoteError);
  std::string last = ncclGetLastError(c);
  EXPECT_NE(last.find("ncclAllReduce: rank 1 (pid " + std::to_string(child) + ") exited"),
            std::string::npos)
      << last;
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ncclCommAbort(c);
  EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

// FSDP_EMU_NCCL_FAULT=1:3: rank 1's third collective fails with
// ncclSystemError (an asynchronous error, on the stream), and rank 0, waiting
// for it there, gets ncclRemoteError naming rank 1. The count includes the
// communicators split from the world.
TEST(NcclEmu, InjectedFault) {
  setenv("FSDP_EMU_NCCL_FAULT", "1:3", 1);
  auto out = runThreads(2, [](int rank, int n, ncclUniqueId id, cudaStream_t s) -> std::string {
    std::string err;
    ncclComm_t world = initNonBlocking(n, id, rank, &err);
    ncclComm_t child = world ? splitNonBlocking(world, 0, rank, &err) : nullptr;
    if (!child)
      return err;
    float x = 1;
    for (ncclComm_t c : {world, child}) {
      std::string e = finish(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, s), c, s, "ok");
      if (!e.empty())
        return "collective before the fault: " + e;
    }
    if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, child, s) != ncclSuccess ||
        !Streams::sync(s))
      return "the faulted call was refused when issued";
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(child, &state);
    std::string last = ncclGetLastError(child);
    if (rank == 1 &&
        (state != ncclSystemError ||
         last != "FSDP_EMU_NCCL_FAULT=1:3: rank 1's collective 3 (ncclAllReduce) failed as "
                 "injected"))
      return "rank 1: " + text(state) + ": " + last;
    if (rank == 0 && (state != ncclRemoteError ||
                      last.find("ncclAllReduce: rank 1 failed: FSDP_EMU_NCCL_FAULT=1:3") != 0))
      return "rank 0: " + text(state) + ": " + last;
    if (x != 4.0f)
      return "the faulted collective wrote its result";
    // The world communicator, untouched by the fault, still works.
    ncclCommAbort(child);
    std::string e =
        finish(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, world, s), world, s, "after");
    ncclCommAbort(world);
    return e;
  });
  unsetenv("FSDP_EMU_NCCL_FAULT");
  expectAllPassed(out);
}

// Every malformed FSDP_EMU_NCCL_FAULT is refused at set-up, naming it.
TEST(NcclEmu, MalformedFaultRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const char *bad[] = {"x",    "1",    "1:",   ":1",   "1:0", "-1:1", "1:x",   "1:2:3",
                       "+1:2", "1:+2", " 1:2", "1:2 ", "2:1", "1:-2", "0x1:1", "1:99999999999"};
  int refused = 0;
  for (const char *v : bad) {
    setenv("FSDP_EMU_NCCL_FAULT", v, 1);
    ncclComm_t comm = reinterpret_cast<ncclComm_t>(1);
    ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, 0, nullptr);
    std::string last = ncclGetLastError(nullptr);
    bool ok = r == ncclInvalidArgument && comm == nullptr &&
              last.find(std::string("FSDP_EMU_NCCL_FAULT='") + v + "'") != std::string::npos;
    EXPECT_TRUE(ok) << v << ": " << text(r) << ": " << last;
    refused += ok;
  }
  unsetenv("FSDP_EMU_NCCL_FAULT");
  std::printf("FSDP_EMU_NCCL_FAULT values: %zu tried, %d refused naming the variable\n",
              sizeof bad / sizeof *bad, refused);
  EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

// What NCCL refuses, refused with its codes (and nothing enqueued).
TEST(NcclEmu, Refusals) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  Streams streams;
  cudaStream_t s = streams.make();
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, nullptr), ncclSuccess); // blocking
  float x[2] = {1, 2};
  EXPECT_EQ(ncclAllReduce(x, x, 2, ncclFloat32, ncclMax, comm, s), ncclInvalidArgument);
  EXPECT_EQ(ncclReduceScatter(x, x, 1, ncclFloat32, ncclProd, comm, s), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(x, x, 1, ncclFloat16, ncclSum, comm, s), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(x, x, 1, ncclDataType_t(42), ncclSum, comm, s), ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(x, x, 1, ncclFloat32, nullptr, s), ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(nullptr, x, 1, ncclFloat32, comm, s), ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(x, x, 1, ncclFloat32, 1, comm, s), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, comm, kBrokenStream),
            ncclUnhandledCudaError);
  EXPECT_EQ(Streams::of(s).log.size(), 0u);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  // One rank: a sum of itself; the communicator still works after refusals.
  EXPECT_EQ(finish(ncclAllReduce(x, x, 2, ncclFloat32, ncclSum, comm, s), comm, s, "one rank"), "");
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);

  ncclUniqueId junk;
  std::memset(&junk, 7, sizeof junk);
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 2, junk, 0, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 2, id, 2, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 0, id, 0, nullptr), ncclInvalidArgument);
  ncclConfig_t unset;
  std::memset(&unset, 0, sizeof unset);
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &unset), ncclInvalidArgument);
  EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess);
  EXPECT_EQ(leftovers(), std::vector<std::string>{});
}

} // namespace
