//===- KernelsGpuTest.cpp - CUDA kernels against the CPU kernels ---------===//
//
// Each test draws random inputs, runs the CPU kernel (cpu.h) and its CUDA
// counterpart (cuda.h), and compares: both compute in f32 (the same formulas,
// other summation orders, CUDA's libm against cpu.cpp's polynomials), each
// within its error bound of the exact result on the same inputs
// (tests/unit/KernelBounds.h: gamma_K times the condition sum for every sum
// of K terms in any order, composite kernels built from their steps, the
// libraries' functions at 2 ulps), so |gpu - cpu| <= the sum of the two
// bounds, per element. Where the f32 operations are the same on both sides
// (copies, one addition, casts) the bits must match. Without a usable CUDA device every test is
// skipped, or, with FSDP_REQUIRE_GPU=1 (tests/gpu/run-all.sh sets it), fails.
//
// The same file runs in CTest against the CPU emulator of the CUDA kernels
// (tests/cuda-emu, label cuda-emulated), where the device is always there.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu.h"
#include "runtime/kernels/cuda.h"
#include "tests/unit/KernelBounds.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace cpu = fsdp::kernels;
namespace gpu = fsdp::cuda_kernels;
using namespace kernel_bounds;

namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Empty when a CUDA device can be used (found, and a context made on it);
// else why not.
std::string noDevice() {
  static const std::string why = [] {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
      return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    if (count == 0)
      return std::string("cudaGetDeviceCount found no device");
    e = cudaFree(nullptr); // makes the context
    if (e != cudaSuccess)
      return std::string("no context on device 0: ") + cudaGetErrorString(e);
    return std::string();
  }();
  return why;
}

bool gpuRequired() {
  const char *v = std::getenv("FSDP_REQUIRE_GPU");
  return v && std::string(v) == "1";
}

// Skips without a device; fails instead with FSDP_REQUIRE_GPU=1, so that a
// run on a machine whose GPU is missing or unusable cannot read as a pass.
#define REQUIRE_GPU()                                                                              \
  do {                                                                                             \
    const std::string why_ = noDevice();                                                           \
    if (!why_.empty() && gpuRequired())                                                            \
      FAIL() << "FSDP_REQUIRE_GPU=1, but no NVIDIA GPU can be used: " << why_;                     \
    if (!why_.empty())                                                                             \
      GTEST_SKIP() << "no CUDA device: " << why_;                                                  \
  } while (0)

template <class T> struct Dev {
  T *p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    if (cudaMalloc(&p, sizeof(T) * std::max<size_t>(count, 1)) != cudaSuccess)
      p = nullptr;
  }
  explicit Dev(const std::vector<T> &h) : Dev(h.size()) {
    if (!h.empty())
      cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  std::vector<T> get() const {
    std::vector<T> h(n);
    cudaDeviceSynchronize();
    if (n)
      cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost);
    return h;
  }
};

std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(g);
  return v;
}

std::vector<int64_t> randIds(size_t n, int64_t V, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int64_t> d(0, V - 1);
  std::vector<int64_t> v(n);
  for (auto &x : v)
    x = d(g);
  return v;
}

// Both sides' libraries (cpu.cpp's expf1, tanhf1, glibc's erff; CUDA's
// expf, tanhf, erff, at most 2 ulps each by CUDA's guide): 2 ulps.
constexpr double kLibmUlps = 2;

template <class T> VecD toD(const std::vector<T> &v) { return VecD(v.begin(), v.end()); }

// |got - ref| <= 2 e: e bounds each side's error against the exact result
// (one bound formula serves both: KernelBounds.h's analysis covers any order).
void expectClose(const std::vector<float> &got, const std::vector<float> &ref, const VecD &e,
                 const char *what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  ASSERT_EQ(e.size(), ref.size()) << what;
  size_t bad = 0, worst = 0;
  double worstErr = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(ref[i]));
    const double tol = 2 * e[i];
    if (!(err <= tol) && !(std::isnan(got[i]) && std::isnan(ref[i]))) {
      if (err / tol > worstErr || bad == 0) {
        worstErr = err / tol;
        worst = i;
      }
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size()
                     << " out of tolerance; worst at " << worst << ": gpu " << got[worst] << " cpu "
                     << ref[worst] << " (" << worstErr << "x the bound " << 2 * e[worst] << ")";
}

// A float sum of each id's rows (atomics on the GPU, in order on the CPU):
// gamma_n sum |dy| over them.
VecD embeddingBound(const std::vector<float> &dy, const std::vector<int64_t> &ids, int64_t V,
                    int64_t D) {
  VecD e(V * D, 0.0);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < D; ++c)
      e[ids[i] * D + c] += gammaK(double(ids.size())) * std::fabs(dy[i * D + c]);
  return e;
}

// One AdamW step from (p, g, m, v), torch's op order, every op rounded once
// and the Python scalars rounded to float: m = b1 m + (1 - b1) g: gamma_4
// (b1 |m| + (1 - b1) |g|); v = b2 v + (1 - b2) g g: gamma_6 (g rounded
// twice); denom = sqrt(v) / sqrt(bc2) + eps: v's error through sqrt plus
// gamma_4; p' = p mul + step, step = -lr / bc1 m / denom: m's and denom's
// errors carried, gamma_3 on the step, gamma_3 on both terms of p'.
struct AdamBounds {
  VecD p, m, v;
};
AdamBounds adamwBounds(const std::vector<float> &p, const std::vector<float> &g,
                       const std::vector<float> &m, const std::vector<float> &v, const bool *mask,
                       int64_t step, double lr, double b1, double b2, double eps, double wd,
                       double gs) {
  const size_t n = p.size();
  AdamBounds r{VecD(n), VecD(n), VecD(n)};
  const double bc1 = 1 - std::pow(b1, double(step)), bs = std::sqrt(1 - std::pow(b2, double(step)));
  for (size_t i = 0; i < n; ++i) {
    const double gi = double(g[i]) * gs, mul = !mask || mask[i] ? 1 - lr * wd : 1.0;
    const double mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
    r.m[i] = gammaK(4) * (b1 * std::fabs(m[i]) + (1 - b1) * std::fabs(gi));
    r.v[i] = gammaK(6) * (b2 * v[i] + (1 - b2) * gi * gi);
    const double sq = std::sqrt(vi), den = sq / bs + eps;
    const double eSq = sq > 0 ? std::min(r.v[i] / (2 * sq), std::sqrt(r.v[i])) : std::sqrt(r.v[i]);
    const double eDen = eSq / bs + gammaK(4) * den, upd = lr / bc1 * mi / den;
    const double eUpd =
        lr / bc1 * (r.m[i] / den + std::fabs(mi) * eDen / (den * den)) + gammaK(3) * std::fabs(upd);
    r.p[i] = gammaK(3) * (std::fabs(p[i] * mul) + std::fabs(upd)) + eUpd;
  }
  return r;
}

// Attention: the CPU's bound (tiles of whole rows) and the GPU's (an online
// softmax over key tiles of 32: one rescale per tile), averaged, since
// expectClose allows twice what it is given: their sum. o: the forward
// output both backwards read.
template <class T>
AttentionBounds attentionSideBounds(const std::vector<T> &q, const std::vector<T> &k,
                                    const std::vector<T> &v, const std::vector<T> &dy,
                                    const std::vector<T> &o, int64_t B, int64_t S, int64_t H,
                                    int64_t KV, int64_t Dh, int64_t window, bool causal) {
  const VecD oD = toD(o);
  AttentionBounds a = attentionBounds(toD(q), toD(k), toD(v), toD(dy), &oD, nullptr, B, S, H, KV,
                                      Dh, window, causal);
  const AttentionBounds b = attentionBounds(toD(q), toD(k), toD(v), toD(dy), &oD, nullptr, B, S, H,
                                            KV, Dh, window, causal, (S + 31) / 32);
  for (VecD *x : {&a.eOut, &a.eDq, &a.eDk, &a.eDv}) {
    const VecD &y = x == &a.eOut ? b.eOut : x == &a.eDq ? b.eDq : x == &a.eDk ? b.eDk : b.eDv;
    for (size_t i = 0; i < x->size(); ++i)
      (*x)[i] = ((*x)[i] + y[i]) / 2;
  }
  return a;
}

struct Cublas {
  cublasHandle_t h = nullptr;
  Cublas() { cublasCreate(&h); }
  ~Cublas() {
    if (h)
      cublasDestroy(h);
  }
};

} // namespace

TEST(KernelsGpu, Embedding) {
  REQUIRE_GPU();
  const int64_t n = 300, V = 50, D = 77;
  auto table = randn(V * D, 1), dout = randn(n * D, 2);
  auto ids = randIds(n, V, 3);
  std::vector<float> out(n * D), dtable(V * D);
  cpu::embeddingForward(ids.data(), table.data(), out.data(), n, D);
  cpu::embeddingBackward(dout.data(), ids.data(), dtable.data(), n, V, D);
  Dev<float> dT(table), dO(n * D), dG(dout), dDT(V * D);
  Dev<int64_t> dIds(ids);
  gpu::embeddingForward(dIds.p, dT.p, dO.p, n, D, nullptr);
  gpu::embeddingBackward(dG.p, dIds.p, dDT.p, n, V, D, nullptr);
  EXPECT_EQ(dO.get(), out);
  expectClose(dDT.get(), dtable, embeddingBound(dout, ids, V, D), "embeddingBackward");
}

TEST(KernelsGpu, PositionIds) {
  REQUIRE_GPU();
  const int64_t B = 3, S = 41;
  std::vector<int64_t> ref(B * S);
  cpu::positionIds(ref.data(), B, S);
  Dev<int64_t> d(B * S);
  gpu::positionIds(d.p, B, S, nullptr);
  EXPECT_EQ(d.get(), ref);
}

TEST(KernelsGpu, TokenTypeIds) {
  REQUIRE_GPU();
  const int64_t B = 3, S = 41;
  std::vector<int64_t> ref(B * S, -1);
  cpu::tokenTypeIds(ref.data(), B, S);
  Dev<int64_t> d(std::vector<int64_t>(B * S, -1)); // every element written
  gpu::tokenTypeIds(d.p, B, S, nullptr);
  EXPECT_EQ(d.get(), ref);
}

TEST(KernelsGpu, Linear) {
  REQUIRE_GPU();
  Cublas cb;
  ASSERT_NE(cb.h, nullptr);
  const int64_t n = 67, in = 129, out = 95;
  for (auto layout : {cpu::Layout::InOut, cpu::Layout::OutIn})
    for (bool withBias : {false, true}) {
      auto x = randn(n * in, 10), w = randn(in * out, 11), bias = randn(out, 12),
           dy = randn(n * out, 13);
      std::vector<float> y(n * out), dx(n * in), dw(in * out), db(out);
      cpu::linearForward(x.data(), w.data(), withBias ? bias.data() : nullptr, y.data(), n, in, out,
                         layout);
      cpu::linearBackwardInput(dy.data(), w.data(), dx.data(), n, in, out, layout);
      cpu::linearBackwardWeight(dy.data(), x.data(), dw.data(), n, in, out, layout);
      cpu::biasBackward(dy.data(), db.data(), n, out);
      Dev<float> dX(x), dW(w), dB(bias), dY(n * out), dDY(dy), dDX(n * in), dDW(in * out), dDB(out);
      gpu::linearForward(cb.h, dX.p, dW.p, withBias ? dB.p : nullptr, dY.p, n, in, out, layout,
                         nullptr);
      gpu::linearBackwardInput(cb.h, dDY.p, dW.p, dDX.p, n, in, out, layout, nullptr);
      gpu::linearBackwardWeight(cb.h, dDY.p, dX.p, dDW.p, n, in, out, layout, nullptr);
      gpu::biasBackward(dDY.p, dDB.p, n, out, nullptr);
      const std::string tag = std::string(layout == cpu::Layout::InOut ? "in_out" : "out_in") +
                              (withBias ? " bias" : "");
      const VecD bD = toD(bias);
      const LinearBounds e =
          linearBounds(toD(x), toD(w), withBias ? &bD : nullptr, toD(dy), n, in, out, layout);
      expectClose(dY.get(), y, e.y, ("linearForward " + tag).c_str());
      expectClose(dDX.get(), dx, e.dx, ("linearBackwardInput " + tag).c_str());
      expectClose(dDW.get(), dw, e.dw, ("linearBackwardWeight " + tag).c_str());
      expectClose(dDB.get(), db, e.db, "biasBackward");
    }
}

