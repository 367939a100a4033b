//===- DeviceExecutor.cpp - compute and comm streams over one device arena ===//
//
// See DeviceExecutor.h. The CUDA rank of the trainer (Trainer.h): only its
// streams, events and device memory are here. The host thread enqueues; the GPU
// executes. Per phase (a micro-step's or the optimizer's lists) the host walks
// the compute and comm lists together: cudaStreamWaitEvent waits for the most
// recent *enqueued* record of an event, so every record must be enqueued before
// a wait that needs it: program::issueOrder gives that order (the loader has
// already refused programs where none exists, which would deadlock). A phase
// starts after everything of the one before, on both streams, as the CPU rank's
// phases do: where the host synchronizes with both streams in between (a step's
// end, an eval batch's), or by the join's waits, of which the executor issues
// those that some pair of instructions across the boundary needs
// (program::phaseJoin).
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
#include "runtime/Trainer.h"
#include "runtime/data/Inputs.h"
#include "runtime/kernels/cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sys/mman.h>
#include <thread>

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

// The CUDA rank: the arena is one device allocation, the compute and comm
// lists are enqueued on two streams joined by CUDA events; the host waits
// only where the trainer synchronizes (and for clipping's norm).
class DeviceRank final : public RankDevice {
  friend struct CudaKernels;

public:
  DeviceRank(const Program &p, const RunOptions &options, NcclComms &comms, Communicator &host,
             int hostThreads)
      : RankDevice(p, options, host), comms(comms), hostThreads(hostThreads) {}
  ~DeviceRank() override;

