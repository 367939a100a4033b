//===- KernelsTest.cpp - CPU kernels against double references ------------===//
//
// Every forward kernel is checked against a naive double-precision reference
// written here, on the same (float) inputs. Every backward kernel is checked
// against central finite differences of L = sum(dy * reference(inputs)),
// taken in double, for every input that has a gradient. Shapes are small and
// odd on purpose. Set FSDP_KERNELS_VERBOSE=1 to print every check's error.
//
//===----------------------------------------------------------------------===//
#include "runtime/Trainer.h"
#include "runtime/kernels/cpu.h"
#include "tests/unit/KernelBounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

using namespace fsdp::kernels;

namespace {

using VecF = std::vector<float>;
using VecD = std::vector<double>;

// cpu_impl.h's expf1 and tanhf1 are ~1 ulp (0.97 measured), glibc's erff and
// expf at most 1: counted as 2 ulps each.
constexpr double kLibmUlps = 2;

// Every comparison is |got - ref| <= bound, element by element, the bound
// from KernelBounds.h's error analysis of the kernel (and, against finite
// differences, numGrad's error estimate added): no tolerance here was tuned.
using namespace kernel_bounds;

VecF randomF(size_t n, std::mt19937 &rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  VecF v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

VecD toD(const VecF &v) { return VecD(v.begin(), v.end()); }

double dotD(const VecD &a, const VecD &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

VecD plus(VecD a, const VecD &b) {
  for (size_t i = 0; i < a.size(); ++i)
    a[i] += b[i];
  return a;
}

bool verbose() {
  static const bool v = std::getenv("FSDP_KERNELS_VERBOSE") != nullptr;
  return v;
}

// Passes when |got[i] - ref[i]| <= bound[i] for every i (NaN fails); the
// message names the check, the worst error / bound, where, and its values.
::testing::AssertionResult within(const char *what, const float *got, const double *ref,
                                  const double *bound, size_t n) {
  double worst = 0, maxErr = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = std::fabs(double(got[i]) - ref[i]);
    const double ratio = e == 0 ? 0 : e / bound[i];
    maxErr = std::max(maxErr, e);
    if (!(ratio <= worst)) { // also catches NaN
      worst = ratio;
      at = i;
    }
  }
  std::ostringstream msg;
  msg << what << ": worst error / bound " << worst << " at [" << at << "] (got "
      << (n ? got[at] : 0.0f) << ", want " << (n ? ref[at] : 0.0) << ", bound "
      << (n ? bound[at] : 0.0) << "), max abs error " << maxErr;
  if (verbose())
    std::printf("  [err] %s\n", msg.str().c_str());
  if (worst <= 1)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << msg.str();
}

::testing::AssertionResult within(const char *what, const VecF &got, const VecD &ref,
                                  const VecD &bound) {
  if (got.size() != ref.size() || got.size() != bound.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << ref.size()
                                         << " (bound " << bound.size() << ")";
  return within(what, got.data(), ref.data(), bound.data(), got.size());
}

// A gradient by central differences and each element's error bound.
struct Fd {
  VecD g, err;
};

// Central differences D(h) of L = sum(dy * fwd()) (fwd() reads p by
// reference, in double) in every element of p, step h max(1, |p_i|). Error
// bound per element: truncation, D(h) = L' + c h^2 + O(h^4), so D(2h) - D(h)
// = 3 c h^2 bounds it with a factor 3 to spare (Richardson); rounding, each
// double evaluation of L, a sum of N terms each made in at most ~1000 double
// operations, is off by ~sqrt(N + 1000) u64 sum |dy| |y| (Higham's
// statistical estimate), and the difference divides two of them by 2 step.
// relative = false: step h, for functions of differences (cross-entropy).
Fd numGrad(VecD &p, const VecD &dy, const std::function<VecD()> &fwd, double h = 1e-4,
           bool relative = true) {
  const VecD y0 = fwd();
  double labs = 0;
  for (size_t i = 0; i < y0.size(); ++i)
    labs += std::fabs(dy[i] * y0[i]);
  const double noise = 2 * std::sqrt(double(y0.size()) + 1000) * kU64 * labs;
  Fd r{VecD(p.size()), VecD(p.size())};
  auto at = [&](size_t i, double x) {
    p[i] = x;
    return dotD(dy, fwd());
  };
  for (size_t i = 0; i < p.size(); ++i) {
    const double keep = p[i];
    const double step = relative ? h * std::max(1.0, std::fabs(keep)) : h;
    const double d1 = (at(i, keep + step) - at(i, keep - step)) / (2 * step);
    const double d2 = (at(i, keep + 2 * step) - at(i, keep - 2 * step)) / (4 * step);
    p[i] = keep;
    r.g[i] = d1;
    r.err[i] = std::fabs(d2 - d1) + noise / step;
  }
  return r;
}

// got against finite differences: the kernel's own bound plus numGrad's.
::testing::AssertionResult withinFd(const char *what, const VecF &got, const Fd &fd,
                                    const VecD &kernelBound) {
  return within(what, got, fd.g, plus(kernelBound, fd.err));
}

//===----------------------------------------------------------------------===//
// Double references
//===----------------------------------------------------------------------===//

VecD refLinear(const VecD &x, const VecD &w, const VecD *b, int64_t n, int64_t in, int64_t out,
               Layout layout) {
  VecD y(n * out);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t k = 0; k < in; ++k)
        s += x[i * in + k] * (layout == Layout::InOut ? w[k * out + o] : w[o * in + k]);
      y[i * out + o] = s;
    }
  return y;
}

VecD refLayerNorm(const VecD &x, const VecD &w, const VecD &b, int64_t n, int64_t D, double eps) {
  VecD y(n * D);
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < D; ++c)
      mean += x[i * D + c];
    mean /= D;
    for (int64_t c = 0; c < D; ++c)
      var += (x[i * D + c] - mean) * (x[i * D + c] - mean);
    var /= D;
    for (int64_t c = 0; c < D; ++c)
      y[i * D + c] = (x[i * D + c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
  }
  return y;
}

VecD refRmsNorm(const VecD &x, const VecD &w, int64_t n, int64_t D, double eps) {
  VecD y(n * D);
  for (int64_t i = 0; i < n; ++i) {
    double ms = 0;
    for (int64_t c = 0; c < D; ++c)
      ms += x[i * D + c] * x[i * D + c];
    ms /= D;
    for (int64_t c = 0; c < D; ++c)
      y[i * D + c] = x[i * D + c] / std::sqrt(ms + eps) * w[c];
  }
  return y;
}

// HF's rotation in double (refRopeInvFreq, KernelBounds.h), cos and sin
// times the attention factor as the kernel holds it, in float (transformers
// multiplies its float32 tables by it).
VecD refRope(const VecD &x, int64_t B, int64_t S, int64_t H, int64_t Dh, double theta,
             const RopeScaling *sc, bool inverse) {
  VecD y(x.size());
  const int64_t half = Dh / 2;
  const double af = double(float(refRopeAttentionFactor(sc)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = ((b * S + s) * H + h) * Dh;
        for (int64_t i = 0; i < half; ++i) {
          double angle = double(s) * refRopeInvFreq(i, Dh, theta, sc);
          if (inverse)
            angle = -angle;
          const double c = af * std::cos(angle), sn = af * std::sin(angle);
          const double x1 = x[base + i], x2 = x[base + half + i];
          y[base + i] = x1 * c - x2 * sn;
          y[base + half + i] = x2 * c + x1 * sn;
        }
      }
  return y;
}

// window > 0: query i sees keys i-window+1..i (Mistral); 0: keys 0..i.
// Causal: query i sees keys lo..i (lo = i - window + 1 with a window);
// bidirectional: every key 0..S-1.
VecD refAttention(const VecD &q, const VecD &k, const VecD &v, int64_t B, int64_t S, int64_t H,
                  int64_t KV, int64_t Dh, int64_t window = 0, bool causal = true) {
  VecD out(B * S * H * Dh, 0.0);
  VecD p(S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / KV);
      for (int64_t i = 0; i < S; ++i) {
        const double *qi = &q[((b * S + i) * H + h) * Dh];
        double mx = -INFINITY;
        const int64_t lo = causal && window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
        const int64_t hi = causal ? i : S - 1;
        for (int64_t j = lo; j <= hi; ++j) {
          const double *kj = &k[((b * S + j) * KV + kvh) * Dh];
          double s = 0;
          for (int64_t d = 0; d < Dh; ++d)
            s += qi[d] * kj[d];
          p[j] = s / std::sqrt(double(Dh));
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = lo; j <= hi; ++j)
          sum += (p[j] = std::exp(p[j] - mx));
        double *oi = &out[((b * S + i) * H + h) * Dh];
        for (int64_t j = lo; j <= hi; ++j) {
          const double *vj = &v[((b * S + j) * KV + kvh) * Dh];
          for (int64_t d = 0; d < Dh; ++d)
            oi[d] += p[j] / sum * vj[d];
        }
      }
    }
  return out;
}

// tanh: HF gelu_new; else exact (HF gelu), in double.
double refGelu(double x, bool tanh) {
  if (!tanh)
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
}

// The mean over the rows whose target is not kIgnoreIndex (PyTorch's
// ignore_index); 0 when every row is.
double refCrossEntropy(const VecD &logits, const std::vector<int64_t> &t, int64_t n, int64_t V) {
  double total = 0;
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == kIgnoreIndex)
      continue;
    ++counted;
    const double *x = &logits[i * V];
    const double mx = *std::max_element(x, x + V);
    double sum = 0;
    for (int64_t c = 0; c < V; ++c)
      sum += std::exp(x[c] - mx);
    total += mx + std::log(sum) - x[t[i]];
  }
  return counted ? total / counted : 0.0;
}

} // namespace

//===----------------------------------------------------------------------===//
// Embedding, positions
//===----------------------------------------------------------------------===//

TEST(Kernels, Embedding) {
  std::mt19937 rng(1);
  const int64_t n = 6, V = 11, D = 7;
  const std::vector<int64_t> ids = {3, 0, 10, 3, 7, 3}; // repeats accumulate
  VecF table = randomF(V * D, rng), dy = randomF(n * D, rng);
  VecF out(n * D);
  embeddingForward(ids.data(), table.data(), out.data(), n, D);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < D; ++c)
      ASSERT_EQ(out[i * D + c], table[ids[i] * D + c]) << "row " << i << " col " << c;

  VecD td = toD(table), dyd = toD(dy);
  auto fwd = [&] {
    VecD y(n * D);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < D; ++c)
        y[i * D + c] = td[ids[i] * D + c];
    return y;
  };
  VecF dtable(V * D, 123.0f); // overwritten, not accumulated into
  embeddingBackward(dy.data(), ids.data(), dtable.data(), n, V, D);
  // A float sum of each id's rows: gamma_n sum |dy| over them.
  VecD bound(V * D, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < D; ++c)
      bound[ids[i] * D + c] += gammaK(n) * std::fabs(dyd[i * D + c]);
  EXPECT_TRUE(withinFd("embedding dtable", dtable, numGrad(td, dyd, fwd), bound));
}

