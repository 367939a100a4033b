//===- FSDPOps.td - the plan dialect -----------------------*- tablegen -*-===//
//
// `fsdp` is what the planner decides: wrap units with their flat-parameter
// layout, and the training step as one straight-line program in which
// collectives, waits, frees and optimizer updates sit between the model's
// forward and backward ops. Compute ops run on the compute stream; the
// collectives on the communication stream, each issued at its place in the
// program (after everything before it on the compute stream) and yielding an
// event that a `fsdp.wait` orders later compute after.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_FSDP_OPS
#define FSDP_FSDP_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/FunctionInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

def FSDP_Dialect : Dialect {
  let name = "fsdp";
  let summary = "Fully sharded data parallel training plans";
  let cppNamespace = "::fsdp::plan";
  let useDefaultTypePrinterParser = 1;
}

class FSDP_Type<string name, string typeMnemonic> : TypeDef<FSDP_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def FSDP_EventType : FSDP_Type<"Event", "event"> {
  let summary = "completion of a collective on the communication stream";
}

def FSDP_BufferKind : I32EnumAttr<"BufferKind", "a unit's transient buffer", [
    I32EnumAttrCase<"params", 0>,   // the unsharded (gathered) parameters
    I32EnumAttrCase<"grads", 1>     // the unsharded gradients, before reduction
  ]> {
  let cppNamespace = "::fsdp::plan";
}

def FSDP_Group : I32EnumAttr<"Group", "the ranks a collective spans", [
    I32EnumAttrCase<"shard", 0>,    // the ranks sharing one copy of the model
    I32EnumAttrCase<"replica", 1>   // the ranks holding the same shard
  ]> {
  let cppNamespace = "::fsdp::plan";
}

class FSDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDP_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Units
//===----------------------------------------------------------------------===//

