//===- BatchesTest.cpp - masked-LM and image batches (data/Batches.h) -------===//
//
// The expected numbers below were printed once by tests/e2e/batches_ref.py,
// docs/training-semantics.md's rules written in Python (`python3 tests/e2e/batches_ref.py`):
//   splitmix64(0) = 0xe220a8397b1dcdaf (also splitmix64's published first
//   output from seed 0), splitmix64(1) = 0x910a2dec89025cc1, ...;
//   the selected positions in [0, 64): 8 15 29 32 43 52 53 58 62;
//   15104 selected in [0, 100000);
//   masked_count(n=1000, S=16, G=12, t) = 27, 29, 44, 24 for t = 0, 1, 7, 10^15;
//   window_start(1000, 16, 12, 10^15, 5) = 183; image_index(5, 12, 10^18, 3) = 3.
// tests/e2e/check_batches.py compares whole batches against that script, and
// the patches against PyTorch's conv2d.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/Batches.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"
#include "runtime/data/Inputs.h"
#include "runtime/kernels/cpu.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

using namespace fsdp;
using namespace fsdp::io;
using namespace fsdp::data;

namespace {

std::string tempPath(const std::string &stem) {
  static int count = 0;
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/fsdp-batches-test-" +
         std::to_string(::getpid()) + "-" + std::to_string(count++) + "-" + stem;
}

std::string writeBytes(const std::string &bytes, const std::string &stem) {
  std::string path = tempPath(stem);
  FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_TRUE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

/// A masked-LM program of micro_batch B, seq_len S, R ranks and a
/// vocabulary of V (what Dataset, the batches and lossNorm read).
program::Program maskedProgram(int64_t B, int64_t S, int64_t R, int64_t V) {
  program::Program p;
  p.inputKind = program::InputKind::MaskedTokens;
  p.microBatch = B, p.seqLen = S, p.worldSize = R, p.shardSize = R;
  p.tokens = 0, p.targets = 1;
  p.tensors = {{0, {B, S}, program::DType::I64},
               {0, {B, S}, program::DType::I64},
               {0, {}, program::DType::F32},
               {0, {B, S, V}, program::DType::F32}};
  program::Instruction ce{};
  ce.op = program::Op::CrossEntropy;
  ce.in = {3, 0};
  ce.out = {2};
  p.microStep.compute.push_back(ce);
  return p;
}

/// n uint16 tokens, token i = (7 i) mod 50.
std::string tokenFile(int64_t n) {
  std::string bytes;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t t = uint16_t(i * 7 % 50);
    bytes += char(t & 0xff);
    bytes += char(t >> 8);
  }
  return writeBytes(bytes, "tokens.bin");
}

/// A .npy (version 1.0) of `descr` and `shape` holding `data`.
std::string npyFile(const std::string &descr, const std::string &shape, const std::string &data) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return writeBytes(out + header + data, "a.npy");
}

} // namespace

TEST(Masking, Splitmix64KnownValues) {
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(1), 0x910a2dec89025cc1ull);
  EXPECT_EQ(splitmix64(2), 0x975835de1c9756ceull);
  EXPECT_EQ(splitmix64(3), 0x1d0b14e4db018fedull);
  EXPECT_EQ(splitmix64(1000), 0x3c1eba8b4dccc148ull);
  EXPECT_EQ(splitmix64(uint64_t(1) << 32), 0xc42c5a1aa3820138ull);
  EXPECT_EQ(splitmix64(uint64_t(1) << 63), 0x481ec0a212a9f3dbull);
  EXPECT_EQ(splitmix64(UINT64_MAX), 0xe4d971771b652c20ull);
}

TEST(Masking, SelectsByAbsoluteIndex) {
  std::vector<int64_t> selected;
  for (int64_t p = 0; p < 64; ++p)
    if (maskSelected(p))
      selected.push_back(p);
  EXPECT_EQ(selected, (std::vector<int64_t>{8, 15, 29, 32, 43, 52, 53, 58, 62}));
  int64_t count = 0;
  for (int64_t p = 0; p < 100000; ++p)
    count += maskSelected(p);
  EXPECT_EQ(count, 15104); // about 15%
}

