//===- GraphJSONTest.cpp - the JSON graph format, both ways ---------------===//
//
// Round trips (HF config -> JSON -> IR -> JSON) are exact, and bad graphs are
// rejected at the line and column of the offending value, or of the op that
// fails verification.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/ModelSummary.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>

#include <string>
#include <vector>

using namespace fsdp;

namespace {

std::string readModelConfig(const std::string &folder) {
  std::string path = std::string(FSDP_SOURCE_DIR) + "/models/" + folder + "/config.json";
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  EXPECT_TRUE(buffer) << "cannot read " << path;
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

std::string exportText(mlir::ModuleOp module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  exportGraphJSON(getGraph(module), os);
  return s;
}

std::string printIR(mlir::ModuleOp module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module->print(os);
  return s;
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

class RoundTrip : public ::testing::TestWithParam<const char *> {};

TEST_P(RoundTrip, ExportImportExportIsIdentical) {
  const char *folder = GetParam();
  std::string config = readModelConfig(folder);
  ASSERT_FALSE(config.empty());
  mlir::MLIRContext ctx;
  ImportError err;
  std::string file = std::string("models/") + folder + "/config.json";
  auto first = importHFConfig(config, file, &ctx, ImportOptions(), err);
  ASSERT_TRUE(first) << err.str();

  std::string json1 = exportText(*first);
  auto second = importGraphJSON(json1, "graph.json", &ctx, err);
  ASSERT_TRUE(second) << err.str();
  std::string json2 = exportText(*second);
  EXPECT_EQ(json1, json2);
  // The HF config the first import carries (for --save-weights DIR's
  // config.json) is no part of the graph format: a graph has none.
  EXPECT_TRUE(getGraph(*first).getHfConfig().has_value());
  EXPECT_FALSE(getGraph(*second).getHfConfig().has_value());
  getGraph(*first).removeHfConfigAttr();
  getGraph(*first).removeGenerationConfigAttr();
  EXPECT_EQ(printIR(*first), printIR(*second));

  // The second import keeps everything the summary reads.
  ModelSummary a = summarize(getGraph(*first)), b = summarize(getGraph(*second));
  EXPECT_EQ(a.name, folder);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.numBlocks, b.numBlocks);
  EXPECT_EQ(a.modules.size(), b.modules.size());

  // loadModel tells a graph from a config by its "format" key.
  EXPECT_NE(json1.find("\"format\": \"fsdp-graph\""), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(GraphJSON, RoundTrip,
                         ::testing::Values("gpt2-tiny", "llama-tiny", "Llama-3.1-405B",
                                           "llama-tiny-linear", "llama-tiny-dynamic",
                                           "llama-tiny-yarn"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string n = info.param;
                           for (char &c : n)
                             if (!isalnum((unsigned char)c))
                               c = '_';
                           return n;
                         });

TEST(GraphJSON, RopeScalingSurvivesRoundTrip) {
  mlir::MLIRContext ctx;
  ImportError err;
  auto first = importHFConfig(readModelConfig("Llama-3.1-405B"), "x/config.json", &ctx,
                              ImportOptions(), err);
  ASSERT_TRUE(first) << err.str();
  std::string json = exportText(*first);
  EXPECT_NE(json.find("\"scaling\":\"llama3\",\"scaling_factor\":8.0,\"original_max_position\":"
                      "8192,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0"),
            std::string::npos);
  auto second = importGraphJSON(json, "graph.json", &ctx, err);
  ASSERT_TRUE(second) << err.str();
  int ropes = 0;
  getGraph(*second).walk([&](nn::RopeOp op) {
    ++ropes;
    EXPECT_EQ(op.getScaling(), "llama3");
    auto f = op->getAttrOfType<mlir::FloatAttr>("scaling_factor");
    ASSERT_TRUE(f);
    EXPECT_EQ(f.getValueAsDouble(), 8.0);
  });
  EXPECT_EQ(ropes, 252);

  // YaRN's: the bool truncate and the attention factor, to the last bit.
  auto yarn = importHFConfig(readModelConfig("llama-tiny-yarn"), "y/config.json", &ctx,
                             ImportOptions(), err);
  ASSERT_TRUE(yarn) << err.str();
  json = exportText(*yarn);
  EXPECT_NE(json.find("\"scaling\":\"yarn\",\"scaling_factor\":4.0,\"original_max_position\":32,"
                      "\"beta_fast\":32.0,\"beta_slow\":1.0,\"truncate\":true,"
                      "\"attention_factor\":1.138629436111989"),
            std::string::npos)
      << json;
  auto again = importGraphJSON(json, "graph.json", &ctx, err);
  ASSERT_TRUE(again) << err.str();
  getGraph(*again).walk([&](nn::RopeOp op) {
    EXPECT_EQ(op.getTruncate(), true);
    EXPECT_EQ(op.getAttentionFactor()->convertToDouble(), 0.1 * std::log(4.0) + 1);
  });
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

// A small valid graph (an embedding, a tied head, the loss), one item a line
// so a test can replace a line and know where the error must point.
const std::vector<std::string> kBaseLines = {
    /* 1*/ "{",
    /* 2*/ "  \"format\": \"fsdp-graph\",",
    /* 3*/ "  \"version\": 1,",
    /* 4*/ "  \"name\": \"mini\",",
    /* 5*/ "  \"model_type\": \"gpt2\",",
    /* 6*/ "  \"block_prefix\": \"transformer.h\",",
    /* 7*/ "  \"num_blocks\": 0,",
    /* 8*/ "  \"max_seq_len\": 8,",
    /* 9*/ "  \"inputs\": [",
    /*10*/ "    {\"name\": \"tokens\", \"shape\": [-1, -1], \"dtype\": \"i64\"},",
    /*11*/ "    {\"name\": \"targets\", \"shape\": [-1, -1], \"dtype\": \"i64\"}",
    /*12*/ "  ],",
    /*13*/ "  \"params\": [",
    /*14*/ "    {\"name\": \"wte\", \"shape\": [16, 4], \"dtype\": \"f32\"}",
    /*15*/ "  ],",
    /*16*/ "  \"ops\": [",
    /*17*/
    "    {\"op\": \"embedding\", \"module\": \"wte\", \"operands\": [\"tokens\", \"wte\"], "
    "\"results\": [{\"name\": \"h\", \"shape\": [-1, -1, 4], \"dtype\": \"f32\"}]},",
    /*18*/
    "    {\"op\": \"linear\", \"module\": \"lm_head\", \"layout\": \"out_in\", "
    "\"operands\": [\"h\", \"wte\"], "
    "\"results\": [{\"name\": \"logits\", \"shape\": [-1, -1, 16], \"dtype\": \"f32\"}]},",
    /*19*/
    "    {\"op\": \"cross_entropy\", \"operands\": [\"logits\", \"targets\"], "
    "\"results\": [{\"name\": \"loss\", \"shape\": [], \"dtype\": \"f32\"}]}",
    /*20*/ "  ],",
    /*21*/ "  \"output\": \"loss\"",
    /*22*/ "}",
};

/// The base graph with 1-based line `lineNo` replaced by `line`.
std::string graphWith(unsigned lineNo = 0, const std::string &line = "") {
  std::string text;
  for (size_t i = 0; i < kBaseLines.size(); ++i)
    text += (i + 1 == lineNo ? line : kBaseLines[i]) + "\n";
  return text;
}

/// The base graph's line `lineNo` with its first `from` replaced by `to`.
std::string lineWith(unsigned lineNo, const std::string &from, const std::string &to) {
  std::string line = kBaseLines[lineNo - 1];
  size_t pos = line.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return pos == std::string::npos ? line : line.replace(pos, from.size(), to);
}

struct Imported {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  ImportError error;
};

Imported import(const std::string &text, mlir::MLIRContext &ctx) {
  Imported r;
  r.module = importGraphJSON(text, "bad.json", &ctx, r.error);
  return r;
}

#define EXPECT_GRAPH_ERROR(imported, LINE, COL, ...)                                               \
  do {                                                                                             \
    EXPECT_FALSE((imported).module);                                                               \
    EXPECT_EQ((imported).error.file, "bad.json");                                                  \
    EXPECT_EQ((imported).error.line, (LINE)) << (imported).error.str();                            \
    EXPECT_EQ((imported).error.col, (COL)) << (imported).error.str();                              \
    for (const char *needle : {__VA_ARGS__})                                                       \
      EXPECT_NE((imported).error.message.find(needle), std::string::npos)                          \
          << "'" << needle << "' not in: " << (imported).error.str();                              \
  } while (0)

TEST(GraphJSONErrors, BaseGraphImports) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(), ctx);
  ASSERT_TRUE(r.module) << r.error.str();
  nn::GraphOp graph = getGraph(*r.module);
  EXPECT_EQ(graph.getSymName().str(), "mini");
  EXPECT_EQ(summarize(graph).parameters, 64);
  // The ops sit at their lines in the JSON text.
  unsigned expectedLine = 17;
  for (mlir::Operation &op : graph.getBody().front()) {
    if (llvm::isa<nn::ParamOp, nn::ReturnOp>(op))
      continue;
    auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(op.getLoc());
    ASSERT_TRUE(loc);
    EXPECT_EQ(loc.getFilename().str(), "bad.json");
    EXPECT_EQ(loc.getLine(), expectedLine++);
    EXPECT_EQ(loc.getColumn(), 5u);
  }
  EXPECT_EQ(expectedLine, 20u);
}

TEST(GraphJSONErrors, WrongFormat) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(2, "  \"format\": \"onnx\","), ctx);
  EXPECT_GRAPH_ERROR(r, 2u, 13u, "format must be \"fsdp-graph\"", "\"onnx\"");
}

TEST(GraphJSONErrors, UnsupportedVersion) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(3, "  \"version\": 2,"), ctx);
  EXPECT_GRAPH_ERROR(r, 3u, 14u, "graph format version 2 is not supported", "reads version 1");
}