TEST(KernelsGpu, LayerNorm) {
  REQUIRE_GPU();
  for (int64_t D : {7, 256, 1000}) {
    const int64_t n = 53;
    const double eps = 1e-5;
    auto x = randn(n * D, 20, 2.0f), w = randn(D, 21), b = randn(D, 22), dy = randn(n * D, 23);
    for (auto &v : x)
      v += 0.5f;
    std::vector<float> y(n * D), dx(n * D), dw(D), db(D);
    cpu::layerNormForward(x.data(), w.data(), b.data(), y.data(), n, D, eps);
    cpu::layerNormBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), n, D,
                           eps);
    Dev<float> dX(x), dW(w), dB(b), dY(n * D), dDY(dy), dDX(n * D), dDW(D), dDB(D),
        scratch(gpu::layerNormBackwardScratchFloats(n));
    gpu::layerNormForward(dX.p, dW.p, dB.p, dY.p, n, D, eps, nullptr);
    gpu::layerNormBackward(dDY.p, dX.p, dW.p, dDX.p, dDW.p, dDB.p, n, D, eps, scratch.p, nullptr);
    // The same formulas on both sides (row statistics in double, the GPU's
    // column sums in double, the CPU's in float: the float bound covers both).
    const NormBounds e = layerNormBounds(toD(x), toD(w), toD(b), toD(dy), n, D, eps);
    expectClose(dY.get(), y, e.y, "layerNormForward");
    expectClose(dDX.get(), dx, e.dx, "layerNormBackward dx");
    expectClose(dDW.get(), dw, e.dw, "layerNormBackward dw");
    expectClose(dDB.get(), db, e.db, "layerNormBackward db");
    // In place: dx == dy.
    gpu::layerNormBackward(dDY.p, dX.p, dW.p, dDY.p, dDW.p, dDB.p, n, D, eps, scratch.p, nullptr);
    expectClose(dDY.get(), dx, e.dx, "layerNormBackward in place dx");
    expectClose(dDW.get(), dw, e.dw, "layerNormBackward in place dw");
  }
}

TEST(KernelsGpu, RmsNorm) {
  REQUIRE_GPU();
  for (int64_t D : {5, 512, 999}) {
    const int64_t n = 61;
    const double eps = 1e-6;
    auto x = randn(n * D, 30), w = randn(D, 31), dy = randn(n * D, 32);
    std::vector<float> y(n * D), dx(n * D), dw(D);
    cpu::rmsNormForward(x.data(), w.data(), y.data(), n, D, eps);
    cpu::rmsNormBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), n, D, eps);
    Dev<float> dX(x), dW(w), dY(n * D), dDY(dy), dDX(n * D), dDW(D),
        scratch(gpu::rmsNormBackwardScratchFloats(n));
    gpu::rmsNormForward(dX.p, dW.p, dY.p, n, D, eps, nullptr);
    gpu::rmsNormBackward(dDY.p, dX.p, dW.p, dDX.p, dDW.p, n, D, eps, scratch.p, nullptr);
    const NormBounds e = rmsNormBounds(toD(x), toD(w), toD(dy), n, D, eps);
    expectClose(dY.get(), y, e.y, "rmsNormForward");
    expectClose(dDX.get(), dx, e.dx, "rmsNormBackward dx");
    expectClose(dDW.get(), dw, e.dw, "rmsNormBackward dw");
  }
}

// A rope scaling of each kind: Llama 3.1's; linear; dynamic; Qwen2.5's YaRN
// (factor 4 of 32768 positions, its attention factor 0.1 ln 4 + 1), and one
// not truncated with betas and an attention factor of its own.
struct RopeScalings {
  cpu::RopeScaling llama3, linear, dynamic, yarn, yarnUntruncated;
  RopeScalings() {
    using Kind = cpu::RopeScalingKind;
    llama3.kind = Kind::Llama3, llama3.factor = 8.0, llama3.originalMaxPosition = 8192;
    llama3.lowFreqFactor = 1.0, llama3.highFreqFactor = 4.0;
    linear.kind = Kind::Linear, linear.factor = 2.5;
    dynamic.kind = Kind::Dynamic, dynamic.factor = 3.0, dynamic.originalMaxPosition = 4096;
    yarn.kind = Kind::Yarn, yarn.factor = 4.0, yarn.originalMaxPosition = 32768;
    yarn.attentionFactor = 0.1 * std::log(4.0) + 1;
    yarnUntruncated.kind = Kind::Yarn, yarnUntruncated.factor = 8.0;
    yarnUntruncated.originalMaxPosition = 64, yarnUntruncated.betaFast = 8;
    yarnUntruncated.betaSlow = 0.5, yarnUntruncated.truncate = false;
    yarnUntruncated.attentionFactor = 1.09;
  }
};

TEST(KernelsGpu, Rope) {
  REQUIRE_GPU();
  const RopeScalings sc;
  struct Case {
    int64_t B, S, H, Dh;
    double theta;
    const cpu::RopeScaling *scaling;
  } cases[] = {{2, 37, 3, 64, 10000.0, nullptr},    {1, 300, 2, 128, 500000.0, &sc.llama3},
               {2, 9, 2, 7, 10000.0, nullptr},      {1, 5, 1, 600, 10000.0, nullptr},
               {2, 37, 3, 64, 10000.0, &sc.linear}, {2, 37, 3, 64, 10000.0, &sc.dynamic},
               {1, 300, 2, 128, 1e6, &sc.yarn},     {2, 37, 3, 16, 10000.0, &sc.yarnUntruncated}};
  for (const Case &c : cases)
    for (bool inverse : {false, true}) {
      const int64_t n = c.B * c.S * c.H * c.Dh;
      auto x = randn(n, 40);
      std::vector<float> y(n);
      cpu::rope(x.data(), y.data(), c.B, c.S, c.H, c.Dh, c.theta, c.scaling, inverse);
      Dev<float> dX(x), dY(n);
      gpu::rope(dX.p, dY.p, c.B, c.S, c.H, c.Dh, c.theta, c.scaling, inverse, nullptr);
      // The GPU takes the CPU's float angles: only the rotation's roundings.
      const VecD e = ropeBound(toD(x), nullptr, c.B, c.S, c.H, c.Dh, c.theta, c.scaling, true);
      expectClose(dY.get(), y, e, "rope");
      gpu::rope(dX.p, dX.p, c.B, c.S, c.H, c.Dh, c.theta, c.scaling, inverse, nullptr);
      expectClose(dX.get(), y, e, "rope in place");
    }
}

TEST(KernelsGpu, SplitConcat) {
  REQUIRE_GPU();
  const int64_t parts = 3, n = 17, W = 33;
  auto x = randn(n * parts * W, 50);
  std::vector<std::vector<float>> outs(parts, std::vector<float>(n * W));
  std::vector<float *> outPtrs;
  for (auto &o : outs)
    outPtrs.push_back(o.data());
  cpu::split(x.data(), outPtrs.data(), parts, n, W);
  Dev<float> dX(x), d0(n * W), d1(n * W), d2(n * W), dY(n * parts * W);
  float *dOuts[3] = {d0.p, d1.p, d2.p};
  gpu::split(dX.p, dOuts, parts, n, W, nullptr);
  EXPECT_EQ(d0.get(), outs[0]);
  EXPECT_EQ(d1.get(), outs[1]);
  EXPECT_EQ(d2.get(), outs[2]);
  const float *dIns[3] = {d0.p, d1.p, d2.p};
  gpu::concat(dIns, dY.p, parts, n, W, nullptr);
  EXPECT_EQ(dY.get(), x);
}

TEST(KernelsGpu, Attention) {
  REQUIRE_GPU();
  struct Case {
    int64_t B, S, H, KV, Dh, window; // window: Mistral's sliding window (0: full causal)
    bool causal = true;              // false: bidirectional (BERT, ViT)
  } cases[] = {
      {1, 1, 1, 1, 16, 0},        {2, 37, 4, 2, 64, 0},        {1, 100, 2, 2, 80, 0},
      {1, 130, 4, 1, 128, 0},     {1, 65, 2, 2, 256, 0},       {2, 64, 3, 3, 32, 0},
      {2, 37, 4, 2, 64, 5},       {1, 130, 2, 1, 32, 40},      {1, 70, 2, 2, 16, 1},
      {1, 1, 1, 1, 16, 0, false}, {2, 37, 4, 2, 64, 0, false}, {1, 100, 2, 1, 80, 0, false},
      {2, 64, 3, 3, 32, 0, false}};
  for (const Case &c : cases) {
    const int64_t nq = c.B * c.S * c.H * c.Dh, nk = c.B * c.S * c.KV * c.Dh;
    auto q = randn(nq, 60), k = randn(nk, 61), v = randn(nk, 62), dout = randn(nq, 63);
    std::vector<float> out(nq), dq(nq), dk(nk), dv(nk);
    std::vector<float> scratch(cpu::attentionScratchFloats(c.S, true));
    cpu::attentionForward(q.data(), k.data(), v.data(), out.data(), c.B, c.S, c.H, c.KV, c.Dh,
                          c.causal, c.window, scratch.data());
    cpu::attentionBackward(dout.data(), q.data(), k.data(), v.data(), out.data(), dq.data(),
                           dk.data(), dv.data(), c.B, c.S, c.H, c.KV, c.Dh, c.causal, c.window,
                           scratch.data());
    Dev<float> dQ(q), dK(k), dV(v), dO(nq), dDO(dout), dDQ(nq), dDK(nk), dDV(nk),
        dS(gpu::attentionBackwardScratchFloats(c.B, c.S, c.H));
    const std::string tag = " S=" + std::to_string(c.S) + " Dh=" + std::to_string(c.Dh) +
                            " window=" + std::to_string(c.window) +
                            (c.causal ? " causal" : " bidirectional");
    gpu::attentionForward(dQ.p, dK.p, dV.p, dO.p, c.B, c.S, c.H, c.KV, c.Dh, c.causal, c.window,
                          nullptr);
    // The backward reads the CPU's forward output (same D_i on both sides).
    const AttentionBounds e =
        attentionSideBounds(q, k, v, dout, out, c.B, c.S, c.H, c.KV, c.Dh, c.window, c.causal);
    expectClose(dO.get(), out, e.eOut, ("attention forward" + tag).c_str());
    Dev<float> dOutRef(out);
    gpu::attentionBackward(dDO.p, dQ.p, dK.p, dV.p, dOutRef.p, dDQ.p, dDK.p, dDV.p, c.B, c.S, c.H,
                           c.KV, c.Dh, c.causal, c.window, dS.p, nullptr);
    expectClose(dDQ.get(), dq, e.eDq, ("attention dq" + tag).c_str());
    expectClose(dDK.get(), dk, e.eDk, ("attention dk" + tag).c_str());
    expectClose(dDV.get(), dv, e.eDv, ("attention dv" + tag).c_str());
  }
}

