//===- Encoder.cpp - what the BERT and ViT families share -----------------===//
#include "planner/Import/Families/Encoder.h"
#include "planner/Import/JsonReader.h"

using namespace mlir;
using namespace fsdp;

std::vector<const char *> EncoderFamily::implementedKeys() const {
  std::vector<const char *> keys = {
      "hidden_size", "num_hidden_layers",   "num_attention_heads",          "intermediate_size",
      "hidden_act",  "hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps"};
  std::vector<const char *> more = encoderKeys();
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

bool EncoderFamily::parseEncoder(JsonReader &r, const ImportOptions &opts, double hfDropout,
                                 ModelConfig &c) {
  int64_t d, layers, heads, inter;
  if (!getInts(r, {{"hidden_size", &d},
                   {"num_hidden_layers", &layers},
                   {"num_attention_heads", &heads},
                   {"intermediate_size", &inter}}))
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
  if (d % heads != 0)
    return r.fail({"hidden_size"},
                  "hidden_size = " + std::to_string(d) +
                      " is not divisible by num_attention_heads = " + std::to_string(heads));
  if (!checkDropout(r, opts, {"hidden_dropout_prob", "attention_probs_dropout_prob"}, hfDropout))
    return false;
  c.hiddenSize = d;
  c.numLayers = layers;
  c.numHeads = heads;
  c.numKvHeads = heads;
  c.headDim = d / heads;
  c.intermediateSize = inter;
  c.normEps = *eps;
  return true;
}

EncoderBlock EncoderFamily::blockParams(GraphBuilder &g, int64_t i, const char *self,
                                        bool postLN) const {
  const int64_t D = g.c.hiddenSize, I = g.c.intermediateSize;
  const auto out_in = nn::WeightLayout::out_in;
  std::string p = blockPath(i) + ".";
  std::string attn = p + self + ".";
  EncoderBlock w;
  w.query = g.linearParams(attn + "query", out_in, D, D, true);
  w.key = g.linearParams(attn + "key", out_in, D, D, true);
  w.value = g.linearParams(attn + "value", out_in, D, D, true);
  w.attentionOut = g.linearParams(p + "attention.output.dense", out_in, D, D, true);
  if (postLN)
    w.norm1 = g.normParams(p + "attention.output.LayerNorm", D, true);
  w.up = g.linearParams(p + "intermediate.dense", out_in, D, I, true);
  w.down = g.linearParams(p + "output.dense", out_in, I, D, true);
  if (postLN) {
    w.norm2 = g.normParams(p + "output.LayerNorm", D, true);
  } else {
    w.norm1 = g.normParams(p + "layernorm_before", D, true);
    w.norm2 = g.normParams(p + "layernorm_after", D, true);
  }
  return w;
}

Value EncoderFamily::attention(GraphBuilder &g, Value x, const EncoderBlock &w,
                               const std::string &block, const char *self) {
  const auto out_in = nn::WeightLayout::out_in;
  std::string attn = block + "." + self;
  Value q = g.linear(out_in, x, w.query, attn + ".query");
  Value k = g.linear(out_in, x, w.key, attn + ".key");
  Value v = g.linear(out_in, x, w.value, attn + ".value");
  Value o = g.attention(q, k, v, /*causal=*/false, /*window=*/0, attn);
  return g.linear(out_in, o, w.attentionOut, block + ".attention.output.dense");
}

Value EncoderFamily::mlp(GraphBuilder &g, Value x, const EncoderBlock &w,
                         const std::string &block) {
  return g.geluMLP(nn::WeightLayout::out_in, x, w.up, w.down, /*exactGelu=*/true,
                   block + ".intermediate.dense", block + ".intermediate.intermediate_act_fn",
                   block + ".output.dense");
}
