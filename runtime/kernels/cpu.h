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

#include "support/RopeScaling.h"

#include <cstdint>
#include <string>

namespace fsdp::kernels {

// OpenBLAS's work buffers (cpu.cpp): at most blasCallerLimit() threads are
// inside OpenBLAS at once (what its buffer table holds beside its own
// threads). reserveBlasBuffers maps the buffers for `callers` threads at once
// (at most this machine's CPUs and that limit) before a run, each mapping
// tried first, and from then on lets no more in together: "" or why not (an
// address-space limit, with the figures). Called with no thread inside.
int blasCallerLimit();
std::string reserveBlasBuffers(int callers);

enum class Layout { InOut, OutIn }; // weight [in, out] (HF Conv1D) or [out, in] (Linear)

// RoPE's frequency scaling (linear, dynamic, yarn, llama3), as transformers
// computes it; support/RopeScaling.h.
using support::RopeScaling;
using support::RopeScalingKind;

// ids[n] in [0, V); out[n, D] = table[ids[i], :]
void embeddingForward(const int64_t *ids, const float *table, float *out, int64_t n, int64_t D);
// dtable[V, D] = sum over i with ids[i] == v of dout[i, :]
void embeddingBackward(const float *dout, const int64_t *ids, float *dtable, int64_t n, int64_t V,
                       int64_t D);

// positions[b, s] = s
void positionIds(int64_t *out, int64_t B, int64_t S);
// types[b, s] = 0 (BERT's token types of one-segment samples)
void tokenTypeIds(int64_t *out, int64_t B, int64_t S);

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

// RoPE's inverse frequency i (< Dh/2), in float32 as transformers'
// modeling_rope_utils computes it (_compute_default_rope_parameters, or the
// _compute_*_parameters of `scaling`'s kind; dynamic's at sequences of at
// most its original_max_position). Shared by the CUDA kernels.
float ropeInvFreq(int64_t i, int64_t Dh, double theta, const RopeScaling *scaling);
// What cos and sin are multiplied by (transformers' attention_scaling):
// yarn's attention factor in float32, else 1.
float ropeAttentionFactor(const RopeScaling *scaling);

// x, y [B, S, H*Dh]; HF rotate-half RoPE per head at position s, cos and sin
// times ropeAttentionFactor; `inverse` rotates by the negated angle (with the
// same factor: the transpose, so the gradient). scaling may be null.
void rope(const float *x, float *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
          const RopeScaling *scaling, bool inverse);

// x [n, parts*W] -> parts outputs [n, W]; concat is the inverse
void split(const float *x, float *const *outs, int64_t parts, int64_t n, int64_t W);
void concat(const float *const *ins, float *y, int64_t parts, int64_t n, int64_t W);

// q, out [B, S, H*Dh]; k, v [B, S, KV*Dh]; scale 1/sqrt(Dh); query head h
// reads kv head h / (H / KV). causal: query i sees keys 0..i, and with
// window > 0 (Mistral's sliding window) keys i-window+1..i only; not causal
// (BERT, ViT): every key 0..S-1 (window must be 0). Query rows go in tiles
// of T = min(S, 64), each tile's scores and probabilities [T, S] at most
// (never S x S; causal, over the keys the tile sees): scratch is
// attentionScratchFloats(S, false) = T*S floats.
void attentionForward(const float *q, const float *k, const float *v, float *out, int64_t B,
                      int64_t S, int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                      float *scratch);
// Recomputes the probabilities tile by tile. scratch:
// attentionScratchFloats(S, true) = 2*T*S floats. dq, dk, dv overwritten.
void attentionBackward(const float *dout, const float *q, const float *k, const float *v,
                       const float *out, float *dq, float *dk, float *dv, int64_t B, int64_t S,
                       int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                       float *scratch);
// Floats of scratch the attention kernels use for sequence length S, forward
// or backward: T*S or 2*T*S with T = min(S, 64); they write no further. Inline:
// the planner sizes the plan's scratch with it (planner/Buffers.cpp), the
// program loader checks it, and neither links the kernels.
inline constexpr int64_t kAttentionTile = 64;
inline int64_t attentionScratchFloats(int64_t S, bool backward) {
  return (backward ? 2 : 1) * (S < kAttentionTile ? S : kAttentionTile) * S;
}

// GELU, elementwise over n. tanh: the tanh approximation (HF gelu_new,
// torch's approximate="tanh"); else exact, 0.5 x (1 + erf(x / sqrt 2)) (HF
// gelu, torch's approximate="none").
void geluForward(const float *x, float *y, int64_t n, bool tanh);
void geluBackward(const float *dy, const float *x, float *dx, int64_t n, bool tanh);

// y = silu(gate) * up, elementwise
void siluMulForward(const float *gate, const float *up, float *y, int64_t n);
void siluMulBackward(const float *dy, const float *gate, const float *up, float *dgate, float *dup,
                     int64_t n);

void add(const float *a, const float *b, float *y, int64_t n);

// ViT's sequence: x[B, S-1, D] (patches), cls[1, 1, D], pos[1, S, D];
// y[b, 0] = cls + pos[0], y[b, s] = x[b, s-1] + pos[s].
void classTokenForward(const float *x, const float *cls, const float *pos, float *y, int64_t B,
                       int64_t S, int64_t D);
// dx[b, s-1] = dy[b, s]; dpos[s] = sum over b of dy[b, s]; dcls = dpos[0]
void classTokenBackward(const float *dy, float *dx, float *dcls, float *dpos, int64_t B, int64_t S,
                        int64_t D);
// y[B, 1, D] = x[:, 0, :] of x[B, S, D]; dx = dy in row 0, zeros elsewhere
void firstTokenForward(const float *x, float *y, int64_t B, int64_t S, int64_t D);
void firstTokenBackward(const float *dy, float *dx, int64_t B, int64_t S, int64_t D);

// A target that selects nothing (PyTorch's ignore_index): its row counts
// neither in the loss nor in its gradient (masked-LM's unselected tokens).
inline constexpr int64_t kIgnoreIndex = -100;

// Mean over the n rows of -log softmax(logits[i])[targets[i]]; targets in
// [0, V) or kIgnoreIndex: the mean is over the rows not ignored (0 if none).
float crossEntropyForward(const float *logits, const int64_t *targets, int64_t n, int64_t V);
// dlogits[i] = (softmax(logits[i]) - onehot(targets[i])) * scale; zeros
// for an ignored row
void crossEntropyBackward(const float *logits, const int64_t *targets, float *dlogits, int64_t n,
                          int64_t V, float scale);

//===----------------------------------------------------------------------===//
// Mixture of experts (the nn.moe_* ops; docs/program-format.md)
//===----------------------------------------------------------------------===//
//
// n tokens, E experts, k choices per token; the packed buffer holds the k*n
// (token, choice) pairs' rows sorted by expert, expert e's rows starting
// after those of experts 0..e-1 (counted from `experts`). Index tensors are
// int64. Scratch: moeScratchFloats.

// The largest k the kernels take (their per-token order lives on the stack).
inline constexpr int64_t kMaxTopK = 64;

// Scratch floats of the MoE kernels: the router's softmax row and per-expert
// counts (int64, two floats each), the aux loss's counts and sums (double),
// moe_linear's row offsets (int64) followed, 64-byte aligned, by bf16's
// linear scratch (bf16 storage only).
inline int64_t moeRouteScratchFloats(int64_t E) { return E + 2 * (E + 1); }
inline int64_t moeAuxLossScratchFloats(int64_t E, int64_t k) { return 2 * (k + 1) * E + E; }
inline int64_t moeOffsetsFloats(int64_t E) { return (2 * (E + 1) + 15) / 16 * 16; }

// logits[n, E] -> weights[n, k] (p = softmax in f32, the k largest, ties to
// the lower expert, descending; divided by their sum when normalize),
// experts[n, k], slots[n, k] (the pair's packed row: by expert, then token).
void moeRouteForward(const float *logits, float *weights, int64_t *experts, int64_t *slots,
                     int64_t n, int64_t E, int64_t k, bool normalize, float *scratch);
// dlogits[n, E] from dweights[n, k], p recomputed from logits
void moeRouteBackward(const float *dweights, const float *logits, const int64_t *experts,
                      float *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                      float *scratch);
// packed[slots[t, j]] = x[t]; the gradient sums a token's k rows in
// ascending slot order, in f32
void moePermuteForward(const float *x, const int64_t *slots, float *packed, int64_t n, int64_t k,
                       int64_t D);
void moePermuteBackward(const float *dpacked, const int64_t *slots, float *dx, int64_t n, int64_t k,
                        int64_t D);
// y[rows of e, out] = x[rows of e, in] w[e]ᵀ, w[e] [out, in]; n tokens
void moeLinearForward(const float *x, const int64_t *experts, const float *const *w, float *y,
                      int64_t n, int64_t k, int64_t E, int64_t in, int64_t out, float *scratch);
void moeLinearBackwardInput(const float *dy, const int64_t *experts, const float *const *w,
                            float *dx, int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                            float *scratch);
// dw[e] = dy[rows of e]ᵀ x[rows of e]; zeros for an expert with no rows
void moeLinearBackwardWeight(const float *dy, const float *x, const int64_t *experts,
                             float *const *dw, int64_t n, int64_t k, int64_t E, int64_t in,
                             int64_t out, float *scratch);
// y[t] = sum over j, ascending slot, of weights[t, j] * packed[slots[t, j]]
// (in f32); the gradient: dpacked[slots[t, j]] = weights[t, j] * dy[t],
// dweights[t, j] = packed[slots[t, j]] . dy[t]
void moeCombineForward(const float *packed, const float *weights, const int64_t *slots, float *y,
                       int64_t n, int64_t k, int64_t D);
void moeCombineBackward(const float *dy, const float *packed, const float *weights,
                        const int64_t *slots, float *dpacked, float *dweights, int64_t n, int64_t k,
                        int64_t D);
// out = loss + coef * aux over `layers` router logits [n, E] (HF's
// load_balancing_loss_func); the gradient of coef * aux scaled by
// n * lossScale (the micro-batch's share of the step's loss)
void moeAuxLossForward(const float *loss, const float *const *logits, float *out, int64_t layers,
                       int64_t n, int64_t E, int64_t k, double coef, float *scratch);
void moeAuxLossBackward(const float *const *logits, float *const *dlogits, int64_t layers,
                        int64_t n, int64_t E, int64_t k, double coef, float lossScale,
                        float *scratch);

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
// dst[i] += float(h[i]): bf16 gradients added to an f32 sum (cuda.h's
// addBf16Into)
void addBf16Into(float *dst, const uint16_t *h, int64_t n);

//===----------------------------------------------------------------------===//
// bf16 storage (--compute-dtype bf16): the same ops over bf16 tensors
//===----------------------------------------------------------------------===//
//
// Each reads bf16, computes in f32 and rounds what it stores to bf16 (round
// to nearest even) once: matmuls multiply f32 copies of the bf16 operands and
// accumulate in f32 (OpenBLAS sgemm on converted panels), norm statistics,
// softmax and the loss are f32, sums over rows (weight, bias and embedding
// gradients) accumulate in f32 and are rounded once at the end. Same
// semantics and argument order as the f32 kernels above; where a kernel needs
// memory beyond its operands it takes `scratch` last (from the plan's arena,
// 64-byte aligned), sized by the *Bf16ScratchFloats function beside it, which
// is inline so that the planner sizes the plan's scratch with it and the
// program loader checks it without linking the kernels. None allocates.

/// A bf16 value: the top half of an f32 (the storage type of bf16 tensors).
struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2, "bf16 is two bytes");

