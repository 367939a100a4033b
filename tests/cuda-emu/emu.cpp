//===- emu.cpp - The emulated device: memory, launches, fibers, cuBLAS ----===//
//
// See cuda_emu.h. The threads of a block are fibers on the calling OS
// thread, switched by Boost.Context's fcontext (no system call a switch,
// where ucontext's swapcontext saves the signal mask with one: 80 % of an
// emulated run's time went there); a scheduler resumes every ready fiber in turn (forwards, then
// backwards on the next round), and when none is ready settles the waits:
// a warp operation completes once every lane of its mask waits at it, a
// __syncthreads once every live thread of the block does. Nothing left to
// settle while threads still wait is a deadlock, reported as the launch's
// failure.
//
//===----------------------------------------------------------------------===//
#include "tests/cuda-emu/cuda_emu.h"
#include "tests/cuda-emu/emu_device.h"
#include "tests/cuda-emu/emu_report.h"
#include "tests/cuda-emu/include/cublas_v2.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/detail/fcontext.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// Here the names are the emulator's own, not the running thread's.
#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim

namespace cuda_emu {
namespace {

// --- Device state --------------------------------------------------------------

constexpr size_t kStaticSharedMax = 48 * 1024;      // static __shared__ a block
constexpr size_t kDynamicSharedDefault = 48 * 1024; // without the attribute
constexpr size_t kSharedOptInMax = 227 * 1024;      // sm_90's opt-in maximum a block

// Memory between two PROT_NONE pages, ending at the second: a read or write
// past the end faults (the SIGSEGV handler names the kernel) instead of
// passing unseen, and so does one far enough before the start. The pages
// are reserved (MAP_NORESERVE) and backed as the NaN fill touches them.
struct Guarded {
  void *map = nullptr;
  size_t length = 0;
  char *start = nullptr; // 256-aligned, start + rounded size = the last guard page
};
Guarded mapGuarded(size_t bytes) {
  const size_t page = 4096, rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  const size_t data = (rounded + page - 1) / page * page;
  Guarded g;
  g.length = page + data + page;
  g.map = mmap(nullptr, g.length, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (g.map == MAP_FAILED)
    return Guarded{};
  char *base = static_cast<char *>(g.map);
  mprotect(base, page, PROT_NONE);
  mprotect(base + page + data, page, PROT_NONE);
  g.start = base + page + data - rounded;
  std::memset(g.start, 0xff, rounded); // NaN until written
  return g;
}

// The device's bytes: FSDP_EMULATED_GPU_MEMORY, or 80 GiB (an H100's).
constexpr size_t kDefaultCapacity = size_t(80) << 30;

struct Device {
  std::mutex memory;                       // guards the next four
  std::map<uintptr_t, size_t> allocations; // start -> bytes
  std::map<uintptr_t, Guarded> mappings;   // start -> its mapping
  std::map<uintptr_t, size_t> pinned;      // cudaMallocHost: start -> bytes
  size_t used = 0;                         // of the capacity, rounded to 256 each
  std::atomic<int> sticky{cudaSuccess};    // a failed kernel: every call after it
  std::mutex misc;                         // guards the next three
  std::map<const void *, int> maxDynamicShared;
  std::set<std::string> launched;
  std::vector<std::string> failures;
};
// Never destroyed: stream threads may still run while the process exits.
Device &device() {
  static Device *d = new Device;
  return *d;
}
cudaError_t sticky() { return cudaError_t(device().sticky.load()); }
void wakeWaiters();
// The calling host thread's last error, as CUDA keeps one a thread.
thread_local cudaError_t lastError = cudaSuccess;

void fail(cudaError_t error, const std::string &why) {
  Device &d = device();
  int none = cudaSuccess;
  d.sticky.compare_exchange_strong(none, error); // the first error stays
  wakeWaiters();
  {
    std::lock_guard<std::mutex> l(d.misc);
    d.failures.push_back(why);
  }
  std::fprintf(stderr, "cuda-emu: %s\n", why.c_str());
}

// The allocation holding [p, p + bytes), or none (first = 0).
std::pair<uintptr_t, size_t> allocationOf(const void *p, size_t bytes) {
  std::lock_guard<std::mutex> l(device().memory);
  const auto &a = device().allocations;
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  auto it = a.upper_bound(u);
  if (it == a.begin())
    return {0, 0};
  --it;
  if (u + bytes > it->first + it->second)
    return {0, 0};
  return *it;
}
bool inDevice(const void *p, size_t bytes) { return allocationOf(p, bytes).first != 0; }

// Whether [p, p + bytes) lies in one cudaMallocHost allocation.
bool inPinned(const void *p, size_t bytes) {
  std::lock_guard<std::mutex> l(device().memory);
  const auto &a = device().pinned;
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  auto it = a.upper_bound(u);
  if (it == a.begin())
    return false;
  --it;
  return u + bytes <= it->first + it->second;
}

// --- Streams: a thread each --------------------------------------------------------

// Happens-before, for the stream-order checker: a vector clock, one
// component a stream (its id). A stream's clock is that of the last
// operation enqueued on it, which is ordered after the operations before it
// on the stream, after what the enqueuing host thread had waited for
// (hostClock), and after the records its event waits and the legacy stream's
// implicit waits join in. All of it is decided when the host enqueues, never
// by when the work happens to run: a report does not depend on timing.
using Clock = std::vector<uint64_t>;
void join(Clock &into, const Clock &from) {
  if (into.size() < from.size())
    into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i)
    into[i] = std::max(into[i], from[i]);
}
uint64_t component(const Clock &c, size_t i) { return i < c.size() ? c[i] : 0; }
// What the calling host thread has waited for: the clocks of the records,
// streams and device it synchronized with (a query that saw them complete
// does not count: cudaEventQuery).
thread_local Clock hostClock;
// The work label of the calling host thread (setWorkLabel).
thread_local std::string workLabel;
thread_local std::vector<Access> labelAccesses;

// One operation on a stream. Event records and waits run even after a sticky
// error (so that nothing waits forever); everything else is dropped then.
struct Task {
  std::function<void()> work;
  bool always;
};
struct Stream {
  bool blocking = true; // synchronizes with the legacy default stream
  int priority = 0;
  std::deque<Task> queue;
  uint64_t enqueued = 0, completed = 0;
  bool destroyed = false;
  size_t id = 0;    // its clock component
  std::string name; // in reports: "stream 2", "the legacy default stream"
  Clock clock;      // of the last operation enqueued
};
// An event's record: done once its stream has run everything before it.
struct Record {
  bool done = false;
  std::chrono::steady_clock::time_point at;
  Clock clock;        // the recording stream's, as of the record
  std::string stream; // its name
};
struct Event {
  unsigned flags = 0;
  std::shared_ptr<Record> last; // null: never recorded
};

// The stream-order checker's memory: for each span of device bytes, the
// last write and the last read of each stream that touched it (with their
// ticks, the stream's component of their clocks). An access must be ordered
// after every other stream's last write, and a write after their last reads
// too; one stream's earlier accesses are ordered before its last ones.
struct Operation {
  std::string name;   // "micro_step.comm[3] (all_gather): ncclAllGather", "cudaMemcpyAsync"
  std::string stream; // its stream's name
};
using OperationRef = std::shared_ptr<const Operation>;
struct Touch {
  size_t stream;
  uint64_t writeTick = 0, readTick = 0;
  OperationRef writer, reader;
};
struct Span {
  uintptr_t end;
  std::vector<Touch> touches;
};
struct Checker {
  std::map<uintptr_t, Span> spans;      // by start; disjoint
  std::map<std::string, uint64_t> seen; // a pair of operations reported -> times found
  std::vector<std::string> reports;     // each pair's first report, since the last take
  std::atomic<uint64_t> unordered{0};   // conflicting pairs found since the last take
  std::atomic<uint64_t> distinct{0};    // of them, pairs of operations reported
  bool exitHooked = false;
  uint64_t waits = 0; // cudaStreamWaitEvent calls so far (FSDP_EMU_DROP_WAIT)
  // Freed device allocations: their bytes, and how far into them operations
  // read or wrote (FSDP_EMU_MEMORY_REPORT).
  std::vector<std::pair<size_t, size_t>> freed;
};

struct Streams {
  std::mutex mu;              // guards everything here and every stream's queue
  std::condition_variable cv; // a task completed, a record was reached, an error
  std::set<Stream *> live;    // created and not destroyed, the legacy one included
  std::vector<Stream *> every;
  Stream *legacy = nullptr;
  std::set<Event *> events;
  Checker checker;
  size_t components = 0; // of the clocks: one a stream, one a host thread
};
// Never destroyed, as the device: detached stream threads use it until exit.
Streams &streams() {
  static Streams *s = new Streams;
  return *s;
}

void wakeWaiters() {
  Streams &all = streams();
  {
    std::lock_guard<std::mutex> l(all.mu);
  }
  all.cv.notify_all();
}

// Blocks until pred() (read with the streams' lock held) or a sticky error.
void waitUntil(const std::function<bool()> &pred) {
  Streams &all = streams();
  std::unique_lock<std::mutex> l(all.mu);
  all.cv.wait(l, [&] { return pred() || sticky() != cudaSuccess; });
}

void serve(Stream *s) {
  Streams &all = streams();
  std::unique_lock<std::mutex> l(all.mu);
  for (;;) {
    all.cv.wait(l, [&] { return !s->queue.empty() || s->destroyed; });
    if (s->queue.empty())
      return; // destroyed, and its work done
    Task t = std::move(s->queue.front());
    s->queue.pop_front();
    l.unlock();
    if (t.always || sticky() == cudaSuccess)
      t.work();
    t.work = nullptr;
    l.lock();
    ++s->completed;
    all.cv.notify_all();
  }
}

// With the streams' lock held.
Stream *newStream(bool blocking, int priority) {
  Streams &all = streams();
  auto *s = new Stream;
  s->blocking = blocking;
  s->priority = priority;
  s->id = all.components++;
  s->name = "stream " + std::to_string(all.every.size()); // its number among the streams
  all.live.insert(s);
  all.every.push_back(s);
  std::thread(serve, s).detach();
  return s;
}

// The stream a handle names (nullptr: the legacy default stream, started on
// first use), or null when it names none. With the streams' lock held.
Stream *lookup(cudaStream_t handle) {
  Streams &all = streams();
  if (!handle) {
    if (!all.legacy) {
      all.legacy = newStream(true, 0);
      all.legacy->name = "the legacy default stream";
    }
    return all.legacy;
  }
  Stream *s = reinterpret_cast<Stream *>(handle);
  return all.live.count(s) ? s : nullptr;
}

bool validStream(cudaStream_t handle) {
  std::lock_guard<std::mutex> l(streams().mu);
  return lookup(handle) != nullptr;
}

// The stream-order checker's span boundary at x. With the lock held.
void splitAt(std::map<uintptr_t, Span> &spans, uintptr_t x) {
  auto it = spans.upper_bound(x);
  if (it == spans.begin())
    return;
  --it;
  if (it->first < x && x < it->second.end) {
    Span tail = it->second;
    it->second.end = x;
    spans.emplace(x, std::move(tail));
  }
}

std::string describeBytes(uintptr_t from, uintptr_t to);
void exitOnReports();

// Checks the accesses of `op`, just enqueued on the stream whose clock
// component is `id` (its clock: `now`), or made by the host thread of that
// component, against every earlier access of another that conflicts with one
// (overlapping bytes, a write among the two) and is not ordered before it;
// reports each such pair of operations once, then records the accesses.
// With the streams' lock held.
void checkOrder(size_t id, const Clock &now, const OperationRef &op,
                const std::vector<Access> &accesses) {
  Checker &c = streams().checker;
  const uint64_t tick = component(now, id);
  // (other operation, it wrote, this one writes) -> the bytes, first to last
  std::map<std::tuple<OperationRef, bool, bool>, std::pair<uintptr_t, uintptr_t>> found;
  for (const Access &a : accesses) {
    if (!a.ptr || !a.bytes)
      continue;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(a.ptr), hi = lo + a.bytes;
    splitAt(c.spans, lo);
    splitAt(c.spans, hi);
    auto it = c.spans.lower_bound(lo);
    for (uintptr_t at = lo; at < hi; ++it) {
      if (it == c.spans.end() || it->first > at) // bytes no one touched yet
        it = c.spans.emplace_hint(it, at,
                                  Span{it == c.spans.end() ? hi : std::min(hi, it->first), {}});
      Span &span = it->second;
      auto note = [&](const OperationRef &other, bool otherWrote) {
        auto [r, fresh] = found.try_emplace({other, otherWrote, a.write}, it->first, span.end);
        if (!fresh) {
          r->second.first = std::min(r->second.first, it->first);
          r->second.second = std::max(r->second.second, span.end);
        }
      };
      Touch *mine = nullptr;
      for (Touch &t : span.touches) {
        if (t.stream == id) {
          mine = &t;
          continue;
        }
        const uint64_t known = component(now, t.stream);
        if (t.writer && t.writeTick > known)
          note(t.writer, true);
        if (a.write && t.reader && t.readTick > known)
          note(t.reader, false);
        // What this write is ordered after need not be kept: a later access
        // that conflicts with it conflicts with this write, and is ordered
        // after this write only if after it too.
        if (a.write && t.writer && t.writeTick <= known)
          t.writer.reset();
        if (a.write && t.reader && t.readTick <= known)
          t.reader.reset();
      }
      if (!mine) {
        span.touches.push_back(Touch{id});
        mine = &span.touches.back();
      }
      if (a.write) {
        mine->writer = op;
        mine->writeTick = tick;
        mine->reader.reset(); // this stream's read before it: ordered before the write
      } else {
        mine->reader = op;
        mine->readTick = tick;
      }
      span.touches.erase(std::remove_if(span.touches.begin(), span.touches.end(),
                                        [](const Touch &t) { return !t.writer && !t.reader; }),
                         span.touches.end());
      at = span.end;
    }
  }
  for (const auto &[key, bytes] : found) {
    const auto &[other, otherWrote, thisWrites] = key;
    const std::string pair = other->name + " on " + other->stream +
                             (otherWrote ? " writes" : " reads") + ", then " + op->name + " on " +
                             op->stream + (thisWrites ? " writes" : " reads");
    ++c.unordered;
    if (c.seen[pair]++ > 0)
      continue; // the same two operations again (another step): reported once
    const std::string report =
        describeBytes(bytes.first, bytes.second) + ": " + (otherWrote ? "written" : "read") +
        " by " + other->name + " on " + other->stream + ", then " +
        (thisWrites ? "written" : "read") + " by " + op->name + " on " + op->stream +
        ", and nothing orders the two (no event wait, and no stream, event or device "
        "synchronization of the host, between them)";
    c.reports.push_back(report);
    ++c.distinct;
    std::fprintf(stderr, "cuda-emu: stream-order race: %s\n", report.c_str());
    if (!c.exitHooked) {
      c.exitHooked = true;
      std::atexit(exitOnReports);
    }
  }
}

// Appends work to s and returns its ticket: s has run it once completed
// reaches the ticket. The legacy default stream and the blocking streams
// wait for each other's earlier work, as CUDA's do. `what` names the
// operation and `accesses` are its device bytes, for the stream-order
// checker (none for records and waits). With the lock held.
uint64_t pushLocked(Stream *s, std::function<void()> work, bool always, const char *what = nullptr,
                    const std::vector<Access> *accesses = nullptr) {
  Streams &all = streams();
  auto waitFor = [&](Stream *other) {
    if (other == s)
      return;
    join(s->clock, other->clock); // ordered after it, whether or not it has run yet
    if (other->completed == other->enqueued)
      return;
    const uint64_t until = other->enqueued;
    s->queue.push_back(
        {[other, until] { waitUntil([&] { return other->completed >= until; }); }, true});
    ++s->enqueued;
  };
  if (s == all.legacy) {
    for (Stream *other : all.live)
      if (other->blocking)
        waitFor(other);
  } else if (s->blocking && all.legacy) {
    waitFor(all.legacy);
  }
  join(s->clock, hostClock);
  if (s->clock.size() <= s->id)
    s->clock.resize(s->id + 1, 0);
  ++s->clock[s->id];
  if (what && accesses && !accesses->empty())
    checkOrder(s->id, s->clock,
               std::make_shared<const Operation>(Operation{
                   workLabel.empty() ? std::string(what) : workLabel + ": " + what, s->name}),
               *accesses);
  s->queue.push_back({std::move(work), always});
  all.cv.notify_all();
  return ++s->enqueued;
}

// Enqueues work on a stream; false when the handle names none. `after`
// receives the operation's clock (the host joins it once it has waited).
bool submit(cudaStream_t handle, std::function<void()> work, bool always, Stream **on = nullptr,
            uint64_t *ticket = nullptr, const char *what = nullptr,
            const std::vector<Access> *accesses = nullptr, Clock *after = nullptr) {
  std::lock_guard<std::mutex> l(streams().mu);
  Stream *s = lookup(handle);
  if (!s)
    return false;
  const uint64_t t = pushLocked(s, std::move(work), always, what, accesses);
  if (on)
    *on = s;
  if (ticket)
    *ticket = t;
  if (after)
    *after = s->clock;
  return true;
}

// Waits until every stream has run what it holds now; a sticky error ends
// the wait of an event wait, never a running task. The host is then ordered
// after all of it.
void drainAll() {
  Streams &all = streams();
  std::unique_lock<std::mutex> l(all.mu);
  std::vector<std::pair<Stream *, uint64_t>> until;
  Clock clock;
  for (Stream *s : all.every) {
    until.emplace_back(s, s->enqueued);
    join(clock, s->clock);
  }
  all.cv.wait(l, [&] {
    for (auto &[s, t] : until)
      if (s->completed < t)
        return false;
    return true;
  });
  join(hostClock, clock);
}

// "bytes [a, b) of the N-byte allocation at 0x...": offsets in the arena
// are the plan's.
std::string describeBytes(uintptr_t from, uintptr_t to) {
  const auto [start, size] = allocationOf(reinterpret_cast<const void *>(from), to - from);
  std::ostringstream os;
  if (!start) {
    os << "bytes 0x" << std::hex << from << " to 0x" << to;
    return os.str();
  }
  os << "bytes [" << from - start << ", " << to - start << ") of the " << size
     << "-byte allocation at 0x" << std::hex << start;
  return os.str();
}

// How far into [start, end) operations have read or written: the end of the
// last span the checker keeps there (spans exist only where some operation
// touched). With the streams' lock held.
size_t touchedIn(uintptr_t start, uintptr_t end) {
  const auto &spans = streams().checker.spans;
  auto it = spans.lower_bound(end);
  if (it == spans.begin())
    return 0;
  --it;
  if (it->first < start)
    return 0;
  return std::min(it->second.end, end) - start;
}

void writeMemoryReport();

// At exit, after a report no test took (takeStreamOrderReports): the
// process's status is 1, whatever it would have been, so that a run with a
// race fails even where its results happen to come out right.
void exitOnReports() {
  writeMemoryReport();
  const Checker &c = streams().checker;
  const uint64_t n = c.unordered.load();
  if (n == 0)
    return;
  std::fprintf(stderr,
               "cuda-emu: the stream-order checker found %llu unordered conflicting accesses "
               "(%llu pairs of operations, each reported above); exit status 1\n",
               (unsigned long long)n, (unsigned long long)c.distinct.load());
  std::fflush(nullptr);
  _exit(1);
}

// FSDP_EMU_MEMORY_REPORT=PATH: at exit, PATH.PID holds a line for each
// allocation of device memory the process made, freed or not:
// {"bytes":N,"touched":T}, T how far into it operations read or wrote, as
// the device saw them (kernels, copies, GEMMs, collectives): a test holds
// the arena's to the plan's arena, apart from the runtime's own count.
void writeMemoryReport() {
  static std::atomic<bool> written{false};
  const char *path = std::getenv("FSDP_EMU_MEMORY_REPORT");
  if (!path || !*path || written.exchange(true))
    return;
  std::vector<std::pair<uintptr_t, size_t>> live;
  {
    std::lock_guard<std::mutex> l(device().memory);
    live.assign(device().allocations.begin(), device().allocations.end());
  }
  std::vector<std::pair<size_t, size_t>> uses;
  {
    std::lock_guard<std::mutex> l(streams().mu);
    uses = streams().checker.freed;
    for (const auto &[start, bytes] : live)
      uses.push_back({bytes, touchedIn(start, start + bytes)});
  }
  const std::string file = std::string(path) + "." + std::to_string(getpid());
  if (FILE *f = std::fopen(file.c_str(), "w")) {
    for (const auto &[bytes, touched] : uses)
      std::fprintf(f, "{\"bytes\":%zu,\"touched\":%zu}\n", bytes, touched);
    std::fclose(f);
  } else {
    std::fprintf(stderr, "cuda-emu: FSDP_EMU_MEMORY_REPORT: cannot write %s\n", file.c_str());
  }
}

// --- Kernel names, from the symbol table of the object holding them ------------
// (the test executable, or the emulated plugin fsdp-run opens)

int mainObjectBias(struct dl_phdr_info *info, size_t, void *out) {
  *static_cast<uintptr_t *>(out) = info->dlpi_addr;
  return 1; // the first object is the executable
}

std::map<uintptr_t, std::string> loadFunctionSymbols(const std::string &file, uintptr_t bias) {
  std::map<uintptr_t, std::string> out;
  std::ifstream f(file, std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (image.size() < sizeof(Elf64_Ehdr))
    return out;
  const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(image.data());
  if (eh->e_shoff == 0 || eh->e_shoff + size_t(eh->e_shnum) * sizeof(Elf64_Shdr) > image.size())
    return out;
  const auto *sh = reinterpret_cast<const Elf64_Shdr *>(image.data() + eh->e_shoff);
  for (unsigned s = 0; s < eh->e_shnum; ++s) {
    if (sh[s].sh_type != SHT_SYMTAB || sh[s].sh_link >= eh->e_shnum)
      continue;
    const Elf64_Shdr &strtab = sh[sh[s].sh_link];
    const auto *syms = reinterpret_cast<const Elf64_Sym *>(image.data() + sh[s].sh_offset);
    const size_t count = sh[s].sh_size / sizeof(Elf64_Sym);
    for (size_t i = 0; i < count; ++i)
      if (ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC && syms[i].st_value != 0)
        out[bias + syms[i].st_value] = image.data() + strtab.sh_offset + syms[i].st_name;
  }
  return out;
}

// "void ns::(anonymous namespace)::k<64>(float const*, int)" -> "k".
std::string baseName(const std::string &demangled) {
  std::string s = demangled;
  auto stripBracketed = [&s](char open, char close) {
    if (s.empty() || s.back() != close)
      return;
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      depth += s[i] == close ? 1 : s[i] == open ? -1 : 0;
      if (depth == 0) {
        s.resize(i);
        return;
      }
    }
  };
  stripBracketed('(', ')');
  stripBracketed('<', '>');
  const size_t colon = s.rfind("::");
  if (colon != std::string::npos)
    s = s.substr(colon + 2);
  const size_t space = s.rfind(' ');
  return space == std::string::npos ? s : s.substr(space + 1);
}

std::string kernelName(const void *kernel) {
  static std::mutex *mu = new std::mutex; // never destroyed, as block()
  std::lock_guard<std::mutex> l(*mu);
  static auto &objects = *new std::map<std::string, std::map<uintptr_t, std::string>>; // by file
  static auto &cache = *new std::map<const void *, std::string>;
  auto hit = cache.find(kernel);
  if (hit != cache.end())
    return hit->second;
  Dl_info info{};
  std::string file = "/proc/self/exe";
  uintptr_t bias = 0;
  dl_iterate_phdr(mainObjectBias, &bias);
  if (dladdr(kernel, &info) && info.dli_fname &&
      reinterpret_cast<uintptr_t>(info.dli_fbase) != bias && std::strchr(info.dli_fname, '/')) {
    file = info.dli_fname; // a shared object's: its symbols are relative to its base
    bias = reinterpret_cast<uintptr_t>(info.dli_fbase);
  }
  auto loaded = objects.find(file);
  if (loaded == objects.end())
    loaded = objects.emplace(file, loadFunctionSymbols(file, bias)).first;
  const auto &symbols = loaded->second;
  auto it = symbols.find(reinterpret_cast<uintptr_t>(kernel));
  std::string name = "?";
  if (it != symbols.end()) {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> d(
        abi::__cxa_demangle(it->second.c_str(), nullptr, nullptr, &status), &std::free);
    name = baseName(status == 0 && d ? d.get() : it->second);
  }
  return cache[kernel] = name;
}

// --- Fibers ------------------------------------------------------------------

enum class State { Ready, AtBarrier, AtWarp, Done };

constexpr size_t kStackBytes = 256 * 1024, kGuardBytes = 4096;

namespace fctx = boost::context::detail;

struct Fiber {
  fctx::fcontext_t context = nullptr; // where the fiber resumes
  char *stack = nullptr;              // kGuardBytes of PROT_NONE, then the stack
  State state = State::Done;
  ThreadView view;
  int linear = 0;
  WarpOp op = WarpOp::Sync;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  int src = 0;
};

struct Block {
  std::vector<std::unique_ptr<Fiber>> fibers; // grows to the largest block, reused
  size_t threads = 0;
  const std::function<void()> *body = nullptr;
  std::map<std::string, std::vector<unsigned char>> statics;
  size_t staticBytes = 0;
  Guarded dynamic; // the launch's dynamic shared memory
  size_t dynamicBytes = 0;
  std::string failure;                  // set: the block is abandoned
  fctx::fcontext_t scheduler = nullptr; // where the running fiber yields to
  Fiber *current = nullptr;
  std::string kernel;
};
// Never destroyed: a stream thread may still run a kernel while the process
// exits (after an error, the executor leaves its streams as they are).
Block &block() {
  static Block *b = new Block;
  return *b;
}

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "cuda-emu: %s\n", what);
  std::abort();
}

