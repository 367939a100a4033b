//===- Executor.cpp - the CPU executor: compute and comm streams over one arena ===//
#include "runtime/Executor.h"
#include "runtime/Backend.h"
#include "runtime/Dispatch.h"
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Dataset.h"
#include "runtime/kernels/cpu.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
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

struct Failure {
  std::string message;
};

using detail::TraceRecord;

class Rank : detail::ArenaAccess {
  friend struct CpuKernels;
  template <typename> friend struct fsdp::runtime::ArenaMemory;

public:
  Rank(const Program &p, const RunOptions &o, Communicator &comm, const detail::Inputs &data)
      : ArenaAccess(p), p(p), o(o), comm(comm), data(data), events(p.events) {}

  std::string run(const StepCallback &onStep);
  std::vector<TraceRecord> records[2]; // per stream: each thread appends its own
  std::chrono::steady_clock::time_point epoch0 = std::chrono::steady_clock::now();

private:
  int shardMember() const { return comm.memberIndex(Group::Shard); }

  void initWeights();
  void fillInputs(bool eval, int64_t step, int64_t micro);
  // `place` says which execution it is ("step 2 micro_step 1/2"), for
  // --timeout's report.
  void runPhase(const Phase &s, const char *name, const std::string &place);
  double evaluate();
  void runCompute(const std::vector<Instruction> &list, const char *phase, int64_t epoch);
  void computeOne(const Instruction &inst);
  void commLoop();
  void runComm(const std::vector<Instruction> &list, const char *phase, int64_t epoch,
               const std::string &place);
  void optimizerStep(const Unit &u);
  [[noreturn]] void fail(const std::string &why) {
    comm.abort("rank " + std::to_string(comm.rank()) + ": " + why);
    events.abort();
    throw Failure{why};
  }
  std::string where(const char *phase, const char *stream, const Instruction &inst) {
    return std::string(phase) + "." + stream + "[" + std::to_string(inst.index) + "] (" +
           opName(inst.op) + ")";
  }

  const Program &p;
  const RunOptions &o;
  Communicator &comm;
  const detail::Inputs &data;
  Events events;
  int64_t epoch = 0;     // executions of a phase so far
  bool recording = true; // into the measured trace (not during eval)
  int64_t step = 0;      // optimizer steps taken
  int64_t traceStep = 0; // the step being executed, for traces
  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch0).count();
  }
  double gradNorm = 0;
  float lossScale = 1;

  // The comm stream: a thread taking one phase's list at a time.
  std::mutex jobMu;
  std::condition_variable jobCv;
  const std::vector<Instruction> *job = nullptr;
  const char *jobPhase = "";
  std::string jobPlace;
  int64_t jobEpoch = 0;
  bool jobDone = true, stopping = false;
  std::string commError;
};

void Rank::fillInputs(bool eval, int64_t stepIndex, int64_t micro) {
  detail::fillInputs(p, o, data, eval, comm.rank(), stepIndex, micro, t<char>(p.tokens),
                     t<int64_t>(p.targets));
}

// One execution of a phase: its comm list on the comm thread, its compute
// list here, joined by the program's events.
void Rank::runPhase(const Phase &s, const char *name, const std::string &place) {
  ++epoch;
  {
    std::lock_guard<std::mutex> lock(jobMu);
    job = &s.comm;
    jobPhase = name;
    jobPlace = place;
    jobEpoch = epoch;
    jobDone = false;
    jobCv.notify_all();
  }
  runCompute(s.compute, name, epoch);
  std::unique_lock<std::mutex> lock(jobMu);
  jobCv.wait(lock, [&] { return jobDone; });
  if (!commError.empty())
    fail(commError);
}

// The held-out loss (DESIGN.md, "Eval"): batch b is what step b would take
// from the eval file, run through the micro-step's forward (and backward, as
// the program has no forward-only phase); the gradients it leaves are
// zeroed, so training goes on exactly as without it.
double Rank::evaluate() {
  recording = false;
  // Each batch's loss is its micro-steps' weighted sum over ranks over its
  // divisor, the same on every rank: this rank's share of it is summed, then
  // the ranks'.
  double sum = 0;
  for (int64_t b = 0; b < o.evalBatches; ++b) {
    detail::LossNorm norm;
    if (std::string err = detail::lossNorm(p, o, data, true, b, &norm); !err.empty())
      fail(err);
    double batch = 0;
    for (int64_t a = 0; a < o.gradAccum; ++a) {
      fillInputs(true, b, a);
      runPhase(p.microStep, "eval",
               "eval after step " + std::to_string(step) + " batch " + std::to_string(b + 1) +
                   " micro_step " + std::to_string(a + 1) + "/" + std::to_string(o.gradAccum));
      batch +=
          detail::lossWeight(p, o, data, true, comm.rank(), b, a) * *at(p.tensors[p.loss].offset);
    }
    sum += batch / norm.divisor;
  }
  for (const Unit &u : p.units)
    std::memset(at(u.gradShardOffset), 0, u.shardNumel * 4);
  recording = true;
  comm.at(Group::World, "eval after step " + std::to_string(step) + ": the eval loss all-reduce");
  if (!comm.allReduceScalar(Group::World, &sum))
    fail("stopped: " + comm.error());
  return sum / double(o.evalBatches);
}

