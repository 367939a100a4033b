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
  if (argc > 2 || (argc == 2 && std::atoi(argv[1]) <= 0)) {
    std::fprintf(stderr, "usage: fsdp-sgemm-bench [N] | --gpt2 LAYERS D VOCAB TOKENS\n");
    return 1;
  }
  return square(argc > 1 ? std::atoi(argv[1]) : 1024);
}
