//===- HFConfigTest.cpp - HF config.json import ---------------------------===//
//
// Parameter counts of the published models, the structure of the graphs
// (tied heads, GQA shapes, Llama 3.1 RoPE scaling) and the errors for bad
// configs, each with its line and column.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/ModelSummary.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

using namespace fsdp;

namespace {

std::string modelPath(const std::string &folder) {
  return std::string(FSDP_SOURCE_DIR) + "/models/" + folder + "/config.json";
}

/// Loads models/<folder>/config.json; fails the test if it does not load.
mlir::OwningOpRef<mlir::ModuleOp> load(const std::string &folder, mlir::MLIRContext &ctx,
                                       bool noDropout) {
  ImportOptions opts;
  opts.noDropout = noDropout;
  ImportError err;
  auto module = loadModel(modelPath(folder), &ctx, opts, err);
  EXPECT_TRUE(module) << err.str();
  return module;
}

nn::ParamOp findParam(nn::GraphOp graph, llvm::StringRef name) {
  for (nn::ParamOp p : graph.getParams())
    if (p.getName() == name)
      return p;
  return nn::ParamOp();
}

std::vector<int64_t> shapeOf(nn::ParamOp p) {
  auto shape = p.getResult().getType().getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

//===----------------------------------------------------------------------===//
// Published parameter counts
//===----------------------------------------------------------------------===//

struct Published {
  const char *folder;
  int64_t parameters;
  bool noDropout; // GPT-2's published configs set dropout 0.1
};

std::ostream &operator<<(std::ostream &os, const Published &p) { return os << p.folder; }

class PublishedModel : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedModel, ParameterCountMatchesPublished) {
  const Published &p = GetParam();
  mlir::MLIRContext ctx;
  auto module = load(p.folder, ctx, p.noDropout);
  ASSERT_TRUE(module);
  nn::GraphOp graph = getGraph(*module);
  ASSERT_TRUE(graph);
  ModelSummary s = summarize(graph);
  EXPECT_EQ(s.parameters, p.parameters) << p.folder << ": " << withCommas(s.parameters)
                                        << " vs published " << withCommas(p.parameters);
  EXPECT_EQ(s.name, p.folder);               // the folder names the graph
  EXPECT_EQ(s.paramBytes, 4 * p.parameters); // f32 master weights
}

std::string paramName(const ::testing::TestParamInfo<Published> &info) {
  std::string n = info.param.folder;
  std::replace_if(n.begin(), n.end(), [](char c) { return !isalnum((unsigned char)c); }, '_');
  return n;
}

INSTANTIATE_TEST_SUITE_P(HFConfig, PublishedModel,
                         ::testing::Values(Published{"gpt2", 124439808, true},
                                           Published{"gpt2-medium", 354823168, true},
                                           Published{"gpt2-large", 774030080, true},
                                           Published{"gpt2-xl", 1557611200, true},
                                           Published{"Llama-2-7b", 6738415616, false},
                                           Published{"Llama-2-13b", 13015864320, false},
                                           Published{"Llama-2-70b", 68976648192, false},
                                           Published{"Meta-Llama-3-8B", 8030261248, false},
                                           Published{"Meta-Llama-3-70B", 70553706496, false},
                                           Published{"Llama-3.1-405B", 405853388800, false},
                                           Published{"Mistral-7B-v0.1", 7241732096, false},
                                           Published{"Qwen2-7B", 7615616512, false},
                                           Published{"Qwen2.5-0.5B", 494032768, false},
                                           Published{"Qwen3-0.6B", 596049920, false}, // tied
                                           Published{"Qwen3-8B", 8190735360, false},
                                           Published{"Mixtral-8x7B-v0.1", 46702792704, false},
                                           Published{"Qwen3-30B-A3B", 30532122624, false},
                                           // BertForMaskedLM: no pooler, the decoder tied.
                                           Published{"bert-base-uncased", 109514298, true},
                                           Published{"bert-large-uncased", 335174458, true},
                                           Published{"vit-base-patch16-224", 86567656, false},
                                           Published{"vit-large-patch16-224", 304326632, false}),
                         paramName);

TEST(HFConfig, PublishedGPT2NeedsNoDropout) {
  // Published GPT-2 configs set dropout 0.1: an error unless noDropout, at the
  // first key checked (resid_pdrop, line 18 in each file).
  for (const char *folder : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}) {
    mlir::MLIRContext ctx;
    ImportError err;
    auto module = loadModel(modelPath(folder), &ctx, ImportOptions(), err);
    EXPECT_FALSE(module) << folder;
    EXPECT_EQ(err.file, modelPath(folder));
    EXPECT_EQ(err.line, 18u) << err.str();
    EXPECT_EQ(err.col, 18u) << err.str();
    EXPECT_NE(err.message.find("resid_pdrop = 0.1"), std::string::npos) << err.str();
    EXPECT_NE(err.message.find("--no-dropout"), std::string::npos) << err.str();
  }
}

//===----------------------------------------------------------------------===//
// Tiny models and graph structure
//===----------------------------------------------------------------------===//

TEST(HFConfig, TinyModelsLoadWithoutNoDropout) {
  for (const char *folder :
       {"gpt2-tiny", "llama-tiny", "mistral-tiny", "qwen2-tiny", "qwen3-tiny"}) {
    mlir::MLIRContext ctx;
    auto module = load(folder, ctx, /*noDropout=*/false);
    ASSERT_TRUE(module) << folder;
    nn::GraphOp graph = getGraph(*module);
    ASSERT_TRUE(graph);
    EXPECT_EQ(graph.getSymName().str(), folder);
    EXPECT_EQ(graph.getNumBlocks(), 2u);
    EXPECT_EQ(graph.getMaxSeqLen(), 128u);
    EXPECT_GT(summarize(graph).parameters, 0);
  }
}

TEST(HFConfig, TinyModelParameterCounts) {
  mlir::MLIRContext ctx;
  // gpt2-tiny: V=503, D=64, L=2, T=128, tied head.
  int64_t V = 503, D = 64, T = 128;
  int64_t gptBlock =
      2 * D + (D * 3 * D + 3 * D) + (D * D + D) + 2 * D + (D * 4 * D + 4 * D) + (4 * D * D + D);
  auto gpt = load("gpt2-tiny", ctx, false);
  ASSERT_TRUE(gpt);
  EXPECT_EQ(summarize(getGraph(*gpt)).parameters, V * D + T * D + 2 * gptBlock + 2 * D);
  // llama-tiny: V=503, D=64, I=176, 4 heads, 2 KV heads (head_dim 16), untied.
  int64_t I = 176, kv = 2 * 16;
  int64_t llamaBlock = D * D + 2 * kv * D + D * D + 3 * I * D + 2 * D;
  auto llama = load("llama-tiny", ctx, false);
  ASSERT_TRUE(llama);
  EXPECT_EQ(summarize(getGraph(*llama)).parameters, V * D + 2 * llamaBlock + D + V * D);
  // mixtral-tiny: llama-tiny's attention, 4 experts of I=96, a router [4, D].
  int64_t mixtralBlock = D * D + 2 * kv * D + D * D + 4 * D + 4 * 3 * 96 * D + 2 * D;
  auto mixtral = load("mixtral-tiny", ctx, false);
  ASSERT_TRUE(mixtral);
  ModelSummary ms = summarize(getGraph(*mixtral));
  EXPECT_EQ(ms.parameters, V * D + 2 * mixtralBlock + D + V * D);
  EXPECT_EQ(ms.parameters - ms.activeParameters, 2 * 2 * 3 * 96 * D); // 2 of 4 experts unused
  // qwen3_moe-tiny: head_dim 24 (q 96, kv 48 wide), q/k norms; layers 0
  // and 2 sparse (8 experts of 32), layer 1 dense (I=128).
  int64_t attn = 2 * 96 * D + 2 * 48 * D + 2 * 24 + 2 * D;
  auto qm = load("qwen3_moe-tiny", ctx, false);
  ASSERT_TRUE(qm);
  EXPECT_EQ(summarize(getGraph(*qm)).parameters,
            V * D + 2 * (attn + 8 * D + 8 * 3 * 32 * D) + (attn + 3 * 128 * D) + D + V * D);
}

