//===- LowerToProgram.cpp - per-stream instruction lists with events ------===//
//
// Every collective is issued at its place in the program: the compute stream
// records an event there, the comm stream waits for it, runs the collective
// and records its completion, which a later `fsdp.wait` waits for.
//
//===----------------------------------------------------------------------===//
#include "planner/LowerToProgram.h"
#include "planner/Buffers.h"
#include "planner/Import/Families/Family.h"
#include "runtime/Program.h"
#include "runtime/Scratch.h"
#include "runtime/StreamOrder.h"
#include "support/InputFile.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <set>

using namespace mlir;
using namespace fsdp;
using program::Instruction;
using POp = program::Op;

namespace {

std::string dtypeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  cast<ShapedType>(t).getElementType().print(os);
  return s;
}

// A program tensor's dtype (checkProgramDtypes has allowed only these).
program::DType programDtype(StringRef name) {
  return name == "i64"    ? program::DType::I64
         : name == "bf16" ? program::DType::BF16
                          : program::DType::F32;
}

class Lowering {
public:
  Lowering(ModuleOp module, plan::StepOp step) : module(module), step(step) {}
  LogicalResult run(raw_ostream &os);

private:
  int64_t tensorId(ArrayRef<int64_t> shape, StringRef dtype, int64_t offset);
  FailureOr<int64_t> operand(Value v, Operation *user);
  LogicalResult lowerCompute(Operation &op, std::vector<Instruction> &compute);

  ModuleOp module;
  plan::StepOp step;
  int64_t B = 0, S = 0;
  std::vector<plan::UnitOp> units;
  llvm::StringMap<plan::UnitOp> byParam;
  llvm::StringMap<int64_t> unitIndex;
  DenseMap<Operation *, int64_t> gatherOffset;    // unit -> live gathered buffer
  DenseMap<Operation *, int64_t> reshardedOffset; // unit -> live resharded copy
  DenseSet<Operation *> gatheredBf16;             // units gathered in bf16
  DenseMap<Operation *, int64_t> gradsPerUnit;    // parameters with a gradient
  DenseMap<Operation *, int64_t> gradOffset;      // unit -> live gradient buffer
  DenseMap<Value, int64_t> valueTensor;
  std::map<std::tuple<int64_t, std::string, std::vector<int64_t>>, int64_t> tensorIds;
  program::Program prog;
  DenseMap<Value, int64_t> eventIds;
  int64_t numEvents = 0;
  StringRef blockPrefix;
  bool inBackward = false, inOptimizer = false;
};

int64_t Lowering::tensorId(ArrayRef<int64_t> shape, StringRef dtype, int64_t offset) {
  auto key = std::make_tuple(offset, dtype.str(), std::vector<int64_t>(shape.begin(), shape.end()));
  auto it = tensorIds.find(key);
  if (it != tensorIds.end())
    return it->second;
  int64_t id = prog.tensors.size();
  program::Tensor t;
  t.offset = offset;
  t.shape.assign(shape.begin(), shape.end());
  t.dtype = programDtype(dtype);
  prog.tensors.push_back(t);
  tensorIds[key] = id;
  return id;
}

// The tensor an operand reads: a value's buffer, or a view of a parameter
// in its unit's gathered buffer (or shard, for an unsharded unit).
FailureOr<int64_t> Lowering::operand(Value v, Operation *user) {
  if (auto id = valueTensor.find(v); id != valueTensor.end())
    return id->second;
  auto p = v.getDefiningOp<nn::ParamOp>();
  if (!p)
    return user->emitOpError() << "reads a value with no buffer";
  plan::UnitOp u = byParam.lookup(p.getName());
  if (!u)
    return p.emitOpError() << "is in no unit";
  int64_t base, elem = 4;
  std::string dtype = dtypeName(p.getType());
  if (u.getShardSize() == 1) {
    base = *u.getShardOffset();
  } else {
    if (gatheredBf16.count(u)) {
      elem = 2;
      dtype = "bf16";
    }
    auto it = gatherOffset.find(u);
    if (it == gatherOffset.end())
      return user->emitOpError() << "reads '" << p.getName() << "' while unit @" << u.getSymName()
                                 << " is not gathered";
    base = it->second;
  }
  int64_t idx = llvm::find(u.getParams(), p.getNameAttr()) - u.getParams().begin();
  return tensorId(p.getType().getShape(), dtype, base + u.getOffsets()[idx] * elem);
}

