//===- NNGradients.cpp - each forward op's reverse-mode rule --------------===//
//
// Gradient ops inherit the forward op's module path, so the backward of
// `transformer.h.3.attn.c_attn` is attributed to that module too.
//
//===----------------------------------------------------------------------===//
#include "dialect/NN/NNDialect.h"

using namespace mlir;
using namespace fsdp::nn;

static StringAttr moduleOf(Operation *op) { return op->getAttrOfType<StringAttr>("module"); }

LogicalResult PositionIdsOp::buildGradients(OpBuilder &, ArrayRef<Value>,
                                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value()); // positions are integers
  return success();
}

LogicalResult TokenTypeIdsOp::buildGradients(OpBuilder &, ArrayRef<Value>,
                                             SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value()); // token types are integers
  return success();
}

LogicalResult EmbeddingOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  Value table = b.create<EmbeddingGradOp>(getLoc(), getTable().getType(), resultGrads[0], getIds(),
                                          moduleOf(*this));
  operandGrads.append({Value(), table});
  return success();
}

LogicalResult LinearOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  auto mod = moduleOf(*this);
  // The graph's own input (ViT's patches) takes no gradient.
  Value dx = isa<BlockArgument>(getInput())
                 ? Value()
                 : b.create<LinearGradInputOp>(getLoc(), getInput().getType(), getLayout(), dy,
                                               getWeight(), mod);
  Value dw = b.create<LinearGradWeightOp>(getLoc(), getWeight().getType(), getLayout(), dy,
                                          getInput(), mod);
  operandGrads.append({dx, dw});
  if (getBias())
    operandGrads.push_back(b.create<BiasGradOp>(getLoc(), getBias().getType(), dy, mod));
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<LayerNormGradOp>(
      getLoc(), TypeRange{getInput().getType(), getWeight().getType(), getBias().getType()},
      resultGrads[0], getInput(), getWeight(), getEpsAttr(), moduleOf(*this));
  operandGrads.append({g.getInputGrad(), g.getWeightGrad(), g.getBiasGrad()});
  return success();
}

LogicalResult RMSNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<RMSNormGradOp>(getLoc(), TypeRange{getInput().getType(), getWeight().getType()},
                                   resultGrads[0], getInput(), getWeight(), getEpsAttr(),
                                   moduleOf(*this));
  operandGrads.append({g.getInputGrad(), g.getWeightGrad()});
  return success();
}

LogicalResult RopeOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // A rotation (times yarn's attention factor): its gradient is the
  // transpose, the same op rotating back.
  auto inv = b.create<RopeOp>(getLoc(), getInput().getType(), resultGrads[0], getNumHeadsAttr(),
                              getThetaAttr(), getScalingAttr(), getScalingFactorAttr(),
                              getOriginalMaxPositionAttr(), getLowFreqFactorAttr(),
                              getHighFreqFactorAttr(), getBetaFastAttr(), getBetaSlowAttr(),
                              getTruncateAttr(), getAttentionFactorAttr(),
                              getInverse() ? UnitAttr() : b.getUnitAttr(), moduleOf(*this));
  operandGrads.push_back(inv);
  return success();
}

LogicalResult SplitOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  for (auto [i, g] : llvm::enumerate(resultGrads))
    if (!g)
      return emitOpError() << "part " << i
                           << " does not reach the loss; its gradient would be zeros, "
                              "which the training step does not build";
  operandGrads.push_back(
      b.create<ConcatOp>(getLoc(), getInput().getType(), resultGrads, moduleOf(*this)));
  return success();
}

LogicalResult CausalAttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                                SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<CausalAttentionGradOp>(
      getLoc(), TypeRange{getQuery().getType(), getKey().getType(), getValue().getType()},
      resultGrads[0], getQuery(), getKey(), getValue(), getResult(), getNumHeadsAttr(),
      getNumKvHeadsAttr(), getWindowAttr(), moduleOf(*this));
  operandGrads.append({g.getQueryGrad(), g.getKeyGrad(), g.getValueGrad()});
  return success();
}

