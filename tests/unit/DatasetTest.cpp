//===- DatasetTest.cpp - the training data and the samples read from it ---===//
//
// data::Dataset (fsdp-run --data) and data::fillTokens, which both executors
// call for each rank's tokens and targets: sample g of step t starts at token
// ((t·G + g)·S) mod (n − S − 1) (docs/training-semantics.md), at every step a run can reach.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/Dataset.h"
#include "runtime/Executor.h"
#include "runtime/Program.h"
#include "runtime/data/Inputs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

using namespace fsdp;

namespace {

/// A program of micro_batch B, seq_len S and W ranks whose cross_entropy
/// gives a vocabulary of V (all Dataset and fillTokens read).
program::Program shapeOnly(int64_t B, int64_t S, int64_t W, int64_t V) {
  program::Program p;
  p.microBatch = B, p.seqLen = S, p.worldSize = W, p.shardSize = W;
  p.tensors = {{0, {B, S}, program::DType::I64},
               {0, {B, S}, program::DType::I64},
               {0, {}, program::DType::F32},
               {0, {B, S, V}, program::DType::F32}};
  program::Instruction ce{};
  ce.op = program::Op::CrossEntropy;
  ce.in = {3, 1};
  ce.out = {2};
  p.microStep.compute.push_back(ce);
  return p;
}

std::string writeTokens(const std::vector<uint16_t> &tokens) {
  static int count = 0;
  const char *tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/fsdp-dataset-test-" +
                     std::to_string(::getpid()) + "-" + std::to_string(count++) + ".bin";
  FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_TRUE(f);
  for (uint16_t t : tokens) {
    uint8_t le[2] = {(uint8_t)(t & 0xff), (uint8_t)(t >> 8)};
    std::fwrite(le, 1, 2, f);
  }
  std::fclose(f);
  return path;
}

} // namespace

// Found by the dataset fuzzer: a run resumed at step 5136152271503443783 (a
// step a checkpoint may hold) computed (t·G + g)·S in int64, which overflowed
// (undefined behaviour) into a negative start and read before the tokens.
// The start is now computed exactly, as the documented formula says.
TEST(FillTokens, LateStepsReadTheDocumentedSample) {
  const int64_t B = 4, S = 4, W = 2, A = 4, V = 1000;
  std::vector<uint16_t> file(101);
  for (size_t i = 0; i < file.size(); ++i)
    file[i] = (uint16_t)(i * 7 % V);
  std::string path = writeTokens(file);
  program::Program p = shapeOnly(B, S, W, V);
  data::Dataset d;
  ASSERT_EQ(d.open(path, p), "");
  std::remove(path.c_str());
  const int64_t w = (int64_t)file.size() - S - 1, G = B * W * A;
  for (int64_t step :
       {int64_t(0), int64_t(3), int64_t(5136152271503443783), INT64_MAX / 2, INT64_MAX - 1}) {
    for (int64_t micro = 0; micro < A; ++micro)
      for (int rank = 0; rank < W; ++rank) {
        std::vector<int64_t> tokens(B * S, -1), targets(B * S, -1);
        data::fillTokens(p, d, A, rank, step, micro, tokens.data(), targets.data());
        for (int64_t b = 0; b < B; ++b) {
          __int128 g = micro * B * W + rank * B + b;
          int64_t start = (int64_t)((((__int128)step * G + g) * S) % w);
          for (int64_t s = 0; s < S; ++s) {
            EXPECT_EQ(tokens[b * S + s], file[start + s]) << "step " << step << " b " << b;
            EXPECT_EQ(targets[b * S + s], file[start + s + 1]) << "step " << step << " b " << b;
          }
        }
      }
  }
}

TEST(Dataset, RefusesWhatCannotBeTrainedOn) {
  program::Program p = shapeOnly(1, 4, 1, 10);
  data::Dataset d;
  std::string path = writeTokens({1, 2, 3, 4, 5});
  EXPECT_EQ(d.open(path, p), path + ": 5 tokens is shorter than one sample (4 tokens, their "
                                    "targets, and one more)");
  std::remove(path.c_str());
  path = writeTokens({1, 2, 3, 4, 10, 5});
  EXPECT_EQ(d.open(path, p),
            path + ": token 10 at byte offset 8 (uint16 token 4) is outside the model's vocabulary "
                   "of 10");
  std::remove(path.c_str());
}

// uint32 tokens (--data-dtype, by default from a vocabulary above 65536): read
// whole, values past 65535 kept; a cut token and a token past the vocabulary
// named by byte offset; uint32 data read as uint16 refused.
TEST(Dataset, ReadsUint32Tokens) {
  program::Program p = shapeOnly(1, 4, 1, 128256);
  std::vector<uint16_t> halves; // little-endian uint32 as pairs of uint16
  for (uint32_t t = 0; t < 20; ++t) {
    uint32_t v = 70000 + t * 1000;
    halves.push_back((uint16_t)(v & 0xffff));
    halves.push_back((uint16_t)(v >> 16));
  }
  std::string path = writeTokens(halves);
  data::Dataset d;
  ASSERT_EQ(d.open(path, p), "");
  EXPECT_EQ(d.width(), 4);
  ASSERT_EQ(d.size(), 20);
  EXPECT_EQ(d.token(19), 70000 + 19 * 1000);
  EXPECT_EQ(d.open(path, p, "uint16"), "--data-dtype uint16 cannot hold the model's vocabulary "
                                       "of 128256 tokens; use uint32");
  program::Program small = shapeOnly(1, 4, 1, 80000);
  EXPECT_EQ(d.open(path, small, "uint32"),
            path + ": token 80000 at byte offset 40 (uint32 token 10) is outside the model's "
                   "vocabulary of 80000");
  std::remove(path.c_str());
  path = writeTokens({1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(d.open(path, p), path + ": 14 bytes is not a whole number of uint32 tokens (4 bytes "
                                    "each): the token at byte offset 12 is cut short "
                                    "(--data-dtype)");
  std::remove(path.c_str());
  std::vector<uint16_t> pairs;
  for (int i = 0; i < 64; ++i)
    pairs.push_back(i % 2 ? 0 : (uint16_t)(i % 7 + 1));
  path = writeTokens(pairs);
  EXPECT_EQ(d.open(path, shapeOnly(1, 4, 1, 10)),
            path + ": read as uint16 tokens, every second one is 0: these look like uint32 "
                   "tokens; say --data-dtype uint32 (or uint16 data without this pattern)");
  std::remove(path.c_str());
}
