//===- sgemm_bench.cpp - this machine's single-core sgemm rate ------------===//
//
// The yardstick for the training benchmark's model FLOP/s: OpenBLAS sgemm on
// one thread, C = A B with A, B, C square of side N (default 1024).
//
//===----------------------------------------------------------------------===//
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" void openblas_set_num_threads(int);

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1024;
  openblas_set_num_threads(1);
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n, 0,
              c.data(), n);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n,
                0, c.data(), n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("sgemm %d^3, one thread: %.1f GFLOP/s\n", n, 2.0 * n * n * n / best / 1e9);
  return 0;
}
