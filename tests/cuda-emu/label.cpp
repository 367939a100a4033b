//===- label.cpp - The emulated device's side of runtime/DeviceLabel.h ---===//
//
// Linked into libfsdp-nccl-emulated.so only, where it replaces the weak
// no-op of runtime/DeviceLabel.h: the work the device executor enqueues for
// an instruction is labelled with it ("micro_step.comm[3] (all_gather)", as
// the executor's errors name it), and its kernels read and write what the
// instruction does, as the program says:
//
//   * a compute op: its input tensors read, its output tensors and its
//     scratch written; alloc writes the unit's gradient buffer (from
//     zero_from), optimizer_step the unit's four shards; free nothing;
//   * all_gather: the unit's shard read, the gathered buffer written (bf16:
//     after the shard is rounded into this rank's slot of it);
//   * reduce_scatter: the unsharded gradients read (written too where the
//     f32 gradients are rounded to bf16 in place), the staging scratch and
//     the gradient shard written;
//   * all_reduce: the gradient shard written; grad_norm: every unit's
//     gradient shard read, its scratch written.
//
// cuBLAS calls, copies, memsets and collectives declare their own bytes from
// their arguments (emu.cpp, nccl_emu.cpp); a kernel argument outside every
// range here counts as its whole allocation (emu.cpp), so a rule missing
// here shows as a report, never as a race not seen.
//
//===----------------------------------------------------------------------===//
#include "runtime/DeviceLabel.h"
#include "runtime/Scratch.h"
#include "tests/cuda-emu/emu_device.h"

#include <string>
#include <vector>

using namespace fsdp::program;

namespace {

std::vector<cuda_emu::Access> instructionAccesses(const Program &p, const Instruction &i,
                                                  const char *arena) {
  std::vector<cuda_emu::Access> out;
  auto bytes = [&](int64_t offset, int64_t n, bool write) {
    if (offset >= 0 && n > 0)
      out.push_back({arena + offset, size_t(n), write});
  };
  auto tensor = [&](int64_t id, bool write) {
    const Tensor &t = p.tensors[size_t(id)];
    bytes(t.offset, t.bytes(), write);
  };
  const Unit *u = i.unit >= 0 ? &p.units[size_t(i.unit)] : nullptr;
  const int64_t grad = p.gradElementBytes();
  switch (i.op) {
  case Op::Record:
  case Op::Wait:
  case Op::Free:
    break;
  case Op::Alloc:
    bytes(i.dst + i.zeroFrom * grad, (u->paddedNumel - i.zeroFrom) * grad, true);
    break;
  case Op::OptimizerStep:
    for (int64_t off : {u->shardOffset, u->gradShardOffset, u->expAvgOffset, u->expAvgSqOffset})
      bytes(off, u->shardNumel * 4, true);
    break;
  case Op::AllGather:
    bytes(u->shardOffset, u->shardNumel * 4, false);
    bytes(i.dst, u->paddedNumel * (i.bf16 ? 2 : 4), true);
    break;
  case Op::ReduceScatter:
    bytes(i.src, u->paddedNumel * grad, grad == 4 && i.bf16);
    bytes(i.scratch, i.scratchBytes, true);
    bytes(u->gradShardOffset, u->shardNumel * 4, true);
    break;
  case Op::AllReduce:
    bytes(u->gradShardOffset, u->shardNumel * 4, true);
    break;
  case Op::GradNorm:
    for (const Unit &v : p.units)
      bytes(v.gradShardOffset, v.shardNumel * 4, false);
    bytes(i.scratch, i.scratchBytes, true);
    break;
  default: // a compute op: its tensors and its scratch
    for (int64_t id : i.in)
      tensor(id, false);
    for (int64_t id : i.out)
      tensor(id, true);
    bytes(i.scratch, i.scratchBytes, true);
    break;
  }
  return out;
}

} // namespace

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