Fiber &current() {
  Fiber *f = block().current;
  if (!f)
    die("a device function ran outside a kernel launch");
  return *f;
}

void yieldToScheduler() {
  Block &b = block();
  b.scheduler = fctx::jump_fcontext(b.scheduler, nullptr).fctx;
}

// A fiber's own failure: the block is abandoned, the fiber never resumed.
[[noreturn]] void failInKernel(const std::string &why) {
  Block &b = block();
  Fiber &f = current();
  std::ostringstream os;
  os << why << " (thread " << f.view.threadIdx.x << "," << f.view.threadIdx.y << ","
     << f.view.threadIdx.z << ")";
  b.failure = os.str();
  yieldToScheduler();
  die("an abandoned fiber was resumed");
}

// A fiber's entry: from the scheduler, which it returns to when the thread
// ends (an fcontext function must never return).
void fiberMain(fctx::transfer_t from) {
  Block &b = block();
  b.scheduler = from.fctx;
  (*b.body)();
  b.current->state = State::Done;
  yieldToScheduler();
  die("a finished fiber was resumed");
}

void prepareFibers(dim3 blockDim, dim3 blockIdx, dim3 gridDim) {
  Block &b = block();
  b.threads = size_t(blockDim.x) * blockDim.y * blockDim.z;
  while (b.fibers.size() < b.threads) {
    auto f = std::make_unique<Fiber>();
    void *m = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
      die("no memory for a fiber stack");
    mprotect(m, kGuardBytes, PROT_NONE); // an overflow faults instead of corrupting
    f->stack = static_cast<char *>(m);
    b.fibers.push_back(std::move(f));
  }
  for (size_t t = 0; t < b.threads; ++t) {
    Fiber &f = *b.fibers[t];
    f.linear = int(t);
    f.view.threadIdx = {unsigned(t % blockDim.x), unsigned(t / blockDim.x % blockDim.y),
                        unsigned(t / (size_t(blockDim.x) * blockDim.y))};
    f.view.blockIdx = {blockIdx.x, blockIdx.y, blockIdx.z};
    f.view.blockDim = blockDim;
    f.view.gridDim = gridDim;
    f.state = State::Ready;
    f.context = fctx::make_fcontext(f.stack + kGuardBytes + kStackBytes, kStackBytes, fiberMain);
  }
}

