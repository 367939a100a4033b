//===- MemoryPlan.cpp - one arena per rank, laid out ahead of time --------===//
#include "planner/Buffers.h"
#include "planner/Passes.h"

namespace fsdp {
#define GEN_PASS_DEF_MEMORYPLAN
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

// Persistent buffers first, one after another; then the transient ones,
// largest first, each at the lowest offset where it overlaps no buffer that
// is live at the same time.
int64_t assignOffsets(BufferModel &model) {
  std::vector<Buffer *> persistent, transient;
  for (Buffer &b : model.buffers) {
    bool always = b.role == BufferRole::UnitShard || b.role == BufferRole::UnitGradShard ||
                  b.role == BufferRole::UnitExpAvg || b.role == BufferRole::UnitExpAvgSq;
    (always ? persistent : transient).push_back(&b);
  }
  int64_t base = 0;
  for (Buffer *b : persistent) {
    b->offset = base;
    base += alignUp(b->bytes);
  }
  std::stable_sort(transient.begin(), transient.end(), [](Buffer *a, Buffer *b) {
    if (a->bytes != b->bytes)
      return a->bytes > b->bytes;
    return a->start < b->start;
  });
  int64_t arena = base;
  std::vector<Buffer *> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (Buffer *b : transient) {
    busy.clear();
    for (Buffer *p : placed)
      if (p->start <= b->end && b->start <= p->end)
        busy.push_back({p->offset, p->offset + alignUp(p->bytes)});
    llvm::sort(busy);
    int64_t offset = base;
    for (auto [lo, hi] : busy) {
      if (lo >= offset + alignUp(b->bytes))
        break;
      offset = std::max(offset, hi);
    }
    b->offset = offset;
    arena = std::max(arena, offset + b->bytes);
    placed.push_back(b);
  }
  return arena;
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
    int64_t maxSeq = stepInt(step, "max_seq_len", 0);
    int64_t S = seqLen > 0 ? (int64_t)seqLen : maxSeq;
    if (microBatch < 1) {
      module.emitError() << "micro-batch must be at least 1, but is " << (int64_t)microBatch;
      return signalPassFailure();
    }
    if (S < 1 || S > maxSeq) {
      module.emitError() << "seq-len " << S << " is outside the model's 1.." << maxSeq;
      return signalPassFailure();
    }
    auto model = collectBuffers(module, microBatch, S);
    if (failed(model))
      return signalPassFailure();
    int64_t arena = assignOffsets(*model);

    // Live bytes per position, by category, to find the peak and its parts.
    constexpr int kCats = 5;
    std::vector<std::array<int64_t, kCats>> delta(model->numPositions + 1);
    for (auto &d : delta)
      d.fill(0);
    for (Buffer &b : model->buffers) {
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
        buf.owner->setAttr("shard_offset", b.getI64IntegerAttr(buf.offset));
        break;
      case BufferRole::UnitGradShard:
        buf.owner->setAttr("grad_shard_offset", b.getI64IntegerAttr(buf.offset));
        break;
      case BufferRole::UnitExpAvg:
        buf.owner->setAttr("exp_avg_offset", b.getI64IntegerAttr(buf.offset));
        break;
      case BufferRole::UnitExpAvgSq:
        buf.owner->setAttr("exp_avg_sq_offset", b.getI64IntegerAttr(buf.offset));
        break;
      case BufferRole::Gathered:
      case BufferRole::GradsFull:
        buf.owner->setAttr("offset", b.getI64IntegerAttr(buf.offset));
        break;
      case BufferRole::Input:
        step->setAttr(buf.index == 0 ? "tokens_offset" : "targets_offset",
                      b.getI64IntegerAttr(buf.offset));
        break;
      case BufferRole::Value: {
        auto &offs = resultOffsets[buf.owner];
        offs.resize(buf.owner->getNumResults(), -1);
        offs[buf.index] = buf.offset;
        break;
      }
      case BufferRole::Scratch:
        buf.owner->setAttr("scratch_offset", b.getI64IntegerAttr(buf.offset));
        break;
      }
    }
    for (Operation &op : step.getBody().front())
      if (op.getDialect() && op.getDialect()->getNamespace() == "nn" && !isa<nn::ParamOp>(op)) {
        auto &offs = resultOffsets[&op];
        offs.resize(op.getNumResults(), -1); // -1: stored in a unit's gradient buffer
        op.setAttr("offsets", b.getDenseI64ArrayAttr(offs));
      }

    step->setAttr("micro_batch", b.getI64IntegerAttr(microBatch));
    step->setAttr("seq_len", b.getI64IntegerAttr(S));
    step->setAttr("arena_bytes", b.getI64IntegerAttr(arena));
    SmallVector<NamedAttribute> mem = {
        b.getNamedAttr("peak_bytes", b.getI64IntegerAttr(arena)),
        b.getNamedAttr("live_peak_bytes", b.getI64IntegerAttr(livePeak)),
        b.getNamedAttr("params_bytes", b.getI64IntegerAttr(atPeak[0])),
        b.getNamedAttr("grads_bytes", b.getI64IntegerAttr(atPeak[1])),
        b.getNamedAttr("optimizer_bytes", b.getI64IntegerAttr(atPeak[2])),
        b.getNamedAttr("unsharded_bytes", b.getI64IntegerAttr(atPeak[3])),
        b.getNamedAttr("activations_bytes", b.getI64IntegerAttr(atPeak[4])),
        b.getNamedAttr("fragmentation_bytes", b.getI64IntegerAttr(arena - livePeak)),
    };
    step->setAttr("memory", b.getDictionaryAttr(mem));
  }
};

} // namespace
