//===- StreamOrder.cpp - what a phase's events must order -----------------===//
//
// See StreamOrder.h. With two lists, happens-before across them needs no
// closure: a chain compute -> comm -> compute -> comm that is not a deadlock
// (the loader refuses those, issueOrder) returns to each list at a later
// position, so instruction a of one list is before instruction b of the
// other exactly when one wait on b's list, before b, waits for a record on
// a's list after a. For each list, the latest such record before each
// position is a running maximum over its waits.
//
//===----------------------------------------------------------------------===//
#include "runtime/StreamOrder.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace fsdp;
using namespace fsdp::program;

std::vector<ArenaBytes> fsdp::program::accesses(const Program &p, const Instruction &i) {
  std::vector<ArenaBytes> out;
  auto bytes = [&](int64_t offset, int64_t n, bool write) {
    if (offset >= 0 && n > 0)
      out.push_back({offset, n, write});
  };
  auto tensor = [&](int64_t id, bool write) {
    const Tensor &t = p.tensors[size_t(id)];
    bytes(t.offset, t.bytes(), write);
  };
  const Unit *u = i.unit >= 0 ? &p.units[size_t(i.unit)] : nullptr;
  const int64_t grad = p.gradElementBytes();
  switch (i.op) {
  case Op::Record:
  case Op::Wait:
  case Op::Free:
    break;
  case Op::Alloc:
    bytes(i.dst + i.zeroFrom * grad, (u->paddedNumel - i.zeroFrom) * grad, true);
    break;
  case Op::OptimizerStep:
    // The unit's state in the arena (offloaded, the gradient shard read and
    // zeroed, and but under offload all the parameter shard copied back).
    for (int64_t off : p.arenaStateOffsets(*u))
      bytes(off, u->shardNumel * 4, true);
    bytes(u->accumulatedOffset, u->paddedNumel * 4, true); // zeroed (grad_sync last)
    break;
  case Op::Accumulate:
    bytes(i.src, u->paddedNumel * grad, false);
    bytes(i.dst, u->paddedNumel * 4, true);
    break;
  case Op::AllGather:
    if (i.overReshard) // this member's resharded copy
      bytes(i.src, p.reshardedBytes(*u, i.bf16), false);
    else if (!p.offloadsParams()) // offload all: from the host, into dst
      bytes(u->shardOffset, u->shardNumel * 4, false);
    bytes(i.dst, u->paddedNumel * (i.bf16 ? 2 : 4), true);
    break;
  case Op::Reshard:
    bytes(i.src, u->paddedNumel * (i.bf16 ? 2 : 4), false);
    bytes(i.dst, p.reshardedBytes(*u, i.bf16), true);
    break;
  case Op::ReduceScatter: {
    const int64_t reduced = p.reducedElementBytes();
    bytes(i.src, u->paddedNumel * reduced, reduced == 4 && i.bf16);
    bytes(i.scratch, i.scratchBytes, true);
    bytes(u->gradShardOffset, u->shardNumel * 4, true);
    break;
  }
  case Op::AllReduce:
    bytes(u->gradShardOffset, u->shardNumel * 4, true);
    break;
  case Op::GradNorm:
    for (const Unit &v : p.units)
      bytes(v.gradShardOffset, v.shardNumel * 4, false);
    bytes(i.scratch, i.scratchBytes, true);
    break;
  default: // a compute op: its tensors and its scratch
    for (int64_t id : i.in)
      tensor(id, false);
    for (int64_t id : i.out)
      tensor(id, true);
    bytes(i.scratch, i.scratchBytes, true);
    break;
  }
  return out;
}