std::string describeWaits() {
  Block &b = block();
  size_t atBarrier = 0, atWarp = 0, done = 0;
  std::ostringstream warps;
  for (size_t t = 0; t < b.threads; ++t) {
    const Fiber &f = *b.fibers[t];
    atBarrier += f.state == State::AtBarrier;
    done += f.state == State::Done;
    if (f.state == State::AtWarp && atWarp++ < 4)
      warps << " thread " << t << " (warp " << t / 32 << ", mask 0x" << std::hex << f.mask
            << std::dec << ")";
  }
  std::ostringstream os;
  os << atBarrier << " threads at __syncthreads, " << atWarp << " at a warp operation"
     << warps.str() << ", " << done << " exited";
  return os.str();
}

// Completes the warp operations whose lanes have all arrived. False when
// none could; the block's failure is set when one never can.
bool settleWarps() {
  Block &b = block();
  bool released = false;
  for (size_t w0 = 0; w0 < b.threads; w0 += 32) {
    const size_t lanes = std::min<size_t>(32, b.threads - w0);
    for (size_t l = 0; l < lanes; ++l) {
      Fiber &first = *b.fibers[w0 + l];
      if (first.state != State::AtWarp)
        continue;
      const unsigned mask = first.mask;
      bool complete = true;
      for (int bit = 0; bit < 32; ++bit) {
        if (!(mask >> bit & 1u))
          continue;
        std::ostringstream where;
        where << "warp " << w0 / 32 << ": lane " << l << " waits at a warp operation with mask 0x"
              << std::hex << mask << std::dec << ", but lane " << bit;
        if (size_t(bit) >= lanes) {
          b.failure = where.str() + " is not in the block (blockDim " + std::to_string(b.threads) +
                      " threads)";
          return false;
        }
        const Fiber &other = *b.fibers[w0 + bit];
        if (other.state == State::Done) {
          b.failure = where.str() + " has exited";
          return false;
        }
        if (other.state != State::AtWarp) {
          complete = false;
          continue;
        }
        if (other.mask != mask || other.op != first.op) {
          b.failure = where.str() + " waits at another (mask 0x" + [&] {
            std::ostringstream h;
            h << std::hex << other.mask;
            return h.str();
          }() + ")";
          return false;
        }
      }
      if (!complete)
        continue;
      uint64_t ballot = 0;
      for (int bit = 0; bit < 32; ++bit)
        if (mask >> bit & 1u)
          ballot |= uint64_t(b.fibers[w0 + bit]->value != 0) << bit;
      for (int bit = 0; bit < 32; ++bit) {
        if (!(mask >> bit & 1u))
          continue;
        Fiber &f = *b.fibers[w0 + bit];
        switch (f.op) {
        case WarpOp::Sync:
          f.result = 0;
          break;
        case WarpOp::Shuffle:
          // A source lane outside the mask (or the warp) gives an undefined
          // value: all ones, a NaN for a float or a double.
          f.result = f.src >= 0 && f.src < 32 && (mask >> f.src & 1u) ? b.fibers[w0 + f.src]->value
                                                                      : ~uint64_t(0);
          break;
        case WarpOp::Ballot:
          f.result = ballot;
          break;
        case WarpOp::Any:
          f.result = ballot != 0;
          break;
        case WarpOp::All:
          f.result = ballot == mask;
          break;
        }
        f.state = State::Ready;
      }
      released = true;
    }
  }
  return released;
}

