//===- HFConfig.cpp - model graphs from an HF config.json -----------------===//
//
// The graphs follow transformers' GPT2LMHeadModel, LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM: the same
// parameter names, shapes, layouts and order as their state dicts, so the
// runtime can read HF safetensors without renaming anything.
//
// Import is strict: each family lists the keys it implements, and a few keys
// only describe the checkpoint; any other key may change the model, so it is
// an error naming it rather than silently ignored.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/Import/JsonReader.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdio>

using namespace mlir;
using namespace fsdp;
using nlohmann::json;

StringRef fsdp::supportedModelTypes() { return "gpt2, llama, mistral, qwen2, qwen3"; }

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

/// GPT-2's descriptive keys: n_ctx (unused by transformers' GPT-2), the
/// summary head of GPT2DoubleHeadsModel (not part of the LM), and keys of
/// the first published configs that transformers ignores.
const char *const kGPT2DescriptiveKeys[] = {
    "n_ctx",
    "output_past",
    "n_special",
    "predict_special_tokens",
    "summary_activation",
    "summary_first_dropout",
    "summary_proj_to_labels",
    "summary_type",
    "summary_use_proj",
};

enum class Family { GPT2, Llama, Mistral, Qwen2, Qwen3 };

/// The keys each family's importer reads (and so implements or refuses by value).
std::vector<const char *> implementedKeys(Family f) {
  if (f == Family::GPT2)
    return {"vocab_size",
            "n_embd",
            "n_layer",
            "n_head",
            "n_positions",
            "n_inner",
            "layer_norm_epsilon",
            "activation_function",
            "tie_word_embeddings",
            "scale_attn_by_inverse_layer_idx",
            "reorder_and_upcast_attn",
            "scale_attn_weights",
            "resid_pdrop",
            "embd_pdrop",
            "attn_pdrop"};
  std::vector<const char *> keys = {"vocab_size",
                                    "hidden_size",
                                    "intermediate_size",
                                    "num_hidden_layers",
                                    "num_attention_heads",
                                    "num_key_value_heads",
                                    "max_position_embeddings",
                                    "rms_norm_eps",
                                    "rope_theta",
                                    "rope_scaling",
                                    "tie_word_embeddings",
                                    "hidden_act",
                                    "attention_dropout",
                                    "head_dim"};
  switch (f) {
  case Family::Llama:
    // pretraining_tp computes the same projections in slices.
    keys.insert(keys.end(), {"attention_bias", "mlp_bias", "pretraining_tp"});
    break;
  case Family::Mistral:
    keys.insert(keys.end(), {"sliding_window"});
    break;
  case Family::Qwen2:
    keys.insert(keys.end(), {"use_sliding_window", "sliding_window", "max_window_layers"});
    break;
  case Family::Qwen3:
    keys.insert(keys.end(),
                {"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers"});
    break;
  case Family::GPT2:
    break;
  }
  return keys;
}

/// Refuses the first key (in the file's order) that `family` neither
/// implements nor knows to be descriptive.
bool checkKeys(JsonReader &r, Family family, StringRef modelType) {
  std::vector<const char *> allowed = implementedKeys(family);
  allowed.insert(allowed.end(), std::begin(kDescriptiveKeys), std::end(kDescriptiveKeys));
  if (family == Family::GPT2)
    allowed.insert(allowed.end(), std::begin(kGPT2DescriptiveKeys), std::end(kGPT2DescriptiveKeys));
  const std::string *first = nullptr;
  size_t firstOffset = 0;
  for (const auto &item : r.root().items()) {
    const std::string &key = item.key();
    if (std::any_of(allowed.begin(), allowed.end(), [&](const char *a) { return key == a; }))
      continue;
    size_t offset = r.offsetOf({key});
    if (!first || offset < firstOffset)
      first = &key, firstOffset = offset;
  }
  if (!first)
    return true;
  return r.fail({*first}, "'" + *first + "' is not implemented for model_type '" + modelType.str() +
                              "'; it may change the model, so fsdp refuses it rather than "
                              "ignore it (docs/architecture.md, \"Model families\")");
}