void Rank::initWeights() {
  for (const Unit &u : p.units)
    for (int64_t off : {u.shardOffset, u.gradShardOffset, u.expAvgOffset, u.expAvgSqOffset})
      touch(off, u.shardNumel * 4);
  std::string err = detail::initShards(p, o, shardMember(), arena);
  if (!err.empty())
    fail(err);
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

struct CpuKernels : ArenaMemory<Rank> {
  void zero(int64_t dst, int64_t from, int64_t bytes) {
    std::memset(r.at<char>(dst) + from, 0, size_t(bytes - from));
    r.touch(dst, bytes);
  }
  void optimizerStep(const Unit &u) { r.optimizerStep(u); }

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
  }
};
#undef FSDP_CPU_KERNEL
#undef FSDP_CPU_KERNEL_SCRATCH

void Rank::computeOne(const Instruction &i) {
  CpuKernels k{{*this}};
  dispatchCompute(p, i, k, lossScale);
}

void Rank::optimizerStep(const Unit &u) {
  double scale = detail::clipScale(o, gradNorm), lr = detail::learningRate(o, step);
  float *param = at(u.shardOffset), *grad = at(u.gradShardOffset);
  float *m = at(u.expAvgOffset), *v = at(u.expAvgSqOffset);
  detail::forEachShardSlice(u, shardMember(), o.weightDecay,
                            [&](int64_t k, int64_t count, double decay) {
                              kernels::adamw(param + k, grad + k, m + k, v + k, nullptr, count,
                                             step, lr, o.beta1, o.beta2, o.eps, decay, scale);
                            });
  std::memset(grad, 0, u.shardNumel * 4); // the next step accumulates afresh
}

void Rank::runCompute(const std::vector<Instruction> &list, const char *phase, int64_t epoch) {
  bool optimizer = phase[0] == 'o';
  for (const Instruction &inst : list) {
    double start = o.trace.empty() ? 0 : now();
    if (inst.op == Op::Record) {
      events.record(inst.event, epoch);
    } else if (inst.op == Op::Wait) {
      if (!events.wait(inst.event, epoch))
        fail(where(phase, "compute", inst) +
             ": stopped: " + (commError.empty() ? comm.error() : commError));
    } else {
      computeOne(inst);
    }
    if (!o.trace.empty() && recording && inst.op != Op::Record)
      records[0].push_back({&inst, 0, optimizer, traceStep, start, now()});
  }
}