void embeddingForward(const int64_t *ids, const bf16 *table, bf16 *out, int64_t n, int64_t D);
void embeddingBackward(const bf16 *dout, const int64_t *ids, bf16 *dtable, int64_t n, int64_t V,
                       int64_t D, float *scratch);
// A counting sort of the rows by id (V + 1 + n int64 counts and indices,
// two floats each) and one f32 row accumulator.
inline int64_t embeddingBackwardBf16ScratchFloats(int64_t n, int64_t V, int64_t D) {
  return 2 * (V + 1 + n) + D;
}

void linearForward(const bf16 *x, const bf16 *w, const bf16 *bias, bf16 *y, int64_t n, int64_t in,
                   int64_t out, Layout layout, float *scratch);
void linearBackwardInput(const bf16 *dy, const bf16 *w, bf16 *dx, int64_t n, int64_t in,
                         int64_t out, Layout layout, float *scratch);
void linearBackwardWeight(const bf16 *dy, const bf16 *x, bf16 *dw, int64_t n, int64_t in,
                          int64_t out, Layout layout, float *scratch);
// Tiles of the result of kBf16Panel x kBf16Panel accumulate in f32 over
// chunks of the contraction of at most linearBf16PanelDepth(in, out) =
// max(in, out, kBf16Panel) (one chunk forward and for the input gradient;
// rows of n for the weight gradient); scratch: the chunk's f32 copies of
// kBf16Panel rows of one operand and kBf16Panel columns of the other, and the
// tile. One bound for the three linear kernels.
inline constexpr int64_t kBf16Panel = 256;
inline int64_t linearBf16PanelDepth(int64_t in, int64_t out) {
  int64_t k = in > out ? in : out;
  return k < kBf16Panel ? kBf16Panel : k;
}
inline int64_t linearBf16ScratchFloats(int64_t n, int64_t in, int64_t out) {
  (void)n;
  return 2 * kBf16Panel * linearBf16PanelDepth(in, out) + kBf16Panel * kBf16Panel;
}
// scratch is not used (the column sums are double, on the stack): the bound
// is 0 and scratch may be null. The parameter stays for the executor's one
// calling convention.
void biasBackward(const bf16 *dy, bf16 *db, int64_t n, int64_t out, float *scratch);
inline int64_t biasBackwardBf16ScratchFloats(int64_t n, int64_t out) {
  (void)n;
  (void)out;
  return 0;
}

