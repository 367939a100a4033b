//===- cuda.h - CUDA kernels, forward and backward, for every nn op -*- C++ -*-===//
//
// The CUDA counterparts of runtime/kernels/cpu.h: the same functions, with the
// same semantics (see the comments there), over device pointers, enqueued on
// a stream; nothing is synchronized and nothing is allocated (scratch comes
// from the caller). Where a CPU kernel returns a value (crossEntropyForward,
// sumOfSquares) the CUDA one writes it to a device scalar instead.
//
// Differences from cpu.h, all in the argument lists:
//   * every function takes a cudaStream_t last; the matmuls
//     (linearForward, linearBackwardInput, linearBackwardWeight) take a
//     cublasHandle_t first (its stream is set to the given one where it
//     differs: cublasSetStream would drop a workspace set on the handle with
//     cublasSetWorkspace, so set the stream before the workspace) and run
//     cublasGemmEx with f32 inputs, outputs and CUBLAS_COMPUTE_32F;
//   * split/concat take a HOST array of DEVICE pointers;
//   * the norm backward passes, cross-entropy forward, sumOfSquares and the
//     attention backward take device scratch, sized by the *Scratch*
//     functions below; the attention forward needs none;
//   * the reductions (dw, db, bias grads, losses, sums of squares) are
//     deterministic: fixed-shape trees in double, no atomics. Only
//     embeddingBackward uses float atomicAdd (order of equal ids varies);
//   * every kernel over activations has a bf16 overload (--compute-dtype
//     bf16; the same name and argument order, kernels::bf16 pointers): it
//     reads bf16, computes in f32 exactly as the f32 kernel does (row
//     statistics, softmax, the loss and the column sums in f32 or double),
//     and rounds what it stores to bf16 once, as cpu.h's bf16 kernels; its
//     matmuls run cublasGemmEx on CUDA_R_16BF operands and result with
//     CUBLAS_COMPUTE_32F (tensor cores, f32 accumulation). The bf16
//     overloads take the f32 ones' scratch (same bounds), and the embedding
//     backward an f32 accumulator (embeddingBackwardBf16ScratchFloats);
//   * a call that CUDA or cuBLAS refuses (a bad launch, an asynchronous error
//     that surfaces, a dimension cuBLAS cannot take) throws Error naming the
//     call; nothing here aborts the process. Errors of a kernel's execution
//     surface at the caller's next synchronization.
//
// Includable from plain C++: the CUDA types are forward-declared exactly as
// cuda_runtime_api.h / cublas_v2.h declare them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_KERNELS_CUDA_H
#define FSDP_RUNTIME_KERNELS_CUDA_H

#include "runtime/kernels/cpu.h"

#include <cstdint>
#include <stdexcept>

typedef struct CUstream_st *cudaStream_t;
typedef struct cublasContext *cublasHandle_t;

