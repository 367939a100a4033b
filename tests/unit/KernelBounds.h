//===- KernelBounds.h - rounding-error bounds for the kernel tests --------===//
//
// What an f32 kernel may differ from the exact result on its (float) inputs,
// per output element, from a stated error analysis (Higham, "Accuracy and
// Stability of Numerical Algorithms", ch. 3): u = 2^-24 is float's unit
// roundoff, and k roundings of relative size <= u along a computation move
// its result by at most gamma_k = k u / (1 - k u) times the same computation
// done over absolute values. For a sum of K products, in any order, blocked
// or with FMAs (so on every CPU and for every OpenBLAS kernel set):
// |fl(sum a_i b_i) - sum a_i b_i| <= gamma_K sum |a_i| |b_i|. Each function
// below evaluates those absolute "condition" sums in double on the exact
// inputs and returns the bound for every element; the rule for each term is
// written beside it. The bounds are first order in u (the u^2 terms are below
// 1e-6 of them at these sizes). Library functions are counted in ulps: one
// ulp is at most 2u relative.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TESTS_UNIT_KERNELBOUNDS_H
#define FSDP_TESTS_UNIT_KERNELBOUNDS_H

#include "runtime/kernels/cpu.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kernel_bounds {

using VecD = std::vector<double>;

constexpr double kU = 0x1p-24;   // float unit roundoff (half an ulp)
constexpr double kU64 = 0x1p-53; // double unit roundoff
// bf16 keeps 8 significant bits (7 stored): one rounding to nearest is half
// an ulp, at most u = 2^-8 relative (as float's 24 bits give 2^-24).
constexpr double kBf16U = 0x1p-8;
constexpr double kPi = 3.14159265358979323846;

// gamma_k: the bound on k roundings of relative size <= u.
inline double gammaK(double k, double u = kU) { return k * u / (1 - k * u); }

inline VecD absV(const VecD &v) {
  VecD a(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    a[i] = std::fabs(v[i]);
  return a;
}

//===----------------------------------------------------------------------===//
// Linear: three sgemms and the bias sum
//===----------------------------------------------------------------------===//

struct LinearBounds {
  VecD y, dx, dw, db;
};

// y = x W (+ b): an sgemm of depth `in` with beta = 1 for the bias: gamma_{in+2}
// (|b| + sum_k |x||w|); dx = dy Wᵀ: gamma_{out+2} sum_o |dy||w|; dW = xᵀ dy:
// gamma_{n+2} sum_i |x||dy|; db sums n rows in double and rounds once:
// u |db| + gamma64_n sum_i |dy|.
inline LinearBounds linearBounds(const VecD &x, const VecD &w, const VecD *b, const VecD &dy,
                                 int64_t n, int64_t in, int64_t out, fsdp::kernels::Layout layout) {
  auto W = [&](int64_t k, int64_t o) {
    return std::fabs(layout == fsdp::kernels::Layout::InOut ? w[k * out + o] : w[o * in + k]);
  };
  LinearBounds r{VecD(n * out), VecD(n * in), VecD(in * out), VecD(out)};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? std::fabs((*b)[o]) : 0.0;
      for (int64_t k = 0; k < in; ++k)
        s += std::fabs(x[i * in + k]) * W(k, o);
      r.y[i * out + o] = gammaK(in + 2) * s;
    }
  if (dy.empty()) // forward only
    return r;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < in; ++k) {
      double s = 0;
      for (int64_t o = 0; o < out; ++o)
        s += std::fabs(dy[i * out + o]) * W(k, o);
      r.dx[i * in + k] = gammaK(out + 2) * s;
    }
  for (int64_t k = 0; k < in; ++k)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i)
        s += std::fabs(x[i * in + k]) * std::fabs(dy[i * out + o]);
      r.dw[layout == fsdp::kernels::Layout::InOut ? k * out + o : o * in + k] = gammaK(n + 2) * s;
    }
  for (int64_t o = 0; o < out; ++o) {
    double s = 0, a = 0;
    for (int64_t i = 0; i < n; ++i) {
      s += dy[i * out + o];
      a += std::fabs(dy[i * out + o]);
    }
    r.db[o] = kU * std::fabs(s) + gammaK(n, kU64) * a;
  }
  return r;
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

