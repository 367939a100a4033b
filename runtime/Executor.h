//===- Executor.h - running a program on ranks -------------------*- C++ -*-===//
//
// The runtime executes; it decides nothing the plan decided. Each rank owns
// one arena laid out by the plan, a compute stream (its thread) and a
// communication stream (a second thread), joined by the program's events.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_EXECUTOR_H
#define FSDP_RUNTIME_EXECUTOR_H

#include "runtime/Program.h"
#include "runtime/io/Dataset.h"
#include "runtime/io/Images.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace fsdp::io {
class WeightSource;
}

namespace fsdp::runtime {

struct StopState;

struct RunOptions {
  int64_t steps = 1;
  uint64_t seed = 0;
  int64_t gradAccum = 1;
  std::string weights, data, saveWeights;
  // A --save-weights folder's largest shard, in bytes of tensor data
  // (transformers' max_shard_size; default its "5GB").
  int64_t maxShardSize = 5000000000;
  std::string dataDtype; // --data-dtype: "uint16", "uint32", "" (from the vocabulary)
  double timeoutS = 600; // --timeout: the longest wait on a peer
  // Checkpoints (io/Checkpoint.h): into `save` after every `saveEvery`-th step
  // (0: none) and after the last, the `keep` newest kept; `resume`: a
  // checkpoint folder, or a --save folder whose newest checkpoint is taken.
  std::string save, resume;
  int64_t saveEvery = 0, keep = 2;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  double clipGradNorm = 0;
  // The learning rate of step t (detail::learningRate): warmup, then the
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
  int64_t maskTokenId = 103;
  // The process's stop signal and record (runtime/Signals.h), fsdp-run's:
  // null, the executors' own module's.
  StopState *stopState = nullptr;
};

struct StepReport {
  int64_t step = 0, steps = 0;
  double loss = 0, gradNorm = 0, stepTimeS = 0, tokensPerS = 0;
  double lr = 0; // the step's learning rate
  bool evaluated = false;
  double evalLoss = 0;            // when evaluated: the mean loss over the eval batches
  int64_t peakBytes = 0;          // largest rank's measured arena high-water mark
  int64_t predictedPeakBytes = 0; // the plan's
  int64_t outsideArenaBytes = 0;  // largest rank's allocations outside the arena
};

/// Called on rank 0 after each optimizer step; an error it returns (a failed
/// --metrics write) stops the run.
using StepCallback = std::function<std::string(const StepReport &)>;

/// The most ranks the threads backend runs: two threads a rank in one
/// process. Measured on a 2-core machine: 2048 ranks of the tiny GPT-2 train
/// reliably (tests/lit/fsdp-run/many-ranks.test; 20 of 20 runs, and 6 of 6
/// beside two busy processes, since OpenBLAS's buffer table can no longer
/// overflow: kernels/cpu.cpp); 4096 and 8192 ran a step alone (20 s; 83 s
/// and 12.5 GB).
/// Past 2048 a program needs --backend mpi.
inline constexpr int64_t kMaxThreadRanks = 2048;
/// "" when the threads backend runs `program`, else the refusal, pointing to
/// MPI (`plan` names the program in the command it suggests).
std::string threadsBackendRefuses(const program::Program &program, const std::string &plan);

namespace detail {
struct Inputs;
}
/// Runs `program` with every rank a thread of this process. Calls `onStep`
/// once per optimizer step (from rank 0). `inputs`: the data already opened
/// (detail::Inputs::open), or null to open it here. Returns "" or the first
/// error, naming the rank and the instruction.
std::string runThreads(const program::Program &program, const RunOptions &options,
                       const StepCallback &onStep, const detail::Inputs *inputs = nullptr);

class Communicator;
/// Runs this process's rank of `program` with `comm` (MPI: one process a
/// rank). `onStep` is called on rank 0.
std::string runRank(const program::Program &program, const RunOptions &options, Communicator &comm,
                    const StepCallback &onStep);

/// The part of parameter `prm` (of unit `u`) in shard member `member`'s
/// shard: its elements [inParam, inParam + count), at element inShard of the
/// shard; count 0 where the shard holds none of it.
struct ShardSlice {
  int64_t inParam = 0, inShard = 0, count = 0;
};
inline ShardSlice shardSlice(const program::Unit &u, int64_t member, const program::Param &prm) {
  int64_t lo = member * u.shardNumel, hi = lo + u.shardNumel;
  int64_t a = std::max(lo, prm.offset), b = std::min(hi, prm.offset + prm.numel);
  if (a >= b)
    return {};
  return {a - prm.offset, a - lo, b - a};
}

namespace detail {
// What the trainer (runtime/Trainer.h) takes of a run's data and weights on
// every device (Step.cpp), so that every rank trains the same model on the
// same data.

/// The data of a run, as the program's inputs.kind takes it: token streams
/// (tokens, masked_tokens: --data or synthetic, --eval-data) or images and
/// labels (--data and --labels, --eval-data and --eval-labels), read and
/// checked whole once, before the first step.
struct Inputs {
  io::Dataset train, eval;
  io::ImageSet trainImages, evalImages;
  std::string open(const program::Program &p, const RunOptions &options);
  int64_t bytes() const {
    return train.bytes() + eval.bytes() + trainImages.bytes() + evalImages.bytes();
  }
};

/// Rank `rank`'s tokens and targets ([micro_batch, seq_len] each) for
/// micro-step `micro` of optimizer step `step` (DESIGN.md's data semantics).
void fillTokens(const program::Program &p, const io::Dataset &data, int64_t gradAccum, int rank,
                int64_t step, int64_t micro, int64_t *tokens, int64_t *targets);

/// Rank `rank`'s inputs for micro-step `micro` of step `step` (or, `eval`,
/// of eval batch `step`), as the program's inputs.kind says: `input` receives
/// the bytes of tensor p.tokens (i64 tokens, or f32 or bf16 patches),
/// `targets` the elements of p.targets (io/Batches.h).
void fillInputs(const program::Program &p, const RunOptions &options, const Inputs &data, bool eval,
                int rank, int64_t step, int64_t micro, char *input, int64_t *targets);

/// How the loss of step `step` (from 0; with `eval`, of eval batch `step`)
/// is normalised, so that it and its gradients are those of the step's mean
/// loss. `gradScale` scales the loss's gradient (cross_entropy_grad);
/// `divisor` turns the sum, over ranks and micro-steps, of each micro-step's
/// loss tensor times its lossWeight into the step's loss. Tokens: each
/// micro-step's loss is the mean over its B x S tokens, so 1 / (G S), weight
/// 1 and divisor R A; images: the mean over its B images, 1 / G, 1 and R A;
/// masked tokens: the mean over the micro-step's selected positions (the
/// kernels skip kernels::kIgnoreIndex targets; 0 when there are none), so
/// 1 / n, weight the rank's selected positions in that micro-step
/// (io::maskedMicroCount) and divisor n, n the selected positions of the
/// whole global batch (io::maskedCount). A masked step (or eval batch) with
/// none selected is an error naming it.
struct LossNorm {
  float gradScale = 1;
  double divisor = 1;
};
std::string lossNorm(const program::Program &p, const RunOptions &options, const Inputs &data,
                     bool eval, int64_t step, LossNorm *norm);

/// The weight of rank `rank`'s loss tensor after micro-step `micro` of step
/// `step` (with `eval`, of eval batch `step`) in the sum LossNorm::divisor
/// divides: 1, or for masked tokens the selected positions its mean is over.
double lossWeight(const program::Program &p, const RunOptions &options, const Inputs &data,
                  bool eval, int rank, int64_t step, int64_t micro);

/// Fills the rank's persistent buffers of every unit in `arena`, host memory
/// laid out as the plan's arena (only the units' shard ranges are written):
/// the parameter shard of member `shardMember` from options.weights (its byte
/// ranges only, after checking every tensor's presence, shape and dtype) or
/// the seeded initialisation; the gradient shard and Adam's moments zeroed.
/// Returns "" or the error.
std::string initShards(const program::Program &p, const RunOptions &options, int shardMember,
                       char *arena);

/// Every parameter of `p` is in `weights` with its shape and a dtype the
/// runtime reads (F32, BF16, F16), and every tensor of `weights` is one of
/// them, one of the program's tied copies, or under one of its unused weight
/// prefixes (each such tensor named in `ignored`); an error names the file
/// and the tensor.
std::string checkWeights(const program::Program &p, const io::WeightSource &weights,
                         std::vector<std::string> *ignored = nullptr);

/// A step's report from the sum over ranks of their micro-steps' losses,
/// each times its lossWeight (divided by the step's LossNorm::divisor), the gradient norm and the
/// step's seconds (peakBytes and outsideArenaBytes are the caller's).
StepReport stepReport(const program::Program &p, const RunOptions &options, int64_t step,
                      double lossSum, double lossDivisor, double gradNorm, double seconds);

/// Sequences a step takes over all ranks: micro-batch x ranks x grad-accum.
int64_t globalBatch(const program::Program &p, const RunOptions &options);

/// The learning rate of step `step` (counted from 1), DESIGN.md's formula.
double learningRate(const RunOptions &options, int64_t step);

} // namespace detail

} // namespace fsdp::runtime

#endif
