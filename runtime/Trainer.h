//===- Trainer.h - one training loop over a rank's device --------*- C++ -*-===//
//
// The training loop is written once, over a small device interface: the CPU
// rank (Executor.cpp: the rank's thread runs the compute list, a second
// thread the comm list, joined by the program's events) and the CUDA rank
// (DeviceExecutor.cpp: two streams joined by CUDA events over one device
// allocation) implement RankDevice; everything else a rank does lives here:
// the step loop, micro-steps and the loss's weighting, eval, the shards'
// initialisation, resume and saves, clipping and AdamW over a shard, the
// collectives' dtype paths, the step's report and the measured trace.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_TRAINER_H
#define FSDP_RUNTIME_TRAINER_H

#include "runtime/Communicator.h"
#include "runtime/Executor.h"
#include "runtime/Program.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/data/Inputs.h"

#include <atomic>
#include <string>
#include <vector>

namespace fsdp::runtime {

/// A rank's arena as both devices address it: the plan's offsets from one
/// base (host or device memory), and the high-water mark of the bytes the
/// kernels have touched, which is the measured peak.
class ArenaAccess {
public:
  explicit ArenaAccess(const program::Program &program) : program(program) {}
  template <typename T = float> T *at(int64_t offset) {
    return reinterpret_cast<T *>(arena + offset);
  }
  /// Tensor `id`, counted as touched.
  template <typename T = float> T *tensor(int64_t id) {
    const program::Tensor &ten = program.tensors[id];
    touch(ten.offset, ten.bytes());
    return at<T>(ten.offset);
  }
  /// Both of a CPU rank's streams (threads) touch: an atomic maximum.
  void touch(int64_t offset, int64_t bytes) {
    int64_t end = offset + bytes, seen = highWater.load(std::memory_order_relaxed);
    while (end > seen && !highWater.compare_exchange_weak(seen, end, std::memory_order_relaxed)) {
    }
  }
  int64_t peakBytes() const { return highWater.load(std::memory_order_relaxed); }

  /// The host pool (offload optimizer: the moments, master shards and
  /// gradient copies), laid out as the plan says, and the high-water mark
  /// of its bytes touched: the measured host peak.
  template <typename T = float> T *hostAt(int64_t offset) {
    return reinterpret_cast<T *>(hostPool + offset);
  }
  void touchHost(int64_t offset, int64_t bytes) {
    hostHighWater = std::max(hostHighWater, offset + bytes); // the rank's compute thread only
  }
  int64_t hostPeakBytes() const { return hostHighWater; }
  /// The host pool's first byte (null without offload).
  char *hostPoolData() const { return hostPool; }

protected:
  const program::Program &program;
  char *arena = nullptr;
  char *hostPool = nullptr; // program.hostBytes, host memory; null without offload

private:
  std::atomic<int64_t> highWater{0};
  int64_t hostHighWater = 0;
};

/// One executed instruction, for the measured trace.
struct TraceRecord {
  const program::Instruction *inst;
  int stream; // 0 compute, 1 comm
  bool optimizer;
  int64_t step;
  double start, end; // seconds since the run began
};
struct RankTrace {
  int rank;
  const std::vector<TraceRecord> *records; // [2]: compute, comm
};
/// Writes the measured timeline (Chrome trace, the predicted one's format).
std::string writeTrace(const std::string &path, const program::Program &p,
                       const std::vector<RankTrace> &ranks);
/// Writes one rank's timeline: --trace's path on rank 0, PATH.rankN on
/// rank N (a process a rank: MPI, NCCL).
std::string writeRankTrace(const std::string &path, const program::Program &p, int rank,
                           const std::vector<TraceRecord> *records);

/// Why a rank stops: thrown by RankDevice::fail, caught by Trainer::run.
struct RankFailure {
  std::string message;
};

/// The phases a rank runs: a training micro-step, an eval batch's
/// micro-step (the same lists) and the optimizer step.
enum class PhaseKind { MicroStep, Eval, Optimizer };
/// "micro_step", "eval", "optimizer": how errors and traces name it.
const char *phaseName(PhaseKind kind);
struct PhaseRun;
/// The lists `run` runs, as errors and traces name them: phaseName's, or a
/// step's "first_micro_step" or "last_micro_step" where the program has
/// lists of its own for them.
const char *phaseName(const program::Program &p, const PhaseRun &run);
/// What runs after a phase: the next micro-step, a step's last micro-step
/// under grad_sync last (its own lists), the optimizer step, or the host,
/// which synchronizes with the device first (a step's end, an eval batch's).
enum class NextPhase { MicroStep, LastMicroStep, Optimizer, Host };

/// One execution of a phase, as the trainer asks the device for it.
struct PhaseRun {
  const program::Phase &phase;
  PhaseKind kind;
  NextPhase next;
  /// Where the run is ("step 2 micro_step 1/2"), for --timeout's report.
  std::string place;
  float lossScale;   // cross_entropy_grad's (LossNorm::gradScale)
  int64_t step;      // optimizer steps taken once this phase is done: AdamW's t
  int64_t traceStep; // the step the trace files it under
  bool traced;       // into the measured trace (not eval)
  int64_t micro = 0; // the micro-step's index within its step or eval batch
  bool optimizer() const { return kind == PhaseKind::Optimizer; }
};

/// AdamW over `count` elements of a shard (kernels::adamw's arguments).
struct AdamWSlice {
  float *param;
  const float *grad;
  float *expAvg, *expAvgSq;
  int64_t count, step;
  double lr, beta1, beta2, eps, weightDecay, gradScale;
};

/// kernels::adamw over `slice` on up to `threads` host threads, each a
/// contiguous chunk of at least `minChunk` elements (fewer threads where the
/// slice is small, or where no more can be started). The update is
/// element-wise, so the result is one thread's, bit for bit.
void hostAdamwThreads(const AdamWSlice &slice, int threads, int64_t minChunk);

/// A rank's device as the trainer drives it (IREE's HAL device, in small):
/// memory (the arena, the shards moved in and out through a host image of
/// it, the inputs), running a phase's two lists through Dispatch.h and
/// runCollective, the collectives, and synchronisation with the host. Errors
/// are thrown (fail); the trainer catches them at the run's end.
class RankDevice : public ArenaAccess {
public:
  RankDevice(const program::Program &p, const RunOptions &options, Communicator &host)
      : ArenaAccess(p), options(options), host(host), logits(classifierLogits(p)) {}
  /// The logits an image classifier's cross_entropy reads in a micro-step
  /// (null: not an image classifier).
  static const program::Tensor *classifierLogits(const program::Program &p);
  virtual ~RankDevice() = default;