TEST(HFConfig, GPT2HeadIsTiedToWte) {
  mlir::MLIRContext ctx;
  auto module = load("gpt2", ctx, /*noDropout=*/true);
  ASSERT_TRUE(module);
  nn::GraphOp graph = getGraph(*module);
  EXPECT_FALSE(findParam(graph, "lm_head.weight"));
  nn::ParamOp wte = findParam(graph, "transformer.wte.weight");
  ASSERT_TRUE(wte);
  EXPECT_EQ(shapeOf(wte), (std::vector<int64_t>{50257, 768}));

  // The lm_head linear reads wte directly.
  bool headUsesWte = false;
  for (mlir::Operation *user : wte.getResult().getUsers())
    if (auto lin = llvm::dyn_cast<nn::LinearOp>(user))
      if (lin.getModule() && *lin.getModule() == "lm_head") {
        headUsesWte = true;
        EXPECT_EQ(lin.getWeight(), wte.getResult());
        EXPECT_EQ(lin.getLayout(), nn::WeightLayout::out_in);
      }
  EXPECT_TRUE(headUsesWte);

  // The summary reports the sharing.
  ModelSummary s = summarize(graph);
  auto row =
      llvm::find_if(s.modules, [](const ModuleRow &r) { return r.module == "transformer.wte"; });
  ASSERT_NE(row, s.modules.end());
  EXPECT_NE(llvm::find(row->alsoUsedBy, "lm_head"), row->alsoUsedBy.end());
  EXPECT_EQ(llvm::find_if(s.modules, [](const ModuleRow &r) { return r.module == "lm_head"; }),
            s.modules.end());

  // Conv1D layout: c_attn is [in, out].
  nn::ParamOp cAttn = findParam(graph, "transformer.h.0.attn.c_attn.weight");
  ASSERT_TRUE(cAttn);
  EXPECT_EQ(shapeOf(cAttn), (std::vector<int64_t>{768, 2304}));
}

TEST(HFConfig, LlamaUntiedHasLmHead) {
  mlir::MLIRContext ctx;
  auto module = load("Llama-2-7b", ctx, false);
  ASSERT_TRUE(module);
  nn::GraphOp graph = getGraph(*module);
  nn::ParamOp head = findParam(graph, "lm_head.weight");
  ASSERT_TRUE(head);
  EXPECT_EQ(shapeOf(head), (std::vector<int64_t>{32000, 4096}));
  nn::ParamOp embed = findParam(graph, "model.embed_tokens.weight");
  ASSERT_TRUE(embed);
  for (mlir::Operation *user : embed.getResult().getUsers())
    EXPECT_FALSE(llvm::isa<nn::LinearOp>(user)) << "embed_tokens must not feed lm_head";
  // lm_head is the last parameter, as in the HF state dict.
  EXPECT_EQ(graph.getParams().back().getName().str(), "lm_head.weight");
}