// grid.y holds B * H blocks: past CUDA's 65535 the call is refused before
// any launch (no memory is touched).
TEST(KernelsGpu, AttentionGridLimit) {
  REQUIRE_GPU();
  const int64_t B = 2, S = 1, H = 32768, KV = 1, Dh = 16;
  float *none = nullptr;
  cpu::bf16 *noneBf16 = nullptr;
  for (bool causal : {true, false}) {
    EXPECT_THROW(gpu::attentionForward(none, none, none, none, B, S, H, KV, Dh, causal, 0, nullptr),
                 gpu::Error);
    EXPECT_THROW(gpu::attentionBackward(none, none, none, none, none, none, none, none, B, S, H, KV,
                                        Dh, causal, 0, nullptr, nullptr),
                 gpu::Error);
    EXPECT_THROW(gpu::attentionForward(noneBf16, noneBf16, noneBf16, noneBf16, B, S, H, KV, Dh,
                                       causal, 0, nullptr),
                 gpu::Error);
    EXPECT_THROW(gpu::attentionBackward(noneBf16, noneBf16, noneBf16, noneBf16, noneBf16, noneBf16,
                                        noneBf16, noneBf16, B, S, H, KV, Dh, causal, 0, nullptr,
                                        nullptr),
                 gpu::Error);
  }
}

TEST(KernelsGpu, Elementwise) {
  REQUIRE_GPU();
  const int64_t n = 100003;
  auto a = randn(n, 70, 3.0f), b = randn(n, 71), dy = randn(n, 72);
  std::vector<float> y(n), dx(n), dg(n), du(n);
  Dev<float> dA(a), dB(b), dDY(dy), dY(n), dDX(n), dDG(n), dDU(n);

  for (bool tanh : {true, false}) { // HF gelu_new, HF gelu (exact)
    const std::string tag = tanh ? " tanh" : " exact";
    const ElemBounds e = geluBounds(toD(a), toD(dy), tanh, kLibmUlps);
    cpu::geluForward(a.data(), y.data(), n, tanh);
    gpu::geluForward(dA.p, dY.p, n, tanh, nullptr);
    expectClose(dY.get(), y, e.y, ("geluForward" + tag).c_str());
    cpu::geluBackward(dy.data(), a.data(), dx.data(), n, tanh);
    gpu::geluBackward(dDY.p, dA.p, dDX.p, n, tanh, nullptr);
    expectClose(dDX.get(), dx, e.d1, ("geluBackward" + tag).c_str());
  }

  const ElemBounds e = siluMulBounds(toD(a), toD(b), toD(dy), kLibmUlps);
  cpu::siluMulForward(a.data(), b.data(), y.data(), n);
  gpu::siluMulForward(dA.p, dB.p, dY.p, n, nullptr);
  expectClose(dY.get(), y, e.y, "siluMulForward");
  cpu::siluMulBackward(dy.data(), a.data(), b.data(), dg.data(), du.data(), n);
  gpu::siluMulBackward(dDY.p, dA.p, dB.p, dDG.p, dDU.p, n, nullptr);
  expectClose(dDG.get(), dg, e.d1, "siluMulBackward dgate");
  expectClose(dDU.get(), du, e.d2, "siluMulBackward dup");

  cpu::add(a.data(), b.data(), y.data(), n);
  gpu::add(dA.p, dB.p, dY.p, n, nullptr);
  EXPECT_EQ(dY.get(), y);
}

TEST(KernelsGpu, CrossEntropy) {
  REQUIRE_GPU();
  const int64_t n = 37, V = 5003;
  auto logits = randn(n * V, 80, 2.0f);
  auto targets = randIds(n, V, 81);
  const float ref = cpu::crossEntropyForward(logits.data(), targets.data(), n, V);
  std::vector<float> dl(n * V);
  cpu::crossEntropyBackward(logits.data(), targets.data(), dl.data(), n, V, 1.0f / float(n));
  Dev<float> dL(logits), dLoss(1), dDL(n * V);
  Dev<int64_t> dT(targets);
  Dev<double> scratch(n);
  gpu::crossEntropyForward(dL.p, dT.p, dLoss.p, n, V, scratch.p, nullptr);
  gpu::crossEntropyBackward(dL.p, dT.p, dDL.p, n, V, 1.0f / float(n), nullptr);
  const CrossEntropyBounds e = crossEntropyBounds(toD(logits), targets, n, V, 1.0 / n, kLibmUlps);
  expectClose(dLoss.get(), {ref}, {e.loss}, "crossEntropyForward");
  expectClose(dDL.get(), dl, e.d, "crossEntropyBackward");
}

// Masked-LM's ignored rows (kIgnoreIndex): left out of the mean, zero gradient.
TEST(KernelsGpu, CrossEntropyIgnoreIndex) {
  REQUIRE_GPU();
  const int64_t n = 41, V = 1003;
  auto logits = randn(n * V, 82, 2.0f);
  auto targets = randIds(n, V, 83);
  for (int64_t i = 0; i < n; i += 3)
    targets[i] = cpu::kIgnoreIndex;
  const float ref = cpu::crossEntropyForward(logits.data(), targets.data(), n, V);
  std::vector<float> dl(n * V);
  cpu::crossEntropyBackward(logits.data(), targets.data(), dl.data(), n, V, 1.0f / 27);
  Dev<float> dL(logits), dLoss(1), dDL(n * V);
  Dev<int64_t> dT(targets);
  Dev<double> scratch(n);
  gpu::crossEntropyForward(dL.p, dT.p, dLoss.p, n, V, scratch.p, nullptr);
  gpu::crossEntropyBackward(dL.p, dT.p, dDL.p, n, V, 1.0f / 27, nullptr);
  const CrossEntropyBounds e =
      crossEntropyBounds(toD(logits), targets, n, V, double(1.0f / 27), kLibmUlps);
  expectClose(dLoss.get(), {ref}, {e.loss}, "crossEntropyForward (ignored rows)");
  const auto got = dDL.get();
  expectClose(got, dl, e.d, "crossEntropyBackward (ignored rows)");
  for (int64_t c = 0; c < V; ++c)
    ASSERT_EQ(got[3 * V + c], 0.0f) << "ignored row 3, col " << c;
  // Every row ignored: 0.
  std::vector<int64_t> none(n, cpu::kIgnoreIndex);
  Dev<int64_t> dNone(none);
  gpu::crossEntropyForward(dL.p, dNone.p, dLoss.p, n, V, scratch.p, nullptr);
  EXPECT_EQ(dLoss.get(), std::vector<float>{0.0f});
}

// ViT's class token and first-token selection: copies and one f32 addition
// (forward), the batch summed in order (backward): the CPU kernels' bits.
TEST(KernelsGpu, ClassTokenFirstToken) {
  REQUIRE_GPU();
  const int64_t B = 5, S = 197, D = 67;
  auto x = randn(B * (S - 1) * D, 84), cls = randn(D, 85), pos = randn(S * D, 86),
       dy = randn(B * S * D, 87);
  std::vector<float> y(B * S * D), dx(B * (S - 1) * D), dcls(D), dpos(S * D);
  cpu::classTokenForward(x.data(), cls.data(), pos.data(), y.data(), B, S, D);
  cpu::classTokenBackward(dy.data(), dx.data(), dcls.data(), dpos.data(), B, S, D);
  Dev<float> dX(x), dC(cls), dP(pos), dY(B * S * D), dDY(dy), dDX(dx.size()), dDC(D), dDP(S * D);
  gpu::classTokenForward(dX.p, dC.p, dP.p, dY.p, B, S, D, nullptr);
  gpu::classTokenBackward(dDY.p, dDX.p, dDC.p, dDP.p, B, S, D, nullptr);
  EXPECT_EQ(dY.get(), y);
  EXPECT_EQ(dDX.get(), dx);
  EXPECT_EQ(dDC.get(), dcls);
  EXPECT_EQ(dDP.get(), dpos);

  std::vector<float> f(B * D), df(B * S * D);
  cpu::firstTokenForward(y.data(), f.data(), B, S, D);
  cpu::firstTokenBackward(x.data(), df.data(), B, S, D);          // x's first B*D as dy
  Dev<float> dF(B * D), dDF(std::vector<float>(B * S * D, 7.0f)); // overwritten
  gpu::firstTokenForward(dY.p, dF.p, B, S, D, nullptr);
  gpu::firstTokenBackward(dX.p, dDF.p, B, S, D, nullptr);
  EXPECT_EQ(dF.get(), f);
  EXPECT_EQ(dDF.get(), df);
}

TEST(KernelsGpu, AdamW) {
  REQUIRE_GPU();
  const int64_t n = 10007;
  for (bool useMask : {false, true})
    for (int64_t step : {1, 7}) {
      auto p = randn(n, 90), g = randn(n, 91), m = randn(n, 92, 0.1f), v = randn(n, 93, 0.1f);
      for (auto &x : v)
        x = x * x;
      std::unique_ptr<bool[]> mask(new bool[n]);
      for (int64_t i = 0; i < n; ++i)
        mask[i] = (i % 3) != 0;
      Dev<float> dP(p), dG(g), dM(m), dV(v);
      Dev<bool> dMask(n);
      cudaMemcpy(dMask.p, mask.get(), n, cudaMemcpyHostToDevice);
      const AdamBounds e = adamwBounds(p, g, m, v, useMask ? mask.get() : nullptr, step, 1e-3, 0.9,
                                       0.999, 1e-8, 0.1, 0.5);
      cpu::adamw(p.data(), g.data(), m.data(), v.data(), useMask ? mask.get() : nullptr, n, step,
                 1e-3, 0.9, 0.999, 1e-8, 0.1, 0.5);
      gpu::adamw(dP.p, dG.p, dM.p, dV.p, useMask ? dMask.p : nullptr, n, step, 1e-3, 0.9, 0.999,
                 1e-8, 0.1, 0.5, nullptr);
      expectClose(dP.get(), p, e.p, "adamw param");
      expectClose(dM.get(), m, e.m, "adamw exp_avg");
      expectClose(dV.get(), v, e.v, "adamw exp_avg_sq");
    }
}

TEST(KernelsGpu, Bf16) {
  REQUIRE_GPU();
  const int64_t n = 70001;
  auto x = randn(n, 100, 5.0f);
  x[0] = NAN;
  x[1] = INFINITY;
  x[2] = -0.0f;
  x[3] = 1.00390625f; // a tie: 1 + 2^-8
  std::vector<uint16_t> h(n);
  std::vector<float> back(n), rounded(n);
  cpu::toBf16(x.data(), h.data(), n);
  cpu::fromBf16(h.data(), back.data(), n);
  cpu::roundToBf16(x.data(), rounded.data(), n);
  Dev<float> dX(x), dBack(n), dR(n);
  Dev<uint16_t> dH(n);
  gpu::toBf16(dX.p, dH.p, n, nullptr);
  EXPECT_EQ(dH.get(), h);
  gpu::fromBf16(dH.p, dBack.p, n, nullptr);
  gpu::roundToBf16(dX.p, dR.p, n, nullptr);
  auto bits = [](const std::vector<float> &v) {
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), 4 * v.size());
    return b;
  };
  EXPECT_EQ(bits(dBack.get()), bits(back));
  EXPECT_EQ(bits(dR.get()), bits(rounded));
  // In place: out == x.
  gpu::toBf16(dX.p, reinterpret_cast<uint16_t *>(dX.p), n, nullptr);
  std::vector<float> all = dX.get();
  std::vector<uint16_t> inPlace(n);
  std::memcpy(inPlace.data(), all.data(), 2 * n);
  EXPECT_EQ(inPlace, h);
}

