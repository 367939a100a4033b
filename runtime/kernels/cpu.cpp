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
#include "runtime/kernels/cpu_impl.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sched.h>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <vector>

// OpenBLAS's own buffer table, exported by libopenblas (driver/others/memory.c).
extern "C" void *blas_memory_alloc(int procpos);
extern "C" void blas_memory_free(void *buffer);
extern "C" char *openblas_get_config(void);

namespace fsdp::kernels {

using namespace detail;

namespace {
// OpenBLAS (0.3.21, Debian's) gives each thread inside it a work buffer from
// a table of NUM_BUFFERS = max(50, 2 * MAX_THREADS) slots (common.h), mapping
// BUFFER_SIZE (128 MiB on x86-64) the first time a slot is used. Its own
// worker threads hold a slot each. Past the table it falls into an overflow
// path that maps a new buffer at every use and records each in a 512-entry
// array without a bound: after 512 such uses the heap is overwritten, and two
// threads overflowing at once get a null buffer. Both crashed the threads
// backend at thousands of ranks (SIGSEGV in sgemm_itcopy, "corrupted size vs.
// prev_size"; reproduced with 400 threads calling sgemm at once). And a
// mapping that fails (an address-space limit) is retried forever.
//
// So: at most blasCallerLimit() threads are inside OpenBLAS at once, which
// leaves every worker thread its slot; and reserveBlasBuffers() maps the
// buffers of a run's callers up front, each one tried first, so that a limit
// is an error before the first step and OpenBLAS never maps during a run.
constexpr int64_t kBlasBufferBytes = int64_t(32) << 22; // BUFFER_SIZE, common_x86_64.h
std::mutex blasMu;
std::condition_variable blasCv;
int blasInside = 0;
// The most of our callers that were ever inside at once: the slots OpenBLAS
// has mapped for them (it reuses the first free slot).
int blasMapped = 0;
// Once buffers are reserved, the gate admits only as many as are mapped.
bool blasReserved = false;

std::string describeMiB(int64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

// What this process has mapped now (VmSize), in bytes; -1 when unknown.
int64_t mappedBytes() {
  FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  long long kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmSize: %lld kB", &kb) == 1)
      break;
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}
} // namespace

int blasCallerLimit() {
  static const int limit = [] {
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"
    int maxThreads = 0;
    const char *config = openblas_get_config();
    if (const char *m = config ? std::strstr(config, "MAX_THREADS=") : nullptr)
      maxThreads = std::atoi(m + std::strlen("MAX_THREADS="));
    if (maxThreads <= 0)
      return 16; // unknown: well inside the smallest table (50)
    return std::max(1, std::max(50, 2 * maxThreads) - maxThreads);
  }();
  return limit;
}

std::string reserveBlasBuffers(int callers) {
  // More callers than CPUs gain nothing (each call runs on one core).
  cpu_set_t cpus;
  int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  callers = std::max(1, std::min({callers, std::max(1, ncpu), blasCallerLimit()}));
  std::unique_lock<std::mutex> lock(blasMu);
  blasCv.wait(lock, [] { return blasInside == 0; });
  if (callers <= blasMapped) {
    blasReserved = true;
    return "";
  }
  // Held together, so that each takes its own slot; the first blasMapped
  // reuse mapped ones, the rest are mapped now, each tried first.
  std::vector<void *> held;
  std::string error;
  for (int i = 0; i < callers && error.empty(); ++i) {
    if (i >= blasMapped) {
      void *probe = mmap(nullptr, (size_t)kBlasBufferBytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (probe == MAP_FAILED) {
        int e = errno;
        std::string limits;
        for (auto [resource, name] :
             {std::pair<int, const char *>{RLIMIT_AS, "address-space limit (ulimit -v)"},
              {RLIMIT_DATA, "data limit (ulimit -d)"}}) {
          struct rlimit rl;
          if (getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            limits += std::string(limits.empty() ? "" : ", ") + "the " + name + " is " +
                      describeMiB((int64_t)rl.rlim_cur);
        }
        int64_t mapped = mappedBytes();
        error = "OpenBLAS needs a work buffer of " + describeMiB(kBlasBufferBytes) +
                " for each thread inside it at once (" + std::to_string(callers) +
                " here), and buffer " + std::to_string(i + 1) +
                " cannot be mapped: " + std::strerror(e) + " (" +
                (limits.empty() ? "no limit is set" : limits) +
                (mapped >= 0 ? "; this process maps " + describeMiB(mapped) : "") +
                "); the run needs " + describeMiB((callers - i) * kBlasBufferBytes) +
                " more address space";
        break;
      }
      munmap(probe, (size_t)kBlasBufferBytes);
    }
    void *buffer = blas_memory_alloc(0);
    if (!buffer) {
      error =
          "OpenBLAS has no work buffer for " + std::to_string(i + 1) + " threads inside it at once";
      break;
    }
    held.push_back(buffer);
  }
  for (void *buffer : held)
    blas_memory_free(buffer);
  blasMapped = std::max(blasMapped, (int)held.size());
  if (error.empty())
    blasReserved = true;
  return error;
}

void detail::sgemm(CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, int64_t M, int64_t N, int64_t K,
                   float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                   float beta, float *C, int64_t ldc) {
  {
    std::unique_lock<std::mutex> lock(blasMu);
    blasCv.wait(lock, [] {
      return blasInside < (blasReserved ? std::max(1, blasMapped) : blasCallerLimit());
    });
    blasMapped = std::max(blasMapped, ++blasInside);
  }
  cblas_sgemm(CblasRowMajor, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  bool last;
  {
    std::lock_guard<std::mutex> lock(blasMu);
    last = --blasInside == 0;
  }
  // One slot freed, one waiter to wake; a reservation waits for none inside.
  if (last)
    blasCv.notify_all();
  else
    blasCv.notify_one();
}

//===----------------------------------------------------------------------===//
// Embedding, positions
//===----------------------------------------------------------------------===//

void embeddingForward(const int64_t *ids, const float *table, float *out, int64_t n, int64_t D) {
  embeddingForwardT(ids, table, out, n, D);
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

void tokenTypeIds(int64_t *out, int64_t B, int64_t S) {
  for (int64_t e = 0; e < B * S; ++e)
    out[e] = 0;
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
    sgemm(CblasNoTrans, CblasNoTrans, n, out, in, 1.0f, x, in, w, out, beta, y, out);
  else // y = x Wᵀ, W [out, in]
    sgemm(CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y, out);
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
    sgemm(CblasNoTrans, CblasTrans, n, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
  else // dx = dy W, W [out, in]
    sgemm(CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
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
    sgemm(CblasTrans, CblasNoTrans, in, out, n, 1.0f, x, in, dy, out, 0.0f, dw, out);
  else // dW [out, in] = dyᵀ x
    sgemm(CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in);
}

void biasBackward(const float *dy, float *db, int64_t n, int64_t out) {
  biasBackwardT(dy, db, n, out);
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

FSDP_HOT void layerNormForward(const float *x, const float *w, const float *b, float *y, int64_t n,
                               int64_t D, double eps) {
  layerNormForwardT(x, w, b, y, n, D, eps);
}

FSDP_HOT void layerNormBackward(const float *dy, const float *x, const float *w, float *dx,
                                float *dw, float *db, int64_t n, int64_t D, double eps) {
  layerNormBackwardT(dy, x, w, dx, dw, db, n, D, eps);
}

FSDP_HOT void rmsNormForward(const float *x, const float *w, float *y, int64_t n, int64_t D,
                             double eps) {
  rmsNormForwardT(x, w, y, n, D, eps);
}

FSDP_HOT void rmsNormBackward(const float *dy, const float *x, const float *w, float *dx, float *dw,
                              int64_t n, int64_t D, double eps) {
  rmsNormBackwardT(dy, x, w, dx, dw, n, D, eps);
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

// inv_freq[i] for i < Dh/2 as transformers' modeling_rope_utils computes it
// in float32. Python scalars meet float32 tensors, so every tensor operation
// rounds to float (a Python scalar operand first rounded to float); `a / t`
// is t.reciprocal() * a. What Python computes on scalars is computed here in
// double, in the same order, with the same libm (log, pow, floor, ceil).
namespace {
// theta ** (arange(0, Dh, 2).float() / Dh): the default's pos_freqs.
float ropePow(int64_t i, int64_t Dh, double theta) {
  const float e = float(2 * i) / float(Dh);
  return std::pow(float(theta), e);
}

// _compute_llama3_parameters.
float llama3InvFreq(float inv, const RopeScaling &s) {
  const double orig = double(s.originalMaxPosition);
  const float lowWavelen = float(orig / s.lowFreqFactor);
  const float highWavelen = float(orig / s.highFreqFactor);
  const float factor = float(s.factor);
  const float wavelen = (1.0f / inv) * float(2.0 * kPi);
  if (wavelen > lowWavelen)
    return inv / factor;
  if (wavelen < highWavelen)
    return inv;
  const float smooth = ((1.0f / wavelen) * float(orig) - float(s.lowFreqFactor)) /
                       float(s.highFreqFactor - s.lowFreqFactor);
  return (1.0f - smooth) * inv / factor + smooth * inv;
}

// _compute_dynamic_ntk_parameters at seq_len = max_position_embeddings (its
// value at initialisation, kept by dynamic_rope_update while no sequence is
// longer): base * ((factor * seq_len / max) - (factor - 1)) ** (dim / (dim -
// 2)), in double (Python floats), then the default's frequencies of it.
double dynamicBase(double theta, const RopeScaling &s, int64_t Dh) {
  const double seqLen = double(s.originalMaxPosition), max = double(s.originalMaxPosition);
  return theta * std::pow((s.factor * seqLen / max) - (s.factor - 1), double(Dh) / double(Dh - 2));
}

// _compute_yarn_parameters: find_correction_dim in double.
double yarnCorrectionDim(double rotations, int64_t Dh, double theta, int64_t originalMax) {
  return (double(Dh) * std::log(double(originalMax) / (rotations * 2 * kPi))) /
         (2 * std::log(theta));
}

float yarnInvFreq(int64_t i, int64_t Dh, double theta, const RopeScaling &s) {
  // find_correction_range(beta_fast, beta_slow, ...)
  double low = yarnCorrectionDim(s.betaFast, Dh, theta, s.originalMaxPosition);
  double high = yarnCorrectionDim(s.betaSlow, Dh, theta, s.originalMaxPosition);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(Dh - 1));
  // linear_ramp_factor(low, high, Dh // 2)[i]: (arange - low) / (high - low)
  // in float32, clamped to [0, 1].
  if (low == high)
    high += 0.001; // transformers' "prevent singularity"
  float ramp = (float(i) - float(low)) / float(high - low);
  ramp = std::min(std::max(ramp, 0.0f), 1.0f);
  const float extrapolationFactor = 1.0f - ramp;
  const float pos = ropePow(i, Dh, theta);
  const float extrapolation = 1.0f / pos;
  const float interpolation = 1.0f / (float(s.factor) * pos);
  const float a = interpolation * (1.0f - extrapolationFactor);
  const float b = extrapolation * extrapolationFactor;
  return a + b;
}
} // namespace

// Never inlined: into rope's x86-64-v3 clone (FSDP_HOT) GCC would contract
// the products and sums above into FMAs, which round once where torch rounds
// twice, and the CPU's frequencies would no longer be the CUDA kernels'.
__attribute__((noinline)) float ropeInvFreq(int64_t i, int64_t Dh, double theta,
                                            const RopeScaling *scaling) {
  if (!scaling)
    return 1.0f / ropePow(i, Dh, theta);
  switch (scaling->kind) {
  case RopeScalingKind::Linear:
    return (1.0f / ropePow(i, Dh, theta)) / float(scaling->factor);
  case RopeScalingKind::Dynamic:
    return 1.0f / ropePow(i, Dh, dynamicBase(theta, *scaling, Dh));
  case RopeScalingKind::Yarn:
    return yarnInvFreq(i, Dh, theta, *scaling);
  case RopeScalingKind::Llama3:
    return llama3InvFreq(1.0f / ropePow(i, Dh, theta), *scaling);
  }
  return 1.0f / ropePow(i, Dh, theta);
}

float ropeAttentionFactor(const RopeScaling *scaling) {
  return scaling && scaling->kind == RopeScalingKind::Yarn ? float(scaling->attentionFactor) : 1.0f;
}

FSDP_HOT void rope(const float *x, float *y, int64_t B, int64_t S, int64_t H, int64_t Dh,
                   double theta, const RopeScaling *scaling, bool inverse) {
  ropeT(x, y, B, S, H, Dh, theta, scaling, inverse);
}

//===----------------------------------------------------------------------===//
// Split, concat
//===----------------------------------------------------------------------===//

void split(const float *x, float *const *outs, int64_t parts, int64_t n, int64_t W) {
  splitT(x, outs, parts, n, W);
}

void concat(const float *const *ins, float *y, int64_t parts, int64_t n, int64_t W) {
  concatT(ins, y, parts, n, W);
}

//===----------------------------------------------------------------------===//
// Attention (causal or bidirectional)
//===----------------------------------------------------------------------===//

FSDP_HOT void attentionForward(const float *q, const float *k, const float *v, float *out,
                               int64_t B, int64_t S, int64_t H, int64_t KV, int64_t Dh, bool causal,
                               int64_t window, float *scratch) {
  const AttentionDims d(B, S, H, KV, Dh);
  if (d.empty)
    return;
  const int64_t qStride = d.qStride, kStride = d.kStride, group = d.group, T = d.T;
  const float scale = d.scale;
  float *p = scratch; // [t, i1 - j0] <= [T, S]
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvOff = b * S * kStride + (h / group) * Dh;
      const float *kb = k + kvOff, *vb = v + kvOff;
      for (int64_t i0 = 0; i0 < S; i0 += T) {
        const int64_t t = std::min(T, S - i0), j0 = attentionFirstKey(i0, causal, window);
        const int64_t n = attentionKeyEnd(i0, t, S, causal) - j0;
        const int64_t qOff = (b * S + i0) * qStride + h * Dh;
        attentionProbs(q + qOff, qStride, kb + j0 * kStride, kStride, i0, j0, t, n, Dh, scale,
                       causal, window, p);
        // out_tile = P v[j0:i1]
        sgemm(CblasNoTrans, CblasNoTrans, t, Dh, n, 1.0f, p, n, vb + j0 * kStride, kStride, 0.0f,
              out + qOff, qStride);
      }
    }
}

FSDP_HOT void attentionBackward(const float *dout, const float *q, const float *k, const float *v,
                                const float *out, float *dq, float *dk, float *dv, int64_t B,
                                int64_t S, int64_t H, int64_t KV, int64_t Dh, bool causal,
                                int64_t window, float *scratch) {
  const AttentionDims d(B, S, H, KV, Dh);
  if (d.empty)
    return;
  const int64_t qStride = d.qStride, kStride = d.kStride, group = d.group, T = d.T;
  const float scale = d.scale;
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
        const int64_t t = std::min(T, S - i0), j0 = attentionFirstKey(i0, causal, window);
        const int64_t n = attentionKeyEnd(i0, t, S, causal) - j0;
        const int64_t qOff = (b * S + i0) * qStride + h * Dh, kOff = j0 * kStride;
        const float *qt = q + qOff, *dyt = dout + qOff, *ot = out + qOff;
        attentionProbs(qt, qStride, kb + kOff, kStride, i0, j0, t, n, Dh, scale, causal, window, p);
        attentionBackwardTile(p, ds, qt, qStride, dyt, qStride, ot, qStride, kb + kOff, vb + kOff,
                              kStride, dkb + kOff, dvb + kOff, dq + qOff, qStride, i0, j0, t, n, Dh,
                              scale, causal);
      }
    }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

FSDP_HOT void geluForward(const float *x, float *y, int64_t n, bool tanh) {
  geluForwardT(x, y, n, tanh);
}

FSDP_HOT void geluBackward(const float *dy, const float *x, float *dx, int64_t n, bool tanh) {
  geluBackwardT(dy, x, dx, n, tanh);
}

FSDP_HOT void siluMulForward(const float *gate, const float *up, float *y, int64_t n) {
  siluMulForwardT(gate, up, y, n);
}

FSDP_HOT void siluMulBackward(const float *dy, const float *gate, const float *up, float *dgate,
                              float *dup, int64_t n) {
  siluMulBackwardT(dy, gate, up, dgate, dup, n);
}

FSDP_HOT void add(const float *a, const float *b, float *y, int64_t n) { addT(a, b, y, n); }

FSDP_HOT void classTokenForward(const float *x, const float *cls, const float *pos, float *y,
                                int64_t B, int64_t S, int64_t D) {
  classTokenForwardT(x, cls, pos, y, B, S, D);
}
FSDP_HOT void classTokenBackward(const float *dy, float *dx, float *dcls, float *dpos, int64_t B,
                                 int64_t S, int64_t D) {
  classTokenBackwardT(dy, dx, dcls, dpos, B, S, D);
}
FSDP_HOT void firstTokenForward(const float *x, float *y, int64_t B, int64_t S, int64_t D) {
  firstTokenForwardT(x, y, B, S, D);
}
FSDP_HOT void firstTokenBackward(const float *dy, float *dx, int64_t B, int64_t S, int64_t D) {
  firstTokenBackwardT(dy, dx, B, S, D);
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

FSDP_HOT float crossEntropyForward(const float *logits, const int64_t *targets, int64_t n,
                                   int64_t V) {
  return crossEntropyForwardT(logits, targets, n, V);
}

FSDP_HOT void crossEntropyBackward(const float *logits, const int64_t *targets, float *dlogits,
                                   int64_t n, int64_t V, float scale) {
  crossEntropyBackwardT(logits, targets, dlogits, n, V, scale);
}

//===----------------------------------------------------------------------===//
// Optimizer, norms
//===----------------------------------------------------------------------===//

// Not contracted to FMA (fp-contract=off, also in the x86-64-v3 clone):
// each operation rounds, as in torch's tensor ops and the CUDA kernel
// (__fmul_rn, __fadd_rn), so that the update is the same on every CPU and
// the host's AdamW under --offload is the device's bit for bit.
FSDP_HOT __attribute__((optimize("fp-contract=off"))) void
adamw(float *param, const float *grad, float *expAvg, float *expAvgSq, const bool *decay, int64_t n,
      int64_t step, double lr, double beta1, double beta2, double eps, double weightDecay,
      double gradScale) {
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

void addBf16Into(float *dst, const uint16_t *h, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += bf16ToFloat(h[i]);
}

void roundToBf16(const float *x, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16ToFloat(floatToBf16(x[i]));
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

FSDP_HOT void moeRouteForward(const float *logits, float *weights, int64_t *experts, int64_t *slots,
                              int64_t n, int64_t E, int64_t k, bool normalize, float *scratch) {
  moeRouteForwardT(logits, weights, experts, slots, n, E, k, normalize, scratch);
}

FSDP_HOT void moeRouteBackward(const float *dweights, const float *logits, const int64_t *experts,
                               float *dlogits, int64_t n, int64_t E, int64_t k, bool normalize,
                               float *scratch) {
  moeRouteBackwardT(dweights, logits, experts, dlogits, n, E, k, normalize, scratch);
}

void moePermuteForward(const float *x, const int64_t *slots, float *packed, int64_t n, int64_t k,
                       int64_t D) {
  moePermuteForwardT(x, slots, packed, n, k, D);
}

FSDP_HOT void moePermuteBackward(const float *dpacked, const int64_t *slots, float *dx, int64_t n,
                                 int64_t k, int64_t D) {
  moePermuteBackwardT(dpacked, slots, dx, n, k, D);
}

FSDP_HOT void moeCombineForward(const float *packed, const float *weights, const int64_t *slots,
                                float *y, int64_t n, int64_t k, int64_t D) {
  moeCombineForwardT(packed, weights, slots, y, n, k, D);
}

FSDP_HOT void moeCombineBackward(const float *dy, const float *packed, const float *weights,
                                 const int64_t *slots, float *dpacked, float *dweights, int64_t n,
                                 int64_t k, int64_t D) {
  moeCombineBackwardT(dy, packed, weights, slots, dpacked, dweights, n, k, D);
}

FSDP_HOT void moeAuxLossForward(const float *loss, const float *const *logits, float *out,
                                int64_t layers, int64_t n, int64_t E, int64_t k, double coef,
                                float *scratch) {
  moeAuxLossForwardT(loss, logits, out, layers, n, E, k, coef, scratch);
}

FSDP_HOT void moeAuxLossBackward(const float *const *logits, float *const *dlogits, int64_t layers,
                                 int64_t n, int64_t E, int64_t k, double coef, float lossScale,
                                 float *scratch) {
  moeAuxLossBackwardT(logits, dlogits, layers, n, E, k, coef, lossScale, scratch);
}

// Each expert's rows through the linear kernels (cpu_impl.h).
void moeLinearForward(const float *x, const int64_t *experts, const float *const *w, float *y,
                      int64_t n, int64_t k, int64_t E, int64_t in, int64_t out, float *scratch) {
  moeLinearForwardT(x, experts, w, y, n, k, E, in, out, scratch);
}

void moeLinearBackwardInput(const float *dy, const int64_t *experts, const float *const *w,
                            float *dx, int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                            float *scratch) {
  moeLinearBackwardInputT(dy, experts, w, dx, n, k, E, in, out, scratch);
}

void moeLinearBackwardWeight(const float *dy, const float *x, const int64_t *experts,
                             float *const *dw, int64_t n, int64_t k, int64_t E, int64_t in,
                             int64_t out, float *scratch) {
  moeLinearBackwardWeightT(dy, x, experts, dw, n, k, E, in, out, scratch);
}

} // namespace fsdp::kernels
