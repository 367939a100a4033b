//===- LowerToProgram.cpp - per-stream instruction lists with events ------===//
//
// Every collective is issued at its place in the program: the compute stream
// records an event there, the comm stream waits for it, runs the collective
// and records its completion, which a later `fsdp.wait` waits for.
//
//===----------------------------------------------------------------------===//
#include "planner/LowerToProgram.h"
#include "planner/Buffers.h"
#include "runtime/Program.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <nlohmann/json.hpp>

using namespace mlir;
using namespace fsdp;
using ojson = nlohmann::ordered_json;

namespace {

std::string dtypeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  cast<ShapedType>(t).getElementType().print(os);
  return s;
}

class Lowering {
public:
  Lowering(ModuleOp module, plan::StepOp step) : module(module), step(step) {}
  LogicalResult run(raw_ostream &os);

private:
  int64_t tensorId(ArrayRef<int64_t> shape, StringRef dtype, int64_t offset);
  FailureOr<int64_t> operand(Value v, Operation *user);
  LogicalResult lowerCompute(Operation &op, ojson &compute);

  ModuleOp module;
  plan::StepOp step;
  int64_t B = 0, S = 0;
  std::vector<plan::UnitOp> units;
  llvm::StringMap<plan::UnitOp> byParam;
  llvm::StringMap<int64_t> unitIndex;
  DenseMap<Operation *, int64_t> gatherOffset; // unit -> live gathered buffer
  DenseSet<Operation *> gatheredBf16;          // units gathered in bf16
  DenseMap<Operation *, int64_t> gradsPerUnit; // parameters with a gradient
  DenseMap<Operation *, int64_t> gradOffset;   // unit -> live gradient buffer
  DenseMap<Value, int64_t> valueTensor;
  std::map<std::tuple<int64_t, std::string, std::vector<int64_t>>, int64_t> tensorIds;
  ojson tensors = ojson::array();
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
  int64_t id = tensors.size();
  ojson t;
  t["id"] = id;
  t["offset"] = offset;
  t["shape"] = shape;
  t["dtype"] = dtype.str();
  tensors.push_back(t);
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
  if (u.getShardCountAttr().getInt() == 1) {
    base = u->getAttrOfType<IntegerAttr>("shard_offset").getInt();
  } else {
    if (gatheredBf16.count(u)) {
      elem = 2;
      dtype = "bf16";
    }
    auto it = gatherOffset.find(u);
    if (it == gatherOffset.end())
      return user->emitOpError() << "reads '" << p.getName() << "' while unit @"
                                 << u.getSymName() << " is not gathered";
    base = it->second;
  }
  int64_t idx = llvm::find(u.getParams(), p.getNameAttr()) - u.getParams().begin();
  return tensorId(p.getType().getShape(), dtype, base + u.getOffsets()[idx] * elem);
}

LogicalResult Lowering::lowerCompute(Operation &op, ojson &compute) {
  ojson inst;
  inst["op"] = op.getName().stripDialect().str();
  if (auto m = op.getAttrOfType<StringAttr>("module"))
    inst["module"] = m.getValue().str();
  // What the kernel reads: the op's own attributes (eps, num_heads, layout,
  // ...) and whether it is recomputed. Another that a plan's op carries
  // (`op = 1`, `in = 5`) is not the op's to say: it would overwrite the
  // instruction's own fields.
  ArrayRef<StringAttr> inherent = op.getName().getAttributeNames();
  for (NamedAttribute a : op.getAttrs()) {
    StringRef n = a.getName();
    if (n == "module" || n == "offsets" || n == "scratch_offset")
      continue;
    if (!llvm::is_contained(inherent, a.getName()) &&
        !(n == "recompute" && isa<UnitAttr>(a.getValue())))
      continue;
    if (auto l = dyn_cast<nn::WeightLayoutAttr>(a.getValue()))
      inst[n.str()] = nn::stringifyWeightLayout(l.getValue()).str();
    else if (auto f = dyn_cast<FloatAttr>(a.getValue()))
      inst[n.str()] = f.getValueAsDouble();
    else if (auto i = dyn_cast<IntegerAttr>(a.getValue()))
      inst[n.str()] = i.getInt();
    else if (isa<UnitAttr>(a.getValue()))
      inst[n.str()] = true;
  }
  ojson in = ojson::array(), out = ojson::array();
  for (Value v : op.getOperands()) {
    auto id = operand(v, &op);
    if (failed(id))
      return failure();
    in.push_back(*id);
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
      offset = gradOffset[u] + u.getOffsets()[idx] * 4;
    }
    int64_t id = tensorId(concreteShape(r.getType(), B, S), dtypeName(r.getType()), offset);
    valueTensor[r] = id;
    out.push_back(id);
  }
  inst["in"] = in;
  inst["out"] = out;
  // For traces: the unit the op works for and its phase.
  std::string unit = unitNameOf(&op, byParam, blockPrefix);
  if (unitIndex.count(unit))
    inst["unit"] = unitIndex[unit];
  inst["phase"] = inOptimizer ? "optimizer" : inBackward ? "backward" : "forward";
  if (auto s = op.getAttrOfType<IntegerAttr>("scratch_offset")) {
    inst["scratch"] = s.getInt();
    inst["scratch_bytes"] = scratchBytes(&op, B, S);
  }
  compute.push_back(inst);
  return success();
}