struct NormBounds {
  VecD y, dx, dw, db;
};

// Row statistics are double sums rounded to float once: each counts as one
// rounding (u) where used; their double error (gamma64_{2D}) is below u/1e6
// and is counted as one more.
// layer_norm y = ((x - m) r) w + b: 4 float ops plus m, r rounded and one
// for the double statistics: gamma_7 ((|x| + |m|) r |w| + |b|).
// dx = r (g w - mg - xhat mgx), xhat = (x - m) r, g = dy: 8 float ops plus m,
// r, mg, mgx rounded and one for the statistics: gamma_13 r (|g||w| + |mg| +
// (|x| + |m|) r |mgx|). dw = sum_i g xhat in float: gamma_{n+6} sum_i |g|
// (|x| + |m|) r; db = sum_i g in float: gamma_n sum_i |g|.
inline NormBounds layerNormBounds(const VecD &x, const VecD &w, const VecD &b, const VecD &dy,
                                  int64_t n, int64_t D, double eps) {
  NormBounds r{VecD(n * D), VecD(n * D), VecD(D, 0.0), VecD(D, 0.0)};
  for (int64_t i = 0; i < n; ++i) {
    const double *xr = &x[i * D], *gr = &dy[i * D];
    double m = 0, var = 0;
    for (int64_t c = 0; c < D; ++c)
      m += xr[c];
    m /= D;
    for (int64_t c = 0; c < D; ++c)
      var += (xr[c] - m) * (xr[c] - m);
    const double rs = 1 / std::sqrt(var / D + eps);
    double mg = 0, mgx = 0;
    for (int64_t c = 0; c < D; ++c) {
      mg += gr[c] * w[c];
      mgx += gr[c] * w[c] * (xr[c] - m) * rs;
    }
    mg /= D;
    mgx /= D;
    for (int64_t c = 0; c < D; ++c) {
      const double xa = (std::fabs(xr[c]) + std::fabs(m)) * rs;
      r.y[i * D + c] = gammaK(7) * (xa * std::fabs(w[c]) + std::fabs(b[c]));
      r.dx[i * D + c] =
          gammaK(13) * rs * (std::fabs(gr[c] * w[c]) + std::fabs(mg) + xa * std::fabs(mgx));
      r.dw[c] += std::fabs(gr[c]) * xa;
      r.db[c] += std::fabs(gr[c]);
    }
  }
  for (int64_t c = 0; c < D; ++c) {
    r.dw[c] *= gammaK(n + 6);
    r.db[c] *= gammaK(n);
  }
  return r;
}