TEST(Masking, WindowsAndImagesAtAnyStep) {
  EXPECT_EQ(windowStart(1000, 16, 12, 0, 0), 0);
  EXPECT_EQ(windowStart(1000, 16, 12, 1, 11), 368); // (12 + 11) * 16 mod 983
  EXPECT_EQ(windowStart(1000, 16, 12, 1000000000000000, 5), 183);
  EXPECT_EQ(imageIndex(5, 12, 1000000000000000000, 3), 3);
  EXPECT_EQ(imageIndex(5, 12, 0, 7), 2);
  EXPECT_EQ(imageIndex(5, 12, 2, 1), 0); // 25 mod 5
  // The largest step a run reaches, and G near the counters' bound: no overflow.
  int64_t big = INT64_MAX;
  int64_t s = windowStart(1000, 16, big, big, big - 1);
  EXPECT_GE(s, 0);
  EXPECT_LT(s, 983);
  int64_t i = imageIndex(7, big, big, big - 1);
  EXPECT_EQ(i, (int64_t)(((unsigned __int128)big * big + (big - 1)) % 7));
}

// The whole global batch of a step: every rank's micro-steps, each position
// by the rule, and the selected count the loss divides by.
TEST(Masking, MaskedBatchesAndTheirCount) {
  const int64_t B = 2, S = 16, R = 2, A = 3, V = 50, mask = 49;
  program::Program p = maskedProgram(B, S, R, V);
  std::string path = tokenFile(1000);
  Dataset data;
  ASSERT_EQ(data.open(path, p), "");
  BatchLayout l{B, R, A};
  ASSERT_EQ(l.global(), 12);
  // Hand-checkable: step 0, micro-step 0, rank 0, row 0 is the window at 0,
  // where positions 8 and 15 are selected.
  std::vector<int64_t> tokens(B * S), targets(B * S);
  fillMaskedTokens(data, S, l, 0, 0, 0, mask, tokens.data(), targets.data());
  EXPECT_EQ(std::vector<int64_t>(tokens.begin(), tokens.begin() + S),
            (std::vector<int64_t>{0, 7, 14, 21, 28, 35, 42, 49, 49, 13, 20, 27, 34, 41, 48, 49}));
  EXPECT_EQ(std::vector<int64_t>(targets.begin(), targets.begin() + S),
            (std::vector<int64_t>{-100, -100, -100, -100, -100, -100, -100, -100, 6, -100, -100,
                                  -100, -100, -100, -100, 5}));
  // Rows 0 and 1 are the windows at 0 and 16: positions 8, 15 and 29 selected.
  EXPECT_EQ(maskedMicroCount(data, S, l, 0, 0, 0), 3);
  // A tp rank's part of the B x S tokens (sequence parallelism): [0, 9)
  // holds position 8, [9, 20) position 15, [20, 32) position 29 (row 1's 13).
  EXPECT_EQ(maskedMicroCount(data, S, l, 0, 0, 0, 0, 9), 1);
  EXPECT_EQ(maskedMicroCount(data, S, l, 0, 0, 0, 9, 20), 1);
  EXPECT_EQ(maskedMicroCount(data, S, l, 0, 0, 0, 20, 32), 1);
  EXPECT_EQ(maskedMicroCount(data, S, l, 0, 0, 0, 16, 29), 0);
  const int64_t expected[4][2] = {{0, 27}, {1, 29}, {7, 44}, {1000000000000000, 24}};
  for (auto [t, want] : expected) {
    EXPECT_EQ(maskedCount(data, S, l, t), want) << "step " << t;
    int64_t seen = 0, micros = 0;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t r = 0; r < R; ++r) {
        fillMaskedTokens(data, S, l, r, t, a, mask, tokens.data(), targets.data());
        // A micro-step's count: its targets that are not ignored.
        int64_t counted = 0;
        for (int64_t x : targets)
          counted += x != kernels::kIgnoreIndex;
        EXPECT_EQ(maskedMicroCount(data, S, l, r, t, a), counted)
            << "step " << t << ", rank " << r << ", micro-step " << a;
        micros += counted;
        for (int64_t b = 0; b < B; ++b) {
          int64_t start = windowStart(1000, S, 12, t, (a * R + r) * B + b);
          for (int64_t k = 0; k < S; ++k) {
            int64_t pos = start + k, orig = pos * 7 % 50;
            bool sel = maskSelected(pos);
            ASSERT_EQ(tokens[b * S + k], sel ? mask : orig);
            ASSERT_EQ(targets[b * S + k], sel ? orig : kernels::kIgnoreIndex);
            seen += sel;
          }
        }
      }
    EXPECT_EQ(seen, want) << "step " << t;
    EXPECT_EQ(micros, want) << "step " << t;
  }
  std::remove(path.c_str());
}

