//===- Passes.td - the planner's passes --------------------*- tablegen -*-===//
//
// fsdp-plan runs them in this order; each also runs alone in fsdp-opt.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_PLANNER_PASSES
#define FSDP_PLANNER_PASSES

include "mlir/Pass/PassBase.td"

def TensorParallel : Pass<"fsdp-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "cuts the model's graph into one tensor-parallel rank's";
  let description = [{
    Megatron's tensor parallelism over `tp` ranks, on the `nn.graph` before
    the training step is built. Each attention is split by heads: the
    linears that make its query, key and value (through rope, the q/k
    norms and GPT-2's split) become column-parallel, each rank holding
    num_heads / tp query heads and num_kv_heads / tp key/value heads (or,
    where tp is a multiple of num_kv_heads, the one key/value head its
    query heads read, shared by tp / num_kv_heads ranks); the linear that
    reads its output becomes row-parallel. Each MLP (a `silu_mul` of two
    linears, or a `gelu` of one, read by linears only) is split by its
    intermediate columns alike. Embeddings, norms between regions and the
    head stay whole on every rank. The parameters' types become each
    rank's piece and carry `tp_dim`, `tp_pieces`, `tp_sections` and
    `tp_partial` (the q/k norms, and key/value heads that ranks share,
    whose gradients the ranks sharing them sum).

    `sequence-parallel` (the default; Megatron's sequence parallelism):
    between the regions each rank holds its part of the micro-batch's
    tokens (`#fsdp.token_shard<tp>`): `fsdp.tp_chunk` takes it of what the
    stem (the ops before the first block: embeddings) made whole and of the
    targets, each region begins with an `fsdp.tp_all_gather` and ends with
    an `fsdp.tp_reduce_scatter` (the bias added to the part), and the
    norms, residual adds, head and loss run on the part. Every parameter
    that is not cut then has a partial gradient (`tp_partial`, summed over
    the tp group). A model with ops that read tokens by position outside
    attention (ViT's class token) is refused; plan it with
    `sequence-parallel=false`, which keeps whole activations between the
    regions: an `fsdp.tp_copy` enters each region and an
    `fsdp.tp_all_reduce` (with the row-parallel linear's bias, added once)
    leaves it, and the gradients of the parameters outside the regions
    are complete on every rank.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1", "tensor-parallel ranks (1: none)">,
    Option<"sequenceParallel", "sequence-parallel", "bool", /*default=*/"true",
           "between the regions each rank holds its part of the tokens (Megatron's sequence "
           "parallelism): regions gather them and scatter their sums">,
  ];
  let dependentDialects = ["::fsdp::plan::FSDPDialect"];
  let statistics = [
    Statistic<"numRegions", "regions", "Tensor-parallel regions formed">,
  ];
}

def TrainingStep : Pass<"fsdp-training-step", "mlir::ModuleOp"> {
  let summary = "builds the training step: forward, reverse-mode backward, optimizer";
  let description = [{
    Replaces the module's `nn.graph` with an `fsdp.step` holding the forward
    ops, the gradient ops each forward op's GradientOpInterface builds (last
    op first, summing the gradients of values used twice), an `fsdp.grad`
    right where each parameter's gradient is complete, and one
    `fsdp.optimizer_step`.
  }];
  let dependentDialects = ["::fsdp::plan::FSDPDialect"];
  let statistics = [
    Statistic<"numGradOps", "gradient-ops", "Gradient ops built">,
  ];
}

def ActivationCheckpointing : Pass<"fsdp-activation-checkpointing", "mlir::ModuleOp"> {
  let summary = "recomputes each block's forward in backward instead of keeping it";
  let description = [{
    `blocks`: of each transformer block's forward values, only those that
    leave the block (its output, the next block's input) stay alive until
    backward; the others are recomputed by a copy of the block's forward ops
    placed right before the block's first gradient op that needs them, and
    the gradient ops read the copies. Later passes gather the block's
    parameters for the recompute and the memory plan accounts for it.

    `selective`: the outputs of each block's matmuls (`nn.linear`) and
    attention (`nn.causal_attention`) stay alive until backward, with the
    block's input; the rest that backward reads (norms, rope, activations,
    residual adds, split) is recomputed from them, each copy placed right
    before the first gradient op (or copy) that reads it, so that a copy
    lives no longer in backward than it must.
  }];
  let options = [
    Option<"mode", "mode", "::fsdp::plan::Checkpointing",
           /*default=*/"::fsdp::plan::Checkpointing::Blocks", "none, blocks or selective",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::Checkpointing::None, "none", "keep every activation"),
               clEnumValN(::fsdp::plan::Checkpointing::Blocks, "blocks",
                          "recompute each block's forward in backward"),
               clEnumValN(::fsdp::plan::Checkpointing::Selective, "selective",
                          "keep each block's matmul and attention outputs, recompute "
                          "the rest in backward"))}]>,
    Option<"count", "count", "int64_t", /*default=*/"-1",
           "checkpoint only the first N blocks (-1: every block)">,
  ];
  let statistics = [Statistic<"numRecomputed", "recomputed-ops", "Forward ops recomputed">];
}

