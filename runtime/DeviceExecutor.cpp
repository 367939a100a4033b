//===- DeviceExecutor.cpp - compute and comm streams over one device arena ===//
//
// See DeviceExecutor.h. The host thread enqueues; the GPU executes. Per
// phase (a micro-step's or the optimizer's lists) the host walks the compute
// and comm lists together: cudaStreamWaitEvent waits for the most recent
// *enqueued* record of an event, so every record must be enqueued before a
// wait that needs it: program::issueOrder gives that order (the loader has
// already refused programs where none exists, which would deadlock). A
// phase starts after everything of the one before, on both streams, as the
// CPU executor's phases do: where the host synchronizes with both streams in
// between (a step's end, an eval batch's), or by the join's waits, of which
// the executor issues those that some pair of instructions across the
// boundary needs (program::phaseJoin).
//
// The host waits only by polling (an event or a stream, and meanwhile NCCL's
// asynchronous errors and the peers' failure notes), so a failed peer stops
// this rank instead of hanging it. Kernel launches that fail throw from
// cuda_kernels and are reported with the instruction; errors of a kernel's
// execution surface at the next wait, which names the phase and the step
// (FSDP_CUDA_SYNC=1 waits after every instruction, to name the instruction).
//
//===----------------------------------------------------------------------===//
#include "runtime/DeviceExecutor.h"
#include "runtime/DeviceLabel.h"
#include "runtime/Dispatch.h"
#include "runtime/Scratch.h"
#include "runtime/StreamOrder.h"
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Dataset.h"
#include "runtime/kernels/cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

using namespace fsdp;
using namespace fsdp::runtime;
using namespace fsdp::program;
namespace ck = fsdp::cuda_kernels;

// On a GPU, labels cost a call of this (DeviceLabel.h); the emulated device
// links its own definition, which the linker takes over a weak one.
__attribute__((weak)) void fsdp::runtime::labelDeviceWork(const Program &, const char *, int,
                                                          const Instruction *, const char *) {}
__attribute__((weak)) void fsdp::runtime::labelHostAccess(const void *, size_t, bool,
                                                          const char *) {}

namespace {

struct Failure {
  std::string message;
};

// Host memory laid out like the arena, for runtime/io and the weights'
// initialisation: reserved, not committed; only the pages of the units'
// shards are ever touched.
class HostMirror {
public:
  ~HostMirror() {
    if (base)
      ::munmap(base, size);
  }
  bool reserve(int64_t bytes) {
    size = size_t(std::max<int64_t>(bytes, 1));
    void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return false;
    base = static_cast<char *>(p);
    return true;
  }
  char *data() const { return base; }

private:
  char *base = nullptr;
  size_t size = 0;
};

// One instruction's timing events, for --trace.
struct PendingTrace {
  const Instruction *inst;
  int stream;
  bool optimizer;
  int64_t step;
  cudaEvent_t start, end;
};

class DeviceRank : detail::ArenaAccess {
  friend struct CudaKernels;
  template <typename> friend struct fsdp::runtime::ArenaMemory;

public:
  DeviceRank(const Program &p, const RunOptions &o, NcclComms &comms, Communicator &host,
             const detail::Inputs &data)
      : ArenaAccess(p), p(p), o(o), comms(comms), host(host), data(data) {}
  ~DeviceRank();

  std::string run(const StepCallback &onStep);
  std::vector<detail::TraceRecord> records[2];

private:
  int shardMember() const { return comms.memberIndex(Group::Shard); }

  [[noreturn]] void fail(const std::string &why) {
    // This rank's --timeout report in a host collective stands as it is,
    // whichever caller (a save, the stop agreement) carried it here.
    std::string hostErr = host.error();
    const std::string &what = timedOut(hostErr) ? hostErr : why;
    comms.abort("rank " + std::to_string(comms.rank()) + ": " + what);
    throw Failure{what};
  }
  std::string where() const {
    if (!curInst)
      return curPhase;
    return curPhase + "." + (curStream ? "comm" : "compute") + "[" +
           std::to_string(curInst->index) + "] (" + opName(curInst->op) + ")";
  }
  void cuda(cudaError_t e, const char *what) {
    if (e != cudaSuccess)
      fail(where() + ": " + what + ": CUDA: " + cudaGetErrorString(e));
  }
  void nccl(const std::string &err) {
    if (!err.empty())
      fail(where() + ": " + err);
  }
  // Waits (polling) for the event; an error here is asynchronous: it names
  // the phase and the step, not an instruction.
  void waitFor(cudaEvent_t ev, const std::string &what) {
    std::string err = comms.waitEvent(ev);
    // --timeout's report names every rank's place itself.
    if (timedOut(err))
      fail(err);
    // The hint is for this rank's own error: a peer's ("stopped: ...") has
    // its own, and naming an instruction here would not find it.
    const bool peers = err.rfind("stopped: ", 0) == 0;
    if (!err.empty())
      fail(what + ": " + err +
           (syncEach || peers
                ? ""
                : " (set FSDP_CUDA_SYNC=1 to wait after every instruction and name it)"));
  }