// A micro-step with nothing selected counts 0 (its cross_entropy writes 0,
// which that count multiplies) while the step's other micro-steps count.
TEST(Masking, MicroStepCountsAtTheirRanks) {
  // One-token windows over a file of 1000: sample g of step t is the token
  // at (t G + g) mod 998 (S = 1), selected by the rule.
  const int64_t B = 1, S = 1, R = 2, A = 2;
  program::Program p = maskedProgram(B, S, R, 50);
  std::string path = tokenFile(1000);
  Dataset data;
  ASSERT_EQ(data.open(path, p), "");
  BatchLayout l{B, R, A};
  for (int64_t t = 0; t < 20; ++t) {
    int64_t total = 0;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t r = 0; r < R; ++r) {
        int64_t g = l.sample(a, r, 0);
        int64_t want = maskSelected((uint64_t)((t * 4 + g) % 998)) ? 1 : 0;
        EXPECT_EQ(maskedMicroCount(data, S, l, r, t, a), want)
            << "step " << t << ", rank " << r << ", micro-step " << a;
        total += want;
      }
    EXPECT_EQ(maskedCount(data, S, l, t), total) << "step " << t;
  }
  // Step 2 takes samples 8..11, of which only 8 is selected: rank 0's
  // micro-step 0 counts 1, every other 0.
  EXPECT_EQ(maskedMicroCount(data, S, l, 0, 2, 0), 1);
  EXPECT_EQ(maskedMicroCount(data, S, l, 1, 2, 0), 0);
  EXPECT_EQ(maskedMicroCount(data, S, l, 0, 2, 1), 0);
  EXPECT_EQ(maskedMicroCount(data, S, l, 1, 2, 1), 0);
  std::remove(path.c_str());
}