TEST(Kernels, PositionIds) {
  const int64_t B = 3, S = 5;
  std::vector<int64_t> pos(B * S, -1);
  positionIds(pos.data(), B, S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      EXPECT_EQ(pos[b * S + s], s);
}

TEST(Kernels, TokenTypeIds) {
  const int64_t B = 3, S = 5;
  std::vector<int64_t> types(B * S, -1);
  tokenTypeIds(types.data(), B, S);
  EXPECT_EQ(types, std::vector<int64_t>(B * S, 0));
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

namespace {
void checkLinear(Layout layout, bool withBias, int64_t n, int64_t in, int64_t out, unsigned seed) {
  SCOPED_TRACE(::testing::Message() << (layout == Layout::InOut ? "in_out" : "out_in")
                                    << (withBias ? " bias" : " no bias") << " n=" << n
                                    << " in=" << in << " out=" << out);
  std::mt19937 rng(seed);
  VecF x = randomF(n * in, rng), w = randomF(in * out, rng), b = randomF(out, rng),
       dy = randomF(n * out, rng);
  VecD xd = toD(x), wd = toD(w), bd = toD(b), dyd = toD(dy);
  const VecD *bp = withBias ? &bd : nullptr;

  const LinearBounds e = linearBounds(xd, wd, bp, dyd, n, in, out, layout);
  VecF y(n * out, 99.0f);
  linearForward(x.data(), w.data(), withBias ? b.data() : nullptr, y.data(), n, in, out, layout);
  EXPECT_TRUE(within("linear y", y, refLinear(xd, wd, bp, n, in, out, layout), e.y));

  auto fwd = [&] { return refLinear(xd, wd, bp, n, in, out, layout); };
  VecF dx(n * in, 99.0f), dw(in * out, 99.0f), db(out, 99.0f);
  linearBackwardInput(dy.data(), w.data(), dx.data(), n, in, out, layout);
  linearBackwardWeight(dy.data(), x.data(), dw.data(), n, in, out, layout);
  EXPECT_TRUE(withinFd("linear dx", dx, numGrad(xd, dyd, fwd), e.dx));
  EXPECT_TRUE(withinFd("linear dw", dw, numGrad(wd, dyd, fwd), e.dw));
  if (withBias) {
    biasBackward(dy.data(), db.data(), n, out);
    EXPECT_TRUE(withinFd("linear db", db, numGrad(bd, dyd, fwd), e.db));
  }
}
} // namespace

TEST(Kernels, LinearInOut) {
  checkLinear(Layout::InOut, true, 5, 7, 11, 2);
  checkLinear(Layout::InOut, false, 5, 7, 11, 3);
  checkLinear(Layout::InOut, true, 1, 3, 1, 4);
}

TEST(Kernels, LinearOutIn) {
  checkLinear(Layout::OutIn, true, 5, 7, 11, 5);
  checkLinear(Layout::OutIn, false, 5, 7, 11, 6);
  checkLinear(Layout::OutIn, false, 9, 17, 4, 7);
}

TEST(Kernels, LinearLarger) {
  // Big enough for OpenBLAS's blocked paths; forward only, both layouts.
  for (Layout layout : {Layout::InOut, Layout::OutIn}) {
    std::mt19937 rng(8);
    const int64_t n = 67, in = 129, out = 95;
    VecF x = randomF(n * in, rng), w = randomF(in * out, rng), b = randomF(out, rng);
    VecD bd = toD(b);
    VecF y(n * out);
    linearForward(x.data(), w.data(), b.data(), y.data(), n, in, out, layout);
    EXPECT_TRUE(within("linear large y", y, refLinear(toD(x), toD(w), &bd, n, in, out, layout),
                       linearBounds(toD(x), toD(w), &bd, {}, n, in, out, layout).y));
  }
}

TEST(Kernels, BiasBackwardWide) {
  // More columns than one stack block.
  std::mt19937 rng(9);
  const int64_t n = 3, out = 600;
  VecF dy = randomF(n * out, rng);
  VecD want(out, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < out; ++c)
      want[c] += dy[i * out + c];
  VecF db(out);
  biasBackward(dy.data(), db.data(), n, out);
  EXPECT_TRUE(within("bias db wide", db, want,
                     linearBounds({}, {}, nullptr, toD(dy), n, 0, out, Layout::InOut).db));
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

namespace {
void checkLayerNorm(int64_t n, int64_t D, unsigned seed) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " D=" << D);
  std::mt19937 rng(seed);
  const double eps = 1e-5;
  VecF x = randomF(n * D, rng, 2.0f, 5.0f), w = randomF(D, rng, 0.5f, 1.5f), b = randomF(D, rng),
       dy = randomF(n * D, rng);
  VecD xd = toD(x), wd = toD(w), bd = toD(b), dyd = toD(dy);
  const NormBounds e = layerNormBounds(xd, wd, bd, dyd, n, D, eps);
  VecF y(n * D);
  layerNormForward(x.data(), w.data(), b.data(), y.data(), n, D, eps);
  EXPECT_TRUE(within("layer_norm y", y, refLayerNorm(xd, wd, bd, n, D, eps), e.y));

  auto fwd = [&] { return refLayerNorm(xd, wd, bd, n, D, eps); };
  VecF dx(n * D), dw(D, 99.0f), db(D, 99.0f);
  layerNormBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), n, D, eps);
  EXPECT_TRUE(withinFd("layer_norm dx", dx, numGrad(xd, dyd, fwd), e.dx));
  EXPECT_TRUE(withinFd("layer_norm dw", dw, numGrad(wd, dyd, fwd), e.dw));
  EXPECT_TRUE(withinFd("layer_norm db", db, numGrad(bd, dyd, fwd), e.db));
}
} // namespace

TEST(Kernels, LayerNorm) {
  checkLayerNorm(5, 7, 10);  // shorter than a vector: tails only
  checkLayerNorm(3, 37, 19); // vectors and a tail
}

TEST(Kernels, LayerNormConstantRow) {
  // A constant row has zero variance: the output is the bias, eps keeps it finite.
  const int64_t D = 5;
  VecF x(D, 3.0f), w = {1, 2, 3, 4, 5}, b = {0.5f, -1, 0, 2, 1}, y(D);
  layerNormForward(x.data(), w.data(), b.data(), y.data(), 1, D, 1e-5);
  // x - mean is exactly 0 in float: 0 * w + b is b, exactly.
  EXPECT_TRUE(within("layer_norm constant row", y, toD(b), VecD(D, 0.0)));
}

namespace {
void checkRmsNorm(int64_t n, int64_t D, unsigned seed) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " D=" << D);
  std::mt19937 rng(seed);
  const double eps = 1e-6;
  VecF x = randomF(n * D, rng, -2.0f, 2.0f), w = randomF(D, rng, 0.5f, 1.5f),
       dy = randomF(n * D, rng);
  VecD xd = toD(x), wd = toD(w), dyd = toD(dy);
  const NormBounds e = rmsNormBounds(xd, wd, dyd, n, D, eps);
  VecF y(n * D);
  rmsNormForward(x.data(), w.data(), y.data(), n, D, eps);
  EXPECT_TRUE(within("rms_norm y", y, refRmsNorm(xd, wd, n, D, eps), e.y));

  auto fwd = [&] { return refRmsNorm(xd, wd, n, D, eps); };
  VecF dx(n * D), dw(D, 99.0f);
  rmsNormBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), n, D, eps);
  EXPECT_TRUE(withinFd("rms_norm dx", dx, numGrad(xd, dyd, fwd), e.dx));
  EXPECT_TRUE(withinFd("rms_norm dw", dw, numGrad(wd, dyd, fwd), e.dw));
}
} // namespace