TEST(HFConfig, Llama2_70bUsesGQA) {
  mlir::MLIRContext ctx;
  auto module = load("Llama-2-70b", ctx, false);
  ASSERT_TRUE(module);
  nn::GraphOp graph = getGraph(*module);
  nn::ParamOp k = findParam(graph, "model.layers.0.self_attn.k_proj.weight");
  ASSERT_TRUE(k);
  EXPECT_EQ(shapeOf(k), (std::vector<int64_t>{1024, 8192}));
  nn::ParamOp q = findParam(graph, "model.layers.79.self_attn.q_proj.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(shapeOf(q), (std::vector<int64_t>{8192, 8192}));
  int attention = 0;
  graph.walk([&](nn::CausalAttentionOp op) {
    ++attention;
    EXPECT_EQ(op.getNumHeads(), 64u);
    EXPECT_EQ(op.getNumKvHeads(), 8u);
  });
  EXPECT_EQ(attention, 80);
}

TEST(HFConfig, Llama31RopeCarriesLlama3Scaling) {
  mlir::MLIRContext ctx;
  auto module = load("Llama-3.1-405B", ctx, false);
  ASSERT_TRUE(module);
  int ropes = 0;
  getGraph(*module).walk([&](nn::RopeOp op) {
    ++ropes;
    EXPECT_EQ(op.getScaling(), "llama3");
    auto f = op->getAttrOfType<mlir::FloatAttr>("scaling_factor");
    ASSERT_TRUE(f);
    EXPECT_EQ(f.getValueAsDouble(), 8.0);
    auto lo = op->getAttrOfType<mlir::FloatAttr>("low_freq_factor");
    auto hi = op->getAttrOfType<mlir::FloatAttr>("high_freq_factor");
    auto orig = op->getAttrOfType<mlir::IntegerAttr>("original_max_position");
    ASSERT_TRUE(lo && hi && orig);
    EXPECT_FALSE(op->getAttr("beta_fast") || op->getAttr("attention_factor"));
    EXPECT_EQ(lo.getValueAsDouble(), 1.0);
    EXPECT_EQ(hi.getValueAsDouble(), 4.0);
    EXPECT_EQ(orig.getInt(), 8192);
    EXPECT_EQ(op.getTheta().convertToDouble(), 500000.0);
  });
  EXPECT_EQ(ropes, 2 * 126); // q and k in each block
}

TEST(HFConfig, Llama2RopeHasNoScaling) {
  mlir::MLIRContext ctx;
  auto module = load("Llama-2-7b", ctx, false);
  ASSERT_TRUE(module);
  int ropes = 0;
  getGraph(*module).walk([&](nn::RopeOp op) {
    ++ropes;
    EXPECT_FALSE(op->getAttr("scaling") || op->getAttr("scaling_factor"));
  });
  EXPECT_EQ(ropes, 64);
}

//===----------------------------------------------------------------------===//
// Errors, from inline config text
//===----------------------------------------------------------------------===//

struct Parsed {
  std::optional<ModelConfig> config;
  ImportError error;
};

Parsed parse(const std::string &text, bool noDropout = false) {
  Parsed p;
  ImportOptions opts;
  opts.noDropout = noDropout;
  p.config = parseHFConfig(text, "test/config.json", opts, p.error);
  return p;
}

#define EXPECT_IMPORT_ERROR(parsed, LINE, COL, ...)                                                \
  do {                                                                                             \
    EXPECT_FALSE((parsed).config);                                                                 \
    EXPECT_EQ((parsed).error.file, "test/config.json");                                            \
    EXPECT_EQ((parsed).error.line, (LINE)) << (parsed).error.str();                                \
    EXPECT_EQ((parsed).error.col, (COL)) << (parsed).error.str();                                  \
    for (const char *needle : {__VA_ARGS__})                                                       \
      EXPECT_NE((parsed).error.message.find(needle), std::string::npos)                            \
          << "'" << needle << "' not in: " << (parsed).error.str();                                \
  } while (0)

// Line 4 carries the variable part of these GPT-2 configs.
std::string gpt2Config(const std::string &line4,
                       const std::string &nLayer = "  \"n_layer\": 2,\n") {
  return "{\n"
         "  \"model_type\": \"gpt2\",\n"
         "  \"vocab_size\": 100,\n" +
         line4 + "\n" + nLayer +
         "  \"n_head\": 12,\n"
         "  \"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0\n"
         "}\n";
}

// Line 3 carries the variable part of these LLaMA configs.
std::string llamaConfig(const std::string &line3) {
  return "{\n"
         "  \"model_type\": \"llama\",\n" +
         line3 + "\n" +
         "  \"vocab_size\": 100,\n"
         "  \"hidden_size\": 64,\n"
         "  \"intermediate_size\": 128,\n"
         "  \"num_hidden_layers\": 2,\n"
         "  \"num_attention_heads\": 8\n"
         "}\n";
}

TEST(HFConfigErrors, ValidInlineConfigs) {
  auto g = parse(gpt2Config("  \"n_embd\": 768,"));
  ASSERT_TRUE(g.config) << g.error.str();
  EXPECT_EQ(g.config->modelType, "gpt2");
  EXPECT_EQ(g.config->name, "test"); // the folder of config.json
  EXPECT_EQ(g.config->headDim, 64);
  EXPECT_EQ(g.config->intermediateSize, 4 * 768);
  EXPECT_EQ(g.config->maxSeqLen, 1024); // transformers' default
  EXPECT_TRUE(g.config->tieWordEmbeddings);

  auto l = parse(llamaConfig("  \"num_key_value_heads\": 2,"));
  ASSERT_TRUE(l.config) << l.error.str();
  EXPECT_EQ(l.config->modelType, "llama");
  EXPECT_EQ(l.config->numKvHeads, 2);
  EXPECT_EQ(l.config->headDim, 8);
  EXPECT_FALSE(l.config->tieWordEmbeddings);
  EXPECT_FALSE(l.config->ropeScaling);
}

TEST(HFConfigErrors, UnknownModelType) {
  auto p = parse("{\n  \"vocab_size\": 10,\n  \"model_type\": \"t5\"\n}\n");
  EXPECT_IMPORT_ERROR(p, 3u, 17u, "unknown model_type 't5'",
                      "gpt2, llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, bert, vit");
  EXPECT_EQ(supportedModelTypes().str(),
            "gpt2, llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, bert, vit");
}

TEST(HFConfigErrors, MissingModelType) {
  auto p = parse("{\n  \"n_embd\": 10\n}\n");
  EXPECT_IMPORT_ERROR(p, 1u, 1u, "missing key 'model_type'");
}

TEST(HFConfigErrors, NotAnObject) {
  auto p = parse("\n  [1, 2]\n");
  EXPECT_IMPORT_ERROR(p, 2u, 3u, "must be a JSON object");
}

TEST(HFConfigErrors, DropoutUnlessNoDropout) {
  std::string text = "{\n"
                     "  \"model_type\": \"gpt2\",\n"
                     "  \"vocab_size\": 100, \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 4,\n"
                     "  \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0,\n"
                     "  \"resid_pdrop\": 0.1\n"
                     "}\n";
  auto p = parse(text);
  EXPECT_IMPORT_ERROR(p, 5u, 18u, "resid_pdrop = 0.1", "dropout is not supported", "--no-dropout");
  auto ok = parse(text, /*noDropout=*/true);
  EXPECT_TRUE(ok.config) << ok.error.str();
}

TEST(HFConfigErrors, AbsentDropoutUsesTransformersDefault) {
  // GPT-2's dropout defaults to 0.1 in transformers; an absent key is not zero.
  auto p = parse("{\n  \"model_type\": \"gpt2\",\n"
                 "  \"vocab_size\": 100, \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 4\n}\n");
  EXPECT_IMPORT_ERROR(p, 1u, 1u, "resid_pdrop", "absent");
}

TEST(HFConfigErrors, EmbdNotDivisibleByHeads) {
  auto p = parse(gpt2Config("  \"n_embd\": 100,"));
  EXPECT_IMPORT_ERROR(p, 4u, 13u, "n_embd = 100", "not divisible by n_head = 12");
}

TEST(HFConfigErrors, MissingKey) {
  auto p = parse(gpt2Config("  \"n_embd\": 768,", ""));
  EXPECT_IMPORT_ERROR(p, 1u, 1u, "missing key 'n_layer'");
}

TEST(HFConfigErrors, WrongType) {
  auto p = parse(gpt2Config("  \"n_embd\": \"768\","));
  EXPECT_IMPORT_ERROR(p, 4u, 13u, "n_embd must be an integer", "\"768\" (string)");
}

TEST(HFConfigErrors, NonPositiveInteger) {
  auto p = parse(gpt2Config("  \"n_embd\": 0,"));
  EXPECT_IMPORT_ERROR(p, 4u, 13u, "n_embd must be at least 1");
}

// Found by fuzzing (tests/fuzz/planner/hf-config): sizes whose graph would
// not end building, or whose element counts overflowed 64 bits and came out
// negative, are refused at the key.
TEST(HFConfigErrors, TooManyLayers) {
  auto p = parse(gpt2Config("  \"n_embd\": 768,", "  \"n_layer\": 100000000,\n"));
  EXPECT_IMPORT_ERROR(p, 5u, 14u, "n_layer = 100000000 is more than fsdp plans (at most 10000");
  auto l = parse(gpt2Config("  \"n_embd\": 768,", "  \"n_layer\": 10000,\n"));
  EXPECT_TRUE(l.config) << l.error.str();
}

// A LLaMA has no position table to bound its context: max_position_embeddings
// of 1.28e11 planned at its full length kept the cost model walking
// attention's query tiles for hours (found by the mlir-model fuzzer; the
// walk is bounded now, the limit keeps every size in 64 bits).
TEST(HFConfigErrors, TooLongSequences) {
  auto l = parse(llamaConfig("  \"max_position_embeddings\": 128000000000,"));
  EXPECT_IMPORT_ERROR(l, 3u, 30u,
                      "max_position_embeddings = 128000000000 is more than fsdp plans (at most "
                      "1073741824 tokens)");
  auto ok = parse(llamaConfig("  \"max_position_embeddings\": 1073741824,"));
  EXPECT_TRUE(ok.config) << ok.error.str();
}

// nlohmann throws out_of_range, not parse_error, for a number past a double
// (found by the hf-config fuzzer: it escaped and aborted fsdp-plan).
TEST(HFConfigErrors, NumberOutOfRange) {
  auto p = parse(gpt2Config("  \"n_embd\": 1e405,"));
  EXPECT_IMPORT_ERROR(p, 4u, 13u, "malformed JSON: the number 1e405 is out of range");
  auto q = parse(gpt2Config("  \"name\": \"1e405\", \"n_embd\": -1e405,"));
  EXPECT_IMPORT_ERROR(q, 4u, 30u, "the number -1e405 is out of range");
}

TEST(HFConfigErrors, TooManyParameters) {
  auto p = parse(gpt2Config("  \"n_embd\": 13194139533312,"));
  EXPECT_IMPORT_ERROR(p, 4u, 13u, "parameters, more than fsdp plans (at most 2^48",
                      "n_embd is 13194139533312");
  // 4 n_embd, the default n_inner, overflowed before anything was checked.
  auto q = parse(gpt2Config("  \"n_embd\": 6917529027641081856,"));
  EXPECT_IMPORT_ERROR(q, 4u, 13u, "n_embd is 6917529027641081856");
  auto v = parse("{\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": 9223372036854775807,\n"
                 "  \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4,\n"
                 "  \"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0\n}\n");
  EXPECT_IMPORT_ERROR(v, 3u, 17u, "vocab_size is 9223372036854775807");
  // num_attention_heads x head_dim overflowed the attention's width.
  auto l = parse(llamaConfig("  \"head_dim\": 4611686018427387904,"));
  EXPECT_IMPORT_ERROR(l, 3u, 15u, "head_dim is 4611686018427387904");
}

TEST(HFConfigErrors, MalformedJSON) {
  // The second comma on line 4 is the error.
  auto p = parse(gpt2Config("  \"n_embd\": 768,,"));
  EXPECT_IMPORT_ERROR(p, 4u, 17u, "malformed JSON");
  // The message keeps nlohmann's explanation but not its own position.
  EXPECT_EQ(p.error.message.find("[json.exception"), std::string::npos) << p.error.message;
  EXPECT_NE(p.error.message.find("syntax error"), std::string::npos) << p.error.message;
}

TEST(HFConfigErrors, TruncatedJSON) {
  auto p = parse("{\n  \"model_type\": \"gpt2\",\n  \"n_embd\": ");
  EXPECT_FALSE(p.config);
  EXPECT_EQ(p.error.line, 3u) << p.error.str();
  EXPECT_NE(p.error.message.find("malformed JSON"), std::string::npos);
}

TEST(HFConfigErrors, HeadsNotMultipleOfKvHeads) {
  auto p = parse(llamaConfig("  \"num_key_value_heads\": 3,"));
  EXPECT_IMPORT_ERROR(p, 3u, 26u, "num_attention_heads = 8",
                      "not a multiple of num_key_value_heads = 3");
}

TEST(HFConfigErrors, RopeScalingUnknownType) {
  auto p = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"longrope\", \"factor\": 2.0},"));
  EXPECT_IMPORT_ERROR(p, 3u, 28u, "rope_scaling type 'longrope'",
                      "supported: default, linear, dynamic, yarn, llama3");
  auto q = parse(llamaConfig("  \"rope_scaling\": {\"factor\": 2.0, \"rope_type\": \"ntk\"},"));
  EXPECT_IMPORT_ERROR(q, 3u, 48u, "rope_scaling type 'ntk'");
}

