//===- Llama.cpp - model_type llama and its deltas mistral, qwen2, qwen3 --===//
//
// transformers' LlamaForCausalLM: rotary positions (rope_scaling's linear,
// dynamic, yarn or llama3 frequencies), pre-RMSNorm blocks, grouped-query
// attention, the SwiGLU MLP. Mistral, Qwen2 and Qwen3 are the same graph
// with one change each, as in transformers' modular files:
//   mistral  sliding_window W: a query sees itself and the W-1 keys before it
//   qwen2    biases on q_proj, k_proj and v_proj
//   qwen3    head_dim, and q_norm / k_norm (RMSNorm over each head) before RoPE
// Each delta is a subclass adding its keys and reading them (parseVariant).
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Families/Family.h"
#include "planner/Import/JsonReader.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace fsdp;
using nlohmann::json;

namespace {

/// A block's parameters, in the state dict's order: Qwen2's biases follow
/// their weights (LinearParams), Qwen3's norms follow o_proj.
struct LlamaBlock {
  LinearParams q, k, v, o;
  NormParams qNorm, kNorm;      // qwen3
  LinearParams gate, up, down;  // the dense MLP
  std::optional<MoeParams> moe; // mixtral, qwen3_moe: a sparse layer's MLP
  NormParams inputNorm, postAttentionNorm;
};

class Llama : public CausalLMFamily {
public:
  StringRef modelType() const override { return "llama"; }

  std::vector<const char *> implementedKeys() const override {
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
    std::vector<const char *> more = variantKeys();
    keys.insert(keys.end(), more.begin(), more.end());
    return keys;
  }

  bool parse(JsonReader &r, const ImportOptions &opts, ModelConfig &c) const override;

  double parameterBound(const ModelConfig &c) const override {
    double V = c.vocabSize, D = c.hiddenSize, I = c.intermediateSize, L = c.numLayers;
    double qW = (double)c.numHeads * c.headDim, kvW = (double)c.numKvHeads * c.headDim;
    double mlp = 3 * I * D * L;
    if (c.moe) { // the sparse layers' routers and experts instead of the dense MLP
      double sparse = c.moe->sparseLayers();
      mlp +=
          sparse * (c.moe->numExperts * (D + 3.0 * c.moe->expertIntermediateSize * D) - 3 * I * D);
    }
    return V * D +
           L * (2 * qW * D + 2 * kvW * D + 2 * D + (c.qkvBias ? qW + 2 * kvW : 0) +
                (c.qkNorm ? 2.0 * c.headDim : 0)) +
           mlp + D;
  }

  std::vector<SizeKey> sizeKeys(const ModelConfig &c) const override {
    return {{"vocab_size", c.vocabSize},
            {"hidden_size", c.hiddenSize},
            {"intermediate_size", c.intermediateSize},
            {"num_hidden_layers", c.numLayers},
            {"num_attention_heads", c.numHeads},
            {"head_dim", c.headDim, true}};
  }

  StringRef blockPrefix() const override { return "model.layers"; }

