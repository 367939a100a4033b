//===- cpu_impl.h - What cpu.cpp and cpu_bf16.cpp share -------*- C++ -*-===//
//
// Not part of the kernels' interface (cpu.h): the gated sgemm, the
// branch-free exp and tanh, the row reductions, and the bodies of the kernels
// that are the same over f32 and bf16 storage, as templates over the element
// type T (float or bf16) read through load() and written through store(),
// which compute in float either way. The bodies are always inlined into the
// FSDP_HOT wrappers of the two files, so that each wrapper's x86-64-v3 clone
// vectorizes them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_KERNELS_CPU_IMPL_H
#define FSDP_RUNTIME_KERNELS_CPU_IMPL_H

#include "runtime/kernels/cpu.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

// The hot loops are compiled twice, for the x86-64-v2 baseline and for
// x86-64-v3 (AVX2, FMA), and the loader picks one (GCC function
// multiversioning, an ifunc). Elsewhere, or with FSDP_KERNELS_NO_CLONES
// defined: the baseline only.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    !defined(FSDP_KERNELS_NO_CLONES)
#define FSDP_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define FSDP_HOT
#endif

#define FSDP_INLINE __attribute__((always_inline)) inline

namespace fsdp::kernels::detail {

// cblas_sgemm, row-major, behind the gate on how many threads are inside
// OpenBLAS at once (cpu.cpp). Every sgemm of the kernels goes through it.
void sgemm(CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
           float *C, int64_t ldc);

// Element access: storage to float and back (bf16 rounded to nearest even).
FSDP_INLINE float load(float x) { return x; }
FSDP_INLINE float load(bf16 x) { return bf16ToFloat(x.bits); }
FSDP_INLINE void store(float *p, float v) { *p = v; }
FSDP_INLINE void store(bf16 *p, float v) { p->bits = floatToBf16(v); }

// Dot product with sixteen independent partial sums, so that the compiler
// vectorizes it without -ffast-math (one float accumulator is a serial chain
// it may not reorder) and the vector accumulators do not wait on each other.
template <class T>
FSDP_INLINE float dot(const float *__restrict a, const T *__restrict b, int64_t n) {
  float acc[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l)
      acc[l] += a[i + l] * load(b[i + l]);
  for (int l = 0; l < 8; ++l)
    acc[l] += acc[l + 8];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i)
    s += a[i] * load(b[i]);
  return s;
}

// exp(x) in float, branch-free so that loops over it vectorize (libm's expf
// is an opaque call): Cody-Waite reduction by ln 2 and the Cephes expf
// polynomial; max error ~1 ulp (0.97 ulp on [-20, 20]). Results below
// FLT_MIN flush to 0; above FLT_MAX, +inf; NaN stays NaN.
inline float expf1(float x) {
  constexpr float kLo = -87.33654f, kHi = 88.72283f;
  const float xc = x > kLo ? (x < kHi ? x : kHi) : kLo; // NaN -> kLo: int32_t(k) defined
  const float k = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^k as 2^k1 * 2^k2: k reaches 128 and -126, outside one exponent field.
  const int32_t ki = int32_t(k), k1 = ki >> 1, k2 = ki - k1;
  const int32_t b1 = (k1 + 127) << 23, b2 = (k2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof(float));
  std::memcpy(&s2, &b2, sizeof(float));
  float y = p * s1 * s2;
  y = x > kHi ? INFINITY : y;
  y = x < kLo ? 0.0f : y;
  return x == x ? y : x;
}

// tanh(x) in float, branch-free: the Cephes tanhf odd polynomial for
// |x| < 0.625, 1 - 2 / (exp(2|x|) + 1) with the sign otherwise.
inline float tanhf1(float x) {
  const float a = std::fabs(x);
  const float z = x * x;
  float poly = -5.70498872745e-3f;
  poly = poly * z + 2.06390887954e-2f;
  poly = poly * z - 5.37397155531e-2f;
  poly = poly * z + 1.33314422036e-1f;
  poly = poly * z - 3.33332819422e-1f;
  const float small = poly * z * x + x;
  const float big = std::copysign(1.0f - 2.0f / (expf1(2.0f * a) + 1.0f), x);
  return a < 0.625f ? small : big;
}

inline float sigmoid(float x) { return 1.0f / (1.0f + expf1(-x)); }

// Max of a row with eight lanes (vectorizes without -ffast-math).
template <class T> FSDP_INLINE float rowMax(const T *x, int64_t n) {
  float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l)
      m[l] = std::max(m[l], load(x[i + l]));
  float r = std::max(std::max(std::max(m[0], m[1]), std::max(m[2], m[3])),
                     std::max(std::max(m[4], m[5]), std::max(m[6], m[7])));
  for (; i < n; ++i)
    r = std::max(r, load(x[i]));
  return r;
}

