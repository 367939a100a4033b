//===- KernelsBf16Test.cpp - bf16-storage CPU kernels ---------------------===//
//
// Every bf16 kernel against its f32 counterpart (KernelsTest.cpp checks those
// against double references) run on the same values: the inputs drawn, rounded
// to bf16, and given to the f32 kernel upcast. A bf16 output may differ from
// the f32 one by its one rounding, half an ulp, at most 2^-8 relative, plus
// what another order of the same f32 sums changes (the panels' sgemms, the
// tiles of attention): twice the f32 kernel's error bound (KernelBounds.h),
// per element. Each gradient is also checked against central differences of
// L = sum(dy * f32 forward(x)) in x, with their own error bound (numGrad).
// Last, each kernel with scratch runs on shapes larger than a panel with
// exactly its *Bf16ScratchFloats bound and canaries after it.
// FSDP_KERNELS_VERBOSE=1 prints every check's error.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu.h"
#include "tests/unit/KernelBounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace fsdp::kernels;

namespace {

using VecF = std::vector<float>;
using VecB = std::vector<bf16>;

using namespace kernel_bounds;
using VecD = std::vector<double>;

// cpu_impl.h's expf1 and tanhf1 are ~1 ulp, glibc's erff and expf at most 1:
// counted as 2 ulps each (as KernelsTest.cpp).
constexpr double kLibmUlps = 2;

bool verbose() {
  static const bool v = std::getenv("FSDP_KERNELS_VERBOSE") != nullptr;
  return v;
}

// Values drawn in [lo, hi] and rounded to bf16: b holds them, f upcast.
struct Tensor {
  VecB b;
  VecF f;
};

Tensor randomT(size_t n, std::mt19937 &rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t{VecB(n), VecF(n)};
  for (size_t i = 0; i < n; ++i) {
    t.b[i].bits = floatToBf16(dist(rng));
    t.f[i] = bf16ToFloat(t.b[i].bits);
  }
  return t;
}

VecF up(const VecB &b) {
  VecF f(b.size());
  fromBf16(b.data(), f.data(), int64_t(b.size()));
  return f;
}

template <class V> VecD toD(const V &v) { return VecD(v.begin(), v.end()); }

VecD times(VecD v, double k) {
  for (double &x : v)
    x *= k;
  return v;
}

// Passes when every |got - ref| <= bf16 rounding of (ref within e) plus e:
// 2^-8 (|ref| + e) + e. e bounds what the two f32 computations before the
// rounding may differ by: the sum of their error bounds (KernelBounds.h) on
// the same inputs, 2 x one kernel's, whatever order each sums in.
::testing::AssertionResult check(const char *what, const VecB &got, const VecD &ref,
                                 const VecD &e) {
  if (got.size() != ref.size() || got.size() != e.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << ref.size()
                                         << " (bound " << e.size() << ")";
  double worst = 0; // error / allowed
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = bf16ToFloat(got[i].bits), r = ref[i];
    const double allowed = kBf16U * (std::fabs(r) + e[i]) + e[i];
    const double err = std::fabs(g - r);
    const double ratio = err == 0 ? 0 : err / allowed;
    if (!(ratio <= worst)) { // also catches NaN
      worst = ratio;
      at = i;
    }
  }
  std::ostringstream msg;
  msg << what << ": worst error / allowed " << worst << " at [" << at << "] (got "
      << (got.empty() ? 0.0f : bf16ToFloat(got[at].bits)) << ", want "
      << (ref.empty() ? 0.0 : ref[at]) << ", f32 bound " << (e.empty() ? 0.0 : e[at]) << ")";
  if (verbose())
    std::printf("  [err] %s\n", msg.str().c_str());
  if (worst <= 1)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << msg.str();
}

// The bf16 kernel against the f32 kernel on the same values; eF32: one f32
// kernel's bound, counted for both.
::testing::AssertionResult closeBf16(const char *what, const VecB &got, const VecF &ref,
                                     const VecD &eF32) {
  return check(what, got, toD(ref), times(eF32, 2));
}

// A gradient by central differences and each element's error bound.
struct Fd {
  VecD g, err;
};

// got (a bf16 gradient) against finite differences: its rounding, the f32
// gradient kernel's bound eGrad, and the differences' own error.
::testing::AssertionResult closeFd(const char *what, const VecB &got, const Fd &fd,
                                   const VecD &eGrad) {
  VecD e(fd.err);
  for (size_t i = 0; i < e.size(); ++i)
    e[i] += eGrad[i];
  return check((std::string(what) + " against finite differences").c_str(), got, fd.g, e);
}

template <class V> double dotDy(const V &dy, const V &y) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i)
    s += double(dy[i]) * double(y[i]);
  return s;
}

// Central differences D(h), in x, of L = sum(dy * forward()), forward() the
// f32 kernel reading x by reference (or a double function), step h = 1e-3
// max(1, |x|) as float makes it. Error bound per element: truncation by
// Richardson (D(2h) - D(h) = 3 c h^2 for D(h)'s c h^2), plus rounding: the
// outputs that do not depend on x_i are computed identically at both points
// and cancel; each one that does is off by at most eFwd (the forward's bound
// at x) at each point, so the difference by sum |dy| 2 eFwd over them,
// divided by the step; the double sum L adds sqrt(N) u64 sum |dy y|. An
// output depends on x_i when moving x_i by a quarter of max(1, |x_i|)
// changes it.
template <class V>
Fd numGrad(VecF &x, const V &dy, const std::function<V()> &forward, const VecD &eFwd) {
  Fd r{VecD(x.size()), VecD(x.size())};
  const V y0 = forward();
  const double sumNoise = std::sqrt(double(y0.size())) * kU64 * [&] {
    double a = 0;
    for (size_t j = 0; j < y0.size(); ++j)
      a += std::fabs(double(dy[j]) * double(y0[j]));
    return a;
  }();
  double dep = 0; // sum |dy| 2 eFwd over the outputs that depend on x_i
  auto diff = [&](size_t i, float xp, float xm, double &noise) {
    x[i] = xp;
    const V yp = forward();
    x[i] = xm;
    const V ym = forward();
    const double n = 2 * sumNoise + dep;
    const double dx = double(xp) - double(xm);
    noise = n / dx;
    return (dotDy(dy, yp) - dotDy(dy, ym)) / dx;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i], step = 1e-3f * std::max(1.0f, std::fabs(keep));
    x[i] = keep + 0.25f * std::max(1.0f, std::fabs(keep));
    const V far = forward();
    dep = 0;
    for (size_t j = 0; j < y0.size(); ++j)
      if (far[j] != y0[j])
        dep += std::fabs(double(dy[j])) * 2 * eFwd[j];
    double n1, n2;
    const double d1 = diff(i, keep + step, keep - step, n1);
    const double d2 = diff(i, keep + 2 * step, keep - 2 * step, n2);
    x[i] = keep;
    r.g[i] = d1;
    r.err[i] = std::fabs(d2 - d1) + n1 + n2;
  }
  return r;
}

