//===- Executor.cpp - the CPU rank: two threads over one host arena ------===//
//
// The CPU rank of the trainer (Trainer.h), run by the threads backend (every
// rank a thread of this process) and the MPI backend (a process a rank).
//
//===----------------------------------------------------------------------===//
#include "runtime/Executor.h"
#include "runtime/Communicator.h"
#include "runtime/Dispatch.h"
#include "runtime/Trainer.h"
#include "runtime/data/Inputs.h"
#include "runtime/kernels/cpu.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <type_traits>

extern "C" void openblas_set_num_threads(int);

using namespace fsdp;
using namespace fsdp::runtime;
using namespace fsdp::program;

namespace {

// Events of one rank. An event recorded during execution `epoch` of a phase
// satisfies waits of that execution only; aborting wakes every waiter.
class Events {
public:
  explicit Events(int64_t n) : epochs(n, -1) {}
  void record(int64_t e, int64_t epoch) {
    std::lock_guard<std::mutex> lock(mu);
    epochs[e] = epoch;
    cv.notify_all();
  }
  bool wait(int64_t e, int64_t epoch) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return epochs[e] >= epoch || aborted; });
    return !aborted;
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mu);
    aborted = true;
    cv.notify_all();
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> epochs;
  bool aborted = false;
};

// The CPU rank: the arena is host memory, the compute list runs on the
// rank's thread and the comm list on a second thread, joined by Events.
class CpuRank final : public RankDevice {
  friend struct CpuKernels;

public:
  CpuRank(const Program &p, const RunOptions &options, Communicator &comm, const data::Inputs &data)
      : RankDevice(p, options, comm), comm(comm), inputBytes(data.bytes()), events(p.events),
        kept(size_t(options.gradAccum)), logitsKept(size_t(options.gradAccum * logitsBytes())) {}

