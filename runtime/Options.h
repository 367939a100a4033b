//===- Options.h - what a run is asked to do ---------------------*- C++ -*-===//
//
// A run's options (fsdp-run's flags, docs/fsdp-run.md) and the report of
// each optimizer step: plain data shared by the trainer, the data and weights
// it reads, and the front ends.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_OPTIONS_H
#define FSDP_RUNTIME_OPTIONS_H

#include "runtime/weights/Safetensors.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>

namespace fsdp::runtime {

struct StopState;

struct RunOptions {
  int64_t steps = 1;
  uint64_t seed = 0;
  int64_t gradAccum = 1;
  std::string weights, data, saveWeights;
  // A --save-weights folder's largest shard, in bytes of tensor data
  // (transformers' max_shard_size; default its "5GB").
  int64_t maxShardSize = weights::kDefaultMaxShardSize;
  // --save-dtype: "f32", "bf16", "" (the program's param_dtype).
  std::string saveDtype;
  std::string dataDtype; // --data-dtype: "uint16", "uint32", "" (from the vocabulary)
  double timeoutS = 600; // --timeout: the longest wait on a peer
  // Checkpoints (checkpoint/Checkpoint.h): into `save` after every `saveEvery`-th step
  // (0: none) and after the last, the `keep` newest kept; `resume`: a
  // checkpoint folder, or a --save folder whose newest checkpoint is taken.
  std::string save, resume;
  int64_t saveEvery = 0, keep = 2;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  double clipGradNorm = 0;
  // The learning rate of step t (runtime::learningRate, Trainer.h): warmup, then the
  // schedule from lr down to minLr over the steps left.
  enum class Schedule { Constant, Linear, Cosine } lrSchedule = Schedule::Constant;
  int64_t warmupSteps = 0;
  double minLr = 0;
  // Held-out loss after the update of every evalEvery-th step (0: only the
  // last), over evalBatches batches of evalData.
  std::string evalData;
  int64_t evalEvery = 0, evalBatches = 1;
  std::string trace; // write the measured timeline here (Chrome trace)
  // Image programs: the labels of `data` and of `evalData` (.npy).
  std::string labels, evalLabels;
  // Masked-LM programs: the token a selected position's input becomes.
  // Unless given (maskTokenIdGiven), the token file's sidecar's mask_id
  // when it has one (data::Inputs::maskTokenId).
  int64_t maskTokenId = 103;
  bool maskTokenIdGiven = false;
  // --shuffle SEED: each epoch's windows in a permutation of their own
  // (docs/sampling.md); without it, the sequential order.
  bool shuffle = false;
  uint64_t shuffleSeed = 0;
  // With --resume: the token count the checkpoint's run trained on (0: not
  // recorded), which this run's stream must have.
  int64_t resumeTokens = 0;
  // The process's stop signal and record (runtime/Signals.h), fsdp-run's:
  // null, the executors' own module's.
  StopState *stopState = nullptr;
  // The flags the front end was given ("--lr", "--steps", ...): a resumed
  // run takes the training settings not given from its checkpoint, and the
  // plan's grad-accum is the default of a run not given --grad-accum.
  std::set<std::string> given;
  // --synthetic-data: a token model trains without --data on seeded tokens.
  bool syntheticData = false;
  // Where the process of rank 0 says what opening the data found (a mask
  // id that occurs in the text) when each process opens its own (MPI,
  // NCCL); null: not said.
  std::function<void(const std::string &)> dataWarning;
};

/// --lr-schedule's names.
inline const char *scheduleName(RunOptions::Schedule s) {
  return s == RunOptions::Schedule::Linear   ? "linear"
         : s == RunOptions::Schedule::Cosine ? "cosine"
                                             : "constant";
}
inline std::optional<RunOptions::Schedule> parseSchedule(const std::string &name) {
  for (auto s :
       {RunOptions::Schedule::Constant, RunOptions::Schedule::Linear, RunOptions::Schedule::Cosine})
    if (name == scheduleName(s))
      return s;
  return std::nullopt;
}

struct StepReport {
  int64_t step = 0, steps = 0;
  double loss = 0, gradNorm = 0, stepTimeS = 0, tokensPerS = 0;
  double samplesPerS = 0; // sequences, or images, a second
  double mfu = 0;         // model FLOPs over the devices' peak (0: the peak is unknown)
  double lr = 0;          // the step's learning rate
  bool evaluated = false;
  double evalLoss = 0;            // when evaluated: the mean loss over the eval batches
  double evalAccuracy = -1;       // an image classifier's, when evaluated (-1: none)
  int64_t peakBytes = 0;          // largest rank's measured arena high-water mark
  int64_t predictedPeakBytes = 0; // the plan's
  int64_t outsideArenaBytes = 0;  // largest rank's allocations outside the arena
  // offload optimizer: the host pool's measured high-water mark and the
  // plan's host_bytes (both 0 without offload).
  int64_t hostPeakBytes = 0, predictedHostPeakBytes = 0;
  // Token data: the epoch (from 1) of the step's first sample, that
  // sample's place in it, the samples an epoch has (0: not token data), and
  // whether the step's samples finished an epoch.
  int64_t epoch = 0, epochPosition = 0, epochSamples = 0;
  bool epochEnded = false;
};

/// Called on rank 0 after each optimizer step; an error it returns (a failed
/// --metrics write) stops the run.
using StepCallback = std::function<std::string(const StepReport &)>;

} // namespace fsdp::runtime

#endif
