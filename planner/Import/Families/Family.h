//===- Family.h - a model family: what importing and lowering need -*- C++ -*-===//
//
// Each HF model_type fsdp implements is one ModelFamily, defined in its own
// file next to this one (GPT2.cpp, Llama.cpp with its Mistral, Qwen2 and
// Qwen3 deltas, Bert.cpp, ViT.cpp) and listed in Families.def. The
// HF importer (HFConfig.cpp) asks the family which config keys it accepts,
// how to read them and how to build the graph; the lowering
// (LowerToProgram.cpp) asks it what else the family's HF checkpoints hold.
// Nothing else compares model_type strings. docs/adding-a-family.md says
// how to add one.
//
// The pieces the builders share (parameters, linears, norms, attention, the
// GELU MLP, the loss) are GraphBuilder's, written once here.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_IMPORT_FAMILIES_FAMILY_H
#define FSDP_PLANNER_IMPORT_FAMILIES_FAMILY_H

#include "planner/Import/Import.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>
#include <vector>

namespace fsdp {

class JsonReader;

/// A linear's parameters; `bias` is null when it has none.
struct LinearParams {
  mlir::Value weight, bias;
};

/// A norm's parameters: LayerNorm's weight and bias, or RMSNorm's weight
/// (`bias` null).
struct NormParams {
  mlir::Value weight, bias;
};

/// A sparse MLP's parameters: the router, and each expert's linears in
/// MoeConfig::linears' order.
struct MoeParams {
  LinearParams router;
  std::vector<std::vector<LinearParams>> experts;
};

/// Builds a graph's ops with HF module paths, keeping each family's code
/// close to transformers' modules. Every activation is f32 [?, ?, width].
class GraphBuilder {
public:
  GraphBuilder(mlir::OpBuilder &b, mlir::Location loc, const ModelConfig &c)
      : b(b), loc(loc), c(c) {}

  mlir::RankedTensorType act(int64_t width);
  mlir::StringAttr mod(const llvm::Twine &path) { return b.getStringAttr(path); }

  /// Declares a parameter; the graph's parameters come first, each family
  /// declaring them in its HF state dict's order.
  mlir::Value param(const llvm::Twine &name, llvm::ArrayRef<int64_t> shape);
  /// `name.weight` [out, in] (out_in) or [in, out] (in_out), then `name.bias` [out].
  LinearParams linearParams(const std::string &name, nn::WeightLayout layout, int64_t in,
                            int64_t out, bool bias);
  /// `name.weight` [width], then `name.bias` [width] for a LayerNorm.
  NormParams normParams(const std::string &name, int64_t width, bool bias);

  mlir::Value linear(nn::WeightLayout layout, mlir::Value x, const LinearParams &p,
                     const llvm::Twine &path);
  /// LayerNorm when `p` has a bias, RMSNorm otherwise, with the config's
  /// epsilon, over rows of the weight's length; the result is shaped as `x`.
  mlir::Value norm(mlir::Value x, const NormParams &p, const llvm::Twine &path);
  mlir::Value add(mlir::Value x, mlir::Value y, const llvm::Twine &path);
  /// GELU over `x`: the tanh approximation, or with `exact` erf's.
  mlir::Value gelu(mlir::Value x, bool exact, const llvm::Twine &path);
  /// Multi-head attention over the projected q, k, v with the config's
  /// heads: causal (each query sees the keys up to itself, or with a window
  /// W > 0 itself and the W-1 before it) or every query seeing every key.
  mlir::Value attention(mlir::Value q, mlir::Value k, mlir::Value v, bool causal, int64_t window,
                        const llvm::Twine &path);
  /// The MLP of GPT-2, BERT and ViT: up, GELU, down.
  mlir::Value geluMLP(nn::WeightLayout layout, mlir::Value x, const LinearParams &up,
                      const LinearParams &down, bool exactGelu, const std::string &upPath,
                      const std::string &actPath, const std::string &downPath);
  /// The config's sparse MLP's parameters at `path` (`model.layers.3.mlp`):
  /// `path.gate.weight` [E, D], then `path.experts.<e>.<linear>.weight`.
  MoeParams moeParams(const std::string &path);
  /// A sparse MLP over x (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock):
  /// the router's logits, each token's k experts over the packed buffer,
  /// their weighted sum. The logits are kept for the load-balancing loss.
  mlir::Value moeMLP(mlir::Value x, const MoeParams &p, const std::string &path);
  /// Ends the graph: the cross-entropy of `logits` against `targets`,
  /// returned; with the config's load-balancing loss (MoeConfig::auxLoss),
  /// the cross-entropy plus it.
  void crossEntropyLoss(mlir::Value logits, mlir::Value targets);