TEST(Kernels, RMSNorm) {
  checkRmsNorm(5, 7, 11);
  checkRmsNorm(3, 37, 25);
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

namespace {
const char *scalingName(const RopeScaling *sc) {
  return sc ? fsdp::support::ropeScalingName(sc->kind) : "none";
}

void checkRope(int64_t B, int64_t S, int64_t H, int64_t Dh, double theta, const RopeScaling *sc,
               unsigned seed) {
  SCOPED_TRACE(::testing::Message() << "B=" << B << " S=" << S << " H=" << H << " Dh=" << Dh
                                    << " scaling " << scalingName(sc));
  std::mt19937 rng(seed);
  const int64_t N = B * S * H * Dh;
  VecF x = randomF(N, rng), dy = randomF(N, rng);
  VecD xd = toD(x), dyd = toD(dy);
  VecF y(N), back(N), dx(N);
  rope(x.data(), y.data(), B, S, H, Dh, theta, sc, false);
  const VecD yRef = refRope(xd, B, S, H, Dh, theta, sc, false);
  const VecD eY = ropeBound(xd, nullptr, B, S, H, Dh, theta, sc);
  EXPECT_TRUE(within("rope y", y, yRef, eY));

  // inverse(rope(x)) == af^2 x (the transpose of af R after af R): the
  // inverse rotation of y's error plus its own.
  const double af = double(float(refRopeAttentionFactor(sc)));
  VecD xScaled = xd;
  for (double &v : xScaled)
    v *= af * af;
  rope(y.data(), back.data(), B, S, H, Dh, theta, sc, true);
  EXPECT_TRUE(
      within("rope inverse(rope(x))", back, xScaled, ropeBound(yRef, &eY, B, S, H, Dh, theta, sc)));

  // The gradient is the inverse rotation of dy.
  auto fwd = [&] { return refRope(xd, B, S, H, Dh, theta, sc, false); };
  rope(dy.data(), dx.data(), B, S, H, Dh, theta, sc, true);
  EXPECT_TRUE(withinFd("rope dx", dx, numGrad(xd, dyd, fwd),
                       ropeBound(dyd, nullptr, B, S, H, Dh, theta, sc)));
}

// The largest difference between rope with `a` and with `b` on one input.
double ropeDifference(const RopeScaling *a, const RopeScaling *b, int64_t S, int64_t Dh,
                      double theta) {
  std::mt19937 rng(15);
  VecF x = randomF(S * Dh, rng), ya(x.size()), yb(x.size());
  rope(x.data(), ya.data(), 1, S, 1, Dh, theta, a, false);
  rope(x.data(), yb.data(), 1, S, 1, Dh, theta, b, false);
  double diff = 0;
  for (size_t i = 0; i < ya.size(); ++i)
    diff = std::max(diff, double(std::fabs(ya[i] - yb[i])));
  return diff;
}

RopeScaling scaling(RopeScalingKind kind, double factor, int64_t originalMax) {
  RopeScaling s;
  s.kind = kind;
  s.factor = factor;
  s.originalMaxPosition = originalMax;
  return s;
}
} // namespace

TEST(Kernels, Rope) {
  checkRope(2, 5, 3, 8, 10000.0, nullptr, 12);
  checkRope(1, 9, 2, 64, 500000.0, nullptr, 13);
  checkRope(1, 3, 1, 260, 10000.0, nullptr, 26); // Dh / 2 = 130: past one 128-wide chunk
}

TEST(Kernels, RopeLlama3Scaling) {
  // Small original context so that, with Dh = 16 and theta = 1e4, the
  // frequencies fall in all three bands: wavelen 6.3 < 10.7 (kept), 19.9
  // (smoothed), >= 62.8 > 32 (divided by the factor).
  RopeScaling sc = scaling(RopeScalingKind::Llama3, 8.0, 16);
  sc.lowFreqFactor = 0.5, sc.highFreqFactor = 1.5;
  int bands[3] = {0, 0, 0};
  for (int64_t i = 0; i < 8; ++i) {
    const double inv = refRopeInvFreq(i, 16, 1e4, nullptr),
                 scaled = refRopeInvFreq(i, 16, 1e4, &sc);
    bands[scaled == inv ? 0 : std::fabs(scaled - inv / 8) < 1e-15 ? 2 : 1]++;
  }
  EXPECT_EQ(bands[0], 1);
  EXPECT_EQ(bands[1], 1);
  EXPECT_EQ(bands[2], 6);
  checkRope(2, 8, 2, 16, 1e4, &sc, 14);

  // The scaling must change the result (else the check above proves little).
  EXPECT_GT(ropeDifference(&sc, nullptr, 8, 16, 1e4), 0.1);

  // Llama 3.1's own parameters.
  RopeScaling llama31 = scaling(RopeScalingKind::Llama3, 8.0, 8192);
  llama31.lowFreqFactor = 1.0, llama31.highFreqFactor = 4.0;
  checkRope(1, 4, 2, 128, 500000.0, &llama31, 16);
}

TEST(Kernels, RopeLinearScaling) {
  const RopeScaling sc = scaling(RopeScalingKind::Linear, 2.5, 0);
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(refRopeInvFreq(i, 16, 1e4, &sc), refRopeInvFreq(i, 16, 1e4, nullptr) / 2.5);
  checkRope(2, 8, 2, 16, 1e4, &sc, 30);
  checkRope(1, 9, 2, 128, 1e6, &sc, 31);
  EXPECT_GT(ropeDifference(&sc, nullptr, 8, 16, 1e4), 0.1);
}

TEST(Kernels, RopeDynamicScaling) {
  // At sequences up to max_position_embeddings transformers keeps the
  // frequencies of seq_len = max_position_embeddings: base * (factor -
  // (factor - 1))^(dim / (dim - 2)), the base itself: the default, bit for
  // bit.
  const RopeScaling sc = scaling(RopeScalingKind::Dynamic, 3.0, 128);
  checkRope(2, 8, 2, 16, 1e4, &sc, 32);
  for (int64_t Dh : {4, 16, 128})
    for (int64_t i = 0; i < Dh / 2; ++i)
      EXPECT_EQ(ropeInvFreq(i, Dh, 1e4, &sc), ropeInvFreq(i, Dh, 1e4, nullptr)) << Dh << " " << i;
  EXPECT_EQ(ropeDifference(&sc, nullptr, 8, 16, 1e4), 0.0);
}

TEST(Kernels, RopeYarnScaling) {
  // Dh = 16, theta = 1e4, original 32 positions, the default betas 32 and 1:
  // find_correction_range gives dims [floor(-1.6), ceil(1.41)] = [0, 2], so
  // i = 0 keeps inv, i = 1 is half way, i >= 2 take inv / factor.
  RopeScaling sc = scaling(RopeScalingKind::Yarn, 4.0, 32);
  sc.attentionFactor = 0.1 * std::log(4.0) + 1;
  EXPECT_EQ(refRopeInvFreq(0, 16, 1e4, &sc), 1.0);
  EXPECT_NEAR(refRopeInvFreq(1, 16, 1e4, &sc), 0.625 * refRopeInvFreq(1, 16, 1e4, nullptr), 1e-16);
  for (int64_t i = 2; i < 8; ++i)
    EXPECT_NEAR(refRopeInvFreq(i, 16, 1e4, &sc), refRopeInvFreq(i, 16, 1e4, nullptr) / 4, 1e-16);
  checkRope(2, 8, 2, 16, 1e4, &sc, 33);
  EXPECT_GT(ropeDifference(&sc, nullptr, 8, 16, 1e4), 0.1);
  // The attention factor alone: at position 0 nothing rotates, y = af x.
  RopeScaling noFactor = sc;
  noFactor.attentionFactor = 1.0;
  std::mt19937 rng(34);
  VecF x = randomF(16, rng), y(16);
  rope(x.data(), y.data(), 1, 1, 1, 16, 1e4, &sc, false);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(y[i], x[i] * float(sc.attentionFactor)) << i;
  EXPECT_EQ(ropeAttentionFactor(&sc), float(sc.attentionFactor));
  EXPECT_EQ(ropeAttentionFactor(&noFactor), 1.0f);

  // Not truncated, a ramp between fractional dims; and Qwen2.5's YaRN on
  // its head_dim 128 and theta 1e6.
  RopeScaling untruncated = scaling(RopeScalingKind::Yarn, 8.0, 64);
  untruncated.betaFast = 8, untruncated.betaSlow = 0.5, untruncated.truncate = false;
  untruncated.attentionFactor = 1.09;
  checkRope(2, 8, 2, 16, 1e4, &untruncated, 35);
  RopeScaling qwen = scaling(RopeScalingKind::Yarn, 4.0, 32768);
  qwen.attentionFactor = 0.1 * std::log(4.0) + 1;
  checkRope(1, 9, 2, 128, 1e6, &qwen, 36);
}

// Each kind's inverse frequencies and attention factor against those
// transformers computes (its modeling_rope_utils, transcribed in
// tests/e2e/models.py and run in torch by tests/unit/rope_scaling_ref.py):
// the same float operations in the same order, so bit for bit wherever
// torch's pow (SLEEF, 1 ulp) and glibc's powf agree on theta^(2i/Dh). Where
// they do not (the script lists those i), each pow is within 1 ulp of the
// truth, so the two within 2 ulps (4u relative), and each of at most four
// later float operations rounds on both sides (2u each): 12u relative.
struct RopeScalingRef {
  int64_t Dh;
  double theta;
  RopeScaling scaling;
  std::vector<float> invFreq;
  std::vector<int64_t> powDiffers;
};
#include "tests/unit/RopeScalingRef.inc"

TEST(Kernels, RopeScalingAgainstTransformers) {
  for (const RopeScalingRef *r :
       {&qwen25_yarn, &yarn_untruncated, &yarn_factor3, &yarn_tiny, &linear, &dynamic}) {
    SCOPED_TRACE(::testing::Message() << scalingName(&r->scaling) << " Dh=" << r->Dh);
    ASSERT_EQ(int64_t(r->invFreq.size()), r->Dh / 2);
    EXPECT_EQ(ropeAttentionFactor(&r->scaling), float(r->scaling.attentionFactor));
    for (int64_t i = 0; i < r->Dh / 2; ++i) {
      const float got = ropeInvFreq(i, r->Dh, r->theta, &r->scaling), want = r->invFreq[i];
      if (std::count(r->powDiffers.begin(), r->powDiffers.end(), i))
        EXPECT_LE(std::fabs(double(got) - double(want)), 12 * kU * std::fabs(double(want)))
            << "i=" << i;
      else
        EXPECT_EQ(got, want) << "i=" << i << ": " << got << " against transformers' " << want;
    }
  }
}

//===----------------------------------------------------------------------===//
// Split, concat, add
//===----------------------------------------------------------------------===//

TEST(Kernels, SplitConcat) {
  std::mt19937 rng(17);
  const int64_t parts = 3, n = 5, W = 7;
  VecF x = randomF(n * parts * W, rng);
  std::vector<VecF> outs(parts, VecF(n * W));
  float *outPtrs[parts] = {outs[0].data(), outs[1].data(), outs[2].data()};
  split(x.data(), outPtrs, parts, n, W);
  for (int64_t p = 0; p < parts; ++p)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < W; ++c)
        ASSERT_EQ(outs[p][i * W + c], x[i * parts * W + p * W + c]);
  const float *inPtrs[parts] = {outs[0].data(), outs[1].data(), outs[2].data()};
  VecF y(x.size());
  concat(inPtrs, y.data(), parts, n, W);
  EXPECT_EQ(y, x);
}

TEST(Kernels, Add) {
  std::mt19937 rng(18);
  VecF a = randomF(13, rng), b = randomF(13, rng), y(13);
  add(a.data(), b.data(), y.data(), 13);
  for (int i = 0; i < 13; ++i)
    EXPECT_EQ(y[i], a[i] + b[i]);
}

//===----------------------------------------------------------------------===//
// Attention, causal and bidirectional
//===----------------------------------------------------------------------===//

namespace {
void checkAttention(int64_t B, int64_t S, int64_t H, int64_t KV, int64_t Dh, unsigned seed,
                    float qkRange = 2.0f, int64_t window = 0, bool causal = true) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << B << " S=" << S << " H=" << H << " KV=" << KV << " Dh=" << Dh
               << " q, k in +-" << qkRange << " window=" << window << " causal=" << causal);
  std::mt19937 rng(seed);
  const int64_t nq = B * S * H * Dh, nk = B * S * KV * Dh;
  VecF q = randomF(nq, rng, -qkRange, qkRange), k = randomF(nk, rng, -qkRange, qkRange),
       v = randomF(nk, rng), dy = randomF(nq, rng);
  VecD qd = toD(q), kd = toD(k), vd = toD(v), dyd = toD(dy);

  // Scratch exactly as documented, followed by canaries that must survive.
  const int64_t T = std::min<int64_t>(S, 64);
  const int64_t fwdScratch = attentionScratchFloats(S, false),
                bwdScratch = attentionScratchFloats(S, true);
  ASSERT_EQ(fwdScratch, T * S);
  ASSERT_EQ(bwdScratch, 2 * T * S);
  const float canary = -7.25f;
  VecF scratch(bwdScratch + 16, canary);
  VecF out(nq);
  attentionForward(q.data(), k.data(), v.data(), out.data(), B, S, H, KV, Dh, causal, window,
                   scratch.data());
  for (int64_t i = fwdScratch; i < int64_t(scratch.size()); ++i)
    ASSERT_EQ(scratch[i], canary) << "forward wrote past its T*S floats of scratch";
  // The backward reads the kernel's out: its error bound carries into D.
  const AttentionBounds e =
      attentionBounds(qd, kd, vd, dyd, nullptr, nullptr, B, S, H, KV, Dh, window, causal);
  const AttentionBounds eb =
      attentionBounds(qd, kd, vd, dyd, &e.out, &e.eOut, B, S, H, KV, Dh, window, causal);
  EXPECT_TRUE(within("attention out", out, e.out, e.eOut));

  std::fill(scratch.begin(), scratch.end(), canary);
  VecF dq(nq, 99.0f), dk(nk, 99.0f), dv(nk, 99.0f);
  attentionBackward(dy.data(), q.data(), k.data(), v.data(), out.data(), dq.data(), dk.data(),
                    dv.data(), B, S, H, KV, Dh, causal, window, scratch.data());
  for (int64_t i = bwdScratch; i < int64_t(scratch.size()); ++i)
    ASSERT_EQ(scratch[i], canary) << "backward wrote past its 2*T*S floats of scratch";
  auto fwd = [&] { return refAttention(qd, kd, vd, B, S, H, KV, Dh, window, causal); };
  EXPECT_TRUE(withinFd("attention dq", dq, numGrad(qd, dyd, fwd), eb.eDq));
  EXPECT_TRUE(withinFd("attention dk", dk, numGrad(kd, dyd, fwd), eb.eDk));
  EXPECT_TRUE(withinFd("attention dv", dv, numGrad(vd, dyd, fwd), eb.eDv));
}
} // namespace

