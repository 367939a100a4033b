//===- FSDPDialect.cpp - the plan dialect ---------------------------------===//
#include "dialect/FSDP/FSDPDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fsdp::plan;

#include "dialect/FSDP/FSDPDialect.cpp.inc"
#include "dialect/FSDP/FSDPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/FSDP/FSDPAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/FSDP/FSDPTypes.cpp.inc"

void FSDPDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/FSDP/FSDPAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialect/FSDP/FSDPTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialect/FSDP/FSDPOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Names, attributes and traits
//===----------------------------------------------------------------------===//

namespace {
struct StrategyName {
  Strategy strategy;
  const char *flag;
};
constexpr StrategyName kStrategyNames[] = {{Strategy::FullShard, "full-shard"},
                                           {Strategy::ShardGradOp, "shard-grad-op"},
                                           {Strategy::NoShard, "no-shard"},
                                           {Strategy::HybridShard, "hybrid-shard"}};
} // namespace

StringRef fsdp::plan::strategyFlagName(Strategy strategy) {
  for (const StrategyName &n : kStrategyNames)
    if (n.strategy == strategy)
      return n.flag;
  llvm_unreachable("a strategy without a name");
}

std::optional<Strategy> fsdp::plan::parseStrategyFlagName(StringRef name) {
  for (const StrategyName &n : kStrategyNames)
    if (name == n.flag)
      return n.strategy;
  return std::nullopt;
}

std::optional<NamedAttribute> fsdp::plan::undeclaredAttr(Operation *op) {
  for (NamedAttribute a : op->getDiscardableAttrs())
    if (!a.getName().getValue().contains('.'))
      return a;
  return std::nullopt;
}

LogicalResult MemoryAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t peak,
                                 int64_t livePeak, int64_t params, int64_t grads, int64_t optimizer,
                                 int64_t unsharded, int64_t activations, int64_t fragmentation) {
  for (auto [name, bytes] : {std::pair<const char *, int64_t>{"peak_bytes", peak},
                             {"live_peak_bytes", livePeak},
                             {"params_bytes", params},
                             {"grads_bytes", grads},
                             {"optimizer_bytes", optimizer},
                             {"unsharded_bytes", unsharded},
                             {"activations_bytes", activations},
                             {"fragmentation_bytes", fragmentation}})
    if (bytes < 0)
      return emitError() << "memory figure '" << name << "' must be at least 0, but is " << bytes;
  return success();
}

//===----------------------------------------------------------------------===//
// UnitOp
//===----------------------------------------------------------------------===//

