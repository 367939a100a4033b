//===- OpChecks.cpp - each program op's checks, before anything runs -------===//
//
// What the loader (ProgramLoad.cpp) proves of every instruction: its operand
// counts (runtime/Ops.def), the shapes, dtypes and attributes its call is
// decoded from, and, from that decoded Call (the executors' very arguments),
// that every byte its kernel reads or writes lies within its tensors and the
// arena.
//
//===----------------------------------------------------------------------===//
#include "runtime/OpChecks.h"
#include "runtime/Scratch.h"
#include "runtime/kernels/cpu.h"

#include <algorithm>
#include <cmath>

#include <cstdint>

using namespace fsdp::program;
using namespace fsdp::program::detail;

std::string fsdp::program::detail::str(i128 v) {
  if (v < 0)
    return "-" + str(-v);
  std::string s;
  do {
    s.insert(s.begin(), char('0' + (int)(v % 10)));
    v /= 10;
  } while (v > 0);
  return s;
}

// The product of the dimensions, saturated far past any arena (2^100), so that
// a shape of huge dimensions cannot wrap around to a small size.
i128 fsdp::program::detail::elements(const std::vector<int64_t> &shape) {
  for (int64_t d : shape)
    if (d == 0)
      return 0;
  i128 n = 1;
  for (int64_t d : shape) {
    n *= d;
    if (n > ((i128)1 << 100) || n < -((i128)1 << 100))
      return n > 0 ? (i128)1 << 100 : -((i128)1 << 100);
  }
  return n;
}

i128 fsdp::program::detail::elementBytes(DType d) {
  return d == DType::I64 ? 8 : d == DType::BF16 ? 2 : 4;
}

namespace {
/// The shapes the MoE kernels index by (nn's verifiers say the same of the
/// IR): routing tensors [B, S, k] (experts and slots i64, weights float),
/// token rows [B, S, D], packed rows [B, S, k, W], router logits [B, S, E],
/// expert weights [out, in]; k at most fsdp::kernels::kMaxTopK.
template <class Fail> void checkMoe(const Program &p, const Instruction &inst, Fail fail) {
  auto t = [&](int64_t id) -> const Tensor & { return p.tensors[id]; };
  auto shape = [&](int64_t id) -> const std::vector<int64_t> & { return t(id).shape; };
  auto routing = [&](int64_t id, bool index, const char *what) {
    const auto &s = shape(id);
    if (s.size() != 3 || s[2] < 1 || s[2] > fsdp::kernels::kMaxTopK ||
        (t(id).dtype == DType::I64) != index)
      fail(std::string(what) + " (tensor " + std::to_string(id) + ") must be " +
           (index ? "i64" : "float") +
           " [B, S, k] with 1 <= k <= " + std::to_string(fsdp::kernels::kMaxTopK));
  };
  auto like = [&](int64_t a, int64_t b, const char *what) { // b is routing like a
    if (shape(b) != shape(a))
      fail(std::string(what) + " must have the routing's shape [B, S, k]");
  };
  auto packedOf = [&](int64_t packed, int64_t r, int64_t width) {
    const auto &s = shape(packed), &k = shape(r);
    if (s.size() != 4 || s[0] != k[0] || s[1] != k[1] || s[2] != k[2] || s[3] < 1 ||
        (width >= 0 && s[3] != width) || t(packed).dtype == DType::I64)
      fail("packed rows (tensor " + std::to_string(packed) +
           ") must be float [B, S, k, W] of the "
           "routing's [B, S, k]" +
           (width >= 0 ? " and W = " + std::to_string(width) : ""));
  };
  auto tokensOf = [&](int64_t x, int64_t r, int64_t width) {
    const auto &s = shape(x), &k = shape(r);
    if (s.size() != 3 || s[0] != k[0] || s[1] != k[1] || s[2] != width)
      fail("token rows (tensor " + std::to_string(x) + ") must be [B, S, " + std::to_string(width) +
           "] of the routing's [B, S, k]");
  };
  auto logitsOf = [&](int64_t l, int64_t r) {
    const auto &s = shape(l), &k = shape(r);
    if (s.size() != 3 || s[0] != k[0] || s[1] != k[1] || s[2] < k[2] || s[2] < 2)
      fail("router logits (tensor " + std::to_string(l) +
           ") must be [B, S, E] with E >= 2 and "
           "E >= k");
  };
  const auto &in = inst.in, &out = inst.out;
  switch (inst.op) {
  case Op::MoeRoute:
    routing(out[1], true, "experts");
    like(out[1], out[2], "slots");
    routing(out[2], true, "slots");
    routing(out[0], false, "weights");
    like(out[1], out[0], "weights");
    logitsOf(in[0], out[1]);
    if (inst.topK != shape(out[1])[2])
      fail("top_k " + std::to_string(inst.topK) + " must be the routing's k");
    break;
  case Op::MoeRouteGrad:
    routing(in[2], true, "experts");
    routing(in[0], false, "dweights");
    like(in[2], in[0], "dweights");
    logitsOf(in[1], in[2]);
    if (shape(out[0]) != shape(in[1]))
      fail("dlogits must have the logits' shape");
    break;
  case Op::MoePermute:
  case Op::MoePermuteGrad: {
    bool fwd = inst.op == Op::MoePermute;
    routing(in[1], true, "slots");
    int64_t x = fwd ? in[0] : out[0], packed = fwd ? out[0] : in[0];
    packedOf(packed, in[1], -1);
    tokensOf(x, in[1], shape(packed)[3]);
    break;
  }
  case Op::MoeLinear:
  case Op::MoeLinearGradInput:
  case Op::MoeLinearGradWeight: {
    bool dw = inst.op == Op::MoeLinearGradWeight;
    int64_t experts = dw ? in[2] : in[1];
    routing(experts, true, "experts");
    std::vector<int64_t> weights = dw ? out : std::vector<int64_t>(in.begin() + 2, in.end());
    const auto &w0 = shape(weights[0]);
    if (w0.size() != 2 || w0[0] < 1 || w0[1] < 1)
      fail("expert weights must be [out, in]");
    for (int64_t w : weights)
      if (shape(w) != w0 || t(w).dtype == DType::I64)
        fail("every expert's weight must be float " + std::string("[out, in] of one shape"));
    int64_t inF = w0[1], outF = w0[0];
    if (inst.op == Op::MoeLinear) {
      packedOf(in[0], experts, inF);
      packedOf(out[0], experts, outF);
    } else if (inst.op == Op::MoeLinearGradInput) {
      packedOf(in[0], experts, outF);
      packedOf(out[0], experts, inF);
    } else {
      packedOf(in[0], experts, outF);
      packedOf(in[1], experts, inF);
    }
    break;
  }
  case Op::MoeCombine:
  case Op::MoeCombineGrad: {
    bool fwd = inst.op == Op::MoeCombine;
    int64_t packed = fwd ? in[0] : in[1], weights = fwd ? in[1] : in[2],
            slots = fwd ? in[2] : in[3];
    routing(slots, true, "slots");
    routing(weights, false, "weights");
    like(slots, weights, "weights");
    packedOf(packed, slots, -1);
    tokensOf(fwd ? out[0] : in[0], slots, shape(packed)[3]);
    if (!fwd && (shape(out[0]) != shape(packed) || shape(out[1]) != shape(weights)))
      fail("the gradients must have the shapes of the packed rows and the weights");
    break;
  }
  default:
    break;
  }
}
} // namespace