  void setUp() override;
  void tearDown(bool ok) override;
  char *shardImage() override { return arena; }
  void shardsIn() override {}
  void shardsOut() override {}
  InputBuffers inputBuffers(PhaseKind, int64_t) override {
    return {tensor<char>(program.tokens), tensor<int64_t>(program.targets)};
  }
  void inputsIn() override {}
  void keepLoss(int64_t micro) override { kept[micro] = *at(program.tensors[program.loss].offset); }
  // Each phase ends with both lists: the host has nothing to wait for.
  void synchronize(const std::string &) override {}
  const float *losses(const char *) override { return kept.data(); }
  void keepLogits(const void *logits, int64_t bytes) override {
    std::memcpy(logitsKept.data() + running->micro * bytes, logits, size_t(bytes));
  }
  const char *keptLogits(const char *) override { return logitsKept.data(); }
  double stepGradNorm() override { return gradNorm; }
  // grad_norm (comm) is ordered before the optimizer step by the events.
  double clippingNorm() override { return gradNorm; }
  void zero(void *dst, int64_t bytes, const char *) override {
    if (bytes > 0)
      std::memset(dst, 0, size_t(bytes));
  }
  void accumulate(float *acc, const void *grads, int64_t n, bool bf16) override {
    if (bf16)
      kernels::addBf16Into(acc, static_cast<const uint16_t *>(grads), n);
    else
      kernels::add(acc, static_cast<const float *>(grads), acc, n);
  }
  void copy(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  // The host pool is an allocation of its own, apart from the arena (the
  // "device" of a CPU rank): the copies are real and each pool's peak is
  // its own.
  void toHost(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  void toDevice(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  void shardIn(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  void adamw(const AdamWSlice &a) override {
    kernels::adamw(a.param, a.grad, a.expAvg, a.expAvgSq, nullptr, a.count, a.step, a.lr, a.beta1,
                   a.beta2, a.eps, a.weightDecay, a.gradScale);
  }
  void nameCollective(Group g, const std::string &site, const char *) override { comm.at(g, site); }
  void toBf16(const float *x, uint16_t *out, int64_t n) override { kernels::toBf16(x, out, n); }
  void fromBf16(const uint16_t *x, float *out, int64_t n) override { kernels::fromBf16(x, out, n); }
  std::string allGather(Group g, const void *src, void *dst, int64_t count, DType dtype) override {
    return status(comm.allGather(g, src, dst, count * (dtype == DType::BF16 ? 2 : 4)));
  }
  std::string reduceScatterAdd(const void *src, float *shard, int64_t count, DType dtype,
                               void *) override {
    return status(
        dtype == DType::BF16
            ? comm.reduceScatterAddBf16(Group::Shard, static_cast<const uint16_t *>(src), shard,
                                        count)
            : comm.reduceScatterAdd(Group::Shard, static_cast<const float *>(src), shard, count));
  }
  std::string allReduce(float *buf, int64_t count) override {
    return status(comm.allReduce(Group::Replica, buf, count));
  }
  std::string tpAllGather(const void *src, void *dst, int64_t bytes) override {
    return status(comm.allGather(Group::Tp, src, dst, bytes));
  }
  std::string tpReduceScatter(const float *src, float *dst, int64_t count) override {
    std::memset(dst, 0, size_t(count) * 4);
    return status(comm.reduceScatterAdd(Group::Tp, src, dst, count));
  }
  std::string tpAllReduce(Group g, float *buf, int64_t count) override {
    return status(comm.allReduce(g, buf, count));
  }
  std::string tpAllReduceSlots(float *part, int64_t count, int64_t piece, int64_t pieces) override {
    std::fill(slots.begin(), slots.begin() + pieces * count, 0.0f);
    std::copy(part, part + count, slots.begin() + piece * count);
    std::string why = status(comm.allReduce(Group::TpGrad, slots.data(), pieces * count));
    std::copy(slots.begin() + piece * count, slots.begin() + (piece + 1) * count, part);
    return why;
  }
  void addBias(float *x, const float *bias, int64_t rows, int64_t D) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < D; ++j)
        x[r * D + j] += bias[j];
  }
  std::string reduceGradNorm(const Instruction &, const std::string &site) override;
  int64_t outsideArenaBytes() const override {
    return comm.stagingBytes() + (comm.rank() == 0 ? inputBytes : 0) + (int64_t)slots.size() * 4;
  }
  void abort(const std::string &message) override {
    comm.abort(message);
    events.abort();
  }

private:
  void runPhase(const PhaseRun &run) override;
  void runCompute(const PhaseRun &run, int64_t epoch);
  void commLoop();
  void runComm(const PhaseRun &run, int64_t epoch);
  // "" for a collective that completed, else why not.
  std::string status(bool ok) const {
    if (ok)
      return "";
    std::string why = comm.error();
    return why.empty() ? "stopped" : why;
  }
  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch0).count();
  }

  Communicator &comm;
  int64_t inputBytes; // the run's data, counted outside rank 0's arena
  Events events;
  std::vector<float> slots;     // tpAllReduceSlots's, sized at set-up
  std::vector<float> kept;      // the step's losses, a micro-step each
  std::vector<char> logitsKept; // an image classifier's eval logits, a micro-step each
  double gradNorm = 0;          // the last grad_norm's, written by the comm thread
  int64_t epoch = 0;            // executions of a phase so far
  std::chrono::steady_clock::time_point epoch0 = std::chrono::steady_clock::now();

  // The comm stream: a thread taking one phase's list at a time.
  std::thread commThread;
  std::mutex jobMu;
  std::condition_variable jobCv;
  // A copy: a failed compute list leaves runPhase (and its PhaseRun) while
  // the comm thread may still be in its list.
  std::optional<PhaseRun> job;
  int64_t jobEpoch = 0;
  bool jobDone = true, stopping = false;
  std::string commError;
};

void CpuRank::setUp() {
  // One allocation, laid out by the plan; nothing else in the steady state.
  arena = static_cast<char *>(std::aligned_alloc(64, (program.arenaBytes + 63) / 64 * 64));
  if (!arena)
    fail("cannot allocate the arena of " + std::to_string(program.arenaBytes) + " bytes");
  if (program.offloadsOptimizer()) {
    hostPool = static_cast<char *>(
        std::aligned_alloc(64, (std::max<int64_t>(program.hostBytes, 1) + 63) / 64 * 64));
    if (!hostPool)
      fail("cannot allocate the host pool of " + std::to_string(program.hostBytes) + " bytes");
  }
  slots.resize(size_t(tpSlotsNumel()));
  try {
    commThread = std::thread([this] { commLoop(); });
  } catch (const std::system_error &e) {
    fail(std::string("cannot start its communication thread: ") + e.what());
  }
}