namespace {

constexpr int kCompute = 0, kComm = 1;

// A wait of list `to` (at position w) for the record, at position r, of an
// event on the other list.
struct Edge {
  int64_t r, w;
  bool kept = true;
};

// The phase's waits by the list they are on, with their records' positions.
void edgesOf(const Phase &s, std::vector<Edge> edges[2]) {
  const std::vector<Instruction> *lists[2] = {&s.compute, &s.comm};
  std::map<int64_t, std::pair<int, int64_t>> record; // event -> list, position
  for (int l : {kCompute, kComm})
    for (size_t k = 0; k < lists[l]->size(); ++k)
      if ((*lists[l])[k].op == Op::Record)
        record[(*lists[l])[k].event] = {l, int64_t(k)};
  for (int l : {kCompute, kComm})
    for (size_t k = 0; k < lists[l]->size(); ++k) {
      const Instruction &i = (*lists[l])[k];
      if (i.op != Op::Wait)
        continue;
      auto it = record.find(i.event);
      // A record on the same list orders nothing the list does not; one never
      // made is the loader's error, not this one's.
      if (it != record.end() && it->second.first != l)
        edges[l].push_back({it->second.second, int64_t(k)});
    }
}

// latest[k]: the latest position of the other list that list position k is
// after (-1: none), over the kept edges into the list.
std::vector<int64_t> latestBefore(const std::vector<Edge> &edges, size_t n) {
  std::vector<int64_t> latest(n + 1, -1);
  for (const Edge &e : edges)
    if (e.kept && size_t(e.w) + 1 <= n)
      latest[size_t(e.w) + 1] = std::max(latest[size_t(e.w) + 1], e.r);
  for (size_t k = 1; k <= n; ++k)
    latest[k] = std::max(latest[k], latest[k - 1]);
  return latest;
}

std::string describe(const Instruction &i, int list) {
  return std::string(list == kComm ? "comm[" : "compute[") + std::to_string(i.index) + "] (" +
         opName(i.op) + ")";
}

// What each instruction of each list reads and writes.
using Accesses = std::vector<std::vector<ArenaBytes>>;
void accessesOf(const Program &p, const Phase &s, Accesses acc[2]) {
  for (const Instruction &i : s.compute)
    acc[kCompute].push_back(accesses(p, i));
  for (const Instruction &i : s.comm)
    acc[kComm].push_back(accesses(p, i));
}

// For each position of each list, the latest position of the other list
// whose instruction conflicts with it and comes before it: what the waits
// into the list must order it after. "" or the first conflicting pair that
// nothing orders.
std::string requirements(const Phase &s, const Accesses acc[2], const std::vector<Edge> edges[2],
                         std::vector<int64_t> need[2]) {
  const std::vector<Instruction> *lists[2] = {&s.compute, &s.comm};
  std::vector<int64_t> latest[2];
  for (int l : {kCompute, kComm}) {
    latest[l] = latestBefore(edges[l], lists[l]->size());
    need[l].assign(lists[l]->size(), -1);
  }
  // The first overlap of two instructions' accesses (one of them a write).
  auto conflict =
      [](const std::vector<ArenaBytes> &x,
         const std::vector<ArenaBytes> &y) -> std::pair<const ArenaBytes *, const ArenaBytes *> {
    for (const ArenaBytes &a : x)
      for (const ArenaBytes &b : y)
        if ((a.write || b.write) && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes)
          return {&a, &b};
    return {nullptr, nullptr};
  };
  for (size_t c = 0; c < s.compute.size(); ++c) {
    const std::vector<ArenaBytes> &ca = acc[kCompute][c];
    for (size_t m = 0; m < s.comm.size() && !ca.empty(); ++m) {
      auto [a, b] = conflict(ca, acc[kComm][m]);
      if (!a)
        continue;
      if (latest[kComm][m] > int64_t(c)) { // compute's first
        need[kComm][m] = std::max(need[kComm][m], int64_t(c));
      } else if (latest[kCompute][c] > int64_t(m)) { // comm's first
        need[kCompute][c] = std::max(need[kCompute][c], int64_t(m));
      } else {
        int64_t lo = std::max(a->offset, b->offset);
        int64_t hi = std::min(a->offset + a->bytes, b->offset + b->bytes);
        return describe(s.compute[c], kCompute) + (a->write ? " writes" : " reads") +
               " arena bytes [" + std::to_string(lo) + ", " + std::to_string(hi) + ") that " +
               describe(s.comm[m], kComm) + (b->write ? " writes" : " reads") +
               ", and no event orders the two";
      }
    }
  }
  return "";
}

// Whether the kept edges into a list order each of its positions after
// what it needs.
bool satisfied(const std::vector<Edge> &edges, const std::vector<int64_t> &need) {
  std::vector<int64_t> latest = latestBefore(edges, need.size());
  for (size_t k = 0; k < need.size(); ++k)
    if (need[k] >= 0 && latest[k] <= need[k])
      return false;
  return true;
}

} // namespace

std::string fsdp::program::checkStreamOrder(const Program &p, const Phase &s) {
  std::vector<Edge> edges[2];
  edgesOf(s, edges);
  Accesses acc[2];
  accessesOf(p, s, acc);
  std::vector<int64_t> need[2];
  return requirements(s, acc, edges, need);
}

