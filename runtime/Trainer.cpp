//===- Trainer.cpp - one training loop over a rank's device ---------------===//
//
// See Trainer.h. Nothing here knows whether the device is the CPU or a GPU:
// what differs (threads or streams, host or device memory, where the host
// must wait) is behind RankDevice.
//
//===----------------------------------------------------------------------===//
#include "runtime/Trainer.h"
#include "runtime/Scratch.h"
#include "runtime/Signals.h"
#include "runtime/TraceFormat.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/data/Inputs.h"
#include "runtime/io/Files.h"
#include "runtime/kernels/cpu.h"
#include "runtime/weights/Weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <system_error>
#include <thread>
#include <unistd.h>

using namespace fsdp;
using namespace fsdp::runtime;
using namespace fsdp::program;

const char *fsdp::runtime::phaseName(PhaseKind kind) {
  static const char *const names[] = {"micro_step", "eval", "optimizer"}; // PhaseKind's order
  return names[int(kind)];
}

const char *fsdp::runtime::phaseName(const Program &p, const PhaseRun &run) {
  if (run.kind == PhaseKind::MicroStep && &run.phase == &p.firstMicroStep)
    return "first_micro_step";
  if (run.kind == PhaseKind::MicroStep && &run.phase == &p.lastMicroStep)
    return "last_micro_step";
  return phaseName(run.kind);
}

std::string fsdp::runtime::instructionPlace(const std::string &phase, int stream,
                                            const Instruction &inst) {
  return phase + "." + (stream ? "comm" : "compute") + "[" + std::to_string(inst.index) + "] (" +
         opName(inst.op) + ")";
}

void RankDevice::fail(const std::string &why) {
  std::string what = failure(why);
  abort("rank " + std::to_string(host.rank()) + ": " + what);
  throw RankFailure{what};
}

void RankDevice::run(const PhaseRun &phaseRun) {
  running = &phaseRun;
  runPhase(phaseRun);
  running = nullptr;
}

// The collectives' dtype paths, the same on every device: what differs is
// only where the sum lands before it is added to the gradient shard (the
// device's reduceScatterAdd).
std::string RankDevice::runCollective(const Instruction &inst, const std::string &place) {
  const Program &p = program;
  if (inst.op != Op::AllGather && inst.op != Op::ReduceScatter && inst.op != Op::AllReduce &&
      inst.op != Op::GradNorm)
    return "not a communication instruction";
  std::string site = place + " comm[" + std::to_string(inst.index) + "] " + opName(inst.op) +
                     (inst.op == Op::GradNorm ? "" : " unit '" + p.units[inst.unit].name + "'");
  if (inst.op == Op::GradNorm)
    return reduceGradNorm(inst, site);
  const Unit &u = p.units[inst.unit];
  switch (inst.op) {
  case Op::AllGather:
    if (inst.overReshard) {
      // Each member's resharded copy, as it was gathered (no rounding).
      nameCollective(Group::Reshard, site, "all_gather");
      DType dtype = inst.bf16 ? DType::BF16 : DType::F32;
      int64_t count = u.paddedNumel / p.reshardAfterForward;
      touch(inst.src, p.reshardedBytes(u, inst.bf16));
      touch(inst.dst, u.paddedNumel * (inst.bf16 ? 2 : 4));
      return allGather(Group::Reshard, at<char>(inst.src), at<char>(inst.dst), count, dtype);
    }
    nameCollective(Group::Shard, site, "all_gather");
    if (p.offloadsParams()) {
      // The shard is the host pool's (under bf16, its bf16 copy): into this
      // rank's own slot, then the gather in place.
      int64_t elem = inst.bf16 ? 2 : 4;
      int64_t from = inst.bf16 ? u.hostGatherOffset : u.hostShardOffset;
      touch(inst.dst, u.paddedNumel * elem);
      char *slot = at<char>(inst.dst) + shardMember() * u.shardNumel * elem;
      shardIn(slot, hostAt<char>(from), u.shardNumel * elem);
      return allGather(Group::Shard, slot, at(inst.dst), u.shardNumel,
                       inst.bf16 ? DType::BF16 : DType::F32);
    }
    if (inst.bf16) {
      // Round this rank's shard into its own slot, then gather in place.
      touch(inst.dst, u.paddedNumel * 2);
      uint16_t *slot = at<uint16_t>(inst.dst) + shardMember() * u.shardNumel;
      toBf16(at(u.shardOffset), slot, u.shardNumel);
      return allGather(Group::Shard, slot, at(inst.dst), u.shardNumel, DType::BF16);
    }
    touch(inst.dst, u.paddedNumel * 4);
    return allGather(Group::Shard, at(u.shardOffset), at(inst.dst), u.shardNumel, DType::F32);
  case Op::ReduceScatter: {
    nameCollective(Group::Shard, site, "reduce_scatter");
    touch(inst.scratch, inst.scratchBytes);
    void *staging = inst.scratch >= 0 ? at<char>(inst.scratch) : nullptr;
    float *shard = at(u.gradShardOffset);
    // What is reduced: the gradient buffer (compute dtype) or, under
    // grad_sync last, the f32 accumulation buffer.
    if (p.reducedElementBytes() == 2 && inst.bf16) // bf16 gradients (bf16 compute), as they are
      return reduceScatterAdd(at<uint16_t>(inst.src), shard, u.shardNumel, DType::BF16, staging);
    if (p.reducedElementBytes() == 2) {
      // bf16 gradients reduced in f32: widened into the plan's staging
      // (after the device's part of it, runtime/Scratch.h).
      float *wide = at(inst.scratch + reduceScatterWidenOffset(p.target, u.shardNumel, false));
      fromBf16(at<uint16_t>(inst.src), wide, u.paddedNumel);
      return reduceScatterAdd(wide, shard, u.shardNumel, DType::F32, staging);
    }
    if (inst.bf16) {
      // The gradient buffer is rounded to bf16 in place, in its first half.
      uint16_t *half = at<uint16_t>(inst.src);
      toBf16(at(inst.src), half, u.paddedNumel);
      return reduceScatterAdd(half, shard, u.shardNumel, DType::BF16, staging);
    }
    return reduceScatterAdd(at(inst.src), shard, u.shardNumel, DType::F32, staging);
  }
  default: // all_reduce
    if (inst.overTp)
      return sumPartialGradients(u, site);
    nameCollective(Group::Replica, site, "all_reduce");
    return allReduce(at(u.gradShardOffset), u.shardNumel);
  }
}