TEST(Kernels, AttentionGQA) { checkAttention(2, 5, 4, 2, 8, 20); }
TEST(Kernels, AttentionMHA) { checkAttention(2, 5, 3, 3, 5, 21); }  // odd Dh: vector tails
TEST(Kernels, AttentionMQA) { checkAttention(1, 6, 4, 1, 24, 22); } // Dh = 16 + 8
TEST(Kernels, AttentionLargeScores) {
  // Scores up to ~100: exp overflows without the row max. Float scores carry
  // their gamma_{Dh+2} share of sum |q||k| (~1e-5 here), in the bound.
  checkAttention(1, 5, 2, 1, 8, 27, 6.0f);
}
TEST(Kernels, AttentionSingleToken) {
  checkAttention(2, 1, 4, 2, 8, 23); // S = 1: out is v, no gradient reaches q or k
}
TEST(Kernels, AttentionSeveralTiles) {
  // S = 130: query tiles [0, 64), [64, 128) and a partial [128, 130); two
  // query heads accumulate into the one kv head's dk, dv across the tiles.
  checkAttention(1, 130, 2, 1, 8, 29);
}

// Mistral's sliding window: a query sees itself and the W-1 keys before it.
TEST(Kernels, AttentionWindow) { checkAttention(2, 9, 4, 2, 8, 40, 2.0f, 3); }
TEST(Kernels, AttentionWindowOfOne) { checkAttention(1, 6, 2, 1, 8, 41, 2.0f, 1); }
TEST(Kernels, AttentionWindowPastSequence) { // W >= S: full causal
  checkAttention(1, 7, 2, 2, 6, 42, 2.0f, 7);
}
TEST(Kernels, AttentionWindowSeveralTiles) {
  // S = 130, W = 50: later query tiles start past key 0, mid-tile; rows of
  // a tile see different first keys.
  checkAttention(1, 130, 2, 1, 8, 43, 2.0f, 50);
}

// Bidirectional (BERT, ViT): every query sees every key, the same kernels.
TEST(Kernels, BidirectionalAttentionGQA) { checkAttention(2, 5, 4, 2, 8, 50, 2.0f, 0, false); }
TEST(Kernels, BidirectionalAttentionMHA) { // odd Dh: vector tails
  checkAttention(2, 5, 3, 3, 5, 51, 2.0f, 0, false);
}
TEST(Kernels, BidirectionalAttentionMQA) { checkAttention(1, 6, 4, 1, 24, 52, 2.0f, 0, false); }
TEST(Kernels, BidirectionalAttentionLargeScores) {
  checkAttention(1, 5, 2, 1, 8, 53, 6.0f, 0, false);
}
TEST(Kernels, BidirectionalAttentionSingleToken) {
  checkAttention(2, 1, 4, 2, 8, 54, 2.0f, 0, false);
}
TEST(Kernels, BidirectionalAttentionSeveralTiles) {
  // S = 130: every query tile, the partial one too, reads all 130 keys; a
  // key's dk, dv sum over every tile and both query heads.
  checkAttention(1, 130, 2, 1, 8, 55, 2.0f, 0, false);
}
TEST(Kernels, BidirectionalAttentionDiffersFromCausal) {
  // The two forms agree on the last query (it sees every key either way)
  // and nowhere else: a kernel that ignored `causal` would fail here.
  std::mt19937 rng(56);
  const int64_t B = 1, S = 6, H = 2, KV = 1, Dh = 4;
  VecF q = randomF(B * S * H * Dh, rng), k = randomF(B * S * KV * Dh, rng),
       v = randomF(B * S * KV * Dh, rng), causal(q.size()), bidir(q.size()),
       scratch(attentionScratchFloats(S, false));
  attentionForward(q.data(), k.data(), v.data(), causal.data(), B, S, H, KV, Dh, true, 0,
                   scratch.data());
  attentionForward(q.data(), k.data(), v.data(), bidir.data(), B, S, H, KV, Dh, false, 0,
                   scratch.data());
  const int64_t row = H * Dh;
  for (int64_t i = 0; i < S; ++i) {
    double diff = 0;
    for (int64_t c = 0; c < row; ++c)
      diff = std::max(diff, (double)std::fabs(causal[i * row + c] - bidir[i * row + c]));
    if (i + 1 < S)
      EXPECT_GT(diff, 1e-3) << "query " << i;
    else
      EXPECT_LT(diff, 1e-6) << "query " << i;
  }
}

TEST(Kernels, AttentionLongerForward) {
  // Longer sequence, realistic head dim, forward only against the reference.
  std::mt19937 rng(24);
  const int64_t B = 1, S = 40, H = 2, KV = 1, Dh = 64;
  VecF q = randomF(B * S * H * Dh, rng, -1, 1), k = randomF(B * S * KV * Dh, rng, -1, 1),
       v = randomF(B * S * KV * Dh, rng), out(q.size()), scratch(attentionScratchFloats(S, false));
  attentionForward(q.data(), k.data(), v.data(), out.data(), B, S, H, KV, Dh, true, 0,
                   scratch.data());
  const AttentionBounds e =
      attentionBounds(toD(q), toD(k), toD(v), {}, nullptr, nullptr, B, S, H, KV, Dh, 0, true);
  EXPECT_TRUE(within("attention out S=40", out, e.out, e.eOut));
}

TEST(Kernels, AttentionSeveralTilesForward) {
  // Three query tiles (the last partial), batch and GQA, realistic head dim.
  std::mt19937 rng(25);
  const int64_t B = 2, S = 130, H = 4, KV = 2, Dh = 64;
  VecF q = randomF(B * S * H * Dh, rng, -1, 1), k = randomF(B * S * KV * Dh, rng, -1, 1),
       v = randomF(B * S * KV * Dh, rng), out(q.size()), scratch(attentionScratchFloats(S, false));
  for (bool causal : {true, false}) {
    attentionForward(q.data(), k.data(), v.data(), out.data(), B, S, H, KV, Dh, causal, 0,
                     scratch.data());
    const AttentionBounds e =
        attentionBounds(toD(q), toD(k), toD(v), {}, nullptr, nullptr, B, S, H, KV, Dh, 0, causal);
    EXPECT_TRUE(within(causal ? "attention out S=130" : "bidirectional attention out S=130", out,
                       e.out, e.eOut));
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(Kernels, Gelu) {
  // Both forms: tanh (HF gelu_new) and exact erf (HF gelu), each against its
  // double-precision formula and its derivative by finite differences.
  for (bool tanh : {true, false}) {
    SCOPED_TRACE(tanh ? "approximate=tanh" : "approximate=none");
    std::mt19937 rng(30);
    VecF x = randomF(64, rng, -6, 6);
    x.insert(x.end(), {0.0f, -0.0f, 1e-4f, -1e-4f, 10.0f, -10.0f, 30.0f, -30.0f, 0.5f, -3.0f});
    const int64_t n = x.size();
    VecF dy = randomF(n, rng), y(n), dx(n);
    VecD xd = toD(x), dyd = toD(dy);
    auto ref = [&] {
      VecD r(n);
      for (int64_t i = 0; i < n; ++i)
        r[i] = refGelu(xd[i], tanh);
      return r;
    };
    const ElemBounds e = geluBounds(xd, dyd, tanh, kLibmUlps);
    geluForward(x.data(), y.data(), n, tanh);
    EXPECT_TRUE(within("gelu y", y, ref(), e.y));
    geluBackward(dy.data(), x.data(), dx.data(), n, tanh);
    EXPECT_TRUE(withinFd("gelu dx", dx, numGrad(xd, dyd, ref), e.d1));
  }
}

TEST(Kernels, GeluFormsDiffer) {
  // The forms differ by 1.5e-4 to 4.7e-4 at these points (most near |x| =
  // 2.7): a kernel that ignored its form would fail here.
  VecF x = {-2.7f, -1.5f, -1.0f, 1.0f, 2.5f, 3.0f}, a(6), b(6);
  geluForward(x.data(), a.data(), 6, true);
  geluForward(x.data(), b.data(), 6, false);
  VecD exact(6);
  for (int i = 0; i < 6; ++i) {
    exact[i] = refGelu(x[i], false);
    EXPECT_GT(std::fabs(a[i] - b[i]), 1e-4) << "x = " << x[i];
  }
  EXPECT_TRUE(within("exact gelu", b, exact, geluBounds(toD(x), VecD(6), false, kLibmUlps).y));
}

TEST(Kernels, SiluMul) {
  std::mt19937 rng(31);
  VecF gate = randomF(40, rng, -8, 8);
  gate.insert(gate.end(), {0.0f, 20.0f, -20.0f, -100.0f, 100.0f});
  const int64_t n = gate.size();
  VecF up = randomF(n, rng, -2, 2), dy = randomF(n, rng), y(n), dg(n), du(n);
  VecD gd = toD(gate), ud = toD(up), dyd = toD(dy);
  auto ref = [&] {
    VecD r(n);
    for (int64_t i = 0; i < n; ++i)
      r[i] = gd[i] / (1 + std::exp(-gd[i])) * ud[i];
    return r;
  };
  const ElemBounds e = siluMulBounds(gd, ud, dyd, kLibmUlps);
  siluMulForward(gate.data(), up.data(), y.data(), n);
  EXPECT_TRUE(within("silu_mul y", y, ref(), e.y));
  siluMulBackward(dy.data(), gate.data(), up.data(), dg.data(), du.data(), n);
  EXPECT_TRUE(withinFd("silu_mul dgate", dg, numGrad(gd, dyd, ref), e.d1));
  EXPECT_TRUE(withinFd("silu_mul dup", du, numGrad(ud, dyd, ref), e.d2));
}

TEST(Kernels, GeluSiluSweep) {
  // Dense sweep through the exp / tanh approximations' ranges.
  VecF x;
  for (int i = -2400; i <= 2400; ++i)
    x.push_back(float(i) * 0.005f);
  for (float big : {15.0f, 40.0f, 88.0f, 89.0f, 200.0f})
    x.insert(x.end(), {big, -big});
  const int64_t n = x.size();
  VecF ones(n, 1.0f), y(n), dx(n), dg(n), du(n);
  VecD gelu(n), dgelu(n), erfGelu(n), dErfGelu(n), silu(n), dsilu(n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i], c = std::sqrt(2 / kPi), u = c * (v + 0.044715 * v * v * v);
    const double t = std::tanh(u), s = 1 / (1 + std::exp(-v));
    gelu[i] = 0.5 * v * (1 + t);
    dgelu[i] = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v);
    const double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    erfGelu[i] = v * cdf;
    dErfGelu[i] = cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2 * kPi);
    silu[i] = v * s;
    dsilu[i] = s * (1 + v * (1 - s));
  }
  const VecD xd = toD(x), onesD(n, 1.0);
  const ElemBounds eT = geluBounds(xd, onesD, true, kLibmUlps),
                   eE = geluBounds(xd, onesD, false, kLibmUlps),
                   eS = siluMulBounds(xd, onesD, onesD, kLibmUlps);
  geluForward(x.data(), y.data(), n, true);
  EXPECT_TRUE(within("gelu sweep y", y, gelu, eT.y));
  geluBackward(ones.data(), x.data(), dx.data(), n, true);
  EXPECT_TRUE(within("gelu sweep dx", dx, dgelu, eT.d1));
  geluForward(x.data(), y.data(), n, false);
  EXPECT_TRUE(within("exact gelu sweep y", y, erfGelu, eE.y));
  geluBackward(ones.data(), x.data(), dx.data(), n, false);
  EXPECT_TRUE(within("exact gelu sweep dx", dx, dErfGelu, eE.d1));
  siluMulForward(x.data(), ones.data(), y.data(), n);
  EXPECT_TRUE(within("silu sweep y", y, silu, eS.y));
  siluMulBackward(ones.data(), x.data(), ones.data(), dg.data(), du.data(), n);
  EXPECT_TRUE(within("silu sweep dgate", dg, dsilu, eS.d1));
  EXPECT_TRUE(within("silu sweep dup", du, silu, eS.d2));

  // NaN propagates (a diverged run must show it), infinities saturate.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  VecF special = {nan, inf, -inf}, out(3), one(3, 1.0f);
  for (bool tanh : {true, false}) {
    geluForward(special.data(), out.data(), 3, tanh);
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_EQ(out[1], inf);
  }
  siluMulForward(special.data(), one.data(), out.data(), 3);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], inf);
  VecF logits = {0.5f, nan, 1.0f};
  const std::vector<int64_t> target = {0};
  EXPECT_TRUE(std::isnan(crossEntropyForward(logits.data(), target.data(), 1, 3)));
}

