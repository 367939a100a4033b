//===- ModelGraph.cpp - what an nn.graph to plan holds --------------------===//
//
// The rules every importer's graph meets before the planner sees it, beyond
// what the nn dialect's verifiers allow: forward ops only, the dtypes a
// model holds, activations [batch, sequence, features...], parameters only
// where weights belong, embedding tables as large as their ids.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/Import/ModelOps.h"

using namespace mlir;
using namespace fsdp;

LogicalResult fsdp::verifyModelGraph(nn::GraphOp graph) {
  auto dtypeOk = [&](Type t) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    return tensor && isModelDtype(tensor.getElementType());
  };
  // Activations are [batch, sequence, features...]: one graph serves every
  // micro-batch and sequence length, which the planner sizes them by, so
  // batch is dynamic and the features static (the dialect lets a static size
  // stand where a dynamic one is expected, and the other way round). The
  // sequence is dynamic, or static where the model fixes it: ViT's class
  // token makes P+1 of P patches, and first_token keeps 1.
  auto activationOk = [](Type t) {
    ArrayRef<int64_t> shape = cast<RankedTensorType>(t).getShape();
    return shape.size() >= 2 && ShapedType::isDynamic(shape[0]) &&
           llvm::none_of(shape.drop_front(2), ShapedType::isDynamic);
  };
  auto argumentOk = [](Type t) {
    ArrayRef<int64_t> shape = cast<RankedTensorType>(t).getShape();
    return shape.size() >= 2 && ShapedType::isDynamic(shape[0]) && ShapedType::isDynamic(shape[1]);
  };
  const char *activation = "an activation is [batch, sequence, features...], batch dynamic (?), "
                           "the sequence dynamic or fixed by the model (class_token, first_token) "
                           "and the features static";
  // An activation of a static sequence (parameters are not activations).
  auto fixedSequence = [](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && !v.getDefiningOp<nn::ParamOp>() && t.getRank() >= 2 &&
           !ShapedType::isDynamic(t.getShape()[1]);
  };
  const char *supported = "supported: f32, bf16, f16, f64, i64, i32";
  Block &body = graph.getBody().front();
  int64_t vocab = 0; // the width of the logits of the loss the graph returns
  if (auto ret = dyn_cast<nn::ReturnOp>(body.getTerminator()))
    if (ret.getNumOperands() == 1)
      if (auto loss = nn::lossCrossEntropy(ret.getOperand(0))) {
        ArrayRef<int64_t> logits = cast<RankedTensorType>(loss.getLogits().getType()).getShape();
        if (!logits.empty() && !ShapedType::isDynamic(logits.back()))
          vocab = logits.back();
      }
  // An image classifier's patches and labels have the shapes nn.graph's
  // verifier gives them ([?, P, C*ph*pw] and [?, 1]).
  bool images = graph.getInputsKind() == "images";
  for (BlockArgument arg : body.getArguments()) {
    if (!dtypeOk(arg.getType()))
      return graph.emitOpError() << "argument " << arg.getArgNumber() << " is " << arg.getType()
                                 << ", whose dtype a model does not hold (" << supported << ")";
    if (!images && (!activationOk(arg.getType()) || !argumentOk(arg.getType())))
      return graph.emitOpError() << "argument " << arg.getArgNumber() << " is " << arg.getType()
                                 << ", but the token ids and targets are [?, ?] (batch, sequence)";
  }
  for (Operation &op : body) {
    if (!isa<nn::ParamOp, nn::ReturnOp>(op)) {
      if (op.getName().getDialectNamespace() != "nn" || !isModelOpName(op.getName().stripDialect()))
        return op.emitOpError() << "is not part of a model: an nn.graph to plan holds nn.param, "
                                   "the forward ops ("
                                << modelOpNames()
                                << ") and nn.return; fsdp-plan builds the backward";
      if (op.hasAttr("inverse"))
        return op.emitOpError() << "with 'inverse' rotates back, which is the backward's; a "
                                   "model's forward pass does not hold it";
      // Parameters are weights, and weights are parameters: the planner
      // shards and gathers the one and sizes the rest as activations.
      SmallVector<unsigned, 2> weights;
      if (isa<nn::EmbeddingOp, nn::RMSNormOp>(op))
        weights = {1};
      else if (isa<nn::LinearOp, nn::LayerNormOp, nn::ClassTokenOp>(op))
        weights = {1, 2};
      else if (isa<nn::MoeLinearOp>(op)) // the experts' weights
        for (unsigned i = 2; i < op.getNumOperands(); ++i)
          weights.push_back(i);
      for (OpOperand &use : op.getOpOperands()) {
        bool weight = llvm::is_contained(weights, use.getOperandNumber());
        auto param = use.get().getDefiningOp<nn::ParamOp>();
        if (param && !weight)
          return op.emitOpError() << "operand " << use.getOperandNumber() << " is the parameter '"
                                  << param.getName() << "', but an activation belongs there (a "
                                  << "parameter is an embedding's table, a linear's or an "
                                     "expert's weight or "
                                     "bias, a norm's weight or bias, or a class token and "
                                     "positions)";
        if (!param && weight)
          return op.emitOpError() << "operand " << use.getOperandNumber()
                                  << " is a weight, which must be an nn.param";
      }
      // An embedding's table has a row for every id that can index it: a
      // position below max_seq_len (the longest sequence the planner
      // plans), a token type (0), a token or target id below the
      // vocabulary (the logits' width).
      if (auto e = dyn_cast<nn::EmbeddingOp>(op)) {
        int64_t rows = cast<RankedTensorType>(e.getTable().getType()).getShape()[0];
        int64_t maxSeq = graph.getMaxSeqLenAttr().getInt();
        if (e.getIds().getDefiningOp<nn::PositionIdsOp>() && rows < maxSeq)
          return op.emitOpError() << "indexes a table of " << rows << " rows by positions up to "
                                  << maxSeq - 1 << " (max_seq_len = " << maxSeq << ")";
        if (e.getIds().getDefiningOp<nn::TokenTypeIdsOp>() && rows < 1)
          return op.emitOpError() << "indexes a table of " << rows << " rows by token types (0)";
        if (isa<BlockArgument>(e.getIds()) && vocab > rows)
          return op.emitOpError() << "indexes a table of " << rows << " rows by ids up to "
                                  << vocab - 1 << " (the vocabulary of " << vocab
                                  << ", the logits' width)";
      }
    }
    for (OpResult r : op.getResults()) {
      if (!dtypeOk(r.getType()))
        return op.emitOpError() << "result " << r.getResultNumber() << " is " << r.getType()
                                << ", whose dtype a model does not hold (" << supported << ")";
      if (!isa<nn::ParamOp, nn::CrossEntropyOp, nn::MoeAuxLossOp>(op) && !activationOk(r.getType()))
        return op.emitOpError() << "result " << r.getResultNumber() << " is " << r.getType()
                                << ", but " << activation;
      // A fixed sequence comes from class_token or first_token, or from an
      // operand of one: elsewhere it would differ from the run's.
      if (!isa<nn::ParamOp, nn::CrossEntropyOp, nn::MoeAuxLossOp, nn::ClassTokenOp,
               nn::FirstTokenOp>(op) &&
          !ShapedType::isDynamic(cast<RankedTensorType>(r.getType()).getShape()[1]) &&
          llvm::none_of(op.getOperands(), fixedSequence))
        return op.emitOpError() << "result " << r.getResultNumber() << " is " << r.getType()
                                << ", whose sequence is fixed, but no operand fixes it (a fixed "
                                   "sequence comes from class_token or first_token)";
      // ... and stays fixed: a dynamic sequence is the run's.
      if (!isa<nn::ParamOp, nn::CrossEntropyOp, nn::MoeAuxLossOp, nn::ClassTokenOp>(op) &&
          ShapedType::isDynamic(cast<RankedTensorType>(r.getType()).getShape()[1]) &&
          llvm::any_of(op.getOperands(), fixedSequence))
        return op.emitOpError() << "result " << r.getResultNumber() << " is " << r.getType()
                                << ", whose sequence is dynamic, but an operand's is fixed";
    }
  }
  return success();
}