  void build(GraphBuilder &g, Value tokens, Value targets) const override;

protected:
  /// The keys a variant adds to LLaMA's. pretraining_tp computes the same
  /// projections in slices.
  virtual std::vector<const char *> variantKeys() const {
    return {"attention_bias", "mlp_bias", "pretraining_tp"};
  }
  /// Reads the variant's own keys into `c`, after the bias flags.
  virtual bool parseVariant(JsonReader &r, ModelConfig &c) const { return true; }
  /// Reads what depends on the sizes (a sparse MLP's), once `c` holds them.
  virtual bool finishVariant(JsonReader &r, ModelConfig &c) const { return true; }
  /// The model the bias flags' message names.
  virtual const char *displayName() const { return "LLaMA"; }
};

/// Mistral: LLaMA with a sliding window of attention.
class Mistral final : public Llama {
public:
  StringRef modelType() const override { return "mistral"; }

protected:
  std::vector<const char *> variantKeys() const override { return {"sliding_window"}; }
  bool parseVariant(JsonReader &r, ModelConfig &c) const override {
    // null: full causal; absent: transformers' MistralConfig default, 4096.
    const json *w = r.get({"sliding_window"}, false);
    if (w && w->is_null())
      return true;
    auto v = r.getInt({"sliding_window"}, int64_t(4096));
    if (!v)
      return false;
    c.slidingWindow = *v;
    return true;
  }
};

/// Qwen's sliding window is off unless use_sliding_window; then
/// sliding_window and max_window_layers are unused.
bool refuseQwenSlidingWindow(JsonReader &r) {
  auto sliding = r.getBool({"use_sliding_window"}, false);
  if (!sliding)
    return false;
  if (*sliding)
    return r.fail({"use_sliding_window"},
                  "use_sliding_window = true is not supported (fsdp implements Qwen's full "
                  "causal attention); set it to false");
  return true;
}

/// Qwen2: LLaMA with biases on the query, key and value projections.
class Qwen2 final : public Llama {
public:
  StringRef modelType() const override { return "qwen2"; }

protected:
  std::vector<const char *> variantKeys() const override {
    return {"use_sliding_window", "sliding_window", "max_window_layers"};
  }
  bool parseVariant(JsonReader &r, ModelConfig &c) const override {
    c.qkvBias = true;
    return refuseQwenSlidingWindow(r);
  }
};

/// Qwen3: LLaMA with an RMSNorm over each head of q and k before RoPE.
class Qwen3 final : public Llama {
public:
  StringRef modelType() const override { return "qwen3"; }

protected:
  std::vector<const char *> variantKeys() const override {
    return {"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers"};
  }
  bool parseVariant(JsonReader &r, ModelConfig &c) const override {
    c.qkNorm = true;
    return refuseQwenSlidingWindow(r);
  }
  const char *displayName() const override { return "Qwen3"; }
};

/// A sparse MLP's routing and load-balancing keys, which Mixtral and
/// Qwen3-MoE share: num_experts_per_tok, router_aux_loss_coef,
/// output_router_logits. `m` holds the experts and the names already.
bool parseRouting(JsonReader &r, ModelConfig &c, MoeConfig m, int64_t defaultTopK) {
  auto k = r.getInt({"num_experts_per_tok"}, defaultTopK);
  if (!k)
    return false;
  if (m.numExperts > 0 && *k > m.numExperts)
    return r.fail({"num_experts_per_tok"}, "num_experts_per_tok = " + std::to_string(*k) +
                                               " exceeds the " + std::to_string(m.numExperts) +
                                               " experts");
  auto coef = r.getNumber({"router_aux_loss_coef"}, 0.001);
  if (!coef)
    return false;
  if (!std::isfinite(*coef) || *coef < 0)
    return r.fail({"router_aux_loss_coef"}, "router_aux_loss_coef must be finite and >= 0");
  auto aux = r.getBool({"output_router_logits"}, false);
  if (!aux)
    return false;
  m.topK = *k;
  m.auxLossCoef = *coef;
  m.auxLoss = *aux;
  if (llvm::count(m.sparse, true))
    c.moe = std::move(m);
  return true;
}

/// Mixtral: Mistral's attention (a window when sliding_window is set; off
/// by default) and in every layer a sparse MLP of num_local_experts SwiGLU
/// experts (w1 gate, w3 up, w2 down), each token's top k weighted by their
/// renormalised router probabilities.
class Mixtral final : public Llama {
public:
  StringRef modelType() const override { return "mixtral"; }

protected:
  std::vector<const char *> variantKeys() const override {
    return {"sliding_window",       "num_local_experts",    "num_experts_per_tok",
            "router_aux_loss_coef", "output_router_logits", "router_jitter_noise"};
  }
  bool parseVariant(JsonReader &r, ModelConfig &c) const override {
    const json *w = r.get({"sliding_window"}, false);
    if (w && !w->is_null()) {
      auto v = r.getInt({"sliding_window"});
      if (!v)
        return false;
      c.slidingWindow = *v;
    }
    auto jitter = r.getNumber({"router_jitter_noise"}, 0.0);
    if (!jitter)
      return false;
    if (*jitter != 0)
      return r.fail({"router_jitter_noise"},
                    "router_jitter_noise = " + std::to_string(*jitter) +
                        " is not supported (it multiplies the hidden states by random noise "
                        "in training); set it to 0.0");
    return true;
  }
  bool finishVariant(JsonReader &r, ModelConfig &c) const override {
    auto E = r.getInt({"num_local_experts"}, int64_t(8));
    if (!E)
      return false;
    if (*E < 2)
      return r.fail({"num_local_experts"}, "num_local_experts must be at least 2");
    MoeConfig m;
    m.numExperts = *E;
    m.expertIntermediateSize = c.intermediateSize;
    m.normTopkProb = true;
    m.sparse.assign(c.numLayers, true);
    m.module = "block_sparse_moe";
    m.linears = {"w1", "w2", "w3"};
    m.gate = 0, m.down = 1, m.up = 2;
    return parseRouting(r, c, std::move(m), 2);
  }
  const char *displayName() const override { return "Mixtral"; }
};

/// Qwen3-MoE: Qwen3's attention, and a sparse MLP (num_experts experts of
/// moe_intermediate_size) in layer i unless i is in mlp_only_layers or
/// (i + 1) is not a multiple of decoder_sparse_step; the other layers keep
/// the dense MLP of intermediate_size.
class Qwen3Moe final : public Llama {
public:
  StringRef modelType() const override { return "qwen3_moe"; }

protected:
  std::vector<const char *> variantKeys() const override {
    return {"attention_bias",        "use_sliding_window",   "sliding_window",
            "max_window_layers",     "num_experts",          "num_experts_per_tok",
            "moe_intermediate_size", "norm_topk_prob",       "decoder_sparse_step",
            "mlp_only_layers",       "router_aux_loss_coef", "output_router_logits"};
  }
  bool parseVariant(JsonReader &r, ModelConfig &c) const override {
    c.qkNorm = true;
    return refuseQwenSlidingWindow(r);
  }
  bool finishVariant(JsonReader &r, ModelConfig &c) const override {
    auto E = r.getInt({"num_experts"}, int64_t(128), 0);
    auto I = E ? r.getInt({"moe_intermediate_size"}, int64_t(768)) : std::nullopt;
    auto step = I ? r.getInt({"decoder_sparse_step"}, int64_t(1)) : std::nullopt;
    auto norm = step ? r.getBool({"norm_topk_prob"}, false) : std::nullopt;
    if (!norm)
      return false;
    if (*E == 1)
      return r.fail({"num_experts"}, "num_experts must be 0 (no sparse layers) or at least 2");
    std::vector<bool> dense(c.numLayers, false);
    if (const json *only = r.get({"mlp_only_layers"}, false)) {
      if (!only->is_array())
        return r.fail({"mlp_only_layers"},
                      "mlp_only_layers must be a list of layer indices, but is " +
                          JsonReader::describe(*only));
      for (size_t i = 0; i < only->size(); ++i) {
        const json &v = (*only)[i];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.numLayers)
          return r.fail({"mlp_only_layers"},
                        "mlp_only_layers[" + std::to_string(i) + "] = " + v.dump() +
                            " is not a layer index in [0, " + std::to_string(c.numLayers) + ")");
        dense[v.get<int64_t>()] = true;
      }
    }
    MoeConfig m;
    m.numExperts = *E;
    m.expertIntermediateSize = *I;
    m.normTopkProb = *norm;
    for (int64_t i = 0; i < c.numLayers; ++i)
      m.sparse.push_back(!dense[i] && *E > 0 && (i + 1) % *step == 0);
    m.module = "mlp";
    m.linears = {"gate_proj", "up_proj", "down_proj"};
    m.gate = 0, m.up = 1, m.down = 2;
    return parseRouting(r, c, std::move(m), 8);
  }
  const char *displayName() const override { return "Qwen3-MoE"; }
};