bool checkDropout(JsonReader &r, const ImportOptions &opts,
                  std::initializer_list<const char *> keys, double hfDefault) {
  for (const char *key : keys) {
    auto p = r.getNumber({key}, hfDefault);
    if (!p)
      return false;
    if (*p != 0.0 && !opts.noDropout) {
      std::string msg = std::string(key) + " = " + json(*p).dump() +
                        ": dropout is not supported (fsdp trains without it, so that "
                        "every world size gives the same losses); set it to 0";
      if (!r.get({key}, false))
        msg += " (absent, so transformers' default applies)";
      return r.fail({key}, msg + ", or pass --no-dropout to train without it");
    }
  }
  return true;
}

bool parseGPT2(JsonReader &r, const ImportOptions &opts, ModelConfig &c) {
  auto vocab = r.getInt({"vocab_size"});
  if (!vocab)
    return false;
  auto d = r.getInt({"n_embd"});
  if (!d)
    return false;
  auto layers = r.getInt({"n_layer"});
  if (!layers)
    return false;
  auto heads = r.getInt({"n_head"});
  if (!heads)
    return false;
  auto positions = r.getInt({"n_positions"}, int64_t(1024));
  if (!positions)
    return false;
  // Saturated: a width this large fails the size check below.
  auto inner = r.getInt({"n_inner"}, *d <= INT64_MAX / 4 ? 4 * *d : INT64_MAX);
  if (!inner)
    return false;
  auto eps = r.getNumber({"layer_norm_epsilon"}, 1e-5);
  if (!eps)
    return false;
  if (*eps <= 0)
    return r.fail({"layer_norm_epsilon"}, "layer_norm_epsilon must be positive");
  auto act = r.getString({"activation_function"}, std::string("gelu_new"));
  if (!act)
    return false;
  if (*act != "gelu_new" && *act != "gelu_pytorch_tanh")
    return r.fail({"activation_function"},
                  "activation_function '" + *act +
                      "' is not supported; fsdp implements GELU with the tanh "
                      "approximation ('gelu_new' or 'gelu_pytorch_tanh')");
  if (*d % *heads != 0)
    return r.fail({"n_embd"}, "n_embd = " + std::to_string(*d) +
                                  " is not divisible by n_head = " + std::to_string(*heads));
  auto tie = r.getBool({"tie_word_embeddings"}, true);
  if (!tie)
    return false;
  for (const char *flag : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"}) {
    auto b = r.getBool({flag}, false);
    if (!b)
      return false;
    if (*b)
      return r.fail({flag}, std::string(flag) + " = true is not supported");
  }
  auto scale = r.getBool({"scale_attn_weights"}, true);
  if (!scale)
    return false;
  if (!*scale)
    return r.fail({"scale_attn_weights"}, "scale_attn_weights = false is not supported");
  if (!checkDropout(r, opts, {"resid_pdrop", "embd_pdrop", "attn_pdrop"}, 0.1))
    return false;

  c.modelType = "gpt2";
  c.vocabSize = *vocab;
  c.hiddenSize = *d;
  c.numLayers = *layers;
  c.numHeads = *heads;
  c.numKvHeads = *heads;
  c.headDim = *d / *heads;
  c.intermediateSize = *inner;
  c.maxSeqLen = *positions;
  c.normEps = *eps;
  c.tieWordEmbeddings = *tie;
  return true;
}

