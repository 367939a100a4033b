//===- KernelScratch.td - an op's kernel scratch, per target -*- tablegen -*-===//
//
// The planner's interface, not the dialect's: scratch is a fact of the
// runtime's kernels, which the IR does not know. The planner attaches it to
// nn's compute ops as an external model (KernelScratch.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_PLANNER_KERNELSCRATCH
#define FSDP_PLANNER_KERNELSCRATCH

include "mlir/IR/OpBase.td"

def KernelScratchOpInterface : OpInterface<"KernelScratchOpInterface"> {
  let description = [{
    The memory an op's kernel needs beyond its operands and results on a
    target (the CPU kernels or the CUDA kernels): attention tiles, norm and
    loss partial sums, bf16 panels. A fact of the op and its target, taken
    from the runtime's one definition (runtime/Scratch.h) over the very call
    the runtime will make; the memory plan places it in the arena.
  }];
  let cppNamespace = "::fsdp";
  let methods = [
    InterfaceMethod<[{
        Bytes of scratch for a micro-batch of B sequences of S tokens.
      }], "int64_t", "getScratchBytes",
      (ins "::fsdp::program::Target":$target, "int64_t":$B, "int64_t":$S)>
  ];
}

#endif
