//===- sgemm_bench.cpp - this machine's single-core sgemm rate ------------===//
//
// The yardsticks for the training benchmark, OpenBLAS on one thread:
//
//   fsdp-sgemm-bench [N]
//     C = A B with A, B, C square of side N (default 1024): the sgemm rate.
//   fsdp-sgemm-bench --gpt2 LAYERS D VOCAB TOKENS
//     the matmul floor of one GPT-2 training step: every projection and head
//     product of the step (forward, gradient of the input, gradient of the
//     weight), made through the runtime's own linear kernels with the HF
//     layouts, each timed alone with warm caches (best of 7), summed. No
//     step that makes these products with OpenBLAS can be faster; attention's
//     products and every other op come on top.
//   fsdp-sgemm-bench --bf16 [N IN OUT]
//     the linear kernels over f32 and over bf16 storage (sgemm on f32 copies
//     of panels) at one shape (default 1024 768 3072, GPT-2 small's c_fc),
//     and what converting the bf16 operands to f32 costs alone: once each,
//     and as often as the panels convert them.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

template <class F> double bestOf(int reps, F f) {
  f(); // first touch, packing buffers
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

int square(int n) {
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n);
  double best = bestOf(5, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n, 0,
                c.data(), n);
  });
  std::printf("sgemm %d^3, one thread: %.1f GFLOP/s\n", n, 2.0 * n * n * n / best / 1e9);
  return 0;
}

int gpt2Floor(int64_t layers, int64_t d, int64_t vocab, int64_t n) {
  using fsdp::kernels::Layout;
  struct Product {
    const char *name;
    int64_t in, out, count;
    Layout layout;
  };
  // GPT-2 (HF Conv1D weights are [in, out]); the head is the tied token
  // embedding [vocab, d].
  const Product products[] = {
      {"attn.c_attn", d, 3 * d, layers, Layout::InOut},
      {"attn.c_proj", d, d, layers, Layout::InOut},
      {"mlp.c_fc", d, 4 * d, layers, Layout::InOut},
      {"mlp.c_proj", 4 * d, d, layers, Layout::InOut},
      {"lm_head", d, vocab, 1, Layout::OutIn},
  };
  double total = 0, flops = 0;
  std::printf("matmul floor of one training step, %lld tokens, one thread (best of 7 each):\n",
              static_cast<long long>(n));
  for (const Product &p : products) {
    std::vector<float> x(size_t(n * p.in), 0.01f), w(size_t(p.in * p.out), 0.02f),
        y(size_t(n * p.out)), dy(size_t(n * p.out), 0.03f), dx(size_t(n * p.in)),
        dw(size_t(p.in * p.out));
    const double fwd = bestOf(7, [&] {
      fsdp::kernels::linearForward(x.data(), w.data(), nullptr, y.data(), n, p.in, p.out, p.layout);
    });
    const double gin = bestOf(7, [&] {
      fsdp::kernels::linearBackwardInput(dy.data(), w.data(), dx.data(), n, p.in, p.out, p.layout);
    });
    const double gw = bestOf(7, [&] {
      fsdp::kernels::linearBackwardWeight(dy.data(), x.data(), dw.data(), n, p.in, p.out, p.layout);
    });
    const double f = 2.0 * n * p.in * p.out;
    std::printf("  %-12s [%lld x %lld] x%lld: forward %.2f ms, grad input %.2f ms, grad weight "
                "%.2f ms (%.0f, %.0f, %.0f GFLOP/s)\n",
                p.name, static_cast<long long>(p.in), static_cast<long long>(p.out),
                static_cast<long long>(p.count), fwd * 1e3, gin * 1e3, gw * 1e3, f / fwd / 1e9,
                f / gin / 1e9, f / gw / 1e9);
    total += p.count * (fwd + gin + gw);
    flops += p.count * 3 * f;
  }
  std::printf("matmul floor: %.1f ms (%.1f GFLOP at %.1f GFLOP/s)\n", total * 1e3, flops / 1e9,
              flops / total / 1e9);
  return 0;
}