  static bool timedOut(const std::string &err) { return err.rfind("waited ", 0) == 0; }
  // A collective of the host communicator failed (fail() keeps a --timeout
  // report as it is).
  [[noreturn]] void hostFailed() { fail("stopped: " + host.error()); }
  // Names the program's collective enqueued next, for --timeout's report.
  void name(const Instruction &inst, Group g, const char *what) {
    comms.at(g,
             place + " comm[" + std::to_string(inst.index) + "] " + opName(inst.op) +
                 (inst.op == Op::GradNorm ? "" : " unit '" + p.units[inst.unit].name + "'"),
             what);
  }

  void setUp();
  void initShards(bool resume, int64_t *first);
  void copyShards(bool toDevice);
  void fillInputs(bool eval, int64_t step, int64_t micro);
  void runPhase(const Phase &s, const char *phase, bool optimizer, const PhaseJoin *next);
  void synchronize(const std::string &what);
  void microStep(bool eval, int64_t index, int64_t a, const char *phase);
  // Bytes of the pinned input buffer's two parts: the model's input (tokens
  // or patches), rounded up to 8 so that the i64 targets after it align.
  int64_t inputBytes() const { return (p.tensors[p.tokens].bytes() + 7) / 8 * 8; }
  int64_t targetBytes() const { return p.tensors[p.targets].bytes(); }
  double evaluate();
  void enqueue(const Instruction &inst, int stream, bool optimizer);
  void computeOne(const Instruction &inst);
  void commOne(const Instruction &inst);
  void optimizerStep(const Unit &u);
  void collectTrace();

  const Program &p;
  const RunOptions &o;
  NcclComms &comms;
  Communicator &host;
  const detail::Inputs &data;
  bool recording = true; // into the measured trace (not during eval)

  HostMirror mirror;

  cudaStream_t compute = nullptr, comm = nullptr;
  cublasHandle_t cublas = nullptr;
  std::vector<cudaEvent_t> events;
  cudaEvent_t joinComm = nullptr, joinCompute = nullptr, normReady = nullptr, computeDone = nullptr,
              commDone = nullptr;
  // What joins a micro-step to the next, and to the optimizer.
  PhaseJoin toMicroStep, toOptimizer;
  cudaEvent_t inputCopied[2] = {nullptr, nullptr};
  char *inputHost[2] = {nullptr, nullptr}; // pinned: the input (tokens), then the targets
  float *lossHost = nullptr;               // pinned: one a micro-step
  double *normHost = nullptr;              // pinned

  int64_t step = 0, traceStep = 0, microIndex = 0;
  double gradNorm = 0;
  bool normEnqueued = false, normFetched = false, phaseHasNorm = false;
  float lossScale = 1;
  bool syncEach = false;

  std::string curPhase;
  std::string place; // "step 2 micro_step 1/2": --timeout's report
  int curStream = 0;
  const Instruction *curInst = nullptr;