TEST(GraphJSONErrors, UndefinedOperand) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(18, lineWith(18, "[\"h\", \"wte\"]", "[\"hidden\", \"wte\"]")), ctx);
  // "operands": [ is at column 75; "hidden" is its first element.
  EXPECT_GRAPH_ERROR(r, 18u, 76u, "value 'hidden' is not defined before this use");
}

TEST(GraphJSONErrors, OperandUsedBeforeDefinition) {
  mlir::MLIRContext ctx;
  // The head reads "loss", defined only by the op after it.
  auto r = import(graphWith(18, lineWith(18, "[\"h\", \"wte\"]", "[\"h\", \"loss\"]")), ctx);
  EXPECT_GRAPH_ERROR(r, 18u, 81u, "value 'loss' is not defined before this use");
}

TEST(GraphJSONErrors, ValueDefinedTwice) {
  mlir::MLIRContext ctx;
  // The head's result is named "h", like the embedding's.
  auto r = import(graphWith(18, lineWith(18, "\"name\": \"logits\"", "\"name\": \"h\"")), ctx);
  EXPECT_GRAPH_ERROR(r, 18u, 110u, "value 'h' is defined twice");
}

TEST(GraphJSONErrors, ParamNameClashesWithInput) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(14, lineWith(14, "\"wte\"", "\"tokens\"")), ctx);
  EXPECT_GRAPH_ERROR(r, 14u, 14u, "value 'tokens' is defined twice");
}