TEST(Kernels, InPlace) {
  // Elementwise and row-wise kernels may write over an input of the same shape.
  std::mt19937 rng(28);
  const int64_t n = 3, D = 37, N = n * D, V = 37;
  const VecF x = randomF(N, rng, -3, 3), u = randomF(N, rng), w = randomF(D, rng),
             b = randomF(D, rng);
  const std::vector<int64_t> t = {1, 36, 0};
  auto same = [&](const char *what, auto outOfPlace, auto inPlace, VecF buf) {
    VecF want(buf.size());
    outOfPlace(want.data());
    inPlace(buf.data());
    // The same float operations in the same order: the same bits.
    EXPECT_TRUE(within(what, buf, toD(want), VecD(buf.size(), 0.0)));
  };
  same(
      "gelu in place", [&](float *o) { geluForward(x.data(), o, N, true); },
      [&](float *io) { geluForward(io, io, N, true); }, x);
  same(
      "gelu backward in place", [&](float *o) { geluBackward(u.data(), x.data(), o, N, true); },
      [&](float *io) { geluBackward(io, x.data(), io, N, true); }, u);
  same(
      "exact gelu in place", [&](float *o) { geluForward(x.data(), o, N, false); },
      [&](float *io) { geluForward(io, io, N, false); }, x);
  same(
      "exact gelu backward in place",
      [&](float *o) { geluBackward(u.data(), x.data(), o, N, false); },
      [&](float *io) { geluBackward(io, x.data(), io, N, false); }, u);
  same(
      "silu_mul in place", [&](float *o) { siluMulForward(x.data(), u.data(), o, N); },
      [&](float *io) { siluMulForward(io, u.data(), io, N); }, x);
  same(
      "add in place", [&](float *o) { add(x.data(), u.data(), o, N); },
      [&](float *io) { add(io, u.data(), io, N); }, x);
  same(
      "rope in place", [&](float *o) { rope(x.data(), o, 1, n, 1, D - 1, 1e4, nullptr, false); },
      [&](float *io) { rope(io, io, 1, n, 1, D - 1, 1e4, nullptr, false); },
      VecF(x.begin(), x.begin() + n * (D - 1)));
  same(
      "layer_norm in place",
      [&](float *o) { layerNormForward(x.data(), w.data(), b.data(), o, n, D, 1e-5); },
      [&](float *io) { layerNormForward(io, w.data(), b.data(), io, n, D, 1e-5); }, x);
  same(
      "rms_norm in place", [&](float *o) { rmsNormForward(x.data(), w.data(), o, n, D, 1e-6); },
      [&](float *io) { rmsNormForward(io, w.data(), io, n, D, 1e-6); }, x);
  VecF dw(D), db(D);
  same(
      "layer_norm backward in place",
      [&](float *o) {
        layerNormBackward(u.data(), x.data(), w.data(), o, dw.data(), db.data(), n, D, 1e-5);
      },
      [&](float *io) {
        layerNormBackward(io, x.data(), w.data(), io, dw.data(), db.data(), n, D, 1e-5);
      },
      u);
  same(
      "rms_norm backward in place",
      [&](float *o) { rmsNormBackward(u.data(), x.data(), w.data(), o, dw.data(), n, D, 1e-6); },
      [&](float *io) { rmsNormBackward(io, x.data(), w.data(), io, dw.data(), n, D, 1e-6); }, u);
  same(
      "cross_entropy backward in place",
      [&](float *o) { crossEntropyBackward(x.data(), t.data(), o, n, V, 0.5f); },
      [&](float *io) { crossEntropyBackward(io, t.data(), io, n, V, 0.5f); }, x);
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

namespace {
void checkCrossEntropy(const VecF &logits, const std::vector<int64_t> &t, int64_t n, int64_t V,
                       const char *what) {
  SCOPED_TRACE(what);
  VecD ld = toD(logits);
  const float loss = crossEntropyForward(logits.data(), t.data(), n, V);
  const double want = refCrossEntropy(ld, t, n, V);
  EXPECT_TRUE(std::isfinite(loss));
  const int64_t counted =
      std::count_if(t.begin(), t.end(), [](int64_t x) { return x != kIgnoreIndex; });
  const CrossEntropyBounds e1 = crossEntropyBounds(ld, t, n, V, 1.0 / counted, kLibmUlps);
  EXPECT_TRUE(within("cross_entropy loss", &loss, &want, &e1.loss, 1));

  // Mean reduction: scale 1/(rows counted) gives d(mean loss)/dlogits. The
  // loss as its terms mx, log(sum), -x_t per counted row (weights
  // 1/counted), so that numGrad's rounding estimate sees their sizes; steps
  // absolute: the loss depends on the logits' differences.
  auto terms = [&] {
    VecD y(3 * n, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      if (t[i] == kIgnoreIndex)
        continue;
      const double *x = &ld[i * V];
      const double mx = *std::max_element(x, x + V);
      double sum = 0;
      for (int64_t c = 0; c < V; ++c)
        sum += std::exp(x[c] - mx);
      y[3 * i] = mx;
      y[3 * i + 1] = std::log(sum);
      y[3 * i + 2] = -x[t[i]];
    }
    return y;
  };
  Fd fd = numGrad(ld, VecD(3 * n, 1.0 / double(counted)), terms, 1e-4, false);
  VecF d(n * V, 99.0f);
  crossEntropyBackward(logits.data(), t.data(), d.data(), n, V, 1.0f / float(counted));
  EXPECT_TRUE(withinFd("cross_entropy dlogits", d, fd, e1.d));
  // Any other scale multiplies it (and its error bound).
  const float scale = 0.37f;
  for (size_t i = 0; i < fd.g.size(); ++i) {
    fd.g[i] *= double(counted) * scale;
    fd.err[i] *= double(counted) * scale;
  }
  crossEntropyBackward(logits.data(), t.data(), d.data(), n, V, scale);
  EXPECT_TRUE(withinFd("cross_entropy dlogits scaled", d, fd,
                       crossEntropyBounds(ld, t, n, V, scale, kLibmUlps).d));
}
} // namespace

TEST(Kernels, CrossEntropy) {
  std::mt19937 rng(40);
  const int64_t n = 5, V = 11;
  const std::vector<int64_t> t = {0, 10, 3, 3, 7};
  checkCrossEntropy(randomF(n * V, rng, -3, 3), t, n, V, "small logits");

  // Large logits: exp would overflow without the max subtraction.
  VecF big = randomF(n * V, rng, -5, 5);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < V; ++c)
      big[i * V + c] += (i % 2 ? -1000.0f : 1000.0f);
  big[2 * V + 4] = 1e4f; // one dominant logit (not the target)
  big[3 * V + 3] = 90.0f;
  checkCrossEntropy(big, t, n, V, "large logits");
}

// Masked-LM: rows whose target is kIgnoreIndex (-100) count neither in the
// loss nor in its gradient (zeros there), whatever their logits hold.
TEST(Kernels, CrossEntropyIgnoreIndex) {
  std::mt19937 rng(41);
  const int64_t n = 7, V = 11;
  const std::vector<int64_t> t = {kIgnoreIndex, 10, 3, kIgnoreIndex, 7, kIgnoreIndex, 0};
  VecF logits = randomF(n * V, rng, -3, 3);
  logits[3 * V + 2] = std::numeric_limits<float>::quiet_NaN(); // an ignored row is not read
  logits[5 * V + 1] = 1e30f;
  checkCrossEntropy(logits, t, n, V, "some ignored");
  // The four rows counted alone give the same loss.
  VecF kept;
  std::vector<int64_t> keptT;
  for (int64_t i = 0; i < n; ++i)
    if (t[i] != kIgnoreIndex) {
      kept.insert(kept.end(), logits.begin() + i * V, logits.begin() + (i + 1) * V);
      keptT.push_back(t[i]);
    }
  EXPECT_FLOAT_EQ(crossEntropyForward(logits.data(), t.data(), n, V),
                  crossEntropyForward(kept.data(), keptT.data(), 4, V));
  VecF d(n * V, 99.0f);
  crossEntropyBackward(logits.data(), t.data(), d.data(), n, V, 0.25f);
  for (int64_t i : {0, 3, 5})
    for (int64_t c = 0; c < V; ++c)
      ASSERT_EQ(d[i * V + c], 0.0f) << "ignored row " << i << " col " << c;
  // Every row ignored: a loss of 0 and no gradient.
  const std::vector<int64_t> none(n, kIgnoreIndex);
  EXPECT_EQ(crossEntropyForward(logits.data(), none.data(), n, V), 0.0f);
  crossEntropyBackward(logits.data(), none.data(), d.data(), n, V, 0.25f);
  EXPECT_EQ(d, VecF(n * V, 0.0f));
}

//===----------------------------------------------------------------------===//
// ViT: class token and positions, first-token selection
//===----------------------------------------------------------------------===//

