//===- DeviceLabel.h - which instruction the device work is for --*- C++ -*-===//
//
// The device executor tells the device, before it enqueues an instruction's
// work (kernels, cuBLAS calls, copies, collectives), which program
// instruction that work is, and after it, that the instruction is done; and
// when the host itself reads or writes pinned memory that copies touch. On a
// GPU this costs one call of an empty function a side: DeviceExecutor.cpp's
// definition is weak, and libfsdp-nccl.so links no other. The emulated device
// (tests/cuda-emu/label.cpp, linked into libfsdp-nccl-emulated.so only)
// defines it: its stream-order checker takes each kernel's reads and writes
// from the instruction and names the instruction in its reports. Nothing
// else in the runtime knows whether the device is emulated.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICELABEL_H
#define FSDP_RUNTIME_DEVICELABEL_H

#include "runtime/Program.h"

#include <cstddef>

namespace fsdp::runtime {

/// The device work the calling thread enqueues from now on is instruction
/// `inst` of `phase` ("micro_step", "optimizer", "eval") on `stream` (0 the
/// compute stream, 1 the comm stream) of `p`, whose arena starts at `arena`;
/// a null `inst`: no instruction's (the executor's own copies and joins).
/// DeviceExecutor.cpp defines it weak, as a no-op, for a GPU.
void labelDeviceWork(const program::Program &p, const char *phase, int stream,
                     const program::Instruction *inst, const char *arena);

/// The host now reads (or writes) `bytes` at `host`, pinned memory that the
/// device's copies also touch (the inputs' staging, the losses, the norm):
/// the emulated device checks that a synchronization orders it against
/// those copies. `what` names it. A no-op on a GPU, as labelDeviceWork.
void labelHostAccess(const void *host, size_t bytes, bool write, const char *what);

/// Labels the work enqueued during its lifetime.
class DeviceWorkLabel {
public:
  DeviceWorkLabel(const program::Program &p, const char *phase, int stream,
                  const program::Instruction &inst, const char *arena)
      : program(p) {
    labelDeviceWork(p, phase, stream, &inst, arena);
  }
  ~DeviceWorkLabel() { labelDeviceWork(program, "", 0, nullptr, nullptr); }
  DeviceWorkLabel(const DeviceWorkLabel &) = delete;
  DeviceWorkLabel &operator=(const DeviceWorkLabel &) = delete;

private:
  const program::Program &program;
};

} // namespace fsdp::runtime

#endif