void CpuRank::tearDown(bool) {
  if (commThread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(jobMu);
      stopping = true;
      jobCv.notify_all();
    }
    commThread.join();
  }
  std::free(arena);
  arena = nullptr;
  std::free(hostPool);
  hostPool = nullptr;
}

// One execution of a phase: its comm list on the comm thread, its compute
// list here, joined by the program's events.
void CpuRank::runPhase(const PhaseRun &run) {
  ++epoch;
  {
    std::lock_guard<std::mutex> lock(jobMu);
    job.emplace(run);
    jobEpoch = epoch;
    jobDone = false;
    jobCv.notify_all();
  }
  runCompute(run, epoch);
  std::unique_lock<std::mutex> lock(jobMu);
  jobCv.wait(lock, [&] { return jobDone; });
  if (!commError.empty())
    fail(commError);
}

// The CPU kernels as Dispatch.h calls them: memory is the rank's arena,
// and every tensor a kernel touches counts toward the measured peak. Each
// kernel forwards to kernels:: (cpu.h), whose f32 and bf16 overloads the
// storage type picks; the f32 kernels that need no scratch drop the one
// Dispatch passes.
#define FSDP_CPU_KERNEL(name)                                                                      \
  template <typename... A> void name(A... a) { kernels::name(a...); }
#define FSDP_CPU_KERNEL_SCRATCH(name)                                                              \
  template <typename T, typename... A> void name(const T *first, A... a) {                         \
    if constexpr (std::is_same_v<T, float>)                                                        \
      dropLast([](auto... x) { kernels::name(x...); }, first, a...);                               \
    else                                                                                           \
      kernels::name(first, a...);                                                                  \
  }

struct CpuKernels : ArenaMemory<CpuRank> {
  FSDP_CPU_KERNEL(moeRouteForward)
  FSDP_CPU_KERNEL(moeRouteBackward)
  FSDP_CPU_KERNEL(moePermuteForward)
  FSDP_CPU_KERNEL(moePermuteBackward)
  FSDP_CPU_KERNEL(moeLinearForward)
  FSDP_CPU_KERNEL(moeLinearBackwardInput)
  FSDP_CPU_KERNEL(moeLinearBackwardWeight)
  FSDP_CPU_KERNEL(moeCombineForward)
  FSDP_CPU_KERNEL(moeCombineBackward)
  FSDP_CPU_KERNEL(moeAuxLossForward)
  FSDP_CPU_KERNEL(moeAuxLossBackward)
  FSDP_CPU_KERNEL(positionIds)
  FSDP_CPU_KERNEL(tokenTypeIds)
  FSDP_CPU_KERNEL(embeddingForward)
  FSDP_CPU_KERNEL_SCRATCH(embeddingBackward)
  FSDP_CPU_KERNEL_SCRATCH(linearForward)
  FSDP_CPU_KERNEL_SCRATCH(linearBackwardInput)
  FSDP_CPU_KERNEL_SCRATCH(linearBackwardWeight)
  FSDP_CPU_KERNEL_SCRATCH(biasBackward)
  FSDP_CPU_KERNEL(layerNormForward)
  FSDP_CPU_KERNEL_SCRATCH(layerNormBackward)
  FSDP_CPU_KERNEL(rmsNormForward)
  FSDP_CPU_KERNEL_SCRATCH(rmsNormBackward)
  FSDP_CPU_KERNEL(rope)
  FSDP_CPU_KERNEL(split)
  FSDP_CPU_KERNEL(concat)
  FSDP_CPU_KERNEL(attentionForward)
  FSDP_CPU_KERNEL(attentionBackward)
  FSDP_CPU_KERNEL(geluForward)
  FSDP_CPU_KERNEL(geluBackward)
  FSDP_CPU_KERNEL(siluMulForward)
  FSDP_CPU_KERNEL(siluMulBackward)
  FSDP_CPU_KERNEL(add)
  FSDP_CPU_KERNEL(classTokenForward)
  FSDP_CPU_KERNEL(classTokenBackward)
  FSDP_CPU_KERNEL(firstTokenForward)
  FSDP_CPU_KERNEL(firstTokenBackward)
  FSDP_CPU_KERNEL(crossEntropyBackward)
  FSDP_CPU_KERNEL(fromBf16)
  FSDP_CPU_KERNEL(toBf16)
  FSDP_CPU_KERNEL(roundToBf16)
  template <typename T>
  void crossEntropyForward(const T *logits, const int64_t *targets, float *loss, int64_t n,
                           int64_t V, float *) {
    *loss = kernels::crossEntropyForward(logits, targets, n, V);
    if (rank.keepsLogits())
      rank.keepLogits(logits, rank.logitsBytes());
  }
};
#undef FSDP_CPU_KERNEL
#undef FSDP_CPU_KERNEL_SCRATCH