bool settleBarrier() {
  Block &b = block();
  bool any = false;
  for (size_t t = 0; t < b.threads; ++t) {
    const State s = b.fibers[t]->state;
    if (s == State::AtWarp || s == State::Ready)
      return false;
    any |= s == State::AtBarrier;
  }
  // Exited threads count as arrived, as on current GPUs.
  for (size_t t = 0; t < b.threads && any; ++t)
    if (b.fibers[t]->state == State::AtBarrier)
      b.fibers[t]->state = State::Ready;
  return any;
}

// Runs one block to its end; false (with block().failure) when it fails.
bool runBlock() {
  Block &b = block();
  for (unsigned round = 0;; ++round) {
    bool allDone = true;
    for (size_t k = 0; k < b.threads; ++k) {
      const size_t t = round % 2 == 0 ? k : b.threads - 1 - k;
      Fiber &f = *b.fibers[t];
      if (f.state == State::Ready) {
        b.current = &f;
        f.context = fctx::jump_fcontext(f.context, nullptr).fctx;
        b.current = nullptr;
        if (!b.failure.empty())
          return false;
      }
      allDone &= f.state == State::Done;
    }
    if (allDone)
      return true;
    if (settleWarps())
      continue;
    if (!b.failure.empty())
      return false;
    if (!settleBarrier()) {
      b.failure = "deadlock: " + describeWaits();
      return false;
    }
  }
}

// A fault in a kernel (past an allocation's or the shared memory's end, or
// off a fiber's stack) ends the process naming the kernel and the thread.
void onFault(int sig) {
  const Block &b = block();
  char msg[512];
  int n = b.current ? std::snprintf(msg, sizeof msg,
                                    "cuda-emu: kernel %s, block (%u,%u,%u), thread (%u,%u,%u): "
                                    "signal %d (a read or write outside device or shared memory)\n",
                                    b.kernel.c_str(), b.current->view.blockIdx.x,
                                    b.current->view.blockIdx.y, b.current->view.blockIdx.z,
                                    b.current->view.threadIdx.x, b.current->view.threadIdx.y,
                                    b.current->view.threadIdx.z, sig)
                    : std::snprintf(msg, sizeof msg, "cuda-emu: signal %d outside a kernel\n", sig);
  if (n > 0 && write(2, msg, size_t(std::min<int>(n, int(sizeof msg) - 1))) < 0)
    n = 0;
  _exit(3);
}
// Kernels run on the stream threads: each needs its own alternate stack
// (a fault off a fiber's stack has none left to run the handler on).
void installFaultHandler() {
  thread_local bool stackSet = false;
  if (!stackSet) {
    stackSet = true;
    static thread_local char faultStack[64 * 1024];
    stack_t ss{};
    ss.ss_sp = faultStack;
    ss.ss_size = sizeof faultStack;
    sigaltstack(&ss, nullptr);
  }
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa{};
    sa.sa_handler = onFault;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
  });
}

} // namespace