  /// Allocates the arena, the host image of the shards and what runs the
  /// two lists (threads, or streams and events).
  virtual void setUp() = 0;
  /// After the run (`ok`: without failure): frees what may be freed.
  virtual void tearDown(bool ok) = 0;

  /// Host memory laid out as the arena, of which the units' shards are
  /// initialised, resumed and saved (the arena itself on the CPU).
  virtual char *shardImage() = 0;
  /// Every unit's four shards from the host image into the arena, and back.
  virtual void shardsIn() = 0;
  virtual void shardsOut() = 0;

  /// Host memory for the input (tensor p.tokens' bytes) and the targets of
  /// the micro-step about to run, then their move into the arena.
  struct InputBuffers {
    char *input;
    int64_t *targets;
  };
  virtual InputBuffers inputBuffers(PhaseKind kind, int64_t index) = 0;
  virtual void inputsIn() = 0;

  /// Runs (or enqueues) the phase's compute and comm lists (runPhase): the
  /// compute instructions through Dispatch.h, the collectives through
  /// runCollective.
  void run(const PhaseRun &phaseRun);
  /// Keeps the loss tensor of micro-step `micro` for losses().
  virtual void keepLoss(int64_t micro) = 0;
  /// An image classifier's eval keeps each micro-step's logits (the
  /// cross_entropy's input, copied when that kernel has read them, before
  /// the arena reuses their bytes) for the accuracy: the bytes of one
  /// micro-step's (0: the program keeps none), whether the phase running
  /// keeps them, the copy (into the running micro-step's slot; the
  /// kernels' adapters call it), and after synchronize the kept logits,
  /// micro-step by micro-step (`reader` as for losses()).
  const program::Tensor *logitsTensor() const { return logits; }
  int64_t logitsBytes() const { return logits ? logits->bytes() : 0; }
  bool keepsLogits() const { return running && running->kind == PhaseKind::Eval && logits; }
  virtual void keepLogits(const void *logits, int64_t bytes) = 0;
  virtual const char *keptLogits(const char *reader) = 0;
  /// The host waits until the device has done all it was given (`what`
  /// names the wait in errors).
  virtual void synchronize(const std::string &what) = 0;
  /// After synchronize: the kept losses, micro-step by micro-step (`reader`
  /// names the host's read for the emulated device's checker).
  virtual const float *losses(const char *reader) = 0;
  /// After synchronize: the gradient norm of the last grad_norm.
  virtual double stepGradNorm() = 0;
  /// The gradient norm as the optimizer step reads it, within its phase.
  virtual double clippingNorm() = 0;
  /// Zeroes `bytes` at `dst` in the arena, in order with the compute list
  /// (`why`, or null: what for, in the device's errors).
  virtual void zero(void *dst, int64_t bytes, const char *why) = 0;
  virtual void adamw(const AdamWSlice &slice) = 0;
  /// accumulate (grad_sync last), in order with the compute list:
  /// acc[k] += grads[k] for k < n, the gradients f32 or bf16 (widened).
  virtual void accumulate(float *acc, const void *grads, int64_t n, bool bf16) = 0;
  /// reshard (reshard_after_forward = N), in order with the compute list:
  /// `bytes` from src to dst, within the arena.
  virtual void copy(void *dst, const void *src, int64_t bytes) = 0;
  /// offload optimizer, in order with the compute list: `bytes` of the
  /// arena at `src` into the host pool at `dst`, landed when this returns
  /// (the host reads them next); and from the host pool into the arena,
  /// which the host does not write again before its next toHost.
  virtual void toHost(void *dst, const void *src, int64_t bytes) = 0;
  virtual void toDevice(void *dst, const void *src, int64_t bytes) = 0;
  /// offload all, in order with the comm list: `bytes` of a parameter
  /// shard (or its bf16 copy) from the host pool into the arena, where the
  /// gather after it reads them.
  virtual void shardIn(void *dst, const void *src, int64_t bytes) = 0;
  /// AdamW on the host over the host pool (offload optimizer).
  virtual void hostAdamw(const AdamWSlice &slice);
  /// The host is about to write `bytes` at `host` in the host pool (`what`
  /// names the write for the emulated device's checker).
  virtual void hostWrites(void *host, int64_t bytes, const char *what) {}
  /// offload all with bf16 gathers: unit u's master shard rounded into its
  /// bf16 copy, which the gathers send (after each update, and at start).
  void roundGatherCopy(const program::Unit &u);
  /// This rank's member index in its reshard group (reshard_after_forward).
  int reshardMember() const { return host.memberIndex(Group::Reshard); }