  mlir::OpBuilder &b;
  mlir::Location loc;
  const ModelConfig &c;
  std::vector<mlir::Value> routerLogits; // of the sparse MLPs built so far
};

/// The values checkModelSize weighs, each given by one config key.
struct SizeKey {
  const char *key;
  int64_t value;
  /// A value a default may derive from others (n_inner from n_embd): blamed
  /// only when the config gives it.
  bool onlyIfGiven = false;
};

/// The parameters of a block of GPT-2, BERT or ViT: four D x D
/// projections and the MLP, all biased, and two LayerNorms.
double biasedBlockParameters(const ModelConfig &c);

/// What an nn.graph of the family takes: its two arguments (the inputs and
/// the targets) and, when they are not token ids, the graph's inputs_kind
/// and image attributes.
struct GraphInputs {
  mlir::Type inputs, targets;
  mlir::StringAttr kind;
  mlir::DictionaryAttr image;
};

/// One HF model_type.
class ModelFamily {
public:
  virtual ~ModelFamily() = default;

  /// HF's model_type, which the graph and the program carry.
  virtual llvm::StringRef modelType() const = 0;

  // --- The HF config (HFConfig.cpp's parseHFConfig).

  /// The keys parse reads, so implements or refuses by value.
  virtual std::vector<const char *> implementedKeys() const = 0;
  /// Keys of this family's configs that describe a checkpoint without
  /// changing the model (besides those every family accepts).
  virtual std::vector<const char *> descriptiveKeys() const { return {}; }
  /// Reads the config into `c` (whose modelType is set); false once `r`
  /// holds the error.
  virtual bool parse(JsonReader &r, const ImportOptions &opts, ModelConfig &c) const = 0;
  /// The keys giving the number of blocks and the sequence's length, which
  /// the planner's limits name.
  virtual const char *layersKey() const { return "num_hidden_layers"; }
  virtual const char *positionsKey() const { return "max_position_embeddings"; }
  /// An upper bound of the parameters, an untied LM head excluded; in
  /// floating point, since the exact count may not fit in 64 bits.
  virtual double parameterBound(const ModelConfig &c) const = 0;
  /// The sizes to blame when the parameters are too many: the error names
  /// the largest (the first of equals).
  virtual std::vector<SizeKey> sizeKeys(const ModelConfig &c) const = 0;

  // --- The graph (HFConfig.cpp's buildGraph).

  /// nn.graph's block_prefix: block i's parameters are "<prefix>.<i>.*".
  virtual llvm::StringRef blockPrefix() const = 0;
  /// Block i's module path, "<prefix>.<i>".
  std::string blockPath(int64_t i) const;
  /// What the graph takes: token ids and targets unless overridden.
  virtual GraphInputs inputs(const ModelConfig &c, mlir::Builder &b) const;
  /// Builds the graph's body: the parameters, then the forward pass and its
  /// loss, returned.
  virtual void build(GraphBuilder &g, mlir::Value inputs, mlir::Value targets) const = 0;

  // --- The family's HF checkpoints (LowerToProgram.cpp).

  /// The tensors that copy a parameter (a tied head); `isParam` tells the
  /// graph's parameters.
  virtual std::vector<std::string>
  tiedCopies(llvm::function_ref<bool(llvm::StringRef)> isParam) const {
    return {};
  }
  /// Prefixes of tensors the checkpoints hold that the model does not use.
  virtual std::vector<std::string> unusedWeightPrefixes() const { return {}; }
  /// Whether transformers' model of the family generates (its
  /// save_pretrained writes a generation_config.json): the causal LMs.
  virtual bool generates() const { return false; }
};

/// GPT-2 and the LLaMA family: decoders whose LM head may be the word
/// embeddings (tie_word_embeddings), so a checkpoint's lm_head.weight may be
/// a copy.
class CausalLMFamily : public ModelFamily {
public:
  std::vector<std::string>
  tiedCopies(llvm::function_ref<bool(llvm::StringRef)> isParam) const override;
  bool generates() const override { return true; }

protected:
  /// The head's weight, declared last: the word embeddings if tied.
  static mlir::Value lmHead(GraphBuilder &g, mlir::Value wordEmbeddings);
  /// The logits of the final hidden state `h` and their loss.
  static void lmLoss(GraphBuilder &g, mlir::Value h, mlir::Value head, mlir::Value targets);
};

/// The registered families, in the order supportedModelTypes lists them.
llvm::ArrayRef<const ModelFamily *> modelFamilies();

/// The family of `modelType`, or null (a JSON or MLIR graph may carry any).
const ModelFamily *findFamily(llvm::StringRef modelType);

/// Refuses a non-zero dropout at any of `keys` (fsdp trains without it)
/// unless `opts.noDropout`; `hfDefault` is transformers' value when absent.
bool checkDropout(JsonReader &r, const ImportOptions &opts,
                  std::initializer_list<const char *> keys, double hfDefault);

/// Reads required positive integers in order, stopping at the first error.
bool getInts(JsonReader &r, std::initializer_list<std::pair<const char *, int64_t *>> keys);

/// The one instance of a family's class, for its accessor below.
template <class Family> const ModelFamily &instance() {
  static const Family family;
  return family;
}

// The families' accessors, each defined in its family's file.
#define FSDP_FAMILY(accessor) const ModelFamily &accessor();
#include "planner/Import/Families/Families.def"

} // namespace fsdp

#endif