  // --trace: timing events, read back after each step.
  cudaEvent_t traceBase = nullptr;
  std::vector<cudaEvent_t> tracePool;
  size_t traceUsed = 0;
  std::vector<PendingTrace> pending;
  bool ok = false; // the run ended without failure: resources may be freed
};

DeviceRank::~DeviceRank() {
  // After a failure, work may still be queued on the streams (ncclCommAbort
  // has stopped the collectives, but a broken context may not drain): the
  // process is about to exit, and the driver frees what it holds.
  if (!ok)
    return;
  for (cudaEvent_t e : events)
    cudaEventDestroy(e);
  for (cudaEvent_t e : tracePool)
    cudaEventDestroy(e);
  for (cudaEvent_t e : {joinComm, joinCompute, normReady, computeDone, commDone, inputCopied[0],
                        inputCopied[1], traceBase})
    if (e)
      cudaEventDestroy(e);
  if (cublas)
    cublasDestroy(cublas);
  if (compute)
    cudaStreamDestroy(compute);
  if (comm)
    cudaStreamDestroy(comm);
  for (char *h : inputHost)
    if (h)
      cudaFreeHost(h);
  if (lossHost)
    cudaFreeHost(lossHost);
  if (normHost)
    cudaFreeHost(normHost);
  if (arena)
    cudaFree(arena);
}

void DeviceRank::setUp() {
  curPhase = "setup";
  curInst = nullptr;
  const char *sync = std::getenv("FSDP_CUDA_SYNC");
  syncEach = sync && *sync && std::strcmp(sync, "0") != 0;
  // Head dims the attention kernels take, checked before anything runs.
  for (const Phase *s : {&p.microStep, &p.optimizer})
    for (const Instruction &i : s->compute)
      if (i.op == Op::CausalAttention || i.op == Op::CausalAttentionGrad || i.op == Op::Attention ||
          i.op == Op::AttentionGrad) {
        bool fwd = i.op == Op::CausalAttention || i.op == Op::Attention;
        int64_t q = fwd ? i.in[0] : i.in[1];
        int64_t Dh = p.tensors[q].shape[2] / i.numHeads;
        if (Dh > 256) {
          curInst = &i;
          curPhase = s == &p.microStep ? "micro_step" : "optimizer";
          curStream = 0;
          fail(where() + ": head dim " + std::to_string(Dh) +
               " is over the CUDA attention kernels' 256");
        }
      }
  // The one device allocation, laid out by the plan: every buffer, the
  // kernels' scratch, the collectives' staging and cuBLAS's workspace
  // (runtime/Scratch.h; the loader has checked each against the target).
  cuda(cudaMalloc(reinterpret_cast<void **>(&arena), size_t(std::max<int64_t>(p.arenaBytes, 1))),
       ("cudaMalloc of the arena (" + std::to_string(p.arenaBytes) + " bytes)").c_str());
  touch(p.workspaceOffset, p.workspaceBytes);
  int lo = 0, hi = 0;
  cuda(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange");
  cuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreate (compute)");
  // Collectives first when both streams want the GPU: they gate compute.
  cuda(cudaStreamCreateWithPriority(&comm, cudaStreamNonBlocking, hi), "cudaStreamCreate (comm)");
  cublasStatus_t st = cublasCreate(&cublas);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasSetStream(cublas, compute);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasSetWorkspace(cublas, at<char>(p.workspaceOffset), size_t(p.workspaceBytes));
  if (st != CUBLAS_STATUS_SUCCESS)
    fail(std::string("setup: cuBLAS: ") + cublasGetStatusString(st));
  events.resize(p.events);
  for (auto &e : events)
    cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  for (cudaEvent_t *e : {&joinComm, &joinCompute, &normReady, &computeDone, &commDone,
                         &inputCopied[0], &inputCopied[1]})
    cuda(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreate");
  toMicroStep = phaseJoin(p, p.microStep, p.microStep);
  toOptimizer = phaseJoin(p, p.microStep, p.optimizer);
  for (auto &h : inputHost)
    cuda(cudaMallocHost(reinterpret_cast<void **>(&h), size_t(inputBytes() + targetBytes())),
         "cudaMallocHost (inputs)");
  cuda(cudaMallocHost(reinterpret_cast<void **>(&lossHost), size_t(4 * o.gradAccum)),
       "cudaMallocHost (losses)");
  cuda(cudaMallocHost(reinterpret_cast<void **>(&normHost), 8), "cudaMallocHost (norm)");
  *normHost = 0;
  if (!o.trace.empty()) {
    cuda(cudaEventCreate(&traceBase), "cudaEventCreate");
  }
}

// The rank's shards: the same values as the CPU executor's (detail::
// initShards, or a checkpoint) in host memory laid out like the arena, then
// copied to the device.
void DeviceRank::initShards(bool resume, int64_t *first) {
  curPhase = "setup";
  curInst = nullptr;
  if (!mirror.reserve(p.arenaBytes))
    fail("cannot reserve " + std::to_string(p.arenaBytes) + " bytes of host memory for the shards");
  char *h = mirror.data();
  for (const Unit &u : p.units)
    for (int64_t off : {u.shardOffset, u.gradShardOffset, u.expAvgOffset, u.expAvgSqOffset}) {
      std::memset(h + off, 0, u.shardNumel * 4);
      touch(off, u.shardNumel * 4);
    }
  if (resume)
    host.at(Group::World, "the resume from " + o.resume, true);
  std::string err = resume ? detail::resumeShards(p, o, host, h, first)
                           : detail::initShards(p, o, shardMember(), h);
  if (!err.empty())
    fail(err);
  copyShards(true);
  // cudaMemcpy from pageable memory may return before its DMA has landed,
  // and the compute and comm streams (non-blocking) do not wait for the
  // default stream: the shards are complete on the device before any kernel.
  cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (shards copied)");
}

// Every unit's four persistent buffers between the mirror and the device
// (synchronous: nothing else is in flight when this runs).
void DeviceRank::copyShards(bool toDevice) {
  char *h = mirror.data();
  for (const Unit &u : p.units)
    for (int64_t off : {u.shardOffset, u.gradShardOffset, u.expAvgOffset, u.expAvgSqOffset}) {
      size_t bytes = size_t(u.shardNumel * 4);
      if (!bytes)
        continue;
      cuda(toDevice ? cudaMemcpy(arena + off, h + off, bytes, cudaMemcpyHostToDevice)
                    : cudaMemcpy(h + off, arena + off, bytes, cudaMemcpyDeviceToHost),
           toDevice ? "cudaMemcpy of the shards to the device"
                    : "cudaMemcpy of the shards to the host");
    }
}

void DeviceRank::fillInputs(bool eval, int64_t stepIndex, int64_t micro) {
  int j = int(microIndex++ % 2);
  // The pinned buffer's previous copy must have left it.
  waitFor(inputCopied[j], curPhase + " (inputs of step " + std::to_string(stepIndex + 1) + ")");
  char *in = inputHost[j];
  int64_t *tgt = reinterpret_cast<int64_t *>(inputHost[j] + inputBytes());
  labelHostAccess(in, size_t(inputBytes() + targetBytes()), true, "fillInputs (pinned inputs)");
  detail::fillInputs(p, o, data, eval, comms.rank(), stepIndex, micro, in, tgt);
  curInst = nullptr;
  cuda(cudaMemcpyAsync(t<char>(p.tokens), in, size_t(p.tensors[p.tokens].bytes()),
                       cudaMemcpyHostToDevice, compute),
       "cudaMemcpyAsync (tokens)");
  cuda(cudaMemcpyAsync(t<int64_t>(p.targets), tgt, size_t(targetBytes()), cudaMemcpyHostToDevice,
                       compute),
       "cudaMemcpyAsync (targets)");
  cuda(cudaEventRecord(inputCopied[j], compute), "cudaEventRecord");
}

// The phase's lists, then the waits of `next`, the join to the phase after
// it on the device; none where the host synchronizes with both streams next.
void DeviceRank::runPhase(const Phase &s, const char *phase, bool optimizer,
                          const PhaseJoin *next) {
  curPhase = phase;
  normEnqueued = normFetched = false;
  phaseHasNorm = std::any_of(s.comm.begin(), s.comm.end(),
                             [](const Instruction &i) { return i.op == Op::GradNorm; });
  // Records before their waits, in an order both streams keep (the loader
  // has checked that one exists).
  std::vector<Slot> order;
  std::string why = issueOrder(s, order);
  if (!why.empty()) {
    curInst = nullptr;
    fail(std::string(phase) + ": " + why);
  }
  for (const Slot &slot : order)
    enqueue((slot.stream ? s.comm : s.compute)[slot.index], slot.stream, optimizer);
  curInst = nullptr;
  if (next && next->computeWaits) {
    cuda(cudaEventRecord(joinComm, comm), "cudaEventRecord (phase end)");
    cuda(cudaStreamWaitEvent(compute, joinComm, 0), "cudaStreamWaitEvent (phase end)");
  }
  if (next && next->commWaits) {
    cuda(cudaEventRecord(joinCompute, compute), "cudaEventRecord (phase end)");
    cuda(cudaStreamWaitEvent(comm, joinCompute, 0), "cudaStreamWaitEvent (phase end)");
  }
}

// The host waits until both streams have done everything enqueued so far.
void DeviceRank::synchronize(const std::string &what) {
  curInst = nullptr;
  cuda(cudaEventRecord(computeDone, compute), "cudaEventRecord (compute's end)");
  cuda(cudaEventRecord(commDone, comm), "cudaEventRecord (comm's end)");
  waitFor(computeDone, what);
  waitFor(commDone, what);
}

void DeviceRank::enqueue(const Instruction &inst, int stream, bool optimizer) {
  curInst = &inst;
  curStream = stream;
  cudaStream_t s = stream ? comm : compute;
  DeviceWorkLabel label(p, curPhase.c_str(), stream, inst, arena); // no-op on a GPU
  if (inst.op == Op::Record) {
    cuda(cudaEventRecord(events[inst.event], s), "cudaEventRecord");
    return;
  }
  if (inst.op == Op::Wait) {
    cuda(cudaStreamWaitEvent(s, events[inst.event], 0), "cudaStreamWaitEvent");
    return;
  }
  cudaEvent_t start = nullptr;
  bool tracing = !o.trace.empty() && recording;
  if (tracing) {
    if (traceUsed + 2 > tracePool.size()) {
      cudaEvent_t e;
      cuda(cudaEventCreate(&e), "cudaEventCreate (trace)");
      tracePool.push_back(e);
      cuda(cudaEventCreate(&e), "cudaEventCreate (trace)");
      tracePool.push_back(e);
    }
    start = tracePool[traceUsed++];
    cuda(cudaEventRecord(start, s), "cudaEventRecord (trace)");
  }
  try {
    if (stream)
      commOne(inst);
    else
      computeOne(inst);
  } catch (const std::exception &e) { // cuda_kernels::Error, mostly
    fail(where() + ": " + e.what());
  }
  if (tracing) {
    cudaEvent_t end = tracePool[traceUsed++];
    cuda(cudaEventRecord(end, s), "cudaEventRecord (trace)");
    pending.push_back({&inst, stream, optimizer, traceStep, start, end});
  }
  if (syncEach) {
    std::string err = comms.waitStream(s);
    if (!err.empty())
      fail(where() + ": " + err);
  }
}

// The CUDA kernels as Dispatch.h calls them: each enqueued on the compute
// stream (the linears through cuBLAS); memory, scratch included, is the
// device arena.
struct CudaKernels : ArenaMemory<DeviceRank> {
  cudaStream_t s;
  void zero(int64_t dst, int64_t from, int64_t bytes) {
    r.touch(dst, bytes);
    if (bytes - from > 0)
      r.cuda(cudaMemsetAsync(r.at<char>(dst) + from, 0, size_t(bytes - from), s),
             "cudaMemsetAsync");
  }
  void optimizerStep(const Unit &u) { r.optimizerStep(u); }

  // Each kernel forwards to ck:: (cuda.h), whose f32 and bf16 overloads the
  // storage type picks, with the stream (and the cuBLAS handle); where a
  // CUDA kernel takes no scratch, the one Dispatch passes is dropped.
#define FSDP_CUDA_KERNEL(name)                                                                     \
  template <typename... A> void name(A... a) { ck::name(a..., s); }
#define FSDP_CUDA_KERNEL_NO_SCRATCH(name)                                                          \
  template <typename... A> void name(A... a) {                                                     \
    dropLast([&](auto... x) { ck::name(x..., s); }, a...);                                         \
  }
#define FSDP_CUDA_GEMM(name)                                                                       \
  template <typename... A> void name(A... a) {                                                     \
    dropLast([&](auto... x) { ck::name(r.cublas, x..., s); }, a...);                               \
  }
  FSDP_CUDA_KERNEL(positionIds)
  FSDP_CUDA_KERNEL(tokenTypeIds)
  FSDP_CUDA_KERNEL(embeddingForward)
  FSDP_CUDA_GEMM(linearForward)
  FSDP_CUDA_GEMM(linearBackwardInput)
  FSDP_CUDA_GEMM(linearBackwardWeight)
  FSDP_CUDA_KERNEL_NO_SCRATCH(biasBackward)
  FSDP_CUDA_KERNEL(layerNormForward)
  FSDP_CUDA_KERNEL(layerNormBackward)
  FSDP_CUDA_KERNEL(rmsNormForward)
  FSDP_CUDA_KERNEL(rmsNormBackward)
  FSDP_CUDA_KERNEL(rope)
  FSDP_CUDA_KERNEL(split)
  FSDP_CUDA_KERNEL(concat)
  FSDP_CUDA_KERNEL_NO_SCRATCH(attentionForward)
  FSDP_CUDA_KERNEL(attentionBackward)
  FSDP_CUDA_KERNEL(geluForward)
  FSDP_CUDA_KERNEL(geluBackward)
  FSDP_CUDA_KERNEL(siluMulForward)
  FSDP_CUDA_KERNEL(siluMulBackward)
  FSDP_CUDA_KERNEL(add)
  FSDP_CUDA_KERNEL(classTokenForward)
  FSDP_CUDA_KERNEL(classTokenBackward)
  FSDP_CUDA_KERNEL(firstTokenForward)
  FSDP_CUDA_KERNEL(firstTokenBackward)
  FSDP_CUDA_KERNEL(crossEntropyBackward)
  FSDP_CUDA_KERNEL(fromBf16)
  FSDP_CUDA_KERNEL(toBf16)
  FSDP_CUDA_KERNEL(roundToBf16)
#undef FSDP_CUDA_KERNEL
#undef FSDP_CUDA_KERNEL_NO_SCRATCH
#undef FSDP_CUDA_GEMM
  // The f32 kernel sums with atomics in place; the bf16 one in f32 scratch.
  template <typename T>
  void embeddingBackward(const T *dout, const int64_t *ids, T *dtable, int64_t n, int64_t V,
                         int64_t D, float *scratch) {
    if constexpr (std::is_same_v<T, float>)
      ck::embeddingBackward(dout, ids, dtable, n, V, D, s);
    else
      ck::embeddingBackward(dout, ids, dtable, n, V, D, scratch, s);
  }
  template <typename T>
  void crossEntropyForward(const T *logits, const int64_t *targets, float *loss, int64_t n,
                           int64_t V, float *scratch) {
    ck::crossEntropyForward(logits, targets, loss, n, V, reinterpret_cast<double *>(scratch), s);
  }
};

void DeviceRank::computeOne(const Instruction &i) {
  CudaKernels k{{*this}, compute};
  if (!dispatchCompute(p, i, k, lossScale))
    fail(where() + ": not a compute instruction");
}

void DeviceRank::commOne(const Instruction &inst) {
  using T = NcclComms::DType;
  switch (inst.op) {
  case Op::AllGather: {
    const Unit &u = p.units[inst.unit];
    name(inst, Group::Shard, "all_gather");
    if (inst.bf16) {
      // Round this rank's shard into its own slot, then gather in place.
      touch(inst.dst, u.paddedNumel * 2);
      uint16_t *slot = at<uint16_t>(inst.dst) + shardMember() * u.shardNumel;
      ck::toBf16(at(u.shardOffset), slot, u.shardNumel, comm);
      nccl(comms.allGather(Group::Shard, slot, at(inst.dst), u.shardNumel, T::BF16, comm));
    } else {
      touch(inst.dst, u.paddedNumel * 4);
      nccl(comms.allGather(Group::Shard, at(u.shardOffset), at(inst.dst), u.shardNumel, T::F32,
                           comm));
    }
    break;
  }
  case Op::ReduceScatter: {
    // The sum over the group lands in the plan's staging (runtime/Scratch.h),
    // then is added to the gradient shard (accumulated over micro-steps).
    const Unit &u = p.units[inst.unit];
    name(inst, Group::Shard, "reduce_scatter");
    touch(inst.scratch, inst.scratchBytes);
    char *part = at<char>(inst.scratch);
    if (p.gradElementBytes() == 2 && inst.bf16) {
      // bf16 gradients (bf16 compute), reduced as they are.
      auto *half = reinterpret_cast<uint16_t *>(part);
      nccl(comms.reduceScatter(Group::Shard, at<uint16_t>(inst.src), half, u.shardNumel, T::BF16,
                               comm));
      ck::addBf16Into(at(u.gradShardOffset), half, u.shardNumel, comm);
    } else if (p.gradElementBytes() == 2) {
      // bf16 gradients reduced in f32: widened first, after the part.
      float *wide = at(inst.scratch + reduceScatterWidenOffset(p.target, u.shardNumel, false));
      auto *sum = reinterpret_cast<float *>(part);
      ck::fromBf16(at<kernels::bf16>(inst.src), wide, u.paddedNumel, comm);
      nccl(comms.reduceScatter(Group::Shard, wide, sum, u.shardNumel, T::F32, comm));
      ck::add(at(u.gradShardOffset), sum, at(u.gradShardOffset), u.shardNumel, comm);
    } else if (inst.bf16) {
      // The gradient buffer is rounded to bf16 in place, in its first half.
      uint16_t *half = at<uint16_t>(inst.src);
      auto *sum = reinterpret_cast<uint16_t *>(part);
      ck::toBf16(at(inst.src), half, u.paddedNumel, comm);
      nccl(comms.reduceScatter(Group::Shard, half, sum, u.shardNumel, T::BF16, comm));
      ck::addBf16Into(at(u.gradShardOffset), sum, u.shardNumel, comm);
    } else {
      auto *sum = reinterpret_cast<float *>(part);
      nccl(comms.reduceScatter(Group::Shard, at(inst.src), sum, u.shardNumel, T::F32, comm));
      ck::add(at(u.gradShardOffset), sum, at(u.gradShardOffset), u.shardNumel, comm);
    }
    break;
  }
  case Op::AllReduce: {
    const Unit &u = p.units[inst.unit];
    name(inst, Group::Replica, "all_reduce");
    nccl(comms.allReduce(Group::Replica, at(u.gradShardOffset), at(u.gradShardOffset), u.shardNumel,
                         T::F32, comm));
    break;
  }
  case Op::GradNorm: {
    // The sums of squares' scratch, then a double a unit and their total,
    // in the plan's scratch of this instruction (runtime/Scratch.h).
    touch(inst.scratch, inst.scratchBytes);
    auto *sumsqScratch = reinterpret_cast<double *>(at<char>(inst.scratch));
    auto *normParts = reinterpret_cast<double *>(at<char>(inst.scratch) + gradNormPartsOffset());
    double *normTotal = normParts + p.units.size();
    for (size_t k = 0; k < p.units.size(); ++k)
      ck::sumOfSquares(at(p.units[k].gradShardOffset), p.units[k].shardNumel, normParts + k,
                       sumsqScratch, comm);
    ck::sumDoubles(normParts, (int64_t)p.units.size(), normTotal, comm);
    name(inst, Group::Shard, "all_reduce of a scalar");
    nccl(comms.allReduce(Group::Shard, normTotal, normTotal, 1, T::F64, comm));
    cuda(cudaMemcpyAsync(normHost, normTotal, 8, cudaMemcpyDeviceToHost, comm),
         "cudaMemcpyAsync (norm)");
    cuda(cudaEventRecord(normReady, comm), "cudaEventRecord (norm)");
    normEnqueued = true;
    break;
  }
  default:
    fail(where() + ": not a communication instruction");
  }
}

void DeviceRank::optimizerStep(const Unit &u) {
  if (o.clipGradNorm > 0) {
    // Clipping needs the norm on the host: the one wait inside a phase.
    if (phaseHasNorm && !normEnqueued)
      fail(where() + ": clipping needs the gradient norm, but this phase's grad_norm comes "
                     "after the optimizer step");
    if (normEnqueued && !normFetched) {
      waitFor(normReady, where() + " (waiting for the gradient norm)");
      labelHostAccess(normHost, 8, false, "the optimizer's read of the gradient norm");
      gradNorm = std::sqrt(*normHost);
      normFetched = true;
    }
  }
  double scale = detail::clipScale(o, gradNorm), lr = detail::learningRate(o, step);
  float *param = at(u.shardOffset), *grad = at(u.gradShardOffset);
  float *m = at(u.expAvgOffset), *v = at(u.expAvgSqOffset);
  detail::forEachShardSlice(u, shardMember(), o.weightDecay,
                            [&](int64_t k, int64_t count, double decay) {
                              ck::adamw(param + k, grad + k, m + k, v + k, nullptr, count, step, lr,
                                        o.beta1, o.beta2, o.eps, decay, scale, compute);
                            });
  if (u.shardNumel > 0) // the next step accumulates afresh
    cuda(cudaMemsetAsync(grad, 0, size_t(u.shardNumel * 4), compute), "cudaMemsetAsync");
}

// Micro-step `a` of step (or eval batch) `index` on `from`'s tokens, its
// loss queued into lossHost[a].
void DeviceRank::microStep(bool eval, int64_t index, int64_t a, const char *phase) {
  curPhase = phase;
  place = (eval ? "eval after step " + std::to_string(step) + " batch " : "step ") +
          std::to_string(index + 1) + " micro_step " + std::to_string(a + 1) + "/" +
          std::to_string(o.gradAccum);
  fillInputs(eval, index, a);
  // Eval batches end at the host's wait (evaluate).
  runPhase(p.microStep, phase, false,
           a + 1 < o.gradAccum ? &toMicroStep
           : eval              ? nullptr
                               : &toOptimizer);
  curInst = nullptr;
  cuda(cudaMemcpyAsync(lossHost + a, at(p.tensors[p.loss].offset), 4, cudaMemcpyDeviceToHost,
                       compute),
       "cudaMemcpyAsync (loss)");
}

// The held-out loss, as the CPU executor computes it (Executor.cpp,
// Rank::evaluate): each eval batch through the micro-step, the gradients it
// leaves zeroed.
double DeviceRank::evaluate() {
  recording = false;
  double sum = 0;
  for (int64_t b = 0; b < o.evalBatches; ++b) {
    detail::LossNorm norm;
    if (std::string err = detail::lossNorm(p, o, data, true, b, &norm); !err.empty())
      fail(err);
    for (int64_t a = 0; a < o.gradAccum; ++a)
      microStep(true, b, a, "eval");
    synchronize("eval batch " + std::to_string(b + 1));
    double batch = 0;
    labelHostAccess(lossHost, size_t(4 * o.gradAccum), false, "eval's read of the losses");
    for (int64_t a = 0; a < o.gradAccum; ++a)
      batch += detail::lossWeight(p, o, data, true, comms.rank(), b, a) * lossHost[a];
    sum += batch / norm.divisor;
  }
  for (const Unit &u : p.units)
    if (u.shardNumel > 0)
      cuda(cudaMemsetAsync(at(u.gradShardOffset), 0, size_t(u.shardNumel * 4), compute),
           "cudaMemsetAsync (after eval)");
  // The next step's comm work writes the gradient shards too.
  synchronize("eval's end");
  recording = true;
  host.at(Group::World, "eval after step " + std::to_string(step) + ": the eval loss all-reduce");
  if (!host.allReduceScalar(Group::World, &sum))
    hostFailed();
  return sum / double(o.evalBatches);
}

// After a step's wait: the timing events become trace records (seconds
// since the first step began).
void DeviceRank::collectTrace() {
  for (const PendingTrace &t : pending) {
    float a = 0, b = 0;
    curInst = nullptr;
    cuda(cudaEventElapsedTime(&a, traceBase, t.start), "cudaEventElapsedTime (trace)");
    cuda(cudaEventElapsedTime(&b, traceBase, t.end), "cudaEventElapsedTime (trace)");
    records[t.stream].push_back({t.inst, t.stream, t.optimizer, t.step, a * 1e-3, b * 1e-3});
  }
  pending.clear();
  traceUsed = 0;
}

std::string DeviceRank::run(const StepCallback &onStep) {
  try {
    setUp();
    int64_t first = 0;
    initShards(!o.resume.empty(), &first);
    bool stop = false;
    std::string err = detail::startTogether(host, o, first, &stop);
    if (!err.empty())
      fail(err);
    step = first;
    if (traceBase) {
      curInst = nullptr;
      cuda(cudaEventRecord(traceBase, compute), "cudaEventRecord (trace)");
      cuda(cudaStreamWaitEvent(comm, traceBase, 0), "cudaStreamWaitEvent (trace)");
    }
    for (int64_t t = first; t < o.steps && !stop; ++t) {
      traceStep = t;
      // The mean over the step's G x S tokens, G images, or selected tokens.
      detail::LossNorm norm;
      if (std::string err = detail::lossNorm(p, o, data, false, t, &norm); !err.empty())
        fail(err);
      lossScale = norm.gradScale;
      auto start = std::chrono::steady_clock::now();
      for (int64_t a = 0; a < o.gradAccum; ++a)
        microStep(false, t, a, "micro_step");
      ++step;
      place = "step " + std::to_string(t + 1) + " optimizer";
      runPhase(p.optimizer, "optimizer", true, nullptr);
      synchronize("step " + std::to_string(t + 1));
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (normEnqueued) {
        labelHostAccess(normHost, 8, false, "the step's read of the gradient norm");
        gradNorm = std::sqrt(*normHost);
      }
      if (!o.trace.empty())
        collectTrace();
      double lossSum = 0;
      labelHostAccess(lossHost, size_t(4 * o.gradAccum), false, "the step's read of the losses");
      for (int64_t a = 0; a < o.gradAccum; ++a)
        lossSum += detail::lossWeight(p, o, data, false, comms.rank(), t, a) * lossHost[a];
      // For the report only, outside the plan: the mean loss over ranks.
      host.at(Group::World, "step " + std::to_string(t + 1) + ": the step's loss all-reduce");
      if (!host.allReduceScalar(Group::World, &lossSum))
        hostFailed();
      StepReport r = detail::stepReport(p, o, t, lossSum, norm.divisor, gradNorm, seconds);
      r.peakBytes = peakBytes();
      r.outsideArenaBytes = host.stagingBytes();
      std::string err = detail::afterStep(
          o, r, host, onStep, [&] { return evaluate(); },
          [&] {
            curPhase = "save";
            curInst = nullptr;
            copyShards(false);
            return io::saveCheckpoint(o.save, o.keep, p, host, mirror.data(), step,
                                      detail::globalBatch(p, o));
          },
          &stop);
      if (!err.empty())
        fail(err);
    }
    if (!o.saveWeights.empty() && !stop) { // stopped early: the model is not final
      curPhase = "save";
      curInst = nullptr;
      copyShards(false);
      host.at(Group::World, "the weights' save (--save-weights)", true);
      std::string err =
          io::saveFullWeights(o.saveWeights, p, host, mirror.data(), o.maxShardSize, step);
      if (!err.empty())
        fail(err);
    }
  } catch (const Failure &f) {
    return "rank " + std::to_string(comms.rank()) + ": " + f.message;
  } catch (const std::exception &e) { // not CUDA's: the host's (memory, mostly)
    std::string why = "rank " + std::to_string(comms.rank()) + ": " + where() + ": " + e.what();
    comms.abort(why);
    return why;
  }
  ok = true;
  return "";
}

} // namespace

std::string fsdp::runtime::probeCudaDevices(int *count) {
  *count = 0;
  cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    *count = 0;
    return std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
  }
  if (*count < 1)
    return "no CUDA device (cudaGetDeviceCount: 0 devices)";
  return "";
}

std::string fsdp::runtime::runNccl(const Program &program, const RunOptions &options,
                                   const NcclBootstrap &bootstrap, const StepCallback &onStep) {
  std::string who = "rank " + std::to_string(bootstrap.rank) + ": ";
  int count = 0;
  std::string err = probeCudaDevices(&count);
  if (!err.empty())
    return who + err;
  int device = ncclLocalRank(bootstrap) % count;
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess)
    return who + "cudaSetDevice(" + std::to_string(device) + "): CUDA: " + cudaGetErrorString(e);
  // Bad data stops every rank the same way, before any communicator.
  detail::Inputs data;
  err = data.open(program, options);
  if (!err.empty())
    return who + err;
  std::unique_ptr<NcclComms> comms;
  err = NcclComms::create(bootstrap, (int)program.shardSize, &comms);
  if (!err.empty())
    return who + err;
  std::string result;
  std::vector<detail::TraceRecord> traces[2];
  {
    auto host = ncclHostCommunicator(*comms, (int)program.shardSize);
    DeviceRank rank(program, options, *comms, *host, data);
    result = rank.run(onStep);
    if (result.empty() && !options.trace.empty()) {
      std::string path = comms->rank() == 0
                             ? options.trace
                             : options.trace + ".rank" + std::to_string(comms->rank());
      result = detail::writeTrace(path, program, {{comms->rank(), rank.records}});
    }
    // A peer that failed after this rank's last collective had its part
    // (the emulated device's, or NCCL's, all-reduce can complete then):
    // this rank's run did not end well either.
    if (result.empty() && comms->worldSize() > 1) {
      std::string peer = comms->check();
      if (!peer.empty())
        result = who + peer;
    }
    if (!result.empty() && !comms->aborted())
      comms->abort(result);
  }
  return result;
}
