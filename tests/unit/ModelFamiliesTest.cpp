//===- ModelFamiliesTest.cpp - the registry of model families -------------===//
//
// What a family registers must agree with what it builds: the registry
// finds each model_type once, a family's tiny model in models/ imports with
// its block prefix naming every block's parameters and nothing else's, and
// the lowering's tied copies and unused prefixes are the family's.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Families/Family.h"
#include "planner/Import/Import.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace fsdp;

namespace {

TEST(ModelFamilies, EachModelTypeOnce) {
  std::set<std::string> seen;
  for (const ModelFamily *f : modelFamilies()) {
    EXPECT_TRUE(seen.insert(f->modelType().str()).second) << f->modelType().str();
    EXPECT_EQ(findFamily(f->modelType()), f);
  }
  EXPECT_EQ(findFamily("t5"), nullptr);
  EXPECT_EQ(findFamily(""), nullptr);
}

TEST(ModelFamilies, KeysAreListedOnce) {
  for (const ModelFamily *f : modelFamilies()) {
    std::vector<const char *> all = f->implementedKeys(), descriptive = f->descriptiveKeys();
    all.insert(all.end(), descriptive.begin(), descriptive.end());
    std::set<std::string> keys;
    for (const char *k : all)
      EXPECT_TRUE(keys.insert(k).second) << f->modelType().str() << ": " << k;
    // The keys checkModelSize names are keys the family reads.
    for (const char *k : {f->layersKey(), f->positionsKey()})
      EXPECT_TRUE(keys.count(k)) << f->modelType().str() << ": " << k;
  }
}

/// Each family's tiny model: the block prefix names blocks 0 .. num_blocks-1,
/// each with the same number of parameters, and no parameter outside them
/// starts with it.
TEST(ModelFamilies, BlockPrefixNamesTheBlocks) {
  for (const ModelFamily *f : modelFamilies()) {
    std::string type = f->modelType().str();
    std::string path = std::string(FSDP_SOURCE_DIR) + "/models/" + type + "-tiny/config.json";
    mlir::MLIRContext ctx;
    ImportError err;
    ImportOptions opts;
    opts.noDropout = true;
    auto module = loadModel(path, &ctx, opts, err);
    ASSERT_TRUE(module) << err.str();
    nn::GraphOp graph = getGraph(*module);
    EXPECT_EQ(graph.getModelType(), f->modelType());
    EXPECT_EQ(graph.getBlockPrefix(), f->blockPrefix());
    int64_t blocks = graph.getNumBlocks();
    ASSERT_GE(blocks, 1) << type;
    std::vector<int> perBlock(blocks, 0);
    for (nn::ParamOp p : graph.getParams()) {
      llvm::StringRef name = p.getName();
      if (!name.consume_front((f->blockPrefix() + ".").str()))
        continue;
      int64_t i = -1;
      ASSERT_FALSE(name.consumeInteger(10, i)) << type << ": " << p.getName().str();
      ASSERT_TRUE(i >= 0 && i < blocks && name.starts_with("."))
          << type << ": " << p.getName().str();
      EXPECT_EQ(f->blockPath(i) + name.str(), p.getName().str());
      ++perBlock[i];
    }
    // qwen3_moe-tiny's layer 1 is dense (mlp_only_layers): its gate, up and
    // down instead of the router and 8 experts' 24 linears.
    for (int64_t i = 0; i < blocks; ++i)
      EXPECT_EQ(perBlock[i], type == "qwen3_moe" && i == 1 ? perBlock[0] - 22 : perBlock[0])
          << type << " block " << i;
    EXPECT_GT(perBlock[0], 0) << type;
  }
}

TEST(ModelFamilies, CheckpointsTiedCopiesAndUnusedPrefixes) {
  auto tied = [](llvm::StringRef type, bool hasHead) {
    return findFamily(type)->tiedCopies(
        [&](llvm::StringRef name) { return hasHead && name == "lm_head.weight"; });
  };
  using V = std::vector<std::string>;
  for (const char *type : {"gpt2", "llama", "mistral", "qwen2", "qwen3"}) {
    EXPECT_EQ(tied(type, false), V{"lm_head.weight"}) << type;
    EXPECT_EQ(tied(type, true), V{}) << type;
    EXPECT_EQ(findFamily(type)->unusedWeightPrefixes(), V{}) << type;
  }
  EXPECT_EQ(tied("bert", false),
            (V{"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}));
  EXPECT_EQ(findFamily("bert")->unusedWeightPrefixes(),
            (V{"bert.pooler.", "cls.seq_relationship."}));
  EXPECT_EQ(tied("vit", false), V{});
  EXPECT_EQ(findFamily("vit")->unusedWeightPrefixes(), V{});
}

} // namespace
