//===- NNOps.cpp - verifiers and helpers of the nn dialect ----------------===//
//
// Every verifier says what is wrong in terms of the model: which operand,
// which dimension, what it is and what it should be.
//
//===----------------------------------------------------------------------===//
#include "dialect/NN/NNDialect.h"
#include "support/RopeScaling.h"

#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include "llvm/Support/JSON.h"
#include <cmath>

using namespace mlir;
using namespace fsdp::nn;

namespace {

/// The element count of a static shape of positive sizes, if it is at most
/// kMaxParameters; computed without overflowing.
std::optional<int64_t> boundedNumElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0 || d > kMaxParameters / n)
      return std::nullopt;
    n *= d;
  }
  return n;
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += ShapedType::isDynamic(shape[i]) ? "?" : std::to_string(shape[i]);
  }
  return s + "]";
}

std::string dimStr(int64_t d) { return ShapedType::isDynamic(d) ? "?" : std::to_string(d); }

bool dimMatches(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

bool shapeMatches(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!dimMatches(a[i], b[i]))
      return false;
  return true;
}

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

Type elemOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

LogicalResult expectRank(Operation *op, Value v, StringRef what, int64_t rank) {
  auto shape = shapeOf(v);
  if ((int64_t)shape.size() != rank)
    return op->emitOpError() << what << " must have rank " << rank << ", but it is "
                             << shapeStr(shape);
  return success();
}

// A weight's dimension sizes must be static, since parameters have fixed shapes.
LogicalResult expectVector(Operation *op, Value v, StringRef what, int64_t size) {
  auto shape = shapeOf(v);
  if (shape.size() != 1 || !dimMatches(shape[0], size))
    return op->emitOpError() << what << " must be " << shapeStr({size}) << ", but it is "
                             << shapeStr(shape);
  return success();
}

LogicalResult expectResultShape(Operation *op, ArrayRef<int64_t> expected) {
  auto got = shapeOf(op->getResult(0));
  if (!shapeMatches(got, expected))
    return op->emitOpError() << "result must be " << shapeStr(expected) << ", but it is "
                             << shapeStr(got);
  return success();
}

LogicalResult expectSameElementType(Operation *op, Value a, Value b, StringRef what) {
  if (elemOf(a) != elemOf(b))
    return op->emitOpError() << what << " has element type " << elemOf(b) << ", expected "
                             << elemOf(a);
  return success();
}

// The result of an op that keeps its input's shape and type.
LogicalResult expectResultLike(Operation *op, Value input, StringRef what) {
  if (op->getResult(0).getType() != input.getType())
    return op->emitOpError() << "result type " << op->getResult(0).getType() << " must equal the "
                             << what << " type " << input.getType();
  return success();
}

// Two operands of one shape and element type, and a result like them.
LogicalResult expectElementwisePair(Operation *op, Value a, Value b, StringRef aWhat,
                                    StringRef bWhat, StringRef bName) {
  if (!shapeMatches(shapeOf(a), shapeOf(b)))
    return op->emitOpError() << aWhat << shapeStr(shapeOf(a)) << " and " << bWhat
                             << shapeStr(shapeOf(b)) << " must have one shape";
  if (failed(expectSameElementType(op, a, b, bName)) ||
      failed(expectSameElementType(op, a, op->getResult(0), "result")))
    return failure();
  return expectResultShape(op, shapeOf(a));
}

// Names travel into JSON (the graph format, reports, the runtime's
// program), which holds UTF-8 text only; an MLIR string may hold any bytes.
LogicalResult expectUTF8(Operation *op, StringRef value, StringRef what) {
  size_t offset = 0;
  if (llvm::json::isUTF8(value, &offset))
    return success();
  return op->emitOpError() << what << " must be UTF-8 text, but its byte " << offset << " is 0x"
                           << llvm::utohexstr((uint8_t)value[offset], /*LowerCase=*/true);
}

LogicalResult verifyModuleAttr(Operation *op) {
  if (auto m = op->getAttrOfType<StringAttr>("module")) {
    if (m.getValue().empty())
      return op->emitOpError() << "module path must not be empty";
    return expectUTF8(op, m.getValue(), "module path");
  }
  return success();
}

// The last dimension of an activation must be known: it is a hidden size.
FailureOr<int64_t> staticLastDim(Operation *op, Value v, StringRef what) {
  auto shape = shapeOf(v);
  if (shape.empty() || ShapedType::isDynamic(shape.back())) {
    op->emitOpError() << what << " must have a static last dimension, but it is "
                      << shapeStr(shape);
    return failure();
  }
  return shape.back();
}

} // namespace

//===----------------------------------------------------------------------===//
// GraphOp
//===----------------------------------------------------------------------===//

ParseResult GraphOp::parse(OpAsmParser &parser, OperationState &result) {
  auto buildType = [](Builder &b, ArrayRef<Type> args, ArrayRef<Type> results,
                      function_interface_impl::VariadicFlag,
                      std::string &) { return b.getFunctionType(args, results); };
  return function_interface_impl::parseFunctionOp(
      parser, result, /*allowVariadic=*/false, getFunctionTypeAttrName(result.name), buildType,
      getArgAttrsAttrName(result.name), getResAttrsAttrName(result.name));
}

void GraphOp::print(OpAsmPrinter &p) {
  function_interface_impl::printFunctionOp(p, *this, /*isVariadic=*/false,
                                           getFunctionTypeAttrName(), getArgAttrsAttrName(),
                                           getResAttrsAttrName());
}

void GraphOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  if (region.empty() || region.front().getNumArguments() != 2)
    return;
  bool images = getInputsKind() == "images";
  setNameFn(region.front().getArgument(0), images ? "patches" : "tokens");
  setNameFn(region.front().getArgument(1), images ? "labels" : "targets");
}

std::vector<ParamOp> GraphOp::getParams() {
  std::vector<ParamOp> params;
  for (auto p : getBody().getOps<ParamOp>())
    params.push_back(p);
  return params;
}

std::string fsdp::nn::readInputs(StringAttr kind, DictionaryAttr image,
                                 support::InputKind *inputKind, support::ImageSpec *spec) {
  *inputKind = support::InputKind::Tokens;
  if (kind) {
    auto k = support::parseInputKind(kind.getValue().str());
    if (!k)
      return "inputs_kind '" + kind.getValue().str() + "' is not tokens, masked_tokens or images";
    *inputKind = *k;
  }
  bool images = *inputKind == support::InputKind::Images;
  if (!images)
    return image ? "has an image geometry, but its inputs_kind is not images" : "";
  if (!image)
    return "takes images, so it needs the image geometry (image = {height, width, channels, "
           "patch_height, patch_width})";
  static const char *const keys[] = {"height", "width", "channels", "patch_height", "patch_width"};
  int64_t *fields[] = {&spec->height, &spec->width, &spec->channels, &spec->patchHeight,
                       &spec->patchWidth};
  for (NamedAttribute a : image)
    if (!llvm::is_contained(keys, a.getName().getValue()))
      return "image has the unknown key '" + a.getName().getValue().str() +
             "' (known: height, width, channels, patch_height, patch_width)";
  for (auto [key, field] : llvm::zip(keys, fields)) {
    auto v = dyn_cast_or_null<IntegerAttr>(image.get(key));
    // A bound that keeps every product below 2^63 (P * C * ph * pw).
    if (!v || v.getValue().getSignificantBits() > 64 || v.getInt() < 1 ||
        v.getInt() > (int64_t(1) << 15))
      return std::string("image's ") + key + " must be an integer in [1, 32768]";
    *field = v.getInt();
  }
  if (spec->height % spec->patchHeight || spec->width % spec->patchWidth)
    return "image of " + std::to_string(spec->height) + " x " + std::to_string(spec->width) +
           " is not a whole number of " + std::to_string(spec->patchHeight) + " x " +
           std::to_string(spec->patchWidth) + " patches";
  return "";
}

