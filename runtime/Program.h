//===- Program.h - the runtime's program format ------------------*- C++ -*-===//
//
// The versioned JSON program that fsdp-plan lowers a plan to and fsdp-run
// executes (docs/program-format.md). The runtime owns the format; the planner
// includes this header for the constants and never the reverse. Plain C++:
// nothing here knows MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PROGRAM_H
#define FSDP_RUNTIME_PROGRAM_H

#include "support/Inputs.h"
#include "support/RopeScaling.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::program {

inline constexpr const char *kFormat = "fsdp-program";
inline constexpr int kVersion = 1;
/// The most ranks a program may have: ranks are ints everywhere in the
/// runtime (communicators, threads, MPI); 2^20 is more than any cluster has.
/// Lowering refuses a plan for more (a plan may be made wider, to be
/// predicted).
inline constexpr int64_t kMaxRanks = int64_t(1) << 20;
/// The most micro-steps an optimizer step accumulates (fsdp-plan's and
/// fsdp-run's --grad-accum).
inline constexpr int64_t kMaxGradAccum = int64_t(1) << 20;

enum class DType { F32, I64, BF16 };

/// What a program is planned for: the CPU kernels (threads and MPI
/// backends) or the CUDA kernels (the nccl backend). The kernels' scratch
/// differs (runtime/Scratch.h), so a program runs on its target only.
enum class Target { Cpu, Cuda };
const char *targetName(Target t);
std::optional<Target> parseTarget(const std::string &name);

/// What the model takes as input and an image model's geometry: shared with
/// the IR, so defined below both (support/Inputs.h).
using support::ImageSpec;
using support::InputKind;
using support::inputKindName;
using support::parseInputKind;

struct Tensor {
  int64_t offset = 0;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  int64_t numel() const;
  int64_t bytes() const;
};

struct Param {
  std::string name;
  std::vector<int64_t> shape;    // this rank's: its piece under tensor parallelism
  int64_t offset = 0, numel = 0; // elements within the unit's flat buffer
  bool decay = false;
  // Tensor parallelism (docs/program-format.md): the dimension the whole
  // parameter is cut along (-1: whole on every rank), into `tpPieces`
  // pieces, each of the dimension's `tpSections` sections cut alike; tp
  // rank t holds piece t / (tp / tpPieces). `tpPartial`: the rank's
  // gradient is a part, summed over the ranks holding the piece.
  int64_t tpDim = -1, tpPieces = 1, tpSections = 1;
  bool tpPartial = false;
  bool isCut() const { return tpDim >= 0 && tpPieces > 1; }
  /// The whole parameter's shape (the model's).
  std::vector<int64_t> wholeShape() const {
    std::vector<int64_t> s = shape;
    if (isCut())
      s[tpDim] *= tpPieces;
    return s;
  }
  /// Element e of the piece held by tp rank `t` of `tp`, as an element of the
  /// whole parameter (row-major).
  int64_t wholeElement(int64_t e, int64_t t, int64_t tp) const;
  /// The inverse: element w of the whole parameter is element
  /// pieceElement(w, &k) of piece k (0 <= k < tpPieces).
  int64_t pieceElement(int64_t w, int64_t *piece) const;
};

struct Unit {
  std::string name, module;
  int64_t numel = 0, paddedNumel = 0, shardSize = 1, shardNumel = 0;
  int64_t shardOffset = 0, gradShardOffset = 0, expAvgOffset = 0, expAvgSqOffset = 0;
  // grad_sync last: the unit's f32 accumulation buffer of paddedNumel
  // elements, alive across a step's micro-steps (-1: none).
  int64_t accumulatedOffset = -1;
  // offload optimizer or all: in the host pool, the f32 master copy of the
  // parameter shard and the gradient shard's copy (-1: none); the moments'
  // offsets above are then the host pool's too. Under offload all the
  // master copy is the parameter shard (shardOffset -1) and, with bf16
  // gathers, hostGatherOffset its bf16 copy (shardNumel elements), which
  // the gathers send.
  int64_t hostShardOffset = -1, hostGradOffset = -1, hostGatherOffset = -1;
  std::vector<Param> params;
};

enum class Op {
#define FSDP_OP(Name, json, stream, minIn, maxIn, minOut, maxOut) Name,
#include "runtime/Ops.def"
};
/// The list an op belongs in; record and wait go in either.
enum class OpStream { Compute, Comm, Either };
/// What runtime/Ops.def says of an op.
struct OpInfo {
  Op op;
  const char *name; // in a program
  OpStream stream;
  int minIn, maxIn, minOut, maxOut; // -1: no bound
};
const OpInfo &opInfo(Op op);
const char *opName(Op op);
/// The op named `name` in a program, or null.
const OpInfo *findOp(const std::string &name);