def WrapUnits : Pass<"fsdp-wrap-units", "mlir::ModuleOp"> {
  let summary = "groups parameters into wrap units with flat, padded layouts";
  let description = [{
    `block`: one unit per transformer block and a root unit for everything
    else (embeddings, final norm, head), as FSDP wraps; `experts`: as
    `block`, and each block's experts (the parameters under
    `<block>.<module>.experts.`) a unit of their own after it; `size:N`: contiguous
    units of at least N parameters in declaration order; `none`: one unit.
    Each unit's flat size is padded to a multiple of `shard-size`.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"block\"",
           "block, experts, size:N or none">,
    Option<"shardSize", "shard-size", "int64_t", /*default=*/"1",
           "ranks a unit is sharded over (the shard group's size)">,
  ];
  let statistics = [Statistic<"numUnits", "units", "Wrap units formed">];
}

def InsertCollectives : Pass<"fsdp-insert-collectives", "mlir::ModuleOp"> {
  let summary = "places all-gathers, waits, frees, reductions and per-unit optimizer steps";
  let description = [{
    Without prefetch: each gather right before the unit's first use, its free
    right after the last use of that phase; the gradient buffer allocated
    before the unit's first gradient, reduce-scattered (and, across replica
    groups, all-reduced) after its last, and freed once the next unit's
    reduction is issued. Strategies: `full-shard` (ZeRO-3: gather for forward
    and again for backward), `shard-grad-op` (ZeRO-2: gather once, keep until
    the unit's backward is done), `no-shard` (DDP: replicated parameters,
    all-reduced gradients), `hybrid-shard` (full-shard within groups of
    `shard-size`, all-reduce across them).

    `grad-sync=last` (FSDP's no-sync accumulation, for gradient
    accumulation): each unit's gradients, once complete, are added by an
    `fsdp.accumulate` into the unit's f32 accumulation buffer and their
    buffer is freed at once; the reduce-scatter (and all-reduce) reads the
    accumulation buffer and runs at the last micro-step of the optimizer
    step only, waited for at the next unit's reduction as with `every`.

    `reshard-after-backward=false` (FSDP2's set_reshard_after_backward,
    for gradient accumulation): each sharded unit is gathered once, before
    its first use, and kept until its last (as shard-grad-op keeps it); its
    gather runs at the first micro-step of an optimizer step only, and its
    gathered parameters stay for all of the step's micro-steps.

    `reshard-after-forward=N` (FSDP2's int, ZeRO++'s hpZ; full-shard and
    hybrid-shard): after a unit's forward, `fsdp.reshard` keeps this rank's
    1/N of its gathered parameters before they are freed, and the unit's
    backward gathers them over its reshard group of N consecutive ranks
    (`fsdp.all_gather @u over reshard`) instead of over the shard group,
    freeing the resharded copy once that gather is waited for. N divides
    the shard group's size and is smaller; 0 (the default) reshards to the
    shard group (full-shard's behaviour). The unit kept from forward to
    backward (the one computing last in forward) is not resharded.

    `tp=N` (after `fsdp-tensor-parallel`): the world is a (world / N) x N
    mesh, tp innermost; the strategy's groups are of the data-parallel
    dimension (the shard group's ranks hold the same tensor-parallel
    index), and each unit with a parameter whose gradient is partial
    (`tp_partial`) gets an `fsdp.all_reduce @u over tp` after its
    reduction, waited for with it.
  }];
  let options = [
    Option<"strategy", "strategy", "::fsdp::plan::Strategy",
           /*default=*/"::fsdp::plan::Strategy::FullShard",
           "full-shard, shard-grad-op, no-shard or hybrid-shard",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::Strategy::FullShard, "full-shard",
                          "ZeRO-3: gather for forward and again for backward"),
               clEnumValN(::fsdp::plan::Strategy::ShardGradOp, "shard-grad-op",
                          "ZeRO-2: gather once, keep until the unit's backward is done"),
               clEnumValN(::fsdp::plan::Strategy::NoShard, "no-shard",
                          "DDP: replicated parameters, all-reduced gradients"),
               clEnumValN(::fsdp::plan::Strategy::HybridShard, "hybrid-shard",
                          "full-shard within groups of shard-size, all-reduce across"))}]>,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1", "ranks">,
    Option<"shardSize", "shard-size", "int64_t", /*default=*/"0",
           "the shard group's size under hybrid-shard (0: the world); the other strategies fix it">,
    Option<"gradSync", "grad-sync", "::fsdp::plan::GradSync",
           /*default=*/"::fsdp::plan::GradSync::Every", "every or last",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::GradSync::Every, "every",
                          "each micro-step reduces its gradients"),
               clEnumValN(::fsdp::plan::GradSync::Last, "last",
                          "micro-steps accumulate unsharded gradients; the last reduces them"))}]>,
    Option<"reshardAfterBackward", "reshard-after-backward", "bool", /*default=*/"true",
           "false: gathered parameters stay across the step's micro-steps">,
    Option<"reshardAfterForward", "reshard-after-forward", "int64_t", /*default=*/"0",
           "N: after forward, keep 1/N of each unit's parameters and gather them in backward "
           "over groups of N consecutive ranks; 0: free them">,
    Option<"tp", "tp", "int64_t", /*default=*/"1",
           "tensor-parallel ranks, innermost in the mesh (1: none)">,
  ];
  let statistics = [Statistic<"numCollectives", "collectives", "Collectives placed">];
}