constexpr float kGeluC = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
constexpr float kSqrtHalf = 0.7071067811865476f;   // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f; // 1 / sqrt(2 pi)
constexpr double kPi = 3.14159265358979323846;

// Sum of a double-valued expression over a row, eight lanes (vectorizable).
template <class F> FSDP_INLINE double rowSum(int64_t n, F f) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l)
      acc[l] += f(i + l);
  double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i)
    s += f(i);
  return s;
}

//===----------------------------------------------------------------------===//
// Kernel bodies over T
//===----------------------------------------------------------------------===//

template <class T>
FSDP_INLINE void embeddingForwardT(const int64_t *ids, const T *table, T *out, int64_t n,
                                   int64_t D) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * D, table + ids[i] * D, sizeof(T) * D);
}

// db[out] = column sums of dy, in blocks of columns, each summed over the rows
// in double on the stack.
template <class T> FSDP_INLINE void biasBackwardT(const T *dy, T *db, int64_t n, int64_t out) {
  constexpr int64_t kBlock = 256;
  double acc[kBlock];
  for (int64_t c0 = 0; c0 < out; c0 += kBlock) {
    int64_t w = std::min(kBlock, out - c0);
    std::fill(acc, acc + w, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const T *row = dy + i * out + c0;
      for (int64_t c = 0; c < w; ++c)
        acc[c] += load(row[c]);
    }
    for (int64_t c = 0; c < w; ++c)
      store(db + c0 + c, static_cast<float>(acc[c]));
  }
}

// Mean and 1/sqrt(biased variance + eps) of one row, in double.
template <class T>
FSDP_INLINE void rowMoments(const T *x, int64_t D, double eps, double &mean, double &rstd) {
  double m = rowSum(D, [=](int64_t c) { return double(load(x[c])); }) / double(D);
  double var = rowSum(D,
                      [=](int64_t c) {
                        double d = double(load(x[c])) - m;
                        return d * d;
                      }) /
               double(D);
  mean = m;
  rstd = 1.0 / std::sqrt(var + eps);
}

template <class T> FSDP_INLINE double rowRms(const T *x, int64_t D, double eps) {
  double ms =
      rowSum(D, [=](int64_t c) { return double(load(x[c])) * double(load(x[c])); }) / double(D);
  return 1.0 / std::sqrt(ms + eps);
}

template <class T>
FSDP_INLINE void layerNormForwardT(const T *x, const T *w, const T *b, T *y, int64_t n, int64_t D,
                                   double eps) {
  for (int64_t i = 0; i < n; ++i) {
    const T *xr = x + i * D;
    T *yr = y + i * D;
    double mean, rstd;
    rowMoments(xr, D, eps, mean, rstd);
    const float m = float(mean), r = float(rstd);
    for (int64_t c = 0; c < D; ++c)
      store(yr + c, (load(xr[c]) - m) * r * load(w[c]) + load(b[c]));
  }
}

// dw and db are the f32 sums over the rows (the outputs themselves for f32
// storage): zeroed here. dw and db alias nothing, and saying so (restrict
// parameters are honored after inlining, restrict locals are not) lets the row
// loop vectorize; dx may be dy (in place).
template <class T>
FSDP_INLINE void layerNormBackwardT(const T *dy, const T *x, const T *w, T *dx,
                                    float *__restrict dw, float *__restrict db, int64_t n,
                                    int64_t D, double eps) {
  std::memset(dw, 0, sizeof(float) * D);
  std::memset(db, 0, sizeof(float) * D);
  for (int64_t i = 0; i < n; ++i) {
    const T *xr = x + i * D;
    const T *gr = dy + i * D;
    T *dxr = dx + i * D;
    double mean, rstd;
    rowMoments(xr, D, eps, mean, rstd);
    const float m = float(mean), r = float(rstd);
    // With g = dy * w and xhat = (x - mean) * rstd:
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    double sg = rowSum(D, [=](int64_t c) { return double(load(gr[c])) * double(load(w[c])); });
    double sgx = rowSum(D, [=](int64_t c) {
      return double(load(gr[c])) * double(load(w[c])) * ((double(load(xr[c])) - mean) * rstd);
    });
    const float mg = float(sg / double(D)), mgx = float(sgx / double(D));
    for (int64_t c = 0; c < D; ++c) {
      const float g = load(gr[c]);
      const float xhat = (load(xr[c]) - m) * r;
      store(dxr + c, r * (g * load(w[c]) - mg - xhat * mgx));
      dw[c] += g * xhat;
      db[c] += g;
    }
  }
}

template <class T>
FSDP_INLINE void rmsNormForwardT(const T *x, const T *w, T *y, int64_t n, int64_t D, double eps) {
  for (int64_t i = 0; i < n; ++i) {
    const T *xr = x + i * D;
    T *yr = y + i * D;
    const float r = float(rowRms(xr, D, eps));
    for (int64_t c = 0; c < D; ++c)
      store(yr + c, load(w[c]) * (load(xr[c]) * r)); // HF: weight * (hidden * rsqrt(var + eps))
  }
}

