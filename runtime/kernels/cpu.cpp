//===- cpu.cpp - CPU kernels, forward and backward, for every nn op ------===//
//
// Semantics follow PyTorch / HF transformers in float32: the elementwise
// formulas are evaluated in float in the order PyTorch evaluates them; row
// statistics (norms, log-sum-exp, sums of squares) are accumulated in double,
// which costs little and only removes rounding. Matmuls go through OpenBLAS.
// exp and tanh are branch-free polynomial versions (~1 ulp, as PyTorch's own
// vectorized ones) so that the loops using them vectorize; built with
// -fno-trapping-math, their selects if-convert. No allocation: the only
// temporaries are small fixed-size stack arrays.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu.h"

#include <cblas.h>

#ifndef FSDP_MAX_BLAS_CALLERS
#define FSDP_MAX_BLAS_CALLERS 256
#endif

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>

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

namespace fsdp::kernels {

namespace {

// OpenBLAS (0.3.21, Debian's) takes a work buffer from a fixed table for each
// thread inside it at once and frees it on return; with thousands of rank
// threads of the threads backend calling at once, blas_memory_free crashed
// (SIGSEGV, measured at 4096 ranks). At most kMaxBlasCallers threads are inside
// OpenBLAS at a time; the others wait their turn. (Below that, nothing waits.)
constexpr int kMaxBlasCallers = FSDP_MAX_BLAS_CALLERS;
std::mutex blasMu;
std::condition_variable blasCv;
int blasInside = 0;

template <typename... Args> void sgemm(Args... args) {
  {
    std::unique_lock<std::mutex> lock(blasMu);
    blasCv.wait(lock, [] { return blasInside < kMaxBlasCallers; });
    ++blasInside;
  }
  cblas_sgemm(args...);
  {
    std::lock_guard<std::mutex> lock(blasMu);
    --blasInside;
  }
  blasCv.notify_one();
}

// Dot product with sixteen independent partial sums, so that the compiler
// vectorizes it without -ffast-math (one float accumulator is a serial chain
// it may not reorder) and the vector accumulators do not wait on each other.
inline float dot(const float *__restrict a, const float *__restrict b, int64_t n) {
  float acc[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l)
      acc[l] += a[i + l] * b[i + l];
  for (int l = 0; l < 8; ++l)
    acc[l] += acc[l + 8];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

// y += alpha * x
inline void axpy(float alpha, const float *__restrict x, float *__restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += alpha * x[i];
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
inline float rowMax(const float *x, int64_t n) {
  float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l)
      m[l] = std::max(m[l], x[i + l]);
  float r = std::max(std::max(std::max(m[0], m[1]), std::max(m[2], m[3])),
                     std::max(std::max(m[4], m[5]), std::max(m[6], m[7])));
  for (; i < n; ++i)
    r = std::max(r, x[i]);
  return r;
}

constexpr float kGeluC = 0.7978845608028654f; // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
constexpr double kPi = 3.14159265358979323846;

// Sum of a double-valued expression over a row, eight lanes (vectorizable).
template <class F> inline double rowSum(int64_t n, F f) {
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

} // namespace

//===----------------------------------------------------------------------===//
// Embedding, positions
//===----------------------------------------------------------------------===//

void embeddingForward(const int64_t *ids, const float *table, float *out, int64_t n, int64_t D) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * D, table + ids[i] * D, sizeof(float) * D);
}

void embeddingBackward(const float *dout, const int64_t *ids, float *dtable, int64_t n, int64_t V,
                       int64_t D) {
  std::memset(dtable, 0, sizeof(float) * V * D);
  for (int64_t i = 0; i < n; ++i) {
    float *row = dtable + ids[i] * D;
    const float *g = dout + i * D;
    for (int64_t c = 0; c < D; ++c)
      row[c] += g[c];
  }
}

void positionIds(int64_t *out, int64_t B, int64_t S) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      out[b * S + s] = s;
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

void linearForward(const float *x, const float *w, const float *bias, float *y, int64_t n,
                   int64_t in, int64_t out, Layout layout) {
  if (n <= 0 || out <= 0)
    return;
  float beta = 0.0f;
  if (bias) {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(y + i * out, bias, sizeof(float) * out);
    beta = 1.0f;
  }
  if (in <= 0) {
    if (!bias)
      std::memset(y, 0, sizeof(float) * n * out);
    return;
  }
  if (layout == Layout::InOut) // y = x W, W [in, out]
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, out, in, 1.0f, x, in, w, out, beta, y, out);
  else // y = x Wᵀ, W [out, in]
    sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y, out);
}