LogicalResult GraphOp::verify() {
  auto type = getFunctionType();
  if (type.getNumInputs() != 2)
    return emitOpError() << "takes (tokens, targets), but has " << type.getNumInputs()
                         << " arguments";
  support::InputKind kind;
  support::ImageSpec image;
  if (std::string err = readInputs(getInputsKindAttr(), getImageAttr(), &kind, &image);
      !err.empty())
    return emitOpError() << err;
  for (auto [i, t] : llvm::enumerate(type.getInputs())) {
    auto tt = dyn_cast<RankedTensorType>(t);
    if (i == 0 && kind == support::InputKind::Images) {
      // The patches: [batch, P, C*ph*pw], P and the values static.
      int64_t P = image.patches(), K = image.patchValues();
      if (!tt || tt.getRank() != 3 || !isa<FloatType>(tt.getElementType()) ||
          tt.getDimSize(1) != P || tt.getDimSize(2) != K)
        return emitOpError() << "takes images of " << P << " patches of " << K
                             << " values, so its first argument must be a float tensor [batch, "
                             << P << ", " << K << "], but is " << t;
      continue;
    }
    if (!tt || tt.getRank() != 2 || !tt.getElementType().isSignlessInteger())
      return emitOpError() << (i == 0 ? "tokens" : "targets")
                           << " must be a rank-2 integer tensor [batch, seq], but is " << t;
    if (i == 1 && kind == support::InputKind::Images && tt.getDimSize(1) != 1)
      return emitOpError() << "takes images, so its targets are one label a sample, [batch, 1], "
                              "but they are "
                           << t;
  }
  if (kind == support::InputKind::Images && getMaxSeqLenAttr().getInt() != image.patches() + 1)
    return emitOpError() << "takes images of " << image.patches()
                         << " patches, so max_seq_len must be " << image.patches() + 1
                         << " (the patches and the class token), but is "
                         << getMaxSeqLenAttr().getInt();
  if (type.getNumResults() != 1 ||
      type.getResult(0) != RankedTensorType::get({}, Float32Type::get(getContext())))
    return emitOpError() << "must return the loss as tensor<f32>";
  // I64Attr getters return unsigned values; read the signed ones.
  int64_t numBlocks = getNumBlocksAttr().getInt();
  int64_t maxSeqLen = getMaxSeqLenAttr().getInt();
  if (numBlocks < 0)
    return emitOpError() << "num_blocks must be >= 0, but is " << numBlocks;
  if (numBlocks > kMaxBlocks)
    return emitOpError() << "num_blocks = " << numBlocks << " is more than fsdp plans (at most "
                         << kMaxBlocks << ")";
  if (numBlocks > 0 && getBlockPrefix().empty())
    return emitOpError() << "block_prefix must name the block list when num_blocks > 0";
  if (maxSeqLen <= 0)
    return emitOpError() << "max_seq_len must be positive, but is " << maxSeqLen;
  if (maxSeqLen > kMaxSeqLen)
    return emitOpError() << "max_seq_len = " << maxSeqLen << " is more than fsdp plans (at most "
                         << kMaxSeqLen << ")";
  if (getModelType().empty())
    return emitOpError() << "model_type must not be empty";
  if (failed(expectUTF8(*this, getSymName(), "the graph's name")) ||
      failed(expectUTF8(*this, getModelType(), "model_type")) ||
      failed(expectUTF8(*this, getBlockPrefix(), "block_prefix")))
    return failure();

  llvm::StringMap<ParamOp> seen;
  int64_t total = 0;
  for (ParamOp p : getParams()) {
    // A parameter's own verifier, which runs after this one, reports a
    // shape that is bad on its own; a sum of counts up to kMaxParameters
    // each cannot overflow before it passes the limit.
    total += boundedNumElements(p.getResult().getType().getShape()).value_or(0);
    if (total > kMaxParameters)
      return p.emitOpError() << "brings the graph's parameters to more than fsdp plans (at most "
                             << kMaxParameters << " elements in all)";
    auto [it, inserted] = seen.try_emplace(p.getName(), p);
    if (!inserted) {
      auto diag = p.emitOpError() << "duplicate parameter name '" << p.getName() << "'";
      diag.attachNote(it->second.getLoc()) << "first declared here";
      return diag;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ReturnOp
//===----------------------------------------------------------------------===//

LogicalResult ReturnOp::verify() {
  auto graph = (*this)->getParentOfType<GraphOp>();
  auto results = graph.getFunctionType().getResults();
  if (getOperands().size() != results.size())
    return emitOpError() << "returns " << getOperands().size() << " values, but the graph declares "
                         << results.size();
  for (auto [v, t] : llvm::zip(getOperands(), results))
    if (v.getType() != t)
      return emitOpError() << "returns " << v.getType() << ", but the graph declares " << t;
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError() << "parameter name must not be empty";
  if (failed(expectUTF8(*this, getName(), "parameter name")))
    return failure();
  if (llvm::any_of(getName(), [](char c) { return llvm::isSpace(c); }))
    return emitOpError() << "parameter name '" << getName() << "' must not contain whitespace";
  auto type = getResult().getType();
  if (type.getRank() == 0 || !type.hasStaticShape())
    return emitOpError() << "parameter '" << getName()
                         << "' must have a static shape of rank >= 1, but it is "
                         << shapeStr(type.getShape());
  for (int64_t d : type.getShape())
    if (d <= 0)
      return emitOpError() << "parameter '" << getName() << "' has a non-positive dimension in "
                           << shapeStr(type.getShape());
  // Tensor parallelism: a piece of pieces > 1 along a dimension, in sections
  // that divide it; or whole (no dimension), maybe with a partial gradient.
  int64_t pieces = getTpPiecesOr1(), sections = getTpSectionsOr1();
  if (pieces < 1 || sections < 1)
    return emitOpError() << "parameter '" << getName() << "' has tp_pieces " << pieces
                         << " and tp_sections " << sections << "; both are at least 1";
  if (getTpDim()) {
    int64_t dim = *getTpDim();
    if (pieces < 2 || dim < 0 || dim >= type.getRank() || type.getShape()[dim] % sections != 0)
      return emitOpError() << "parameter '" << getName() << "' is cut along tp_dim " << dim
                           << " into tp_pieces " << pieces << " of tp_sections " << sections
                           << ": the dimension is one of its " << type.getRank()
                           << ", the pieces at least 2, and the sections divide "
                           << shapeStr(type.getShape());
  } else if (pieces != 1 || getTpSections()) {
    return emitOpError() << "parameter '" << getName() << "' has tp_pieces " << pieces
                         << (getTpSections() ? " and tp_sections" : "")
                         << " but no tp_dim to cut along";
  }
  if (!boundedNumElements(type.getShape()))
    return emitOpError() << "parameter '" << getName() << "' of shape " << shapeStr(type.getShape())
                         << " has more elements than fsdp plans (at most " << kMaxParameters << ")";
  return success();
}

void ParamOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getName());
}

int64_t ParamOp::getNumElements() { return getResult().getType().getNumElements(); }

StringRef ParamOp::getModulePath() {
  auto pos = getName().rfind('.');
  return pos == StringRef::npos ? StringRef() : getName().substr(0, pos);
}

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

// position_ids and token_type_ids: ids shaped and typed like the tokens.
static LogicalResult verifyIdsOfTokens(Operation *op, Value tokens, Value result) {
  if (failed(verifyModuleAttr(op)) || failed(expectRank(op, tokens, "tokens", 2)))
    return failure();
  if (tokens.getType() != result.getType())
    return op->emitOpError() << "result type " << result.getType()
                             << " must equal the tokens' type " << tokens.getType();
  return success();
}

LogicalResult PositionIdsOp::verify() { return verifyIdsOfTokens(*this, getTokens(), getResult()); }

LogicalResult TokenTypeIdsOp::verify() {
  return verifyIdsOfTokens(*this, getTokens(), getResult());
}

LogicalResult EmbeddingOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectRank(*this, getIds(), "ids", 2)) ||
      failed(expectRank(*this, getTable(), "table", 2)) ||
      failed(expectSameElementType(*this, getTable(), getResult(), "result")))
    return failure();
  auto ids = shapeOf(getIds());
  return expectResultShape(*this, {ids[0], ids[1], shapeOf(getTable())[1]});
}