Fd numGrad(VecF &x, const VecF &dy, const std::function<VecF()> &forward, const VecD &eFwd) {
  return numGrad<VecF>(x, dy, forward, eFwd);
}

} // namespace

//===----------------------------------------------------------------------===//
// Casts, embedding
//===----------------------------------------------------------------------===//

TEST(KernelsBf16, Casts) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8 to
  // 1 + 2^-6 (even); just above halfway rounds up.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const VecF x = {
      1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -2.5f, INFINITY, nan};
  const VecF want = {1.0f, 1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -2.5f, INFINITY};
  VecB b(x.size());
  toBf16(x.data(), b.data(), int64_t(x.size()));
  const VecF back = up(b);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(back[i], want[i]) << "element " << i;
  EXPECT_TRUE(std::isnan(back.back()));
}

TEST(KernelsBf16, Embedding) {
  std::mt19937 rng(101);
  const int64_t n = 9, V = 13, D = 7;
  const std::vector<int64_t> ids = {3, 0, 12, 3, 7, 3, 0, 11, 3}; // repeats accumulate
  Tensor table = randomT(V * D, rng), dy = randomT(n * D, rng);
  VecB out(n * D);
  embeddingForward(ids.data(), table.b.data(), out.data(), n, D);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < D; ++c)
      ASSERT_EQ(out[i * D + c].bits, table.b[ids[i] * D + c].bits);

  VecF scratch(embeddingBackwardBf16ScratchFloats(n, V, D)), want(V * D);
  VecB dtable(V * D, bf16{0x4000}); // overwritten, not accumulated into
  embeddingBackward(dy.b.data(), ids.data(), dtable.data(), n, V, D, scratch.data());
  embeddingBackward(dy.f.data(), ids.data(), want.data(), n, V, D);
  // A float sum of each id's rows: gamma_n sum |dy| over them.
  VecD e(V * D, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < D; ++c)
      e[ids[i] * D + c] += gammaK(n) * std::fabs(dy.f[i * D + c]);
  EXPECT_TRUE(closeBf16("embedding dtable", dtable, want, e));
  auto fwd = [&] {
    VecF y(n * D);
    embeddingForward(ids.data(), table.f.data(), y.data(), n, D);
    return y;
  };
  EXPECT_TRUE(
      closeFd("embedding dtable", dtable, numGrad(table.f, dy.f, fwd, VecD(n * D, 0.0)), e));
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

namespace {
void checkLinear(Layout layout, bool withBias, int64_t n, int64_t in, int64_t out, unsigned seed,
                 bool fd) {
  SCOPED_TRACE(::testing::Message() << (layout == Layout::InOut ? "in_out" : "out_in")
                                    << (withBias ? " bias" : " no bias") << " n=" << n
                                    << " in=" << in << " out=" << out);
  std::mt19937 rng(seed);
  Tensor x = randomT(n * in, rng), w = randomT(in * out, rng), b = randomT(out, rng),
         dy = randomT(n * out, rng);
  VecF scratch(linearBf16ScratchFloats(n, in, out));
  VecB y(n * out), dx(n * in), dw(in * out), db(out);
  VecF yf(n * out), dxf(n * in), dwf(in * out), dbf(out);
  const VecD bD = toD(b.f);
  const LinearBounds e =
      linearBounds(toD(x.f), toD(w.f), withBias ? &bD : nullptr, toD(dy.f), n, in, out, layout);
  linearForward(x.b.data(), w.b.data(), withBias ? b.b.data() : nullptr, y.data(), n, in, out,
                layout, scratch.data());
  linearForward(x.f.data(), w.f.data(), withBias ? b.f.data() : nullptr, yf.data(), n, in, out,
                layout);
  EXPECT_TRUE(closeBf16("linear y", y, yf, e.y));
  linearBackwardInput(dy.b.data(), w.b.data(), dx.data(), n, in, out, layout, scratch.data());
  linearBackwardInput(dy.f.data(), w.f.data(), dxf.data(), n, in, out, layout);
  EXPECT_TRUE(closeBf16("linear dx", dx, dxf, e.dx));
  linearBackwardWeight(dy.b.data(), x.b.data(), dw.data(), n, in, out, layout, scratch.data());
  linearBackwardWeight(dy.f.data(), x.f.data(), dwf.data(), n, in, out, layout);
  EXPECT_TRUE(closeBf16("linear dw", dw, dwf, e.dw));
  biasBackward(dy.b.data(), db.data(), n, out, nullptr);
  biasBackward(dy.f.data(), dbf.data(), n, out);
  EXPECT_TRUE(closeBf16("linear db", db, dbf, e.db));
  if (!fd)
    return;
  auto fwd = [&] {
    VecF r(n * out);
    linearForward(x.f.data(), w.f.data(), withBias ? b.f.data() : nullptr, r.data(), n, in, out,
                  layout);
    return r;
  };
  EXPECT_TRUE(closeFd("linear dx", dx, numGrad(x.f, dy.f, fwd, e.y), e.dx));
  EXPECT_TRUE(closeFd("linear dw", dw, numGrad(w.f, dy.f, fwd, e.y), e.dw));
  if (withBias)
    EXPECT_TRUE(closeFd("linear db", db, numGrad(b.f, dy.f, fwd, e.y), e.db));
}
} // namespace

TEST(KernelsBf16, Linear) {
  checkLinear(Layout::InOut, true, 5, 7, 11, 102, true);
  checkLinear(Layout::OutIn, true, 9, 17, 4, 103, true);
  checkLinear(Layout::OutIn, false, 1, 3, 1, 104, true);
  checkLinear(Layout::InOut, false, 3, 0, 5, 105, false); // in = 0: y is the bias or 0
}