// dw: the f32 sum over the rows, zeroed here (as layerNormBackwardT).
template <class T>
FSDP_INLINE void rmsNormBackwardT(const T *dy, const T *x, const T *w, T *dx, float *__restrict dw,
                                  int64_t n, int64_t D, double eps) {
  std::memset(dw, 0, sizeof(float) * D);
  for (int64_t i = 0; i < n; ++i) {
    const T *xr = x + i * D;
    const T *gr = dy + i * D;
    T *dxr = dx + i * D;
    const double rstd = rowRms(xr, D, eps);
    // dx = r * g - x * r^3 * mean(g * x), g = dy * w.
    double sgx = rowSum(D, [=](int64_t c) {
      return double(load(gr[c])) * double(load(w[c])) * double(load(xr[c]));
    });
    const float r = float(rstd);
    const float k = float(rstd * rstd * rstd * sgx / double(D));
    for (int64_t c = 0; c < D; ++c) {
      const float g = load(gr[c]), xv = load(xr[c]);
      store(dxr + c, r * (g * load(w[c])) - xv * k);
      dw[c] += g * (xv * r);
    }
  }
}

template <class T>
FSDP_INLINE void ropeT(const T *x, T *y, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
                       const RopeScaling *scaling, bool inverse) {
  const int64_t half = Dh / 2, width = H * Dh;
  constexpr int64_t kChunk = 128;
  float inv[kChunk], cs[kChunk], sn[kChunk];
  // HF's cos() * attention_scaling, sin() * attention_scaling in float32
  // (x 1 leaves them as they are).
  const float af = ropeAttentionFactor(scaling);
  for (int64_t i0 = 0; i0 < half; i0 += kChunk) {
    const int64_t w = std::min(kChunk, half - i0);
    for (int64_t i = 0; i < w; ++i)
      inv[i] = ropeInvFreq(i0 + i, Dh, theta, scaling);
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t i = 0; i < w; ++i) {
        const float angle = float(s) * inv[i]; // float32 outer product, as HF
        cs[i] = float(std::cos(double(angle))) * af;
        const float sv = float(std::sin(double(angle))) * af;
        sn[i] = inverse ? -sv : sv;
      }
      for (int64_t b = 0; b < B; ++b) {
        const T *xr = x + (b * S + s) * width;
        T *yr = y + (b * S + s) * width;
        for (int64_t h = 0; h < H; ++h) {
          const T *x1 = xr + h * Dh + i0, *x2 = x1 + half; // y may be x
          T *y1 = yr + h * Dh + i0, *y2 = y1 + half;
          for (int64_t i = 0; i < w; ++i) {
            const float a = load(x1[i]), c = load(x2[i]);
            store(y1 + i, a * cs[i] - c * sn[i]);
            store(y2 + i, c * cs[i] + a * sn[i]);
          }
        }
      }
    }
  }
  if (Dh % 2) // odd head dim: the last element of each head is not rotated
    for (int64_t r = 0; r < B * S; ++r)
      for (int64_t h = 0; h < H; ++h)
        y[r * width + h * Dh + Dh - 1] = x[r * width + h * Dh + Dh - 1];
}

template <class T>
FSDP_INLINE void splitT(const T *x, T *const *outs, int64_t parts, int64_t n, int64_t W) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < parts; ++p)
      std::memcpy(outs[p] + i * W, x + (i * parts + p) * W, sizeof(T) * W);
}

template <class T>
FSDP_INLINE void concatT(const T *const *ins, T *y, int64_t parts, int64_t n, int64_t W) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < parts; ++p)
      std::memcpy(y + (i * parts + p) * W, ins[p] + i * W, sizeof(T) * W);
}

//===----------------------------------------------------------------------===//
// Attention tiles
//===----------------------------------------------------------------------===//

// Query rows go in tiles of kAttentionTile: each tile's scores against the
// keys it can see, [t, i1] with i1 = the tile's end, are one sgemm, so no
// S x S matrix for a whole head ever exists.
inline int64_t attentionTile(int64_t S) { return std::min(S, kAttentionTile); }

// What every attention kernel derives from its shape: the row strides of q
// (and out) and of k (and v), the query heads per kv head, the query tile,
// the score scale 1/sqrt(Dh); empty when there is nothing to compute.
struct AttentionDims {
  int64_t qStride, kStride, group, T;
  float scale;
  bool empty;
  AttentionDims(int64_t B, int64_t S, int64_t H, int64_t KV, int64_t Dh)
      : qStride(H * Dh), kStride(KV * Dh), group(KV > 0 ? H / KV : 0), T(attentionTile(S)),
        scale(float(1.0 / std::sqrt(double(Dh)))),
        empty(B <= 0 || S <= 0 || H <= 0 || KV <= 0 || Dh <= 0) {}
};