/// GELU's form (the `approximate` attribute of gelu and gelu_grad, named as
/// torch.nn.functional.gelu's): tanh (HF gelu_new, the default) or none, the
/// exact erf form (HF gelu).
enum class GeluApproximate { Tanh, None };

/// What a compute instruction's kernel is called with beyond its tensors:
/// the dimensions derived from the program's shapes and the op's attributes,
/// decoded once (decodeCall) and used both by the loader, to prove that the
/// kernel's reads and writes lie within its tensors, and by the executors.
struct Call {
  int64_t n = 0;                 // rows; the elements of element-wise ops
  int64_t D = 0;                 // a row's length (norms, embeddings, bias)
  int64_t V = 0;                 // classes (cross-entropy), table rows (embedding grad)
  int64_t in = 0, out = 0;       // linear: the weight's dimensions
  int64_t B = 0, S = 0;          // batch and sequence (position ids, rope, attention)
  int64_t H = 0, KV = 0, Dh = 0; // heads, key/value heads, head dimension
  bool causal = false;           // attention: causal_attention (query i sees keys 0..i) or not
  int64_t window = 0;            // attention: a query sees itself and window-1 keys back; 0: all
  GeluApproximate approximate = GeluApproximate::Tanh; // gelu, gelu_grad
  int64_t parts = 0, W = 0;                            // split and concat: parts of [n, W]
  bool layoutInOut = false;                            // linear: the weight is [in, out]
  bool bias = false;                                   // linear: a third input
  DType dtype = DType::F32;                            // of its float tensors (cast: of the output)
  DType castFrom = DType::F32;                         // cast: the input's
  int64_t E = 0, k = 0; // mixture of experts: experts, choices per token (n: tokens)
};
/// What a free ends: a unit's gathered parameters, its unsharded
/// gradients, or its resharded copy (reshard_after_forward = N).
enum class BufferKind { Params, Grads, Resharded };
const char *bufferKindName(BufferKind k);

struct Instruction {
  Op op;
  std::vector<int64_t> in, out; // tensor ids
  int64_t event = -1, unit = -1;
  int64_t dst = -1, src = -1;          // arena offsets (alloc, all_gather, reduce_scatter, reshard)
  int64_t zeroFrom = 0;                // alloc: the first element to zero (the rest is written)
  BufferKind kind = BufferKind::Grads; // free: what it ends
  bool bf16 = false;                   // all_gather, reduce_scatter, reshard: in bf16
  // all_gather: over the reshard group, from each member's resharded copy
  // at src (reshard_after_forward = N); else over the shard group, from
  // each member's parameter shard.
  bool overReshard = false;
  // all_reduce: over the tp group (the sums of the unit's partial
  // gradients, tp > 1); else over the replica group.
  bool overTp = false;
  // attributes
  bool layoutInOut = false;
  double eps = 0, theta = 0;
  int64_t numHeads = 0, numKvHeads = 0;
  int64_t window = 0; // causal attention's sliding window (0: full causal)
  GeluApproximate approximate = GeluApproximate::Tanh; // gelu, gelu_grad
  bool inverse = false;
  std::optional<support::RopeScaling> ropeScaling; // rope: its frequency scaling, if any
  int64_t topK = 0;          // moe_route, moe_aux_loss(_grad): choices per token
  bool normTopkProb = false; // moe_route(_grad): the k weights divided by their sum
  double coef = 0;           // moe_aux_loss(_grad): the load-balancing loss's weight
  int64_t scratch = -1, scratchBytes = 0;
  std::string module;
  std::string phase; // forward or backward, for traces
  int64_t index = 0; // position in its list, for error messages
  Call call;         // decoded by the loader (decodeCall)
};

/// A phase of the step (the micro-step, or the optimizer's): its two
/// instruction lists, one a stream, joined by the program's events.
struct Phase {
  std::vector<Instruction> compute, comm;
};

/// What of a rank's training state lives in host memory (fsdp-plan
/// --offload): nothing, the optimizer's (the moments and a master copy
/// of each parameter shard, updated there by optimizer_step), or all of it
/// but the gradient shards (the master copy is then the parameter shard,
/// which each gather copies in first).
enum class Offload { None, Optimizer, All };
const char *offloadName(Offload o);
std::optional<Offload> parseOffload(const std::string &name);

