//===- GraphJSON.cpp - the JSON graph format, both ways -------------------===//
//
// Format "fsdp-graph", version 1 (docs/model-format.md): parameters, then ops
// in program order, each naming its operands by value name. Attributes sit in
// the op object beside "op", "module", "operands" and "results".
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/Import/JsonReader.h"
#include "planner/Import/ModelOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include <climits>
#include <set>

using namespace mlir;
using namespace fsdp;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// Approximate: GELU's form, "tanh" or "none" (exact), as torch names it;
// Flag: a unit attribute, `true` when set (absent or false: not);
// RopeScaling: a rope's scaling kind (support/RopeScaling.h).
enum class AttrKind { F64, I64, Bool, Layout, Approximate, Flag, RopeScaling };
struct AttrSpec {
  const char *name;
  AttrKind kind;
  bool required;
};
struct OpSpec {
  const char *name;
  unsigned minOperands, maxOperands;
  bool variadicResults;
  std::vector<AttrSpec> attrs;
};

const std::vector<OpSpec> &opSpecs() {
  static const std::vector<OpSpec> specs = {
      {"position_ids", 1, 1, false, {}},
      {"token_type_ids", 1, 1, false, {}},
      {"embedding", 2, 2, false, {}},
      {"linear", 2, 3, false, {{"layout", AttrKind::Layout, true}}},
      {"layer_norm", 3, 3, false, {{"eps", AttrKind::F64, true}}},
      {"rms_norm", 2, 2, false, {{"eps", AttrKind::F64, true}}},
      {"rope",
       1,
       1,
       false,
       {{"num_heads", AttrKind::I64, true},
        {"theta", AttrKind::F64, true},
        {"scaling", AttrKind::RopeScaling, false},
        {"scaling_factor", AttrKind::F64, false},
        {"original_max_position", AttrKind::I64, false},
        {"low_freq_factor", AttrKind::F64, false},
        {"high_freq_factor", AttrKind::F64, false},
        {"beta_fast", AttrKind::F64, false},
        {"beta_slow", AttrKind::F64, false},
        {"truncate", AttrKind::Bool, false},
        {"attention_factor", AttrKind::F64, false}}},
      {"split", 1, 1, true, {}},
      {"causal_attention",
       3,
       3,
       false,
       {{"num_heads", AttrKind::I64, true},
        {"num_kv_heads", AttrKind::I64, true},
        {"window", AttrKind::I64, false}}},
      {"attention",
       3,
       3,
       false,
       {{"num_heads", AttrKind::I64, true}, {"num_kv_heads", AttrKind::I64, true}}},
      {"gelu", 1, 1, false, {{"approximate", AttrKind::Approximate, false}}},
      {"silu_mul", 2, 2, false, {}},
      {"add", 2, 2, false, {}},
      {"class_token", 3, 3, false, {}},
      {"first_token", 1, 1, false, {}},
      {"cross_entropy", 2, 2, false, {}},
      {"moe_route",
       1,
       1,
       true,
       {{"top_k", AttrKind::I64, true}, {"norm_topk_prob", AttrKind::Flag, false}}},
      {"moe_permute", 2, 2, false, {}},
      {"moe_linear", 4, UINT_MAX, false, {}},
      {"moe_combine", 3, 3, false, {}},
      {"moe_aux_loss",
       2,
       UINT_MAX,
       false,
       {{"top_k", AttrKind::I64, true}, {"coef", AttrKind::F64, true}}},
  };
  return specs;
}

const OpSpec *findSpec(StringRef name) {
  for (const OpSpec &s : opSpecs())
    if (name == s.name)
      return &s;
  return nullptr;
}

std::string opNames() {
  std::string s;
  for (const OpSpec &spec : opSpecs())
    s += (s.empty() ? "" : ", ") + std::string(spec.name);
  return s;
}

std::optional<Type> parseDtype(StringRef s, MLIRContext *ctx) {
  Builder b(ctx);
  if (s == "f32")
    return b.getF32Type();
  if (s == "bf16")
    return b.getBF16Type();
  if (s == "f16")
    return b.getF16Type();
  if (s == "f64")
    return b.getF64Type();
  if (s == "i64")
    return b.getI64Type();
  if (s == "i32")
    return b.getI32Type();
  return std::nullopt;
}

