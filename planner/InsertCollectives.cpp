//===- InsertCollectives.cpp - gathers, reductions and frees --------------===//
#include "planner/Passes.h"
#include "planner/PlanUtils.h"

namespace fsdp {
#define GEN_PASS_DEF_INSERTCOLLECTIVES
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct UnitUses {
  Operation *firstFwd = nullptr, *lastFwd = nullptr;
  Operation *firstBwd = nullptr, *lastBwd = nullptr;
  Operation *firstGradDef = nullptr; // earliest op computing a complete gradient
  Operation *lastGrad = nullptr;     // the last fsdp.grad of the unit
};

struct InsertCollectivesPass : public fsdp::impl::InsertCollectivesBase<InsertCollectivesPass> {
  using InsertCollectivesBase::InsertCollectivesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    plan::StepOp step = getStep(module);
    std::vector<plan::UnitOp> units = getUnits(module);
    if (!step || units.empty()) {
      module.emitError() << "fsdp-insert-collectives needs the training step and wrap units "
                            "(run fsdp-training-step and fsdp-wrap-units)";
      return signalPassFailure();
    }
    // The mesh: tp ranks innermost, the strategy over the data-parallel
    // dimension, as hybrid sharding with particular group sizes.
    if (tp < 1 || worldSize < 1 || worldSize % tp != 0) {
      module.emitError() << "tp " << (int64_t)tp << " must divide the world size "
                         << (int64_t)worldSize;
      return signalPassFailure();
    }
    int64_t dp = worldSize / tp;
    int64_t graphTp = 1;
    for (auto p : step.getBody().getOps<nn::ParamOp>())
      if (p.getTpPieces())
        graphTp = std::max(graphTp, p.getTpPiecesOr1());
    bool cut = llvm::any_of(step.getBody().getOps<nn::ParamOp>(),
                            [](nn::ParamOp p) { return p.getTpPieces(); });
    if (cut != (tp > 1) ||
        (tp > 1 && (graphTp != tp ||
                    llvm::any_of(step.getBody().getOps<nn::ParamOp>(),
                                 [&](nn::ParamOp p) { return tp % p.getTpPiecesOr1() != 0; })))) {
      module.emitError() << "tp " << (int64_t)tp << " does not match the graph, "
                         << (cut ? "whose parameters are cut in up to " + std::to_string(graphTp) +
                                       " pieces"
                                 : std::string("which is not cut (run fsdp-tensor-parallel)"));
      return signalPassFailure();
    }
    int64_t group = shardSizeOf(strategy, dp, shardSize);
    StringRef name = plan::strategyFlagName(strategy);
    if (group < 1 || dp % group != 0) {
      module.emitError() << "strategy " << name << " shards over groups of " << group
                         << " ranks, which must divide the world size " << (int64_t)worldSize
                         << (tp > 1 ? " / tp " + std::to_string(tp) : std::string());
      return signalPassFailure();
    }
    for (plan::UnitOp u : units)
      if (u.getShardSize() != (uint64_t)group) {
        u.emitOpError() << "is sharded over " << u.getShardSize() << " ranks, but strategy " << name
                        << " at world size " << (int64_t)worldSize << " shards over " << group;
        return signalPassFailure();
      }
    Builder attrs(module.getContext());
    if (!reshardAfterBackward) {
      if (group == 1) {
        module.emitError() << "reshard-after-backward=false keeps gathered parameters across "
                              "micro-steps, but strategy "
                           << name << " gathers none";
        return signalPassFailure();
      }
      step.setReshardAfterBackwardAttr(attrs.getBoolAttr(false));
    }
    int64_t reshard = reshardAfterForward;
    if (reshard != 0) {
      if (strategy != plan::Strategy::FullShard && strategy != plan::Strategy::HybridShard) {
        module.emitError() << "reshard-after-forward=" << reshard << " reshards after forward, "
                           << "which strategy " << name << " does not (full-shard and "
                           << "hybrid-shard do)";
        return signalPassFailure();
      }
      if (reshard < 2 || group % reshard != 0 || reshard >= group) {
        module.emitError() << "reshard-after-forward=" << reshard << ": groups of " << reshard
                           << " ranks must be at least 2, divide the shard group's " << group
                           << " and be smaller";
        return signalPassFailure();
      }
      if (!reshardAfterBackward) {
        module.emitError() << "reshard-after-forward=" << reshard << " with "
                           << "reshard-after-backward=false: kept all step, nothing is resharded";
        return signalPassFailure();
      }
      step.setReshardAfterForwardAttr(attrs.getI64IntegerAttr(reshard));
    }
    step.setStrategy(strategy);
    step.setWorldSize(worldSize);
    if (tp > 1)
      step.setTp(tp);
    step.setShardSize(group);

