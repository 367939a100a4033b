//===- cpu_bf16.cpp - CPU kernels over bf16 storage -----------------------===//
//
// The kernels of cpu.cpp over bf16 tensors (--compute-dtype bf16): each
// reads bf16, computes in float as its f32 counterpart does (the same bodies,
// cpu_impl.h, where the op is elementwise or row-wise), and rounds what it
// stores to bf16 once. Sums over rows (weight, bias, embedding and norm
// gradients, attention's dk and dv) accumulate in float and are rounded at
// the end. No allocation: what a kernel needs beyond its operands is the
// caller's scratch, sized by the *Bf16ScratchFloats functions of cpu.h.
//
// Matmuls are OpenBLAS sgemm on f32 copies of bf16 panels: Debian 12's
// OpenBLAS (0.3.21) has no cblas_sbgemm, so the operands are converted, a
// panel at a time, into the scratch, and the products accumulate in float.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu_impl.h"

namespace fsdp::kernels {

using namespace detail;

namespace {

// dst[rows, cols] (dense) = float(src[rows, cols]), src with row stride ld.
FSDP_HOT void toFloatBlock(const bf16 *src, int64_t ld, int64_t rows, int64_t cols, float *dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dst[r * cols + c] = load(src[r * ld + c]);
}

// dst[rows, cols] (row stride ld) = bf16(src[rows, cols] (dense) + bias[cols]);
// bias may be null.
FSDP_HOT void fromFloatBlock(const float *src, int64_t rows, int64_t cols, const bf16 *bias,
                             bf16 *dst, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    if (bias)
      for (int64_t c = 0; c < cols; ++c)
        store(dst + r * ld + c, src[r * cols + c] + load(bias[c]));
    else
      for (int64_t c = 0; c < cols; ++c)
        store(dst + r * ld + c, src[r * cols + c]);
  }
}

// C[M, N] = op(A)[M, K] op(B)[K, N] (+ bias[N]), row-major, op(A) = Aᵀ when
// transA (A stored [K, M]), likewise B. Tiles of C of kBf16Panel squared
// accumulate in float over K in chunks of at most kc, each an sgemm on f32
// copies of op(A)'s rows and op(B)'s columns of the tile and chunk; a tile is
// rounded to bf16 once, with the bias. When K is one chunk, op(A)'s panel is
// converted once for its whole row of tiles. Scratch: op(A)'s panel
// [kBf16Panel, kc], op(B)'s [kc, kBf16Panel], the tile.
void gemmBf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const bf16 *A, int64_t lda,
              const bf16 *B, int64_t ldb, const bf16 *bias, bf16 *C, int64_t ldc, int64_t kc,
              float *scratch) {
  constexpr int64_t P = kBf16Panel;
  float *a = scratch, *b = scratch + P * kc, *tile = b + P * kc;
  const CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  for (int64_t m0 = 0; m0 < M; m0 += P) {
    const int64_t mb = std::min(P, M - m0);
    for (int64_t n0 = 0; n0 < N; n0 += P) {
      const int64_t nb = std::min(P, N - n0);
      if (K <= 0)
        std::fill(tile, tile + mb * nb, 0.0f);
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t kb = std::min(kc, K - k0);
        if (K > kc || n0 == 0) {
          if (transA)
            toFloatBlock(A + k0 * lda + m0, lda, kb, mb, a);
          else
            toFloatBlock(A + m0 * lda + k0, lda, mb, kb, a);
        }
        if (transB)
          toFloatBlock(B + n0 * ldb + k0, ldb, nb, kb, b);
        else
          toFloatBlock(B + k0 * ldb + n0, ldb, kb, nb, b);
        sgemm(ta, tb, mb, nb, kb, 1.0f, a, transA ? mb : kb, b, transB ? kb : nb,
              k0 == 0 ? 0.0f : 1.0f, tile, nb);
      }
      fromFloatBlock(tile, mb, nb, bias ? bias + n0 : nullptr, C + m0 * ldc + n0, ldc);
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

void embeddingForward(const int64_t *ids, const bf16 *table, bf16 *out, int64_t n, int64_t D) {
  embeddingForwardT(ids, table, out, n, D);
}

// The rows of dout sorted by id (a counting sort: end[v] ends id v's run of
// order[]), then each id's rows summed in float in the order they come, as
// the f32 kernel adds them, and rounded once. Ids no row has get zeros.
FSDP_HOT void embeddingBackward(const bf16 *dout, const int64_t *ids, bf16 *dtable, int64_t n,
                                int64_t V, int64_t D, float *scratch) {
  int64_t *end = reinterpret_cast<int64_t *>(scratch); // [V + 1]
  int64_t *order = end + V + 1;                        // [n]
  float *acc = reinterpret_cast<float *>(order + n);   // [D]
  std::fill(end, end + V + 1, int64_t(0));
  for (int64_t i = 0; i < n; ++i)
    ++end[ids[i] + 1];
  for (int64_t v = 0; v < V; ++v)
    end[v + 1] += end[v]; // end[v]: where id v's rows start
  for (int64_t i = 0; i < n; ++i)
    order[end[ids[i]]++] = i; // end[v]: where they end
  for (int64_t v = 0, begin = 0; v < V; begin = end[v], ++v) {
    std::fill(acc, acc + D, 0.0f);
    for (int64_t j = begin; j < end[v]; ++j) {
      const bf16 *g = dout + order[j] * D;
      for (int64_t c = 0; c < D; ++c)
        acc[c] += load(g[c]);
    }
    fromFloatBlock(acc, 1, D, nullptr, dtable + v * D, D);
  }
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

void linearForward(const bf16 *x, const bf16 *w, const bf16 *bias, bf16 *y, int64_t n, int64_t in,
                   int64_t out, Layout layout, float *scratch) {
  // y = x W, W [in, out]; or y = x Wᵀ, W [out, in]
  const bool outIn = layout == Layout::OutIn;
  gemmBf16(false, outIn, n, out, in, x, in, w, outIn ? in : out, bias, y, out,
           linearBf16PanelDepth(in, out), scratch);
}

void linearBackwardInput(const bf16 *dy, const bf16 *w, bf16 *dx, int64_t n, int64_t in,
                         int64_t out, Layout layout, float *scratch) {
  // dx = dy Wᵀ, W [in, out]; or dx = dy W, W [out, in]
  const bool inOut = layout == Layout::InOut;
  gemmBf16(false, inOut, n, in, out, dy, out, w, inOut ? out : in, nullptr, dx, in,
           linearBf16PanelDepth(in, out), scratch);
}

void linearBackwardWeight(const bf16 *dy, const bf16 *x, bf16 *dw, int64_t n, int64_t in,
                          int64_t out, Layout layout, float *scratch) {
  const int64_t kc = linearBf16PanelDepth(in, out);
  if (layout == Layout::InOut) // dW [in, out] = xᵀ dy
    gemmBf16(true, false, in, out, n, x, in, dy, out, nullptr, dw, out, kc, scratch);
  else // dW [out, in] = dyᵀ x
    gemmBf16(true, false, out, in, n, dy, out, x, in, nullptr, dw, in, kc, scratch);
}

void biasBackward(const bf16 *dy, bf16 *db, int64_t n, int64_t out, float *scratch) {
  biasBackwardT(dy, db, n, out); // sums in double on the stack: no scratch
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

FSDP_HOT void layerNormForward(const bf16 *x, const bf16 *w, const bf16 *b, bf16 *y, int64_t n,
                               int64_t D, double eps) {
  layerNormForwardT(x, w, b, y, n, D, eps);
}

FSDP_HOT void layerNormBackward(const bf16 *dy, const bf16 *x, const bf16 *w, bf16 *dx, bf16 *dw,
                                bf16 *db, int64_t n, int64_t D, double eps, float *scratch) {
  layerNormBackwardT(dy, x, w, dx, scratch, scratch + D, n, D, eps);
  fromFloatBlock(scratch, 1, D, nullptr, dw, D);
  fromFloatBlock(scratch + D, 1, D, nullptr, db, D);
}

FSDP_HOT void rmsNormForward(const bf16 *x, const bf16 *w, bf16 *y, int64_t n, int64_t D,
                             double eps) {
  rmsNormForwardT(x, w, y, n, D, eps);
}

FSDP_HOT void rmsNormBackward(const bf16 *dy, const bf16 *x, const bf16 *w, bf16 *dx, bf16 *dw,
                              int64_t n, int64_t D, double eps, float *scratch) {
  rmsNormBackwardT(dy, x, w, dx, scratch, n, D, eps);
  fromFloatBlock(scratch, 1, D, nullptr, dw, D);
}

//===----------------------------------------------------------------------===//
// RoPE, split, concat
//===----------------------------------------------------------------------===//

FSDP_HOT void rope(const bf16 *x, bf16 *y, int64_t B, int64_t S, int64_t H, int64_t Dh,
                   double theta, const RopeScaling *scaling, bool inverse) {
  ropeT(x, y, B, S, H, Dh, theta, scaling, inverse);
}

void split(const bf16 *x, bf16 *const *outs, int64_t parts, int64_t n, int64_t W) {
  splitT(x, outs, parts, n, W);
}

void concat(const bf16 *const *ins, bf16 *y, int64_t parts, int64_t n, int64_t W) {
  concatT(ins, y, parts, n, W);
}

//===----------------------------------------------------------------------===//
// Attention (causal or bidirectional)
//===----------------------------------------------------------------------===//
//
// As the f32 kernels, with f32 copies of one kv head's k and v over the
// sequence (made once for the query heads that share it) and of each query
// tile's q (and dout); the scores, probabilities and products are the f32
// kernels' (attentionProbs, attentionBackwardTile). Backward, the kv head's
// dk and dv accumulate in float over its query heads and tiles and are
// rounded once.

FSDP_HOT void attentionForward(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *out, int64_t B,
                               int64_t S, int64_t H, int64_t KV, int64_t Dh, bool causal,
                               int64_t window, float *scratch) {
  const AttentionDims d(B, S, H, KV, Dh);
  if (d.empty)
    return;
  float *p = scratch;                         // [t, i1] <= [T, S]
  float *kf = p + d.T * S, *vf = kf + S * Dh; // [S, Dh] each
  float *qf = vf + S * Dh;                    // [T, Dh]: q tile, then out tile
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < KV; ++g) {
      const int64_t kvOff = b * S * d.kStride + g * Dh;
      toFloatBlock(k + kvOff, d.kStride, S, Dh, kf);
      toFloatBlock(v + kvOff, d.kStride, S, Dh, vf);
      for (int64_t h = g * d.group; h < (g + 1) * d.group; ++h)
        for (int64_t i0 = 0; i0 < S; i0 += d.T) {
          const int64_t t = std::min(d.T, S - i0), j0 = attentionFirstKey(i0, causal, window);
          const int64_t n = attentionKeyEnd(i0, t, S, causal) - j0;
          const int64_t qOff = (b * S + i0) * d.qStride + h * Dh;
          toFloatBlock(q + qOff, d.qStride, t, Dh, qf);
          attentionProbs(qf, Dh, kf + j0 * Dh, Dh, i0, j0, t, n, Dh, d.scale, causal, window, p);
          sgemm(CblasNoTrans, CblasNoTrans, t, Dh, n, 1.0f, p, n, vf + j0 * Dh, Dh, 0.0f, qf, Dh);
          fromFloatBlock(qf, t, Dh, nullptr, out + qOff, d.qStride);
        }
    }
}

FSDP_HOT void attentionBackward(const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
                                const bf16 *out, bf16 *dq, bf16 *dk, bf16 *dv, int64_t B, int64_t S,
                                int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                                float *scratch) {
  const AttentionDims d(B, S, H, KV, Dh);
  if (d.empty)
    return;
  float *p = scratch, *ds = p + d.T * S;          // [t, i1] <= [T, S] each
  float *kf = ds + d.T * S, *vf = kf + S * Dh;    // [S, Dh] each
  float *dkf = vf + S * Dh, *dvf = dkf + S * Dh;  // [S, Dh] each
  float *qf = dvf + S * Dh, *dyf = qf + d.T * Dh; // [T, Dh] each; qf then dq
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < KV; ++g) {
      const int64_t kvOff = b * S * d.kStride + g * Dh;
      toFloatBlock(k + kvOff, d.kStride, S, Dh, kf);
      toFloatBlock(v + kvOff, d.kStride, S, Dh, vf);
      std::fill(dkf, dkf + 2 * S * Dh, 0.0f); // dkf and dvf
      for (int64_t h = g * d.group; h < (g + 1) * d.group; ++h)
        for (int64_t i0 = 0; i0 < S; i0 += d.T) {
          const int64_t t = std::min(d.T, S - i0), j0 = attentionFirstKey(i0, causal, window);
          const int64_t n = attentionKeyEnd(i0, t, S, causal) - j0;
          const int64_t qOff = (b * S + i0) * d.qStride + h * Dh, kOff = j0 * Dh;
          toFloatBlock(q + qOff, d.qStride, t, Dh, qf);
          toFloatBlock(dout + qOff, d.qStride, t, Dh, dyf);
          attentionProbs(qf, Dh, kf + kOff, Dh, i0, j0, t, n, Dh, d.scale, causal, window, p);
          attentionBackwardTile(p, ds, qf, Dh, dyf, Dh, out + qOff, d.qStride, kf + kOff, vf + kOff,
                                Dh, dkf + kOff, dvf + kOff, qf, Dh, i0, j0, t, n, Dh, d.scale,
                                causal);
          fromFloatBlock(qf, t, Dh, nullptr, dq + qOff, d.qStride);
        }
      fromFloatBlock(dkf, S, Dh, nullptr, dk + kvOff, d.kStride);
      fromFloatBlock(dvf, S, Dh, nullptr, dv + kvOff, d.kStride);
    }
}

//===----------------------------------------------------------------------===//
// Elementwise, cross-entropy, casts
//===----------------------------------------------------------------------===//

FSDP_HOT void geluForward(const bf16 *x, bf16 *y, int64_t n, bool tanh) {
  geluForwardT(x, y, n, tanh);
}

FSDP_HOT void geluBackward(const bf16 *dy, const bf16 *x, bf16 *dx, int64_t n, bool tanh) {
  geluBackwardT(dy, x, dx, n, tanh);
}

FSDP_HOT void siluMulForward(const bf16 *gate, const bf16 *up, bf16 *y, int64_t n) {
  siluMulForwardT(gate, up, y, n);
}

FSDP_HOT void siluMulBackward(const bf16 *dy, const bf16 *gate, const bf16 *up, bf16 *dgate,
                              bf16 *dup, int64_t n) {
  siluMulBackwardT(dy, gate, up, dgate, dup, n);
}

FSDP_HOT void add(const bf16 *a, const bf16 *b, bf16 *y, int64_t n) { addT(a, b, y, n); }

FSDP_HOT void classTokenForward(const bf16 *x, const bf16 *cls, const bf16 *pos, bf16 *y, int64_t B,
                                int64_t S, int64_t D) {
  classTokenForwardT(x, cls, pos, y, B, S, D);
}
FSDP_HOT void classTokenBackward(const bf16 *dy, bf16 *dx, bf16 *dcls, bf16 *dpos, int64_t B,
                                 int64_t S, int64_t D) {
  classTokenBackwardT(dy, dx, dcls, dpos, B, S, D);
}
FSDP_HOT void firstTokenForward(const bf16 *x, bf16 *y, int64_t B, int64_t S, int64_t D) {
  firstTokenForwardT(x, y, B, S, D);
}
FSDP_HOT void firstTokenBackward(const bf16 *dy, bf16 *dx, int64_t B, int64_t S, int64_t D) {
  firstTokenBackwardT(dy, dx, B, S, D);
}

FSDP_HOT float crossEntropyForward(const bf16 *logits, const int64_t *targets, int64_t n,
                                   int64_t V) {
  return crossEntropyForwardT(logits, targets, n, V);
}

FSDP_HOT void crossEntropyBackward(const bf16 *logits, const int64_t *targets, bf16 *dlogits,
                                   int64_t n, int64_t V, float scale) {
  crossEntropyBackwardT(logits, targets, dlogits, n, V, scale);
}

void toBf16(const float *x, bf16 *out, int64_t n) {
  toBf16(x, reinterpret_cast<uint16_t *>(out), n);
}

void fromBf16(const bf16 *h, float *out, int64_t n) {
  fromBf16(reinterpret_cast<const uint16_t *>(h), out, n);
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

FSDP_HOT void moeRouteForward(const bf16 *logits, bf16 *weights, int64_t *experts, int64_t *slots,
                              int64_t n, int64_t E, int64_t k, bool normalize, float *scratch) {
  moeRouteForwardT(logits, weights, experts, slots, n, E, k, normalize, scratch);
}

FSDP_HOT void moeRouteBackward(const bf16 *dweights, const bf16 *logits, const int64_t *experts,
                               bf16 *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                               float *scratch) {
  moeRouteBackwardT(dweights, logits, experts, dlogits, n, E, k, normalize, scratch);
}

void moePermuteForward(const bf16 *x, const int64_t *slots, bf16 *packed, int64_t n, int64_t k,
                       int64_t D) {
  moePermuteForwardT(x, slots, packed, n, k, D);
}

FSDP_HOT void moePermuteBackward(const bf16 *dpacked, const int64_t *slots, bf16 *dx, int64_t n,
                                 int64_t k, int64_t D) {
  moePermuteBackwardT(dpacked, slots, dx, n, k, D);
}

FSDP_HOT void moeCombineForward(const bf16 *packed, const bf16 *weights, const int64_t *slots,
                                bf16 *y, int64_t n, int64_t k, int64_t D) {
  moeCombineForwardT(packed, weights, slots, y, n, k, D);
}

FSDP_HOT void moeCombineBackward(const bf16 *dy, const bf16 *packed, const bf16 *weights,
                                 const int64_t *slots, bf16 *dpacked, bf16 *dweights, int64_t n,
                                 int64_t k, int64_t D) {
  moeCombineBackwardT(dy, packed, weights, slots, dpacked, dweights, n, k, D);
}

FSDP_HOT void moeAuxLossForward(const float *loss, const bf16 *const *logits, float *out,
                                int64_t layers, int64_t n, int64_t E, int64_t k, double coef,
                                float *scratch) {
  moeAuxLossForwardT(loss, logits, out, layers, n, E, k, coef, scratch);
}

FSDP_HOT void moeAuxLossBackward(const bf16 *const *logits, bf16 *const *dlogits, int64_t layers,
                                 int64_t n, int64_t E, int64_t k, double coef, float lossScale,
                                 float *scratch) {
  moeAuxLossBackwardT(logits, dlogits, layers, n, E, k, coef, lossScale, scratch);
}

// Each expert's rows through the linear kernels (cpu_impl.h).
void moeLinearForward(const bf16 *x, const int64_t *experts, const bf16 *const *w, bf16 *y,
                      int64_t n, int64_t k, int64_t E, int64_t in, int64_t out, float *scratch) {
  moeLinearForwardT(x, experts, w, y, n, k, E, in, out, scratch);
}

void moeLinearBackwardInput(const bf16 *dy, const int64_t *experts, const bf16 *const *w, bf16 *dx,
                            int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                            float *scratch) {
  moeLinearBackwardInputT(dy, experts, w, dx, n, k, E, in, out, scratch);
}

void moeLinearBackwardWeight(const bf16 *dy, const bf16 *x, const int64_t *experts, bf16 *const *dw,
                             int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                             float *scratch) {
  moeLinearBackwardWeightT(dy, x, experts, dw, n, k, E, in, out, scratch);
}

} // namespace fsdp::kernels