// The first key a query tile from row i0 reads: 0, or with a sliding window
// W (causal only: a query i sees keys i-W+1..i) the first key its first row
// sees.
FSDP_INLINE int64_t attentionFirstKey(int64_t i0, bool causal, int64_t window) {
  return causal && window > 0 && i0 - window + 1 > 0 ? i0 - window + 1 : 0;
}

// The end (exclusive) of the keys a query tile of t rows from i0 reads:
// causal, up to its last row (i1 = i0 + t); bidirectional, all S keys.
FSDP_INLINE int64_t attentionKeyEnd(int64_t i0, int64_t t, int64_t S, bool causal) {
  return causal ? i0 + t : S;
}

// p[t, n] (row stride n = i1 - j0, i1 = attentionKeyEnd) = the softmax of
// row r of (q_tile k[j0:i1]ᵀ) * scale, for the t query rows i0..i0+t-1 (k
// points at key j0's row): causal, over keys j0 <= j <= i0 + r (and
// j > i0 + r - window with a window); bidirectional (j0 = 0), over all n
// keys. Masked entries are 0. Scores in float, softmax as PyTorch's:
// max-subtracted, exp, divided by the sum. Always inlined, so that the
// callers' x86-64-v3 clones get the vectorized exp.
FSDP_INLINE void attentionProbs(const float *q, int64_t qStride, const float *k, int64_t kStride,
                                int64_t i0, int64_t j0, int64_t t, int64_t n, int64_t Dh,
                                float scale, bool causal, int64_t window, float *p) {
  sgemm(CblasNoTrans, CblasTrans, t, n, Dh, scale, q, qStride, k, kStride, 0.0f, p, n);
  for (int64_t r = 0; r < t; ++r) {
    float *row = p + r * n;
    const int64_t i = i0 + r;
    const int64_t a = causal ? (window > 0 && i - window + 1 > j0 ? i - window + 1 : j0) - j0 : 0;
    const int64_t m = causal ? i - j0 + 1 - a : n; // the keys row r sees, from row[a]
    float *pr = row + a;
    for (int64_t j = 0; j < a; ++j)
      row[j] = 0.0f;
    const float mx = rowMax(pr, m);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= m; j += 8)
      for (int l = 0; l < 8; ++l)
        acc[l] += (pr[j + l] = expf1(pr[j + l] - mx));
    float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; j < m; ++j)
      sum += (pr[j] = expf1(pr[j] - mx));
    const float inv = 1.0f / sum;
    for (j = 0; j < m; ++j)
      pr[j] *= inv;
    for (j += a; j < n; ++j)
      row[j] = 0.0f;
  }
}

// The backward of one query tile (rows i0..i0+t-1), given its probabilities
// p [t, n] over keys j0..i1-1 (n = i1 - j0, i1 = attentionKeyEnd; k, v, dk
// and dv point at key j0's row): dP = dout_tile v[j0:i1]ᵀ into ds [t, n],
// then dS = P (dP - D_r) with D_r = dout_r · out_r (masked entries 0, as P
// is; the score's scale goes into the sgemms), then dk[j0:i1] += dSᵀ q_tile *
// scale, dv[j0:i1] += Pᵀ dout_tile, and last dq_tile = dS k[j0:i1] * scale,
// so dq may be where q was.
template <class T>
FSDP_INLINE void attentionBackwardTile(const float *p, float *ds, const float *q, int64_t qStride,
                                       const float *dy, int64_t dyStride, const T *o,
                                       int64_t oStride, const float *k, const float *v,
                                       int64_t kStride, float *dk, float *dv, float *dq,
                                       int64_t dqStride, int64_t i0, int64_t j0, int64_t t,
                                       int64_t n, int64_t Dh, float scale, bool causal) {
  sgemm(CblasNoTrans, CblasTrans, t, n, Dh, 1.0f, dy, dyStride, v, kStride, 0.0f, ds, n);
  for (int64_t r = 0; r < t; ++r) {
    const float Dr = dot(dy + r * dyStride, o + r * oStride, Dh);
    const float *pr = p + r * n;
    float *dsr = ds + r * n;
    const int64_t m = causal ? i0 + r + 1 - j0 : n;
    int64_t j = 0;
    for (; j < m; ++j)
      dsr[j] = pr[j] * (dsr[j] - Dr);
    for (; j < n; ++j)
      dsr[j] = 0.0f;
  }
  sgemm(CblasTrans, CblasNoTrans, n, Dh, t, scale, ds, n, q, qStride, 1.0f, dk, kStride);
  sgemm(CblasTrans, CblasNoTrans, n, Dh, t, 1.0f, p, n, dy, dyStride, 1.0f, dv, kStride);
  sgemm(CblasNoTrans, CblasNoTrans, t, Dh, n, scale, ds, n, k, kStride, 0.0f, dq, dqStride);
}