TEST(Kernels, ClassToken) {
  std::mt19937 rng(45);
  const int64_t B = 3, P = 4, S = P + 1, D = 5;
  VecF x = randomF(B * P * D, rng), cls = randomF(D, rng), pos = randomF(S * D, rng),
       dy = randomF(B * S * D, rng);
  VecD xd = toD(x), cd = toD(cls), pd = toD(pos), dyd = toD(dy);
  auto ref = [&] {
    VecD y(B * S * D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t c = 0; c < D; ++c)
          y[(b * S + s) * D + c] = (s == 0 ? cd[c] : xd[(b * P + s - 1) * D + c]) + pd[s * D + c];
    return y;
  };
  VecF y(B * S * D, 123.0f);
  classTokenForward(x.data(), cls.data(), pos.data(), y.data(), B, S, D);
  // One float addition: u |y|.
  const VecD yRef = ref();
  VecD eY(yRef.size());
  for (size_t i = 0; i < yRef.size(); ++i)
    eY[i] = kU * std::fabs(yRef[i]);
  EXPECT_TRUE(within("class_token y", y, yRef, eY));
  // L = sum(dy * y): its gradient in each input, by central differences. dx
  // is a copy (exact); dpos, dcls sum B rows in float: gamma_B sum_b |dy|.
  VecF dx(B * P * D, 123.0f), dcls(D, 123.0f), dpos(S * D, 123.0f);
  classTokenBackward(dy.data(), dx.data(), dcls.data(), dpos.data(), B, S, D);
  VecD ePos(S * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = 0; e < S * D; ++e)
      ePos[e] += gammaK(B) * std::fabs(dyd[b * S * D + e]);
  EXPECT_TRUE(withinFd("class_token dx", dx, numGrad(xd, dyd, ref), VecD(dx.size(), 0.0)));
  EXPECT_TRUE(withinFd("class_token dcls", dcls, numGrad(cd, dyd, ref),
                       VecD(ePos.begin(), ePos.begin() + D)));
  EXPECT_TRUE(withinFd("class_token dpos", dpos, numGrad(pd, dyd, ref), ePos));
}

TEST(Kernels, FirstToken) {
  std::mt19937 rng(46);
  const int64_t B = 3, S = 6, D = 7;
  VecF x = randomF(B * S * D, rng), dy = randomF(B * D, rng);
  VecD xd = toD(x), dyd = toD(dy);
  auto ref = [&] {
    VecD y(B * D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < D; ++c)
        y[b * D + c] = xd[b * S * D + c];
    return y;
  };
  VecF y(B * D, 123.0f);
  firstTokenForward(x.data(), y.data(), B, S, D);
  // Copies: exact.
  EXPECT_TRUE(within("first_token y", y, ref(), VecD(y.size(), 0.0)));
  VecF dx(B * S * D, 123.0f); // overwritten: zeros outside row 0
  firstTokenBackward(dy.data(), dx.data(), B, S, D);
  EXPECT_TRUE(withinFd("first_token dx", dx, numGrad(xd, dyd, ref), VecD(dx.size(), 0.0)));
}

//===----------------------------------------------------------------------===//
// AdamW, sum of squares
//===----------------------------------------------------------------------===//

namespace {
void checkAdamw(bool withMask, double gradScale) {
  SCOPED_TRACE(::testing::Message()
               << (withMask ? "decay mask" : "decay everywhere") << ", grad scale " << gradScale);
  std::mt19937 rng(50);
  const int64_t n = 13;
  const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  VecF p = randomF(n, rng), m(n, 0.0f), v(n, 0.0f);
  VecD pd = toD(p), md(n, 0.0), vd(n, 0.0);
  // Running error bounds of the float state (torch's op order, each Python
  // scalar rounded to float, every op one rounding): m = b1 m + (1 - b1) g:
  // b1 em + gamma_4 (b1 |m| + (1 - b1) |g|); v likewise with g^2 (g rounded
  // twice): gamma_6; denom = sqrt(v) / sqrt(bc2) + eps: v's error through
  // sqrt (min(ev / 2 sqrt v, sqrt ev)) plus gamma_4 on its terms; the step
  // lr / bc1 m / denom: m's and denom's errors carried, plus gamma_3; p =
  // p (1 - lr wd) + step: gamma_3 on both terms plus what is carried.
  VecD ep(n, 0.0), em(n, 0.0), ev(n, 0.0);
  bool mask[n];
  for (int64_t i = 0; i < n; ++i)
    mask[i] = i % 3 != 0;
  for (int64_t step = 1; step <= 3; ++step) {
    VecF g = randomF(n, rng, -0.5f, 0.5f);
    g[5] = 0.0f; // a zero gradient: denom is eps on the first step
    adamw(p.data(), g.data(), m.data(), v.data(), withMask ? mask : nullptr, n, step, lr, b1, b2,
          eps, wd, gradScale);
    const double bc1 = 1 - std::pow(b1, double(step)), bc2 = 1 - std::pow(b2, double(step));
    for (int64_t i = 0; i < n; ++i) {
      const double gi = double(g[i]) * gradScale, ag = std::fabs(gi);
      const double mul = !withMask || mask[i] ? 1 - lr * wd : 1.0;
      em[i] = b1 * em[i] + gammaK(4) * (b1 * std::fabs(md[i]) + (1 - b1) * ag);
      ev[i] = b2 * ev[i] + gammaK(6) * (b2 * vd[i] + (1 - b2) * gi * gi);
      md[i] = b1 * md[i] + (1 - b1) * gi;
      vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
      const double sq = std::sqrt(vd[i]), bs = std::sqrt(bc2), den = sq / bs + eps;
      const double eSq = sq > 0 ? std::min(ev[i] / (2 * sq), std::sqrt(ev[i])) : std::sqrt(ev[i]);
      const double eDen = eSq / bs + gammaK(4) * den;
      const double upd = lr / bc1 * md[i] / den;
      const double eUpd = lr / bc1 * (em[i] / den + std::fabs(md[i]) * eDen / (den * den)) +
                          gammaK(3) * std::fabs(upd);
      ep[i] = mul * ep[i] + gammaK(3) * (std::fabs(pd[i] * mul) + std::fabs(upd)) + eUpd;
      pd[i] = pd[i] * mul - upd;
    }
    SCOPED_TRACE(::testing::Message() << "step " << step);
    EXPECT_TRUE(within("adamw param", p, pd, ep));
    EXPECT_TRUE(within("adamw exp_avg", m, md, em));
    EXPECT_TRUE(within("adamw exp_avg_sq", v, vd, ev));
  }
}
} // namespace

TEST(Kernels, AdamW) {
  checkAdamw(false, 1.0);
  checkAdamw(true, 1.0);
  checkAdamw(true, 0.5);
}

TEST(Kernels, AdamWMaskSkipsDecay) {
  // With a zero gradient the only change is the decay, where the mask allows it.
  const int64_t n = 2;
  VecF p = {1.0f, 1.0f}, g = {0.0f, 0.0f}, m = {0, 0}, v = {0, 0};
  const bool mask[n] = {true, false};
  adamw(p.data(), g.data(), m.data(), v.data(), mask, n, 1, 0.1, 0.9, 0.999, 1e-8, 0.5, 1.0);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_EQ(p[1], 1.0f);
}

// Each operation of AdamW rounds to f32, as torch's tensor ops and the CUDA
// kernel (__fmul_rn, __fadd_rn) do: no multiply-add is fused, on any CPU
// (the x86-64-v3 clone fused 37 before; an offloaded run's host AdamW then
// differed from the device's in the last bit). The reference makes every
// operation a separate rounded store.
TEST(Kernels, AdamWRoundsEachOperation) {
  std::mt19937 rng(61);
  const int64_t n = 4099;
  VecF p = randomF(n, rng, -1, 1), g = randomF(n, rng, -2, 2), m = randomF(n, rng, -0.1f, 0.1f),
       v = randomF(n, rng, 0, 0.01f);
  VecF rp = p, rm = m, rv = v;
  const int64_t step = 3;
  const double lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.7;
  adamw(p.data(), g.data(), m.data(), v.data(), nullptr, n, step, lr, b1, b2, eps, wd, gs);
  auto r = [](float x) {
    volatile float y = x;
    return float(y);
  };
  const float decayMul = float(1.0 - lr * wd), fb1 = float(b1), ob1 = float(1.0 - b1);
  const float fb2 = float(b2), ob2 = float(1.0 - b2);
  const float neg = float(-(lr / (1.0 - std::pow(b1, double(step)))));
  const float bc2 = float(std::sqrt(1.0 - std::pow(b2, double(step))));
  for (int64_t i = 0; i < n; ++i) {
    float gi = r(g[i] * float(gs)), pi = r(rp[i] * decayMul);
    float mi = r(r(rm[i] * fb1) + r(ob1 * gi));
    float vi = r(r(rv[i] * fb2) + r(r(ob2 * gi) * gi));
    float denom = r(r(std::sqrt(vi) / bc2) + float(eps));
    float pn = r(pi + r(r(neg * mi) / denom));
    ASSERT_EQ(p[i], pn) << i;
    ASSERT_EQ(m[i], mi) << i;
    ASSERT_EQ(v[i], vi) << i;
  }
}

// --offload optimizer on a GPU rank: the host's AdamW split over threads in
// contiguous chunks is one thread's, bit for bit, however it is split.
TEST(Kernels, HostAdamWOverThreadsIsOneThreads) {
  std::mt19937 rng(62);
  const int64_t n = 10007;
  VecF p0 = randomF(n, rng, -1, 1), g = randomF(n, rng, -2, 2), m0 = randomF(n, rng, -0.1f, 0.1f),
       v0 = randomF(n, rng, 0, 0.01f);
  auto update = [&](int threads, int64_t minChunk) {
    VecF p = p0, m = m0, v = v0;
    fsdp::runtime::AdamWSlice a{p.data(), g.data(), m.data(), v.data(), n,    5,
                                1e-3,     0.9,      0.999,    1e-8,     0.01, 1.0};
    fsdp::runtime::hostAdamwThreads(a, threads, minChunk);
    return std::make_tuple(p, m, v);
  };
  auto one = update(1, 1);
  for (int threads : {2, 3, 7, 16})
    for (int64_t minChunk : {int64_t(1), int64_t(100), int64_t(6000)})
      EXPECT_TRUE(update(threads, minChunk) == one)
          << threads << " threads, chunks of at least " << minChunk;
}

TEST(Kernels, SumOfSquares) {
  std::mt19937 rng(60);
  VecF x = randomF(1001, rng, -3, 3);
  double want = 0;
  for (float f : x)
    want += double(f) * double(f);
  const double got = sumOfSquares(x.data(), x.size());
  // Float squares are exact in double; n positive terms summed in double:
  // gamma64_n of the sum.
  EXPECT_LE(std::fabs(got - want), gammaK(double(x.size()), kU64) * want)
      << "error " << std::fabs(got - want);
  EXPECT_EQ(sumOfSquares(x.data(), 0), 0.0);
}

// OpenBLAS's table of work buffers holds max(50, 2 * MAX_THREADS) slots, one
// taken by each of its own threads; more callers at once took an overflow
// path that overwrote the heap (kernels/cpu.cpp). The gate stays inside it.
extern "C" char *openblas_get_config(void);

TEST(Kernels, BlasCallersStayInsideOpenBLASBufferTable) {
  const char *config = openblas_get_config();
  const char *m = config ? std::strstr(config, "MAX_THREADS=") : nullptr;
  ASSERT_NE(m, nullptr) << "openblas_get_config() names no MAX_THREADS: " << config;
  int maxThreads = std::atoi(m + std::strlen("MAX_THREADS="));
  EXPECT_GE(blasCallerLimit(), 1);
  EXPECT_LE(blasCallerLimit(), std::max(50, 2 * maxThreads) - maxThreads);
}