const ThreadView &view() { return current().view; }

int laneId() { return current().linear & 31; }

int checkedWidth(int width) {
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0)
    failInKernel("a warp shuffle with width " + std::to_string(width) +
                 " (a power of two up to 32)");
  return width;
}

uint64_t warpExchange(WarpOp op, unsigned mask, uint64_t value, int src) {
  Fiber &f = current();
  const int lane = f.linear & 31;
  if (!(mask >> lane & 1u)) {
    std::ostringstream os;
    os << "a warp operation with mask 0x" << std::hex << mask << std::dec
       << " that leaves out its own lane " << lane;
    failInKernel(os.str());
  }
  f.op = op;
  f.mask = mask;
  f.value = value;
  f.src = src;
  f.state = State::AtWarp;
  yieldToScheduler();
  return f.result;
}

void syncThreads() {
  Fiber &f = current();
  f.state = State::AtBarrier;
  yieldToScheduler();
}

void *staticShared(const char *name, size_t bytes) {
  Block &b = block();
  auto it = b.statics.find(name);
  if (it == b.statics.end()) {
    b.staticBytes += bytes;
    if (b.staticBytes > kStaticSharedMax)
      failInKernel("static shared memory of " + std::to_string(b.staticBytes) +
                   " bytes, over 48 KiB");
    if (b.staticBytes + b.dynamicBytes > kSharedOptInMax)
      failInKernel("static and dynamic shared memory over 227 KiB");
    it = b.statics.emplace(name, std::vector<unsigned char>(bytes, 0xff)).first;
  } else if (it->second.size() != bytes) {
    failInKernel(std::string("static shared array '") + name + "' declared with two sizes");
  }
  return it->second.data();
}

void *dynamicShared() {
  Block &b = block();
  return b.dynamicBytes ? b.dynamic.start : nullptr;
}

bool configure(const void *kernel, const char *spelled, dim3 grid, dim3 blk, size_t shmem,
               cudaStream_t stream) {
  Device &d = device();
  if (sticky() != cudaSuccess) {
    lastError = sticky();
    return false;
  }
  if (!validStream(stream)) {
    std::fprintf(stderr, "cuda-emu: %s: launch refused, not a stream\n", spelled);
    lastError = cudaErrorInvalidResourceHandle;
    return false;
  }
  std::string why;
  const uint64_t threads = uint64_t(blk.x) * blk.y * blk.z;
  if (blk.x == 0 || blk.y == 0 || blk.z == 0 || blk.x > 1024 || blk.y > 1024 || blk.z > 64 ||
      threads > 1024)
    why = "block (" + std::to_string(blk.x) + "," + std::to_string(blk.y) + "," +
          std::to_string(blk.z) + ")";
  else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
           grid.z > 65535)
    why = "grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
          std::to_string(grid.z) + ")";
  if (!why.empty()) {
    std::fprintf(stderr, "cuda-emu: %s: launch refused, %s\n", spelled, why.c_str());
    lastError = cudaErrorInvalidConfiguration;
    return false;
  }
  size_t allowed = kDynamicSharedDefault;
  {
    std::lock_guard<std::mutex> l(d.misc);
    auto attr = d.maxDynamicShared.find(kernel);
    if (attr != d.maxDynamicShared.end())
      allowed = std::max<size_t>(kDynamicSharedDefault, size_t(attr->second));
  }
  if (shmem > allowed) {
    std::fprintf(stderr,
                 "cuda-emu: %s: launch refused, %zu bytes of dynamic shared memory, %zu allowed "
                 "(cudaFuncSetAttribute)\n",
                 spelled, shmem, allowed);
    lastError = cudaErrorInvalidValue;
    return false;
  }
  return true;
}

void checkPointerArgument(const void *kernel, int index, const void *ptr) {
  if (!ptr || inDevice(ptr, 0))
    return;
  fail(cudaErrorInvalidDevicePointer, "kernel " + kernelName(kernel) + ": argument " +
                                          std::to_string(index) +
                                          " is neither null nor in a cudaMalloc'ed allocation");
}

namespace {
// Runs a grid on the calling stream thread; one at a time (the fibers and
// the block are one).
void runGrid(const void *kernel, dim3 grid, dim3 blk, size_t shmem,
             const std::function<void()> &body) {
  static std::mutex &oneAtATime = *new std::mutex; // never destroyed, as block()
  std::lock_guard<std::mutex> l(oneAtATime);
  installFaultHandler();
  Block &b = block();
  b.body = &body;
  b.kernel = kernelName(kernel);
  {
    std::lock_guard<std::mutex> m(device().misc);
    device().launched.insert(b.kernel);
  }
  if (b.dynamic.map)
    munmap(b.dynamic.map, b.dynamic.length);
  b.dynamic = mapGuarded(shmem);
  b.dynamicBytes = shmem;
  if (!b.dynamic.map)
    die("no memory for dynamic shared memory");
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        b.statics.clear();
        b.staticBytes = 0;
        std::memset(b.dynamic.start, 0xff, shmem);
        b.failure.clear();
        prepareFibers(blk, dim3(x, y, z), grid);
        if (!runBlock()) {
          fail(cudaErrorLaunchFailure, "kernel " + b.kernel + ", block (" + std::to_string(x) +
                                           "," + std::to_string(y) + "," + std::to_string(z) +
                                           "): " + b.failure);
          b.current = nullptr;
          return;
        }
      }
}
} // namespace

// The kernel's accesses: its work label's, or each pointer argument's whole
// allocation. A pointer argument in device memory outside every range the
// label declares adds its whole allocation all the same: a label that
// misses a buffer its kernel uses makes reports, never hides them.
void enqueueGrid(const void *kernel, cudaStream_t stream, dim3 grid, dim3 blk, size_t shmem,
                 std::vector<Access> pointers, std::function<void()> body) {
  if (sticky() != cudaSuccess) // an argument check failed
    return;
  std::vector<Access> accesses = labelAccesses;
  for (const Access &p : pointers) {
    const uintptr_t u = reinterpret_cast<uintptr_t>(p.ptr);
    const bool declared =
        std::any_of(labelAccesses.begin(), labelAccesses.end(), [&](const Access &a) {
          const uintptr_t lo = reinterpret_cast<uintptr_t>(a.ptr);
          return lo <= u && u <= lo + a.bytes && (a.write || !p.write);
        });
    const auto [start, size] = allocationOf(p.ptr, 0);
    if (!declared && start)
      accesses.push_back({reinterpret_cast<const void *>(start), size, p.write});
  }
  const std::string what = "kernel " + kernelName(kernel);
  submit(
      stream, [=] { runGrid(kernel, grid, blk, shmem, body); }, false, nullptr, nullptr,
      what.c_str(), &accesses);
}

// --- What the test's driver reads (emu_report.h) ------------------------------------

std::set<std::string> launchedKernels() {
  std::lock_guard<std::mutex> l(device().misc);
  return device().launched;
}
std::vector<std::string> takeFailures() {
  drainAll();
  std::vector<std::string> out;
  std::lock_guard<std::mutex> l(device().misc);
  out.swap(device().failures);
  return out;
}
void resetDevice() {
  drainAll();
  device().sticky = cudaSuccess;
  lastError = cudaSuccess;
}

} // namespace cuda_emu

bool cuda_emu::enqueue(cudaStream_t stream, const char *what, std::vector<Access> accesses,
                       std::function<void()> work) {
  if (sticky() != cudaSuccess)
    return false;
  return submit(stream, std::move(work), false, nullptr, nullptr, what, &accesses);
}

// The host thread's own clock component, given on its first access.
thread_local size_t hostComponent = SIZE_MAX;

void cuda_emu::hostAccess(const void *ptr, size_t bytes, bool write, const char *what) {
  Streams &all = streams();
  std::lock_guard<std::mutex> l(all.mu);
  if (hostComponent == SIZE_MAX)
    hostComponent = all.components++;
  if (hostClock.size() <= hostComponent)
    hostClock.resize(hostComponent + 1, 0);
  ++hostClock[hostComponent];
  checkOrder(hostComponent, hostClock,
             std::make_shared<const Operation>(Operation{what, "the host"}), {{ptr, bytes, write}});
}

void cuda_emu::setWorkLabel(std::string label, std::vector<Access> kernelAccesses) {
  workLabel = std::move(label);
  labelAccesses = std::move(kernelAccesses);
}