void Rank::runComm(const std::vector<Instruction> &list, const char *phase, int64_t epoch,
                   const std::string &place) {
  bool optimizer = phase[0] == 'o';
  for (const Instruction &inst : list) {
    bool ok = true;
    double start = o.trace.empty() ? 0 : now();
    if (inst.op == Op::AllGather || inst.op == Op::ReduceScatter || inst.op == Op::AllReduce ||
        inst.op == Op::GradNorm)
      comm.at(inst.op == Op::AllReduce ? Group::Replica : Group::Shard,
              place + " comm[" + std::to_string(inst.index) + "] " + opName(inst.op) +
                  (inst.op == Op::GradNorm ? "" : " unit '" + p.units[inst.unit].name + "'"));
    switch (inst.op) {
    case Op::Record:
      events.record(inst.event, epoch);
      break;
    case Op::Wait:
      ok = events.wait(inst.event, epoch);
      break;
    case Op::AllGather: {
      const Unit &u = p.units[inst.unit];
      if (inst.bf16) {
        // Round this rank's shard into its own slot, then gather in place.
        touch(inst.dst, u.paddedNumel * 2);
        uint16_t *slot = at<uint16_t>(inst.dst) + shardMember() * u.shardNumel;
        kernels::toBf16(at(u.shardOffset), slot, u.shardNumel);
        ok = comm.allGather(Group::Shard, slot, at(inst.dst), u.shardNumel * 2);
      } else {
        touch(inst.dst, u.paddedNumel * 4);
        ok = comm.allGather(Group::Shard, at(u.shardOffset), at(inst.dst), u.shardNumel * 4);
      }
      break;
    }
    case Op::ReduceScatter: {
      const Unit &u = p.units[inst.unit];
      if (p.gradElementBytes() == 2 && inst.bf16) {
        // bf16 gradients (bf16 compute), reduced as they are.
        ok = comm.reduceScatterAddBf16(Group::Shard, at<uint16_t>(inst.src), at(u.gradShardOffset),
                                       u.shardNumel);
      } else if (p.gradElementBytes() == 2) {
        // bf16 gradients reduced in f32: widened into the plan's staging.
        touch(inst.scratch, inst.scratchBytes);
        kernels::fromBf16(at<kernels::bf16>(inst.src), at(inst.scratch), u.paddedNumel);
        ok = comm.reduceScatterAdd(Group::Shard, at(inst.scratch), at(u.gradShardOffset),
                                   u.shardNumel);
      } else if (inst.bf16) {
        // The gradient buffer is rounded to bf16 in place, in its first half.
        uint16_t *half = at<uint16_t>(inst.src);
        kernels::toBf16(at(inst.src), half, u.paddedNumel);
        ok = comm.reduceScatterAddBf16(Group::Shard, half, at(u.gradShardOffset), u.shardNumel);
      } else {
        ok = comm.reduceScatterAdd(Group::Shard, at(inst.src), at(u.gradShardOffset), u.shardNumel);
      }
      break;
    }
    case Op::AllReduce: {
      const Unit &u = p.units[inst.unit];
      ok = comm.allReduce(Group::Replica, at(u.gradShardOffset), u.shardNumel);
      break;
    }
    case Op::GradNorm: {
      double sum = 0;
      for (const Unit &u : p.units)
        sum += kernels::sumOfSquares(at(u.gradShardOffset), u.shardNumel);
      ok = comm.allReduceScalar(Group::Shard, &sum);
      gradNorm = std::sqrt(sum);
      break;
    }
    default:
      break;
    }
    if (!o.trace.empty() && recording && inst.op != Op::Record && inst.op != Op::Wait)
      records[1].push_back({&inst, 1, optimizer, traceStep, start, now()});
    if (!ok) {
      std::string why = comm.error();
      commError = where(phase, "comm", inst) + ": " + (why.empty() ? "stopped" : why);
      comm.abort("rank " + std::to_string(comm.rank()) + ": " + commError);
      events.abort();
      return;
    }
  }
}

void Rank::commLoop() {
  for (;;) {
    const std::vector<Instruction> *list;
    const char *phase;
    std::string place;
    int64_t epoch;
    {
      std::unique_lock<std::mutex> lock(jobMu);
      jobCv.wait(lock, [&] { return job || stopping; });
      if (!job)
        return;
      list = job;
      phase = jobPhase;
      place = jobPlace;
      epoch = jobEpoch;
    }
    runComm(*list, phase, epoch, place);
    std::lock_guard<std::mutex> lock(jobMu);
    job = nullptr;
    jobDone = true;
    jobCv.notify_all();
  }
}

std::string Rank::run(const StepCallback &onStep) {
  // One allocation, laid out by the plan; nothing else in the steady state.
  void *mem = std::aligned_alloc(64, (p.arenaBytes + 63) / 64 * 64);
  if (!mem)
    return "rank " + std::to_string(comm.rank()) + ": cannot allocate the arena of " +
           std::to_string(p.arenaBytes) + " bytes";
  arena = static_cast<char *>(mem);
  std::thread commThread;
  try {
    commThread = std::thread([this] { commLoop(); });
  } catch (const std::system_error &e) {
    std::free(arena);
    std::string why = "rank " + std::to_string(comm.rank()) +
                      ": cannot start its communication thread: " + e.what();
    comm.abort(why);
    return why;
  }
  std::string error;
  try {
    int64_t first = 0;
    if (!o.resume.empty()) {
      for (const Unit &u : p.units)
        for (int64_t off : {u.shardOffset, u.gradShardOffset, u.expAvgOffset, u.expAvgSqOffset}) {
          std::memset(at(off), 0, u.shardNumel * 4);
          touch(off, u.shardNumel * 4);
        }
      comm.at(Group::World, "the resume from " + o.resume, true);
      std::string err = detail::resumeShards(p, o, comm, arena, &first);
      if (!err.empty())
        fail(err);
    } else {
      initWeights();
    }
    bool stop = false;
    std::string err = detail::startTogether(comm, o, first, &stop);
    if (!err.empty())
      fail(err);
    step = first;
    for (int64_t t = first; t < o.steps && !stop; ++t) {
      traceStep = t;
      // The mean over the step's G x S tokens, G images, or selected tokens.
      detail::LossNorm norm;
      if (std::string err = detail::lossNorm(p, o, data, false, t, &norm); !err.empty())
        fail(err);
      lossScale = norm.gradScale;
      auto start = std::chrono::steady_clock::now();
      double lossSum = 0;
      for (int64_t a = 0; a < o.gradAccum; ++a) {
        fillInputs(false, t, a);
        runPhase(p.microStep, "micro_step",
                 "step " + std::to_string(t + 1) + " micro_step " + std::to_string(a + 1) + "/" +
                     std::to_string(o.gradAccum));
        lossSum += detail::lossWeight(p, o, data, false, comm.rank(), t, a) *
                   *at(p.tensors[p.loss].offset);
      }
      ++step;
      runPhase(p.optimizer, "optimizer", "step " + std::to_string(t + 1) + " optimizer");
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // For the report only, outside the plan: the mean loss over ranks. Every
      // rank runs the same program over the same layout, so rank 0's peak is
      // every rank's.
      comm.at(Group::World, "step " + std::to_string(t + 1) + ": the step's loss all-reduce");
      if (!comm.allReduceScalar(Group::World, &lossSum))
        fail("stopped: " + comm.error());
      StepReport r = detail::stepReport(p, o, t, lossSum, norm.divisor, gradNorm, seconds);
      r.peakBytes = peakBytes();
      r.outsideArenaBytes = comm.stagingBytes() + (comm.rank() == 0 ? data.bytes() : 0);
      std::string err = detail::afterStep(
          o, r, comm, onStep, [&] { return evaluate(); },
          [&] {
            return io::saveCheckpoint(o.save, o.keep, p, comm, arena, step,
                                      detail::globalBatch(p, o));
          },
          &stop);
      if (!err.empty())
        fail(err);
    }
    if (!o.saveWeights.empty() && !stop) { // stopped early: the model is not final
      comm.at(Group::World, "the weights' save (--save-weights)", true);
      std::string err = io::saveFullWeights(o.saveWeights, p, comm, arena, o.maxShardSize, step);
      if (!err.empty())
        fail(err);
    }
  } catch (const Failure &f) {
    error = "rank " + std::to_string(comm.rank()) + ": " + f.message;
  }
  {
    std::lock_guard<std::mutex> lock(jobMu);
    stopping = true;
    jobCv.notify_all();
  }
  commThread.join();
  std::free(arena);
  return error;
}

} // namespace

