//===- Threads.cpp - ranks as threads, collectives in shared memory -------===//
//
// Each group has one slot per member and an abortable barrier. A collective
// publishes its buffer, meets the others at the barrier, computes its part
// reading the peers' buffers, and meets them again before anyone reuses a
// buffer. Sums run over members in a fixed order, so every rank gets the
// same bits.
//
//===----------------------------------------------------------------------===//
#include "runtime/Communicator.h"
#include "runtime/kernels/cpu.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

using namespace fsdp::runtime;
using fsdp::kernels::bf16ToFloat;
using fsdp::kernels::floatToBf16;

int Mesh::groupSize(Group g) const {
  switch (g) {
  case Group::Shard:
    return shardSize;
  case Group::Replica:
    return worldSize / tp / shardSize;
  case Group::World:
    return worldSize;
  case Group::Reshard:
    return reshardSize;
  case Group::Tp:
  case Group::TpGrad:
    return tp;
  }
  return 1;
}

int Mesh::memberIndex(Group g, int rank) const {
  int d = rank / tp;
  switch (g) {
  case Group::Shard:
    return d % shardSize;
  case Group::Replica:
    return d / shardSize;
  case Group::World:
    return rank;
  case Group::Reshard:
    return d % reshardSize;
  case Group::Tp:
  case Group::TpGrad:
    return rank % tp;
  }
  return 0;
}

int Mesh::groupIndex(Group g, int rank) const {
  int d = rank / tp, t = rank % tp;
  switch (g) {
  case Group::Shard:
    return d / shardSize * tp + t;
  case Group::Replica:
    return d % shardSize * tp + t;
  case Group::World:
    return 0;
  case Group::Reshard:
    return d / reshardSize * tp + t;
  case Group::Tp:
  case Group::TpGrad:
    return d;
  }
  return 0;
}

int Mesh::memberRank(Group g, int rank, int m) const {
  int d = rank / tp, t = rank % tp, G = shardSize;
  switch (g) {
  case Group::Shard:
    return (d / G * G + m) * tp + t;
  case Group::Replica:
    return (m * G + d % G) * tp + t;
  case Group::World:
    return m;
  case Group::Reshard:
    return (d / reshardSize * reshardSize + m) * tp + t;
  case Group::Tp:
  case Group::TpGrad:
    return d * tp + m;
  }
  return m;
}

std::vector<int> fsdp::runtime::groupRanks(const Communicator &comm, Group g) {
  std::vector<int> ranks(comm.groupSize(g));
  for (int m = 0; m < (int)ranks.size(); ++m)
    ranks[m] = comm.memberRank(g, m);
  return ranks;
}

const char *fsdp::runtime::groupName(Group g) {
  return g == Group::Shard     ? "the shard group"
         : g == Group::Replica ? "the replica group"
         : g == Group::Reshard ? "the reshard group"
         : g == Group::Tp      ? "the tp group"
         : g == Group::TpGrad  ? "the tp group's comm stream"
                               : "the world";
}

