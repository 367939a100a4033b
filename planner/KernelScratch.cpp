//===- KernelScratch.cpp - nn's compute ops' kernel scratch ---------------===//
//
// The op as the runtime will call its kernel: a one-instruction program of
// the op's tensors (shapes with the micro-batch and sequence length, dtypes)
// and the attributes the call is decoded from, through the runtime's own
// decodeCall and kernelScratchBytes, so that the plan and the kernels agree
// by construction. Attached to nn's ops from outside the dialect (MLIR's
// external models), so that the IR library links nothing of the runtime.
//
//===----------------------------------------------------------------------===//
#include "planner/KernelScratch.h"
#include "dialect/FSDP/FSDPDialect.h"
#include "dialect/NN/NNDialect.h"
#include "planner/Buffers.h"
#include "runtime/Scratch.h"

using namespace mlir;
using namespace fsdp;

#include "planner/KernelScratch.cpp.inc"

namespace {

int64_t opScratchBytes(Operation *op, program::Target target, int64_t B, int64_t S) {
  const program::OpInfo *info = program::findOp(op->getName().stripDialect().str());
  if (!info || info->stream != program::OpStream::Compute)
    return 0; // tests/unit/OpsTest.cpp holds every compute op to a row
  program::Program p;
  program::Instruction inst;
  inst.op = info->op;
  auto add = [&](Value v, std::vector<int64_t> &ids) {
    program::Tensor pt;
    for (int64_t d : concreteShape(v.getType(), B, S))
      pt.shape.push_back(d);
    Type e = cast<ShapedType>(v.getType()).getElementType();
    pt.dtype = e.isBF16()  ? program::DType::BF16
               : e.isF32() ? program::DType::F32
                           : program::DType::I64;
    ids.push_back((int64_t)p.tensors.size());
    p.tensors.push_back(pt);
  };
  for (Value v : op->getOperands())
    add(v, inst.in);
  for (Value v : op->getResults())
    add(v, inst.out);
  if (auto l = op->getAttrOfType<nn::WeightLayoutAttr>("layout"))
    inst.layoutInOut = l.getValue() == nn::WeightLayout::in_out;
  if (auto h = op->getAttrOfType<IntegerAttr>("num_heads"))
    inst.numHeads = h.getInt();
  if (auto kv = op->getAttrOfType<IntegerAttr>("num_kv_heads"))
    inst.numKvHeads = kv.getInt();
  if (auto w = op->getAttrOfType<IntegerAttr>("window"))
    inst.window = w.getInt();
  if (auto k = op->getAttrOfType<IntegerAttr>("top_k"))
    inst.topK = k.getInt();
  if (auto a = op->getAttrOfType<StringAttr>("approximate"))
    inst.approximate =
        a.getValue() == "none" ? program::GeluApproximate::None : program::GeluApproximate::Tanh;
  program::Call c = program::decodeCall(p, inst);
  return program::kernelScratchBytes(target, inst.op, c.dtype, c);
}

template <typename OpT>
struct KernelScratchModel : KernelScratchOpInterface::ExternalModel<KernelScratchModel<OpT>, OpT> {
  int64_t getScratchBytes(Operation *op, program::Target target, int64_t B, int64_t S) const {
    return opScratchBytes(op, target, B, S);
  }
};

/// Attaches the model to OpT if it is a compute op.
template <typename OpT> void attachIfCompute(MLIRContext *ctx) {
  if constexpr (OpT::template hasTrait<nn::ComputeOp>())
    OpT::template attachInterface<KernelScratchModel<OpT>>(*ctx);
}
template <typename... Ops> void attachToComputeOps(MLIRContext *ctx) {
  (attachIfCompute<Ops>(ctx), ...);
}

} // namespace

void fsdp::registerKernelScratchModel(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, nn::NNDialect *) {
    attachToComputeOps<
#define GET_OP_LIST
#include "dialect/NN/NNOps.cpp.inc"
        >(ctx);
  });
}

void fsdp::registerPlannerDialects(DialectRegistry &registry) {
  registry.insert<nn::NNDialect, plan::FSDPDialect>();
  registerKernelScratchModel(registry);
  registerTensorParallelGradients(registry);
}

void fsdp::loadPlannerDialects(MLIRContext &context) {
  DialectRegistry registry;
  registerPlannerDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadDialect<nn::NNDialect, plan::FSDPDialect>();
}