// all_reduce over tp: of each parameter with a partial gradient, this
// shard's part summed over the ranks of the tp group holding the same piece
// (all of them for a whole parameter). A piece held by tp / P ranks is
// summed as P slots, this rank's part in its piece's and zeros in the
// others, over the whole group: adding a zero is exact, so each slot is the
// sum over its piece's ranks, in member order, the same bits on each.
std::string RankDevice::sumPartialGradients(const Unit &u, const std::string &site) {
  const Program &p = program;
  int t = host.memberIndex(Group::TpGrad);
  float *shard = at(u.gradShardOffset);
  for (const Param &prm : u.params) {
    ShardSlice slice = shardSlice(u, shardMember(), prm);
    if (!prm.tpPartial || !slice.count)
      continue;
    touch(u.gradShardOffset + slice.inShard * 4, slice.count * 4);
    nameCollective(Group::TpGrad, site + " '" + prm.name + "'", "all_reduce");
    float *part = shard + slice.inShard;
    std::string why;
    if (prm.tpPieces == 1)
      why = tpAllReduce(Group::TpGrad, part, slice.count);
    else
      why = tpAllReduceSlots(part, slice.count, t / (p.tp / prm.tpPieces), prm.tpPieces);
    if (!why.empty())
      return why;
  }
  return "";
}

int64_t RankDevice::tpSlotsNumel() const {
  int64_t most = 0;
  for (const Unit &u : program.units)
    for (const Param &prm : u.params)
      if (prm.tpPartial && prm.tpPieces > 1)
        most = std::max(most, prm.tpPieces * shardSlice(u, shardMember(), prm).count);
  return most;
}

std::vector<ShardSlice> RankDevice::gradNormSlices(const Unit &u) const {
  if (program.tp == 1)
    return {{0, 0, u.shardNumel}};
  std::vector<ShardSlice> counted;
  int t = host.memberIndex(Group::TpGrad);
  for (const Param &prm : u.params) {
    ShardSlice slice = shardSlice(u, shardMember(), prm);
    if (slice.count && t % (program.tp / prm.tpPieces) == 0)
      counted.push_back(slice);
  }
  return counted;
}

