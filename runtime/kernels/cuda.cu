//===- cuda.cu - CUDA kernels, forward and backward, for every nn op -----===//
//
// See cuda.h. Elementwise formulas as cpu.cpp (expf/tanhf from CUDA's libm,
// ~1-2 ulp, instead of cpu.cpp's polynomials); row statistics in double with
// block reductions; matmuls through cuBLAS (f32 or bf16 operands,
// CUBLAS_COMPUTE_32F). Each kernel over activations is one template over its
// storage type (float or bf16: load/store below), instantiated for both.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fsdp::cuda_kernels {

namespace {

// A refused call throws cuda_kernels::Error naming the call (the caller, which
// knows the instruction, reports it); nothing here aborts the process.
[[noreturn]] void throwError(const char *expr, const char *why) {
  std::string call(expr);
  size_t paren = call.find('(');
  if (paren != std::string::npos)
    call.resize(paren);
  throw Error(call + ": " + why);
}

#define FSDP_CUDA_CHECK(expr)                                                                      \
  do {                                                                                             \
    cudaError_t err_ = (expr);                                                                     \
    if (err_ != cudaSuccess)                                                                       \
      throwError(#expr, cudaGetErrorString(err_));                                                 \
  } while (0)

#define FSDP_CUBLAS_CHECK(expr)                                                                    \
  do {                                                                                             \
    cublasStatus_t st_ = (expr);                                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                              \
      throwError(#expr, cublasGetStatusString(st_));                                               \
  } while (0)

// Launch errors (bad configuration) surface here; execution errors surface
// at the caller's next synchronization.
#define FSDP_LAUNCH_CHECK()                                                                        \
  do {                                                                                             \
    cudaError_t err_ = cudaGetLastError();                                                         \
    if (err_ != cudaSuccess)                                                                       \
      throwError("kernel launch", cudaGetErrorString(err_));                                       \
  } while (0)

// Launches and shared memory go through these macros so that the kernels also
// compile as host C++ under the CPU emulator of tests/cuda-emu (which defines
// them first and runs each launch's real grid, block and shared-memory size).
#ifndef FSDP_LAUNCH
#define FSDP_LAUNCH(kernel, grid, block, shmem, stream, ...)                                       \
  kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#endif
#ifndef FSDP_SHARED
#define FSDP_SHARED(type, name, dims) __shared__ type name dims
#endif
#ifndef FSDP_DYNAMIC_SHARED
#define FSDP_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

constexpr int kThreads = 256;
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;
constexpr float kSqrtHalf = 0.7071067811865476f;   // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f; // 1 / sqrt(2 pi)

inline unsigned gridFor(int64_t n, int64_t perBlock = kThreads) {
  int64_t g = (n + perBlock - 1) / perBlock;
  return unsigned(std::min<int64_t>(std::max<int64_t>(g, 1), 65535LL * 32));
}

// CUDA's grid limits: x up to 2^31 - 1 blocks, y and z up to 65535. The
// kernels that take a block a row (norms, cross-entropy) or a (batch, head)
// in grid.y (attention) are refused past them, naming the call, rather than
// left to a launch error or to a truncated grid that skips rows.
constexpr int64_t kMaxGridX = 0x7fffffff, kMaxGridY = 65535;
inline unsigned rowGrid(int64_t rows, const char *call) {
  if (rows > kMaxGridX)
    throw Error(std::string(call) + ": " + std::to_string(rows) +
                " rows, a block each, over CUDA's 2^31 - 1 blocks");
  return unsigned(rows);
}

// Grid-stride loop over [0, n).
#define FSDP_GRID_LOOP(i, n)                                                                       \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                        \
       i += int64_t(blockDim.x) * gridDim.x)

// Sum over the block (blockDim.x a multiple of 32, <= 1024); the result is
// returned to every thread. `shm` holds 32 values. Fixed tree: deterministic.
template <class T> __device__ T blockSum(T v, T *shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads(); // shm may still be read by a previous call
  if (lane == 0)
    shm[warp] = v;
  __syncthreads();
  T r = lane < nw ? shm[lane] : T(0);
  if (warp == 0) {
    for (int o = 16; o > 0; o >>= 1)
      r += __shfl_down_sync(0xffffffffu, r, o);
    if (lane == 0)
      shm[0] = r;
  }
  __syncthreads();
  return shm[0];
}

__device__ float blockMax(float v, float *shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0)
    shm[warp] = v;
  __syncthreads();
  float r = lane < nw ? shm[lane] : -INFINITY;
  if (warp == 0) {
    for (int o = 16; o > 0; o >>= 1)
      r = fmaxf(r, __shfl_down_sync(0xffffffffu, r, o));
    if (lane == 0)
      shm[0] = r;
  }
  __syncthreads();
  return shm[0];
}

//===----------------------------------------------------------------------===//
// Storage types. A kernel over activations is a template over T, float or
// bf16 (--compute-dtype bf16): it reads through load, computes in f32 (or
// double), and writes through store, which rounds to bf16 once (nearest even;
// NaN stays NaN, as cpu.h's floatToBf16).
//===----------------------------------------------------------------------===//

__device__ inline uint16_t toBf16Dev(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}

__device__ inline float fromBf16Dev(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

__device__ inline float load(float v) { return v; }
__device__ inline float load(bf16 v) { return fromBf16Dev(v.bits); }
__device__ inline void store(float &dst, float v) { dst = v; }
__device__ inline void store(bf16 &dst, float v) { dst.bits = toBf16Dev(v); }

//===----------------------------------------------------------------------===//
// Embedding, positions, split/concat
//===----------------------------------------------------------------------===//

template <class T>
__global__ void embeddingForwardKernel(const int64_t *ids, const T *table, T *out, int64_t n,
                                       int64_t D) {
  FSDP_GRID_LOOP(e, n * D) {
    const int64_t i = e / D, c = e - i * D;
    out[e] = table[ids[i] * D + c];
  }
}

// dtable is f32: the table itself, or a bf16 table's f32 accumulator.
template <class T>
__global__ void embeddingBackwardKernel(const T *dout, const int64_t *ids, float *dtable, int64_t n,
                                        int64_t D) {
  FSDP_GRID_LOOP(e, n * D) {
    const int64_t i = e / D, c = e - i * D;
    atomicAdd(dtable + ids[i] * D + c, load(dout[e]));
  }
}

__global__ void positionIdsKernel(int64_t *out, int64_t B, int64_t S) {
  FSDP_GRID_LOOP(e, B * S) { out[e] = e % S; }
}

__global__ void tokenTypeIdsKernel(int64_t *out, int64_t n) {
  FSDP_GRID_LOOP(e, n) { out[e] = 0; }
}

//===----------------------------------------------------------------------===//
// Column sums (bias grads, norm weight grads): a block per 32 columns, 8 row
// lanes each summing a strided set of rows in double, then a fixed tree.
//===----------------------------------------------------------------------===//

// Generic column reducer: value(i, c) summed over rows i, for up to two
// outputs. Mode 0: dy (bias). Mode 1: layer norm (dw += dy * xhat, db += dy).
// Mode 2: rms norm (dw += dy * x * rstd).
template <int Mode, class T>
__global__ void columnSumKernel(const T *dy, const T *x, const float *stats, T *out0, T *out1,
                                int64_t n, int64_t D, int statStride) {
  FSDP_SHARED(double, s0, [8][33]);
  FSDP_SHARED(double, s1, [8][33]);
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t c = int64_t(blockIdx.x) * 32 + tx;
  double a0 = 0, a1 = 0;
  if (c < D) {
    for (int64_t i = ty; i < n; i += 8) {
      const float g = load(dy[i * D + c]);
      if (Mode == 0) {
        a0 += double(g);
      } else if (Mode == 1) {
        const float mean = stats[i * statStride], rstd = stats[i * statStride + 1];
        const float xhat = (load(x[i * D + c]) - mean) * rstd;
        a0 += double(g * xhat);
        a1 += double(g);
      } else {
        const float rstd = stats[i * statStride];
        a0 += double(g * (load(x[i * D + c]) * rstd));
      }
    }
  }
  s0[ty][tx] = a0;
  s1[ty][tx] = a1;
  __syncthreads();
  if (ty == 0 && c < D) {
    double r0 = ((s0[0][tx] + s0[4][tx]) + (s0[1][tx] + s0[5][tx])) +
                ((s0[2][tx] + s0[6][tx]) + (s0[3][tx] + s0[7][tx]));
    store(out0[c], float(r0));
    if (Mode == 1) {
      double r1 = ((s1[0][tx] + s1[4][tx]) + (s1[1][tx] + s1[5][tx])) +
                  ((s1[2][tx] + s1[6][tx]) + (s1[3][tx] + s1[7][tx]));
      store(out1[c], float(r1));
    }
  }
}

//===----------------------------------------------------------------------===//
// Norms: a block per row
//===----------------------------------------------------------------------===//

template <class T>
__device__ void rowMoments(const T *xr, int64_t D, double eps, double *shm, double &mean,
                           double &rstd) {
  double s = 0;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
    s += double(load(xr[c]));
  const double m = blockSum(s, shm) / double(D);
  double v = 0;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    const double d = double(load(xr[c])) - m;
    v += d * d;
  }
  const double var = blockSum(v, shm) / double(D);
  mean = m;
  rstd = 1.0 / sqrt(var + eps);
}

template <class T>
__global__ void layerNormForwardKernel(const T *x, const T *w, const T *b, T *y, int64_t D,
                                       double eps) {
  FSDP_SHARED(double, shm, [32]);
  const int64_t i = blockIdx.x;
  const T *xr = x + i * D;
  T *yr = y + i * D;
  double mean, rstd;
  rowMoments(xr, D, eps, shm, mean, rstd);
  const float m = float(mean), r = float(rstd);
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
    store(yr[c],
          __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(load(xr[c]), m), r), load(w[c])), load(b[c])));
}

// stats[i] = {mean, rstd, mean(g), mean(g * xhat)} with g = dy * w.
template <class T>
__global__ void layerNormStatsKernel(const T *dy, const T *x, const T *w, float *stats, int64_t D,
                                     double eps) {
  FSDP_SHARED(double, shm, [32]);
  const int64_t i = blockIdx.x;
  const T *xr = x + i * D, *gr = dy + i * D;
  double mean, rstd;
  rowMoments(xr, D, eps, shm, mean, rstd);
  double sg = 0, sgx = 0;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    const double g = double(load(gr[c])) * double(load(w[c]));
    sg += g;
    sgx += g * ((double(load(xr[c])) - mean) * rstd);
  }
  sg = blockSum(sg, shm);
  sgx = blockSum(sgx, shm);
  if (threadIdx.x == 0) {
    stats[4 * i] = float(mean);
    stats[4 * i + 1] = float(rstd);
    stats[4 * i + 2] = float(sg / double(D));
    stats[4 * i + 3] = float(sgx / double(D));
  }
}

template <class T>
__global__ void layerNormDxKernel(const T *dy, const T *x, const T *w, const float *stats, T *dx,
                                  int64_t n, int64_t D) {
  FSDP_GRID_LOOP(e, n * D) {
    const int64_t i = e / D, c = e - i * D;
    const float mean = stats[4 * i], rstd = stats[4 * i + 1], mg = stats[4 * i + 2],
                mgx = stats[4 * i + 3];
    const float xhat = __fmul_rn(__fsub_rn(load(x[e]), mean), rstd);
    const float g = __fmul_rn(load(dy[e]), load(w[c]));
    store(dx[e], __fmul_rn(rstd, __fsub_rn(__fsub_rn(g, mg), __fmul_rn(xhat, mgx))));
  }
}

template <class T>
__global__ void rmsNormForwardKernel(const T *x, const T *w, T *y, int64_t D, double eps) {
  FSDP_SHARED(double, shm, [32]);
  const int64_t i = blockIdx.x;
  const T *xr = x + i * D;
  T *yr = y + i * D;
  double s = 0;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
    s += double(load(xr[c])) * double(load(xr[c]));
  const float r = float(1.0 / sqrt(blockSum(s, shm) / double(D) + eps));
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
    store(yr[c], __fmul_rn(load(w[c]), __fmul_rn(load(xr[c]), r)));
}

// stats[i] = {rstd, k = rstd^3 * mean(g * x)}
template <class T>
__global__ void rmsNormStatsKernel(const T *dy, const T *x, const T *w, float *stats, int64_t D,
                                   double eps) {
  FSDP_SHARED(double, shm, [32]);
  const int64_t i = blockIdx.x;
  const T *xr = x + i * D, *gr = dy + i * D;
  double s = 0, sgx = 0;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    const double xv = load(xr[c]);
    s += xv * xv;
    sgx += double(load(gr[c])) * double(load(w[c])) * xv;
  }
  s = blockSum(s, shm);
  sgx = blockSum(sgx, shm);
  if (threadIdx.x == 0) {
    const double rstd = 1.0 / sqrt(s / double(D) + eps);
    stats[2 * i] = float(rstd);
    stats[2 * i + 1] = float(rstd * rstd * rstd * sgx / double(D));
  }
}

