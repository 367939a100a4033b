//===- TensorParallel.cpp - one tensor-parallel rank's graph --------------===//
//
// Megatron's tensor parallelism, decided on the model's graph: each
// attention by heads, each MLP by its intermediate columns, a tp_copy in
// front of every region and a tp_all_reduce behind it. The regions are
// found by the graph's structure, not by names, so a JSON or MLIR graph
// with the same ops is split the same way.
//
//===----------------------------------------------------------------------===//
#include "planner/KernelScratch.h"
#include "planner/Passes.h"

namespace fsdp {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "planner/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

/// One region: the column-parallel linears (with how many pieces their
/// outputs are in, and their sections), the ops between whose results
/// shrink, the parameters of those ops, and the row-parallel linears.
struct Region {
  Operation *anchor = nullptr; // the attention or the activation
  struct Column {
    nn::LinearOp linear;
    int64_t pieces = 1, sections = 1;
  };
  SmallVector<Column> columns;
  // results cut along the last dimension into this many pieces
  SmallVector<std::pair<Operation *, int64_t>> inner;
  SmallVector<nn::ParamOp> wholeParams; // used inside, whole, gradient partial
  SmallVector<nn::LinearOp> rows;
};

struct TensorParallelPass : public fsdp::impl::TensorParallelBase<TensorParallelPass> {
  using TensorParallelBase::TensorParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp == 1)
      return;
    if (tp < 1) {
      module.emitError() << "tp must be at least 1, not " << (int64_t)tp;
      return signalPassFailure();
    }
    auto graphs = llvm::to_vector(module.getOps<nn::GraphOp>());
    if (graphs.size() != 1) {
      module.emitError() << "fsdp-tensor-parallel cuts the model's nn.graph (before "
                            "fsdp-training-step); found "
                         << graphs.size();
      return signalPassFailure();
    }
    if (failed(split(graphs[0])))
      return signalPassFailure();
  }

  /// The linear whose result `v` is, looking back through the ops that keep
  /// heads apart (rope, the q/k norms, GPT-2's split), which join `inner`.
  FailureOr<nn::LinearOp> producer(Value v, Region &r, int64_t pieces, int64_t &sections,
                                   Operation *user) {
    Operation *def = v.getDefiningOp();
    while (def) {
      if (auto l = dyn_cast<nn::LinearOp>(def))
        return l;
      if (auto rope = dyn_cast<nn::RopeOp>(def)) {
        r.inner.push_back({rope, pieces});
        def = rope.getInput().getDefiningOp();
        continue;
      }
      if (auto norm = dyn_cast<nn::RMSNormOp>(def)) {
        // Qwen3's q_norm/k_norm: a [head_dim] weight over every head.
        auto w = norm.getWeight().getDefiningOp<nn::ParamOp>();
        if (!w)
          break;
        r.inner.push_back({norm, pieces});
        r.wholeParams.push_back(w);
        def = norm.getInput().getDefiningOp();
        continue;
      }
      if (auto s = dyn_cast<nn::SplitOp>(def)) {
        // GPT-2's fused q, k, v: the linear's output is in sections.
        if (!llvm::any_of(r.inner, [&](auto &e) { return e.first == s.getOperation(); }))
          r.inner.push_back({s, pieces});
        sections = s.getNumResults();
        def = s.getInput().getDefiningOp();
        continue;
      }
      break;
    }
    return user->emitOpError()
           << "reads an operand that is not made by a linear (through rope, a norm or a split), "
              "so it cannot be split by heads for tensor parallelism";
  }

  LogicalResult split(nn::GraphOp graph) {
    Block &body = graph.getBody().front();
    std::vector<Region> regions;
    for (Operation &op : body) {
      if (isa<nn::MoeRouteOp, nn::MoeLinearOp>(op))
        return op.emitOpError() << "is a mixture of experts' op; tensor parallelism of a mixture "
                                   "of experts is not planned (plan it with tp 1)";
      if (isa<nn::CausalAttentionOp, nn::AttentionOp>(op)) {
        FailureOr<Region> r = attentionRegion(&op);
        if (failed(r))
          return failure();
        regions.push_back(*r);
      } else if (isa<nn::SiluMulOp, nn::GeluOp>(op)) {
        std::optional<Region> r = mlpRegion(&op);
        if (r)
          regions.push_back(*r);
      }
    }
    if (regions.empty())
      return graph.emitOpError() << "has no attention and no MLP to split over " << (int64_t)tp
                                 << " tensor-parallel ranks";
    for (Region &r : regions)
      if (failed(rewrite(r)))
        return failure();
    numRegions = regions.size();
    if (sequenceParallel && failed(partTokens(graph)))
      return failure();
    return success();
  }

  RankedTensorType tokenPart(Type t) {
    auto rt = cast<RankedTensorType>(t);
    return RankedTensorType::get(rt.getShape(), rt.getElementType(),
                                 plan::TokenShardAttr::get(rt.getContext(), tp));
  }
  static bool isActivation(Value v) {
    auto rt = dyn_cast<RankedTensorType>(v.getType());
    return rt && rt.getRank() >= 2 && ShapedType::isDynamic(rt.getShape()[0]) &&
           ShapedType::isDynamic(rt.getShape()[1]);
  }

  /// Sequence parallelism: from the first block's first op on, every value
  /// outside the regions is the rank's part of the tokens.
  LogicalResult partTokens(nn::GraphOp graph) {
    Block &body = graph.getBody().front();
    std::string first = (graph.getBlockPrefix() + ".0").str();
    Operation *boundary = nullptr;
    for (Operation &op : body)
      if (auto m = op.getAttrOfType<StringAttr>("module");
          m && (m.getValue() == first || m.getValue().starts_with(first + "."))) {
        boundary = &op;
        break;
      }
    if (!boundary)
      return graph.emitOpError() << "has no op of its first block ('" << first
                                 << "'), where sequence parallelism would begin";
    for (Operation &op : body)
      if (isa<nn::ClassTokenOp, nn::FirstTokenOp>(op))
        return op.emitOpError() << "reads tokens by position, which a rank's part of the tokens "
                                   "(sequence parallelism) does not hold; plan it with "
                                   "--sequence-parallel false";
    // What the stem made whole (and the targets), parted at the boundary.
    OpBuilder b(boundary);
    SmallVector<Value> crossing;
    for (BlockArgument a : body.getArguments())
      crossing.push_back(a);
    for (Operation *op = &body.front(); op != boundary; op = op->getNextNode())
      for (Value r : op->getResults())
        crossing.push_back(r);
    for (Value v : crossing) {
      if (!isActivation(v))
        continue;
      SmallVector<OpOperand *> later;
      for (OpOperand &use : v.getUses())
        if (use.getOwner() == boundary || boundary->isBeforeInBlock(use.getOwner()))
          later.push_back(&use);
      if (later.empty())
        continue;
      auto chunk = b.create<plan::TpChunkOp>(boundary->getLoc(), tokenPart(v.getType()), v,
                                             StringAttr(), DenseI64ArrayAttr(), UnitAttr());
      for (OpOperand *use : later)
        use->set(chunk);
    }
    // Forward: an op outside the regions that reads parts makes parts.
    for (Operation *op = boundary; op; op = op->getNextNode()) {
      if (isa<nn::ParamOp, nn::ReturnOp, plan::TpChunkOp, plan::TpReduceScatterOp,
              plan::TpAllGatherOp>(op) ||
          regionOps.contains(op))
        continue;
      bool parted = false, whole = false;
      for (Value v : op->getOperands())
        if (isActivation(v))
          (cast<RankedTensorType>(v.getType()).getEncoding() ? parted : whole) = true;
      if (parted && whole)
        return op->emitOpError() << "reads both a rank's part of the tokens and whole "
                                    "activations, which sequence parallelism cannot relate";
      if (!parted)
        continue;
      for (OpResult r : op->getResults())
        if (isActivation(r))
          r.setType(tokenPart(r.getType()));
    }
    // Every parameter not cut now computes on a part of the tokens (or, in
    // the stem, gets the gradient of a part): its gradient is partial.
    Builder attrs(graph.getContext());
    for (auto p : body.getOps<nn::ParamOp>())
      if (!p.getTpDim()) {
        p.setTpPiecesAttr(attrs.getI64IntegerAttr(1));
        p.setTpPartial(true);
      }
    return success();
  }

  FailureOr<Region> attentionRegion(Operation *op) {
    Region r;
    r.anchor = op;
    int64_t heads = op->getAttrOfType<IntegerAttr>("num_heads").getInt();
    int64_t kv = op->getAttrOfType<IntegerAttr>("num_kv_heads").getInt();
    if (heads % tp != 0)
      return op->emitOpError() << "has " << heads << " heads, which " << (int64_t)tp
                               << " tensor-parallel ranks do not divide";
    // Key/value heads: split as the query's, or (GQA with fewer heads than
    // ranks) one head a rank, shared by tp / kv ranks.
    int64_t kvPieces = tp;
    if (kv % tp != 0) {
      if (tp % kv != 0)
        return op->emitOpError() << "has " << kv << " key/value heads: " << (int64_t)tp
                                 << " tensor-parallel ranks neither divide them nor are a "
                                    "multiple of them";
      kvPieces = kv;
    }
    for (unsigned i = 0; i < 3; ++i) {
      int64_t sections = 1;
      int64_t pieces = i == 0 ? tp : kvPieces;
      FailureOr<nn::LinearOp> l = producer(op->getOperand(i), r, pieces, sections, op);
      if (failed(l))
        return failure();
      if (sections > 1 && kvPieces != tp)
        return op->emitOpError() << "reads fused query, key and value heads of unequal counts ("
                                 << heads << ", " << kv << "), which cannot be cut alike";
      bool seen = llvm::any_of(r.columns, [&](auto &c) { return c.linear == *l; });
      if (!seen)
        r.columns.push_back({*l, pieces, sections});
    }
    r.inner.push_back({op, tp});
    kvPiecesOf[op] = kvPieces;
    for (Operation *user : op->getResult(0).getUsers()) {
      auto l = dyn_cast<nn::LinearOp>(user);
      if (!l || l.getInput() != op->getResult(0))
        return user->emitOpError() << "reads an attention's output as other than a linear's "
                                      "input, so the output cannot be split by heads";
      r.rows.push_back(l);
    }
    return r;
  }

  /// A silu_mul of two linears, or a gelu of one, read by linears only;
  /// anything else (BERT's head transform) stays whole.
  std::optional<Region> mlpRegion(Operation *op) {
    Region r;
    r.anchor = op;
    for (Value in : op->getOperands()) {
      auto l = in.getDefiningOp<nn::LinearOp>();
      if (!l || !l->hasOneUse())
        return std::nullopt;
      r.columns.push_back({l, tp, 1});
    }
    for (Operation *user : op->getResult(0).getUsers()) {
      auto l = dyn_cast<nn::LinearOp>(user);
      if (!l || l.getInput() != op->getResult(0))
        return std::nullopt;
      r.rows.push_back(l);
    }
    if (r.rows.empty())
      return std::nullopt;
    r.inner.push_back({op, tp});
    return r;
  }

  /// The type `t` with its last dimension divided by `by`.
  static RankedTensorType shrinkLast(Type t, int64_t by) {
    auto rt = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(rt.getShape());
    shape.back() /= by;
    return RankedTensorType::get(shape, rt.getElementType());
  }

  LogicalResult cutParam(Value v, int64_t dim, int64_t pieces, int64_t sections, bool partial,
                         Operation *user) {
    auto p = v.getDefiningOp<nn::ParamOp>();
    if (!p)
      return user->emitOpError() << "reads a weight that is not a parameter";
    if (p.getTpPieces())
      return p.emitOpError() << "parameter '" << p.getName()
                             << "' is used by two tensor-parallel regions";
    for (Operation *u : p->getUsers())
      if (u != user)
        return u->emitOpError() << "reads parameter '" << p.getName()
                                << "', which tensor parallelism cuts for "
                                << user->getName().getStringRef() << " "
                                << user->getAttrOfType<StringAttr>("module");
    auto type = p.getType();
    int64_t size = type.getShape()[dim];
    if (size % (sections * pieces) != 0)
      return p.emitOpError() << "parameter '" << p.getName() << "' has " << size
                             << " elements along dimension " << dim << ", which "
                             << (sections > 1 ? std::to_string(sections) + " sections of " : "")
                             << pieces << " tensor-parallel pieces do not divide";
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] /= pieces;
    p.getResult().setType(RankedTensorType::get(shape, type.getElementType()));
    Builder b(p.getContext());
    p.setTpDimAttr(b.getI64IntegerAttr(dim));
    p.setTpPiecesAttr(b.getI64IntegerAttr(pieces));
    if (sections > 1)
      p.setTpSectionsAttr(b.getI64IntegerAttr(sections));
    if (partial)
      p.setTpPartial(true);
    return success();
  }

  LogicalResult rewrite(Region &r) {
    OpBuilder b(r.anchor->getContext());
    auto moduleOf = [](Operation *op) { return op->getAttrOfType<StringAttr>("module"); };
    // Column-parallel: the output features (dim 0 of out_in, 1 of in_out).
    DenseMap<Value, Value> copies;
    for (Region::Column &c : r.columns) {
      nn::LinearOp l = c.linear;
      // Fewer pieces than ranks: ranks share one, each computing its part
      // of the gradient (GQA's key/value heads).
      bool partial = c.pieces < tp;
      bool outIn = l.getLayout() == nn::WeightLayout::out_in;
      if (failed(cutParam(l.getWeight(), outIn ? 0 : 1, c.pieces, c.sections, partial, l)))
        return failure();
      if (l.getBias() && failed(cutParam(l.getBias(), 0, c.pieces, c.sections, partial, l)))
        return failure();
      l.getResult().setType(shrinkLast(l.getResult().getType(), c.pieces));
      // Each distinct input enters the region once.
      Value in = l.getInput();
      Value &copy = copies[in];
      if (!copy) {
        b.setInsertionPoint(l);
        if (sequenceParallel)
          copy = b.create<plan::TpAllGatherOp>(l.getLoc(), in.getType(), in, moduleOf(r.anchor),
                                               DenseI64ArrayAttr(), UnitAttr());
        else
          copy = b.create<plan::TpCopyOp>(l.getLoc(), in.getType(), in, moduleOf(r.anchor));
        regionOps.insert(copy.getDefiningOp());
      }
      l.getInputMutable().assign(copy);
    }
    for (Region::Column &c : r.columns)
      regionOps.insert(c.linear);
    // Between: every result shrinks with its heads or columns, and so do
    // the head counts (key/value heads that ranks share: one a rank).
    for (auto [op, pieces] : r.inner) {
      regionOps.insert(op);
      for (OpResult res : op->getResults())
        res.setType(shrinkLast(res.getType(), pieces));
      if (auto heads = op->getAttrOfType<IntegerAttr>("num_heads"))
        op->setAttr("num_heads", b.getI64IntegerAttr(heads.getInt() / pieces));
      if (auto kv = op->getAttrOfType<IntegerAttr>("num_kv_heads"))
        op->setAttr("num_kv_heads", b.getI64IntegerAttr(kv.getInt() / kvPiecesOf.lookup(op)));
    }
    for (nn::ParamOp p : r.wholeParams) {
      if (p.getTpPieces())
        return p.emitOpError() << "parameter '" << p.getName()
                               << "' is used by two tensor-parallel regions";
      p.setTpPiecesAttr(b.getI64IntegerAttr(1));
      p.setTpPartial(true);
    }
    // Row-parallel: the input features; the sum leaves the region, then the
    // bias is added once.
    for (nn::LinearOp l : r.rows) {
      bool outIn = l.getLayout() == nn::WeightLayout::out_in;
      if (failed(cutParam(l.getWeight(), outIn ? 1 : 0, tp, 1, false, l)))
        return failure();
      Value bias = l.getBias();
      if (bias)
        l.getBiasMutable().clear();
      b.setInsertionPointAfter(l);
      Operation *sum =
          sequenceParallel
              ? b.create<plan::TpReduceScatterOp>(l.getLoc(), tokenPart(l.getResult().getType()),
                                                  l.getResult(), bias, moduleOf(l),
                                                  DenseI64ArrayAttr(), UnitAttr())
                    .getOperation()
              : b.create<plan::TpAllReduceOp>(l.getLoc(), l.getResult().getType(), l.getResult(),
                                              bias, moduleOf(l), DenseI64ArrayAttr(), UnitAttr())
                    .getOperation();
      l.getResult().replaceAllUsesExcept(sum->getResult(0), sum);
      regionOps.insert(l);
    }
    return success();
  }

  /// Each attention's key/value pieces (tp, or its key/value heads).
  DenseMap<Operation *, int64_t> kvPiecesOf;
  /// The ops inside the regions (whole activations under sequence
  /// parallelism), with their entries.
  llvm::SmallPtrSet<Operation *, 32> regionOps;
};

} // namespace

