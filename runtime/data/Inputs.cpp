//===- Inputs.cpp - what each micro-step takes of a run's data ------------===//
#include "runtime/data/Inputs.h"
#include "runtime/data/Batches.h"
#include "runtime/kernels/cpu.h"

#include <vector>

using namespace fsdp;
using namespace fsdp::data;
using namespace fsdp::program;

void fsdp::data::fillTokens(const Program &p, const data::Dataset &data, int64_t gradAccum,
                            int rank, int64_t step, int64_t micro, int64_t *tokens,
                            int64_t *targets) {
  int64_t S = p.seqLen;
  data::BatchLayout l{p.microBatch, p.worldSize, gradAccum};
  for (int64_t b = 0; b < l.microBatch; ++b) {
    // ((step G + g) S) mod (n - S - 1), exactly: a run resumed at a late step
    // (any step count a checkpoint holds) must not overflow into a negative
    // start. The modulus is at least 1: Dataset::open checks.
    int64_t start = data::windowStart(data.size(), S, l.global(), step, l.sample(micro, rank, b));
    for (int64_t s = 0; s < S; ++s) {
      tokens[b * S + s] = data.token(start + s);
      targets[b * S + s] = data.token(start + s + 1);
    }
  }
}

void fsdp::data::fillInputs(const Program &p, const RunOptions &o, const Inputs &data, bool eval,
                            int rank, int64_t step, int64_t micro, char *input, int64_t *targets) {
  data::BatchLayout l{p.microBatch, p.worldSize, o.gradAccum};
  switch (p.inputKind) {
  case InputKind::Tokens:
    fillTokens(p, eval ? data.eval : data.train, o.gradAccum, rank, step, micro,
               reinterpret_cast<int64_t *>(input), targets);
    return;
  case InputKind::MaskedTokens:
    data::fillMaskedTokens(eval ? data.eval : data.train, p.seqLen, l, rank, step, micro,
                           o.maskTokenId, reinterpret_cast<int64_t *>(input), targets);
    return;
  case InputKind::Images: {
    const data::ImageSet &from = eval ? data.evalImages : data.trainImages;
    const Tensor &patches = p.tensors[p.tokens];
    if (patches.dtype == DType::F32) {
      data::fillImages(from, p.image, l, rank, step, micro, reinterpret_cast<float *>(input),
                       targets);
    } else { // bf16 compute: the patches rounded once, as a bf16 cast of them
      std::vector<float> wide(patches.numel());
      data::fillImages(from, p.image, l, rank, step, micro, wide.data(), targets);
      kernels::toBf16(wide.data(), reinterpret_cast<uint16_t *>(input), patches.numel());
    }
    return;
  }
  }
}

std::string fsdp::data::lossNorm(const Program &p, const RunOptions &o, const Inputs &data,
                                 bool eval, int64_t step, LossNorm *norm) {
  int64_t G = globalBatch(p, o);
  norm->divisor = (double)(p.worldSize * o.gradAccum); // the micro-steps' means
  switch (p.inputKind) {
  case InputKind::Tokens:
    norm->gradScale = 1.0f / (float)(G * p.seqLen);
    return "";
  case InputKind::Images:
    norm->gradScale = 1.0f / (float)G;
    return "";
  case InputKind::MaskedTokens: {
    data::BatchLayout l{p.microBatch, p.worldSize, o.gradAccum};
    int64_t n = data::maskedCount(eval ? data.eval : data.train, p.seqLen, l, step);
    if (n == 0)
      return (eval ? "eval batch " : "step ") + std::to_string(step + 1) +
             ": no token of its global batch of " + std::to_string(G) + " x " +
             std::to_string(p.seqLen) + " tokens is selected for the masked-LM loss " +
             "(splitmix64(index) mod 20 < 3), so it has no loss to take";
    norm->gradScale = 1.0f / (float)n;
    norm->divisor = (double)n; // the micro-steps' means, each times its count
    return "";
  }
  }
  return "";
}

double fsdp::data::lossWeight(const Program &p, const RunOptions &o, const Inputs &data, bool eval,
                              int rank, int64_t step, int64_t micro) {
  if (p.inputKind != InputKind::MaskedTokens)
    return 1.0;
  data::BatchLayout l{p.microBatch, p.worldSize, o.gradAccum};
  return (double)data::maskedMicroCount(eval ? data.eval : data.train, p.seqLen, l, rank, step,
                                        micro);
}

std::string fsdp::data::Inputs::open(const Program &p, const RunOptions &o) {
  if (p.inputKind == InputKind::Images) {
    std::string err = trainImages.open(o.data, o.labels, p.image, "--data", "--labels");
    if (err.empty() && !o.evalData.empty())
      err = evalImages.open(o.evalData, o.evalLabels, p.image, "--eval-data", "--eval-labels");
    return err;
  }
  std::string err = train.open(o.data, p, o.dataDtype);
  if (err.empty() && !o.evalData.empty())
    err = eval.open(o.evalData, p, o.dataDtype);
  return err;
}

int64_t fsdp::data::globalBatch(const Program &p, const RunOptions &o) {
  return p.microBatch * p.worldSize * o.gradAccum;
}