LogicalResult UnitOp::verify() {
  int64_t n = getParams().size();
  if ((int64_t)getOffsets().size() != n || (int64_t)getSizes().size() != n)
    return emitOpError() << "has " << n << " params but " << getOffsets().size() << " offsets and "
                         << getSizes().size() << " sizes";
  int64_t expected = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (getOffsets()[i] != expected)
      return emitOpError() << "parameter " << cast<StringAttr>(getParams()[i])
                           << " must start at element " << expected << ", but starts at "
                           << getOffsets()[i];
    if (getSizes()[i] <= 0)
      return emitOpError() << "parameter " << cast<StringAttr>(getParams()[i]) << " has size "
                           << getSizes()[i];
    expected += getSizes()[i];
  }
  int64_t numel = getNumelAttr().getInt(), padded = getPaddedNumelAttr().getInt();
  int64_t count = getShardSizeAttr().getInt();
  if (numel != expected)
    return emitOpError() << "numel = " << numel << " but its parameters hold " << expected;
  if (count <= 0)
    return emitOpError() << "shard_size must be positive, but is " << count;
  if (padded < numel || padded % count != 0 || padded - numel >= count)
    return emitOpError() << "padded_numel = " << padded
                         << " must be the least multiple of shard_size = " << count
                         << " that holds numel = " << numel;
  // Tensor parallelism: each parameter's piece, all four arrays or none.
  bool anyTp = getTpDims() || getTpPieces() || getTpSections() || getTpPartial();
  if (anyTp) {
    if (!getTpDims() || !getTpPieces() || !getTpSections() || !getTpPartial())
      return emitOpError() << "has some of tp_dims, tp_pieces, tp_sections and tp_partial; "
                              "a tensor-parallel unit has all four";
    if ((int64_t)getTpDims()->size() != n || (int64_t)getTpPieces()->size() != n ||
        (int64_t)getTpSections()->size() != n || (int64_t)getTpPartial()->size() != n)
      return emitOpError() << "has " << n
                           << " params, and tp_dims, tp_pieces, tp_sections and tp_partial must "
                              "have one entry each";
    for (int64_t i = 0; i < n; ++i) {
      int64_t dim = (*getTpDims())[i], pieces = (*getTpPieces())[i];
      int64_t sections = (*getTpSections())[i];
      if (pieces < 1 || sections < 1 || dim < -1 || (dim == -1) != (pieces == 1))
        return emitOpError() << "parameter " << cast<StringAttr>(getParams()[i]) << " has tp_dims "
                             << dim << ", tp_pieces " << pieces << " and tp_sections " << sections
                             << ": a parameter in pieces (more than 1) is cut along a dimension "
                                "(>= 0), a whole one (1) along none (-1), in sections >= 1";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// StepOp
//===----------------------------------------------------------------------===//

ParseResult StepOp::parse(OpAsmParser &parser, OperationState &result) {
  auto buildType = [](Builder &b, ArrayRef<Type> args, ArrayRef<Type> results,
                      function_interface_impl::VariadicFlag,
                      std::string &) { return b.getFunctionType(args, results); };
  SMLoc loc = parser.getCurrentLocation();
  if (function_interface_impl::parseFunctionOp(
          parser, result, /*allowVariadic=*/false, getFunctionTypeAttrName(result.name), buildType,
          getArgAttrsAttrName(result.name), getResAttrsAttrName(result.name)))
    return failure();
  // The settings arrive in the `attributes {...}` dictionary; one of the
  // wrong kind (`world_size = "4"`) would otherwise become no setting at all.
  return verifyInherentAttrs(result.name, result.attributes,
                             [&]() { return parser.emitError(loc); });
}

void StepOp::print(OpAsmPrinter &p) {
  function_interface_impl::printFunctionOp(p, *this, /*isVariadic=*/false,
                                           getFunctionTypeAttrName(), getArgAttrsAttrName(),
                                           getResAttrsAttrName());
}

LogicalResult StepOp::verify() {
  // The mesh: tp divides the world; the data-parallel dimension comes in
  // whole shard groups; the strategy fixes the group's size.
  int64_t world = getWorldSizeOr1(), group = getShardSizeOr1(), tp = getTpOr1();
  if (world % tp != 0)
    return emitOpError() << "tp " << tp << " must divide world_size " << world;
  int64_t dp = world / tp;
  if (dp % group != 0)
    return emitOpError() << "shard_size " << group << " must divide world_size " << world
                         << (tp > 1 ? " / tp " + std::to_string(tp) : std::string());
  if (std::optional<Strategy> strategy = getStrategy()) {
    if ((*strategy == Strategy::FullShard || *strategy == Strategy::ShardGradOp) && group != dp)
      return emitOpError() << "shards over the whole world with strategy "
                           << stringifyStrategy(*strategy) << ", but shard_size " << group
                           << " is not world_size " << world
                           << (tp > 1 ? " / tp " + std::to_string(tp) : std::string());
    if (*strategy == Strategy::NoShard && group != 1)
      return emitOpError() << "replicates every parameter with strategy no_shard, but "
                              "shard_size is "
                           << group;
  }
  // Resharded after forward to groups of N consecutive ranks: a group lies
  // within a shard group and is smaller (N = shard_size is full-shard).
  if (std::optional<int64_t> n = getReshardAfterForward()) {
    if (*n < 2 || group % *n != 0 || *n >= group)
      return emitOpError() << "reshards after forward to groups of " << *n
                           << " ranks, which must be at least 2, divide shard_size " << group
                           << " and be smaller";
    if (std::optional<Strategy> strategy = getStrategy();
        strategy && *strategy != Strategy::FullShard && *strategy != Strategy::HybridShard)
      return emitOpError() << "reshards after forward to groups of " << *n
                           << " ranks, but strategy " << stringifyStrategy(*strategy)
                           << " does not reshard after forward";
    if (keepsGatheredAcrossMicroSteps())
      return emitOpError() << "reshards after forward to groups of " << *n
                           << " ranks, but reshard_after_backward = false keeps every gathered "
                              "unit all step";
  }
  // offload = all: a unit's parameters reach the device by its gathers;
  // with shard groups of one (no-shard) compute reads the shard in place.
  if (offloadsParams() && group < 2)
    return emitOpError() << "offloads the parameter shards to the host, but with shard_size "
                         << group
                         << " compute reads them in place: offload = all needs a "
                            "strategy that gathers";
  // The host pool holds the offloaded state only.
  if (getHostBytes() && !offloadsOptimizer())
    return emitOpError() << "has a host pool of " << *getHostBytes()
                         << " bytes, but offloads nothing to the host";
  if (std::optional<int64_t> seq = getSeqLen(); seq && getMaxSeqLen() && *seq > *getMaxSeqLen())
    return emitOpError() << "seq_len " << *seq << " is past the model's max_seq_len "
                         << *getMaxSeqLen();
  // An image's sequence is its patches and the class token: max_seq_len.
  if (std::optional<int64_t> seq = getSeqLen();
      seq && getMaxSeqLen() && getInputsKind() == "images" && *seq != *getMaxSeqLen())
    return emitOpError() << "takes images, so its seq_len must be max_seq_len " << *getMaxSeqLen()
                         << " (the patches and the class token), but is " << *seq;
  if (std::optional<int64_t> n = getCheckpointedBlocks();
      n && getNumBlocks() && *n > *getNumBlocks())
    return emitOpError() << "checkpoints " << *n << " blocks of the model's " << *getNumBlocks();
  return success();
}

void StepOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  if (region.empty() || region.front().getNumArguments() != 2)
    return;
  bool images = getInputsKind() == "images";
  setNameFn(region.front().getArgument(0), images ? "patches" : "tokens");
  setNameFn(region.front().getArgument(1), images ? "labels" : "targets");
}

//===----------------------------------------------------------------------===//
// ReturnOp
//===----------------------------------------------------------------------===//

LogicalResult ReturnOp::verify() {
  auto results = (*this)->getParentOfType<StepOp>().getFunctionType().getResults();
  if (getOperands().size() != results.size())
    return emitOpError() << "returns " << getOperands().size() << " values, but the step declares "
                         << results.size();
  for (auto [v, t] : llvm::zip(getOperands(), results))
    if (v.getType() != t)
      return emitOpError() << "returns " << v.getType() << ", but the step declares " << t;
  return success();
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  if (!getParam().getDefiningOp() ||
      getParam().getDefiningOp()->getName().getStringRef() != "nn.param")
    return emitOpError() << "reads a parameter (an nn.param)";
  auto from = cast<RankedTensorType>(getParam().getType());
  auto to = cast<RankedTensorType>(getResult().getType());
  if (from.getShape() != to.getShape() || !from.getElementType().isF32() ||
      !(to.getElementType().isF32() || to.getElementType().isBF16()))
    return emitOpError() << "casts an f32 parameter to f32 or bf16 of its shape, not "
                         << getParam().getType() << " to " << getResult().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// AllGatherOp, ReduceScatterOp
//===----------------------------------------------------------------------===//

// A collective's dtype is the mixed-precision one; f32, the default, is
// written without one.
static LogicalResult verifyCollectiveDtype(Operation *op, std::optional<Dtype> dtype) {
  if (dtype && *dtype != Dtype::BF16)
    return op->emitOpError() << "runs in bf16 or, without a dtype, in f32; 'in "
                             << stringifyDtype(*dtype) << "' is not written";
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (std::optional<Group> g = getGroup()) {
    if (*g != Group::reshard)
      return emitOpError() << "gathers over the shard group (written without a group) or over "
                              "reshard, not over "
                           << stringifyGroup(*g);
    if (!(*this)->getParentOfType<StepOp>().getReshardAfterForward())
      return emitOpError() << "gathers over the reshard group, which only a step with "
                              "reshard_after_forward = N has";
  }
  return verifyCollectiveDtype(*this, getDtype());
}

LogicalResult ReduceScatterOp::verify() { return verifyCollectiveDtype(*this, getDtype()); }

LogicalResult AllReduceOp::verify() {
  if (std::optional<Group> g = getGroup()) {
    if (*g != Group::tp)
      return emitOpError() << "sums over the replica group (written without a group) or over tp, "
                              "not over "
                           << stringifyGroup(*g);
    if ((*this)->getParentOfType<StepOp>().getTpOr1() < 2)
      return emitOpError() << "sums over the tp group, which only a step with tp = N > 1 has";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// TpCopyOp, TpAllReduceOp
//===----------------------------------------------------------------------===//

// In the model's graph (fsdp-tensor-parallel places them) or the step
// built from it; a step's tp, once set, is at least 2.
static LogicalResult verifyTpPlace(Operation *op) {
  Operation *parent = op->getParentOp();
  if (!parent || (parent->getName().getStringRef() != "nn.graph" && !isa<StepOp>(parent)))
    return op->emitOpError() << "belongs to an nn.graph or an fsdp.step";
  if (auto step = dyn_cast<StepOp>(parent); step && step.getTp() && *step.getTp() < 2)
    return op->emitOpError() << "is a tensor-parallel collective in a step of tp " << *step.getTp();
  return success();
}

LogicalResult TpCopyOp::verify() { return verifyTpPlace(*this); }

LogicalResult TokenShardAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t parts) {
  if (parts < 2)
    return emitError() << "a token shard is one of at least 2 parts, not " << parts;
  return success();
}

// `whole` and `part` are one tensor whole and as a rank's part of its
// tokens: the same shape and element type, `part` encoded token_shard<N>.
static LogicalResult verifyTokenParts(Operation *op, Type whole, Type part) {
  auto w = cast<RankedTensorType>(whole), p = cast<RankedTensorType>(part);
  auto shard = dyn_cast_or_null<TokenShardAttr>(p.getEncoding());
  if (w.getEncoding() || !shard || w.getShape() != p.getShape() ||
      w.getElementType() != p.getElementType() || w.getRank() < 2 ||
      !ShapedType::isDynamic(w.getShape()[0]) || !ShapedType::isDynamic(w.getShape()[1]))
    return op->emitOpError() << "relates a whole [batch, sequence, ...] tensor and a rank's part "
                                "of its tokens (the same type, encoded #fsdp.token_shard<N>), not "
                             << whole << " and " << part;
  if (auto step = op->getParentOfType<StepOp>();
      step && step.getTp() && *step.getTp() != shard.getParts())
    return op->emitOpError() << "cuts the tokens into " << shard.getParts()
                             << " parts in a step of tp " << *step.getTp();
  return verifyTpPlace(op);
}

LogicalResult TpAllGatherOp::verify() {
  return verifyTokenParts(*this, getResult().getType(), getInput().getType());
}

LogicalResult TpUnchunkOp::verify() {
  return verifyTokenParts(*this, getResult().getType(), getInput().getType());
}

LogicalResult TpChunkOp::verify() {
  return verifyTokenParts(*this, getInput().getType(), getResult().getType());
}

// A row-parallel sum: of activations with a static last dimension, and
// its bias, if any, of that dimension and element type.
static LogicalResult verifySumAndBias(Operation *op, Value input, Value bias) {
  auto type = cast<RankedTensorType>(input.getType());
  if (type.getRank() < 1 || ShapedType::isDynamic(type.getShape().back()))
    return op->emitOpError() << "sums activations with a static last dimension, not " << type;
  if (!bias)
    return success();
  auto bt = cast<RankedTensorType>(bias.getType());
  if (bt.getRank() != 1 || bt.getShape()[0] != type.getShape().back() ||
      bt.getElementType() != type.getElementType())
    return op->emitOpError() << "adds a bias of the last dimension " << type.getShape().back()
                             << " in " << type.getElementType() << ", not " << bt;
  return success();
}

LogicalResult TpReduceScatterOp::verify() {
  if (failed(verifyTokenParts(*this, getInput().getType(), getResult().getType())))
    return failure();
  return verifySumAndBias(*this, getInput(), getBias());
}

LogicalResult TpAllReduceOp::verify() {
  if (failed(verifySumAndBias(*this, getInput(), getBias())))
    return failure();
  return verifyTpPlace(*this);
}

//===----------------------------------------------------------------------===//
// AllocOp
//===----------------------------------------------------------------------===//

LogicalResult AllocOp::verify() {
  if (getKind() != BufferKind::grads)
    return emitOpError() << "only gradient buffers are allocated explicitly; parameters "
                            "come to life with their all_gather";
  return success();
}

//===----------------------------------------------------------------------===//
// ReshardOp
//===----------------------------------------------------------------------===//

LogicalResult ReshardOp::verify() {
  if (!(*this)->getParentOfType<StepOp>().getReshardAfterForward())
    return emitOpError() << "keeps a 1/N copy of gathered parameters, which only a step with "
                            "reshard_after_forward = N does";
  return success();
}

//===----------------------------------------------------------------------===//
// AccumulateOp
//===----------------------------------------------------------------------===//

LogicalResult AccumulateOp::verify() {
  if (!(*this)->getParentOfType<StepOp>().syncsAtLastMicroStep())
    return emitOpError() << "accumulates gradients across micro-steps, which only a step with "
                            "grad_sync = last does (with every, each micro-step reduces them)";
  return success();
}

#define GET_OP_CLASSES
#include "dialect/FSDP/FSDPOps.cpp.inc"