TEST(KernelsBf16, LinearPanels) {
  // Past one 256 panel in every dimension, partial panels last; n > max(in,
  // out): the weight gradient sums n in two chunks.
  checkLinear(Layout::InOut, true, 600, 300, 270, 106, false);
  checkLinear(Layout::OutIn, true, 600, 270, 300, 107, false);
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

TEST(KernelsBf16, LayerNorm) {
  std::mt19937 rng(110);
  const int64_t n = 5, D = 37;
  const double eps = 1e-5;
  Tensor x = randomT(n * D, rng, 2.0f, 5.0f), w = randomT(D, rng, 0.5f, 1.5f), b = randomT(D, rng),
         dy = randomT(n * D, rng);
  VecB y(n * D), dx(n * D), dw(D), db(D);
  VecF yf(n * D), dxf(n * D), dwf(D), dbf(D), scratch(normBackwardBf16ScratchFloats(n, D));
  const NormBounds e = layerNormBounds(toD(x.f), toD(w.f), toD(b.f), toD(dy.f), n, D, eps);
  layerNormForward(x.b.data(), w.b.data(), b.b.data(), y.data(), n, D, eps);
  layerNormForward(x.f.data(), w.f.data(), b.f.data(), yf.data(), n, D, eps);
  EXPECT_TRUE(closeBf16("layer_norm y", y, yf, e.y));
  layerNormBackward(dy.b.data(), x.b.data(), w.b.data(), dx.data(), dw.data(), db.data(), n, D, eps,
                    scratch.data());
  layerNormBackward(dy.f.data(), x.f.data(), w.f.data(), dxf.data(), dwf.data(), dbf.data(), n, D,
                    eps);
  EXPECT_TRUE(closeBf16("layer_norm dx", dx, dxf, e.dx));
  EXPECT_TRUE(closeBf16("layer_norm dw", dw, dwf, e.dw));
  EXPECT_TRUE(closeBf16("layer_norm db", db, dbf, e.db));
  auto fwd = [&] {
    VecF r(n * D);
    layerNormForward(x.f.data(), w.f.data(), b.f.data(), r.data(), n, D, eps);
    return r;
  };
  EXPECT_TRUE(closeFd("layer_norm dx", dx, numGrad(x.f, dy.f, fwd, e.y), e.dx));
  EXPECT_TRUE(closeFd("layer_norm dw", dw, numGrad(w.f, dy.f, fwd, e.y), e.dw));
  EXPECT_TRUE(closeFd("layer_norm db", db, numGrad(b.f, dy.f, fwd, e.y), e.db));
}

TEST(KernelsBf16, RmsNorm) {
  std::mt19937 rng(111);
  const int64_t n = 5, D = 37;
  const double eps = 1e-6;
  Tensor x = randomT(n * D, rng, -2.0f, 2.0f), w = randomT(D, rng, 0.5f, 1.5f),
         dy = randomT(n * D, rng);
  VecB y(n * D), dx(n * D), dw(D);
  VecF yf(n * D), dxf(n * D), dwf(D), scratch(normBackwardBf16ScratchFloats(n, D));
  const NormBounds e = rmsNormBounds(toD(x.f), toD(w.f), toD(dy.f), n, D, eps);
  rmsNormForward(x.b.data(), w.b.data(), y.data(), n, D, eps);
  rmsNormForward(x.f.data(), w.f.data(), yf.data(), n, D, eps);
  EXPECT_TRUE(closeBf16("rms_norm y", y, yf, e.y));
  rmsNormBackward(dy.b.data(), x.b.data(), w.b.data(), dx.data(), dw.data(), n, D, eps,
                  scratch.data());
  rmsNormBackward(dy.f.data(), x.f.data(), w.f.data(), dxf.data(), dwf.data(), n, D, eps);
  EXPECT_TRUE(closeBf16("rms_norm dx", dx, dxf, e.dx));
  EXPECT_TRUE(closeBf16("rms_norm dw", dw, dwf, e.dw));
  auto fwd = [&] {
    VecF r(n * D);
    rmsNormForward(x.f.data(), w.f.data(), r.data(), n, D, eps);
    return r;
  };
  EXPECT_TRUE(closeFd("rms_norm dx", dx, numGrad(x.f, dy.f, fwd, e.y), e.dx));
  EXPECT_TRUE(closeFd("rms_norm dw", dw, numGrad(w.f, dy.f, fwd, e.y), e.dw));
}

//===----------------------------------------------------------------------===//
// RoPE, split, concat, add
//===----------------------------------------------------------------------===//

TEST(KernelsBf16, Rope) {
  std::mt19937 rng(112);
  const int64_t B = 2, S = 9, H = 3, Dh = 17, N = B * S * H * Dh; // odd Dh: one unrotated
  RopeScaling llama3, linear, dynamic, yarn;
  llama3.kind = RopeScalingKind::Llama3, llama3.factor = 8.0, llama3.originalMaxPosition = 8;
  llama3.lowFreqFactor = 1.0, llama3.highFreqFactor = 4.0;
  linear.kind = RopeScalingKind::Linear, linear.factor = 2.5;
  dynamic.kind = RopeScalingKind::Dynamic, dynamic.factor = 3.0, dynamic.originalMaxPosition = 9;
  // Dh 17 (16 rotated): dims [0, 2] ramp, as in KernelsTest's RopeYarnScaling.
  yarn.kind = RopeScalingKind::Yarn, yarn.factor = 4.0, yarn.originalMaxPosition = 32;
  yarn.attentionFactor = 0.1 * std::log(4.0) + 1;
  for (const RopeScaling *scaling :
       std::initializer_list<const RopeScaling *>{nullptr, &llama3, &linear, &dynamic, &yarn}) {
    SCOPED_TRACE(scaling ? fsdp::support::ropeScalingName(scaling->kind) : "no scaling");
    Tensor x = randomT(N, rng), dy = randomT(N, rng);
    VecB y(N), dx(N);
    VecF yf(N), dxf(N);
    const VecD eY = ropeBound(toD(x.f), nullptr, B, S, H, Dh, 1e4, scaling),
               eDx = ropeBound(toD(dy.f), nullptr, B, S, H, Dh, 1e4, scaling);
    rope(x.b.data(), y.data(), B, S, H, Dh, 1e4, scaling, false);
    rope(x.f.data(), yf.data(), B, S, H, Dh, 1e4, scaling, false);
    EXPECT_TRUE(closeBf16("rope y", y, yf, eY));
    rope(dy.b.data(), dx.data(), B, S, H, Dh, 1e4, scaling, true);
    rope(dy.f.data(), dxf.data(), B, S, H, Dh, 1e4, scaling, true);
    EXPECT_TRUE(closeBf16("rope dx", dx, dxf, eDx));
    auto fwd = [&] {
      VecF r(N);
      rope(x.f.data(), r.data(), B, S, H, Dh, 1e4, scaling, false);
      return r;
    };
    EXPECT_TRUE(closeFd("rope dx", dx, numGrad(x.f, dy.f, fwd, eY), eDx));
  }
}

TEST(KernelsBf16, SplitConcatAdd) {
  std::mt19937 rng(113);
  const int64_t parts = 3, n = 5, W = 7;
  Tensor x = randomT(n * parts * W, rng);
  std::vector<VecB> outs(parts, VecB(n * W));
  bf16 *outPtrs[parts] = {outs[0].data(), outs[1].data(), outs[2].data()};
  split(x.b.data(), outPtrs, parts, n, W);
  for (int64_t p = 0; p < parts; ++p)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < W; ++c)
        ASSERT_EQ(outs[p][i * W + c].bits, x.b[i * parts * W + p * W + c].bits);
  const bf16 *inPtrs[parts] = {outs[0].data(), outs[1].data(), outs[2].data()};
  VecB y(x.b.size());
  concat(inPtrs, y.data(), parts, n, W);
  EXPECT_EQ(up(y), x.f);

  Tensor a = randomT(45, rng), b = randomT(45, rng);
  VecB sum(45);
  add(a.b.data(), b.b.data(), sum.data(), 45);
  for (int i = 0; i < 45; ++i) // one rounding of the float sum, exactly
    EXPECT_EQ(sum[i].bits, floatToBf16(a.f[i] + b.f[i])) << "element " << i;
  add(a.b.data(), b.b.data(), a.b.data(), 45); // in place
  EXPECT_EQ(up(a.b), up(sum));
}