//===----------------------------------------------------------------------===//
// Elementwise, cross-entropy
//===----------------------------------------------------------------------===//

// GELU. tanh: HF NewGELUActivation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
// x^3))); else exact, torch's gelu: 0.5 x (1 + erf(x / sqrt 2)), whose
// derivative is cdf(x) + x pdf(x), pdf(x) = exp(-x^2 / 2) / sqrt(2 pi).
template <class T> FSDP_INLINE void geluForwardT(const T *x, T *y, int64_t n, bool tanh) {
  if (tanh) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = load(x[i]);
      store(y + i, 0.5f * v * (1.0f + tanhf1(kGeluC * (v + kGeluA * (v * v * v)))));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = load(x[i]);
    store(y + i, 0.5f * v * (1.0f + std::erf(v * kSqrtHalf)));
  }
}

template <class T>
FSDP_INLINE void geluBackwardT(const T *dy, const T *x, T *dx, int64_t n, bool tanh) {
  if (tanh) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = load(x[i]);
      const float t = tanhf1(kGeluC * (v + kGeluA * (v * v * v)));
      const float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
      store(dx + i, load(dy[i]) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = load(x[i]);
    const float cdf = 0.5f * (1.0f + std::erf(v * kSqrtHalf));
    const float pdf = std::exp(-0.5f * v * v) * kInvSqrt2Pi;
    store(dx + i, load(dy[i]) * (cdf + v * pdf));
  }
}

template <class T> FSDP_INLINE void siluMulForwardT(const T *gate, const T *up, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load(gate[i]);
    store(y + i, g / (1.0f + expf1(-g)) * load(up[i])); // F.silu's formula, then the product
  }
}

template <class T>
FSDP_INLINE void siluMulBackwardT(const T *dy, const T *gate, const T *up, T *dgate, T *dup,
                                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load(gate[i]), s = sigmoid(g), d = load(dy[i]), u = load(up[i]);
    store(dup + i, d * (g / (1.0f + expf1(-g))));
    // silu_backward(dy * up, gate) = grad * s * (1 + g * (1 - s))
    store(dgate + i, (d * u) * s * (1.0f + g * (1.0f - s)));
  }
}

template <class T> FSDP_INLINE void addT(const T *a, const T *b, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    store(y + i, load(a[i]) + load(b[i]));
}

// ViT's sequence: y[b, 0] = cls + pos[0], y[b, s] = x[b, s-1] + pos[s].
template <class T>
FSDP_INLINE void classTokenForwardT(const T *x, const T *cls, const T *pos, T *y, int64_t B,
                                    int64_t S, int64_t D) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const T *src = s == 0 ? cls : x + (b * (S - 1) + s - 1) * D;
      const T *p = pos + s * D;
      T *out = y + (b * S + s) * D;
      for (int64_t c = 0; c < D; ++c)
        store(out + c, load(src[c]) + load(p[c]));
    }
}

// dx[b, s-1] = dy[b, s]; dpos[s] = sum over b of dy[b, s] (in float, b in
// order, rounded once); dcls = dpos[0].
template <class T>
FSDP_INLINE void classTokenBackwardT(const T *dy, T *dx, T *dcls, T *dpos, int64_t B, int64_t S,
                                     int64_t D) {
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(dx + b * (S - 1) * D, dy + (b * S + 1) * D, sizeof(T) * size_t((S - 1) * D));
  for (int64_t e = 0; e < S * D; ++e) {
    float acc = 0.0f;
    for (int64_t b = 0; b < B; ++b)
      acc += load(dy[b * S * D + e]);
    store(dpos + e, acc);
    if (e < D)
      store(dcls + e, acc);
  }
}

// y[b] = x[b, 0]
template <class T>
FSDP_INLINE void firstTokenForwardT(const T *x, T *y, int64_t B, int64_t S, int64_t D) {
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(y + b * D, x + b * S * D, sizeof(T) * size_t(D));
}

// dx[b, 0] = dy[b], zeros elsewhere
template <class T>
FSDP_INLINE void firstTokenBackwardT(const T *dy, T *dx, int64_t B, int64_t S, int64_t D) {
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(dx + b * S * D, dy + b * D, sizeof(T) * size_t(D));
    std::memset(static_cast<void *>(dx + (b * S + 1) * D), 0, sizeof(T) * size_t((S - 1) * D));
  }
}

// Row max and sum of exp(x - max): terms in float, eight lanes summed in
// double.
template <class T> FSDP_INLINE void rowLse(const T *x, int64_t V, float &mx, double &sum) {
  const float m = rowMax(x, V);
  mx = m;
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t c = 0;
  for (; c + 8 <= V; c += 8)
    for (int l = 0; l < 8; ++l)
      acc[l] += double(expf1(load(x[c + l]) - m));
  double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; c < V; ++c)
    s += double(expf1(load(x[c]) - m));
  sum = s;
}

