//===- Step.cpp - what both executors do around the program's phases ------===//
//
// The CPU executor (Executor.cpp) and the device executor (DeviceExecutor.cpp)
// run the same training loop around their own memory and kernels: the data of
// each micro-step, the initial shards, the step's report, the learning rate,
// the held-out loss's schedule, the checks after a step and the measured
// trace. Declared in Executor.h (namespace detail).
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Signals.h"
#include "runtime/TraceFormat.h"
#include "runtime/io/Batches.h"
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Dataset.h"
#include "runtime/io/Files.h"
#include "runtime/io/Safetensors.h"
#include "runtime/kernels/cpu.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <unistd.h>

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
    int64_t lo = shardMember * u.shardNumel, hi = lo + u.shardNumel;
    float *shard = at(u.shardOffset);
    for (const Param &prm : u.params) {
      int64_t a = std::max(lo, prm.offset), b = std::min(hi, prm.offset + prm.numel);
      if (a >= b)
        continue;
      if (!o.weights.empty()) {
        std::string err = reader.readF32(prm.name, a - prm.offset, b - a, shard + (a - lo));
        if (!err.empty())
          return err;
        continue;
      }
      uint64_t nameHash = 1469598103934665603ull;
      for (char c : prm.name)
        nameHash = (nameHash ^ (unsigned char)c) * 1099511628211ull;
      bool isBias = prm.name.size() >= 5 && prm.name.compare(prm.name.size() - 5, 5, ".bias") == 0;
      for (int64_t e = a; e < b; ++e) {
        float v;
        if (prm.shape.size() >= 2) {
          uint64_t r1 = splitmix(o.seed ^ splitmix(nameHash ^ (uint64_t)(e - prm.offset) * 2));
          uint64_t r2 = splitmix(r1);
          double u1 = ((r1 >> 11) + 1) * 0x1.0p-53, u2 = (r2 >> 11) * 0x1.0p-53;
          v = (float)(0.02 * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
        } else {
          v = isBias ? 0.0f : 1.0f;
        }
        shard[e - lo] = v;
      }
    }
  }
  return "";
}

std::string fsdp::runtime::detail::resumeShards(const Program &p, const RunOptions &o,
                                                Communicator &comm, char *arena, int64_t *first) {
  std::string err = io::resumeCheckpoint(o.resume, p, comm, globalBatch(p, o), arena, first);
  // fsdp-run checked the checkpoint it saw at start; another run saving to
  // the folder may have made a newer one since. Every rank has the same step.
  if (err.empty() && *first > o.steps)
    err = o.resume + ": its newest checkpoint is of step " + std::to_string(*first) +
          ", past --steps " + std::to_string(o.steps);
  return err;
}

std::string fsdp::runtime::detail::checkFinite(const StepReport &r) {
  bool loss = std::isfinite(r.loss), norm = std::isfinite(r.gradNorm);
  if (loss && norm)
    return "";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "step %lld: the %s is %g, not finite: the run stops here, and "
                "no checkpoint of this state is written",
                (long long)r.step, loss ? "gradient norm" : "loss", loss ? r.gradNorm : r.loss);
  return buf;
}

std::string fsdp::runtime::detail::afterStep(const RunOptions &o, StepReport &r, Communicator &comm,
                                             const StepCallback &onStep,
                                             const std::function<double()> &evaluate,
                                             const std::function<std::string()> &save, bool *stop) {
  testSignal(comm.rank(), r.step);
  if (evalDue(o, r.step)) {
    r.evaluated = true;
    r.evalLoss = evaluate();
  }
  std::string err = comm.rank() == 0 ? onStep(r) : "";
  if (err.empty())
    err = checkFinite(r);
  bool saved = false;
  std::string saving = "step " + std::to_string(r.step) + ": the checkpoint save";
  if (err.empty() && saveDue(o, r.step)) {
    comm.at(Group::World, saving, true);
    err = save();
    saved = err.empty();
  }
  // A stop signal: every rank stops after the same step, whichever rank got
  // it and whenever (a signal during the save above stops here too, after
  // it), with this step's checkpoint when --save is given.
  int signal = 0;
  if (err.empty()) {
    comm.at(Group::World, "step " + std::to_string(r.step) + ": the stop agreement");
    err = agreeStop(comm, o.stopState, stop, &signal);
  }
  if (err.empty() && *stop) {
    if (!o.save.empty() && !saved) {
      comm.at(Group::World, saving, true);
      err = save();
      saved = err.empty();
    }
    if (err.empty())
      recordStop(o.stopState,
                 {signal, r.step, false, saved ? io::checkpointPath(o.save, r.step) : ""});
  }
  return err;
}