void linearBackwardInput(const float *dy, const float *w, float *dx, int64_t n, int64_t in,
                         int64_t out, Layout layout) {
  if (n <= 0 || in <= 0)
    return;
  if (out <= 0) {
    std::memset(dx, 0, sizeof(float) * n * in);
    return;
  }
  if (layout == Layout::InOut) // dx = dy Wᵀ, W [in, out]
    sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
  else // dx = dy W, W [out, in]
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx,
          in);
}

void linearBackwardWeight(const float *dy, const float *x, float *dw, int64_t n, int64_t in,
                          int64_t out, Layout layout) {
  if (in <= 0 || out <= 0)
    return;
  if (n <= 0) {
    std::memset(dw, 0, sizeof(float) * in * out);
    return;
  }
  if (layout == Layout::InOut) // dW [in, out] = xᵀ dy
    sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, n, 1.0f, x, in, dy, out, 0.0f, dw, out);
  else // dW [out, in] = dyᵀ x
    sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in);
}

void biasBackward(const float *dy, float *db, int64_t n, int64_t out) {
  // Columns in blocks, each summed over the rows in double on the stack.
  constexpr int64_t kBlock = 256;
  double acc[kBlock];
  for (int64_t c0 = 0; c0 < out; c0 += kBlock) {
    int64_t w = std::min(kBlock, out - c0);
    std::fill(acc, acc + w, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const float *row = dy + i * out + c0;
      for (int64_t c = 0; c < w; ++c)
        acc[c] += row[c];
    }
    for (int64_t c = 0; c < w; ++c)
      db[c0 + c] = static_cast<float>(acc[c]);
  }
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

namespace {
// Mean and 1/sqrt(biased variance + eps) of one row, in double.
inline void rowMoments(const float *x, int64_t D, double eps, double &mean, double &rstd) {
  double m = rowSum(D, [=](int64_t c) { return double(x[c]); }) / double(D);
  double var = rowSum(D,
                      [=](int64_t c) {
                        double d = double(x[c]) - m;
                        return d * d;
                      }) /
               double(D);
  mean = m;
  rstd = 1.0 / std::sqrt(var + eps);
}

inline double rowRms(const float *x, int64_t D, double eps) {
  double ms = rowSum(D, [=](int64_t c) { return double(x[c]) * double(x[c]); }) / double(D);
  return 1.0 / std::sqrt(ms + eps);
}

// The per-row tails of the backward passes. dw and db alias nothing, and
// saying so (restrict parameters are honored after inlining, restrict locals
// are not) lets them vectorize; dx may be dy (in place).
inline void layerNormBackwardRow(const float *g, const float *x, const float *w, float *dx,
                                 float *__restrict dw, float *__restrict db, int64_t D, float mean,
                                 float rstd, float meanG, float meanGXhat) {
  for (int64_t c = 0; c < D; ++c) {
    const float xhat = (x[c] - mean) * rstd;
    dx[c] = rstd * (g[c] * w[c] - meanG - xhat * meanGXhat);
    dw[c] += g[c] * xhat;
    db[c] += g[c];
  }
}

inline void rmsNormBackwardRow(const float *g, const float *x, const float *w, float *dx,
                               float *__restrict dw, int64_t D, float rstd, float k) {
  for (int64_t c = 0; c < D; ++c) {
    dx[c] = rstd * (g[c] * w[c]) - x[c] * k;
    dw[c] += g[c] * (x[c] * rstd);
  }
}
} // namespace

FSDP_HOT void layerNormForward(const float *x, const float *w, const float *b, float *y, int64_t n,
                               int64_t D, double eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * D;
    float *yr = y + i * D;
    double mean, rstd;
    rowMoments(xr, D, eps, mean, rstd);
    const float m = float(mean), r = float(rstd);
    for (int64_t c = 0; c < D; ++c)
      yr[c] = (xr[c] - m) * r * w[c] + b[c];
  }
}