// rms_norm y = w (x r): 2 float ops, r rounded, one for the statistics:
// gamma_4 |w||x| r. dx = r (g w) - x k, k = r^3 mean(g w x): 4 ops, r and k
// rounded, one for the statistics: gamma_7 (r |g||w| + |x||k|). dw = sum_i
// g (x r) in float: gamma_{n+3} sum_i |g||x| r.
inline NormBounds rmsNormBounds(const VecD &x, const VecD &w, const VecD &dy, int64_t n, int64_t D,
                                double eps) {
  NormBounds r{VecD(n * D), VecD(n * D), VecD(D, 0.0), {}};
  for (int64_t i = 0; i < n; ++i) {
    const double *xr = &x[i * D], *gr = &dy[i * D];
    double ms = 0, sgx = 0;
    for (int64_t c = 0; c < D; ++c) {
      ms += xr[c] * xr[c];
      sgx += gr[c] * w[c] * xr[c];
    }
    const double rs = 1 / std::sqrt(ms / D + eps), k = rs * rs * rs * sgx / D;
    for (int64_t c = 0; c < D; ++c) {
      r.y[i * D + c] = gammaK(4) * std::fabs(w[c] * xr[c]) * rs;
      r.dx[i * D + c] = gammaK(7) * (rs * std::fabs(gr[c] * w[c]) + std::fabs(xr[c] * k));
      r.dw[c] += std::fabs(gr[c] * xr[c]) * rs;
    }
  }
  for (int64_t c = 0; c < D; ++c)
    r.dw[c] *= gammaK(n + 3);
  return r;
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

// Per pair (a, c) rotated by angle th = s inv_i: y1 = a cos - c sin, y2 = c
// RoPE's inverse frequency i in double, from transformers' formulas
// (modeling_rope_utils' _compute_*_parameters) with no rounding to float:
// the exact value the float kernels approximate. sc may be null.
inline double refRopeInvFreq(int64_t i, int64_t Dh, double theta,
                             const fsdp::kernels::RopeScaling *sc) {
  using Kind = fsdp::kernels::RopeScalingKind;
  const double e = double(2 * i) / double(Dh);
  if (sc && sc->kind == Kind::Dynamic) // the base at seq_len = max_position_embeddings
    theta *=
        std::pow(sc->factor * double(sc->originalMaxPosition) / double(sc->originalMaxPosition) -
                     (sc->factor - 1),
                 double(Dh) / double(Dh - 2));
  const double inv = 1.0 / std::pow(theta, e);
  if (!sc || sc->kind == Kind::Dynamic)
    return inv;
  if (sc->kind == Kind::Linear)
    return inv / sc->factor;
  if (sc->kind == Kind::Yarn) {
    // Dimensions below `low` keep inv, above `high` take inv / factor, a
    // linear ramp between (find_correction_range, linear_ramp_factor).
    auto dim = [&](double rotations) {
      return double(Dh) * std::log(double(sc->originalMaxPosition) / (rotations * 2 * kPi)) /
             (2 * std::log(theta));
    };
    double low = dim(sc->betaFast), high = dim(sc->betaSlow);
    if (sc->truncate)
      low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, double(Dh - 1));
    if (low == high)
      high += 0.001;
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    return inv / sc->factor * ramp + inv * (1 - ramp);
  }
  // llama3
  const double orig = double(sc->originalMaxPosition);
  const double lowWavelen = orig / sc->lowFreqFactor, highWavelen = orig / sc->highFreqFactor;
  const double wavelen = 2 * kPi / inv;
  if (wavelen > lowWavelen)
    return inv / sc->factor;
  if (wavelen < highWavelen)
    return inv;
  const double smooth =
      (orig / wavelen - sc->lowFreqFactor) / (sc->highFreqFactor - sc->lowFreqFactor);
  return (1 - smooth) * inv / sc->factor + smooth * inv;
}

// What cos and sin are multiplied by: yarn's attention factor, else 1.
inline double refRopeAttentionFactor(const fsdp::kernels::RopeScaling *sc) {
  return sc && sc->kind == fsdp::kernels::RopeScalingKind::Yarn ? sc->attentionFactor : 1.0;
}

// The float inverse frequency's relative error bound, in units of u: e =
// 2i/Dh rounded (u |e ln theta|), powf (1 ulp, 2u), 1/ (u), the angle
// product (u); then each scaling's own float ops on values of inv's size:
// linear's division (u); dynamic's base rounded to float (e u); llama3's ~10
// ops (16u); yarn's interpolation 1/(factor pos) (2u), the ramp's weights
// r and 1 - (1 - r) (each within 2u absolute, which moves the blend of
// inv and inv/factor by 2u inv, up to 2u factor relative to inv/factor,
// for each of the two), its two products and the sum (3u).
inline double ropeAngleEps(double e, double theta, const fsdp::kernels::RopeScaling *sc) {
  using Kind = fsdp::kernels::RopeScalingKind;
  double k = 4 + e * std::fabs(std::log(theta));
  if (sc)
    switch (sc->kind) {
    case Kind::Linear:
      k += 1;
      break;
    case Kind::Dynamic:
      k += e;
      break;
    case Kind::Llama3:
      k += 16;
      break;
    case Kind::Yarn:
      k += 2 + 4 * sc->factor + 3;
      break;
    }
  return k * kU;
}