namespace {

/// tp_copy's gradient: the region's partial input gradients, summed.
struct TpCopyGradient
    : public nn::GradientOpInterface::ExternalModel<TpCopyGradient, plan::TpCopyOp> {
  LogicalResult buildGradients(Operation *op, OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) const {
    auto copy = cast<plan::TpCopyOp>(op);
    operandGrads.push_back(b.create<plan::TpAllReduceOp>(
        op->getLoc(), resultGrads[0].getType(), resultGrads[0], Value(), copy.getModuleAttr(),
        DenseI64ArrayAttr(), UnitAttr()));
    return success();
  }
};

/// A row-parallel bias's gradient: the result's gradient summed over its
/// rows (under sequence parallelism, the rank's part of them: partial).
void appendBiasGrad(OpBuilder &b, Operation *op, Value bias, Value dy, StringAttr module,
                    SmallVectorImpl<Value> &operandGrads) {
  if (bias)
    operandGrads.push_back(b.create<nn::BiasGradOp>(op->getLoc(), bias.getType(), dy, module));
}

/// tp_all_reduce's: its result's gradient, whole, to every rank's linear;
/// the bias's summed over the rows.
struct TpAllReduceGradient
    : public nn::GradientOpInterface::ExternalModel<TpAllReduceGradient, plan::TpAllReduceOp> {
  LogicalResult buildGradients(Operation *op, OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) const {
    auto sum = cast<plan::TpAllReduceOp>(op);
    operandGrads.push_back(resultGrads[0]);
    appendBiasGrad(b, op, sum.getBias(), resultGrads[0], sum.getModuleAttr(), operandGrads);
    return success();
  }
};

/// Sequence parallelism's entry: the partial input gradients summed, each
/// rank its part of the tokens.
struct TpAllGatherGradient
    : public nn::GradientOpInterface::ExternalModel<TpAllGatherGradient, plan::TpAllGatherOp> {
  LogicalResult buildGradients(Operation *op, OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) const {
    auto g = cast<plan::TpAllGatherOp>(op);
    operandGrads.push_back(b.create<plan::TpReduceScatterOp>(
        op->getLoc(), g.getInput().getType(), resultGrads[0], Value(), g.getModuleAttr(),
        DenseI64ArrayAttr(), UnitAttr()));
    return success();
  }
};

/// Its exit: the parts' gradient gathered for every rank's linear; the
/// bias's from this rank's part (partial).
struct TpReduceScatterGradient
    : public nn::GradientOpInterface::ExternalModel<TpReduceScatterGradient,
                                                    plan::TpReduceScatterOp> {
  LogicalResult buildGradients(Operation *op, OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) const {
    auto rs = cast<plan::TpReduceScatterOp>(op);
    operandGrads.push_back(b.create<plan::TpAllGatherOp>(op->getLoc(), rs.getInput().getType(),
                                                         resultGrads[0], rs.getModuleAttr(),
                                                         DenseI64ArrayAttr(), UnitAttr()));
    appendBiasGrad(b, op, rs.getBias(), resultGrads[0], rs.getModuleAttr(), operandGrads);
    return success();
  }
};

/// The part taken of a whole value: its gradient placed among zeros (the
/// stem's parameters' gradients partial); integers (targets) take none.
struct TpChunkGradient
    : public nn::GradientOpInterface::ExternalModel<TpChunkGradient, plan::TpChunkOp> {
  LogicalResult buildGradients(Operation *op, OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) const {
    auto c = cast<plan::TpChunkOp>(op);
    if (!isa<FloatType>(cast<RankedTensorType>(c.getInput().getType()).getElementType()) ||
        !resultGrads[0]) {
      operandGrads.push_back(Value());
      return success();
    }
    operandGrads.push_back(b.create<plan::TpUnchunkOp>(op->getLoc(), c.getInput().getType(),
                                                       resultGrads[0], c.getModuleAttr(),
                                                       DenseI64ArrayAttr(), UnitAttr()));
    return success();
  }
};

} // namespace

void fsdp::registerTensorParallelGradients(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, plan::FSDPDialect *) {
    plan::TpCopyOp::attachInterface<TpCopyGradient>(*ctx);
    plan::TpAllReduceOp::attachInterface<TpAllReduceGradient>(*ctx);
    plan::TpAllGatherOp::attachInterface<TpAllGatherGradient>(*ctx);
    plan::TpReduceScatterOp::attachInterface<TpReduceScatterGradient>(*ctx);
    plan::TpChunkOp::attachInterface<TpChunkGradient>(*ctx);
  });
}