void RankDevice::tensorParallel(const Instruction &inst) {
  const Program &p = program;
  const program::Call &c = inst.call;
  int t = host.memberIndex(Group::Tp);
  int64_t esize = program::Tensor{0, {1}, p.tensors[inst.out[0]].dtype}.bytes();
  char *in = tensor<char>(inst.in[0]), *out = tensor<char>(inst.out[0]);
  int64_t partBytes = c.n * esize;
  if (inst.op == Op::TpChunk || inst.op == Op::TpUnchunk) { // local
    if (inst.op == Op::TpChunk) {
      copy(out, in + t * partBytes, partBytes);
    } else {
      zero(out, partBytes * p.tp, "tp_unchunk");
      copy(out + t * partBytes, in, partBytes);
    }
    return;
  }
  std::string site = (running ? running->place : std::string()) + " compute[" +
                     std::to_string(inst.index) + "] " + opName(inst.op);
  nameCollective(Group::Tp, site, opName(inst.op));
  std::string why;
  switch (inst.op) {
  case Op::TpAllGather:
    why = tpAllGather(in, out, partBytes);
    break;
  case Op::TpReduceScatter:
    why = tpReduceScatter(reinterpret_cast<const float *>(in), reinterpret_cast<float *>(out), c.n);
    break;
  default: // tp_all_reduce
    if (out != in)
      copy(out, in, partBytes);
    why = tpAllReduce(Group::Tp, reinterpret_cast<float *>(out), c.n);
    break;
  }
  if (!why.empty())
    fail(why);
  if (c.bias)
    addBias(reinterpret_cast<float *>(out), tensor<float>(inst.in[1]), c.n / c.D, c.D);
}

static const char *kNoTensorParallel = "this device runs no tensor parallelism (tp)";
std::string RankDevice::tpAllGather(const void *, void *, int64_t) { return kNoTensorParallel; }
std::string RankDevice::tpReduceScatter(const float *, float *, int64_t) {
  return kNoTensorParallel;
}
std::string RankDevice::tpAllReduce(Group, float *, int64_t) { return kNoTensorParallel; }
std::string RankDevice::tpAllReduceSlots(float *, int64_t, int64_t, int64_t) {
  return kNoTensorParallel;
}
void RankDevice::addBias(float *, const float *, int64_t, int64_t) { fail(kNoTensorParallel); }

/// The gradient scale that clips to options.clipGradNorm (1: no clipping).
static double clipScale(const RunOptions &o, double gradNorm) {
  if (o.clipGradNorm <= 0)
    return 1.0;
  double coef = o.clipGradNorm / (gradNorm + 1e-6);
  return coef < 1.0 ? coef : 1.0;
}

void fsdp::runtime::hostAdamwThreads(const AdamWSlice &a, int threads, int64_t minChunk) {
  auto run = [](const AdamWSlice &s) {
    kernels::adamw(s.param, s.grad, s.expAvg, s.expAvgSq, nullptr, s.count, s.step, s.lr, s.beta1,
                   s.beta2, s.eps, s.weightDecay, s.gradScale);
  };
  int64_t n = std::min<int64_t>(threads, a.count / std::max<int64_t>(minChunk, 1));
  if (n <= 1)
    return run(a);
  int64_t chunk = (a.count + n - 1) / n;
  auto part = [&](int64_t t) {
    AdamWSlice s = a;
    int64_t lo = t * chunk;
    s.param += lo;
    s.grad += lo;
    s.expAvg += lo;
    s.expAvgSq += lo;
    s.count = std::max<int64_t>(0, std::min(a.count - lo, chunk));
    return s;
  };
  std::vector<std::thread> pool;
  int64_t started = 1;
  try {
    for (; started < n; ++started)
      pool.emplace_back(run, part(started));
  } catch (const std::system_error &) {
    // No more threads: this one takes the chunks not started.
  }
  run(part(0));
  for (int64_t t = started; t < n; ++t)
    run(part(t));
  for (std::thread &th : pool)
    th.join();
}

void RankDevice::hostAdamw(const AdamWSlice &a) { hostAdamwThreads(a, 1, 1); }