// dst += float(bf16 src), one f32 addition an element: bit for bit.
TEST(KernelsGpu, AddBf16Into) {
  REQUIRE_GPU();
  const int64_t n = 30011;
  auto dst = randn(n, 105), vals = randn(n, 106, 3.0f);
  std::vector<uint16_t> src(n);
  cpu::toBf16(vals.data(), src.data(), n);
  std::vector<float> ref(n);
  for (int64_t i = 0; i < n; ++i)
    ref[i] = dst[i] + cpu::bf16ToFloat(src[i]);
  Dev<float> dD(dst);
  Dev<uint16_t> dS(src);
  gpu::addBf16Into(dD.p, dS.p, n, nullptr);
  std::vector<float> got = dD.get();
  EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), sizeof(float) * n));
}

TEST(KernelsGpu, SumOfSquares) {
  REQUIRE_GPU();
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(1000), int64_t(3000017)}) {
    auto x = randn(std::max<int64_t>(n, 1), 110);
    const double ref = cpu::sumOfSquares(x.data(), n);
    Dev<float> dX(x);
    Dev<double> dOut(1), scratch(gpu::sumOfSquaresScratchDoubles());
    gpu::sumOfSquares(dX.p, n, dOut.p, scratch.p, nullptr);
    const double got = dOut.get()[0];
    // Float squares are exact in double; n positive terms in double, any
    // order, on each side: 2 gamma64_n of the sum.
    EXPECT_LE(std::fabs(got - ref), 2 * gammaK(double(n), kU64) * ref) << "n=" << n;
  }
}

// accumulate: *out + the sum, the grad norm's unit part summed over the
// slices a tensor-parallel rank counts. Both sides add the same two doubles
// last: the bound is the sums' (above) plus one rounding.
TEST(KernelsGpu, SumOfSquaresAccumulates) {
  REQUIRE_GPU();
  const int64_t n = 70001, m = 4099;
  auto x = randn(n + m, 111);
  const double ref = cpu::sumOfSquares(x.data(), n) + cpu::sumOfSquares(x.data() + n, m);
  Dev<float> dX(x);
  Dev<double> dOut(1), scratch(gpu::sumOfSquaresScratchDoubles());
  gpu::sumOfSquares(dX.p, n, dOut.p, scratch.p, nullptr);
  gpu::sumOfSquares(dX.p + n, m, dOut.p, scratch.p, nullptr, /*accumulate=*/true);
  const double got = dOut.get()[0];
  EXPECT_LE(std::fabs(got - ref), (2 * gammaK(double(n + m), kU64) + kU64) * ref);
  // Not accumulating overwrites what was there.
  gpu::sumOfSquares(dX.p + n, m, dOut.p, scratch.p, nullptr);
  const double alone = cpu::sumOfSquares(x.data() + n, m);
  EXPECT_LE(std::fabs(dOut.get()[0] - alone), 2 * gammaK(double(m), kU64) * alone);
}

// x[r D + j] += bias[j]: one f32 addition an element, bit for bit.
TEST(KernelsGpu, AddBias) {
  REQUIRE_GPU();
  const int64_t rows = 37, D = 129;
  auto x = randn(rows * D, 112), bias = randn(D, 113);
  std::vector<float> ref(x);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < D; ++j)
      ref[r * D + j] += bias[j];
  Dev<float> dX(x), dB(bias);
  gpu::addBias(dX.p, dB.p, rows, D, nullptr);
  std::vector<float> got = dX.get();
  EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), sizeof(float) * rows * D));
}

//===----------------------------------------------------------------------===//
// bf16 storage: each bf16 CUDA kernel against the bf16 CPU kernel (cpu.h's
// bf16 overloads) on the same bf16 inputs.
//===----------------------------------------------------------------------===//
//
// Bound: both sides read the same bf16 values and compute in f32 (or
// double), each within e (KernelBounds.h, as above) of the exact result,
// then round to bf16 once: fl(z) = z / (1 + d), |d| <= 2^-8 (bf16's 8
// significant bits), so |fl(z) - z| <= 2^-8 |fl(z)| and |gpu - cpu| <= 2^-8
// (|gpu| + |cpu|) + 2e. Where the f32 result is the same on both sides
// (copies, casts, one f32 addition) the bits must match.

namespace {

using bf16 = cpu::bf16;

std::vector<bf16> toBf16(const std::vector<float> &v) {
  std::vector<bf16> h(v.size());
  cpu::toBf16(v.data(), h.data(), int64_t(v.size()));
  return h;
}

std::vector<float> toF32(const std::vector<bf16> &h) {
  std::vector<float> v(h.size());
  cpu::fromBf16(h.data(), v.data(), int64_t(h.size()));
  return v;
}

std::vector<uint16_t> bits(const std::vector<bf16> &h) {
  std::vector<uint16_t> b(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    b[i] = h[i].bits;
  return b;
}

std::vector<bf16> randnBf16(size_t n, uint32_t seed, float sd = 1.0f) {
  return toBf16(randn(n, seed, sd));
}

// expectClose plus both sides' bf16 rounding (see above).
void expectCloseBf16(const std::vector<bf16> &gotH, const std::vector<bf16> &refH, const VecD &e,
                     const char *what) {
  const std::vector<float> got = toF32(gotH), ref = toF32(refH);
  ASSERT_EQ(got.size(), ref.size()) << what;
  ASSERT_EQ(e.size(), ref.size()) << what;
  size_t bad = 0, worst = 0;
  double worstErr = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(ref[i]));
    const double tol = kBf16U * (std::fabs(double(got[i])) + std::fabs(double(ref[i]))) + 2 * e[i];
    if (!(err <= tol) && !(std::isnan(got[i]) && std::isnan(ref[i]))) {
      if (err / tol > worstErr || bad == 0) {
        worstErr = err / tol;
        worst = i;
      }
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size()
                     << " out of tolerance; worst at " << worst << ": gpu " << got[worst] << " cpu "
                     << ref[worst] << " (" << worstErr << "x tol)";
}

} // namespace

TEST(KernelsGpuBf16, Embedding) {
  REQUIRE_GPU();
  const int64_t n = 300, V = 50, D = 77;
  auto table = randnBf16(V * D, 1), dout = randnBf16(n * D, 2);
  auto ids = randIds(n, V, 3);
  std::vector<bf16> out(n * D), dtable(V * D);
  std::vector<float> cpuScratch(cpu::embeddingBackwardBf16ScratchFloats(n, V, D));
  cpu::embeddingForward(ids.data(), table.data(), out.data(), n, D);
  cpu::embeddingBackward(dout.data(), ids.data(), dtable.data(), n, V, D, cpuScratch.data());
  Dev<bf16> dT(table), dO(n * D), dG(dout), dDT(V * D);
  Dev<float> scratch(gpu::embeddingBackwardBf16ScratchFloats(V, D));
  Dev<int64_t> dIds(ids);
  gpu::embeddingForward(dIds.p, dT.p, dO.p, n, D, nullptr);
  gpu::embeddingBackward(dG.p, dIds.p, dDT.p, n, V, D, scratch.p, nullptr);
  EXPECT_EQ(bits(dO.get()), bits(out));
  expectCloseBf16(dDT.get(), dtable, embeddingBound(toF32(dout), ids, V, D),
                  "embeddingBackward bf16");
}

TEST(KernelsGpuBf16, Linear) {
  REQUIRE_GPU();
  Cublas cb;
  ASSERT_NE(cb.h, nullptr);
  // n above the CPU's 256-row panel: its weight gradient takes two chunks.
  const int64_t n = 300, in = 129, out = 95;
  for (auto layout : {cpu::Layout::InOut, cpu::Layout::OutIn})
    for (bool withBias : {false, true}) {
      auto x = randnBf16(n * in, 10), w = randnBf16(in * out, 11), bias = randnBf16(out, 12),
           dy = randnBf16(n * out, 13);
      std::vector<bf16> y(n * out), dx(n * in), dw(in * out), db(out);
      std::vector<float> s(cpu::linearBf16ScratchFloats(n, in, out));
      cpu::linearForward(x.data(), w.data(), withBias ? bias.data() : nullptr, y.data(), n, in, out,
                         layout, s.data());
      cpu::linearBackwardInput(dy.data(), w.data(), dx.data(), n, in, out, layout, s.data());
      cpu::linearBackwardWeight(dy.data(), x.data(), dw.data(), n, in, out, layout, s.data());
      std::vector<float> sb(std::max<int64_t>(1, cpu::biasBackwardBf16ScratchFloats(n, out)));
      cpu::biasBackward(dy.data(), db.data(), n, out, sb.data());
      Dev<bf16> dX(x), dW(w), dB(bias), dY(n * out), dDY(dy), dDX(n * in), dDW(in * out), dDB(out);
      gpu::linearForward(cb.h, dX.p, dW.p, withBias ? dB.p : nullptr, dY.p, n, in, out, layout,
                         nullptr);
      gpu::linearBackwardInput(cb.h, dDY.p, dW.p, dDX.p, n, in, out, layout, nullptr);
      gpu::linearBackwardWeight(cb.h, dDY.p, dX.p, dDW.p, n, in, out, layout, nullptr);
      gpu::biasBackward(dDY.p, dDB.p, n, out, nullptr);
      const std::string tag = std::string(layout == cpu::Layout::InOut ? "in_out" : "out_in") +
                              (withBias ? " bias" : "");
      const VecD bD = toD(toF32(bias));
      const LinearBounds e = linearBounds(toD(toF32(x)), toD(toF32(w)), withBias ? &bD : nullptr,
                                          toD(toF32(dy)), n, in, out, layout);
      expectCloseBf16(dY.get(), y, e.y, ("linearForward bf16 " + tag).c_str());
      expectCloseBf16(dDX.get(), dx, e.dx, ("linearBackwardInput bf16 " + tag).c_str());
      expectCloseBf16(dDW.get(), dw, e.dw, ("linearBackwardWeight bf16 " + tag).c_str());
      expectCloseBf16(dDB.get(), db, e.db, "biasBackward bf16");
    }
}

TEST(KernelsGpuBf16, LayerNorm) {
  REQUIRE_GPU();
  for (int64_t D : {7, 256, 1000}) {
    const int64_t n = 53;
    const double eps = 1e-5;
    auto xf = randn(n * D, 20, 2.0f);
    for (auto &v : xf)
      v += 0.5f;
    auto x = toBf16(xf), w = randnBf16(D, 21), b = randnBf16(D, 22), dy = randnBf16(n * D, 23);
    std::vector<bf16> y(n * D), dx(n * D), dw(D), db(D);
    std::vector<float> s(cpu::normBackwardBf16ScratchFloats(n, D));
    cpu::layerNormForward(x.data(), w.data(), b.data(), y.data(), n, D, eps);
    cpu::layerNormBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), n, D,
                           eps, s.data());
    Dev<bf16> dX(x), dW(w), dB(b), dY(n * D), dDY(dy), dDX(n * D), dDW(D), dDB(D);
    Dev<float> scratch(gpu::layerNormBackwardScratchFloats(n));
    gpu::layerNormForward(dX.p, dW.p, dB.p, dY.p, n, D, eps, nullptr);
    gpu::layerNormBackward(dDY.p, dX.p, dW.p, dDX.p, dDW.p, dDB.p, n, D, eps, scratch.p, nullptr);
    const NormBounds e =
        layerNormBounds(toD(toF32(x)), toD(toF32(w)), toD(toF32(b)), toD(toF32(dy)), n, D, eps);
    expectCloseBf16(dY.get(), y, e.y, "layerNormForward bf16");
    expectCloseBf16(dDX.get(), dx, e.dx, "layerNormBackward bf16 dx");
    expectCloseBf16(dDW.get(), dw, e.dw, "layerNormBackward bf16 dw");
    expectCloseBf16(dDB.get(), db, e.db, "layerNormBackward bf16 db");
    // In place: dx == dy.
    gpu::layerNormBackward(dDY.p, dX.p, dW.p, dDY.p, dDW.p, dDB.p, n, D, eps, scratch.p, nullptr);
    expectCloseBf16(dDY.get(), dx, e.dx, "layerNormBackward bf16 in place dx");
    expectCloseBf16(dDW.get(), dw, e.dw, "layerNormBackward bf16 in place dw");
  }
}