  void setUp() override;
  // After a failure, work may still be queued on the streams (ncclCommAbort
  // has stopped the collectives, but a broken context may not drain): the
  // process is about to exit, and the driver frees what it holds.
  void tearDown(bool ok) override { release = ok; }
  char *shardImage() override { return mirror.data(); }
  void shardsIn() override;
  void shardsOut() override {
    curPhase = "save";
    curInst = nullptr;
    copyShards(false);
  }
  InputBuffers inputBuffers(PhaseKind kind, int64_t index) override;
  void inputsIn() override;
  void keepLoss(int64_t micro) override;
  void synchronize(const std::string &what) override;
  const float *losses(const char *reader) override {
    labelHostAccess(lossHost, size_t(4 * options.gradAccum), false, reader);
    return lossHost;
  }
  // Queued on compute right after the cross_entropy kernel that reads them.
  void keepLogits(const void *logits, int64_t bytes) override {
    cuda(cudaMemcpyAsync(logitsHost + running->micro * bytes, logits, size_t(bytes),
                         cudaMemcpyDeviceToHost, compute),
         "cudaMemcpyAsync (eval logits)");
  }
  const char *keptLogits(const char *reader) override {
    labelHostAccess(logitsHost, size_t(options.gradAccum * logitsBytes()), false, reader);
    return logitsHost;
  }
  double stepGradNorm() override;
  double clippingNorm() override;
  void zero(void *dst, int64_t bytes, const char *why) override {
    if (bytes > 0)
      cuda(cudaMemsetAsync(dst, 0, size_t(bytes), compute),
           why ? (std::string("cudaMemsetAsync (") + why + ")").c_str() : "cudaMemsetAsync");
  }
  void accumulate(float *acc, const void *grads, int64_t n, bool bf16) override {
    if (bf16)
      ck::addBf16Into(acc, static_cast<const uint16_t *>(grads), n, compute);
    else
      ck::add(acc, static_cast<const float *>(grads), acc, n, compute);
  }
  void copy(void *dst, const void *src, int64_t bytes) override {
    cuda(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, compute),
         "cudaMemcpyAsync (reshard)");
  }
  // offload optimizer: the host pool is pinned, so these are DMA copies
  // queued on the compute stream; the host waits for the gradient's.
  void toHost(void *dst, const void *src, int64_t bytes) override {
    cuda(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToHost, compute),
         "cudaMemcpyAsync (gradient shard to the host)");
    cuda(cudaEventRecord(hostCopied, compute), "cudaEventRecord (gradient shard to the host)");
    waitFor(hostCopied, place() + " (waiting for the gradient shard's copy to the host)");
    labelHostAccess(dst, size_t(bytes), false, "the host AdamW's read of the gradient shard");
  }
  void toDevice(void *dst, const void *src, int64_t bytes) override {
    cuda(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyHostToDevice, compute),
         "cudaMemcpyAsync (master shard to the device)");
  }
  // offload all: the parameter shard from the pinned pool, on the comm
  // stream before its gather.
  void shardIn(void *dst, const void *src, int64_t bytes) override {
    cuda(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyHostToDevice, comm),
         "cudaMemcpyAsync (parameter shard from the host)");
  }
  void hostWrites(void *host, int64_t bytes, const char *what) override {
    labelHostAccess(host, size_t(bytes), true, what);
  }
  void hostAdamw(const AdamWSlice &a) override;
  void adamw(const AdamWSlice &a) override {
    ck::adamw(a.param, a.grad, a.expAvg, a.expAvgSq, nullptr, a.count, a.step, a.lr, a.beta1,
              a.beta2, a.eps, a.weightDecay, a.gradScale, compute);
  }
  void nameCollective(Group g, const std::string &site, const char *kind) override {
    comms.at(g, site, kind);
  }
  void toBf16(const float *x, uint16_t *out, int64_t n) override { ck::toBf16(x, out, n, comm); }
  void fromBf16(const uint16_t *x, float *out, int64_t n) override {
    ck::fromBf16(x, out, n, comm);
  }
  std::string allGather(Group g, const void *src, void *dst, int64_t count, DType dtype) override {
    return comms.allGather(g, src, dst, count, ncclType(dtype), comm);
  }
  std::string reduceScatterAdd(const void *src, float *shard, int64_t count, DType dtype,
                               void *staging) override;
  std::string allReduce(float *buf, int64_t count) override {
    return comms.allReduce(Group::Replica, buf, buf, count, NcclComms::DType::F32, comm);
  }
  // Tensor parallelism: the compute stream's collectives over the tp group,
  // the comm stream's sums of partial gradients over its other communicator.
  std::string tpAllGather(const void *src, void *dst, int64_t bytes) override {
    return comms.allGather(Group::Tp, src, dst, bytes, NcclComms::DType::U8, compute);
  }
  std::string tpReduceScatter(const float *src, float *dst, int64_t count) override {
    return comms.reduceScatter(Group::Tp, src, dst, count, NcclComms::DType::F32, compute);
  }
  std::string tpAllReduce(Group g, float *buf, int64_t count) override {
    return comms.allReduce(g, buf, buf, count, NcclComms::DType::F32,
                           g == Group::Tp ? compute : comm);
  }
  std::string tpAllReduceSlots(float *part, int64_t count, int64_t piece, int64_t pieces) override {
    float *slot = tpSlots + piece * count;
    cuda(cudaMemsetAsync(tpSlots, 0, size_t(pieces * count * 4), comm),
         "cudaMemsetAsync (tp slots)");
    cuda(cudaMemcpyAsync(slot, part, size_t(count * 4), cudaMemcpyDeviceToDevice, comm),
         "cudaMemcpyAsync (into the tp slots)");
    std::string why = comms.allReduce(Group::TpGrad, tpSlots, tpSlots, pieces * count,
                                      NcclComms::DType::F32, comm);
    if (why.empty())
      cuda(cudaMemcpyAsync(part, slot, size_t(count * 4), cudaMemcpyDeviceToDevice, comm),
           "cudaMemcpyAsync (from the tp slots)");
    return why;
  }
  void addBias(float *x, const float *bias, int64_t rows, int64_t D) override {
    ck::addBias(x, bias, rows, D, compute);
  }
  std::string reduceGradNorm(const Instruction &inst, const std::string &site) override;
  void traceFrom() override;
  void stepDone() override;
  int64_t outsideArenaBytes() const override { return host.stagingBytes() + tpSlotsBytes; }
  void abort(const std::string &message) override { comms.abort(message); }
  // This rank's --timeout report in a host collective stands as it is,
  // whichever caller (a save, the stop agreement) carried it here.
  std::string failure(const std::string &why) override {
    std::string hostErr = host.error();
    return timedOut(hostErr) ? hostErr : why;
  }
  std::string place() const override {
    if (!curInst)
      return curPhase;
    return instructionPlace(curPhase, curStream, *curInst);
  }