// The loss's normalisation: a masked step's gradient scale is one over its
// selected count, and its loss the micro-steps' means, each times its
// rank's selected count in it, over that count; a step with none is an
// error naming it, and so is an eval batch.
TEST(Masking, LossNormAndTheStepWithNoneSelected) {
  program::Program p = maskedProgram(2, 16, 2, 50);
  runtime::RunOptions o;
  o.gradAccum = 3;
  data::Inputs in;
  std::string path = tokenFile(1000);
  ASSERT_EQ(in.train.open(path, p), "");
  data::LossNorm norm;
  ASSERT_EQ(data::lossNorm(p, o, in, false, 7, &norm), "");
  EXPECT_EQ(norm.gradScale, 1.0f / 44);
  EXPECT_EQ(norm.divisor, 44);
  // Each micro-step's mean weighs as many as it selected, of the training
  // file or (eval) of the eval file; over the step they add up to the count.
  ASSERT_EQ(in.eval.open(path, p), "");
  data::BatchLayout l{2, 2, 3};
  double weights = 0;
  for (int64_t a = 0; a < 3; ++a)
    for (int r = 0; r < 2; ++r) {
      double w = data::lossWeight(p, o, in, false, r, 0, 7, a);
      EXPECT_EQ(w, (double)maskedMicroCount(in.train, 16, l, r, 7, a));
      EXPECT_EQ(data::lossWeight(p, o, in, true, r, 0, 7, a), w); // the same file
      weights += w;
    }
  EXPECT_EQ(weights, norm.divisor);
  // The report: the sum over ranks and micro-steps of mean x count, over the count.
  runtime::StepReport r = runtime::stepReport(p, o, 7, 88.0, norm.divisor, 1.0, 0.5);
  EXPECT_EQ(r.step, 8);
  EXPECT_EQ(r.loss, 2.0);
  EXPECT_EQ(r.tokensPerS, 12 * 16 / 0.5);
  // Three tokens and one-token windows: every sample is the window at 0,
  // which is never selected.
  program::Program one = maskedProgram(2, 1, 2, 50);
  std::string tiny = tokenFile(3);
  ASSERT_EQ(in.train.open(tiny, one), "");
  ASSERT_EQ(in.eval.open(tiny, one), "");
  EXPECT_EQ(data::lossNorm(one, o, in, false, 4, &norm),
            "step 5: no token of its global batch of 12 x 1 tokens is selected for the "
            "masked-LM loss (splitmix64(index) mod 20 < 3), so it has no loss to take");
  EXPECT_EQ(data::lossNorm(one, o, in, true, 0, &norm),
            "eval batch 1: no token of its global batch of 12 x 1 tokens is selected for the "
            "masked-LM loss (splitmix64(index) mod 20 < 3), so it has no loss to take");
  // The other kinds: each micro-step's loss a mean, over G x S tokens or G images.
  program::Program other = maskedProgram(2, 16, 2, 50);
  other.inputKind = program::InputKind::Tokens;
  ASSERT_EQ(data::lossNorm(other, o, in, false, 4, &norm), "");
  EXPECT_EQ(norm.gradScale, 1.0f / (12 * 16));
  EXPECT_EQ(norm.divisor, 2 * 3);
  EXPECT_EQ(data::lossWeight(other, o, in, false, 1, 0, 4, 2), 1.0);
  other.inputKind = program::InputKind::Images;
  ASSERT_EQ(data::lossNorm(other, o, in, false, 4, &norm), "");
  EXPECT_EQ(norm.gradScale, 1.0f / 12);
  EXPECT_EQ(norm.divisor, 2 * 3);
  EXPECT_EQ(data::lossWeight(other, o, in, true, 0, 0, 4, 1), 1.0);
  std::remove(path.c_str());
  std::remove(tiny.c_str());
}

TEST(Patches, PixelValues) {
  EXPECT_EQ(pixelValue(0), -1.0f);
  EXPECT_EQ(pixelValue(255), 1.0f);
  EXPECT_EQ(pixelValue(51), (51.0f / 255.0f - 0.5f) / 0.5f);
  EXPECT_NEAR(pixelValue(128), 1.0 / 255.0, 1e-7);
}

// A 4 x 6 image of 2 channels in patches of 2 x 3: 2 x 2 patches of 12
// values. Pixel (y, x) of channel c holds 100 c + 10 y + x, so each value
// says where it came from.
TEST(Patches, RowMajorPatchesOfChannelRowColumnValues) {
  program::ImageSpec spec;
  spec.height = 4, spec.width = 6, spec.channels = 2, spec.patchHeight = 2, spec.patchWidth = 3;
  spec.classes = 1;
  ASSERT_EQ(spec.patches(), 4);
  ASSERT_EQ(spec.patchValues(), 12);
  std::vector<uint8_t> image(4 * 6 * 2);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x)
      for (int c = 0; c < 2; ++c)
        image[(y * 6 + x) * 2 + c] = uint8_t(100 * c + 10 * y + x);
  std::vector<float> patches(4 * 12, -7.0f);
  patchify(image.data(), spec, patches.data());
  const uint8_t want[4][12] = {
      {0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112},    // top left
      {3, 4, 5, 13, 14, 15, 103, 104, 105, 113, 114, 115},    // top right
      {20, 21, 22, 30, 31, 32, 120, 121, 122, 130, 131, 132}, // bottom left
      {23, 24, 25, 33, 34, 35, 123, 124, 125, 133, 134, 135}, // bottom right
  };
  for (int q = 0; q < 4; ++q)
    for (int k = 0; k < 12; ++k)
      EXPECT_EQ(patches[q * 12 + k], pixelValue(want[q][k])) << "patch " << q << " value " << k;
}