//===----------------------------------------------------------------------===//
// Attention, causal and bidirectional
//===----------------------------------------------------------------------===//

namespace {
void checkAttention(int64_t B, int64_t S, int64_t H, int64_t KV, int64_t Dh, unsigned seed, bool fd,
                    int64_t window = 0, bool causal = true) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << B << " S=" << S << " H=" << H << " KV=" << KV << " Dh=" << Dh
               << " window=" << window << " causal=" << causal);
  std::mt19937 rng(seed);
  const int64_t nq = B * S * H * Dh, nk = B * S * KV * Dh;
  Tensor q = randomT(nq, rng, -2, 2), k = randomT(nk, rng, -2, 2), v = randomT(nk, rng),
         dy = randomT(nq, rng);
  VecF scratch(attentionBf16ScratchFloats(S, H, KV, Dh, true));
  VecF f32Scratch(attentionScratchFloats(S, true));
  VecB out(nq), dq(nq), dk(nk), dv(nk);
  VecF outf(nq), dqf(nq), dkf(nk), dvf(nk);
  attentionForward(q.b.data(), k.b.data(), v.b.data(), out.data(), B, S, H, KV, Dh, causal, window,
                   scratch.data());
  attentionForward(q.f.data(), k.f.data(), v.f.data(), outf.data(), B, S, H, KV, Dh, causal, window,
                   f32Scratch.data());
  const AttentionBounds e = attentionBounds(toD(q.f), toD(k.f), toD(v.f), {}, nullptr, nullptr, B,
                                            S, H, KV, Dh, window, causal);
  EXPECT_TRUE(closeBf16("attention out", out, outf, e.eOut));
  // The f32 backward on the stored (bf16) output, as the bf16 one sees it:
  // both read the same o (no error between them); against the exact
  // gradient that o is off by its rounding and the forward's bound.
  const VecF outUp = up(out);
  const VecD oD = toD(outUp);
  VecD eo(nq);
  for (int64_t i = 0; i < nq; ++i)
    eo[i] = kBf16U * (std::fabs(e.out[i]) + e.eOut[i]) + e.eOut[i];
  const AttentionBounds eb = attentionBounds(toD(q.f), toD(k.f), toD(v.f), toD(dy.f), &oD, nullptr,
                                             B, S, H, KV, Dh, window, causal);
  attentionBackward(dy.b.data(), q.b.data(), k.b.data(), v.b.data(), out.data(), dq.data(),
                    dk.data(), dv.data(), B, S, H, KV, Dh, causal, window, scratch.data());
  attentionBackward(dy.f.data(), q.f.data(), k.f.data(), v.f.data(), outUp.data(), dqf.data(),
                    dkf.data(), dvf.data(), B, S, H, KV, Dh, causal, window, f32Scratch.data());
  EXPECT_TRUE(closeBf16("attention dq", dq, dqf, eb.eDq));
  EXPECT_TRUE(closeBf16("attention dk", dk, dkf, eb.eDk));
  EXPECT_TRUE(closeBf16("attention dv", dv, dvf, eb.eDv));
  if (!fd)
    return;
  auto fwd = [&] {
    VecF r(nq);
    attentionForward(q.f.data(), k.f.data(), v.f.data(), r.data(), B, S, H, KV, Dh, causal, window,
                     f32Scratch.data());
    return r;
  };
  const AttentionBounds ex = attentionBounds(toD(q.f), toD(k.f), toD(v.f), toD(dy.f), &oD, &eo, B,
                                             S, H, KV, Dh, window, causal);
  EXPECT_TRUE(closeFd("attention dq", dq, numGrad(q.f, dy.f, fwd, e.eOut), ex.eDq));
  EXPECT_TRUE(closeFd("attention dk", dk, numGrad(k.f, dy.f, fwd, e.eOut), ex.eDk));
  EXPECT_TRUE(closeFd("attention dv", dv, numGrad(v.f, dy.f, fwd, e.eOut), ex.eDv));
}
} // namespace

TEST(KernelsBf16, Attention) {
  checkAttention(2, 5, 4, 2, 8, 120, true);  // GQA
  checkAttention(1, 6, 3, 3, 5, 121, true);  // MHA, odd Dh
  checkAttention(1, 6, 4, 1, 24, 122, true); // MQA
  // Three query tiles, the last partial; two query heads into one kv head's
  // f32 dk, dv sums; a realistic head dim.
  checkAttention(2, 130, 4, 2, 64, 123, false);
}

TEST(KernelsBf16, BidirectionalAttention) {               // BERT, ViT
  checkAttention(2, 5, 4, 2, 8, 127, true, 0, false);     // GQA
  checkAttention(1, 6, 3, 3, 5, 128, true, 0, false);     // MHA, odd Dh
  checkAttention(1, 6, 4, 1, 24, 129, true, 0, false);    // MQA
  checkAttention(2, 130, 4, 2, 64, 131, false, 0, false); // three query tiles, all keys each
}

TEST(KernelsBf16, AttentionWindow) { // Mistral's sliding window
  checkAttention(2, 9, 4, 2, 8, 124, true, 3);
  checkAttention(1, 6, 2, 1, 8, 125, true, 1);
  checkAttention(1, 130, 4, 2, 32, 126, false, 50); // windows across query tiles
}