private:
  void runPhase(const PhaseRun &run) override;
  void cuda(cudaError_t e, const char *what) {
    if (e != cudaSuccess)
      fail(place() + ": " + what + ": CUDA: " + cudaGetErrorString(e));
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
  static NcclComms::DType ncclType(DType dtype) {
    return dtype == DType::BF16 ? NcclComms::DType::BF16 : NcclComms::DType::F32;
  }

  void copyShards(bool toDevice);
  // Bytes of the pinned input buffer's two parts: the model's input (tokens
  // or patches), rounded up to 8 so that the i64 targets after it align.
  int64_t inputBytes() const { return (program.tensors[program.tokens].bytes() + 7) / 8 * 8; }
  int64_t targetBytes() const { return program.tensors[program.targets].bytes(); }
  void enqueue(const Instruction &inst, int stream, const PhaseRun &run);

  NcclComms &comms;
  int hostThreads; // the host's cores this rank's AdamW may use (offload optimizer)

  HostMirror mirror;

  cudaStream_t compute = nullptr, comm = nullptr;
  cublasHandle_t cublas = nullptr;
  std::vector<cudaEvent_t> events;
  cudaEvent_t hostCopied = nullptr; // offload optimizer: a gradient shard on the host
  cudaEvent_t joinComm = nullptr, joinCompute = nullptr, normReady = nullptr, computeDone = nullptr,
              commDone = nullptr;
  // What joins a phase to the one after it on the device, by the pair
  // (a step's first, last and other micro-steps may have lists of their
  // own: grad_sync last, reshard_after_backward false).
  std::map<std::pair<const Phase *, const Phase *>, PhaseJoin> joins;
  const PhaseJoin &joinOf(const Phase &before, const Phase &after) {
    auto it = joins.find({&before, &after});
    if (it == joins.end())
      it = joins.emplace(std::make_pair(&before, &after), phaseJoin(program, before, after)).first;
    return it->second;
  }
  cudaEvent_t inputCopied[2] = {nullptr, nullptr};
  char *inputHost[2] = {nullptr, nullptr}; // pinned: the input (tokens), then the targets
  float *lossHost = nullptr;               // pinned: one a micro-step
  char *logitsHost = nullptr;              // pinned: an image classifier's eval logits
  double *normHost = nullptr;              // pinned
  float *tpSlots = nullptr;                // tpAllReduceSlots's (device), outside the arena
  int64_t tpSlotsBytes = 0;

  int64_t microIndex = 0; // micro-steps' inputs so far: the pinned buffer used is this % 2
  double gradNorm = 0;
  bool normEnqueued = false, normFetched = false, phaseHasNorm = false;
  bool syncEach = false;

  std::string curPhase;
  int curStream = 0;
  const Instruction *curInst = nullptr;

  // --trace: timing events, read back after each step.
  cudaEvent_t traceBase = nullptr;
  std::vector<cudaEvent_t> tracePool;
  size_t traceUsed = 0;
  std::vector<PendingTrace> pending;
  bool release = false; // the run ended without failure: resources may be freed
};

DeviceRank::~DeviceRank() {
  if (!release)
    return;
  for (cudaEvent_t e : events)
    cudaEventDestroy(e);
  for (cudaEvent_t e : tracePool)
    cudaEventDestroy(e);
  for (cudaEvent_t e : {joinComm, joinCompute, normReady, computeDone, commDone, inputCopied[0],
                        inputCopied[1], traceBase, hostCopied})
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
  if (logitsHost)
    cudaFreeHost(logitsHost);
  if (normHost)
    cudaFreeHost(normHost);
  if (hostPool)
    cudaFreeHost(hostPool);
  if (tpSlots)
    cudaFree(tpSlots);
  if (arena)
    cudaFree(arena);
}