  /// A tensor-parallel instruction (tp_all_gather, tp_reduce_scatter,
  /// tp_all_reduce, tp_chunk, tp_unchunk), in order with the compute list:
  /// its collective over the tp group (Group::Tp) through the device's
  /// primitives below.
  void tensorParallel(const program::Instruction &inst);
  /// The device's tensor-parallel primitives (f32), in order with the
  /// list that calls them: over the tp group `g` (the compute stream's
  /// Group::Tp, the comm stream's Group::TpGrad), "" or why they failed. A
  /// device that runs no tensor parallelism says so.
  virtual std::string tpAllGather(const void *src, void *dst, int64_t bytes);
  virtual std::string tpReduceScatter(const float *src, float *dst, int64_t count);
  virtual std::string tpAllReduce(Group g, float *buf, int64_t count);
  /// The comm stream's sum over Group::TpGrad of `part` (`count`
  /// elements) of piece `piece` of `pieces`, each piece held by tp /
  /// pieces ranks: all-reduced as `pieces` slots of `count`, this rank's
  /// part in its piece's and zeros in the others (adding a zero is exact),
  /// its piece's slot copied back.
  virtual std::string tpAllReduceSlots(float *part, int64_t count, int64_t piece, int64_t pieces);
  /// The most elements tpAllReduceSlots takes in this program (0: none):
  /// the devices hold its slots outside the arena, sized at set-up.
  int64_t tpSlotsNumel() const;
  /// What of unit `u`'s gradient shard this rank counts in the grad norm,
  /// so that each element of the model counts once: the whole shard; under
  /// tp, each parameter's slice on the first tp rank holding its piece
  /// (the norm is then summed over the shard group and Group::TpGrad).
  std::vector<program::ShardSlice> gradNormSlices(const program::Unit &u) const;
  /// x[r D + j] += bias[j] for r < rows, j < D.
  virtual void addBias(float *x, const float *bias, int64_t rows, int64_t D);

  /// The comm list's part of runCollective, in order on the comm stream:
  /// the name of the collective next made (Communicator::at), the two
  /// conversions, the collectives on the shard group (counts per member)
  /// and on the replica group; each returns "" or why it failed.
  virtual void nameCollective(Group g, const std::string &site, const char *kind) = 0;
  virtual void toBf16(const float *x, uint16_t *out, int64_t n) = 0;
  virtual void fromBf16(const uint16_t *x, float *out, int64_t n) = 0;
  /// dst[j count ..] = member j's src over group `g` (the shard group, or
  /// the reshard group from the resharded copies), `count` elements each.
  virtual std::string allGather(Group g, const void *src, void *dst, int64_t count,
                                program::DType dtype) = 0;
  /// shard[k] += the sum over the shard group of member m's src[m count + k]
  /// (m this member), in `dtype`; `staging` is the plan's for the sum.
  virtual std::string reduceScatterAdd(const void *src, float *shard, int64_t count,
                                       program::DType dtype, void *staging) = 0;
  virtual std::string allReduce(float *buf, int64_t count) = 0;
  /// grad_norm: the sum of squares of every gradient shard, over the shard
  /// group (named `site`); the norm is clippingNorm's and stepGradNorm's.
  virtual std::string reduceGradNorm(const program::Instruction &inst, const std::string &site) = 0;

