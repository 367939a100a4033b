//===- MemoryPlan.cpp - one arena per rank, laid out ahead of time --------===//
#include "planner/Buffers.h"
#include "planner/Passes.h"

#include <map>
#include <queue>
#include <set>

namespace fsdp {
#define GEN_PASS_DEF_MEMORYPLAN
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

// Persistent buffers first, one after another. Then the program is replayed
// in order as an allocator would see it: at each position the buffers whose
// life ended are released (coalescing free ranges) and the ones born there
// are placed, largest first, in the smallest free range that holds them, or
// on top. Near-linear in the number of buffers, where placing each buffer
// against every buffer live at the same time would be quadratic.
int64_t assignOffsets(BufferModel &model) {
  std::vector<Buffer *> persistent, transient;
  for (Buffer &b : model.buffers) {
    if (b.host) // the host pool's, laid out by hostOffsets
      continue;
    (isPersistent(b.role) ? persistent : transient).push_back(&b);
  }
  int64_t base = 0;
  for (Buffer *b : persistent) {
    b->offset = base;
    base += alignUp(b->bytes);
  }
  std::stable_sort(transient.begin(), transient.end(), [](Buffer *a, Buffer *b) {
    if (a->start != b->start)
      return a->start < b->start;
    return a->bytes > b->bytes;
  });

  std::map<int64_t, int64_t> freeByOffset;          // offset -> size
  std::set<std::pair<int64_t, int64_t>> freeBySize; // (size, offset)
  int64_t top = base, arena = base;
  auto addFree = [&](int64_t off, int64_t size) {
    auto next = freeByOffset.lower_bound(off);
    if (next != freeByOffset.end() && next->first == off + size) {
      size += next->second;
      freeBySize.erase({next->second, next->first});
      next = freeByOffset.erase(next);
    }
    if (next != freeByOffset.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        size += prev->second;
        freeBySize.erase({prev->second, prev->first});
        freeByOffset.erase(prev);
      }
    }
    if (off + size == top) { // the top of the arena shrinks back
      top = off;
      return;
    }
    freeByOffset[off] = size;
    freeBySize.insert({size, off});
  };
  auto allocate = [&](int64_t need) {
    auto it = freeBySize.lower_bound({need, INT64_MIN});
    if (it != freeBySize.end()) {
      auto [size, off] = *it;
      freeBySize.erase(it);
      freeByOffset.erase(off);
      if (size > need) {
        freeByOffset[off + need] = size - need;
        freeBySize.insert({size - need, off + need});
      }
      return off;
    }
    int64_t off = top;
    top += need;
    return off;
  };

  using Ending = std::pair<int64_t, Buffer *>; // (end, buffer)
  std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> live;
  int64_t overlaps = 0; // pairs of transient buffers live at the same time
  for (Buffer *b : transient) {
    while (!live.empty() && live.top().first < b->start) {
      Buffer *done = live.top().second;
      live.pop();
      addFree(done->offset, alignUp(done->bytes));
    }
    overlaps += live.size();
    b->offset = allocate(alignUp(b->bytes));
    arena = std::max(arena, b->offset + b->bytes);
    live.push({b->end, b});
  }

  // Where it is affordable, also place offline, largest first, each at the
  // lowest offset free for its whole life; keep whichever arena is smaller.
  // Its cost grows with the pairs of buffers live together, so very deep
  // models keep the replayed layout.
  constexpr int64_t kOfflineBudget = 30'000'000;
  if (overlaps > kOfflineBudget)
    return arena;
  std::vector<Buffer *> bySize = transient;
  std::stable_sort(bySize.begin(), bySize.end(), [](Buffer *a, Buffer *b) {
    if (a->bytes != b->bytes)
      return a->bytes > b->bytes;
    return a->start < b->start;
  });
  std::vector<int64_t> offline(bySize.size());
  int64_t offlineArena = base;
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (size_t i = 0; i < bySize.size(); ++i) {
    Buffer *b = bySize[i];
    busy.clear();
    for (size_t j : placed)
      if (bySize[j]->start <= b->end && b->start <= bySize[j]->end)
        busy.push_back({offline[j], offline[j] + alignUp(bySize[j]->bytes)});
    llvm::sort(busy);
    int64_t offset = base;
    for (auto [lo, hi] : busy) {
      if (lo >= offset + alignUp(b->bytes))
        break;
      offset = std::max(offset, hi);
    }
    offline[i] = offset;
    offlineArena = std::max(offlineArena, offset + b->bytes);
    placed.push_back(i);
  }
  if (offlineArena < arena) {
    for (size_t i = 0; i < bySize.size(); ++i)
      bySize[i]->offset = offline[i];
    arena = offlineArena;
  }
  return arena;
}

// The host pool (offload = optimizer): its buffers all live throughout,
// one after another. Returns its bytes (to the last one's end, as the
// arena's).
int64_t hostOffsets(BufferModel &model) {
  int64_t top = 0, end = 0;
  for (Buffer &b : model.buffers)
    if (b.host) {
      b.offset = top;
      end = top + b.bytes;
      top += alignUp(b.bytes);
    }
  return end;
}

