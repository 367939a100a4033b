//===- cpu.h - CPU kernels, forward and backward, for every nn op -*- C++ -*-===//
//
// Plain functions over contiguous row-major buffers; no allocation (scratch
// comes from the caller's arena). Shapes in the comments: n = rows = B*S,
// B batch, S sequence, D width, V vocabulary, H heads, KV key/value heads,
// Dh head dimension. Every output is overwritten, never accumulated into.
// Matmuls go through OpenBLAS cblas_sgemm.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_KERNELS_CPU_H
#define FSDP_RUNTIME_KERNELS_CPU_H

#include <cstdint>

namespace fsdp::kernels {

enum class Layout { InOut, OutIn }; // weight [in, out] (HF Conv1D) or [out, in] (Linear)

struct Llama3Scaling {
  double factor, lowFreqFactor, highFreqFactor;
  int64_t originalMaxPosition;
};

// ids[n] in [0, V); out[n, D] = table[ids[i], :]
void embeddingForward(const int64_t *ids, const float *table, float *out, int64_t n, int64_t D);
// dtable[V, D] = sum over i with ids[i] == v of dout[i, :]
void embeddingBackward(const float *dout, const int64_t *ids, float *dtable, int64_t n, int64_t V,
                       int64_t D);

// positions[b, s] = s
void positionIds(int64_t *out, int64_t B, int64_t S);

// y[n, out] = x[n, in] W (+ bias[out])
void linearForward(const float *x, const float *w, const float *bias, float *y, int64_t n,
                   int64_t in, int64_t out, Layout layout);
// dx[n, in] = dy[n, out] Wᵀ
void linearBackwardInput(const float *dy, const float *w, float *dx, int64_t n, int64_t in,
                         int64_t out, Layout layout);
// dW (shape of W) = xᵀ dy (in_out) or dyᵀ x (out_in)
void linearBackwardWeight(const float *dy, const float *x, float *dw, int64_t n, int64_t in,
                          int64_t out, Layout layout);
// db[out] = sum over rows of dy
void biasBackward(const float *dy, float *db, int64_t n, int64_t out);

// y = (x - mean) / sqrt(var + eps) * w + b, per row of D (biased variance)
void layerNormForward(const float *x, const float *w, const float *b, float *y, int64_t n,
                      int64_t D, double eps);
void layerNormBackward(const float *dy, const float *x, const float *w, float *dx, float *dw,
                       float *db, int64_t n, int64_t D, double eps);

// y = x * rsqrt(mean(x^2) + eps) * w, per row of D
void rmsNormForward(const float *x, const float *w, float *y, int64_t n, int64_t D, double eps);
void rmsNormBackward(const float *dy, const float *x, const float *w, float *dx, float *dw,
                     int64_t n, int64_t D, double eps);

// RoPE's inverse frequency i (< Dh/2), in float32 as HF computes it, with
// Llama 3's rescaling when `scaling` is given. Shared by the CUDA kernels.
float ropeInvFreq(int64_t i, int64_t Dh, double theta, const Llama3Scaling *scaling);

// x, y [B, S, H*Dh]; HF rotate-half RoPE per head at position s; `inverse`
// rotates by the negated angle (the gradient). scaling may be null.
void rope(const float *x, float *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
          const Llama3Scaling *scaling, bool inverse);

// x [n, parts*W] -> parts outputs [n, W]; concat is the inverse
void split(const float *x, float *const *outs, int64_t parts, int64_t n, int64_t W);
void concat(const float *const *ins, float *y, int64_t parts, int64_t n, int64_t W);

// q, out [B, S, H*Dh]; k, v [B, S, KV*Dh]; causal; scale 1/sqrt(Dh); query head h
// reads kv head h / (H / KV). Query rows go in tiles of T = min(S, 64), each
// tile's scores and probabilities [T, S] at most (never S x S): scratch is
// causalAttentionScratchFloats(S, false) = T*S floats.
void causalAttentionForward(const float *q, const float *k, const float *v, float *out, int64_t B,
                            int64_t S, int64_t H, int64_t KV, int64_t Dh, float *scratch);
// Recomputes the probabilities tile by tile. scratch:
// causalAttentionScratchFloats(S, true) = 2*T*S floats. dq, dk, dv overwritten.
void causalAttentionBackward(const float *dout, const float *q, const float *k, const float *v,
                             const float *out, float *dq, float *dk, float *dv, int64_t B,
                             int64_t S, int64_t H, int64_t KV, int64_t Dh, float *scratch);
// Floats of scratch the attention kernels use for sequence length S, forward
// or backward: T*S or 2*T*S with T = min(S, 64); they write no further. Inline:
// the planner sizes the plan's scratch with it (planner/Buffers.cpp), the
// program loader checks it, and neither links the kernels.
inline constexpr int64_t kAttentionTile = 64;
inline int64_t causalAttentionScratchFloats(int64_t S, bool backward) {
  return (backward ? 2 : 1) * (S < kAttentionTile ? S : kAttentionTile) * S;
}

// GELU, tanh approximation (HF gelu_new), elementwise over n
void geluForward(const float *x, float *y, int64_t n);
void geluBackward(const float *dy, const float *x, float *dx, int64_t n);

// y = silu(gate) * up, elementwise
void siluMulForward(const float *gate, const float *up, float *y, int64_t n);
void siluMulBackward(const float *dy, const float *gate, const float *up, float *dgate, float *dup,
                     int64_t n);

void add(const float *a, const float *b, float *y, int64_t n);

// Mean over the n rows of -log softmax(logits[i])[targets[i]]; targets in [0, V).
float crossEntropyForward(const float *logits, const int64_t *targets, int64_t n, int64_t V);
// dlogits[i] = (softmax(logits[i]) - onehot(targets[i])) * scale
void crossEntropyBackward(const float *logits, const int64_t *targets, float *dlogits, int64_t n,
                          int64_t V, float scale);

// AdamW as torch.optim.AdamW (decoupled decay p -= lr*wd*p, bias correction),
// over n elements; decay[i] false skips the decay for element i (may be null:
// decay everywhere). step is 1-based.
void adamw(float *param, const float *grad, float *expAvg, float *expAvgSq, const bool *decay,
           int64_t n, int64_t step, double lr, double beta1, double beta2, double eps,
           double weightDecay, double gradScale);

// bf16 (the top half of an f32), rounded to nearest even; NaN stays NaN.
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return (uint16_t)(bits >> 16);
}
inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
// out[i] = bf16(x[i]); out may alias x (front to back, it never overtakes).
void toBf16(const float *x, uint16_t *out, int64_t n);
// out[i] = float(h[i])
void fromBf16(const uint16_t *h, float *out, int64_t n);
// out[i] = float(bf16(x[i])): what a bf16 copy of x would hold
void roundToBf16(const float *x, float *out, int64_t n);

// Sum of squares, accumulated in double.
double sumOfSquares(const float *x, int64_t n);

} // namespace fsdp::kernels

#endif