TEST(KernelsGpuBf16, RmsNorm) {
  REQUIRE_GPU();
  for (int64_t D : {5, 512, 999}) {
    const int64_t n = 61;
    const double eps = 1e-6;
    auto x = randnBf16(n * D, 30), w = randnBf16(D, 31), dy = randnBf16(n * D, 32);
    std::vector<bf16> y(n * D), dx(n * D), dw(D);
    std::vector<float> s(cpu::normBackwardBf16ScratchFloats(n, D));
    cpu::rmsNormForward(x.data(), w.data(), y.data(), n, D, eps);
    cpu::rmsNormBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), n, D, eps, s.data());
    Dev<bf16> dX(x), dW(w), dY(n * D), dDY(dy), dDX(n * D), dDW(D);
    Dev<float> scratch(gpu::rmsNormBackwardScratchFloats(n));
    gpu::rmsNormForward(dX.p, dW.p, dY.p, n, D, eps, nullptr);
    gpu::rmsNormBackward(dDY.p, dX.p, dW.p, dDX.p, dDW.p, n, D, eps, scratch.p, nullptr);
    const NormBounds e = rmsNormBounds(toD(toF32(x)), toD(toF32(w)), toD(toF32(dy)), n, D, eps);
    expectCloseBf16(dY.get(), y, e.y, "rmsNormForward bf16");
    expectCloseBf16(dDX.get(), dx, e.dx, "rmsNormBackward bf16 dx");
    expectCloseBf16(dDW.get(), dw, e.dw, "rmsNormBackward bf16 dw");
  }
}

TEST(KernelsGpuBf16, Rope) {
  REQUIRE_GPU();
  const RopeScalings sc;
  struct Case {
    int64_t B, S, H, Dh;
    double theta;
    const cpu::RopeScaling *scaling;
  } cases[] = {{2, 37, 3, 64, 10000.0, nullptr},    {1, 300, 2, 128, 500000.0, &sc.llama3},
               {2, 9, 2, 7, 10000.0, nullptr},      {1, 5, 1, 600, 10000.0, nullptr},
               {2, 37, 3, 64, 10000.0, &sc.linear}, {2, 37, 3, 64, 10000.0, &sc.dynamic},
               {1, 300, 2, 128, 1e6, &sc.yarn},     {2, 37, 3, 16, 10000.0, &sc.yarnUntruncated}};
  for (const Case &c : cases)
    for (bool inverse : {false, true}) {
      const int64_t n = c.B * c.S * c.H * c.Dh;
      auto x = randnBf16(n, 40);
      std::vector<bf16> y(n);
      cpu::rope(x.data(), y.data(), c.B, c.S, c.H, c.Dh, c.theta, c.scaling, inverse);
      Dev<bf16> dX(x), dY(n);
      gpu::rope(dX.p, dY.p, c.B, c.S, c.H, c.Dh, c.theta, c.scaling, inverse, nullptr);
      const VecD e =
          ropeBound(toD(toF32(x)), nullptr, c.B, c.S, c.H, c.Dh, c.theta, c.scaling, true);
      expectCloseBf16(dY.get(), y, e, "rope bf16");
      gpu::rope(dX.p, dX.p, c.B, c.S, c.H, c.Dh, c.theta, c.scaling, inverse, nullptr);
      expectCloseBf16(dX.get(), y, e, "rope bf16 in place");
    }
}

TEST(KernelsGpuBf16, SplitConcat) {
  REQUIRE_GPU();
  const int64_t parts = 3, n = 17, W = 33;
  auto x = randnBf16(n * parts * W, 50);
  std::vector<std::vector<bf16>> outs(parts, std::vector<bf16>(n * W));
  std::vector<bf16 *> outPtrs;
  for (auto &o : outs)
    outPtrs.push_back(o.data());
  cpu::split(x.data(), outPtrs.data(), parts, n, W);
  Dev<bf16> dX(x), d0(n * W), d1(n * W), d2(n * W), dY(n * parts * W);
  bf16 *dOuts[3] = {d0.p, d1.p, d2.p};
  gpu::split(dX.p, dOuts, parts, n, W, nullptr);
  EXPECT_EQ(bits(d0.get()), bits(outs[0]));
  EXPECT_EQ(bits(d1.get()), bits(outs[1]));
  EXPECT_EQ(bits(d2.get()), bits(outs[2]));
  const bf16 *dIns[3] = {d0.p, d1.p, d2.p};
  gpu::concat(dIns, dY.p, parts, n, W, nullptr);
  EXPECT_EQ(bits(dY.get()), bits(x));
}

TEST(KernelsGpuBf16, Attention) {
  REQUIRE_GPU();
  struct Case {
    int64_t B, S, H, KV, Dh, window; // window: Mistral's sliding window (0: full causal)
    bool causal = true;              // false: bidirectional (BERT, ViT)
  } cases[] = {{1, 1, 1, 1, 16, 0},         {2, 37, 4, 2, 64, 0},        {1, 100, 2, 2, 80, 0},
               {1, 130, 4, 1, 128, 0},      {1, 65, 2, 2, 256, 0},       {2, 64, 3, 3, 32, 0},
               {2, 37, 4, 2, 64, 5},        {1, 130, 2, 1, 32, 40},      {1, 70, 2, 2, 16, 1},
               {2, 37, 4, 2, 64, 0, false}, {1, 100, 2, 1, 80, 0, false}};
  for (const Case &c : cases) {
    const int64_t nq = c.B * c.S * c.H * c.Dh, nk = c.B * c.S * c.KV * c.Dh;
    auto q = randnBf16(nq, 60), k = randnBf16(nk, 61), v = randnBf16(nk, 62),
         dout = randnBf16(nq, 63);
    std::vector<bf16> out(nq), dq(nq), dk(nk), dv(nk);
    std::vector<float> s(cpu::attentionBf16ScratchFloats(c.S, c.H, c.KV, c.Dh, true));
    cpu::attentionForward(q.data(), k.data(), v.data(), out.data(), c.B, c.S, c.H, c.KV, c.Dh,
                          c.causal, c.window, s.data());
    cpu::attentionBackward(dout.data(), q.data(), k.data(), v.data(), out.data(), dq.data(),
                           dk.data(), dv.data(), c.B, c.S, c.H, c.KV, c.Dh, c.causal, c.window,
                           s.data());
    Dev<bf16> dQ(q), dK(k), dV(v), dO(nq), dDO(dout), dDQ(nq), dDK(nk), dDV(nk), dOutRef(out);
    Dev<float> dS(gpu::attentionBackwardScratchFloats(c.B, c.S, c.H));
    gpu::attentionForward(dQ.p, dK.p, dV.p, dO.p, c.B, c.S, c.H, c.KV, c.Dh, c.causal, c.window,
                          nullptr);
    const std::string tag = " S=" + std::to_string(c.S) + " Dh=" + std::to_string(c.Dh) +
                            " window=" + std::to_string(c.window) +
                            (c.causal ? " causal" : " bidirectional");
    const AttentionBounds e =
        attentionSideBounds(toF32(q), toF32(k), toF32(v), toF32(dout), toF32(out), c.B, c.S, c.H,
                            c.KV, c.Dh, c.window, c.causal);
    expectCloseBf16(dO.get(), out, e.eOut, ("attention bf16 forward" + tag).c_str());
    // The backward reads the CPU's forward output (same D_i on both sides).
    gpu::attentionBackward(dDO.p, dQ.p, dK.p, dV.p, dOutRef.p, dDQ.p, dDK.p, dDV.p, c.B, c.S, c.H,
                           c.KV, c.Dh, c.causal, c.window, dS.p, nullptr);
    expectCloseBf16(dDQ.get(), dq, e.eDq, ("attention bf16 dq" + tag).c_str());
    expectCloseBf16(dDK.get(), dk, e.eDk, ("attention bf16 dk" + tag).c_str());
    expectCloseBf16(dDV.get(), dv, e.eDv, ("attention bf16 dv" + tag).c_str());
  }
}

TEST(KernelsGpuBf16, Elementwise) {
  REQUIRE_GPU();
  const int64_t n = 100003;
  auto a = randnBf16(n, 70, 3.0f), b = randnBf16(n, 71), dy = randnBf16(n, 72);
  std::vector<bf16> y(n), dx(n), dg(n), du(n);
  Dev<bf16> dA(a), dB(b), dDY(dy), dY(n), dDX(n), dDG(n), dDU(n);

  for (bool tanh : {true, false}) { // HF gelu_new, HF gelu (exact)
    const std::string tag = tanh ? " tanh" : " exact";
    cpu::geluForward(a.data(), y.data(), n, tanh);
    gpu::geluForward(dA.p, dY.p, n, tanh, nullptr);
    const ElemBounds e = geluBounds(toD(toF32(a)), toD(toF32(dy)), tanh, kLibmUlps);
    expectCloseBf16(dY.get(), y, e.y, ("geluForward bf16" + tag).c_str());
    cpu::geluBackward(dy.data(), a.data(), dx.data(), n, tanh);
    gpu::geluBackward(dDY.p, dA.p, dDX.p, n, tanh, nullptr);
    expectCloseBf16(dDX.get(), dx, e.d1, ("geluBackward bf16" + tag).c_str());
  }

  cpu::siluMulForward(a.data(), b.data(), y.data(), n);
  gpu::siluMulForward(dA.p, dB.p, dY.p, n, nullptr);
  const ElemBounds e = siluMulBounds(toD(toF32(a)), toD(toF32(b)), toD(toF32(dy)), kLibmUlps);
  expectCloseBf16(dY.get(), y, e.y, "siluMulForward bf16");
  cpu::siluMulBackward(dy.data(), a.data(), b.data(), dg.data(), du.data(), n);
  gpu::siluMulBackward(dDY.p, dA.p, dB.p, dDG.p, dDU.p, n, nullptr);
  expectCloseBf16(dDG.get(), dg, e.d1, "siluMulBackward bf16 dgate");
  expectCloseBf16(dDU.get(), du, e.d2, "siluMulBackward bf16 dup");

  // One f32 addition, rounded once: the same bits.
  cpu::add(a.data(), b.data(), y.data(), n);
  gpu::add(dA.p, dB.p, dY.p, n, nullptr);
  EXPECT_EQ(bits(dY.get()), bits(y));
}

TEST(KernelsGpuBf16, CrossEntropy) {
  REQUIRE_GPU();
  const int64_t n = 37, V = 5003;
  auto logits = randnBf16(n * V, 80, 2.0f);
  auto targets = randIds(n, V, 81);
  const float ref = cpu::crossEntropyForward(logits.data(), targets.data(), n, V);
  std::vector<bf16> dl(n * V);
  cpu::crossEntropyBackward(logits.data(), targets.data(), dl.data(), n, V, 1.0f / float(n));
  Dev<bf16> dL(logits), dDL(n * V);
  Dev<float> dLoss(1);
  Dev<int64_t> dT(targets);
  Dev<double> scratch(n);
  gpu::crossEntropyForward(dL.p, dT.p, dLoss.p, n, V, scratch.p, nullptr);
  gpu::crossEntropyBackward(dL.p, dT.p, dDL.p, n, V, 1.0f / float(n), nullptr);
  const CrossEntropyBounds e =
      crossEntropyBounds(toD(toF32(logits)), targets, n, V, double(1.0f / float(n)), kLibmUlps);
  expectClose(dLoss.get(), {ref}, {e.loss}, "crossEntropyForward bf16 (f32 loss)");
  expectCloseBf16(dDL.get(), dl, e.d, "crossEntropyBackward bf16");
}