// Rows whose target is kIgnoreIndex count neither in the loss nor in its
// gradient: the mean is over the other rows (0 when there are none).
template <class T>
FSDP_INLINE float crossEntropyForwardT(const T *logits, const int64_t *targets, int64_t n,
                                       int64_t V) {
  double total = 0.0;
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] == kIgnoreIndex)
      continue;
    const T *x = logits + i * V;
    float mx;
    double sum;
    rowLse(x, V, mx, sum);
    total += double(mx) + std::log(sum) - double(load(x[targets[i]]));
    ++counted;
  }
  return counted > 0 ? float(total / double(counted)) : 0.0f;
}

// dlogits may be logits (in place). The target's element is rounded once
// (softmax * scale - scale in float, then stored). An ignored row's gradient
// is zeros.
template <class T>
FSDP_INLINE void crossEntropyBackwardT(const T *logits, const int64_t *targets, T *dlogits,
                                       int64_t n, int64_t V, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    const T *x = logits + i * V;
    T *d = dlogits + i * V;
    if (targets[i] == kIgnoreIndex) {
      std::memset(static_cast<void *>(d), 0, sizeof(T) * size_t(V));
      continue;
    }
    float mx;
    double sum;
    rowLse(x, V, mx, sum);
    const float k = float(double(scale) / sum);
    const float xt = load(x[targets[i]]);
    for (int64_t c = 0; c < V; ++c)
      store(d + c, expf1(load(x[c]) - mx) * k);
    if constexpr (std::is_same_v<T, float>)
      d[targets[i]] -= scale;
    else // from the float term, not the stored bf16 one
      store(d + targets[i], expf1(xt - mx) * k - scale);
  }
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

// p[E] = softmax(x[E]) in f32 (max subtracted, sum in double as rowLse).
template <class T> FSDP_INLINE void softmaxRow(const T *x, float *p, int64_t E) {
  float mx;
  double sum;
  rowLse(x, E, mx, sum);
  const float inv = float(1.0 / sum);
  for (int64_t e = 0; e < E; ++e)
    p[e] = expf1(load(x[e]) - mx) * inv;
}

// The k largest of p[E], descending, ties to the lower index (the first
// maximum wins), into chosen[k]; a NaN never wins over a number.
FSDP_INLINE void topK(const float *p, int64_t E, int64_t k, int64_t *chosen) {
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      bool taken = false;
      for (int64_t i = 0; i < j; ++i)
        taken |= chosen[i] == e;
      if (taken)
        continue;
      if (best < 0 || p[e] > p[best] || (std::isnan(p[best]) && !std::isnan(p[e])))
        best = e;
    }
    chosen[j] = best;
  }
}

// A token's k choices in ascending slot (= expert) order, into order[k].
FSDP_INLINE void slotOrder(const int64_t *slots, int64_t k, int64_t *order) {
  for (int64_t j = 0; j < k; ++j) {
    int64_t i = j;
    for (; i > 0 && slots[order[i - 1]] > slots[j]; --i)
      order[i] = order[i - 1];
    order[i] = j;
  }
}

template <class T>
FSDP_INLINE void moeRouteForwardT(const T *logits, T *weights, int64_t *experts, int64_t *slots,
                                  int64_t n, int64_t E, int64_t k, bool normalize, float *scratch) {
  int64_t *start = reinterpret_cast<int64_t *>(scratch); // [E + 1]
  float *p = scratch + 2 * (E + 1);                      // [E]
  std::fill(start, start + E + 1, int64_t(0));
  for (int64_t t = 0; t < n; ++t) {
    softmaxRow(logits + t * E, p, E);
    int64_t *c = experts + t * k;
    topK(p, E, k, c);
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j)
      sum += p[c[j]];
    for (int64_t j = 0; j < k; ++j) {
      store(weights + t * k + j, normalize ? p[c[j]] / sum : p[c[j]]);
      ++start[c[j] + 1];
    }
  }
  for (int64_t e = 0; e < E; ++e)
    start[e + 1] += start[e];
  for (int64_t i = 0; i < n * k; ++i) // by expert, then token
    slots[i] = start[experts[i]]++;
}