FSDP_HOT void layerNormBackward(const float *dy, const float *x, const float *w, float *dx,
                                float *dw, float *db, int64_t n, int64_t D, double eps) {
  std::memset(dw, 0, sizeof(float) * D);
  std::memset(db, 0, sizeof(float) * D);
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * D;
    const float *gr = dy + i * D;
    float *dxr = dx + i * D;
    double mean, rstd;
    rowMoments(xr, D, eps, mean, rstd);
    const float m = float(mean), r = float(rstd);
    // With g = dy * w and xhat = (x - mean) * rstd:
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    double sg = rowSum(D, [=](int64_t c) { return double(gr[c]) * double(w[c]); });
    double sgx = rowSum(D, [=](int64_t c) {
      return double(gr[c]) * double(w[c]) * ((double(xr[c]) - mean) * rstd);
    });
    const float mg = float(sg / double(D)), mgx = float(sgx / double(D));
    layerNormBackwardRow(gr, xr, w, dxr, dw, db, D, m, r, mg, mgx);
  }
}

FSDP_HOT void rmsNormForward(const float *x, const float *w, float *y, int64_t n, int64_t D,
                             double eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * D;
    float *yr = y + i * D;
    const float r = float(rowRms(xr, D, eps));
    for (int64_t c = 0; c < D; ++c)
      yr[c] = w[c] * (xr[c] * r); // HF: weight * (hidden * rsqrt(variance + eps))
  }
}

FSDP_HOT void rmsNormBackward(const float *dy, const float *x, const float *w, float *dx, float *dw,
                              int64_t n, int64_t D, double eps) {
  std::memset(dw, 0, sizeof(float) * D);
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * D;
    const float *gr = dy + i * D;
    float *dxr = dx + i * D;
    const double rstd = rowRms(xr, D, eps);
    // dx = r * g - x * r^3 * mean(g * x), g = dy * w.
    double sgx = rowSum(D, [=](int64_t c) { return double(gr[c]) * double(w[c]) * double(xr[c]); });
    const float r = float(rstd);
    const float k = float(rstd * rstd * rstd * sgx / double(D));
    rmsNormBackwardRow(gr, xr, w, dxr, dw, D, r, k);
  }
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

// inv_freq[i] for i < Dh/2 as HF computes it in float32, optionally with the
// Llama 3 rescaling (_compute_llama3_parameters). Python scalars meet float32
// tensors, so every operation rounds to float; `a / t` is t.reciprocal() * a.
float ropeInvFreq(int64_t i, int64_t Dh, double theta, const Llama3Scaling *scaling) {
  const float e = float(2 * i) / float(Dh);
  const float inv = 1.0f / std::pow(float(theta), e);
  if (!scaling)
    return inv;
  const double orig = double(scaling->originalMaxPosition);
  const float lowWavelen = float(orig / scaling->lowFreqFactor);
  const float highWavelen = float(orig / scaling->highFreqFactor);
  const float factor = float(scaling->factor);
  const float wavelen = (1.0f / inv) * float(2.0 * kPi);
  if (wavelen > lowWavelen)
    return inv / factor;
  if (wavelen < highWavelen)
    return inv;
  const float smooth = ((1.0f / wavelen) * float(orig) - float(scaling->lowFreqFactor)) /
                       float(scaling->highFreqFactor - scaling->lowFreqFactor);
  return (1.0f - smooth) * inv / factor + smooth * inv;
}