TEST(KernelsGpuBf16, CrossEntropyIgnoreIndex) {
  REQUIRE_GPU();
  const int64_t n = 37, V = 503;
  auto logits = randnBf16(n * V, 88, 2.0f);
  auto targets = randIds(n, V, 89);
  for (int64_t i = 1; i < n; i += 2)
    targets[i] = cpu::kIgnoreIndex;
  const float ref = cpu::crossEntropyForward(logits.data(), targets.data(), n, V);
  std::vector<bf16> dl(n * V);
  cpu::crossEntropyBackward(logits.data(), targets.data(), dl.data(), n, V, 1.0f / 19);
  Dev<bf16> dL(logits), dDL(n * V);
  Dev<float> dLoss(1);
  Dev<int64_t> dT(targets);
  Dev<double> scratch(n);
  gpu::crossEntropyForward(dL.p, dT.p, dLoss.p, n, V, scratch.p, nullptr);
  gpu::crossEntropyBackward(dL.p, dT.p, dDL.p, n, V, 1.0f / 19, nullptr);
  const CrossEntropyBounds e =
      crossEntropyBounds(toD(toF32(logits)), targets, n, V, double(1.0f / 19), kLibmUlps);
  expectClose(dLoss.get(), {ref}, {e.loss}, "crossEntropyForward bf16 (ignored rows)");
  const auto got = dDL.get();
  expectCloseBf16(got, dl, e.d, "crossEntropyBackward bf16 (ignored rows)");
  for (int64_t c = 0; c < V; ++c)
    ASSERT_EQ(got[V + c].bits, 0) << "ignored row 1, col " << c;
}

TEST(KernelsGpuBf16, ClassTokenFirstToken) {
  REQUIRE_GPU();
  const int64_t B = 4, S = 50, D = 33;
  auto x = randnBf16(B * (S - 1) * D, 90), cls = randnBf16(D, 91), pos = randnBf16(S * D, 92),
       dy = randnBf16(B * S * D, 93);
  std::vector<bf16> y(B * S * D), dx(B * (S - 1) * D), dcls(D), dpos(S * D);
  cpu::classTokenForward(x.data(), cls.data(), pos.data(), y.data(), B, S, D);
  cpu::classTokenBackward(dy.data(), dx.data(), dcls.data(), dpos.data(), B, S, D);
  Dev<bf16> dX(x), dC(cls), dP(pos), dY(B * S * D), dDY(dy), dDX(dx.size()), dDC(D), dDP(S * D);
  gpu::classTokenForward(dX.p, dC.p, dP.p, dY.p, B, S, D, nullptr);
  gpu::classTokenBackward(dDY.p, dDX.p, dDC.p, dDP.p, B, S, D, nullptr);
  EXPECT_EQ(bits(dY.get()), bits(y));
  EXPECT_EQ(bits(dDX.get()), bits(dx));
  EXPECT_EQ(bits(dDC.get()), bits(dcls));
  EXPECT_EQ(bits(dDP.get()), bits(dpos));

  std::vector<bf16> f(B * D), df(B * S * D);
  cpu::firstTokenForward(y.data(), f.data(), B, S, D);
  cpu::firstTokenBackward(x.data(), df.data(), B, S, D);
  Dev<bf16> dF(B * D), dDF(B * S * D);
  gpu::firstTokenForward(dY.p, dF.p, B, S, D, nullptr);
  gpu::firstTokenBackward(dX.p, dDF.p, B, S, D, nullptr);
  EXPECT_EQ(bits(dF.get()), bits(f));
  EXPECT_EQ(bits(dDF.get()), bits(df));
}

// The casts between the compute dtypes: bit for bit (NaN, infinity, -0 and a
// tie included).
TEST(KernelsGpuBf16, Casts) {
  REQUIRE_GPU();
  const int64_t n = 70001;
  auto x = randn(n, 100, 5.0f);
  x[0] = NAN;
  x[1] = INFINITY;
  x[2] = -0.0f;
  x[3] = 1.00390625f; // a tie: 1 + 2^-8
  std::vector<bf16> h(n);
  std::vector<float> back(n);
  cpu::toBf16(x.data(), h.data(), n);
  cpu::fromBf16(h.data(), back.data(), n);
  Dev<float> dX(x), dBack(n);
  Dev<bf16> dH(n);
  gpu::toBf16(dX.p, dH.p, n, nullptr);
  EXPECT_EQ(bits(dH.get()), bits(h));
  gpu::fromBf16(dH.p, dBack.p, n, nullptr);
  std::vector<float> got = dBack.get();
  EXPECT_EQ(0, std::memcmp(got.data(), back.data(), sizeof(float) * n));
}

//===----------------------------------------------------------------------===//
// Mixture of experts: each CUDA kernel against cpu.h's, f32 and bf16.
//===----------------------------------------------------------------------===//
//
// The integer outputs (experts, slots) and the copies and f32 sums in the
// same order (moe_permute and its gradient, moe_combine's dpacked, one
// product) must match bit for bit. The rest is bounded as above: each side
// within e of the exact result on the same inputs, |gpu - cpu| <= 2 e (plus
// bf16's rounding). The router's p on each side: exp(x - m) * float(1 /
// sum) with the sum in double (m exact), so relative to the exact softmax
// (|x - m| + 2 L) u (the subtraction, exp at L ulps), 2 u (1 / sum and the
// product) and the sum's share, sum_c p_c (|x_c - m| + 2 L) u + gamma64_E.
// Top-k is compared as integers only where that is decided: the test
// checks that in the exact p each of the first k + 1 gaps exceeds both
// sides' errors (or is an exact tie of the logits, which each side breaks
// to the lower expert), and stops otherwise (a draw, not the kernels, at
// fault).

namespace {

template <class T> std::vector<T> fromF32(const std::vector<float> &v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return toBf16(v);
}
template <class T> std::vector<float> asF32(const std::vector<T> &v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return toF32(v);
}
template <class T> const char *dtypeName() { return std::is_same_v<T, float> ? "f32" : "bf16"; }

// |gpu - cpu| <= 2 e, plus both bf16 roundings for bf16 storage.
template <class T>
void expectNear(const std::vector<T> &got, const std::vector<T> &ref, const VecD &e,
                const std::string &what) {
  if constexpr (std::is_same_v<T, float>)
    expectClose(got, ref, e, what.c_str());
  else
    expectCloseBf16(got, ref, e, what.c_str());
}
template <class T>
void expectSameBits(const std::vector<T> &got, const std::vector<T> &ref, const std::string &what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), sizeof(T) * ref.size())) << what;
}

// Device copies of E tensors and the host array of their pointers.
template <class T> struct DevList {
  std::vector<std::unique_ptr<Dev<T>>> d;
  std::vector<T *> p;
  explicit DevList(const std::vector<std::vector<T>> &h) {
    for (const auto &v : h) {
      d.push_back(std::make_unique<Dev<T>>(v));
      p.push_back(d.back()->p);
    }
  }
  DevList(size_t count, size_t n) {
    for (size_t i = 0; i < count; ++i) {
      d.push_back(std::make_unique<Dev<T>>(n));
      p.push_back(d.back()->p);
    }
  }
};

// The exact softmax of a row and each side's relative error bound on it.
struct SoftmaxRow {
  VecD p, rel;
};
SoftmaxRow softmaxRow(const float *x, int64_t E) {
  const double m = *std::max_element(x, x + E);
  SoftmaxRow r{VecD(E), VecD(E)};
  double sum = 0, relSum = gammaK(double(E), kU64);
  for (int64_t e = 0; e < E; ++e)
    sum += std::exp(double(x[e]) - m);
  for (int64_t e = 0; e < E; ++e) {
    r.p[e] = std::exp(double(x[e]) - m) / sum;
    relSum += r.p[e] * (std::fabs(double(x[e]) - m) + 2 * kLibmUlps) * kU;
  }
  for (int64_t e = 0; e < E; ++e)
    r.rel[e] = (std::fabs(double(x[e]) - m) + 2 * kLibmUlps + 2) * kU + relSum;
  return r;
}

// Stops the test unless both sides must choose the same k experts in the
// same order for row x (see above): the draw's fault, not the kernels'.
void requireClearTopK(const float *x, const SoftmaxRow &s, int64_t E, int64_t k,
                      const std::string &where) {
  std::vector<int64_t> ord(E);
  for (int64_t e = 0; e < E; ++e)
    ord[e] = e;
  std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return s.p[a] > s.p[b]; });
  for (int64_t i = 0; i < k && i + 1 < E; ++i) {
    const int64_t a = ord[i], b = ord[i + 1];
    if (x[a] == x[b])
      continue; // an exact tie: equal p on each side, the lower expert first
    ASSERT_GT(s.p[a] - s.p[b], s.p[a] * s.rel[a] + s.p[b] * s.rel[b])
        << where << ": experts " << a << " and " << b
        << " are too close to be ordered alike by both sides: another draw";
  }
}

// Router logits [n, E] as stored (T), and as floats.
template <class T> std::vector<float> routerLogits(int64_t n, int64_t E, uint32_t seed) {
  return asF32(fromF32<T>(randn(n * E, seed, 1.5f)));
}

// The CPU's routing of logits (float values of T storage).
template <class T> struct Routing {
  std::vector<T> weights;
  std::vector<int64_t> experts, slots;
};
template <class T>
Routing<T> cpuRoute(const std::vector<float> &logits, int64_t n, int64_t E, int64_t k,
                    bool normalize) {
  Routing<T> r{std::vector<T>(n * k), std::vector<int64_t>(n * k), std::vector<int64_t>(n * k)};
  const std::vector<T> l = fromF32<T>(logits);
  std::vector<float> s(cpu::moeRouteScratchFloats(E));
  cpu::moeRouteForward(l.data(), r.weights.data(), r.experts.data(), r.slots.data(), n, E, k,
                       normalize, s.data());
  return r;
}

struct RouteCase {
  int64_t n, E, k;
  bool normalize;
  uint32_t seed;
};

