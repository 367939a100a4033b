//===- ProgramInputsTest.cpp - the program's inputs.kind ------------------===//
//
// What the model takes (docs/program-format.md, `inputs`): left out, tokens,
// as every program before the field; masked_tokens; images with their image
// and patch sizes and classes. Read and written field for field, and each
// refusal of the loader, before anything runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/Program.h"

#include <gtest/gtest.h>

#include <string>

using namespace fsdp;
using namespace fsdp::program;

namespace {

/// An image program: micro_batch 2, 4 x 6 images of 2 channels in patches
/// of 2 x 3 (4 patches of 12 values, seq_len 5), 10 classes. `inputs`,
/// `seqLen` and the micro-step's compute list replace the defaults.
std::string imageProgram(const std::string &inputs = "", int seqLen = 5,
                         const std::string &compute = "") {
  std::string in = inputs.empty() ? R"({"kind": "images", "tokens": 0, "targets": 1,
      "image": {"height": 4, "width": 6, "channels": 2, "patch_height": 2, "patch_width": 3,
                "classes": 10}})"
                                  : inputs;
  std::string ops =
      compute.empty() ? R"([{"op": "cross_entropy", "in": [3, 1], "out": [2]}])" : compute;
  return R"({"format": "fsdp-program", "version": 1,
  "model": {"name": "vit-tiny", "model_type": "vit", "parameters": 0},
  "world_size": 1, "strategy": "full-shard", "shard_size": 1,
  "micro_batch": 2, "seq_len": )" +
         std::to_string(seqLen) + R"(, "arena_bytes": 700, "events": 0,
  "inputs": )" +
         in +
         R"(, "loss": 2,
  "tensors": [{"id": 0, "offset": 0, "shape": [2, 4, 12], "dtype": "f32"},
              {"id": 1, "offset": 384, "shape": [2, 1], "dtype": "i64"},
              {"id": 2, "offset": 400, "shape": [], "dtype": "f32"},
              {"id": 3, "offset": 404, "shape": [2, 1, 10], "dtype": "f32"},
              {"id": 4, "offset": 484, "shape": [2, 5], "dtype": "i64"},
              {"id": 5, "offset": 564, "shape": [5, 4], "dtype": "f32"}],
  "units": [],
  "micro_step": {"compute": )" +
         ops + R"(, "comm": []},
  "optimizer": {"compute": [], "comm": []}})";
}

/// A token program (tokens 0 and targets 6: [2, 5] i64 each) of the given
/// inputs; its cross_entropy over logits [2, 5, 7] reads `targetsId`, and
/// `more` (instructions, each followed by a comma) come before it. Tensor 7
/// is a table [7, 1], tensor 8 its rows [2, 5, 1].
std::string tokenProgram(const std::string &kind, int targetsId = 6, const std::string &more = "") {
  std::string text = R"({"format": "fsdp-program", "version": 1,
  "model": {"name": "bert-tiny", "model_type": "bert", "parameters": 0},
  "world_size": 1, "strategy": "full-shard", "shard_size": 1,
  "micro_batch": 2, "seq_len": 5, "arena_bytes": 600, "events": 0,
  "inputs": {)" + kind +
                     R"("tokens": 0, "targets": 6}, "loss": 1,
  "tensors": [{"id": 0, "offset": 0, "shape": [2, 5], "dtype": "i64"},
              {"id": 1, "offset": 80, "shape": [], "dtype": "f32"},
              {"id": 2, "offset": 84, "shape": [2, 5, 7], "dtype": "f32"},
              {"id": 3, "offset": 364, "shape": [1], "dtype": "f32"},
              {"id": 4, "offset": 368, "shape": [1], "dtype": "f32"},
              {"id": 5, "offset": 372, "shape": [1], "dtype": "f32"},
              {"id": 6, "offset": 376, "shape": [2, 5], "dtype": "i64"},
              {"id": 7, "offset": 456, "shape": [7, 1], "dtype": "f32"},
              {"id": 8, "offset": 484, "shape": [2, 5, 1], "dtype": "f32"}],
  "units": [],
  "micro_step": {"compute": [)" +
                     more + R"({"op": "cross_entropy", "in": [2, )" + std::to_string(targetsId) +
                     R"(], "out": [1]}], "comm": []},
  "optimizer": {"compute": [], "comm": []}})";
  return text;
}