namespace {
// A linear weight read as its matrix: `in_out` [in, out]; `out_in` [out, in],
// or [out, d1, ..., dk] read flat as [out, d1 * ... * dk] (ViT's patch kernel).
// Returns {in, out}, dynamic where a dimension is.
std::pair<int64_t, int64_t> linearDims(WeightLayout layout, ArrayRef<int64_t> w) {
  if (layout == WeightLayout::in_out || w.size() <= 2)
    return layout == WeightLayout::in_out ? std::pair{w[0], w[1]} : std::pair{w[1], w[0]};
  int64_t in = 1;
  for (int64_t d : w.drop_front()) {
    if (ShapedType::isDynamic(d))
      return {ShapedType::kDynamic, w[0]};
    in *= d;
  }
  return {in, w[0]};
}

// The weight's rank: 2, or more for an out_in weight of static trailing
// dimensions (a parameter's are; a product past any model is refused).
LogicalResult expectLinearWeight(Operation *op, WeightLayout layout, Value weight, StringRef what) {
  auto w = shapeOf(weight);
  if (w.size() == 2)
    return success();
  if (w.size() < 2 || layout != WeightLayout::out_in)
    return op->emitOpError() << what << " must have rank 2" << (w.size() > 2 ? " (in_out)" : "")
                             << ", or be an out_in [out, d1, ..., dk] weight read as [out, d1 * "
                                "... * dk], but it is "
                             << shapeStr(w);
  if (!boundedNumElements(w.drop_front()))
    return op->emitOpError() << what << " " << shapeStr(w)
                             << " must have static positive trailing dimensions of at most "
                             << kMaxParameters << " elements";
  return success();
}
} // namespace

int64_t LinearOp::getInFeatures() { return linearDims(getLayout(), shapeOf(getWeight())).first; }

int64_t LinearOp::getOutFeatures() { return linearDims(getLayout(), shapeOf(getWeight())).second; }

LogicalResult LinearOp::verify() {
  if (failed(verifyModuleAttr(*this)) ||
      failed(expectLinearWeight(*this, getLayout(), getWeight(), "weight")) ||
      failed(expectSameElementType(*this, getInput(), getWeight(), "weight")) ||
      failed(expectSameElementType(*this, getInput(), getResult(), "result")))
    return failure();
  auto in = shapeOf(getInput());
  if (in.empty())
    return emitOpError() << "input must have rank >= 1";
  int64_t inF = getInFeatures(), outF = getOutFeatures();
  if (!dimMatches(in.back(), inF))
    return emitOpError() << "weight " << shapeStr(shapeOf(getWeight())) << " is "
                         << stringifyWeightLayout(getLayout()) << ", so the input's last "
                         << "dimension must be " << inF
                         << (shapeOf(getWeight()).size() > 2 ? " (the product of the weight's "
                                                               "trailing dimensions)"
                                                             : "")
                         << ", but the input is " << shapeStr(in);
  if (getBias()) {
    if (failed(expectSameElementType(*this, getInput(), getBias(), "bias")) ||
        failed(expectVector(*this, getBias(), "bias", outF)))
      return failure();
  }
  SmallVector<int64_t> expected(in.begin(), in.end());
  expected.back() = outF;
  return expectResultShape(*this, expected);
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  auto d = staticLastDim(*this, getInput(), "input");
  if (failed(d) || failed(expectVector(*this, getWeight(), "weight", *d)) ||
      failed(expectVector(*this, getBias(), "bias", *d)) ||
      failed(expectSameElementType(*this, getInput(), getWeight(), "weight")) ||
      failed(expectSameElementType(*this, getInput(), getBias(), "bias")))
    return failure();
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "eps must be positive, but is " << getEps().convertToDouble();
  if (!std::isfinite(getEps().convertToDouble()))
    return emitOpError() << "eps must be finite, but is " << getEps().convertToDouble();
  return expectResultLike(*this, getInput(), "input");
}

namespace {
// RMSNorm normalises rows of the weight's length: the last dimension (a
// hidden state) or, Qwen3's q_norm/k_norm, each head of it.
LogicalResult expectRMSNormWeight(Operation *op, Value input, Value weight) {
  auto d = staticLastDim(op, input, "input");
  if (failed(d))
    return failure();
  auto w = shapeOf(weight);
  if (w.size() != 1 || ShapedType::isDynamic(w[0]) || w[0] < 1 || *d % w[0] != 0)
    return op->emitOpError() << "weight must be [" << *d << "] or a static [n] with n dividing "
                             << *d << " (rows of its length), but it is " << shapeStr(w);
  return success();
}
} // namespace