void layerNormForward(const bf16 *x, const bf16 *w, const bf16 *b, bf16 *y, int64_t n, int64_t D,
                      double eps);
void layerNormBackward(const bf16 *dy, const bf16 *x, const bf16 *w, bf16 *dx, bf16 *dw, bf16 *db,
                       int64_t n, int64_t D, double eps, float *scratch);
void rmsNormForward(const bf16 *x, const bf16 *w, bf16 *y, int64_t n, int64_t D, double eps);
void rmsNormBackward(const bf16 *dy, const bf16 *x, const bf16 *w, bf16 *dx, bf16 *dw, int64_t n,
                     int64_t D, double eps, float *scratch);
// The f32 sums of dw and db over the rows (rms norm: dw only): one bound for
// both norm backward kernels.
inline int64_t normBackwardBf16ScratchFloats(int64_t n, int64_t D) {
  (void)n;
  return 2 * D;
}

void rope(const bf16 *x, bf16 *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
          const RopeScaling *scaling, bool inverse);
void split(const bf16 *x, bf16 *const *outs, int64_t parts, int64_t n, int64_t W);
void concat(const bf16 *const *ins, bf16 *y, int64_t parts, int64_t n, int64_t W);

void attentionForward(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *out, int64_t B, int64_t S,
                      int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                      float *scratch);