std::vector<std::string> cuda_emu::takeStreamOrderReports() {
  Checker &c = streams().checker;
  std::lock_guard<std::mutex> l(streams().mu);
  std::vector<std::string> out;
  out.swap(c.reports);
  c.seen.clear();
  c.unordered = 0;
  c.distinct = 0;
  return out;
}

using cuda_emu::Device;
using cuda_emu::device;
using cuda_emu::inDevice;
using cuda_emu::inPinned;
using cuda_emu::lastError;
using cuda_emu::lookup;
using cuda_emu::pushLocked;
using cuda_emu::sticky;
using cuda_emu::Stream;
using cuda_emu::streams;
using cuda_emu::waitUntil;

// --- The CUDA runtime's calls -------------------------------------------------------

namespace {
// FSDP_EMULATED_GPU_MEMORY and FSDP_EMULATED_GPUS: a positive decimal count,
// or the default when unset. An emulated library's settings: a bad one is
// said on stderr, naming the variable, and the device is not there.
// FSDP_EMU_DROP_WAIT: a positive count N (the N-th cudaStreamWaitEvent the
// process issues is dropped) or "list" (each is said on stderr).
struct Settings {
  size_t capacity = cuda_emu::kDefaultCapacity;
  int devices = 1;
  uint64_t dropWait = 0;
  bool listWaits = false;
  bool ok = true;
};
bool readCount(const char *name, uint64_t max, uint64_t *out) {
  const char *v = std::getenv(name);
  if (!v)
    return true;
  char *end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || *end || errno == ERANGE || n == 0 || n > max) {
    std::fprintf(stderr, "cuda-emu: %s='%s': not a count from 1 to %llu\n", name, v,
                 (unsigned long long)max);
    return false;
  }
  *out = n;
  return true;
}
const Settings &settings() {
  static const Settings s = [] {
    Settings r;
    uint64_t capacity = r.capacity, devices = 1;
    const char *drop = std::getenv("FSDP_EMU_DROP_WAIT");
    r.listWaits = drop && std::strcmp(drop, "list") == 0;
    const bool dropOk =
        r.listWaits || readCount("FSDP_EMU_DROP_WAIT", uint64_t(1) << 62, &r.dropWait);
    if (!dropOk)
      std::fprintf(stderr, "cuda-emu: FSDP_EMU_DROP_WAIT is a count N (the N-th "
                           "cudaStreamWaitEvent is dropped) or 'list'\n");
    r.ok = readCount("FSDP_EMULATED_GPU_MEMORY", uint64_t(1) << 50, &capacity) &&
           readCount("FSDP_EMULATED_GPUS", 64, &devices) && dropOk;
    r.capacity = size_t(capacity);
    r.devices = int(devices);
    return r;
  }();
  return s;
}
std::atomic<size_t> capacityForTests{0};
// setWaitDrop: the wait to drop, for the tests that follow (~0: the setting's).
std::atomic<uint64_t> dropForTests{~uint64_t(0)};
uint64_t dropWait() {
  const uint64_t d = dropForTests.load();
  return d != ~uint64_t(0) ? d : settings().dropWait;
}
size_t capacity() {
  const size_t c = capacityForTests.load();
  return c ? c : settings().capacity;
}
size_t rounded256(size_t bytes) { return (std::max<size_t>(bytes, 1) + 255) / 256 * 256; }

cudaError_t deviceError() {
  if (!settings().ok)
    return cudaErrorNoDevice;
  return sticky();
}
} // namespace

void cuda_emu::setMemoryCapacity(size_t bytes) { capacityForTests = bytes; }
void cuda_emu::setWaitDrop(uint64_t n) {
  std::lock_guard<std::mutex> l(streams().mu);
  streams().checker.waits = 0;
  dropForTests = n;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (!settings().ok) {
    *count = 0;
    return cudaErrorNoDevice;
  }
  *count = settings().devices;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) {
  if (!settings().ok)
    return cudaErrorNoDevice;
  return dev >= 0 && dev < settings().devices ? cudaSuccess : cudaErrorInvalidDevice;
}
// An H100's: 0 the least, -5 the greatest.
cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
  if (leastPriority)
    *leastPriority = 0;
  if (greatestPriority)
    *greatestPriority = -5;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  if (cudaError_t e = deviceError())
    return e;
  Device &d = device();
  const size_t charged = rounded256(bytes);
  {
    std::lock_guard<std::mutex> l(d.memory);
    if (charged > capacity() - d.used) {
      std::fprintf(stderr,
                   "cuda-emu: cudaMalloc of %zu bytes: %zu of the device's %zu bytes "
                   "(FSDP_EMULATED_GPU_MEMORY) in use\n",
                   bytes, d.used, capacity());
      return cudaErrorMemoryAllocation;
    }
    d.used += charged;
  }
  cuda_emu::Guarded g = cuda_emu::mapGuarded(bytes);
  std::lock_guard<std::mutex> l(d.memory);
  if (!g.map) {
    d.used -= charged;
    return cudaErrorMemoryAllocation;
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(g.start);
  static std::once_flag reportAtExit;
  std::call_once(reportAtExit, [] { std::atexit(cuda_emu::writeMemoryReport); });
  d.allocations[start] = bytes;
  d.mappings[start] = g;
  *ptr = g.start;
  return cudaSuccess;
}

// cudaFree and cudaFreeHost synchronize the device first, as CUDA's do.
static cudaError_t release(void *ptr, bool pinned) {
  if (!ptr)
    return cudaSuccess;
  cuda_emu::drainAll();
  Device &d = device();
  uintptr_t start = 0, end = 0;
  {
    std::lock_guard<std::mutex> l(d.memory);
    auto &a = pinned ? d.pinned : d.allocations;
    auto it = a.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == a.end())
      return pinned ? cudaErrorInvalidValue : cudaErrorInvalidDevicePointer;
    if (!pinned)
      d.used -= rounded256(it->second);
    start = it->first;
    end = start + it->second;
    a.erase(it);
    auto m = d.mappings.find(reinterpret_cast<uintptr_t>(ptr));
    munmap(m->second.map, m->second.length);
    d.mappings.erase(m);
  }
  // The stream-order checker forgets the bytes: work on memory allocated
  // there later is ordered after all of this (the device was synchronized
  // above). Not under the memory's lock: the checker takes it under its own.
  std::lock_guard<std::mutex> l(streams().mu);
  auto &spans = streams().checker.spans;
  if (!pinned)
    streams().checker.freed.push_back({end - start, cuda_emu::touchedIn(start, end)});
  spans.erase(spans.lower_bound(start), spans.lower_bound(end));
  return cudaSuccess;
}
cudaError_t cudaFree(void *ptr) { return release(ptr, false); }

// Pinned host memory: not the device's, tracked apart (a copy to or from it
// is asynchronous; one to or from pageable memory is not).
cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
  if (cudaError_t e = deviceError())
    return e;
  cuda_emu::Guarded g = cuda_emu::mapGuarded(bytes);
  if (!g.map)
    return cudaErrorMemoryAllocation;
  Device &d = device();
  std::lock_guard<std::mutex> l(d.memory);
  const uintptr_t start = reinterpret_cast<uintptr_t>(g.start);
  d.pinned[start] = bytes;
  d.mappings[start] = g;
  *ptr = g.start;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void *ptr) { return release(ptr, true); }