std::string loadError(const std::string &text) {
  Program p;
  return parseProgram(text, "p.json", p);
}

} // namespace

TEST(ProgramInputs, TokensByDefaultAndWrittenAsBefore) {
  Program p;
  ASSERT_EQ(parseProgram(tokenProgram(""), "p.json", p), "");
  EXPECT_EQ(p.inputKind, InputKind::Tokens);
  std::string text = writeProgram(p);
  EXPECT_NE(text.find("\"inputs\": {\"tokens\":0,\"targets\":6}"), std::string::npos) << text;
  Program q;
  ASSERT_EQ(parseProgram(tokenProgram("\"kind\": \"tokens\", "), "p.json", q), "");
  EXPECT_EQ(q, p);
}

TEST(ProgramInputs, MaskedTokensRoundTrip) {
  Program p;
  ASSERT_EQ(parseProgram(tokenProgram("\"kind\": \"masked_tokens\", ", 0), "p.json", p), "");
  EXPECT_EQ(p.inputKind, InputKind::MaskedTokens);
  std::string text = writeProgram(p);
  EXPECT_NE(text.find("\"inputs\": {\"kind\":\"masked_tokens\",\"tokens\":0,\"targets\":6}"),
            std::string::npos)
      << text;
  Program q;
  ASSERT_EQ(parseProgram(text, "again.json", q), "");
  EXPECT_EQ(q, p);
}

TEST(ProgramInputs, ImagesRoundTrip) {
  Program p;
  ASSERT_EQ(parseProgram(imageProgram(), "p.json", p), "");
  EXPECT_EQ(p.inputKind, InputKind::Images);
  EXPECT_EQ(p.image.height, 4);
  EXPECT_EQ(p.image.width, 6);
  EXPECT_EQ(p.image.channels, 2);
  EXPECT_EQ(p.image.patchHeight, 2);
  EXPECT_EQ(p.image.patchWidth, 3);
  EXPECT_EQ(p.image.classes, 10);
  EXPECT_EQ(p.image.patches(), 4);
  EXPECT_EQ(p.image.patchValues(), 12);
  Program q;
  ASSERT_EQ(parseProgram(writeProgram(p), "again.json", q), "");
  EXPECT_EQ(q, p);
  q.image.classes = 9;
  EXPECT_FALSE(q == p);
}

