//===- HFConfig.cpp - model graphs from an HF config.json -----------------===//
//
// The graphs follow transformers' GPT2LMHeadModel, LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, BertForMaskedLM
// and ViTForImageClassification: the same
// parameter names, shapes, layouts and order as their state dicts, so the
// runtime can read HF safetensors without renaming anything. Each is a
// registered ModelFamily (Families/); this file reads what every config
// shares and hands the rest to the family of its model_type.
//
// Import is strict: each family lists the keys it implements, and a few keys
// only describe the checkpoint; any other key may change the model, so it is
// an error naming it rather than silently ignored.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Families/Family.h"
#include "planner/Import/Import.h"
#include "planner/Import/JsonReader.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/Path.h"

#include "support/InputFile.h"

#include <algorithm>
#include <cstdio>
#include <sys/stat.h>

using namespace mlir;
using namespace fsdp;
using nlohmann::json;

StringRef fsdp::supportedModelTypes() {
  static const std::string types = [] {
    std::string s;
    for (const ModelFamily *f : modelFamilies())
      s += (s.empty() ? "" : ", ") + f->modelType().str();
    return s;
  }();
  return types;
}

namespace {

/// Keys that describe a checkpoint, its tokenizer or its use in transformers
/// without changing the model's maths; accepted for every family.
const char *const kDescriptiveKeys[] = {
    "_name_or_path",
    "architectures",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "id2label",
    "label2id",
    "initializer_range",
    "model_type",
    "output_attentions",
    "output_hidden_states",
    "return_dict",
    "task_specific_params",
    "tokenizer_class",
    "torch_dtype",
    "torchscript",
    "transformers_version",
    "use_cache",
};

/// Keys of features fsdp does not implement, with the value that turns the
/// feature off (what fsdp computes): accepted with that value, refused with
/// any other. Published configs write them (Qwen2.5's `use_mrope: false`).
struct OffValue {
  const char *key;
  bool value;
};
const OffValue kOffValues[] = {
    {"use_mrope", false}, // Qwen2-VL's multimodal rotary positions
};

/// Refuses the first key (in the file's order) that `family` neither
/// implements nor knows to be descriptive, nor holds at its off value.
bool checkKeys(JsonReader &r, const ModelFamily &family) {
  std::vector<const char *> allowed = family.implementedKeys();
  std::vector<const char *> descriptive = family.descriptiveKeys();
  allowed.insert(allowed.end(), std::begin(kDescriptiveKeys), std::end(kDescriptiveKeys));
  allowed.insert(allowed.end(), descriptive.begin(), descriptive.end());
  const std::string *first = nullptr;
  size_t firstOffset = 0;
  for (const auto &item : r.root().items()) {
    const std::string &key = item.key();
    if (std::any_of(allowed.begin(), allowed.end(), [&](const char *a) { return key == a; }))
      continue;
    if (std::any_of(std::begin(kOffValues), std::end(kOffValues), [&](const OffValue &o) {
          return key == o.key && item.value().is_boolean() && item.value().get<bool>() == o.value;
        }))
      continue;
    size_t offset = r.offsetOf({key});
    if (!first || offset < firstOffset)
      first = &key, firstOffset = offset;
  }
  if (!first)
    return true;
  return r.fail({*first}, "'" + *first + "' is not implemented for model_type '" +
                              family.modelType().str() +
                              "'; it may change the model, so fsdp refuses it rather than "
                              "ignore it (docs/architecture.md, \"Model families\")");
}

/// Refuses a model larger than the planner's limits (nn::kMaxBlocks,
/// nn::kMaxParameters): its graph would not end building, or its sizes
/// would not fit in 64 bits. The error sits at the key of the largest value.
bool checkModelSize(JsonReader &r, const ModelFamily &family, const ModelConfig &c) {
  const char *layersKey = family.layersKey();
  if (c.numLayers > nn::kMaxBlocks)
    return r.fail({layersKey}, std::string(layersKey) + " = " + std::to_string(c.numLayers) +
                                   " is more than fsdp plans (at most " +
                                   std::to_string(nn::kMaxBlocks) + " blocks)");
  const char *positionsKey = family.positionsKey();
  if (c.maxSeqLen > nn::kMaxSeqLen)
    return r.fail({positionsKey}, std::string(positionsKey) + " = " + std::to_string(c.maxSeqLen) +
                                      " is more than fsdp plans (at most " +
                                      std::to_string(nn::kMaxSeqLen) + " tokens)");
  // A bound is all that is asked.
  double params = family.parameterBound(c);
  if (!c.tieWordEmbeddings)
    params += (double)c.vocabSize * c.hiddenSize;
  if (params <= (double)nn::kMaxParameters)
    return true;
  // The largest value given is the likeliest mistake.
  // (Values given, not defaults derived from them.)
  std::vector<SizeKey> sizes = family.sizeKeys(c);
  for (SizeKey &s : sizes)
    if (s.onlyIfGiven && !r.get({s.key}, false))
      s.value = 0;
  auto largest = std::max_element(sizes.begin(), sizes.end(),
                                  [](auto &a, auto &b) { return a.value < b.value; });
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", params);
  return r.fail({largest->key}, std::string("the model would have ") + count +
                                    " parameters, more than fsdp plans (at most 2^48 = " +
                                    std::to_string(nn::kMaxParameters) + "); " + largest->key +
                                    " is " + std::to_string(largest->value));
}

// The generation config of a model that generates: the folder's
// generation_config.json when the config has one beside it (what
// from_pretrained reads), else what transformers'
// GenerationConfig.from_model_config derives from the config and
// save_pretrained writes (its non-default values: the token ids the config
// gives, and "_from_model_config"), keys sorted as transformers writes them.
bool readGenerationConfig(const json &config, StringRef file, std::string &out,
                          ImportError &error) {
  SmallString<256> beside = llvm::sys::path::parent_path(file);
  llvm::sys::path::append(beside, "generation_config.json");
  struct stat st;
  if (::stat(beside.c_str(), &st) == 0) {
    std::string text;
    std::string err = support::readRegularFile(std::string(beside), support::kMaxJsonBytes,
                                               "generation config", &text);
    if (err.empty()) {
      unsigned line = 0, col = 0;
      err = support::checkJsonDepth(text, &line, &col);
    }
    json doc;
    if (err.empty()) {
      doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_object())
        err = "not a JSON object";
    }
    if (!err.empty()) {
      error.file = std::string(beside);
      error.line = error.col = 0;
      error.message = "the generation config beside " + file.str() + ": " + err;
      return false;
    }
    out = doc.dump();
    return true;
  }
  json derived = {{"_from_model_config", true}};
  for (const char *key : {"bos_token_id", "eos_token_id", "pad_token_id", "transformers_version"})
    if (config.contains(key) && !config[key].is_null())
      derived[key] = config[key];
  out = derived.dump();
  return true;
}

} // namespace