void attentionBackward(const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
                       const bf16 *out, bf16 *dq, bf16 *dk, bf16 *dv, int64_t B, int64_t S,
                       int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                       float *scratch);
// The f32 kernels' tiles (attentionScratchFloats: T*S forward, 2*T*S
// backward, T = min(S, 64)), plus f32 copies of one kv head's k and v over
// the sequence (2*S*Dh) and of a query tile's q, which then holds its output
// (T*Dh); backward also that kv head's f32 dk and dv sums (2*S*Dh) and the
// tile's dout (T*Dh).
inline int64_t attentionBf16ScratchFloats(int64_t S, int64_t H, int64_t KV, int64_t Dh,
                                          bool backward) {
  (void)H;
  (void)KV;
  const int64_t t = S < kAttentionTile ? S : kAttentionTile;
  return backward ? 2 * t * S + 4 * S * Dh + 2 * t * Dh : t * S + 2 * S * Dh + t * Dh;
}

void geluForward(const bf16 *x, bf16 *y, int64_t n, bool tanh);
void geluBackward(const bf16 *dy, const bf16 *x, bf16 *dx, int64_t n, bool tanh);
void siluMulForward(const bf16 *gate, const bf16 *up, bf16 *y, int64_t n);
void siluMulBackward(const bf16 *dy, const bf16 *gate, const bf16 *up, bf16 *dgate, bf16 *dup,
                     int64_t n);