TEST(GraphJSONErrors, UnknownOp) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(17, lineWith(17, "\"embedding\"", "\"embed\"")), ctx);
  EXPECT_GRAPH_ERROR(r, 17u, 12u, "unknown op 'embed'",
                     "known: position_ids, token_type_ids, embedding, linear, layer_norm, "
                     "rms_norm, rope, split, causal_attention, attention, gelu, silu_mul, add, "
                     "class_token, first_token, cross_entropy");
}

TEST(GraphJSONErrors, UnknownKey) {
  mlir::MLIRContext ctx;
  auto r =
      import(graphWith(18, lineWith(18, "\"layout\"", "\"layout\": \"out_in\", \"bias\"")), ctx);
  // , "bias": "out_in" -- the error points at the value of the unknown key.
  EXPECT_GRAPH_ERROR(r, 18u, 71u, "unknown key 'bias' for op 'linear'");
}

TEST(GraphJSONErrors, BadDtype) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(14, lineWith(14, "\"f32\"", "\"f8\"")), ctx);
  EXPECT_GRAPH_ERROR(r, 14u, 48u, "unknown dtype 'f8'", "supported: f32, bf16");
}

TEST(GraphJSONErrors, BadLayout) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(18, lineWith(18, "\"out_in\"", "\"rows\"")), ctx);
  EXPECT_GRAPH_ERROR(r, 18u, 53u, "layout must be 'in_out' or 'out_in', but is 'rows'");
}