/// The dtypes of a program's tensors (docs/plan-format.md): what fsdp-run
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
      return step.emitOpError() << "argument " << a.getArgNumber() << " is " << a.getType()
                                << why;
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
  if (int64_t world = stepInt(step, "world_size", 1); world > (int64_t(1) << 20))
    return step.emitOpError() << "is for world_size " << world
                              << ", more ranks than fsdp-run runs (at most 1048576)";
  for (const char *name : {"model", "model_type", "block_prefix", "strategy"})
    if (!step->getAttrOfType<StringAttr>(name))
      return step.emitOpError() << "needs a string attribute '" << name << "' to be lowered";
  for (const char *name : {"tokens_offset", "targets_offset"})
    if (!step->getAttrOfType<IntegerAttr>(name))
      return step.emitOpError() << "needs an integer attribute '" << name
                                << "' (run fsdp-memory-plan)";
  auto memory = step->getAttrOfType<DictionaryAttr>("memory");
  if (!memory)
    return step.emitOpError() << "needs a dictionary attribute 'memory' (run fsdp-memory-plan)";
  for (NamedAttribute a : memory)
    if (!isa<IntegerAttr>(a.getValue()))
      return step.emitOpError() << "memory figure '" << a.getName().getValue()
                                << "' must be an integer, but is " << a.getValue();
  llvm::StringMap<nn::ParamOp> params;
  for (auto p : step.getBody().getOps<nn::ParamOp>())
    params[p.getName()] = p;
  for (plan::UnitOp u : getUnits(module)) {
    for (const char *name : {"shard_offset", "grad_shard_offset", "exp_avg_offset",
                             "exp_avg_sq_offset"})
      if (!u->getAttrOfType<IntegerAttr>(name))
        return u.emitOpError() << "needs an integer attribute '" << name
                               << "' (run fsdp-memory-plan)";
    for (auto [k, name] : llvm::enumerate(u.getParams())) {
      nn::ParamOp p = params.lookup(cast<StringAttr>(name).getValue());
      if (!p)
        return u.emitOpError() << "holds parameter " << name
                               << ", which no nn.param of the step reads";
      // The unit's flat layout holds each parameter whole.
      auto type = p.getType();
      if (!type.hasStaticShape() || type.getNumElements() != u.getSizes()[k])
        return p.emitOpError() << "is " << type << ", but unit @" << u.getSymName()
                               << " holds " << u.getSizes()[k] << " elements of it";
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
            plan::FreeOp, plan::OptimizerStepOp>(op) &&
        op.hasAttr("unit") && !unitOfOp(&op, byName))
      return op.emitOpError() << "names an unknown unit " << op.getAttr("unit");
  return success();
}