namespace {
// A copy of `height` rows of `width` bytes, on a stream, as CUDA orders it:
// a pageable source is staged before the call returns, a pageable
// destination written before it returns (`wait` also makes it synchronous).
cudaError_t copyOnStream(const char *what, void *dst, size_t dpitch, const void *src, size_t spitch,
                         size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t stream,
                         bool wait) {
  if (cudaError_t e = deviceError())
    return e;
  if (width > dpitch || width > spitch || kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return cudaErrorInvalidValue;
  if (height == 0 || width == 0)
    return cudaSuccess;
  // The whole strided extent on each side must be in one allocation.
  const size_t dExtent = dpitch * (height - 1) + width, sExtent = spitch * (height - 1) + width;
  bool dstDevice = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool srcDevice = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault) {
    dstDevice = inDevice(dst, dExtent);
    srcDevice = inDevice(src, sExtent);
  }
  if ((dstDevice && !inDevice(dst, dExtent)) || (srcDevice && !inDevice(src, sExtent)))
    return cudaErrorInvalidValue;
  // For the stream-order checker: the device bytes and the pinned host ones
  // (the host's own accesses to those are declared by hostAccess), the whole
  // strided extent. Pageable host memory is copied while the host waits.
  std::vector<cuda_emu::Access> accesses;
  if (srcDevice || inPinned(src, sExtent))
    accesses.push_back({src, sExtent, false});
  if (dstDevice || inPinned(dst, dExtent))
    accesses.push_back({dst, dExtent, true});
  std::shared_ptr<std::vector<char>> staged;
  if (!srcDevice && !inPinned(src, sExtent)) {
    staged = std::make_shared<std::vector<char>>(width * height);
    for (size_t r = 0; r < height; ++r)
      std::memcpy(staged->data() + r * width, static_cast<const char *>(src) + r * spitch, width);
    src = staged->data();
    spitch = width;
  }
  wait = wait || (!dstDevice && !inPinned(dst, dExtent));
  auto work = [=] {
    for (size_t r = 0; r < height; ++r)
      std::memmove(static_cast<char *>(dst) + r * dpitch,
                   static_cast<const char *>(src) + r * spitch, width);
    (void)staged; // kept alive until the copy has run
  };
  Stream *s = nullptr;
  uint64_t ticket = 0;
  cuda_emu::Clock clock;
  if (!cuda_emu::submit(stream, work, false, &s, &ticket, what, &accesses, &clock))
    return cudaErrorInvalidResourceHandle;
  if (wait) {
    waitUntil([&] { return s->completed >= ticket; });
    cuda_emu::join(cuda_emu::hostClock, clock); // the host has seen it done
  }
  return sticky();
}
} // namespace

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  return copyOnStream("cudaMemcpy", dst, bytes, src, bytes, bytes, 1, kind, nullptr, true);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return copyOnStream("cudaMemcpyAsync", dst, bytes, src, bytes, bytes, 1, kind, stream, false);
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return copyOnStream("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind, stream,
                      false);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = deviceError())
    return e;
  if (!inDevice(ptr, bytes))
    return cudaErrorInvalidValue;
  const std::vector<cuda_emu::Access> accesses{{ptr, bytes, true}};
  if (!cuda_emu::submit(
          stream, [=] { std::memset(ptr, value, bytes); }, false, nullptr, nullptr,
          "cudaMemsetAsync", &accesses))
    return cudaErrorInvalidResourceHandle;
  return cudaSuccess;
}

// --- Streams and events ---------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithPriority(stream, cudaStreamDefault, 0);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  return cudaStreamCreateWithPriority(stream, flags, 0);
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned flags, int priority) {
  if (cudaError_t e = deviceError())
    return e;
  if (!stream || (flags & ~unsigned(cudaStreamNonBlocking)))
    return cudaErrorInvalidValue;
  // Out of the range: clamped to it, as CUDA does.
  priority = std::min(0, std::max(-5, priority));
  std::lock_guard<std::mutex> l(streams().mu);
  *stream = reinterpret_cast<cudaStream_t>(
      cuda_emu::newStream(!(flags & cudaStreamNonBlocking), priority));
  return cudaSuccess;
}

// The work already enqueued still runs; the handle is gone at once.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  cuda_emu::Streams &all = streams();
  std::lock_guard<std::mutex> l(all.mu);
  Stream *s = reinterpret_cast<Stream *>(stream);
  if (!stream || !all.live.count(s))
    return cudaErrorInvalidResourceHandle;
  all.live.erase(s);
  s->destroyed = true;
  all.cv.notify_all();
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = deviceError())
    return e;
  Stream *s = nullptr;
  uint64_t until = 0;
  cuda_emu::Clock clock;
  {
    std::lock_guard<std::mutex> l(streams().mu);
    if (!(s = lookup(stream)))
      return cudaErrorInvalidResourceHandle;
    until = s->enqueued;
    clock = s->clock;
  }
  waitUntil([&] { return s->completed >= until; });
  cuda_emu::join(cuda_emu::hostClock, clock);
  return sticky();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = deviceError())
    return e;
  std::lock_guard<std::mutex> l(streams().mu);
  Stream *s = lookup(stream);
  if (!s)
    return cudaErrorInvalidResourceHandle;
  if (s->completed != s->enqueued)
    return cudaErrorNotReady;
  return cudaSuccess; // seen done; not an order for the checker (cudaEventQuery)
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = deviceError())
    return e;
  cuda_emu::Streams &all = streams();
  std::vector<std::pair<Stream *, uint64_t>> until;
  cuda_emu::Clock clock;
  {
    std::lock_guard<std::mutex> l(all.mu);
    for (Stream *s : all.every) {
      until.emplace_back(s, s->enqueued);
      cuda_emu::join(clock, s->clock);
    }
  }
  waitUntil([&] {
    for (auto &[s, t] : until)
      if (s->completed < t)
        return false;
    return true;
  });
  cuda_emu::join(cuda_emu::hostClock, clock);
  return sticky();
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  if (cudaError_t e = deviceError())
    return e;
  const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  // An interprocess event must disable timing (CUDA's rule).
  if (!event || (flags & ~known) ||
      ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
    return cudaErrorInvalidValue;
  auto *e = new cuda_emu::Event;
  e->flags = flags;
  std::lock_guard<std::mutex> l(streams().mu);
  streams().events.insert(e);
  *event = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}
// A record still pending completes all the same (it holds its own state).
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::lock_guard<std::mutex> l(streams().mu);
  auto *e = reinterpret_cast<cuda_emu::Event *>(event);
  if (!streams().events.erase(e))
    return cudaErrorInvalidResourceHandle;
  delete e;
  return cudaSuccess;
}

namespace {
cuda_emu::Event *eventOf(cudaEvent_t event) { // with the streams' lock held
  auto *e = reinterpret_cast<cuda_emu::Event *>(event);
  return streams().events.count(e) ? e : nullptr;
}
} // namespace

// Captures the stream's work so far: the event completes when it has run.
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = deviceError())
    return e;
  std::lock_guard<std::mutex> l(streams().mu);
  cuda_emu::Event *e = eventOf(event);
  Stream *s = lookup(stream);
  if (!e || !s)
    return cudaErrorInvalidResourceHandle;
  auto record = std::make_shared<cuda_emu::Record>();
  e->last = record;
  pushLocked(
      s,
      [record] {
        std::lock_guard<std::mutex> m(streams().mu);
        record->at = std::chrono::steady_clock::now();
        record->done = true;
      },
      true);
  record->clock = s->clock;
  record->stream = s->name;
  return cudaSuccess;
}

// Work enqueued on the stream after this waits for the event's latest
// record as of this call; an event never recorded is no wait at all.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (cudaError_t e = deviceError())
    return e;
  if (flags != 0)
    return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> l(streams().mu);
  cuda_emu::Event *e = eventOf(event);
  Stream *s = lookup(stream);
  if (!e || !s)
    return cudaErrorInvalidResourceHandle;
  const std::shared_ptr<cuda_emu::Record> record = e->last;
  // FSDP_EMU_DROP_WAIT: each wait is counted, said ("list"), or dropped.
  const uint64_t n = ++streams().checker.waits;
  const std::string what = (cuda_emu::workLabel.empty() ? "" : cuda_emu::workLabel + ": ") +
                           s->name + " waits for " +
                           (record ? "a record on " + record->stream : "an event never recorded");
  if (settings().listWaits)
    std::fprintf(stderr, "cuda-emu: wait %llu: %s\n", (unsigned long long)n, what.c_str());
  if (n == dropWait()) {
    std::fprintf(stderr, "cuda-emu: FSDP_EMU_DROP_WAIT=%llu: dropped wait %llu: %s\n",
                 (unsigned long long)n, (unsigned long long)n, what.c_str());
    return cudaSuccess;
  }
  if (record) {
    pushLocked(s, [record] { waitUntil([&] { return record->done; }); }, true);
    cuda_emu::join(s->clock, record->clock);
  }
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t e = deviceError())
    return e;
  std::lock_guard<std::mutex> l(streams().mu);
  cuda_emu::Event *e = eventOf(event);
  if (!e)
    return cudaErrorInvalidResourceHandle;
  if (e->last && !e->last->done)
    return cudaErrorNotReady;
  // Seen done. CUDA would order the host's later work after it; the checker
  // does not: an order that holds only because the host happened to look
  // (the hang diagnosis queries its collectives' events now and then) is
  // timing, so the runtime synchronizes after a query that says done, and
  // only that orders (runtime/communicators/NCCL.cpp, waitEvent).
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t e = deviceError())
    return e;
  std::shared_ptr<cuda_emu::Record> record;
  {
    std::lock_guard<std::mutex> l(streams().mu);
    cuda_emu::Event *e = eventOf(event);
    if (!e)
      return cudaErrorInvalidResourceHandle;
    record = e->last;
  }
  if (record) {
    waitUntil([&] { return record->done; });
    cuda_emu::join(cuda_emu::hostClock, record->clock);
  }
  return sticky();
}

