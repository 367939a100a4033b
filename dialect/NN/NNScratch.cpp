//===- NNScratch.cpp - an nn op's kernel scratch, per target --------------===//
//
// The op as the runtime will call its kernel: a one-instruction program of
// the op's tensors (shapes with the micro-batch and sequence length, dtypes)
// and the attributes the call is decoded from, through the runtime's own
// decodeCall and kernelScratchBytes, so that the plan and the kernels agree
// by construction.
//
//===----------------------------------------------------------------------===//
#include "dialect/NN/NNDialect.h"
#include "runtime/Scratch.h"

using namespace mlir;
using namespace fsdp;

int64_t fsdp::nn::kernelScratchBytes(Operation *op, program::Target target, int64_t B, int64_t S) {
  const program::OpInfo *info = program::findOp(op->getName().stripDialect().str());
  if (!info || info->stream != program::OpStream::Compute)
    return 0;
  program::Program p;
  program::Instruction inst;
  inst.op = info->op;
  auto add = [&](Value v, std::vector<int64_t> &ids) {
    auto t = cast<RankedTensorType>(v.getType());
    program::Tensor pt;
    int dyn = 0;
    for (int64_t d : t.getShape())
      pt.shape.push_back(ShapedType::isDynamic(d) ? (dyn++ == 0 ? B : S) : d);
    Type e = t.getElementType();
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
  if (auto l = op->getAttrOfType<WeightLayoutAttr>("layout"))
    inst.layoutInOut = l.getValue() == WeightLayout::in_out;
  if (auto h = op->getAttrOfType<IntegerAttr>("num_heads"))
    inst.numHeads = h.getInt();
  if (auto kv = op->getAttrOfType<IntegerAttr>("num_kv_heads"))
    inst.numKvHeads = kv.getInt();
  if (auto w = op->getAttrOfType<IntegerAttr>("window"))
    inst.window = w.getInt();
  if (auto a = op->getAttrOfType<StringAttr>("approximate"))
    inst.approximate =
        a.getValue() == "none" ? program::GeluApproximate::None : program::GeluApproximate::Tanh;
  program::Call c = program::decodeCall(p, inst);
  return program::kernelScratchBytes(target, inst.op, c.dtype, c);
}
