//===- Import.h - model graphs from HF configs, JSON graphs and MLIR -*- C++ -*-===//
//
// Every importer yields a module holding one verified nn.graph. Bad input gives
// one ImportError naming the file, line and column, and what is wrong.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_IMPORT_IMPORT_H
#define FSDP_PLANNER_IMPORT_IMPORT_H

#include "dialect/NN/NNDialect.h"
#include "support/RopeScaling.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace fsdp {

struct ImportError {
  std::string file;
  unsigned line = 0, col = 0; // 0: no position (e.g. the file cannot be read)
  std::string message;        // empty: already reported through MLIR diagnostics
  /// "file:line:col: error: message"
  std::string str() const;
};

struct ImportOptions {
  /// GPT-2's published configs set dropout; fsdp trains without it. By default
  /// a non-zero dropout is an error; with this set it is treated as zero.
  bool noDropout = false;
  /// When set (fsdp-plan printing a summary, writing no plan), a non-zero
  /// dropout is said here instead of refused: the summary is of the model
  /// without it, and a plan to train still needs --no-dropout.
  std::vector<std::string> *dropoutNotes = nullptr;
};

/// A mixture-of-experts MLP (Mixtral, Qwen3-MoE): which layers have one, its
/// experts, the routing and the load-balancing loss, and HF's names.
struct MoeConfig {
  int64_t numExperts = 0, topK = 0, expertIntermediateSize = 0;
  bool normTopkProb = false; // the k weights divided by their sum
  bool auxLoss = false;      // output_router_logits: the loss adds coef * aux
  double auxLossCoef = 0;    // router_aux_loss_coef
  std::vector<bool> sparse;  // per layer: the MoE block (else the dense MLP)
  std::string module;        // the block's module: "block_sparse_moe" or "mlp"
  /// The expert's linears in the state dict's order, and which of them is
  /// the gate, the up and the down projection (indices into `linears`).
  std::vector<std::string> linears;
  int gate = 0, up = 1, down = 2;
  int64_t sparseLayers() const;
};

/// A transformer's hyper-parameters, from an HF config.json: what every
/// family has, then what one family adds (its ModelFamily reads and builds it).
struct ModelConfig {
  std::string modelType; // a registered family's (Families/Families.def), e.g. "llama"
  std::string name;      // graph symbol name
  int64_t vocabSize = 0, hiddenSize = 0, numLayers = 0, numHeads = 0;
  int64_t numKvHeads = 0, headDim = 0, intermediateSize = 0, maxSeqLen = 0;
  double normEps = 1e-5;
  double ropeTheta = 10000.0;
  bool tieWordEmbeddings = true;
  // rope_scaling, resolved as transformers resolves it (support/RopeScaling.h)
  std::optional<support::RopeScaling> ropeScaling;
  bool qkvBias = false;         // qwen2: biases on q_proj, k_proj, v_proj
  bool qkNorm = false;          // qwen3: RMSNorm over each head of q and k before RoPE
  int64_t slidingWindow = 0;    // mistral: a query sees itself and W-1 keys before it; 0: all
  int64_t typeVocabSize = 0;    // bert: the token-type table's rows (every sample's types are 0)
  support::ImageSpec image;     // vit: the image, its patches and the classes
  std::optional<MoeConfig> moe; // mixtral, qwen3_moe: the sparse MLPs
  // The config itself (compact JSON, keys sorted as transformers writes
  // them) and, for a family that generates, its generation config: the
  // generation_config.json beside config.json, or what transformers'
  // GenerationConfig.from_model_config derives. nn.graph's hf_config and
  // generation_config; --save-weights DIR writes them back.
  std::string hfConfig, generationConfig;
};

/// The model types `importHFConfig` accepts, for error messages.
llvm::StringRef supportedModelTypes();

/// Parses and validates an HF config's text.
std::optional<ModelConfig> parseHFConfig(llvm::StringRef text, llvm::StringRef file,
                                         const ImportOptions &options, ImportError &error);

/// Builds the forward graph of `config` at the end of `module`'s body; null
/// (and nothing built) if its modelType is not a registered family's.
nn::GraphOp buildGraph(const ModelConfig &config, mlir::ModuleOp module);

mlir::OwningOpRef<mlir::ModuleOp> importHFConfig(llvm::StringRef text, llvm::StringRef file,
                                                 mlir::MLIRContext *context,
                                                 const ImportOptions &options, ImportError &error);

/// The project's JSON graph format (docs/model-format.md).
constexpr int64_t kGraphFormatVersion = 1;

mlir::OwningOpRef<mlir::ModuleOp> importGraphJSON(llvm::StringRef text, llvm::StringRef file,
                                                  mlir::MLIRContext *context, ImportError &error);

/// Whether `graph` holds only what a model holds, which is what the JSON
/// graph format writes and the training step differentiates: nn.param, the
/// forward ops of docs/model-format.md (nn.rope without `inverse`), nn.return,
/// and values of its dtypes, the activations (every value but a parameter and
/// the loss) shaped [?, ?, static...] as the planner sizes them. Reports the
/// first op that breaks the rule. The nn dialect's verifiers allow more
/// (gradient ops in a graph, any float, a static size for a dynamic one).
/// importGraphJSON and importMLIR call it.
mlir::LogicalResult verifyModelGraph(nn::GraphOp graph);

/// Writes `graph` (which verifyModelGraph accepts) in the JSON graph format; the output imports
/// back to the same IR, and exporting that gives the same text.
void exportGraphJSON(nn::GraphOp graph, llvm::raw_ostream &os);

/// MLIR text (a `.mlir` model): parsed and verified by the dialects'
/// verifiers; the module must hold exactly one nn.graph, which
/// verifyModelGraph accepts, and nothing else. The parser's and the
/// verifiers' errors go to `diagnostics` as "file:line:col: error: ..." and
/// leave `error.message` empty; a module without exactly one graph fills it.
mlir::OwningOpRef<mlir::ModuleOp> importMLIR(llvm::StringRef text, llvm::StringRef file,
                                             mlir::MLIRContext *context, ImportError &error,
                                             llvm::raw_ostream &diagnostics = llvm::errs());

enum class ModelFormat { HFConfig, GraphJSON, MLIR };

/// Reads `path`, tells its kind (by extension, then by content) and imports it.
/// Registers the nn dialect in `context`. The module holds exactly one graph.
mlir::OwningOpRef<mlir::ModuleOp> loadModel(llvm::StringRef path, mlir::MLIRContext *context,
                                            const ImportOptions &options, ImportError &error);

/// The single nn.graph of a loaded module.
nn::GraphOp getGraph(mlir::ModuleOp module);

} // namespace fsdp

#endif