int64_t fsdp::program::dropRedundantWaits(const Program &p, Phase &s) {
  std::vector<Edge> edges[2];
  edgesOf(s, edges);
  Accesses acc[2];
  accessesOf(p, s, acc);
  std::vector<int64_t> need[2];
  if (!requirements(s, acc, edges, need).empty())
    return 0; // not this function's to judge: the loader reports it
  std::vector<Instruction> *lists[2] = {&s.compute, &s.comm};
  int64_t dropped = 0;
  for (int l : {kCompute, kComm}) {
    std::vector<bool> drop(lists[l]->size(), false);
    for (Edge &e : edges[l]) { // in program order
      e.kept = false;
      if (satisfied(edges[l], need[l])) {
        drop[size_t(e.w)] = true;
        ++dropped;
      } else {
        e.kept = true;
      }
    }
    std::vector<Instruction> kept;
    for (size_t k = 0; k < lists[l]->size(); ++k)
      if (!drop[k])
        kept.push_back((*lists[l])[k]);
    *lists[l] = std::move(kept);
  }
  // Records no wait is left for.
  std::map<int64_t, int> waits;
  for (int l : {kCompute, kComm})
    for (const Instruction &i : *lists[l])
      if (i.op == Op::Wait)
        ++waits[i.event];
  for (int l : {kCompute, kComm}) {
    auto &list = *lists[l];
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const Instruction &i) {
                                return i.op == Op::Record && !waits.count(i.event);
                              }),
               list.end());
    for (size_t k = 0; k < list.size(); ++k)
      list[k].index = int64_t(k);
  }
  return dropped;
}

PhaseJoin fsdp::program::phaseJoin(const Program &p, const Phase &before, const Phase &after) {
  // One phase of both lists, `after`'s events renamed apart, joined in the
  // middle as the executor would: comm records its end, compute waits for
  // it and records its own, comm waits for that. Between the lists, the
  // executor's own work on compute: the loss's copy to the host, and before
  // a micro-step its inputs' copies to the device.
  int64_t shift = 0;
  for (const Phase *s : {&before, &after})
    for (const auto *list : {&s->compute, &s->comm})
      for (const Instruction &i : *list)
        shift = std::max(shift, i.event + 1);
  const int64_t commEnd = 2 * shift, computeEnd = 2 * shift + 1;
  auto event = [](Op op, int64_t e) {
    Instruction i;
    i.op = op;
    i.event = e;
    return i;
  };
  auto bytesOf = [&](int64_t tensor, bool write) {
    return ArenaBytes{p.tensors[size_t(tensor)].offset, p.tensors[size_t(tensor)].bytes(), write};
  };
  Phase v = before;
  Accesses acc[2];
  accessesOf(p, before, acc);
  auto add = [&](int l, Instruction i, std::vector<ArenaBytes> a) {
    (l == kComm ? v.comm : v.compute).push_back(i);
    acc[l].push_back(std::move(a));
  };
  // The executor's copies stand in as records nothing waits for.
  add(kCompute, event(Op::Record, -1), {bytesOf(p.loss, false)});
  add(kComm, event(Op::Record, commEnd), {});
  add(kCompute, event(Op::Wait, commEnd), {});
  const int64_t computeJoin = int64_t(v.compute.size()) - 1;
  add(kCompute, event(Op::Record, computeEnd), {});
  add(kComm, event(Op::Wait, computeEnd), {});
  const int64_t commJoin = int64_t(v.comm.size()) - 1;
  if (&after != &p.optimizer) // a micro-step's inputs
    add(kCompute, event(Op::Record, -1), {bytesOf(p.tokens, true), bytesOf(p.targets, true)});
  for (int l : {kCompute, kComm})
    for (Instruction i : l == kComm ? after.comm : after.compute) {
      if (i.event >= 0)
        i.event += shift;
      add(l, i, accesses(p, i));
    }
  std::vector<Edge> edges[2];
  edgesOf(v, edges);
  std::vector<int64_t> need[2];
  if (!requirements(v, acc, edges, need).empty())
    return PhaseJoin(); // both: the loader reports the phase's own
  PhaseJoin join;
  for (auto [l, at, needed] :
       {std::tuple{kCompute, computeJoin, &join.computeWaits}, {kComm, commJoin, &join.commWaits}})
    for (Edge &e : edges[l])
      if (e.w == at) {
        e.kept = false;
        *needed = !satisfied(edges[l], need[l]);
        e.kept = true;
      }
  return join;
}