LogicalResult Lowering::lowerCompute(Operation &op, std::vector<Instruction> &compute) {
  Instruction inst;
  const program::OpInfo *info = program::findOp(op.getName().stripDialect().str());
  if (!info || info->stream != program::OpStream::Compute)
    return op.emitOpError() << "has no program instruction (runtime/Ops.def)";
  inst.op = info->op;
  if (auto m = op.getAttrOfType<StringAttr>("module"))
    inst.module = m.getValue().str();
  // What the kernel reads: the op's own attributes (eps, num_heads, layout,
  // ...). Another that a plan's op carries (`op = 1`, `in = 5`) is not the
  // op's to say; one the instruction cannot hold is an error, so that the
  // dialect and the program cannot drift apart.
  ArrayRef<StringAttr> inherent = op.getName().getAttributeNames();
  // A rope's scaling: its kind and its parameters, each its own attribute
  // (the verifier holds them whole).
  auto ropeScaling = [&]() -> support::RopeScaling & {
    if (!inst.ropeScaling)
      inst.ropeScaling.emplace();
    return *inst.ropeScaling;
  };
  auto setRopeScalingField = [&](StringRef n, Attribute v) {
    for (const support::RopeScalingField &field : support::ropeScalingFields()) {
      if (n != field.name)
        continue;
      auto f = dyn_cast<FloatAttr>(v);
      auto i = dyn_cast<IntegerAttr>(v);
      auto b = dyn_cast<BoolAttr>(v);
      if (field.type == support::RopeScalingField::Type::F64 && f)
        ropeScaling().*field.f64 = f.getValueAsDouble();
      else if (field.type == support::RopeScalingField::Type::I64 && i)
        ropeScaling().*field.i64 = i.getInt();
      else if (field.type == support::RopeScalingField::Type::Bool && b)
        ropeScaling().*field.boolean = b.getValue();
      else
        return false;
      return true;
    }
    return false;
  };
  for (NamedAttribute a : op.getAttrs()) {
    StringRef n = a.getName();
    if (n == "module" || n == "offsets" || n == "scratch_offset" || n == "recompute" ||
        !llvm::is_contained(inherent, a.getName()))
      continue;
    Attribute v = a.getValue();
    auto f = dyn_cast<FloatAttr>(v);
    auto i = dyn_cast<IntegerAttr>(v);
    if (auto l = dyn_cast<nn::WeightLayoutAttr>(v))
      inst.layoutInOut = l.getValue() == nn::WeightLayout::in_out;
    else if (n == "eps" && f)
      inst.eps = f.getValueAsDouble();
    else if (n == "theta" && f)
      inst.theta = f.getValueAsDouble();
    else if (n == "num_heads" && i)
      inst.numHeads = i.getInt();
    else if (n == "num_kv_heads" && i)
      inst.numKvHeads = i.getInt();
    else if (n == "window" && i)
      inst.window = i.getInt();
    else if (n == "approximate" && isa<StringAttr>(v) &&
             (cast<StringAttr>(v).getValue() == "tanh" || cast<StringAttr>(v).getValue() == "none"))
      inst.approximate = cast<StringAttr>(v).getValue() == "none" ? program::GeluApproximate::None
                                                                  : program::GeluApproximate::Tanh;
    else if (n == "inverse" && isa<UnitAttr, BoolAttr>(v))
      inst.inverse = !isa<BoolAttr>(v) || cast<BoolAttr>(v).getValue();
    else if (n == support::kRopeScalingKey && isa<StringAttr>(v) &&
             support::parseRopeScalingKind(cast<StringAttr>(v).getValue().str()))
      ropeScaling().kind = *support::parseRopeScalingKind(cast<StringAttr>(v).getValue().str());
    else if (setRopeScalingField(n, v))
      continue;
    else if (n == "top_k" && i)
      inst.topK = i.getInt();
    else if (n == "norm_topk_prob" && isa<UnitAttr>(v))
      inst.normTopkProb = true;
    else if (n == "coef" && f)
      inst.coef = f.getValueAsDouble();
    else
      return op.emitOpError() << "attribute '" << n << "' (" << v
                              << ") has no place in a program instruction";
  }
  for (Value v : op.getOperands()) {
    auto id = operand(v, &op);
    if (failed(id))
      return failure();
    inst.in.push_back(*id);
  }
  auto offs = op.getAttrOfType<DenseI64ArrayAttr>("offsets");
  if (!offs)
    return op.emitOpError() << "has no buffer offsets (run fsdp-memory-plan)";
  for (OpResult r : op.getResults()) {
    int64_t offset = offs[r.getResultNumber()];
    if (offset < 0) {
      // A complete gradient: written straight into its unit's gradient buffer.
      plan::GradOp g;
      for (Operation *user : r.getUsers())
        if (auto gg = dyn_cast<plan::GradOp>(user))
          g = gg;
      plan::UnitOp u = g ? byParam.lookup(g.getParam()) : plan::UnitOp();
      if (!u || !gradOffset.count(u))
        return op.emitOpError() << "writes a gradient with no gradient buffer";
      int64_t idx = llvm::find(u.getParams(), g.getParamAttr()) - u.getParams().begin();
      offset = gradOffset[u] + u.getOffsets()[idx] * elementBytes(r.getType());
    }
    int64_t id = tensorId(concreteShape(r.getType(), B, S), dtypeName(r.getType()), offset);
    valueTensor[r] = id;
    inst.out.push_back(id);
  }
  // For traces: the unit the op works for and its phase.
  std::string unit = unitNameOf(&op, byParam, blockPrefix);
  if (unitIndex.count(unit))
    inst.unit = unitIndex[unit];
  inst.phase = inOptimizer ? "optimizer" : inBackward ? "backward" : "forward";
  if (auto s = op.getAttrOfType<IntegerAttr>("scratch_offset")) {
    inst.scratch = s.getInt();
    FailureOr<int64_t> bytes = scratchBytes(&op, B, S);
    if (failed(bytes))
      return failure();
    inst.scratchBytes = *bytes;
  }
  compute.push_back(inst);
  return success();
}