template <class T>
__global__ void rmsNormDxKernel(const T *dy, const T *x, const T *w, const float *stats, T *dx,
                                int64_t n, int64_t D) {
  FSDP_GRID_LOOP(e, n * D) {
    const int64_t i = e / D, c = e - i * D;
    const float r = stats[2 * i], k = stats[2 * i + 1];
    store(dx[e],
          __fsub_rn(__fmul_rn(r, __fmul_rn(load(dy[e]), load(w[c]))), __fmul_rn(load(x[e]), k)));
  }
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

constexpr int kRopeChunk = 256;
struct InvFreqChunk {
  float v[kRopeChunk];
};

// Exactly cpu.cpp's inverse frequencies (host).
float invFreqHost(int64_t i, int64_t Dh, double theta, const RopeScaling *scaling) {
  return fsdp::kernels::ropeInvFreq(i, Dh, theta, scaling);
}

// One thread per (row, head, i in the chunk): rotates the pair (i, i + half).
template <class T>
__global__ void ropeKernel(const T *x, T *y, int64_t rows, int64_t S, int64_t H, int64_t Dh,
                           int64_t i0, int w, InvFreqChunk inv, float af, bool inverse) {
  const int64_t half = Dh / 2, width = H * Dh;
  FSDP_GRID_LOOP(e, rows * H * w) {
    const int64_t i = e % w, rh = e / w, h = rh % H, r = rh / H;
    const int64_t s = r % S;
    const float angle = __fmul_rn(float(s), inv.v[i]);
    double sd, cd;
    sincos(double(angle), &sd, &cd);
    // cpu_impl.h's ropeT: cos and sin rounded to float, then times af.
    const float cs = __fmul_rn(float(cd), af), sv = __fmul_rn(float(sd), af),
                sn = inverse ? -sv : sv;
    const int64_t o1 = r * width + h * Dh + i0 + i, o2 = o1 + half;
    const float a = load(x[o1]), c = load(x[o2]);
    store(y[o1], __fsub_rn(__fmul_rn(a, cs), __fmul_rn(c, sn)));
    store(y[o2], __fadd_rn(__fmul_rn(c, cs), __fmul_rn(a, sn)));
  }
}

template <class T>
__global__ void ropeOddTailKernel(const T *x, T *y, int64_t rows, int64_t H, int64_t Dh) {
  FSDP_GRID_LOOP(e, rows * H) {
    const int64_t o = e * Dh + Dh - 1; // row-major [rows, H, Dh]
    y[o] = x[o];
  }
}

//===----------------------------------------------------------------------===//
// Attention, causal or bidirectional: 32 x 32 tiles, 256 threads, Dh <= MaxDh.
//===----------------------------------------------------------------------===//

constexpr int kTile = 32;
constexpr int kAttnThreads = 256;

// out[r][c] = scale * dot(A[r, :Dh], B[c, :Dh]) for r, c < 32. Thread t: c =
// t % 32, rows t / 32 + 8 k. A rows are read as broadcasts; B's stride is
// odd (Dh + 1) so that the 32 columns fall in distinct banks.
__device__ inline void tileScores(const float *A, const float *Bm, int ld, int Dh, float scale,
                                  float *out) {
  const int c = threadIdx.x & 31, r0 = threadIdx.x >> 5;
  float acc[4] = {0, 0, 0, 0};
  for (int d = 0; d < Dh; ++d) {
    const float b = Bm[c * ld + d];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      acc[k] += A[(r0 + 8 * k) * ld + d] * b;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k)
    out[(r0 + 8 * k) * (kTile + 1) + c] = acc[k] * scale;
}

// Loads rows [row0, row0 + 32) of a [*, stride] matrix (columns off..off+Dh)
// into sh[32][ld] as f32; rows >= S are zero.
template <class T>
__device__ inline void loadTile(const T *g, int64_t stride, int64_t row0, int64_t S, int Dh, int ld,
                                float *sh) {
  for (int e = threadIdx.x; e < kTile * Dh; e += blockDim.x) {
    const int r = e / Dh, d = e - r * Dh;
    const int64_t row = row0 + r;
    sh[r * ld + d] = row < S ? load(g[row * stride + d]) : 0.0f;
  }
}

// Whether query i sees key j (of S): causal, j <= i, and with a sliding
// window W > 0 also j > i - W; bidirectional, every key j < S. The first key
// tile a query tile from i0 reads, and the end of the key tiles it reads.
__device__ inline bool attentionSees(int64_t i, int64_t j, int64_t S, bool causal, int64_t window) {
  return causal ? j <= i && (window <= 0 || j > i - window) : j < S;
}
__device__ inline int64_t attentionFirstKeyTile(int64_t i0, bool causal, int64_t window) {
  const int64_t lo = causal && window > 0 && i0 - window + 1 > 0 ? i0 - window + 1 : 0;
  return lo / kTile * kTile;
}
__device__ inline int64_t attentionKeyTilesEnd(int64_t i0, int64_t S, bool causal) {
  return causal && i0 + 1 < S ? i0 + 1 : S;
}

// Forward: grid (query tiles, B * H). With statsOnly, v/out are unused and
// the row log-sum-exp goes to lse[(b * H + h) * S + i].
template <int MaxDh, class T>
__global__ void __launch_bounds__(kAttnThreads)
    attentionForwardKernel(const T *q, const T *k, const T *v, T *out, float *lse, int64_t S,
                           int64_t H, int64_t KV, int Dh, float scale, bool statsOnly, bool causal,
                           int64_t window) {
  FSDP_DYNAMIC_SHARED(float, smem);
  const int ld = Dh + 1;
  float *Qs = smem, *Ks = Qs + kTile * ld, *Vs = Ks + kTile * ld, *Ss = Vs + kTile * ld;
  float *mS = Ss + kTile * (kTile + 1), *lS = mS + kTile, *aS = lS + kTile;
  const int64_t bh = blockIdx.y, b = bh / H, h = bh % H, kvh = h / (H / KV);
  const int64_t qStride = H * Dh, kStride = KV * Dh;
  const int64_t i0 = int64_t(blockIdx.x) * kTile;
  const T *qb = q + b * S * qStride + h * Dh;
  const T *kb = k + b * S * kStride + kvh * Dh, *vb = v + b * S * kStride + kvh * Dh;
  loadTile(qb, qStride, i0, S, Dh, ld, Qs);
  if (threadIdx.x < kTile) {
    mS[threadIdx.x] = -INFINITY;
    lS[threadIdx.x] = 0.0f;
  }
  constexpr int kPer = MaxDh / 8;
  const int orow = threadIdx.x >> 3, ocol = threadIdx.x & 7;
  float acc[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u)
    acc[u] = 0.0f;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t jEnd = attentionKeyTilesEnd(i0, S, causal);
  for (int64_t j0 = attentionFirstKeyTile(i0, causal, window); j0 < jEnd; j0 += kTile) {
    __syncthreads(); // previous tile's K/V/S reads done
    loadTile(kb, kStride, j0, S, Dh, ld, Ks);
    if (!statsOnly)
      loadTile(vb, kStride, j0, S, Dh, ld, Vs);
    __syncthreads();
    tileScores(Qs, Ks, ld, Dh, scale, Ss);
    __syncthreads();
    // Online softmax: warp w takes rows w, w + 8, w + 16, w + 24; lane = key.
    for (int r = warp; r < kTile; r += 8) {
      const int64_t i = i0 + r, j = j0 + lane;
      float s = Ss[r * (kTile + 1) + lane];
      if (i >= S)
        s = 0.0f; // padding row: keep it finite, never written
      else if (!attentionSees(i, j, S, causal, window))
        s = -INFINITY;
      float tmax = s;
      for (int o = 16; o > 0; o >>= 1)
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
      const float mOld = mS[r], mNew = fmaxf(mOld, tmax);
      // A row that has seen no key yet (a window's tile before it) adds nothing.
      const bool none = mNew == -INFINITY;
      const float p = none ? 0.0f : expf(s - mNew);
      float tsum = p;
      for (int o = 16; o > 0; o >>= 1)
        tsum += __shfl_xor_sync(0xffffffffu, tsum, o);
      Ss[r * (kTile + 1) + lane] = p;
      __syncwarp();
      if (lane == 0) {
        const float alpha = none ? 1.0f : expf(mOld - mNew);
        lS[r] = lS[r] * alpha + tsum;
        mS[r] = mNew;
        aS[r] = alpha;
      }
    }
    __syncthreads();
    if (!statsOnly) {
      const float alpha = aS[orow];
#pragma unroll
      for (int u = 0; u < kPer; ++u)
        acc[u] *= alpha;
      for (int j = 0; j < kTile; ++j) {
        const float p = Ss[orow * (kTile + 1) + j];
#pragma unroll
        for (int u = 0; u < kPer; ++u) {
          const int d = ocol + 8 * u;
          if (d < Dh)
            acc[u] += p * Vs[j * ld + d];
        }
      }
    }
  }
  __syncthreads();
  const int64_t i = i0 + orow;
  if (i < S) {
    if (statsOnly) {
      if (ocol == 0)
        lse[bh * S + i] = mS[orow] + logf(lS[orow]);
    } else {
      const float inv = 1.0f / lS[orow];
      T *orow_ = out + (b * S + i) * qStride + h * Dh;
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int d = ocol + 8 * u;
        if (d < Dh)
          store(orow_[d], acc[u] * inv);
      }
    }
  }
}

// D[(b * H + h) * S + i] = dout_i · out_i (a warp per row, grid-stride over
// rows: the grid is capped, B * H * S is not). The 32 lanes of a warp take
// the same rows, so the shuffles see the whole warp.
template <class T>
__global__ void attentionRowDotKernel(const T *dout, const T *out, float *Dv, int64_t B, int64_t S,
                                      int64_t H, int Dh) {
  const int64_t rows = B * H * S;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < rows;
       row += warps) {
    const int64_t i = row % S, bh = row / S, h = bh % H, b = bh / H;
    const int64_t off = (b * S + i) * H * Dh + h * Dh;
    float s = 0;
    for (int d = lane; d < Dh; d += 32)
      s += load(dout[off + d]) * load(out[off + d]);
    for (int o = 16; o > 0; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0)
      Dv[row] = s;
  }
}

// P = exp(S - lse) (masked: 0), dP = dO Vᵀ, dS = P (dP - D), in place in
// Ps / dSs. Rows from i0, keys from j0.
__device__ inline void attentionTileGrads(const float *Qs, const float *dOs, const float *Ks,
                                          const float *Vs, float *Ps, float *dSs, const float *lseS,
                                          const float *DS, int64_t i0, int64_t j0, int64_t S,
                                          int ld, int Dh, float scale, bool causal,
                                          int64_t window) {
  tileScores(Qs, Ks, ld, Dh, scale, Ps);
  tileScores(dOs, Vs, ld, Dh, 1.0f, dSs);
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
    const int r = e >> 5, c = e & 31;
    const int64_t i = i0 + r, j = j0 + c;
    const int o = r * (kTile + 1) + c;
    float p = 0.0f;
    if (i < S && attentionSees(i, j, S, causal, window))
      p = expf(Ps[o] - lseS[r]);
    Ps[o] = p;
    dSs[o] = p * (dSs[o] - DS[r]);
  }
  __syncthreads();
}

// dk, dv: grid (key tiles, B * KV); loops over the group's query heads and
// the query tiles at or after the key tile. dk and dv accumulate in f32
// registers over the whole group and are stored (rounded) once.
template <int MaxDh, class T>
__global__ void __launch_bounds__(kAttnThreads)
    attentionBackwardKVKernel(const T *dout, const T *q, const T *k, const T *v, const float *lse,
                              const float *Dv, T *dk, T *dv, int64_t S, int64_t H, int64_t KV,
                              int Dh, float scale, bool causal, int64_t window) {
  FSDP_DYNAMIC_SHARED(float, smem);
  const int ld = Dh + 1;
  float *Ks = smem, *Vs = Ks + kTile * ld, *Qs = Vs + kTile * ld, *dOs = Qs + kTile * ld;
  float *Ps = dOs + kTile * ld, *dSs = Ps + kTile * (kTile + 1);
  float *lseS = dSs + kTile * (kTile + 1), *DS = lseS + kTile;
  const int64_t bkv = blockIdx.y, b = bkv / KV, kvh = bkv % KV, group = H / KV;
  const int64_t qStride = H * Dh, kStride = KV * Dh;
  const int64_t j0 = int64_t(blockIdx.x) * kTile;
  const int64_t kvOff = b * S * kStride + kvh * Dh;
  loadTile(k + kvOff, kStride, j0, S, Dh, ld, Ks);
  loadTile(v + kvOff, kStride, j0, S, Dh, ld, Vs);
  constexpr int kPer = MaxDh / 8;
  const int orow = threadIdx.x >> 3, ocol = threadIdx.x & 7; // orow: key in the tile
  float accK[kPer], accV[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u)
    accK[u] = accV[u] = 0.0f;
  for (int64_t hh = 0; hh < group; ++hh) {
    const int64_t h = kvh * group + hh, bh = b * H + h;
    const int64_t qOff = b * S * qStride + h * Dh;
    // The query tiles that see a key of this tile: causal, from the diagonal
    // to, with a window, the last query that sees its last key; else all.
    const int64_t iEnd =
        causal && window > 0 && j0 + kTile - 1 + window < S ? j0 + kTile - 1 + window : S;
    for (int64_t i0 = causal ? j0 : 0; i0 < iEnd; i0 += kTile) {
      __syncthreads();
      loadTile(q + qOff, qStride, i0, S, Dh, ld, Qs);
      loadTile(dout + qOff, qStride, i0, S, Dh, ld, dOs);
      if (threadIdx.x < kTile) {
        const int64_t i = i0 + threadIdx.x;
        lseS[threadIdx.x] = i < S ? lse[bh * S + i] : 0.0f;
        DS[threadIdx.x] = i < S ? Dv[bh * S + i] : 0.0f;
      }
      __syncthreads();
      attentionTileGrads(Qs, dOs, Ks, Vs, Ps, dSs, lseS, DS, i0, j0, S, ld, Dh, scale, causal,
                         window);
      // dV[j] += sum_i P[i][j] dO[i]; dK[j] += scale * sum_i dS[i][j] Q[i]
      for (int r = 0; r < kTile; ++r) {
        const float p = Ps[r * (kTile + 1) + orow], ds = dSs[r * (kTile + 1) + orow];
#pragma unroll
        for (int u = 0; u < kPer; ++u) {
          const int d = ocol + 8 * u;
          if (d < Dh) {
            accV[u] += p * dOs[r * ld + d];
            accK[u] += ds * Qs[r * ld + d];
          }
        }
      }
    }
  }
  const int64_t j = j0 + orow;
  if (j < S) {
    T *dkr = dk + kvOff + j * kStride, *dvr = dv + kvOff + j * kStride;
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int d = ocol + 8 * u;
      if (d < Dh) {
        store(dkr[d], accK[u] * scale);
        store(dvr[d], accV[u]);
      }
    }
  }
}

// dq: grid (query tiles, B * H); loops over the key tiles the query tile
// sees (causal: up to the diagonal).
template <int MaxDh, class T>
__global__ void __launch_bounds__(kAttnThreads)
    attentionBackwardQKernel(const T *dout, const T *q, const T *k, const T *v, const float *lse,
                             const float *Dv, T *dq, int64_t S, int64_t H, int64_t KV, int Dh,
                             float scale, bool causal, int64_t window) {
  FSDP_DYNAMIC_SHARED(float, smem);
  const int ld = Dh + 1;
  float *Qs = smem, *dOs = Qs + kTile * ld, *Ks = dOs + kTile * ld, *Vs = Ks + kTile * ld;
  float *Ps = Vs + kTile * ld, *dSs = Ps + kTile * (kTile + 1);
  float *lseS = dSs + kTile * (kTile + 1), *DS = lseS + kTile;
  const int64_t bh = blockIdx.y, b = bh / H, h = bh % H, kvh = h / (H / KV);
  const int64_t qStride = H * Dh, kStride = KV * Dh;
  const int64_t i0 = int64_t(blockIdx.x) * kTile;
  const int64_t qOff = b * S * qStride + h * Dh, kvOff = b * S * kStride + kvh * Dh;
  loadTile(q + qOff, qStride, i0, S, Dh, ld, Qs);
  loadTile(dout + qOff, qStride, i0, S, Dh, ld, dOs);
  if (threadIdx.x < kTile) {
    const int64_t i = i0 + threadIdx.x;
    lseS[threadIdx.x] = i < S ? lse[bh * S + i] : 0.0f;
    DS[threadIdx.x] = i < S ? Dv[bh * S + i] : 0.0f;
  }
  constexpr int kPer = MaxDh / 8;
  const int orow = threadIdx.x >> 3, ocol = threadIdx.x & 7;
  float acc[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u)
    acc[u] = 0.0f;
  const int64_t jEnd = attentionKeyTilesEnd(i0, S, causal);
  for (int64_t j0 = attentionFirstKeyTile(i0, causal, window); j0 < jEnd; j0 += kTile) {
    __syncthreads();
    loadTile(k + kvOff, kStride, j0, S, Dh, ld, Ks);
    loadTile(v + kvOff, kStride, j0, S, Dh, ld, Vs);
    __syncthreads();
    attentionTileGrads(Qs, dOs, Ks, Vs, Ps, dSs, lseS, DS, i0, j0, S, ld, Dh, scale, causal,
                       window);
    for (int c = 0; c < kTile; ++c) {
      const float ds = dSs[orow * (kTile + 1) + c];
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int d = ocol + 8 * u;
        if (d < Dh)
          acc[u] += ds * Ks[c * ld + d];
      }
    }
  }
  const int64_t i = i0 + orow;
  if (i < S) {
    T *dqr = dq + qOff + i * qStride;
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int d = ocol + 8 * u;
      if (d < Dh)
        store(dqr[d], acc[u] * scale);
    }
  }
}