LogicalResult RMSNormOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  if (failed(expectRMSNormWeight(*this, getInput(), getWeight())) ||
      failed(expectSameElementType(*this, getInput(), getWeight(), "weight")))
    return failure();
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "eps must be positive, but is " << getEps().convertToDouble();
  if (!std::isfinite(getEps().convertToDouble()))
    return emitOpError() << "eps must be finite, but is " << getEps().convertToDouble();
  return expectResultLike(*this, getInput(), "input");
}

namespace {
/// nn.rope's frequency scaling: `scaling` names a kind (support/RopeScaling.h)
/// and the attributes of its parameters are all there, and no other;
/// values the kernels compute; dynamic's frequencies are transformers' for
/// sequences up to its original_max_position, so the graph's max_seq_len
/// may not pass it.
LogicalResult verifyRopeScaling(RopeOp op, int64_t headDim) {
  using fsdp::support::RopeScalingField;
  // Before scaling had kinds, Llama 3.1's was four llama3_* attributes: an
  // op that still carries them would otherwise lose its scaling unseen (an
  // attribute the op does not define is the IR's to carry, not the op's).
  for (NamedAttribute a : op->getAttrs())
    if (a.getName().getValue().starts_with("llama3_"))
      return op.emitOpError() << a.getName().getValue()
                              << " is the name Llama 3.1's scaling had before scaling kinds; "
                                 "write scaling = \"llama3\" with scaling_factor, "
                                 "low_freq_factor, high_freq_factor and original_max_position";
  auto scaling = op.getScalingAttr();
  if (!scaling) {
    for (const RopeScalingField &f : fsdp::support::ropeScalingFields())
      if (op->getAttr(f.name))
        return op.emitOpError() << f.name << " is given without scaling";
    return success();
  }
  auto kind = fsdp::support::parseRopeScalingKind(scaling.getValue().str());
  if (!kind)
    return op.emitOpError() << "scaling '" << scaling.getValue() << "' is not one of "
                            << fsdp::support::ropeScalingNames();
  fsdp::support::RopeScaling s;
  s.kind = *kind;
  for (const RopeScalingField &f : fsdp::support::ropeScalingFields()) {
    Attribute a = op->getAttr(f.name);
    bool reads = fsdp::support::ropeScalingReads(*kind, f.name);
    if (a && !reads)
      return op.emitOpError() << f.name << " is not a parameter of " << scaling.getValue()
                              << " scaling (its parameters: "
                              << fsdp::support::ropeScalingFieldList(*kind) << ")";
    if (!a && reads)
      return op.emitOpError() << scaling.getValue() << " scaling needs "
                              << fsdp::support::ropeScalingFieldList(*kind) << ", but " << f.name
                              << " is missing";
    if (!a)
      continue;
    switch (f.type) { // the types are the op's definition's, checked before
    case RopeScalingField::Type::F64:
      s.*f.f64 = cast<FloatAttr>(a).getValueAsDouble();
      break;
    case RopeScalingField::Type::I64:
      s.*f.i64 = cast<IntegerAttr>(a).getInt();
      break;
    case RopeScalingField::Type::Bool:
      s.*f.boolean = cast<BoolAttr>(a).getValue();
      break;
    }
  }
  std::string problem = fsdp::support::checkRopeScaling(s);
  if (!problem.empty())
    return op.emitOpError() << problem;
  if (s.kind == fsdp::support::RopeScalingKind::Dynamic) {
    if (headDim <= 2)
      return op.emitOpError() << "dynamic scaling needs a head dimension above 2 (its exponent "
                                 "is dim / (dim - 2)), but it is "
                              << headDim;
    auto graph = op->getParentOfType<GraphOp>();
    if (graph && graph.getMaxSeqLen() > uint64_t(s.originalMaxPosition))
      return op.emitOpError() << "dynamic scaling computes transformers' frequencies for "
                                 "sequences of at most original_max_position = "
                              << s.originalMaxPosition << " tokens, but the graph's max_seq_len is "
                              << graph.getMaxSeqLen()
                              << " (transformers rescales them for a longer sequence, which "
                                 "fsdp does not)";
  }
  if (s.kind == fsdp::support::RopeScalingKind::Yarn && op.getTheta().convertToDouble() == 1.0)
    return op.emitOpError() << "yarn scaling needs theta other than 1 (it divides by log(theta))";
  return success();
}
} // namespace

LogicalResult RopeOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectRank(*this, getInput(), "input", 3)))
    return failure();
  auto d = staticLastDim(*this, getInput(), "input");
  if (failed(d))
    return failure();
  int64_t heads = getNumHeads();
  if (heads <= 0)
    return emitOpError() << "num_heads must be positive, but is " << heads;
  if (*d % heads != 0)
    return emitOpError() << "the last dimension " << *d
                         << " does not divide into num_heads = " << heads;
  if ((*d / heads) % 2 != 0)
    return emitOpError() << "head dimension " << *d / heads << " must be even to rotate halves";
  if (!(getTheta().convertToDouble() > 0))
    return emitOpError() << "theta must be positive, but is " << getTheta().convertToDouble();
  if (!std::isfinite(getTheta().convertToDouble()))
    return emitOpError() << "theta must be finite, but is " << getTheta().convertToDouble();
  if (failed(verifyRopeScaling(*this, *d / heads)))
    return failure();
  return expectResultLike(*this, getInput(), "input");
}

LogicalResult SplitOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  size_t n = getResults().size();
  if (n < 2)
    return emitOpError() << "must produce at least 2 parts, but produces " << n;
  auto d = staticLastDim(*this, getInput(), "input");
  if (failed(d))
    return failure();
  if (*d % (int64_t)n != 0)
    return emitOpError() << "the last dimension " << *d << " does not split into " << n
                         << " equal parts";
  SmallVector<int64_t> expected(shapeOf(getInput()));
  expected.back() = *d / n;
  for (auto [i, r] : llvm::enumerate(getResults())) {
    if (!shapeMatches(shapeOf(r), expected))
      return emitOpError() << "part " << i << " must be " << shapeStr(expected) << ", but it is "
                           << shapeStr(shapeOf(r));
    if (failed(expectSameElementType(*this, getInput(), r, "a part")))
      return failure();
  }
  return success();
}

namespace {
// Attention's heads: the query holds num_heads heads, key and value
// num_kv_heads heads of the same dimension, by the query's batch and
// sequence (what the runtime's kernels read).
LogicalResult verifyHeads(Operation *op, Value query, Value key, Value value, int64_t h,
                          int64_t kv) {
  if (h <= 0 || kv <= 0)
    return op->emitOpError() << "num_heads and num_kv_heads must be positive, but are " << h
                             << " and " << kv;
  if (h % kv != 0)
    return op->emitOpError() << "num_heads = " << h
                             << " must be a multiple of num_kv_heads = " << kv;
  auto qd = staticLastDim(op, query, "query");
  if (failed(qd))
    return failure();
  if (*qd % h != 0)
    return op->emitOpError() << "query width " << *qd << " does not divide into " << h << " heads";
  int64_t headDim = *qd / h;
  auto q = shapeOf(query);
  for (auto [v, what] :
       {std::pair<Value, StringRef>{key, "key"}, std::pair<Value, StringRef>{value, "value"}}) {
    SmallVector<int64_t> expected = {q[0], q[1], kv * headDim};
    if (!shapeMatches(shapeOf(v), expected))
      return op->emitOpError() << what << " must be " << shapeStr(expected) << " (" << kv
                               << " kv heads of dimension " << headDim << "), but it is "
                               << shapeStr(shapeOf(v));
    if (failed(expectSameElementType(op, query, v, what)))
      return failure();
  }
  return success();
}
} // namespace

