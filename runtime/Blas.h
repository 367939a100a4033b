//===- Blas.h - the BLAS kernels for this CPU ----------------------*- C++ -*-===//
//
// Debian's OpenBLAS (0.3.21) does not know newer CPUs and falls back to its
// SSE3 "Prescott" kernels, 4x slower than the AVX-512 ones on this kind of
// machine (measured: 30 against 116 GFLOP/s for sgemm 1024^3). The choice is
// made when the library loads, so a tool names the right kernels in
// OPENBLAS_CORETYPE and starts itself again. An OPENBLAS_CORETYPE already set
// is respected, and FSDP_KEEP_BLAS_CORE=1 keeps the library's choice.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_BLAS_H
#define FSDP_RUNTIME_BLAS_H

#include <cstdlib>
#include <cstring>
#include <unistd.h>

extern "C" char *openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

namespace fsdp::runtime {

inline void chooseBlasKernels(char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("FSDP_KEEP_BLAS_CORE"))
    return;
  const char *core = openblas_get_corename();
  if (!core || std::strcmp(core, "Prescott") != 0)
    return;
  const char *better = nullptr;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
#endif
  if (!better)
    return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE"); // exec failed: run on as we are
}

} // namespace fsdp::runtime

#endif