std::string dtypeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

class Importer {
public:
  Importer(StringRef text, StringRef file, MLIRContext *ctx, ImportError &error)
      : r(text, file, error), ctx(ctx), b(ctx) {}

  OwningOpRef<ModuleOp> run();

private:
  Location locAt(size_t offset) {
    auto [line, col] = r.lineCol(offset);
    return FileLineColLoc::get(ctx, r.fileName(), line, col);
  }
  std::optional<RankedTensorType> tensorType(const JsonPath &path);
  bool define(const JsonPath &path, const std::string &name, Value v);
  std::optional<Value> use(const JsonPath &path);
  bool buildOp(const JsonPath &path, Location loc);

  JsonReader r;
  MLIRContext *ctx;
  OpBuilder b;
  llvm::StringMap<Value> values;
};

std::optional<RankedTensorType> Importer::tensorType(const JsonPath &path) {
  JsonPath sp = path, dp = path;
  sp.push_back("shape");
  dp.push_back("dtype");
  const json *shape = r.get(sp);
  if (!shape)
    return std::nullopt;
  if (!shape->is_array()) {
    r.fail(sp, JsonReader::pathStr(sp) + " must be an array of sizes, but is " +
                   JsonReader::describe(*shape));
    return std::nullopt;
  }
  SmallVector<int64_t> dims;
  for (size_t i = 0; i < shape->size(); ++i) {
    JsonPath ip = sp;
    ip.push_back(std::to_string(i));
    auto d = r.getInt(ip, std::nullopt, -1);
    if (!d)
      return std::nullopt;
    if (*d == 0) {
      r.fail(ip, "a dimension must be positive, or -1 for a dynamic one");
      return std::nullopt;
    }
    dims.push_back(*d == -1 ? ShapedType::kDynamic : *d);
  }
  auto dtype = r.getString(dp);
  if (!dtype)
    return std::nullopt;
  auto elem = parseDtype(*dtype, ctx);
  if (!elem) {
    r.fail(dp, "unknown dtype '" + *dtype + "'; supported: f32, bf16, f16, f64, i64, i32");
    return std::nullopt;
  }
  return RankedTensorType::get(dims, *elem);
}

bool Importer::define(const JsonPath &path, const std::string &name, Value v) {
  if (name.empty())
    return r.fail(path, "a value name must not be empty");
  if (!values.try_emplace(name, v).second)
    return r.fail(path, "value '" + name + "' is defined twice");
  return true;
}

std::optional<Value> Importer::use(const JsonPath &path) {
  auto name = r.getString(path);
  if (!name)
    return std::nullopt;
  auto it = values.find(*name);
  if (it == values.end()) {
    r.fail(path, "value '" + *name + "' is not defined before this use");
    return std::nullopt;
  }
  return it->second;
}