FSDP_HOT void rope(const float *x, float *y, int64_t B, int64_t S, int64_t H, int64_t Dh,
                   double theta, const Llama3Scaling *scaling, bool inverse) {
  const int64_t half = Dh / 2, width = H * Dh;
  constexpr int64_t kChunk = 128;
  float inv[kChunk], cs[kChunk], sn[kChunk];
  for (int64_t i0 = 0; i0 < half; i0 += kChunk) {
    const int64_t w = std::min(kChunk, half - i0);
    for (int64_t i = 0; i < w; ++i)
      inv[i] = ropeInvFreq(i0 + i, Dh, theta, scaling);
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t i = 0; i < w; ++i) {
        const float angle = float(s) * inv[i]; // float32 outer product, as HF
        cs[i] = float(std::cos(double(angle)));
        const float sv = float(std::sin(double(angle)));
        sn[i] = inverse ? -sv : sv;
      }
      for (int64_t b = 0; b < B; ++b) {
        const float *xr = x + (b * S + s) * width;
        float *yr = y + (b * S + s) * width;
        for (int64_t h = 0; h < H; ++h) {
          const float *x1 = xr + h * Dh + i0, *x2 = x1 + half; // y may be x
          float *y1 = yr + h * Dh + i0, *y2 = y1 + half;
          for (int64_t i = 0; i < w; ++i) {
            const float a = x1[i], c = x2[i];
            y1[i] = a * cs[i] - c * sn[i];
            y2[i] = c * cs[i] + a * sn[i];
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

//===----------------------------------------------------------------------===//
// Split, concat
//===----------------------------------------------------------------------===//

void split(const float *x, float *const *outs, int64_t parts, int64_t n, int64_t W) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < parts; ++p)
      std::memcpy(outs[p] + i * W, x + (i * parts + p) * W, sizeof(float) * W);
}

void concat(const float *const *ins, float *y, int64_t parts, int64_t n, int64_t W) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < parts; ++p)
      std::memcpy(y + (i * parts + p) * W, ins[p] + i * W, sizeof(float) * W);
}

//===----------------------------------------------------------------------===//
// Causal attention
//===----------------------------------------------------------------------===//

namespace {
// Query rows go in tiles of kAttentionTile: each tile's scores against the
// keys it can see, [t, i1] with i1 = the tile's end, are one sgemm, so no
// S x S matrix for a whole head ever exists.

inline int64_t attentionTile(int64_t S) { return std::min(S, kAttentionTile); }

// p[t, i1] (row stride i1) = the softmax over keys j <= i0 + r of row r of
// (q_tile k[0:i1]ᵀ) * scale, for the t query rows i0..i0+t-1 (i1 = i0 + t);
// masked entries (j > i0 + r) are 0. Scores in float, softmax as PyTorch's:
// max-subtracted, exp, divided by the sum. Always inlined, so that both
// callers' x86-64-v3 clones get the vectorized exp.
__attribute__((always_inline)) inline void attentionProbs(const float *q, int64_t qStride,
                                                          const float *k, int64_t kStride,
                                                          int64_t i0, int64_t t, int64_t Dh,
                                                          float scale, float *p) {
  const int64_t i1 = i0 + t;
  sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, i1, Dh, scale, q, qStride, k, kStride, 0.0f, p,
        i1);
  for (int64_t r = 0; r < t; ++r) {
    float *pr = p + r * i1;
    const int64_t m = i0 + r + 1; // keys 0..i0+r
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
    for (; j < i1; ++j)
      pr[j] = 0.0f;
  }
}
} // namespace

FSDP_HOT void causalAttentionForward(const float *q, const float *k, const float *v, float *out,
                                     int64_t B, int64_t S, int64_t H, int64_t KV, int64_t Dh,
                                     float *scratch) {
  if (B <= 0 || S <= 0 || H <= 0 || Dh <= 0)
    return;
  const int64_t qStride = H * Dh, kStride = KV * Dh, group = H / KV, T = attentionTile(S);
  const float scale = float(1.0 / std::sqrt(double(Dh)));
  float *p = scratch; // [t, i1] <= [T, S]
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvOff = b * S * kStride + (h / group) * Dh;
      const float *kb = k + kvOff, *vb = v + kvOff;
      for (int64_t i0 = 0; i0 < S; i0 += T) {
        const int64_t t = std::min(T, S - i0), i1 = i0 + t;
        const int64_t qOff = (b * S + i0) * qStride + h * Dh;
        attentionProbs(q + qOff, qStride, kb, kStride, i0, t, Dh, scale, p);
        // out_tile = P v[0:i1]
        sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, Dh, i1, 1.0f, p, i1, vb, kStride, 0.0f,
              out + qOff, qStride);
      }
    }
}