template <class T>
FSDP_INLINE void moeRouteBackwardT(const T *dweights, const T *logits, const int64_t *experts,
                                   T *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                                   float *scratch) {
  float *p = scratch, *dp = scratch + E;
  for (int64_t t = 0; t < n; ++t) {
    softmaxRow(logits + t * E, p, E);
    const int64_t *c = experts + t * k;
    const T *dw = dweights + t * k;
    std::fill(dp, dp + E, 0.0f);
    if (normalize) { // w_j = p_j / s: dp_j = (dw_j - sum_i dw_i w_i) / s
      float s = 0.0f;
      for (int64_t j = 0; j < k; ++j)
        s += p[c[j]];
      float dot = 0.0f;
      for (int64_t j = 0; j < k; ++j)
        dot += load(dw[j]) * (p[c[j]] / s);
      for (int64_t j = 0; j < k; ++j)
        dp[c[j]] = (load(dw[j]) - dot) / s;
    } else {
      for (int64_t j = 0; j < k; ++j)
        dp[c[j]] = load(dw[j]);
    }
    double pd = 0.0;
    for (int64_t j = 0; j < k; ++j)
      pd += double(p[c[j]]) * double(dp[c[j]]);
    for (int64_t e = 0; e < E; ++e)
      store(dlogits + t * E + e, p[e] * (dp[e] - float(pd)));
  }
}

template <class T>
FSDP_INLINE void moePermuteForwardT(const T *x, const int64_t *slots, T *packed, int64_t n,
                                    int64_t k, int64_t D) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j)
      std::memcpy(packed + slots[t * k + j] * D, x + t * D, sizeof(T) * size_t(D));
}

template <class T>
FSDP_INLINE void moePermuteBackwardT(const T *dpacked, const int64_t *slots, T *dx, int64_t n,
                                     int64_t k, int64_t D) {
  int64_t order[kMaxTopK];
  for (int64_t t = 0; t < n; ++t) {
    const int64_t *s = slots + t * k;
    slotOrder(s, k, order);
    for (int64_t d = 0; d < D; ++d) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j)
        acc += load(dpacked[s[order[j]] * D + d]);
      store(dx + t * D + d, acc);
    }
  }
}

template <class T>
FSDP_INLINE void moeCombineForwardT(const T *packed, const T *weights, const int64_t *slots, T *y,
                                    int64_t n, int64_t k, int64_t D) {
  int64_t order[kMaxTopK];
  for (int64_t t = 0; t < n; ++t) {
    const int64_t *s = slots + t * k;
    slotOrder(s, k, order);
    for (int64_t d = 0; d < D; ++d) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j)
        acc += load(weights[t * k + order[j]]) * load(packed[s[order[j]] * D + d]);
      store(y + t * D + d, acc);
    }
  }
}

template <class T>
FSDP_INLINE void moeCombineBackwardT(const T *dy, const T *packed, const T *weights,
                                     const int64_t *slots, T *dpacked, T *dweights, int64_t n,
                                     int64_t k, int64_t D) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = slots[t * k + j];
      const float w = load(weights[t * k + j]);
      double acc = 0.0;
      for (int64_t d = 0; d < D; ++d) {
        const float g = load(dy[t * D + d]);
        acc += double(load(packed[r * D + d])) * double(g);
        store(dpacked + r * D + d, w * g);
      }
      store(dweights + t * k + j, float(acc));
    }
}

// The aux loss's statistics over the layers' rows: cnt[j * E + e] the rows
// whose choice j is e, P[e] the sum of p (doubles).
template <class T>
FSDP_INLINE void moeAuxStats(const T *const *logits, int64_t layers, int64_t n, int64_t E,
                             int64_t k, double *cnt, double *P, float *p) {
  int64_t chosen[kMaxTopK];
  std::fill(cnt, cnt + k * E, 0.0);
  std::fill(P, P + E, 0.0);
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t t = 0; t < n; ++t) {
      softmaxRow(logits[l] + t * E, p, E);
      topK(p, E, k, chosen);
      for (int64_t j = 0; j < k; ++j)
        cnt[j * E + chosen[j]] += 1.0;
      for (int64_t e = 0; e < E; ++e)
        P[e] += double(p[e]);
    }
}

template <class T>
FSDP_INLINE void moeAuxLossForwardT(const float *loss, const T *const *logits, float *out,
                                    int64_t layers, int64_t n, int64_t E, int64_t k, double coef,
                                    float *scratch) {
  double *cnt = reinterpret_cast<double *>(scratch), *P = cnt + k * E;
  moeAuxStats(logits, layers, n, E, k, cnt, P, reinterpret_cast<float *>(P + E));
  const double R = double(layers) * double(n);
  double aux = 0.0;
  for (int64_t j = 0; j < k; ++j)
    for (int64_t e = 0; e < E; ++e)
      aux += (cnt[j * E + e] / R) * (P[e] / R);
  *out = float(double(*loss) + coef * double(E) * aux);
}