// y = a cos - c sin, c cos + a sin, with cos and sin of the float angle
// rounded to float (u each), times the attention factor af in float (u, when
// there is one: gamma_4 then) and 3 float ops: gamma_3 af (|a||cos| +
// |c||sin|). The float angle's relative error eps_th (ropeAngleEps) moves
// each output by at most af |th| eps_th (|a| + |c|) (the rotation's
// derivative in th). `sameAngles`: both sides use the same float angles
// (the CUDA kernel takes the CPU's), so only the rounding term counts.
// errIn (may be null): the inputs' own error bounds, carried through the
// rotation (af (|cos| e1 + |sin| e2)).
inline VecD ropeBound(const VecD &x, const VecD *errIn, int64_t B, int64_t S, int64_t H, int64_t Dh,
                      double theta, const fsdp::kernels::RopeScaling *sc, bool sameAngles = false) {
  VecD r(x.size(), 0.0);
  const int64_t half = Dh / 2;
  const double af = refRopeAttentionFactor(sc);
  const double g = gammaK(af == 1.0 ? 3 : 4);
  for (int64_t row = 0; row < B * S; ++row) {
    const int64_t s = row % S;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t base = (row * H + h) * Dh;
      for (int64_t i = 0; i < half; ++i) {
        const double e = double(2 * i) / double(Dh);
        const double th = double(s) * refRopeInvFreq(i, Dh, theta, sc);
        const double epsTh = ropeAngleEps(e, theta, sc);
        const double ca = std::fabs(std::cos(th)), sa = std::fabs(std::sin(th));
        const double a = std::fabs(x[base + i]), c = std::fabs(x[base + half + i]);
        const double angle = sameAngles ? 0.0 : af * std::fabs(th) * epsTh * (a + c);
        double e1 = g * af * (a * ca + c * sa) + angle, e2 = g * af * (c * ca + a * sa) + angle;
        if (errIn) {
          e1 += af * (ca * (*errIn)[base + i] + sa * (*errIn)[base + half + i]);
          e2 += af * (ca * (*errIn)[base + half + i] + sa * (*errIn)[base + i]);
        }
        r[base + i] = e1;
        r[base + half + i] = e2;
      }
      if (Dh % 2 && errIn) // the unrotated last element: copied
        r[base + Dh - 1] = (*errIn)[base + Dh - 1];
    }
  }
  return r;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttentionBounds {
  VecD out, eOut, eDq, eDk, eDv;
};