TEST(ProgramInputs, RefusesInputsThatDoNotFit) {
  auto images = [](const std::string &image) {
    return imageProgram(R"({"kind": "images", "tokens": 0, "targets": 1, "image": )" + image + "}");
  };
  const std::string full = R"("height": 4, "width": 6, "channels": 2, "patch_height": 2)";
  EXPECT_EQ(loadError(tokenProgram("\"kind\": \"pixels\", ")),
            "p.json: inputs: kind 'pixels' is not tokens, masked_tokens or images");
  EXPECT_EQ(loadError(tokenProgram("\"image\": {}, ")),
            "p.json: inputs: 'image' belongs to a program whose inputs are images, not tokens");
  EXPECT_EQ(loadError(tokenProgram("\"shape\": 1, ")),
            "p.json: inputs: unknown key 'shape' (kind, tokens, targets, image)");
  EXPECT_EQ(loadError(imageProgram(R"({"kind": "images", "tokens": 0, "targets": 1})")),
            "p.json: inputs: missing 'image'");
  EXPECT_EQ(loadError(images("{" + full + R"(, "patch_width": 3})")),
            "p.json: inputs.image: missing 'classes'");
  EXPECT_EQ(loadError(images("{" + full + R"(, "patch_width": 3, "classes": 10, "mean": 0})")),
            "p.json: inputs.image: unknown key 'mean' (height, width, channels, patch_height, "
            "patch_width, classes)");
  EXPECT_EQ(loadError(images("{" + full + R"(, "patch_width": 3, "classes": 0})")),
            "p.json: inputs.image: height, width, channels, patch_height, patch_width and "
            "classes must be at least 1");
  EXPECT_EQ(loadError(images("{" + full + R"(, "patch_width": 4, "classes": 10})")),
            "p.json: inputs.image: the image (4 x 6) is not a whole number of patches (2 x 4)");
  EXPECT_EQ(loadError(images(R"({"height": 4000000, "width": 6000000, "channels": 3,
      "patch_height": 1, "patch_width": 1, "classes": 10})")),
            "p.json: inputs.image: an image of 72000000000000 values is more than fsdp-run reads");
  EXPECT_EQ(loadError(imageProgram("", 4)),
            "p.json: inputs.image: seq_len 4 must be the patches and the CLS token, 5");
  // Patches of another shape or dtype; labels of another shape.
  EXPECT_EQ(loadError(images("{" + full + R"(, "patch_width": 2, "classes": 10})")),
            "p.json: inputs.image: seq_len 5 must be the patches and the CLS token, 7");
  EXPECT_EQ(loadError(imageProgram(R"({"kind": "images", "tokens": 4, "targets": 1, "image": {)" +
                                   full + R"(, "patch_width": 3, "classes": 10}})")),
            "p.json: inputs: an image program's tokens (its patches) must be f32 or bf16 "
            "[micro_batch, 4 patches, 12 values]");
  EXPECT_EQ(loadError(imageProgram(R"({"kind": "images", "tokens": 0, "targets": 4, "image": {)" +
                                   full + R"(, "patch_width": 3, "classes": 10}})")),
            "p.json: inputs: an image program's targets (its labels) must be i64 [micro_batch, 1]");
  EXPECT_EQ(loadError(imageProgram(R"({"kind": "images", "tokens": 1, "targets": 1, "image": {)" +
                                   full + R"(, "patch_width": 3, "classes": 10}})")),
            "p.json: inputs: tokens and targets must be two tensors");
  // Labels index the logits' classes; the patches (floats) index nothing.
  EXPECT_EQ(loadError(images("{" + full + R"(, "patch_width": 3, "classes": 11})")),
            "p.json: micro_step.compute[0] (cross_entropy): labels up to 10 (of 11 classes) "
            "index logits of 10 classes");
  EXPECT_EQ(loadError(imageProgram("", 5,
                                   R"([{"op": "cross_entropy", "in": [3, 1], "out": [2]},
                    {"op": "embedding", "in": [0, 5], "out": [3]}])")),
            "p.json: micro_step.compute[1] (embedding): embedding shapes do not match");
  // Masked targets hold -100 where nothing is selected: the loss and its
  // gradient skip those rows, and may index by them; no other kernel may.
  const std::string masked = "\"kind\": \"masked_tokens\", ";
  EXPECT_EQ(loadError(tokenProgram(masked, 6)), "");
  EXPECT_EQ(loadError(tokenProgram(masked, 6,
                                   R"({"op": "cross_entropy_grad", "in": [2, 6], "out": [2]},)")),
            "");
  EXPECT_EQ(loadError(tokenProgram(masked, 6, R"({"op": "embedding", "in": [6, 7], "out": [8]},)")),
            "p.json: micro_step.compute[0] (embedding): indexes by the targets of masked_tokens "
            "inputs, which hold -100 at every position not selected; only cross_entropy and "
            "cross_entropy_grad skip them (docs/program-format.md, Inputs)");
  EXPECT_EQ(
      loadError(tokenProgram(masked, 6, R"({"op": "embedding_grad", "in": [8, 6], "out": [7]},)")),
      "p.json: micro_step.compute[0] (embedding_grad): indexes by the targets of masked_tokens "
      "inputs, which hold -100 at every position not selected; only cross_entropy and "
      "cross_entropy_grad skip them (docs/program-format.md, Inputs)");
  // The inputs (mask ids below the vocabulary) index a table as tokens do.
  EXPECT_EQ(loadError(tokenProgram(masked, 6, R"({"op": "embedding", "in": [0, 7], "out": [8]},)")),
            "");
}
