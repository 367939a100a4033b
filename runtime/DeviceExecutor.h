//===- DeviceExecutor.h - running a program on GPUs with NCCL ----*- C++ -*-===//
//
// fsdp-run --backend nccl: one process a rank, one GPU a rank, trained by
// runtime/Trainer.h over the CUDA rank (DeviceExecutor.cpp). The rank's
// arena is one cudaMalloc laid out by the plan (the CPU rank's offsets),
// kernel scratch, the reduce-scatters' staging and cuBLAS's workspace
// included (runtime/Scratch.h); the one device allocation beside it is the
// host communicator's staging (the loss's all-reduce, checkpoints), reported
// as bytes outside the arena. The program's compute and comm lists run on
// two CUDA streams joined by CUDA events; collectives are NCCL's. Built only
// where the CUDA toolkit and NCCL are (FSDP_HAVE_NCCL).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICEEXECUTOR_H
#define FSDP_RUNTIME_DEVICEEXECUTOR_H

#include "runtime/Executor.h"
#include "runtime/communicators/NCCL.h"

#include <functional>
#include <string>

namespace fsdp::runtime {

/// "" when this process sees a CUDA device (*count of them), else why not:
/// "no CUDA device (cudaGetDeviceCount: <reason>)".
std::string probeCudaDevices(int *count);

/// Runs this process's rank of `program` on GPU (local rank % device count),
/// creating its NCCL communicators by `bootstrap`. `onStep` is called on rank
/// 0. Returns "" or the first error, naming the rank, the phase and the
/// instruction where it is known.
std::string runNccl(const program::Program &program, const RunOptions &options,
                    const NcclBootstrap &bootstrap, const StepCallback &onStep);

/// The NCCL backend as fsdp-run loads it: libfsdp-nccl.so, beside fsdp-run,
/// opened (dlopen) only for --backend nccl, so that the CPU backends never
/// load CUDA, cuBLAS or NCCL. Its one entry point, fsdp_nccl_backend(),
/// returns these (kNcclBackendVersion changes with any signature here).
struct NcclBackend {
  int version;
  std::string (*probeCudaDevices)(int *count);
  std::string (*runNccl)(const program::Program &program, const RunOptions &options,
                         const NcclBootstrap &bootstrap, const StepCallback &onStep);
};
inline constexpr int kNcclBackendVersion = 2; // 2: RunOptions::stopState
inline constexpr const char *kNcclBackendLibrary = "libfsdp-nccl.so";
inline constexpr const char *kNcclBackendEntry = "fsdp_nccl_backend";

} // namespace fsdp::runtime

extern "C" const fsdp::runtime::NcclBackend *fsdp_nccl_backend();

#endif