// Per query row i (keys j it sees, m of them; T = the key count of the
// score sums' partner dimension Dh):
//   scores s_j = scale q_i.k_j: an sgemm of depth Dh with alpha, plus scale
//   rounded: ds_j = gamma_{Dh+2} scale sum |q||k_j|;
//   p_j = exp(s_j - mx) / sum: relative error eps_p <= 2 max_j ds_j (the
//   softmax moves p_j by ds_j - sum p ds) + u |s_j - mx| + 2u (the
//   subtraction and one exp ulp, in p_j and in the sum) + gamma_{m+2} (the
//   float sum, 1/sum, the product); `rescales`: an online softmax (the CUDA
//   kernel's) rescales its running sum and output by exp(m_old - m_new) at
//   each new key tile, (5 + |s_j - mx|) u each (one exp at 2 ulps, the
//   argument, the product);
//   out = P v: (eps_p + gamma_{m+2}) sum_j p_j |v_j|.
// Backward, with o the output the kernel reads (its error eo, may be null):
//   dP_j = dy.v_j: gamma_{Dh+2} sum |dy||v_j|; D = dy.o: gamma_Dh sum |dy||o|
//   + sum |dy| eo; dS_j = p_j (dP_j - D): p_j ((eps_p + 2u) |dP_j - D| + the
//   two above);
//   dq = scale dS k: scale (sum_j e(dS_j) |k_j| + gamma_{m+2} sum_j |dS_j||k_j|);
//   dk_j, dv_j sum over the N_j (head, query) pairs that see key j, tile by
//   tile, with at most two extra roundings (alpha, beta = 1) per sgemm, at
//   most one sgemm per pair: gamma_{3 N_j + 2} on the condition sums, plus the
//   carried errors of dS (dk) and of P (dv).
inline AttentionBounds attentionBounds(const VecD &q, const VecD &k, const VecD &v, const VecD &dy,
                                       const VecD *o, const VecD *eo, int64_t B, int64_t S,
                                       int64_t H, int64_t KV, int64_t Dh, int64_t window,
                                       bool causal, int64_t rescales = 0) {
  const int64_t nq = B * S * H * Dh, nk = B * S * KV * Dh;
  AttentionBounds r{VecD(nq, 0.0), VecD(nq, 0.0), VecD(nq, 0.0), VecD(nk, 0.0), VecD(nk, 0.0)};
  VecD condK(nk, 0.0), errK(nk, 0.0), condV(nk, 0.0), errV(nk, 0.0);
  std::vector<int64_t> pairs(B * S * KV, 0);
  const double scale = 1 / std::sqrt(double(Dh));
  VecD s(S), ds(S), p(S), dP(S), eS(S), dS(S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / KV);
      for (int64_t i = 0; i < S; ++i) {
        const double *qi = &q[((b * S + i) * H + h) * Dh];
        const int64_t lo = causal && window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
        const int64_t hi = causal ? i : S - 1, m = hi - lo + 1;
        double mx = -INFINITY, dsMax = 0;
        for (int64_t j = lo; j <= hi; ++j) {
          const double *kj = &k[((b * S + j) * KV + kvh) * Dh];
          double a = 0, c = 0;
          for (int64_t d = 0; d < Dh; ++d) {
            a += qi[d] * kj[d];
            c += std::fabs(qi[d] * kj[d]);
          }
          s[j] = a * scale;
          ds[j] = gammaK(Dh + 2) * scale * c;
          mx = std::max(mx, s[j]);
          dsMax = std::max(dsMax, ds[j]);
        }
        double sum = 0, spread = 0;
        for (int64_t j = lo; j <= hi; ++j) {
          sum += (p[j] = std::exp(s[j] - mx));
          spread = std::max(spread, std::fabs(s[j] - mx));
        }
        for (int64_t j = lo; j <= hi; ++j)
          p[j] /= sum;
        const double epsP = 2 * dsMax + 2 * kU * (spread + 2) + gammaK(m + 2) +
                            double(rescales) * (5 + spread) * kU;
        double *oi = &r.out[((b * S + i) * H + h) * Dh];
        double *eoi = &r.eOut[((b * S + i) * H + h) * Dh];
        for (int64_t j = lo; j <= hi; ++j) {
          const double *vj = &v[((b * S + j) * KV + kvh) * Dh];
          for (int64_t d = 0; d < Dh; ++d) {
            oi[d] += p[j] * vj[d];
            eoi[d] += p[j] * std::fabs(vj[d]);
          }
        }
        for (int64_t d = 0; d < Dh; ++d)
          eoi[d] *= epsP + gammaK(m + 2);
        if (dy.empty())
          continue;
        // Backward, with the o the kernel reads.
        const double *gi = &dy[((b * S + i) * H + h) * Dh];
        const double *ou = o ? &(*o)[((b * S + i) * H + h) * Dh] : oi;
        double D = 0, eD = 0, cD = 0;
        for (int64_t d = 0; d < Dh; ++d) {
          D += gi[d] * ou[d];
          cD += std::fabs(gi[d] * ou[d]);
          if (eo)
            eD += std::fabs(gi[d]) * (*eo)[((b * S + i) * H + h) * Dh + d];
        }
        eD += gammaK(Dh) * cD;
        for (int64_t j = lo; j <= hi; ++j) {
          const double *vj = &v[((b * S + j) * KV + kvh) * Dh];
          double a = 0, c = 0;
          for (int64_t d = 0; d < Dh; ++d) {
            a += gi[d] * vj[d];
            c += std::fabs(gi[d] * vj[d]);
          }
          dP[j] = a;
          dS[j] = p[j] * (a - D);
          eS[j] = p[j] * ((epsP + 2 * kU) * std::fabs(a - D) + gammaK(Dh + 2) * c + eD);
        }
        double *edq = &r.eDq[((b * S + i) * H + h) * Dh];
        for (int64_t j = lo; j <= hi; ++j) {
          const int64_t kj = ((b * S + j) * KV + kvh) * Dh;
          ++pairs[(b * S + j) * KV + kvh];
          for (int64_t d = 0; d < Dh; ++d) {
            edq[d] += scale *
                      (eS[j] * std::fabs(k[kj + d]) + gammaK(m + 2) * std::fabs(dS[j] * k[kj + d]));
            condK[kj + d] += scale * std::fabs(dS[j] * qi[d]);
            errK[kj + d] += scale * eS[j] * std::fabs(qi[d]);
            condV[kj + d] += p[j] * std::fabs(gi[d]);
            errV[kj + d] += epsP * p[j] * std::fabs(gi[d]);
          }
        }
      }
    }
  for (int64_t e = 0; e < nk; ++e) {
    const double g = gammaK(3 * double(pairs[e / Dh]) + 2);
    r.eDk[e] = errK[e] + g * condK[e];
    r.eDv[e] = errV[e] + g * condV[e];
  }
  return r;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