// moe_route and moe_route_grad on `logits` (float values of T).
template <class T>
void routeCase(const RouteCase &c, const std::vector<float> &logits, const std::string &tag) {
  const int64_t n = c.n, E = c.E, k = c.k;
  const std::string what = std::string("moe_route ") + dtypeName<T>() + " " + tag +
                           " n=" + std::to_string(n) + " E=" + std::to_string(E) +
                           " k=" + std::to_string(k) + (c.normalize ? " normalized" : "");
  std::vector<SoftmaxRow> rows;
  for (int64_t t = 0; t < n; ++t) {
    rows.push_back(softmaxRow(logits.data() + t * E, E));
    requireClearTopK(logits.data() + t * E, rows.back(), E, k,
                     what + " token " + std::to_string(t));
  }
  const Routing<T> ref = cpuRoute<T>(logits, n, E, k, c.normalize);
  const std::vector<T> l = fromF32<T>(logits);
  Dev<T> dL(l), dW(n * k);
  Dev<int64_t> dE(n * k), dS(n * k);
  Dev<float> scratch(gpu::moeRouteScratchFloats(n, k, E));
  gpu::moeRouteForward(dL.p, dW.p, dE.p, dS.p, n, E, k, c.normalize, scratch.p, nullptr);
  EXPECT_EQ(dE.get(), ref.experts) << what << ": experts";
  EXPECT_EQ(dS.get(), ref.slots) << what << ": slots";
  // weights: p_j, or p_j / s with s the f32 sum of the k (gamma_{k-1} of
  // it and the p's errors), the division rounded.
  VecD eW(n * k);
  for (int64_t t = 0; t < n; ++t) {
    const SoftmaxRow &s = rows[t];
    const int64_t *ch = ref.experts.data() + t * k;
    double sum = 0, eSum = 0;
    for (int64_t j = 0; j < k; ++j) {
      sum += s.p[ch[j]];
      eSum += s.p[ch[j]] * s.rel[ch[j]];
    }
    eSum += gammaK(double(k - 1)) * sum;
    for (int64_t j = 0; j < k; ++j) {
      const double p = s.p[ch[j]], ep = p * s.rel[ch[j]], w = p / sum;
      eW[t * k + j] = c.normalize ? (ep + w * eSum) / sum + kU * w : ep;
    }
  }
  expectNear(dW.get(), ref.weights, eW, what + ": weights");

  // The gradient, from random dweights and the CPU's experts.
  const std::vector<T> dw = fromF32<T>(randn(n * k, c.seed + 1));
  const std::vector<float> dwF = asF32(dw);
  std::vector<T> dl(n * E);
  std::vector<float> cs(cpu::moeRouteScratchFloats(E));
  cpu::moeRouteBackward(dw.data(), l.data(), ref.experts.data(), dl.data(), n, E, k, c.normalize,
                        cs.data());
  Dev<T> dDW(dw), dDL(n * E);
  Dev<int64_t> dRefE(ref.experts);
  gpu::moeRouteBackward(dDW.p, dL.p, dRefE.p, dDL.p, n, E, k, c.normalize, nullptr);
  // Step by step, first order, each f32 operation u of its result, the f32
  // sums of k terms gamma_k of their absolute terms: s, w_j = p_j / s, dot =
  // sum dw_j w_j, dp_j = (dw_j - dot) / s (normalized; else dp_j = dw_j), pd
  // = sum p_j dp_j in double rounded to f32, dlogits = p (dp - pd).
  VecD eL(n * E);
  for (int64_t t = 0; t < n; ++t) {
    const SoftmaxRow &s = rows[t];
    const int64_t *ch = ref.experts.data() + t * k;
    VecD dp(E, 0.0), edp(E, 0.0);
    if (c.normalize) {
      double sum = 0, eSum = 0, dot = 0, dotAbs = 0, eDot = 0;
      for (int64_t j = 0; j < k; ++j) {
        sum += s.p[ch[j]];
        eSum += s.p[ch[j]] * s.rel[ch[j]];
      }
      eSum += gammaK(double(k - 1)) * sum;
      for (int64_t j = 0; j < k; ++j) {
        const double p = s.p[ch[j]], w = p / sum;
        const double ew = (p * s.rel[ch[j]] + w * eSum) / sum + kU * w;
        dot += dwF[t * k + j] * w;
        dotAbs += std::fabs(dwF[t * k + j] * w);
        eDot += std::fabs(dwF[t * k + j]) * ew;
      }
      eDot += gammaK(double(k)) * dotAbs;
      for (int64_t j = 0; j < k; ++j) {
        const double num = dwF[t * k + j] - dot, d = num / sum;
        dp[ch[j]] = d;
        edp[ch[j]] = (eDot + kU * std::fabs(num) + std::fabs(d) * eSum) / sum + kU * std::fabs(d);
      }
    } else {
      for (int64_t j = 0; j < k; ++j)
        dp[ch[j]] = dwF[t * k + j];
    }
    double pd = 0, pdAbs = 0, ePd = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ch[j];
      pd += s.p[e] * dp[e];
      pdAbs += std::fabs(s.p[e] * dp[e]);
      ePd += s.p[e] * s.rel[e] * std::fabs(dp[e]) + s.p[e] * edp[e];
    }
    ePd += gammaK(double(k), kU64) * pdAbs + kU * std::fabs(pd);
    for (int64_t e = 0; e < E; ++e) {
      const double diff = dp[e] - pd, eDiff = edp[e] + ePd + kU * std::fabs(diff);
      const double g = s.p[e] * diff;
      eL[t * E + e] = s.p[e] * s.rel[e] * std::fabs(diff) + s.p[e] * eDiff + kU * std::fabs(g);
    }
  }
  expectNear(dDL.get(), dl, eL, what + ": moe_route_grad dlogits");
}

template <class T> void routeTests() {
  // E = 8, k = 2 (Mixtral, normalized; Qwen3-MoE's norm_topk_prob false);
  // E = 4, k = 4 (every expert, in p's order); E = 70 (several experts a
  // lane); n k over kMoeChunk (the slots' per-chunk counts).
  const RouteCase cases[] = {{37, 8, 2, true, 200},  {300, 8, 2, false, 201},
                             {29, 4, 4, true, 202},  {53, 4, 4, false, 203},
                             {41, 70, 3, true, 204}, {1, 5, 1, false, 205}};
  for (const RouteCase &c : cases)
    routeCase<T>(c, routerLogits<T>(c.n, c.E, c.seed), "random");
  // One expert (2) first for every token, three (5, 6, 7) for none; and
  // rows of equal logits (exact ties: experts 0, 1 in that order).
  const int64_t n = 33, E = 8, k = 2;
  std::vector<float> logits = routerLogits<T>(n, E, 206);
  for (int64_t t = 0; t < n; ++t) {
    logits[t * E + 2] = 8.0f;
    for (int64_t e = 5; e < E; ++e)
      logits[t * E + e] = -8.0f;
  }
  for (int64_t t = 0; t < n; t += 8)
    for (int64_t e = 0; e < E; ++e)
      logits[t * E + e] = 0.25f;
  for (bool normalize : {true, false})
    routeCase<T>({n, E, k, normalize, 207}, logits, "one expert every token, ties");
  const Routing<T> r = cpuRoute<T>(logits, n, E, k, true);
  EXPECT_EQ(r.experts[0], 0); // the tie to the lower expert, on the CPU too
  EXPECT_EQ(r.experts[1], 1);
  EXPECT_EQ(r.experts[2], 2);
}

} // namespace

TEST(KernelsGpuMoe, Route) {
  REQUIRE_GPU();
  routeTests<float>();
}
TEST(KernelsGpuMoe, RouteBf16) {
  REQUIRE_GPU();
  routeTests<bf16>();
}

namespace {

// moe_permute (copies) and its gradient (k rows summed in f32 in ascending
// slot order on both sides): bit for bit.
template <class T> void permuteTests() {
  struct Case {
    int64_t n, E, k, D;
  } cases[] = {{37, 8, 2, 65}, {29, 4, 4, 33}, {150, 8, 2, 7}};
  for (const Case &c : cases) {
    const std::string what = std::string("moe_permute ") + dtypeName<T>() +
                             " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
    const Routing<T> r = cpuRoute<T>(routerLogits<T>(c.n, c.E, 300), c.n, c.E, c.k, true);
    const std::vector<T> x = fromF32<T>(randn(c.n * c.D, 301)),
                         dp = fromF32<T>(randn(c.n * c.k * c.D, 302));
    std::vector<T> packed(c.n * c.k * c.D), dx(c.n * c.D);
    cpu::moePermuteForward(x.data(), r.slots.data(), packed.data(), c.n, c.k, c.D);
    cpu::moePermuteBackward(dp.data(), r.slots.data(), dx.data(), c.n, c.k, c.D);
    Dev<T> dX(x), dP(packed.size()), dDP(dp), dDX(dx.size());
    Dev<int64_t> dS(r.slots);
    gpu::moePermuteForward(dX.p, dS.p, dP.p, c.n, c.k, c.D, nullptr);
    gpu::moePermuteBackward(dDP.p, dS.p, dDX.p, c.n, c.k, c.D, nullptr);
    expectSameBits(dP.get(), packed, what);
    expectSameBits(dDX.get(), dx, what + " grad");
  }
}

// moe_combine: y = the f32 sum of k products, gamma_k sum |w row| on each
// side (any order, fused or not); dpacked = w dy, one product: bit for bit;
// dweights = the double dot product of D terms rounded to f32: u |dw| +
// gamma64_D sum |row dy|.
template <class T> void combineTests() {
  struct Case {
    int64_t n, E, k, D;
  } cases[] = {{37, 8, 2, 65}, {29, 4, 4, 300}, {23, 70, 3, 17}};
  for (const Case &c : cases) {
    const std::string what = std::string("moe_combine ") + dtypeName<T>() +
                             " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
    const Routing<T> r = cpuRoute<T>(routerLogits<T>(c.n, c.E, 310), c.n, c.E, c.k, false);
    const std::vector<T> packed = fromF32<T>(randn(c.n * c.k * c.D, 311)),
                         dy = fromF32<T>(randn(c.n * c.D, 312));
    std::vector<T> y(c.n * c.D), dpacked(packed.size()), dw(c.n * c.k);
    cpu::moeCombineForward(packed.data(), r.weights.data(), r.slots.data(), y.data(), c.n, c.k,
                           c.D);
    cpu::moeCombineBackward(dy.data(), packed.data(), r.weights.data(), r.slots.data(),
                            dpacked.data(), dw.data(), c.n, c.k, c.D);
    Dev<T> dP(packed), dW(r.weights), dY(y.size()), dDY(dy), dDP(packed.size()), dDW(dw.size());
    Dev<int64_t> dS(r.slots);
    gpu::moeCombineForward(dP.p, dW.p, dS.p, dY.p, c.n, c.k, c.D, nullptr);
    gpu::moeCombineBackward(dDY.p, dP.p, dW.p, dS.p, dDP.p, dDW.p, c.n, c.k, c.D, nullptr);
    const std::vector<float> pF = asF32(packed), wF = asF32(r.weights), gF = asF32(dy);
    VecD eY(y.size()), eW(dw.size());
    for (int64_t t = 0; t < c.n; ++t) {
      for (int64_t d = 0; d < c.D; ++d) {
        double a = 0;
        for (int64_t j = 0; j < c.k; ++j)
          a += std::fabs(double(wF[t * c.k + j]) * pF[r.slots[t * c.k + j] * c.D + d]);
        eY[t * c.D + d] = gammaK(double(c.k)) * a;
      }
      for (int64_t j = 0; j < c.k; ++j) {
        double s = 0, a = 0;
        for (int64_t d = 0; d < c.D; ++d) {
          const double v = double(pF[r.slots[t * c.k + j] * c.D + d]) * gF[t * c.D + d];
          s += v;
          a += std::fabs(v);
        }
        eW[t * c.k + j] = kU * std::fabs(s) + gammaK(double(c.D), kU64) * a;
      }
    }
    expectNear(dY.get(), y, eY, what);
    expectSameBits(dDP.get(), dpacked, what + " grad dpacked");
    expectNear(dDW.get(), dw, eW, what + " grad dweights");
  }
}

// moe_linear and its gradients: each expert's rows against linearBounds of
// that expert's slice (gamma_{K+2} of the absolute products: any order,
// blocked or fused, both sides), assembled; an expert without rows has a
// zero bound for its dW: zeros exactly.
template <class T>
void linearCase(const std::string &tag, int64_t n, int64_t k, int64_t E, int64_t in, int64_t out,
                const std::vector<int64_t> &experts, uint32_t seed) {
  const std::string what = std::string("moe_linear ") + dtypeName<T>() + " " + tag;
  const int64_t rows = n * k;
  const std::vector<T> x = fromF32<T>(randn(rows * in, seed)),
                       dy = fromF32<T>(randn(rows * out, seed + 1));
  std::vector<std::vector<T>> w;
  for (int64_t e = 0; e < E; ++e)
    w.push_back(fromF32<T>(randn(out * in, seed + 2 + uint32_t(e))));
  std::vector<const T *> wPtr;
  for (const auto &v : w)
    wPtr.push_back(v.data());
  std::vector<T> y(rows * out), dx(rows * in);
  std::vector<std::vector<T>> dw(E, std::vector<T>(out * in));
  std::vector<T *> dwPtr;
  for (auto &v : dw)
    dwPtr.push_back(v.data());
  std::vector<float> cs(
      cpu::moeOffsetsFloats(E) +
      (std::is_same_v<T, float> ? 0 : cpu::linearBf16ScratchFloats(rows, in, out)));
  cpu::moeLinearForward(x.data(), experts.data(), wPtr.data(), y.data(), n, k, E, in, out,
                        cs.data());
  cpu::moeLinearBackwardInput(dy.data(), experts.data(), wPtr.data(), dx.data(), n, k, E, in, out,
                              cs.data());
  cpu::moeLinearBackwardWeight(dy.data(), x.data(), experts.data(), dwPtr.data(), n, k, E, in, out,
                               cs.data());

  Dev<T> dX(x), dDY(dy), dY(y.size()), dDX(dx.size());
  Dev<int64_t> dE(experts);
  DevList<T> dW(w), dDW(size_t(E), size_t(out * in));
  Dev<float> scratch(gpu::moeLinearScratchFloats(E));
  const std::vector<const T *> wDev(dW.p.begin(), dW.p.end());
  gpu::moeLinearForward(dX.p, dE.p, wDev.data(), dY.p, n, k, E, in, out, scratch.p, nullptr);
  gpu::moeLinearBackwardInput(dDY.p, dE.p, wDev.data(), dDX.p, n, k, E, in, out, scratch.p,
                              nullptr);
  gpu::moeLinearBackwardWeight(dDY.p, dX.p, dE.p, dDW.p.data(), n, k, E, in, out, scratch.p,
                               nullptr);

  // Expert e's rows: after those of the experts before it.
  std::vector<int64_t> start(E + 1, 0);
  for (int64_t e : experts)
    ++start[e + 1];
  for (int64_t e = 0; e < E; ++e)
    start[e + 1] += start[e];
  const std::vector<float> xF = asF32(x), dyF = asF32(dy);
  VecD eY(y.size()), eDX(dx.size());
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = start[e], m = start[e + 1] - r0;
    VecD eDW(out * in, 0.0);
    if (m > 0) {
      const LinearBounds b =
          linearBounds(VecD(xF.begin() + r0 * in, xF.begin() + (r0 + m) * in), toD(asF32(w[e])),
                       nullptr, VecD(dyF.begin() + r0 * out, dyF.begin() + (r0 + m) * out), m, in,
                       out, cpu::Layout::OutIn);
      std::copy(b.y.begin(), b.y.end(), eY.begin() + r0 * out);
      std::copy(b.dx.begin(), b.dx.end(), eDX.begin() + r0 * in);
      eDW = b.dw;
    }
    const std::string ex = what + " dW[" + std::to_string(e) + "] (" + std::to_string(m) + " rows)";
    const std::vector<T> got = dDW.d[e]->get();
    expectNear(got, dw[e], eDW, ex);
    if (m == 0) {
      for (const T &v : got)
        ASSERT_EQ(asF32(std::vector<T>{v})[0], 0.0f) << ex << ": not zeros";
    }
  }
  expectNear(dY.get(), y, eY, what + " forward");
  expectNear(dDX.get(), dx, eDX, what + " input grad");
}