def MixedPrecision : Pass<"fsdp-mixed-precision", "mlir::ModuleOp"> {
  let summary = "bf16 parameters for compute and communication, f32 master state";
  let description = [{
    `param-dtype=bf16`: gathers send and keep bf16, and every compute use of a
    parameter reads it through an `fsdp.cast` placed right before the op;
    shards, master weights and optimizer state stay f32. `reduce-dtype=bf16`:
    gradients are reduced in bf16 and accumulated into the f32 shard.
    `compute-dtype=bf16`: every activation and activation gradient, and each
    parameter gradient, is a bf16 value (the loss stays f32); every compute
    use of a parameter reads it through an `fsdp.cast` to bf16 (which is the
    gathered value itself where gathers are bf16); the unsharded gradient
    buffers hold bf16.
  }];
  let options = [
    Option<"paramDtype", "param-dtype", "::fsdp::plan::Dtype",
           /*default=*/"::fsdp::plan::Dtype::F32", "f32 or bf16",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::Dtype::F32, "f32", "f32 parameters"),
               clEnumValN(::fsdp::plan::Dtype::BF16, "bf16", "bf16 gathers and compute"))}]>,
    Option<"reduceDtype", "reduce-dtype", "::fsdp::plan::Dtype",
           /*default=*/"::fsdp::plan::Dtype::F32", "f32 or bf16",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::Dtype::F32, "f32", "f32 reductions"),
               clEnumValN(::fsdp::plan::Dtype::BF16, "bf16", "bf16 reductions"))}]>,
    Option<"computeDtype", "compute-dtype", "::fsdp::plan::Dtype",
           /*default=*/"::fsdp::plan::Dtype::F32", "f32 or bf16",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::Dtype::F32, "f32", "f32 matmuls and activations"),
               clEnumValN(::fsdp::plan::Dtype::BF16, "bf16",
                          "bf16 matmul operands and activations"))}]>,
  ];
}