/// LLaMA and the families built on it (mistral, qwen2, qwen3).
bool parseLlama(JsonReader &r, const ImportOptions &opts, Family family, ModelConfig &c) {
  auto vocab = r.getInt({"vocab_size"});
  if (!vocab)
    return false;
  auto d = r.getInt({"hidden_size"});
  if (!d)
    return false;
  auto inter = r.getInt({"intermediate_size"});
  if (!inter)
    return false;
  auto layers = r.getInt({"num_hidden_layers"});
  if (!layers)
    return false;
  auto heads = r.getInt({"num_attention_heads"});
  if (!heads)
    return false;
  auto kv = r.getInt({"num_key_value_heads"}, *heads);
  if (!kv)
    return false;
  auto positions = r.getInt({"max_position_embeddings"}, int64_t(2048));
  if (!positions)
    return false;
  auto eps = r.getNumber({"rms_norm_eps"}, 1e-6);
  if (!eps)
    return false;
  if (*eps <= 0)
    return r.fail({"rms_norm_eps"}, "rms_norm_eps must be positive");
  auto theta = r.getNumber({"rope_theta"}, 10000.0);
  if (!theta)
    return false;
  if (*theta <= 0)
    return r.fail({"rope_theta"}, "rope_theta must be positive");
  auto tie = r.getBool({"tie_word_embeddings"}, false);
  if (!tie)
    return false;
  auto act = r.getString({"hidden_act"}, std::string("silu"));
  if (!act)
    return false;
  if (*act != "silu")
    return r.fail({"hidden_act"},
                  "hidden_act '" + *act + "' is not supported; LLaMA's MLP is SwiGLU ('silu')");
  for (const char *flag : {"attention_bias", "mlp_bias"}) {
    if (!r.get({flag}, false))
      continue; // absent, or a key checkKeys refused for this family
    auto b = r.getBool({flag}, false);
    if (!b)
      return false;
    if (*b)
      return r.fail({flag}, std::string(flag) + " = true is not supported (" +
                                (family == Family::Qwen3 ? "Qwen3" : "LLaMA") +
                                " has no biases on its projections)");
  }
  int64_t window = 0;
  if (family == Family::Qwen2 || family == Family::Qwen3) {
    // Qwen's sliding window is off unless use_sliding_window; then
    // sliding_window and max_window_layers are unused.
    auto sliding = r.getBool({"use_sliding_window"}, false);
    if (!sliding)
      return false;
    if (*sliding)
      return r.fail({"use_sliding_window"},
                    "use_sliding_window = true is not supported (fsdp implements Qwen's full "
                    "causal attention); set it to false");
  }
  if (family == Family::Mistral) {
    // null: full causal; absent: transformers' MistralConfig default, 4096.
    const json *w = r.get({"sliding_window"}, false);
    if (!w || !w->is_null()) {
      auto v = r.getInt({"sliding_window"}, int64_t(4096));
      if (!v)
        return false;
      window = *v;
    }
  }
  if (!checkDropout(r, opts, {"attention_dropout"}, 0.0))
    return false;
  if (*heads % *kv != 0)
    return r.fail({"num_key_value_heads"},
                  "num_attention_heads = " + std::to_string(*heads) +
                      " is not a multiple of num_key_value_heads = " + std::to_string(*kv));
  int64_t defHeadDim = *d / *heads;
  if (!r.get({"head_dim"}, false) && *d % *heads != 0)
    return r.fail({"hidden_size"},
                  "hidden_size = " + std::to_string(*d) +
                      " is not divisible by num_attention_heads = " + std::to_string(*heads));
  auto headDim = r.getInt({"head_dim"}, defHeadDim);
  if (!headDim)
    return false;
  if (*headDim % 2 != 0)
    return r.fail({"head_dim"}, "the head dimension " + std::to_string(*headDim) +
                                    " must be even for rotary embeddings");

  std::optional<Llama3RopeScaling> scaling;
  const json *rs = r.get({"rope_scaling"}, false);
  if (rs && !rs->is_null()) {
    if (!rs->is_object())
      return r.fail({"rope_scaling"},
                    "rope_scaling must be an object or null, but is " + JsonReader::describe(*rs));
    std::string key = rs->contains("rope_type") ? "rope_type" : "type";
    auto type = r.getString({"rope_scaling", key});
    if (!type)
      return false;
    if (*type != "llama3")
      return r.fail({"rope_scaling", key},
                    "rope_scaling type '" + *type + "' is not supported (supported: llama3)");
    auto f = r.getNumber({"rope_scaling", "factor"});
    auto lo = f ? r.getNumber({"rope_scaling", "low_freq_factor"}) : std::nullopt;
    auto hi = lo ? r.getNumber({"rope_scaling", "high_freq_factor"}) : std::nullopt;
    auto orig = hi ? r.getInt({"rope_scaling", "original_max_position_embeddings"}) : std::nullopt;
    if (!orig)
      return false;
    if (!(*f > 0) || !(*lo > 0) || !(*hi > *lo))
      return r.fail({"rope_scaling"}, "rope_scaling needs factor > 0 and 0 < "
                                      "low_freq_factor < high_freq_factor");
    scaling = Llama3RopeScaling{*f, *lo, *hi, *orig};
  }

  static const char *const names[] = {"gpt2", "llama", "mistral", "qwen2", "qwen3"};
  c.modelType = names[int(family)];
  c.qkvBias = family == Family::Qwen2;
  c.qkNorm = family == Family::Qwen3;
  c.slidingWindow = window;
  c.vocabSize = *vocab;
  c.hiddenSize = *d;
  c.numLayers = *layers;
  c.numHeads = *heads;
  c.numKvHeads = *kv;
  c.headDim = *headDim;
  c.intermediateSize = *inter;
  c.maxSeqLen = *positions;
  c.normEps = *eps;
  c.ropeTheta = *theta;
  c.tieWordEmbeddings = *tie;
  c.ropeScaling = scaling;
  return true;
}

