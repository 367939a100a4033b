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
#include <string>
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

/// Names the work the calling host thread enqueues from now on, for the
/// stream-order checker (emu.cpp): `label` ("micro_step.comm[3]
/// (all_gather)") heads the name of each operation in its reports, and a
/// kernel launched under a label reads and writes `kernelAccesses` instead
/// of the coarse default (every pointer argument's whole allocation, written
/// unless it points to const). An empty label and no accesses: none.
void setWorkLabel(std::string label, std::vector<Access> kernelAccesses);

/// Declares that the calling host thread now reads (or writes) `bytes` at
/// `ptr`, pinned host memory that asynchronous copies also touch: the
/// stream-order checker reports a copy that touches them and that nothing
/// orders against this access (the host synchronizes with an event, a
/// stream or the device for that). `what` names the access in reports.
void hostAccess(const void *ptr, size_t bytes, bool write, const char *what);

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