std::string fsdp::runtime::rankList(const std::vector<int> &ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

void Communicator::at(Group g, const std::string &site, bool several) {
  std::lock_guard<std::mutex> lock(whereMu);
  int i = placeOf(g);
  Whereabouts &w = where[i];
  std::snprintf(w.site, sizeof w.site, "%s", site.c_str());
  w.group = (int32_t)g;
  w.state = Whereabouts::Before;
  w.number = numbers[(int)g] + 1;
  named[i] = true;
  holds[i] = several;
  w.within = several;
}

void Communicator::began(Group g, const char *what) {
  std::lock_guard<std::mutex> lock(whereMu);
  int i = placeOf(g);
  Whereabouts &w = where[i];
  if (!named[i] && !holds[i]) {
    std::snprintf(w.site, sizeof w.site, "%s", what);
    w.within = 0;
  }
  named[i] = false;
  w.group = (int32_t)g;
  w.state = Whereabouts::Waiting;
  w.number = ++numbers[(int)g];
  w.begun = ++begun;
}

void Communicator::ended(Group g) {
  std::lock_guard<std::mutex> lock(whereMu);
  where[placeOf(g)].state = Whereabouts::Past;
}

Whereabouts Communicator::whereabouts() const {
  std::lock_guard<std::mutex> lock(whereMu);
  // Where it waits, or is about to; else where it was last.
  auto rank = [](const Whereabouts &w) {
    return w.state == Whereabouts::Waiting ? 2 : w.state == Whereabouts::Before ? 1 : 0;
  };
  const Whereabouts &a = where[0], &b = where[1];
  Whereabouts w = rank(b) > rank(a) || (rank(b) == rank(a) && b.begun > a.begun) ? b : a;
  w.begun = begun;
  return w;
}

namespace {
// rankList with runs of three or more as ranges ("ranks 0-2046, 2048"): a
// report of a world of thousands stays short.
std::string rankRuns(const std::vector<int> &ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    s += (i ? ", " : "") + std::to_string(ranks[i]);
    if (j >= i + 2)
      s += "-" + std::to_string(ranks[j]);
    else
      j = i;
    i = j + 1;
  }
  return s;
}

// "waits at X (collective #5 on the shard group)", for one rank or several.
std::string describe(const Whereabouts &w, bool plural) {
  if (w.group < 0)
    return plural ? "have made no collective yet" : "has made no collective yet";
  std::string place = std::string(w.site) + " (collective #" + std::to_string(w.number) + " on " +
                      groupName(Group(w.group)) + ")";
  switch (w.state) {
  case Whereabouts::Waiting:
    return (plural ? "wait at " : "waits at ") + place;
  case Whereabouts::Before:
    return (plural ? "have not reached " : "has not reached ") + place;
  default:
    // Between two collectives of a save, or after a collective.
    if (w.within)
      return (plural ? "are in " : "is in ") + std::string(w.site) + ", past its collective #" +
             std::to_string(w.number) + " on " + groupName(Group(w.group)) +
             ", at no collective since";
    return (plural ? "are past " : "is past ") + place + ", at no collective since";
  }
}
} // namespace

std::string fsdp::runtime::whereRanksAre(const std::vector<const Whereabouts *> &all) {
  // Ranks at the same place, least progress first.
  struct Place {
    const Whereabouts *w;
    std::vector<int> ranks;
  };
  std::vector<Place> places;
  std::vector<int> absent;
  auto same = [](const Whereabouts &a, const Whereabouts &b) {
    return a.progress() == b.progress() && a.state == b.state && a.group == b.group &&
           a.number == b.number && std::strcmp(a.site, b.site) == 0;
  };
  for (int r = 0; r < (int)all.size(); ++r) {
    if (!all[r]) {
      absent.push_back(r);
      continue;
    }
    auto it = std::find_if(places.begin(), places.end(),
                           [&](const Place &p) { return same(*p.w, *all[r]); });
    if (it == places.end())
      places.push_back({all[r], {r}});
    else
      it->ranks.push_back(r);
  }
  if (places.size() <= 1 && absent.empty())
    return "";
  std::stable_sort(places.begin(), places.end(), [](const Place &a, const Place &b) {
    return a.w->progress() < b.w->progress();
  });
  // A rank that did not answer may be the one behind: then the others'
  // places are listed without naming one.
  std::string s;
  if (!absent.empty())
    s = rankRuns(absent) + " did not answer (stopped, or busy outside a collective)";
  for (size_t i = 0; i < places.size(); ++i) {
    bool plural = places[i].ranks.size() > 1;
    s += (s.empty() ? "" : "; ") + rankRuns(places[i].ranks);
    int64_t progress = places[i].w->progress();
    if (absent.empty() && progress == places.front().w->progress() &&
        progress < places.back().w->progress())
      s += plural ? " are behind: they " : " is behind: it ";
    else
      s += " ";
    s += describe(*places[i].w, plural);
  }
  return s;
}

