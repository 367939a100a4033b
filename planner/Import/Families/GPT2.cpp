//===- GPT2.cpp - model_type gpt2: transformers' GPT2LMHeadModel ----------===//
//
// Learned positions, pre-LN blocks of Conv1D linears (weights [in, out]),
// the fused c_attn split into q, k and v, GELU with the tanh approximation,
// the LM head tied to the word embeddings unless tie_word_embeddings is false.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Families/Family.h"
#include "planner/Import/JsonReader.h"

using namespace mlir;
using namespace fsdp;

namespace {

/// A block's parameters, in the state dict's order.
struct GPT2Block {
  NormParams ln1;
  LinearParams attn, attnProj;
  NormParams ln2;
  LinearParams fc, mlpProj;
};

class GPT2 final : public CausalLMFamily {
public:
  StringRef modelType() const override { return "gpt2"; }

  std::vector<const char *> implementedKeys() const override {
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
  }

  /// n_ctx (unused by transformers' GPT-2), the summary head of
  /// GPT2DoubleHeadsModel (not part of the LM), and keys of the first
  /// published configs that transformers ignores.
  std::vector<const char *> descriptiveKeys() const override {
    return {"n_ctx",
            "output_past",
            "n_special",
            "predict_special_tokens",
            "summary_activation",
            "summary_first_dropout",
            "summary_proj_to_labels",
            "summary_type",
            "summary_use_proj"};
  }

  bool parse(JsonReader &r, const ImportOptions &opts, ModelConfig &c) const override {
    int64_t vocab, d, layers, heads;
    if (!getInts(
            r, {{"vocab_size", &vocab}, {"n_embd", &d}, {"n_layer", &layers}, {"n_head", &heads}}))
      return false;
    auto positions = r.getInt({"n_positions"}, int64_t(1024));
    if (!positions)
      return false;
    // Saturated: a width this large fails the size check.
    auto inner = r.getInt({"n_inner"}, d <= INT64_MAX / 4 ? 4 * d : INT64_MAX);
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
    if (d % heads != 0)
      return r.fail({"n_embd"}, "n_embd = " + std::to_string(d) +
                                    " is not divisible by n_head = " + std::to_string(heads));
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

    c.vocabSize = vocab;
    c.hiddenSize = d;
    c.numLayers = layers;
    c.numHeads = heads;
    c.numKvHeads = heads;
    c.headDim = d / heads;
    c.intermediateSize = *inner;
    c.maxSeqLen = *positions;
    c.normEps = *eps;
    c.tieWordEmbeddings = *tie;
    return true;
  }

  const char *layersKey() const override { return "n_layer"; }
  const char *positionsKey() const override { return "n_positions"; }

  double parameterBound(const ModelConfig &c) const override {
    double V = c.vocabSize, D = c.hiddenSize;
    return V * D + (double)c.maxSeqLen * D + c.numLayers * biasedBlockParameters(c) + 2 * D;
  }

  std::vector<SizeKey> sizeKeys(const ModelConfig &c) const override {
    return {{"vocab_size", c.vocabSize},
            {"n_embd", c.hiddenSize},
            {"n_positions", c.maxSeqLen},
            {"n_layer", c.numLayers},
            {"n_inner", c.intermediateSize, true}};
  }

  StringRef blockPrefix() const override { return "transformer.h"; }

  void build(GraphBuilder &g, Value tokens, Value targets) const override {
    const ModelConfig &c = g.c;
    OpBuilder &b = g.b;
    const int64_t D = c.hiddenSize, I = c.intermediateSize;
    const auto in_out = nn::WeightLayout::in_out;

    Value wte = g.param("transformer.wte.weight", {c.vocabSize, D});
    Value wpe = g.param("transformer.wpe.weight", {c.maxSeqLen, D});
    std::vector<GPT2Block> blocks;
    for (int64_t i = 0; i < c.numLayers; ++i) {
      std::string p = blockPath(i) + ".";
      GPT2Block w;
      w.ln1 = g.normParams(p + "ln_1", D, true);
      w.attn = g.linearParams(p + "attn.c_attn", in_out, D, 3 * D, true);
      w.attnProj = g.linearParams(p + "attn.c_proj", in_out, D, D, true);
      w.ln2 = g.normParams(p + "ln_2", D, true);
      w.fc = g.linearParams(p + "mlp.c_fc", in_out, D, I, true);
      w.mlpProj = g.linearParams(p + "mlp.c_proj", in_out, I, D, true);
      blocks.push_back(w);
    }
    NormParams lnf = g.normParams("transformer.ln_f", D, true);
    Value head = lmHead(g, wte);

    Value pos =
        b.create<nn::PositionIdsOp>(g.loc, tokens.getType(), tokens, g.mod("transformer.wpe"));
    Value te = b.create<nn::EmbeddingOp>(g.loc, g.act(D), tokens, wte, g.mod("transformer.wte"));
    Value pe = b.create<nn::EmbeddingOp>(g.loc, g.act(D), pos, wpe, g.mod("transformer.wpe"));
    Value h = g.add(te, pe, "transformer");
    for (int64_t i = 0; i < c.numLayers; ++i) {
      std::string p = blockPath(i);
      const GPT2Block &w = blocks[i];
      Value a = g.norm(h, w.ln1, p + ".ln_1");
      Value qkv = g.linear(in_out, a, w.attn, p + ".attn.c_attn");
      auto split = b.create<nn::SplitOp>(g.loc, TypeRange{g.act(D), g.act(D), g.act(D)}, qkv,
                                         g.mod(p + ".attn"));
      Value o = g.attention(split.getResult(0), split.getResult(1), split.getResult(2),
                            /*causal=*/true, /*window=*/0, p + ".attn");
      h = g.add(h, g.linear(in_out, o, w.attnProj, p + ".attn.c_proj"), p);
      Value m = g.norm(h, w.ln2, p + ".ln_2");
      Value down = g.geluMLP(in_out, m, w.fc, w.mlpProj, /*exactGelu=*/false, p + ".mlp.c_fc",
                             p + ".mlp.act", p + ".mlp.c_proj");
      h = g.add(h, down, p);
    }
    h = g.norm(h, lnf, "transformer.ln_f");
    lmLoss(g, h, head, targets);
  }
};

} // namespace

const ModelFamily &fsdp::gpt2Family() { return instance<GPT2>(); }
