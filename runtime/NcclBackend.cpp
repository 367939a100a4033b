//===- NcclBackend.cpp - the entry point of libfsdp-nccl.so ---------------===//
//
// fsdp-run opens this library for --backend nccl only (DeviceExecutor.h,
// NcclBackend): what it links (the CUDA runtime, cuBLAS, NCCL) is loaded
// then, and never by a CPU run.
//
//===----------------------------------------------------------------------===//
#include "runtime/DeviceExecutor.h"

extern "C" __attribute__((visibility("default"))) const fsdp::runtime::NcclBackend *
fsdp_nccl_backend() {
  static const fsdp::runtime::NcclBackend backend = {fsdp::runtime::kNcclBackendVersion,
                                                     &fsdp::runtime::probeCudaDevices,
                                                     &fsdp::runtime::runNccl};
  return &backend;
}