std::string CpuRank::reduceGradNorm(const Instruction &, const std::string &site) {
  comm.at(Group::Shard, site);
  double sum = 0;
  for (const Unit &u : program.units)
    for (const ShardSlice &slice : gradNormSlices(u))
      sum += kernels::sumOfSquares(at(u.gradShardOffset) + slice.inShard, slice.count);
  bool ok = comm.allReduceScalar(Group::Shard, &sum);
  if (ok && program.tp > 1) {
    comm.at(Group::TpGrad, site);
    ok = comm.allReduceScalar(Group::TpGrad, &sum);
  }
  gradNorm = std::sqrt(sum);
  return status(ok);
}

void CpuRank::runCompute(const PhaseRun &run, int64_t epoch) {
  const char *phase = phaseName(program, run);
  bool tracing = !options.trace.empty() && run.traced;
  for (const Instruction &inst : run.phase.compute) {
    double start = tracing ? now() : 0;
    if (inst.op == Op::Record) {
      events.record(inst.event, epoch);
    } else if (inst.op == Op::Wait) {
      if (!events.wait(inst.event, epoch))
        fail(instructionPlace(phase, 0, inst) +
             ": stopped: " + (commError.empty() ? comm.error() : commError));
    } else {
      CpuKernels kernels{{*this}};
      dispatchCompute(program, inst, kernels, run.lossScale);
    }
    if (tracing && inst.op != Op::Record)
      records[0].push_back({&inst, 0, run.optimizer(), run.traceStep, start, now()});
  }
}

void CpuRank::runComm(const PhaseRun &run, int64_t epoch) {
  bool tracing = !options.trace.empty() && run.traced;
  for (const Instruction &inst : run.phase.comm) {
    double start = tracing ? now() : 0;
    std::string err;
    if (inst.op == Op::Record)
      events.record(inst.event, epoch);
    else if (inst.op == Op::Wait)
      err = status(events.wait(inst.event, epoch));
    else
      err = runCollective(inst, run.place);
    if (tracing && inst.op != Op::Record && inst.op != Op::Wait)
      records[1].push_back({&inst, 1, run.optimizer(), run.traceStep, start, now()});
    if (!err.empty()) {
      commError = instructionPlace(phaseName(program, run), 1, inst) + ": " + err;
      abort("rank " + std::to_string(comm.rank()) + ": " + commError);
      return;
    }
  }
}

void CpuRank::commLoop() {
  for (;;) {
    std::optional<PhaseRun> run;
    int64_t runEpoch;
    {
      std::unique_lock<std::mutex> lock(jobMu);
      jobCv.wait(lock, [&] { return job.has_value() || stopping; });
      if (!job)
        return;
      run.emplace(*job);
      runEpoch = jobEpoch;
    }
    runComm(*run, runEpoch);
    std::lock_guard<std::mutex> lock(jobMu);
    job.reset();
    jobDone = true;
    jobCv.notify_all();
  }
}

// A rank of the threads backend: its device and its trainer.
struct ThreadRank {
  ThreadRank(const Program &p, const RunOptions &options, Communicator &comm,
             const data::Inputs &data)
      : device(p, options, comm, data), trainer(p, options, comm, data, device) {}
  CpuRank device;
  Trainer trainer;
};

} // namespace