/// The dtypes of a program's tensors (docs/program-format.md): what fsdp-run
/// executes. A model may hold others (f16, f64, i32) to be summarised and
/// planned, but not lowered.
bool isProgramDtype(Type t) {
  auto elem = cast<ShapedType>(t).getElementType();
  return elem.isF32() || elem.isBF16() || elem.isSignlessInteger(64);
}

LogicalResult checkProgramDtypes(plan::StepOp step) {
  const char *why = ", which a program does not hold (f32, bf16 and i64: what fsdp-run executes)";
  for (BlockArgument a : step.getBody().front().getArguments())
    if (isa<ShapedType>(a.getType()) && !isProgramDtype(a.getType()))
      return step.emitOpError() << "argument " << a.getArgNumber() << " is " << a.getType() << why;
  WalkResult walk = step.walk([&](Operation *op) {
    for (OpResult r : op->getResults())
      if (isa<ShapedType>(r.getType()) && !isProgramDtype(r.getType())) {
        op->emitOpError() << "result " << r.getResultNumber() << " is " << r.getType() << why;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// What lowering reads of a plan besides its ops, as the passes write it: a
/// hand-edited plan may lack any of it, and the program would not be whole.
LogicalResult checkLowerable(ModuleOp module, plan::StepOp step) {
  FunctionType type = step.getFunctionType();
  Block &block = step.getBody().front();
  if (type.getNumInputs() != 2 || type.getNumResults() != 1 || block.getNumArguments() != 2)
    return step.emitOpError() << "has type " << type
                              << "; a program's step takes the tokens and the targets and "
                                 "returns the loss";
  // Ranks are ints in the runtime (communicators, threads, MPI): the loader
  // takes at most 2^20, though a plan may be made for more to be predicted.
  if (int64_t world = step.getWorldSizeOr1(); world > program::kMaxRanks)
    return step.emitOpError() << "is for world_size " << world
                              << ", more ranks than fsdp-run runs (at most " << program::kMaxRanks
                              << ")";
  for (auto [name, value] : {std::pair{"model", step.getModelAttr()},
                             {"model_type", step.getModelTypeAttr()},
                             {"block_prefix", step.getBlockPrefixAttr()}})
    if (!value)
      return step.emitOpError() << "needs a string attribute '" << name << "' to be lowered";
  if (!step.getStrategy())
    return step.emitOpError() << "needs a 'strategy' to be lowered (run fsdp-insert-collectives)";
  // The tensor-parallel collectives move f32 activations only, so far.
  if (step.getTpOr1() > 1 && step.getComputeDtypeOrF32() != plan::Dtype::F32)
    return step.emitOpError() << "is tensor-parallel (tp " << step.getTpOr1()
                              << ") with bf16 compute, which fsdp-run does not run yet: it is not "
                                 "lowered to a program (fsdp-plan writes it as .mlir, --summary "
                                 "and --report; --compute-dtype f32 lowers)";
  for (auto [name, value] : {std::pair{"tokens_offset", step.getTokensOffset()},
                             {"targets_offset", step.getTargetsOffset()}})
    if (!value)
      return step.emitOpError() << "needs an integer attribute '" << name
                                << "' (run fsdp-memory-plan)";
  if (!step.getMemory())
    return step.emitOpError() << "needs the attribute 'memory' (run fsdp-memory-plan)";
  llvm::StringMap<nn::ParamOp> params;
  for (auto p : step.getBody().getOps<nn::ParamOp>())
    params[p.getName()] = p;
  for (plan::UnitOp u : getUnits(module)) {
    // offload = all: the parameter shard is the host pool's master copy.
    if (!step.offloadsParams() && !u.getShardOffset())
      return u.emitOpError() << "needs an integer attribute 'shard_offset' (run fsdp-memory-plan)";
    for (auto [name, value] : {std::pair{"grad_shard_offset", u.getGradShardOffset()},
                               {"exp_avg_offset", u.getExpAvgOffset()},
                               {"exp_avg_sq_offset", u.getExpAvgSqOffset()}})
      if (!value)
        return u.emitOpError() << "needs an integer attribute '" << name
                               << "' (run fsdp-memory-plan)";
    if (step.offloadsOptimizer())
      for (auto [name, value] : {std::pair{"host_shard_offset", u.getHostShardOffset()},
                                 {"host_grad_offset", u.getHostGradOffset()}})
        if (!value)
          return u.emitOpError() << "needs an integer attribute '" << name
                                 << "' under offload (run fsdp-memory-plan)";
    for (auto [k, name] : llvm::enumerate(u.getParams())) {
      nn::ParamOp p = params.lookup(cast<StringAttr>(name).getValue());
      if (!p)
        return u.emitOpError() << "holds parameter " << name
                               << ", which no nn.param of the step reads";
      // The unit's flat layout holds each parameter whole.
      auto type = p.getType();
      if (!type.hasStaticShape() || type.getNumElements() != u.getSizes()[k])
        return p.emitOpError() << "is " << type << ", but unit @" << u.getSymName() << " holds "
                               << u.getSizes()[k] << " elements of it";
    }
  }
  // A program is JSON, whose strings are UTF-8; MLIR's may hold any bytes.
  WalkResult utf8 = module.walk([&](Operation *op) {
    for (NamedAttribute a : op->getAttrs()) {
      auto bad = [&](StringRef what) {
        op->emitOpError() << what << " is not valid UTF-8, which a program (JSON) cannot hold";
        return WalkResult::interrupt();
      };
      if (!llvm::json::isUTF8(a.getName().getValue()))
        return bad("an attribute name");
      SmallVector<Attribute> values = {a.getValue()};
      if (auto array = dyn_cast<ArrayAttr>(a.getValue()))
        values.append(array.begin(), array.end());
      else if (auto dict = dyn_cast<DictionaryAttr>(a.getValue()))
        for (NamedAttribute d : dict)
          if (!llvm::json::isUTF8(d.getName().getValue()))
            return bad(("a name in '" + a.getName().getValue() + "'").str());
      for (Attribute v : values)
        if (auto str = dyn_cast<StringAttr>(v); str && !llvm::json::isUTF8(str.getValue()))
          return bad(("attribute '" + a.getName().getValue() + "'").str());
    }
    return WalkResult::advance();
  });
  if (utf8.wasInterrupted())
    return failure();
  auto byName = unitsByName(module);
  for (Operation &op : block)
    if (isa<plan::AllGatherOp, plan::ReduceScatterOp, plan::AllReduceOp, plan::AllocOp,
            plan::FreeOp, plan::OptimizerStepOp, plan::ReshardOp, plan::AccumulateOp>(op) &&
        op.hasAttr("unit") && !unitOfOp(&op, byName))
      return op.emitOpError() << "names an unknown unit " << op.getAttr("unit");
  return success();
}

LogicalResult Lowering::run(raw_ostream &os) {
  if (!step.getArenaBytes())
    return step.emitOpError() << "has no memory plan; lowering needs every buffer's offset";
  if (failed(checkLowerable(module, step)) || failed(checkProgramDtypes(step)))
    return failure();
  blockPrefix = *step.getBlockPrefix();
  B = step.getMicroBatch().value_or(1);
  S = step.getSeqLen().value_or(1);
  units = getUnits(module);
  byParam = unitsByParam(module);

  llvm::StringMap<nn::ParamOp> paramOps;
  for (auto p : step.getBody().getOps<nn::ParamOp>())
    paramOps[p.getName()] = p;
  int64_t parameters = 0;
  for (auto [i, u] : llvm::enumerate(units)) {
    unitIndex[u.getSymName()] = i;
    program::Unit pu;
    pu.name = u.getSymName().str();
    pu.module = u.getModule().str();
    pu.numel = u.getNumel();
    pu.paddedNumel = u.getPaddedNumel();
    pu.shardSize = u.getShardSize();
    pu.shardNumel = u.getShardNumel();
    pu.shardOffset = u.getShardOffset().value_or(-1);
    pu.gradShardOffset = *u.getGradShardOffset();
    pu.expAvgOffset = *u.getExpAvgOffset();
    pu.expAvgSqOffset = *u.getExpAvgSqOffset();
    if (std::optional<int64_t> acc = u.getAccumulatedOffset())
      pu.accumulatedOffset = *acc;
    if (step.offloadsOptimizer()) {
      pu.hostShardOffset = *u.getHostShardOffset();
      pu.hostGradOffset = *u.getHostGradOffset();
      pu.hostGatherOffset = u.getHostGatherOffset().value_or(-1);
    }
    for (auto [k, name] : llvm::enumerate(u.getParams())) {
      nn::ParamOp p = paramOps.lookup(cast<StringAttr>(name).getValue());
      program::Param prm;
      if (u.getTpDims()) { // the cut, as the unit records it
        prm.tpDim = (*u.getTpDims())[k];
        prm.tpPieces = (*u.getTpPieces())[k];
        prm.tpSections = (*u.getTpSections())[k];
        prm.tpPartial = (*u.getTpPartial())[k];
      }
      prm.name = cast<StringAttr>(name).getValue().str();
      prm.shape.assign(p.getType().getShape().begin(), p.getType().getShape().end());
      prm.offset = u.getOffsets()[k];
      prm.numel = u.getSizes()[k];
      // AdamW decays matrices, not vectors (biases, norm weights).
      prm.decay = p.getType().getRank() >= 2;
      pu.params.push_back(prm);
      parameters += u.getSizes()[k];
    }
    prog.units.push_back(pu);
  }

  // The kernels it is planned for, and their step-long workspace (cuda).
  prog.target = kernelTarget(step);
  if (int64_t bytes = program::stepWorkspaceBytes(prog.target)) {
    if (!step.getWorkspaceOffset())
      return step.emitOpError() << "has no workspace offset (run fsdp-memory-plan)";
    prog.workspaceOffset = *step.getWorkspaceOffset();
    prog.workspaceBytes = bytes;
  }

  Block &block = step.getBody().front();
  for (BlockArgument arg : block.getArguments())
    valueTensor[arg] =
        tensorId(concreteShape(arg.getType(), B, S), dtypeName(arg.getType()),
                 arg.getArgNumber() == 0 ? *step.getTokensOffset() : *step.getTargetsOffset());

  program::Phase *phases[2] = {&prog.microStep, &prog.optimizer};
  int phase = 0;
  Value loss;
  auto byName = unitsByName(module);
  auto unitOf = [&](Operation *op) { return unitOfOp(op, byName); };
  auto phaseName = [&]() -> const char * {
    return phase == 1 ? "optimizer" : inBackward ? "backward" : "forward";
  };
  auto make = [&](POp o) {
    Instruction i;
    i.op = o;
    return i;
  };
  auto event = [&](POp o, int64_t e) {
    Instruction i = make(o);
    i.event = e;
    return i;
  };
  auto forUnit = [&](POp o, plan::UnitOp u) {
    Instruction i = make(o);
    i.unit = unitIndex[u.getSymName()];
    return i;
  };
  // A collective at its place: the compute stream records an event, the
  // comm stream waits for it, runs the collective and records its end.
  auto issue = [&](Operation *op, Instruction inst) {
    inst.phase = phaseName();
    int64_t ready = numEvents++, done = numEvents++;
    phases[phase]->compute.push_back(event(POp::Record, ready));
    phases[phase]->comm.push_back(event(POp::Wait, ready));
    phases[phase]->comm.push_back(inst);
    phases[phase]->comm.push_back(event(POp::Record, done));
    eventIds[op->getResult(0)] = done;
  };

  for (auto g : block.getOps<plan::GradOp>())
    if (plan::UnitOp u = byParam.lookup(g.getParam()))
      ++gradsPerUnit[u];
  bool syncLast = step.syncsAtLastMicroStep();
  Operation *bwdStart = backwardStart(step);
  for (Operation &op : block) {
    if (&op == bwdStart)
      inBackward = true;
    if (isa<plan::GradNormOp>(op)) {
      phase = 1; // the optimizer phase runs once per step, after all micro-steps
      inOptimizer = true;
    }
    std::vector<Instruction> &compute = phases[phase]->compute;
    if (auto g = dyn_cast<plan::AllGatherOp>(op)) {
      plan::UnitOp u = unitOf(g);
      int64_t off = g.getOffset() ? (int64_t)*g.getOffset() : -1;
      if (off < 0)
        return g.emitOpError() << "has no buffer offset (run fsdp-memory-plan)";
      gatherOffset[u] = off;
      if (g.getDtype())
        gatheredBf16.insert(u);
      else
        gatheredBf16.erase(u);
      Instruction inst = forUnit(POp::AllGather, u);
      inst.dst = off;
      inst.bf16 = g.getDtype() == plan::Dtype::BF16;
      if (g.getGroup() == plan::Group::reshard) { // from the resharded copy
        auto it = reshardedOffset.find(u);
        if (it == reshardedOffset.end())
          return g.emitOpError() << "gathers unit @" << u.getSymName()
                                 << " over its reshard group, but it has no resharded copy here";
        inst.src = it->second;
        inst.overReshard = true;
      }
      issue(&op, inst);
    } else if (auto r = dyn_cast<plan::ReshardOp>(op)) {
      plan::UnitOp u = unitOf(r);
      auto it = gatherOffset.find(u);
      if (it == gatherOffset.end())
        return r.emitOpError() << "reshards unit @" << u.getSymName()
                               << ", which is not gathered here";
      if (!r.getOffset())
        return r.emitOpError() << "has no buffer offset (run fsdp-memory-plan)";
      reshardedOffset[u] = *r.getOffset();
      Instruction inst = forUnit(POp::Reshard, u);
      inst.src = it->second;
      inst.dst = *r.getOffset();
      inst.bf16 = gatheredBf16.count(u) > 0;
      inst.phase = phaseName();
      compute.push_back(inst);
    } else if (auto rs = dyn_cast<plan::ReduceScatterOp>(op)) {
      plan::UnitOp u = unitOf(rs);
      Instruction inst = forUnit(POp::ReduceScatter, u);
      if (syncLast) { // the sum of the step's micro-steps
        if (!u.getAccumulatedOffset())
          return rs.emitOpError() << "reduces unit @" << u.getSymName()
                                  << ", which has no accumulation buffer (run fsdp-memory-plan)";
        inst.src = *u.getAccumulatedOffset();
      } else {
        inst.src = gradOffset[u];
      }
      inst.bf16 = rs.getDtype() == plan::Dtype::BF16;
      if (int64_t bytes = reduceScatterStagingBytes(rs, u)) {
        if (!rs.getScratchOffset())
          return rs.emitOpError() << "has no staging offset (run fsdp-memory-plan)";
        inst.scratch = *rs.getScratchOffset();
        inst.scratchBytes = bytes;
      }
      issue(&op, inst);
    } else if (auto ar = dyn_cast<plan::AllReduceOp>(op)) {
      Instruction inst = forUnit(POp::AllReduce, unitOf(ar));
      inst.overTp = ar.getGroup() == plan::Group::tp;
      issue(&op, inst);
    } else if (auto gn = dyn_cast<plan::GradNormOp>(op)) {
      Instruction inst = make(POp::GradNorm);
      if (int64_t bytes = program::gradNormScratchBytes(prog.target, (int64_t)prog.units.size())) {
        if (!gn.getScratchOffset())
          return gn.emitOpError() << "has no scratch offset (run fsdp-memory-plan)";
        inst.scratch = *gn.getScratchOffset();
        inst.scratchBytes = bytes;
      }
      issue(&op, inst);
    } else if (auto w = dyn_cast<plan::WaitOp>(op)) {
      Instruction inst = event(POp::Wait, eventIds.lookup(w.getEvent()));
      inst.phase = phaseName();
      compute.push_back(inst);
    } else if (auto a = dyn_cast<plan::AllocOp>(op)) {
      plan::UnitOp u = unitOf(a);
      if (!a.getOffset())
        return a.emitOpError() << "has no buffer offset (run fsdp-memory-plan)";
      gradOffset[u] = *a.getOffset();
      Instruction inst = forUnit(POp::Alloc, u);
      inst.dst = *a.getOffset();
      // Every gradient op writes its whole gradient: when every parameter of
      // the unit has one, only the padding needs zeros.
      inst.zeroFrom = gradsPerUnit[u] == (int64_t)u.getParams().size() ? u.getNumel() : 0;
      inst.phase = phaseName();
      compute.push_back(inst);
    } else if (auto a = dyn_cast<plan::AccumulateOp>(op)) {
      plan::UnitOp u = unitOf(a);
      if (!gradOffset.count(u))
        return a.emitOpError() << "accumulates unit @" << u.getSymName()
                               << ", which has no gradient buffer here";
      if (!u.getAccumulatedOffset())
        return a.emitOpError() << "accumulates into unit @" << u.getSymName()
                               << ", which has no accumulation buffer (run fsdp-memory-plan)";
      Instruction inst = forUnit(POp::Accumulate, u);
      inst.src = gradOffset[u];
      inst.dst = *u.getAccumulatedOffset();
      inst.phase = phaseName();
      compute.push_back(inst);
    } else if (auto f = dyn_cast<plan::FreeOp>(op)) {
      plan::UnitOp u = unitOf(f);
      Instruction inst = forUnit(POp::Free, u);
      inst.kind = f.getKind() == plan::BufferKind::params      ? program::BufferKind::Params
                  : f.getKind() == plan::BufferKind::resharded ? program::BufferKind::Resharded
                                                               : program::BufferKind::Grads;
      inst.phase = phaseName();
      compute.push_back(inst);
      if (f.getKind() == plan::BufferKind::params)
        gatherOffset.erase(u);
      else if (f.getKind() == plan::BufferKind::resharded)
        reshardedOffset.erase(u);
      else
        gradOffset.erase(u);
    } else if (auto o = dyn_cast<plan::OptimizerStepOp>(op)) {
      if (!o.getUnit())
        return o.emitOpError() << "is not per unit (run fsdp-insert-collectives)";
      Instruction inst = make(POp::OptimizerStep);
      inst.unit = unitIndex[*o.getUnit()];
      inst.phase = phaseName();
      compute.push_back(inst);
    } else if (auto r = dyn_cast<plan::ReturnOp>(op)) {
      loss = r.getOperand(0);
    } else if (isa<nn::ParamOp, plan::GradOp>(op)) {
      continue;
    } else if (auto c = dyn_cast<plan::CastOp>(op); c && castIsGatheredValue(c, byParam)) {
      // The gathered bf16 parameter is already what compute reads.
      auto id = operand(c.getParam(), &op);
      if (failed(id))
        return failure();
      valueTensor[c.getResult()] = *id;
    } else if (failed(lowerCompute(op, compute))) {
      return failure();
    }
  }

  prog.modelName = step.getModel()->str();
  prog.modelType = step.getModelType()->str();
  // What an HF checkpoint of the family holds besides the parameters
  // (docs/program-format.md, `model`): tied copies, and tensors the
  // model does not use. A graph of another model_type (a JSON or MLIR
  // graph's own) has neither.
  if (const ModelFamily *family = findFamily(prog.modelType)) {
    prog.tiedCopies = family->tiedCopies([&](StringRef name) { return paramOps.count(name); });
    prog.unusedWeightPrefixes = family->unusedWeightPrefixes();
  }
  // The HF config the model came from (and its generation config), for
  // --save-weights DIR: each must be one JSON object, whoever wrote the plan.
  for (auto [name, attr, into] :
       {std::tuple{"hf_config", step.getHfConfigAttr(), &prog.hfConfig},
        std::tuple{"generation_config", step.getGenerationConfigAttr(), &prog.generationConfig}}) {
    if (!attr)
      continue;
    unsigned line = 0, col = 0;
    if (std::string deep = support::checkJsonDepth(attr.getValue().str(), &line, &col);
        !deep.empty())
      return step.emitOpError() << "'" << name << "': " << deep;
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(attr.getValue());
    if (!parsed) {
      std::string why = llvm::toString(parsed.takeError());
      return step.emitOpError() << "'" << name << "' is not JSON: " << why;
    }
    if (!parsed->getAsObject())
      return step.emitOpError() << "'" << name << "' must be a JSON object (the model's "
                                << (into == &prog.hfConfig ? "config.json"
                                                           : "generation_config.json")
                                << ")";
    *into = attr.getValue().str();
  }
  prog.parameters = parameters;
  prog.worldSize = step.getWorldSizeOr1();
  prog.strategy = plan::strategyFlagName(*step.getStrategy()).str();
  prog.shardSize = step.getShardSizeOr1();
  prog.tp = step.getTpOr1();
  // Sequence parallelism: the rank's part of the tokens taken after the stem.
  prog.sequenceParallel = !block.getOps<plan::TpChunkOp>().empty();
  prog.paramDtype = plan::stringifyDtype(step.getParamDtypeOrF32()).str();
  prog.reduceDtype = plan::stringifyDtype(step.getReduceDtypeOrF32()).str();
  prog.computeDtype = plan::stringifyDtype(step.getComputeDtypeOrF32()).str();
  prog.microBatch = B;
  prog.seqLen = S;
  // What the model takes; an image classifier's classes are its logits'.
  if (std::string err = nn::readInputs(step.getInputsKindAttr(), step.getImageAttr(),
                                       &prog.inputKind, &prog.image);
      !err.empty())
    return step.emitOpError() << err;
  if (prog.inputKind == program::InputKind::Images) {
    auto ce = loss ? loss.getDefiningOp<nn::CrossEntropyOp>() : nn::CrossEntropyOp();
    if (!ce)
      return step.emitOpError() << "takes images, so its loss must be nn.cross_entropy";
    prog.image.classes = cast<ShapedType>(ce.getLogits().getType()).getShape().back();
  }
  prog.arenaBytes = *step.getArenaBytes();
  // The cost model's figures, when fsdp-plan computed them: fsdp-run shows
  // a step's prediction (micro-steps times the accumulation, plus the
  // optimizer) beside what it measures.
  if (auto t = step.getPredictedMicroStepS())
    prog.predictedMicroStepS = t->convertToDouble();
  if (auto t = step.getPredictedOptimizerS())
    prog.predictedOptimizerS = t->convertToDouble();
  prog.gradAccum = step.getGradAccum().value_or(0);
  if (auto f = step.getModelFlopsPerMicroStep())
    prog.modelFlopsPerMicroStep = f->convertToDouble();
  if (auto f = step.getPeakFlops())
    prog.peakFlops = f->convertToDouble();
  plan::MemoryAttr memory = step.getMemoryAttr();
  // The micro-step lowered above has every collective. Under grad_sync
  // last only a step's last micro-step reduces; under reshard_after_backward
  // false only its first gathers. Each of the step's lists is the lowered
  // one without the collectives it does not make, their records and the
  // waits for them (issue() put each collective between a wait for its
  // ready event and the record of its end).
  // The all-reduce across replica groups sums each gradient shard whole, so
  // it runs once a step, at the last micro-step, whatever grad_sync says.
  auto without = [](program::Phase phase, bool gathers, bool reduceScatters, bool allReduces) {
    auto dropped = [&](const Instruction &i) {
      return (gathers && i.op == POp::AllGather) ||
             (reduceScatters && i.op == POp::ReduceScatter) ||
             (allReduces && i.op == POp::AllReduce);
    };
    std::set<int64_t> events;
    for (size_t k = 0; k < phase.comm.size(); ++k)
      if (dropped(phase.comm[k])) {
        events.insert(phase.comm[k - 1].event);
        events.insert(phase.comm[k + 1].event);
      }
    for (auto *list : {&phase.compute, &phase.comm})
      llvm::erase_if(*list, [&](const Instruction &i) {
        return dropped(i) || ((i.op == POp::Record || i.op == POp::Wait) && events.count(i.event));
      });
    return phase;
  };
  bool keepGathered = step.keepsGatheredAcrossMicroSteps();
  // So do the sums of partial gradients over the tp group (tp > 1).
  bool lastOwn = syncLast || step.getDpSize() > step.getShardSizeOr1() || step.getTpOr1() > 1;
  program::Phase whole = prog.microStep;
  if (keepGathered) {
    prog.reshardAfterBackward = false;
    prog.firstMicroStep = without(whole, false, syncLast, lastOwn);
  }
  if (syncLast)
    prog.gradSync = "last";
  prog.reshardAfterForward = step.getReshardSizeOr0();
  if (step.offloadsOptimizer()) {
    prog.offload = step.offloadsParams() ? program::Offload::All : program::Offload::Optimizer;
    prog.hostBytes = step.getHostBytes().value_or(0);
  }
  if (lastOwn)
    prog.lastMicroStep = without(whole, keepGathered, false, false);
  prog.microStep = without(whole, keepGathered, syncLast, lastOwn);
  prog.memory = {{"activations_bytes", memory.getActivationsBytes()},
                 {"fragmentation_bytes", memory.getFragmentationBytes()},
                 {"grads_bytes", memory.getGradsBytes()},
                 {"live_peak_bytes", memory.getLivePeakBytes()},
                 {"optimizer_bytes", memory.getOptimizerBytes()},
                 {"params_bytes", memory.getParamsBytes()},
                 {"peak_bytes", memory.getPeakBytes()},
                 {"unsharded_bytes", memory.getUnshardedBytes()}};
  if (step.offloadsOptimizer()) { // in the order the others are: by name
    prog.memory.push_back({"host_bytes", prog.hostBytes});
    llvm::sort(prog.memory);
  }
  prog.predictedPeakBytes = memory.getPeakBytes();
  prog.events = numEvents;
  prog.tokens = valueTensor[block.getArgument(0)];
  prog.targets = valueTensor[block.getArgument(1)];
  prog.loss = valueTensor.lookup(loss);
  std::vector<std::pair<program::Phase *, const char *>> lowered = {{&prog.microStep, "micro_step"},
                                                                    {&prog.optimizer, "optimizer"}};
  if (lastOwn)
    lowered.push_back({&prog.lastMicroStep, "last_micro_step"});
  if (keepGathered)
    lowered.push_back({&prog.firstMicroStep, "first_micro_step"});
  for (auto [s, name] : lowered)
    for (auto *list : {&s->compute, &s->comm})
      for (auto [k, inst] : llvm::enumerate(*list))
        inst.index = k;
  // The plan's waits order what each collective reads and writes against
  // compute; with the phases joined, some order nothing else: each wait the
  // program keeps is needed (runtime/StreamOrder.h).
  for (auto [s, name] : lowered) {
    if (std::string why = program::checkStreamOrder(prog, *s); !why.empty())
      return step.emitOpError() << "lowers to a program whose " << name
                                << " does not order its streams: " << why;
    program::dropRedundantWaits(prog, *s);
  }
  os << program::writeProgram(prog);
  return success();
}

} // namespace

LogicalResult fsdp::lowerToProgram(ModuleOp module, raw_ostream &os) {
  plan::StepOp step = getStep(module);
  if (!step)
    return module.emitError() << "no training step to lower";
  return Lowering(module, step).run(os);
}
