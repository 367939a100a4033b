//===- Step.cpp - a run's data and weights as the trainer takes them ------===//
//
// What the trainer (Trainer.cpp) takes of a run's data and weights, on every
// device: the data of each micro-step and its loss's normalisation, the
// initial shards and the weights' checks, the step's report and the learning
// rate. Declared in Executor.h (namespace detail).
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/io/Batches.h"
#include "runtime/io/Dataset.h"
#include "runtime/io/Safetensors.h"
#include "runtime/kernels/cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

using namespace fsdp;
using namespace fsdp::runtime;
using namespace fsdp::program;

void fsdp::runtime::detail::fillTokens(const Program &p, const io::Dataset &data, int64_t gradAccum,
                                       int rank, int64_t step, int64_t micro, int64_t *tokens,
                                       int64_t *targets) {
  int64_t S = p.seqLen;
  io::BatchLayout l{p.microBatch, p.worldSize, gradAccum};
  for (int64_t b = 0; b < l.microBatch; ++b) {
    // ((step G + g) S) mod (n - S - 1), exactly: a run resumed at a late step
    // (any step count a checkpoint holds) must not overflow into a negative
    // start. The modulus is at least 1: Dataset::open checks.
    int64_t start = io::windowStart(data.size(), S, l.global(), step, l.sample(micro, rank, b));
    for (int64_t s = 0; s < S; ++s) {
      tokens[b * S + s] = data.token(start + s);
      targets[b * S + s] = data.token(start + s + 1);
    }
  }
}

void fsdp::runtime::detail::fillInputs(const Program &p, const RunOptions &o, const Inputs &data,
                                       bool eval, int rank, int64_t step, int64_t micro,
                                       char *input, int64_t *targets) {
  io::BatchLayout l{p.microBatch, p.worldSize, o.gradAccum};
  switch (p.inputKind) {
  case InputKind::Tokens:
    fillTokens(p, eval ? data.eval : data.train, o.gradAccum, rank, step, micro,
               reinterpret_cast<int64_t *>(input), targets);
    return;
  case InputKind::MaskedTokens:
    io::fillMaskedTokens(eval ? data.eval : data.train, p.seqLen, l, rank, step, micro,
                         o.maskTokenId, reinterpret_cast<int64_t *>(input), targets);
    return;
  case InputKind::Images: {
    const io::ImageSet &from = eval ? data.evalImages : data.trainImages;
    const Tensor &patches = p.tensors[p.tokens];
    if (patches.dtype == DType::F32) {
      io::fillImages(from, p.image, l, rank, step, micro, reinterpret_cast<float *>(input),
                     targets);
    } else { // bf16 compute: the patches rounded once, as a bf16 cast of them
      std::vector<float> wide(patches.numel());
      io::fillImages(from, p.image, l, rank, step, micro, wide.data(), targets);
      kernels::toBf16(wide.data(), reinterpret_cast<uint16_t *>(input), patches.numel());
    }
    return;
  }
  }
}