def Prefetch : Pass<"fsdp-prefetch", "mlir::ModuleOp"> {
  let summary = "issues all-gathers early so that they overlap compute";
  let description = [{
    Forward: while unit i computes, the gathers of units up to i+K are in
    flight. Backward: `pre` issues the next unit's gather before the current
    unit's gradient ops, `post` after them, `none` at first use. At most
    `max-inflight-gathers` units are gathered ahead of the one computing
    (FSDP's rate limiter); a gather that would exceed it waits for a free.
  }];
  let options = [
    Option<"forwardPrefetch", "forward-prefetch", "int64_t", /*default=*/"1",
           "units gathered ahead in forward">,
    Option<"backwardPrefetch", "backward-prefetch", "::fsdp::plan::BackwardPrefetch",
           /*default=*/"::fsdp::plan::BackwardPrefetch::Pre", "pre, post or none",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::BackwardPrefetch::Pre, "pre",
                          "before the current unit's gradient ops"),
               clEnumValN(::fsdp::plan::BackwardPrefetch::Post, "post", "after them"),
               clEnumValN(::fsdp::plan::BackwardPrefetch::None, "none", "at first use"))}]>,
    Option<"maxInflightGathers", "max-inflight-gathers", "int64_t", /*default=*/"2",
           "units gathered ahead of the one computing, at most">,
  ];
}

def MemoryPlan : Pass<"fsdp-memory-plan", "mlir::ModuleOp"> {
  let summary = "lays out every buffer of a rank in one arena";
  let description = [{
    Sizes every buffer for the micro-batch and sequence length: parameter,
    gradient and Adam-moment shards (live throughout), gathered parameters
    and unsharded gradients (from gather/alloc to free), inputs, activations
    and temporaries (definition to last use) and kernel scratch: what each
    op's kernel needs on the target (KernelScratchOpInterface), the
    reduce-scatter's and grad-norm's staging, and on cuda cuBLAS's workspace
    for the whole step, so that the arena is every byte a rank uses. Assigns
    offsets greedily, largest first, so that no two live buffers overlap, and
    records the peak with its breakdown on the step. With `offload=optimizer`
    the Adam moments, an f32 master copy of each parameter shard and a host
    copy of each gradient shard are laid out in a host pool instead
    (`host_bytes` on the step), one after another, and the arena no longer
    holds the moments. With `offload=all` the arena holds no parameter
    shard either: the master copy is the shard, and with bf16 parameters
    the host pool also holds its bf16 copy for the gathers.
  }];
  let options = [
    Option<"microBatch", "micro-batch", "int64_t", /*default=*/"1", "sequences per rank">,
    Option<"seqLen", "seq-len", "int64_t", /*default=*/"0", "tokens per sequence (0: the model's maximum)">,
    Option<"target", "target", "::fsdp::plan::Target",
           /*default=*/"::fsdp::plan::Target::Cpu", "cpu or cuda: whose kernels' scratch",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::Target::Cpu, "cpu", "the CPU kernels"),
               clEnumValN(::fsdp::plan::Target::Cuda, "cuda", "the CUDA kernels"))}]>,
    Option<"offload", "offload", "::fsdp::plan::Offload",
           /*default=*/"::fsdp::plan::Offload::None",
           "none, optimizer or all: what of a rank's state lives in host memory",
           [{::llvm::cl::values(
               clEnumValN(::fsdp::plan::Offload::None, "none", "all on the device"),
               clEnumValN(::fsdp::plan::Offload::Optimizer, "optimizer",
                          "the moments and master shards on the host"),
               clEnumValN(::fsdp::plan::Offload::All, "all",
                          "the parameter shards on the host too"))}]>,
  ];
}

def VerifyPlan : Pass<"fsdp-verify-plan", "mlir::ModuleOp"> {
  let summary = "proves a plan safe or rejects it at the offending op";
  let description = [{
    Every parameter use comes after its unit's gather has been waited for and
    before its free; every unit's gradient is reduced exactly once, after its
    last contribution and before its buffer is freed; every rank issues the
    same collectives in the same order; no two live buffers overlap.
  }];
}

#endif // FSDP_PLANNER_PASSES