TEST(GraphJSONErrors, WrongOperandCount) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(17, lineWith(17, "[\"tokens\", \"wte\"]", "[\"tokens\"]")), ctx);
  EXPECT_GRAPH_ERROR(r, 17u, 54u, "op 'embedding' takes 2 operands, but 1 are given");
}

TEST(GraphJSONErrors, ZeroDimension) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(14, lineWith(14, "[16, 4]", "[16, 0]")), ctx);
  EXPECT_GRAPH_ERROR(r, 14u, 35u, "a dimension must be positive, or -1");
}

TEST(GraphJSONErrors, MissingOutput) {
  mlir::MLIRContext ctx;
  std::vector<std::string> lines = kBaseLines;
  lines[19] = "  ]"; // drop the comma and "output"
  lines.erase(lines.begin() + 20);
  std::string text;
  for (const std::string &l : lines)
    text += l + "\n";
  auto r = import(text, ctx);
  EXPECT_GRAPH_ERROR(r, 1u, 1u, "missing key 'output'");
}

TEST(GraphJSONErrors, MalformedJSON) {
  mlir::MLIRContext ctx;
  // A trailing comma: the error is the "]" on the line after it.
  auto r = import(graphWith(14, kBaseLines[13] + ","), ctx);
  EXPECT_GRAPH_ERROR(r, 15u, 3u, "malformed JSON", "syntax error");
}

// Library bug (JsonReader::parse): nlohmann's parse_error::byte is the last
// character read, so an unexpected multi-character token is reported at its
// last character (8:15, the closing quote of "max_seq_len") instead of its
// first (8:3). Enable once the reader backs up to the start of the token.
TEST(GraphJSONErrors, MalformedJSONPointsAtTokenStart) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(7, "  \"num_blocks\": 0"), ctx); // no comma
  EXPECT_GRAPH_ERROR(r, 8u, 3u, "malformed JSON");
}

// Found by fuzzing (tests/fuzz/planner/graph-json): a num_blocks of 10^15
// made the planner allocate a group per block; element counts that overflow
// 64 bits came out negative.
TEST(GraphJSONErrors, TooManyBlocks) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(7, "  \"num_blocks\": 1000000000000000,"), ctx);
  EXPECT_GRAPH_ERROR(r, 7u, 17u, "num_blocks = 1000000000000000 is more than fsdp plans");
}

TEST(GraphJSONErrors, TooLongSequences) {
  mlir::MLIRContext ctx;
  auto r = import(graphWith(8, "  \"max_seq_len\": 128000000000,"), ctx);
  EXPECT_GRAPH_ERROR(r, 8u, 18u,
                     "max_seq_len = 128000000000 is more than fsdp plans (at most 1073741824)");
}

/// The diagnostics of importing `text`, as "line:col: message".
std::vector<std::string> importDiagnostics(const std::string &text, mlir::MLIRContext &ctx) {
  std::vector<std::string> out;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
    auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(diag.getLocation());
    out.push_back((loc ? std::to_string(loc.getLine()) + ":" + std::to_string(loc.getColumn())
                       : std::string("?")) +
                  ": " + diag.str());
    return mlir::success();
  });
  ImportError err;
  EXPECT_FALSE(importGraphJSON(text, "bad.json", &ctx, err));
  return out;
}

/// `diagnostics` holds exactly one, and it contains `text`.
void expectOneDiagnostic(const std::vector<std::string> &diagnostics, const std::string &text) {
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_NE(diagnostics[0].find(text), std::string::npos) << diagnostics[0];
}