//===----------------------------------------------------------------------===//
// Elementwise, cross-entropy
//===----------------------------------------------------------------------===//

TEST(KernelsBf16, GeluSiluMul) {
  std::mt19937 rng(130);
  const int64_t n = 301;
  Tensor x = randomT(n, rng, -6, 6), u = randomT(n, rng, -2, 2), dy = randomT(n, rng);
  VecB y(n), dx(n), dg(n), du(n);
  VecF yf(n), dxf(n), dgf(n), duf(n);
  for (bool tanh : {true, false}) { // HF gelu_new, HF gelu (exact)
    SCOPED_TRACE(tanh ? "approximate=tanh" : "approximate=none");
    const ElemBounds e = geluBounds(toD(x.f), toD(dy.f), tanh, kLibmUlps);
    geluForward(x.b.data(), y.data(), n, tanh);
    geluForward(x.f.data(), yf.data(), n, tanh);
    EXPECT_TRUE(closeBf16("gelu y", y, yf, e.y));
    geluBackward(dy.b.data(), x.b.data(), dx.data(), n, tanh);
    geluBackward(dy.f.data(), x.f.data(), dxf.data(), n, tanh);
    EXPECT_TRUE(closeBf16("gelu dx", dx, dxf, e.d1));
    auto gelu = [&] {
      VecF r(n);
      geluForward(x.f.data(), r.data(), n, tanh);
      return r;
    };
    EXPECT_TRUE(closeFd("gelu dx", dx, numGrad(x.f, dy.f, gelu, e.y), e.d1));
  }

  const ElemBounds es = siluMulBounds(toD(x.f), toD(u.f), toD(dy.f), kLibmUlps);
  siluMulForward(x.b.data(), u.b.data(), y.data(), n);
  siluMulForward(x.f.data(), u.f.data(), yf.data(), n);
  EXPECT_TRUE(closeBf16("silu_mul y", y, yf, es.y));
  siluMulBackward(dy.b.data(), x.b.data(), u.b.data(), dg.data(), du.data(), n);
  siluMulBackward(dy.f.data(), x.f.data(), u.f.data(), dgf.data(), duf.data(), n);
  EXPECT_TRUE(closeBf16("silu_mul dgate", dg, dgf, es.d1));
  EXPECT_TRUE(closeBf16("silu_mul dup", du, duf, es.d2));
  auto silu = [&] {
    VecF r(n);
    siluMulForward(x.f.data(), u.f.data(), r.data(), n);
    return r;
  };
  EXPECT_TRUE(closeFd("silu_mul dgate", dg, numGrad(x.f, dy.f, silu, es.y), es.d1));
  EXPECT_TRUE(closeFd("silu_mul dup", du, numGrad(u.f, dy.f, silu, es.y), es.d2));
}

TEST(KernelsBf16, CrossEntropy) {
  std::mt19937 rng(140);
  const int64_t n = 5, V = 37;
  const std::vector<int64_t> t = {0, 36, 3, 3, 7};
  Tensor logits = randomT(n * V, rng, -4, 4);
  logits.b[2 * V + 4].bits = floatToBf16(1000.0f); // exp overflows without the max
  logits.f[2 * V + 4] = 1000.0f;
  // The loss is f32 from the same (upcast) logits: the same up to sum order.
  const float loss = crossEntropyForward(logits.b.data(), t.data(), n, V);
  const float want = crossEntropyForward(logits.f.data(), t.data(), n, V);
  const float scale = 0.37f;
  const CrossEntropyBounds e = crossEntropyBounds(toD(logits.f), t, n, V, scale, kLibmUlps);
  // Two f32 evaluations, each within its bound of the exact loss.
  const double e1 = crossEntropyBounds(toD(logits.f), t, n, V, 1.0 / n, kLibmUlps).loss;
  EXPECT_LE(std::fabs(loss - want), 2 * e1) << "loss " << loss << " vs " << want;
  VecB d(n * V);
  VecF df(n * V);
  crossEntropyBackward(logits.b.data(), t.data(), d.data(), n, V, scale);
  crossEntropyBackward(logits.f.data(), t.data(), df.data(), n, V, scale);
  EXPECT_TRUE(closeBf16("cross_entropy dlogits", d, df, e.d));
  // d(scale * n * mean loss) / dlogits, the loss in double here: a float
  // loss near 200 (the large logit) has too few digits for the differences.
  // Its terms mx, log(sum), -x_t per row, weights scale (n * scale * the
  // mean), so that numGrad's rounding estimate sees their sizes.
  auto terms = [&] {
    VecD y(3 * n);
    for (int64_t i = 0; i < n; ++i) {
      const float *x = &logits.f[i * V];
      const double mx = *std::max_element(x, x + V);
      double sum = 0;
      for (int64_t c = 0; c < V; ++c)
        sum += std::exp(double(x[c]) - mx);
      y[3 * i] = mx;
      y[3 * i + 1] = std::log(sum);
      y[3 * i + 2] = -x[t[i]];
    }
    return y;
  };
  EXPECT_TRUE(closeFd("cross_entropy dlogits", d,
                      numGrad<VecD>(logits.f, VecD(3 * n, scale), terms, VecD(3 * n, 0.0)), e.d));
  crossEntropyBackward(logits.b.data(), t.data(), logits.b.data(), n, V, scale); // in place
  EXPECT_EQ(up(logits.b), up(d));
}

// Masked-LM: an ignored row (kIgnoreIndex) is left out of the loss and gets
// a zero gradient, in bf16 as in f32.
TEST(KernelsBf16, CrossEntropyIgnoreIndex) {
  std::mt19937 rng(141);
  const int64_t n = 6, V = 37;
  const std::vector<int64_t> t = {kIgnoreIndex, 36, 3, kIgnoreIndex, kIgnoreIndex, 7};
  Tensor logits = randomT(n * V, rng, -4, 4);
  const float loss = crossEntropyForward(logits.b.data(), t.data(), n, V);
  const float want = crossEntropyForward(logits.f.data(), t.data(), n, V);
  const float scale = 1.0f / 3;
  const CrossEntropyBounds e = crossEntropyBounds(toD(logits.f), t, n, V, scale, kLibmUlps);
  // Two f32 evaluations, each within its bound of the exact loss.
  EXPECT_LE(std::fabs(loss - want), 2 * e.loss) << "loss " << loss << " vs " << want;
  // The three rows counted, alone.
  VecF kept;
  std::vector<int64_t> keptT;
  for (int64_t i = 0; i < n; ++i)
    if (t[i] != kIgnoreIndex) {
      kept.insert(kept.end(), logits.f.begin() + i * V, logits.f.begin() + (i + 1) * V);
      keptT.push_back(t[i]);
    }
  const float keptLoss = crossEntropyForward(kept.data(), keptT.data(), 3, V);
  EXPECT_LE(std::fabs(loss - keptLoss), 2 * e.loss) << "loss " << loss << " vs " << keptLoss;
  VecB d(n * V);
  VecF df(n * V);
  crossEntropyBackward(logits.b.data(), t.data(), d.data(), n, V, scale);
  crossEntropyBackward(logits.f.data(), t.data(), df.data(), n, V, scale);
  EXPECT_TRUE(closeBf16("cross_entropy dlogits (ignored rows)", d, df, e.d));
  for (int64_t i : {0, 3, 4})
    for (int64_t c = 0; c < V; ++c)
      ASSERT_EQ(d[i * V + c].bits, 0) << "ignored row " << i << " col " << c;
  // d(mean over the counted rows)/dlogits by finite differences.
  const Fd g = numGrad(
      logits.f, VecF{1.0f},
      [&] { return VecF{crossEntropyForward(logits.f.data(), t.data(), n, V)}; }, VecD{e.loss});
  EXPECT_TRUE(closeFd("cross_entropy dlogits (ignored rows)", d, g, e.d));
}