LogicalResult AttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<AttentionGradOp>(
      getLoc(), TypeRange{getQuery().getType(), getKey().getType(), getValue().getType()},
      resultGrads[0], getQuery(), getKey(), getValue(), getResult(), getNumHeadsAttr(),
      getNumKvHeadsAttr(), moduleOf(*this));
  operandGrads.append({g.getQueryGrad(), g.getKeyGrad(), g.getValueGrad()});
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // The gradient's form is the forward's: the attribute as written (absent: tanh).
  operandGrads.push_back(b.create<GeluGradOp>(getLoc(), getInput().getType(), resultGrads[0],
                                              getInput(), moduleOf(*this), getApproximateAttr()));
  return success();
}

LogicalResult SiluMulOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<SiluMulGradOp>(getLoc(), TypeRange{getGate().getType(), getUp().getType()},
                                   resultGrads[0], getGate(), getUp(), moduleOf(*this));
  operandGrads.append({g.getGateGrad(), g.getUpGrad()});
  return success();
}

LogicalResult AddOp::buildGradients(OpBuilder &, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.append({resultGrads[0], resultGrads[0]});
  return success();
}

LogicalResult ClassTokenOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<ClassTokenGradOp>(
      getLoc(), TypeRange{getInput().getType(), getCls().getType(), getPositions().getType()},
      resultGrads[0], moduleOf(*this));
  operandGrads.append({g.getInputGrad(), g.getClsGrad(), g.getPositionsGrad()});
  return success();
}

LogicalResult FirstTokenOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      b.create<FirstTokenGradOp>(getLoc(), getInput().getType(), resultGrads[0], moduleOf(*this)));
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value>,
                                             SmallVectorImpl<Value> &operandGrads) {
  // The loss is the seed: its own gradient is the run-time loss scale.
  Value d = b.create<CrossEntropyGradOp>(getLoc(), getLogits().getType(), getLogits(), getTargets(),
                                         moduleOf(*this));
  operandGrads.append({d, Value()});
  return success();
}

LogicalResult MoeRouteOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  // Only the weights carry a gradient; the choices are integers.
  Value dlogits =
      resultGrads[0]
          ? b.create<MoeRouteGradOp>(getLoc(), getLogits().getType(), resultGrads[0], getLogits(),
                                     getExperts(), getNormTopkProbAttr(), moduleOf(*this))
          : Value();
  operandGrads.push_back(dlogits);
  return success();
}

LogicalResult MoePermuteOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &operandGrads) {
  operandGrads.append({b.create<MoePermuteGradOp>(getLoc(), getInput().getType(), resultGrads[0],
                                                  getSlots(), moduleOf(*this)),
                       Value()});
  return success();
}

LogicalResult MoeLinearOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  auto mod = moduleOf(*this);
  operandGrads.push_back(b.create<MoeLinearGradInputOp>(getLoc(), getInput().getType(), dy,
                                                        getExperts(), getWeights(), mod));
  operandGrads.push_back(Value());
  auto dw = b.create<MoeLinearGradWeightOp>(getLoc(), getWeights().getTypes(), dy, getInput(),
                                            getExperts(), mod);
  for (Value g : dw.getResults())
    operandGrads.push_back(g);
  return success();
}

LogicalResult MoeCombineOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                           SmallVectorImpl<Value> &operandGrads) {
  auto g = b.create<MoeCombineGradOp>(
      getLoc(), TypeRange{getInput().getType(), getWeights().getType()}, resultGrads[0], getInput(),
      getWeights(), getSlots(), moduleOf(*this));
  operandGrads.append({g.getInputGrad(), g.getWeightsGrad(), Value()});
  return success();
}

LogicalResult MoeAuxLossOp::buildGradients(OpBuilder &b, ArrayRef<Value>,
                                           SmallVectorImpl<Value> &operandGrads) {
  // The loss operand's gradient is seeded by the runtime (cross_entropy_grad's
  // loss_scale), as the auxiliary loss's own is (moe_aux_loss_grad's).
  operandGrads.push_back(Value());
  auto g = b.create<MoeAuxLossGradOp>(getLoc(), getLogits().getTypes(), getLogits(), getTopKAttr(),
                                      getCoefAttr(), moduleOf(*this));
  for (Value d : g.getResults())
    operandGrads.push_back(d);
  return success();
}
