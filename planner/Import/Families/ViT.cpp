//===- ViT.cpp - model_type vit: transformers' ViTForImageClassification --===//
//
// The patch embedding (HF's Conv2d kernel read as a linear over each
// patch), the class token first and the learned positions, pre-LN encoder
// blocks, the final LayerNorm, the classifier on the class token. The
// graph takes patches [B, P, C*ph*pw] and one label a sample.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Families/Encoder.h"
#include "planner/Import/JsonReader.h"

using namespace mlir;
using namespace fsdp;
using nlohmann::json;

namespace {

/// An int or [h, w] (image_size and patch_size).
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

class ViT final : public EncoderFamily {
public:
  StringRef modelType() const override { return "vit"; }

  /// The masked-image-modelling decoder's stride and the pooler, which the
  /// classifier does not use; transformers' feed-forward chunking.
  std::vector<const char *> descriptiveKeys() const override {
    return {"encoder_stride", "pooler_output_size", "pooler_act", "chunk_size_feed_forward"};
  }

  bool parse(JsonReader &r, const ImportOptions &opts, ModelConfig &c) const override;

  const char *positionsKey() const override { return "image_size"; }

  /// Patch kernel, class token and positions, blocks, final norm, classifier.
  double parameterBound(const ModelConfig &c) const override {
    double V = c.vocabSize, D = c.hiddenSize, L = c.numLayers;
    return D * (double)c.image.patchValues() + D + D + (double)c.maxSeqLen * D +
           L * biasedBlockParameters(c) + 2 * D + V * D + V;
  }

  std::vector<SizeKey> sizeKeys(const ModelConfig &c) const override {
    return {{"hidden_size", c.hiddenSize},
            {"intermediate_size", c.intermediateSize},
            {"num_hidden_layers", c.numLayers},
            {"num_channels", c.image.channels},
            {"num_labels", c.vocabSize, true}};
  }

  StringRef blockPrefix() const override { return "vit.encoder.layer"; }

  GraphInputs inputs(const ModelConfig &c, Builder &b) const override {
    GraphInputs in;
    in.inputs = RankedTensorType::get(
        {ShapedType::kDynamic, c.image.patches(), c.image.patchValues()}, b.getF32Type());
    in.targets = RankedTensorType::get({ShapedType::kDynamic, 1}, b.getI64Type());
    in.kind = b.getStringAttr("images");
    in.image = b.getDictionaryAttr({
        b.getNamedAttr("height", b.getI64IntegerAttr(c.image.height)),
        b.getNamedAttr("width", b.getI64IntegerAttr(c.image.width)),
        b.getNamedAttr("channels", b.getI64IntegerAttr(c.image.channels)),
        b.getNamedAttr("patch_height", b.getI64IntegerAttr(c.image.patchHeight)),
        b.getNamedAttr("patch_width", b.getI64IntegerAttr(c.image.patchWidth)),
    });
    return in;
  }

  void build(GraphBuilder &g, Value patches, Value labels) const override;

protected:
  std::vector<const char *> encoderKeys() const override {
    return {"image_size", "patch_size", "num_channels", "qkv_bias", "num_labels", "problem_type"};
  }
};

bool ViT::parse(JsonReader &r, const ImportOptions &opts, ModelConfig &c) const {
  if (!parseEncoder(r, opts, /*hfDropout=*/0.0, c))
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

void ViT::build(GraphBuilder &g, Value patches, Value labels) const {
  const ModelConfig &c = g.c;
  OpBuilder &b = g.b;
  Location loc = g.loc;
  const auto out_in = nn::WeightLayout::out_in;
  const int64_t D = c.hiddenSize, P = c.image.patches(), classes = c.image.classes;
  const std::string e = "vit.embeddings.";
  Value cls = g.param(e + "cls_token", {1, 1, D});
  Value positions = g.param(e + "position_embeddings", {1, P + 1, D});
  Value kernel = g.param(e + "patch_embeddings.projection.weight",
                         {D, c.image.channels, c.image.patchHeight, c.image.patchWidth});
  Value kernelBias = g.param(e + "patch_embeddings.projection.bias", {D});
  std::vector<EncoderBlock> blocks;
  for (int64_t i = 0; i < c.numLayers; ++i)
    blocks.push_back(blockParams(g, i, "attention.attention", /*postLN=*/false));
  NormParams finalNorm = g.normParams("vit.layernorm", D, true);
  LinearParams classifier = g.linearParams("classifier", out_in, D, classes, true);

  auto rows = [&](int64_t seq, int64_t width) {
    return RankedTensorType::get({ShapedType::kDynamic, seq, width}, b.getF32Type());
  };
  Value x = b.create<nn::LinearOp>(loc, rows(P, D), out_in, patches, kernel, kernelBias,
                                   g.mod(e + "patch_embeddings.projection"));
  // [B, P+1, D]: the sequence the planner's seq_len sizes from here on.
  Value h = b.create<nn::ClassTokenOp>(loc, g.act(D), x, cls, positions, g.mod("vit.embeddings"));
  for (int64_t i = 0; i < c.numLayers; ++i) {
    std::string p = blockPath(i);
    const EncoderBlock &w = blocks[i];
    Value a = g.norm(h, w.norm1, p + ".layernorm_before");
    h = g.add(attention(g, a, w, p, "attention.attention"), h, p);
    Value m = g.norm(h, w.norm2, p + ".layernorm_after");
    h = g.add(mlp(g, m, w, p), h, p + ".output");
  }
  h = g.norm(h, finalNorm, "vit.layernorm");
  Value first = b.create<nn::FirstTokenOp>(loc, rows(1, D), h, g.mod("vit"));
  Value logits = b.create<nn::LinearOp>(loc, rows(1, classes), out_in, first, classifier.weight,
                                        classifier.bias, g.mod("classifier"));
  g.crossEntropyLoss(logits, labels);
}

} // namespace

const ModelFamily &fsdp::vitFamily() { return instance<ViT>(); }