struct MemoryPlanPass : public fsdp::impl::MemoryPlanBase<MemoryPlanPass> {
  using MemoryPlanBase::MemoryPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    plan::StepOp step = getStep(module);
    if (!step) {
      module.emitError() << "fsdp-memory-plan needs a training step";
      return signalPassFailure();
    }
    int64_t maxSeq = step.getMaxSeqLen().value_or(0);
    int64_t S = seqLen > 0 ? (int64_t)seqLen : maxSeq;
    if (microBatch < 1) {
      module.emitError() << "micro-batch must be at least 1, but is " << (int64_t)microBatch;
      return signalPassFailure();
    }
    if (S < 1 || S > maxSeq) {
      module.emitError() << "seq-len " << S << " is outside the model's 1.." << maxSeq;
      return signalPassFailure();
    }
    step.setTarget(target);
    if (offload == plan::Offload::None)
      step.removeOffloadAttr();
    else
      step.setOffload(offload);
    auto model = collectBuffers(module, microBatch, S);
    if (failed(model))
      return signalPassFailure();
    int64_t arena = assignOffsets(*model);
    int64_t hostBytes = hostOffsets(*model);
    for (plan::UnitOp u : getUnits(module)) { // set below where the plan has them
      u.removeHostShardOffsetAttr();
      u.removeHostGradOffsetAttr();
      u.removeHostGatherOffsetAttr();
      u.removeShardOffsetAttr();
    }

    // Live bytes per position, by category, to find the peak and its parts.
    constexpr int kCats = 5;
    std::vector<std::array<int64_t, kCats>> delta(model->numPositions + 1);
    for (auto &d : delta)
      d.fill(0);
    for (Buffer &b : model->buffers) {
      if (b.host) // the device's memory only
        continue;
      delta[b.start][(int)b.category] += b.bytes;
      delta[b.end + 1][(int)b.category] -= b.bytes;
    }
    std::array<int64_t, kCats> live{}, atPeak{};
    int64_t livePeak = -1;
    for (int64_t p = 0; p < model->numPositions; ++p) {
      int64_t total = 0;
      for (int c = 0; c < kCats; ++c) {
        live[c] += delta[p][c];
        total += live[c];
      }
      if (total > livePeak) {
        livePeak = total;
        atPeak = live;
      }
    }

    // Record the layout where each buffer is defined.
    Builder b(module.getContext());
    DenseMap<Operation *, SmallVector<int64_t>> resultOffsets;
    for (Buffer &buf : model->buffers) {
      switch (buf.role) {
      case BufferRole::UnitShard:
        cast<plan::UnitOp>(buf.owner).setShardOffset(buf.offset);
        break;
      case BufferRole::UnitGradShard:
        cast<plan::UnitOp>(buf.owner).setGradShardOffset(buf.offset);
        break;
      case BufferRole::UnitExpAvg:
        cast<plan::UnitOp>(buf.owner).setExpAvgOffset(buf.offset);
        break;
      case BufferRole::UnitExpAvgSq:
        cast<plan::UnitOp>(buf.owner).setExpAvgSqOffset(buf.offset);
        break;
      case BufferRole::UnitAccumulated:
        cast<plan::UnitOp>(buf.owner).setAccumulatedOffset(buf.offset);
        break;
      case BufferRole::UnitHostShard:
        cast<plan::UnitOp>(buf.owner).setHostShardOffset(buf.offset);
        break;
      case BufferRole::UnitHostGrad:
        cast<plan::UnitOp>(buf.owner).setHostGradOffset(buf.offset);
        break;
      case BufferRole::UnitHostGather:
        cast<plan::UnitOp>(buf.owner).setHostGatherOffset(buf.offset);
        break;
      case BufferRole::Gathered:
        cast<plan::AllGatherOp>(buf.owner).setOffset(buf.offset);
        break;
      case BufferRole::Resharded:
        cast<plan::ReshardOp>(buf.owner).setOffset(buf.offset);
        break;
      case BufferRole::GradsFull:
        cast<plan::AllocOp>(buf.owner).setOffset(buf.offset);
        break;
      case BufferRole::Input:
        if (buf.index == 0)
          step.setTokensOffset(buf.offset);
        else
          step.setTargetsOffset(buf.offset);
        break;
      case BufferRole::Value: {
        auto &offs = resultOffsets[buf.owner];
        offs.resize(buf.owner->getNumResults(), -1);
        offs[buf.index] = buf.offset;
        break;
      }
      case BufferRole::Scratch:
        if (auto rs = dyn_cast<plan::ReduceScatterOp>(buf.owner))
          rs.setScratchOffset(buf.offset);
        else if (auto g = dyn_cast<plan::GradNormOp>(buf.owner))
          g.setScratchOffset(buf.offset);
        else if (auto s = dyn_cast<plan::StepOp>(buf.owner))
          s.setWorkspaceOffset(buf.offset);
        else
          buf.owner->setAttr("scratch_offset", b.getI64IntegerAttr(buf.offset));
        break;
      }
    }
    for (Operation &op : step.getBody().front())
      if (producesTensors(&op)) {
        auto &offs = resultOffsets[&op];
        offs.resize(op.getNumResults(), -1); // -1: stored in a unit's gradient buffer
        op.setAttr("offsets", b.getDenseI64ArrayAttr(offs));
      }

    step.setMicroBatch(microBatch);
    step.setSeqLen(S);
    step.setArenaBytes(arena);
    if (step.offloadsOptimizer())
      step.setHostBytes(hostBytes);
    else
      step.removeHostBytesAttr();
    step.setMemoryAttr(plan::MemoryAttr::get(
        module.getContext(), /*peak_bytes=*/arena, /*live_peak_bytes=*/livePeak,
        /*params_bytes=*/atPeak[0], /*grads_bytes=*/atPeak[1], /*optimizer_bytes=*/atPeak[2],
        /*unsharded_bytes=*/atPeak[3], /*activations_bytes=*/atPeak[4],
        /*fragmentation_bytes=*/arena - livePeak));
  }
};

} // namespace