// The planner sizes an activation's two dynamic dimensions by the micro-batch
// and sequence length; a static size there (which the dialect's verifiers let
// stand for a dynamic one) made fsdp-plan write programs that fsdp-run
// refuses (found by the mlir-model fuzzer; the JSON importer let them in too).
TEST(GraphJSONErrors, ActivationsAreBatchBySequence) {
  mlir::MLIRContext ctx;
  auto tokens = importDiagnostics(graphWith(10, lineWith(10, "[-1, -1]", "[2, 3]")), ctx);
  expectOneDiagnostic(tokens, "'nn.graph' op argument 0 is 'tensor<2x3xi64>', but the token ids "
                              "and targets are [?, ?] (batch, sequence)");
  auto h = importDiagnostics(graphWith(17, lineWith(17, "[-1, -1, 4]", "[2, 3, 4]")), ctx);
  expectOneDiagnostic(h, "17:5: 'nn.embedding' op result 0 is 'tensor<2x3x4xf32>', but an "
                         "activation is [batch, sequence, features...], batch dynamic (?), the "
                         "sequence dynamic or fixed by the model (class_token, first_token) and "
                         "the features static");
  // A static sequence only where class_token or first_token fixes it.
  auto fixed = importDiagnostics(graphWith(17, lineWith(17, "[-1, -1, 4]", "[-1, 3, 4]")), ctx);
  expectOneDiagnostic(fixed, "17:5: 'nn.embedding' op result 0 is 'tensor<?x3x4xf32>', whose "
                             "sequence is fixed, but no operand fixes it");
  auto logits = importDiagnostics(graphWith(18, lineWith(18, "[-1, -1, 16]", "[-1, -1, -1]")), ctx);
  expectOneDiagnostic(logits, "18:5: 'nn.linear' op result 0 is 'tensor<?x?x?xf32>', but an "
                              "activation is");
}

TEST(GraphJSONErrors, TooManyParameters) {
  mlir::MLIRContext ctx;
  auto one =
      importDiagnostics(graphWith(14, lineWith(14, "[16, 4]", "[4294967296, 4294967296]")), ctx);
  expectOneDiagnostic(one, "14:5: 'nn.param' op parameter 'wte' of shape [4294967296, 4294967296] "
                           "has more elements than fsdp plans");
  auto all = importDiagnostics(
      graphWith(14,
                kBaseLines[13] +
                    ",\n    {\"name\": \"big\", \"shape\": [281474976710656], \"dtype\": \"f32\"}"),
      ctx);
  expectOneDiagnostic(all, "15:5: 'nn.param' op brings the graph's parameters to more than fsdp "
                           "plans");
}

TEST(GraphJSONErrors, InconsistentShapesFailVerification) {
  mlir::MLIRContext ctx;
  // The head's weight is [16, 4] (out_in), but its result claims width 32.
  std::string text = graphWith(18, lineWith(18, "[-1, -1, 16]", "[-1, -1, 32]"));
  std::vector<mlir::Diagnostic> diags;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  ImportError err;
  {
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
      diags.push_back(std::move(diag));
      return mlir::success();
    });
    module = importGraphJSON(text, "bad.json", &ctx, err);
  }
  EXPECT_FALSE(module);
  EXPECT_EQ(err.file, "bad.json");
  EXPECT_TRUE(err.message.empty()) << "the verifier reported it: " << err.str();
  ASSERT_EQ(diags.size(), 1u);
  mlir::Diagnostic &d = diags.front();
  EXPECT_EQ(d.getSeverity(), mlir::DiagnosticSeverity::Error);
  std::string msg = d.str();
  EXPECT_NE(msg.find("'nn.linear' op result must be [?, ?, 16], but it is [?, ?, 32]"),
            std::string::npos)
      << msg;
  auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(d.getLocation());
  ASSERT_TRUE(loc) << "location is not a FileLineColLoc";
  EXPECT_EQ(loc.getFilename().str(), "bad.json");
  EXPECT_EQ(loc.getLine(), 18u);
  EXPECT_EQ(loc.getColumn(), 5u);
}

TEST(GraphJSONErrors, LoadModelTellsGraphFromConfig) {
  // A graph file goes through importGraphJSON (its errors name graph keys),
  // not the HF importer (which would ask for model_type first).
  llvm::SmallString<128> path;
  int fd;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("fsdp-graph", "json", fd, path));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << graphWith(3, "  \"version\": 2,");
  }
  mlir::MLIRContext ctx;
  ImportError err;
  auto module = loadModel(path, &ctx, ImportOptions(), err);
  llvm::sys::fs::remove(path);
  EXPECT_FALSE(module);
  EXPECT_EQ(err.line, 3u) << err.str();
  EXPECT_NE(err.message.find("graph format version 2"), std::string::npos) << err.str();
}

