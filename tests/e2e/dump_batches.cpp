//===- dump_batches.cpp - the runtime's batches, for check_batches.py -----===//
//
// A test tool: writes the batches fsdp-run's executors would take
// (data::fillInputs, the function both call) so that check_batches.py can
// compare them with PyTorch and with batches_ref.py (the rules of
// docs/training-semantics.md in Python).
//
//   fsdp-dump-batches images IMAGES.npy LABELS.npy H W C PH PW CLASSES B R A STEP OUT
//   fsdp-dump-batches masked TOKENS.bin VOCAB S B R A STEP MASK_ID OUT
//   fsdp-dump-batches window SEED EPOCH N COUNT
//
// For each micro-step a in [0, A) and rank r in [0, R), in that order, OUT
// gets the rank's input tensor (images: f32 patches [B, P, C PH PW]; masked:
// i64 tokens [B, S]) and its targets (i64: [B, 1] labels; [B, S]), raw
// little-endian; masked adds the step's selected count (i64: data::maskedCount, which
// data::lossNorm divides by). `window` prints data::shuffledWindow of
// positions 0 .. COUNT-1 (--shuffle's permutation, for sampling_ref.py).
// Errors go to stderr with exit status 1.
//
//===----------------------------------------------------------------------===//
#include "runtime/Executor.h"
#include "runtime/data/Batches.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/Inputs.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace fsdp;

static int64_t arg(char **argv, int i) { return std::atoll(argv[i]); }

int main(int argc, char **argv) {
  std::string kind = argc > 1 ? argv[1] : "";
  if (kind == "window" && argc == 6) {
    uint64_t seed = std::strtoull(argv[2], nullptr, 10),
             epoch = std::strtoull(argv[3], nullptr, 10);
    uint64_t n = std::strtoull(argv[4], nullptr, 10), count = std::strtoull(argv[5], nullptr, 10);
    for (uint64_t x = 0; x < count && x < n; ++x)
      std::printf("%llu\n", (unsigned long long)data::shuffledWindow(seed, epoch, x, n));
    return 0;
  }
  if (!((kind == "images" && argc == 15) || (kind == "masked" && argc == 11))) {
    std::fprintf(stderr, "usage: fsdp-dump-batches images IMAGES.npy LABELS.npy H W C PH PW "
                         "CLASSES B R A STEP OUT\n"
                         "       fsdp-dump-batches masked TOKENS.bin VOCAB S B R A STEP MASK_ID "
                         "OUT\n"
                         "       fsdp-dump-batches window SEED EPOCH N COUNT\n");
    return 2;
  }
  program::Program p;
  runtime::RunOptions o;
  data::Inputs in;
  int64_t step;
  std::string out;
  p.tokens = 0, p.targets = 1;
  if (kind == "images") {
    p.inputKind = program::InputKind::Images;
    program::ImageSpec &s = p.image;
    s.height = arg(argv, 4), s.width = arg(argv, 5), s.channels = arg(argv, 6);
    s.patchHeight = arg(argv, 7), s.patchWidth = arg(argv, 8), s.classes = arg(argv, 9);
    p.microBatch = arg(argv, 10), p.worldSize = arg(argv, 11), o.gradAccum = arg(argv, 12);
    step = arg(argv, 13), out = argv[14];
    p.seqLen = s.patches() + 1;
    p.tensors = {{0, {p.microBatch, s.patches(), s.patchValues()}, program::DType::F32},
                 {0, {p.microBatch, 1}, program::DType::I64}};
    o.data = argv[2], o.labels = argv[3];
  } else {
    p.inputKind = program::InputKind::MaskedTokens;
    int64_t vocab = arg(argv, 3);
    p.seqLen = arg(argv, 4), p.microBatch = arg(argv, 5), p.worldSize = arg(argv, 6);
    o.gradAccum = arg(argv, 7), step = arg(argv, 8), o.maskTokenId = arg(argv, 9);
    out = argv[10];
    // What Dataset::open reads: the vocabulary, from a cross_entropy's logits.
    p.tensors = {{0, {p.microBatch, p.seqLen}, program::DType::I64},
                 {0, {p.microBatch, p.seqLen}, program::DType::I64},
                 {0, {p.microBatch, p.seqLen, vocab}, program::DType::F32}};
    program::Instruction ce{};
    ce.op = program::Op::CrossEntropy;
    ce.in = {2, 0};
    p.microStep.compute.push_back(ce);
    o.data = argv[2];
  }
  p.shardSize = p.worldSize;
  std::string err = in.open(p, o);
  if (!err.empty()) {
    std::fprintf(stderr, "fsdp-dump-batches: %s\n", err.c_str());
    return 1;
  }
  FILE *f = std::fopen(out.c_str(), "wb");
  if (!f) {
    std::fprintf(stderr, "fsdp-dump-batches: cannot write %s\n", out.c_str());
    return 1;
  }
  std::vector<char> input(p.tensors[0].bytes());
  std::vector<int64_t> targets(p.tensors[1].numel());
  for (int64_t a = 0; a < o.gradAccum; ++a)
    for (int r = 0; r < p.worldSize; ++r) {
      data::fillInputs(p, o, in, false, r, step, a, input.data(), targets.data());
      std::fwrite(input.data(), 1, input.size(), f);
      std::fwrite(targets.data(), 8, targets.size(), f);
    }
  if (kind == "masked") {
    data::LossNorm norm;
    err = data::lossNorm(p, o, in, false, step, &norm);
    int64_t count = data::maskedCount(
        in.train, p.seqLen, data::BatchLayout{p.microBatch, p.worldSize, o.gradAccum}, step);
    if (!err.empty() || norm.divisor != (double)count || norm.gradScale != 1.0f / (float)count) {
      std::fprintf(stderr,
                   "fsdp-dump-batches: the loss's normalisation (%g, 1/%g) is not "
                   "1/%lld: %s\n",
                   norm.gradScale, norm.divisor, (long long)count, err.c_str());
      return 1;
    }
    std::fwrite(&count, 8, 1, f);
  }
  return std::fclose(f) == 0 ? 0 : 1;
}