namespace {
// FSDP_TEST_STALL=R:N as (R, N); (-1, -1) without it.
std::pair<long long, long long> stallPoint() {
  static const std::pair<long long, long long> at = [] {
    const char *v = std::getenv("FSDP_TEST_STALL");
    long long r = -1, n = -1;
    if (!v || std::sscanf(v, "%lld:%lld", &r, &n) != 2)
      r = n = -1;
    return std::make_pair(r, n);
  }();
  return at;
}
} // namespace

bool fsdp::runtime::stallHere(int rank, int64_t collective) {
  return stallPoint().first == rank && stallPoint().second == collective;
}

namespace fsdp::runtime {

class ThreadsWorld {
public:
  ThreadsWorld(int worldSize, int shardSize, double timeoutS, int reshardSize, int tp)
      : worldSize(worldSize), shardSize(shardSize), reshardSize(reshardSize), tp(tp),
        timeoutS(timeoutS), roll(worldSize) {
    // Each kind's groups in the order of Communicator::groupIndex.
    int dp = worldSize / tp;
    auto make = [&](Group g, int count, int size) {
      for (int i = 0; i < count; ++i)
        groups[(int)g].push_back(std::make_unique<GroupState>(size));
    };
    make(Group::Shard, dp / shardSize * tp, shardSize);
    make(Group::Replica, shardSize * tp, dp / shardSize);
    make(Group::World, 1, worldSize);
    if (reshardSize > 0)
      make(Group::Reshard, dp / reshardSize * tp, reshardSize);
    if (tp > 1) {
      make(Group::Tp, dp, tp);
      make(Group::TpGrad, dp, tp);
    }
  }

  struct GroupState {
    explicit GroupState(int size) : size(size), slots(size), scalars(size), here(size) {}
    int size;
    std::vector<const void *> slots;
    std::vector<double> scalars;
    std::vector<char> here; // who has arrived at the current barrier
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    int64_t generation = 0;
  };

  GroupState &group(Group g, const Communicator &comm) {
    return *groups[(int)g][comm.groupIndex(g)];
  }

  // Every member arrives, or the world has been aborted, or --timeout
  // passes: then the world is aborted naming the members that did not arrive
  // (`comm` maps members to world ranks) and `what` was awaited.
  bool barrier(GroupState &s, int member, const Communicator &comm, Group g, const char *what) {
    std::unique_lock<std::mutex> lock(s.mu);
    if (aborted())
      return false;
    int64_t gen = s.generation;
    if (++s.arrived == s.size) {
      s.arrived = 0;
      std::fill(s.here.begin(), s.here.end(), 0);
      ++s.generation;
      s.cv.notify_all();
      return true;
    }
    s.here[member] = 1;
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(timeoutS));
    if (s.cv.wait_until(lock, deadline, [&] { return s.generation != gen || aborted(); }))
      return s.generation != gen;
    // Test-only (FSDP_TEST_STALL): the report waits until the stalled rank
    // has stopped, as a rank stopped for real has long before a timeout; on
    // a loaded machine it may still be on its way there.
    if (stallPoint().first >= 0 &&
        s.cv.wait_until(lock, deadline + std::chrono::seconds(60),
                        [&] { return s.generation != gen || aborted() || stalled.load(); }) &&
        !stalled.load())
      return s.generation != gen;
    // Only now, past the deadline: a world of thousands of ranks would pay
    // for the list at every barrier.
    std::vector<int> ranks = groupRanks(comm, g), missing;
    for (int m = 0; m < s.size; ++m)
      if (!s.here[m])
        missing.push_back(ranks[m]);
    lock.unlock();
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", timeoutS);
    std::string where = whereRanksAre();
    abort("rank " + std::to_string(ranks[member]) + ": waited " + secs + " s (--timeout) at " +
          what + " over " + groupName(g) + " for " + rankList(missing) + ", which did not arrive" +
          (where.empty() ? "" : "; " + where));
    return false;
  }

