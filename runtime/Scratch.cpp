//===- Scratch.cpp - each op's kernel scratch, per target -----------------===//
#include "runtime/Scratch.h"
#include "runtime/kernels/cpu.h"
#include "runtime/kernels/cuda.h"

using namespace fsdp;
using namespace fsdp::program;

namespace {
int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }
} // namespace

int64_t fsdp::program::kernelScratchBytes(Target target, Op op, DType dtype, const Call &c) {
  bool bf16 = dtype == DType::BF16;
  if (target == Target::Cuda) {
    namespace ck = fsdp::cuda_kernels;
    switch (op) {
    case Op::LayerNormGrad:
      return 4 * ck::layerNormBackwardScratchFloats(c.n);
    case Op::RMSNormGrad:
      return 4 * ck::rmsNormBackwardScratchFloats(c.n);
    case Op::CausalAttentionGrad:
    case Op::AttentionGrad:
      return 4 * ck::attentionBackwardScratchFloats(c.B, c.S, c.H);
    case Op::CrossEntropy: // the per-row losses, in double
      return 8 * c.n;
    case Op::EmbeddingGrad: // bf16: an f32 accumulator of the table
      return bf16 ? 4 * ck::embeddingBackwardBf16ScratchFloats(c.V, c.D) : 0;
    case Op::MoeRoute: // the row starts and each chunk's counts
      return 4 * ck::moeRouteScratchFloats(c.n, c.k, c.E);
    case Op::MoeLinear: // the row starts and tile starts
    case Op::MoeLinearGradInput:
    case Op::MoeLinearGradWeight:
      return 4 * ck::moeLinearScratchFloats(c.E);
    case Op::MoeAuxLoss: // the blocks' sums of p, the counts
    case Op::MoeAuxLossGrad:
      return 4 * ck::moeAuxLossScratchFloats(c.parts, c.n, c.E, c.k);
    default:
      return 0;
    }
  }
  switch (op) {
  case Op::CausalAttention:
  case Op::CausalAttentionGrad:
  case Op::Attention:
  case Op::AttentionGrad: {
    bool backward = op == Op::CausalAttentionGrad || op == Op::AttentionGrad;
    return 4 * (bf16 ? kernels::attentionBf16ScratchFloats(c.S, c.H, c.KV, c.Dh, backward)
                     : kernels::attentionScratchFloats(c.S, backward));
  }
  case Op::Linear:
  case Op::LinearGradInput:
  case Op::LinearGradWeight:
    return bf16 ? 4 * kernels::linearBf16ScratchFloats(c.n, c.in, c.out) : 0;
  case Op::EmbeddingGrad:
    return bf16 ? 4 * kernels::embeddingBackwardBf16ScratchFloats(c.n, c.V, c.D) : 0;
  case Op::BiasGrad:
    return bf16 ? 4 * kernels::biasBackwardBf16ScratchFloats(c.n, c.D) : 0;
  case Op::LayerNormGrad:
  case Op::RMSNormGrad:
    return bf16 ? 4 * kernels::normBackwardBf16ScratchFloats(c.n, c.D) : 0;
  case Op::MoeRoute:
  case Op::MoeRouteGrad:
    return 4 * kernels::moeRouteScratchFloats(c.E);
  case Op::MoeLinear:
  case Op::MoeLinearGradInput:
  case Op::MoeLinearGradWeight:
    return 4 * (kernels::moeOffsetsFloats(c.E) +
                (bf16 ? kernels::linearBf16ScratchFloats(c.n * c.k, c.in, c.out) : 0));
  case Op::MoeAuxLoss:
  case Op::MoeAuxLossGrad:
    return 4 * kernels::moeAuxLossScratchFloats(c.E, c.k);
  default:
    return 0;
  }
}

int64_t fsdp::program::reduceScatterWidenOffset(Target target, int64_t shardNumel,
                                                bool reduceBf16) {
  return target == Target::Cuda ? align64(shardNumel * (reduceBf16 ? 2 : 4)) : 0;
}

int64_t fsdp::program::reduceScatterScratchBytes(Target target, int64_t paddedNumel,
                                                 int64_t shardNumel, bool gradsBf16,
                                                 bool reduceBf16) {
  int64_t widen = gradsBf16 && !reduceBf16 ? paddedNumel * 4 : 0;
  int64_t part = target == Target::Cuda ? shardNumel * (reduceBf16 ? 2 : 4) : 0;
  if (!widen)
    return part;
  return reduceScatterWidenOffset(target, shardNumel, reduceBf16) + widen;
}

int64_t fsdp::program::gradNormPartsOffset() {
  return 8 * cuda_kernels::sumOfSquaresScratchDoubles();
}

int64_t fsdp::program::gradNormScratchBytes(Target target, int64_t units) {
  return target == Target::Cuda ? gradNormPartsOffset() + 8 * (units + 1) : 0;
}