TEST(HFConfigErrors, RopeScalingLlama3) {
  auto ok = parse(llamaConfig("  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                              "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                              "\"original_max_position_embeddings\": 8192},"));
  ASSERT_TRUE(ok.config) << ok.error.str();
  ASSERT_TRUE(ok.config->ropeScaling);
  EXPECT_EQ(ok.config->ropeScaling->kind, support::RopeScalingKind::Llama3);
  EXPECT_EQ(ok.config->ropeScaling->factor, 8.0);
  EXPECT_EQ(ok.config->ropeScaling->originalMaxPosition, 8192);

  auto null = parse(llamaConfig("  \"rope_scaling\": null,"));
  ASSERT_TRUE(null.config) << null.error.str();
  EXPECT_FALSE(null.config->ropeScaling);

  // A missing field is reported at the rope_scaling object.
  auto missing =
      parse(llamaConfig("  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0},"));
  EXPECT_IMPORT_ERROR(missing, 3u, 19u, "missing key 'rope_scaling.low_freq_factor'");
  auto bands = parse(llamaConfig(
      "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, "
      "\"high_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192},"));
  EXPECT_IMPORT_ERROR(bands, 3u, 19u, "0 < low_freq_factor < high_freq_factor");
}

TEST(HFConfigErrors, RopeScalingLinearAndDynamic) {
  auto linear = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0},"));
  ASSERT_TRUE(linear.config) << linear.error.str();
  ASSERT_TRUE(linear.config->ropeScaling);
  EXPECT_EQ(linear.config->ropeScaling->kind, support::RopeScalingKind::Linear);
  EXPECT_EQ(linear.config->ropeScaling->factor, 2.0);

  // Dynamic NTK's frequencies are those at max_position_embeddings (2048,
  // transformers' default here), the longest sequence fsdp plans; the
  // original_max_position_embeddings transformers accepts is unused there.
  auto dynamic = parse(llamaConfig("  \"rope_scaling\": {\"factor\": 2.0, \"rope_type\": "
                                   "\"dynamic\", \"original_max_position_embeddings\": 4096},"));
  ASSERT_TRUE(dynamic.config) << dynamic.error.str();
  ASSERT_TRUE(dynamic.config->ropeScaling);
  EXPECT_EQ(dynamic.config->ropeScaling->kind, support::RopeScalingKind::Dynamic);
  EXPECT_EQ(dynamic.config->ropeScaling->factor, 2.0);
  EXPECT_EQ(dynamic.config->ropeScaling->originalMaxPosition, 2048);
  EXPECT_EQ(dynamic.config->maxSeqLen, 2048);

  // "default" is no scaling, and takes no parameter.
  auto none = parse(llamaConfig("  \"rope_scaling\": {\"rope_type\": \"default\"},"));
  ASSERT_TRUE(none.config) << none.error.str();
  EXPECT_FALSE(none.config->ropeScaling);
  auto defaultFactor =
      parse(llamaConfig("  \"rope_scaling\": {\"rope_type\": \"default\", \"factor\": 2.0},"));
  EXPECT_IMPORT_ERROR(defaultFactor, 3u, 54u,
                      "rope_scaling.factor is not a parameter of "
                      "rope_type 'default' (it has none)");
}