std::string fsdp::runtime::runRank(const Program &program, const RunOptions &options,
                                   Communicator &comm, const StepCallback &onStep) {
  openblas_set_num_threads(1);
  detail::Inputs data;
  std::string err = data.open(program, options);
  // OpenBLAS's work buffer, mapped now: a limit that leaves no room for it is
  // an error here, not a rank retrying the mapping forever.
  if (err.empty())
    err = kernels::reserveBlasBuffers(1);
  if (!err.empty()) {
    comm.abort("rank " + std::to_string(comm.rank()) + ": " + err);
    return err;
  }
  Rank rank(program, options, comm, data);
  std::string result = rank.run(onStep);
  if (result.empty() && !options.trace.empty()) {
    // Under MPI each process writes its own rank's timeline.
    std::string path =
        comm.rank() == 0 ? options.trace : options.trace + ".rank" + std::to_string(comm.rank());
    result = detail::writeTrace(path, program, {{comm.rank(), rank.records}});
  }
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
                                      const StepCallback &onStep, const detail::Inputs *inputs) {
  if (std::string why = threadsBackendRefuses(program, "PLAN"); !why.empty())
    return why;
  detail::Inputs opened;
  if (!inputs) {
    std::string err = opened.open(program, options);
    if (!err.empty())
      return err;
    inputs = &opened;
  }
  const detail::Inputs &data = *inputs;
  // Ranks are the parallelism: one BLAS thread each, or N ranks would each
  // spin up all the cores' worth of BLAS threads (measured: 10x slower for 4
  // ranks on 2 cores).
  openblas_set_num_threads(1);
  // OpenBLAS's work buffers for the ranks inside it at once, mapped before any
  // rank starts: a limit that leaves no room is an error naming it, not ranks
  // retrying the mapping forever (kernels/cpu.h).
  if (std::string err = kernels::reserveBlasBuffers((int)program.worldSize); !err.empty())
    return err;
  auto world = createThreadsWorld(program.worldSize, program.shardSize, options.timeoutS);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < program.worldSize; ++r)
    comms.push_back(threadsCommunicator(world, r));
  std::vector<std::string> errors(program.worldSize);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < program.worldSize; ++r)
    ranks.push_back(std::make_unique<Rank>(program, options, *comms[r], data));
  std::vector<std::thread> threads;
  std::string startError;
  // Once a rank has failed (one that could not start its own thread), the
  // rest would only stop at their first collective: they are not started.
  for (int r = 0;
       r < program.worldSize && startError.empty() && !(world && !comms[0]->error().empty()); ++r) {
    try {
      threads.emplace_back([&, r] { errors[r] = ranks[r]->run(onStep); });
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
    std::vector<detail::RankTrace> all;
    for (int r = 0; r < program.worldSize; ++r)
      all.push_back({r, ranks[r]->records});
    std::string err = detail::writeTrace(options.trace, program, all);
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