bool Importer::buildOp(const JsonPath &path, Location loc) {
  const json *op = r.get(path);
  if (!op)
    return false;
  if (!op->is_object())
    return r.fail(path, JsonReader::pathStr(path) + " must be an object, but is " +
                            JsonReader::describe(*op));
  auto name = r.getString(path + JsonPath{"op"});
  if (!name)
    return false;
  const OpSpec *spec = findSpec(*name);
  if (!spec)
    return r.fail(path + JsonPath{"op"}, "unknown op '" + *name + "'; known: " + opNames());

  // Every key must mean something: a misspelt attribute is not ignored.
  for (auto &[key, value] : op->items()) {
    bool known = key == "op" || key == "module" || key == "operands" || key == "results";
    for (const AttrSpec &a : spec->attrs)
      known |= key == a.name;
    if (!known)
      return r.fail(path + JsonPath{key}, "unknown key '" + key + "' for op '" + *name + "'");
  }

  OperationState state(loc, "nn." + *name);
  JsonPath opp = path + JsonPath{"operands"};
  const json *operands = r.get(opp);
  if (!operands)
    return false;
  if (!operands->is_array())
    return r.fail(opp, JsonReader::pathStr(opp) + " must be an array of value names");
  if (operands->size() < spec->minOperands || operands->size() > spec->maxOperands)
    return r.fail(opp, "op '" + *name + "' takes " +
                           (spec->maxOperands == UINT_MAX ? "at least " : "") +
                           std::to_string(spec->minOperands) +
                           (spec->maxOperands != spec->minOperands && spec->maxOperands != UINT_MAX
                                ? " or " + std::to_string(spec->maxOperands)
                                : std::string()) +
                           " operands, but " + std::to_string(operands->size()) + " are given");
  for (size_t i = 0; i < operands->size(); ++i) {
    auto v = use(opp + JsonPath{std::to_string(i)});
    if (!v)
      return false;
    state.addOperands(*v);
  }

  for (const AttrSpec &a : spec->attrs) {
    JsonPath ap = path + JsonPath{a.name};
    if (!a.required && !r.get(ap, false))
      continue;
    switch (a.kind) {
    case AttrKind::F64: {
      auto x = r.getNumber(ap);
      if (!x)
        return false;
      state.addAttribute(a.name, b.getF64FloatAttr(*x));
      break;
    }
    case AttrKind::I64: {
      auto x = r.getInt(ap, std::nullopt, INT64_MIN);
      if (!x)
        return false;
      state.addAttribute(a.name, b.getI64IntegerAttr(*x));
      break;
    }
    case AttrKind::Bool: {
      auto x = r.getBool(ap);
      if (!x)
        return false;
      state.addAttribute(a.name, b.getBoolAttr(*x));
      break;
    }
    case AttrKind::RopeScaling: {
      auto s = r.getString(ap);
      if (!s)
        return false;
      if (!support::parseRopeScalingKind(*s))
        return r.fail(ap, std::string(a.name) + " must be one of " + support::ropeScalingNames() +
                              ", but is '" + *s + "'");
      state.addAttribute(a.name, b.getStringAttr(*s));
      break;
    }
    case AttrKind::Layout: {
      auto s = r.getString(ap);
      if (!s)
        return false;
      auto layout = nn::symbolizeWeightLayout(*s);
      if (!layout)
        return r.fail(ap, "layout must be 'in_out' or 'out_in', but is '" + *s + "'");
      state.addAttribute(a.name, nn::WeightLayoutAttr::get(ctx, *layout));
      break;
    }
    case AttrKind::Flag: {
      auto f = r.getBool(ap);
      if (!f)
        return false;
      if (*f)
        state.addAttribute(a.name, b.getUnitAttr());
      break;
    }
    case AttrKind::Approximate: {
      auto s = r.getString(ap);
      if (!s)
        return false;
      if (*s != "tanh" && *s != "none")
        return r.fail(ap, std::string(a.name) + " must be 'tanh' or 'none' (exact GELU), but is '" +
                              *s + "'");
      state.addAttribute(a.name, b.getStringAttr(*s));
      break;
    }
    }
  }
  if (r.get(path + JsonPath{"module"}, false)) {
    auto m = r.getString(path + JsonPath{"module"});
    if (!m)
      return false;
    state.addAttribute("module", b.getStringAttr(*m));
  }

  JsonPath rp = path + JsonPath{"results"};
  const json *results = r.get(rp);
  if (!results)
    return false;
  if (!results->is_array() || results->empty())
    return r.fail(rp, JsonReader::pathStr(rp) + " must be a non-empty array");
  if (!spec->variadicResults && results->size() != 1)
    return r.fail(rp, "op '" + *name + "' has one result, but " + std::to_string(results->size()) +
                          " are given");
  std::vector<std::string> names;
  for (size_t i = 0; i < results->size(); ++i) {
    JsonPath ip = rp + JsonPath{std::to_string(i)};
    auto n = r.getString(ip + JsonPath{"name"});
    if (!n)
      return false;
    auto t = tensorType(ip);
    if (!t)
      return false;
    names.push_back(*n);
    state.addTypes(*t);
  }
  Operation *created = b.create(state);
  for (size_t i = 0; i < names.size(); ++i)
    if (!define(rp + JsonPath{std::to_string(i), "name"}, names[i], created->getResult(i)))
      return false;
  return true;
}