void add(const bf16 *a, const bf16 *b, bf16 *y, int64_t n);

void classTokenForward(const bf16 *x, const bf16 *cls, const bf16 *pos, bf16 *y, int64_t B,
                       int64_t S, int64_t D);
void classTokenBackward(const bf16 *dy, bf16 *dx, bf16 *dcls, bf16 *dpos, int64_t B, int64_t S,
                        int64_t D);
void firstTokenForward(const bf16 *x, bf16 *y, int64_t B, int64_t S, int64_t D);
void firstTokenBackward(const bf16 *dy, bf16 *dx, int64_t B, int64_t S, int64_t D);

// logits bf16, the loss f32 (upcast inside)
float crossEntropyForward(const bf16 *logits, const int64_t *targets, int64_t n, int64_t V);
void crossEntropyBackward(const bf16 *logits, const int64_t *targets, bf16 *dlogits, int64_t n,
                          int64_t V, float scale);

// Mixture of experts over bf16 tensors: as above; routing and the aux loss
// in f32, weights and gradients rounded once; moe_linear's scratch is
// moeOffsetsFloats(E) + linearBf16ScratchFloats.
void moeRouteForward(const bf16 *logits, bf16 *weights, int64_t *experts, int64_t *slots, int64_t n,
                     int64_t E, int64_t k, bool normalize, float *scratch);
void moeRouteBackward(const bf16 *dweights, const bf16 *logits, const int64_t *experts,
                      bf16 *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                      float *scratch);
void moePermuteForward(const bf16 *x, const int64_t *slots, bf16 *packed, int64_t n, int64_t k,
                       int64_t D);
void moePermuteBackward(const bf16 *dpacked, const int64_t *slots, bf16 *dx, int64_t n, int64_t k,
                        int64_t D);
void moeLinearForward(const bf16 *x, const int64_t *experts, const bf16 *const *w, bf16 *y,
                      int64_t n, int64_t k, int64_t E, int64_t in, int64_t out, float *scratch);
void moeLinearBackwardInput(const bf16 *dy, const int64_t *experts, const bf16 *const *w, bf16 *dx,
                            int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                            float *scratch);
void moeLinearBackwardWeight(const bf16 *dy, const bf16 *x, const int64_t *experts, bf16 *const *dw,
                             int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                             float *scratch);
void moeCombineForward(const bf16 *packed, const bf16 *weights, const int64_t *slots, bf16 *y,
                       int64_t n, int64_t k, int64_t D);
void moeCombineBackward(const bf16 *dy, const bf16 *packed, const bf16 *weights,
                        const int64_t *slots, bf16 *dpacked, bf16 *dweights, int64_t n, int64_t k,
                        int64_t D);
void moeAuxLossForward(const float *loss, const bf16 *const *logits, float *out, int64_t layers,
                       int64_t n, int64_t E, int64_t k, double coef, float *scratch);
void moeAuxLossBackward(const bf16 *const *logits, bf16 *const *dlogits, int64_t layers, int64_t n,
                        int64_t E, int64_t k, double coef, float lossScale, float *scratch);

// Casts between the dtypes: out[i] = bf16(x[i]) / float(h[i]).
void toBf16(const float *x, bf16 *out, int64_t n);
void fromBf16(const bf16 *h, float *out, int64_t n);

// Sum of squares, accumulated in double.
double sumOfSquares(const float *x, int64_t n);

} // namespace fsdp::kernels

#endif