size_t attentionSmemBytes(int Dh, int bigTiles, int smallTiles) {
  return sizeof(float) * (size_t(bigTiles) * kTile * (Dh + 1) +
                          size_t(smallTiles) * kTile * (kTile + 1) + 4 * kTile);
}

template <class K> void setSmem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    FSDP_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// (The kernels are named through a local pointer: a template argument list
// with a comma would split FSDP_LAUNCH's arguments.)
template <int MaxDh, class T>
void attentionForwardLaunch(const T *q, const T *k, const T *v, T *out, float *lse, int64_t B,
                            int64_t S, int64_t H, int64_t KV, int Dh, bool statsOnly, bool causal,
                            int64_t window, cudaStream_t stream) {
  const size_t smem = attentionSmemBytes(Dh, 3, 1);
  const auto kernel = attentionForwardKernel<MaxDh, T>;
  setSmem(kernel, smem);
  dim3 grid(unsigned((S + kTile - 1) / kTile), unsigned(B * H));
  const float scale = float(1.0 / std::sqrt(double(Dh)));
  FSDP_LAUNCH(kernel, grid, kAttnThreads, smem, stream, q, k, v, out, lse, S, H, KV, Dh, scale,
              statsOnly, causal, window);
  FSDP_LAUNCH_CHECK();
}

template <int MaxDh, class T>
void attentionBackwardLaunch(const T *dout, const T *q, const T *k, const T *v, const float *lse,
                             const float *Dv, T *dq, T *dk, T *dv, int64_t B, int64_t S, int64_t H,
                             int64_t KV, int Dh, bool causal, int64_t window, cudaStream_t stream) {
  const size_t smem = attentionSmemBytes(Dh, 4, 2);
  const float scale = float(1.0 / std::sqrt(double(Dh)));
  const unsigned tiles = unsigned((S + kTile - 1) / kTile);
  const auto kvKernel = attentionBackwardKVKernel<MaxDh, T>;
  setSmem(kvKernel, smem);
  FSDP_LAUNCH(kvKernel, dim3(tiles, unsigned(B * KV)), kAttnThreads, smem, stream, dout, q, k, v,
              lse, Dv, dk, dv, S, H, KV, Dh, scale, causal, window);
  FSDP_LAUNCH_CHECK();
  const auto qKernel = attentionBackwardQKernel<MaxDh, T>;
  setSmem(qKernel, smem);
  FSDP_LAUNCH(qKernel, dim3(tiles, unsigned(B * H)), kAttnThreads, smem, stream, dout, q, k, v, lse,
              Dv, dq, S, H, KV, Dh, scale, causal, window);
  FSDP_LAUNCH_CHECK();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// GELU: tanh, HF gelu_new; else exact, 0.5 x (1 + erf(x / sqrt 2)), whose
// derivative is cdf(x) + x exp(-x^2 / 2) / sqrt(2 pi).
template <class T> __global__ void geluForwardKernel(const T *x, T *y, int64_t n, bool tanh) {
  FSDP_GRID_LOOP(i, n) {
    const float v = load(x[i]);
    if (tanh)
      store(y[i], 0.5f * v * (1.0f + tanhf(kGeluC * (v + kGeluA * (v * v * v)))));
    else
      store(y[i], 0.5f * v * (1.0f + erff(v * kSqrtHalf)));
  }
}

template <class T>
__global__ void geluBackwardKernel(const T *dy, const T *x, T *dx, int64_t n, bool tanh) {
  FSDP_GRID_LOOP(i, n) {
    const float v = load(x[i]);
    if (tanh) {
      const float t = tanhf(kGeluC * (v + kGeluA * (v * v * v)));
      const float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
      store(dx[i], load(dy[i]) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
    } else {
      const float cdf = 0.5f * (1.0f + erff(v * kSqrtHalf));
      const float pdf = expf(-0.5f * v * v) * kInvSqrt2Pi;
      store(dx[i], load(dy[i]) * (cdf + v * pdf));
    }
  }
}

template <class T>
__global__ void siluMulForwardKernel(const T *gate, const T *up, T *y, int64_t n) {
  FSDP_GRID_LOOP(i, n) {
    const float g = load(gate[i]);
    store(y[i], g / (1.0f + expf(-g)) * load(up[i]));
  }
}

template <class T>
__global__ void siluMulBackwardKernel(const T *dy, const T *gate, const T *up, T *dgate, T *dup,
                                      int64_t n) {
  FSDP_GRID_LOOP(i, n) {
    const float g = load(gate[i]), e = expf(-g), s = 1.0f / (1.0f + e);
    const float d = load(dy[i]), u = load(up[i]);
    store(dup[i], d * (g / (1.0f + e)));
    store(dgate[i], (d * u) * s * (1.0f + g * (1.0f - s)));
  }
}

__global__ void addBiasKernel(float *x, const float *bias, int64_t rows, int64_t D) {
  FSDP_GRID_LOOP(e, rows * D) { x[e] = x[e] + bias[e % D]; }
}

template <class T> __global__ void addKernel(const T *a, const T *b, T *y, int64_t n) {
  FSDP_GRID_LOOP(i, n) { store(y[i], load(a[i]) + load(b[i])); }
}

// ViT's sequence (cpu.h): y[b, s] = (s ? x[b, s-1] : cls) + pos[s].
template <class T>
__global__ void classTokenForwardKernel(const T *x, const T *cls, const T *pos, T *y, int64_t B,
                                        int64_t S, int64_t D) {
  FSDP_GRID_LOOP(e, B * S * D) {
    const int64_t b = e / (S * D), r = e - b * S * D, s = r / D, c = r - s * D;
    const float v = s == 0 ? load(cls[c]) : load(x[(b * (S - 1) + s - 1) * D + c]);
    store(y[e], v + load(pos[r]));
  }
}

// dx[b, s-1] = dy[b, s]
template <class T>
__global__ void classTokenInputGradKernel(const T *dy, T *dx, int64_t B, int64_t S, int64_t D) {
  const int64_t rowLen = (S - 1) * D;
  FSDP_GRID_LOOP(e, B * rowLen) {
    const int64_t b = e / rowLen, r = e - b * rowLen;
    dx[e] = dy[b * S * D + D + r];
  }
}

// dpos[s, c] = sum over b of dy[b, s, c] in float, b in order (as the CPU
// kernel: the same bits); dcls = dpos[0].
template <class T>
__global__ void classTokenParamGradKernel(const T *dy, T *dcls, T *dpos, int64_t B, int64_t S,
                                          int64_t D) {
  FSDP_GRID_LOOP(e, S * D) {
    float acc = 0.0f;
    for (int64_t b = 0; b < B; ++b)
      acc = __fadd_rn(acc, load(dy[b * S * D + e]));
    store(dpos[e], acc);
    if (e < D)
      store(dcls[e], acc);
  }
}

// y[b] = x[b, 0]
template <class T>
__global__ void firstTokenForwardKernel(const T *x, T *y, int64_t B, int64_t S, int64_t D) {
  FSDP_GRID_LOOP(e, B * D) {
    const int64_t b = e / D, c = e - b * D;
    y[e] = x[b * S * D + c];
  }
}

// dx[b, 0] = dy[b], zeros elsewhere
template <class T>
__global__ void firstTokenBackwardKernel(const T *dy, T *dx, int64_t B, int64_t S, int64_t D) {
  FSDP_GRID_LOOP(e, B * S * D) {
    const int64_t b = e / (S * D), r = e - b * S * D;
    if (r < D)
      dx[e] = dy[b * D + r];
    else
      store(dx[e], 0.0f);
  }
}

template <class T>
__global__ void biasBroadcastKernel(const T *bias, T *y, int64_t n, int64_t out) {
  FSDP_GRID_LOOP(e, n * out) { y[e] = bias[e % out]; }
}

//===----------------------------------------------------------------------===//
// Cross-entropy: a block per row
//===----------------------------------------------------------------------===//

template <class T>
__device__ void rowLse(const T *x, int64_t V, float *fshm, double *dshm, float &mx, double &sum) {
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
    m = fmaxf(m, load(x[c]));
  m = blockMax(m, fshm);
  double s = 0;
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
    s += double(expf(load(x[c]) - m));
  sum = blockSum(s, dshm);
  mx = m;
}

template <class T>
__global__ void crossEntropyRowKernel(const T *logits, const int64_t *targets, double *rowLoss,
                                      int64_t V) {
  FSDP_SHARED(float, fshm, [32]);
  FSDP_SHARED(double, dshm, [32]);
  const int64_t i = blockIdx.x;
  if (targets[i] == kernels::kIgnoreIndex) { // the whole block: i is the block's
    if (threadIdx.x == 0)
      rowLoss[i] = 0;
    return;
  }
  const T *x = logits + i * V;
  float mx;
  double sum;
  rowLse(x, V, fshm, dshm, mx, sum);
  if (threadIdx.x == 0)
    rowLoss[i] = double(mx) + log(sum) - double(load(x[targets[i]]));
}

// The mean of the rows' losses over the rows not ignored (0 if none).
__global__ void meanKernel(const double *v, const int64_t *targets, float *out, int64_t n) {
  FSDP_SHARED(double, shm, [32]);
  double s = 0, counted = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (targets[i] != kernels::kIgnoreIndex) {
      s += v[i];
      counted += 1;
    }
  s = blockSum(s, shm);
  counted = blockSum(counted, shm);
  if (threadIdx.x == 0)
    *out = counted > 0 ? float(s / counted) : 0.0f;
}

template <class T>
__global__ void crossEntropyBackwardKernel(const T *logits, const int64_t *targets, T *dlogits,
                                           int64_t V, float scale) {
  FSDP_SHARED(float, fshm, [32]);
  FSDP_SHARED(double, dshm, [32]);
  const int64_t i = blockIdx.x;
  const T *x = logits + i * V;
  T *d = dlogits + i * V;
  if (targets[i] == kernels::kIgnoreIndex) { // the whole block: i is the block's
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x)
      store(d[c], 0.0f);
    return;
  }
  float mx;
  double sum;
  rowLse(x, V, fshm, dshm, mx, sum);
  const float k = float(double(scale) / sum);
  const int64_t t = targets[i];
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
    float g = __fmul_rn(expf(load(x[c]) - mx), k);
    if (c == t)
      g = __fsub_rn(g, scale);
    store(d[c], g);
  }
}

//===----------------------------------------------------------------------===//
// AdamW, bf16, sum of squares
//===----------------------------------------------------------------------===//

struct AdamConsts {
  float decayMul, b1, oneMinusB1, b2, oneMinusB2, negStepSize, bc2Sqrt, eps, gs;
};

// Every operation rounded separately (no FMA contraction), as torch's
// tensor ops and cpu.cpp's baseline build.
__global__ void adamwKernel(float *param, const float *grad, float *expAvg, float *expAvgSq,
                            const bool *decay, int64_t n, AdamConsts c) {
  FSDP_GRID_LOOP(i, n) {
    const float mul = (!decay || decay[i]) ? c.decayMul : 1.0f;
    const float g = __fmul_rn(grad[i], c.gs);
    const float p = __fmul_rn(param[i], mul);
    const float m = __fadd_rn(__fmul_rn(expAvg[i], c.b1), __fmul_rn(c.oneMinusB1, g));
    const float v =
        __fadd_rn(__fmul_rn(expAvgSq[i], c.b2), __fmul_rn(__fmul_rn(c.oneMinusB2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.bc2Sqrt), c.eps);
    param[i] = __fadd_rn(p, __fdiv_rn(__fmul_rn(c.negStepSize, m), denom));
    expAvg[i] = m;
    expAvgSq[i] = v;
  }
}

__global__ void toBf16Kernel(const float *x, uint16_t *out, int64_t n) {
  FSDP_GRID_LOOP(i, n) { out[i] = toBf16Dev(x[i]); }
}

// In place (out == x), elements [lo, hi): every thread reads, the block
// syncs, then writes. Launched on ranges whose writes (bytes [2lo, 2hi),
// i.e. floats [lo/2, hi/2)) only hit floats already consumed: either the
// first range, done by one block, or [lo, 2lo) after [0, lo) is done.
__global__ void toBf16InPlaceKernel(const float *x, uint16_t *out, int64_t lo, int64_t hi,
                                    bool singleBlock) {
  if (singleBlock) {
    // hi - lo <= 8 * blockDim.x
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t i = lo + threadIdx.x + int64_t(u) * blockDim.x;
      v[u] = i < hi ? x[i] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t i = lo + threadIdx.x + int64_t(u) * blockDim.x;
      if (i < hi)
        out[i] = toBf16Dev(v[u]);
    }
    return;
  }
  for (int64_t i = lo + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < hi;
       i += int64_t(blockDim.x) * gridDim.x)
    out[i] = toBf16Dev(x[i]);
}

__global__ void fromBf16Kernel(const uint16_t *h, float *out, int64_t n) {
  FSDP_GRID_LOOP(i, n) { out[i] = fromBf16Dev(h[i]); }
}

__global__ void roundToBf16Kernel(const float *x, float *out, int64_t n) {
  FSDP_GRID_LOOP(i, n) { out[i] = fromBf16Dev(toBf16Dev(x[i])); }
}

// Partial sums: block b sums the fixed chunk [b * chunk, (b + 1) * chunk).
__global__ void sumOfSquaresPartialKernel(const float *x, int64_t n, int64_t chunk,
                                          double *partial) {
  FSDP_SHARED(double, shm, [32]);
  const int64_t lo = int64_t(blockIdx.x) * chunk, hi = min(n, lo + chunk);
  double s = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
    s += double(x[i]) * double(x[i]);
  s = blockSum(s, shm);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s;
}

// *out = the sum (accumulate: *out + the sum).
__global__ void sumKernel(const double *v, int64_t n, double *out, bool accumulate) {
  FSDP_SHARED(double, shm, [32]);
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += v[i];
  s = blockSum(s, shm);
  if (threadIdx.x == 0)
    *out = accumulate ? *out + s : s;
}

//===----------------------------------------------------------------------===//
// Accumulation into f32 (the reduce-scatter's "add to the shard")
//===----------------------------------------------------------------------===//

__global__ void addBf16IntoKernel(float *dst, const uint16_t *src, int64_t n) {
  FSDP_GRID_LOOP(i, n) { dst[i] = dst[i] + __uint_as_float(uint32_t(src[i]) << 16); }
}

//===----------------------------------------------------------------------===//
// Mixture of experts (cpu_impl.h's moe*T: the same formulas and rounding
// points; see cuda.h)
//===----------------------------------------------------------------------===//