void DeviceRank::setUp() {
  curPhase = "setup";
  curInst = nullptr;
  const char *sync = std::getenv("FSDP_CUDA_SYNC");
  syncEach = sync && *sync && std::strcmp(sync, "0") != 0;
  // Head dims the attention kernels take, checked before anything runs.
  for (const Phase *s :
       {&program.firstMicroStep, &program.microStep, &program.lastMicroStep, &program.optimizer})
    for (const Instruction &i : s->compute)
      if (i.op == Op::CausalAttention || i.op == Op::CausalAttentionGrad || i.op == Op::Attention ||
          i.op == Op::AttentionGrad) {
        bool fwd = i.op == Op::CausalAttention || i.op == Op::Attention;
        int64_t q = fwd ? i.in[0] : i.in[1];
        int64_t Dh = program.tensors[q].shape[2] / i.numHeads;
        if (Dh > 256) {
          curInst = &i;
          curPhase = s == &program.firstMicroStep  ? "first_micro_step"
                     : s == &program.microStep     ? "micro_step"
                     : s == &program.lastMicroStep ? "last_micro_step"
                                                   : "optimizer";
          curStream = 0;
          fail(place() + ": head dim " + std::to_string(Dh) +
               " is over the CUDA attention kernels' 256");
        }
      }
  // The one device allocation, laid out by the plan: every buffer, the
  // kernels' scratch, the collectives' staging and cuBLAS's workspace
  // (runtime/Scratch.h; the loader has checked each against the target).
  cuda(cudaMalloc(reinterpret_cast<void **>(&arena),
                  size_t(std::max<int64_t>(program.arenaBytes, 1))),
       ("cudaMalloc of the arena (" + std::to_string(program.arenaBytes) + " bytes)").c_str());
  touch(program.workspaceOffset, program.workspaceBytes);
  int lo = 0, hi = 0;
  cuda(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange");
  cuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreate (compute)");
  // Collectives first when both streams want the GPU: they gate compute.
  cuda(cudaStreamCreateWithPriority(&comm, cudaStreamNonBlocking, hi), "cudaStreamCreate (comm)");
  cublasStatus_t st = cublasCreate(&cublas);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasSetStream(cublas, compute);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasSetWorkspace(cublas, at<char>(program.workspaceOffset),
                            size_t(program.workspaceBytes));
  if (st != CUBLAS_STATUS_SUCCESS)
    fail(std::string("setup: cuBLAS: ") + cublasGetStatusString(st));
  events.resize(program.events);
  for (auto &e : events)
    cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  for (cudaEvent_t *e : {&joinComm, &joinCompute, &normReady, &computeDone, &commDone,
                         &inputCopied[0], &inputCopied[1], &hostCopied})
    cuda(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreate");
  for (auto &h : inputHost)
    cuda(cudaMallocHost(reinterpret_cast<void **>(&h), size_t(inputBytes() + targetBytes())),
         "cudaMallocHost (inputs)");
  cuda(cudaMallocHost(reinterpret_cast<void **>(&lossHost), size_t(4 * options.gradAccum)),
       "cudaMallocHost (losses)");
  if (logitsBytes() > 0)
    cuda(cudaMallocHost(reinterpret_cast<void **>(&logitsHost),
                        size_t(options.gradAccum * logitsBytes())),
         "cudaMallocHost (eval logits)");
  cuda(cudaMallocHost(reinterpret_cast<void **>(&normHost), 8), "cudaMallocHost (norm)");
  if ((tpSlotsBytes = tpSlotsNumel() * 4) > 0)
    cuda(cudaMalloc(reinterpret_cast<void **>(&tpSlots), size_t(tpSlotsBytes)),
         "cudaMalloc (tp slots)");
  *normHost = 0;
  // offload optimizer: the host pool, pinned for the copies' DMA.
  if (program.offloadsOptimizer())
    cuda(cudaMallocHost(reinterpret_cast<void **>(&hostPool), size_t(program.hostBytes)),
         "cudaMallocHost (the host pool)");
  if (!options.trace.empty())
    cuda(cudaEventCreate(&traceBase), "cudaEventCreate");
  // Host memory laid out like the arena, for the shards' way in and out.
  if (!mirror.reserve(program.arenaBytes))
    fail("cannot reserve " + std::to_string(program.arenaBytes) +
         " bytes of host memory for the shards");
}

// The shards the trainer filled in the host mirror, copied to the device.
void DeviceRank::shardsIn() {
  curPhase = "setup";
  curInst = nullptr;
  copyShards(true);
  // cudaMemcpy from pageable memory may return before its DMA has landed,
  // and the compute and comm streams (non-blocking) do not wait for the
  // default stream: the shards are complete on the device before any kernel.
  cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (shards copied)");
}

// Every unit's persistent buffers in the arena (its four shards; without
// the moments, which live in the host pool, under offload optimizer)
// between the mirror and the device (synchronous: nothing else is in
// flight when this runs).
void DeviceRank::copyShards(bool toDevice) {
  char *h = mirror.data();
  for (const Unit &u : program.units)
    for (int64_t off : program.arenaStateOffsets(u)) {
      size_t bytes = size_t(u.shardNumel * 4);
      if (!bytes)
        continue;
      cuda(toDevice ? cudaMemcpy(arena + off, h + off, bytes, cudaMemcpyHostToDevice)
                    : cudaMemcpy(h + off, arena + off, bytes, cudaMemcpyDeviceToHost),
           toDevice ? "cudaMemcpy of the shards to the device"
                    : "cudaMemcpy of the shards to the host");
    }
}

RankDevice::InputBuffers DeviceRank::inputBuffers(PhaseKind kind, int64_t index) {
  curPhase = phaseName(kind);
  char *in = inputHost[microIndex % 2];
  // The pinned buffer's previous copy must have left it.
  waitFor(inputCopied[microIndex % 2],
          curPhase + " (inputs of step " + std::to_string(index + 1) + ")");
  labelHostAccess(in, size_t(inputBytes() + targetBytes()), true, "fillInputs (pinned inputs)");
  return {in, reinterpret_cast<int64_t *>(in + inputBytes())};
}

void DeviceRank::inputsIn() {
  int j = int(microIndex++ % 2);
  curInst = nullptr;
  cuda(cudaMemcpyAsync(tensor<char>(program.tokens), inputHost[j],
                       size_t(program.tensors[program.tokens].bytes()), cudaMemcpyHostToDevice,
                       compute),
       "cudaMemcpyAsync (tokens)");
  cuda(cudaMemcpyAsync(tensor<int64_t>(program.targets), inputHost[j] + inputBytes(),
                       size_t(targetBytes()), cudaMemcpyHostToDevice, compute),
       "cudaMemcpyAsync (targets)");
  cuda(cudaEventRecord(inputCopied[j], compute), "cudaEventRecord");
}

// The phase's lists, then the waits that join it to the phase after it on
// the device; none where the host synchronizes with both streams next.
void DeviceRank::runPhase(const PhaseRun &run) {
  const Phase &s = run.phase;
  curPhase = phaseName(program, run);
  normEnqueued = normFetched = false;
  phaseHasNorm = std::any_of(s.comm.begin(), s.comm.end(),
                             [](const Instruction &i) { return i.op == Op::GradNorm; });
  // Records before their waits, in an order both streams keep (the loader
  // has checked that one exists).
  std::vector<Slot> order;
  std::string why = issueOrder(s, order);
  if (!why.empty()) {
    curInst = nullptr;
    fail(curPhase + ": " + why);
  }
  for (const Slot &slot : order)
    enqueue((slot.stream ? s.comm : s.compute)[slot.index], slot.stream, run);
  curInst = nullptr;
  const Phase *after = run.next == NextPhase::MicroStep       ? &program.microStep
                       : run.next == NextPhase::LastMicroStep ? &program.lastMicroStep
                       : run.next == NextPhase::Optimizer     ? &program.optimizer
                                                              : nullptr;
  const PhaseJoin *next = after ? &joinOf(s, *after) : nullptr;
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

// The CUDA kernels as Dispatch.h calls them: each enqueued on the compute
// stream (the linears through cuBLAS); memory, scratch included, is the
// device arena.
struct CudaKernels : ArenaMemory<DeviceRank> {
  cudaStream_t stream; // compute

  // Each kernel forwards to ck:: (cuda.h), whose f32 and bf16 overloads the
  // storage type picks, with the stream (and the cuBLAS handle); where a
  // CUDA kernel takes no scratch, the one Dispatch passes is dropped.
#define FSDP_CUDA_KERNEL(name)                                                                     \
  template <typename... A> void name(A... a) { ck::name(a..., stream); }
#define FSDP_CUDA_KERNEL_NO_SCRATCH(name)                                                          \
  template <typename... A> void name(A... a) {                                                     \
    dropLast([&](auto... x) { ck::name(x..., stream); }, a...);                                    \
  }
#define FSDP_CUDA_GEMM(name)                                                                       \
  template <typename... A> void name(A... a) {                                                     \
    dropLast([&](auto... x) { ck::name(rank.cublas, x..., stream); }, a...);                       \
  }
  FSDP_CUDA_KERNEL(moeRouteForward)
  FSDP_CUDA_KERNEL_NO_SCRATCH(moeRouteBackward)
  FSDP_CUDA_KERNEL(moePermuteForward)
  FSDP_CUDA_KERNEL(moePermuteBackward)
  FSDP_CUDA_KERNEL(moeLinearForward)
  FSDP_CUDA_KERNEL(moeLinearBackwardInput)
  FSDP_CUDA_KERNEL(moeLinearBackwardWeight)
  FSDP_CUDA_KERNEL(moeCombineForward)
  FSDP_CUDA_KERNEL(moeCombineBackward)
  FSDP_CUDA_KERNEL(moeAuxLossForward)
  FSDP_CUDA_KERNEL(moeAuxLossBackward)
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
      ck::embeddingBackward(dout, ids, dtable, n, V, D, stream);
    else
      ck::embeddingBackward(dout, ids, dtable, n, V, D, scratch, stream);
  }
  template <typename T>
  void crossEntropyForward(const T *logits, const int64_t *targets, float *loss, int64_t n,
                           int64_t V, float *scratch) {
    ck::crossEntropyForward(logits, targets, loss, n, V, reinterpret_cast<double *>(scratch),
                            stream);
    if (rank.keepsLogits())
      rank.keepLogits(logits, rank.logitsBytes());
  }
};

void DeviceRank::enqueue(const Instruction &inst, int stream, const PhaseRun &run) {
  curInst = &inst;
  curStream = stream;
  cudaStream_t s = stream ? comm : compute;
  DeviceWorkLabel label(program, curPhase.c_str(), stream, inst, arena); // no-op on a GPU
  if (inst.op == Op::Record) {
    cuda(cudaEventRecord(events[inst.event], s), "cudaEventRecord");
    return;
  }
  if (inst.op == Op::Wait) {
    cuda(cudaStreamWaitEvent(s, events[inst.event], 0), "cudaStreamWaitEvent");
    return;
  }
  cudaEvent_t start = nullptr;
  bool tracing = !options.trace.empty() && run.traced;
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
    if (stream) {
      if (std::string err = runCollective(inst, run.place); !err.empty())
        fail(place() + ": " + err);
    } else {
      CudaKernels kernels{{*this}, compute};
      if (!dispatchCompute(program, inst, kernels, run.lossScale))
        fail(place() + ": not a compute instruction");
    }
  } catch (const std::exception &e) { // cuda_kernels::Error, mostly
    fail(place() + ": " + e.what());
  }
  if (tracing) {
    cudaEvent_t end = tracePool[traceUsed++];
    cuda(cudaEventRecord(end, s), "cudaEventRecord (trace)");
    pending.push_back({&inst, stream, run.optimizer(), run.traceStep, start, end});
  }
  if (syncEach) {
    std::string err = comms.waitStream(s);
    if (!err.empty())
      fail(place() + ": " + err);
  }
}

// The sum over the group lands in the plan's staging (runtime/Scratch.h),
// then is added to the gradient shard (accumulated over micro-steps).
std::string DeviceRank::reduceScatterAdd(const void *src, float *shard, int64_t count, DType dtype,
                                         void *staging) {
  std::string err = comms.reduceScatter(Group::Shard, src, staging, count, ncclType(dtype), comm);
  if (!err.empty())
    return err;
  if (dtype == DType::BF16)
    ck::addBf16Into(shard, static_cast<const uint16_t *>(staging), count, comm);
  else
    ck::add(shard, static_cast<const float *>(staging), shard, count, comm);
  return "";
}

// The sums of squares' scratch, then a double a unit and their total, in the
// plan's scratch of this instruction (runtime/Scratch.h); the total comes to
// the host with the event normReady.
std::string DeviceRank::reduceGradNorm(const Instruction &inst, const std::string &site) {
  touch(inst.scratch, inst.scratchBytes);
  auto *sumsqScratch = reinterpret_cast<double *>(at<char>(inst.scratch));
  auto *normParts = reinterpret_cast<double *>(at<char>(inst.scratch) + gradNormPartsOffset());
  double *normTotal = normParts + program.units.size();
  // A unit's part: the sum over the slices it counts (none: 0).
  for (size_t u = 0; u < program.units.size(); ++u) {
    const Unit &unit = program.units[u];
    std::vector<ShardSlice> slices = gradNormSlices(unit);
    if (slices.empty())
      slices.push_back({});
    for (size_t i = 0; i < slices.size(); ++i)
      ck::sumOfSquares(at(unit.gradShardOffset) + slices[i].inShard, slices[i].count, normParts + u,
                       sumsqScratch, comm, /*accumulate=*/i > 0);
  }
  ck::sumDoubles(normParts, (int64_t)program.units.size(), normTotal, comm);
  comms.at(Group::Shard, site, "all_reduce of a scalar");
  std::string err =
      comms.allReduce(Group::Shard, normTotal, normTotal, 1, NcclComms::DType::F64, comm);
  if (err.empty() && program.tp > 1) {
    comms.at(Group::TpGrad, site, "all_reduce of a scalar");
    err = comms.allReduce(Group::TpGrad, normTotal, normTotal, 1, NcclComms::DType::F64, comm);
  }
  if (!err.empty())
    return err;
  cuda(cudaMemcpyAsync(normHost, normTotal, 8, cudaMemcpyDeviceToHost, comm),
       "cudaMemcpyAsync (norm)");
  cuda(cudaEventRecord(normReady, comm), "cudaEventRecord (norm)");
  normEnqueued = true;
  return "";
}

double DeviceRank::clippingNorm() {
  // Clipping needs the norm on the host: the one wait inside a phase.
  if (phaseHasNorm && !normEnqueued)
    fail(place() + ": clipping needs the gradient norm, but this phase's grad_norm comes "
                   "after the optimizer step");
  if (normEnqueued && !normFetched) {
    waitFor(normReady, place() + " (waiting for the gradient norm)");
    labelHostAccess(normHost, 8, false, "the optimizer's read of the gradient norm");
    gradNorm = std::sqrt(*normHost);
    normFetched = true;
  }
  return gradNorm;
}

// offload optimizer: AdamW on the host, over this rank's share of its cores.
void DeviceRank::hostAdamw(const AdamWSlice &a) {
  size_t n = size_t(a.count) * 4;
  labelHostAccess(a.param, n, true, "the host AdamW's update of the master shard");
  labelHostAccess(a.expAvg, n, true, "the host AdamW's update of exp_avg");
  labelHostAccess(a.expAvgSq, n, true, "the host AdamW's update of exp_avg_sq");
  hostAdamwThreads(a, hostThreads, int64_t(1) << 18);
}

double DeviceRank::stepGradNorm() {
  if (normEnqueued) {
    labelHostAccess(normHost, 8, false, "the step's read of the gradient norm");
    gradNorm = std::sqrt(*normHost);
  }
  return gradNorm;
}

// The loss of micro-step `micro`, queued into lossHost[micro].
void DeviceRank::keepLoss(int64_t micro) {
  curInst = nullptr;
  cuda(cudaMemcpyAsync(lossHost + micro, at(program.tensors[program.loss].offset), 4,
                       cudaMemcpyDeviceToHost, compute),
       "cudaMemcpyAsync (loss)");
}

void DeviceRank::traceFrom() {
  if (!traceBase)
    return;
  curInst = nullptr;
  cuda(cudaEventRecord(traceBase, compute), "cudaEventRecord (trace)");
  cuda(cudaStreamWaitEvent(comm, traceBase, 0), "cudaStreamWaitEvent (trace)");
}

// After a step's wait: the timing events become trace records (seconds
// since the first step began).
void DeviceRank::stepDone() {
  if (options.trace.empty())
    return;
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
  data::Inputs data;
  err = data.open(program, options);
  if (!err.empty())
    return who + err;
  if (bootstrap.rank == 0 && options.dataWarning)
    for (const std::string &note : data.warnings)
      options.dataWarning(note);
  std::unique_ptr<NcclComms> comms;
  err = NcclComms::create(bootstrap, (int)program.shardSize, (int)program.reshardAfterForward,
                          (int)program.tp, &comms);
  if (!err.empty())
    return who + err;
  std::string result;
  {
    auto host = ncclHostCommunicator(*comms, (int)program.shardSize,
                                     (int)program.reshardAfterForward, (int)program.tp);
    // The host's cores, shared by the ranks of its devices (one a device).
    int devicesHere = std::max(1, std::min<int>(count, int(program.worldSize)));
    int hostThreads = std::max(1, int(std::thread::hardware_concurrency()) / devicesHere);
    DeviceRank rank(program, options, *comms, *host, hostThreads);
    result = Trainer(program, options, *host, data, rank).run(onStep);
    if (result.empty() && !options.trace.empty())
      result = writeRankTrace(options.trace, program, comms->rank(), rank.records);
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