  /// The measured trace's time origin, before the first step.
  virtual void traceFrom() {}
  /// After a step's synchronize (the device's timing events read back).
  virtual void stepDone() {}
  /// The bytes this rank holds outside the arena (the step's report).
  virtual int64_t outsideArenaBytes() const = 0;

  /// Stops the peers' collectives (and this rank's other stream) with
  /// `message`, "rank N: why".
  virtual void abort(const std::string &message) = 0;
  /// How the rank reports failing for `why`: itself, or what the device
  /// knows better (its own --timeout report).
  virtual std::string failure(const std::string &why) { return why; }
  /// Where the rank is, for an error that does not say it ("" or
  /// "micro_step.compute[3] (linear)").
  virtual std::string place() const { return ""; }
  [[noreturn]] void fail(const std::string &why);

  /// optimizer_step of unit `u` in the phase running: AdamW over this rank's
  /// shard of it, a parameter at a time (decay only where the parameter
  /// decays), clipped to --clip-grad-norm, then the gradient shard zeroed
  /// for the next step. Under offload optimizer the AdamW is the host's,
  /// over the host pool: the gradient shard copied out, the master shard
  /// copied back into the parameter shard.
  void optimizerStep(const program::Unit &u);

  /// Both streams' trace records: the measured timeline.
  std::vector<TraceRecord> records[2];

protected:
  virtual void runPhase(const PhaseRun &run) = 0;
  /// A comm instruction of the phase run at `place`, its dtype path
  /// included (bf16 rounding into the gathered slot, bf16 gradients widened
  /// or f32 ones rounded for the reduction): "" or why it failed.
  std::string runCollective(const program::Instruction &inst, const std::string &place);
  int shardMember() const { return host.memberIndex(Group::Shard); }
  /// all_reduce over tp of unit u's partial gradients (`site` names it).
  std::string sumPartialGradients(const program::Unit &u, const std::string &site);

  const RunOptions &options;
  Communicator &host;
  const PhaseRun *running = nullptr;       // the phase run() runs
  const program::Tensor *logits = nullptr; // logitsTensor()
};

/// A step's report from the sum over ranks of their micro-steps' losses,
/// each times its lossWeight (divided by the step's LossNorm::divisor), the
/// gradient norm and the step's seconds (peakBytes and outsideArenaBytes are
/// the caller's).
StepReport stepReport(const program::Program &p, const RunOptions &options, int64_t step,
                      double lossSum, double lossDivisor, double gradNorm, double seconds);

/// The learning rate of step `step` (counted from 1): linear warmup, then
/// the schedule (docs/training-semantics.md).
double learningRate(const RunOptions &options, int64_t step);

/// The settings a checkpoint records of the run (`maskTokenId`: the
/// masked-LM run's mask id, else -1).
checkpoint::Settings trainingSettings(const RunOptions &options, int64_t maskTokenId);

/// "micro_step.comm[3] (all_gather)": an instruction as errors name it.
std::string instructionPlace(const std::string &phase, int stream,
                             const program::Instruction &inst);

/// One rank's training: the run on `device` from the shards' start to the
/// last step's report and the saves. The host communicator makes the
/// collectives outside the program (the loss's and eval's all-reduces, the
/// stop agreements, the checkpoints').
class Trainer {
public:
  Trainer(const program::Program &p, const RunOptions &options, Communicator &host,
          const data::Inputs &data, RankDevice &device)
      : program(p), options(options), host(host), data(data), device(device) {}
  /// "" or the error, "rank N: why".
  std::string run(const StepCallback &onStep);

private:
  int64_t loadShards();
  void trainStep(int64_t index, const StepCallback &onStep, bool *stop);
  /// The held-out loss, and for an image classifier the accuracy, into r.
  void evaluate(StepReport &r);
  /// Micro-step `micro` of step (or, kind Eval, eval batch) `index`.
  void microStep(PhaseKind kind, int64_t index, int64_t micro, NextPhase next);
  /// The sum of the kept losses of step (or eval batch) `index`, each times
  /// its lossWeight.
  double weightedLosses(PhaseKind kind, int64_t index, const char *reader);
  void saveWeights();

  const program::Program &program;
  const RunOptions &options;
  Communicator &host;
  const data::Inputs &data;
  RankDevice &device;
  int64_t step = 0;      // optimizer steps taken
  int64_t traceStep = 0; // the step being run, for the trace
  // An image classifier's eval: the labels of each micro-step of the batch.
  std::vector<std::vector<int64_t>> evalLabels;
  bool traced = true; // into the measured trace (not during eval)
  float lossScale = 1;
};

} // namespace fsdp::runtime

#endif