bool fsdp::runtime::detail::saveDue(const RunOptions &o, int64_t step) {
  return !o.save.empty() && (step == o.steps || (o.saveEvery > 0 && step % o.saveEvery == 0));
}

double fsdp::runtime::detail::clipScale(const RunOptions &o, double gradNorm) {
  if (o.clipGradNorm <= 0)
    return 1.0;
  double coef = o.clipGradNorm / (gradNorm + 1e-6);
  return coef < 1.0 ? coef : 1.0;
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

bool fsdp::runtime::detail::evalDue(const RunOptions &o, int64_t step) {
  return !o.evalData.empty() && (step == o.steps || (o.evalEvery > 0 && step % o.evalEvery == 0));
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

std::string fsdp::runtime::detail::startTogether(Communicator &comm, const RunOptions &o,
                                                 int64_t first, bool *stop) {
  // The barrier carries the stop signals of start-up: a run asked to stop
  // before its first step stops before it, on every rank.
  testSignal(comm.rank(), 0);
  int signal = 0;
  comm.at(Group::World, "before the first step: the start agreement");
  std::string err = agreeStop(comm, o.stopState, stop, &signal);
  if (!err.empty())
    return "stopped before the first step: " + comm.error();
  if (*stop)
    recordStop(o.stopState, {signal, first, true, ""});
  return "";
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

// The measured timeline in the predicted one's format: a pid per rank, a
// thread per stream, each event with its unit and phase.
std::string fsdp::runtime::detail::writeTrace(const std::string &path, const Program &p,
                                              const std::vector<RankTrace> &ranks) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const RankTrace &rank : ranks) {
    int r = rank.rank;
    trace::addRankHeader(events, r, "measured");
    // Memory as a counter: the unit buffers that come and go (gathered
    // parameters, unsharded gradients), in the order they did.
    std::vector<std::pair<double, int64_t>> changes;
    for (int s = 0; s < 2; ++s)
      for (const TraceRecord &t : rank.records[s]) {
        const Instruction &i = *t.inst;
        if (i.unit < 0 || i.unit >= (int64_t)p.units.size())
          continue;
        int64_t padded = p.units[i.unit].paddedNumel;
        if (i.op == Op::AllGather)
          changes.push_back({t.start, padded * (i.bf16 ? 2 : 4)});
        else if (i.op == Op::Alloc)
          changes.push_back({t.start, padded * 4});
        else if (i.op == Op::Free)
          changes.push_back({t.end, -padded * (i.freeParams && p.paramDtype == "bf16" ? 2 : 4)});
      }
    std::sort(changes.begin(), changes.end());
    int64_t live = 0;
    for (auto [when, delta] : changes) {
      live += delta;
      events.push_back({{"name", "unsharded bytes"},
                        {"ph", "C"},
                        {"pid", r},
                        {"ts", when * 1e6},
                        {"args", {{"bytes", live}}}});
    }
    for (int s = 0; s < 2; ++s)
      for (const TraceRecord &t : rank.records[s]) {
        const Instruction &i = *t.inst;
        std::string phase = t.optimizer ? "optimizer" : i.phase.empty() ? "step" : i.phase;
        std::string unit =
            i.unit >= 0 && i.unit < (int64_t)p.units.size() ? p.units[i.unit].name : "root";
        nlohmann::ordered_json ev = {
            {"name", opName(i.op)},
            {"cat", phase},
            {"ph", "X"},
            {"pid", r},
            {"tid", s},
            {"ts", t.start * 1e6},
            {"dur", (t.end - t.start) * 1e6},
            {"args", {{"unit", unit}, {"phase", phase}, {"step", t.step}}}};
        if (!i.module.empty())
          ev["args"]["module"] = i.module;
        events.push_back(ev);
      }
  }
  nlohmann::ordered_json doc = {{"traceEvents", events},
                                {"displayTimeUnit", "ms"},
                                {"otherData", {{"kind", "measured"}, {"world_size", p.worldSize}}}};
  // Whole or not at all: a temporary beside it, made durable, then renamed.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  io::removeTree(tmp);
  std::string err = io::writeFileDurable(tmp, doc.dump() + "\n");
  if (err.empty())
    err = io::renameDurable(tmp, path);
  if (!err.empty()) {
    io::removeTree(tmp);
    return path + ": cannot write the trace: " + err;
  }
  return "";
}