namespace {
// Query, key and value of either attention (and of its gradient) are
// [B, S, width].
template <typename Op> LogicalResult expectAttentionRanks(Op op) {
  return failure(failed(expectRank(op, op.getQuery(), "query", 3)) ||
                 failed(expectRank(op, op.getKey(), "key", 3)) ||
                 failed(expectRank(op, op.getValue(), "value", 3)));
}

} // namespace

LogicalResult verifyWindow(Operation *op, std::optional<uint64_t> window) {
  if (window && (int64_t)*window < 1)
    return op->emitOpError() << "window must be at least 1 (absent: full causal), but is "
                             << (int64_t)*window;
  return success();
}

LogicalResult CausalAttentionOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectAttentionRanks(*this)) ||
      failed(
          verifyHeads(*this, getQuery(), getKey(), getValue(), getNumHeads(), getNumKvHeads())) ||
      failed(verifyWindow(*this, getWindow())))
    return failure();
  return expectResultLike(*this, getQuery(), "query");
}

namespace {
// A sliding window is causal attention's: on bidirectional attention it
// would be a discardable attribute no one reads, so it is refused.
LogicalResult verifyNoWindow(Operation *op) {
  if (op->hasAttr("window"))
    return op->emitOpError() << "has no sliding window: 'window' is nn.causal_attention's; "
                                "bidirectional attention sees every key";
  return success();
}
} // namespace

LogicalResult AttentionOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(verifyNoWindow(*this)) ||
      failed(expectAttentionRanks(*this)) ||
      failed(verifyHeads(*this, getQuery(), getKey(), getValue(), getNumHeads(), getNumKvHeads())))
    return failure();
  return expectResultLike(*this, getQuery(), "query");
}

namespace {
// GELU's form: torch's names, "tanh" or "none" (exact).
LogicalResult verifyApproximate(Operation *op, StringRef approximate) {
  if (approximate != "tanh" && approximate != "none")
    return op->emitOpError() << "approximate must be \"tanh\" or \"none\" (exact), but is \""
                             << approximate << "\"";
  return success();
}
} // namespace

LogicalResult GeluOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(verifyApproximate(*this, getApproximate())))
    return failure();
  return expectResultLike(*this, getInput(), "input");
}

LogicalResult SiluMulOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  return expectElementwisePair(*this, getGate(), getUp(), "gate ", "up ", "up");
}

LogicalResult AddOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  return expectElementwisePair(*this, getLhs(), getRhs(), "operands ", "", "rhs");
}

namespace {
// ViT's sequence [B, P+1, D] of x [B, P, D], cls [1, 1, D] and positions
// [1, P+1, D]: the positions, static as a parameter, fix P+1 and D.
LogicalResult verifyClassToken(Operation *op, Value x, Value cls, Value pos, Value y,
                               StringRef xWhat, StringRef yWhat) {
  for (auto [v, what] : {std::pair<Value, StringRef>{x, xWhat},
                         {cls, "class token"},
                         {pos, "positions"},
                         {y, yWhat}})
    if (failed(expectRank(op, v, what, 3)))
      return failure();
  auto p = shapeOf(pos);
  if (p[0] != 1 || ShapedType::isDynamic(p[1]) || p[1] < 2 || ShapedType::isDynamic(p[2]))
    return op->emitOpError() << "positions must be a static [1, P+1, D] with P >= 1, but they are "
                             << shapeStr(p);
  int64_t S = p[1], D = p[2];
  if (!shapeMatches(shapeOf(cls), {1, 1, D}) ||
      !cast<RankedTensorType>(cls.getType()).hasStaticShape())
    return op->emitOpError() << "class token must be [1, 1, " << D << "], but it is "
                             << shapeStr(shapeOf(cls));
  auto xs = shapeOf(x), ys = shapeOf(y);
  if (!shapeMatches(xs.drop_front(), {S - 1, D}))
    return op->emitOpError() << xWhat << " must be [B, " << S - 1 << ", " << D
                             << "] (one position fewer than the " << S << " positions), but it is "
                             << shapeStr(xs);
  if (!shapeMatches(ys, {xs[0], S, D}))
    return op->emitOpError() << yWhat << " must be " << shapeStr({xs[0], S, D})
                             << " (the class token and the patches), but it is " << shapeStr(ys);
  // Both dynamic would make them one length: the run's sequence.
  if (ShapedType::isDynamic(xs[1]) && ShapedType::isDynamic(ys[1]))
    return op->emitOpError() << xWhat << " [B, " << S - 1 << ", D] and " << yWhat << " [B, " << S
                             << ", D] differ in sequence length, so one of them must be static";
  for (Value v : {cls, pos, y})
    if (failed(expectSameElementType(op, x, v, "a tensor")))
      return failure();
  return success();
}

// [B, S, D] and its first row [B, 1, D].
LogicalResult verifyFirstToken(Operation *op, Value seq, Value first, StringRef seqWhat,
                               StringRef firstWhat) {
  if (failed(expectRank(op, seq, seqWhat, 3)) || failed(expectRank(op, first, firstWhat, 3)) ||
      failed(staticLastDim(op, seq, seqWhat)) ||
      failed(expectSameElementType(op, seq, first, firstWhat)))
    return failure();
  auto s = shapeOf(seq), f = shapeOf(first);
  if (!shapeMatches(f, {s[0], 1, s[2]}) || f[1] != 1)
    return op->emitOpError() << firstWhat << " must be " << shapeStr({s[0], 1, s[2]})
                             << " (row 0 of each sequence of " << shapeStr(s) << "), but it is "
                             << shapeStr(f);
  return success();
}
} // namespace

LogicalResult ClassTokenOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  return verifyClassToken(*this, getInput(), getCls(), getPositions(), getResult(), "input",
                          "result");
}

LogicalResult FirstTokenOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  return verifyFirstToken(*this, getInput(), getResult(), "input", "result");
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectRank(*this, getLogits(), "logits", 3)) ||
      failed(expectRank(*this, getTargets(), "targets", 2)))
    return failure();
  auto l = shapeOf(getLogits()), t = shapeOf(getTargets());
  if (!dimMatches(l[0], t[0]) || !dimMatches(l[1], t[1]))
    return emitOpError() << "targets " << shapeStr(t)
                         << " must match the logits' batch and sequence "
                         << shapeStr(l.take_front(2));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