  // Every rank's communicator, while it lives, for the report above.
  void enlist(int rank, const Communicator *c) {
    std::lock_guard<std::mutex> lock(rollMu);
    roll[rank] = c;
  }
  std::string whereRanksAre() {
    std::lock_guard<std::mutex> lock(rollMu);
    std::vector<Whereabouts> all(worldSize);
    std::vector<const Whereabouts *> seen(worldSize);
    for (int r = 0; r < worldSize; ++r)
      if (roll[r]) {
        all[r] = roll[r]->whereabouts();
        seen[r] = &all[r];
      }
    return runtime::whereRanksAre(seen);
  }

  // A rank that stops arriving (FSDP_TEST_STALL): holds until the world stops.
  void stall() {
    stalled = true;
    for (auto &list : groups)
      for (auto &g : list) {
        std::lock_guard<std::mutex> lock(g->mu);
        g->cv.notify_all();
      }
    GroupState &world = *groups[(int)Group::World][0];
    std::unique_lock<std::mutex> lock(world.mu);
    world.cv.wait(lock, [&] { return aborted(); });
  }

  void abort(const std::string &why) {
    {
      std::lock_guard<std::mutex> lock(errorMu);
      if (reason.empty())
        reason = why;
      isAborted = true;
    }
    for (auto &list : groups)
      for (auto &s : list) {
        std::lock_guard<std::mutex> lock(s->mu);
        s->cv.notify_all();
      }
  }
  bool aborted() {
    std::lock_guard<std::mutex> lock(errorMu);
    return isAborted;
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(errorMu);
    return reason;
  }

  int worldSize, shardSize, reshardSize, tp;
  double timeoutS;

private:
  std::vector<std::unique_ptr<GroupState>> groups[kGroupKinds];
  std::atomic<bool> stalled{false}; // the FSDP_TEST_STALL rank has stopped
  std::mutex rollMu;
  std::vector<const Communicator *> roll;
  std::mutex errorMu;
  std::string reason;
  bool isAborted = false;
};

} // namespace fsdp::runtime

namespace {

class ThreadsCommunicator : public Communicator {
public:
  ThreadsCommunicator(std::shared_ptr<ThreadsWorld> world, int rank)
      : Communicator(world->shardSize, world->reshardSize, world->tp), world(std::move(world)),
        myRank(rank) {
    this->world->enlist(rank, this);
  }
  ~ThreadsCommunicator() override { world->enlist(myRank, nullptr); }

  int rank() const override { return myRank; }
  int worldSize() const override { return world->worldSize; }

  // Meets the group at collective `what`: false once the world is aborted.
  bool meet(Group g, const char *what) {
    auto &s = world->group(g, *this);
    return world->barrier(s, memberIndex(g), *this, g, what);
  }
  // Counts the collective; false for the one a test stalls (FSDP_TEST_STALL),
  // which stops before it begins, as a rank busy elsewhere would.
  bool begin(Group g, const char *what) {
    if (stallHere(myRank, ++collectives)) {
      world->stall();
      return false;
    }
    began(g, what);
    return true;
  }
  bool end(Group g, bool ok) {
    if (ok)
      ended(g);
    return ok;
  }

  // Publishes this member's buffer, meets the group, runs `work` on every
  // member's buffer (slots), and meets it again before anyone reuses one.
  template <typename Work> bool exchange(Group g, const char *what, const void *mine, Work work) {
    if (!begin(g, what))
      return false;
    auto &s = world->group(g, *this);
    s.slots[memberIndex(g)] = mine;
    if (!meet(g, what))
      return false;
    work(s.slots, memberIndex(g));
    return end(g, meet(g, what));
  }

  bool allGather(Group g, const void *src, void *dst, int64_t bytes) override {
    return exchange(g, "all_gather", src, [&](const std::vector<const void *> &slots, int) {
      for (size_t j = 0; j < slots.size(); ++j) {
        char *to = static_cast<char *>(dst) + j * bytes;
        if (to != slots[j])
          std::memcpy(to, slots[j], bytes);
      }
    });
  }