//===----------------------------------------------------------------------===//
// ViT: class token and positions, first-token selection
//===----------------------------------------------------------------------===//

TEST(KernelsBf16, ClassToken) {
  std::mt19937 rng(145);
  const int64_t B = 3, P = 4, S = P + 1, D = 6;
  Tensor x = randomT(B * P * D, rng), cls = randomT(D, rng), pos = randomT(S * D, rng),
         dy = randomT(B * S * D, rng);
  auto forward = [&] {
    VecF y(B * S * D);
    classTokenForward(x.f.data(), cls.f.data(), pos.f.data(), y.data(), B, S, D);
    return y;
  };
  // One f32 addition rounded once: the f32 kernel's result rounded.
  VecB y(B * S * D);
  classTokenForward(x.b.data(), cls.b.data(), pos.b.data(), y.data(), B, S, D);
  const VecF yf = forward();
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(y[i].bits, floatToBf16(yf[i])) << "element " << i;
  // The batch sums in f32, in the f32 kernel's order, rounded once.
  VecB dx(B * P * D), dcls(D), dpos(S * D);
  classTokenBackward(dy.b.data(), dx.data(), dcls.data(), dpos.data(), B, S, D);
  VecF dxf(B * P * D), dclsf(D), dposf(S * D);
  classTokenBackward(dy.f.data(), dxf.data(), dclsf.data(), dposf.data(), B, S, D);
  EXPECT_EQ(up(dx), dxf);
  for (size_t i = 0; i < dpos.size(); ++i)
    ASSERT_EQ(dpos[i].bits, floatToBf16(dposf[i])) << "dpos " << i;
  for (size_t i = 0; i < dcls.size(); ++i)
    ASSERT_EQ(dcls[i].bits, dpos[i].bits) << "dcls " << i;
  // Forward: one float addition, u |y|; dx a copy (exact); dpos, dcls sum B
  // rows in float: gamma_B sum_b |dy|.
  VecD eY(yf.size()), ePos(S * D, 0.0);
  for (size_t i = 0; i < yf.size(); ++i)
    eY[i] = kU * std::fabs(yf[i]);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = 0; e < S * D; ++e)
      ePos[e] += gammaK(B) * std::fabs(dy.f[b * S * D + e]);
  EXPECT_TRUE(closeFd("class_token dx", dx, numGrad(x.f, dy.f, forward, eY), VecD(dx.size(), 0.0)));
  EXPECT_TRUE(closeFd("class_token dcls", dcls, numGrad(cls.f, dy.f, forward, eY),
                      VecD(ePos.begin(), ePos.begin() + D)));
  EXPECT_TRUE(closeFd("class_token dpos", dpos, numGrad(pos.f, dy.f, forward, eY), ePos));
}

TEST(KernelsBf16, FirstToken) {
  std::mt19937 rng(146);
  const int64_t B = 3, S = 5, D = 7;
  Tensor x = randomT(B * S * D, rng), dy = randomT(B * D, rng);
  auto forward = [&] {
    VecF y(B * D);
    firstTokenForward(x.f.data(), y.data(), B, S, D);
    return y;
  };
  VecB y(B * D);
  firstTokenForward(x.b.data(), y.data(), B, S, D);
  EXPECT_EQ(up(y), forward());
  VecB dx(B * S * D);
  for (bf16 &v : dx)
    v.bits = floatToBf16(123.0f); // overwritten
  firstTokenBackward(dy.b.data(), dx.data(), B, S, D);
  EXPECT_TRUE(closeFd("first_token dx", dx, numGrad(x.f, dy.f, forward, VecD(B * D, 0.0)),
                      VecD(dx.size(), 0.0)));
}

//===----------------------------------------------------------------------===//
// Scratch bounds
//===----------------------------------------------------------------------===//

namespace {
// A scratch of exactly `floats`, then kGuard canaries: run(scratch) must leave
// the canaries and (when `tight`) have written the bound's last float.
constexpr float kCanary = -7.25f;
constexpr int64_t kGuard = 64;
void expectWithin(const char *what, int64_t floats, bool tight,
                  const std::function<void(float *)> &run) {
  VecF scratch(floats + kGuard, kCanary);
  run(scratch.data());
  for (int64_t i = floats; i < floats + kGuard; ++i)
    ASSERT_EQ(scratch[i], kCanary) << what << " wrote past its " << floats << " floats of scratch";
  if (tight)
    EXPECT_NE(scratch[floats - 1], kCanary) << what << ": the bound " << floats << " is not tight";
}
} // namespace

