//===- MixedPrecision.cpp - bf16 parameters and compute, f32 master state -===//
#include "planner/Passes.h"
#include "planner/PlanUtils.h"

namespace fsdp {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

/// `t` with an f32 element type made bf16; any other type as it is.
Type toBf16(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || !rt.getElementType().isF32())
    return t;
  return RankedTensorType::get(rt.getShape(), BFloat16Type::get(t.getContext()), rt.getEncoding());
}

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
    step.setComputeDtype(computeDtype);
    if (reduceDtype == plan::Dtype::BF16)
      step.walk([&](plan::ReduceScatterOp rs) { rs.setDtype(plan::Dtype::BF16); });
    if (paramDtype == plan::Dtype::BF16)
      step.walk([&](plan::AllGatherOp g) { g.setDtype(plan::Dtype::BF16); });
    bool bf16 = computeDtype == plan::Dtype::BF16;
    if (paramDtype != plan::Dtype::BF16 && !bf16)
      return;

    SmallVector<Operation *> users;
    for (Operation &op : step.getBody().front())
      if ((op.getDialect() && op.getDialect()->getNamespace() == "nn" && !isa<nn::ParamOp>(op)) ||
          isa<plan::TpAllReduceOp, plan::TpAllGatherOp, plan::TpReduceScatterOp, plan::TpChunkOp,
              plan::TpUnchunkOp>(op))
        users.push_back(&op);
    // bf16 compute: every value an nn op makes is bf16 but the loss, which
    // the loss op computes in f32 from bf16 logits; the step's float inputs
    // (ViT's patches) arrive in bf16 too.
    if (bf16) {
      Block &body = step.getBody().front();
      for (BlockArgument a : body.getArguments())
        a.setType(toBf16(a.getType()));
      step.setFunctionType(FunctionType::get(step.getContext(), body.getArgumentTypes(),
                                             step.getFunctionType().getResults()));
      for (Operation *op : users)
        if (!nn::isLossOp(op))
          for (OpResult r : op->getResults())
            r.setType(toBf16(r.getType()));
    }
    // Every compute use of a parameter reads it through a cast, right
    // before the op: the bf16 value in the compute dtype.
    auto byParam = unitsByParam(module);
    for (Operation *op : users) {
      OpBuilder b(op);
      DenseMap<Value, Value> casts;
      for (OpOperand &use : op->getOpOperands()) {
        if (!unitOfValue(use.get(), byParam))
          continue;
        Value &c = casts[use.get()];
        if (!c) {
          Type t = bf16 ? toBf16(use.get().getType()) : use.get().getType();
          c = b.create<plan::CastOp>(op->getLoc(), t, use.get());
        }
        use.set(c);
      }
    }
  }
};

} // namespace