TEST(HFConfigErrors, RopeScalingYarn) {
  // Qwen2.5's model card: {"factor": 4.0, "original_max_position_embeddings":
  // 32768, "type": "yarn"}. The attention factor is 0.1 ln 4 + 1 (the double
  // transformers computes, printed by Python: 1.138629436111989), the
  // betas 32 and 1, truncated.
  auto qwen =
      parse(llamaConfig("  \"rope_scaling\": {\"factor\": 4.0, "
                        "\"original_max_position_embeddings\": 32768, \"type\": \"yarn\"},"));
  ASSERT_TRUE(qwen.config) << qwen.error.str();
  ASSERT_TRUE(qwen.config->ropeScaling);
  const support::RopeScaling &q = *qwen.config->ropeScaling;
  EXPECT_EQ(q.kind, support::RopeScalingKind::Yarn);
  EXPECT_EQ(q.factor, 4.0);
  EXPECT_EQ(q.originalMaxPosition, 32768);
  EXPECT_EQ(q.betaFast, 32.0);
  EXPECT_EQ(q.betaSlow, 1.0);
  EXPECT_TRUE(q.truncate);
  EXPECT_EQ(q.attentionFactor, 1.138629436111989);

  // mscale and mscale_all_dim both given: their ratio (Python:
  // 1.094179988101349); the betas given; 0 or null take the default
  // (transformers' `x or default`); original_max_position_embeddings absent:
  // max_position_embeddings.
  auto mscale = parse(llamaConfig(
      "  \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 8.0, \"beta_fast\": 8, "
      "\"beta_slow\": 0.5, \"truncate\": false, \"mscale\": 1.0, \"mscale_all_dim\": 0.5},"));
  ASSERT_TRUE(mscale.config) << mscale.error.str();
  const support::RopeScaling &m = *mscale.config->ropeScaling;
  EXPECT_EQ(m.attentionFactor, 1.094179988101349);
  EXPECT_EQ(m.betaFast, 8.0);
  EXPECT_EQ(m.betaSlow, 0.5);
  EXPECT_FALSE(m.truncate);
  EXPECT_EQ(m.originalMaxPosition, 2048);
  auto defaults = parse(llamaConfig(
      "  \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 8.0, \"beta_fast\": 0, "
      "\"beta_slow\": null, \"mscale\": 0.707, \"original_max_position_embeddings\": null},"));
  ASSERT_TRUE(defaults.config) << defaults.error.str();
  const support::RopeScaling &d = *defaults.config->ropeScaling;
  EXPECT_EQ(d.betaFast, 32.0);
  EXPECT_EQ(d.betaSlow, 1.0);
  EXPECT_EQ(d.originalMaxPosition, 2048);
  EXPECT_EQ(d.attentionFactor, 0.1 * std::log(8.0) + 1.0); // mscale alone is unused
  auto given =
      parse(llamaConfig("  \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 8.0, "
                        "\"attention_factor\": 0.75, \"mscale\": 1, \"mscale_all_dim\": 1},"));
  ASSERT_TRUE(given.config) << given.error.str();
  EXPECT_EQ(given.config->ropeScaling->attentionFactor, 0.75);
}

TEST(HFConfigErrors, RopeScalingRefusals) {
  // A key the rope_type does not read, at the key: transformers would warn
  // and ignore it.
  auto unread = parse(llamaConfig(
      "  \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0, \"beta_fast\": 32},"));
  EXPECT_IMPORT_ERROR(unread, 3u, 66u,
                      "rope_scaling.beta_fast is not a parameter of rope_type "
                      "'linear' (its: factor)");
  auto typo = parse(
      llamaConfig("  \"rope_scaling\": {\"type\": \"yarn\", \"factr\": 2.0, \"factor\": 2.0},"));
  EXPECT_IMPORT_ERROR(typo, 3u, 45u, "rope_scaling.factr is not a parameter of rope_type 'yarn'");
  auto differ = parse(llamaConfig(
      "  \"rope_scaling\": {\"type\": \"yarn\", \"rope_type\": \"linear\", \"factor\": 2.0},"));
  EXPECT_IMPORT_ERROR(differ, 3u, 28u, "type 'yarn' and rope_type 'linear' differ");
  auto kindless = parse(llamaConfig("  \"rope_scaling\": {\"factor\": 2.0},"));
  EXPECT_IMPORT_ERROR(kindless, 3u, 19u, "rope_scaling needs its rope_type (or type)");
  auto noFactor = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"linear\"},"));
  EXPECT_IMPORT_ERROR(noFactor, 3u, 19u, "missing key 'rope_scaling.factor'");
  auto zero = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 0},"));
  EXPECT_IMPORT_ERROR(zero, 3u, 49u, "rope_scaling.factor must be positive");
  auto text = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"yarn\", \"factor\": \"4\"},"));
  EXPECT_IMPORT_ERROR(text, 3u, 46u, "rope_scaling.factor must be a number");
  auto betas = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                                 "\"beta_fast\": 1, \"beta_slow\": 2},"));
  EXPECT_IMPORT_ERROR(betas, 3u, 19u, "0 < beta_slow <= beta_fast");
  auto attention = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                                     "\"attention_factor\": -1},"));
  EXPECT_IMPORT_ERROR(attention, 3u, 71u, "attention_factor must be positive");
  auto truncate = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                                    "\"truncate\": \"no\"},"));
  EXPECT_IMPORT_ERROR(truncate, 3u, 63u, "rope_scaling.truncate must be true or false");
  auto original = parse(llamaConfig("  \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                                    "\"original_max_position_embeddings\": 2.5},"));
  EXPECT_IMPORT_ERROR(original, 3u, 87u, "must be an integer");
  auto theta = parse(llamaConfig("  \"rope_theta\": 1, \"rope_scaling\": {\"type\": \"yarn\", "
                                 "\"factor\": 4.0},"));
  EXPECT_IMPORT_ERROR(theta, 3u, 17u, "yarn rope scaling needs rope_theta other than 1");
  auto notObject = parse(llamaConfig("  \"rope_scaling\": \"yarn\","));
  EXPECT_IMPORT_ERROR(notObject, 3u, 19u, "rope_scaling must be an object or null");
  // dim / (dim - 2): a head of 2 is refused (transformers divides by zero).
  auto tinyHead = parse(llamaConfig("  \"head_dim\": 2, \"rope_scaling\": {\"type\": \"dynamic\", "
                                    "\"factor\": 2.0},"));
  EXPECT_IMPORT_ERROR(tinyHead, 3u, 43u, "dynamic rope scaling needs a head dimension above 2");
}

// A yarn config's graph carries the resolved parameters, and its gradient
// rope the same ones.
TEST(HFConfig, YarnRopeCarriesItsParameters) {
  mlir::MLIRContext ctx;
  ImportError err;
  auto module = importHFConfig(
      llamaConfig("  \"rope_scaling\": {\"factor\": 4.0, \"original_max_position_embeddings\": "
                  "32768, \"type\": \"yarn\"},"),
      "qwen/config.json", &ctx, ImportOptions(), err);
  ASSERT_TRUE(module) << err.str();
  int ropes = 0;
  getGraph(*module).walk([&](nn::RopeOp op) {
    ++ropes;
    EXPECT_EQ(op.getScaling(), "yarn");
    EXPECT_EQ(op.getScalingFactor()->convertToDouble(), 4.0);
    EXPECT_EQ(op.getOriginalMaxPosition(), 32768u);
    EXPECT_EQ(op.getBetaFast()->convertToDouble(), 32.0);
    EXPECT_EQ(op.getBetaSlow()->convertToDouble(), 1.0);
    EXPECT_EQ(op.getTruncate(), true);
    EXPECT_EQ(op.getAttentionFactor()->convertToDouble(), 1.138629436111989);
    EXPECT_FALSE(op->getAttr("low_freq_factor"));
  });
  EXPECT_EQ(ropes, 4);
}