struct ElemBounds {
  VecD y, d1, d2;
};

// libmUlps: the accuracy of tanh, erf and exp (the CPU's tanhf1 and expf1
// or CUDA's; glibc's erff, expf), in ulps (1 ulp <= 2u relative).
//
// tanh GELU y = 0.5 v (1 + t), t = tanh(z), z = c (v + a v^3): z carries 5
// float ops and the constants c, a rounded to float: dz = gamma_7 c (|v| +
// a |v|^3); t is off by (1 - t^2) dz + tanhUlps (2u) absolutely (|t| <= 1,
// tanhf1's exp branch 1 - 2/(e + 1) works on values <= 1); then 2 ops:
// 0.5 |v| dt + gamma_2 |y|.
// Its derivative 0.5 (1 + t) + 0.5 v (1 - t^2) du, du = c (1 + 3 a v^2):
// dt carried as (0.5 + |v t du|) dt, du's 5 ops and 2 constants as gamma_7,
// 1 - t t's rounding (u), and 6 more ops: gamma_6 on the absolute sum.
// Exact GELU y = 0.5 v (1 + erf(z)), z = v / sqrt 2 (gamma_2 |z|): erf off by
// (2/sqrt pi) e^{-z^2} dz + erfUlps 2u; then 0.5 |v| d erf + gamma_2 |y|.
// Its derivative cdf + v pdf, pdf = exp(-v^2 / 2) / sqrt(2 pi): cdf off by
// half of erf's error, pdf by (v^2 / 2) u (the argument) + expUlps 2u + 2u
// (the constant and the product), then gamma_3 on |cdf| + |v| pdf.
// dx = dy * that: one more rounding (u |dx|).
inline ElemBounds geluBounds(const VecD &x, const VecD &dy, bool tanh, double libmUlps) {
  const size_t n = x.size();
  ElemBounds r{VecD(n), VecD(n), {}};
  const double c = std::sqrt(2 / kPi), a = 0.044715, lib = 2 * libmUlps * kU;
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i], av = std::fabs(v);
    if (!std::isfinite(v)) {
      r.y[i] = r.d1[i] = 0;
      continue;
    }
    if (tanh) {
      const double z = c * (v + a * v * v * v), t = std::tanh(z);
      const double dz = gammaK(7) * c * (av + a * av * av * av);
      const double dt = (1 - t * t) * dz + lib;
      const double y = 0.5 * v * (1 + t);
      r.y[i] = 0.5 * av * dt + gammaK(2) * std::fabs(y);
      const double du = c * (1 + 3 * a * v * v);
      const double g = 0.5 * (1 + t) + 0.5 * av * (1 - t * t) * du;
      const double eg = (0.5 + av * std::fabs(t) * du) * dt +
                        0.5 * av * (1 - t * t) * gammaK(7) * du + 0.5 * av * du * kU +
                        gammaK(6) * g;
      r.d1[i] = std::fabs(dy[i]) * eg + kU * std::fabs(dy[i] * g);
    } else {
      const double z = v / std::sqrt(2.0), dz = gammaK(2) * std::fabs(z);
      const double derf = 2 / std::sqrt(kPi) * std::exp(-z * z) * dz + lib;
      const double cdf = 0.5 * (1 + std::erf(z)), pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * kPi);
      r.y[i] = 0.5 * av * derf + gammaK(2) * std::fabs(v * cdf);
      const double g = cdf + v * pdf;
      const double eg =
          0.5 * derf + av * pdf * (0.5 * v * v * kU + lib + 2 * kU) + gammaK(3) * (cdf + av * pdf);
      r.d1[i] = std::fabs(dy[i]) * eg + kU * std::fabs(dy[i] * g);
    }
  }
  return r;
}

