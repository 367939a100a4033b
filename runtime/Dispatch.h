//===- Dispatch.h - one dispatch of compute instructions to kernels -*- C++ -*-===//
//
// The one switch over the program's compute ops (written by hand, not made
// from Ops.def: a case for each Compute row; dispatchCompute returns false
// for a row without one), shared by the CPU executor
// (Executor.cpp: kernels/cpu.h) and the device executor (DeviceExecutor.cpp:
// kernels/cuda.h). Each instruction's arguments come from its decoded Call
// (Program.h), the same the loader checked; the executors differ only in the
// kernel set K they pass, which says which kernel runs and where memory is:
//
//   template <typename T> T *tensor(int64_t id)    the tensor's memory
//   float *scratch(const Instruction &)            the op's kernel scratch
//   void zero(int64_t dst, int64_t from, int64_t bytes)
//                                                  alloc: zero bytes [from,
//                                                  bytes) of the buffer at dst
//   void optimizerStep(const Unit &)               AdamW over the unit's shard
//   void accumulate(const Program &, const Instruction &)
//                                                  grad_sync last: the unit's
//                                                  gradients added to its sum
//   void reshard(const Program &, const Instruction &)
//                                                  reshard_after_forward: this
//                                                  member's 1/N of the gathered
//                                                  parameters kept
//   void tensorParallel(const Instruction &)       tp_*: the rank's tensor-
//                                                  parallel op (RankDevice's)
// and one member a kernel, with the CPU kernels' arguments (kernels/cpu.h),
// for float and for kernels::bf16 storage; the linear, bias,
// embedding and norm gradient kernels also take the op's scratch last:
//   positionIds, tokenTypeIds, embeddingForward, embeddingBackward, linearForward,
//   linearBackwardInput, linearBackwardWeight, biasBackward, layerNormForward,
//   layerNormBackward, rmsNormForward, rmsNormBackward, rope, split, concat,
//   attentionForward, attentionBackward, geluForward, geluBackward,
//   siluMulForward, siluMulBackward, add, classTokenForward, classTokenBackward,
//   firstTokenForward, firstTokenBackward, crossEntropyForward (writing the
//   loss to its output tensor), crossEntropyBackward (with the loss scale),
//   fromBf16, toBf16, roundToBf16; and the mixture of experts' (dispatchMoe,
//   with their scratch): moeRouteForward, moeRouteBackward, moePermuteForward,
//   moePermuteBackward, moeLinearForward, moeLinearBackwardInput,
//   moeLinearBackwardWeight, moeCombineForward, moeCombineBackward,
//   moeAuxLossForward (the loss in and out f32), moeAuxLossBackward (with the
//   loss scale).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DISPATCH_H
#define FSDP_RUNTIME_DISPATCH_H

#include "runtime/Program.h"
#include "runtime/kernels/cpu.h"

#include <tuple>
#include <utility>
#include <vector>

