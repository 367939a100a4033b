//===- VerifyPlan.cpp - a plan is safe, or rejected at the op -------------===//
//
// Simulates the step in program order, per rank where ops are rank-specific,
// tracking each unit's gathered parameters and unsharded gradients.
//
//===----------------------------------------------------------------------===//
#include "planner/Buffers.h"
#include "planner/Passes.h"

#include <map>
#include <queue>
#include <set>

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
  Value reduceEvent, allReduceEvent;
  int64_t reductions = 0, allReductions = 0, optimizerSteps = 0;
  bool hasGrads = false;
};

bool appliesTo(Operation *op, int64_t rank) {
  auto ranks = op->getAttrOfType<DenseI32ArrayAttr>("ranks");
  return !ranks || llvm::is_contained(ranks.asArrayRef(), (int32_t)rank);
}

std::string describe(Operation *op) {
  std::string s = op->getName().getStringRef().str();
  if (auto unit = op->getAttrOfType<FlatSymbolRefAttr>("unit"))
    s += " @" + unit.getValue().str();
  return s;
}

struct VerifyPlanPass : public fsdp::impl::VerifyPlanBase<VerifyPlanPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    plan::StepOp step = getStep(module);
    if (!step) {
      module.emitError() << "no training step to verify";
      return signalPassFailure();
    }
    if (failed(checkStepAttributes(module, step)))
      return signalPassFailure();
    int64_t world = stepInt(step, "world_size", 1);
    int64_t group = stepInt(step, "shard_size", 1);
    bool rankSpecific = false;
    step.walk([&](Operation *op) { rankSpecific |= op->hasAttr("ranks"); });
    // The ranks to simulate: rank 0, each rank that an op's `ranks` names,
    // and the least rank that none names, which stands for all of those (they
    // run the same ops): not every rank of the world, which may be 2^62.
    std::vector<int64_t> ranks = {0};
    if (rankSpecific) {
      std::set<int64_t> named;
      step.walk([&](Operation *op) {
        if (auto r = op->getAttrOfType<DenseI32ArrayAttr>("ranks"))
          for (int32_t x : r.asArrayRef())
            if (x > 0 && x < world)
              named.insert(x);
      });
      for (int64_t r = 1; r < world; ++r)
        if (!named.count(r)) {
          named.insert(r);
          break;
        }
      ranks.insert(ranks.end(), named.begin(), named.end());
    }

    if (failed(checkCollectiveOrder(step, ranks)))
      return signalPassFailure();
    for (int64_t r : ranks)
      if (failed(checkRank(module, step, r, world / std::max<int64_t>(group, 1), rankSpecific)))
        return signalPassFailure();
    if (step->hasAttr("arena_bytes") && failed(checkMemory(module, step)))
      return signalPassFailure();
  }

  // The step's figures, as the passes set them and the runtime reads them:
  // ranks in whole shard groups, each unit sharded over one group, a batch
  // and a sequence of at least one token, parameters gathered and gradients
  // reduced in f32 or bf16. A hand-edited plan may say anything else.
  LogicalResult checkStepAttributes(ModuleOp module, plan::StepOp step) {
    auto integer = [&](StringRef name, int64_t least) -> FailureOr<int64_t> {
      Attribute a = step->getAttr(name);
      if (!a)
        return least;
      auto i = dyn_cast<IntegerAttr>(a);
      if (!i || !i.getType().isInteger(64))
        return step.emitOpError() << name << " must be an i64, but is " << a;
      if (i.getInt() < least)
        return step.emitOpError() << name << " must be at least " << least << ", but is "
                                  << i.getInt();
      return i.getInt();
    };
    FailureOr<int64_t> world = integer("world_size", 1), group = integer("shard_size", 1);
    if (failed(world) || failed(group) || failed(integer("micro_batch", 1)) ||
        failed(integer("seq_len", 1)) || failed(integer("arena_bytes", 0)))
      return failure();
    if (*world % *group != 0)
      return step.emitOpError() << "shard_size " << *group << " must divide world_size "
                                << *world;
    for (const char *name : {"param_dtype", "reduce_dtype"})
      if (Attribute a = step->getAttr(name)) {
        auto str = dyn_cast<StringAttr>(a);
        if (!str || (str.getValue() != "f32" && str.getValue() != "bf16"))
          return step.emitOpError() << name << " must be \"f32\" or \"bf16\", but is " << a;
      }
    if (step->hasAttr("shard_size"))
      for (plan::UnitOp u : getUnits(module))
        if (u.getShardCountAttr().getInt() != *group)
          return u.emitOpError() << "is sharded over " << u.getShardCountAttr().getInt()
                                 << " ranks, but the step's shard groups are of " << *group;
    return success();
  }

  // Every rank must issue the same collectives in the same order, or the
  // ranks wait on each other forever.
  LogicalResult checkCollectiveOrder(plan::StepOp step, ArrayRef<int64_t> ranks) {
    auto sequence = [&](int64_t rank) {
      std::vector<Operation *> seq;
      for (Operation &op : step.getBody().front())
        if (isa<plan::AllGatherOp, plan::ReduceScatterOp, plan::AllReduceOp,
                plan::GradNormOp>(op) &&
            appliesTo(&op, rank))
          seq.push_back(&op);
      return seq;
    };
    auto same = [](Operation *a, Operation *b) {
      return a->getName() == b->getName() && a->getAttr("unit") == b->getAttr("unit");
    };
    std::vector<Operation *> ref = sequence(0);
    for (int64_t r : ranks.drop_front()) {
      std::vector<Operation *> seq = sequence(r);
      size_t n = std::min(ref.size(), seq.size());
      for (size_t i = 0; i <= n; ++i) {
        if (i == n) {
          if (ref.size() == seq.size())
            break;
          Operation *extra = ref.size() > seq.size() ? ref[i] : seq[i];
          int64_t who = ref.size() > seq.size() ? 0 : r;
          return extra->emitOpError()
                 << "is collective #" << i << " of rank " << who << ", but rank "
                 << (who == 0 ? r : 0) << " issues only " << n
                 << " collectives: the ranks would deadlock";
        }
        if (!same(ref[i], seq[i])) {
          auto diag = seq[i]->emitOpError()
                      << "is collective #" << i << " of rank " << r << ", but rank 0 issues "
                      << describe(ref[i]) << " there: the ranks would deadlock";
          diag.attachNote(ref[i]->getLoc()) << "rank 0's collective #" << i;
          return diag;
        }
      }
    }
    return success();
  }

  LogicalResult checkRank(ModuleOp module, plan::StepOp step, int64_t rank, int64_t replicas,
                          bool rankSpecific) {
    auto byParam = unitsByParam(module);
    DenseMap<Operation *, UnitState> state;
    DenseSet<Value> waited;
    auto byName = unitsByName(module);
    auto unitOf = [&](Operation *op) { return unitOfOp(op, byName); };
    std::string on = rankSpecific ? " on rank " + std::to_string(rank) : "";
    Value normEvent;

    for (Operation &op : step.getBody().front()) {
      if (!appliesTo(&op, rank))
        continue;
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
              plan::FreeOp, plan::OptimizerStepOp>(op) &&
          op.hasAttr("unit") && !unitOf(&op))
        return op.emitOpError() << "names an unknown unit " << op.getAttr("unit");

      if (auto g = dyn_cast<plan::AllGatherOp>(op)) {
        UnitState &s = state[unitOf(g)];
        if (s.gathered)
          return g.emitOpError() << "gathers unit @" << g.getUnit()
                                 << " again while it is still gathered" << on;
        s.gather = g;
        s.gathered = true;
        s.gatherWaited = false;
        continue;
      }
      if (auto f = dyn_cast<plan::FreeOp>(op)) {
        UnitState &s = state[unitOf(f)];
        if (f.getKind() == plan::BufferKind::params) {
          if (!s.gathered)
            return f.emitOpError() << "frees the parameters of unit @" << f.getUnit()
                                   << ", which are not gathered" << on;
          s.gathered = false;
          s.freedAt = f;
          continue;
        }
        if (!s.alloc)
          return f.emitOpError() << "frees the gradients of unit @" << f.getUnit()
                                 << ", which are not allocated" << on;
        if (!s.reduced)
          return f.emitOpError() << "frees the gradients of unit @" << f.getUnit()
                                 << " without reducing them: they would be lost" << on;
        if (!waited.contains(s.reduceEvent) ||
            (s.allReduceEvent && !waited.contains(s.allReduceEvent)))
          return f.emitOpError() << "frees the gradients of unit @" << f.getUnit()
                                 << " before their reduction has completed" << on;
        s.alloc = {};
        continue;
      }
      if (auto a = dyn_cast<plan::AllocOp>(op)) {
        UnitState &s = state[unitOf(a)];
        if (s.alloc)
          return a.emitOpError() << "allocates the gradients of unit @" << a.getUnit()
                                 << " while they are still allocated" << on;
        s.alloc = a;
        s.reduced = false;
        s.reduceEvent = s.allReduceEvent = Value();
        continue;
      }
      if (auto g = dyn_cast<plan::GradOp>(op)) {
        auto it = byParam.find(g.getParam());
        if (it == byParam.end())
          return g.emitOpError() << "names parameter '" << g.getParam()
                                 << "', which is in no unit";
        UnitState &s = state[it->second];
        s.hasGrads = true;
        if (!s.alloc)
          return g.emitOpError() << "completes the gradient of '" << g.getParam()
                                 << "', but unit @" << it->second.getSymName()
                                 << " has no gradient buffer here" << on;
        if (s.reduced)
          return g.emitOpError() << "completes the gradient of '" << g.getParam()
                                 << "' after unit @" << it->second.getSymName()
                                 << " was reduced: it would be lost" << on;
        Operation *def = g.getGrad().getDefiningOp();
        if (def && def->isBeforeInBlock(s.alloc))
          return def->emitOpError() << "writes the gradient of '" << g.getParam()
                                    << "' before unit @" << it->second.getSymName()
                                    << "'s gradient buffer is allocated" << on;
        continue;
      }
      if (auto rs = dyn_cast<plan::ReduceScatterOp>(op)) {
        UnitState &s = state[unitOf(rs)];
        if (!s.alloc)
          return rs.emitOpError() << "reduces unit @" << rs.getUnit()
                                  << ", which has no gradient buffer here" << on;
        if (s.reduced)
          return rs.emitOpError() << "reduces unit @" << rs.getUnit()
                                  << "'s gradients a second time" << on;
        s.reduced = true;
        s.reduceEvent = rs.getEvent();
        ++s.reductions;
        continue;
      }
      if (auto ar = dyn_cast<plan::AllReduceOp>(op)) {
        UnitState &s = state[unitOf(ar)];
        if (!s.reduced)
          return ar.emitOpError() << "all-reduces unit @" << ar.getUnit()
                                  << " before its reduce_scatter" << on;
        s.allReduceEvent = ar.getEvent();
        ++s.allReductions;
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
                                 << " before the global gradient norm is known" << on;
        if (s.hasGrads && s.reductions == 0)
          return o.emitOpError() << "updates unit @" << u.getSymName()
                                 << ", whose gradients were never reduced" << on;
        if (s.hasGrads && (!waited.contains(s.reduceEvent) ||
                           (s.allReduceEvent && !waited.contains(s.allReduceEvent))))
          return o.emitOpError() << "updates unit @" << u.getSymName()
                                 << " before its gradient reduction has completed" << on;
        ++s.optimizerSteps;
        continue;
      }
      // A compute op: its parameters must be gathered and waited for.
      for (Value v : op.getOperands()) {
        plan::UnitOp u = unitOfValue(v, byParam);
        if (!u || u.getShardCountAttr().getInt() == 1)
          continue;
        UnitState &s = state[u];
        StringRef name = v.getDefiningOp<nn::ParamOp>().getName();
        if (!s.gathered) {
          auto diag = op.emitOpError() << "uses parameter '" << name << "' of unit @"
                                       << u.getSymName() << ", which is not gathered here"
                                       << on;
          if (s.freedAt)
            diag.attachNote(s.freedAt->getLoc()) << "freed here";
          return diag;
        }
        if (!s.gatherWaited) {
          auto diag = op.emitOpError() << "uses parameter '" << name << "' of unit @"
                                       << u.getSymName()
                                       << " before waiting for its all_gather" << on;
          diag.attachNote(s.gather.getLoc()) << "gathered here";
          return diag;
        }
      }
    }

    for (plan::UnitOp u : getUnits(module)) {
      UnitState &s = state[u];
      if (s.gathered)
        return s.gather.emitOpError() << "gathers unit @" << u.getSymName()
                                      << ", which is never freed" << on;
      if (s.alloc)
        return s.alloc.emitOpError() << "allocates the gradients of unit @" << u.getSymName()
                                     << ", which are never freed" << on;
      if (s.hasGrads && s.reductions == 0)
        return u.emitOpError() << "has gradients that are never reduced" << on;
      if (s.hasGrads && replicas > 1 && s.allReductions != 1)
        return u.emitOpError() << "has gradients all-reduced " << s.allReductions
                               << " times across replica groups; expected once" << on;
      if (s.optimizerSteps != 1)
        return u.emitOpError() << "is updated by " << s.optimizerSteps
                               << " optimizer steps; expected one" << on;
    }
    return success();
  }

  // No two buffers live at the same time may share a byte.
  LogicalResult checkMemory(ModuleOp module, plan::StepOp step) {
    auto model = collectBuffers(module, stepInt(step, "micro_batch", 1),
                                stepInt(step, "seq_len", 1));
    if (failed(model))
      return failure();
    int64_t arena = stepInt(step, "arena_bytes", 0);
    for (Buffer &b : model->buffers) {
      Operation *owner = b.owner ? b.owner : step.getOperation();
      auto get = [&](StringRef name) {
        auto a = owner->getAttrOfType<IntegerAttr>(name);
        return a ? a.getInt() : -1;
      };
      switch (b.role) {
      case BufferRole::UnitShard: b.offset = get("shard_offset"); break;
      case BufferRole::UnitGradShard: b.offset = get("grad_shard_offset"); break;
      case BufferRole::UnitExpAvg: b.offset = get("exp_avg_offset"); break;
      case BufferRole::UnitExpAvgSq: b.offset = get("exp_avg_sq_offset"); break;
      case BufferRole::Gathered:
      case BufferRole::GradsFull: b.offset = get("offset"); break;
      case BufferRole::Input: b.offset = get(b.index == 0 ? "tokens_offset" : "targets_offset"); break;
      case BufferRole::Scratch: b.offset = get("scratch_offset"); break;
      case BufferRole::Value: {
        auto offs = owner->getAttrOfType<DenseI64ArrayAttr>("offsets");
        b.offset = offs && b.index < (int64_t)offs.size() ? offs[b.index] : -1;
        break;
      }
      }
      if (b.offset < 0)
        return owner->emitOpError() << "has a buffer without an arena offset";
      if (b.offset + b.bytes > arena)
        return owner->emitOpError() << "has a buffer of " << b.bytes << " bytes at offset "
                                    << b.offset << ", past the arena's " << arena << " bytes";
    }
    // Sweep in time keeping the live buffers ordered by address: as long as
    // they are disjoint, a new buffer can only collide with its neighbours.
    std::vector<Buffer *> order;
    for (Buffer &b : model->buffers)
      if (b.bytes > 0)
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
