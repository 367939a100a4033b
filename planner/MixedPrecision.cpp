//===- MixedPrecision.cpp - bf16 parameters, f32 master state -------------===//
#include "planner/Passes.h"
#include "planner/PlanUtils.h"

namespace fsdp {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct MixedPrecisionPass : public fsdp::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    plan::StepOp step = getStep(module);
    if (!step || module.getOps<plan::UnitOp>().empty()) {
      module.emitError() << "fsdp-mixed-precision runs after fsdp-insert-collectives";
      return signalPassFailure();
    }
    step.setParamDtype(paramDtype);
    step.setReduceDtype(reduceDtype);
    if (reduceDtype == plan::Dtype::BF16)
      step.walk([&](plan::ReduceScatterOp rs) { rs.setDtype(plan::Dtype::BF16); });
    if (paramDtype != plan::Dtype::BF16)
      return;
    step.walk([&](plan::AllGatherOp g) { g.setDtype(plan::Dtype::BF16); });
    // Every compute use of a parameter reads its bf16 value, widened.
    auto byParam = unitsByParam(module);
    SmallVector<Operation *> users;
    for (Operation &op : step.getBody().front())
      if (op.getDialect() && op.getDialect()->getNamespace() == "nn" && !isa<nn::ParamOp>(op))
        users.push_back(&op);
    for (Operation *op : users) {
      OpBuilder b(op);
      DenseMap<Value, Value> upcast;
      for (OpOperand &use : op->getOpOperands()) {
        if (!unitOfValue(use.get(), byParam))
          continue;
        Value &u = upcast[use.get()];
        if (!u)
          u = b.create<plan::UpcastOp>(op->getLoc(), use.get().getType(), use.get());
        use.set(u);
      }
    }
  }
};

} // namespace