// Up to kMoePointers device pointers (expert weights, layers' logits) in a
// launch's parameters: 512 bytes, well inside CUDA's 4 KiB of them.
template <class P> struct MoePointers {
  P p[kMoePointers];
};

// The warps of a block of a warp-a-row MoE kernel: as many as fit in 48 KiB
// of shared memory (no opt-in needed) at perWarp bytes each, 1 to 8. With E
// <= kMoeMaxExperts, perWarp <= 16 E = 32 KiB: one always fits.
inline int moeWarps(size_t perWarp) {
  return int(std::min<size_t>(8, std::max<size_t>(1, size_t(48 * 1024) / perWarp)));
}

// p[e] = softmax(x[0..E))[e] for the lane's experts e = lane, lane + 32, ...:
// cpu_impl.h's softmaxRow (the max, the sum of exp(x - max) in double,
// p = exp(x - max) * float(1 / sum)). The butterfly's sums are the same on
// every lane (each level adds the same two values, commuted).
template <class T> __device__ void moeSoftmaxWarp(const T *x, int64_t E, float *p) {
  const int lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int64_t e = lane; e < E; e += 32)
    m = fmaxf(m, load(x[e]));
  for (int o = 16; o > 0; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  double s = 0;
  for (int64_t e = lane; e < E; e += 32)
    s += double(expf(load(x[e]) - m));
  for (int o = 16; o > 0; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  const float inv = float(1.0 / s);
  for (int64_t e = lane; e < E; e += 32)
    p[e] = __fmul_rn(expf(load(x[e]) - m), inv);
}

// Whether candidate (v, i) beats (bv, bi) in cpu_impl.h's topK order: a
// number over a NaN, then the larger p, then (equal p, or both NaN) the lower
// expert; i < 0 is no candidate. A strict total order on distinct experts, so
// any reduction tree picks what the CPU's scan in expert order picks.
__device__ inline bool moeBeats(float v, int i, float bv, int bi) {
  if (i < 0)
    return false;
  if (bi < 0)
    return true;
  const bool nan = v != v, bnan = bv != bv;
  if (nan != bnan)
    return bnan;
  if (!nan && v != bv)
    return v > bv;
  return i < bi;
}

// The best expert not yet taken (taken[e] != 0), on every lane.
__device__ inline int moeArgmaxWarp(const float *p, const float *taken, int64_t E) {
  const int lane = threadIdx.x & 31;
  float bv = 0.0f;
  int bi = -1;
  for (int64_t e = lane; e < E; e += 32)
    if (taken[e] == 0.0f && moeBeats(p[e], int(e), bv, bi)) {
      bv = p[e];
      bi = int(e);
    }
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long mine =
        (static_cast<unsigned long long>(__float_as_uint(bv)) << 32) | unsigned(bi);
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, mine, o);
    const float ov = __uint_as_float(unsigned(other >> 32));
    const int oi = int(unsigned(other & 0xffffffffu));
    if (moeBeats(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  return bi;
}

// A warp a token: p, its k best experts in order, their weights (lane 0 sums
// them in f32 in choice order, as the CPU). Shared: 2 E floats a warp (p and
// the taken flags).
template <class T>
__global__ void moeRouteKernel(const T *logits, T *weights, int64_t *experts, int64_t n, int64_t E,
                               int k, bool normalize) {
  FSDP_DYNAMIC_SHARED(float, smem);
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float *p = smem + int64_t(warp) * 2 * E, *taken = p + E;
  for (int64_t t = int64_t(blockIdx.x) * warps + warp; t < n; t += int64_t(gridDim.x) * warps) {
    moeSoftmaxWarp(logits + t * E, E, p);
    for (int64_t e = lane; e < E; e += 32)
      taken[e] = 0.0f;
    __syncwarp();
    int64_t *c = experts + t * k;
    for (int j = 0; j < k; ++j) {
      const int best = moeArgmaxWarp(p, taken, E);
      if (lane == 0) {
        c[j] = best;
        taken[best] = 1.0f;
      }
      __syncwarp();
    }
    if (lane == 0) {
      float sum = 0.0f;
      for (int j = 0; j < k; ++j)
        sum = __fadd_rn(sum, p[c[j]]);
      for (int j = 0; j < k; ++j)
        store(weights[t * k + j], normalize ? __fdiv_rn(p[c[j]], sum) : p[c[j]]);
    }
    __syncwarp(); // p and taken are the next token's
  }
}

// counts[c, e] = the pairs of chunk c (kMoeChunk pairs, a block) whose
// expert is e (integer counts: the atomics' order changes nothing).
__global__ void moeChunkCountKernel(const int64_t *experts, int64_t nk, int64_t E, int *counts) {
  FSDP_DYNAMIC_SHARED(float, smem);
  int *hist = reinterpret_cast<int *>(smem);
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    hist[e] = 0;
  __syncthreads();
  const int64_t i = int64_t(blockIdx.x) * kMoeChunk + threadIdx.x;
  if (i < nk)
    atomicAdd(hist + experts[i], 1);
  __syncthreads();
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    counts[int64_t(blockIdx.x) * E + e] = hist[e];
}

// One block: counts[c, e] becomes the pairs of expert e in the chunks before
// c (a scan over the chunks, a thread an expert), start[e] the pairs of the
// experts before e (start[E] = every pair).
__global__ void moeChunkScanKernel(int *counts, int64_t chunks, int64_t E, int64_t *start) {
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    int64_t run = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      const int v = counts[c * E + e];
      counts[c * E + e] = int(run);
      run += v;
    }
    start[e + 1] = run;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    start[0] = 0;
    for (int64_t e = 0; e < E; ++e)
      start[e + 1] += start[e];
  }
}

// slots[i] = start[e] + the pairs of e before i: those of the chunks before
// (before[c, e]) and those before i in its chunk: by expert, then token.
__global__ void moeSlotKernel(const int64_t *experts, int64_t nk, int64_t E, const int *before,
                              const int64_t *start, int64_t *slots) {
  FSDP_SHARED(int64_t, ex, [kMoeChunk]);
  const int64_t i = int64_t(blockIdx.x) * kMoeChunk + threadIdx.x;
  ex[threadIdx.x] = i < nk ? experts[i] : -1;
  __syncthreads();
  if (i < nk) {
    const int64_t e = ex[threadIdx.x];
    int64_t rank = 0;
    for (unsigned j = 0; j < threadIdx.x; ++j)
      rank += ex[j] == e;
    slots[i] = start[e] + before[int64_t(blockIdx.x) * E + e] + rank;
  }
}

// moe_linear's tiles: 64 rows (or columns) by 64, 16 deep, 256 threads.
constexpr int kMoeTile = 64, kMoeDepth = 16, kMoeGemmThreads = 256;

// One block: start[e] (int64 [E + 1]), expert e's first packed row, counted
// from the nk choices in shared counters; tiles[e] (int64 [E + 1]) the
// 64-row tiles of the experts before e.
__global__ void moeRowStartsKernel(const int64_t *experts, int64_t nk, int64_t E, int64_t *start,
                                   int64_t *tiles) {
  FSDP_DYNAMIC_SHARED(float, smem);
  int *hist = reinterpret_cast<int *>(smem);
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    hist[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < nk; i += blockDim.x)
    atomicAdd(hist + experts[i], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    start[0] = tiles[0] = 0;
    for (int64_t e = 0; e < E; ++e) {
      start[e + 1] = start[e] + hist[e];
      tiles[e + 1] = tiles[e] + (hist[e] + kMoeTile - 1) / kMoeTile;
    }
  }
}

template <class T>
__global__ void moePermuteKernel(const T *x, const int64_t *slots, T *packed, int64_t n, int64_t k,
                                 int64_t D) {
  FSDP_GRID_LOOP(i, n * k * D) {
    const int64_t pair = i / D, d = i - pair * D;
    packed[slots[pair] * D + d] = x[(pair / k) * D + d];
  }
}

// A token's k choices in ascending slot order (cpu_impl.h's slotOrder).
__device__ inline void moeSlotOrder(const int64_t *s, int k, int *order) {
  for (int j = 0; j < k; ++j) {
    int i = j;
    for (; i > 0 && s[order[i - 1]] > s[j]; --i)
      order[i] = order[i - 1];
    order[i] = j;
  }
}

// A block a token: its k rows (and weights) in ascending slot order, found
// by thread 0; then the threads over D, each summing k terms in f32 in that
// order: the permute's gradient (w null) adds the rows, the combine adds
// weight * row, each product and sum rounded.
template <class T>
__global__ void moeGatherKernel(const T *rows, const T *weights, const int64_t *slots, T *y,
                                int64_t k, int64_t D) {
  FSDP_SHARED(int64_t, src, [kernels::kMaxTopK]);
  FSDP_SHARED(float, w, [kernels::kMaxTopK]);
  const int64_t t = blockIdx.x;
  if (threadIdx.x == 0) {
    int order[kernels::kMaxTopK];
    moeSlotOrder(slots + t * k, int(k), order);
    for (int j = 0; j < k; ++j) {
      src[j] = slots[t * k + order[j]];
      w[j] = weights ? load(weights[t * k + order[j]]) : 1.0f;
    }
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const float v = load(rows[src[j] * D + d]);
      acc = __fadd_rn(acc, weights ? __fmul_rn(w[j], v) : v);
    }
    store(y[t * D + d], acc);
  }
}

// A block a token: for each choice j, dpacked[slot] = w dy (one product)
// and dweights[t, j] = the double dot product of the row and dy, one
// block-tree sum, rounded once. The row is read before its gradient is
// written, element by element: dpacked may be packed.
template <class T>
__global__ void moeCombineBackwardKernel(const T *dy, const T *packed, const T *weights,
                                         const int64_t *slots, T *dpacked, T *dweights, int64_t k,
                                         int64_t D) {
  FSDP_SHARED(double, shm, [32]);
  const int64_t t = blockIdx.x;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t r = slots[t * k + j];
    const float w = load(weights[t * k + j]);
    double acc = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const float g = load(dy[t * D + d]);
      acc += double(load(packed[r * D + d])) * double(g);
      store(dpacked[r * D + d], __fmul_rn(w, g));
    }
    acc = blockSum(acc, shm);
    if (threadIdx.x == 0)
      store(dweights[t * k + j], float(acc));
  }
}

// moe_linear's matmuls. A block's tile of C [M <= 64, N <= 64] (row stride
// ldc) = A [M, K] B [K, N], with A(m, q) = A[m sA0 + q sA1] and B(q, c) =
// B[q sB0 + c sB1]: 16-deep slices of both in shared memory as f32 (read
// along whichever index is contiguous), f32 accumulation over q in
// ascending order, each result stored (rounded) once. 256 threads: thread
// (ty, tx) holds rows ty + 16 i and columns tx + 16 j, i, j < 4. K = 0
// stores zeros.

