//===- Family.cpp - the registry of model families and shared pieces ------===//
//
// The list of families HFConfig.cpp accepts, and the graph pieces and config
// checks more than one family uses.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Families/Family.h"
#include "planner/Import/JsonReader.h"

using namespace mlir;
using namespace fsdp;
using nlohmann::json;

ArrayRef<const ModelFamily *> fsdp::modelFamilies() {
  static const ModelFamily *const families[] = {
#define FSDP_FAMILY(accessor) &accessor(),
#include "planner/Import/Families/Families.def"
  };
  return families;
}

const ModelFamily *fsdp::findFamily(StringRef modelType) {
  for (const ModelFamily *f : modelFamilies())
    if (f->modelType() == modelType)
      return f;
  return nullptr;
}

std::string ModelFamily::blockPath(int64_t i) const {
  return (blockPrefix() + "." + Twine(i)).str();
}

GraphInputs ModelFamily::inputs(const ModelConfig &, Builder &b) const {
  auto ids = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, b.getI64Type());
  return {ids, ids, StringAttr(), DictionaryAttr()};
}

double fsdp::biasedBlockParameters(const ModelConfig &c) {
  double D = c.hiddenSize, I = c.intermediateSize;
  return 4 * D * D + 2 * D * I + 9 * D + I;
}

bool fsdp::getInts(JsonReader &r, std::initializer_list<std::pair<const char *, int64_t *>> keys) {
  for (auto [key, out] : keys) {
    auto v = r.getInt({key});
    if (!v)
      return false;
    *out = *v;
  }
  return true;
}

bool fsdp::checkDropout(JsonReader &r, const ImportOptions &opts,
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
      if (opts.dropoutNotes) {
        opts.dropoutNotes->push_back(msg + ", or pass --no-dropout to train without it; this "
                                           "summary is of the model without it");
        continue;
      }
      return r.fail({key}, msg + ", or pass --no-dropout to train without it");
    }
  }
  return true;
}

RankedTensorType GraphBuilder::act(int64_t width) {
  return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic, width}, b.getF32Type());
}

Value GraphBuilder::param(const Twine &name, ArrayRef<int64_t> shape) {
  return b.create<nn::ParamOp>(loc, RankedTensorType::get(shape, b.getF32Type()),
                               b.getStringAttr(name));
}

LinearParams GraphBuilder::linearParams(const std::string &name, nn::WeightLayout layout,
                                        int64_t in, int64_t out, bool bias) {
  LinearParams p;
  p.weight = layout == nn::WeightLayout::in_out ? param(name + ".weight", {in, out})
                                                : param(name + ".weight", {out, in});
  if (bias)
    p.bias = param(name + ".bias", {out});
  return p;
}

NormParams GraphBuilder::normParams(const std::string &name, int64_t width, bool bias) {
  NormParams p;
  p.weight = param(name + ".weight", {width});
  if (bias)
    p.bias = param(name + ".bias", {width});
  return p;
}

Value GraphBuilder::linear(nn::WeightLayout layout, Value x, const LinearParams &p,
                           const Twine &path) {
  auto ws = cast<RankedTensorType>(p.weight.getType()).getShape();
  int64_t out = layout == nn::WeightLayout::in_out ? ws[1] : ws[0];
  return b.create<nn::LinearOp>(loc, act(out), layout, x, p.weight, p.bias, mod(path));
}

Value GraphBuilder::norm(Value x, const NormParams &p, const Twine &path) {
  auto eps = b.getF64FloatAttr(c.normEps);
  if (p.bias)
    return b.create<nn::LayerNormOp>(loc, x.getType(), x, p.weight, p.bias, eps, mod(path));
  return b.create<nn::RMSNormOp>(loc, x.getType(), x, p.weight, eps, mod(path));
}

Value GraphBuilder::add(Value x, Value y, const Twine &path) {
  return b.create<nn::AddOp>(loc, x.getType(), x, y, mod(path));
}

Value GraphBuilder::gelu(Value x, bool exact, const Twine &path) {
  return b.create<nn::GeluOp>(loc, x.getType(), x, mod(path),
                              exact ? b.getStringAttr("none") : StringAttr());
}

Value GraphBuilder::attention(Value q, Value k, Value v, bool causal, int64_t window,
                              const Twine &path) {
  auto heads = b.getI64IntegerAttr(c.numHeads), kvHeads = b.getI64IntegerAttr(c.numKvHeads);
  if (!causal)
    return b.create<nn::AttentionOp>(loc, q.getType(), q, k, v, heads, kvHeads, mod(path));
  IntegerAttr w = window ? b.getI64IntegerAttr(window) : IntegerAttr();
  return b.create<nn::CausalAttentionOp>(loc, q.getType(), q, k, v, heads, kvHeads, w, mod(path));
}