    auto byParam = unitsByParam(module);
    Operation *bwdStart = backwardStart(step);
    plan::OptimizerStepOp optimizer;
    for (auto o : step.getBody().getOps<plan::OptimizerStepOp>())
      if (!o.getUnit())
        optimizer = o;
    if (!bwdStart || !optimizer) {
      step.emitOpError() << "is not a training step: no loss or no optimizer step";
      return signalPassFailure();
    }

    // Where each unit's parameters and gradients are used.
    DenseMap<Operation *, UnitUses> uses;
    bool inBackward = false;
    for (Operation &op : step.getBody().front()) {
      if (&op == bwdStart)
        inBackward = true;
      if (auto g = dyn_cast<plan::GradOp>(op)) {
        auto it = byParam.find(g.getParam());
        if (it == byParam.end()) {
          g.emitOpError() << "names parameter '" << g.getParam() << "', which is in no unit";
          return signalPassFailure();
        }
        UnitUses &u = uses[it->second];
        u.lastGrad = &op;
        Operation *def = g.getGrad().getDefiningOp();
        if (!u.firstGradDef || def->isBeforeInBlock(u.firstGradDef))
          u.firstGradDef = def;
        continue;
      }
      if (isa<nn::ParamOp>(op))
        continue;
      for (Value v : op.getOperands()) {
        plan::UnitOp unit = unitOfValue(v, byParam);
        if (!unit)
          continue;
        UnitUses &u = uses[unit];
        if (!inBackward) {
          if (!u.firstFwd)
            u.firstFwd = &op;
          u.lastFwd = &op;
        } else {
          if (!u.firstBwd)
            u.firstBwd = &op;
          u.lastBwd = &op;
        }
      }
    }

    OpBuilder b(module.getContext());
    Location loc = step.getLoc();
    Type ev = plan::EventType::get(module.getContext());
    auto ref = [&](plan::UnitOp u) { return FlatSymbolRefAttr::get(u.getSymNameAttr()); };
    auto gatherBefore = [&](Operation *at, plan::UnitOp u) {
      b.setInsertionPoint(at);
      auto g = b.create<plan::AllGatherOp>(loc, ev, ref(u), IntegerAttr(), plan::DtypeAttr(),
                                           plan::GroupAttr());
      b.create<plan::WaitOp>(loc, g.getEvent());
      ++numCollectives;
    };
    auto freeAfter = [&](Operation *at, plan::UnitOp u, plan::BufferKind kind) {
      b.setInsertionPointAfter(at);
      b.create<plan::FreeOp>(loc, plan::BufferKindAttr::get(b.getContext(), kind), ref(u));
    };
    // reshard-after-forward=N: the forward's gathered parameters leave this
    // rank's 1/N behind, which the backward gathers over the reshard group.
    auto reshardAfter = [&](Operation *at, plan::UnitOp u) {
      b.setInsertionPointAfter(at);
      auto r = b.create<plan::ReshardOp>(loc, ref(u), IntegerAttr());
      freeAfter(r, u, plan::BufferKind::params);
    };
    auto gatherReshardedBefore = [&](Operation *at, plan::UnitOp u) {
      b.setInsertionPoint(at);
      auto g =
          b.create<plan::AllGatherOp>(loc, ev, ref(u), IntegerAttr(), plan::DtypeAttr(),
                                      plan::GroupAttr::get(b.getContext(), plan::Group::reshard));
      auto w = b.create<plan::WaitOp>(loc, g.getEvent());
      freeAfter(w, u, plan::BufferKind::resharded);
      ++numCollectives;
    };