std::string fsdp::runtime::runRank(const Program &program, const RunOptions &options,
                                   Communicator &comm, const StepCallback &onStep) {
  openblas_set_num_threads(1);
  data::Inputs data;
  std::string err = data.open(program, options);
  if (err.empty() && comm.rank() == 0 && options.dataWarning)
    for (const std::string &note : data.warnings)
      options.dataWarning(note);
  // OpenBLAS's work buffer, mapped now: a limit that leaves no room for it is
  // an error here, not a rank retrying the mapping forever.
  if (err.empty())
    err = kernels::reserveBlasBuffers(1);
  if (!err.empty()) {
    comm.abort("rank " + std::to_string(comm.rank()) + ": " + err);
    return err;
  }
  CpuRank device(program, options, comm, data);
  std::string result = Trainer(program, options, comm, data, device).run(onStep);
  if (result.empty() && !options.trace.empty())
    result = writeRankTrace(options.trace, program, comm.rank(), device.records);
  return result;
}

std::string fsdp::runtime::threadsBackendRefuses(const Program &program, const std::string &plan) {
  if (program.worldSize <= kMaxThreadRanks)
    return "";
  return "the plan is for " + std::to_string(program.worldSize) +
         " ranks, more than the threads backend runs in one process (" +
         std::to_string(kMaxThreadRanks) + "); run one process a rank: mpirun -np " +
         std::to_string(program.worldSize) + " fsdp-run " + plan + " --backend mpi";
}

std::string fsdp::runtime::runThreads(const Program &program, const RunOptions &options,
                                      const StepCallback &onStep, const data::Inputs *inputs) {
  if (std::string why = threadsBackendRefuses(program, "PLAN"); !why.empty())
    return why;
  data::Inputs opened;
  if (!inputs) {
    std::string err = opened.open(program, options);
    if (!err.empty())
      return err;
    inputs = &opened;
  }
  const data::Inputs &data = *inputs;
  // Ranks are the parallelism: one BLAS thread each, or N ranks would each
  // spin up all the cores' worth of BLAS threads (measured: 10x slower for 4
  // ranks on 2 cores).
  openblas_set_num_threads(1);
  // OpenBLAS's work buffers for the ranks inside it at once, mapped before any
  // rank starts: a limit that leaves no room is an error naming it, not ranks
  // retrying the mapping forever (kernels/cpu.h).
  if (std::string err = kernels::reserveBlasBuffers((int)program.worldSize); !err.empty())
    return err;
  auto world = createThreadsWorld(program.worldSize, program.shardSize, options.timeoutS,
                                  (int)program.reshardAfterForward, (int)program.tp);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < program.worldSize; ++r)
    comms.push_back(threadsCommunicator(world, r));
  std::vector<std::string> errors(program.worldSize);
  std::vector<std::unique_ptr<ThreadRank>> ranks;
  for (int r = 0; r < program.worldSize; ++r)
    ranks.push_back(std::make_unique<ThreadRank>(program, options, *comms[r], data));
  std::vector<std::thread> threads;
  std::string startError;
  // Once a rank has failed (one that could not start its own thread), the
  // rest would only stop at their first collective: they are not started.
  for (int r = 0;
       r < program.worldSize && startError.empty() && !(world && !comms[0]->error().empty()); ++r) {
    try {
      threads.emplace_back([&, r] { errors[r] = ranks[r]->trainer.run(onStep); });
    } catch (const std::system_error &e) {
      // More ranks than this process can run as threads: the started ones
      // stop at their first collective.
      startError = "cannot start a thread for rank " + std::to_string(r) + " of " +
                   std::to_string(program.worldSize) + " (the threads backend runs every rank " +
                   "in this process): " + e.what();
      if (world)
        comms[0]->abort(startError);
    }
  }
  for (auto &t : threads)
    t.join();
  if (!startError.empty())
    return startError;
  bool ok = std::all_of(errors.begin(), errors.end(), [](auto &e) { return e.empty(); });
  if (ok && !options.trace.empty()) {
    std::vector<RankTrace> all;
    for (int r = 0; r < program.worldSize; ++r)
      all.push_back({r, ranks[r]->device.records});
    std::string err = writeTrace(options.trace, program, all);
    if (!err.empty())
      return err;
  }
  // The first rank to fail is the cause; the others stopped because of it.
  std::string cause = world ? comms[0]->error() : "";
  for (const std::string &e : errors)
    if (!e.empty())
      return cause.empty() ? e : cause;
  return "";
}