/// Refuses a model larger than the planner's limits (nn::kMaxBlocks,
/// nn::kMaxParameters): its graph would not end building, or its sizes
/// would not fit in 64 bits. The error sits at the key of the largest value.
bool checkModelSize(JsonReader &r, const ModelConfig &c) {
  bool gpt2 = c.modelType == "gpt2";
  const char *layersKey = gpt2 ? "n_layer" : "num_hidden_layers";
  if (c.numLayers > nn::kMaxBlocks)
    return r.fail({layersKey}, std::string(layersKey) + " = " + std::to_string(c.numLayers) +
                                   " is more than fsdp plans (at most " +
                                   std::to_string(nn::kMaxBlocks) + " blocks)");
  const char *positionsKey = gpt2 ? "n_positions" : "max_position_embeddings";
  if (c.maxSeqLen > nn::kMaxSeqLen)
    return r.fail({positionsKey}, std::string(positionsKey) + " = " + std::to_string(c.maxSeqLen) +
                                      " is more than fsdp plans (at most " +
                                      std::to_string(nn::kMaxSeqLen) + " tokens)");
  // In floating point: the exact count may not fit in 64 bits, and a bound
  // is all that is asked.
  double V = c.vocabSize, D = c.hiddenSize, I = c.intermediateSize, L = c.numLayers;
  double qW = (double)c.numHeads * c.headDim, kvW = (double)c.numKvHeads * c.headDim;
  double params;
  if (gpt2)
    params = V * D + (double)c.maxSeqLen * D + L * (4 * D * D + 2 * D * I + 9 * D + I) + 2 * D;
  else
    params = V * D +
             L * (2 * qW * D + 2 * kvW * D + 3 * I * D + 2 * D + (c.qkvBias ? qW + 2 * kvW : 0) +
                  (c.qkNorm ? 2.0 * c.headDim : 0)) +
             D;
  if (!c.tieWordEmbeddings)
    params += V * D;
  if (params <= (double)nn::kMaxParameters)
    return true;
  // The largest value given is the likeliest mistake.
  // (Values given, not defaults derived from them.)
  std::vector<std::pair<const char *, int64_t>> sizes;
  if (gpt2)
    sizes = {{"vocab_size", c.vocabSize},
             {"n_embd", c.hiddenSize},
             {"n_positions", c.maxSeqLen},
             {"n_layer", c.numLayers},
             {"n_inner", 0}};
  else
    sizes = {{"vocab_size", c.vocabSize},
             {"hidden_size", c.hiddenSize},
             {"intermediate_size", c.intermediateSize},
             {"num_hidden_layers", c.numLayers},
             {"num_attention_heads", c.numHeads},
             {"head_dim", 0}};
  if (r.get({sizes.back().first}, false))
    sizes.back().second = gpt2 ? c.intermediateSize : c.headDim;
  auto largest = std::max_element(sizes.begin(), sizes.end(),
                                  [](auto &a, auto &b) { return a.second < b.second; });
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", params);
  return r.fail({largest->first}, std::string("the model would have ") + count +
                                      " parameters, more than fsdp plans (at most 2^48 = " +
                                      std::to_string(nn::kMaxParameters) + "); " + largest->first +
                                      " is " + std::to_string(largest->second));
}