std::string fsdp::runtime::detail::lossNorm(const Program &p, const RunOptions &o,
                                            const Inputs &data, bool eval, int64_t step,
                                            LossNorm *norm) {
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
    io::BatchLayout l{p.microBatch, p.worldSize, o.gradAccum};
    int64_t n = io::maskedCount(eval ? data.eval : data.train, p.seqLen, l, step);
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

double fsdp::runtime::detail::lossWeight(const Program &p, const RunOptions &o, const Inputs &data,
                                         bool eval, int rank, int64_t step, int64_t micro) {
  if (p.inputKind != InputKind::MaskedTokens)
    return 1.0;
  io::BatchLayout l{p.microBatch, p.worldSize, o.gradAccum};
  return (double)io::maskedMicroCount(eval ? data.eval : data.train, p.seqLen, l, rank, step,
                                      micro);
}

// A deterministic initialisation that does not depend on the world size:
// each element's value is a function of the seed, the parameter's name and
// the element's index.
static uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string fsdp::runtime::detail::checkWeights(const Program &p, const io::WeightSource &w,
                                                std::vector<std::string> *ignored) {
  std::set<std::string> names;
  for (const Unit &u : p.units)
    for (const Param &prm : u.params)
      names.insert(prm.name);
  for (const Unit &u : p.units)
    for (const Param &prm : u.params) {
      auto it = w.tensors().find(prm.name);
      if (it == w.tensors().end())
        return w.path() + ": missing tensor '" + prm.name + "'";
      const std::string &file = w.fileOf(prm.name);
      if (it->second.shape != prm.shape) {
        std::string want, got;
        for (int64_t d : prm.shape)
          want += (want.empty() ? "" : ", ") + std::to_string(d);
        for (int64_t d : it->second.shape)
          got += (got.empty() ? "" : ", ") + std::to_string(d);
        return file + ": tensor '" + prm.name + "' has shape [" + got + "], the model needs [" +
               want + "]";
      }
      const std::string &dt = it->second.dtype;
      if (dt != "F32" && dt != "BF16" && dt != "F16")
        return file + ": tensor '" + prm.name + "' is " + dt + "; weights must be F32, BF16 or F16";
    }
  // Beyond the model's tensors, what the program says a checkpoint of it
  // may hold: a tied copy is the same tensor again; a head the model does
  // not have is ignored, named. Anything else is not this model's, and
  // reading the checkpoint as if it were would be silent loss.
  for (const auto &[name, info] : w.tensors()) {
    if (names.count(name) ||
        std::find(p.tiedCopies.begin(), p.tiedCopies.end(), name) != p.tiedCopies.end())
      continue;
    auto unused =
        std::find_if(p.unusedWeightPrefixes.begin(), p.unusedWeightPrefixes.end(),
                     [&](const std::string &prefix) { return name.rfind(prefix, 0) == 0; });
    if (unused != p.unusedWeightPrefixes.end()) {
      if (ignored)
        ignored->push_back(w.fileOf(name) + ": tensor '" + name + "' is not part of " +
                           p.modelName + " (" + *unused + "*); ignored");
      continue;
    }
    return w.fileOf(name) + ": tensor '" + name + "' is not a parameter of " + p.modelName +
           " (a checkpoint of another model, or of another configuration?)";
  }
  return "";
}

std::string fsdp::runtime::detail::initShards(const Program &p, const RunOptions &o,
                                              int shardMember, char *arena) {
  auto at = [&](int64_t offset) { return reinterpret_cast<float *>(arena + offset); };
  // A file or an HF checkpoint folder: each rank reads, from whichever shard
  // file holds it, only the byte ranges of its own shards.
  io::WeightSource reader;
  if (!o.weights.empty()) {
    std::string err = reader.open(o.weights);
    // Every parameter must be there with its shape: checked whole, before
    // any rank reads its shards.
    if (err.empty())
      err = checkWeights(p, reader);
    if (!err.empty())
      return err;
  }
  for (const Unit &u : p.units) {
    for (int64_t off : {u.shardOffset, u.gradShardOffset, u.expAvgOffset, u.expAvgSqOffset})
      std::memset(at(off), 0, u.shardNumel * 4);
    float *shard = at(u.shardOffset);
    for (const Param &prm : u.params) {
      ShardSlice slice = shardSlice(u, shardMember, prm);
      if (!slice.count)
        continue;
      if (!o.weights.empty()) {
        std::string err =
            reader.readF32(prm.name, slice.inParam, slice.count, shard + slice.inShard);
        if (!err.empty())
          return err;
        continue;
      }
      uint64_t nameHash = 1469598103934665603ull;
      for (char c : prm.name)
        nameHash = (nameHash ^ (unsigned char)c) * 1099511628211ull;
      bool isBias = prm.name.size() >= 5 && prm.name.compare(prm.name.size() - 5, 5, ".bias") == 0;
      for (int64_t i = 0; i < slice.count; ++i) {
        int64_t e = slice.inParam + i; // the parameter's element
        float v;
        if (prm.shape.size() >= 2) {
          uint64_t r1 = splitmix(o.seed ^ splitmix(nameHash ^ (uint64_t)e * 2));
          uint64_t r2 = splitmix(r1);
          double u1 = ((r1 >> 11) + 1) * 0x1.0p-53, u2 = (r2 >> 11) * 0x1.0p-53;
          v = (float)(0.02 * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
        } else {
          v = isBias ? 0.0f : 1.0f;
        }
        shard[slice.inShard + i] = v;
      }
    }
  }
  return "";
}

double fsdp::runtime::detail::learningRate(const RunOptions &o, int64_t step) {
  int64_t W = o.warmupSteps, T = o.steps;
  if (step <= W)
    return o.lr * double(step) / double(W);
  double progress = double(step - W) / double(T - W);
  switch (o.lrSchedule) {
  case RunOptions::Schedule::Constant:
    return o.lr;
  case RunOptions::Schedule::Linear:
    return o.minLr + (o.lr - o.minLr) * (1.0 - progress);
  case RunOptions::Schedule::Cosine:
    return o.minLr + (o.lr - o.minLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return o.lr;
}

std::string fsdp::runtime::detail::Inputs::open(const Program &p, const RunOptions &o) {
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

int64_t fsdp::runtime::detail::globalBatch(const Program &p, const RunOptions &o) {
  return p.microBatch * p.worldSize * o.gradAccum;
}

StepReport fsdp::runtime::detail::stepReport(const Program &p, const RunOptions &o, int64_t step,
                                             double lossSum, double lossDivisor, double gradNorm,
                                             double seconds) {
  int64_t G = globalBatch(p, o);
  StepReport r;
  r.step = step + 1;
  r.steps = o.steps;
  r.loss = lossSum / lossDivisor;
  r.gradNorm = gradNorm;
  r.lr = learningRate(o, r.step);
  r.stepTimeS = seconds;
  r.tokensPerS = (double)(G * p.seqLen) / seconds;
  r.predictedPeakBytes = p.predictedPeakBytes;
  return r;
}