struct Program {
  std::string modelName, modelType, strategy;
  int64_t parameters = 0;
  // What an HF checkpoint of the model may hold besides its parameters, as
  // the planner knows the family: tensors that are a tied copy of one
  // (ignored), and name prefixes of heads the model does not have (ignored
  // with a warning). Any other extra tensor in --weights is an error.
  std::vector<std::string> tiedCopies, unusedWeightPrefixes;
  // The HF config.json the model was imported from and, for a model that
  // generates, its generation config, each one JSON object as compact text
  // (model.hf_config, model.generation_config); empty for a model of
  // another origin (a JSON or MLIR graph). --save-weights DIR writes them.
  std::string hfConfig, generationConfig;
  int64_t worldSize = 1, shardSize = 1, microBatch = 1, seqLen = 1;
  // Tensor parallelism (fsdp-plan --tp N): a (world_size / tp) x tp mesh,
  // rank r at data-parallel index r / tp and tp index r % tp; shard_size
  // counts data-parallel ranks. With sequence parallelism each rank holds
  // 1/tp of a micro-batch's tokens between the tensor-parallel regions.
  int64_t tp = 1;
  bool sequenceParallel = false;
  std::string paramDtype = "f32", reduceDtype = "f32", computeDtype = "f32";
  Target target = Target::Cpu;
  // cuda: cuBLAS's workspace for the whole step (stepWorkspaceBytes).
  int64_t workspaceOffset = -1, workspaceBytes = 0;
  int64_t arenaBytes = 0, predictedPeakBytes = 0, events = 0;
  // The plan's memory figures (docs/program-format.md), for people reading the
  // program; the runtime reads peak_bytes (predictedPeakBytes).
  std::vector<std::pair<std::string, int64_t>> memory;
  // The planner's predicted times (0: none in the program).
  double predictedMicroStepS = 0, predictedOptimizerS = 0;
  // The plan's micro-steps a step (fsdp-plan --grad-accum): the run's
  // default, which a run flag may not contradict (0: a program written
  // before fsdp recorded it; the run's flag decides).
  int64_t gradAccum = 0;
  // The model FLOPs of one micro-step over every rank (0: none), and a
  // device's peak FLOP/s in the compute dtype when the plan's cluster file
  // gave it (0: unknown): fsdp-run's MFU.
  double modelFlopsPerMicroStep = 0, peakFlops = 0;
  int64_t tokens = -1, targets = -1, loss = -1;
  InputKind inputKind = InputKind::Tokens;
  ImageSpec image; // inputKind == Images
  std::vector<Unit> units;
  std::vector<Tensor> tensors;
  // When gradients are reduced: "every" micro-step, or at the "last" of a
  // step (fsdp-plan --grad-sync), whose lists are lastMicroStep's; the
  // others (and eval's) run microStep, which accumulates instead. With
  // replica groups the all-reduce is lastMicroStep's either way.
  std::string gradSync = "every";
  // false (fsdp-plan --reshard-after-backward false): the gathers run at a
  // step's first micro-step only, whose lists are firstMicroStep's, and the
  // gathered parameters stay for the step's micro-steps; the others run
  // microStep (and lastMicroStep), which gather nothing.
  bool reshardAfterBackward = true;
  // N (fsdp-plan --reshard-after-forward N): after forward each unit's
  // `reshard` keeps this rank's 1/N of its gathered parameters, and its
  // backward gathers them over the reshard group, N consecutive ranks; 0:
  // none (no reshard group).
  int64_t reshardAfterForward = 0;
  // offload optimizer or all: the units' moments, master shards and
  // gradient copies (and under all, with bf16 gathers, the masters' bf16
  // copies) live in a host pool of hostBytes, apart from the arena (the
  // plan's host peak).
  Offload offload = Offload::None;
  int64_t hostBytes = 0;
  Phase firstMicroStep, microStep, lastMicroStep, optimizer;

  bool offloadsOptimizer() const { return offload != Offload::None; }
  bool offloadsParams() const { return offload == Offload::All; }
  /// Unit u's parameter shard (f32, shardNumel elements) in `arena` or,
  /// under offload all, in `host` (both bytes laid out as the plan says).
  template <typename Byte> Byte *paramShard(const Unit &u, Byte *arena, Byte *host) const {
    static_assert(sizeof(Byte) == 1, "offsets are in bytes");
    return offloadsParams() ? host + u.hostShardOffset : arena + u.shardOffset;
  }
  /// Unit u's persistent f32 buffers of shardNumel elements, by where they
  /// lie: in the arena (the parameter shard but under offload all, the
  /// gradient shard, the moments but under offload) and in the host pool
  /// (under offload: the moments, the master shard, the gradient's copy).
  std::vector<int64_t> arenaStateOffsets(const Unit &u) const {
    std::vector<int64_t> offsets{u.gradShardOffset};
    if (!offloadsParams())
      offsets.push_back(u.shardOffset);
    if (!offloadsOptimizer())
      offsets.insert(offsets.end(), {u.expAvgOffset, u.expAvgSqOffset});
    return offsets;
  }
  std::vector<int64_t> hostStateOffsets(const Unit &u) const {
    if (!offloadsOptimizer())
      return {};
    return {u.expAvgOffset, u.expAvgSqOffset, u.hostShardOffset, u.hostGradOffset};
  }
  /// Where the units' moments lie: `arena`, or under offload optimizer
  /// `host`, the host pool (both laid out as the plan says).
  template <typename Byte> Byte *momentsBase(Byte *arena, Byte *host) const {
    static_assert(sizeof(Byte) == 1, "offsets are in bytes");
    return offloadsOptimizer() ? host : arena;
  }