template <class T>
__device__ void moeGemmTile(const T *A, int64_t sA0, int64_t sA1, const T *B, int64_t sB0,
                            int64_t sB1, T *C, int64_t ldc, int64_t M, int64_t N, int64_t K) {
  FSDP_SHARED(float, As, [kMoeDepth][kMoeTile + 1]);
  FSDP_SHARED(float, Bs, [kMoeDepth][kMoeTile + 1]);
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      acc[i][j] = 0.0f;
  for (int64_t q0 = 0; q0 < K; q0 += kMoeDepth) {
    __syncthreads(); // the previous slice is read
    for (int e = threadIdx.x; e < kMoeTile * kMoeDepth; e += blockDim.x) {
      int m, q;
      if (sA1 == 1) {
        m = e / kMoeDepth;
        q = e % kMoeDepth;
      } else {
        q = e / kMoeTile;
        m = e % kMoeTile;
      }
      As[q][m] = m < M && q0 + q < K ? load(A[m * sA0 + (q0 + q) * sA1]) : 0.0f;
      int c;
      if (sB0 == 1) {
        c = e / kMoeDepth;
        q = e % kMoeDepth;
      } else {
        q = e / kMoeTile;
        c = e % kMoeTile;
      }
      Bs[q][c] = c < N && q0 + q < K ? load(B[(q0 + q) * sB0 + c * sB1]) : 0.0f;
    }
    __syncthreads();
    for (int q = 0; q < kMoeDepth; ++q) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = As[q][ty + 16 * i];
        b[i] = Bs[q][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += a[i] * b[j];
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (ty + 16 * i < M && tx + 16 * j < N)
        store(C[(ty + 16 * i) * ldc + tx + 16 * j], acc[i][j]);
}

// moe_linear forward (y = x w[e]ᵀ) and input gradient (dx = dy w[e]) over the
// experts e0 .. e0 + count - 1, whose weights w carries. Why one fixed
// launch: the rows of each expert are known only on the device, and cuBLAS
// takes its sizes from the host (a grouped or per-expert GEMM would need
// the counts copied back and the stream synchronized). So the grid's x is
// the most 64-row tiles the experts can have, ceil(rows / 64) + count
// (sum over e of ceil(r_e / 64) <= rows / 64 + count), and its y the
// output's 64-column tiles; a block finds its tile's expert in the tile
// starts by binary search (tiles[e] <= g < tiles[e + 1]: an expert without
// rows has no tile) and its rows from the row starts, and a block past the
// last tile returns at once. Every block is one expert's: its weight is
// read whole, the rows' tile stays in shared memory, and no row's result
// is split across blocks (no reduction: deterministic).
template <class T>
__global__ void __launch_bounds__(kMoeGemmThreads)
    moeLinearRowsKernel(const T *a, MoePointers<const T *> w, T *c, const int64_t *start,
                        const int64_t *tiles, int64_t e0, int64_t count, int64_t in, int64_t out,
                        bool forward) {
  const int64_t g = tiles[e0] + blockIdx.x;
  if (g >= tiles[e0 + count])
    return; // the whole block: g is the block's
  int64_t lo = e0, hi = e0 + count - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (tiles[mid] <= g)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int64_t e = lo, r0 = start[e] + (g - tiles[e]) * kMoeTile;
  const int64_t M = min(int64_t(kMoeTile), start[e + 1] - r0), c0 = int64_t(blockIdx.y) * kMoeTile;
  const T *W = w.p[e - e0];
  if (forward) // y[r, o] = sum over i of x[r, i] W[o, i]
    moeGemmTile(a + r0 * in, in, int64_t(1), W + c0 * in, int64_t(1), in, c + r0 * out + c0, out, M,
                min(int64_t(kMoeTile), out - c0), in);
  else // dx[r, i] = sum over o of dy[r, o] W[o, i]
    moeGemmTile(a + r0 * out, out, int64_t(1), W + c0, in, int64_t(1), c + r0 * in + c0, in, M,
                min(int64_t(kMoeTile), in - c0), out);
}

// dw[e] = dy[rows of e]ᵀ x[rows of e]: blockIdx.y the expert e0 + y, x the
// 64 x 64 tiles of [out, in]; the expert's rows summed in order by its
// block (zeros without rows).
template <class T>
__global__ void __launch_bounds__(kMoeGemmThreads)
    moeLinearWeightKernel(const T *dy, const T *x, MoePointers<T *> dw, const int64_t *start,
                          int64_t e0, int64_t in, int64_t out) {
  const int64_t tilesIn = (in + kMoeTile - 1) / kMoeTile;
  const int64_t o0 = int64_t(blockIdx.x) / tilesIn * kMoeTile;
  const int64_t i0 = int64_t(blockIdx.x) % tilesIn * kMoeTile;
  const int64_t e = e0 + blockIdx.y, r0 = start[e];
  // dW[o, i] = sum over r of dy[r, o] x[r, i]
  moeGemmTile(dy + r0 * out + o0, int64_t(1), out, x + r0 * in + i0, in, int64_t(1),
              dw.p[blockIdx.y] + o0 * in + i0, in, min(int64_t(kMoeTile), out - o0),
              min(int64_t(kMoeTile), in - i0), start[e + 1] - r0);
}

// A warp a token: p recomputed, dp over the chosen experts (lane 0, in
// choice order, as the CPU), dlogits = p (dp - float(sum p dp)). Shared: 2 E
// floats a warp (p and dp). dlogits may be logits: every lane has read its
// row before the warp's sync that precedes the writes.
template <class T>
__global__ void moeRouteBackwardKernel(const T *dweights, const T *logits, const int64_t *experts,
                                       T *dlogits, int64_t n, int64_t E, int k, bool normalize) {
  FSDP_DYNAMIC_SHARED(float, smem);
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float *p = smem + int64_t(warp) * 2 * E, *dp = p + E;
  for (int64_t t = int64_t(blockIdx.x) * warps + warp; t < n; t += int64_t(gridDim.x) * warps) {
    moeSoftmaxWarp(logits + t * E, E, p);
    for (int64_t e = lane; e < E; e += 32)
      dp[e] = 0.0f;
    __syncwarp();
    double pd = 0.0;
    if (lane == 0) {
      const int64_t *c = experts + t * k;
      const T *dw = dweights + t * k;
      if (normalize) { // w_j = p_j / s: dp_j = (dw_j - sum_i dw_i w_i) / s
        float s = 0.0f, dot = 0.0f;
        for (int j = 0; j < k; ++j)
          s = __fadd_rn(s, p[c[j]]);
        for (int j = 0; j < k; ++j)
          dot = __fadd_rn(dot, __fmul_rn(load(dw[j]), __fdiv_rn(p[c[j]], s)));
        for (int j = 0; j < k; ++j)
          dp[c[j]] = __fdiv_rn(__fsub_rn(load(dw[j]), dot), s);
      } else {
        for (int j = 0; j < k; ++j)
          dp[c[j]] = load(dw[j]);
      }
      for (int j = 0; j < k; ++j)
        pd += double(p[c[j]]) * double(dp[c[j]]);
    }
    __syncwarp();
    const float pdf = float(__shfl_sync(0xffffffffu, pd, 0));
    for (int64_t e = lane; e < E; e += 32)
      store(dlogits[t * E + e], __fmul_rn(p[e], __fsub_rn(dp[e], pdf)));
    __syncwarp(); // p and dp are the next token's
  }
}

// The aux loss's statistics over the layers l0 .. l0 + gridDim.y - 1, whose
// logits the launch carries (blockIdx.y), rows [blockIdx.x kMoeAuxRows, +
// kMoeAuxRows) of each, a warp a row: counts[j, e] += the rows whose choice
// j is e (integers: exact whatever the order), and when partial is given,
// the block's sum of p per expert (each warp's own in double, lane-owned,
// then the warps' added in warp order) into partial[(l gridDim.x +
// blockIdx.x) E + e]. Shared: E doubles (sums) and 2 E floats (p, taken) a
// warp.
template <class T>
__global__ void moeAuxStatsKernel(MoePointers<const T *> logits, int64_t l0, int64_t n, int64_t E,
                                  int k, int *counts, double *partial) {
  FSDP_DYNAMIC_SHARED(float, smem);
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  double *sums = reinterpret_cast<double *>(smem);
  double *mine = sums + int64_t(warp) * E;
  float *p = reinterpret_cast<float *>(sums + int64_t(warps) * E) + int64_t(warp) * 2 * E;
  float *taken = p + E;
  for (int64_t e = lane; e < E; e += 32)
    mine[e] = 0.0;
  const T *x = logits.p[blockIdx.y];
  const int64_t first = int64_t(blockIdx.x) * kMoeAuxRows, last = min(n, first + kMoeAuxRows);
  for (int64_t t = first + warp; t < last; t += warps) {
    moeSoftmaxWarp(x + t * E, E, p);
    for (int64_t e = lane; e < E; e += 32) {
      taken[e] = 0.0f;
      mine[e] += double(p[e]);
    }
    __syncwarp();
    for (int j = 0; j < k; ++j) {
      const int best = moeArgmaxWarp(p, taken, E);
      if (lane == 0) {
        atomicAdd(counts + int64_t(j) * E + best, 1);
        taken[best] = 1.0f;
      }
      __syncwarp();
    }
  }
  __syncthreads();
  if (!partial)
    return;
  const int64_t slot = (l0 + blockIdx.y) * gridDim.x + blockIdx.x;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    double s = 0.0;
    for (int w = 0; w < warps; ++w)
      s += sums[int64_t(w) * E + e];
    partial[slot * E + e] = s;
  }
}

// One block: P[e] = the blocks' partial sums added in block order; then
// thread 0 sums aux over j, e in the CPU's order and writes *out = loss +
// coef E aux, rounded to f32 once.
__global__ void moeAuxLossKernel(const float *loss, const int *counts, const double *partial,
                                 int64_t slots, double *P, int64_t E, int k, double R, double coefE,
                                 float *out) {
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    double s = 0.0;
    for (int64_t b = 0; b < slots; ++b)
      s += partial[b * E + e];
    P[e] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double aux = 0.0;
    for (int j = 0; j < k; ++j)
      for (int64_t e = 0; e < E; ++e)
        aux += (double(counts[int64_t(j) * E + e]) / R) * (P[e] / R);
    *out = float(double(*loss) + coefE * aux);
  }
}

// G[e] = scale F[e], F[e] = the rows choosing e, over the choices (double).
__global__ void moeAuxFactorKernel(const int *counts, int64_t E, int k, double scale, double *G) {
  FSDP_GRID_LOOP(e, E) {
    double F = 0.0;
    for (int j = 0; j < k; ++j)
      F += double(counts[int64_t(j) * E + e]);
    G[e] = scale * F;
  }
}

// A warp a row of each layer (blockIdx.y): p recomputed, pg = the double sum
// of p G (the warp's tree), dlogits = float(p (G - pg)). Shared: E floats a
// warp. dlogits may be logits (every read precedes the warp's reduction).
template <class T>
__global__ void moeAuxGradKernel(MoePointers<const T *> logits, MoePointers<T *> dlogits, int64_t n,
                                 int64_t E, const double *G) {
  FSDP_DYNAMIC_SHARED(float, smem);
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float *p = smem + int64_t(warp) * E;
  const T *x = logits.p[blockIdx.y];
  T *dx = dlogits.p[blockIdx.y];
  for (int64_t t = int64_t(blockIdx.x) * warps + warp; t < n; t += int64_t(gridDim.x) * warps) {
    moeSoftmaxWarp(x + t * E, E, p);
    double pg = 0.0;
    for (int64_t e = lane; e < E; e += 32)
      pg += double(p[e]) * G[e];
    for (int o = 16; o > 0; o >>= 1)
      pg += __shfl_xor_sync(0xffffffffu, pg, o);
    for (int64_t e = lane; e < E; e += 32)
      store(dx[t * E + e], float(double(p[e]) * (G[e] - pg)));
  }
}

//===----------------------------------------------------------------------===//
// cuBLAS, row-major
//===----------------------------------------------------------------------===//

// Row-major C[M, N] = alpha op(A) op(B) + beta C. cuBLAS is column-major, in
// which a row-major matrix reads as its transpose: compute Cᵀ = op(B)ᵀ op(A)ᵀ,
// i.e. swap the operands and M/N and keep the transposition flags.
// T float: f32 operands and result; bf16: CUDA_R_16BF operands and result
// (tensor cores), f32 accumulation and alpha/beta, the result rounded once.
inline cudaDataType_t cudaType(const float *) { return CUDA_R_32F; }
inline cudaDataType_t cudaType(const bf16 *) { return CUDA_R_16BF; }

