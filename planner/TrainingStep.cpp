//===- TrainingStep.cpp - forward, backward and optimizer as one step -----===//
#include "planner/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace fsdp {
#define GEN_PASS_DEF_TRAININGSTEP
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct TrainingStepPass : public fsdp::impl::TrainingStepBase<TrainingStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto graphs = llvm::to_vector(module.getOps<nn::GraphOp>());
    if (graphs.size() != 1) {
      module.emitError() << "expected one nn.graph, found " << graphs.size();
      return signalPassFailure();
    }
    if (failed(build(graphs[0])))
      return signalPassFailure();
  }

  LogicalResult build(nn::GraphOp graph) {
    OpBuilder b(graph);
    auto step = b.create<plan::StepOp>(graph.getLoc(), "train_step", graph.getFunctionType());
    // The model's description travels with the step.
    step.setModel(graph.getSymName());
    step.setModelTypeAttr(graph.getModelTypeAttr());
    step.setBlockPrefixAttr(graph.getBlockPrefixAttr());
    step.setNumBlocksAttr(graph.getNumBlocksAttr());
    step.setMaxSeqLenAttr(graph.getMaxSeqLenAttr());
    step.setInputsKindAttr(graph.getInputsKindAttr());
    step.setImageAttr(graph.getImageAttr());
    step.setHfConfigAttr(graph.getHfConfigAttr());
    step.setGenerationConfigAttr(graph.getGenerationConfigAttr());
    Block &src = graph.getBody().front();
    Block *body = b.createBlock(&step.getBody(), {}, src.getArgumentTypes(),
                                SmallVector<Location>(src.getNumArguments(), graph.getLoc()));
    IRMapping map;
    map.map(src.getArguments(), body->getArguments());

    // Forward: the graph's ops as they are.
    std::vector<Operation *> forward;
    Value loss;
    b.setInsertionPointToEnd(body);
    for (Operation &op : src) {
      if (auto ret = dyn_cast<nn::ReturnOp>(op)) {
        loss = map.lookup(ret.getOperand(0));
        continue;
      }
      forward.push_back(b.clone(op, map));
    }
    auto ce = nn::lossCrossEntropy(loss);
    if (!ce)
      return graph.emitOpError()
             << "must return the result of nn.cross_entropy (or of nn.moe_aux_loss over it)";
    Operation *lossOp = loss.getDefiningOp();

    // Backward: last op first. A parameter's gradient is complete once every
    // op that uses it has been differentiated.
    DenseMap<Value, Value> grads;
    DenseMap<Value, int64_t> pendingUses;
    for (Operation *op : forward)
      if (auto p = dyn_cast<nn::ParamOp>(op))
        pendingUses[p.getResult()] = llvm::range_size(p.getResult().getUses());

    auto emitGradIfComplete = [&](Value param) {
      if (--pendingUses[param] != 0)
        return;
      if (Value g = grads.lookup(param))
        b.create<plan::GradOp>(g.getLoc(), g, param.getDefiningOp<nn::ParamOp>().getNameAttr());
    };

    for (Operation *op : llvm::reverse(forward)) {
      if (isa<nn::ParamOp>(op))
        continue;
      auto iface = dyn_cast<nn::GradientOpInterface>(op);
      if (!iface)
        return op->emitOpError() << "has no gradient rule";
      SmallVector<Value> resultGrads;
      // The loss's ops are seeded by the runtime's loss scale.
      bool reaches = op == lossOp || op == ce.getOperation();
      for (Value r : op->getResults()) {
        resultGrads.push_back(grads.lookup(r));
        reaches |= (bool)resultGrads.back();
      }
      if (reaches) {
        size_t before = countOps(body);
        SmallVector<Value> operandGrads;
        if (failed(iface.buildGradients(b, resultGrads, operandGrads)))
          return failure();
        numGradOps += countOps(body) - before;
        for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
          if (!g)
            continue;
          Value &acc = grads[operand];
          if (!acc) {
            acc = g;
          } else {
            // A value used twice (a residual, a tied weight) sums its gradients.
            acc = b.create<nn::AddOp>(op->getLoc(), g.getType(), acc, g,
                                      op->getAttrOfType<StringAttr>("module"));
            ++numGradOps;
          }
        }
      }
      for (Value operand : op->getOperands())
        if (operand.getDefiningOp<nn::ParamOp>())
          emitGradIfComplete(operand);
    }
    // Tensor parallelism: a region's entry is the identity forward; its
    // gradient built, the region reads its input in its place.
    for (auto copy : llvm::make_early_inc_range(body->getOps<plan::TpCopyOp>())) {
      copy.getResult().replaceAllUsesWith(copy.getInput());
      copy.erase();
    }
    b.create<plan::OptimizerStepOp>(graph.getLoc(), FlatSymbolRefAttr());
    b.create<plan::ReturnOp>(graph.getLoc(), ValueRange{loss});
    graph.erase();
    return success();
  }

  static size_t countOps(Block *block) { return block->getOperations().size(); }
};

} // namespace
