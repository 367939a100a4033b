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

  void recompute(ArrayRef<Operation *> block, Operation *bwdStart) {
    llvm::SmallPtrSet<Operation *, 32> inBlock(block.begin(), block.end());
    // Values to recompute: made in the block, read in backward, and not read
    // in forward outside the block (those stay alive anyway).
    llvm::SetVector<Value> needed;
    for (Operation *op : block)
      for (Value r : op->getResults()) {
        bool leaves = false, usedInBackward = false;
        for (Operation *user : r.getUsers()) {
          if (inBackward(user, bwdStart))
            usedInBackward = true;
          else if (!inBlock.count(user))
            leaves = true;
        }
        if (usedInBackward && !leaves)
          needed.insert(r);
      }
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
      for (Value operand : def->getOperands()) {
        Operation *d = operand.getDefiningOp();
        bool kept = !d || !inBlock.count(d);
        if (!kept) {
          // A block value that leaves the block is alive: read it, do not recompute.
          for (Operation *user : operand.getUsers())
            if (!inBackward(user, bwdStart) && !inBlock.count(user))
              kept = true;
        }
        if (!kept)
          work.push_back(operand);
      }
    }
    // Before the first gradient op that reads one of them.
    Operation *first = nullptr;
    for (Value v : needed)
      for (Operation *user : v.getUsers())
        if (inBackward(user, bwdStart) && (!first || user->isBeforeInBlock(first)))
          first = user;
    OpBuilder b(first);
    IRMapping map;
    for (Operation *op : block) {
      if (!cloneSet.count(op))
        continue;
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