template <class T>
void gemmRowMajor(cublasHandle_t handle, cudaStream_t stream, bool transA, bool transB, int64_t M,
                  int64_t N, int64_t K, float alpha, const T *A, int64_t lda, const T *B,
                  int64_t ldb, float beta, T *C, int64_t ldc) {
  // cublasSetStream resets the handle's workspace to cuBLAS's own pool
  // (unconditionally, even for the same stream), dropping a workspace the
  // caller set with cublasSetWorkspace: set it only when it changes.
  cudaStream_t current = nullptr;
  FSDP_CUBLAS_CHECK(cublasGetStream(handle, &current));
  if (current != stream)
    FSDP_CUBLAS_CHECK(cublasSetStream(handle, stream));
  const int64_t kMax = 0x7fffffff;
  if (M > kMax || N > kMax || K > kMax || lda > kMax || ldb > kMax || ldc > kMax)
    throw Error("cublasGemmEx: a dimension over 2^31 - 1");
  const cudaDataType_t type = cudaType(C);
  FSDP_CUBLAS_CHECK(cublasGemmEx(handle, transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 transA ? CUBLAS_OP_T : CUBLAS_OP_N, int(N), int(M), int(K), &alpha,
                                 B, type, int(ldb), A, type, int(lda), &beta, C, type, int(ldc),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

//===----------------------------------------------------------------------===//
// The entry points' bodies, one template over the storage type T (float or
// bf16) each; the overloads below forward to them.
//===----------------------------------------------------------------------===//

template <class T>
void embeddingForwardT(const int64_t *ids, const T *table, T *out, int64_t n, int64_t D,
                       cudaStream_t stream) {
  if (n <= 0 || D <= 0)
    return;
  FSDP_LAUNCH(embeddingForwardKernel<T>, gridFor(n * D), kThreads, 0, stream, ids, table, out, n,
              D);
  FSDP_LAUNCH_CHECK();
}

// acc (f32 [V, D]) = 0, then += the rows of dout by id.
template <class T>
void embeddingAccumulate(const T *dout, const int64_t *ids, float *acc, int64_t n, int64_t V,
                         int64_t D, cudaStream_t stream) {
  if (V > 0 && D > 0)
    FSDP_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(float) * V * D, stream));
  if (n <= 0 || D <= 0)
    return;
  FSDP_LAUNCH(embeddingBackwardKernel<T>, gridFor(n * D), kThreads, 0, stream, dout, ids, acc, n,
              D);
  FSDP_LAUNCH_CHECK();
}

template <class T>
void linearForwardT(cublasHandle_t handle, const T *x, const T *w, const T *bias, T *y, int64_t n,
                    int64_t in, int64_t out, Layout layout, cudaStream_t stream) {
  if (n <= 0 || out <= 0)
    return;
  // The bias is broadcast into y and added by the GEMM (beta 1), in f32
  // before its one rounding.
  float beta = 0.0f;
  if (bias) {
    FSDP_LAUNCH(biasBroadcastKernel<T>, gridFor(n * out), kThreads, 0, stream, bias, y, n, out);
    FSDP_LAUNCH_CHECK();
    beta = 1.0f;
  }
  if (in <= 0) {
    if (!bias)
      FSDP_CUDA_CHECK(cudaMemsetAsync(y, 0, sizeof(T) * n * out, stream));
    return;
  }
  if (layout == Layout::InOut)
    gemmRowMajor(handle, stream, false, false, n, out, in, 1.0f, x, in, w, out, beta, y, out);
  else
    gemmRowMajor(handle, stream, false, true, n, out, in, 1.0f, x, in, w, in, beta, y, out);
}

template <class T>
void linearBackwardInputT(cublasHandle_t handle, const T *dy, const T *w, T *dx, int64_t n,
                          int64_t in, int64_t out, Layout layout, cudaStream_t stream) {
  if (n <= 0 || in <= 0)
    return;
  if (out <= 0) {
    FSDP_CUDA_CHECK(cudaMemsetAsync(dx, 0, sizeof(T) * n * in, stream));
    return;
  }
  if (layout == Layout::InOut)
    gemmRowMajor(handle, stream, false, true, n, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
  else
    gemmRowMajor(handle, stream, false, false, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

template <class T>
void linearBackwardWeightT(cublasHandle_t handle, const T *dy, const T *x, T *dw, int64_t n,
                           int64_t in, int64_t out, Layout layout, cudaStream_t stream) {
  if (in <= 0 || out <= 0)
    return;
  if (n <= 0) {
    FSDP_CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(T) * in * out, stream));
    return;
  }
  if (layout == Layout::InOut)
    gemmRowMajor(handle, stream, true, false, in, out, n, 1.0f, x, in, dy, out, 0.0f, dw, out);
  else
    gemmRowMajor(handle, stream, true, false, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in);
}

template <class T>
void biasBackwardT(const T *dy, T *db, int64_t n, int64_t out, cudaStream_t stream) {
  if (out <= 0)
    return;
  const auto kernel = columnSumKernel<0, T>;
  FSDP_LAUNCH(kernel, unsigned((out + 31) / 32), 256, 0, stream, dy, nullptr, nullptr, db, nullptr,
              n, out, 0);
  FSDP_LAUNCH_CHECK();
}

template <class T>
void layerNormForwardT(const T *x, const T *w, const T *b, T *y, int64_t n, int64_t D, double eps,
                       cudaStream_t stream) {
  if (n <= 0 || D <= 0)
    return;
  FSDP_LAUNCH(layerNormForwardKernel<T>, rowGrid(n, "layerNormForward"), kThreads, 0, stream, x, w,
              b, y, D, eps);
  FSDP_LAUNCH_CHECK();
}

template <class T>
void layerNormBackwardT(const T *dy, const T *x, const T *w, T *dx, T *dw, T *db, int64_t n,
                        int64_t D, double eps, float *scratch, cudaStream_t stream) {
  if (D <= 0)
    return;
  if (n > 0) {
    FSDP_LAUNCH(layerNormStatsKernel<T>, rowGrid(n, "layerNormBackward"), kThreads, 0, stream, dy,
                x, w, scratch, D, eps);
    FSDP_LAUNCH_CHECK();
  }
  const auto sums = columnSumKernel<1, T>;
  FSDP_LAUNCH(sums, unsigned((D + 31) / 32), 256, 0, stream, dy, x, scratch, dw, db, n, D, 4);
  FSDP_LAUNCH_CHECK();
  if (n > 0) {
    FSDP_LAUNCH(layerNormDxKernel<T>, gridFor(n * D), kThreads, 0, stream, dy, x, w, scratch, dx, n,
                D);
    FSDP_LAUNCH_CHECK();
  }
}

template <class T>
void rmsNormForwardT(const T *x, const T *w, T *y, int64_t n, int64_t D, double eps,
                     cudaStream_t stream) {
  if (n <= 0 || D <= 0)
    return;
  FSDP_LAUNCH(rmsNormForwardKernel<T>, rowGrid(n, "rmsNormForward"), kThreads, 0, stream, x, w, y,
              D, eps);
  FSDP_LAUNCH_CHECK();
}

template <class T>
void rmsNormBackwardT(const T *dy, const T *x, const T *w, T *dx, T *dw, int64_t n, int64_t D,
                      double eps, float *scratch, cudaStream_t stream) {
  if (D <= 0)
    return;
  if (n > 0) {
    FSDP_LAUNCH(rmsNormStatsKernel<T>, rowGrid(n, "rmsNormBackward"), kThreads, 0, stream, dy, x, w,
                scratch, D, eps);
    FSDP_LAUNCH_CHECK();
  }
  const auto sums = columnSumKernel<2, T>;
  FSDP_LAUNCH(sums, unsigned((D + 31) / 32), 256, 0, stream, dy, x, scratch, dw, nullptr, n, D, 2);
  FSDP_LAUNCH_CHECK();
  if (n > 0) {
    FSDP_LAUNCH(rmsNormDxKernel<T>, gridFor(n * D), kThreads, 0, stream, dy, x, w, scratch, dx, n,
                D);
    FSDP_LAUNCH_CHECK();
  }
}

template <class T>
void ropeT(const T *x, T *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
           const RopeScaling *scaling, bool inverse, cudaStream_t stream) {
  const int64_t rows = B * S, half = Dh / 2;
  if (rows <= 0 || H <= 0 || Dh <= 0)
    return;
  const float af = fsdp::kernels::ropeAttentionFactor(scaling);
  for (int64_t i0 = 0; i0 < half; i0 += kRopeChunk) {
    const int w = int(std::min<int64_t>(kRopeChunk, half - i0));
    InvFreqChunk inv{};
    for (int i = 0; i < w; ++i)
      inv.v[i] = invFreqHost(i0 + i, Dh, theta, scaling);
    FSDP_LAUNCH(ropeKernel<T>, gridFor(rows * H * w), kThreads, 0, stream, x, y, rows, S, H, Dh, i0,
                w, inv, af, inverse);
    FSDP_LAUNCH_CHECK();
  }
  if (Dh % 2) {
    FSDP_LAUNCH(ropeOddTailKernel<T>, gridFor(rows * H), kThreads, 0, stream, x, y, rows, H, Dh);
    FSDP_LAUNCH_CHECK();
  }
}

template <class T>
void splitT(const T *x, T *const *outs, int64_t parts, int64_t n, int64_t W, cudaStream_t stream) {
  if (n <= 0 || W <= 0)
    return;
  for (int64_t p = 0; p < parts; ++p)
    FSDP_CUDA_CHECK(cudaMemcpy2DAsync(outs[p], sizeof(T) * W, x + p * W, sizeof(T) * parts * W,
                                      sizeof(T) * W, size_t(n), cudaMemcpyDeviceToDevice, stream));
}

template <class T>
void concatT(const T *const *ins, T *y, int64_t parts, int64_t n, int64_t W, cudaStream_t stream) {
  if (n <= 0 || W <= 0)
    return;
  for (int64_t p = 0; p < parts; ++p)
    FSDP_CUDA_CHECK(cudaMemcpy2DAsync(y + p * W, sizeof(T) * parts * W, ins[p], sizeof(T) * W,
                                      sizeof(T) * W, size_t(n), cudaMemcpyDeviceToDevice, stream));
}

#define FSDP_DH_DISPATCH(Dh, CALL)                                                                 \
  do {                                                                                             \
    if ((Dh) <= 64) {                                                                              \
      constexpr int kMaxDh = 64;                                                                   \
      CALL;                                                                                        \
    } else if ((Dh) <= 128) {                                                                      \
      constexpr int kMaxDh = 128;                                                                  \
      CALL;                                                                                        \
    } else if ((Dh) <= 256) {                                                                      \
      constexpr int kMaxDh = 256;                                                                  \
      CALL;                                                                                        \
    } else {                                                                                       \
      throw Error("attention: head dim " + std::to_string(Dh) + " > 256");                         \
    }                                                                                              \
  } while (0)

// The attention kernels put a (batch, head) in grid.y: B * H of them (B * KV
// for dk/dv, KV <= H).
void checkAttentionGrid(int64_t B, int64_t H, const char *call) {
  if (B * H > kMaxGridY)
    throw Error(std::string(call) + ": batch " + std::to_string(B) + " x " + std::to_string(H) +
                " heads = " + std::to_string(B * H) + " blocks in grid.y, over CUDA's 65535");
}

template <class T>
void attentionForwardT(const T *q, const T *k, const T *v, T *out, int64_t B, int64_t S, int64_t H,
                       int64_t KV, int64_t Dh, bool causal, int64_t window, cudaStream_t stream) {
  if (B <= 0 || S <= 0 || H <= 0 || Dh <= 0)
    return;
  checkAttentionGrid(B, H, "attentionForward");
  FSDP_DH_DISPATCH(Dh, (attentionForwardLaunch<kMaxDh>(q, k, v, out, nullptr, B, S, H, KV, int(Dh),
                                                       false, causal, window, stream)));
}

template <class T>
void attentionBackwardT(const T *dout, const T *q, const T *k, const T *v, const T *out, T *dq,
                        T *dk, T *dv, int64_t B, int64_t S, int64_t H, int64_t KV, int64_t Dh,
                        bool causal, int64_t window, float *scratch, cudaStream_t stream) {
  if (B <= 0 || S <= 0 || H <= 0 || Dh <= 0)
    return;
  checkAttentionGrid(B, H, "attentionBackward");
  float *lse = scratch, *Dv = scratch + B * H * S;
  FSDP_DH_DISPATCH(Dh,
                   (attentionForwardLaunch<kMaxDh>(q, k, v, static_cast<T *>(nullptr), lse, B, S, H,
                                                   KV, int(Dh), true, causal, window, stream)));
  const int64_t rows = B * H * S;
  FSDP_LAUNCH(attentionRowDotKernel<T>, gridFor(rows * 32), kThreads, 0, stream, dout, out, Dv, B,
              S, H, int(Dh));
  FSDP_LAUNCH_CHECK();
  FSDP_DH_DISPATCH(Dh, (attentionBackwardLaunch<kMaxDh>(dout, q, k, v, lse, Dv, dq, dk, dv, B, S, H,
                                                        KV, int(Dh), causal, window, stream)));
}

// One thread an element: the launch of every element-wise kernel.
template <typename... Params, typename... Args>
void launchElementwise(void (*kernel)(Params...), int64_t n, cudaStream_t stream, Args... args) {
  if (n <= 0)
    return;
  FSDP_LAUNCH(kernel, gridFor(n), kThreads, 0, stream, args...);
  FSDP_LAUNCH_CHECK();
}

template <class T>
void crossEntropyForwardT(const T *logits, const int64_t *targets, float *loss, int64_t n,
                          int64_t V, double *scratch, cudaStream_t stream) {
  if (n > 0) {
    FSDP_LAUNCH(crossEntropyRowKernel<T>, rowGrid(n, "crossEntropyForward"), kThreads, 0, stream,
                logits, targets, scratch, V);
    FSDP_LAUNCH_CHECK();
  }
  FSDP_LAUNCH(meanKernel, 1, 1024, 0, stream, scratch, targets, loss, n);
  FSDP_LAUNCH_CHECK();
}

template <class T>
void crossEntropyBackwardT(const T *logits, const int64_t *targets, T *dlogits, int64_t n,
                           int64_t V, float scale, cudaStream_t stream) {
  if (n <= 0 || V <= 0)
    return;
  FSDP_LAUNCH(crossEntropyBackwardKernel<T>, rowGrid(n, "crossEntropyBackward"), kThreads, 0,
              stream, logits, targets, dlogits, V, scale);
  FSDP_LAUNCH_CHECK();
}

// The limits of the MoE kernels (cuda.h), checked before any launch: k
// and the routed rows n k; with E (> 0), the experts too.
void checkMoe(const char *call, int64_t n, int64_t k, int64_t E = 0) {
  auto refuse = [&](const std::string &why) { throw Error(std::string(call) + ": " + why); };
  if (k < 1 || k > kernels::kMaxTopK || (E > 0 && k > E))
    refuse("top_k " + std::to_string(k) + ": the kernels take 1 to min(E, " +
           std::to_string(kernels::kMaxTopK) + ")");
  if (n < 0 || n > kMaxGridX / k)
    refuse(std::to_string(n) + " tokens x top_k " + std::to_string(k) +
           " routed rows: over the kernels' 2^31 - 1 (int32 counts)");
  if (E != 0 && (E < 1 || E > kMoeMaxExperts))
    refuse(std::to_string(E) + " experts: the CUDA kernels take 1 to " +
           std::to_string(kMoeMaxExperts) + " (per-expert counters and each row's " +
           "probabilities in shared memory)");
}

// Blocks of `warps` warps, a row a warp, grid-strided over n rows.
inline unsigned moeRowBlocks(int64_t n, int warps) { return gridFor(n, warps); }

template <class T>
void moeRouteForwardT(const T *logits, T *weights, int64_t *experts, int64_t *slots, int64_t n,
                      int64_t E, int64_t k, bool normalize, float *scratch, cudaStream_t stream) {
  checkMoe("moeRouteForward", n, k, E);
  if (n == 0)
    return;
  const size_t perWarp = 8 * size_t(E);
  const int warps = moeWarps(perWarp);
  FSDP_LAUNCH(moeRouteKernel<T>, moeRowBlocks(n, warps), 32 * warps, warps * perWarp, stream,
              logits, weights, experts, n, E, int(k), normalize);
  FSDP_LAUNCH_CHECK();
  // The slots: chunks' counts, their scan, each pair's rank.
  int64_t *start = reinterpret_cast<int64_t *>(scratch);
  int *before = reinterpret_cast<int *>(start + E + 1);
  const int64_t nk = n * k, chunks = (nk + kMoeChunk - 1) / kMoeChunk;
  FSDP_LAUNCH(moeChunkCountKernel, unsigned(chunks), unsigned(kMoeChunk), sizeof(int) * size_t(E),
              stream, experts, nk, E, before);
  FSDP_LAUNCH_CHECK();
  FSDP_LAUNCH(moeChunkScanKernel, 1, 1024, 0, stream, before, chunks, E, start);
  FSDP_LAUNCH_CHECK();
  FSDP_LAUNCH(moeSlotKernel, unsigned(chunks), unsigned(kMoeChunk), 0, stream, experts, nk, E,
              before, start, slots);
  FSDP_LAUNCH_CHECK();
}

template <class T>
void moeRouteBackwardT(const T *dweights, const T *logits, const int64_t *experts, T *dlogits,
                       int64_t n, int64_t E, int64_t k, bool normalize, cudaStream_t stream) {
  checkMoe("moeRouteBackward", n, k, E);
  if (n == 0)
    return;
  const size_t perWarp = 8 * size_t(E);
  const int warps = moeWarps(perWarp);
  FSDP_LAUNCH(moeRouteBackwardKernel<T>, moeRowBlocks(n, warps), 32 * warps, warps * perWarp,
              stream, dweights, logits, experts, dlogits, n, E, int(k), normalize);
  FSDP_LAUNCH_CHECK();
}

// The permute's gradient (weights null) and the combine: a block a token.
template <class T>
void moeGatherT(const T *rows, const T *weights, const int64_t *slots, T *y, int64_t n, int64_t k,
                int64_t D, const char *call, cudaStream_t stream) {
  checkMoe(call, n, k);
  if (n == 0 || D <= 0)
    return;
  FSDP_LAUNCH(moeGatherKernel<T>, rowGrid(n, call), kThreads, 0, stream, rows, weights, slots, y, k,
              D);
  FSDP_LAUNCH_CHECK();
}

// moe_linear's row starts and tile starts (scratch), then `each(e0, count,
// pointers)` for every kMoePointers experts.
template <class F>
void moeLinearLaunches(const int64_t *experts, int64_t nk, int64_t E, float *scratch,
                       cudaStream_t stream, F each) {
  int64_t *start = reinterpret_cast<int64_t *>(scratch), *tiles = start + E + 1;
  FSDP_LAUNCH(moeRowStartsKernel, 1, 1024, sizeof(int) * size_t(E), stream, experts, nk, E, start,
              tiles);
  FSDP_LAUNCH_CHECK();
  for (int64_t e0 = 0; e0 < E; e0 += kMoePointers)
    each(e0, std::min(kMoePointers, E - e0), start, tiles);
}

template <class T>
void moeLinearRowsT(const T *a, const int64_t *experts, const T *const *w, T *c, int64_t n,
                    int64_t k, int64_t E, int64_t in, int64_t out, float *scratch, bool forward,
                    cudaStream_t stream) {
  const char *call = forward ? "moeLinearForward" : "moeLinearBackwardInput";
  checkMoe(call, n, k, E);
  const int64_t nk = n * k, cols = forward ? out : in;
  if (nk == 0 || cols <= 0)
    return;
  if ((forward ? in : out) <= 0) { // an empty contraction
    FSDP_CUDA_CHECK(cudaMemsetAsync(c, 0, sizeof(T) * size_t(nk * cols), stream));
    return;
  }
  const int64_t colTiles = (cols + kMoeTile - 1) / kMoeTile;
  if (colTiles > kMaxGridY)
    throw Error(std::string(call) + ": " + std::to_string(cols) +
                " columns: over CUDA's 65535 blocks of 64 in grid.y");
  moeLinearLaunches(experts, nk, E, scratch, stream,
                    [&](int64_t e0, int64_t count, const int64_t *start, const int64_t *tiles) {
                      MoePointers<const T *> ptrs{};
                      for (int64_t i = 0; i < count; ++i)
                        ptrs.p[i] = w[e0 + i];
                      const dim3 grid(unsigned((nk + kMoeTile - 1) / kMoeTile + count),
                                      unsigned(colTiles));
                      FSDP_LAUNCH(moeLinearRowsKernel<T>, grid, kMoeGemmThreads, 0, stream, a, ptrs,
                                  c, start, tiles, e0, count, in, out, forward);
                      FSDP_LAUNCH_CHECK();
                    });
}

template <class T>
void moeLinearBackwardWeightT(const T *dy, const T *x, const int64_t *experts, T *const *dw,
                              int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                              float *scratch, cudaStream_t stream) {
  checkMoe("moeLinearBackwardWeight", n, k, E);
  if (in <= 0 || out <= 0)
    return;
  const int64_t tiles = ((out + kMoeTile - 1) / kMoeTile) * ((in + kMoeTile - 1) / kMoeTile);
  if (tiles > kMaxGridX)
    throw Error("moeLinearBackwardWeight: [" + std::to_string(out) + ", " + std::to_string(in) +
                "] weights: over CUDA's 2^31 - 1 blocks of 64 x 64");
  moeLinearLaunches(experts, n * k, E, scratch, stream,
                    [&](int64_t e0, int64_t count, const int64_t *start, const int64_t *) {
                      MoePointers<T *> ptrs{};
                      for (int64_t i = 0; i < count; ++i)
                        ptrs.p[i] = dw[e0 + i];
                      FSDP_LAUNCH(moeLinearWeightKernel<T>, dim3(unsigned(tiles), unsigned(count)),
                                  kMoeGemmThreads, 0, stream, dy, x, ptrs, start, e0, in, out);
                      FSDP_LAUNCH_CHECK();
                    });
}

template <class T>
void moeCombineBackwardT(const T *dy, const T *packed, const T *weights, const int64_t *slots,
                         T *dpacked, T *dweights, int64_t n, int64_t k, int64_t D,
                         cudaStream_t stream) {
  checkMoe("moeCombineBackward", n, k);
  if (n == 0)
    return;
  FSDP_LAUNCH(moeCombineBackwardKernel<T>, rowGrid(n, "moeCombineBackward"), kThreads, 0, stream,
              dy, packed, weights, slots, dpacked, dweights, k, D);
  FSDP_LAUNCH_CHECK();
}

// The aux loss's layout of scratch (cuda.h, moeAuxLossScratchFloats).
struct MoeAuxScratch {
  double *partial, *perExpert;
  int *counts;
  int64_t slots;
};
MoeAuxScratch moeAuxScratch(float *scratch, int64_t layers, int64_t n, int64_t E) {
  MoeAuxScratch s;
  s.slots = layers * ((n + kMoeAuxRows - 1) / kMoeAuxRows);
  s.partial = reinterpret_cast<double *>(scratch);
  s.perExpert = s.partial + s.slots * E;
  s.counts = reinterpret_cast<int *>(s.perExpert + E);
  return s;
}

// counts (zeroed first) and, with partial, the blocks' sums of p, over
// every layer, kMoePointers layers a launch.
template <class T>
void moeAuxStatsT(const T *const *logits, int64_t layers, int64_t n, int64_t E, int64_t k,
                  int *counts, double *partial, cudaStream_t stream) {
  FSDP_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(int) * size_t(k * E), stream));
  const int64_t perLayer = (n + kMoeAuxRows - 1) / kMoeAuxRows;
  if (perLayer == 0)
    return;
  const size_t perWarp = 16 * size_t(E);
  const int warps = moeWarps(perWarp);
  for (int64_t l0 = 0; l0 < layers; l0 += kMoePointers) {
    const int64_t count = std::min(kMoePointers, layers - l0);
    MoePointers<const T *> ptrs{};
    for (int64_t i = 0; i < count; ++i)
      ptrs.p[i] = logits[l0 + i];
    FSDP_LAUNCH(moeAuxStatsKernel<T>, dim3(unsigned(perLayer), unsigned(count)), 32 * warps,
                warps * perWarp, stream, ptrs, l0, n, E, int(k), counts, partial);
    FSDP_LAUNCH_CHECK();
  }
}

