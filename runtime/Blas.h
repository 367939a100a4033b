//===- Blas.h - the BLAS kernels for this CPU ----------------------*- C++ -*-===//
//
// Debian's OpenBLAS (0.3.21) does not know newer CPUs and falls back to its
// SSE3 "Prescott" kernels, 4x slower than the AVX-512 ones on this kind of
// machine (measured: 30 against 116 GFLOP/s for sgemm 1024^3). The choice is
// made when the library loads, so a tool names the right kernels in
// OPENBLAS_CORETYPE and starts itself again. An OPENBLAS_CORETYPE already set
// is respected, and FSDP_KEEP_BLAS_CORE=1 keeps the library's choice.
//
// The tools call OpenBLAS from one thread a call (openblas_set_num_threads(1)),
// so its own worker threads only hold memory: each maps a 128 MiB work buffer
// as the library loads and, under an address-space limit that leaves no room,
// retries forever (and exit waits for it). OPENBLAS_NUM_THREADS=1, set before
// the library loads (the same restart), starts none.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_BLAS_H
#define FSDP_RUNTIME_BLAS_H

#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

extern "C" char *openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

namespace fsdp::runtime {

inline void chooseBlasKernels(char **argv) {
  bool restart = false;
  const char *threadsEnv = std::getenv("OPENBLAS_NUM_THREADS");
  bool hadThreads = threadsEnv != nullptr;
  std::string threads = hadThreads ? threadsEnv : "";
  if (threads != "1") {
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    restart = true;
  }
  const char *better = nullptr;
  const char *core = openblas_get_corename();
  if (!std::getenv("OPENBLAS_CORETYPE") && !std::getenv("FSDP_KEEP_BLAS_CORE") && core &&
      std::strcmp(core, "Prescott") == 0) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
      better = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      better = "Haswell";
#endif
  }
  if (better) {
    setenv("OPENBLAS_CORETYPE", better, 1);
    restart = true;
  }
  if (!restart)
    return;
  execv("/proc/self/exe", argv);
  // exec failed: run on as we are
  if (better)
    unsetenv("OPENBLAS_CORETYPE");
  if (hadThreads)
    setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 1);
  else
    unsetenv("OPENBLAS_NUM_THREADS");
}

} // namespace fsdp::runtime

#endif
