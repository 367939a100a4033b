//===- emu_device.h - running work on an emulated stream ---------*- C++ -*-===//
//
// A test tool, never part of the runtime. The contract between the emulated
// CUDA runtime (emu.cpp) and the other emulated libraries built on it (the
// NCCL emulation): how a library's asynchronous operation runs on a stream.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TESTS_CUDA_EMU_EMU_DEVICE_H
#define FSDP_TESTS_CUDA_EMU_EMU_DEVICE_H

#include <cstddef>
#include <functional>
#include <vector>

typedef struct CUstream_st *cudaStream_t;

namespace cuda_emu {

/// Device bytes an asynchronous operation reads or writes, declared so that
/// the stream-order checker can find conflicting accesses nothing orders.
struct Access {
  const void *ptr;
  size_t bytes;
  bool write;
};

/// Enqueues `work` on `stream` (nullptr: the legacy default stream). It runs
/// on that stream's thread after everything enqueued on the stream before it
/// (kernels, copies, event waits), as CUDA orders a stream. `what` names the
/// operation in reports ("ncclAllGather"); `accesses` are the device bytes it
/// reads and writes. Returns false (and enqueues nothing) when the device
/// holds a sticky error or the stream is not valid.
bool enqueue(cudaStream_t stream, const char *what, std::vector<Access> accesses,
             std::function<void()> work);

} // namespace cuda_emu

#endif
