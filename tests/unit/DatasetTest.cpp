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

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
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

// --shuffle (docs/sampling.md): over three epochs, every window of the
// stream is taken exactly once per epoch, whichever rank and micro-step
// takes it, and the epochs' orders differ.
TEST(Shuffle, EveryWindowOncePerEpoch) {
  const int64_t B = 2, S = 8, W = 2, A = 3, V = 1000;
  std::vector<uint16_t> file(8 * 37 + 1); // 37 windows of 9 tokens at stride 8
  for (size_t i = 0; i < file.size(); ++i)
    file[i] = (uint16_t)(i % V);
  std::string path = writeTokens(file);
  program::Program p = shapeOnly(B, S, W, V);
  data::Dataset d;
  ASSERT_EQ(d.open(path, p), "");
  d.shuffle(42);
  const int64_t G = B * W * A, windows = 37;
  ASSERT_EQ(d.epochOf(S, 0).samples, windows);
  std::vector<int64_t> tokens(B * S), targets(B * S);
  std::vector<std::vector<int64_t>> seen(3); // per epoch: the windows, in order
  for (int64_t step = 0; step * G < 3 * windows; ++step)
    for (int64_t a = 0; a < A; ++a)
      for (int r = 0; r < W; ++r) {
        data::fillTokens(p, d, A, r, step, a, tokens.data(), targets.data());
        for (int64_t b = 0; b < B; ++b) {
          int64_t k = step * G + (a * W + r) * B + b; // the global sample (Batches.h)
          if (k >= 3 * windows)
            continue;
          int64_t start = tokens[b * S];
          ASSERT_EQ(start % S, 0) << "a window starts at a multiple of S";
          ASSERT_EQ(targets[b * S + S - 1], start + S) << "its targets are the next tokens";
          seen[k / windows].push_back(start / S);
        }
      }
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> sorted = seen[e];
    std::sort(sorted.begin(), sorted.end());
    for (int64_t w = 0; w < windows; ++w)
      ASSERT_EQ(sorted[w], w) << "epoch " << e + 1 << " misses or repeats window " << w;
  }
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_NE(seen[1], seen[2]);
  ::unlink(path.c_str());
}

TEST(Shuffle, PermutationsOfEverySize) {
  for (uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 64ull, 65ull, 127ull, 1000ull, 4093ull})
    for (uint64_t seed : {0ull, 1ull, 0xffffffffffffffffull})
      for (uint64_t epoch : {0ull, 3ull}) {
        std::vector<bool> hit(n);
        for (uint64_t x = 0; x < n; ++x) {
          uint64_t w = data::shuffledWindow(seed, epoch, x, n);
          ASSERT_LT(w, n);
          ASSERT_FALSE(hit[w]) << "n " << n << " seed " << seed << ": window " << w << " twice";
          hit[w] = true;
        }
      }
  // Seeds and epochs give other orders.
  auto order = [](uint64_t seed, uint64_t epoch) {
    std::vector<uint64_t> o;
    for (uint64_t x = 0; x < 100; ++x)
      o.push_back(data::shuffledWindow(seed, epoch, x, 100));
    return o;
  };
  EXPECT_NE(order(1, 0), order(2, 0));
  EXPECT_NE(order(1, 0), order(1, 1));
}

