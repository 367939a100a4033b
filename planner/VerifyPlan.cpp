//===- VerifyPlan.cpp - a plan is safe, or rejected at the op -------------===//
//
// Simulates the step in program order, tracking each unit's gathered
// parameters and unsharded gradients. Every rank runs the same ops (SPMD).
//
//===----------------------------------------------------------------------===//
#include "planner/Buffers.h"
#include "planner/Passes.h"

#include <map>
#include <queue>

namespace fsdp {
#define GEN_PASS_DEF_VERIFYPLAN
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct UnitState {
  plan::AllGatherOp gather; // the live gather, if any
  bool gathered = false, gatherWaited = false;
  Operation *freedAt = nullptr;
  plan::AllocOp alloc;
  bool reduced = false, allReduced = false;
  bool accumulated = false;        // grad_sync = last: this micro-step's gradients added
  plan::ReshardOp reshard;         // reshard_after_forward: the live resharded copy, if any
  plan::AllGatherOp reshardReader; // the gather over reshard reading it, if any
  Value reduceEvent, allReduceEvent, tpAllReduceEvent;
  int64_t reductions = 0, allReductions = 0, tpAllReductions = 0, optimizerSteps = 0;
  bool hasGrads = false;
};

struct VerifyPlanPass : public fsdp::impl::VerifyPlanBase<VerifyPlanPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    plan::StepOp step = getStep(module);
    if (!step) {
      module.emitError() << "no training step to verify";
      return signalPassFailure();
    }
    // The step's own figures are checked by its verifier; what spans ops is
    // checked here. Every rank runs the same ops (SPMD), so one simulation
    // covers every rank, and every rank issues the same collectives in the
    // same order.
    int64_t group = step.getShardSizeOr1();
    if (step.getShardSize())
      for (plan::UnitOp u : getUnits(module))
        if (u.getShardSize() != group) {
          u.emitOpError() << "is sharded over " << u.getShardSize()
                          << " ranks, but the step's shard groups are of " << group;
          return signalPassFailure();
        }
    if (failed(checkTensorParallel(module, step)) ||
        failed(checkStep(module, step, step.getDpSize() / group)))
      return signalPassFailure();
    if (step.getArenaBytes() && failed(checkMemory(module, step)))
      return signalPassFailure();
  }

  LogicalResult checkStep(ModuleOp module, plan::StepOp step, int64_t replicas) {
    auto byParam = unitsByParam(module);
    DenseMap<Operation *, UnitState> state;
    DenseSet<Value> waited;
    auto byName = unitsByName(module);
    auto unitOf = [&](Operation *op) { return unitOfOp(op, byName); };
    Value normEvent;
    // grad_sync = last: gradients are accumulated, then freed; the
    // reductions read the accumulation buffer.
    bool last = step.syncsAtLastMicroStep();

    for (Operation &op : step.getBody().front()) {
      if (auto w = dyn_cast<plan::WaitOp>(op)) {
        waited.insert(w.getEvent());
        if (auto g = w.getEvent().getDefiningOp<plan::AllGatherOp>()) {
          UnitState &s = state[unitOf(g)];
          if (s.gather == g)
            s.gatherWaited = true;
        }
        continue;
      }
      if (isa<plan::AllGatherOp, plan::ReduceScatterOp, plan::AllReduceOp, plan::AllocOp,
              plan::FreeOp, plan::OptimizerStepOp, plan::AccumulateOp, plan::ReshardOp>(op) &&
          op.hasAttr("unit") && !unitOf(&op))
        return op.emitOpError() << "names an unknown unit " << op.getAttr("unit");

      if (auto a = dyn_cast<plan::AccumulateOp>(op)) {
        UnitState &s = state[unitOf(a)];
        if (!s.alloc)
          return a.emitOpError() << "accumulates unit @" << a.getUnit()
                                 << ", which has no gradient buffer here";
        if (s.accumulated)
          return a.emitOpError() << "accumulates unit @" << a.getUnit()
                                 << "'s gradients a second time in the micro-step";
        s.accumulated = true;
        continue;
      }

      if (auto r = dyn_cast<plan::ReshardOp>(op)) {
        UnitState &s = state[unitOf(r)];
        if (!s.gathered || !s.gatherWaited)
          return r.emitOpError() << "reshards unit @" << r.getUnit() << ", which is not "
                                 << (s.gathered ? "waited for" : "gathered") << " here";
        if (s.reshard)
          return r.emitOpError() << "reshards unit @" << r.getUnit()
                                 << " again while its resharded copy is live";
        s.reshard = r;
        s.reshardReader = {};
        continue;
      }

      if (auto g = dyn_cast<plan::AllGatherOp>(op)) {
        UnitState &s = state[unitOf(g)];
        if (s.gathered)
          return g.emitOpError() << "gathers unit @" << g.getUnit()
                                 << " again while it is still gathered";
        if (g.getGroup() == plan::Group::reshard) {
          if (!s.reshard)
            return g.emitOpError() << "gathers unit @" << g.getUnit()
                                   << " over its reshard group, but no resharded copy of it is "
                                      "live here";
          s.reshardReader = g;
        }
        s.gather = g;
        s.gathered = true;
        s.gatherWaited = false;
        continue;
      }
      if (auto f = dyn_cast<plan::FreeOp>(op)) {
        UnitState &s = state[unitOf(f)];
        if (f.getKind() == plan::BufferKind::params) {
          if (!s.gathered)
            return f.emitOpError()
                   << "frees the parameters of unit @" << f.getUnit() << ", which are not gathered";
          s.gathered = false;
          s.freedAt = f;
          continue;
        }
        if (f.getKind() == plan::BufferKind::resharded) {
          if (!s.reshard)
            return f.emitOpError() << "frees the resharded copy of unit @" << f.getUnit()
                                   << ", which has none live";
          if (s.reshardReader && !waited.contains(s.reshardReader.getEvent()))
            return f.emitOpError() << "frees the resharded copy of unit @" << f.getUnit()
                                   << " before the gather reading it has completed";
          s.reshard = {};
          continue;
        }
        if (!s.alloc)
          return f.emitOpError() << "frees the gradients of unit @" << f.getUnit()
                                 << ", which are not allocated";
        if (last) {
          if (!s.accumulated)
            return f.emitOpError() << "frees the gradients of unit @" << f.getUnit()
                                   << " without accumulating them: they would be lost";
          s.alloc = {};
          continue;
        }
        if (!s.reduced)
          return f.emitOpError() << "frees the gradients of unit @" << f.getUnit()
                                 << " without reducing them: they would be lost";
        if (!waited.contains(s.reduceEvent) ||
            (s.allReduceEvent && !waited.contains(s.allReduceEvent)) ||
            (s.tpAllReduceEvent && !waited.contains(s.tpAllReduceEvent)))
          return f.emitOpError() << "frees the gradients of unit @" << f.getUnit()
                                 << " before their reduction has completed";
        s.alloc = {};
        continue;
      }
      if (auto a = dyn_cast<plan::AllocOp>(op)) {
        UnitState &s = state[unitOf(a)];
        if (s.alloc)
          return a.emitOpError() << "allocates the gradients of unit @" << a.getUnit()
                                 << " while they are still allocated";
        s.alloc = a;
        s.reduced = s.accumulated = false;
        s.reduceEvent = s.allReduceEvent = s.tpAllReduceEvent = Value();
        continue;
      }
      if (auto g = dyn_cast<plan::GradOp>(op)) {
        auto it = byParam.find(g.getParam());
        if (it == byParam.end())
          return g.emitOpError() << "names parameter '" << g.getParam() << "', which is in no unit";
        UnitState &s = state[it->second];
        s.hasGrads = true;
        if (!s.alloc)
          return g.emitOpError() << "completes the gradient of '" << g.getParam() << "', but unit @"
                                 << it->second.getSymName() << " has no gradient buffer here";
        if (s.reduced || s.accumulated)
          return g.emitOpError() << "completes the gradient of '" << g.getParam()
                                 << "' after unit @" << it->second.getSymName() << " was "
                                 << (s.accumulated ? "accumulated" : "reduced")
                                 << ": it would be lost";
        Operation *def = g.getGrad().getDefiningOp();
        if (def && def->isBeforeInBlock(s.alloc))
          return def->emitOpError()
                 << "writes the gradient of '" << g.getParam() << "' before unit @"
                 << it->second.getSymName() << "'s gradient buffer is allocated";
        continue;
      }
      if (auto rs = dyn_cast<plan::ReduceScatterOp>(op)) {
        UnitState &s = state[unitOf(rs)];
        if (last && !s.accumulated)
          return rs.emitOpError() << "reduces unit @" << rs.getUnit()
                                  << "'s accumulation buffer before this micro-step's "
                                     "gradients are added to it";
        if (!last && !s.alloc)
          return rs.emitOpError() << "reduces unit @" << rs.getUnit()
                                  << ", which has no gradient buffer here";
        if (s.reduced)
          return rs.emitOpError() << "reduces unit @" << rs.getUnit()
                                  << "'s gradients a second time";
        s.reduced = true;
        s.reduceEvent = rs.getEvent();
        ++s.reductions;
        continue;
      }
      if (auto ar = dyn_cast<plan::AllReduceOp>(op)) {
        UnitState &s = state[unitOf(ar)];
        if (!s.reduced)
          return ar.emitOpError() << "all-reduces unit @" << ar.getUnit()
                                  << " before its reduce_scatter";
        if (ar.getGroup() == plan::Group::tp) {
          s.tpAllReduceEvent = ar.getEvent();
          ++s.tpAllReductions;
        } else {
          s.allReduceEvent = ar.getEvent();
          ++s.allReductions;
        }
        continue;
      }
      if (auto n = dyn_cast<plan::GradNormOp>(op)) {
        normEvent = n.getEvent();
        continue;
      }
      if (auto o = dyn_cast<plan::OptimizerStepOp>(op)) {
        if (!o.getUnit())
          return o.emitOpError() << "updates every parameter at once; the plan needs a step "
                                    "per unit (run fsdp-insert-collectives)";
        plan::UnitOp u = unitOf(o);
        UnitState &s = state[u];
        if (!normEvent || !waited.contains(normEvent))
          return o.emitOpError() << "updates unit @" << u.getSymName()
                                 << " before the global gradient norm is known";
        if (s.hasGrads && s.reductions == 0)
          return o.emitOpError() << "updates unit @" << u.getSymName()
                                 << ", whose gradients were never reduced";
        if (s.hasGrads && (!waited.contains(s.reduceEvent) ||
                           (s.allReduceEvent && !waited.contains(s.allReduceEvent)) ||
                           (s.tpAllReduceEvent && !waited.contains(s.tpAllReduceEvent))))
          return o.emitOpError() << "updates unit @" << u.getSymName()
                                 << " before its gradient reduction has completed";
        ++s.optimizerSteps;
        continue;
      }
      // A compute op: its parameters must be gathered and waited for.
      for (Value v : op.getOperands()) {
        plan::UnitOp u = unitOfValue(v, byParam);
        if (!u || u.getShardSize() == 1)
          continue;
        UnitState &s = state[u];
        StringRef name = v.getDefiningOp<nn::ParamOp>().getName();
        if (!s.gathered) {
          auto diag = op.emitOpError() << "uses parameter '" << name << "' of unit @"
                                       << u.getSymName() << ", which is not gathered here";
          if (s.freedAt)
            diag.attachNote(s.freedAt->getLoc()) << "freed here";
          return diag;
        }
        if (!s.gatherWaited) {
          auto diag = op.emitOpError() << "uses parameter '" << name << "' of unit @"
                                       << u.getSymName() << " before waiting for its all_gather";
          diag.attachNote(s.gather.getLoc()) << "gathered here";
          return diag;
        }
      }
    }

    for (plan::UnitOp u : getUnits(module)) {
      UnitState &s = state[u];
      if (s.gathered)
        return s.gather.emitOpError()
               << "gathers unit @" << u.getSymName() << ", which is never freed";
      if (s.alloc)
        return s.alloc.emitOpError() << "allocates the gradients of unit @" << u.getSymName()
                                     << ", which are never freed";
      if (s.reshard)
        return s.reshard.emitOpError()
               << "reshards unit @" << u.getSymName() << ", whose copy is never freed";
      if (s.hasGrads && s.reductions == 0)
        return u.emitOpError() << "has gradients that are never reduced";
      if (s.hasGrads && replicas > 1 && s.allReductions != 1)
        return u.emitOpError() << "has gradients all-reduced " << s.allReductions
                               << " times across replica groups; expected once";
      // Tensor parallelism: partial gradients summed over tp once, others
      // never (a whole gradient summed over tp would count tp times).
      int64_t partial = 0;
      if (std::optional<ArrayRef<bool>> p = u.getTpPartial())
        partial = llvm::count(*p, true);
      if (s.hasGrads && s.tpAllReductions != (partial ? 1 : 0))
        return u.emitOpError() << "has gradients all-reduced " << s.tpAllReductions
                               << " times over tp; expected "
                               << (partial ? "once: " + std::to_string(partial) +
                                                 " of its parameters' gradients are partial"
                                           : std::string("none: no gradient of it is partial"));
      if (s.optimizerSteps != 1)
        return u.emitOpError() << "is updated by " << s.optimizerSteps
                               << " optimizer steps; expected one";
    }
    return success();
  }

  // Tensor parallelism: every unit says how its parameters are cut, each
  // as its nn.param does, in no more pieces than the tp group has ranks;
  // a step without tp cuts nothing.
  LogicalResult checkTensorParallel(ModuleOp module, plan::StepOp step) {
    int64_t tp = step.getTpOr1();
    llvm::StringMap<nn::ParamOp> params;
    for (auto p : step.getBody().getOps<nn::ParamOp>())
      params[p.getName()] = p;
    for (plan::UnitOp u : getUnits(module)) {
      if (!u.getTpPieces()) {
        if (tp > 1)
          return u.emitOpError() << "has no tp_dims, tp_pieces, tp_sections and tp_partial in a "
                                    "step of tp "
                                 << tp;
        continue;
      }
      for (auto [k, name] : llvm::enumerate(u.getParams())) {
        nn::ParamOp p = params.lookup(cast<StringAttr>(name).getValue());
        if (!p)
          continue;
        int64_t pieces = (*u.getTpPieces())[k];
        if (tp % pieces != 0)
          return u.emitOpError() << "cuts parameter " << name << " into " << pieces
                                 << " pieces, which do not divide tp " << tp;
        if ((*u.getTpDims())[k] != p.getTpDimOrNone() || pieces != p.getTpPiecesOr1() ||
            (*u.getTpSections())[k] != p.getTpSectionsOr1() ||
            (*u.getTpPartial())[k] != p.getTpPartial())
          return u.emitOpError() << "says parameter " << name
                                 << " is cut otherwise than its nn.param does";
      }
    }
    return success();
  }

  // No two buffers live at the same time may share a byte.
  LogicalResult checkMemory(ModuleOp module, plan::StepOp step) {
    auto model =
        collectBuffers(module, step.getMicroBatch().value_or(1), step.getSeqLen().value_or(1));
    if (failed(model))
      return failure();
    int64_t arena = step.getArenaBytes().value_or(0), hostPool = step.getHostBytes().value_or(0);
    for (Buffer &b : model->buffers) {
      Operation *owner = b.owner ? b.owner : step.getOperation();
      const char *pool = b.host ? "host pool" : "arena";
      b.offset = recordedOffset(b, step).value_or(-1);
      if (b.offset < 0)
        return owner->emitOpError() << "has a buffer without an offset in the " << pool;
      if (b.offset + b.bytes > (b.host ? hostPool : arena))
        return owner->emitOpError()
               << "has a buffer of " << b.bytes << " bytes at offset " << b.offset << ", past the "
               << pool << "'s " << (b.host ? hostPool : arena) << " bytes";
    }
    // Each pool on its own (the arena, the host pool).
    for (bool host : {false, true})
      if (failed(checkOverlaps(*model, step, host)))
        return failure();
    return success();
  }

  // Sweep in time keeping the live buffers ordered by address: as long as
  // they are disjoint, a new buffer can only collide with its neighbours.
  LogicalResult checkOverlaps(BufferModel &model, plan::StepOp step, bool host) {
    std::vector<Buffer *> order;
    for (Buffer &b : model.buffers)
      if (b.bytes > 0 && b.host == host)
        order.push_back(&b);
    llvm::stable_sort(order, [](Buffer *a, Buffer *b) { return a->start < b->start; });
    std::map<int64_t, Buffer *> live; // offset -> buffer
    using Ending = std::pair<int64_t, Buffer *>;
    std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> ends;
    for (Buffer *b : order) {
      while (!ends.empty() && ends.top().first < b->start) {
        live.erase(ends.top().second->offset);
        ends.pop();
      }
      Buffer *clash = nullptr;
      auto next = live.lower_bound(b->offset);
      if (next != live.end() && next->first < b->offset + b->bytes)
        clash = next->second;
      if (!clash && next != live.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second->bytes > b->offset)
          clash = prev->second;
      }
      if (clash) {
        Operation *owner = b->owner ? b->owner : step.getOperation();
        auto diag = owner->emitOpError()
                    << "has a buffer [" << b->offset << ", " << b->offset + b->bytes
                    << ") that overlaps a buffer [" << clash->offset << ", "
                    << clash->offset + clash->bytes << ") live at the same time";
        if (clash->owner)
          diag.attachNote(clash->owner->getLoc()) << "the other buffer's owner";
        return diag;
      }
      live[b->offset] = b;
      ends.push({b->end, b});
    }
    return success();
  }
};

} // namespace