OwningOpRef<ModuleOp> Importer::run() {
  ctx->getOrLoadDialect<nn::NNDialect>();
  if (!r.parse())
    return nullptr;
  if (!r.root().is_object()) {
    r.fail({}, "a graph must be a JSON object, but this is " + JsonReader::describe(r.root()));
    return nullptr;
  }
  auto format = r.getString({"format"});
  if (!format)
    return nullptr;
  if (*format != "fsdp-graph") {
    r.fail({"format"}, "format must be \"fsdp-graph\", but is \"" + *format + "\"");
    return nullptr;
  }
  auto version = r.getInt({"version"});
  if (!version)
    return nullptr;
  if (*version != kGraphFormatVersion) {
    r.fail({"version"}, "graph format version " + std::to_string(*version) +
                            " is not supported; this build reads version " +
                            std::to_string(kGraphFormatVersion));
    return nullptr;
  }
  auto name = r.getString({"name"});
  auto modelType = name ? r.getString({"model_type"}) : std::nullopt;
  auto prefix = modelType ? r.getString({"block_prefix"}) : std::nullopt;
  auto numBlocks = prefix ? r.getInt({"num_blocks"}, std::nullopt, 0) : std::nullopt;
  auto maxSeq = numBlocks ? r.getInt({"max_seq_len"}) : std::nullopt;
  if (!maxSeq)
    return nullptr;
  if (*numBlocks > nn::kMaxBlocks) {
    r.fail({"num_blocks"}, "num_blocks = " + std::to_string(*numBlocks) +
                               " is more than fsdp plans (at most " +
                               std::to_string(nn::kMaxBlocks) + ")");
    return nullptr;
  }
  if (*maxSeq > nn::kMaxSeqLen) {
    r.fail({"max_seq_len"}, "max_seq_len = " + std::to_string(*maxSeq) +
                                " is more than fsdp plans (at most " +
                                std::to_string(nn::kMaxSeqLen) + ")");
    return nullptr;
  }

  Location rootLoc = locAt(0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(rootLoc);
  b.setInsertionPointToEnd(module->getBody());

  // Inputs: tokens and targets.
  const json *inputs = r.get({"inputs"});
  if (!inputs)
    return nullptr;
  if (!inputs->is_array()) {
    r.fail({"inputs"}, "inputs must be an array");
    return nullptr;
  }
  SmallVector<Type> inTypes;
  std::vector<std::string> inNames;
  for (size_t i = 0; i < inputs->size(); ++i) {
    JsonPath ip = {"inputs", std::to_string(i)};
    auto n = r.getString(ip + JsonPath{"name"});
    if (!n)
      return nullptr;
    auto t = tensorType(ip);
    if (!t)
      return nullptr;
    inNames.push_back(*n);
    inTypes.push_back(*t);
  }
  auto lossType = RankedTensorType::get({}, b.getF32Type());
  // What the model takes: absent, tokens; an image classifier's geometry.
  StringAttr inputsKind;
  if (r.get({"inputs_kind"}, false)) {
    auto kind = r.getString({"inputs_kind"});
    if (!kind)
      return nullptr;
    inputsKind = b.getStringAttr(*kind);
  }
  DictionaryAttr image;
  if (const json *im = r.get({"image"}, false)) {
    if (!im->is_object()) {
      r.fail({"image"}, "image must be an object of height, width, channels, patch_height and "
                        "patch_width, but is " +
                            JsonReader::describe(*im));
      return nullptr;
    }
    SmallVector<NamedAttribute> fields;
    for (const auto &item : im->items()) {
      auto v = r.getInt({"image", item.key()});
      if (!v)
        return nullptr;
      fields.push_back(b.getNamedAttr(item.key(), b.getI64IntegerAttr(*v)));
    }
    image = b.getDictionaryAttr(fields);
  }
  {
    support::InputKind kind;
    support::ImageSpec spec;
    if (std::string err = nn::readInputs(inputsKind, image, &kind, &spec); !err.empty()) {
      bool atKind = !image || llvm::StringRef(err).starts_with("inputs_kind");
      r.fail({atKind ? "inputs_kind" : "image"}, err);
      return nullptr;
    }
  }
  auto graph = b.create<nn::GraphOp>(rootLoc, *name, b.getFunctionType(inTypes, {lossType}),
                                     ArrayAttr(), ArrayAttr(), *modelType, *prefix, *numBlocks,
                                     *maxSeq, inputsKind, image, StringAttr(), StringAttr());
  SmallVector<Location> argLocs(inTypes.size(), rootLoc);
  Block *body = b.createBlock(&graph.getBody(), {}, inTypes, argLocs);
  for (size_t i = 0; i < inNames.size(); ++i)
    if (!define({"inputs", std::to_string(i), "name"}, inNames[i], body->getArgument(i)))
      return nullptr;

  const json *params = r.get({"params"});
  if (!params)
    return nullptr;
  if (!params->is_array()) {
    r.fail({"params"}, "params must be an array");
    return nullptr;
  }
  auto paramOffsets = r.elementOffsets({"params"});
  for (size_t i = 0; i < params->size(); ++i) {
    JsonPath pp = {"params", std::to_string(i)};
    auto n = r.getString(pp + JsonPath{"name"});
    if (!n)
      return nullptr;
    auto t = tensorType(pp);
    if (!t)
      return nullptr;
    Location loc = i < paramOffsets.size() ? locAt(paramOffsets[i]) : rootLoc;
    Value v = b.create<nn::ParamOp>(loc, *t, b.getStringAttr(*n));
    if (!define(pp + JsonPath{"name"}, *n, v))
      return nullptr;
  }

  const json *ops = r.get({"ops"});
  if (!ops)
    return nullptr;
  if (!ops->is_array()) {
    r.fail({"ops"}, "ops must be an array");
    return nullptr;
  }
  auto opOffsets = r.elementOffsets({"ops"});
  for (size_t i = 0; i < ops->size(); ++i) {
    Location loc = i < opOffsets.size() ? locAt(opOffsets[i]) : rootLoc;
    if (!buildOp({"ops", std::to_string(i)}, loc))
      return nullptr;
  }
  auto out = use({"output"});
  if (!out)
    return nullptr;
  b.create<nn::ReturnOp>(locAt(r.offsetOf({"output"})), ValueRange{*out});

  if (failed(verify(*module)) || failed(verifyModelGraph(graph)))
    return nullptr; // reported through diagnostics, at the op's line and column
  return module;
}

} // namespace

