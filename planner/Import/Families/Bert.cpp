//===- Bert.cpp - model_type bert: transformers' BertForMaskedLM ----------===//
//
// Word, token-type and position embeddings and their LayerNorm, post-LN
// encoder blocks, the masked-LM head (dense, GELU, LayerNorm) whose decoder
// is the word embeddings. The graph takes masked tokens.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Families/Encoder.h"
#include "planner/Import/JsonReader.h"

using namespace mlir;
using namespace fsdp;

namespace {

class Bert final : public EncoderFamily {
public:
  StringRef modelType() const override { return "bert"; }

  /// The classification heads' dropout, transformers' feed-forward chunking
  /// (the same maths in slices), the memory switch of old configs.
  std::vector<const char *> descriptiveKeys() const override {
    return {"classifier_dropout", "chunk_size_feed_forward", "gradient_checkpointing"};
  }

  bool parse(JsonReader &r, const ImportOptions &opts, ModelConfig &c) const override {
    if (!parseEncoder(r, opts, /*hfDropout=*/0.1, c))
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

  /// Embeddings, blocks, the MLM head (its decoder tied).
  double parameterBound(const ModelConfig &c) const override {
    double V = c.vocabSize, D = c.hiddenSize, L = c.numLayers;
    return (V + c.maxSeqLen + (double)c.typeVocabSize) * D + 2 * D + L * biasedBlockParameters(c) +
           (D * D + 3 * D) + V;
  }

  std::vector<SizeKey> sizeKeys(const ModelConfig &c) const override {
    return {{"vocab_size", c.vocabSize},
            {"hidden_size", c.hiddenSize},
            {"intermediate_size", c.intermediateSize},
            {"num_hidden_layers", c.numLayers},
            {"max_position_embeddings", c.maxSeqLen},
            {"type_vocab_size", c.typeVocabSize, true}};
  }

  StringRef blockPrefix() const override { return "bert.encoder.layer"; }

  GraphInputs inputs(const ModelConfig &c, Builder &b) const override {
    GraphInputs in = ModelFamily::inputs(c, b);
    in.kind = b.getStringAttr("masked_tokens");
    return in;
  }

  void build(GraphBuilder &g, Value tokens, Value targets) const override;

  /// BertForMaskedLM's decoder is the word embeddings and the head's bias.
  std::vector<std::string> tiedCopies(function_ref<bool(StringRef)>) const override {
    return {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"};
  }
  /// BERT pretraining's pooler and next-sentence head.
  std::vector<std::string> unusedWeightPrefixes() const override {
    return {"bert.pooler.", "cls.seq_relationship."};
  }

protected:
  std::vector<const char *> encoderKeys() const override {
    return {
        "vocab_size", "max_position_embeddings", "type_vocab_size",    "position_embedding_type",
        "is_decoder", "add_cross_attention",     "tie_word_embeddings"};
  }
};

void Bert::build(GraphBuilder &g, Value tokens, Value targets) const {
  const ModelConfig &c = g.c;
  OpBuilder &b = g.b;
  Location loc = g.loc;
  const int64_t D = c.hiddenSize, V = c.vocabSize;
  const auto out_in = nn::WeightLayout::out_in;
  Type ids = tokens.getType();
  const std::string e = "bert.embeddings.";
  Value words = g.param(e + "word_embeddings.weight", {V, D});
  Value positions = g.param(e + "position_embeddings.weight", {c.maxSeqLen, D});
  Value types = g.param(e + "token_type_embeddings.weight", {c.typeVocabSize, D});
  NormParams embeddingsNorm = g.normParams(e + "LayerNorm", D, true);
  std::vector<EncoderBlock> blocks;
  for (int64_t i = 0; i < c.numLayers; ++i)
    blocks.push_back(blockParams(g, i, "attention.self", /*postLN=*/true));
  // BertLMPredictionHead's own bias comes before its submodules.
  Value headBias = g.param("cls.predictions.bias", {V});
  const std::string t = "cls.predictions.transform";
  LinearParams dense = g.linearParams(t + ".dense", out_in, D, D, true);
  NormParams headNorm = g.normParams(t + ".LayerNorm", D, true);

  // HF's order: words + token types, then + positions.
  Value pos = b.create<nn::PositionIdsOp>(loc, ids, tokens, g.mod(e + "position_embeddings"));
  Value tt = b.create<nn::TokenTypeIdsOp>(loc, ids, tokens, g.mod(e + "token_type_embeddings"));
  Value we = b.create<nn::EmbeddingOp>(loc, g.act(D), tokens, words, g.mod(e + "word_embeddings"));
  Value te =
      b.create<nn::EmbeddingOp>(loc, g.act(D), tt, types, g.mod(e + "token_type_embeddings"));
  Value pe =
      b.create<nn::EmbeddingOp>(loc, g.act(D), pos, positions, g.mod(e + "position_embeddings"));
  Value h = g.add(we, te, "bert.embeddings");
  h = g.add(h, pe, "bert.embeddings");
  h = g.norm(h, embeddingsNorm, e + "LayerNorm");
  for (int64_t i = 0; i < c.numLayers; ++i) {
    std::string p = blockPath(i);
    const EncoderBlock &w = blocks[i];
    h = g.add(attention(g, h, w, p, "attention.self"), h, p + ".attention.output");
    h = g.norm(h, w.norm1, p + ".attention.output.LayerNorm");
    h = g.add(mlp(g, h, w, p), h, p + ".output");
    h = g.norm(h, w.norm2, p + ".output.LayerNorm");
  }
  Value x = g.linear(out_in, h, dense, t + ".dense");
  x = g.gelu(x, /*exact=*/true, t + ".transform_act_fn");
  x = g.norm(x, headNorm, t + ".LayerNorm");
  Value logits = g.linear(out_in, x, {words, headBias}, "cls.predictions.decoder");
  g.crossEntropyLoss(logits, targets);
}

} // namespace

const ModelFamily &fsdp::bertFamily() { return instance<Bert>(); }