// Builds ops with a module path, keeping the graph code close to HF's modules.
class GraphBuilder {
public:
  GraphBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  RankedTensorType act(int64_t width) {
    return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic, width},
                                 b.getF32Type());
  }
  Value param(StringRef name, ArrayRef<int64_t> shape) {
    return b.create<nn::ParamOp>(loc, RankedTensorType::get(shape, b.getF32Type()),
                                 b.getStringAttr(name));
  }
  StringAttr mod(const Twine &path) { return b.getStringAttr(path); }

  Value linear(nn::WeightLayout layout, Value x, Value w, Value bias, const Twine &path) {
    auto ws = cast<RankedTensorType>(w.getType()).getShape();
    int64_t out = layout == nn::WeightLayout::in_out ? ws[1] : ws[0];
    return b.create<nn::LinearOp>(loc, act(out), layout, x, w, bias, mod(path));
  }

  OpBuilder &b;
  Location loc;
};

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
  std::optional<Family> family;
  if (*type == "gpt2")
    family = Family::GPT2;
  else if (*type == "llama")
    family = Family::Llama;
  else if (*type == "mistral")
    family = Family::Mistral;
  else if (*type == "qwen2")
    family = Family::Qwen2;
  else if (*type == "qwen3")
    family = Family::Qwen3;
  if (!family) {
    r.fail({"model_type"},
           "unknown model_type '" + *type + "'; supported: " + supportedModelTypes().str());
    return std::nullopt;
  }
  ModelConfig c;
  bool ok =
      checkKeys(r, *family, *type) &&
      (*family == Family::GPT2 ? parseGPT2(r, options, c) : parseLlama(r, options, *family, c));
  if (!ok || !checkModelSize(r, c))
    return std::nullopt;
  // A config has no name of its own; its folder usually names the model
  // ("models/Meta-Llama-3-8B/config.json").
  c.name = c.modelType;
  StringRef dir = llvm::sys::path::filename(llvm::sys::path::parent_path(file));
  if (llvm::sys::path::filename(file) == "config.json" && !dir.empty() && dir != "." && dir != "..")
    c.name = dir.str();
  return c;
}

