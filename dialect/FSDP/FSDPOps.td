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
  let useDefaultAttributePrinterParser = 1;
}

class FSDP_Type<string name, string typeMnemonic> : TypeDef<FSDP_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def FSDP_EventType : FSDP_Type<"Event", "event"> {
  let summary = "completion of a collective on the communication stream";
}

def FSDP_BufferKind : I32EnumAttr<"BufferKind", "a unit's transient buffer", [
    I32EnumAttrCase<"params", 0>,   // the unsharded (gathered) parameters
    I32EnumAttrCase<"grads", 1>,    // the unsharded gradients, before reduction
    I32EnumAttrCase<"resharded", 2> // reshard_after_forward = N: this rank's 1/N of
                                    // the gathered parameters, forward to backward
  ]> {
  let cppNamespace = "::fsdp::plan";
}

def FSDP_Group : I32EnumAttr<"Group", "the ranks a collective spans", [
    I32EnumAttrCase<"shard", 0>,    // the ranks sharing one copy of the model
    I32EnumAttrCase<"replica", 1>,  // the ranks holding the same shard
    I32EnumAttrCase<"reshard", 2>,  // reshard_after_forward = N: N consecutive ranks
    I32EnumAttrCase<"tp", 3>        // tp = N: the N consecutive ranks of one data-parallel
                                    // index (the tensor-parallel group)
  ]> {
  let cppNamespace = "::fsdp::plan";
}

//===----------------------------------------------------------------------===//
// The plan's settings: enumerations and figures
//===----------------------------------------------------------------------===//

// Each prints as `#fsdp<strategy full_shard>` in an attribute dictionary and
// as its bare keyword (`bf16`) where an op's assembly format names it.

def FSDP_StrategyEnum : I32EnumAttr<"Strategy", "how parameters are sharded", [
    I32EnumAttrCase<"FullShard", 0, "full_shard">,      // ZeRO-3
    I32EnumAttrCase<"ShardGradOp", 1, "shard_grad_op">, // ZeRO-2
    I32EnumAttrCase<"NoShard", 2, "no_shard">,          // DDP
    I32EnumAttrCase<"HybridShard", 3, "hybrid_shard">   // full_shard within groups
  ]> {
  let cppNamespace = "::fsdp::plan";
  let genSpecializedAttr = 0;
}
def FSDP_StrategyAttr : EnumAttr<FSDP_Dialect, FSDP_StrategyEnum, "strategy">;

def FSDP_GradSyncEnum : I32EnumAttr<"GradSync",
    "when gradients are reduced under gradient accumulation", [
    I32EnumAttrCase<"Every", 0, "every">, // each micro-step reduce-scatters its gradients
    // each micro-step adds its gradients into the unit's unsharded
    // accumulation buffer; the last one reduce-scatters that (FSDP's no-sync)
    I32EnumAttrCase<"Last", 1, "last">
  ]> {
  let cppNamespace = "::fsdp::plan";
  let genSpecializedAttr = 0;
}
def FSDP_GradSyncAttr : EnumAttr<FSDP_Dialect, FSDP_GradSyncEnum, "grad_sync">;

def FSDP_OffloadEnum : I32EnumAttr<"Offload",
    "what of a rank's training state lives in host memory", [
    I32EnumAttrCase<"None", 0, "none">, // all of it on the device
    // Adam's moments and an f32 master copy of the parameter shard in host
    // memory; each optimizer_step copies the gradient shard to the host,
    // runs AdamW there and copies the parameter shard back (ZeRO-Offload's
    // optimizer offload)
    I32EnumAttrCase<"Optimizer", 1, "optimizer">,
    // the optimizer's, and the parameter shards too: the master copy is the
    // only one, and each shard-group gather copies it (or, with bf16
    // parameters, its bf16 copy on the host) into the rank's own slot
    // first (FSDP2's CPUOffloadPolicy, the gradient shards staying on the
    // device)
    I32EnumAttrCase<"All", 2, "all">
  ]> {
  let cppNamespace = "::fsdp::plan";
  let genSpecializedAttr = 0;
}
def FSDP_OffloadAttr : EnumAttr<FSDP_Dialect, FSDP_OffloadEnum, "offload">;

