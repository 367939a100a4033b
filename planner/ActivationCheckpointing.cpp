//===- ActivationCheckpointing.cpp - recompute blocks in backward ---------===//
#include "planner/Passes.h"
#include "planner/PlanUtils.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace fsdp {
#define GEN_PASS_DEF_ACTIVATIONCHECKPOINTING
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct ActivationCheckpointingPass
    : public fsdp::impl::ActivationCheckpointingBase<ActivationCheckpointingPass> {
  using ActivationCheckpointingBase::ActivationCheckpointingBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == plan::Checkpointing::None)
      return;
    plan::StepOp step = getStep(module);
    if (!step || !module.getOps<plan::UnitOp>().empty()) {
      module.emitError() << "fsdp-activation-checkpointing runs on the training step, before "
                            "wrap units (run fsdp-training-step first)";
      return signalPassFailure();
    }
    step.setActivationCheckpointing(mode);
    StringRef prefix = step.getBlockPrefix().value_or("");
    int64_t numBlocks = step.getNumBlocks().value_or(0);
    Operation *bwdStart = backwardStart(step);

    // Forward ops of each block, by their module path.
    std::vector<std::vector<Operation *>> blocks(numBlocks);
    for (Operation *op = &step.getBody().front().front(); op && op != bwdStart;
         op = op->getNextNode()) {
      auto m = op->getAttrOfType<StringAttr>("module");
      if (!m || isa<nn::ParamOp>(op))
        continue;
      StringRef path = m.getValue();
      if (!path.consume_front(prefix) || !path.consume_front("."))
        continue;
      int64_t i;
      if (path.split('.').first.getAsInteger(10, i) || i < 0 || i >= numBlocks)
        continue;
      blocks[i].push_back(op);
    }
    int64_t n = count < 0 ? numBlocks : std::min<int64_t>(count, numBlocks);
    step.setCheckpointedBlocks(n);
    for (int64_t i = 0; i < n; ++i)
      recompute(blocks[i], bwdStart);
  }

  static bool inBackward(Operation *op, Operation *bwdStart) {
    return op == bwdStart || bwdStart->isBeforeInBlock(op);
  }

  /// Under `selective`, the ops whose results stay alive until backward:
  /// the matmuls and attention, the costly part of a block's forward.
  static bool keptBySelective(Operation *op) {
    // A tensor-parallel sum is communication: kept, not run again.
    return isa<nn::LinearOp, nn::CausalAttentionOp, nn::AttentionOp, plan::TpAllReduceOp,
               plan::TpAllGatherOp, plan::TpReduceScatterOp>(op);
  }

  void recompute(ArrayRef<Operation *> block, Operation *bwdStart) {
    bool selective = mode == plan::Checkpointing::Selective;
    llvm::SmallPtrSet<Operation *, 32> inBlock(block.begin(), block.end());
    // A block value that leaves the block is alive anyway: read it, do not
    // recompute it; under `selective`, neither a matmul's or attention's.
    auto kept = [&](Value v) {
      Operation *d = v.getDefiningOp();
      if (!d || !inBlock.count(d) || (selective && keptBySelective(d)))
        return true;
      for (Operation *user : v.getUsers())
        if (!inBackward(user, bwdStart) && !inBlock.count(user))
          return true;
      return false;
    };
    // Values to recompute: made in the block, read in backward, not kept.
    llvm::SetVector<Value> needed;
    for (Operation *op : block)
      for (Value r : op->getResults())
        if (!kept(r) &&
            llvm::any_of(r.getUsers(), [&](Operation *user) { return inBackward(user, bwdStart); }))
          needed.insert(r);
    if (needed.empty())
      return;
    // The ops that compute them, from the block's kept values.
    llvm::SmallPtrSet<Operation *, 32> cloneSet;
    SmallVector<Value> work(needed.begin(), needed.end());
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || !inBlock.count(def) || !cloneSet.insert(def).second)
        continue;
      for (Value operand : def->getOperands())
        if (!kept(operand))
          work.push_back(operand);
    }
    // The gradient op before which each copy goes. `blocks`: all before the
    // first gradient op that reads one of them. `selective`: each before the
    // first gradient op that reads it or a copy that does, so that the
    // copies of an early gradient op (the MLP's) die before those of a later
    // one (the attention's) are made.
    auto firstBackwardUser = [&](Value v, Operation *first) {
      for (Operation *user : v.getUsers())
        if (inBackward(user, bwdStart) && (!first || user->isBeforeInBlock(first)))
          first = user;
      return first;
    };
    llvm::DenseMap<Operation *, Operation *> anchor;
    if (selective) {
      for (Operation *op : llvm::reverse(block)) {
        if (!cloneSet.count(op))
          continue;
        Operation *first = nullptr;
        for (Value r : op->getResults()) {
          if (needed.contains(r))
            first = firstBackwardUser(r, first);
          for (Operation *user : r.getUsers())
            if (cloneSet.count(user) && (!first || anchor[user]->isBeforeInBlock(first)))
              first = anchor[user];
        }
        anchor[op] = first;
      }
    } else {
      Operation *first = nullptr;
      for (Value v : needed)
        first = firstBackwardUser(v, first);
      for (Operation *op : cloneSet)
        anchor[op] = first;
    }
    // Copies in forward order: one made before another at the same anchor
    // stays before it.
    IRMapping map;
    for (Operation *op : block) {
      if (!cloneSet.count(op))
        continue;
      OpBuilder b(anchor[op]);
      Operation *clone = b.clone(*op, map);
      clone->setAttr("recompute", b.getUnitAttr());
      ++numRecomputed;
    }
    for (Value v : needed) {
      Value copy = map.lookup(v);
      v.replaceUsesWithIf(copy, [&](OpOperand &use) {
        return inBackward(use.getOwner(), bwdStart) && !use.getOwner()->hasAttr("recompute");
      });
    }
  }
};

} // namespace