nn::GraphOp fsdp::buildGraph(const ModelConfig &c, ModuleOp module) {
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  MLIRContext *ctx = module.getContext();
  Location loc = module.getLoc();
  auto ids = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, b.getI64Type());
  auto loss = RankedTensorType::get({}, b.getF32Type());
  bool gpt2 = c.modelType == "gpt2";
  StringRef prefix = gpt2 ? "transformer.h" : "model.layers";
  auto graph =
      b.create<nn::GraphOp>(loc, c.name, FunctionType::get(ctx, {ids, ids}, {loss}), ArrayAttr(),
                            ArrayAttr(), c.modelType, prefix, c.numLayers, c.maxSeqLen);
  Block *body = b.createBlock(&graph.getBody(), {}, {ids, ids}, {loc, loc});
  Value tokens = body->getArgument(0), targets = body->getArgument(1);
  GraphBuilder g(b, loc);
  const int64_t D = c.hiddenSize, V = c.vocabSize, I = c.intermediateSize;
  const int64_t qW = c.numHeads * c.headDim, kvW = c.numKvHeads * c.headDim;
  auto eps = b.getF64FloatAttr(c.normEps);
  using nn::WeightLayout;

  // Parameters first, in the order of the HF state dict.
  Value wte, wpe, lmHead, lnfW, lnfB;
  struct Block {
    Value w[13];
  };
  std::vector<Block> blocks(c.numLayers);
  if (gpt2) {
    wte = g.param("transformer.wte.weight", {V, D});
    wpe = g.param("transformer.wpe.weight", {c.maxSeqLen, D});
    for (int64_t i = 0; i < c.numLayers; ++i) {
      std::string p = "transformer.h." + std::to_string(i) + ".";
      Value *w = blocks[i].w;
      w[0] = g.param(p + "ln_1.weight", {D});
      w[1] = g.param(p + "ln_1.bias", {D});
      w[2] = g.param(p + "attn.c_attn.weight", {D, 3 * D});
      w[3] = g.param(p + "attn.c_attn.bias", {3 * D});
      w[4] = g.param(p + "attn.c_proj.weight", {D, D});
      w[5] = g.param(p + "attn.c_proj.bias", {D});
      w[6] = g.param(p + "ln_2.weight", {D});
      w[7] = g.param(p + "ln_2.bias", {D});
      w[8] = g.param(p + "mlp.c_fc.weight", {D, I});
      w[9] = g.param(p + "mlp.c_fc.bias", {I});
      w[10] = g.param(p + "mlp.c_proj.weight", {I, D});
      w[11] = g.param(p + "mlp.c_proj.bias", {D});
    }
    lnfW = g.param("transformer.ln_f.weight", {D});
    lnfB = g.param("transformer.ln_f.bias", {D});
    lmHead = c.tieWordEmbeddings ? wte : g.param("lm_head.weight", {V, D});
  } else {
    wte = g.param("model.embed_tokens.weight", {V, D});
    for (int64_t i = 0; i < c.numLayers; ++i) {
      std::string p = "model.layers." + std::to_string(i) + ".";
      Value *w = blocks[i].w;
      // Qwen2's biases follow their weights; Qwen3's norms follow o_proj.
      w[0] = g.param(p + "self_attn.q_proj.weight", {qW, D});
      if (c.qkvBias)
        w[9] = g.param(p + "self_attn.q_proj.bias", {qW});
      w[1] = g.param(p + "self_attn.k_proj.weight", {kvW, D});
      if (c.qkvBias)
        w[10] = g.param(p + "self_attn.k_proj.bias", {kvW});
      w[2] = g.param(p + "self_attn.v_proj.weight", {kvW, D});
      if (c.qkvBias)
        w[11] = g.param(p + "self_attn.v_proj.bias", {kvW});
      w[3] = g.param(p + "self_attn.o_proj.weight", {D, qW});
      if (c.qkNorm) {
        w[9] = g.param(p + "self_attn.q_norm.weight", {c.headDim});
        w[10] = g.param(p + "self_attn.k_norm.weight", {c.headDim});
      }
      w[4] = g.param(p + "mlp.gate_proj.weight", {I, D});
      w[5] = g.param(p + "mlp.up_proj.weight", {I, D});
      w[6] = g.param(p + "mlp.down_proj.weight", {D, I});
      w[7] = g.param(p + "input_layernorm.weight", {D});
      w[8] = g.param(p + "post_attention_layernorm.weight", {D});
    }
    lnfW = g.param("model.norm.weight", {D});
    lmHead = c.tieWordEmbeddings ? wte : g.param("lm_head.weight", {V, D});
  }

  Value h;
  if (gpt2) {
    Value pos = b.create<nn::PositionIdsOp>(loc, ids, tokens, g.mod("transformer.wpe"));
    Value te = b.create<nn::EmbeddingOp>(loc, g.act(D), tokens, wte, g.mod("transformer.wte"));
    Value pe = b.create<nn::EmbeddingOp>(loc, g.act(D), pos, wpe, g.mod("transformer.wpe"));
    h = b.create<nn::AddOp>(loc, g.act(D), te, pe, g.mod("transformer"));
    for (int64_t i = 0; i < c.numLayers; ++i) {
      std::string p = "transformer.h." + std::to_string(i);
      Value *w = blocks[i].w;
      Value a = b.create<nn::LayerNormOp>(loc, g.act(D), h, w[0], w[1], eps, g.mod(p + ".ln_1"));
      Value qkv = g.linear(WeightLayout::in_out, a, w[2], w[3], p + ".attn.c_attn");
      auto split = b.create<nn::SplitOp>(loc, TypeRange{g.act(D), g.act(D), g.act(D)}, qkv,
                                         g.mod(p + ".attn"));
      Value o = b.create<nn::CausalAttentionOp>(loc, g.act(D), split.getResult(0),
                                                split.getResult(1), split.getResult(2), c.numHeads,
                                                c.numKvHeads, IntegerAttr(), g.mod(p + ".attn"));
      Value proj = g.linear(WeightLayout::in_out, o, w[4], w[5], p + ".attn.c_proj");
      h = b.create<nn::AddOp>(loc, g.act(D), h, proj, g.mod(p));
      Value m = b.create<nn::LayerNormOp>(loc, g.act(D), h, w[6], w[7], eps, g.mod(p + ".ln_2"));
      Value fc = g.linear(WeightLayout::in_out, m, w[8], w[9], p + ".mlp.c_fc");
      Value act = b.create<nn::GeluOp>(loc, g.act(I), fc, g.mod(p + ".mlp.act"), StringAttr());
      Value down = g.linear(WeightLayout::in_out, act, w[10], w[11], p + ".mlp.c_proj");
      h = b.create<nn::AddOp>(loc, g.act(D), h, down, g.mod(p));
    }
    h = b.create<nn::LayerNormOp>(loc, g.act(D), h, lnfW, lnfB, eps, g.mod("transformer.ln_f"));
  } else {
    h = b.create<nn::EmbeddingOp>(loc, g.act(D), tokens, wte, g.mod("model.embed_tokens"));
    auto theta = b.getF64FloatAttr(c.ropeTheta);
    FloatAttr f, lo, hi;
    IntegerAttr orig;
    if (c.ropeScaling) {
      f = b.getF64FloatAttr(c.ropeScaling->factor);
      lo = b.getF64FloatAttr(c.ropeScaling->lowFreqFactor);
      hi = b.getF64FloatAttr(c.ropeScaling->highFreqFactor);
      orig = b.getI64IntegerAttr(c.ropeScaling->originalMaxPosition);
    }
    for (int64_t i = 0; i < c.numLayers; ++i) {
      std::string p = "model.layers." + std::to_string(i);
      Value *w = blocks[i].w;
      Value a = b.create<nn::RMSNormOp>(loc, g.act(D), h, w[7], eps, g.mod(p + ".input_layernorm"));
      Value q = g.linear(WeightLayout::out_in, a, w[0], c.qkvBias ? w[9] : Value(),
                         p + ".self_attn.q_proj");
      Value k = g.linear(WeightLayout::out_in, a, w[1], c.qkvBias ? w[10] : Value(),
                         p + ".self_attn.k_proj");
      Value v = g.linear(WeightLayout::out_in, a, w[2], c.qkvBias ? w[11] : Value(),
                         p + ".self_attn.v_proj");
      if (c.qkNorm) { // rows of head_dim: the weight's length
        q = b.create<nn::RMSNormOp>(loc, g.act(qW), q, w[9], eps, g.mod(p + ".self_attn.q_norm"));
        k = b.create<nn::RMSNormOp>(loc, g.act(kvW), k, w[10], eps, g.mod(p + ".self_attn.k_norm"));
      }
      auto rope = g.mod(p + ".self_attn.rotary_emb");
      q = b.create<nn::RopeOp>(loc, g.act(qW), q, b.getI64IntegerAttr(c.numHeads), theta, f, lo, hi,
                               orig, UnitAttr(), rope);
      k = b.create<nn::RopeOp>(loc, g.act(kvW), k, b.getI64IntegerAttr(c.numKvHeads), theta, f, lo,
                               hi, orig, UnitAttr(), rope);
      IntegerAttr window = c.slidingWindow ? b.getI64IntegerAttr(c.slidingWindow) : IntegerAttr();
      Value o = b.create<nn::CausalAttentionOp>(
          loc, g.act(qW), q, k, v, b.getI64IntegerAttr(c.numHeads),
          b.getI64IntegerAttr(c.numKvHeads), window, g.mod(p + ".self_attn"));
      Value proj = g.linear(WeightLayout::out_in, o, w[3], Value(), p + ".self_attn.o_proj");
      h = b.create<nn::AddOp>(loc, g.act(D), h, proj, g.mod(p));
      Value m = b.create<nn::RMSNormOp>(loc, g.act(D), h, w[8], eps,
                                        g.mod(p + ".post_attention_layernorm"));
      Value gate = g.linear(WeightLayout::out_in, m, w[4], Value(), p + ".mlp.gate_proj");
      Value up = g.linear(WeightLayout::out_in, m, w[5], Value(), p + ".mlp.up_proj");
      Value s = b.create<nn::SiluMulOp>(loc, g.act(I), gate, up, g.mod(p + ".mlp.act_fn"));
      Value down = g.linear(WeightLayout::out_in, s, w[6], Value(), p + ".mlp.down_proj");
      h = b.create<nn::AddOp>(loc, g.act(D), h, down, g.mod(p));
    }
    h = b.create<nn::RMSNormOp>(loc, g.act(D), h, lnfW, eps, g.mod("model.norm"));
  }
  Value logits = g.linear(WeightLayout::out_in, h, lmHead, Value(), "lm_head");
  Value l = b.create<nn::CrossEntropyOp>(loc, loss, logits, targets, StringAttr());
  b.create<nn::ReturnOp>(loc, ValueRange{l});
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