def FSDP_DtypeEnum : I32EnumAttr<"Dtype", "a precision of parameters or reductions", [
    I32EnumAttrCase<"F32", 0, "f32">,
    I32EnumAttrCase<"BF16", 1, "bf16">
  ]> {
  let cppNamespace = "::fsdp::plan";
  let genSpecializedAttr = 0;
}
def FSDP_DtypeAttr : EnumAttr<FSDP_Dialect, FSDP_DtypeEnum, "dtype">;

def FSDP_BackwardPrefetchEnum : I32EnumAttr<"BackwardPrefetch",
    "where backward issues the next unit's gather", [
    I32EnumAttrCase<"Pre", 0, "pre">,    // before the current unit's gradient ops
    I32EnumAttrCase<"Post", 1, "post">,  // after them
    I32EnumAttrCase<"None", 2, "none">   // at first use
  ]> {
  let cppNamespace = "::fsdp::plan";
  let genSpecializedAttr = 0;
}
def FSDP_BackwardPrefetchAttr
    : EnumAttr<FSDP_Dialect, FSDP_BackwardPrefetchEnum, "backward_prefetch">;

def FSDP_CheckpointingEnum : I32EnumAttr<"Checkpointing",
    "which forward activations are recomputed in backward", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Blocks", 1, "blocks">,  // each transformer block's
    // the rest of each block but its matmuls' and attention's outputs
    I32EnumAttrCase<"Selective", 2, "selective">
  ]> {
  let cppNamespace = "::fsdp::plan";
  let genSpecializedAttr = 0;
}
def FSDP_CheckpointingAttr
    : EnumAttr<FSDP_Dialect, FSDP_CheckpointingEnum, "checkpointing">;

def FSDP_TargetEnum : I32EnumAttr<"Target",
    "the kernels a plan runs on, whose scratch the memory plan places", [
    I32EnumAttrCase<"Cpu", 0, "cpu">,   // threads and MPI backends
    I32EnumAttrCase<"Cuda", 1, "cuda">  // the nccl backend
  ]> {
  let cppNamespace = "::fsdp::plan";
  let genSpecializedAttr = 0;
}
def FSDP_TargetAttr : EnumAttr<FSDP_Dialect, FSDP_TargetEnum, "target">;