/// The keys rope_scaling may hold besides its kind (`rope_type`, or `type`,
/// its older name) for the rope_type `kind`, as transformers' _validate_*
/// functions list them (required and optional); null if fsdp does not
/// compute that rope_type.
const std::vector<const char *> *ropeScalingKeys(const std::string &kind) {
  static const std::vector<const char *> none = {}, linear = {"factor"},
                                         dynamic = {"factor", "original_max_position_embeddings"},
                                         yarn = {"factor",
                                                 "attention_factor",
                                                 "beta_fast",
                                                 "beta_slow",
                                                 "original_max_position_embeddings",
                                                 "mscale",
                                                 "mscale_all_dim",
                                                 "truncate"},
                                         llama3 = {"factor", "low_freq_factor", "high_freq_factor",
                                                   "original_max_position_embeddings"};
  if (kind == "default")
    return &none;
  if (kind == "linear")
    return &linear;
  if (kind == "dynamic")
    return &dynamic;
  if (kind == "yarn")
    return &yarn;
  if (kind == "llama3")
    return &llama3;
  return nullptr;
}

/// YaRN's get_mscale: 0.1 m ln(scale) + 1 (1 for scale <= 1), in double as
/// Python computes it.
double yarnMscale(double scale, double m) {
  return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

/// rope_scaling as transformers' modeling_rope_utils reads it (its
/// _validate_* and _compute_*_parameters), resolved to what the kernels
/// compute (support/RopeScaling.h): none when absent, null or rope_type
/// "default". transformers warns of a key the rope_type does not read and
/// ignores it; fsdp refuses it. maxPositions is max_position_embeddings.
bool parseRopeScaling(JsonReader &r, int64_t maxPositions, int64_t headDim, double theta,
                      std::optional<support::RopeScaling> &scaling) {
  const JsonPath rs = {"rope_scaling"};
  const json *v = r.get(rs, false);
  if (!v || v->is_null())
    return true;
  if (!v->is_object())
    return r.fail(rs, "rope_scaling must be an object or null, but is " + JsonReader::describe(*v));
  auto at = [&](const char *key) { return JsonPath{"rope_scaling", key}; };
  // The kind. transformers' configs copy `type` over `rope_type`; the
  // modeling code reads rope_type first: given both, they must agree.
  std::optional<std::string> type, ropeType;
  if (v->contains("type") && !(type = r.getString(at("type"))))
    return false;
  if (v->contains("rope_type") && !(ropeType = r.getString(at("rope_type"))))
    return false;
  if (!type && !ropeType)
    return r.fail(rs, "rope_scaling needs its rope_type (or type)");
  if (type && ropeType && *type != *ropeType)
    return r.fail(at("type"),
                  "rope_scaling's type '" + *type + "' and rope_type '" + *ropeType + "' differ");
  const std::string kind = ropeType ? *ropeType : *type;
  const char *kindKey = ropeType ? "rope_type" : "type";
  const std::vector<const char *> *keys = ropeScalingKeys(kind);
  if (!keys)
    return r.fail(at(kindKey), "rope_scaling type '" + kind +
                                   "' is not supported (supported: default, " +
                                   support::ropeScalingNames() + ")");
  // A key the kind does not read, the first in the file's order.
  const std::string *unread = nullptr;
  size_t unreadOffset = 0;
  for (const auto &item : v->items()) {
    const std::string &key = item.key();
    if (key == "type" || key == "rope_type" ||
        std::any_of(keys->begin(), keys->end(), [&](const char *k) { return key == k; }))
      continue;
    size_t offset = r.offsetOf(at(key.c_str()));
    if (!unread || offset < unreadOffset)
      unread = &key, unreadOffset = offset;
  }
  if (unread) {
    std::string known;
    for (const char *k : *keys)
      known += std::string(known.empty() ? "" : ", ") + k;
    return r.fail(at(unread->c_str()),
                  "rope_scaling." + *unread + " is not a parameter of rope_type '" + kind + "' (" +
                      (known.empty() ? std::string("it has none") : "its: " + known) +
                      "); it may change the model, so fsdp refuses it rather than ignore it");
  }
  if (kind == "default")
    return true;

  auto factor = r.getNumber(at("factor"));
  if (!factor)
    return false;
  if (!(*factor > 0))
    return r.fail(at("factor"),
                  "rope_scaling.factor must be positive, but is " + std::to_string(*factor));
  support::RopeScaling s;
  s.kind = *support::parseRopeScalingKind(kind);
  s.factor = *factor;
  if (kind == "dynamic") {
    // transformers reads original_max_position_embeddings here and does
    // not use it: the frequencies are those at max_position_embeddings.
    if (!r.getInt(at("original_max_position_embeddings"), int64_t(1)))
      return false;
    s.originalMaxPosition = maxPositions;
    if (headDim <= 2)
      return r.fail(at(kindKey), "dynamic rope scaling needs a head dimension above 2 (its "
                                 "exponent is dim / (dim - 2)), but it is " +
                                     std::to_string(headDim));
  } else if (kind == "llama3") {
    auto lo = r.getNumber(at("low_freq_factor"));
    auto hi = lo ? r.getNumber(at("high_freq_factor")) : std::nullopt;
    auto orig = hi ? r.getInt(at("original_max_position_embeddings")) : std::nullopt;
    if (!orig)
      return false;
    if (!(*lo > 0) || !(*hi > *lo))
      return r.fail(rs, "rope_scaling needs 0 < low_freq_factor < high_freq_factor");
    s.lowFreqFactor = *lo;
    s.highFreqFactor = *hi;
    s.originalMaxPosition = *orig;
  } else if (kind == "yarn") {
    // _compute_yarn_parameters: `x or default` for original_max_position_
    // embeddings and the betas (null or 0: the default), mscale and
    // mscale_all_dim used only when both are non-zero.
    auto orig = r.getInt(at("original_max_position_embeddings"), int64_t(0), 0);
    auto fast = orig ? r.getNumber(at("beta_fast"), 0.0) : std::nullopt;
    auto slow = fast ? r.getNumber(at("beta_slow"), 0.0) : std::nullopt;
    auto mscale = slow ? r.getNumber(at("mscale"), 0.0) : std::nullopt;
    auto mscaleAllDim = mscale ? r.getNumber(at("mscale_all_dim"), 0.0) : std::nullopt;
    auto truncate = mscaleAllDim ? r.getBool(at("truncate"), true) : std::nullopt;
    if (!truncate)
      return false;
    s.originalMaxPosition = *orig ? *orig : maxPositions;
    s.betaFast = *fast != 0 ? *fast : 32.0;
    s.betaSlow = *slow != 0 ? *slow : 1.0;
    s.truncate = *truncate;
    const json *given = r.get(at("attention_factor"), false);
    if (given && !given->is_null()) {
      auto a = r.getNumber(at("attention_factor"));
      if (!a)
        return false;
      if (!(*a > 0))
        return r.fail(at("attention_factor"),
                      "rope_scaling.attention_factor must be positive, but is " +
                          std::to_string(*a));
      s.attentionFactor = *a;
    } else if (*mscale != 0 && *mscaleAllDim != 0) {
      double below = yarnMscale(s.factor, *mscaleAllDim);
      if (below == 0)
        return r.fail(at("mscale_all_dim"),
                      "rope_scaling.mscale_all_dim makes the attention factor's divisor, "
                      "0.1 mscale_all_dim ln(factor) + 1, zero");
      s.attentionFactor = yarnMscale(s.factor, *mscale) / below;
    } else {
      s.attentionFactor = yarnMscale(s.factor, 1);
    }
    if (theta == 1)
      return r.fail({"rope_theta"}, "yarn rope scaling needs rope_theta other than 1 (it "
                                    "divides by log(rope_theta))");
  }
  std::string problem = support::checkRopeScaling(s);
  if (!problem.empty())
    return r.fail(rs, "rope_scaling: " + problem);
  scaling = s;
  return true;
}

bool Llama::parse(JsonReader &r, const ImportOptions &opts, ModelConfig &c) const {
  int64_t vocab, d, inter, layers, heads;
  if (!getInts(r, {{"vocab_size", &vocab},
                   {"hidden_size", &d},
                   {"intermediate_size", &inter},
                   {"num_hidden_layers", &layers},
                   {"num_attention_heads", &heads}}))
    return false;
  auto kv = r.getInt({"num_key_value_heads"}, heads);
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
      return r.fail({flag}, std::string(flag) + " = true is not supported (" + displayName() +
                                " has no biases on its projections)");
  }
  if (!parseVariant(r, c))
    return false;
  if (!checkDropout(r, opts, {"attention_dropout"}, 0.0))
    return false;
  if (heads % *kv != 0)
    return r.fail({"num_key_value_heads"},
                  "num_attention_heads = " + std::to_string(heads) +
                      " is not a multiple of num_key_value_heads = " + std::to_string(*kv));
  int64_t defHeadDim = d / heads;
  if (!r.get({"head_dim"}, false) && d % heads != 0)
    return r.fail({"hidden_size"},
                  "hidden_size = " + std::to_string(d) +
                      " is not divisible by num_attention_heads = " + std::to_string(heads));
  auto headDim = r.getInt({"head_dim"}, defHeadDim);
  if (!headDim)
    return false;
  if (*headDim % 2 != 0)
    return r.fail({"head_dim"}, "the head dimension " + std::to_string(*headDim) +
                                    " must be even for rotary embeddings");
  if (!parseRopeScaling(r, *positions, *headDim, *theta, c.ropeScaling))
    return false;

  c.vocabSize = vocab;
  c.hiddenSize = d;
  c.numLayers = layers;
  c.numHeads = heads;
  c.numKvHeads = *kv;
  c.headDim = *headDim;
  c.intermediateSize = inter;
  c.maxSeqLen = *positions;
  c.normEps = *eps;
  c.ropeTheta = *theta;
  c.tieWordEmbeddings = *tie;
  return finishVariant(r, c);
}