std::optional<ModelConfig> fsdp::parseHFConfig(StringRef text, StringRef file,
                                               const ImportOptions &options, ImportError &error) {
  JsonReader r(text, file, error);
  if (!r.parse())
    return std::nullopt;
  if (!r.root().is_object()) {
    r.fail({}, "an HF config must be a JSON object, but this is " + JsonReader::describe(r.root()));
    return std::nullopt;
  }
  auto type = r.getString({"model_type"});
  if (!type)
    return std::nullopt;
  const ModelFamily *family = findFamily(*type);
  if (!family) {
    r.fail({"model_type"},
           "unknown model_type '" + *type + "'; supported: " + supportedModelTypes().str());
    return std::nullopt;
  }
  ModelConfig c;
  c.modelType = *type;
  if (!checkKeys(r, *family) || !family->parse(r, options, c) || !checkModelSize(r, *family, c))
    return std::nullopt;
  // A config has no name of its own; its folder usually names the model
  // ("models/Meta-Llama-3-8B/config.json").
  c.name = c.modelType;
  StringRef dir = llvm::sys::path::filename(llvm::sys::path::parent_path(file));
  if (llvm::sys::path::filename(file) == "config.json" && !dir.empty() && dir != "." && dir != "..")
    c.name = dir.str();
  c.hfConfig = r.root().dump();
  if (family->generates() && !readGenerationConfig(r.root(), file, c.generationConfig, error))
    return std::nullopt;
  return c;
}

nn::GraphOp fsdp::buildGraph(const ModelConfig &c, ModuleOp module) {
  const ModelFamily *family = findFamily(c.modelType);
  if (!family)
    return nn::GraphOp();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  MLIRContext *ctx = module.getContext();
  Location loc = module.getLoc();
  auto loss = RankedTensorType::get({}, b.getF32Type());
  GraphInputs in = family->inputs(c, b);
  Type inputs[2] = {in.inputs, in.targets};
  auto graph = b.create<nn::GraphOp>(
      loc, c.name, FunctionType::get(ctx, inputs, {loss}), ArrayAttr(), ArrayAttr(), c.modelType,
      family->blockPrefix(), c.numLayers, c.maxSeqLen, in.kind, in.image,
      c.hfConfig.empty() ? StringAttr() : b.getStringAttr(c.hfConfig),
      c.generationConfig.empty() ? StringAttr() : b.getStringAttr(c.generationConfig));
  Block *body = b.createBlock(&graph.getBody(), {}, inputs, {loc, loc});
  GraphBuilder g(b, loc, c);
  family->build(g, body->getArgument(0), body->getArgument(1));
  return graph;
}

OwningOpRef<ModuleOp> fsdp::importHFConfig(StringRef text, StringRef file, MLIRContext *context,
                                           const ImportOptions &options, ImportError &error) {
  context->getOrLoadDialect<nn::NNDialect>();
  auto config = parseHFConfig(text, file, options, error);
  if (!config)
    return nullptr;
  Location loc = FileLineColLoc::get(context, file, 1, 1);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  buildGraph(*config, *module);
  if (failed(verify(*module))) {
    error.file = file.str();
    error.message.clear(); // the verifier has reported it
    return nullptr;
  }
  return module;
}