namespace fsdp::runtime {

namespace detail {
template <typename F, typename Tuple, size_t... I>
void applyPrefix(F f, const Tuple &t, std::index_sequence<I...>) {
  f(std::get<I>(t)...);
}
} // namespace detail

/// What both kernel sets share: a tensor's memory and an instruction's
/// scratch lie in the rank's arena, each counted toward the measured peak
/// when used, and alloc's zeroing and optimizer_step are the rank's (R: the
/// executor's rank, a RankDevice of runtime/Trainer.h).
template <typename R> struct ArenaMemory {
  R &rank;
  template <typename T> T *tensor(int64_t id) { return rank.template tensor<T>(id); }
  float *scratch(const program::Instruction &i) {
    if (i.scratch < 0)
      return nullptr;
    rank.touch(i.scratch, i.scratchBytes);
    return rank.at(i.scratch);
  }
  void zero(int64_t dst, int64_t from, int64_t bytes) {
    rank.touch(dst, bytes);
    rank.zero(rank.template at<char>(dst) + from, bytes - from, nullptr);
  }
  void optimizerStep(const program::Unit &u) { rank.optimizerStep(u); }
  void accumulate(const program::Program &p, const program::Instruction &i) {
    const program::Unit &u = p.units[i.unit];
    int64_t elem = p.gradElementBytes();
    rank.touch(i.src, u.paddedNumel * elem);
    rank.touch(i.dst, u.paddedNumel * 4);
    rank.accumulate(rank.at(i.dst), rank.template at<char>(i.src), u.paddedNumel, elem == 2);
  }
  void tensorParallel(const program::Instruction &i) { rank.tensorParallel(i); }
  void reshard(const program::Program &p, const program::Instruction &i) {
    const program::Unit &u = p.units[i.unit];
    int64_t bytes = p.reshardedBytes(u, i.bf16);
    int64_t from = i.src + rank.reshardMember() * bytes;
    rank.touch(from, bytes);
    rank.touch(i.dst, bytes);
    rank.copy(rank.template at<char>(i.dst), rank.template at<char>(from), bytes);
  }
};

/// f(a...) without the last argument: a kernel set's wrapper for a kernel
/// that takes no scratch where Dispatch passes one.
template <typename F, typename... A> void dropLast(F f, A... a) {
  detail::applyPrefix(f, std::make_tuple(a...), std::make_index_sequence<sizeof...(A) - 1>());
}

/// The mixture-of-experts ops' kernels (kernels/cpu.h, "Mixture of experts"):
/// the expert weights and the layers' logits go as arrays of pointers.
template <typename T, typename K>
bool dispatchMoe(const program::Instruction &i, K &k, float lossScale) {
  using program::Op;
  const program::Call &c = i.call;
  auto f = [&](int64_t id) { return k.template tensor<T>(id); };
  auto ids = [&](int64_t id) { return k.template tensor<int64_t>(id); };
  auto list = [&](auto begin, auto end) {
    std::vector<T *> v;
    for (auto it = begin; it != end; ++it)
      v.push_back(f(*it));
    return v;
  };
  switch (i.op) {
  case Op::MoeRoute:
    k.moeRouteForward(f(i.in[0]), f(i.out[0]), ids(i.out[1]), ids(i.out[2]), c.n, c.E, c.k,
                      i.normTopkProb, k.scratch(i));
    return true;
  case Op::MoeRouteGrad:
    k.moeRouteBackward(f(i.in[0]), f(i.in[1]), ids(i.in[2]), f(i.out[0]), c.n, c.E, c.k,
                       i.normTopkProb, k.scratch(i));
    return true;
  case Op::MoePermute:
    k.moePermuteForward(f(i.in[0]), ids(i.in[1]), f(i.out[0]), c.n, c.k, c.D);
    return true;
  case Op::MoePermuteGrad:
    k.moePermuteBackward(f(i.in[0]), ids(i.in[1]), f(i.out[0]), c.n, c.k, c.D);
    return true;
  case Op::MoeLinear:
  case Op::MoeLinearGradInput: {
    std::vector<T *> w = list(i.in.begin() + 2, i.in.end());
    if (i.op == Op::MoeLinear)
      k.moeLinearForward(f(i.in[0]), ids(i.in[1]), w.data(), f(i.out[0]), c.n, c.k, c.E, c.in,
                         c.out, k.scratch(i));
    else
      k.moeLinearBackwardInput(f(i.in[0]), ids(i.in[1]), w.data(), f(i.out[0]), c.n, c.k, c.E, c.in,
                               c.out, k.scratch(i));
    return true;
  }
  case Op::MoeLinearGradWeight: {
    std::vector<T *> dw = list(i.out.begin(), i.out.end());
    k.moeLinearBackwardWeight(f(i.in[0]), f(i.in[1]), ids(i.in[2]), dw.data(), c.n, c.k, c.E, c.in,
                              c.out, k.scratch(i));
    return true;
  }
  case Op::MoeCombine:
    k.moeCombineForward(f(i.in[0]), f(i.in[1]), ids(i.in[2]), f(i.out[0]), c.n, c.k, c.D);
    return true;
  case Op::MoeCombineGrad:
    k.moeCombineBackward(f(i.in[0]), f(i.in[1]), f(i.in[2]), ids(i.in[3]), f(i.out[0]), f(i.out[1]),
                         c.n, c.k, c.D);
    return true;
  case Op::MoeAuxLoss: {
    std::vector<T *> logits = list(i.in.begin() + 1, i.in.end());
    k.moeAuxLossForward(k.template tensor<float>(i.in[0]), logits.data(),
                        k.template tensor<float>(i.out[0]), c.parts, c.n, c.E, c.k, i.coef,
                        k.scratch(i));
    return true;
  }
  case Op::MoeAuxLossGrad: {
    std::vector<T *> logits = list(i.in.begin(), i.in.end());
    std::vector<T *> grads = list(i.out.begin(), i.out.end());
    k.moeAuxLossBackward(logits.data(), grads.data(), c.parts, c.n, c.E, c.k, i.coef, lossScale,
                         k.scratch(i));
    return true;
  }
  default:
    return false;
  }
}

/// The kernel that compute instruction `i` runs on storage type T (float or
/// kernels::bf16: the dtype of its float tensors), through the kernel set `k`.
template <typename T, typename K>
bool dispatchTyped(const program::Program &p, const program::Instruction &i, K &k,
                   float lossScale) {
  using program::Op;
  const program::Call &c = i.call;
  auto f = [&](int64_t id) { return k.template tensor<T>(id); };
  auto ids = [&](int64_t id) { return k.template tensor<int64_t>(id); };
  auto layout = c.layoutInOut ? kernels::Layout::InOut : kernels::Layout::OutIn;
  switch (i.op) {
  case Op::PositionIds:
    k.positionIds(ids(i.out[0]), c.B, c.S);
    return true;
  case Op::TokenTypeIds:
    k.tokenTypeIds(ids(i.out[0]), c.B, c.S);
    return true;
  case Op::Embedding:
    k.embeddingForward(ids(i.in[0]), f(i.in[1]), f(i.out[0]), c.n, c.D);
    return true;
  case Op::EmbeddingGrad:
    k.embeddingBackward(f(i.in[0]), ids(i.in[1]), f(i.out[0]), c.n, c.V, c.D, k.scratch(i));
    return true;
  case Op::Linear:
    k.linearForward(f(i.in[0]), f(i.in[1]), c.bias ? f(i.in[2]) : nullptr, f(i.out[0]), c.n, c.in,
                    c.out, layout, k.scratch(i));
    return true;
  case Op::LinearGradInput:
    k.linearBackwardInput(f(i.in[0]), f(i.in[1]), f(i.out[0]), c.n, c.in, c.out, layout,
                          k.scratch(i));
    return true;
  case Op::LinearGradWeight:
    k.linearBackwardWeight(f(i.in[0]), f(i.in[1]), f(i.out[0]), c.n, c.in, c.out, layout,
                           k.scratch(i));
    return true;
  case Op::BiasGrad:
    k.biasBackward(f(i.in[0]), f(i.out[0]), c.n, c.D, k.scratch(i));
    return true;
  case Op::LayerNorm:
    k.layerNormForward(f(i.in[0]), f(i.in[1]), f(i.in[2]), f(i.out[0]), c.n, c.D, i.eps);
    return true;
  case Op::LayerNormGrad:
    k.layerNormBackward(f(i.in[0]), f(i.in[1]), f(i.in[2]), f(i.out[0]), f(i.out[1]), f(i.out[2]),
                        c.n, c.D, i.eps, k.scratch(i));
    return true;
  case Op::RMSNorm:
    k.rmsNormForward(f(i.in[0]), f(i.in[1]), f(i.out[0]), c.n, c.D, i.eps);
    return true;
  case Op::RMSNormGrad:
    k.rmsNormBackward(f(i.in[0]), f(i.in[1]), f(i.in[2]), f(i.out[0]), f(i.out[1]), c.n, c.D, i.eps,
                      k.scratch(i));
    return true;
  case Op::Rope:
    k.rope(f(i.in[0]), f(i.out[0]), c.B, c.S, c.H, c.Dh, i.theta,
           i.ropeScaling ? &*i.ropeScaling : nullptr, i.inverse);
    return true;
  case Op::Split:
  case Op::Concat: {
    bool split = i.op == Op::Split;
    std::vector<T *> parts;
    for (int64_t id : split ? i.out : i.in)
      parts.push_back(f(id));
    if (split)
      k.split(f(i.in[0]), parts.data(), c.parts, c.n, c.W);
    else
      k.concat(parts.data(), f(i.out[0]), c.parts, c.n, c.W);
    return true;
  }
  case Op::CausalAttention:
  case Op::Attention:
    k.attentionForward(f(i.in[0]), f(i.in[1]), f(i.in[2]), f(i.out[0]), c.B, c.S, c.H, c.KV, c.Dh,
                       c.causal, c.window, k.scratch(i));
    return true;
  case Op::CausalAttentionGrad:
  case Op::AttentionGrad:
    k.attentionBackward(f(i.in[0]), f(i.in[1]), f(i.in[2]), f(i.in[3]), f(i.in[4]), f(i.out[0]),
                        f(i.out[1]), f(i.out[2]), c.B, c.S, c.H, c.KV, c.Dh, c.causal, c.window,
                        k.scratch(i));
    return true;
  case Op::Gelu:
    k.geluForward(f(i.in[0]), f(i.out[0]), c.n, c.approximate == program::GeluApproximate::Tanh);
    return true;
  case Op::GeluGrad:
    k.geluBackward(f(i.in[0]), f(i.in[1]), f(i.out[0]), c.n,
                   c.approximate == program::GeluApproximate::Tanh);
    return true;
  case Op::SiluMul:
    k.siluMulForward(f(i.in[0]), f(i.in[1]), f(i.out[0]), c.n);
    return true;
  case Op::SiluMulGrad:
    k.siluMulBackward(f(i.in[0]), f(i.in[1]), f(i.in[2]), f(i.out[0]), f(i.out[1]), c.n);
    return true;
  case Op::Add:
    k.add(f(i.in[0]), f(i.in[1]), f(i.out[0]), c.n);
    return true;
  case Op::ClassToken:
    k.classTokenForward(f(i.in[0]), f(i.in[1]), f(i.in[2]), f(i.out[0]), c.B, c.S, c.D);
    return true;
  case Op::ClassTokenGrad:
    k.classTokenBackward(f(i.in[0]), f(i.out[0]), f(i.out[1]), f(i.out[2]), c.B, c.S, c.D);
    return true;
  case Op::FirstToken:
    k.firstTokenForward(f(i.in[0]), f(i.out[0]), c.B, c.S, c.D);
    return true;
  case Op::FirstTokenGrad:
    k.firstTokenBackward(f(i.in[0]), f(i.out[0]), c.B, c.S, c.D);
    return true;
  case Op::CrossEntropy:
    k.crossEntropyForward(f(i.in[0]), ids(i.in[1]), k.template tensor<float>(i.out[0]), c.n, c.V,
                          k.scratch(i));
    return true;
  case Op::CrossEntropyGrad:
    k.crossEntropyBackward(f(i.in[0]), ids(i.in[1]), f(i.out[0]), c.n, c.V, lossScale);
    return true;
  case Op::Cast: {
    // The parameter as compute reads it: from a bf16 gather widened, or
    // from f32 (an unsharded unit's shard, an f32 gather) rounded to bf16,
    // kept as bf16 or as the f32 value of the bf16.
    auto f32 = [&](int64_t id) { return k.template tensor<float>(id); };
    auto b16 = [&](int64_t id) { return k.template tensor<kernels::bf16>(id); };
    if (c.castFrom == program::DType::BF16)
      k.fromBf16(b16(i.in[0]), f32(i.out[0]), c.n);
    else if (c.dtype == program::DType::BF16)
      k.toBf16(f32(i.in[0]), b16(i.out[0]), c.n);
    else
      k.roundToBf16(f32(i.in[0]), f32(i.out[0]), c.n);
    return true;
  }
  case Op::Alloc: {
    // The unit's unsharded gradient buffer, in the compute dtype; what
    // lowering knows is written before it is read (from zero_from on) is
    // not zeroed.
    int64_t elem = p.gradElementBytes();
    k.zero(i.dst, i.zeroFrom * elem, p.units[i.unit].paddedNumel * elem);
    return true;
  }
  case Op::OptimizerStep:
    k.optimizerStep(p.units[i.unit]);
    return true;
  case Op::Free: // the plan reuses the memory; nothing runs
    return true;
  case Op::Accumulate: // grad_sync last: the unit's gradients into its f32 sum
    k.accumulate(p, i);
    return true;
  case Op::Reshard: // reshard_after_forward: this member's 1/N kept for backward
    k.reshard(p, i);
    return true;
  case Op::TpAllGather: // tensor parallelism: on the compute stream, over the tp group
  case Op::TpReduceScatter:
  case Op::TpAllReduce:
  case Op::TpChunk:
  case Op::TpUnchunk:
    k.tensorParallel(i);
    return true;
  case Op::MoeRoute:
  case Op::MoeRouteGrad:
  case Op::MoePermute:
  case Op::MoePermuteGrad:
  case Op::MoeLinear:
  case Op::MoeLinearGradInput:
  case Op::MoeLinearGradWeight:
  case Op::MoeCombine:
  case Op::MoeCombineGrad:
  case Op::MoeAuxLoss:
  case Op::MoeAuxLossGrad:
    return dispatchMoe<T>(i, k, lossScale);
  default:
    return false;
  }
}

/// The kernel that compute instruction `i` runs, through the kernel set `k`.
/// Returns false for an op that is not the compute stream's (record and wait,
/// which the executors handle themselves, and the comm ops). A cast works on
/// both types and is dispatched as float.
template <typename K>
bool dispatchCompute(const program::Program &p, const program::Instruction &i, K &k,
                     float lossScale) {
  if (i.call.dtype != program::DType::BF16 || i.op == program::Op::Cast)
    return dispatchTyped<float>(p, i, k, lossScale);
  return dispatchTyped<kernels::bf16>(p, i, k, lossScale);
}

} // namespace fsdp::runtime

#endif