void Llama::build(GraphBuilder &g, Value tokens, Value targets) const {
  const ModelConfig &c = g.c;
  OpBuilder &b = g.b;
  const int64_t D = c.hiddenSize, I = c.intermediateSize;
  const int64_t qW = c.numHeads * c.headDim, kvW = c.numKvHeads * c.headDim;
  const auto out_in = nn::WeightLayout::out_in;

  Value wte = g.param("model.embed_tokens.weight", {c.vocabSize, D});
  std::vector<LlamaBlock> blocks;
  for (int64_t i = 0; i < c.numLayers; ++i) {
    std::string p = blockPath(i) + ".";
    LlamaBlock w;
    w.q = g.linearParams(p + "self_attn.q_proj", out_in, D, qW, c.qkvBias);
    w.k = g.linearParams(p + "self_attn.k_proj", out_in, D, kvW, c.qkvBias);
    w.v = g.linearParams(p + "self_attn.v_proj", out_in, D, kvW, c.qkvBias);
    w.o = g.linearParams(p + "self_attn.o_proj", out_in, qW, D, false);
    if (c.qkNorm) {
      w.qNorm = g.normParams(p + "self_attn.q_norm", c.headDim, false);
      w.kNorm = g.normParams(p + "self_attn.k_norm", c.headDim, false);
    }
    if (c.moe && c.moe->sparse[i]) {
      w.moe = g.moeParams(p + c.moe->module);
    } else {
      w.gate = g.linearParams(p + "mlp.gate_proj", out_in, D, I, false);
      w.up = g.linearParams(p + "mlp.up_proj", out_in, D, I, false);
      w.down = g.linearParams(p + "mlp.down_proj", out_in, I, D, false);
    }
    w.inputNorm = g.normParams(p + "input_layernorm", D, false);
    w.postAttentionNorm = g.normParams(p + "post_attention_layernorm", D, false);
    blocks.push_back(w);
  }
  NormParams finalNorm = g.normParams("model.norm", D, false);
  Value head = lmHead(g, wte);

  Value h = b.create<nn::EmbeddingOp>(g.loc, g.act(D), tokens, wte, g.mod("model.embed_tokens"));
  auto theta = b.getF64FloatAttr(c.ropeTheta);
  // The scaling's attributes: its kind and the parameters the kind reads.
  std::vector<NamedAttribute> scaling;
  if (const auto &s = c.ropeScaling) {
    scaling.emplace_back(b.getStringAttr(support::kRopeScalingKey),
                         b.getStringAttr(support::ropeScalingName(s->kind)));
    for (const support::RopeScalingField &f : support::ropeScalingFields()) {
      if (!support::ropeScalingReads(s->kind, f.name))
        continue;
      Attribute a;
      switch (f.type) {
      case support::RopeScalingField::Type::F64:
        a = b.getF64FloatAttr((*s).*f.f64);
        break;
      case support::RopeScalingField::Type::I64:
        a = b.getI64IntegerAttr((*s).*f.i64);
        break;
      case support::RopeScalingField::Type::Bool:
        a = b.getBoolAttr((*s).*f.boolean);
        break;
      }
      scaling.emplace_back(b.getStringAttr(f.name), a);
    }
  }
  auto rope = [&](Value x, int64_t heads, StringAttr path) -> Value {
    auto op =
        b.create<nn::RopeOp>(g.loc, x.getType(), x, b.getI64IntegerAttr(heads), theta, StringAttr(),
                             FloatAttr(), IntegerAttr(), FloatAttr(), FloatAttr(), FloatAttr(),
                             FloatAttr(), BoolAttr(), FloatAttr(), UnitAttr(), path);
    for (const NamedAttribute &a : scaling)
      op->setAttr(a.getName(), a.getValue());
    return op;
  };
  for (int64_t i = 0; i < c.numLayers; ++i) {
    std::string p = blockPath(i);
    const LlamaBlock &w = blocks[i];
    Value a = g.norm(h, w.inputNorm, p + ".input_layernorm");
    Value q = g.linear(out_in, a, w.q, p + ".self_attn.q_proj");
    Value k = g.linear(out_in, a, w.k, p + ".self_attn.k_proj");
    Value v = g.linear(out_in, a, w.v, p + ".self_attn.v_proj");
    if (c.qkNorm) { // rows of head_dim: the weight's length
      q = g.norm(q, w.qNorm, p + ".self_attn.q_norm");
      k = g.norm(k, w.kNorm, p + ".self_attn.k_norm");
    }
    StringAttr rotary = g.mod(p + ".self_attn.rotary_emb");
    q = rope(q, c.numHeads, rotary);
    k = rope(k, c.numKvHeads, rotary);
    Value o = g.attention(q, k, v, /*causal=*/true, c.slidingWindow, p + ".self_attn");
    h = g.add(h, g.linear(out_in, o, w.o, p + ".self_attn.o_proj"), p);
    Value m = g.norm(h, w.postAttentionNorm, p + ".post_attention_layernorm");
    if (w.moe) {
      h = g.add(h, g.moeMLP(m, *w.moe, p + "." + c.moe->module), p);
      continue;
    }
    Value gate = g.linear(out_in, m, w.gate, p + ".mlp.gate_proj");
    Value up = g.linear(out_in, m, w.up, p + ".mlp.up_proj");
    Value s = b.create<nn::SiluMulOp>(g.loc, g.act(I), gate, up, g.mod(p + ".mlp.act_fn"));
    h = g.add(h, g.linear(out_in, s, w.down, p + ".mlp.down_proj"), p);
  }
  h = g.norm(h, finalNorm, "model.norm");
  lmLoss(g, h, head, targets);
}

} // namespace

const ModelFamily &fsdp::llamaFamily() { return instance<Llama>(); }
const ModelFamily &fsdp::mistralFamily() { return instance<Mistral>(); }
const ModelFamily &fsdp::qwen2Family() { return instance<Qwen2>(); }
const ModelFamily &fsdp::qwen3Family() { return instance<Qwen3>(); }
const ModelFamily &fsdp::mixtralFamily() { return instance<Mixtral>(); }
const ModelFamily &fsdp::qwen3MoeFamily() { return instance<Qwen3Moe>(); }