void RankDevice::roundGatherCopy(const Unit &u) {
  touchHost(u.hostGatherOffset, u.shardNumel * 2);
  uint16_t *copy = hostAt<uint16_t>(u.hostGatherOffset);
  hostWrites(copy, u.shardNumel * 2, "the host's bf16 copy of the master shard");
  kernels::toBf16(hostAt(u.hostShardOffset), copy, u.shardNumel);
}

void RankDevice::optimizerStep(const Unit &u) {
  const RunOptions &o = options;
  int64_t step = running->step;
  double scale = clipScale(o, o.clipGradNorm > 0 ? clippingNorm() : 0);
  double lr = learningRate(o, step);
  float *grad = at(u.gradShardOffset);
  int64_t bytes = u.shardNumel * 4;
  bool offload = program.offloadsOptimizer();
  // Offloaded, AdamW reads the gradient's host copy and updates the master
  // shard and the moments in the host pool (under offload all the master
  // is the parameter shard).
  float *param = program.offloadsParams() ? nullptr : at(u.shardOffset);
  float *master = param, *from = grad;
  if (offload) {
    for (int64_t off : {u.hostShardOffset, u.hostGradOffset, u.expAvgOffset, u.expAvgSqOffset})
      touchHost(off, bytes);
    master = hostAt(u.hostShardOffset);
    from = hostAt(u.hostGradOffset);
    toHost(from, grad, bytes);
  }
  float *expAvg = offload ? hostAt(u.expAvgOffset) : at(u.expAvgOffset);
  float *expAvgSq = offload ? hostAt(u.expAvgSqOffset) : at(u.expAvgSqOffset);
  for (const Param &prm : u.params) { // a parameter at a time: its slice of the shard
    ShardSlice slice = shardSlice(u, shardMember(), prm);
    if (!slice.count)
      continue;
    int64_t k = slice.inShard;
    AdamWSlice a{master + k,
                 from + k,
                 expAvg + k,
                 expAvgSq + k,
                 slice.count,
                 step,
                 lr,
                 o.beta1,
                 o.beta2,
                 o.eps,
                 prm.decay ? o.weightDecay : 0.0,
                 scale};
    if (offload)
      hostAdamw(a);
    else
      adamw(a);
  }
  if (offload && !program.offloadsParams())
    toDevice(param, master, bytes);
  if (u.hostGatherOffset >= 0) // offload all, bf16 gathers: what they send next
    roundGatherCopy(u);
  zero(grad, bytes, nullptr);     // the next step accumulates afresh
  if (u.accumulatedOffset >= 0) { // grad_sync last: so does the unsharded sum
    touch(u.accumulatedOffset, u.paddedNumel * 4);
    zero(at(u.accumulatedOffset), u.paddedNumel * 4, nullptr);
  }
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

namespace {
/// Whether the checkpoint of step `step` (counted from 1) is written.
bool saveDue(const RunOptions &o, int64_t step) {
  return !o.save.empty() && (step == o.steps || (o.saveEvery > 0 && step % o.saveEvery == 0));
}

/// Whether the held-out loss is computed after step `step` (counted from 1).
bool evalDue(const RunOptions &o, int64_t step) {
  return !o.evalData.empty() && (step == o.steps || (o.evalEvery > 0 && step % o.evalEvery == 0));
}

/// After step `r.step`: "" to go on, or why the run stops there (a loss or
/// gradient norm that is not finite; no checkpoint of that state is saved).
std::string checkFinite(const StepReport &r) {
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

/// The barrier before the first step: nobody starts before every rank has
/// its weights. It is also the first stop decision (runtime/Signals.h):
/// *stop when some rank got a stop signal during start-up; the run then
/// stops before step `first` + 1. "" or why not.
std::string startTogether(Communicator &comm, const RunOptions &o, int64_t first, bool *stop) {
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

/// What every rank does after the update of step r.step: the held-out loss
/// when due (`evaluate`), rank 0's report (`onStep`), the stop on a loss or
/// norm that is not finite, the checkpoint when due (`save`), then the
/// ranks' agreement on a stop signal (runtime/Signals.h): *stop, after this
/// step's checkpoint is saved when --save is given. Returns "" to go on (or
/// to stop when *stop), or why the run stops.
template <typename Evaluate, typename Save>
std::string afterStep(const RunOptions &o, StepReport &r, Communicator &comm,
                      const StepCallback &onStep, Evaluate evaluate, Save save, bool *stop) {
  testSignal(comm.rank(), r.step);
  if (evalDue(o, r.step)) {
    r.evaluated = true;
    evaluate(r);
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
                 {signal, r.step, false, saved ? checkpoint::checkpointPath(o.save, r.step) : ""});
  }
  return err;
}
} // namespace

// The rank's shards: the seeded initialisation or --weights (detail::
// initShards), or a checkpoint (resharded when another plan saved it), in
// the device's host image of the arena, then moved in. Returns the steps
// already taken.
int64_t Trainer::loadShards() {
  char *image = device.shardImage();
  // Offloaded, the moments and master shards (under all, the parameter
  // shards) are the host pool's.
  char *pool = device.hostPoolData();
  for (const Unit &u : program.units) {
    for (int64_t off : program.arenaStateOffsets(u)) {
      std::memset(image + off, 0, u.shardNumel * 4);
      device.touch(off, u.shardNumel * 4);
    }
    for (int64_t off : program.hostStateOffsets(u)) {
      std::memset(pool + off, 0, u.shardNumel * 4);
      device.touchHost(off, u.shardNumel * 4);
    }
  }
  // grad_sync last: the accumulation buffers start each step at zero (the
  // optimizer step and eval zero them after).
  for (const Unit &u : program.units)
    if (u.accumulatedOffset >= 0) {
      device.touch(u.accumulatedOffset, u.paddedNumel * 4);
      device.zero(device.at(u.accumulatedOffset), u.paddedNumel * 4, "the accumulation buffers");
    }
  int64_t first = 0;
  std::string err;
  if (!options.resume.empty()) {
    // Collective: rank 0 chooses the checkpoint, and every rank fails when
    // one does.
    host.at(Group::World, "the resume from " + options.resume, true);
    err = checkpoint::resumeCheckpoint(options.resume, program, host,
                                       data::globalBatch(program, options), image, &first, pool);
    // The stream the saved run trained on: the order depends on its size.
    if (err.empty() && options.resumeTokens > 0 &&
        program.inputKind != program::InputKind::Images &&
        data.train.size() != options.resumeTokens)
      err = options.resume + ": its run trained on a stream of " +
            std::to_string(options.resumeTokens) + " tokens, --data holds " +
            std::to_string(data.train.size()) +
            ": a resumed run continues the same data in the same order";
    // fsdp-run checked the checkpoint it saw at start; another run saving to
    // the folder may have made a newer one since. Every rank has the same
    // step.
    if (err.empty() && first > options.steps)
      err = options.resume + ": its newest checkpoint is of step " + std::to_string(first) +
            ", past --steps " + std::to_string(options.steps);
  } else {
    err = weights::initShards(program, options, host.memberIndex(Group::Shard), image, pool,
                              host.memberIndex(Group::Tp));
  }
  if (!err.empty())
    device.fail(err);
  // offload optimizer: the master shards start as the parameter shards;
  // offload all with bf16 gathers: their bf16 copies as the masters.
  for (const Unit &u : program.units) {
    if (pool && !program.offloadsParams())
      std::memcpy(pool + u.hostShardOffset, image + u.shardOffset, u.shardNumel * 4);
    if (u.hostGatherOffset >= 0)
      device.roundGatherCopy(u);
  }
  device.shardsIn();
  return first;
}

void Trainer::microStep(PhaseKind kind, int64_t index, int64_t micro, NextPhase next) {
  bool eval = kind == PhaseKind::Eval;
  // The lists it runs: a step's first and last micro-steps may have their
  // own (reshard_after_backward false; grad_sync last, replica groups),
  // which the place names, as its instructions' indices are theirs.
  const Phase &lists = program.microStepPhase(micro, options.gradAccum, eval);
  const char *name = &lists == &program.firstMicroStep  ? " first_micro_step "
                     : &lists == &program.lastMicroStep ? " last_micro_step "
                                                        : " micro_step ";
  std::string place = (eval ? "eval after step " + std::to_string(step) + " batch " : "step ") +
                      std::to_string(index + 1) + name + std::to_string(micro + 1) + "/" +
                      std::to_string(options.gradAccum);
  RankDevice::InputBuffers in = device.inputBuffers(kind, index);
  // The micro-batch of this rank's data-parallel index: a tp group's ranks
  // take the same one.
  data::fillInputs(program, options, data, eval, host.dpRank(), index, micro, in.input, in.targets);
  device.inputsIn();
  // An image classifier's eval: the labels beside the logits kept.
  if (eval && device.logitsTensor())
    evalLabels[size_t(micro)].assign(in.targets, in.targets + program.microBatch);
  // grad_sync last: a step's last micro-step reduces what the others
  // accumulated (eval runs the accumulating lists throughout);
  // reshard_after_backward false: its first gathers for all of them.
  device.run({lists, kind, next, place, lossScale, step, traceStep, traced, micro});
  device.keepLoss(micro);
}

double Trainer::weightedLosses(PhaseKind kind, int64_t index, const char *reader) {
  bool eval = kind == PhaseKind::Eval;
  const float *losses = device.losses(reader);
  double sum = 0;
  for (int64_t a = 0; a < options.gradAccum; ++a)
    sum += data::lossWeight(program, options, data, eval, host.dpRank(),
                            host.memberIndex(Group::Tp), index, a) *
           losses[a];
  return sum;
}

// The held-out loss (DESIGN.md, "Eval"): batch b is what step b would take
// from the eval file, run through the micro-step's forward (and backward, as
// the program has no forward-only phase); the gradients it leaves are
// zeroed, so training goes on exactly as without it.
namespace {
/// The rows of `logits` (the tensor's [n, V], its bytes at `bytes`) whose
/// largest value, ties to the lower class as torch.argmax, is at the row's
/// label.
int64_t argmaxHits(const program::Tensor &logits, const char *bytes,
                   const std::vector<int64_t> &labels) {
  int64_t V = logits.shape.back(), n = logits.numel() / V, hits = 0;
  std::vector<float> row(static_cast<size_t>(V));
  for (int64_t i = 0; i < n; ++i) {
    if (logits.dtype == program::DType::BF16)
      kernels::fromBf16(reinterpret_cast<const uint16_t *>(bytes) + i * V, row.data(), V);
    else
      std::memcpy(row.data(), reinterpret_cast<const float *>(bytes) + i * V, size_t(V) * 4);
    hits += std::max_element(row.begin(), row.end()) - row.begin() == labels[size_t(i)];
  }
  return hits;
}
} // namespace

void Trainer::evaluate(StepReport &r) {
  traced = false;
  // Each batch's loss is its micro-steps' weighted sum over ranks over its
  // divisor, the same on every rank: this rank's share of it is summed, then
  // the ranks'.
  double sum = 0, correct = 0, total = 0;
  evalLabels.resize(size_t(options.gradAccum));
  for (int64_t b = 0; b < options.evalBatches; ++b) {
    data::LossNorm norm;
    if (std::string err = data::lossNorm(program, options, data, true, b, &norm); !err.empty())
      device.fail(err);
    for (int64_t a = 0; a < options.gradAccum; ++a)
      microStep(PhaseKind::Eval, b, a,
                a + 1 < options.gradAccum ? NextPhase::MicroStep : NextPhase::Host);
    device.synchronize("eval batch " + std::to_string(b + 1));
    sum += weightedLosses(PhaseKind::Eval, b, "eval's read of the losses") / norm.divisor;
    if (const program::Tensor *logits = device.logitsTensor()) {
      const char *kept = device.keptLogits("eval's read of the logits");
      for (int64_t a = 0; a < options.gradAccum; ++a)
        correct += double(argmaxHits(*logits, kept + a * logits->bytes(), evalLabels[size_t(a)]));
      total += double(options.gradAccum * program.microBatch);
    }
  }
  for (const Unit &u : program.units) {
    device.zero(device.at(u.gradShardOffset), u.shardNumel * 4, "after eval");
    if (u.accumulatedOffset >= 0)
      device.zero(device.at(u.accumulatedOffset), u.paddedNumel * 4, "after eval");
  }
  // The next step's comm work writes the gradient shards too.
  device.synchronize("eval's end");
  traced = true;
  host.at(Group::World, "eval after step " + std::to_string(step) + ": the eval loss all-reduce");
  if (!host.allReduceScalar(Group::World, &sum))
    device.fail("stopped: " + host.error());
  r.evalLoss = sum / double(options.evalBatches);
  if (device.logitsTensor()) {
    host.at(Group::World, "eval after step " + std::to_string(step) + ": the accuracy all-reduce");
    if (!host.allReduceScalar(Group::World, &correct) ||
        !host.allReduceScalar(Group::World, &total))
      device.fail("stopped: " + host.error());
    r.evalAccuracy = correct / total;
  }
}

const program::Tensor *RankDevice::classifierLogits(const Program &p) {
  if (p.inputKind != program::InputKind::Images)
    return nullptr;
  for (const Instruction &inst : p.microStep.compute)
    if (inst.op == Op::CrossEntropy)
      return &p.tensors[inst.in[0]];
  return nullptr;
}

void Trainer::trainStep(int64_t t, const StepCallback &onStep, bool *stop) {
  traceStep = t;
  // A token file that changed size is not the stream that was checked (and
  // a truncated one would be a SIGBUS on the next read of its map).
  if (std::string err = data.checkUnchanged(); !err.empty())
    device.fail(err);
  // The mean over the step's G x S tokens, G images, or selected tokens.
  data::LossNorm norm;
  if (std::string err = data::lossNorm(program, options, data, false, t, &norm); !err.empty())
    device.fail(err);
  lossScale = norm.gradScale;
  auto start = std::chrono::steady_clock::now();
  for (int64_t a = 0; a < options.gradAccum; ++a)
    microStep(PhaseKind::MicroStep, t, a,
              a + 1 == options.gradAccum                                 ? NextPhase::Optimizer
              : a + 2 == options.gradAccum && program.hasLastMicroStep() ? NextPhase::LastMicroStep
                                                                         : NextPhase::MicroStep);
  ++step;
  device.run({program.optimizer, PhaseKind::Optimizer, NextPhase::Host,
              "step " + std::to_string(t + 1) + " optimizer", lossScale, step, traceStep, traced});
  device.synchronize("step " + std::to_string(t + 1));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double gradNorm = device.stepGradNorm();
  device.stepDone();
  double lossSum = weightedLosses(PhaseKind::MicroStep, t, "the step's read of the losses");
  // For the report only, outside the plan: the mean loss over ranks. Every
  // rank runs the same program over the same layout, so rank 0's peak is
  // every rank's.
  host.at(Group::World, "step " + std::to_string(t + 1) + ": the step's loss all-reduce");
  if (!host.allReduceScalar(Group::World, &lossSum))
    device.fail("stopped: " + host.error());
  StepReport r = stepReport(program, options, t, lossSum, norm.divisor, gradNorm, seconds);
  r.peakBytes = device.peakBytes();
  r.hostPeakBytes = device.hostPeakBytes();
  r.outsideArenaBytes = device.outsideArenaBytes();
  int64_t G = data::globalBatch(program, options);
  // (A step so late that its samples pass 2^63 has no epoch to report.)
  if (program.inputKind != program::InputKind::Images && t < INT64_MAX / G - 1) {
    data::Dataset::EpochPlace first = data.train.epochOf(program.seqLen, t * G),
                              next = data.train.epochOf(program.seqLen, (t + 1) * G);
    r.epoch = first.epoch + 1;
    r.epochPosition = first.position;
    r.epochSamples = first.samples;
    r.epochEnded = next.epoch > first.epoch;
  }
  checkpoint::RunRecord record;
  record.sampling = {data.train.isShuffled(), data.train.seed(),
                     program.inputKind == program::InputKind::Images ? 0 : data.train.size()};
  record.settings = trainingSettings(
      options, program.inputKind == program::InputKind::MaskedTokens ? data.maskTokenId : -1);
  std::string err = afterStep(
      options, r, host, onStep, [&](StepReport &report) { evaluate(report); },
      [&] {
        device.shardsOut();
        return checkpoint::saveCheckpoint(options.save, options.keep, program, host,
                                          device.shardImage(), step, G, record,
                                          device.hostPoolData());
      },
      stop);
  if (!err.empty())
    device.fail(err);
}

void Trainer::saveWeights() {
  device.shardsOut();
  host.at(Group::World, "the weights' save (--save-weights)", true);
  std::string err = weights::saveFullWeights(options.saveWeights, program, host,
                                             device.shardImage(), options.maxShardSize, step,
                                             options.saveDtype, device.hostPoolData());
  if (!err.empty())
    device.fail(err);
}

std::string Trainer::run(const StepCallback &onStep) {
  std::string error;
  try {
    device.setUp();
    int64_t first = loadShards();
    bool stop = false;
    if (std::string err = startTogether(host, options, first, &stop); !err.empty())
      device.fail(err);
    step = first;
    device.traceFrom();
    for (int64_t t = first; t < options.steps && !stop; ++t)
      trainStep(t, onStep, &stop);
    if (!options.saveWeights.empty() && !stop) // stopped early: the model is not final
      saveWeights();
  } catch (const RankFailure &f) {
    error = "rank " + std::to_string(host.rank()) + ": " + f.message;
  } catch (const std::exception &e) { // not the device's: the host's (memory, mostly)
    std::string at = device.place();
    error = "rank " + std::to_string(host.rank()) + ": " + (at.empty() ? "" : at + ": ") + e.what();
    device.abort(error);
  }
  device.tearDown(error.empty());
  return error;
}

//===----------------------------------------------------------------------===//
// The step's report and the learning rate
//===----------------------------------------------------------------------===//

checkpoint::Settings fsdp::runtime::trainingSettings(const RunOptions &o, int64_t maskTokenId) {
  checkpoint::Settings t;
  t.lr = o.lr;
  t.minLr = o.minLr;
  t.beta1 = o.beta1;
  t.beta2 = o.beta2;
  t.eps = o.eps;
  t.weightDecay = o.weightDecay;
  t.clipGradNorm = o.clipGradNorm;
  t.lrSchedule = scheduleName(o.lrSchedule);
  t.warmupSteps = o.warmupSteps;
  t.steps = o.steps;
  t.gradAccum = o.gradAccum;
  t.maskTokenId = maskTokenId;
  t.seed = o.seed;
  return t;
}

double fsdp::runtime::learningRate(const RunOptions &o, int64_t step) {
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

StepReport fsdp::runtime::stepReport(const Program &p, const RunOptions &o, int64_t step,
                                     double lossSum, double lossDivisor, double gradNorm,
                                     double seconds) {
  int64_t G = data::globalBatch(p, o);
  StepReport r;
  r.step = step + 1;
  r.steps = o.steps;
  r.loss = lossSum / lossDivisor;
  r.gradNorm = gradNorm;
  r.lr = learningRate(o, r.step);
  r.stepTimeS = seconds;
  r.tokensPerS = (double)(G * p.seqLen) / seconds;
  r.samplesPerS = (double)G / seconds;
  // MFU as the planner counts it: the model FLOPs of the step over every
  // rank's peak for the compute dtype, when the plan's cluster file gave it.
  if (p.peakFlops > 0 && p.modelFlopsPerMicroStep > 0)
    r.mfu = p.modelFlopsPerMicroStep * double(o.gradAccum) /
            (seconds * double(p.worldSize) * p.peakFlops);
  r.predictedPeakBytes = p.predictedPeakBytes;
  r.predictedHostPeakBytes = p.hostBytes;
  return r;
}

//===----------------------------------------------------------------------===//
// The measured trace
//===----------------------------------------------------------------------===//

std::string fsdp::runtime::writeRankTrace(const std::string &path, const Program &p, int rank,
                                          const std::vector<TraceRecord> *records) {
  // Under MPI and NCCL each process writes its own rank's timeline.
  return writeTrace(rank == 0 ? path : path + ".rank" + std::to_string(rank), p, {{rank, records}});
}

// The measured timeline in the predicted one's format: a pid per rank, a
// thread per stream, each event with its unit and phase.
std::string fsdp::runtime::writeTrace(const std::string &path, const Program &p,
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
        int64_t padded = p.units[i.unit].paddedNumel, param = p.paramDtype == "bf16" ? 2 : 4;
        int64_t resharded =
            p.reshardAfterForward ? p.reshardedBytes(p.units[i.unit], param == 2) : 0;
        if (i.op == Op::AllGather)
          changes.push_back({t.start, padded * (i.bf16 ? 2 : 4)});
        else if (i.op == Op::Reshard)
          changes.push_back({t.start, resharded});
        else if (i.op == Op::Alloc)
          changes.push_back({t.start, padded * p.gradElementBytes()});
        else if (i.op == Op::Free)
          changes.push_back({t.end, i.kind == BufferKind::Params ? -padded * param
                                    : i.kind == BufferKind::Resharded
                                        ? -resharded
                                        : -padded * p.gradElementBytes()});
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