namespace {
LogicalResult expectType(Operation *op, Value v, Type expected, StringRef what) {
  if (v.getType() != expected)
    return op->emitOpError() << what << " must be " << expected << ", but it is " << v.getType();
  return success();
}
} // namespace

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectRank(*this, getLogits(), "logits", 3)) ||
      failed(expectRank(*this, getTargets(), "targets", 2)))
    return failure();
  auto l = shapeOf(getLogits()), t = shapeOf(getTargets());
  if (!dimMatches(l[0], t[0]) || !dimMatches(l[1], t[1]))
    return emitOpError() << "targets " << shapeStr(t)
                         << " must match the logits' batch and sequence "
                         << shapeStr(l.take_front(2));
  return expectType(*this, getResult(), getLogits().getType(), "result");
}

LogicalResult LinearGradInputOp::verify() {
  if (failed(verifyModuleAttr(*this)) ||
      failed(expectLinearWeight(*this, getLayout(), getWeight(), "weight")))
    return failure();
  auto w = shapeOf(getWeight());
  auto [inF, outF] = linearDims(getLayout(), w);
  auto dy = shapeOf(getGrad());
  if (dy.empty() || !dimMatches(dy.back(), outF))
    return emitOpError() << "gradient " << shapeStr(dy) << " must end in " << dimStr(outF)
                         << " to match the weight " << shapeStr(w);
  SmallVector<int64_t> expected(dy.begin(), dy.end());
  expected.back() = inF;
  return expectResultShape(*this, expected);
}

LogicalResult LinearGradWeightOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  auto dy = shapeOf(getGrad()), x = shapeOf(getInput());
  if (dy.size() != x.size() || dy.empty())
    return emitOpError() << "gradient " << shapeStr(dy) << " and input " << shapeStr(x)
                         << " must have one rank";
  for (size_t i = 0; i + 1 < dy.size(); ++i)
    if (!dimMatches(dy[i], x[i]))
      return emitOpError() << "gradient " << shapeStr(dy) << " and input " << shapeStr(x)
                           << " must agree on all but the last dimension";
  // The result is the weight's gradient, shaped as the weight: [out, d1, ...,
  // dk] for an out_in weight of more dimensions.
  if (failed(expectLinearWeight(*this, getLayout(), getResult(), "result")))
    return failure();
  auto r = shapeOf(getResult());
  if (r.size() > 2) {
    auto [inF, outF] = linearDims(getLayout(), r);
    if (!dimMatches(outF, dy.back()) || !dimMatches(inF, x.back()))
      return emitOpError() << "result " << shapeStr(r) << " must be [" << dimStr(dy.back())
                           << ", ...] with trailing dimensions of " << dimStr(x.back())
                           << " elements";
    return success();
  }
  SmallVector<int64_t> expected = getLayout() == WeightLayout::in_out
                                      ? SmallVector<int64_t>{x.back(), dy.back()}
                                      : SmallVector<int64_t>{dy.back(), x.back()};
  return expectResultShape(*this, expected);
}

LogicalResult BiasGradOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  auto dy = shapeOf(getGrad());
  if (dy.empty())
    return emitOpError() << "gradient must have rank >= 1";
  return expectResultShape(*this, {dy.back()});
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectRank(*this, getGrad(), "gradient", 3)) ||
      failed(expectRank(*this, getIds(), "ids", 2)) ||
      failed(expectRank(*this, getResult(), "result", 2)))
    return failure();
  auto dy = shapeOf(getGrad()), ids = shapeOf(getIds());
  if (!dimMatches(dy[0], ids[0]) || !dimMatches(dy[1], ids[1]))
    return emitOpError() << "gradient " << shapeStr(dy) << " must match the ids " << shapeStr(ids);
  if (!getResult().getType().hasStaticShape() || !dimMatches(shapeOf(getResult())[1], dy[2]))
    return emitOpError() << "result must be a static [V, " << dimStr(dy[2]) << "] table, but it is "
                         << shapeStr(shapeOf(getResult()));
  return success();
}

namespace {
// A norm's gradient: dy and dx shaped like x, the parameter gradients like
// the weight, which matches x's last dimension.
LogicalResult verifyNormGrad(Operation *op, Value grad, Value input, Value weight, Value inputGrad,
                             ArrayRef<std::pair<Value, StringRef>> paramGrads,
                             bool rowsOfWeight = false) {
  if (failed(verifyModuleAttr(op)) || failed(expectType(op, grad, input.getType(), "gradient")) ||
      failed(expectType(op, inputGrad, input.getType(), "input gradient")))
    return failure();
  for (auto [g, what] : paramGrads)
    if (failed(expectType(op, g, weight.getType(), what)))
      return failure();
  if (rowsOfWeight)
    return expectRMSNormWeight(op, input, weight);
  auto d = staticLastDim(op, input, "input");
  if (failed(d))
    return failure();
  return expectVector(op, weight, "weight", *d);
}
} // namespace

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getGrad(), getInput(), getWeight(), getInputGrad(),
                        {{getWeightGrad(), "weight gradient"}, {getBiasGrad(), "bias gradient"}});
}

LogicalResult RMSNormGradOp::verify() {
  return verifyNormGrad(*this, getGrad(), getInput(), getWeight(), getInputGrad(),
                        {{getWeightGrad(), "weight gradient"}}, /*rowsOfWeight=*/true);
}

LogicalResult ConcatOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  if (getParts().size() < 2)
    return emitOpError() << "needs at least 2 parts, but has " << getParts().size();
  auto first = shapeOf(getParts()[0]);
  if (first.empty())
    return emitOpError() << "parts must have rank >= 1";
  int64_t total = 0;
  for (Value p : getParts()) {
    auto s = shapeOf(p);
    if (s.size() != first.size() || !shapeMatches(s.drop_back(), first.drop_back()))
      return emitOpError() << "parts " << shapeStr(first) << " and " << shapeStr(s)
                           << " must agree on all but the last dimension";
    if (ShapedType::isDynamic(s.back()))
      return emitOpError() << "parts must have a static last dimension";
    if (failed(expectSameElementType(*this, getResult(), p, "a part")))
      return failure();
    total += s.back();
  }
  SmallVector<int64_t> expected(first.begin(), first.end());
  expected.back() = total;
  return expectResultShape(*this, expected);
}

namespace {
// An attention gradient's operands and results have the forward's types.
template <typename Op> LogicalResult expectAttentionGradTypes(Op op) {
  Type q = op.getQuery().getType();
  return failure(
      failed(expectType(op, op.getGrad(), q, "gradient")) ||
      failed(expectType(op, op.getOutput(), q, "output")) ||
      failed(expectType(op, op.getQueryGrad(), q, "query gradient")) ||
      failed(expectType(op, op.getKeyGrad(), op.getKey().getType(), "key gradient")) ||
      failed(expectType(op, op.getValueGrad(), op.getValue().getType(), "value gradient")));
}
} // namespace