  int64_t dpSize() const { return worldSize / tp; }
  int64_t replicas() const { return dpSize() / shardSize; }
  bool syncsAtLastMicroStep() const { return gradSync == "last"; }
  /// Whether a step's last micro-step runs lists of its own
  /// (lastMicroStep): under grad_sync last, and wherever the gradient
  /// shards are all-reduced across replica groups, which sums each shard
  /// whole and so runs once a step, when it holds the step's sum.
  /// Under tp the partial gradients' sums over the tp group are likewise
  /// once a step.
  bool hasLastMicroStep() const { return syncsAtLastMicroStep() || replicas() > 1 || tp > 1; }
  bool keepsGatheredAcrossMicroSteps() const { return !reshardAfterBackward; }
  /// The lists micro-step `micro` of `count` runs (eval: an eval batch's,
  /// which reduces nothing under grad_sync last).
  const Phase &microStepPhase(int64_t micro, int64_t count, bool eval) const {
    if (micro == 0 && keepsGatheredAcrossMicroSteps())
      return firstMicroStep;
    if (!eval && micro + 1 == count && hasLastMicroStep())
      return lastMicroStep;
    return microStep;
  }
  /// Bytes of an element of the unsharded gradient buffers (compute dtype).
  int64_t gradElementBytes() const { return computeDtype == "bf16" ? 2 : 4; }
  /// Bytes of an element of what a reduce_scatter reads: the gradient
  /// buffer's, or under grad_sync last the f32 accumulation buffer's.
  int64_t reducedElementBytes() const { return syncsAtLastMicroStep() ? 4 : gradElementBytes(); }
  /// Bytes of unit u's resharded copy (reshard_after_forward = N, which the
  /// loader holds above 1): 1/N of its gathered buffer, in bf16 or f32.
  int64_t reshardedBytes(const Unit &u, bool bf16) const {
    return u.paddedNumel / reshardAfterForward * (bf16 ? 2 : 4);
  }
  int64_t vocabSize() const; // from the loss's logits; 0 if unknown
};

/// The call of instruction `i` of `p` (compute ops; a default Call for the
/// rest). Sound only for an instruction the loader has checked; never divides
/// by zero.
Call decodeCall(const Program &p, const Instruction &i);

/// One instruction of a phase, as a host thread issues them: its stream
/// (0 compute, 1 comm) and its index in that stream's list.
struct Slot {
  int stream;
  size_t index;
};

/// An order in which one thread can issue both lists of a phase so that each
/// record comes before every wait on its event (what CUDA streams need: a
/// wait on an event takes its latest *issued* record): each list in its own
/// order, a list advancing until it reaches a wait whose record has not been
/// issued, then the other. Such an order exists exactly when the two lists
/// run side by side cannot deadlock. Returns "" and fills `order`, or why not:
/// the waits that can never be satisfied, as "compute[i] waits for event e".
std::string issueOrder(const Phase &s, std::vector<Slot> &order);

bool operator==(const Tensor &a, const Tensor &b);
bool operator==(const Param &a, const Param &b);
bool operator==(const Unit &a, const Unit &b);
bool operator==(const Instruction &a, const Instruction &b);
bool operator==(const Phase &a, const Phase &b);
bool operator==(const Program &a, const Program &b);

/// The program as fsdp-plan writes it and fsdp-run reads it (one JSON
/// document, a line per unit, tensor and instruction). Lowering fills a
/// Program and writes it with this; loadProgram reads it back, field for
/// field (a GoogleTest checks the round trip).
std::string writeProgram(const Program &program);

/// Reads and validates a program: its version, every offset and size against
/// the arena, every instruction's operands, shapes and events, and that
/// neither phase can deadlock (issueOrder). Returns an
/// error message naming the file and the instruction ("plan.json:
/// micro_step.compute[12] (linear): ...") or the empty string.
std::string loadProgram(const std::string &path, Program &program);
/// The same, from the program's text; `name` stands for the file in errors.
std::string parseProgram(const std::string &text, const std::string &name, Program &program);

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

} // namespace fsdp::program

#endif