// Many more threads than the gate admits, all multiplying at once: each gets
// its own right product, none waits forever at the gate.
TEST(Kernels, ManyThreadsMultiplyAtOnce) {
  const int threads = 300, n = 48;
  std::vector<VecF> x(threads, VecF(n * n)), y(threads, VecF(n * n));
  VecF w(n * n);
  for (int i = 0; i < n * n; ++i)
    w[i] = (float)((i * 7) % 13) / 13.0f;
  for (int t = 0; t < threads; ++t)
    for (int i = 0; i < n * n; ++i)
      x[t][i] = (float)((t + i) % 5);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        linearForward(x[t].data(), w.data(), nullptr, y[t].data(), n, n, n, Layout::InOut);
    });
  for (auto &th : pool)
    th.join();
  for (int t = 0; t < threads; t += 37)
    for (int r = 0; r < n; r += 11)
      for (int c = 0; c < n; c += 7) {
        double want = 0;
        for (int k = 0; k < n; ++k)
          want += (double)x[t][r * n + k] * w[k * n + c];
        EXPECT_NEAR(y[t][r * n + c], want, 1e-4 * (1 + std::fabs(want)));
      }
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

namespace {
// The double reference of moe_route's weights for the given choices c[n, k]
// (the top-k themselves are checked apart: a selection is not differentiable).
VecD refRouteWeights(const VecD &logits, const std::vector<int64_t> &c, int64_t n, int64_t E,
                     int64_t k, bool normalize) {
  VecD w(n * k);
  for (int64_t t = 0; t < n; ++t) {
    double mx = -INFINITY, sum = 0, sel = 0;
    for (int64_t e = 0; e < E; ++e)
      mx = std::max(mx, logits[t * E + e]);
    for (int64_t e = 0; e < E; ++e)
      sum += std::exp(logits[t * E + e] - mx);
    for (int64_t j = 0; j < k; ++j)
      sel += std::exp(logits[t * E + c[t * k + j]] - mx) / sum;
    for (int64_t j = 0; j < k; ++j) {
      double p = std::exp(logits[t * E + c[t * k + j]] - mx) / sum;
      w[t * k + j] = normalize ? p / sel : p;
    }
  }
  return w;
}

// The relative error, in units of u, of the kernels' float softmax of row t
// of x [., E] (softmaxRow in cpu_impl.h), per element: exp_e is off by
// kLibmUlps ulps (2 kLibmUlps u) and by the rounding of x_e - max (|x_e -
// max| u, through exp), a_e in all; their double sum (positive terms) by at
// most max a_c, its float reciprocal and the product by 1 u each:
// a_e + max_c a_c + 2.
VecD softmaxRel(const VecD &x, int64_t t, int64_t E) {
  const double mx = *std::max_element(x.begin() + t * E, x.begin() + (t + 1) * E);
  VecD a(E);
  for (int64_t e = 0; e < E; ++e)
    a[e] = 2 * kLibmUlps + std::fabs(x[t * E + e] - mx);
  const double amax = *std::max_element(a.begin(), a.end());
  for (double &r : a)
    r += amax + 2;
  return a;
}

// The smallest logit gap the kernel's choices cannot flip across: two float
// p are each off by at most gammaK(relP) relative, and p_a / p_b = exp(x_a -
// x_b) ~ 1 + the gap, so a gap over twice that keeps their order.
double clearChoiceGap(const VecD &x, int64_t n, int64_t E) {
  double rel = 0;
  for (int64_t t = 0; t < n; ++t) {
    const VecD r = softmaxRel(x, t, E);
    rel = std::max(rel, *std::max_element(r.begin(), r.end()));
  }
  return 2 * gammaK(rel);
}

// Each token's top k of the exact probabilities, descending, ties to the
// lower index, and the smallest gap between a chosen and an unchosen one.
std::vector<int64_t> refTopK(const VecD &logits, int64_t n, int64_t E, int64_t k, double &gap) {
  std::vector<int64_t> c(n * k);
  gap = INFINITY;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int64_t> order(E);
    for (int64_t e = 0; e < E; ++e)
      order[e] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return logits[t * E + a] > logits[t * E + b]; });
    std::copy(order.begin(), order.begin() + k, c.begin() + t * k);
    if (k < E)
      gap = std::min(gap, logits[t * E + order[k - 1]] - logits[t * E + order[k]]);
  }
  return c;
}

// The packed rows of the choices c[n, k]: by expert, then by token.
std::vector<int64_t> refSlots(const std::vector<int64_t> &c, int64_t E) {
  std::vector<int64_t> slots(c.size());
  int64_t next = 0;
  for (int64_t e = 0; e < E; ++e)
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i] == e)
        slots[i] = next++;
  return slots;
}

void checkMoeRoute(int64_t n, int64_t E, int64_t k, bool normalize, unsigned seed) {
  SCOPED_TRACE(::testing::Message()
               << "n=" << n << " E=" << E << " k=" << k << " normalize=" << normalize);
  std::mt19937 rng(seed);
  VecF logits = randomF(n * E, rng, -3.0f, 3.0f), dw = randomF(n * k, rng);
  VecD ld = toD(logits), dwd = toD(dw);
  double gap;
  std::vector<int64_t> want = refTopK(ld, n, E, k, gap);
  ASSERT_GT(gap, clearChoiceGap(ld, n, E)) << "a seed whose choices are clear";
  VecF w(n * k), scratch(moeRouteScratchFloats(E));
  std::vector<int64_t> experts(n * k, -1), slots(n * k, -1);
  moeRouteForward(logits.data(), w.data(), experts.data(), slots.data(), n, E, k, normalize,
                  scratch.data());
  EXPECT_EQ(experts, want);
  EXPECT_EQ(slots, refSlots(want, E));
  // p_e: softmaxRel's; renormalised, w_j = p_j / s with s the float sum of
  // the k chosen (off by their largest error and k - 1 roundings) and the
  // division (1 u): relP_j + max_chosen relP + k.
  const VecD wRef = refRouteWeights(ld, want, n, E, k, normalize);
  VecD eW(n * k);
  for (int64_t t = 0; t < n; ++t) {
    const VecD relP = softmaxRel(ld, t, E);
    double chosenMax = 0;
    for (int64_t j = 0; j < k; ++j)
      chosenMax = std::max(chosenMax, relP[want[t * k + j]]);
    for (int64_t j = 0; j < k; ++j) {
      const double r = relP[want[t * k + j]];
      eW[t * k + j] = gammaK(normalize ? r + chosenMax + k : r) * std::fabs(wRef[t * k + j]);
    }
  }
  EXPECT_TRUE(within("moe_route weights", w, wRef, eW));

  // dlogits = d(sum dw * w)/dlogits with the choices held: its terms are
  // p_c (|dp_c| + sum_j p_j |dp_j|), |dp_j| <= (|dw_j| + sum_i |dw_i| w_i) / s.
  // The kernel's roundings along them, with P = the row's largest relP: s,
  // P + k - 1; the dot of dw and p / s, P + (k - 1) + k - 1 + 2; dp = (dw -
  // dot) / s, the two and 2 more; pd, P and its float rounding; then p_c's
  // own relP_c and the subtraction and product (2):
  // relP_c + 3 P + 2k + 5 (a bound for the unnormalised form too).
  VecF dl(n * E, 99.0f);
  moeRouteBackward(dw.data(), logits.data(), experts.data(), dl.data(), n, E, k, normalize,
                   scratch.data());
  auto fwd = [&] { return refRouteWeights(ld, want, n, E, k, normalize); };
  VecD eL(n * E);
  for (int64_t t = 0; t < n; ++t) {
    double mx = -INFINITY, sum = 0, s = 0, dot = 0, pd = 0;
    VecD p(E), adp(E, 0.0);
    for (int64_t e = 0; e < E; ++e)
      mx = std::max(mx, ld[t * E + e]);
    for (int64_t e = 0; e < E; ++e)
      sum += std::exp(ld[t * E + e] - mx);
    for (int64_t e = 0; e < E; ++e)
      p[e] = std::exp(ld[t * E + e] - mx) / sum;
    for (int64_t j = 0; j < k; ++j)
      s += p[want[t * k + j]];
    for (int64_t j = 0; j < k; ++j)
      dot += std::fabs(dwd[t * k + j]) * p[want[t * k + j]] / s;
    for (int64_t j = 0; j < k; ++j)
      adp[want[t * k + j]] =
          normalize ? (std::fabs(dwd[t * k + j]) + dot) / s : std::fabs(dwd[t * k + j]);
    for (int64_t e = 0; e < E; ++e)
      pd += p[e] * adp[e];
    const VecD relP = softmaxRel(ld, t, E);
    const double P = *std::max_element(relP.begin(), relP.end());
    for (int64_t e = 0; e < E; ++e)
      eL[t * E + e] = gammaK(relP[e] + 3 * P + 2 * k + 5) * p[e] * (adp[e] + pd);
  }
  EXPECT_TRUE(withinFd("moe_route dlogits", dl, numGrad(ld, dwd, fwd), eL));
}