template <class T>
FSDP_INLINE void moeAuxLossBackwardT(const T *const *logits, T *const *dlogits, int64_t layers,
                                     int64_t n, int64_t E, int64_t k, double coef, float lossScale,
                                     float *scratch) {
  double *cnt = reinterpret_cast<double *>(scratch), *P = cnt + k * E;
  float *p = reinterpret_cast<float *>(P + E);
  moeAuxStats(logits, layers, n, E, k, cnt, P, p);
  // d(coef * aux)/dp[row, e] = coef * E * F[e] / R^2, F[e] = sum over j of
  // cnt[j, e]; times the micro-batch's n * lossScale. P is reused for it.
  const double R = double(layers) * double(n);
  const double scale = coef * double(E) / (R * R) * double(n) * double(lossScale);
  for (int64_t e = 0; e < E; ++e) {
    double F = 0.0;
    for (int64_t j = 0; j < k; ++j)
      F += cnt[j * E + e];
    P[e] = scale * F;
  }
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t t = 0; t < n; ++t) {
      softmaxRow(logits[l] + t * E, p, E);
      double pg = 0.0;
      for (int64_t e = 0; e < E; ++e)
        pg += double(p[e]) * P[e];
      for (int64_t e = 0; e < E; ++e)
        store(dlogits[l] + t * E + e, float(double(p[e]) * (P[e] - pg)));
    }
}

// Expert e's rows of the packed buffer: start[e] .. start[e + 1], counted
// from the n*k choices, in the scratch's head; f(e, first row, rows) for
// each expert.
template <class F>
FSDP_INLINE void forEachExpert(const int64_t *experts, int64_t nk, int64_t E, float *scratch, F f) {
  int64_t *start = reinterpret_cast<int64_t *>(scratch);
  std::fill(start, start + E + 1, int64_t(0));
  for (int64_t i = 0; i < nk; ++i)
    ++start[experts[i] + 1];
  for (int64_t e = 0; e < E; ++e)
    start[e + 1] += start[e];
  for (int64_t e = 0; e < E; ++e)
    f(e, start[e], start[e + 1] - start[e]);
}

// The storage type's linear kernels on an expert's rows (out_in weights);
// bf16's take their scratch after the row starts.
inline void expertRows(const float *x, const float *w, float *y, int64_t rows, int64_t in,
                       int64_t out, float *) {
  linearForward(x, w, nullptr, y, rows, in, out, Layout::OutIn);
}
inline void expertRows(const bf16 *x, const bf16 *w, bf16 *y, int64_t rows, int64_t in, int64_t out,
                       float *s) {
  linearForward(x, w, nullptr, y, rows, in, out, Layout::OutIn, s);
}
inline void expertRowsInput(const float *dy, const float *w, float *dx, int64_t rows, int64_t in,
                            int64_t out, float *) {
  linearBackwardInput(dy, w, dx, rows, in, out, Layout::OutIn);
}
inline void expertRowsInput(const bf16 *dy, const bf16 *w, bf16 *dx, int64_t rows, int64_t in,
                            int64_t out, float *s) {
  linearBackwardInput(dy, w, dx, rows, in, out, Layout::OutIn, s);
}
inline void expertRowsWeight(const float *dy, const float *x, float *dw, int64_t rows, int64_t in,
                             int64_t out, float *) {
  linearBackwardWeight(dy, x, dw, rows, in, out, Layout::OutIn);
}
inline void expertRowsWeight(const bf16 *dy, const bf16 *x, bf16 *dw, int64_t rows, int64_t in,
                             int64_t out, float *s) {
  linearBackwardWeight(dy, x, dw, rows, in, out, Layout::OutIn, s);
}

template <class T>
void moeLinearForwardT(const T *x, const int64_t *experts, const T *const *w, T *y, int64_t n,
                       int64_t k, int64_t E, int64_t in, int64_t out, float *scratch) {
  forEachExpert(experts, n * k, E, scratch, [&](int64_t e, int64_t r0, int64_t rows) {
    if (rows)
      expertRows(x + r0 * in, w[e], y + r0 * out, rows, in, out, scratch + moeOffsetsFloats(E));
  });
}

template <class T>
void moeLinearBackwardInputT(const T *dy, const int64_t *experts, const T *const *w, T *dx,
                             int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                             float *scratch) {
  forEachExpert(experts, n * k, E, scratch, [&](int64_t e, int64_t r0, int64_t rows) {
    if (rows)
      expertRowsInput(dy + r0 * out, w[e], dx + r0 * in, rows, in, out,
                      scratch + moeOffsetsFloats(E));
  });
}

// An expert no token chose gets a zero gradient.
template <class T>
void moeLinearBackwardWeightT(const T *dy, const T *x, const int64_t *experts, T *const *dw,
                              int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                              float *scratch) {
  forEachExpert(experts, n * k, E, scratch, [&](int64_t e, int64_t r0, int64_t rows) {
    if (rows == 0)
      std::memset(static_cast<void *>(dw[e]), 0, sizeof(T) * size_t(in * out));
    else
      expertRowsWeight(dy + r0 * out, x + r0 * in, dw[e], rows, in, out,
                       scratch + moeOffsetsFloats(E));
  });
}

} // namespace fsdp::kernels::detail

#endif