// Sample g of step t is image (t G + g) mod N, split over ranks and
// micro-steps as tokens are; its label is the target.
TEST(Patches, ImageBatchesOfEachRankAndMicroStep) {
  program::ImageSpec spec;
  spec.height = 2, spec.width = 2, spec.channels = 1, spec.patchHeight = 1, spec.patchWidth = 2;
  spec.classes = 10;
  // 5 images, image i's pixels all 10 i + (y, x) in row-major order; label 9 - i.
  std::string pixels, labels;
  for (int i = 0; i < 5; ++i) {
    for (int k = 0; k < 4; ++k)
      pixels += char(10 * i + k);
    for (int k = 0; k < 8; ++k)
      labels += char(k == 0 ? 9 - i : 0);
  }
  std::string imagesPath = npyFile("|u1", "(5, 2, 2, 1)", pixels);
  std::string labelsPath = npyFile("<i8", "(5,)", labels);
  ImageSet set;
  ASSERT_EQ(set.open(imagesPath, labelsPath, spec), "");
  const int64_t B = 2, R = 3, A = 2; // G = 12
  BatchLayout l{B, R, A};
  std::vector<float> patches(B * 2 * 2);
  std::vector<int64_t> targets(B);
  for (int64_t t : {0, 1, 3})
    for (int64_t a = 0; a < A; ++a)
      for (int64_t r = 0; r < R; ++r) {
        fillImages(set, spec, l, r, t, a, patches.data(), targets.data());
        for (int64_t b = 0; b < B; ++b) {
          int64_t g = a * B * R + r * B + b, i = (t * 12 + g) % 5;
          EXPECT_EQ(targets[b], 9 - i) << "step " << t << " sample " << g;
          for (int k = 0; k < 4; ++k)
            EXPECT_EQ(patches[b * 4 + k], pixelValue(uint8_t(10 * i + k)));
        }
      }
  std::remove(imagesPath.c_str());
  std::remove(labelsPath.c_str());
}

// What the executors call (data::fillInputs): an image program's patches in
// its input tensor's dtype; bf16 patches are the f32 ones rounded once.
TEST(Patches, FillInputsInTheTensorsDtype) {
  program::Program p;
  p.inputKind = program::InputKind::Images;
  program::ImageSpec &spec = p.image;
  spec.height = 2, spec.width = 4, spec.channels = 3, spec.patchHeight = 2, spec.patchWidth = 2;
  spec.classes = 4;
  p.microBatch = 2, p.worldSize = 1, p.shardSize = 1, p.seqLen = 3;
  p.tokens = 0, p.targets = 1;
  p.tensors = {{0, {2, 2, 12}, program::DType::F32}, {0, {2, 1}, program::DType::I64}};
  std::string pixels;
  for (int k = 0; k < 3 * 24; ++k)
    pixels += char(k * 37 % 256);
  runtime::RunOptions o;
  o.gradAccum = 2;
  o.data = npyFile("|u1", "(3, 2, 4, 3)", pixels);
  o.labels =
      npyFile("<i8", "(3,)", std::string("\3\0\0\0\0\0\0\0\1\0\0\0\0\0\0\0\2\0\0\0\0\0\0\0", 24));
  data::Inputs in;
  ASSERT_EQ(in.open(p, o), "");
  std::vector<float> f32(2 * 2 * 12), want(2 * 2 * 12);
  std::vector<int64_t> targets(2), wantTargets(2);
  data::fillInputs(p, o, in, false, 0, 5, 1, reinterpret_cast<char *>(f32.data()), targets.data());
  fillImages(in.trainImages, spec, BatchLayout{2, 1, 2}, 0, 5, 1, want.data(), wantTargets.data());
  EXPECT_EQ(f32, want);
  EXPECT_EQ(targets, wantTargets);
  EXPECT_EQ(targets, (std::vector<int64_t>{1, 2})); // images (5*4 + 2) mod 3 and (5*4 + 3) mod 3
  p.tensors[0].dtype = program::DType::BF16;
  std::vector<uint16_t> bf16(2 * 2 * 12), rounded(2 * 2 * 12);
  data::fillInputs(p, o, in, false, 0, 5, 1, reinterpret_cast<char *>(bf16.data()), targets.data());
  kernels::toBf16(want.data(), rounded.data(), (int64_t)want.size());
  EXPECT_EQ(bf16, rounded);
  std::remove(o.data.c_str());
  std::remove(o.labels.c_str());
}