LogicalResult CausalAttentionGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectAttentionRanks(*this)) ||
      failed(expectAttentionGradTypes(*this)) || failed(verifyWindow(*this, getWindow())))
    return failure();
  return verifyHeads(*this, getQuery(), getKey(), getValue(), getNumHeadsAttr().getInt(),
                     getNumKvHeadsAttr().getInt());
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(verifyNoWindow(*this)) ||
      failed(expectAttentionRanks(*this)) || failed(expectAttentionGradTypes(*this)))
    return failure();
  return verifyHeads(*this, getQuery(), getKey(), getValue(), getNumHeadsAttr().getInt(),
                     getNumKvHeadsAttr().getInt());
}

LogicalResult GeluGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(verifyApproximate(*this, getApproximate())) ||
      failed(expectType(*this, getGrad(), getInput().getType(), "gradient")))
    return failure();
  return expectType(*this, getResult(), getInput().getType(), "result");
}

LogicalResult SiluMulGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) ||
      failed(expectType(*this, getUp(), getGate().getType(), "up")) ||
      failed(expectType(*this, getGrad(), getGate().getType(), "gradient")) ||
      failed(expectType(*this, getGateGrad(), getGate().getType(), "gate gradient")))
    return failure();
  return expectType(*this, getUpGrad(), getGate().getType(), "up gradient");
}

LogicalResult ClassTokenGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) ||
      failed(verifyClassToken(*this, getInputGrad(), getClsGrad(), getPositionsGrad(), getGrad(),
                              "input gradient", "gradient")))
    return failure();
  return success();
}

LogicalResult FirstTokenGradOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  return verifyFirstToken(*this, getResult(), getGrad(), "result", "gradient");
}

#define GET_OP_CLASSES
#include "dialect/NN/NNOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

namespace {
/// [B, S, k] routing tensors (weights, experts, slots) of a [B, S, ...] token
/// tensor: rank 3, the token tensor's batch and sequence, a static k >= 1.
LogicalResult expectRouting(Operation *op, Value v, StringRef what, ArrayRef<int64_t> tokens,
                            int64_t k = ShapedType::kDynamic) {
  if (failed(expectRank(op, v, what, 3)))
    return failure();
  auto s = shapeOf(v);
  if (!dimMatches(s[0], tokens[0]) || !dimMatches(s[1], tokens[1]))
    return op->emitOpError() << what << " " << shapeStr(s) << " must match the batch and sequence "
                             << shapeStr(tokens.take_front(2));
  if (ShapedType::isDynamic(s[2]) || s[2] < 1)
    return op->emitOpError() << what << " " << shapeStr(s)
                             << " must have a static number of choices k >= 1";
  if (!ShapedType::isDynamic(k) && s[2] != k)
    return op->emitOpError() << what << " " << shapeStr(s) << " must have k = " << k << " choices";
  return success();
}

/// A packed buffer [B, S, k, W] of the routing tensor `routing` [B, S, k].
LogicalResult expectPacked(Operation *op, Value v, StringRef what, Value routing) {
  if (failed(expectRank(op, v, what, 4)))
    return failure();
  auto s = shapeOf(v), r = shapeOf(routing);
  if (!shapeMatches(s.take_front(3), r) || ShapedType::isDynamic(s[3]))
    return op->emitOpError() << what << " " << shapeStr(s)
                             << " must be [B, S, k, W] with [B, S, k] = " << shapeStr(r)
                             << " and a static W";
  return success();
}

/// moe_linear's E expert weights: each [out, in], all one shape and dtype.
FailureOr<std::pair<int64_t, int64_t>> expectExpertWeights(Operation *op, ValueRange weights,
                                                           Value like) {
  if (weights.size() < 2)
    return op->emitOpError() << "needs the weights of at least 2 experts, but has "
                             << weights.size();
  auto first = shapeOf(weights[0]);
  for (auto [e, w] : llvm::enumerate(weights)) {
    auto s = shapeOf(w);
    if (s.size() != 2 || ShapedType::isDynamic(s[0]) || ShapedType::isDynamic(s[1]))
      return op->emitOpError() << "expert " << e
                               << "'s weight must be a static [out, in], but it is " << shapeStr(s);
    if (s != first)
      return op->emitOpError() << "expert " << e << "'s weight " << shapeStr(s)
                               << " differs from expert 0's " << shapeStr(first);
    if (failed(expectSameElementType(op, like, w, "an expert's weight")))
      return failure();
  }
  return std::make_pair(first[0], first[1]);
}

LogicalResult expectIndex(Operation *op, Value v, StringRef what) {
  if (!elemOf(v).isSignlessInteger(64))
    return op->emitOpError() << what << " must hold i64 indices, but holds " << elemOf(v);
  return success();
}

/// Router logits [B, S, E], E >= 2 static, and k <= E.
FailureOr<int64_t> expectRouterLogits(Operation *op, Value logits, int64_t k) {
  if (failed(expectRank(op, logits, "logits", 3)))
    return failure();
  int64_t E = shapeOf(logits)[2];
  if (ShapedType::isDynamic(E) || E < 2)
    return op->emitOpError() << "logits " << shapeStr(shapeOf(logits))
                             << " must have a static number of experts E >= 2";
  if (k < 1 || k > E)
    return op->emitOpError() << "top_k = " << k << " must be in [1, E = " << E << "]";
  return E;
}
} // namespace

LogicalResult MoeRouteOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  int64_t k = getTopK();
  auto E = expectRouterLogits(*this, getLogits(), k);
  if (failed(E))
    return failure();
  auto l = shapeOf(getLogits());
  if (failed(expectRouting(*this, getWeights(), "weights", l, k)) ||
      failed(expectRouting(*this, getExperts(), "experts", l, k)) ||
      failed(expectRouting(*this, getSlots(), "slots", l, k)) ||
      failed(expectSameElementType(*this, getLogits(), getWeights(), "weights")) ||
      failed(expectIndex(*this, getExperts(), "experts")) ||
      failed(expectIndex(*this, getSlots(), "slots")))
    return failure();
  return success();
}

LogicalResult MoePermuteOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectRank(*this, getInput(), "input", 3)))
    return failure();
  auto x = shapeOf(getInput());
  if (failed(expectRouting(*this, getSlots(), "slots", x)) ||
      failed(expectIndex(*this, getSlots(), "slots")) ||
      failed(expectSameElementType(*this, getInput(), getResult(), "result")))
    return failure();
  auto k = shapeOf(getSlots())[2];
  return expectResultShape(*this, {x[0], x[1], k, x[2]});
}

LogicalResult MoeLinearOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  if (failed(expectIndex(*this, getExperts(), "experts")) ||
      failed(expectRank(*this, getExperts(), "experts", 3)) ||
      failed(expectPacked(*this, getInput(), "input", getExperts())) ||
      failed(expectSameElementType(*this, getInput(), getResult(), "result")))
    return failure();
  auto w = expectExpertWeights(*this, getWeights(), getInput());
  if (failed(w))
    return failure();
  auto x = shapeOf(getInput());
  if (x[3] != w->second)
    return emitOpError() << "the input's rows have " << x[3]
                         << " features, but the experts' weights "
                         << shapeStr({w->first, w->second}) << " take " << w->second;
  return expectResultShape(*this, {x[0], x[1], x[2], w->first});
}