LogicalResult Lowering::run(raw_ostream &os) {
  if (!step->hasAttr("arena_bytes"))
    return step.emitOpError() << "has no memory plan; lowering needs every buffer's offset";
  if (failed(checkLowerable(module, step)) || failed(checkProgramDtypes(step)))
    return failure();
  blockPrefix = step->getAttrOfType<StringAttr>("block_prefix").getValue();
  B = stepInt(step, "micro_batch", 1);
  S = stepInt(step, "seq_len", 1);
  units = getUnits(module);
  byParam = unitsByParam(module);

  llvm::StringMap<nn::ParamOp> paramOps;
  for (auto p : step.getBody().getOps<nn::ParamOp>())
    paramOps[p.getName()] = p;
  ojson unitList = ojson::array();
  int64_t parameters = 0;
  for (auto [i, u] : llvm::enumerate(units)) {
    unitIndex[u.getSymName()] = i;
    ojson j;
    j["name"] = u.getSymName().str();
    j["module"] = u.getModule().str();
    j["numel"] = u.getNumelAttr().getInt();
    j["padded_numel"] = u.getPaddedNumelAttr().getInt();
    j["shard_count"] = u.getShardCountAttr().getInt();
    j["shard_numel"] = u.getShardNumel();
    for (const char *k : {"shard_offset", "grad_shard_offset", "exp_avg_offset",
                          "exp_avg_sq_offset"})
      j[k] = u->getAttrOfType<IntegerAttr>(k).getInt();
    ojson params = ojson::array();
    for (auto [k, name] : llvm::enumerate(u.getParams())) {
      nn::ParamOp p = paramOps.lookup(cast<StringAttr>(name).getValue());
      ojson pj;
      pj["name"] = cast<StringAttr>(name).getValue().str();
      pj["shape"] = p.getType().getShape();
      pj["dtype"] = dtypeName(p.getType());
      pj["offset"] = u.getOffsets()[k];
      pj["numel"] = u.getSizes()[k];
      // AdamW decays matrices, not vectors (biases, norm weights).
      pj["decay"] = p.getType().getRank() >= 2;
      params.push_back(pj);
      parameters += u.getSizes()[k];
    }
    j["params"] = params;
    unitList.push_back(j);
  }

  Block &block = step.getBody().front();
  for (BlockArgument arg : block.getArguments())
    valueTensor[arg] = tensorId(
        concreteShape(arg.getType(), B, S), dtypeName(arg.getType()),
        step->getAttrOfType<IntegerAttr>(arg.getArgNumber() == 0 ? "tokens_offset"
                                                                  : "targets_offset")
            .getInt());

  ojson phases[2] = {ojson::object(), ojson::object()};
  for (ojson &p : phases) {
    p["compute"] = ojson::array();
    p["comm"] = ojson::array();
  }
  int phase = 0;
  Value loss;
  auto byName = unitsByName(module);
  auto unitOf = [&](Operation *op) { return unitOfOp(op, byName); };
  auto phaseName = [&]() -> const char * {
    return phase == 1 ? "optimizer" : inBackward ? "backward" : "forward";
  };
  auto issue = [&](Operation *op, ojson inst) {
    inst["phase"] = phaseName();
    int64_t ready = numEvents++, done = numEvents++;
    phases[phase]["compute"].push_back({{"op", "record"}, {"event", ready}});
    phases[phase]["comm"].push_back({{"op", "wait"}, {"event", ready}});
    phases[phase]["comm"].push_back(inst);
    phases[phase]["comm"].push_back({{"op", "record"}, {"event", done}});
    eventIds[op->getResult(0)] = done;
  };

  for (auto g : block.getOps<plan::GradOp>())
    if (plan::UnitOp u = byParam.lookup(g.getParam()))
      ++gradsPerUnit[u];
  Operation *bwdStart = backwardStart(step);
  for (Operation &op : block) {
    if (&op == bwdStart)
      inBackward = true;
    if (isa<plan::GradNormOp>(op)) {
      phase = 1; // the optimizer phase runs once per step, after all micro-steps
      inOptimizer = true;
    }
    ojson &compute = phases[phase]["compute"];
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
      ojson inst = {{"op", "all_gather"}, {"unit", unitIndex[u.getSymName()]},
                    {"group", "shard"}, {"dst", off}};
      if (g.getDtype())
        inst["dtype"] = g.getDtype()->str();
      issue(&op, inst);
    } else if (auto rs = dyn_cast<plan::ReduceScatterOp>(op)) {
      plan::UnitOp u = unitOf(rs);
      ojson inst = {{"op", "reduce_scatter"}, {"unit", unitIndex[u.getSymName()]},
                    {"group", "shard"}, {"src", gradOffset[u]}};
      if (rs.getDtype())
        inst["dtype"] = rs.getDtype()->str();
      issue(&op, inst);
    } else if (auto ar = dyn_cast<plan::AllReduceOp>(op)) {
      plan::UnitOp u = unitOf(ar);
      issue(&op, {{"op", "all_reduce"}, {"unit", unitIndex[u.getSymName()]},
                  {"group", "replica"}});
    } else if (isa<plan::GradNormOp>(op)) {
      issue(&op, {{"op", "grad_norm"}, {"group", "shard"}});
    } else if (auto w = dyn_cast<plan::WaitOp>(op)) {
      compute.push_back({{"op", "wait"}, {"event", eventIds.lookup(w.getEvent())},
                         {"phase", phaseName()}});
    } else if (auto a = dyn_cast<plan::AllocOp>(op)) {
      plan::UnitOp u = unitOf(a);
      if (!a.getOffset())
        return a.emitOpError() << "has no buffer offset (run fsdp-memory-plan)";
      gradOffset[u] = *a.getOffset();
      // Every gradient op writes its whole gradient: when every parameter of
      // the unit has one, only the padding needs zeros.
      int64_t zeroFrom = gradsPerUnit[u] == (int64_t)u.getParams().size()
                             ? u.getNumelAttr().getInt()
                             : 0;
      compute.push_back({{"op", "alloc"}, {"kind", "grads"},
                         {"unit", unitIndex[u.getSymName()]}, {"dst", *a.getOffset()},
                         {"zero_from", zeroFrom}, {"phase", phaseName()}});
    } else if (auto f = dyn_cast<plan::FreeOp>(op)) {
      plan::UnitOp u = unitOf(f);
      compute.push_back({{"op", "free"}, {"kind", plan::stringifyBufferKind(f.getKind()).str()},
                         {"unit", unitIndex[u.getSymName()]}, {"phase", phaseName()}});
      if (f.getKind() == plan::BufferKind::params)
        gatherOffset.erase(u);
      else
        gradOffset.erase(u);
    } else if (auto o = dyn_cast<plan::OptimizerStepOp>(op)) {
      if (!o.getUnit())
        return o.emitOpError() << "is not per unit (run fsdp-insert-collectives)";
      compute.push_back({{"op", "optimizer_step"}, {"unit", unitIndex[*o.getUnit()]},
                         {"phase", phaseName()}});
    } else if (auto r = dyn_cast<plan::ReturnOp>(op)) {
      loss = r.getOperand(0);
    } else if (isa<nn::ParamOp, plan::GradOp>(op)) {
      continue;
    } else if (failed(lowerCompute(op, compute))) {
      return failure();
    }
  }

  ojson prog;
  prog["format"] = program::kFormat;
  prog["version"] = program::kVersion;
  prog["model"] = {{"name", step->getAttrOfType<StringAttr>("model").getValue().str()},
                   {"model_type", step->getAttrOfType<StringAttr>("model_type").getValue().str()},
                   {"parameters", parameters}};
  prog["world_size"] = stepInt(step, "world_size", 1);
  prog["strategy"] = step->getAttrOfType<StringAttr>("strategy").getValue().str();
  prog["shard_size"] = stepInt(step, "shard_size", 1);
  prog["param_dtype"] = step->hasAttr("param_dtype")
                            ? step->getAttrOfType<StringAttr>("param_dtype").getValue().str()
                            : "f32";
  prog["reduce_dtype"] = step->hasAttr("reduce_dtype")
                             ? step->getAttrOfType<StringAttr>("reduce_dtype").getValue().str()
                             : "f32";
  prog["micro_batch"] = B;
  prog["seq_len"] = S;
  prog["arena_bytes"] = stepInt(step, "arena_bytes", 0);
  // The cost model's figures, when fsdp-plan computed them: fsdp-run shows
  // a step's prediction (micro-steps times the accumulation, plus the
  // optimizer) beside what it measures.
  if (auto t = step->getAttrOfType<FloatAttr>("predicted_micro_step_s"))
    prog["predicted_micro_step_s"] = t.getValueAsDouble();
  if (auto t = step->getAttrOfType<FloatAttr>("predicted_optimizer_s"))
    prog["predicted_optimizer_s"] = t.getValueAsDouble();
  ojson mem;
  for (NamedAttribute a : step->getAttrOfType<DictionaryAttr>("memory"))
    mem[a.getName().str()] = cast<IntegerAttr>(a.getValue()).getInt();
  prog["memory"] = mem;
  prog["events"] = numEvents;
  prog["inputs"] = {{"tokens", valueTensor[block.getArgument(0)]},
                    {"targets", valueTensor[block.getArgument(1)]}};
  prog["loss"] = valueTensor.lookup(loss);

  // One JSON document, one line per unit, tensor and instruction, so that a
  // person can read it and a diff shows what changed.
  auto list = [&](const ojson &arr, const char *indent) {
    std::string s = "[";
    for (size_t i = 0; i < arr.size(); ++i)
      s += std::string(i ? ",\n" : "\n") + indent + "  " + arr[i].dump();
    return s + (arr.empty() ? "]" : std::string("\n") + indent + "]");
  };
  os << "{\n";
  for (auto &[k, v] : prog.items())
    os << "  \"" << k << "\": " << v.dump() << ",\n";
  os << "  \"units\": " << list(unitList, "  ") << ",\n";
  os << "  \"tensors\": " << list(tensors, "  ") << ",\n";
  const char *names[2] = {"micro_step", "optimizer"};
  for (int p = 0; p < 2; ++p) {
    os << "  \"" << names[p] << "\": {\n";
    os << "    \"compute\": " << list(phases[p]["compute"], "    ") << ",\n";
    os << "    \"comm\": " << list(phases[p]["comm"], "    ") << "\n";
    os << "  }" << (p == 0 ? ",\n" : "\n");
  }
  os << "}\n";
  return success();
}

} // namespace

LogicalResult fsdp::lowerToProgram(ModuleOp module, raw_ostream &os) {
  plan::StepOp step = getStep(module);
  if (!step)
    return module.emitError() << "no training step to lower";
  return Lowering(module, step).run(os);
}