// silu_mul y = g / (1 + exp(-g)) * up: exp's expUlps (2u each) and 3 ops,
// all relative: (2 expUlps + 3) u |y|. dup = dy * silu(g): one more.
// dgate = (dy up) s (1 + g (1 - s)), s = 1 / (1 + e): s relative (2 expUlps
// + 2) u; 1 - s off by that times s plus u (absolutely: it cancels as s -> 1),
// carried by |g|; 5 more ops on the absolute value |dy up| s (1 + |g| (1 - s)).
// Below float's smallest normal 2^-126 relative precision is gone: that
// floor is added; where 1 + exp(-g) overflows float the kernel returns 0 and
// the whole value is its error.
inline ElemBounds siluMulBounds(const VecD &gate, const VecD &up, const VecD &dy, double libmUlps) {
  const size_t n = gate.size();
  ElemBounds r{VecD(n), VecD(n), VecD(n)};
  const double floor = 0x1p-126, ex = 2 * libmUlps;
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i], s = 1 / (1 + std::exp(-g)), silu = g * s;
    if (!std::isfinite(g)) {
      r.y[i] = r.d1[i] = r.d2[i] = 0;
      continue;
    }
    const double du = dy.empty() ? 0 : std::fabs(dy[i] * up[i]);
    r.y[i] = gammaK(ex + 3) * std::fabs(silu * up[i]) + floor;
    r.d2[i] = dy.empty() ? 0 : gammaK(ex + 4) * std::fabs(dy[i] * silu) + floor;
    const double es = gammaK(ex + 2) * s;
    r.d1[i] = gammaK(ex + 7) * du * s * (1 + std::fabs(g) * (1 - s)) +
              du * s * std::fabs(g) * (es + kU) + floor;
    if (-g > std::log(double(FLT_MAX))) { // 1 + exp(-g) overflows float: the results are 0
      r.y[i] += std::fabs(silu * up[i]);
      r.d2[i] += dy.empty() ? 0 : std::fabs(dy[i] * silu);
      r.d1[i] += du * s * (1 + std::fabs(g) * (1 - s));
    }
  }
  return r;
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

struct CrossEntropyBounds {
  double loss = 0;
  VecD d; // of crossEntropyBackward with `scale`
};

// Per counted row: lse = mx + log(sum_c exp(x_c - mx)), the terms in float:
// x_c - mx rounded (u |x_c - mx|, relative in exp) and one exp ulp (expUlps
// 2u): the sum is off by sum_c p_c (|x_c - mx| u + expUlps 2u) relative
// (p = softmax), which log carries as is; the double arithmetic adds
// gamma64_{V+3} (|mx| + |lse| + |x_t|). The mean is rounded to float: u |loss|.
// Backward d_c = exp(x_c - mx) k, k = float(scale / sum): d_c relative
// (|x_c - mx| + 2 expUlps) u + the sum's relative error + 2u (k, the
// product); the target's - scale: u |d_t|.
inline CrossEntropyBounds crossEntropyBounds(const VecD &logits, const std::vector<int64_t> &t,
                                             int64_t n, int64_t V, double scale, double libmUlps) {
  CrossEntropyBounds r;
  r.d.assign(n * V, 0.0);
  double total = 0, err = 0;
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == fsdp::kernels::kIgnoreIndex)
      continue;
    ++counted;
    const double *x = &logits[i * V];
    const double mx = *std::max_element(x, x + V);
    double sum = 0, rel = 0;
    for (int64_t c = 0; c < V; ++c)
      sum += std::exp(x[c] - mx);
    for (int64_t c = 0; c < V; ++c)
      rel += std::exp(x[c] - mx) / sum * (std::fabs(x[c] - mx) + 2 * libmUlps) * kU;
    const double lse = mx + std::log(sum);
    total += lse - x[t[i]];
    err += rel + gammaK(V + 3, kU64) * (std::fabs(mx) + std::fabs(lse) + std::fabs(x[t[i]]));
    for (int64_t c = 0; c < V; ++c) {
      const double p = std::exp(x[c] - mx) / sum, d = p * scale - (c == t[i] ? scale : 0);
      r.d[i * V + c] =
          std::fabs(p * scale) * ((std::fabs(x[c] - mx) + 2 * libmUlps + 2) * kU + rel) +
          (c == t[i] ? kU * std::fabs(d) : 0);
    }
  }
  r.loss = counted ? err / counted + kU * std::fabs(total / counted) : 0;
  return r;
}

} // namespace kernel_bounds

#endif // FSDP_TESTS_UNIT_KERNELBOUNDS_H