FSDP_HOT void causalAttentionBackward(const float *dout, const float *q, const float *k,
                                      const float *v, const float *out, float *dq, float *dk,
                                      float *dv, int64_t B, int64_t S, int64_t H, int64_t KV,
                                      int64_t Dh, float *scratch) {
  if (B <= 0 || S <= 0 || H <= 0 || Dh <= 0)
    return;
  const int64_t qStride = H * Dh, kStride = KV * Dh, group = H / KV, T = attentionTile(S);
  const float scale = float(1.0 / std::sqrt(double(Dh)));
  // dk, dv are sums over query rows (and, with KV < H, over the query heads
  // sharing a kv head): zeroed once, then accumulated tile by tile.
  std::memset(dk, 0, sizeof(float) * B * S * kStride);
  std::memset(dv, 0, sizeof(float) * B * S * kStride);
  float *p = scratch, *ds = scratch + T * S; // each [t, i1] <= [T, S]
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvOff = b * S * kStride + (h / group) * Dh;
      const float *kb = k + kvOff, *vb = v + kvOff;
      float *dkb = dk + kvOff, *dvb = dv + kvOff;
      for (int64_t i0 = 0; i0 < S; i0 += T) {
        const int64_t t = std::min(T, S - i0), i1 = i0 + t;
        const int64_t qOff = (b * S + i0) * qStride + h * Dh;
        const float *qt = q + qOff, *dyt = dout + qOff, *ot = out + qOff;
        attentionProbs(qt, qStride, kb, kStride, i0, t, Dh, scale, p);
        // dP = dout_tile v[0:i1]ᵀ
        sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, i1, Dh, 1.0f, dyt, qStride, vb, kStride,
              0.0f, ds, i1);
        // dS = P (dP - D_r), D_r = dout_r · out_r; masked entries 0. The
        // score's scale goes into the sgemms below.
        for (int64_t r = 0; r < t; ++r) {
          const float Dr = dot(dyt + r * qStride, ot + r * qStride, Dh);
          const float *pr = p + r * i1;
          float *dsr = ds + r * i1;
          const int64_t m = i0 + r + 1;
          int64_t j = 0;
          for (; j < m; ++j)
            dsr[j] = pr[j] * (dsr[j] - Dr);
          for (; j < i1; ++j)
            dsr[j] = 0.0f;
        }
        // dq_tile = dS k[0:i1] * scale
        sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, Dh, i1, scale, ds, i1, kb, kStride,
              0.0f, dq + qOff, qStride);
        // dk[0:i1] += dSᵀ q_tile * scale; dv[0:i1] += Pᵀ dout_tile
        sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, Dh, t, scale, ds, i1, qt, qStride, 1.0f,
              dkb, kStride);
        sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, Dh, t, 1.0f, p, i1, dyt, qStride, 1.0f,
              dvb, kStride);
      }
    }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

FSDP_HOT void geluForward(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    // HF NewGELUActivation: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    y[i] = 0.5f * v * (1.0f + tanhf1(kGeluC * (v + kGeluA * (v * v * v))));
  }
}

FSDP_HOT void geluBackward(const float *dy, const float *x, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanhf1(kGeluC * (v + kGeluA * (v * v * v)));
    const float du = kGeluC * (1.0f + 3.0f * kGeluA * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

FSDP_HOT void siluMulForward(const float *gate, const float *up, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = g / (1.0f + expf1(-g)) * up[i]; // F.silu's formula, then the product
  }
}

FSDP_HOT void siluMulBackward(const float *dy, const float *gate, const float *up, float *dgate,
                              float *dup, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], s = sigmoid(g);
    dup[i] = dy[i] * (g / (1.0f + expf1(-g)));
    // silu_backward(dy * up, gate) = grad * s * (1 + g * (1 - s))
    dgate[i] = (dy[i] * up[i]) * s * (1.0f + g * (1.0f - s));
  }
}