template <class T> void linearTests() {
  // E = 8, k = 2 as the router chose (rows over 64 for some experts);
  // E = 4, k = 4 (every expert, every token); one expert with every row
  // (150 over three tiles) and the others none; two experts sharing every
  // row, six without; E = 70 (two launches of kMoePointers experts).
  linearCase<T>("E=8 k=2 routed", 97, 2, 8, 67, 45,
                cpuRoute<T>(routerLogits<T>(97, 8, 400), 97, 8, 2, true).experts, 401);
  linearCase<T>("E=4 k=4", 21, 4, 4, 33, 70,
                cpuRoute<T>(routerLogits<T>(21, 4, 402), 21, 4, 4, false).experts, 403);
  linearCase<T>("E=4 k=1 all rows to expert 3", 150, 1, 4, 19, 66, std::vector<int64_t>(150, 3),
                404);
  std::vector<int64_t> two(2 * 41);
  for (int64_t t = 0; t < 41; ++t) {
    two[2 * t] = t % 2 ? 5 : 2;
    two[2 * t + 1] = t % 2 ? 2 : 5;
  }
  linearCase<T>("E=8 k=2 experts 2 and 5 only", 41, 2, 8, 24, 17, two, 405);
  linearCase<T>("E=70 k=2 routed", 45, 2, 70, 9, 7,
                cpuRoute<T>(routerLogits<T>(45, 70, 406), 45, 70, 2, true).experts, 407);
}

// moe_aux_loss and its gradient over L layers' logits. The counts are the
// same integers on both sides (requireClearTopK on every row); P[e] = the
// sum of the rows' p: the p's errors and gamma64 of the double sum; aux in
// double; out = loss + coef E aux rounded to f32 once. The gradient: G[e] =
// scale F[e] the same double on both sides, pg = sum p G in double, dlogits
// = p (G - pg) rounded once.
template <class T>
void auxCase(int64_t L, int64_t n, int64_t E, int64_t k, double coef, uint32_t seed) {
  const std::string what = std::string("moe_aux_loss ") + dtypeName<T>() +
                           " L=" + std::to_string(L) + " n=" + std::to_string(n) +
                           " E=" + std::to_string(E) + " k=" + std::to_string(k);
  std::vector<std::vector<float>> lf;
  std::vector<std::vector<T>> l;
  for (int64_t i = 0; i < L; ++i) {
    lf.push_back(routerLogits<T>(n, E, seed + uint32_t(i)));
    l.push_back(fromF32<T>(lf.back()));
  }
  std::vector<const T *> lPtr;
  for (const auto &v : l)
    lPtr.push_back(v.data());
  const float loss = 2.5f, lossScale = 1.0f / float(3 * n);
  float out = 0;
  std::vector<float> cs(cpu::moeAuxLossScratchFloats(E, k));
  cpu::moeAuxLossForward(&loss, lPtr.data(), &out, L, n, E, k, coef, cs.data());
  std::vector<std::vector<T>> dl(L, std::vector<T>(n * E));
  std::vector<T *> dlPtr;
  for (auto &v : dl)
    dlPtr.push_back(v.data());
  cpu::moeAuxLossBackward(lPtr.data(), dlPtr.data(), L, n, E, k, coef, lossScale, cs.data());

  DevList<T> dL(l), dDL(size_t(L), size_t(n * E));
  const std::vector<const T *> lDev(dL.p.begin(), dL.p.end());
  Dev<float> dLoss(std::vector<float>{loss}), dOut(1),
      scratch(gpu::moeAuxLossScratchFloats(L, n, E, k));
  gpu::moeAuxLossForward(dLoss.p, lDev.data(), dOut.p, L, n, E, k, coef, scratch.p, nullptr);
  gpu::moeAuxLossBackward(lDev.data(), dDL.p.data(), L, n, E, k, coef, lossScale, scratch.p,
                          nullptr);

  // The statistics, exactly (the CPU's choices: the same on both sides).
  const double R = double(L) * double(n);
  VecD P(E, 0.0), eP(E, 0.0), F(E, 0.0);
  std::vector<std::vector<SoftmaxRow>> rows(L);
  std::vector<int64_t> chosen(k);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t t = 0; t < n; ++t) {
      const float *x = lf[i].data() + t * E;
      rows[i].push_back(softmaxRow(x, E));
      const SoftmaxRow &s = rows[i].back();
      requireClearTopK(x, s, E, k,
                       what + " layer " + std::to_string(i) + " row " + std::to_string(t));
      for (int64_t e = 0; e < E; ++e) {
        P[e] += s.p[e];
        eP[e] += s.p[e] * s.rel[e];
      }
      std::vector<int64_t> ord(E);
      for (int64_t e = 0; e < E; ++e)
        ord[e] = e;
      std::stable_sort(ord.begin(), ord.end(),
                       [&](int64_t a, int64_t b) { return s.p[a] > s.p[b]; });
      for (int64_t j = 0; j < k; ++j)
        F[ord[j]] += 1;
    }
  double aux = 0, eAux = 0;
  for (int64_t e = 0; e < E; ++e) {
    eP[e] += gammaK(R, kU64) * P[e];
    aux += F[e] / R * (P[e] / R);
    eAux += F[e] / R * (eP[e] / R);
  }
  eAux += gammaK(double(2 * k * E + 4), kU64) * aux;
  const double exact = double(loss) + coef * double(E) * aux;
  const double eOut =
      coef * double(E) * eAux + gammaK(3, kU64) * std::fabs(exact) + kU * std::fabs(exact);
  expectClose(dOut.get(), {out}, {eOut}, (what + " forward").c_str());
  // A wrong statistic moves the loss by far more than eOut: the check has
  // teeth (coef E aux is the term the kernels compute).
  EXPECT_GT(coef * double(E) * aux, 1000 * eOut) << what;

  const double scale = coef * double(E) / (R * R) * double(n) * double(lossScale);
  for (int64_t i = 0; i < L; ++i) {
    VecD e(n * E);
    for (int64_t t = 0; t < n; ++t) {
      const SoftmaxRow &s = rows[i][t];
      double pg = 0, pgAbs = 0, ePg = 0;
      for (int64_t c = 0; c < E; ++c) {
        const double G = scale * F[c];
        pg += s.p[c] * G;
        pgAbs += s.p[c] * std::fabs(G);
        ePg += s.p[c] * s.rel[c] * std::fabs(G);
      }
      ePg += gammaK(double(E), kU64) * pgAbs;
      for (int64_t c = 0; c < E; ++c) {
        const double diff = scale * F[c] - pg, g = s.p[c] * diff;
        e[t * E + c] = s.p[c] * s.rel[c] * std::fabs(diff) +
                       s.p[c] * (ePg + kU64 * std::fabs(diff)) + kU * std::fabs(g);
      }
    }
    expectNear(dDL.d[i]->get(), dl[i], e, what + " grad layer " + std::to_string(i));
  }
}

template <class T> void auxTests() {
  auxCase<T>(3, 41, 8, 2, 0.02, 500);   // Mixtral-like
  auxCase<T>(2, 29, 4, 4, 0.01, 510);   // every expert chosen
  auxCase<T>(66, 5, 4, 1, 0.01, 520);   // two launches of kMoePointers layers
  auxCase<T>(1, 1100, 6, 2, 0.05, 600); // two blocks of kMoeAuxRows rows
}

} // namespace

TEST(KernelsGpuMoe, Permute) {
  REQUIRE_GPU();
  permuteTests<float>();
  permuteTests<bf16>();
}

TEST(KernelsGpuMoe, Combine) {
  REQUIRE_GPU();
  combineTests<float>();
  combineTests<bf16>();
}

TEST(KernelsGpuMoe, Linear) {
  REQUIRE_GPU();
  linearTests<float>();
}
TEST(KernelsGpuMoe, LinearBf16) {
  REQUIRE_GPU();
  linearTests<bf16>();
}

TEST(KernelsGpuMoe, AuxLoss) {
  REQUIRE_GPU();
  auxTests<float>();
}
TEST(KernelsGpuMoe, AuxLossBf16) {
  REQUIRE_GPU();
  auxTests<bf16>();
}

// Past the limits (cuda.h): refused by name before any launch.
TEST(KernelsGpuMoe, Limits) {
  REQUIRE_GPU();
  float *none = nullptr;
  int64_t *ids = nullptr;
  const int64_t E = gpu::kMoeMaxExperts + 1;
  EXPECT_THROW(gpu::moeRouteForward(none, none, ids, ids, 4, E, 2, true, none, nullptr),
               gpu::Error);
  EXPECT_THROW(gpu::moeRouteBackward(none, none, ids, none, 4, 8, 9, true, nullptr), gpu::Error);
  EXPECT_THROW(gpu::moePermuteForward(none, ids, none, int64_t(1) << 30, 4, 8, nullptr),
               gpu::Error);
  const float *const *w = nullptr;
  EXPECT_THROW(gpu::moeLinearForward(none, ids, w, none, 4, 2, E, 8, 8, none, nullptr), gpu::Error);
}
