//===- ModelSummary.cpp ---------------------------------------------------===//
#include "planner/ModelSummary.h"
#include "support/RopeScaling.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace fsdp;

std::string fsdp::withCommas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string fsdp::humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

static std::string moduleOf(StringRef name, StringRef blockPrefix) {
  // Parameters inside a block belong to the block: "transformer.h.3".
  if (!blockPrefix.empty() && name.starts_with(blockPrefix) && name.size() > blockPrefix.size() &&
      name[blockPrefix.size()] == '.') {
    StringRef rest = name.drop_front(blockPrefix.size() + 1);
    return (blockPrefix + "." + rest.take_until([](char c) { return c == '.'; })).str();
  }
  auto pos = name.rfind('.');
  return pos == StringRef::npos ? name.str() : name.substr(0, pos).str();
}

ModelSummary fsdp::summarize(nn::GraphOp graph) {
  ModelSummary s;
  s.name = graph.getSymName().str();
  s.modelType = graph.getModelType().str();
  s.numBlocks = graph.getNumBlocks();
  s.maxSeqLen = graph.getMaxSeqLen();
  if (auto kind = graph.getInputsKind())
    s.inputsKind = kind->str();
  llvm::StringMap<size_t> index;
  for (nn::ParamOp p : graph.getParams()) {
    std::string mod = moduleOf(p.getName(), graph.getBlockPrefix());
    auto [it, inserted] = index.try_emplace(mod, s.modules.size());
    if (inserted)
      s.modules.push_back({mod});
    ModuleRow &row = s.modules[it->second];
    auto type = p.getResult().getType();
    int64_t n = p.getNumElements();
    int64_t bytes = n * ((type.getElementTypeBitWidth() + 7) / 8);
    row.params += n;
    row.bytes += bytes;
    row.tensors += 1;
    s.parameters += n;
    s.paramBytes += bytes;
    s.paramTensors += 1;
    // A weight used by an op of another top-level module is shared (tied).
    for (Operation *user : p.getResult().getUsers()) {
      auto m = user->getAttrOfType<StringAttr>("module");
      if (!m)
        continue;
      std::string userMod = moduleOf((m.getValue() + ".x").str(), graph.getBlockPrefix());
      if (userMod != mod && !StringRef(userMod).starts_with(mod + ".") &&
          llvm::find(row.alsoUsedBy, userMod) == row.alsoUsedBy.end())
        row.alsoUsedBy.push_back(userMod);
    }
  }
  graph.walk([&](nn::RopeOp op) {
    if (!op.getScalingAttr())
      return;
    nlohmann::ordered_json j;
    j[support::kRopeScalingKey] = op.getScalingAttr().getValue().str();
    for (const support::RopeScalingField &f : support::ropeScalingFields()) {
      Attribute a = op->getAttr(f.name);
      if (auto v = dyn_cast_or_null<BoolAttr>(a)) // before IntegerAttr: a BoolAttr is one
        j[f.name] = v.getValue();
      else if (auto v = dyn_cast_or_null<FloatAttr>(a))
        j[f.name] = v.getValueAsDouble();
      else if (auto v = dyn_cast_or_null<IntegerAttr>(a))
        j[f.name] = v.getInt();
    }
    if (llvm::find(s.ropeScalings, j) == s.ropeScalings.end())
      s.ropeScalings.push_back(j);
  });
  // A token uses k of each sparse MLP's E experts: the experts' weights
  // count k/E of their elements.
  s.activeParameters = s.parameters;
  graph.walk([&](nn::MoeLinearOp op) {
    int64_t k = cast<RankedTensorType>(op.getExperts().getType()).getShape().back();
    int64_t E = op.getWeights().size(), per = 0;
    for (Value w : op.getWeights())
      per = cast<RankedTensorType>(w.getType()).getNumElements();
    s.activeParameters -= (E - k) * per;
  });
  return s;
}

void fsdp::printSummary(const ModelSummary &s, llvm::raw_ostream &os) {
  os << "model " << s.name << " (" << s.modelType << "): " << withCommas(s.parameters)
     << " parameters in " << s.paramTensors << " tensors, " << humanBytes(s.paramBytes) << "; ";
  if (s.activeParameters != s.parameters)
    os << withCommas(s.activeParameters) << " active per token; ";
  os << s.numBlocks << " blocks; sequences up to " << s.maxSeqLen << " tokens\n";
  // "rope scaling: yarn, scaling_factor 4.0, ..." (the values as JSON writes them).
  for (const nlohmann::ordered_json &r : s.ropeScalings) {
    os << "rope scaling:";
    for (const auto &[key, value] : r.items())
      os << (key == support::kRopeScalingKey ? " " + value.get<std::string>()
                                             : ", " + key + " " + value.dump());
    os << "\n";
  }
  os << "\n";
  size_t width = 6;
  for (const ModuleRow &r : s.modules)
    width = std::max(width, r.module.size());
  os << llvm::left_justify("module", width) << "  " << llvm::right_justify("parameters", 16) << "  "
     << llvm::right_justify("tensors", 7) << "  " << llvm::right_justify("bytes", 10) << "\n";
  for (const ModuleRow &r : s.modules) {
    os << llvm::left_justify(r.module, width) << "  "
       << llvm::right_justify(withCommas(r.params), 16) << "  "
       << llvm::right_justify(std::to_string(r.tensors), 7) << "  "
       << llvm::right_justify(humanBytes(r.bytes), 10);
    if (!r.alsoUsedBy.empty()) {
      os << "  (also used by";
      for (const std::string &u : r.alsoUsedBy)
        os << " " << u;
      os << ")";
    }
    os << "\n";
  }
  os << llvm::left_justify("total", width) << "  "
     << llvm::right_justify(withCommas(s.parameters), 16) << "  "
     << llvm::right_justify(std::to_string(s.paramTensors), 7) << "  "
     << llvm::right_justify(humanBytes(s.paramBytes), 10) << "\n";
}

nlohmann::ordered_json fsdp::summaryJson(const ModelSummary &s) {
  nlohmann::ordered_json j;
  j["model"] = s.name;
  j["model_type"] = s.modelType;
  j["parameters"] = s.parameters;
  j["active_parameters"] = s.activeParameters;
  j["param_bytes"] = s.paramBytes;
  j["num_blocks"] = s.numBlocks;
  j["max_seq_len"] = s.maxSeqLen;
  nlohmann::ordered_json mods = nlohmann::ordered_json::array();
  for (const ModuleRow &r : s.modules) {
    nlohmann::ordered_json m;
    m["module"] = r.module;
    m["params"] = r.params;
    m["bytes"] = r.bytes;
    m["tensors"] = r.tensors;
    if (!r.alsoUsedBy.empty())
      m["also_used_by"] = r.alsoUsedBy;
    mods.push_back(m);
  }
  j["modules"] = mods;
  if (!s.ropeScalings.empty())
    j["rope_scalings"] = s.ropeScalings;
  return j;
}