namespace {
/// moe_combine's operands (and its gradient's): packed rows [B, S, k, D],
/// their weights [B, S, k] of the rows' dtype, i64 slots [B, S, k]; `y` (the
/// result, or the gradient's dy) is [B, S, D] of that dtype.
LogicalResult verifyCombine(Operation *op, Value input, Value weights, Value slots, Value y,
                            StringRef yWhat) {
  if (failed(verifyModuleAttr(op)) || failed(expectRank(op, slots, "slots", 3)) ||
      failed(expectIndex(op, slots, "slots")) || failed(expectPacked(op, input, "input", slots)))
    return failure();
  auto x = shapeOf(input);
  if (failed(expectRouting(op, weights, "weights", x, x[2])) ||
      failed(expectSameElementType(op, input, weights, "weights")) ||
      failed(expectSameElementType(op, input, y, yWhat)))
    return failure();
  if (!shapeMatches(shapeOf(y), {x[0], x[1], x[3]}))
    return op->emitOpError() << yWhat << " " << shapeStr(shapeOf(y)) << " must be "
                             << shapeStr({x[0], x[1], x[3]});
  return success();
}
} // namespace

LogicalResult MoeCombineOp::verify() {
  return verifyCombine(*this, getInput(), getWeights(), getSlots(), getResult(), "result");
}

namespace {
/// The load-balancing loss's weight: finite and non-negative.
LogicalResult expectCoef(Operation *op, double c) {
  if (!std::isfinite(c) || c < 0)
    return op->emitOpError() << "coef must be finite and >= 0, but is " << c;
  return success();
}

/// The router logits of the sparse layers: at least one, one shape.
LogicalResult expectLayersLogits(Operation *op, ValueRange logits, int64_t k) {
  if (logits.empty())
    return op->emitOpError() << "needs the router logits of at least one layer";
  for (auto [i, l] : llvm::enumerate(logits)) {
    if (failed(expectRouterLogits(op, l, k)))
      return failure();
    if (l.getType() != logits[0].getType())
      return op->emitOpError() << "layer " << i << "'s logits " << l.getType()
                               << " differ from layer 0's " << logits[0].getType();
  }
  return success();
}
} // namespace

LogicalResult MoeAuxLossOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectLayersLogits(*this, getLogits(), getTopK())))
    return failure();
  return expectCoef(*this, getCoef().convertToDouble());
}

LogicalResult MoeRouteGradOp::verify() {
  if (failed(verifyModuleAttr(*this)))
    return failure();
  if (failed(expectRank(*this, getExperts(), "experts", 3)))
    return failure();
  int64_t k = shapeOf(getExperts())[2];
  if (ShapedType::isDynamic(k))
    return emitOpError() << "experts " << shapeStr(shapeOf(getExperts()))
                         << " must have a static number of choices k";
  if (failed(expectRouterLogits(*this, getLogits(), k)))
    return failure();
  auto l = shapeOf(getLogits());
  if (failed(expectRouting(*this, getExperts(), "experts", l)) ||
      failed(expectIndex(*this, getExperts(), "experts")) ||
      failed(expectRouting(*this, getGrad(), "grad", l, k)) ||
      failed(expectSameElementType(*this, getLogits(), getGrad(), "grad")))
    return failure();
  return expectResultLike(*this, getLogits(), "logits");
}

LogicalResult MoePermuteGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectRank(*this, getSlots(), "slots", 3)) ||
      failed(expectIndex(*this, getSlots(), "slots")) ||
      failed(expectPacked(*this, getGrad(), "grad", getSlots())) ||
      failed(expectSameElementType(*this, getGrad(), getResult(), "result")))
    return failure();
  auto g = shapeOf(getGrad());
  return expectResultShape(*this, {g[0], g[1], g[3]});
}

LogicalResult MoeLinearGradInputOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectIndex(*this, getExperts(), "experts")) ||
      failed(expectRank(*this, getExperts(), "experts", 3)) ||
      failed(expectPacked(*this, getGrad(), "grad", getExperts())) ||
      failed(expectSameElementType(*this, getGrad(), getResult(), "result")))
    return failure();
  auto w = expectExpertWeights(*this, getWeights(), getGrad());
  if (failed(w))
    return failure();
  auto g = shapeOf(getGrad());
  if (g[3] != w->first)
    return emitOpError() << "the gradient's rows have " << g[3] << " features, but the experts' "
                         << "weights " << shapeStr({w->first, w->second}) << " give " << w->first;
  return expectResultShape(*this, {g[0], g[1], g[2], w->second});
}

LogicalResult MoeLinearGradWeightOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectIndex(*this, getExperts(), "experts")) ||
      failed(expectRank(*this, getExperts(), "experts", 3)) ||
      failed(expectPacked(*this, getGrad(), "grad", getExperts())) ||
      failed(expectPacked(*this, getInput(), "input", getExperts())) ||
      failed(expectSameElementType(*this, getGrad(), getInput(), "input")))
    return failure();
  auto w = expectExpertWeights(*this, getResults(), getGrad());
  if (failed(w))
    return failure();
  if (shapeOf(getGrad())[3] != w->first || shapeOf(getInput())[3] != w->second)
    return emitOpError() << "the weights' gradients " << shapeStr({w->first, w->second})
                         << " must be [grad's features, input's features]";
  return success();
}

LogicalResult MoeCombineGradOp::verify() {
  if (failed(verifyCombine(*this, getInput(), getWeights(), getSlots(), getGrad(), "grad")))
    return failure();
  if (getInputGrad().getType() != getInput().getType() ||
      getWeightsGrad().getType() != getWeights().getType())
    return emitOpError() << "the gradients must have the types of the input and the weights";
  return success();
}

LogicalResult MoeAuxLossGradOp::verify() {
  if (failed(verifyModuleAttr(*this)) || failed(expectLayersLogits(*this, getLogits(), getTopK())))
    return failure();
  if (getResults().size() != getLogits().size())
    return emitOpError() << "must give one gradient per layer's logits";
  for (auto [l, r] : llvm::zip(getLogits(), getResults()))
    if (l.getType() != r.getType())
      return emitOpError() << "each gradient must have its logits' type " << l.getType();
  return expectCoef(*this, getCoef().convertToDouble());
}

CrossEntropyOp fsdp::nn::lossCrossEntropy(Value loss) {
  if (auto aux = loss.getDefiningOp<MoeAuxLossOp>())
    loss = aux.getLoss();
  return loss.getDefiningOp<CrossEntropyOp>();
}

bool fsdp::nn::isLossOp(Operation *op) { return isa<CrossEntropyOp, MoeAuxLossOp>(op); }