    // Parameters: only sharded units are gathered.
    if (group > 1) {
      // The unit that computes last in forward is first in backward: it
      // stays gathered between the two, as FSDP keeps its root unit.
      plan::UnitOp keep;
      Operation *latest = nullptr;
      for (plan::UnitOp u : units) {
        UnitUses &s = uses[u];
        if (s.lastFwd && (!latest || latest->isBeforeInBlock(s.lastFwd))) {
          latest = s.lastFwd;
          keep = u;
        }
      }
      // Kept across micro-steps, a unit is kept within one too.
      bool zero2 = strategy == plan::Strategy::ShardGradOp || !reshardAfterBackward;
      for (plan::UnitOp u : units) {
        UnitUses &s = uses[u];
        Operation *first = s.firstFwd ? s.firstFwd : s.firstBwd;
        if (!first)
          continue;
        bool holdThrough = zero2 || (u == keep && s.firstBwd);
        if (s.firstFwd && s.firstBwd && holdThrough) {
          gatherBefore(s.firstFwd, u);
          freeAfter(s.lastBwd, u, plan::BufferKind::params);
          continue;
        }
        bool resharded = reshard != 0 && s.firstFwd && s.firstBwd;
        if (s.firstFwd) {
          gatherBefore(s.firstFwd, u);
          if (resharded)
            reshardAfter(s.lastFwd, u);
          else
            freeAfter(s.lastFwd, u, plan::BufferKind::params);
        }
        if (s.firstBwd) {
          if (resharded)
            gatherReshardedBefore(s.firstBwd, u);
          else
            gatherBefore(s.firstBwd, u);
          freeAfter(s.lastBwd, u, plan::BufferKind::params);
        }
      }
    }

    // Gradients, in the order their units complete.
    std::vector<plan::UnitOp> reduced;
    for (plan::UnitOp u : units)
      if (uses[u].lastGrad)
        reduced.push_back(u);
    llvm::sort(reduced, [&](plan::UnitOp a, plan::UnitOp c) {
      return uses[a].lastGrad->isBeforeInBlock(uses[c].lastGrad);
    });
    int64_t replicas = dp / group;
    SmallVector<Value> pendingEvents;
    plan::UnitOp pendingUnit;
    auto retirePending = [&](Operation *before) {
      if (!pendingUnit)
        return;
      b.setInsertionPoint(before);
      for (Value e : pendingEvents)
        b.create<plan::WaitOp>(loc, e);
      if (gradSync != plan::GradSync::Last)
        b.create<plan::FreeOp>(loc,
                               plan::BufferKindAttr::get(b.getContext(), plan::BufferKind::grads),
                               ref(pendingUnit));
      pendingEvents.clear();
      pendingUnit = {};
    };
    // grad-sync=last: the gradients go into the unit's accumulation buffer
    // at once and their buffer is freed; the reductions (last micro-step
    // only) read the accumulation buffer, so only their waits are pending.
    bool accumulate = gradSync == plan::GradSync::Last;
    if (accumulate)
      step.setGradSync(plan::GradSync::Last);
    for (plan::UnitOp u : reduced) {
      UnitUses &s = uses[u];
      b.setInsertionPoint(s.firstGradDef);
      b.create<plan::AllocOp>(loc,
                              plan::BufferKindAttr::get(b.getContext(), plan::BufferKind::grads),
                              ref(u), IntegerAttr());
      b.setInsertionPointAfter(s.lastGrad);
      if (accumulate) {
        b.create<plan::AccumulateOp>(loc, ref(u));
        b.create<plan::FreeOp>(
            loc, plan::BufferKindAttr::get(b.getContext(), plan::BufferKind::grads), ref(u));
      }
      auto rs = b.create<plan::ReduceScatterOp>(loc, ev, ref(u), plan::DtypeAttr(), IntegerAttr());
      ++numCollectives;
      SmallVector<Value> events = {rs.getEvent()};
      if (replicas > 1) {
        auto ar = b.create<plan::AllReduceOp>(loc, ev, ref(u), plan::GroupAttr());
        ++numCollectives;
        events.push_back(ar.getEvent());
      }
      // Tensor parallelism: the gradients ranks computed parts of.
      if (std::optional<ArrayRef<bool>> partial = u.getTpPartial();
          partial && llvm::is_contained(*partial, true)) {
        auto ar = b.create<plan::AllReduceOp>(
            loc, ev, ref(u), plan::GroupAttr::get(b.getContext(), plan::Group::tp));
        ++numCollectives;
        events.push_back(ar.getEvent());
      }
      // The previous unit's reduction overlapped this unit's backward; its
      // gradient buffer is released once that reduction is done.
      retirePending(rs);
      pendingEvents = events;
      pendingUnit = u;
    }

    // The optimizer: global norm, then each unit's shard.
    retirePending(optimizer);
    b.setInsertionPoint(optimizer);
    auto norm = b.create<plan::GradNormOp>(loc, ev, IntegerAttr());
    ++numCollectives;
    b.create<plan::WaitOp>(loc, norm.getEvent());
    for (plan::UnitOp u : units)
      b.create<plan::OptimizerStepOp>(loc, ref(u));
    optimizer.erase();
  }
};

} // namespace