// moe_permute, moe_linear and moe_combine over a routing `c` [n, k] of E
// experts: each against its double reference and finite differences.
void checkMoeExperts(int64_t n, int64_t E, int64_t k, int64_t D, int64_t I,
                     const std::vector<int64_t> &c, unsigned seed) {
  SCOPED_TRACE(::testing::Message()
               << "n=" << n << " E=" << E << " k=" << k << " D=" << D << " I=" << I);
  std::mt19937 rng(seed);
  const int64_t rows = n * k;
  const std::vector<int64_t> slots = refSlots(c, E);
  std::vector<int64_t> start(E + 1, 0);
  for (int64_t e : c)
    ++start[e + 1];
  for (int64_t e = 0; e < E; ++e)
    start[e + 1] += start[e];

  // Permute: a copy, exactly; its gradient sums a token's k rows (gamma_k).
  VecF x = randomF(n * D, rng), packed(rows * D, 99.0f);
  moePermuteForward(x.data(), slots.data(), packed.data(), n, k, D);
  VecD packedRef(rows * D);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t d = 0; d < D; ++d)
        packedRef[slots[t * k + j] * D + d] = x[t * D + d];
  EXPECT_TRUE(within("moe_permute rows", packed, packedRef, VecD(rows * D, 0.0)));
  VecF dpacked = randomF(rows * D, rng), dx(n * D, 99.0f);
  moePermuteBackward(dpacked.data(), slots.data(), dx.data(), n, k, D);
  VecD xd = toD(x), dpd = toD(dpacked), eDx(n * D);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t d = 0; d < D; ++d) {
      double a = 0;
      for (int64_t j = 0; j < k; ++j)
        a += std::fabs(dpd[slots[t * k + j] * D + d]);
      eDx[t * D + d] = gammaK(k) * a;
    }
  auto permuted = [&] {
    VecD r(rows * D);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t d = 0; d < D; ++d)
          r[slots[t * k + j] * D + d] = xd[t * D + d];
    return r;
  };
  EXPECT_TRUE(withinFd("moe_permute dx", dx, numGrad(xd, dpd, permuted), eDx));

  // Linear: each expert's rows against the linear reference and bounds.
  std::vector<VecF> w(E);
  std::vector<VecD> wd(E);
  std::vector<const float *> wp(E);
  for (int64_t e = 0; e < E; ++e) {
    w[e] = randomF(I * D, rng), wd[e] = toD(w[e]), wp[e] = w[e].data();
  }
  VecF y(rows * I, 99.0f), dy = randomF(rows * I, rng), dxl(rows * D, 99.0f);
  VecF scratch(moeOffsetsFloats(E));
  std::vector<VecF> dw(E, VecF(I * D, 99.0f));
  std::vector<float *> dwp(E);
  for (int64_t e = 0; e < E; ++e)
    dwp[e] = dw[e].data();
  moeLinearForward(packed.data(), c.data(), wp.data(), y.data(), n, k, E, D, I, scratch.data());
  moeLinearBackwardInput(dy.data(), c.data(), wp.data(), dxl.data(), n, k, E, D, I, scratch.data());
  moeLinearBackwardWeight(dy.data(), packed.data(), c.data(), dwp.data(), n, k, E, D, I,
                          scratch.data());
  for (int64_t e = 0; e < E; ++e) {
    SCOPED_TRACE(::testing::Message() << "expert " << e << " rows " << start[e + 1] - start[e]);
    const int64_t r0 = start[e], m = start[e + 1] - start[e];
    VecD xe(packedRef.begin() + r0 * D, packedRef.begin() + (r0 + m) * D);
    VecD dye(dy.begin() + r0 * I, dy.begin() + (r0 + m) * I);
    const LinearBounds b = linearBounds(xe, wd[e], nullptr, dye, m, D, I, Layout::OutIn);
    VecF ye(y.begin() + r0 * I, y.begin() + (r0 + m) * I);
    EXPECT_TRUE(
        within("moe_linear y", ye, refLinear(xe, wd[e], nullptr, m, D, I, Layout::OutIn), b.y));
    auto fx = [&] { return refLinear(xe, wd[e], nullptr, m, D, I, Layout::OutIn); };
    VecF dxe(dxl.begin() + r0 * D, dxl.begin() + (r0 + m) * D);
    EXPECT_TRUE(withinFd("moe_linear dx", dxe, numGrad(xe, dye, fx), b.dx));
    // An expert no token chose has a zero gradient, written.
    EXPECT_TRUE(withinFd("moe_linear dw", dw[e], numGrad(wd[e], dye, fx), b.dw));
  }

  // Combine: k products summed in f32 (gamma_2k of the |terms|); drows one
  // product (u); dweights a double dot rounded once (u, and gamma64_D).
  VecF rw = randomF(n * k, rng, 0.0f, 1.0f), out(n * D, 99.0f), dyc = randomF(n * D, rng);
  moeCombineForward(packed.data(), rw.data(), slots.data(), out.data(), n, k, D);
  VecD rwd = toD(rw), dycd = toD(dyc);
  auto combined = [&] {
    VecD r(n * D, 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t d = 0; d < D; ++d)
          r[t * D + d] += rwd[t * k + j] * packedRef[slots[t * k + j] * D + d];
    return r;
  };
  VecD eOut(n * D);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t d = 0; d < D; ++d) {
      double a = 0;
      for (int64_t j = 0; j < k; ++j)
        a += std::fabs(rwd[t * k + j] * packedRef[slots[t * k + j] * D + d]);
      eOut[t * D + d] = gammaK(2 * k) * a;
    }
  EXPECT_TRUE(within("moe_combine y", out, combined(), eOut));
  VecF drows(rows * D, 99.0f), dweights(n * k, 99.0f);
  moeCombineBackward(dyc.data(), packed.data(), rw.data(), slots.data(), drows.data(),
                     dweights.data(), n, k, D);
  VecD eRows(rows * D), eWeights(n * k);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      double a = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double g = dycd[t * D + d], r = packedRef[slots[t * k + j] * D + d];
        eRows[slots[t * k + j] * D + d] = kU * std::fabs(rwd[t * k + j] * g);
        a += std::fabs(r * g);
      }
      eWeights[t * k + j] = (kU + gammaK(D, kU64)) * a;
    }
  EXPECT_TRUE(withinFd("moe_combine drows", drows, numGrad(packedRef, dycd, combined), eRows));
  EXPECT_TRUE(withinFd("moe_combine dweights", dweights, numGrad(rwd, dycd, combined), eWeights));
}

// transformers' load_balancing_loss_func over `layers` logits [n, E], in
// double, the choices c[l] held.
double refAuxLoss(const std::vector<VecD> &logits, const std::vector<std::vector<int64_t>> &c,
                  int64_t n, int64_t E, int64_t k) {
  const double R = double(logits.size()) * n;
  VecD P(E, 0.0), f(k * E, 0.0);
  for (size_t l = 0; l < logits.size(); ++l)
    for (int64_t t = 0; t < n; ++t) {
      double mx = -INFINITY, sum = 0;
      for (int64_t e = 0; e < E; ++e)
        mx = std::max(mx, logits[l][t * E + e]);
      for (int64_t e = 0; e < E; ++e)
        sum += std::exp(logits[l][t * E + e] - mx);
      for (int64_t e = 0; e < E; ++e)
        P[e] += std::exp(logits[l][t * E + e] - mx) / sum / R;
      for (int64_t j = 0; j < k; ++j)
        f[j * E + c[l][t * k + j]] += 1 / R;
    }
  double aux = 0;
  for (int64_t j = 0; j < k; ++j)
    for (int64_t e = 0; e < E; ++e)
      aux += f[j * E + e] * P[e];
  return E * aux;
}

void checkMoeAuxLoss(int64_t layers, int64_t n, int64_t E, int64_t k, unsigned seed) {
  SCOPED_TRACE(::testing::Message()
               << "layers=" << layers << " n=" << n << " E=" << E << " k=" << k);
  std::mt19937 rng(seed);
  const double coef = 0.02;
  const float lossScale = 1.0f / 96, ce = 5.5f;
  std::vector<VecF> logits(layers);
  std::vector<VecD> ld(layers);
  std::vector<std::vector<int64_t>> c(layers);
  std::vector<const float *> lp(layers);
  for (int64_t l = 0; l < layers; ++l) {
    logits[l] = randomF(n * E, rng, -3.0f, 3.0f), ld[l] = toD(logits[l]);
    lp[l] = logits[l].data();
    double gap;
    c[l] = refTopK(ld[l], n, E, k, gap);
    ASSERT_GT(gap, clearChoiceGap(ld[l], n, E)) << "a seed whose choices are clear";
  }
  VecF scratch(moeAuxLossScratchFloats(E, k));
  float out = 0;
  moeAuxLossForward(&ce, lp.data(), &out, layers, n, E, k, coef, scratch.data());
  // P's terms each off by their softmaxRel (positive terms summed in double:
  // by the largest of them, rel); the counts exact; the result rounded to
  // float with the loss (u |out|).
  const double aux = refAuxLoss(ld, c, n, E, k);
  double rel = 0;
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t t = 0; t < n; ++t) {
      const VecD r = softmaxRel(ld[l], t, E);
      rel = std::max(rel, *std::max_element(r.begin(), r.end()));
    }
  EXPECT_TRUE(within("moe_aux_loss", &out, std::vector<double>{ce + coef * aux}.data(),
                     std::vector<double>{kU * (ce + coef * aux) + gammaK(rel) * coef * aux}.data(),
                     1));

  // The gradient of coef * aux, times n * lossScale (the micro-batch's share).
  std::vector<VecF> dl(layers, VecF(n * E, 99.0f));
  std::vector<float *> dlp(layers);
  for (int64_t l = 0; l < layers; ++l)
    dlp[l] = dl[l].data();
  moeAuxLossBackward(lp.data(), dlp.data(), layers, n, E, k, coef, lossScale, scratch.data());
  const double scale = coef * n * double(lossScale);
  for (int64_t l = 0; l < layers; ++l) {
    SCOPED_TRACE(::testing::Message() << "layer " << l);
    auto fwd = [&] { return VecD{scale * refAuxLoss(ld, c, n, E, k)}; };
    // Each element: p (|g| + sum p |g|) with g = scale E F / R^2 (exact
    // counts), made in double from the float p (p_e off by its softmaxRel,
    // the sum by at most rel), rounded once (u).
    const double R = double(layers) * n;
    VecD F(E, 0.0);
    for (int64_t m = 0; m < layers; ++m)
      for (int64_t i = 0; i < n * k; ++i)
        F[c[m][i]] += 1;
    VecD e(n * E);
    for (int64_t t = 0; t < n; ++t) {
      double mx = -INFINITY, sum = 0, pg = 0;
      const VecD relP = softmaxRel(ld[l], t, E);
      for (int64_t x = 0; x < E; ++x)
        mx = std::max(mx, ld[l][t * E + x]);
      for (int64_t x = 0; x < E; ++x)
        sum += std::exp(ld[l][t * E + x] - mx);
      for (int64_t x = 0; x < E; ++x)
        pg += std::exp(ld[l][t * E + x] - mx) / sum * scale * E * F[x] / (R * R);
      for (int64_t x = 0; x < E; ++x) {
        double p = std::exp(ld[l][t * E + x] - mx) / sum;
        e[t * E + x] = (kU + gammaK(relP[x] + rel)) * p * (scale * E * F[x] / (R * R) + pg);
      }
    }
    EXPECT_TRUE(withinFd("moe_aux_loss dlogits", dl[l], numGrad(ld[l], VecD{1.0}, fwd), e));
  }
}
} // namespace

TEST(Kernels, MoeRoute) {
  checkMoeRoute(7, 5, 2, true, 101);
  checkMoeRoute(7, 5, 2, false, 102);
  checkMoeRoute(9, 8, 8, true, 103); // k = E: every expert, renormalised to p
  checkMoeRoute(6, 4, 1, false, 104);
}

TEST(Kernels, MoeRouteTiesToTheLowerExpert) {
  // Equal logits: the first maximum wins, so every token picks 0..k-1.
  const int64_t n = 3, E = 6, k = 3;
  VecF logits(n * E, 0.25f), w(n * k), scratch(moeRouteScratchFloats(E));
  logits[1 * E + 4] = 1.0f; // token 1: expert 4, then 0, 1
  std::vector<int64_t> experts(n * k), slots(n * k);
  moeRouteForward(logits.data(), w.data(), experts.data(), slots.data(), n, E, k, false,
                  scratch.data());
  EXPECT_EQ(experts, (std::vector<int64_t>{0, 1, 2, 4, 0, 1, 0, 1, 2}));
  EXPECT_EQ(slots, refSlots(experts, E));
}

TEST(Kernels, MoeExperts) {
  std::mt19937 rng(110);
  const int64_t n = 9, E = 5, k = 2, D = 7, I = 11;
  std::vector<int64_t> c(n * k);
  for (int64_t t = 0; t < n; ++t) { // two distinct experts of 0..3: expert 4 gets no rows
    c[t * k] = rng() % 4;
    c[t * k + 1] = (c[t * k] + 1 + rng() % 3) % 4;
  }
  checkMoeExperts(n, E, k, D, I, c, 111);
}

TEST(Kernels, MoeExpertsAllOnOne) {
  // Every token's choices are experts 2 and 0: experts 1 and 3 get no rows.
  const int64_t n = 6, E = 4, k = 2;
  std::vector<int64_t> c;
  for (int64_t t = 0; t < n; ++t)
    c.insert(c.end(), {2, 0});
  checkMoeExperts(n, E, k, 5, 3, c, 112);
}

TEST(Kernels, MoeAuxLoss) {
  checkMoeAuxLoss(1, 7, 4, 2, 120);
  checkMoeAuxLoss(3, 5, 6, 2, 121);
}