TEST(KernelsBf16, ScratchBounds) {
  std::mt19937 rng(150);
  {
    // Linear, every dimension past one panel, partial panels; n > max(in,
    // out): the weight gradient in two chunks of n.
    const int64_t n = 700, in = 300, out = 270;
    const int64_t floats = linearBf16ScratchFloats(n, in, out);
    EXPECT_EQ(floats, 2 * 256 * 300 + 256 * 256);
    Tensor x = randomT(n * in, rng), w = randomT(in * out, rng), b = randomT(out, rng),
           dy = randomT(n * out, rng);
    for (Layout layout : {Layout::InOut, Layout::OutIn}) {
      SCOPED_TRACE(layout == Layout::InOut ? "in_out" : "out_in");
      VecB y(n * out), dx(n * in), dw(in * out);
      expectWithin("linear forward", floats, true, [&](float *s) {
        linearForward(x.b.data(), w.b.data(), b.b.data(), y.data(), n, in, out, layout, s);
      });
      expectWithin("linear grad input", floats, false, [&](float *s) {
        linearBackwardInput(dy.b.data(), w.b.data(), dx.data(), n, in, out, layout, s);
      });
      expectWithin("linear grad weight", floats, true, [&](float *s) {
        linearBackwardWeight(dy.b.data(), x.b.data(), dw.data(), n, in, out, layout, s);
      });
      VecF yf(n * out), dwf(in * out);
      linearForward(x.f.data(), w.f.data(), b.f.data(), yf.data(), n, in, out, layout);
      linearBackwardWeight(dy.f.data(), x.f.data(), dwf.data(), n, in, out, layout);
      const VecD bD = toD(b.f);
      const LinearBounds e = linearBounds(toD(x.f), toD(w.f), &bD, toD(dy.f), n, in, out, layout);
      EXPECT_TRUE(closeBf16("linear y (panels)", y, yf, e.y));
      EXPECT_TRUE(closeBf16("linear dw (panels)", dw, dwf, e.dw));
    }
  }
  {
    // Embedding, a large vocabulary.
    const int64_t n = 300, V = 5000, D = 40;
    std::vector<int64_t> ids(n);
    for (int64_t i = 0; i < n; ++i)
      ids[i] = (i * 7919) % V;
    ids[5] = ids[9] = V - 1;
    Tensor dy = randomT(n * D, rng);
    VecB dtable(V * D);
    VecF want(V * D);
    expectWithin(
        "embedding backward", embeddingBackwardBf16ScratchFloats(n, V, D), true,
        [&](float *s) { embeddingBackward(dy.b.data(), ids.data(), dtable.data(), n, V, D, s); });
    embeddingBackward(dy.f.data(), ids.data(), want.data(), n, V, D);
    VecD e(V * D, 0.0); // float sums of each id's rows: gamma_n sum |dy|
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < D; ++c)
        e[ids[i] * D + c] += gammaK(n) * std::fabs(dy.f[i * D + c]);
    EXPECT_TRUE(closeBf16("embedding dtable (large V)", dtable, want, e));
  }
  {
    const int64_t n = 4, D = 300;
    Tensor x = randomT(n * D, rng), w = randomT(D, rng), dy = randomT(n * D, rng);
    VecB dx(n * D), dw(D), db(D);
    const int64_t floats = normBackwardBf16ScratchFloats(n, D);
    expectWithin("layer_norm backward", floats, true, [&](float *s) {
      layerNormBackward(dy.b.data(), x.b.data(), w.b.data(), dx.data(), dw.data(), db.data(), n, D,
                        1e-5, s);
    });
    expectWithin("rms_norm backward", floats, false, [&](float *s) {
      rmsNormBackward(dy.b.data(), x.b.data(), w.b.data(), dx.data(), dw.data(), n, D, 1e-6, s);
    });
  }
  {
    // Attention: three query tiles, GQA.
    const int64_t B = 2, S = 150, H = 4, KV = 2, Dh = 32;
    Tensor q = randomT(B * S * H * Dh, rng), k = randomT(B * S * KV * Dh, rng),
           v = randomT(B * S * KV * Dh, rng), dy = randomT(B * S * H * Dh, rng);
    VecB out(q.b.size()), dq(q.b.size()), dk(k.b.size()), dv(k.b.size());
    expectWithin("attention forward", attentionBf16ScratchFloats(S, H, KV, Dh, false), true,
                 [&](float *s) {
                   attentionForward(q.b.data(), k.b.data(), v.b.data(), out.data(), B, S, H, KV, Dh,
                                    true, 0, s);
                 });
    expectWithin("attention backward", attentionBf16ScratchFloats(S, H, KV, Dh, true), true,
                 [&](float *s) {
                   attentionBackward(dy.b.data(), q.b.data(), k.b.data(), v.b.data(), out.data(),
                                     dq.data(), dk.data(), dv.data(), B, S, H, KV, Dh, true, 0, s);
                 });
    expectWithin("bidirectional attention forward", attentionBf16ScratchFloats(S, H, KV, Dh, false),
                 true, [&](float *s) {
                   attentionForward(q.b.data(), k.b.data(), v.b.data(), out.data(), B, S, H, KV, Dh,
                                    false, 0, s);
                 });
    expectWithin("bidirectional attention backward", attentionBf16ScratchFloats(S, H, KV, Dh, true),
                 true, [&](float *s) {
                   attentionBackward(dy.b.data(), q.b.data(), k.b.data(), v.b.data(), out.data(),
                                     dq.data(), dk.data(), dv.data(), B, S, H, KV, Dh, false, 0, s);
                 });
  }
  EXPECT_EQ(biasBackwardBf16ScratchFloats(10, 300), 0); // sums on the stack
}

//===----------------------------------------------------------------------===//
// Mixture of experts: the f32 arithmetic on the bf16 values, rounded once
//===----------------------------------------------------------------------===//

namespace {
// Every element of `got` is the f32 kernel's result rounded to bf16.
void expectRounded(const char *what, const VecB &got, const VecF &f32) {
  ASSERT_EQ(got.size(), f32.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i].bits, floatToBf16(f32[i])) << what << " element " << i;
}
} // namespace