TEST(HFConfigErrors, HiddenActNotSilu) {
  auto p = parse(llamaConfig("  \"hidden_act\": \"gelu\","));
  EXPECT_IMPORT_ERROR(p, 3u, 17u, "hidden_act 'gelu'", "silu");
}

TEST(HFConfigErrors, LlamaTiedHasNoLmHead) {
  std::string text = llamaConfig("  \"tie_word_embeddings\": true,");
  auto p = parse(text);
  ASSERT_TRUE(p.config) << p.error.str();
  EXPECT_TRUE(p.config->tieWordEmbeddings);

  mlir::MLIRContext ctx;
  ImportError err;
  auto module = importHFConfig(text, "tied/config.json", &ctx, ImportOptions(), err);
  ASSERT_TRUE(module) << err.str();
  nn::GraphOp graph = getGraph(*module);
  EXPECT_EQ(graph.getSymName().str(), "tied");
  EXPECT_FALSE(findParam(graph, "lm_head.weight"));
  nn::ParamOp embed = findParam(graph, "model.embed_tokens.weight");
  ASSERT_TRUE(embed);
  bool headUsesEmbed = false;
  for (mlir::Operation *user : embed.getResult().getUsers())
    if (auto lin = llvm::dyn_cast<nn::LinearOp>(user))
      headUsesEmbed |= lin.getModule() && *lin.getModule() == "lm_head";
  EXPECT_TRUE(headUsesEmbed);
  // V*D + blocks + norm, and no separate head.
  int64_t D = 64, I = 128, V = 100;
  EXPECT_EQ(summarize(graph).parameters, V * D + 2 * (4 * D * D + 3 * I * D + 2 * D) + D);
}

//===----------------------------------------------------------------------===//
// Strict import and the LLaMA variants (issue 18)
//===----------------------------------------------------------------------===//

// A key no family implements changes the model: refused at its value.
TEST(HFConfigErrors, UnimplementedKeyIsRefused) {
  auto p = parse(llamaConfig("  \"num_local_experts\": 8,"));
  EXPECT_IMPORT_ERROR(p, 3u, 24u, "'num_local_experts' is not implemented for model_type 'llama'");
  // Keys that only describe are accepted.
  auto ok =
      parse(llamaConfig("  \"torch_dtype\": \"bfloat16\", \"bos_token_id\": 1, "
                        "\"eos_token_id\": 2, \"pad_token_id\": null, \"use_cache\": true, "
                        "\"transformers_version\": \"4.51.0\", \"initializer_range\": 0.02,"));
  EXPECT_TRUE(ok.config) << ok.error.str();
  // Another family's key is not this family's: sliding_window is mistral's.
  auto w = parse(llamaConfig("  \"sliding_window\": 4096,"));
  EXPECT_IMPORT_ERROR(w, 3u, 21u, "'sliding_window' is not implemented for model_type 'llama'");
  auto g = parse(gpt2Config("  \"n_embd\": 64, \"rotary_dim\": 16,"));
  EXPECT_IMPORT_ERROR(g, 4u, 31u, "'rotary_dim' is not implemented for model_type 'gpt2'");
}