// Several files, or a folder's *.bin in name order, are one stream: the
// same tokens as their concatenation, windows across the boundaries.
TEST(Dataset, FilesAndFoldersAreOneStream) {
  std::vector<uint16_t> all(300), a, b;
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = (uint16_t)(i * 13 % 500);
  a.assign(all.begin(), all.begin() + 111);
  b.assign(all.begin() + 111, all.end());
  std::string whole = writeTokens(all), pa = writeTokens(a), pb = writeTokens(b);
  program::Program p = shapeOnly(1, 8, 1, 500);
  data::Dataset one, two;
  ASSERT_EQ(one.open(whole, p), "");
  ASSERT_EQ(two.open(pa + "," + pb, p), "");
  ASSERT_EQ(two.size(), one.size());
  for (int64_t i = 0; i < one.size(); ++i)
    ASSERT_EQ(two.token(i), one.token(i)) << i;
  EXPECT_EQ(two.bytes(), 0) << "mapped files are not private memory";
  // A folder: its *.bin in name order.
  std::string dir = whole + ".d";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::rename(pb.c_str(), (dir + "/part-1.bin").c_str()), 0);
  ASSERT_EQ(::rename(pa.c_str(), (dir + "/part-0.bin").c_str()), 0);
  FILE *note = std::fopen((dir + "/README").c_str(), "w");
  std::fclose(note);
  data::Dataset folder;
  ASSERT_EQ(folder.open(dir, p), "");
  for (int64_t i = 0; i < one.size(); ++i)
    ASSERT_EQ(folder.token(i), one.token(i)) << i;
  EXPECT_NE(folder.open(whole + ",", p), "");
  for (const char *f : {"/part-0.bin", "/part-1.bin", "/README"})
    ::unlink((dir + f).c_str());
  ::rmdir(dir.c_str());
  ::unlink(whole.c_str());
}

// A file that changes size under the run is an error naming it, before a
// read past a truncated end (SIGBUS) or of tokens that were never checked.
TEST(Dataset, ChangedSizeIsAnError) {
  std::vector<uint16_t> tokens(100, 7);
  std::string path = writeTokens(tokens);
  program::Program p = shapeOnly(1, 8, 1, 500);
  data::Dataset d;
  ASSERT_EQ(d.open(path, p), "");
  EXPECT_EQ(d.checkUnchanged(), "");
  FILE *f = std::fopen(path.c_str(), "ab");
  std::fputc(0, f);
  std::fputc(0, f);
  std::fclose(f);
  EXPECT_NE(d.checkUnchanged().find(path + ": the data changed size during the run (200 bytes "
                                           "when opened, 202 now)"),
            std::string::npos)
      << d.checkUnchanged();
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  EXPECT_NE(d.checkUnchanged().find("200 bytes when opened, 100 now"), std::string::npos);
  ::unlink(path.c_str());
}

// fsdp-tokenize's sidecar: its width is the default, and what it says must
// agree with the file, the flags and the model.
TEST(Dataset, SidecarIsChecked) {
  std::vector<uint16_t> tokens(100, 7);
  std::string path = writeTokens(tokens);
  program::Program p = shapeOnly(1, 8, 1, 500);
  auto sidecar = [&](const std::string &dtype, int64_t vocab, int64_t count) {
    FILE *f = std::fopen((path + ".json").c_str(), "w");
    std::fprintf(f,
                 "{\"format\": \"fsdp-tokens\", \"tokenizer\": \"t.json\", \"dtype\": \"%s\", "
                 "\"vocab_size\": %lld, \"tokens\": %lld, \"eos_id\": 1, \"mask_id\": 9}",
                 dtype.c_str(), (long long)vocab, (long long)count);
    std::fclose(f);
  };
  data::Dataset d;
  sidecar("uint16", 500, 100);
  ASSERT_EQ(d.open(path, p), "");
  ASSERT_EQ(d.sidecars().size(), 1u);
  EXPECT_EQ(d.sidecars()[0].maskId, 9);
  EXPECT_NE(
      d.open(path, p, "uint32").find("says its tokens are uint16, but --data-dtype is uint32"),
      std::string::npos);
  sidecar("uint16", 50257, 100);
  EXPECT_NE(d.open(path, p).find("vocabulary of 50257 ids (t.json) is larger than the model's 500"),
            std::string::npos);
  sidecar("uint16", 500, 99);
  EXPECT_NE(d.open(path, p).find("says 99 tokens, but " + path + " holds 100"), std::string::npos);
  sidecar("uint32", 500, 50); // the sidecar's width is the default: 7, 7 read as one uint32
  EXPECT_NE(d.open(path, p).find("token 458759 at byte offset 0 (uint32 token 0) is outside"),
            std::string::npos);
  ::unlink((path + ".json").c_str());
  ::unlink(path.c_str());
}