int bf16Linear(int64_t n, int64_t in, int64_t out) {
  namespace k = fsdp::kernels;
  using k::bf16;
  using k::Layout;
  std::vector<float> x(size_t(n * in), 0.01f), w(size_t(in * out), 0.02f), y(size_t(n * out)),
      dy(size_t(n * out), 0.03f), dx(size_t(n * in)), dw(size_t(in * out));
  std::vector<bf16> xb(x.size()), wb(w.size()), yb(y.size()), dyb(dy.size()), dxb(dx.size()),
      dwb(dw.size());
  k::toBf16(x.data(), xb.data(), int64_t(x.size()));
  k::toBf16(w.data(), wb.data(), int64_t(w.size()));
  k::toBf16(dy.data(), dyb.data(), int64_t(dy.size()));
  std::vector<float> scratch(size_t(k::linearBf16ScratchFloats(n, in, out)));
  std::vector<float> xf(x.size()), wf(w.size());
  const Layout l = Layout::InOut;
  const double f = 2.0 * n * in * out;
  std::printf("linear [%lld x %lld] x [%lld x %lld] (in_out), one thread, best of 7; bf16 scratch "
              "%.1f MiB:\n",
              static_cast<long long>(n), static_cast<long long>(in), static_cast<long long>(in),
              static_cast<long long>(out), scratch.size() * 4.0 / (1 << 20));
  auto row = [&](const char *what, double f32, double b16) {
    std::printf("  %-12s f32 %7.2f ms %6.1f GFLOP/s | bf16 %7.2f ms %6.1f GFLOP/s (%.2fx)\n", what,
                f32 * 1e3, f / f32 / 1e9, b16 * 1e3, f / b16 / 1e9, b16 / f32);
  };
  row("forward",
      bestOf(7, [&] { k::linearForward(x.data(), w.data(), nullptr, y.data(), n, in, out, l); }),
      bestOf(7, [&] {
        k::linearForward(xb.data(), wb.data(), nullptr, yb.data(), n, in, out, l, scratch.data());
      }));
  row("grad input",
      bestOf(7, [&] { k::linearBackwardInput(dy.data(), w.data(), dx.data(), n, in, out, l); }),
      bestOf(7, [&] {
        k::linearBackwardInput(dyb.data(), wb.data(), dxb.data(), n, in, out, l, scratch.data());
      }));
  row("grad weight",
      bestOf(7, [&] { k::linearBackwardWeight(dy.data(), x.data(), dw.data(), n, in, out, l); }),
      bestOf(7, [&] {
        k::linearBackwardWeight(dyb.data(), xb.data(), dwb.data(), n, in, out, l, scratch.data());
      }));
  // Forward converts x once and W once per 256 rows of x.
  const double once = bestOf(7, [&] {
    k::fromBf16(xb.data(), xf.data(), n * in);
    k::fromBf16(wb.data(), wf.data(), in * out);
  });
  const int64_t panels = (n + k::kBf16Panel - 1) / k::kBf16Panel;
  const double wOnly = bestOf(7, [&] { k::fromBf16(wb.data(), wf.data(), in * out); });
  std::printf("  converting x and W to f32 alone: %.2f ms once; as the forward's panels do (W %lld "
              "times): ~%.2f ms\n",
              once * 1e3, static_cast<long long>(panels), (once + (panels - 1) * wOnly) * 1e3);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  openblas_set_num_threads(1);
  if (argc == 6 && std::strcmp(argv[1], "--gpt2") == 0) {
    const int64_t v[4] = {std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]),
                          std::atoll(argv[5])};
    for (int64_t x : v)
      if (x <= 0 || x > (int64_t(1) << 20)) {
        std::fprintf(stderr, "fsdp-sgemm-bench: --gpt2 LAYERS D VOCAB TOKENS: each a positive "
                             "integer up to 2^20\n");
        return 1;
      }
    return gpt2Floor(v[0], v[1], v[2], v[3]);
  }
  if (argc >= 2 && std::strcmp(argv[1], "--bf16") == 0 && (argc == 2 || argc == 5)) {
    int64_t v[3] = {1024, 768, 3072};
    for (int i = 0; i < 3 && argc == 5; ++i)
      v[i] = std::atoll(argv[2 + i]);
    for (int64_t x : v)
      if (x <= 0 || x > (int64_t(1) << 16)) {
        std::fprintf(stderr, "fsdp-sgemm-bench: --bf16 N IN OUT: each a positive integer up to "
                             "2^16\n");
        return 1;
      }
    return bf16Linear(v[0], v[1], v[2]);
  }
  if (argc > 2 || (argc == 2 && std::atoi(argv[1]) <= 0)) {
    std::fprintf(
        stderr, "usage: fsdp-sgemm-bench [N] | --gpt2 LAYERS D VOCAB TOKENS | --bf16 [N IN OUT]\n");
    return 1;
  }
  return square(argc > 1 ? std::atoi(argv[1]) : 1024);
}