OwningOpRef<ModuleOp> fsdp::importGraphJSON(StringRef text, StringRef file, MLIRContext *context,
                                            ImportError &error) {
  error = ImportError();
  error.file = file.str();
  Importer importer(text, file, context, error);
  return importer.run();
}

//===----------------------------------------------------------------------===//
// The ops and dtypes of a model (ModelOps.h)
//===----------------------------------------------------------------------===//

bool fsdp::isModelOpName(StringRef name) { return findSpec(name) != nullptr; }

std::string fsdp::modelOpNames() { return opNames(); }

bool fsdp::isModelDtype(Type type) {
  return parseDtype(dtypeStr(type), type.getContext()).has_value();
}

//===----------------------------------------------------------------------===//
// Export
//===----------------------------------------------------------------------===//

namespace {

void addTensor(ojson &j, Type type) {
  auto t = cast<RankedTensorType>(type);
  ojson shape = ojson::array();
  for (int64_t d : t.getShape())
    shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  j["shape"] = shape;
  j["dtype"] = dtypeStr(t.getElementType());
}

} // namespace

void fsdp::exportGraphJSON(nn::GraphOp graph, raw_ostream &os) {
  DenseMap<Value, std::string> names;
  Block &body = graph.getBody().front();
  const char *inputNames[] = {"tokens", "targets"};
  ojson inputs = ojson::array();
  for (BlockArgument arg : body.getArguments()) {
    std::string n = arg.getArgNumber() < 2 ? inputNames[arg.getArgNumber()]
                                           : "input" + std::to_string(arg.getArgNumber());
    names[arg] = n;
    ojson j;
    j["name"] = n;
    addTensor(j, arg.getType());
    inputs.push_back(j);
  }

  std::set<std::string> taken;
  for (auto &[v, n] : names)
    taken.insert(n);
  for (auto p : graph.getParams())
    taken.insert(p.getName().str());
  std::vector<std::string> paramLines, opLines;
  int64_t counter = 0;
  std::string output;
  for (Operation &op : body) {
    if (auto p = dyn_cast<nn::ParamOp>(op)) {
      names[p.getResult()] = p.getName().str();
      ojson j;
      j["name"] = p.getName().str();
      addTensor(j, p.getType());
      paramLines.push_back(j.dump());
      continue;
    }
    if (auto ret = dyn_cast<nn::ReturnOp>(op)) {
      output = names[ret.getOperand(0)];
      continue;
    }
    StringRef opName = op.getName().stripDialect();
    const OpSpec *spec = findSpec(opName);
    assert(spec && "verifyModelGraph accepts the graph");
    ojson j;
    j["op"] = opName.str();
    if (auto m = op.getAttrOfType<StringAttr>("module"))
      j["module"] = m.getValue().str();
    ojson operands = ojson::array();
    for (Value v : op.getOperands())
      operands.push_back(names[v]);
    j["operands"] = operands;
    for (const AttrSpec &a : spec->attrs) {
      Attribute attr = op.getAttr(a.name);
      if (!attr)
        continue;
      switch (a.kind) {
      case AttrKind::F64:
        j[a.name] = cast<FloatAttr>(attr).getValueAsDouble();
        break;
      case AttrKind::I64:
        j[a.name] = cast<IntegerAttr>(attr).getInt();
        break;
      case AttrKind::Bool:
        j[a.name] = cast<BoolAttr>(attr).getValue();
        break;
      case AttrKind::RopeScaling:
        j[a.name] = cast<StringAttr>(attr).getValue().str();
        break;
      case AttrKind::Layout:
        j[a.name] = nn::stringifyWeightLayout(cast<nn::WeightLayoutAttr>(attr).getValue()).str();
        break;
      case AttrKind::Flag:
        j[a.name] = true;
        break;
      case AttrKind::Approximate: // tanh, the default, goes unwritten
        if (cast<StringAttr>(attr).getValue() != "tanh")
          j[a.name] = cast<StringAttr>(attr).getValue().str();
        break;
      }
    }
    ojson results = ojson::array();
    for (Value r : op.getResults()) {
      // Generated names skip any a parameter or input already holds.
      std::string n;
      do
        n = "v" + std::to_string(counter++);
      while (taken.count(n));
      names[r] = n;
      ojson rj;
      rj["name"] = n;
      addTensor(rj, r.getType());
      results.push_back(rj);
    }
    j["results"] = results;
    opLines.push_back(j.dump());
  }

  auto list = [&](const std::vector<std::string> &lines) {
    os << "[\n";
    for (size_t i = 0; i < lines.size(); ++i)
      os << "    " << lines[i] << (i + 1 < lines.size() ? ",\n" : "\n");
    os << "  ]";
  };
  os << "{\n";
  os << "  \"format\": \"fsdp-graph\",\n";
  os << "  \"version\": " << kGraphFormatVersion << ",\n";
  os << "  \"name\": " << ojson(graph.getSymName().str()).dump() << ",\n";
  os << "  \"model_type\": " << ojson(graph.getModelType().str()).dump() << ",\n";
  os << "  \"block_prefix\": " << ojson(graph.getBlockPrefix().str()).dump() << ",\n";
  os << "  \"num_blocks\": " << graph.getNumBlocks() << ",\n";
  os << "  \"max_seq_len\": " << graph.getMaxSeqLen() << ",\n";
  if (auto kind = graph.getInputsKind())
    os << "  \"inputs_kind\": " << ojson(kind->str()).dump() << ",\n";
  if (DictionaryAttr image = graph.getImageAttr()) {
    ojson fields = ojson::object();
    for (const char *key : {"height", "width", "channels", "patch_height", "patch_width"})
      if (auto v = dyn_cast_or_null<IntegerAttr>(image.get(key)))
        fields[key] = v.getInt();
    os << "  \"image\": " << fields.dump() << ",\n";
  }
  os << "  \"inputs\": " << inputs.dump() << ",\n";
  os << "  \"params\": ";
  list(paramLines);
  os << ",\n  \"ops\": ";
  list(opLines);
  os << ",\n  \"output\": " << ojson(output).dump() << "\n}\n";
}
