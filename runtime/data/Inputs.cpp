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
  data::BatchLayout l{p.microBatch, p.dpSize(), gradAccum};
  for (int64_t b = 0; b < l.microBatch; ++b) {
    // data/Batches.h: sequential, or --shuffle's windows.
    int64_t start = sampleStart(data, S, l.global(), step, l.sample(micro, rank, b));
    for (int64_t s = 0; s < S; ++s) {
      tokens[b * S + s] = data.token(start + s);
      targets[b * S + s] = data.token(start + s + 1);
    }
  }
}

void fsdp::data::fillInputs(const Program &p, const RunOptions &o, const Inputs &data, bool eval,
                            int rank, int64_t step, int64_t micro, char *input, int64_t *targets) {
  data::BatchLayout l{p.microBatch, p.dpSize(), o.gradAccum};
  switch (p.inputKind) {
  case InputKind::Tokens:
    fillTokens(p, eval ? data.eval : data.train, o.gradAccum, rank, step, micro,
               reinterpret_cast<int64_t *>(input), targets);
    return;
  case InputKind::MaskedTokens:
    data::fillMaskedTokens(eval ? data.eval : data.train, p.seqLen, l, rank, step, micro,
                           data.maskTokenId, reinterpret_cast<int64_t *>(input), targets);
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
    data::BatchLayout l{p.microBatch, p.dpSize(), o.gradAccum};
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
                              int rank, int tpRank, int64_t step, int64_t micro) {
  if (p.inputKind != InputKind::MaskedTokens)
    return 1.0;
  data::BatchLayout l{p.microBatch, p.dpSize(), o.gradAccum};
  int64_t lo = 0, hi = INT64_MAX;
  if (p.tp > 1 && !p.sequenceParallel && tpRank != 0)
    return 0.0;
  if (p.tp > 1 && p.sequenceParallel) { // tp_chunk's part t of the B x S tokens
    int64_t part = p.microBatch * p.seqLen / p.tp;
    lo = tpRank * part;
    hi = lo + part;
  }
  return (double)data::maskedMicroCount(eval ? data.eval : data.train, p.seqLen, l, rank, step,
                                        micro, lo, hi);
}

std::string fsdp::data::Inputs::open(const Program &p, const RunOptions &o) {
  if (p.inputKind == InputKind::Images) {
    std::string err = trainImages.open(o.data, o.labels, p.image, "--data", "--labels");
    if (err.empty() && !o.evalData.empty())
      err = evalImages.open(o.evalData, o.evalLabels, p.image, "--eval-data", "--eval-labels");
    return err;
  }
  // A masked-LM model's mask id: the flag's, or the sidecar's. It should
  // not be a token of the text: the pass counts it.
  bool masked = p.inputKind == InputKind::MaskedTokens;
  maskTokenId = o.maskTokenId;
  if (masked && !o.maskTokenIdGiven)
    for (const std::string &path : {o.data, o.evalData}) {
      Sidecar side;
      bool found = false;
      std::string first = path.substr(0, path.find(','));
      if (!first.empty() && readSidecar(first, &found, &side).empty() && found &&
          side.maskId >= 0) {
        maskTokenId = side.maskId;
        break;
      }
    }
  int64_t countId = masked ? maskTokenId : -1;
  std::string err = train.open(o.data, p, o.dataDtype, 0, "--data", countId);
  if (err.empty() && !o.evalData.empty())
    err = eval.open(o.evalData, p, o.dataDtype, 0, "--eval-data", countId);
  if (err.empty() && o.shuffle)
    train.shuffle(o.shuffleSeed);
  for (const Dataset *d : {&train, &eval})
    if (masked && d->countOfId() > 0)
      warnings.push_back("--mask-token-id " + std::to_string(maskTokenId) + " occurs " +
                         std::to_string(d->countOfId()) + " times in " +
                         (d == &train ? "--data" : "--eval-data") +
                         ": those tokens look masked to the model (is it the tokenizer's mask "
                         "token?)");
  return err;
}

int64_t fsdp::data::globalBatch(const Program &p, const RunOptions &o) {
  return p.microBatch * p.dpSize() * o.gradAccum;
}