  bool reduceScatterAddBf16(Group g, const uint16_t *src, float *dst, int64_t count) override {
    return exchange(g, "reduce_scatter", src, [&](const std::vector<const void *> &slots, int me) {
      for (int64_t k = 0; k < count; ++k) {
        float sum = 0;
        for (const void *slot : slots)
          sum += bf16ToFloat(static_cast<const uint16_t *>(slot)[me * count + k]);
        dst[k] += bf16ToFloat(floatToBf16(sum));
      }
    });
  }

  bool reduceScatterAdd(Group g, const float *src, float *dst, int64_t count) override {
    return exchange(g, "reduce_scatter", src, [&](const std::vector<const void *> &slots, int me) {
      for (const void *slot : slots) {
        const float *part = static_cast<const float *>(slot) + me * count;
        for (int64_t k = 0; k < count; ++k)
          dst[k] += part[k];
      }
    });
  }

  bool allReduce(Group g, float *buf, int64_t count) override {
    auto &s = world->group(g, *this);
    int me = memberIndex(g), n = s.size;
    if (n == 1)
      return true;
    if (!begin(g, "all_reduce"))
      return false;
    // Each member sums one chunk of every member's buffer into its staging,
    // then writes that chunk back to every member.
    int64_t chunk = (count + n - 1) / n;
    // Each group kind its own: the two streams' threads may both reduce.
    std::vector<float> &staging = this->staging[(int)g];
    if ((int64_t)staging.size() < chunk)
      staging.resize(chunk);
    s.slots[me] = buf;
    if (!meet(g, "all_reduce"))
      return false;
    int64_t lo = std::min(count, me * chunk), hi = std::min(count, lo + chunk);
    std::fill(staging.begin(), staging.begin() + (hi - lo), 0.0f);
    for (int j = 0; j < n; ++j) {
      const float *peer = static_cast<const float *>(s.slots[j]);
      for (int64_t k = lo; k < hi; ++k)
        staging[k - lo] += peer[k];
    }
    if (!meet(g, "all_reduce"))
      return false;
    for (int j = 0; j < n; ++j)
      std::memcpy(const_cast<float *>(static_cast<const float *>(s.slots[j])) + lo, staging.data(),
                  (hi - lo) * sizeof(float));
    return end(g, meet(g, "all_reduce"));
  }

  bool allReduceScalar(Group g, double *value) override {
    if (!begin(g, "all_reduce of a scalar"))
      return false;
    auto &s = world->group(g, *this);
    int me = memberIndex(g);
    s.scalars[me] = *value;
    if (!meet(g, "all_reduce of a scalar"))
      return false;
    double sum = 0;
    for (int j = 0; j < s.size; ++j)
      sum += s.scalars[j];
    if (!meet(g, "all_reduce of a scalar"))
      return false;
    *value = sum;
    return end(g, true);
  }

  void abort(const std::string &why) override { world->abort(why); }
  std::string error() const override { return world->error(); }
  int64_t stagingBytes() const override {
    int64_t bytes = 0;
    for (const std::vector<float> &v : staging)
      bytes += v.capacity() * sizeof(float);
    return bytes;
  }

private:
  std::shared_ptr<ThreadsWorld> world;
  int myRank;
  std::atomic<int64_t> collectives{0}; // both streams' threads make them
  std::vector<float> staging[kGroupKinds];
};

} // namespace

std::shared_ptr<ThreadsWorld> fsdp::runtime::createThreadsWorld(int worldSize, int shardSize,
                                                                double timeoutS, int reshardSize,
                                                                int tp) {
  return std::make_shared<ThreadsWorld>(worldSize, shardSize, timeoutS, reshardSize, tp);
}

std::unique_ptr<Communicator>
fsdp::runtime::threadsCommunicator(std::shared_ptr<ThreadsWorld> world, int rank) {
  return std::make_unique<ThreadsCommunicator>(std::move(world), rank);
}
