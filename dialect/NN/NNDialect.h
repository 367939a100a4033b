//===- NNDialect.h - the model-graph dialect ---------------------*- C++ -*-===//
#ifndef FSDP_DIALECT_NN_NNDIALECT_H
#define FSDP_DIALECT_NN_NNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "support/Inputs.h"

namespace fsdp::nn {
/// Marks the ops the runtime runs as one compute instruction each (a row of
/// runtime/Ops.def of the same name; tests/unit/OpsTest.cpp holds the two
/// lists equal). What such an op needs of its kernel beyond its operands,
/// the scratch, is the planner's to say (planner/KernelScratch.h): the
/// dialect knows nothing of kernels.
template <typename ConcreteType>
class ComputeOp : public mlir::OpTrait::TraitBase<ConcreteType, ComputeOp> {};
} // namespace fsdp::nn

#include "dialect/NN/NNDialect.h.inc"
#include "dialect/NN/NNEnums.h.inc"
#include "dialect/NN/NNInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialect/NN/NNOps.h.inc"

namespace fsdp::nn {

/// The most blocks and parameters (elements, all tensors together) a graph
/// may have: far beyond any published model (Llama 3.1 405B has 126 blocks
/// and 4.1e11 parameters), and small enough that every size the planner
/// derives from them fits in 64 bits, and that building the graph ends.
constexpr int64_t kMaxBlocks = 10000;
constexpr int64_t kMaxParameters = int64_t(1) << 48;
/// The longest sequence a graph may accept (max_seq_len): far beyond any
/// published context (Llama 3.1: 131072; long-context fine-tunes publish
/// 4194304), and short enough that every activation's bytes fit in 64 bits.
constexpr int64_t kMaxSeqLen = int64_t(1) << 30;

/// What a graph (or the step built from it) takes: its `inputs_kind` (absent:
/// tokens) and, for images, the `image` geometry ({height, width, channels,
/// patch_height, patch_width}, each positive, the patch dividing the image),
/// read into the terms the program shares (support/Inputs.h; classes is left
/// 0: the classifier gives it). Returns "" or what is wrong.
std::string readInputs(mlir::StringAttr kind, mlir::DictionaryAttr image,
                       support::InputKind *inputKind, support::ImageSpec *spec);

/// The cross-entropy of a graph's loss: the loss itself, or the loss
/// operand of the nn.moe_aux_loss that adds the load-balancing loss to it;
/// null for any other value.
CrossEntropyOp lossCrossEntropy(mlir::Value loss);

/// Whether `op` makes the loss: nn.cross_entropy, or nn.moe_aux_loss.
bool isLossOp(mlir::Operation *op);

} // namespace fsdp::nn

#endif