void fsdp::program::detail::checkInstruction(const Program &p, Instruction &inst) {
  auto fail = [](const std::string &what) -> void { throw CheckError{what}; };
  auto tensor = [&](int64_t id) -> const Tensor & {
    if (id < 0 || id >= (int64_t)p.tensors.size())
      fail("tensor " + std::to_string(id) + " does not exist");
    return p.tensors[id];
  };
  auto checkRange = [&](int64_t offset, i128 bytes) {
    if (offset < 0 || bytes < 0 || offset + bytes > p.arenaBytes)
      fail("bytes [" + std::to_string(offset) + ", " + str(offset + bytes) +
           ") lie outside the arena of " + std::to_string(p.arenaBytes) + " bytes");
  };
  auto t = [&](int64_t id) -> const Tensor & { return tensor(id); };
  auto n = [&](int64_t id) { return elements(t(id).shape); };
  auto f32 = [&](int64_t id) {
    if (t(id).dtype != DType::F32)
      fail("tensor " + std::to_string(id) + " must be f32");
  };
  auto isFloat = [&](int64_t id) { return t(id).dtype != DType::I64; };
  auto sameShape = [&](int64_t a, int64_t b) {
    if (t(a).shape != t(b).shape)
      fail("tensors " + std::to_string(a) + " and " + std::to_string(b) + " must have one shape");
  };
  auto last = [&](int64_t id) -> int64_t { return t(id).shape.empty() ? 1 : t(id).shape.back(); };
  // The dimensions the executor indexes must be there.
  auto rank = [&](int64_t id, size_t dims) {
    if (t(id).shape.size() < dims)
      fail("tensor " + std::to_string(id) + " needs at least " + std::to_string(dims) +
           " dimensions");
  };
  // The kernel counts rows of `by` elements of the tensor.
  auto rowsOf = [&](int64_t id, i128 by) {
    if (by <= 0)
      fail("tensor " + std::to_string(id) + " has rows of " + str(by) +
           " elements; the kernel needs at least 1");
  };
  // What the kernel reads or writes of a tensor: `count` elements of its
  // dtype (or of `esize` bytes) from its start, which must lie within it.
  // RMSNorm's rows are of the weight's length, which divides x's last dimension.
  auto rmsRows = [&](int64_t x, int64_t w) {
    rowsOf(w, n(w));
    if (last(x) % n(w) != 0)
      fail("weight of " + str(n(w)) + " elements must divide the last dimension " +
           std::to_string(last(x)));
  };
  auto touches = [&](int64_t id, i128 count, i128 esize = 0) {
    if (esize == 0)
      esize = elementBytes(t(id).dtype);
    i128 have = n(id) * elementBytes(t(id).dtype);
    if (count * esize > have)
      fail("the kernel touches " + str(count * esize) + " bytes of tensor " + std::to_string(id) +
           ", which holds " + str(have));
  };
  auto unit = [&]() -> const Unit & {
    if (inst.unit < 0 || inst.unit >= (int64_t)p.units.size())
      fail("unit " + std::to_string(inst.unit) + " does not exist");
    return p.units[inst.unit];
  };
  auto event = [&]() {
    if (inst.event < 0 || inst.event >= p.events)
      fail("event " + std::to_string(inst.event) + " is out of range");
  };
  auto scratch = [&](i128 need) {
    if (inst.scratchBytes < need)
      fail("needs " + str(need) + " bytes of scratch, the plan gives " +
           std::to_string(inst.scratchBytes));
    checkRange(inst.scratch, inst.scratchBytes);
  };
  for (int64_t id : inst.in)
    t(id);
  for (int64_t id : inst.out)
    t(id);
  // Operand counts, from the op list (runtime/Ops.def).
  const OpInfo &info = opInfo(inst.op);
  auto count = [](int lo, int hi) {
    return lo == hi ? std::to_string(lo)
           : hi < 0 ? "at least " + std::to_string(lo)
                    : std::to_string(lo) + " or " + std::to_string(hi);
  };
  auto within = [](size_t k, int lo, int hi) { return (int)k >= lo && (hi < 0 || (int)k <= hi); };
  if (!within(inst.in.size(), info.minIn, info.maxIn) ||
      !within(inst.out.size(), info.minOut, info.maxOut))
    fail("takes " + count(info.minIn, info.maxIn) + " inputs and " +
         count(info.minOut, info.maxOut) + " outputs, not " + std::to_string(inst.in.size()) +
         " and " + std::to_string(inst.out.size()));

  // A kernel runs on one storage type: every float tensor of a compute
  // instruction has one dtype, but the loss (f32 from logits of either) and
  // a cast's input.
  if (info.stream == OpStream::Compute && inst.op != Op::Cast) {
    int64_t first = -1;
    for (const auto *ids : {&inst.in, &inst.out})
      for (int64_t id : *ids) {
        if (!isFloat(id) || (inst.op == Op::CrossEntropy && ids == &inst.out) ||
            (inst.op == Op::MoeAuxLoss && (ids == &inst.out || id == inst.in[0])))
          continue;
        if (first < 0)
          first = id;
        else if (t(id).dtype != t(first).dtype)
          fail("tensors " + std::to_string(first) + " and " + std::to_string(id) +
               " must have one dtype (the kernel's)");
      }
  }

  // First what the call is decoded from (shapes, dtypes, attributes); then
  // the decoded call (the executors' very arguments) proves that the
  // kernel's reads and writes lie within its tensors.
  switch (inst.op) {
  case Op::PositionIds:
  case Op::TokenTypeIds:
    rank(inst.in[0], 2);
    break;
  case Op::Embedding:
    if (!isFloat(inst.in[1]) || t(inst.in[0]).dtype != DType::I64 ||
        t(inst.in[1]).shape.size() != 2 || last(inst.out[0]) != t(inst.in[1]).shape[1] ||
        n(inst.out[0]) != n(inst.in[0]) * last(inst.out[0]))
      fail("embedding shapes do not match");
    break;
  case Op::EmbeddingGrad:
    if (t(inst.out[0]).shape.size() != 2 || last(inst.in[0]) != last(inst.out[0]) ||
        t(inst.in[1]).dtype != DType::I64)
      fail("embedding gradient shapes do not match");
    break;
  case Op::Linear:
  case Op::LinearGradInput:
  case Op::LinearGradWeight: {
    int64_t wid = inst.op == Op::LinearGradWeight ? inst.out[0] : inst.in[1];
    const Tensor &w = t(wid);
    if (w.shape.size() < 2 || (w.shape.size() > 2 && inst.layoutInOut))
      fail("the weight must be 2-D, or an out_in [out, d1, ..., dk] read as [out, d1 * ... * dk]");
    i128 trailing = elements(std::vector<int64_t>(w.shape.begin() + 1, w.shape.end()));
    if (trailing > INT64_MAX)
      fail("the weight's trailing dimensions hold more elements than a tensor can");
    int64_t in = inst.layoutInOut ? w.shape[0] : (int64_t)trailing;
    int64_t out = inst.layoutInOut ? w.shape[1] : w.shape[0];
    int64_t x = inst.op == Op::Linear            ? inst.in[0]
                : inst.op == Op::LinearGradInput ? inst.out[0]
                                                 : inst.in[1];
    int64_t y = inst.op == Op::Linear ? inst.out[0] : inst.in[0];
    if (last(x) != in || last(y) != out || (in > 0 && out > 0 && n(x) / in != n(y) / out))
      fail("input, weight and output shapes do not match");
    if (inst.op == Op::Linear && inst.in.size() == 3 && n(inst.in[2]) != out)
      fail("the bias must have " + std::to_string(out) + " elements");
    rowsOf(inst.op == Op::Linear ? x : inst.in[0], inst.op == Op::Linear ? in : out);
    break;
  }
  case Op::BiasGrad:
    if (last(inst.in[0]) != n(inst.out[0]))
      fail("bias gradient size does not match");
    rank(inst.in[0], 1);
    rowsOf(inst.in[0], last(inst.in[0]));
    break;
  case Op::LayerNorm:
    sameShape(inst.in[0], inst.out[0]);
    if (n(inst.in[1]) != last(inst.in[0]) || n(inst.in[2]) != last(inst.in[0]))
      fail("weight and bias must match the last dimension");
    rank(inst.in[0], 1);
    rowsOf(inst.in[0], last(inst.in[0]));
    break;
  case Op::LayerNormGrad:
  case Op::RMSNormGrad:
    sameShape(inst.in[0], inst.in[1]);
    if (inst.op == Op::LayerNormGrad)
      sameShape(inst.in[1], inst.out[0]);
    rank(inst.in[1], 1);
    rowsOf(inst.in[1], last(inst.in[1]));
    if (inst.op == Op::RMSNormGrad)
      rmsRows(inst.in[1], inst.in[2]);
    break;
  case Op::RMSNorm:
    sameShape(inst.in[0], inst.out[0]);
    rank(inst.in[0], 1);
    rmsRows(inst.in[0], inst.in[1]);
    break;
  case Op::Rope:
    sameShape(inst.in[0], inst.out[0]);
    if (inst.numHeads <= 0 || last(inst.in[0]) % inst.numHeads != 0 ||
        (last(inst.in[0]) / inst.numHeads) % 2 != 0 || t(inst.in[0]).shape.size() != 3)
      fail("rope needs [B, S, heads * even head_dim]");
    // Dynamic NTK's frequencies are those transformers computes at
    // max_position_embeddings and keeps for every sequence up to it; at a
    // longer one it computes others, which fsdp does not.
    if (inst.ropeScaling && inst.ropeScaling->kind == fsdp::support::RopeScalingKind::Dynamic &&
        t(inst.in[0]).shape[1] > inst.ropeScaling->originalMaxPosition)
      fail("dynamic rope scaling holds for sequences of at most original_max_position = " +
           std::to_string(inst.ropeScaling->originalMaxPosition) +
           " (max_position_embeddings) tokens, but this one is " +
           std::to_string(t(inst.in[0]).shape[1]) +
           " long (transformers would rescale the frequencies for it)");
    if (inst.ropeScaling && inst.ropeScaling->kind == fsdp::support::RopeScalingKind::Dynamic &&
        last(inst.in[0]) / inst.numHeads <= 2)
      fail("dynamic rope scaling needs a head dimension above 2 (its exponent is dim / (dim - 2))");
    // YaRN's correction range divides by log(theta).
    if (inst.ropeScaling && inst.ropeScaling->kind == fsdp::support::RopeScalingKind::Yarn &&
        !(inst.theta > 0 && inst.theta != 1))
      fail("yarn rope scaling needs theta > 0 other than 1 (it divides by log(theta))");
    break;
  case Op::Split:
  case Op::Concat: {
    bool split = inst.op == Op::Split;
    const auto &whole = split ? inst.in : inst.out;
    const auto &parts = split ? inst.out : inst.in;
    i128 sum = 0;
    for (int64_t id : parts)
      sum += n(id);
    if (sum != n(whole[0]))
      fail("parts do not add up to the whole");
    // The kernel cuts rows of the whole into equal parts, each [rows, W].
    for (int64_t id : parts)
      if (t(id).shape != t(parts[0]).shape)
        fail("parts " + std::to_string(parts[0]) + " and " + std::to_string(id) +
             " must have one shape");
    rank(parts[0], 1);
    rowsOf(parts[0], last(parts[0]));
    break;
  }
  case Op::CausalAttention:
  case Op::CausalAttentionGrad:
  case Op::Attention:
  case Op::AttentionGrad: {
    bool fwd = inst.op == Op::CausalAttention || inst.op == Op::Attention;
    int64_t q = fwd ? inst.in[0] : inst.in[1], k = fwd ? inst.in[1] : inst.in[2];
    if (inst.numHeads <= 0 || inst.numKvHeads <= 0 || inst.numHeads % inst.numKvHeads != 0 ||
        last(q) % inst.numHeads != 0 || last(k) != last(q) / inst.numHeads * inst.numKvHeads ||
        t(q).shape.size() != 3)
      fail("query, key and value do not match the heads");
    if (inst.window < 0)
      fail("window must be 0 (full causal) or positive, but is " + std::to_string(inst.window));
    if (inst.window != 0 && (inst.op == Op::Attention || inst.op == Op::AttentionGrad))
      fail("window " + std::to_string(inst.window) +
           " is causal attention's; bidirectional attention sees every key");
    break;
  }
  case Op::Gelu:
    sameShape(inst.in[0], inst.out[0]);
    break;
  case Op::Cast:
    if (n(inst.in[0]) != n(inst.out[0]) || !isFloat(inst.in[0]) || !isFloat(inst.out[0]))
      fail("cast reads a bf16 or f32 parameter of the output's size");
    if (t(inst.out[0]).dtype == DType::BF16 && t(inst.in[0]).dtype == DType::BF16)
      fail("a bf16 parameter needs no cast to bf16");
    break;
  case Op::TpAllGather:
  case Op::TpUnchunk:
  case Op::TpReduceScatter:
  case Op::TpChunk:
  case Op::TpAllReduce: {
    if (p.tp < 2)
      fail("a tensor-parallel op runs only in a program with tp");
    bool sums = inst.op == Op::TpReduceScatter || inst.op == Op::TpAllReduce;
    if (p.sequenceParallel != (inst.op != Op::TpAllReduce))
      fail(p.sequenceParallel ? "a program with sequence parallelism leaves its regions by "
                                "tp_reduce_scatter, not tp_all_reduce"
                              : "only a program with sequence parallelism parts the tokens");
    bool gathers = inst.op == Op::TpAllGather || inst.op == Op::TpUnchunk;
    int64_t part = gathers ? inst.in[0] : inst.out[0], whole = gathers ? inst.out[0] : inst.in[0];
    int64_t parts = inst.op == Op::TpAllReduce ? 1 : p.tp;
    // Activations [B, S, D] and their parts [1, B S / N, D] share D; token
    // ids [B, S] and theirs [1, B S / N] only the order.
    bool ids = t(whole).dtype == DType::I64;
    if (t(part).dtype != t(whole).dtype || (!ids && last(part) != last(whole)) ||
        n(whole) != (i128)n(part) * parts)
      fail("the whole tensor must be of the part's dtype and " +
           std::string(ids ? "" : "last dimension, ") + "with " + std::to_string(parts) +
           " times its elements");
    if (sums && t(whole).dtype != DType::F32)
      fail("sums f32 activations only");
    if (inst.in.size() > 1 && (t(inst.in[1]).shape != std::vector<int64_t>{last(whole)} ||
                               t(inst.in[1]).dtype != DType::F32))
      fail("the bias must be f32 of the rows' length, " + std::to_string(last(whole)));
    break;
  }
  case Op::GeluGrad:
  case Op::SiluMul:
  case Op::SiluMulGrad:
  case Op::Add:
    sameShape(inst.in[0], inst.in[1]);
    if (inst.op == Op::Add && n(inst.in[0]) != n(inst.out[0]))
      fail("output size does not match");
    break;
  case Op::ClassToken:
  case Op::ClassTokenGrad: {
    // x [B, S-1, D], cls [1, 1, D], positions [1, S, D] and the sequence
    // [B, S, D]: the forward's inputs and output, the backward's outputs
    // and input.
    bool fwd = inst.op == Op::ClassToken;
    int64_t x = fwd ? inst.in[0] : inst.out[0], cls = fwd ? inst.in[1] : inst.out[1],
            pos = fwd ? inst.in[2] : inst.out[2], y = fwd ? inst.out[0] : inst.in[0];
    for (int64_t id : {x, cls, pos, y})
      if (t(id).shape.size() != 3)
        fail("class token tensors must be 3-D");
    const auto &ys = t(y).shape;
    if (ys[1] < 2 || t(x).shape != std::vector<int64_t>{ys[0], ys[1] - 1, ys[2]} ||
        t(cls).shape != std::vector<int64_t>{1, 1, ys[2]} ||
        t(pos).shape != std::vector<int64_t>{1, ys[1], ys[2]})
      fail("class token needs x [B, S-1, D], cls [1, 1, D], positions [1, S, D] and the "
           "sequence [B, S, D]");
    break;
  }
  case Op::FirstToken:
  case Op::FirstTokenGrad: {
    int64_t seq = inst.op == Op::FirstToken ? inst.in[0] : inst.out[0];
    int64_t first = inst.op == Op::FirstToken ? inst.out[0] : inst.in[0];
    const auto &s = t(seq).shape;
    if (s.size() != 3 || s[1] < 1 || t(first).shape != std::vector<int64_t>{s[0], 1, s[2]})
      fail("first token needs the sequence [B, S, D] and its first rows [B, 1, D]");
    break;
  }
  case Op::CrossEntropy:
    f32(inst.out[0]);
    [[fallthrough]];
  case Op::CrossEntropyGrad:
    if (t(inst.in[1]).dtype != DType::I64 || t(inst.in[0]).shape.empty() ||
        n(inst.in[0]) != n(inst.in[1]) * last(inst.in[0]))
      fail("logits and targets do not match");
    break;
  case Op::MoeRoute:
  case Op::MoeRouteGrad:
  case Op::MoePermute:
  case Op::MoePermuteGrad:
  case Op::MoeLinear:
  case Op::MoeLinearGradInput:
  case Op::MoeLinearGradWeight:
  case Op::MoeCombine:
  case Op::MoeCombineGrad:
    checkMoe(p, inst, fail);
    break;
  case Op::MoeAuxLoss:
  case Op::MoeAuxLossGrad: {
    size_t first = inst.op == Op::MoeAuxLoss ? 1 : 0;
    if (inst.op == Op::MoeAuxLoss) {
      f32(inst.out[0]);
      f32(inst.in[0]);
      if (n(inst.in[0]) != 1 || n(inst.out[0]) != 1)
        fail("moe_aux_loss reads the loss and writes the loss: one f32 each");
    } else if (inst.out.size() != inst.in.size()) {
      fail("moe_aux_loss_grad writes one gradient per layer's logits");
    }
    for (size_t k = first; k < inst.in.size(); ++k) {
      if (!isFloat(inst.in[k]) || t(inst.in[k]).shape.size() != 3 ||
          t(inst.in[k]).shape != t(inst.in[first]).shape)
        fail("the layers' router logits must be float [B, S, E] of one shape");
      if (inst.op == Op::MoeAuxLossGrad)
        sameShape(inst.in[k], inst.out[k]);
    }
    if (inst.topK < 1 || inst.topK > std::min(last(inst.in[first]), fsdp::kernels::kMaxTopK) ||
        !std::isfinite(inst.coef) || inst.coef < 0)
      fail("top_k must be in [1, min(E, " + std::to_string(fsdp::kernels::kMaxTopK) +
           ")] and coef finite and >= 0");
    break;
  }
  case Op::Record:
  case Op::Wait:
    event();
    return;
  case Op::Alloc:
    checkRange(inst.dst, (i128)unit().paddedNumel * p.gradElementBytes());
    if (inst.zeroFrom < 0 || inst.zeroFrom > unit().paddedNumel)
      fail("zero_from " + std::to_string(inst.zeroFrom) + " lies outside the unit");
    return;
  case Op::AllGather:
    checkRange(inst.dst, (i128)unit().paddedNumel * (inst.bf16 ? 2 : 4));
    if (inst.overReshard) {
      // From each member's resharded copy: 1/N of the gathered bytes.
      if (!p.reshardAfterForward)
        fail("gathers over the reshard group, which only a program with reshard_after_forward "
             "has");
      checkRange(inst.src, (i128)unit().paddedNumel / p.reshardAfterForward * (inst.bf16 ? 2 : 4));
    } else if (p.offloadsParams() && inst.bf16 && unit().hostGatherOffset < 0) {
      // offload all: a bf16 gather sends the host's bf16 copy of the shard.
      fail("gathers in bf16 under offload all, but its unit has no host_gather_offset");
    }
    return;
  case Op::Reshard:
    // This member's 1/N of the gathered buffer, copied as it is.
    if (!p.reshardAfterForward)
      fail("keeps a 1/N copy of gathered parameters, which only a program with "
           "reshard_after_forward does");
    checkRange(inst.src, (i128)unit().paddedNumel * (inst.bf16 ? 2 : 4));
    checkRange(inst.dst, (i128)unit().paddedNumel / p.reshardAfterForward * (inst.bf16 ? 2 : 4));
    return;
  case Op::Accumulate:
    // The unit's gradients (compute dtype) into its f32 accumulation buffer.
    if (!p.syncsAtLastMicroStep())
      fail("accumulates across micro-steps, which only a program with grad_sync last does");
    checkRange(inst.src, (i128)unit().paddedNumel * p.gradElementBytes());
    if (inst.dst < 0 || inst.dst != unit().accumulatedOffset)
      fail("must write its unit's accumulation buffer (accumulated_offset " +
           std::to_string(unit().accumulatedOffset) + "), not " + std::to_string(inst.dst));
    return;
  case Op::ReduceScatter: {
    checkRange(inst.src, (i128)unit().paddedNumel * p.reducedElementBytes());
    // grad_sync last: what is reduced is the unit's sum, which the
    // optimizer step zeroes; any other bytes would be reduced unsummed.
    if (p.syncsAtLastMicroStep() && inst.src != unit().accumulatedOffset)
      fail("reduces bytes at " + std::to_string(inst.src) +
           ", not its unit's accumulation buffer (accumulated_offset " +
           std::to_string(unit().accumulatedOffset) + ")");
    // The comm stream's staging (runtime/Scratch.h).
    if (int64_t need = reduceScatterScratchBytes(p.target, unit().paddedNumel, unit().shardNumel,
                                                 p.reducedElementBytes() == 2, inst.bf16))
      scratch(need);
    return;
  }
  case Op::Free:
  case Op::OptimizerStep:
  case Op::AllReduce:
    unit();
    return;
  case Op::GradNorm:
    if (int64_t need = gradNormScratchBytes(p.target, (int64_t)p.units.size()))
      scratch(need);
    return;
  }

  inst.call = decodeCall(p, inst);
  const Call &c = inst.call;
  const auto &in = inst.in, &out = inst.out;
  i128 nD = (i128)c.n * c.D;
  switch (inst.op) {
  case Op::PositionIds:
  case Op::TokenTypeIds:
    touches(out[0], (i128)c.B * c.S, 8);
    break;
  case Op::Embedding:
    touches(in[0], c.n, 8);
    touches(in[1], (i128)t(in[1]).shape[0] * c.D);
    touches(out[0], nD);
    break;
  case Op::EmbeddingGrad:
    touches(in[0], nD);
    touches(in[1], c.n, 8);
    touches(out[0], (i128)c.V * c.D);
    break;
  case Op::Linear:
    touches(in[0], (i128)c.n * c.in);
    touches(in[1], (i128)c.in * c.out);
    if (c.bias)
      touches(in[2], c.out);
    touches(out[0], (i128)c.n * c.out);
    break;
  case Op::LinearGradInput: // dy, w -> dx
    touches(in[0], (i128)c.n * c.out);
    touches(in[1], (i128)c.in * c.out);
    touches(out[0], (i128)c.n * c.in);
    break;
  case Op::LinearGradWeight: // dy, x -> dw
    touches(in[0], (i128)c.n * c.out);
    touches(in[1], (i128)c.n * c.in);
    touches(out[0], (i128)c.in * c.out);
    break;
  case Op::BiasGrad:
    touches(in[0], nD);
    touches(out[0], c.D);
    break;
  case Op::LayerNorm:
  case Op::RMSNorm:
    touches(in[0], nD);
    touches(out[0], nD);
    for (size_t k = 1; k < in.size(); ++k)
      touches(in[k], c.D);
    break;
  case Op::LayerNormGrad:
  case Op::RMSNormGrad: // dy, x, w -> dx, dw (, db)
    for (int64_t id : {in[0], in[1], out[0]})
      touches(id, nD);
    touches(in[2], c.D);
    for (size_t k = 1; k < out.size(); ++k)
      touches(out[k], c.D);
    break;
  case Op::Rope:
    for (int64_t id : {in[0], out[0]})
      touches(id, (i128)c.B * c.S * c.H * c.Dh);
    break;
  case Op::Split:
  case Op::Concat: {
    bool split = inst.op == Op::Split;
    for (int64_t id : split ? out : in)
      touches(id, (i128)c.n * c.W);
    touches((split ? in : out)[0], (i128)c.n * c.W * c.parts);
    break;
  }
  case Op::CausalAttention:
  case Op::CausalAttentionGrad:
  case Op::Attention:
  case Op::AttentionGrad: {
    // q, out [B, S, H*Dh] and k, v [B, S, KV*Dh].
    bool fwd = inst.op == Op::CausalAttention || inst.op == Op::Attention;
    i128 qn = (i128)c.B * c.S * c.H * c.Dh, kvn = (i128)c.B * c.S * c.KV * c.Dh;
    if (fwd) {
      for (int64_t id : {in[0], out[0]})
        touches(id, qn);
      for (int64_t id : {in[1], in[2]})
        touches(id, kvn);
    } else {
      for (int64_t id : {in[0], in[1], in[4], out[0]})
        touches(id, qn);
      for (int64_t id : {in[2], in[3], out[1], out[2]})
        touches(id, kvn);
    }
    break;
  }
  case Op::Gelu:
  case Op::GeluGrad:
  case Op::SiluMul:
  case Op::SiluMulGrad:
  case Op::Add: // every operand holds the first input's elements
    for (int64_t id : in)
      touches(id, c.n);
    for (int64_t id : out)
      touches(id, c.n);
    break;
  case Op::CrossEntropy:
  case Op::CrossEntropyGrad:
    touches(in[0], (i128)c.n * c.V);
    touches(in[1], c.n, 8);
    touches(out[0], inst.op == Op::CrossEntropy ? 1 : (i128)c.n * c.V);
    break;
  case Op::Cast:
    touches(in[0], c.n);
    touches(out[0], c.n);
    break;
  case Op::TpAllGather:
  case Op::TpUnchunk:
  case Op::TpReduceScatter:
  case Op::TpChunk:
  case Op::TpAllReduce: {
    bool gathers = inst.op == Op::TpAllGather || inst.op == Op::TpUnchunk;
    touches(gathers ? in[0] : out[0], c.n);
    touches(gathers ? out[0] : in[0], (i128)c.n * c.parts);
    if (c.bias)
      touches(in[1], c.D);
    break;
  }
  case Op::ClassToken:
  case Op::ClassTokenGrad: {
    bool fwd = inst.op == Op::ClassToken;
    touches(fwd ? in[0] : out[0], (i128)c.B * (c.S - 1) * c.D);
    touches(fwd ? in[1] : out[1], c.D);
    touches(fwd ? in[2] : out[2], (i128)c.S * c.D);
    touches(fwd ? out[0] : in[0], (i128)c.B * c.S * c.D);
    break;
  }
  case Op::MoeRoute: // logits [n, E] -> weights, experts, slots [n, k]
    touches(in[0], (i128)c.n * c.E);
    touches(out[0], (i128)c.n * c.k);
    touches(out[1], (i128)c.n * c.k, 8);
    touches(out[2], (i128)c.n * c.k, 8);
    break;
  case Op::MoeRouteGrad: // dweights [n, k], logits [n, E], experts -> dlogits
    touches(in[0], (i128)c.n * c.k);
    touches(in[1], (i128)c.n * c.E);
    touches(in[2], (i128)c.n * c.k, 8);
    touches(out[0], (i128)c.n * c.E);
    break;
  case Op::MoePermute:
  case Op::MoePermuteGrad: {
    bool fwd = inst.op == Op::MoePermute;
    touches(fwd ? in[0] : out[0], nD);
    touches(in[1], (i128)c.n * c.k, 8);
    touches(fwd ? out[0] : in[0], nD * c.k);
    break;
  }
  case Op::MoeLinear:
  case Op::MoeLinearGradInput:
  case Op::MoeLinearGradWeight: {
    bool fwd = inst.op == Op::MoeLinear, dw = inst.op == Op::MoeLinearGradWeight;
    i128 rows = (i128)c.n * c.k;
    touches(in[0], rows * (fwd ? c.in : c.out));
    touches(in[dw ? 2 : 1], rows, 8);
    if (dw)
      touches(in[1], rows * c.in);
    else
      touches(out[0], rows * (fwd ? c.out : c.in));
    for (int64_t id :
         dw ? std::vector<int64_t>(out) : std::vector<int64_t>(in.begin() + 2, in.end()))
      touches(id, (i128)c.in * c.out);
    break;
  }
  case Op::MoeCombine:
  case Op::MoeCombineGrad: {
    bool fwd = inst.op == Op::MoeCombine;
    int64_t packed = fwd ? in[0] : in[1], weights = fwd ? in[1] : in[2],
            slots = fwd ? in[2] : in[3];
    touches(packed, nD * c.k);
    touches(weights, (i128)c.n * c.k);
    touches(slots, (i128)c.n * c.k, 8);
    touches(fwd ? out[0] : in[0], nD);
    if (!fwd) {
      touches(out[0], nD * c.k);
      touches(out[1], (i128)c.n * c.k);
    }
    break;
  }
  case Op::MoeAuxLoss:
  case Op::MoeAuxLossGrad: {
    size_t first = inst.op == Op::MoeAuxLoss ? 1 : 0;
    for (size_t k = first; k < in.size(); ++k)
      touches(in[k], (i128)c.n * c.E);
    for (int64_t id : out)
      touches(id, inst.op == Op::MoeAuxLoss ? 1 : (i128)c.n * c.E);
    break;
  }
  case Op::FirstToken:
  case Op::FirstTokenGrad: {
    bool fwd = inst.op == Op::FirstToken;
    touches(fwd ? in[0] : out[0], (i128)c.B * c.S * c.D);
    touches(fwd ? out[0] : in[0], (i128)c.B * c.D);
    break;
  }
  default:
    break;
  }
  // What the kernel needs beyond its tensors on the program's target
  // (runtime/Scratch.h), from the same call the executors make.
  if (int64_t need = kernelScratchBytes(p.target, inst.op, c.dtype, c))
    scratch(need);
}