def FSDP_UnitOp : FSDP_Op<"unit", [Symbol]> {
  let summary = "a wrap unit: parameters gathered, freed and reduced together";
  let description = [{
    The unit's parameters are laid out one after another in a flat buffer of
    `numel` elements (`offsets[i]`, `sizes[i]` for `params[i]`), padded to
    `padded_numel`, a multiple of `shard_count`; rank r of a shard group owns
    elements `[r * shard_numel, (r + 1) * shard_numel)`.
    ```mlir
    fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
      params = ["transformer.h.0.ln_1.weight", ...], offsets = array<i64: 0, 64, ...>,
      sizes = array<i64: 64, 64, ...>, numel = 49984 : i64,
      padded_numel = 49984 : i64, shard_count = 4 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$index, StrAttr:$module,
                       StrArrayAttr:$params, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes, I64Attr:$numel,
                       I64Attr:$padded_numel, I64Attr:$shard_count);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getShardNumel() {
      return getPaddedNumelAttr().getInt() / getShardCountAttr().getInt();
    }
  }];
}

//===----------------------------------------------------------------------===//
// The training step
//===----------------------------------------------------------------------===//

def FSDP_StepOp : FSDP_Op<"step", [
    FunctionOpInterface, IsolatedFromAbove, Symbol,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "one micro-step (forward, backward) and the optimizer update";
  let description = [{
    Built by `fsdp-training-step` from an `nn.graph` of the same name: the
    forward ops, then the gradient ops, then the optimizer. Later passes add
    the plan's attributes (`strategy`, `world_size`, ...) and its collectives.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let regions = (region SizedRegion<1>:$body);
  let extraClassDeclaration = [{
    ::mlir::Region *getCallableRegion() { return &getBody(); }
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() {
      return getFunctionType().getInputs();
    }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() {
      return getFunctionType().getResults();
    }
  }];
  let hasCustomAssemblyFormat = 1;
}

def FSDP_ReturnOp : FSDP_Op<"return", [Pure, HasParent<"StepOp">, ReturnLike,
                                       Terminator]> {
  let summary = "ends the step, returning the micro-step's loss";
  let arguments = (ins Variadic<AnyType>:$operands);
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
  let hasVerifier = 1;
}

def FSDP_GradOp : FSDP_Op<"grad", [HasParent<"StepOp">]> {
  let summary = "the complete gradient of a parameter, stored in its unit's gradients";
  let description = [{
    Placed right after the op that completes the gradient; its value lives in
    the unit's unsharded gradient buffer at the parameter's offset.
  }];
  let arguments = (ins AnyRankedTensor:$grad, StrAttr:$param);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($grad)";
}

//===----------------------------------------------------------------------===//
// Collectives and memory
//===----------------------------------------------------------------------===//

def FSDP_AllGatherOp : FSDP_Op<"all_gather", [HasParent<"StepOp">]> {
  let summary = "gathers a unit's parameter shards into its unsharded buffer";
  let description = [{
    With `dtype = bf16` (mixed precision), each rank rounds its f32 shard to
    bf16 and the unsharded buffer holds bf16: half the bytes sent and kept.
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<DenseI32ArrayAttr>:$ranks,
                       OptionalAttr<StrAttr>:$dtype);
  let results = (outs FSDP_EventType:$event);
  let assemblyFormat = "$unit attr-dict";
  let hasVerifier = 1;
}

def FSDP_ReduceScatterOp : FSDP_Op<"reduce_scatter", [HasParent<"StepOp">]> {
  let summary = "sums a unit's gradients over the shard group into each rank's shard";
  let description = [{
    The reduced shard is added to the rank's gradient shard, which
    accumulates over micro-steps until the optimizer step. With
    `dtype = bf16` the gradients are rounded to bf16 before the reduction
    (half the bytes sent) and the bf16 sum is added to the f32 shard.
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, OptionalAttr<DenseI32ArrayAttr>:$ranks,
                       OptionalAttr<StrAttr>:$dtype);
  let results = (outs FSDP_EventType:$event);
  let assemblyFormat = "$unit attr-dict";
  let hasVerifier = 1;
}

def FSDP_AllReduceOp : FSDP_Op<"all_reduce", [HasParent<"StepOp">]> {
  let summary = "sums a unit's gradient shards over the replica group, in place";
  let arguments = (ins FlatSymbolRefAttr:$unit, OptionalAttr<DenseI32ArrayAttr>:$ranks);
  let results = (outs FSDP_EventType:$event);
  let assemblyFormat = "$unit attr-dict";
}

def FSDP_UpcastOp : FSDP_Op<"upcast", [HasParent<"StepOp">,
    AllTypesMatch<["param", "result"]>]> {
  let summary = "a parameter in bf16, as the f32 tensor compute reads (mixed precision)";
  let description = [{
    The parameter rounded to bf16 (round to nearest even) and widened to f32:
    read from the unit's bf16 gathered buffer, or from the f32 shard of a unit
    that is not sharded. Compute on CPUs runs in f32 on these values.
  }];
  let arguments = (ins AnyRankedTensor:$param);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($param)";
  let hasVerifier = 1;
}

def FSDP_WaitOp : FSDP_Op<"wait", [HasParent<"StepOp">]> {
  let summary = "the compute stream waits for a collective to complete";
  let arguments = (ins FSDP_EventType:$event);
  let assemblyFormat = "$event attr-dict";
}

def FSDP_AllocOp : FSDP_Op<"alloc", [HasParent<"StepOp">]> {
  let summary = "a unit's unsharded gradient buffer comes to life, zeroed";
  let arguments = (ins FSDP_BufferKind:$kind, FlatSymbolRefAttr:$unit,
                       OptionalAttr<I64Attr>:$offset);
  let assemblyFormat = "$kind $unit attr-dict";
  let hasVerifier = 1;
}

def FSDP_FreeOp : FSDP_Op<"free", [HasParent<"StepOp">]> {
  let summary = "ends the life of a unit's unsharded parameters or gradients";
  let arguments = (ins FSDP_BufferKind:$kind, FlatSymbolRefAttr:$unit);
  let assemblyFormat = "$kind $unit attr-dict";
}

def FSDP_GradNormOp : FSDP_Op<"grad_norm", [HasParent<"StepOp">]> {
  let summary = "the global gradient norm: local sums of squares, summed over the shard group";
  let arguments = (ins OptionalAttr<DenseI32ArrayAttr>:$ranks);
  let results = (outs FSDP_EventType:$event);
  let assemblyFormat = "attr-dict";
}

def FSDP_OptimizerStepOp : FSDP_Op<"optimizer_step", [HasParent<"StepOp">]> {
  let summary = "AdamW on this rank's shard of a unit (or of every unit, before units exist)";
  let description = [{
    Updates the parameter shard from the gradient shard and the two moments,
    after clipping by the global norm when asked; then zeroes the gradient
    shard for the next step's accumulation.
  }];
  let arguments = (ins OptionalAttr<FlatSymbolRefAttr>:$unit);
  let assemblyFormat = "($unit^)? attr-dict";
}

#endif // FSDP_FSDP_OPS