Value GraphBuilder::geluMLP(nn::WeightLayout layout, Value x, const LinearParams &up,
                            const LinearParams &down, bool exactGelu, const std::string &upPath,
                            const std::string &actPath, const std::string &downPath) {
  Value h = linear(layout, x, up, upPath);
  h = gelu(h, exactGelu, actPath);
  return linear(layout, h, down, downPath);
}

int64_t MoeConfig::sparseLayers() const { return llvm::count(sparse, true); }

MoeParams GraphBuilder::moeParams(const std::string &path) {
  const MoeConfig &m = *c.moe;
  const auto out_in = nn::WeightLayout::out_in;
  MoeParams p;
  p.router = linearParams(path + ".gate", out_in, c.hiddenSize, m.numExperts, false);
  for (int64_t e = 0; e < m.numExperts; ++e) {
    std::vector<LinearParams> expert;
    for (size_t i = 0; i < m.linears.size(); ++i) {
      bool down = (int)i == m.down;
      int64_t in = down ? m.expertIntermediateSize : c.hiddenSize;
      int64_t out = down ? c.hiddenSize : m.expertIntermediateSize;
      expert.push_back(linearParams(path + ".experts." + std::to_string(e) + "." + m.linears[i],
                                    out_in, in, out, false));
    }
    p.experts.push_back(expert);
  }
  return p;
}

Value GraphBuilder::moeMLP(Value x, const MoeParams &p, const std::string &path) {
  const MoeConfig &m = *c.moe;
  const int64_t k = m.topK, D = c.hiddenSize, I = m.expertIntermediateSize;
  const int64_t dyn = ShapedType::kDynamic;
  auto routing = [&](Type elem) { return RankedTensorType::get({dyn, dyn, k}, elem); };
  auto packed = [&](int64_t w) { return RankedTensorType::get({dyn, dyn, k, w}, b.getF32Type()); };
  auto weights = [&](int which) {
    SmallVector<Value> ws;
    for (const auto &expert : p.experts)
      ws.push_back(expert[which].weight);
    return ws;
  };
  Value logits = linear(nn::WeightLayout::out_in, x, p.router, path + ".gate");
  routerLogits.push_back(logits);
  auto route = b.create<nn::MoeRouteOp>(
      loc, TypeRange{routing(b.getF32Type()), routing(b.getI64Type()), routing(b.getI64Type())},
      logits, b.getI64IntegerAttr(k), m.normTopkProb ? b.getUnitAttr() : UnitAttr(), mod(path));
  StringAttr experts = mod(path + ".experts");
  Value rows = b.create<nn::MoePermuteOp>(loc, packed(D), x, route.getSlots(), experts);
  Value gate =
      b.create<nn::MoeLinearOp>(loc, packed(I), rows, route.getExperts(), weights(m.gate), experts);
  Value up =
      b.create<nn::MoeLinearOp>(loc, packed(I), rows, route.getExperts(), weights(m.up), experts);
  Value h = b.create<nn::SiluMulOp>(loc, packed(I), gate, up, experts);
  Value down =
      b.create<nn::MoeLinearOp>(loc, packed(D), h, route.getExperts(), weights(m.down), experts);
  return b.create<nn::MoeCombineOp>(loc, act(D), down, route.getWeights(), route.getSlots(),
                                    mod(path));
}

void GraphBuilder::crossEntropyLoss(Value logits, Value targets) {
  auto loss = RankedTensorType::get({}, b.getF32Type());
  Value l = b.create<nn::CrossEntropyOp>(loc, loss, logits, targets, StringAttr());
  if (c.moe && c.moe->auxLoss && !routerLogits.empty())
    l = b.create<nn::MoeAuxLossOp>(loc, loss, l, routerLogits, b.getI64IntegerAttr(c.moe->topK),
                                   b.getF64FloatAttr(c.moe->auxLossCoef), StringAttr());
  b.create<nn::ReturnOp>(loc, ValueRange{l});
}

std::vector<std::string> CausalLMFamily::tiedCopies(function_ref<bool(StringRef)> isParam) const {
  if (isParam("lm_head.weight"))
    return {};
  return {"lm_head.weight"};
}

Value CausalLMFamily::lmHead(GraphBuilder &g, Value wordEmbeddings) {
  if (g.c.tieWordEmbeddings)
    return wordEmbeddings;
  return g.param("lm_head.weight", {g.c.vocabSize, g.c.hiddenSize});
}

void CausalLMFamily::lmLoss(GraphBuilder &g, Value h, Value head, Value targets) {
  Value logits = g.linear(nn::WeightLayout::out_in, h, {head, Value()}, "lm_head");
  g.crossEntropyLoss(logits, targets);
}