// Library bug (exportGraphJSON): results are named "v0", "v1", ... and params
// keep their own names, so a parameter named like a generated name (or like
// "tokens") makes the exported JSON define a value twice, and it does not
// import back. Enable once the exporter makes its generated names unique.
TEST(GraphJSON, ExportNamesNeverClash) {
  mlir::MLIRContext ctx;
  std::string text = graphWith();
  for (size_t p; (p = text.find("\"wte\"")) != std::string::npos;)
    text.replace(p, 5, "\"v0\"");
  auto first = import(text, ctx);
  ASSERT_TRUE(first.module) << first.error.str();
  std::string json1 = exportText(*first.module);
  auto second = import(json1, ctx);
  ASSERT_TRUE(second.module) << second.error.str() << "\n" << json1;
  EXPECT_EQ(printIR(*first.module), printIR(*second.module));
}

// A rope's scaling in a JSON graph: a kind fsdp computes, with its own
// parameters and no other (the verifier's words, at the op's line), and a
// dynamic one only up to its original_max_position.
TEST(GraphJSONErrors, RopeScaling) {
  mlir::MLIRContext ctx;
  ImportError err;
  auto model = [&](const char *folder) {
    auto m = importHFConfig(readModelConfig(folder), "x/config.json", &ctx, ImportOptions(), err);
    EXPECT_TRUE(m) << err.str();
    return m ? exportText(*m) : std::string();
  };
  const std::string yarn = model("llama-tiny-yarn"), dynamic = model("llama-tiny-dynamic");
  auto edit = [](std::string s, const std::string &from, const std::string &to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
    return s;
  };
  EXPECT_FALSE(importGraphJSON(edit(yarn, "\"scaling\":\"yarn\"", "\"scaling\":\"ntk\""), "g.json",
                               &ctx, err));
  EXPECT_NE(err.message.find("scaling must be one of linear, dynamic, yarn, llama3, but is 'ntk'"),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.line, 0u);
  EXPECT_FALSE(
      importGraphJSON(edit(yarn, "\"truncate\":true", "\"truncate\":1"), "g.json", &ctx, err));
  EXPECT_NE(err.message.find("truncate must be true or false"), std::string::npos) << err.str();

  auto missing = importDiagnostics(edit(yarn, "\"truncate\":true,", ""), ctx);
  ASSERT_FALSE(missing.empty());
  EXPECT_NE(missing[0].find("'nn.rope' op yarn scaling needs scaling_factor, "
                            "original_max_position, beta_fast, beta_slow, truncate and "
                            "attention_factor, but truncate is missing"),
            std::string::npos)
      << missing[0];
  auto foreign = importDiagnostics(
      edit(dynamic, "\"scaling\":\"dynamic\",", "\"scaling\":\"dynamic\",\"beta_fast\":32.0,"),
      ctx);
  ASSERT_FALSE(foreign.empty());
  EXPECT_NE(foreign[0].find("beta_fast is not a parameter of dynamic scaling (its parameters: "
                            "scaling_factor and original_max_position)"),
            std::string::npos)
      << foreign[0];
  auto loose = importDiagnostics(edit(dynamic, "\"scaling\":\"dynamic\",", ""), ctx);
  ASSERT_FALSE(loose.empty());
  EXPECT_NE(loose[0].find("scaling_factor is given without scaling"), std::string::npos)
      << loose[0];
  // Its frequencies are transformers' for sequences up to 128, the graph's
  // max_seq_len: a graph of longer sequences is refused.
  auto longer = importDiagnostics(
      edit(dynamic, "\"original_max_position\":128", "\"original_max_position\":64"), ctx);
  ASSERT_FALSE(longer.empty());
  EXPECT_NE(longer[0].find("dynamic scaling computes transformers' frequencies for sequences of "
                           "at most original_max_position = 64 tokens, but the graph's "
                           "max_seq_len is 128"),
            std::string::npos)
      << longer[0];
  auto factor =
      importDiagnostics(edit(yarn, "\"scaling_factor\":4.0", "\"scaling_factor\":-4.0"), ctx);
  ASSERT_FALSE(factor.empty());
  EXPECT_NE(factor[0].find("yarn scaling needs a finite scaling_factor > 0"), std::string::npos)
      << factor[0];
}

} // namespace