// Host clock: when each stream thread reached the record.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaError_t e = deviceError())
    return e;
  if (!ms)
    return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> l(streams().mu);
  cuda_emu::Event *a = eventOf(start), *b = eventOf(end);
  if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming) ||
      !a->last || !b->last)
    return cudaErrorInvalidResourceHandle;
  if (!a->last->done || !b->last->done)
    return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->last->at - a->last->at).count();
  return cudaSuccess;
}

// A launch's own error (its configuration) until read; a sticky one forever.
cudaError_t cudaGetLastError() {
  const cudaError_t e = lastError != cudaSuccess ? lastError : sticky();
  lastError = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return lastError != cudaSuccess ? lastError : sticky(); }

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidDevicePointer:
    return "invalid device pointer";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  }
  return "unknown error";
}

cudaError_t cudaFuncSetAttributeRaw(const void *kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      size_t(value) > cuda_emu::kSharedOptInMax)
    return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> l(device().misc);
  device().maxDynamicShared[kernel] = value;
  return cudaSuccess;
}

// --- cuBLAS ---------------------------------------------------------------------

namespace {
struct CublasHandle {
  cudaStream_t stream = nullptr;
  void *workspace = nullptr; // cuBLAS's own kernels use it; the reference GEMM does not
  size_t workspaceBytes = 0;
};
std::set<const void *> &handles() {
  static std::set<const void *> h;
  return h;
}
cublasStatus_t refuse(cublasStatus_t status, const std::string &why) {
  std::fprintf(stderr, "cuda-emu: cublasGemmEx refused: %s\n", why.c_str());
  return status;
}
// A column-major rows x cols operand of `bytes`-byte elements with leading
// dimension ld, read or written by the GEMM, must lie inside one allocation.
bool operandInDevice(const void *p, size_t bytes, int64_t rows, int64_t cols, int64_t ld) {
  return inDevice(p, bytes * size_t((cols - 1) * ld + rows));
}
// bf16 (the top half of an f32): to f32 exactly, from f32 rounded to nearest
// even (NaN stays NaN), as cuBLAS stores a CUDA_R_16BF result.
float bf16Value(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t bf16Rounded(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}
// The GEMM's inner loop over k, for one element type: f32 operands
// accumulate in double (a reference for cuBLAS's f32 GEMM, whose order is
// unspecified), bf16 ones in f32 (as the tensor cores do), in order.
template <class E, class Acc>
Acc dotColumn(const E *a, const E *b, int64_t i, int64_t j, int64_t k, int64_t lda, int64_t ldb,
              bool ta, bool tb, float (*value)(E)) {
  Acc acc = 0;
  for (int64_t p = 0; p < k; ++p) {
    const float av = value(ta ? a[p + i * lda] : a[i + p * lda]);
    const float bv = value(tb ? b[j + p * ldb] : b[p + j * ldb]);
    acc += Acc(av) * Acc(bv);
  }
  return acc;
}
float f32Value(float v) { return v; }
} // namespace

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  auto *h = new CublasHandle;
  handles().insert(h);
  *handle = reinterpret_cast<cublasHandle_t>(h);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  auto *h = reinterpret_cast<CublasHandle *>(handle);
  if (!handles().erase(h))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handles().count(handle))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  reinterpret_cast<CublasHandle *>(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes) {
  if (!handles().count(handle))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes && !inDevice(workspace, bytes))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "a workspace outside device memory");
  auto *h = reinterpret_cast<CublasHandle *>(handle);
  h->workspace = workspace;
  h->workspaceBytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream) {
  if (!handles().count(handle))
    return CUBLAS_STATUS_NOT_INITIALIZED;
  *stream = reinterpret_cast<CublasHandle *>(handle)->stream;
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

// C = alpha op(A) op(B) + beta C, column-major, as cuBLAS defines it: C is
// m x n, op(A) m x k, op(B) k x n; beta == 0 does not read C, alpha == 0 does
// not read A or B.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alphaPtr,
                            const void *A, cudaDataType_t Atype, int lda, const void *B,
                            cudaDataType_t Btype, int ldb, const void *betaPtr, void *C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t) {
  if (!handles().count(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "no such handle");
  // What is implemented: A, B and C all CUDA_R_32F, or all CUDA_R_16BF,
  // with CUBLAS_COMPUTE_32F. Every other combination (cuBLAS takes some,
  // e.g. bf16 A and B with an f32 C) is refused, never computed otherwise.
  const bool f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F;
  const bool bf16 = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF && Ctype == CUDA_R_16BF;
  if (!(f32 || bf16) || computeType != CUBLAS_COMPUTE_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "only A, B and C all CUDA_R_32F or all CUDA_R_16BF, with CUBLAS_COMPUTE_32F");
  const size_t bytes = f32 ? sizeof(float) : sizeof(uint16_t);
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "transposition other than N or T");
  if (m < 0 || n < 0 || k < 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "a negative dimension");
  const int64_t aRows = transa == CUBLAS_OP_N ? m : k, aCols = transa == CUBLAS_OP_N ? k : m;
  const int64_t bRows = transb == CUBLAS_OP_N ? k : n, bCols = transb == CUBLAS_OP_N ? n : k;
  if (lda < std::max<int64_t>(1, aRows) || ldb < std::max<int64_t>(1, bRows) ||
      ldc < std::max<int64_t>(1, m))
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "lda " + std::to_string(lda) + " (A has " + std::to_string(aRows) +
                      " rows), ldb " + std::to_string(ldb) + " (B has " + std::to_string(bRows) +
                      " rows), ldc " + std::to_string(ldc) + " (C has " + std::to_string(m) +
                      " rows)");
  if (!alphaPtr || !betaPtr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "null alpha or beta");
  if (sticky() != cudaSuccess || m == 0 || n == 0)
    return CUBLAS_STATUS_SUCCESS;
  const float alpha = *static_cast<const float *>(alphaPtr);
  const float beta = *static_cast<const float *>(betaPtr);
  const bool readAB = alpha != 0.0f && k > 0;
  if ((readAB && (!operandInDevice(A, bytes, aRows, aCols, lda) ||
                  !operandInDevice(B, bytes, bRows, bCols, ldb))) ||
      !operandInDevice(C, bytes, m, n, ldc)) {
    cuda_emu::fail(cudaErrorLaunchFailure,
                   "cublasGemmEx: an operand reaches outside its allocation (m " +
                       std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) +
                       ", lda " + std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " +
                       std::to_string(ldc) + ")");
    return CUBLAS_STATUS_SUCCESS; // on a GPU: a fault, seen at the next synchronization
  }
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  // The scalars are read now (host pointer mode), the operands when the
  // handle's stream gets to the GEMM.
  auto compute = [=] {
    if (f32) {
      const float *a = static_cast<const float *>(A), *b = static_cast<const float *>(B);
      float *c = static_cast<float *>(C);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          const double acc =
              readAB ? dotColumn<float, double>(a, b, i, j, k, lda, ldb, ta, tb, f32Value) : 0.0;
          double r = double(alpha) * acc;
          if (beta != 0.0f)
            r += double(beta) * double(c[i + j * ldc]);
          c[i + j * ldc] = float(r);
        }
      return;
    }
    // bf16: f32 accumulation and epilogue (alpha acc + beta C, C read as f32),
    // the result rounded to bf16 once.
    const uint16_t *a = static_cast<const uint16_t *>(A), *b = static_cast<const uint16_t *>(B);
    uint16_t *c = static_cast<uint16_t *>(C);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        const float acc =
            readAB ? dotColumn<uint16_t, float>(a, b, i, j, k, lda, ldb, ta, tb, bf16Value) : 0.0f;
        float r = alpha * acc;
        if (beta != 0.0f)
          r += beta * bf16Value(c[i + j * ldc]);
        c[i + j * ldc] = bf16Rounded(r);
      }
  };
  auto extent = [&](int64_t rows, int64_t cols, int64_t ld) {
    return bytes * size_t((cols - 1) * ld + rows);
  };
  std::vector<cuda_emu::Access> accesses{{C, extent(m, n, ldc), true}};
  if (readAB) {
    accesses.push_back({A, extent(aRows, aCols, lda), false});
    accesses.push_back({B, extent(bRows, bCols, ldb), false});
  }
  if (!cuda_emu::submit(reinterpret_cast<CublasHandle *>(handle)->stream, compute, false, nullptr,
                        nullptr, "cublasGemmEx", &accesses))
    return refuse(CUBLAS_STATUS_EXECUTION_FAILED, "the handle's stream is not a stream");
  return CUBLAS_STATUS_SUCCESS;
}