FSDP_HOT void add(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i];
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

namespace {
// Row max and sum of exp(x - max): terms in float, eight lanes summed in
// double.
inline void rowLse(const float *x, int64_t V, float &mx, double &sum) {
  const float m = rowMax(x, V);
  mx = m;
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t c = 0;
  for (; c + 8 <= V; c += 8)
    for (int l = 0; l < 8; ++l)
      acc[l] += double(expf1(x[c + l] - m));
  double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; c < V; ++c)
    s += double(expf1(x[c] - m));
  sum = s;
}
} // namespace

FSDP_HOT float crossEntropyForward(const float *logits, const int64_t *targets, int64_t n,
                                   int64_t V) {
  if (n <= 0)
    return 0.0f;
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float *x = logits + i * V;
    float mx;
    double sum;
    rowLse(x, V, mx, sum);
    total += double(mx) + std::log(sum) - double(x[targets[i]]);
  }
  return float(total / double(n));
}

FSDP_HOT void crossEntropyBackward(const float *logits, const int64_t *targets, float *dlogits,
                                   int64_t n, int64_t V, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    const float *x = logits + i * V;
    float *d = dlogits + i * V;
    float mx;
    double sum;
    rowLse(x, V, mx, sum);
    const float k = float(double(scale) / sum);
    for (int64_t c = 0; c < V; ++c)
      d[c] = expf1(x[c] - mx) * k;
    d[targets[i]] -= scale;
  }
}

//===----------------------------------------------------------------------===//
// Optimizer, norms
//===----------------------------------------------------------------------===//

FSDP_HOT void adamw(float *param, const float *grad, float *expAvg, float *expAvgSq,
                    const bool *decay, int64_t n, int64_t step, double lr, double beta1,
                    double beta2, double eps, double weightDecay, double gradScale) {
  // torch 1.13 _single_tensor_adamw; each tensor op rounds to float, with
  // its Python scalar converted to float.
  const float decayMul = float(1.0 - lr * weightDecay);
  const float b1 = float(beta1), oneMinusB1 = float(1.0 - beta1);
  const float b2 = float(beta2), oneMinusB2 = float(1.0 - beta2);
  const double biasCorrection1 = 1.0 - std::pow(beta1, double(step));
  const double biasCorrection2 = 1.0 - std::pow(beta2, double(step));
  const float negStepSize = float(-(lr / biasCorrection1));
  const float bc2Sqrt = float(std::sqrt(biasCorrection2));
  const float epsF = float(eps);
  const float gs = float(gradScale);
  auto update = [&](int64_t i, float mul) {
    const float g = grad[i] * gs;
    const float p = param[i] * mul;
    const float m = expAvg[i] * b1 + oneMinusB1 * g;
    const float v = expAvgSq[i] * b2 + oneMinusB2 * g * g;
    const float denom = std::sqrt(v) / bc2Sqrt + epsF;
    param[i] = p + negStepSize * m / denom;
    expAvg[i] = m;
    expAvgSq[i] = v;
  };
  // Multiplying by 1 (no decay, or grad scale 1) leaves a float unchanged.
  if (!decay) {
    for (int64_t i = 0; i < n; ++i)
      update(i, decayMul);
    return;
  }
  // The mask in blocks, as floats first: the bool loads keep the update
  // loop from vectorizing otherwise.
  constexpr int64_t kBlock = 256;
  float mul[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t w = std::min(kBlock, n - i0);
    for (int64_t i = 0; i < w; ++i)
      mul[i] = decay[i0 + i] ? decayMul : 1.0f;
    for (int64_t i = 0; i < w; ++i)
      update(i0 + i, mul[i]);
  }
}

FSDP_HOT double sumOfSquares(const float *x, int64_t n) {
  return rowSum(n, [=](int64_t i) { return double(x[i]) * double(x[i]); });
}

void toBf16(const float *x, uint16_t *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = floatToBf16(x[i]);
}

void fromBf16(const uint16_t *h, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16ToFloat(h[i]);
}

void roundToBf16(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16ToFloat(floatToBf16(x[i]));
}

} // namespace fsdp::kernels