def FSDP_MemoryAttr : AttrDef<FSDP_Dialect, "Memory"> {
  let mnemonic = "memory";
  let summary = "a rank's peak memory and its parts, in bytes";
  let description = [{
    What `fsdp-memory-plan` finds: the arena (`peak_bytes`), the most bytes
    live at once (`live_peak_bytes`), their parts at that moment, and the
    arena's bytes that no buffer uses then (`fragmentation_bytes`).
    ```mlir
    #fsdp.memory<peak_bytes = 5252, live_peak_bytes = 5120, params_bytes = 640,
      grads_bytes = 640, optimizer_bytes = 1280, unsharded_bytes = 1536,
      activations_bytes = 1024, fragmentation_bytes = 132>
    ```
  }];
  let parameters = (ins "int64_t":$peak_bytes, "int64_t":$live_peak_bytes,
                        "int64_t":$params_bytes, "int64_t":$grads_bytes,
                        "int64_t":$optimizer_bytes, "int64_t":$unsharded_bytes,
                        "int64_t":$activations_bytes, "int64_t":$fragmentation_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def FSDP_TokenShardAttr : AttrDef<FSDP_Dialect, "TokenShard"> {
  let mnemonic = "token_shard";
  let summary = "a tensor of this rank's 1/parts of a micro-batch's tokens (sequence parallelism)";
  let description = [{
    The encoding of an activation between tensor-parallel regions under
    sequence parallelism: of the micro-batch's B x S tokens, read in order
    (sequence by sequence), rank t of a tp group of `parts` holds tokens
    [t B S / parts, (t + 1) B S / parts) as one row block, `[1, B S / parts,
    ...]`; `fsdp.tp_all_gather` makes the whole `[B, S, ...]` of it, and
    `fsdp.tp_reduce_scatter` and `fsdp.tp_chunk` a part.
    ```mlir
    tensor<?x?x64xf32, #fsdp.token_shard<2>>
    ```
  }];
  let parameters = (ins "int64_t":$parts);
  let assemblyFormat = "`<` $parts `>`";
  let genVerifyDecl = 1;
}

// Figures of the plan that are counts, sizes or arena offsets: i64, read as
// int64_t (I64Attr's accessors return uint64_t).
def FSDP_I64Attr : SignlessIntegerAttrBase<I64, "64-bit signless integer attribute"> {
  let returnType = "int64_t";
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}
def FSDP_NonNegativeI64 : ConfinedAttr<FSDP_I64Attr, [IntNonNegative]>;
def FSDP_PositiveI64 : ConfinedAttr<FSDP_I64Attr, [IntPositive]>;

// A plan's op carries its own attributes and no others: an undeclared one
// (`ranks`, a misspelt `world_sise`) would be read by nothing. Attributes of
// other dialects (`dialect.name`) stay allowed, as MLIR's convention has it.
def FSDP_OnlyDeclaredAttrs : NativeOpTrait<"OnlyDeclaredAttrs"> {
  let cppNamespace = "::fsdp::plan";
}

class FSDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDP_Dialect, mnemonic, !listconcat(traits, [FSDP_OnlyDeclaredAttrs])>;

//===----------------------------------------------------------------------===//
// Units
//===----------------------------------------------------------------------===//

def FSDP_UnitOp : FSDP_Op<"unit", [Symbol]> {
  let summary = "a wrap unit: parameters gathered, freed and reduced together";
  let description = [{
    The unit's parameters are laid out one after another in a flat buffer of
    `numel` elements (`offsets[i]`, `sizes[i]` for `params[i]`), padded to
    `padded_numel`, a multiple of `shard_size`; rank r of a shard group owns
    elements `[r * shard_numel, (r + 1) * shard_numel)`. The memory plan adds
    the arena offsets of the rank's persistent buffers: its parameter shard
    (`shard_offset`), gradient shard (`grad_shard_offset`) and Adam's moments
    (`exp_avg_offset`, `exp_avg_sq_offset`) and, under `grad_sync = last`,
    its f32 gradient accumulation buffer of `padded_numel` elements
    (`accumulated_offset`), which lives across the micro-steps of a step.
    Under `offload = optimizer` the moments' offsets are in the rank's host
    pool, as are the f32 master copy of the parameter shard
    (`host_shard_offset`) and the gradient shard's host copy
    (`host_grad_offset`), which only such a plan has. Under `offload = all`
    the master copy is the parameter shard (no `shard_offset`) and, with
    bf16 parameters, `host_gather_offset` is its bf16 copy, which the
    gathers send.

    Under `tp = N` (tensor parallelism) the layout is of one rank's pieces
    of the parameters (`fsdp-tensor-parallel`), and the unit is sharded
    over the data-parallel dimension only. `tp_dims`, `tp_pieces`,
    `tp_sections` and `tp_partial` are each parameter's `nn.param` tensor
    parallel attributes (`tp_dim`, or -1 for a whole parameter; `tp_pieces`,
    1 for a whole one; `tp_sections`, 1 where it has none; whether its
    gradient is partial): the runtime cuts each rank's piece out of the
    full parameter by them, and `fsdp.all_reduce @u over tp` sums the
    partial ones.
    ```mlir
    fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
      params = ["transformer.h.0.ln_1.weight", ...], offsets = array<i64: 0, 64, ...>,
      sizes = array<i64: 64, 64, ...>, numel = 49984 : i64,
      padded_numel = 49984 : i64, shard_size = 4 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FSDP_I64Attr:$index, StrAttr:$module,
                       StrArrayAttr:$params, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes, FSDP_I64Attr:$numel,
                       FSDP_I64Attr:$padded_numel, FSDP_I64Attr:$shard_size,
                       OptionalAttr<FSDP_NonNegativeI64>:$shard_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$grad_shard_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$exp_avg_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$exp_avg_sq_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$accumulated_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$host_shard_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$host_grad_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$host_gather_offset,
                       OptionalAttr<DenseI64ArrayAttr>:$tp_dims,
                       OptionalAttr<DenseI64ArrayAttr>:$tp_pieces,
                       OptionalAttr<DenseI64ArrayAttr>:$tp_sections,
                       OptionalAttr<DenseBoolArrayAttr>:$tp_partial);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getShardNumel() { return getPaddedNumel() / getShardSize(); }
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
    forward ops, then the gradient ops, then the optimizer. Each pass records
    its settings on the step, and lowering reads them from here:

    - `fsdp-training-step`: the model (`model`, `model_type`), its blocks
      (`block_prefix`, `num_blocks`), `max_seq_len` and what it takes
      (`inputs_kind`, `image`) and the HF config it came from (`hf_config`,
      `generation_config`; nn.graph's);
    - `fsdp-activation-checkpointing`: `activation_checkpointing`,
      `checkpointed_blocks`;
    - `fsdp-insert-collectives`: `strategy`, `world_size`, `tp` (absent: 1;
      N: the ranks form a (world_size / N) x N mesh, rank r at data-parallel
      index r / N and tensor-parallel index r % N, and every FSDP group
      below is of data-parallel indices: ranks r with the same r % N),
      `shard_size` (the shard group; replica groups have
      `world_size / tp / shard_size` ranks),
      `grad_sync` (absent: `every`; `last`: the step's `reduce_scatter`,
      `all_reduce` and the waits for them run at the last micro-step of an
      optimizer step only, and `reduce_scatter` reads the unit's
      accumulation buffer, which each micro-step's `fsdp.accumulate` adds
      to), `reshard_after_backward` (absent: true; false: each unit's
      `all_gather` runs at the first micro-step of an optimizer step only
      and its gathered parameters stay for the step's micro-steps),
      `reshard_after_forward` (absent: true; N: after its forward a unit's
      gathered parameters are resharded to the reshard groups of N
      consecutive ranks by `fsdp.reshard`, and its backward gathers them
      within that group: `fsdp.all_gather @u over reshard`);
    - `fsdp-mixed-precision`: `param_dtype`, `reduce_dtype`, `compute_dtype`;
    - `fsdp-prefetch`: `forward_prefetch`, `backward_prefetch`,
      `max_inflight_gathers`;
    - `fsdp-memory-plan`: `target` (whose kernels' scratch it places),
      `micro_batch`, `seq_len`, `arena_bytes`, the inputs' offsets
      (`tokens_offset`, `targets_offset`), cuda's cuBLAS workspace
      (`workspace_offset`) and `memory`; `offload` (absent: none;
      `optimizer`: the moments and a master copy of each parameter shard
      live in a host pool of `host_bytes`, and `fsdp.optimizer_step` runs
      on the host; `all`: the parameter shards too, each shard-group
      `fsdp.all_gather` copying the rank's shard from the host first);
    - `fsdp-plan`: the cost model's `predicted_micro_step_s`,
      `predicted_optimizer_s`; the micro-steps of an optimizer step
      (`grad_accum`, the run's default); the model FLOPs of one micro-step
      over every rank (`model_flops_per_micro_step`) and, when a cluster
      file gave it, a device's peak FLOP/s in the compute dtype
      (`peak_flops`), from which fsdp-run reports MFU.

    Every rank runs the same step (SPMD): no op is for some ranks only.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs,
                       OptionalAttr<StrAttr>:$model,
                       OptionalAttr<StrAttr>:$model_type,
                       OptionalAttr<StrAttr>:$block_prefix,
                       OptionalAttr<FSDP_NonNegativeI64>:$num_blocks,
                       OptionalAttr<FSDP_PositiveI64>:$max_seq_len,
                       OptionalAttr<StrAttr>:$inputs_kind,
                       OptionalAttr<DictionaryAttr>:$image,
                       OptionalAttr<StrAttr>:$hf_config,
                       OptionalAttr<StrAttr>:$generation_config,
                       OptionalAttr<FSDP_CheckpointingAttr>:$activation_checkpointing,
                       OptionalAttr<FSDP_NonNegativeI64>:$checkpointed_blocks,
                       OptionalAttr<FSDP_StrategyAttr>:$strategy,
                       OptionalAttr<FSDP_PositiveI64>:$world_size,
                       OptionalAttr<FSDP_PositiveI64>:$shard_size,
                       OptionalAttr<FSDP_PositiveI64>:$tp,
                       OptionalAttr<FSDP_GradSyncAttr>:$grad_sync,
                       OptionalAttr<BoolAttr>:$reshard_after_backward,
                       OptionalAttr<FSDP_PositiveI64>:$reshard_after_forward,
                       OptionalAttr<FSDP_DtypeAttr>:$param_dtype,
                       OptionalAttr<FSDP_DtypeAttr>:$reduce_dtype,
                       OptionalAttr<FSDP_DtypeAttr>:$compute_dtype,
                       OptionalAttr<FSDP_TargetAttr>:$target,
                       OptionalAttr<FSDP_NonNegativeI64>:$workspace_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$forward_prefetch,
                       OptionalAttr<FSDP_BackwardPrefetchAttr>:$backward_prefetch,
                       OptionalAttr<FSDP_PositiveI64>:$max_inflight_gathers,
                       OptionalAttr<FSDP_PositiveI64>:$micro_batch,
                       OptionalAttr<FSDP_PositiveI64>:$seq_len,
                       OptionalAttr<FSDP_NonNegativeI64>:$arena_bytes,
                       OptionalAttr<FSDP_NonNegativeI64>:$tokens_offset,
                       OptionalAttr<FSDP_NonNegativeI64>:$targets_offset,
                       OptionalAttr<FSDP_MemoryAttr>:$memory,
                       OptionalAttr<FSDP_OffloadAttr>:$offload,
                       OptionalAttr<FSDP_NonNegativeI64>:$host_bytes,
                       OptionalAttr<F64Attr>:$predicted_micro_step_s,
                       OptionalAttr<F64Attr>:$predicted_optimizer_s,
                       OptionalAttr<FSDP_PositiveI64>:$grad_accum,
                       OptionalAttr<F64Attr>:$model_flops_per_micro_step,
                       OptionalAttr<F64Attr>:$peak_flops);
  let regions = (region SizedRegion<1>:$body);
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$name, "::mlir::FunctionType":$type), [{
      $_state.addRegion();
      $_state.getOrAddProperties<Properties>().sym_name = $_builder.getStringAttr(name);
      $_state.getOrAddProperties<Properties>().function_type = ::mlir::TypeAttr::get(type);
    }]>
  ];
  let extraClassDeclaration = [{
    ::mlir::Region *getCallableRegion() { return &getBody(); }
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() {
      return getFunctionType().getInputs();
    }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() {
      return getFunctionType().getResults();
    }
    /// The plan's figures where the pass that sets them has not run: one
    /// rank, unsharded, f32.
    int64_t getWorldSizeOr1() { return getWorldSize().value_or(1); }
    int64_t getShardSizeOr1() { return getShardSize().value_or(1); }
    /// The tensor-parallel degree; 1 without tensor parallelism.
    int64_t getTpOr1() { return getTp().value_or(1); }
    /// The data-parallel dimension of the mesh: world_size / tp.
    int64_t getDpSize() { return getWorldSizeOr1() / getTpOr1(); }
    ::fsdp::plan::Dtype getParamDtypeOrF32() {
      return getParamDtype().value_or(::fsdp::plan::Dtype::F32);
    }
    ::fsdp::plan::Dtype getReduceDtypeOrF32() {
      return getReduceDtype().value_or(::fsdp::plan::Dtype::F32);
    }
    ::fsdp::plan::Target getTargetOrCpu() {
      return getTarget().value_or(::fsdp::plan::Target::Cpu);
    }
    /// Whether gathered parameters stay across the step's micro-steps
    /// (reshard_after_backward = false): gathers run at the first only.
    bool keepsGatheredAcrossMicroSteps() {
      return getReshardAfterBackward() && !*getReshardAfterBackward();
    }
    /// The reshard groups' size under reshard_after_forward = N; 0: none.
    int64_t getReshardSizeOr0() { return getReshardAfterForward().value_or(0); }
    /// Whether reductions wait for the last micro-step (grad_sync = last).
    bool syncsAtLastMicroStep() {
      return getGradSync().value_or(::fsdp::plan::GradSync::Every) ==
             ::fsdp::plan::GradSync::Last;
    }
    /// Whether the optimizer's state lives in host memory (offload =
    /// optimizer).
    bool offloadsOptimizer() {
      return getOffload().value_or(::fsdp::plan::Offload::None) !=
             ::fsdp::plan::Offload::None;
    }
    /// Whether the parameter shards live in host memory too (offload =
    /// all).
    bool offloadsParams() {
      return getOffload().value_or(::fsdp::plan::Offload::None) == ::fsdp::plan::Offload::All;
    }
    ::fsdp::plan::Dtype getComputeDtypeOrF32() {
      return getComputeDtype().value_or(::fsdp::plan::Dtype::F32);
    }
  }];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
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
    In bf16 (`fsdp.all_gather @block0 in bf16`, mixed precision), each rank
    rounds its f32 shard to bf16 and the unsharded buffer holds bf16: half the
    bytes sent and kept. f32, the default, is written without a dtype.

    Over the shard group (the default, written without a group), from each
    rank's parameter shard. `over reshard` (under `reshard_after_forward =
    N`): from each rank's resharded copy (`fsdp.reshard`), over its reshard
    group of N consecutive ranks, as they are (the dtype they were gathered
    in, no rounding).
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, OptionalAttr<FSDP_NonNegativeI64>:$offset,
                       OptionalAttr<FSDP_DtypeAttr>:$dtype, OptionalAttr<FSDP_Group>:$group);
  let results = (outs FSDP_EventType:$event);
  let assemblyFormat = "$unit (`over` $group^)? (`in` $dtype^)? attr-dict";
  let hasVerifier = 1;
}

def FSDP_ReduceScatterOp : FSDP_Op<"reduce_scatter", [HasParent<"StepOp">]> {
  let summary = "sums a unit's gradients over the shard group into each rank's shard";
  let description = [{
    The reduced shard is added to the rank's gradient shard, which
    accumulates over micro-steps until the optimizer step. In bf16
    (`fsdp.reduce_scatter @block0 in bf16`) the gradients are rounded to bf16 before the reduction
    (half the bytes sent) and the bf16 sum is added to the f32 shard.
    Gradients computed in bf16 and reduced in f32 are widened first into
    staging of the unit's padded size, at `scratch_offset` (the memory plan
    sets it), live until the reduction's wait.
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, OptionalAttr<FSDP_DtypeAttr>:$dtype,
                       OptionalAttr<FSDP_NonNegativeI64>:$scratch_offset);
  let results = (outs FSDP_EventType:$event);
  let assemblyFormat = "$unit (`in` $dtype^)? attr-dict";
  let hasVerifier = 1;
}

def FSDP_AllReduceOp : FSDP_Op<"all_reduce", [HasParent<"StepOp">]> {
  let summary = "sums a unit's gradient shards over the replica group, in place";
  let description = [{
    Each shard is summed whole, so the all-reduce runs once an optimizer
    step, at its last micro-step, when the shard holds the step's sum (at
    an earlier one it would add the micro-steps before it again).

    `over tp` (under `tp = N`): sums, over the ranks that hold the same
    piece of a parameter (`tp_pieces`), the shard's elements of each
    parameter whose gradient is partial (`tp_partial`: each rank computed
    its heads' share), once an optimizer step, after the reduce-scatter
    (and the replica all-reduce).
    ```mlir
    %e = fsdp.all_reduce @block0 over tp
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, OptionalAttr<FSDP_Group>:$group);
  let results = (outs FSDP_EventType:$event);
  let assemblyFormat = "$unit (`over` $group^)? attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tensor parallelism
//===----------------------------------------------------------------------===//

def FSDP_TpCopyOp : FSDP_Op<"tp_copy", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "enters a tensor-parallel region: the identity, whose gradient is summed over tp";
  let description = [{
    Megatron's f: the input of the column-parallel linears that begin a
    region (q, k, v; gate and up), the same on every rank of the tp group.
    Forward it is its input; its gradient is the `fsdp.tp_all_reduce` of
    the region's partial input gradients. `fsdp-tensor-parallel` places it
    in the model's graph; `fsdp-training-step` builds its gradient and
    then reads its input in its place, so no plan holds one.
    ```mlir
    %xc = fsdp.tp_copy %x {module = "model.layers.0.self_attn"} : tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, OptionalAttr<StrAttr>:$module);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def FSDP_TpAllGatherOp : FSDP_Op<"tp_all_gather"> {
  let summary = "enters a tensor-parallel region under sequence parallelism: the tokens gathered";
  let description = [{
    Megatron's sequence-parallel g: each rank's part of the tokens
    (`#fsdp.token_shard<N>`) gathered over the tp group into the whole
    activation the region's column-parallel linears read, on the compute
    stream. Its gradient is the `fsdp.tp_reduce_scatter` of the region's
    partial input gradients. `offsets` is its result's arena offset.
    ```mlir
    %x = fsdp.tp_all_gather %p {module = "model.layers.0.self_attn"} : tensor<?x?x64xf32, #fsdp.token_shard<2>> -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, OptionalAttr<StrAttr>:$module,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets, UnitAttr:$recompute);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def FSDP_TpReduceScatterOp : FSDP_Op<"tp_reduce_scatter"> {
  let summary = "leaves a tensor-parallel region under sequence parallelism: summed, each rank its tokens";
  let description = [{
    Megatron's sequence-parallel g-bar: the row-parallel linear's partial
    products summed over the tp group, each rank keeping its part of the
    tokens (`#fsdp.token_shard<N>`), on the compute stream; then the bias,
    where the linear has one, added to that part. The gradient of its input
    is the `fsdp.tp_all_gather` of its result's; the bias's, `nn.bias_grad`
    of the rank's part, is partial (the tokens of the others are theirs).
    ```mlir
    %y = fsdp.tp_reduce_scatter %p : tensor<?x?x64xf32> -> tensor<?x?x64xf32, #fsdp.token_shard<2>>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<AnyRankedTensor>:$bias,
                       OptionalAttr<StrAttr>:$module,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets, UnitAttr:$recompute);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input (`bias` $bias^)? attr-dict `:` type($input) (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_TpChunkOp : FSDP_Op<"tp_chunk"> {
  let summary = "this rank's part of the tokens of an activation every rank of the tp group holds";
  let description = [{
    Sequence parallelism begins after the embeddings (computed whole on
    every rank) and for the targets: a local copy of the rank's part
    (`#fsdp.token_shard<N>`), no communication. Its gradient is the
    `fsdp.tp_all_gather` of its result's (each rank's part of the whole
    gradient); the targets take none.
    ```mlir
    %t = fsdp.tp_chunk %targets : tensor<?x?xi64> -> tensor<?x?xi64, #fsdp.token_shard<2>>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, OptionalAttr<StrAttr>:$module,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets, UnitAttr:$recompute);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def FSDP_TpUnchunkOp : FSDP_Op<"tp_unchunk"> {
  let summary = "the gradient of tp_chunk: the rank's part placed among zeros";
  let description = [{
    The whole tensor with the rank's part of the tokens where `fsdp.tp_chunk`
    took it and zeros elsewhere: the rank's share of the gradient of what
    every rank computed whole (the embeddings), whose parameters' gradients
    are then partial, summed over the tp group. Local, on the compute
    stream.
    ```mlir
    %d = fsdp.tp_unchunk %g : tensor<?x?x64xf32, #fsdp.token_shard<2>> -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, OptionalAttr<StrAttr>:$module,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets, UnitAttr:$recompute);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def FSDP_TpAllReduceOp : FSDP_Op<"tp_all_reduce", [AllTypesMatch<["input", "result"]>]> {
  let summary = "leaves a tensor-parallel region: sums its partial results over tp";
  let description = [{
    Megatron's g: the output of a row-parallel linear (o_proj, down_proj),
    each rank's product of its heads or columns, summed over the tp group
    on the compute stream (it blocks compute, as the next op reads it);
    then, where the linear has one, its `bias` is added once. The gradient
    of its input is its result's gradient (each rank's linear needs all
    of it); the bias's is `nn.bias_grad`. `offsets` is its result's arena
    offset, which the memory plan sets; `recompute` marks the copy
    activation checkpointing runs again in backward (as on nn's ops).
    ```mlir
    %y = fsdp.tp_all_reduce %p bias %b {module = "transformer.h.0.attn.c_proj"} : tensor<?x?x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<AnyRankedTensor>:$bias,
                       OptionalAttr<StrAttr>:$module,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets, UnitAttr:$recompute);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input (`bias` $bias^)? attr-dict `:` type($input) (`,` type($bias)^)?";
  let hasVerifier = 1;
}

def FSDP_CastOp : FSDP_Op<"cast", [HasParent<"StepOp">]> {
  let summary = "a parameter as compute reads it (mixed precision)";
  let description = [{
    The parameter rounded to bf16 (round to nearest even), in the compute
    dtype, its result's element type: bf16 (`--compute-dtype bf16`), or f32
    holding the bf16 values (`--param-dtype bf16 --compute-dtype f32`). It
    reads the unit's gathered buffer (bf16 when gathers are) or, for a unit
    that is not sharded, its f32 shard. A bf16 cast of a parameter gathered
    in bf16 is the gathered value itself: no buffer, no instruction.
    `offsets`, as on the nn ops, is the arena offset of its result, which the
    memory plan sets.
  }];
  let arguments = (ins AnyRankedTensor:$param, OptionalAttr<DenseI64ArrayAttr>:$offsets);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($param) `to` type($result)";
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
                       OptionalAttr<FSDP_NonNegativeI64>:$offset);
  let assemblyFormat = "$kind $unit attr-dict";
  let hasVerifier = 1;
}

def FSDP_FreeOp : FSDP_Op<"free", [HasParent<"StepOp">]> {
  let summary = "ends the life of a unit's unsharded parameters or gradients";
  let arguments = (ins FSDP_BufferKind:$kind, FlatSymbolRefAttr:$unit);
  let assemblyFormat = "$kind $unit attr-dict";
}

def FSDP_ReshardOp : FSDP_Op<"reshard", [HasParent<"StepOp">]> {
  let summary = "keeps this rank's 1/N of a unit's gathered parameters for its backward";
  let description = [{
    Under `reshard_after_forward = N` (FSDP2's int, ZeRO++'s hpZ): on the
    compute stream, after the unit's forward, member m of each reshard group
    (N consecutive ranks) copies elements `[m * P / N, (m + 1) * P / N)` of
    the unit's gathered buffer (P = `padded_numel`, in the dtype it was
    gathered in) to its resharded buffer at `offset` (the memory plan sets
    it), which lives until the unit's backward gathers it back over the
    reshard group (`fsdp.all_gather @block0 over reshard`) and frees it
    (`fsdp.free resharded @block0`). No communication: the copy is local.
    ```mlir
    fsdp.reshard @block0
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, OptionalAttr<FSDP_NonNegativeI64>:$offset);
  let assemblyFormat = "$unit attr-dict";
  let hasVerifier = 1;
}

def FSDP_AccumulateOp : FSDP_Op<"accumulate", [HasParent<"StepOp">]> {
  let summary = "adds a unit's unsharded gradients into its accumulation buffer";
  let description = [{
    Under `grad_sync = last` (FSDP's no-sync accumulation): on the compute
    stream, once the unit's gradients of this micro-step are complete, each
    element of its unsharded gradient buffer (in the compute dtype, widened
    from bf16) is added in f32 to the unit's accumulation buffer
    (`accumulated_offset`), which the last micro-step's `reduce_scatter`
    reduces and the optimizer step zeroes.
    ```mlir
    fsdp.accumulate @block0
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit);
  let assemblyFormat = "$unit attr-dict";
  let hasVerifier = 1;
}

def FSDP_GradNormOp : FSDP_Op<"grad_norm", [HasParent<"StepOp">]> {
  let summary = "the global gradient norm: local sums of squares, summed over the shard group";
  let description = [{
    On cuda, its partial sums live at `scratch_offset` (the memory plan sets
    it) until its wait.
  }];
  let arguments = (ins OptionalAttr<FSDP_NonNegativeI64>:$scratch_offset);
  let results = (outs FSDP_EventType:$event);
  let assemblyFormat = "attr-dict";
}

def FSDP_OptimizerStepOp : FSDP_Op<"optimizer_step", [HasParent<"StepOp">]> {
  let summary = "AdamW on this rank's shard of a unit (or of every unit, before units exist)";
  let description = [{
    Updates the parameter shard from the gradient shard and the two moments,
    after clipping by the global norm when asked; then zeroes the gradient
    shard (and, under `grad_sync = last`, the unit's accumulation buffer)
    for the next step's accumulation. Under `offload = optimizer` it copies
    the gradient shard to its host copy, updates the host's master copy of
    the parameter shard and the moments there (the same AdamW), and copies
    the master copy back to the parameter shard.
  }];
  let arguments = (ins OptionalAttr<FlatSymbolRefAttr>:$unit);
  let assemblyFormat = "($unit^)? attr-dict";
}

#endif // FSDP_FSDP_OPS
