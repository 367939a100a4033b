//===- HFConfig.cpp - model graphs from an HF config.json -----------------===//
//
// The graphs follow transformers' GPT2LMHeadModel, LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, BertForMaskedLM
// and ViTForImageClassification: the same
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

StringRef fsdp::supportedModelTypes() { return "gpt2, llama, mistral, qwen2, qwen3, bert, vit"; }

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

/// The encoders' descriptive keys: BERT's classification heads' dropout and
/// transformers' feed-forward chunking (the same maths in slices), the
/// memory switch of old configs; ViT's masked-image-modelling decoder
/// stride and the pooler, which the classifier does not use.
const char *const kBertDescriptiveKeys[] = {"classifier_dropout", "chunk_size_feed_forward",
                                            "gradient_checkpointing"};
const char *const kViTDescriptiveKeys[] = {"encoder_stride", "pooler_output_size", "pooler_act",
                                           "chunk_size_feed_forward"};

enum class Family { GPT2, Llama, Mistral, Qwen2, Qwen3, Bert, ViT };

/// The keys each family's importer reads (and so implements or refuses by value).
std::vector<const char *> implementedKeys(Family f) {
  if (f == Family::Bert || f == Family::ViT) {
    std::vector<const char *> keys = {
        "hidden_size", "num_hidden_layers",   "num_attention_heads",          "intermediate_size",
        "hidden_act",  "hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps"};
    if (f == Family::Bert)
      keys.insert(keys.end(), {"vocab_size", "max_position_embeddings", "type_vocab_size",
                               "position_embedding_type", "is_decoder", "add_cross_attention",
                               "tie_word_embeddings"});
    else
      keys.insert(keys.end(), {"image_size", "patch_size", "num_channels", "qkv_bias", "num_labels",
                               "problem_type"});
    return keys;
  }
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
  case Family::Bert:
  case Family::ViT:
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
  if (family == Family::Bert)
    allowed.insert(allowed.end(), std::begin(kBertDescriptiveKeys), std::end(kBertDescriptiveKeys));
  if (family == Family::ViT)
    allowed.insert(allowed.end(), std::begin(kViTDescriptiveKeys), std::end(kViTDescriptiveKeys));
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

/// What BERT and ViT share: the encoder's widths, exact GELU and no dropout.
bool parseEncoder(JsonReader &r, const ImportOptions &opts, ModelConfig &c) {
  auto d = r.getInt({"hidden_size"});
  if (!d)
    return false;
  auto layers = r.getInt({"num_hidden_layers"});
  if (!layers)
    return false;
  auto heads = r.getInt({"num_attention_heads"});
  if (!heads)
    return false;
  auto inter = r.getInt({"intermediate_size"});
  if (!inter)
    return false;
  auto act = r.getString({"hidden_act"}, std::string("gelu"));
  if (!act)
    return false;
  if (*act != "gelu")
    return r.fail({"hidden_act"}, "hidden_act '" + *act +
                                      "' is not supported; fsdp implements the encoders' exact "
                                      "(erf) GELU, 'gelu'");
  auto eps = r.getNumber({"layer_norm_eps"}, 1e-12);
  if (!eps)
    return false;
  if (*eps <= 0)
    return r.fail({"layer_norm_eps"}, "layer_norm_eps must be positive");
  if (*d % *heads != 0)
    return r.fail({"hidden_size"},
                  "hidden_size = " + std::to_string(*d) +
                      " is not divisible by num_attention_heads = " + std::to_string(*heads));
  // transformers' defaults: 0.1 for BERT, 0.0 for ViT.
  double hfDropout = c.modelType == "bert" ? 0.1 : 0.0;
  if (!checkDropout(r, opts, {"hidden_dropout_prob", "attention_probs_dropout_prob"}, hfDropout))
    return false;
  c.hiddenSize = *d;
  c.numLayers = *layers;
  c.numHeads = *heads;
  c.numKvHeads = *heads;
  c.headDim = *d / *heads;
  c.intermediateSize = *inter;
  c.normEps = *eps;
  return true;
}

/// BertForMaskedLM: post-LN blocks, the MLM head tied to the word embeddings.
bool parseBert(JsonReader &r, const ImportOptions &opts, ModelConfig &c) {
  c.modelType = "bert";
  if (!parseEncoder(r, opts, c))
    return false;
  auto vocab = r.getInt({"vocab_size"});
  if (!vocab)
    return false;
  auto positions = r.getInt({"max_position_embeddings"}, int64_t(512));
  if (!positions)
    return false;
  auto types = r.getInt({"type_vocab_size"}, int64_t(2));
  if (!types)
    return false;
  auto posType = r.getString({"position_embedding_type"}, std::string("absolute"));
  if (!posType)
    return false;
  if (*posType != "absolute")
    return r.fail({"position_embedding_type"},
                  "position_embedding_type '" + *posType +
                      "' is not supported; fsdp implements BERT's learned absolute positions "
                      "('absolute')");
  for (const char *flag : {"is_decoder", "add_cross_attention"}) {
    auto b = r.getBool({flag}, false);
    if (!b)
      return false;
    if (*b)
      return r.fail({flag}, std::string(flag) +
                                " = true is not supported (fsdp trains BERT as a bidirectional "
                                "masked-LM encoder)");
  }
  auto tie = r.getBool({"tie_word_embeddings"}, true);
  if (!tie)
    return false;
  if (!*tie)
    return r.fail({"tie_word_embeddings"},
                  "tie_word_embeddings = false is not supported (BertForMaskedLM's decoder is "
                  "the word embeddings)");
  c.vocabSize = *vocab;
  c.maxSeqLen = *positions;
  c.typeVocabSize = *types;
  c.tieWordEmbeddings = true;
  return true;
}

/// An int or [h, w] (ViT's image_size and patch_size).
std::optional<std::pair<int64_t, int64_t>> getPair(JsonReader &r, const char *key, int64_t def) {
  const json *v = r.get({key}, false);
  if (v && v->is_array()) {
    if (v->size() != 2 || !(*v)[0].is_number_integer() || !(*v)[1].is_number_integer() ||
        (*v)[0].get<int64_t>() < 1 || (*v)[1].get<int64_t>() < 1) {
      r.fail({key}, std::string(key) +
                        " must be a positive integer or [height, width] of "
                        "them, but is " +
                        v->dump());
      return std::nullopt;
    }
    return std::pair{(*v)[0].get<int64_t>(), (*v)[1].get<int64_t>()};
  }
  auto n = r.getInt({key}, def);
  if (!n)
    return std::nullopt;
  return std::pair{*n, *n};
}

/// ViTForImageClassification: pre-LN blocks, the classifier on the CLS token.
bool parseViT(JsonReader &r, const ImportOptions &opts, ModelConfig &c) {
  c.modelType = "vit";
  if (!parseEncoder(r, opts, c))
    return false;
  auto image = getPair(r, "image_size", 224);
  if (!image)
    return false;
  auto patch = getPair(r, "patch_size", 16);
  if (!patch)
    return false;
  auto channels = r.getInt({"num_channels"}, int64_t(3));
  if (!channels)
    return false;
  auto bias = r.getBool({"qkv_bias"}, true);
  if (!bias)
    return false;
  if (!*bias)
    return r.fail({"qkv_bias"}, "qkv_bias = false is not supported (fsdp implements ViT's "
                                "biased query, key and value)");
  auto problem = r.getString({"problem_type"}, std::string("single_label_classification"));
  if (!problem)
    return false;
  if (*problem != "single_label_classification")
    return r.fail({"problem_type"}, "problem_type '" + *problem +
                                        "' is not supported; fsdp trains ViT with the "
                                        "cross-entropy of single-label classification");
  // The classes: id2label's, if given (transformers sets num_labels from it).
  int64_t classes;
  const json *labels = r.get({"id2label"}, false);
  if (labels && !labels->is_null()) {
    if (!labels->is_object() || labels->empty())
      return r.fail({"id2label"}, "id2label must be a non-empty object of class names, but is " +
                                      JsonReader::describe(*labels));
    classes = (int64_t)labels->size();
  } else {
    auto n = r.getInt({"num_labels"}, int64_t(2));
    if (!n)
      return false;
    classes = *n;
  }
  constexpr int64_t kMaxSide = int64_t(1) << 15; // nn::readInputs's bound
  for (auto [key, v] : {std::pair{"image_size", *image}, {"patch_size", *patch}})
    if (v.first > kMaxSide || v.second > kMaxSide)
      return r.fail({key}, std::string(key) + " is more than fsdp plans (at most " +
                               std::to_string(kMaxSide) + " pixels a side)");
  if (image->first % patch->first || image->second % patch->second)
    return r.fail({"patch_size"},
                  "the image (" + std::to_string(image->first) + " x " +
                      std::to_string(image->second) + ") is not a whole number of patches of " +
                      std::to_string(patch->first) + " x " + std::to_string(patch->second));
  if (*channels > kMaxSide)
    return r.fail({"num_channels"}, "num_channels is more than fsdp plans (at most " +
                                        std::to_string(kMaxSide) + ")");
  c.image = {image->first, image->second, *channels, patch->first, patch->second, classes};
  c.maxSeqLen = c.image.patches() + 1; // the class token first
  c.vocabSize = classes;
  c.tieWordEmbeddings = false;
  return true;
}

/// Refuses a model larger than the planner's limits (nn::kMaxBlocks,
/// nn::kMaxParameters): its graph would not end building, or its sizes
/// would not fit in 64 bits. The error sits at the key of the largest value.
bool checkModelSize(JsonReader &r, const ModelConfig &c) {
  bool gpt2 = c.modelType == "gpt2";
  bool bert = c.modelType == "bert", vit = c.modelType == "vit";
  const char *layersKey = gpt2 ? "n_layer" : "num_hidden_layers";
  if (c.numLayers > nn::kMaxBlocks)
    return r.fail({layersKey}, std::string(layersKey) + " = " + std::to_string(c.numLayers) +
                                   " is more than fsdp plans (at most " +
                                   std::to_string(nn::kMaxBlocks) + " blocks)");
  const char *positionsKey = gpt2 ? "n_positions" : vit ? "image_size" : "max_position_embeddings";
  if (c.maxSeqLen > nn::kMaxSeqLen)
    return r.fail({positionsKey}, std::string(positionsKey) + " = " + std::to_string(c.maxSeqLen) +
                                      " is more than fsdp plans (at most " +
                                      std::to_string(nn::kMaxSeqLen) + " tokens)");
  // In floating point: the exact count may not fit in 64 bits, and a bound
  // is all that is asked.
  double V = c.vocabSize, D = c.hiddenSize, I = c.intermediateSize, L = c.numLayers;
  double qW = (double)c.numHeads * c.headDim, kvW = (double)c.numKvHeads * c.headDim;
  double params;
  double encoderLayer = 4 * D * D + 2 * D * I + 9 * D + I; // GPT-2's, BERT's and ViT's
  if (gpt2)
    params = V * D + (double)c.maxSeqLen * D + L * encoderLayer + 2 * D;
  else if (bert) // embeddings, blocks, the MLM head (its decoder tied)
    params = (V + c.maxSeqLen + (double)c.typeVocabSize) * D + 2 * D + L * encoderLayer +
             (D * D + 3 * D) + V;
  else if (vit) // patch kernel, class token and positions, blocks, final norm, classifier
    params = D * (double)c.image.patchValues() + D + D + (double)c.maxSeqLen * D +
             L * encoderLayer + 2 * D + V * D + V;
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
  if (vit)
    sizes = {{"hidden_size", c.hiddenSize},
             {"intermediate_size", c.intermediateSize},
             {"num_hidden_layers", c.numLayers},
             {"num_channels", c.image.channels},
             {"num_labels", 0}};
  else if (bert)
    sizes = {{"vocab_size", c.vocabSize},
             {"hidden_size", c.hiddenSize},
             {"intermediate_size", c.intermediateSize},
             {"num_hidden_layers", c.numLayers},
             {"max_position_embeddings", c.maxSeqLen},
             {"type_vocab_size", 0}};
  else if (gpt2)
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
    sizes.back().second = gpt2   ? c.intermediateSize
                          : vit  ? c.vocabSize
                          : bert ? c.typeVocabSize
                                 : c.headDim;
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

/// An encoder block's parameters, declared in its family's state-dict
/// order: BERT's post-LN norms follow the attention output and the MLP
/// (attention.output.LayerNorm, output.LayerNorm), ViT's pre-LN ones come
/// last (layernorm_before, layernorm_after). Each pair is a weight and its bias.
struct EncoderBlock {
  Value qkv[6], attnOut[2], up[2], down[2], norm1[2], norm2[2];
};

EncoderBlock encoderBlock(GraphBuilder &g, const ModelConfig &c, int64_t i) {
  bool bert = c.modelType == "bert";
  const int64_t D = c.hiddenSize, I = c.intermediateSize;
  std::string p = (bert ? "bert.encoder.layer." : "vit.encoder.layer.") + std::to_string(i) + ".";
  auto pair = [&](Value *out, const std::string &name, std::vector<int64_t> shape) {
    out[0] = g.param(name + ".weight", shape);
    out[1] = g.param(name + ".bias", {shape[0]});
  };
  EncoderBlock w;
  std::string self = p + (bert ? "attention.self." : "attention.attention.");
  int n = 0;
  for (const char *qkv : {"query", "key", "value"}) {
    pair(&w.qkv[n], self + qkv, {D, D});
    n += 2;
  }
  pair(w.attnOut, p + "attention.output.dense", {D, D});
  if (bert)
    pair(w.norm1, p + "attention.output.LayerNorm", {D});
  pair(w.up, p + "intermediate.dense", {I, D});
  pair(w.down, p + "output.dense", {D, I});
  if (bert) {
    pair(w.norm2, p + "output.LayerNorm", {D});
  } else {
    pair(w.norm1, p + "layernorm_before", {D});
    pair(w.norm2, p + "layernorm_after", {D});
  }
  return w;
}

/// An encoder block's attention over `x` (query, key and value biased
/// linears, every query seeing every key) and its output dense; `self` is
/// the attention module (BERT's `attention.self`, ViT's
/// `attention.attention`).
Value encoderAttention(GraphBuilder &g, const ModelConfig &c, Value x, const EncoderBlock &w,
                       const std::string &self, const std::string &out) {
  using nn::WeightLayout;
  const int64_t D = c.hiddenSize;
  Value q = g.linear(WeightLayout::out_in, x, w.qkv[0], w.qkv[1], self + ".query");
  Value k = g.linear(WeightLayout::out_in, x, w.qkv[2], w.qkv[3], self + ".key");
  Value v = g.linear(WeightLayout::out_in, x, w.qkv[4], w.qkv[5], self + ".value");
  Value o = g.b.create<nn::AttentionOp>(g.loc, g.act(D), q, k, v, g.b.getI64IntegerAttr(c.numHeads),
                                        g.b.getI64IntegerAttr(c.numKvHeads), g.mod(self));
  return g.linear(WeightLayout::out_in, o, w.attnOut[0], w.attnOut[1], out);
}

Value exactGelu(GraphBuilder &g, Value x, int64_t width, const Twine &path) {
  return g.b.create<nn::GeluOp>(g.loc, g.act(width), x, g.mod(path), g.b.getStringAttr("none"));
}

/// BertForMaskedLM: embeddings (words, token types, positions) and their
/// LayerNorm, post-LN blocks, the MLM head over the tied word embeddings.
void buildBert(const ModelConfig &c, GraphBuilder &g, Value tokens, Value targets) {
  OpBuilder &b = g.b;
  Location loc = g.loc;
  using nn::WeightLayout;
  const int64_t D = c.hiddenSize, V = c.vocabSize, I = c.intermediateSize;
  auto eps = b.getF64FloatAttr(c.normEps);
  auto ids = tokens.getType();
  const std::string e = "bert.embeddings.";
  Value words = g.param(e + "word_embeddings.weight", {V, D});
  Value positions = g.param(e + "position_embeddings.weight", {c.maxSeqLen, D});
  Value types = g.param(e + "token_type_embeddings.weight", {c.typeVocabSize, D});
  Value embLnW = g.param(e + "LayerNorm.weight", {D});
  Value embLnB = g.param(e + "LayerNorm.bias", {D});
  std::vector<EncoderBlock> blocks;
  for (int64_t i = 0; i < c.numLayers; ++i)
    blocks.push_back(encoderBlock(g, c, i));
  // BertLMPredictionHead's own bias comes before its submodules.
  Value headBias = g.param("cls.predictions.bias", {V});
  Value denseW = g.param("cls.predictions.transform.dense.weight", {D, D});
  Value denseB = g.param("cls.predictions.transform.dense.bias", {D});
  Value headLnW = g.param("cls.predictions.transform.LayerNorm.weight", {D});
  Value headLnB = g.param("cls.predictions.transform.LayerNorm.bias", {D});

  // HF's order: words + token types, then + positions.
  Value pos = b.create<nn::PositionIdsOp>(loc, ids, tokens, g.mod(e + "position_embeddings"));
  Value tt = b.create<nn::TokenTypeIdsOp>(loc, ids, tokens, g.mod(e + "token_type_embeddings"));
  Value we = b.create<nn::EmbeddingOp>(loc, g.act(D), tokens, words, g.mod(e + "word_embeddings"));
  Value te =
      b.create<nn::EmbeddingOp>(loc, g.act(D), tt, types, g.mod(e + "token_type_embeddings"));
  Value pe =
      b.create<nn::EmbeddingOp>(loc, g.act(D), pos, positions, g.mod(e + "position_embeddings"));
  Value h = b.create<nn::AddOp>(loc, g.act(D), we, te, g.mod("bert.embeddings"));
  h = b.create<nn::AddOp>(loc, g.act(D), h, pe, g.mod("bert.embeddings"));
  h = b.create<nn::LayerNormOp>(loc, g.act(D), h, embLnW, embLnB, eps, g.mod(e + "LayerNorm"));
  for (int64_t i = 0; i < c.numLayers; ++i) {
    std::string p = "bert.encoder.layer." + std::to_string(i);
    const auto &w = blocks[i];
    Value a = encoderAttention(g, c, h, w, p + ".attention.self", p + ".attention.output.dense");
    h = b.create<nn::AddOp>(loc, g.act(D), a, h, g.mod(p + ".attention.output"));
    h = b.create<nn::LayerNormOp>(loc, g.act(D), h, w.norm1[0], w.norm1[1], eps,
                                  g.mod(p + ".attention.output.LayerNorm"));
    Value up = g.linear(WeightLayout::out_in, h, w.up[0], w.up[1], p + ".intermediate.dense");
    Value act = exactGelu(g, up, I, p + ".intermediate.intermediate_act_fn");
    Value down = g.linear(WeightLayout::out_in, act, w.down[0], w.down[1], p + ".output.dense");
    h = b.create<nn::AddOp>(loc, g.act(D), down, h, g.mod(p + ".output"));
    h = b.create<nn::LayerNormOp>(loc, g.act(D), h, w.norm2[0], w.norm2[1], eps,
                                  g.mod(p + ".output.LayerNorm"));
  }
  const std::string t = "cls.predictions.transform";
  Value x = g.linear(WeightLayout::out_in, h, denseW, denseB, t + ".dense");
  x = exactGelu(g, x, D, t + ".transform_act_fn");
  x = b.create<nn::LayerNormOp>(loc, g.act(D), x, headLnW, headLnB, eps, g.mod(t + ".LayerNorm"));
  Value logits = g.linear(WeightLayout::out_in, x, words, headBias, "cls.predictions.decoder");
  auto loss = RankedTensorType::get({}, b.getF32Type());
  Value l = b.create<nn::CrossEntropyOp>(loc, loss, logits, targets, StringAttr());
  b.create<nn::ReturnOp>(loc, ValueRange{l});
}

/// ViTForImageClassification: the patch embedding (HF's Conv2d kernel read
/// as a linear over each patch), the class token first and the learned
/// positions, pre-LN blocks, the final LayerNorm, the classifier on the
/// class token.
void buildViT(const ModelConfig &c, GraphBuilder &g, Value patches, Value labels) {
  OpBuilder &b = g.b;
  Location loc = g.loc;
  using nn::WeightLayout;
  const int64_t D = c.hiddenSize, I = c.intermediateSize, P = c.image.patches();
  const int64_t classes = c.image.classes;
  auto eps = b.getF64FloatAttr(c.normEps);
  const std::string e = "vit.embeddings.";
  Value cls = g.param(e + "cls_token", {1, 1, D});
  Value positions = g.param(e + "position_embeddings", {1, P + 1, D});
  Value kernel = g.param(e + "patch_embeddings.projection.weight",
                         {D, c.image.channels, c.image.patchHeight, c.image.patchWidth});
  Value kernelBias = g.param(e + "patch_embeddings.projection.bias", {D});
  std::vector<EncoderBlock> blocks;
  for (int64_t i = 0; i < c.numLayers; ++i)
    blocks.push_back(encoderBlock(g, c, i));
  Value lnW = g.param("vit.layernorm.weight", {D});
  Value lnB = g.param("vit.layernorm.bias", {D});
  Value headW = g.param("classifier.weight", {classes, D});
  Value headB = g.param("classifier.bias", {classes});

  auto rows = [&](int64_t seq, int64_t width) {
    return RankedTensorType::get({ShapedType::kDynamic, seq, width}, b.getF32Type());
  };
  Value x = b.create<nn::LinearOp>(loc, rows(P, D), WeightLayout::out_in, patches, kernel,
                                   kernelBias, g.mod(e + "patch_embeddings.projection"));
  // [B, P+1, D]: the sequence the planner's seq_len sizes from here on.
  Value h = b.create<nn::ClassTokenOp>(loc, g.act(D), x, cls, positions, g.mod("vit.embeddings"));
  for (int64_t i = 0; i < c.numLayers; ++i) {
    std::string p = "vit.encoder.layer." + std::to_string(i);
    const auto &w = blocks[i];
    Value a = b.create<nn::LayerNormOp>(loc, g.act(D), h, w.norm1[0], w.norm1[1], eps,
                                        g.mod(p + ".layernorm_before"));
    a = encoderAttention(g, c, a, w, p + ".attention.attention", p + ".attention.output.dense");
    h = b.create<nn::AddOp>(loc, g.act(D), a, h, g.mod(p));
    Value m = b.create<nn::LayerNormOp>(loc, g.act(D), h, w.norm2[0], w.norm2[1], eps,
                                        g.mod(p + ".layernorm_after"));
    Value up = g.linear(WeightLayout::out_in, m, w.up[0], w.up[1], p + ".intermediate.dense");
    Value act = exactGelu(g, up, I, p + ".intermediate.intermediate_act_fn");
    Value down = g.linear(WeightLayout::out_in, act, w.down[0], w.down[1], p + ".output.dense");
    h = b.create<nn::AddOp>(loc, g.act(D), down, h, g.mod(p + ".output"));
  }
  h = b.create<nn::LayerNormOp>(loc, g.act(D), h, lnW, lnB, eps, g.mod("vit.layernorm"));
  Value first = b.create<nn::FirstTokenOp>(loc, rows(1, D), h, g.mod("vit"));
  Value logits = b.create<nn::LinearOp>(loc, rows(1, classes), WeightLayout::out_in, first, headW,
                                        headB, g.mod("classifier"));
  auto loss = RankedTensorType::get({}, b.getF32Type());
  Value l = b.create<nn::CrossEntropyOp>(loc, loss, logits, labels, StringAttr());
  b.create<nn::ReturnOp>(loc, ValueRange{l});
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
  else if (*type == "bert")
    family = Family::Bert;
  else if (*type == "vit")
    family = Family::ViT;
  if (!family) {
    r.fail({"model_type"},
           "unknown model_type '" + *type + "'; supported: " + supportedModelTypes().str());
    return std::nullopt;
  }
  ModelConfig c;
  auto parse = [&] {
    switch (*family) {
    case Family::GPT2:
      return parseGPT2(r, options, c);
    case Family::Bert:
      return parseBert(r, options, c);
    case Family::ViT:
      return parseViT(r, options, c);
    default:
      return parseLlama(r, options, *family, c);
    }
  };
  bool ok = checkKeys(r, *family, *type) && parse();
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
  bool gpt2 = c.modelType == "gpt2", bert = c.modelType == "bert", vit = c.modelType == "vit";
  StringRef prefix = gpt2   ? "transformer.h"
                     : bert ? "bert.encoder.layer"
                     : vit  ? "vit.encoder.layer"
                            : "model.layers";
  // ViT takes the patches [B, P, C*ph*pw] and one label a sample.
  Type inputs[2] = {ids, ids};
  if (vit) {
    inputs[0] = RankedTensorType::get(
        {ShapedType::kDynamic, c.image.patches(), c.image.patchValues()}, b.getF32Type());
    inputs[1] = RankedTensorType::get({ShapedType::kDynamic, 1}, b.getI64Type());
  }
  auto graph = b.create<nn::GraphOp>(loc, c.name, FunctionType::get(ctx, inputs, {loss}),
                                     ArrayAttr(), ArrayAttr(), c.modelType, prefix, c.numLayers,
                                     c.maxSeqLen, StringAttr(), DictionaryAttr());
  if (bert)
    graph.setInputsKindAttr(b.getStringAttr("masked_tokens"));
  if (vit) {
    graph.setInputsKindAttr(b.getStringAttr("images"));
    graph.setImageAttr(b.getDictionaryAttr({
        b.getNamedAttr("height", b.getI64IntegerAttr(c.image.height)),
        b.getNamedAttr("width", b.getI64IntegerAttr(c.image.width)),
        b.getNamedAttr("channels", b.getI64IntegerAttr(c.image.channels)),
        b.getNamedAttr("patch_height", b.getI64IntegerAttr(c.image.patchHeight)),
        b.getNamedAttr("patch_width", b.getI64IntegerAttr(c.image.patchWidth)),
    }));
  }
  Block *body = b.createBlock(&graph.getBody(), {}, inputs, {loc, loc});
  Value tokens = body->getArgument(0), targets = body->getArgument(1);
  GraphBuilder g(b, loc);
  if (bert || vit) {
    (bert ? buildBert : buildViT)(c, g, tokens, targets);
    return graph;
  }
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
