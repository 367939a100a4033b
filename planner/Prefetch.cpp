//===- Prefetch.cpp - all-gathers issued ahead of use ---------------------===//
//
// Moves only the issue of a gather; its wait stays right before the unit's
// first use. The comm stream runs gathers in issue order, which this pass
// keeps equal to the order of their waits.
//
//===----------------------------------------------------------------------===//
#include "planner/Passes.h"
#include "planner/PlanUtils.h"

#include <deque>

namespace fsdp {
#define GEN_PASS_DEF_PREFETCH
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct Gather {
  plan::AllGatherOp op;
  plan::WaitOp wait;
  Operation *firstUse; // the op right after the wait
};

struct PrefetchPass : public fsdp::impl::PrefetchBase<PrefetchPass> {
  using PrefetchBase::PrefetchBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    plan::StepOp step = getStep(module);
    if (!step) {
      module.emitError() << "fsdp-prefetch needs a training step";
      return signalPassFailure();
    }
    if (forwardPrefetch < 0 || maxInflightGathers < 1) {
      module.emitError() << "forward-prefetch must be >= 0 and max-inflight-gathers >= 1";
      return signalPassFailure();
    }
    Operation *bwdStart = backwardStart(step);
    // Positions, taken once: only gathers move, so the others keep their
    // order, and asking the block after every move would be quadratic.
    int64_t i = 0;
    for (Operation &op : step.getBody().front())
      pos[&op] = 2 * i++;
    std::vector<Gather> fwd, bwd;
    bool inBackward = false;
    for (Operation &op : step.getBody().front()) {
      if (&op == bwdStart)
        inBackward = true;
      auto g = dyn_cast<plan::AllGatherOp>(op);
      if (!g)
        continue;
      plan::WaitOp wait;
      for (Operation *user : g.getEvent().getUsers())
        if (auto w = dyn_cast<plan::WaitOp>(user))
          wait = w;
      if (!wait) {
        g.emitOpError() << "is never waited for";
        return signalPassFailure();
      }
      (inBackward ? bwd : fwd).push_back({g, wait, wait->getNextNode()});
    }
    step.setForwardPrefetch(forwardPrefetch);
    step.setBackwardPrefetch(backwardPrefetch);
    step.setMaxInflightGathers(maxInflightGathers);

    // Forward: unit i's gather is issued when unit i-K starts computing (the
    // first K as soon as the first unit does), keeping the issue order.
    for (size_t i = 1; forwardPrefetch > 0 && i < fwd.size(); ++i)
      moveEarlier(fwd[i].op, fwd[i < (size_t)forwardPrefetch ? 0 : i - forwardPrefetch].firstUse);

    // Backward: relative to the unit that computes just before, which may be
    // one that stayed gathered from forward (the root).
    if (backwardPrefetch != plan::BackwardPrefetch::None) {
      std::vector<Operation *> starts, ends; // per backward unit, in order
      collectBackwardSpans(step, bwdStart, starts, ends);
      for (Gather &g : bwd) {
        // The unit computing before this one: the latest span starting
        // before this gather's first use.
        int prev = -1;
        for (size_t k = 0; k < starts.size(); ++k)
          if (pos[starts[k]] < pos[g.firstUse])
            prev = k;
        if (prev < 0)
          continue;
        if (backwardPrefetch == plan::BackwardPrefetch::Pre) {
          moveEarlier(g.op, starts[prev]);
        } else {
          Operation *after = ends[prev];
          if (auto free = dyn_cast_or_null<plan::FreeOp>(after->getNextNode()))
            after = free;
          if (after->getNextNode())
            moveEarlier(g.op, after->getNextNode());
        }
      }
    }
    limitInflight(step);
  }

  // Moves `g` to just before `at`, if that is earlier than where it is.
  void moveEarlier(plan::AllGatherOp g, Operation *at) {
    if (pos[at] < pos[g]) {
      g->moveBefore(at);
      pos[g] = pos[at] - 1;
    }
  }

  DenseMap<Operation *, int64_t> pos;

  // Spans of backward compute per unit: from the first to the last backward
  // op that reads the unit's parameters.
  void collectBackwardSpans(plan::StepOp step, Operation *bwdStart,
                            std::vector<Operation *> &starts, std::vector<Operation *> &ends) {
    ModuleOp module = step->getParentOfType<ModuleOp>();
    auto byParam = unitsByParam(module);
    llvm::MapVector<Operation *, std::pair<Operation *, Operation *>> spans;
    bool inBackward = false;
    for (Operation &op : step.getBody().front()) {
      if (&op == bwdStart)
        inBackward = true;
      if (!inBackward || isa<nn::ParamOp, plan::GradOp>(op))
        continue;
      for (Value v : op.getOperands())
        if (plan::UnitOp u = unitOfValue(v, byParam)) {
          auto &span = spans[u];
          if (!span.first)
            span.first = &op;
          span.second = &op;
        }
    }
    for (auto &[u, span] : spans) {
      starts.push_back(span.first);
      ends.push_back(span.second);
    }
  }

  // At most `maxInflightGathers` gathers issued and not yet waited for: a
  // gather that would exceed it is issued after the oldest one's wait.
  void limitInflight(plan::StepOp step) {
    std::deque<plan::AllGatherOp> inflight;
    Block &block = step.getBody().front();
    for (Operation *op = &block.front(); op;) {
      Operation *next = op->getNextNode();
      if (auto g = dyn_cast<plan::AllGatherOp>(op)) {
        if ((int64_t)inflight.size() >= maxInflightGathers) {
          plan::WaitOp oldestWait, ownWait;
          for (Operation *user : inflight.front().getEvent().getUsers())
            oldestWait = cast<plan::WaitOp>(user);
          for (Operation *user : g.getEvent().getUsers())
            ownWait = cast<plan::WaitOp>(user);
          if (pos[ownWait] < pos[oldestWait])
            g->moveBefore(ownWait); // cannot wait for a later one
          else
            g->moveAfter(oldestWait);
        } else {
          inflight.push_back(g);
        }
      } else if (auto w = dyn_cast<plan::WaitOp>(op)) {
        auto it = llvm::find_if(inflight,
                                [&](plan::AllGatherOp g) { return g.getEvent() == w.getEvent(); });
        if (it != inflight.end())
          inflight.erase(it);
      }
      op = next;
    }
  }
};

} // namespace