// Routing, the permutation, the combine and the aux loss compute in f32 from
// the bf16 values exactly as the f32 kernels do on their widened copies:
// the bf16 kernels' results are those rounded, bit for bit.
TEST(KernelsBf16, MoeRoutingPermuteCombineAux) {
  std::mt19937 rng(130);
  const int64_t n = 9, E = 6, k = 2, D = 13, L = 2;
  for (bool normalize : {false, true}) {
    Tensor logits = randomT(n * E, rng, -3, 3), dw = randomT(n * k, rng);
    VecB w(n * k), dl(n * E);
    VecF wf(n * k), dlf(n * E), scratch(moeRouteScratchFloats(E));
    std::vector<int64_t> ex(n * k), sl(n * k), exf(n * k), slf(n * k);
    moeRouteForward(logits.b.data(), w.data(), ex.data(), sl.data(), n, E, k, normalize,
                    scratch.data());
    moeRouteForward(logits.f.data(), wf.data(), exf.data(), slf.data(), n, E, k, normalize,
                    scratch.data());
    EXPECT_EQ(ex, exf);
    EXPECT_EQ(sl, slf);
    expectRounded("moe_route weights", w, wf);
    moeRouteBackward(dw.b.data(), logits.b.data(), ex.data(), dl.data(), n, E, k, normalize,
                     scratch.data());
    moeRouteBackward(dw.f.data(), logits.f.data(), ex.data(), dlf.data(), n, E, k, normalize,
                     scratch.data());
    expectRounded("moe_route dlogits", dl, dlf);

    Tensor x = randomT(n * D, rng), dp = randomT(n * k * D, rng), dy = randomT(n * D, rng);
    VecB packed(n * k * D), dx(n * D), y(n * D), drows(n * k * D), dws(n * k);
    VecF packedf(n * k * D), dxf(n * D), yf(n * D), drowsf(n * k * D), dwsf(n * k);
    moePermuteForward(x.b.data(), sl.data(), packed.data(), n, k, D);
    moePermuteForward(x.f.data(), sl.data(), packedf.data(), n, k, D);
    expectRounded("moe_permute rows", packed, packedf);
    moePermuteBackward(dp.b.data(), sl.data(), dx.data(), n, k, D);
    moePermuteBackward(dp.f.data(), sl.data(), dxf.data(), n, k, D);
    expectRounded("moe_permute dx", dx, dxf);
    VecF wUp = up(w);
    moeCombineForward(dp.b.data(), w.data(), sl.data(), y.data(), n, k, D);
    moeCombineForward(dp.f.data(), wUp.data(), sl.data(), yf.data(), n, k, D);
    expectRounded("moe_combine y", y, yf);
    moeCombineBackward(dy.b.data(), dp.b.data(), w.data(), sl.data(), drows.data(), dws.data(), n,
                       k, D);
    moeCombineBackward(dy.f.data(), dp.f.data(), wUp.data(), sl.data(), drowsf.data(), dwsf.data(),
                       n, k, D);
    expectRounded("moe_combine drows", drows, drowsf);
    expectRounded("moe_combine dweights", dws, dwsf);
  }
  // The aux loss over L layers: the loss in f32 (equal), the gradients rounded.
  std::vector<Tensor> logits;
  std::vector<const bf16 *> lb;
  std::vector<const float *> lf;
  for (int64_t l = 0; l < L; ++l)
    logits.push_back(randomT(n * E, rng, -3, 3));
  for (const Tensor &t : logits)
    lb.push_back(t.b.data()), lf.push_back(t.f.data());
  VecF scratch(moeAuxLossScratchFloats(E, k));
  const float ce = 4.25f;
  float out = 0, outf = 1;
  moeAuxLossForward(&ce, lb.data(), &out, L, n, E, k, 0.01, scratch.data());
  moeAuxLossForward(&ce, lf.data(), &outf, L, n, E, k, 0.01, scratch.data());
  EXPECT_EQ(out, outf);
  EXPECT_NE(out, ce); // the aux term is there
  std::vector<VecB> g(L, VecB(n * E));
  std::vector<VecF> gf(L, VecF(n * E));
  std::vector<bf16 *> gb;
  std::vector<float *> gfp;
  for (int64_t l = 0; l < L; ++l)
    gb.push_back(g[l].data()), gfp.push_back(gf[l].data());
  moeAuxLossBackward(lb.data(), gb.data(), L, n, E, k, 0.01, 1.0f / 64, scratch.data());
  moeAuxLossBackward(lf.data(), gfp.data(), L, n, E, k, 0.01, 1.0f / 64, scratch.data());
  for (int64_t l = 0; l < L; ++l)
    expectRounded("moe_aux_loss dlogits", g[l], gf[l]);
}

// moe_linear over bf16 is the bf16 linear kernels over each expert's rows,
// bit for bit (with the row starts ahead of their scratch); an expert with
// no rows gets a zero gradient.
TEST(KernelsBf16, MoeLinearIsTheLinearPerExpert) {
  std::mt19937 rng(131);
  const int64_t n = 8, E = 4, k = 2, in = 9, out = 5;
  std::vector<int64_t> c;
  for (int64_t t = 0; t < n; ++t) // experts 0..2 only: expert 3 gets no rows
    c.insert(c.end(), {int64_t(t % 3), int64_t((t + 1) % 3)});
  std::vector<int64_t> start(E + 1, 0);
  for (int64_t e : c)
    ++start[e + 1];
  for (int64_t e = 0; e < E; ++e)
    start[e + 1] += start[e];
  const int64_t rows = n * k;
  Tensor x = randomT(rows * in, rng), dy = randomT(rows * out, rng);
  std::vector<Tensor> w;
  std::vector<const bf16 *> wp;
  for (int64_t e = 0; e < E; ++e)
    w.push_back(randomT(out * in, rng));
  for (const Tensor &t : w)
    wp.push_back(t.b.data());
  VecF scratch(moeOffsetsFloats(E) + linearBf16ScratchFloats(rows, in, out));
  VecB y(rows * out), dx(rows * in);
  std::vector<VecB> dw(E, VecB(out * in, bf16{0x4000}));
  std::vector<bf16 *> dwp;
  for (VecB &v : dw)
    dwp.push_back(v.data());
  moeLinearForward(x.b.data(), c.data(), wp.data(), y.data(), n, k, E, in, out, scratch.data());
  moeLinearBackwardInput(dy.b.data(), c.data(), wp.data(), dx.data(), n, k, E, in, out,
                         scratch.data());
  moeLinearBackwardWeight(dy.b.data(), x.b.data(), c.data(), dwp.data(), n, k, E, in, out,
                          scratch.data());
  VecF lin(linearBf16ScratchFloats(rows, in, out));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = start[e], m = start[e + 1] - start[e];
    VecB ye(m * out), dxe(m * in), dwe(out * in);
    if (m > 0) {
      linearForward(x.b.data() + r0 * in, wp[e], nullptr, ye.data(), m, in, out, Layout::OutIn,
                    lin.data());
      linearBackwardInput(dy.b.data() + r0 * out, wp[e], dxe.data(), m, in, out, Layout::OutIn,
                          lin.data());
      linearBackwardWeight(dy.b.data() + r0 * out, x.b.data() + r0 * in, dwe.data(), m, in, out,
                           Layout::OutIn, lin.data());
    }
    for (int64_t i = 0; i < m * out; ++i)
      ASSERT_EQ(y[r0 * out + i].bits, ye[i].bits) << "expert " << e << " y " << i;
    for (int64_t i = 0; i < m * in; ++i)
      ASSERT_EQ(dx[r0 * in + i].bits, dxe[i].bits) << "expert " << e << " dx " << i;
    for (int64_t i = 0; i < out * in; ++i)
      ASSERT_EQ(dw[e][i].bits, m > 0 ? dwe[i].bits : uint16_t(0)) << "expert " << e << " dw " << i;
  }
}
