//===- label.cpp - The emulated device's side of runtime/DeviceLabel.h ---===//
//
// Linked into libfsdp-nccl-emulated.so only, where it replaces the weak
// no-op of runtime/DeviceLabel.h: the work the device executor enqueues for
// an instruction is labelled with it ("micro_step.comm[3] (all_gather)", as
// the executor's errors name it), and its kernels read and write what the
// instruction does, as program::accesses (runtime/StreamOrder.h) says: the
// definition the loader checks programs with and lowering drops waits by.
//
// cuBLAS calls, copies, memsets and collectives declare their own bytes from
// their arguments (emu.cpp, nccl_emu.cpp); a kernel argument outside every
// range here counts as its whole allocation (emu.cpp), so a rule missing
// here shows as a report, never as a race not seen.
//
//===----------------------------------------------------------------------===//
#include "runtime/DeviceLabel.h"
#include "runtime/StreamOrder.h"
#include "tests/cuda-emu/emu_device.h"

#include <string>
#include <vector>

using namespace fsdp::program;

namespace {

std::vector<cuda_emu::Access> instructionAccesses(const Program &p, const Instruction &i,
                                                  const char *arena) {
  std::vector<cuda_emu::Access> out;
  for (const ArenaBytes &a : accesses(p, i))
    out.push_back({arena + a.offset, size_t(a.bytes), a.write});
  return out;
}

} // namespace

void fsdp::runtime::labelHostAccess(const void *host, size_t bytes, bool write, const char *what) {
  cuda_emu::hostAccess(host, bytes, write, what);
}

void fsdp::runtime::labelDeviceWork(const Program &p, const char *phase, int stream,
                                    const Instruction *inst, const char *arena) {
  if (!inst) {
    cuda_emu::setWorkLabel("", {});
    return;
  }
  cuda_emu::setWorkLabel(std::string(phase) + (stream ? ".comm[" : ".compute[") +
                             std::to_string(inst->index) + "] (" + opName(inst->op) + ")",
                         instructionAccesses(p, *inst, arena));
}