// Qwen2-7B relabelled llama used to plan without its q/k/v biases.
TEST(HFConfigErrors, Qwen2RelabelledLlamaIsRefused) {
  std::ifstream in(modelPath("Qwen2-7B"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = text.find("\"qwen2\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "\"llama\"");
  auto p = parse(text);
  // max_window_layers (line 13) is the first key llama does not implement.
  EXPECT_IMPORT_ERROR(p, 13u, 24u, "'max_window_layers' is not implemented for model_type 'llama'");
}

TEST(HFConfigErrors, QwenSlidingWindowAndBias) {
  std::string qwen2 = "{\n  \"model_type\": \"qwen2\",\n"
                      "  \"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 128,\n"
                      "  \"num_hidden_layers\": 2, \"num_attention_heads\": 8,\n";
  auto on = parse(qwen2 + "  \"use_sliding_window\": true\n}\n");
  EXPECT_IMPORT_ERROR(on, 5u, 25u, "use_sliding_window = true is not supported");
  auto off = parse(qwen2 + "  \"use_sliding_window\": false, \"sliding_window\": 4\n}\n");
  ASSERT_TRUE(off.config) << off.error.str();
  EXPECT_TRUE(off.config->qkvBias);
  EXPECT_EQ(off.config->slidingWindow, 0); // ignored: full causal
  // qwen2 has no attention_bias key (its biases are fixed): refused.
  auto bias = parse(qwen2 + "  \"attention_bias\": false\n}\n");
  EXPECT_IMPORT_ERROR(bias, 5u, 21u, "'attention_bias' is not implemented for model_type 'qwen2'");

  std::string qwen3 = "{\n  \"model_type\": \"qwen3\",\n"
                      "  \"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 128,\n"
                      "  \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"head_dim\": 16,\n";
  auto b3 = parse(qwen3 + "  \"attention_bias\": true\n}\n");
  EXPECT_IMPORT_ERROR(b3, 5u, 21u, "attention_bias = true is not supported");
  auto ok3 = parse(qwen3 + "  \"attention_bias\": false\n}\n");
  ASSERT_TRUE(ok3.config) << ok3.error.str();
  EXPECT_TRUE(ok3.config->qkNorm);
  EXPECT_EQ(ok3.config->headDim, 16);
}

TEST(HFConfig, FamiliesGraphs) {
  mlir::MLIRContext ctx;
  // qwen2: biases on q, k, v (not o), after their weights.
  auto q2 = load("qwen2-tiny", ctx, false);
  ASSERT_TRUE(q2);
  nn::GraphOp g2 = getGraph(*q2);
  EXPECT_EQ(shapeOf(findParam(g2, "model.layers.0.self_attn.q_proj.bias")),
            (std::vector<int64_t>{64}));
  EXPECT_EQ(shapeOf(findParam(g2, "model.layers.1.self_attn.k_proj.bias")),
            (std::vector<int64_t>{32}));
  EXPECT_TRUE(findParam(g2, "model.layers.1.self_attn.v_proj.bias"));
  EXPECT_FALSE(findParam(g2, "model.layers.0.self_attn.o_proj.bias"));
  // qwen3: head_dim 24 with hidden 64 and 4 heads; q_norm/k_norm [head_dim].
  auto q3 = load("qwen3-tiny", ctx, false);
  ASSERT_TRUE(q3);
  nn::GraphOp g3 = getGraph(*q3);
  EXPECT_EQ(shapeOf(findParam(g3, "model.layers.0.self_attn.q_proj.weight")),
            (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(shapeOf(findParam(g3, "model.layers.0.self_attn.q_norm.weight")),
            (std::vector<int64_t>{24}));
  EXPECT_EQ(shapeOf(findParam(g3, "model.layers.1.self_attn.k_norm.weight")),
            (std::vector<int64_t>{24}));
  int norms = 0;
  g3.walk([&](nn::RMSNormOp n) { norms += n.getModule() && n.getModule()->ends_with("_norm"); });
  EXPECT_EQ(norms, 4);
  // mistral: the window on every attention.
  auto m = load("mistral-tiny", ctx, false);
  ASSERT_TRUE(m);
  int windows = 0;
  getGraph(*m).walk([&](nn::CausalAttentionOp a) { windows += a.getWindow() == 16u; });
  EXPECT_EQ(windows, 2);
  // Mistral-7B-v0.1: 4096; null: full causal; absent: transformers' 4096.
  auto mistral = [](const std::string &line3) {
    return parse("{\n  \"model_type\": \"mistral\",\n" + line3 +
                 "\n  \"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 128,\n"
                 "  \"num_hidden_layers\": 2, \"num_attention_heads\": 8\n}\n");
  };
  EXPECT_EQ(mistral("  \"sliding_window\": null,").config->slidingWindow, 0);
  EXPECT_EQ(mistral("").config->slidingWindow, 4096);
  auto zero = mistral("  \"sliding_window\": 0,");
  EXPECT_IMPORT_ERROR(zero, 3u, 21u, "sliding_window must be at least 1");
}

TEST(HFConfigErrors, ImportErrorStr) {
  ImportError e;
  e.file = "a.json";
  e.line = 3;
  e.col = 7;
  e.message = "bad";
  EXPECT_EQ(e.str(), "a.json:3:7: error: bad");
  e.line = e.col = 0;
  EXPECT_EQ(e.str(), "a.json: error: bad");
}

TEST(HFConfigErrors, LoadModelMissingFile) {
  mlir::MLIRContext ctx;
  ImportError err;
  auto module = loadModel(std::string(FSDP_SOURCE_DIR) + "/models/no-such-model/config.json", &ctx,
                          ImportOptions(), err);
  EXPECT_FALSE(module);
  EXPECT_EQ(err.line, 0u);
  EXPECT_NE(err.message.find("cannot read"), std::string::npos) << err.str();
}

} // namespace

//===----------------------------------------------------------------------===//
// Encoders: BERT (masked LM) and ViT (image classification)
//===----------------------------------------------------------------------===//

namespace {
// Line 3 carries the variable part of these encoder configs.
std::string encoderConfig(const std::string &type, const std::string &line3) {
  std::string rest = type == "bert" ? "  \"vocab_size\": 100, \"hidden_dropout_prob\": 0.0,\n"
                                      "  \"attention_probs_dropout_prob\": 0.0,\n"
                                    : "  \"image_size\": 8, \"patch_size\": 4,\n";
  return "{\n  \"model_type\": \"" + type + "\",\n" + line3 + "\n" + rest +
         "  \"hidden_size\": 32, \"intermediate_size\": 64,\n"
         "  \"num_hidden_layers\": 2, \"num_attention_heads\": 4\n}\n";
}
} // namespace

TEST(HFConfig, EncoderGraphs) {
  mlir::MLIRContext ctx;
  auto bert = load("bert-tiny", ctx, false);
  ASSERT_TRUE(bert);
  nn::GraphOp b = getGraph(*bert);
  EXPECT_EQ(b.getInputsKind(), "masked_tokens");
  EXPECT_FALSE(b.getImageAttr());
  EXPECT_EQ(b.getBlockPrefix(), "bert.encoder.layer");
  EXPECT_EQ(shapeOf(findParam(b, "bert.embeddings.token_type_embeddings.weight")),
            (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(shapeOf(findParam(b, "cls.predictions.bias")), (std::vector<int64_t>{503}));
  EXPECT_FALSE(findParam(b, "cls.predictions.decoder.weight")); // tied
  EXPECT_FALSE(findParam(b, "bert.pooler.dense.weight"));
  int exact = 0, bidirectional = 0, causal = 0;
  b.walk([&](nn::GeluOp g) { exact += g.getApproximate() == "none"; });
  b.walk([&](nn::AttentionOp) { ++bidirectional; });
  b.walk([&](nn::CausalAttentionOp) { ++causal; });
  EXPECT_EQ(exact, 3); // two blocks and the head's transform
  EXPECT_EQ(bidirectional, 2);
  EXPECT_EQ(causal, 0);
  // The decoder reads the word embeddings, with cls.predictions.bias.
  int decoders = 0;
  b.walk([&](nn::LinearOp l) {
    if (l.getModule() == "cls.predictions.decoder") {
      ++decoders;
      EXPECT_EQ(l.getWeight().getDefiningOp<nn::ParamOp>().getName(),
                "bert.embeddings.word_embeddings.weight");
      EXPECT_EQ(l.getBias().getDefiningOp<nn::ParamOp>().getName(), "cls.predictions.bias");
    }
  });
  EXPECT_EQ(decoders, 1);

  auto vit = load("vit-tiny", ctx, false);
  ASSERT_TRUE(vit);
  nn::GraphOp v = getGraph(*vit);
  EXPECT_EQ(v.getInputsKind(), "images");
  EXPECT_EQ(v.getMaxSeqLen(), 17u); // 16 patches and the class token
  auto patches = mlir::cast<mlir::RankedTensorType>(v.getFunctionType().getInput(0));
  EXPECT_EQ(patches.getShape(), (llvm::ArrayRef<int64_t>{mlir::ShapedType::kDynamic, 16, 48}));
  EXPECT_TRUE(patches.getElementType().isF32());
  auto labels = mlir::cast<mlir::RankedTensorType>(v.getFunctionType().getInput(1));
  EXPECT_EQ(labels.getShape(), (llvm::ArrayRef<int64_t>{mlir::ShapedType::kDynamic, 1}));
  EXPECT_EQ(shapeOf(findParam(v, "vit.embeddings.patch_embeddings.projection.weight")),
            (std::vector<int64_t>{64, 3, 4, 4}));
  EXPECT_EQ(shapeOf(findParam(v, "vit.embeddings.position_embeddings")),
            (std::vector<int64_t>{1, 17, 64}));
  EXPECT_EQ(shapeOf(findParam(v, "classifier.weight")), (std::vector<int64_t>{10, 64}));
  support::InputKind kind;
  support::ImageSpec image;
  ASSERT_EQ(nn::readInputs(v.getInputsKindAttr(), v.getImageAttr(), &kind, &image), "");
  EXPECT_EQ(kind, support::InputKind::Images);
  EXPECT_EQ(image.height, 16);
  EXPECT_EQ(image.patchWidth, 4);
  EXPECT_EQ(image.channels, 3);
  // Pre-LN: the block's first op reads the residual through layernorm_before.
  int firstTokens = 0;
  v.walk([&](nn::FirstTokenOp) { ++firstTokens; });
  EXPECT_EQ(firstTokens, 1);
}

TEST(HFConfig, ViTClassesAndSizes) {
  // id2label gives the classes where present; else num_labels (default 2).
  auto labels = parse(encoderConfig("vit", "  \"id2label\": {\"0\": \"a\", \"1\": \"b\", "
                                           "\"2\": \"c\"}, \"num_labels\": 7,"));
  ASSERT_TRUE(labels.config) << labels.error.str();
  EXPECT_EQ(labels.config->image.classes, 3);
  auto n = parse(encoderConfig("vit", "  \"num_labels\": 7,"));
  ASSERT_TRUE(n.config) << n.error.str();
  EXPECT_EQ(n.config->image.classes, 7);
  auto dflt = parse(encoderConfig("vit", ""));
  ASSERT_TRUE(dflt.config) << dflt.error.str();
  EXPECT_EQ(dflt.config->image.classes, 2);
  EXPECT_EQ(dflt.config->maxSeqLen, 5); // (8/4)^2 patches and the class token
  // [h, w] sizes.
  std::string text = "{\n  \"model_type\": \"vit\", \"image_size\": [8, 12],\n"
                     "  \"patch_size\": [4, 2], \"num_channels\": 1,\n"
                     "  \"hidden_size\": 32, \"intermediate_size\": 64,\n"
                     "  \"num_hidden_layers\": 2, \"num_attention_heads\": 4\n}\n";
  auto r = parse(text);
  ASSERT_TRUE(r.config) << r.error.str();
  EXPECT_EQ(r.config->image.patches(), 2 * 6);
  EXPECT_EQ(r.config->image.patchValues(), 8);
}

TEST(HFConfigErrors, EncoderRefusals) {
  EXPECT_IMPORT_ERROR(parse(encoderConfig("bert", "  \"hidden_act\": \"gelu_new\",")), 3u, 17u,
                      "hidden_act 'gelu_new' is not supported");
  EXPECT_IMPORT_ERROR(parse(encoderConfig("vit", "  \"hidden_act\": \"relu\",")), 3u, 17u,
                      "hidden_act 'relu' is not supported");
  EXPECT_IMPORT_ERROR(
      parse(encoderConfig("bert", "  \"position_embedding_type\": \"relative_key\",")), 3u, 30u,
      "position_embedding_type 'relative_key' is not supported");
  EXPECT_IMPORT_ERROR(parse(encoderConfig("bert", "  \"is_decoder\": true,")), 3u, 17u,
                      "is_decoder = true is not supported");
  EXPECT_IMPORT_ERROR(parse(encoderConfig("bert", "  \"add_cross_attention\": true,")), 3u, 26u,
                      "add_cross_attention = true is not supported");
  EXPECT_IMPORT_ERROR(parse(encoderConfig("bert", "  \"tie_word_embeddings\": false,")), 3u, 26u,
                      "tie_word_embeddings = false is not supported");
  EXPECT_IMPORT_ERROR(parse(encoderConfig("vit", "  \"qkv_bias\": false,")), 3u, 15u,
                      "qkv_bias = false is not supported");
  EXPECT_IMPORT_ERROR(parse(encoderConfig("vit", "  \"problem_type\": \"regression\",")), 3u, 19u,
                      "problem_type 'regression' is not supported");
  // Another family's key: rope_theta is not BERT's.
  EXPECT_IMPORT_ERROR(parse(encoderConfig("bert", "  \"rope_theta\": 10000.0,")), 3u, 17u,
                      "'rope_theta' is not implemented for model_type 'bert'");
  // BERT's dropout defaults to transformers' 0.1: refused when absent.
  auto absent = parse("{\n  \"model_type\": \"bert\", \"vocab_size\": 100,\n"
                      "  \"hidden_size\": 32, \"intermediate_size\": 64,\n"
                      "  \"num_hidden_layers\": 2, \"num_attention_heads\": 4\n}\n");
  EXPECT_FALSE(absent.config);
  EXPECT_NE(absent.error.message.find("hidden_dropout_prob = 0.1: dropout is not supported"),
            std::string::npos)
      << absent.error.str();
  // The image must be whole patches.
  std::string odd = "{\n  \"model_type\": \"vit\", \"image_size\": 10,\n"
                    "  \"patch_size\": 4,\n"
                    "  \"hidden_size\": 32, \"intermediate_size\": 64,\n"
                    "  \"num_hidden_layers\": 2, \"num_attention_heads\": 4\n}\n";
  EXPECT_IMPORT_ERROR(parse(odd), 3u, 17u, "is not a whole number of patches of 4 x 4");
  std::string bad = "{\n  \"model_type\": \"vit\", \"image_size\": [8],\n"
                    "  \"hidden_size\": 32, \"intermediate_size\": 64,\n"
                    "  \"num_hidden_layers\": 2, \"num_attention_heads\": 4\n}\n";
  EXPECT_IMPORT_ERROR(parse(bad), 2u, 38u,
                      "image_size must be a positive integer or [height, width]");
}

TEST(HFConfigErrors, MixtureOfExpertsKeys) {
  std::string mixtral = "{\n  \"model_type\": \"mixtral\",\n"
                        "  \"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 128,\n"
                        "  \"num_hidden_layers\": 2, \"num_attention_heads\": 8,\n";
  auto jitter = parse(mixtral + "  \"router_jitter_noise\": 0.1\n}\n");
  EXPECT_IMPORT_ERROR(jitter, 5u, 26u, "router_jitter_noise = 0.100000 is not supported");
  auto tooMany = parse(mixtral + "  \"num_local_experts\": 4, \"num_experts_per_tok\": 5\n}\n");
  EXPECT_IMPORT_ERROR(tooMany, 5u, 50u, "num_experts_per_tok = 5 exceeds the 4 experts");
  auto one = parse(mixtral + "  \"num_local_experts\": 1\n}\n");
  EXPECT_IMPORT_ERROR(one, 5u, 24u, "num_local_experts must be at least 2");
  auto coef = parse(mixtral + "  \"router_aux_loss_coef\": -1\n}\n");
  EXPECT_IMPORT_ERROR(coef, 5u, 27u, "router_aux_loss_coef must be finite and >= 0");
  auto ok = parse(mixtral + "  \"output_router_logits\": true\n}\n");
  ASSERT_TRUE(ok.config) << ok.error.str();
  ASSERT_TRUE(ok.config->moe);
  EXPECT_EQ(ok.config->moe->numExperts, 8); // transformers' defaults
  EXPECT_EQ(ok.config->moe->topK, 2);
  EXPECT_TRUE(ok.config->moe->normTopkProb);
  EXPECT_TRUE(ok.config->moe->auxLoss);
  EXPECT_EQ(ok.config->moe->auxLossCoef, 0.001);

  std::string qwen = "{\n  \"model_type\": \"qwen3_moe\",\n"
                     "  \"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 128,\n"
                     "  \"num_hidden_layers\": 4, \"num_attention_heads\": 8, \"head_dim\": 16,\n";
  auto only = parse(qwen + "  \"mlp_only_layers\": [0, 4]\n}\n");
  EXPECT_IMPORT_ERROR(only, 5u, 22u, "mlp_only_layers[1] = 4 is not a layer index in [0, 4)");
  auto notList = parse(qwen + "  \"mlp_only_layers\": 2\n}\n");
  EXPECT_IMPORT_ERROR(notList, 5u, 22u, "mlp_only_layers must be a list of layer indices");
  auto step = parse(qwen + "  \"num_experts\": 4, \"num_experts_per_tok\": 2, "
                           "\"decoder_sparse_step\": 2, \"mlp_only_layers\": [3]\n}\n");
  ASSERT_TRUE(step.config) << step.error.str();
  ASSERT_TRUE(step.config->moe);
  EXPECT_EQ(step.config->moe->sparse, (std::vector<bool>{false, true, false, false}));
  EXPECT_FALSE(step.config->moe->normTopkProb);
  auto none = parse(qwen + "  \"num_experts\": 0\n}\n"); // every layer dense
  ASSERT_TRUE(none.config) << none.error.str();
  EXPECT_FALSE(none.config->moe);
}