namespace fsdp::cuda_kernels {

using kernels::bf16;
using kernels::Layout;
using kernels::RopeScaling;

/// What every function below throws when CUDA or cuBLAS refuses a call.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ids[n] in [0, V); out[n, D] = table[ids[i], :]
void embeddingForward(const int64_t *ids, const float *table, float *out, int64_t n, int64_t D,
                      cudaStream_t stream);
void embeddingForward(const int64_t *ids, const bf16 *table, bf16 *out, int64_t n, int64_t D,
                      cudaStream_t stream);
// dtable[V, D] = sum over i with ids[i] == v of dout[i, :] (zeroed, then atomicAdd)
void embeddingBackward(const float *dout, const int64_t *ids, float *dtable, int64_t n, int64_t V,
                       int64_t D, cudaStream_t stream);
// bf16: the sums go to an f32 [V, D] accumulator in scratch (zeroed, then
// f32 atomicAdd, as above), then dtable = bf16(scratch), rounded once. Not
// deterministic in the last f32 bit (order of equal ids), so neither in the
// rare bf16 rounding that bit decides.
void embeddingBackward(const bf16 *dout, const int64_t *ids, bf16 *dtable, int64_t n, int64_t V,
                       int64_t D, float *scratch, cudaStream_t stream);
// Floats of scratch the bf16 embeddingBackward uses: V * D. Inline, as
// cpu.h's bounds, so that a planner can size scratch without the kernels.
inline int64_t embeddingBackwardBf16ScratchFloats(int64_t V, int64_t D) { return V * D; }

// positions[b, s] = s
void positionIds(int64_t *out, int64_t B, int64_t S, cudaStream_t stream);
// types[b, s] = 0 (BERT's token types of one-segment samples)
void tokenTypeIds(int64_t *out, int64_t B, int64_t S, cudaStream_t stream);

// y[n, out] = x[n, in] W (+ bias[out])
void linearForward(cublasHandle_t handle, const float *x, const float *w, const float *bias,
                   float *y, int64_t n, int64_t in, int64_t out, Layout layout,
                   cudaStream_t stream);
// bf16: y = bf16(x W + bias), the bias added in f32 by the GEMM (beta 1 over
// the broadcast bias), one rounding.
void linearForward(cublasHandle_t handle, const bf16 *x, const bf16 *w, const bf16 *bias, bf16 *y,
                   int64_t n, int64_t in, int64_t out, Layout layout, cudaStream_t stream);
// dx[n, in] = dy[n, out] Wᵀ
void linearBackwardInput(cublasHandle_t handle, const float *dy, const float *w, float *dx,
                         int64_t n, int64_t in, int64_t out, Layout layout, cudaStream_t stream);
void linearBackwardInput(cublasHandle_t handle, const bf16 *dy, const bf16 *w, bf16 *dx, int64_t n,
                         int64_t in, int64_t out, Layout layout, cudaStream_t stream);
// dW (shape of W) = xᵀ dy (in_out) or dyᵀ x (out_in)
void linearBackwardWeight(cublasHandle_t handle, const float *dy, const float *x, float *dw,
                          int64_t n, int64_t in, int64_t out, Layout layout, cudaStream_t stream);
void linearBackwardWeight(cublasHandle_t handle, const bf16 *dy, const bf16 *x, bf16 *dw, int64_t n,
                          int64_t in, int64_t out, Layout layout, cudaStream_t stream);
// db[out] = sum over rows of dy (in double, deterministic)
void biasBackward(const float *dy, float *db, int64_t n, int64_t out, cudaStream_t stream);
void biasBackward(const bf16 *dy, bf16 *db, int64_t n, int64_t out, cudaStream_t stream);

// Floats of scratch layerNormBackward / rmsNormBackward use for n rows (f32
// and bf16: the row statistics are f32 in both).
// Inline, as the other bounds: the planner sizes the plan's scratch with them
// (runtime/Scratch.cpp), and neither it nor the loader links the kernels.
inline int64_t layerNormBackwardScratchFloats(int64_t n) { return 4 * n; }
inline int64_t rmsNormBackwardScratchFloats(int64_t n) { return 2 * n; }

// y = (x - mean) / sqrt(var + eps) * w + b, per row of D (biased variance)
void layerNormForward(const float *x, const float *w, const float *b, float *y, int64_t n,
                      int64_t D, double eps, cudaStream_t stream);
void layerNormForward(const bf16 *x, const bf16 *w, const bf16 *b, bf16 *y, int64_t n, int64_t D,
                      double eps, cudaStream_t stream);
// dx may be dy (in place): dw, db are reduced before dx is written.
void layerNormBackward(const float *dy, const float *x, const float *w, float *dx, float *dw,
                       float *db, int64_t n, int64_t D, double eps, float *scratch,
                       cudaStream_t stream);
void layerNormBackward(const bf16 *dy, const bf16 *x, const bf16 *w, bf16 *dx, bf16 *dw, bf16 *db,
                       int64_t n, int64_t D, double eps, float *scratch, cudaStream_t stream);

// y = x * rsqrt(mean(x^2) + eps) * w, per row of D
void rmsNormForward(const float *x, const float *w, float *y, int64_t n, int64_t D, double eps,
                    cudaStream_t stream);
void rmsNormForward(const bf16 *x, const bf16 *w, bf16 *y, int64_t n, int64_t D, double eps,
                    cudaStream_t stream);
void rmsNormBackward(const float *dy, const float *x, const float *w, float *dx, float *dw,
                     int64_t n, int64_t D, double eps, float *scratch, cudaStream_t stream);
void rmsNormBackward(const bf16 *dy, const bf16 *x, const bf16 *w, bf16 *dx, bf16 *dw, int64_t n,
                     int64_t D, double eps, float *scratch, cudaStream_t stream);

// x, y [B, S, H*Dh]; HF rotate-half RoPE, cos and sin times the scaling's
// attention factor; inverse rotates by the negated angle. inv_freq and the
// factor are computed on the host in float32 exactly as cpu.cpp does.
// scaling (a host pointer) may be null. y may be x.
void rope(const float *x, float *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
          const RopeScaling *scaling, bool inverse, cudaStream_t stream);
void rope(const bf16 *x, bf16 *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
          const RopeScaling *scaling, bool inverse, cudaStream_t stream);

// x [n, parts*W] -> parts outputs [n, W]; concat is the inverse. `outs` /
// `ins` are host arrays of `parts` device pointers.
void split(const float *x, float *const *outs, int64_t parts, int64_t n, int64_t W,
           cudaStream_t stream);
void split(const bf16 *x, bf16 *const *outs, int64_t parts, int64_t n, int64_t W,
           cudaStream_t stream);
void concat(const float *const *ins, float *y, int64_t parts, int64_t n, int64_t W,
            cudaStream_t stream);
void concat(const bf16 *const *ins, bf16 *y, int64_t parts, int64_t n, int64_t W,
            cudaStream_t stream);

// Fused attention (flash-attention style: 32x32 tiles in shared
// memory, online softmax, no S x S matrix). q, out [B, S, H*Dh]; k, v
// [B, S, KV*Dh]; scale 1/sqrt(Dh); query head h reads kv head h / (H / KV).
// Dh <= 256.
//
// bf16: the same kernels over bf16 q, k, v, out (and dout, dq, dk, dv): tiles
// are loaded into shared memory as f32, scores, the online softmax, the
// log-sum-exps and every accumulator are f32 (dk and dv over a kv head's
// whole group, in registers), and each output is rounded once when stored.
// Our own kernels rather than cuDNN's fused attention (cudnnGraph / SDPA,
// installed with the toolkit): the CPU emulator cannot run cuDNN, so its
// kernels would be the one part of the step that CI never checks against
// the CPU's attention; the f32 and bf16 paths stay one template, with the
// same tiles, masking and grouped-query layout; and no workspace or
// per-shape plan to build. cuDNN's kernel is faster (tensor-core MMAs on
// bf16 P and V): a measured win on a GPU would be the reason to add it,
// behind the same entry points, tested on the GPU against these.
// causal: query i sees keys 0..i, and with window > 0 (Mistral's sliding
// window) keys i-window+1..i only; the key tiles wholly outside are skipped.
// Not causal (BERT, ViT): every key (window must be 0).
void attentionForward(const float *q, const float *k, const float *v, float *out, int64_t B,
                      int64_t S, int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                      cudaStream_t stream);
void attentionForward(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *out, int64_t B, int64_t S,
                      int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                      cudaStream_t stream);
// Recomputes the row log-sum-exps (one forward pass without v) and
// D_i = dout_i · out_i into scratch, then dk/dv (one block per kv tile and kv
// head, looping over its query heads: deterministic) and dq (one block per
// query tile). dq, dk, dv overwritten.
void attentionBackward(const float *dout, const float *q, const float *k, const float *v,
                       const float *out, float *dq, float *dk, float *dv, int64_t B, int64_t S,
                       int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                       float *scratch, cudaStream_t stream);
void attentionBackward(const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
                       const bf16 *out, bf16 *dq, bf16 *dk, bf16 *dv, int64_t B, int64_t S,
                       int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                       float *scratch, cudaStream_t stream);
// Floats of scratch attentionBackward uses (f32 and bf16): 2 * B * H * S.
inline int64_t attentionBackwardScratchFloats(int64_t B, int64_t S, int64_t H) {
  return 2 * B * H * S;
}

// GELU, elementwise over n: tanh, the tanh approximation (HF gelu_new); else
// exact, 0.5 x (1 + erf(x / sqrt 2)) (HF gelu)
void geluForward(const float *x, float *y, int64_t n, bool tanh, cudaStream_t stream);
void geluForward(const bf16 *x, bf16 *y, int64_t n, bool tanh, cudaStream_t stream);
void geluBackward(const float *dy, const float *x, float *dx, int64_t n, bool tanh,
                  cudaStream_t stream);
void geluBackward(const bf16 *dy, const bf16 *x, bf16 *dx, int64_t n, bool tanh,
                  cudaStream_t stream);

// y = silu(gate) * up, elementwise
void siluMulForward(const float *gate, const float *up, float *y, int64_t n, cudaStream_t stream);
void siluMulForward(const bf16 *gate, const bf16 *up, bf16 *y, int64_t n, cudaStream_t stream);
void siluMulBackward(const float *dy, const float *gate, const float *up, float *dgate, float *dup,
                     int64_t n, cudaStream_t stream);
void siluMulBackward(const bf16 *dy, const bf16 *gate, const bf16 *up, bf16 *dgate, bf16 *dup,
                     int64_t n, cudaStream_t stream);

// y = a + b elementwise; y may be a or b (in place).
void add(const float *a, const float *b, float *y, int64_t n, cudaStream_t stream);
void add(const bf16 *a, const bf16 *b, bf16 *y, int64_t n, cudaStream_t stream);
// x[r D + j] += bias[j] for r < rows, j < D (tensor parallelism's bias, added
// once after the row-parallel sum).
void addBias(float *x, const float *bias, int64_t rows, int64_t D, cudaStream_t stream);
// dst[i] += float(src[i]) for bf16 src (a bf16 reduction added to f32, as the
// CPU backends' reduceScatterAddBf16 does).
void addBf16Into(float *dst, const uint16_t *src, int64_t n, cudaStream_t stream);

// ViT's class token and first-token selection (cpu.h); dpos and dcls sum
// the batch in float in order, as the CPU kernels do.
void classTokenForward(const float *x, const float *cls, const float *pos, float *y, int64_t B,
                       int64_t S, int64_t D, cudaStream_t stream);
void classTokenForward(const bf16 *x, const bf16 *cls, const bf16 *pos, bf16 *y, int64_t B,
                       int64_t S, int64_t D, cudaStream_t stream);
void classTokenBackward(const float *dy, float *dx, float *dcls, float *dpos, int64_t B, int64_t S,
                        int64_t D, cudaStream_t stream);
void classTokenBackward(const bf16 *dy, bf16 *dx, bf16 *dcls, bf16 *dpos, int64_t B, int64_t S,
                        int64_t D, cudaStream_t stream);
void firstTokenForward(const float *x, float *y, int64_t B, int64_t S, int64_t D,
                       cudaStream_t stream);
void firstTokenForward(const bf16 *x, bf16 *y, int64_t B, int64_t S, int64_t D,
                       cudaStream_t stream);
void firstTokenBackward(const float *dy, float *dx, int64_t B, int64_t S, int64_t D,
                        cudaStream_t stream);
void firstTokenBackward(const bf16 *dy, bf16 *dx, int64_t B, int64_t S, int64_t D,
                        cudaStream_t stream);

// *loss (device) = mean over the n rows of -log softmax(logits[i])[targets[i]]
// (rows whose target is kernels::kIgnoreIndex left out; 0 if all are).
// scratch: n doubles (the per-row losses, then summed by one block).
void crossEntropyForward(const float *logits, const int64_t *targets, float *loss, int64_t n,
                         int64_t V, double *scratch, cudaStream_t stream);
// bf16 logits, the loss f32 (upcast inside; same scratch).
void crossEntropyForward(const bf16 *logits, const int64_t *targets, float *loss, int64_t n,
                         int64_t V, double *scratch, cudaStream_t stream);
// dlogits[i] = (softmax(logits[i]) - onehot(targets[i])) * scale; zeros for
// an ignored row
void crossEntropyBackward(const float *logits, const int64_t *targets, float *dlogits, int64_t n,
                          int64_t V, float scale, cudaStream_t stream);
void crossEntropyBackward(const bf16 *logits, const int64_t *targets, bf16 *dlogits, int64_t n,
                          int64_t V, float scale, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Mixture of experts: cpu.h's "Mixture of experts" kernels, the same
// semantics and rounding points (the softmax in f32 with its sum in double,
// top-k ties to the lower expert, the packed rows by expert then token, the
// k terms of a token summed in f32 in ascending slot order, the aux loss's
// statistics in double), CUDA's expf for cpu.cpp's expf1.
//
// Every row count is known only on the device (the routing is), and nothing
// here reads one on the host: the packed rows' per-expert starts are
// counted into scratch by a kernel, and the kernels after it find their
// rows there (moe_linear: see moeLinearForward).
//
// The arrays of expert weights (E) and of the layers' logits (L) are HOST
// arrays of DEVICE pointers, as Dispatch builds them: each launch takes up to
// kMoePointers of them by value in its parameters (no copy, nothing to order
// against the stream), and more are taken by further launches, so neither E
// nor L has a limit of its own. E is at most kMoeMaxExperts (the per-expert
// counters and each token's probabilities live in shared memory), k at most
// kernels::kMaxTopK as on the CPU, n * k below 2^31; past them a call throws
// Error naming the limit.
//===----------------------------------------------------------------------===//

inline constexpr int64_t kMoePointers = 64;     // expert weights or layers a launch takes
inline constexpr int64_t kMoeMaxExperts = 2048; // E
inline constexpr int64_t kMoeChunk = 256;       // routing pairs a block counts (moe_route)
inline constexpr int64_t kMoeAuxRows = 1024;    // a layer's rows a block sums (moe_aux_loss)

// Scratch floats (4 bytes; the int64 and double parts first: 8-byte aligned
// at a 64-byte aligned scratch). moe_route: each expert's first row (int64
// [E + 1]), then the pairs of each expert before each chunk of kMoeChunk
// pairs (int32 [chunks, E]). moe_linear and its gradients: the row starts
// and the starts of each expert's 64-row tiles (int64 [E + 1] each).
// moe_aux_loss and its gradient: each block's sum of p per expert (double
// [layers * ceil(n / kMoeAuxRows), E]), their total or the gradient's
// per-expert factor (double [E]), the choices' counts (int32 [k, E]).
// moe_route_grad, moe_permute(_grad) and moe_combine(_grad) take none.
inline int64_t moeRouteScratchFloats(int64_t n, int64_t k, int64_t E) {
  const int64_t chunks = (n * k + kMoeChunk - 1) / kMoeChunk;
  return 2 * (E + 1) + chunks * E;
}
inline int64_t moeLinearScratchFloats(int64_t E) { return 4 * (E + 1); }
inline int64_t moeAuxLossScratchFloats(int64_t layers, int64_t n, int64_t E, int64_t k) {
  const int64_t blocks = layers * ((n + kMoeAuxRows - 1) / kMoeAuxRows);
  return 2 * (blocks * E + E) + k * E;
}

// logits [n, E] -> weights [n, k] (storage type), experts, slots [n, k]
// (int64): a warp a token (softmax, top-k by warp reductions), then the
// slots from per-chunk counts (no atomics on the order: the same slots as
// the CPU's, by expert then token).
void moeRouteForward(const float *logits, float *weights, int64_t *experts, int64_t *slots,
                     int64_t n, int64_t E, int64_t k, bool normalize, float *scratch,
                     cudaStream_t stream);
void moeRouteForward(const bf16 *logits, bf16 *weights, int64_t *experts, int64_t *slots, int64_t n,
                     int64_t E, int64_t k, bool normalize, float *scratch, cudaStream_t stream);
// dlogits [n, E] from dweights [n, k]; p recomputed (no scratch: shared memory)
void moeRouteBackward(const float *dweights, const float *logits, const int64_t *experts,
                      float *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                      cudaStream_t stream);
void moeRouteBackward(const bf16 *dweights, const bf16 *logits, const int64_t *experts,
                      bf16 *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                      cudaStream_t stream);
// packed[slots[t, j]] = x[t] (copies); the gradient sums a token's k rows in
// f32 in ascending slot order, as the CPU (the same bits)
void moePermuteForward(const float *x, const int64_t *slots, float *packed, int64_t n, int64_t k,
                       int64_t D, cudaStream_t stream);
void moePermuteForward(const bf16 *x, const int64_t *slots, bf16 *packed, int64_t n, int64_t k,
                       int64_t D, cudaStream_t stream);
void moePermuteBackward(const float *dpacked, const int64_t *slots, float *dx, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream);
void moePermuteBackward(const bf16 *dpacked, const int64_t *slots, bf16 *dx, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream);
// y [n*k, out] = each expert's rows of x [n*k, in] times w[e]ᵀ (w[e] [out,
// in], torch's out_in), w a host array of E device pointers. A grouped GEMM
// of our own (f32 accumulation, tiles of 64 x 64; bf16 read into f32 and the
// result rounded once): the starts are counted on the device and one fixed
// launch covers every row (see cuda.cu). Scratch: moeLinearScratchFloats.
void moeLinearForward(const float *x, const int64_t *experts, const float *const *w, float *y,
                      int64_t n, int64_t k, int64_t E, int64_t in, int64_t out, float *scratch,
                      cudaStream_t stream);
void moeLinearForward(const bf16 *x, const int64_t *experts, const bf16 *const *w, bf16 *y,
                      int64_t n, int64_t k, int64_t E, int64_t in, int64_t out, float *scratch,
                      cudaStream_t stream);
// dx [n*k, in] = each expert's rows of dy [n*k, out] times w[e]
void moeLinearBackwardInput(const float *dy, const int64_t *experts, const float *const *w,
                            float *dx, int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                            float *scratch, cudaStream_t stream);
void moeLinearBackwardInput(const bf16 *dy, const int64_t *experts, const bf16 *const *w, bf16 *dx,
                            int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                            float *scratch, cudaStream_t stream);
// dw[e] = dy[rows of e]ᵀ x[rows of e] (zeros for an expert without rows), dw
// a host array of E device pointers: a block per 64 x 64 tile of a dw[e],
// summing the expert's rows in order (no split over the rows: deterministic).
void moeLinearBackwardWeight(const float *dy, const float *x, const int64_t *experts,
                             float *const *dw, int64_t n, int64_t k, int64_t E, int64_t in,
                             int64_t out, float *scratch, cudaStream_t stream);
void moeLinearBackwardWeight(const bf16 *dy, const bf16 *x, const int64_t *experts, bf16 *const *dw,
                             int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                             float *scratch, cudaStream_t stream);
// y[t] = the f32 sum over j, ascending slot, of weights[t, j] * packed[slots[t,
// j]], each product and sum rounded as cpu_impl.h writes them (its x86-64-v3
// build may fuse them: the same bits only where it does not); the gradient:
// dpacked = weights * dy (one product: the CPU's bits), dweights = the
// double dot product of the row and dy, rounded once (a block's tree).
void moeCombineForward(const float *packed, const float *weights, const int64_t *slots, float *y,
                       int64_t n, int64_t k, int64_t D, cudaStream_t stream);
void moeCombineForward(const bf16 *packed, const bf16 *weights, const int64_t *slots, bf16 *y,
                       int64_t n, int64_t k, int64_t D, cudaStream_t stream);
void moeCombineBackward(const float *dy, const float *packed, const float *weights,
                        const int64_t *slots, float *dpacked, float *dweights, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream);
void moeCombineBackward(const bf16 *dy, const bf16 *packed, const bf16 *weights,
                        const int64_t *slots, bf16 *dpacked, bf16 *dweights, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream);
// *out (device) = *loss (device) + coef * HF's load-balancing loss over
// `layers` router logits [n, E] (logits: a host array of device pointers);
// the counts are integers (atomics: exact), the sums of p fixed trees in
// double. Scratch: moeAuxLossScratchFloats.
void moeAuxLossForward(const float *loss, const float *const *logits, float *out, int64_t layers,
                       int64_t n, int64_t E, int64_t k, double coef, float *scratch,
                       cudaStream_t stream);
void moeAuxLossForward(const float *loss, const bf16 *const *logits, float *out, int64_t layers,
                       int64_t n, int64_t E, int64_t k, double coef, float *scratch,
                       cudaStream_t stream);
// dlogits[l] (host array of device pointers) = the gradient of coef * aux,
// scaled by n * lossScale, as the CPU
void moeAuxLossBackward(const float *const *logits, float *const *dlogits, int64_t layers,
                        int64_t n, int64_t E, int64_t k, double coef, float lossScale,
                        float *scratch, cudaStream_t stream);
void moeAuxLossBackward(const bf16 *const *logits, bf16 *const *dlogits, int64_t layers, int64_t n,
                        int64_t E, int64_t k, double coef, float lossScale, float *scratch,
                        cudaStream_t stream);

// AdamW as cpu.h's adamw (torch.optim.AdamW, decoupled decay, bias
// correction); decay is a device array (may be null: decay everywhere).
void adamw(float *param, const float *grad, float *expAvg, float *expAvgSq, const bool *decay,
           int64_t n, int64_t step, double lr, double beta1, double beta2, double eps,
           double weightDecay, double gradScale, cudaStream_t stream);

// bf16 round to nearest even; NaN stays NaN. toBf16's out may alias x
// (exactly: out == x); other partial overlaps are not supported.
void toBf16(const float *x, uint16_t *out, int64_t n, cudaStream_t stream);
void fromBf16(const uint16_t *h, float *out, int64_t n, cudaStream_t stream);
// The casts between the compute dtypes (cpu.h's bf16 toBf16 / fromBf16).
void toBf16(const float *x, bf16 *out, int64_t n, cudaStream_t stream);
void fromBf16(const bf16 *h, float *out, int64_t n, cudaStream_t stream);
void roundToBf16(const float *x, float *out, int64_t n, cudaStream_t stream);

// *out (device) = sum of squares of x, accumulated in double, deterministic
// (accumulate: *out + that sum). scratch: sumOfSquaresScratchDoubles() doubles.
void sumOfSquares(const float *x, int64_t n, double *out, double *scratch, cudaStream_t stream,
                  bool accumulate = false);
constexpr int64_t sumOfSquaresScratchDoubles() { return 1024; }
// *out (device) = x[0] + ... + x[n-1], one block, a fixed tree (deterministic).
void sumDoubles(const double *x, int64_t n, double *out, cudaStream_t stream);

} // namespace fsdp::cuda_kernels

#endif