template <class T>
void moeAuxLossForwardT(const float *loss, const T *const *logits, float *out, int64_t layers,
                        int64_t n, int64_t E, int64_t k, double coef, float *scratch,
                        cudaStream_t stream) {
  checkMoe("moeAuxLossForward", n, k, E);
  const MoeAuxScratch s = moeAuxScratch(scratch, layers, n, E);
  moeAuxStatsT(logits, layers, n, E, k, s.counts, s.partial, stream);
  const double R = double(layers) * double(n);
  FSDP_LAUNCH(moeAuxLossKernel, 1, kThreads, 0, stream, loss, s.counts, s.partial, s.slots,
              s.perExpert, E, int(k), R, coef * double(E), out);
  FSDP_LAUNCH_CHECK();
}

template <class T>
void moeAuxLossBackwardT(const T *const *logits, T *const *dlogits, int64_t layers, int64_t n,
                         int64_t E, int64_t k, double coef, float lossScale, float *scratch,
                         cudaStream_t stream) {
  checkMoe("moeAuxLossBackward", n, k, E);
  if (n == 0 || layers <= 0)
    return;
  const MoeAuxScratch s = moeAuxScratch(scratch, layers, n, E);
  moeAuxStatsT(logits, layers, n, E, k, s.counts, static_cast<double *>(nullptr), stream);
  // The CPU's factor, the same double expression.
  const double R = double(layers) * double(n);
  const double scale = coef * double(E) / (R * R) * double(n) * double(lossScale);
  FSDP_LAUNCH(moeAuxFactorKernel, gridFor(E), kThreads, 0, stream, s.counts, E, int(k), scale,
              s.perExpert);
  FSDP_LAUNCH_CHECK();
  const size_t perWarp = 4 * size_t(E);
  const int warps = moeWarps(perWarp);
  for (int64_t l0 = 0; l0 < layers; l0 += kMoePointers) {
    const int64_t count = std::min(kMoePointers, layers - l0);
    MoePointers<const T *> in{};
    MoePointers<T *> outs{};
    for (int64_t i = 0; i < count; ++i) {
      in.p[i] = logits[l0 + i];
      outs.p[i] = dlogits[l0 + i];
    }
    FSDP_LAUNCH(moeAuxGradKernel<T>, dim3(moeRowBlocks(n, warps), unsigned(count)), 32 * warps,
                warps * perWarp, stream, in, outs, n, E, static_cast<const double *>(s.perExpert));
    FSDP_LAUNCH_CHECK();
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points, f32 and bf16
//===----------------------------------------------------------------------===//

void embeddingForward(const int64_t *ids, const float *table, float *out, int64_t n, int64_t D,
                      cudaStream_t stream) {
  embeddingForwardT(ids, table, out, n, D, stream);
}
void embeddingForward(const int64_t *ids, const bf16 *table, bf16 *out, int64_t n, int64_t D,
                      cudaStream_t stream) {
  embeddingForwardT(ids, table, out, n, D, stream);
}

void embeddingBackward(const float *dout, const int64_t *ids, float *dtable, int64_t n, int64_t V,
                       int64_t D, cudaStream_t stream) {
  embeddingAccumulate(dout, ids, dtable, n, V, D, stream);
}
void embeddingBackward(const bf16 *dout, const int64_t *ids, bf16 *dtable, int64_t n, int64_t V,
                       int64_t D, float *scratch, cudaStream_t stream) {
  embeddingAccumulate(dout, ids, scratch, n, V, D, stream);
  toBf16(scratch, dtable, V * D, stream);
}

void positionIds(int64_t *out, int64_t B, int64_t S, cudaStream_t stream) {
  if (B <= 0 || S <= 0)
    return;
  FSDP_LAUNCH(positionIdsKernel, gridFor(B * S), kThreads, 0, stream, out, B, S);
  FSDP_LAUNCH_CHECK();
}

void tokenTypeIds(int64_t *out, int64_t B, int64_t S, cudaStream_t stream) {
  if (B <= 0 || S <= 0)
    return;
  FSDP_LAUNCH(tokenTypeIdsKernel, gridFor(B * S), kThreads, 0, stream, out, B * S);
  FSDP_LAUNCH_CHECK();
}

void linearForward(cublasHandle_t handle, const float *x, const float *w, const float *bias,
                   float *y, int64_t n, int64_t in, int64_t out, Layout layout,
                   cudaStream_t stream) {
  linearForwardT(handle, x, w, bias, y, n, in, out, layout, stream);
}
void linearForward(cublasHandle_t handle, const bf16 *x, const bf16 *w, const bf16 *bias, bf16 *y,
                   int64_t n, int64_t in, int64_t out, Layout layout, cudaStream_t stream) {
  linearForwardT(handle, x, w, bias, y, n, in, out, layout, stream);
}

void linearBackwardInput(cublasHandle_t handle, const float *dy, const float *w, float *dx,
                         int64_t n, int64_t in, int64_t out, Layout layout, cudaStream_t stream) {
  linearBackwardInputT(handle, dy, w, dx, n, in, out, layout, stream);
}
void linearBackwardInput(cublasHandle_t handle, const bf16 *dy, const bf16 *w, bf16 *dx, int64_t n,
                         int64_t in, int64_t out, Layout layout, cudaStream_t stream) {
  linearBackwardInputT(handle, dy, w, dx, n, in, out, layout, stream);
}

void linearBackwardWeight(cublasHandle_t handle, const float *dy, const float *x, float *dw,
                          int64_t n, int64_t in, int64_t out, Layout layout, cudaStream_t stream) {
  linearBackwardWeightT(handle, dy, x, dw, n, in, out, layout, stream);
}
void linearBackwardWeight(cublasHandle_t handle, const bf16 *dy, const bf16 *x, bf16 *dw, int64_t n,
                          int64_t in, int64_t out, Layout layout, cudaStream_t stream) {
  linearBackwardWeightT(handle, dy, x, dw, n, in, out, layout, stream);
}

void biasBackward(const float *dy, float *db, int64_t n, int64_t out, cudaStream_t stream) {
  biasBackwardT(dy, db, n, out, stream);
}
void biasBackward(const bf16 *dy, bf16 *db, int64_t n, int64_t out, cudaStream_t stream) {
  biasBackwardT(dy, db, n, out, stream);
}

void layerNormForward(const float *x, const float *w, const float *b, float *y, int64_t n,
                      int64_t D, double eps, cudaStream_t stream) {
  layerNormForwardT(x, w, b, y, n, D, eps, stream);
}
void layerNormForward(const bf16 *x, const bf16 *w, const bf16 *b, bf16 *y, int64_t n, int64_t D,
                      double eps, cudaStream_t stream) {
  layerNormForwardT(x, w, b, y, n, D, eps, stream);
}

void layerNormBackward(const float *dy, const float *x, const float *w, float *dx, float *dw,
                       float *db, int64_t n, int64_t D, double eps, float *scratch,
                       cudaStream_t stream) {
  layerNormBackwardT(dy, x, w, dx, dw, db, n, D, eps, scratch, stream);
}
void layerNormBackward(const bf16 *dy, const bf16 *x, const bf16 *w, bf16 *dx, bf16 *dw, bf16 *db,
                       int64_t n, int64_t D, double eps, float *scratch, cudaStream_t stream) {
  layerNormBackwardT(dy, x, w, dx, dw, db, n, D, eps, scratch, stream);
}

void rmsNormForward(const float *x, const float *w, float *y, int64_t n, int64_t D, double eps,
                    cudaStream_t stream) {
  rmsNormForwardT(x, w, y, n, D, eps, stream);
}
void rmsNormForward(const bf16 *x, const bf16 *w, bf16 *y, int64_t n, int64_t D, double eps,
                    cudaStream_t stream) {
  rmsNormForwardT(x, w, y, n, D, eps, stream);
}

void rmsNormBackward(const float *dy, const float *x, const float *w, float *dx, float *dw,
                     int64_t n, int64_t D, double eps, float *scratch, cudaStream_t stream) {
  rmsNormBackwardT(dy, x, w, dx, dw, n, D, eps, scratch, stream);
}
void rmsNormBackward(const bf16 *dy, const bf16 *x, const bf16 *w, bf16 *dx, bf16 *dw, int64_t n,
                     int64_t D, double eps, float *scratch, cudaStream_t stream) {
  rmsNormBackwardT(dy, x, w, dx, dw, n, D, eps, scratch, stream);
}

void rope(const float *x, float *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
          const RopeScaling *scaling, bool inverse, cudaStream_t stream) {
  ropeT(x, y, B, S, H, Dh, theta, scaling, inverse, stream);
}
void rope(const bf16 *x, bf16 *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
          const RopeScaling *scaling, bool inverse, cudaStream_t stream) {
  ropeT(x, y, B, S, H, Dh, theta, scaling, inverse, stream);
}

void split(const float *x, float *const *outs, int64_t parts, int64_t n, int64_t W,
           cudaStream_t stream) {
  splitT(x, outs, parts, n, W, stream);
}
void split(const bf16 *x, bf16 *const *outs, int64_t parts, int64_t n, int64_t W,
           cudaStream_t stream) {
  splitT(x, outs, parts, n, W, stream);
}

void concat(const float *const *ins, float *y, int64_t parts, int64_t n, int64_t W,
            cudaStream_t stream) {
  concatT(ins, y, parts, n, W, stream);
}
void concat(const bf16 *const *ins, bf16 *y, int64_t parts, int64_t n, int64_t W,
            cudaStream_t stream) {
  concatT(ins, y, parts, n, W, stream);
}

void attentionForward(const float *q, const float *k, const float *v, float *out, int64_t B,
                      int64_t S, int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                      cudaStream_t stream) {
  attentionForwardT(q, k, v, out, B, S, H, KV, Dh, causal, window, stream);
}
void attentionForward(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *out, int64_t B, int64_t S,
                      int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                      cudaStream_t stream) {
  attentionForwardT(q, k, v, out, B, S, H, KV, Dh, causal, window, stream);
}

void attentionBackward(const float *dout, const float *q, const float *k, const float *v,
                       const float *out, float *dq, float *dk, float *dv, int64_t B, int64_t S,
                       int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                       float *scratch, cudaStream_t stream) {
  attentionBackwardT(dout, q, k, v, out, dq, dk, dv, B, S, H, KV, Dh, causal, window, scratch,
                     stream);
}
void attentionBackward(const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
                       const bf16 *out, bf16 *dq, bf16 *dk, bf16 *dv, int64_t B, int64_t S,
                       int64_t H, int64_t KV, int64_t Dh, bool causal, int64_t window,
                       float *scratch, cudaStream_t stream) {
  attentionBackwardT(dout, q, k, v, out, dq, dk, dv, B, S, H, KV, Dh, causal, window, scratch,
                     stream);
}

void geluForward(const float *x, float *y, int64_t n, bool tanh, cudaStream_t stream) {
  launchElementwise(geluForwardKernel<float>, n, stream, x, y, n, tanh);
}
void geluForward(const bf16 *x, bf16 *y, int64_t n, bool tanh, cudaStream_t stream) {
  launchElementwise(geluForwardKernel<bf16>, n, stream, x, y, n, tanh);
}

void geluBackward(const float *dy, const float *x, float *dx, int64_t n, bool tanh,
                  cudaStream_t stream) {
  launchElementwise(geluBackwardKernel<float>, n, stream, dy, x, dx, n, tanh);
}
void geluBackward(const bf16 *dy, const bf16 *x, bf16 *dx, int64_t n, bool tanh,
                  cudaStream_t stream) {
  launchElementwise(geluBackwardKernel<bf16>, n, stream, dy, x, dx, n, tanh);
}

void siluMulForward(const float *gate, const float *up, float *y, int64_t n, cudaStream_t stream) {
  launchElementwise(siluMulForwardKernel<float>, n, stream, gate, up, y, n);
}
void siluMulForward(const bf16 *gate, const bf16 *up, bf16 *y, int64_t n, cudaStream_t stream) {
  launchElementwise(siluMulForwardKernel<bf16>, n, stream, gate, up, y, n);
}

void siluMulBackward(const float *dy, const float *gate, const float *up, float *dgate, float *dup,
                     int64_t n, cudaStream_t stream) {
  launchElementwise(siluMulBackwardKernel<float>, n, stream, dy, gate, up, dgate, dup, n);
}
void siluMulBackward(const bf16 *dy, const bf16 *gate, const bf16 *up, bf16 *dgate, bf16 *dup,
                     int64_t n, cudaStream_t stream) {
  launchElementwise(siluMulBackwardKernel<bf16>, n, stream, dy, gate, up, dgate, dup, n);
}

void add(const float *a, const float *b, float *y, int64_t n, cudaStream_t stream) {
  launchElementwise(addKernel<float>, n, stream, a, b, y, n);
}
void addBias(float *x, const float *bias, int64_t rows, int64_t D, cudaStream_t stream) {
  launchElementwise(addBiasKernel, rows * D, stream, x, bias, rows, D);
}
void add(const bf16 *a, const bf16 *b, bf16 *y, int64_t n, cudaStream_t stream) {
  launchElementwise(addKernel<bf16>, n, stream, a, b, y, n);
}

namespace {
template <class T>
void classTokenForwardT(const T *x, const T *cls, const T *pos, T *y, int64_t B, int64_t S,
                        int64_t D, cudaStream_t stream) {
  launchElementwise(classTokenForwardKernel<T>, B * S * D, stream, x, cls, pos, y, B, S, D);
}
template <class T>
void classTokenBackwardT(const T *dy, T *dx, T *dcls, T *dpos, int64_t B, int64_t S, int64_t D,
                         cudaStream_t stream) {
  launchElementwise(classTokenInputGradKernel<T>, B * (S - 1) * D, stream, dy, dx, B, S, D);
  launchElementwise(classTokenParamGradKernel<T>, S * D, stream, dy, dcls, dpos, B, S, D);
}
} // namespace

void classTokenForward(const float *x, const float *cls, const float *pos, float *y, int64_t B,
                       int64_t S, int64_t D, cudaStream_t stream) {
  classTokenForwardT(x, cls, pos, y, B, S, D, stream);
}
void classTokenForward(const bf16 *x, const bf16 *cls, const bf16 *pos, bf16 *y, int64_t B,
                       int64_t S, int64_t D, cudaStream_t stream) {
  classTokenForwardT(x, cls, pos, y, B, S, D, stream);
}
void classTokenBackward(const float *dy, float *dx, float *dcls, float *dpos, int64_t B, int64_t S,
                        int64_t D, cudaStream_t stream) {
  classTokenBackwardT(dy, dx, dcls, dpos, B, S, D, stream);
}
void classTokenBackward(const bf16 *dy, bf16 *dx, bf16 *dcls, bf16 *dpos, int64_t B, int64_t S,
                        int64_t D, cudaStream_t stream) {
  classTokenBackwardT(dy, dx, dcls, dpos, B, S, D, stream);
}

void firstTokenForward(const float *x, float *y, int64_t B, int64_t S, int64_t D,
                       cudaStream_t stream) {
  launchElementwise(firstTokenForwardKernel<float>, B * D, stream, x, y, B, S, D);
}
void firstTokenForward(const bf16 *x, bf16 *y, int64_t B, int64_t S, int64_t D,
                       cudaStream_t stream) {
  launchElementwise(firstTokenForwardKernel<bf16>, B * D, stream, x, y, B, S, D);
}
void firstTokenBackward(const float *dy, float *dx, int64_t B, int64_t S, int64_t D,
                        cudaStream_t stream) {
  launchElementwise(firstTokenBackwardKernel<float>, B * S * D, stream, dy, dx, B, S, D);
}
void firstTokenBackward(const bf16 *dy, bf16 *dx, int64_t B, int64_t S, int64_t D,
                        cudaStream_t stream) {
  launchElementwise(firstTokenBackwardKernel<bf16>, B * S * D, stream, dy, dx, B, S, D);
}

void crossEntropyForward(const float *logits, const int64_t *targets, float *loss, int64_t n,
                         int64_t V, double *scratch, cudaStream_t stream) {
  crossEntropyForwardT(logits, targets, loss, n, V, scratch, stream);
}
void crossEntropyForward(const bf16 *logits, const int64_t *targets, float *loss, int64_t n,
                         int64_t V, double *scratch, cudaStream_t stream) {
  crossEntropyForwardT(logits, targets, loss, n, V, scratch, stream);
}

void crossEntropyBackward(const float *logits, const int64_t *targets, float *dlogits, int64_t n,
                          int64_t V, float scale, cudaStream_t stream) {
  crossEntropyBackwardT(logits, targets, dlogits, n, V, scale, stream);
}
void crossEntropyBackward(const bf16 *logits, const int64_t *targets, bf16 *dlogits, int64_t n,
                          int64_t V, float scale, cudaStream_t stream) {
  crossEntropyBackwardT(logits, targets, dlogits, n, V, scale, stream);
}

void moeRouteForward(const float *logits, float *weights, int64_t *experts, int64_t *slots,
                     int64_t n, int64_t E, int64_t k, bool normalize, float *scratch,
                     cudaStream_t stream) {
  moeRouteForwardT(logits, weights, experts, slots, n, E, k, normalize, scratch, stream);
}
void moeRouteForward(const bf16 *logits, bf16 *weights, int64_t *experts, int64_t *slots, int64_t n,
                     int64_t E, int64_t k, bool normalize, float *scratch, cudaStream_t stream) {
  moeRouteForwardT(logits, weights, experts, slots, n, E, k, normalize, scratch, stream);
}

void moeRouteBackward(const float *dweights, const float *logits, const int64_t *experts,
                      float *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                      cudaStream_t stream) {
  moeRouteBackwardT(dweights, logits, experts, dlogits, n, E, k, normalize, stream);
}
void moeRouteBackward(const bf16 *dweights, const bf16 *logits, const int64_t *experts,
                      bf16 *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                      cudaStream_t stream) {
  moeRouteBackwardT(dweights, logits, experts, dlogits, n, E, k, normalize, stream);
}

namespace {
template <class T>
void moePermuteForwardT(const T *x, const int64_t *slots, T *packed, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream) {
  checkMoe("moePermuteForward", n, k);
  launchElementwise(moePermuteKernel<T>, n * k * D, stream, x, slots, packed, n, k, D);
}
} // namespace

void moePermuteForward(const float *x, const int64_t *slots, float *packed, int64_t n, int64_t k,
                       int64_t D, cudaStream_t stream) {
  moePermuteForwardT(x, slots, packed, n, k, D, stream);
}
void moePermuteForward(const bf16 *x, const int64_t *slots, bf16 *packed, int64_t n, int64_t k,
                       int64_t D, cudaStream_t stream) {
  moePermuteForwardT(x, slots, packed, n, k, D, stream);
}

void moePermuteBackward(const float *dpacked, const int64_t *slots, float *dx, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream) {
  moeGatherT(dpacked, static_cast<const float *>(nullptr), slots, dx, n, k, D, "moePermuteBackward",
             stream);
}
void moePermuteBackward(const bf16 *dpacked, const int64_t *slots, bf16 *dx, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream) {
  moeGatherT(dpacked, static_cast<const bf16 *>(nullptr), slots, dx, n, k, D, "moePermuteBackward",
             stream);
}

void moeLinearForward(const float *x, const int64_t *experts, const float *const *w, float *y,
                      int64_t n, int64_t k, int64_t E, int64_t in, int64_t out, float *scratch,
                      cudaStream_t stream) {
  moeLinearRowsT(x, experts, w, y, n, k, E, in, out, scratch, true, stream);
}
void moeLinearForward(const bf16 *x, const int64_t *experts, const bf16 *const *w, bf16 *y,
                      int64_t n, int64_t k, int64_t E, int64_t in, int64_t out, float *scratch,
                      cudaStream_t stream) {
  moeLinearRowsT(x, experts, w, y, n, k, E, in, out, scratch, true, stream);
}

void moeLinearBackwardInput(const float *dy, const int64_t *experts, const float *const *w,
                            float *dx, int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                            float *scratch, cudaStream_t stream) {
  moeLinearRowsT(dy, experts, w, dx, n, k, E, in, out, scratch, false, stream);
}
void moeLinearBackwardInput(const bf16 *dy, const int64_t *experts, const bf16 *const *w, bf16 *dx,
                            int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                            float *scratch, cudaStream_t stream) {
  moeLinearRowsT(dy, experts, w, dx, n, k, E, in, out, scratch, false, stream);
}

void moeLinearBackwardWeight(const float *dy, const float *x, const int64_t *experts,
                             float *const *dw, int64_t n, int64_t k, int64_t E, int64_t in,
                             int64_t out, float *scratch, cudaStream_t stream) {
  moeLinearBackwardWeightT(dy, x, experts, dw, n, k, E, in, out, scratch, stream);
}
void moeLinearBackwardWeight(const bf16 *dy, const bf16 *x, const int64_t *experts, bf16 *const *dw,
                             int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                             float *scratch, cudaStream_t stream) {
  moeLinearBackwardWeightT(dy, x, experts, dw, n, k, E, in, out, scratch, stream);
}

void moeCombineForward(const float *packed, const float *weights, const int64_t *slots, float *y,
                       int64_t n, int64_t k, int64_t D, cudaStream_t stream) {
  moeGatherT(packed, weights, slots, y, n, k, D, "moeCombineForward", stream);
}
void moeCombineForward(const bf16 *packed, const bf16 *weights, const int64_t *slots, bf16 *y,
                       int64_t n, int64_t k, int64_t D, cudaStream_t stream) {
  moeGatherT(packed, weights, slots, y, n, k, D, "moeCombineForward", stream);
}

void moeCombineBackward(const float *dy, const float *packed, const float *weights,
                        const int64_t *slots, float *dpacked, float *dweights, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream) {
  moeCombineBackwardT(dy, packed, weights, slots, dpacked, dweights, n, k, D, stream);
}
void moeCombineBackward(const bf16 *dy, const bf16 *packed, const bf16 *weights,
                        const int64_t *slots, bf16 *dpacked, bf16 *dweights, int64_t n, int64_t k,
                        int64_t D, cudaStream_t stream) {
  moeCombineBackwardT(dy, packed, weights, slots, dpacked, dweights, n, k, D, stream);
}

void moeAuxLossForward(const float *loss, const float *const *logits, float *out, int64_t layers,
                       int64_t n, int64_t E, int64_t k, double coef, float *scratch,
                       cudaStream_t stream) {
  moeAuxLossForwardT(loss, logits, out, layers, n, E, k, coef, scratch, stream);
}
void moeAuxLossForward(const float *loss, const bf16 *const *logits, float *out, int64_t layers,
                       int64_t n, int64_t E, int64_t k, double coef, float *scratch,
                       cudaStream_t stream) {
  moeAuxLossForwardT(loss, logits, out, layers, n, E, k, coef, scratch, stream);
}

void moeAuxLossBackward(const float *const *logits, float *const *dlogits, int64_t layers,
                        int64_t n, int64_t E, int64_t k, double coef, float lossScale,
                        float *scratch, cudaStream_t stream) {
  moeAuxLossBackwardT(logits, dlogits, layers, n, E, k, coef, lossScale, scratch, stream);
}
void moeAuxLossBackward(const bf16 *const *logits, bf16 *const *dlogits, int64_t layers, int64_t n,
                        int64_t E, int64_t k, double coef, float lossScale, float *scratch,
                        cudaStream_t stream) {
  moeAuxLossBackwardT(logits, dlogits, layers, n, E, k, coef, lossScale, scratch, stream);
}

void adamw(float *param, const float *grad, float *expAvg, float *expAvgSq, const bool *decay,
           int64_t n, int64_t step, double lr, double beta1, double beta2, double eps,
           double weightDecay, double gradScale, cudaStream_t stream) {
  if (n <= 0)
    return;
  AdamConsts c;
  c.decayMul = float(1.0 - lr * weightDecay);
  c.b1 = float(beta1);
  c.oneMinusB1 = float(1.0 - beta1);
  c.b2 = float(beta2);
  c.oneMinusB2 = float(1.0 - beta2);
  const double biasCorrection1 = 1.0 - std::pow(beta1, double(step));
  const double biasCorrection2 = 1.0 - std::pow(beta2, double(step));
  c.negStepSize = float(-(lr / biasCorrection1));
  c.bc2Sqrt = float(std::sqrt(biasCorrection2));
  c.eps = float(eps);
  c.gs = float(gradScale);
  FSDP_LAUNCH(adamwKernel, gridFor(n), kThreads, 0, stream, param, grad, expAvg, expAvgSq, decay, n,
              c);
  FSDP_LAUNCH_CHECK();
}

void toBf16(const float *x, uint16_t *out, int64_t n, cudaStream_t stream) {
  if (n <= 0)
    return;
  if (static_cast<const void *>(x) != static_cast<const void *>(out)) {
    FSDP_LAUNCH(toBf16Kernel, gridFor(n), kThreads, 0, stream, x, out, n);
    FSDP_LAUNCH_CHECK();
    return;
  }
  // In place: [0, first) in one block, then doubling ranges [lo, 2 lo).
  const int64_t first = std::min<int64_t>(n, 8 * kThreads);
  FSDP_LAUNCH(toBf16InPlaceKernel, 1, kThreads, 0, stream, x, out, 0, first, true);
  FSDP_LAUNCH_CHECK();
  for (int64_t lo = first; lo < n; lo *= 2) {
    const int64_t hi = std::min(n, 2 * lo);
    FSDP_LAUNCH(toBf16InPlaceKernel, gridFor(hi - lo), kThreads, 0, stream, x, out, lo, hi, false);
    FSDP_LAUNCH_CHECK();
  }
}
void toBf16(const float *x, bf16 *out, int64_t n, cudaStream_t stream) {
  toBf16(x, reinterpret_cast<uint16_t *>(out), n, stream);
}

void fromBf16(const uint16_t *h, float *out, int64_t n, cudaStream_t stream) {
  launchElementwise(fromBf16Kernel, n, stream, h, out, n);
}
void fromBf16(const bf16 *h, float *out, int64_t n, cudaStream_t stream) {
  fromBf16(reinterpret_cast<const uint16_t *>(h), out, n, stream);
}

void roundToBf16(const float *x, float *out, int64_t n, cudaStream_t stream) {
  launchElementwise(roundToBf16Kernel, n, stream, x, out, n);
}

void sumOfSquares(const float *x, int64_t n, double *out, double *scratch, cudaStream_t stream,
                  bool accumulate) {
  const int64_t maxBlocks = sumOfSquaresScratchDoubles();
  const int64_t chunk = std::max<int64_t>(8 * kThreads, (n + maxBlocks - 1) / maxBlocks);
  const int64_t blocks = n > 0 ? (n + chunk - 1) / chunk : 0;
  if (blocks > 0) {
    FSDP_LAUNCH(sumOfSquaresPartialKernel, unsigned(blocks), kThreads, 0, stream, x, n, chunk,
                scratch);
    FSDP_LAUNCH_CHECK();
  }
  FSDP_LAUNCH(sumKernel, 1, 1024, 0, stream, scratch, blocks, out, accumulate);
  FSDP_LAUNCH_CHECK();
}

void addBf16Into(float *dst, const uint16_t *src, int64_t n, cudaStream_t stream) {
  launchElementwise(addBf16IntoKernel, n, stream, dst, src, n);
}

void sumDoubles(const double *x, int64_t n, double *out, cudaStream_t stream) {
  FSDP_LAUNCH(sumKernel, 1, 1024, 0, stream, x, n, out, false);
  FSDP_LAUNCH_CHECK();
}

} // namespace fsdp::cuda_kernels
