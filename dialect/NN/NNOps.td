//===- NNOps.td - the model-graph dialect ------------------*- tablegen -*-===//
//
// `nn` describes a transformer's forward pass as the planner sees it: its
// parameters (with Hugging Face names, shapes and dtypes), the module each op
// belongs to, and the tensor ops whose forward and backward the runtime knows.
// Activations are `tensor<?x?xDxf32>`: batch and sequence stay dynamic so that
// one graph serves every micro-batch and sequence length.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_NN_OPS
#define FSDP_NN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/FunctionInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let summary = "Model graphs of transformer language models";
  let description = [{
    Parameters carry their Hugging Face names; every compute op may carry the
    dotted path of the module it belongs to (`module = "transformer.h.3.attn"`),
    which gives the module hierarchy the planner uses to form wrap units.
  }];
  let cppNamespace = "::fsdp::nn";
}

def NN_WeightLayout : I32EnumAttr<"WeightLayout",
    "storage layout of a linear weight", [
      I32EnumAttrCase<"in_out", 0>,   // HF Conv1D (GPT-2): weight[in, out]
      I32EnumAttrCase<"out_in", 1>    // torch.nn.Linear (LLaMA): weight[out, in]
    ]> {
  let cppNamespace = "::fsdp::nn";
}

def NN_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let description = [{
    An op's reverse-mode rule: given the gradients of its results, build the
    ops that compute the gradients of its operands. The training-step pass
    calls it on every forward op, last to first.
  }];
  let cppNamespace = "::fsdp::nn";
  let methods = [
    InterfaceMethod<[{
        Builds the gradient ops at the builder's insertion point.
        `resultGrads[i]` is null when result i does not reach the loss.
        Appends one value per operand to `operandGrads`: null where no
        gradient flows (token ids, positions).
      }], "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

// The ops the runtime runs as one compute instruction each (nn::ComputeOp).
def NN_ComputeOpTrait : NativeOpTrait<"ComputeOp"> {
  let cppNamespace = "::fsdp::nn";
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, traits>;

// Ops computing on activations: pure, tagged with their module, and each a
// kernel of the runtime's (a row of runtime/Ops.def of the same name). Their
// kernels' scratch is attached by the planner (planner/KernelScratch.h).
class NN_ComputeOp<string mnemonic, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(traits, [Pure, NN_ComputeOpTrait])> {
  let hasVerifier = 1;
}

def NN_FloatTensor : RankedTensorOf<[AnyFloat]>;
def NN_IndexTensor : RankedTensorOf<[AnySignlessInteger]>;

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def NN_GraphOp : NN_Op<"graph", [
    FunctionOpInterface, IsolatedFromAbove, Symbol,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "a model's forward pass, from tokens and targets to the loss";
  let description = [{
    One block. Its arguments are the input token ids and the target ids
    (`tensor<?x?xi64>`, batch by sequence); it returns the scalar mean loss.
    `block_prefix` names the list of repeated transformer blocks
    (`transformer.h` for GPT-2, `model.layers` for LLaMA) and `num_blocks`
    their count; `max_seq_len` is the longest sequence the model accepts.

    `inputs_kind` says what the model takes (docs/program-format.md,
    "Inputs"): `tokens` (absent: the default), `masked_tokens` (BERT's
    masked-LM batches: the same token ids, the targets -100 where a position
    is not selected) or `images` (ViT). An `images` graph's first argument is
    the patches, a float `[batch, P, C*ph*pw]` with P static, its second the
    labels `[batch, 1]`, and `image` gives the geometry as a dictionary of
    `height`, `width`, `channels`, `patch_height` and `patch_width`;
    `max_seq_len` is then P + 1 (the patches and the class token).

    `hf_config` is the HF `config.json` the graph was imported from, as JSON
    text (one object), and `generation_config` the `generation_config.json`
    of a model that generates (a causal LM): the file beside the config, or
    what transformers' `GenerationConfig.from_model_config` derives. Both
    travel to the program, whose `--save-weights DIR` writes them back
    (docs/weights-format.md); a graph of another origin has neither.

    ```mlir
    nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
        attributes {model_type = "gpt2", block_prefix = "transformer.h",
                    num_blocks = 12 : i64, max_seq_len = 1024 : i64} {
      ...
      nn.return %loss : tensor<f32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs,
                       StrAttr:$model_type,
                       StrAttr:$block_prefix,
                       I64Attr:$num_blocks,
                       I64Attr:$max_seq_len,
                       OptionalAttr<StrAttr>:$inputs_kind,
                       OptionalAttr<DictionaryAttr>:$image,
                       OptionalAttr<StrAttr>:$hf_config,
                       OptionalAttr<StrAttr>:$generation_config);
  let regions = (region SizedRegion<1>:$body);
  let extraClassDeclaration = [{
    ::mlir::Region *getCallableRegion() { return &getBody(); }
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() {
      return getFunctionType().getInputs();
    }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() {
      return getFunctionType().getResults();
    }
    /// The parameters in the order they are declared.
    std::vector<class ParamOp> getParams();
  }];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def NN_ReturnOp : NN_Op<"return", [Pure, HasParent<"GraphOp">, ReturnLike,
                                   Terminator]> {
  let summary = "returns the loss from an nn.graph";
  let arguments = (ins Variadic<AnyType>:$operands);
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
  let hasVerifier = 1;
}

// Not Pure: an unused parameter is still part of the model and must survive
// canonicalization.
def NN_ParamOp : NN_Op<"param", [
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "a trainable parameter, named as in the HF checkpoint";
  let description = [{
    ```mlir
    %transformer.h.0.attn.c_attn.weight = nn.param "transformer.h.0.attn.c_attn.weight" : tensor<768x2304xf32>
    ```
    The printer names the value after the parameter.
    The shape is static and the element type is the dtype the weights are
    stored in. A tied weight (GPT-2's `lm_head` reuses `transformer.wte`) is one
    `nn.param` used twice.

    Under tensor parallelism (`fsdp-tensor-parallel`) the type is one
    rank's piece: the full parameter cut into `tp_pieces` pieces along
    `tp_dim` (each of its `tp_sections` equal sections cut alike: GPT-2's
    fused q, k and v), held by tp / `tp_pieces` consecutive ranks each
    (fewer pieces than ranks: GQA's key and value heads, which ranks
    share). `tp_partial`: the parameter is used inside a tensor-parallel
    region by ranks that hold the same piece, each for its own heads, so
    its gradient is the sum over them. A parameter without them is whole
    on every rank.
    ```mlir
    %q = nn.param "model.layers.0.self_attn.q_proj.weight" {tp_dim = 0 : i64, tp_pieces = 2 : i64} : tensor<32x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<I64Attr>:$tp_dim,
                       OptionalAttr<I64Attr>:$tp_pieces, OptionalAttr<I64Attr>:$tp_sections,
                       UnitAttr:$tp_partial);
  let results = (outs NN_FloatTensor:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::mlir::StringAttr":$name), [{
      build($_builder, $_state, type, name, nullptr, nullptr, nullptr, nullptr);
    }]>
  ];
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of elements.
    int64_t getNumElements();
    /// The module that owns the parameter: the name without its last part.
    ::llvm::StringRef getModulePath();
    /// Tensor parallelism: the dimension it is cut along (-1: whole), the
    /// pieces (1: whole) and the sections of that dimension.
    int64_t getTpDimOrNone() { return getTpDim() ? (int64_t)*getTpDim() : -1; }
    int64_t getTpPiecesOr1() { return getTpPieces() ? (int64_t)*getTpPieces() : 1; }
    int64_t getTpSectionsOr1() { return getTpSections() ? (int64_t)*getTpSections() : 1; }
  }];
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

def NN_PositionIdsOp : NN_ComputeOp<"position_ids", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "positions 0..S-1 of each sequence, shaped like the token ids";
  let arguments = (ins NN_IndexTensor:$tokens, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_IndexTensor:$result);
  let assemblyFormat = "$tokens attr-dict `:` type($tokens) `->` type($result)";
}

def NN_TokenTypeIdsOp : NN_ComputeOp<"token_type_ids", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "token types, all 0, shaped like the token ids";
  let description = [{
    BERT's token types for one-segment samples: every token is of type 0
    (fsdp's samples carry no [SEP]; HF's default `token_type_ids` are
    zeros). Its result indexes an `nn.embedding` of
    `token_type_embeddings.weight` `[type_vocab_size, D]`.
    ```mlir
    %types = nn.token_type_ids %tokens {module = "bert.embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$tokens, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_IndexTensor:$result);
  let assemblyFormat = "$tokens attr-dict `:` type($tokens) `->` type($result)";
}

def NN_EmbeddingOp : NN_ComputeOp<"embedding", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "row lookup: ids[B,S] in table[V,D] gives [B,S,D]";
  let arguments = (ins NN_IndexTensor:$ids, NN_FloatTensor:$table,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` functional-type(operands, results)
  }];
}

def NN_LinearOp : NN_ComputeOp<"linear", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "x[..., in] times a weight, plus an optional bias[out]";
  let description = [{
    `in_out` reads the weight as `[in, out]` (HF Conv1D, GPT-2), `out_in` as
    `[out, in]` (torch.nn.Linear, LLaMA): `y = x W` or `y = x Wᵀ`.
    An `out_in` weight may have more than two dimensions, `[out, d1, ..., dk]`
    with `d1 * ... * dk = in`: read flat, it is the `[out, in]` matrix (the
    layout is contiguous, so nothing is copied). ViT's patch embedding is one:
    HF's Conv2d kernel `[D, C, p, p]` over patches flattened in (C, ph, pw)
    order.
    ```mlir
    %y = nn.linear in_out %x, %w, %b : (tensor<?x?x768xf32>, tensor<768x2304xf32>, tensor<2304xf32>) -> tensor<?x?x2304xf32>
    ```
  }];
  let arguments = (ins NN_WeightLayout:$layout, NN_FloatTensor:$input,
                       NN_FloatTensor:$weight,
                       Optional<NN_FloatTensor>:$bias,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $layout $input `,` $weight (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    int64_t getInFeatures();
    int64_t getOutFeatures();
  }];
}

def NN_LayerNormOp : NN_ComputeOp<"layer_norm", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "LayerNorm over the last dimension, with weight and bias";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_FloatTensor:$bias, F64Attr:$eps,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

def NN_RMSNormOp : NN_ComputeOp<"rms_norm", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "RMSNorm: x * rsqrt(mean(x^2) + eps) * weight";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       F64Attr:$eps, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def NN_RopeOp : NN_ComputeOp<"rope", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "rotary position embedding, HF rotate-half form, per head";
  let description = [{
    The input is `[B, S, num_heads * head_dim]`; each head's first and second
    halves rotate by `pos * inv_freq[i]`, `inv_freq[i] = theta^(-2i/head_dim)`
    unless `scaling` names transformers' rope_type of a frequency scaling
    (support/RopeScaling.h): `linear`, `dynamic`, `yarn` or `llama3`, with
    that kind's parameters, each required and no other: `scaling_factor`
    (all); `original_max_position` (dynamic: max_position_embeddings, the
    longest sequence; yarn, llama3: original_max_position_embeddings);
    `low_freq_factor`, `high_freq_factor` (llama3); `beta_fast`, `beta_slow`,
    `truncate`, `attention_factor` (yarn, resolved as transformers resolves
    them; the attention factor multiplies cos and sin). `inverse` rotates by
    the negated angle with the same factor: the transpose, so the gradient.
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       I64Attr:$num_heads, F64Attr:$theta,
                       OptionalAttr<StrAttr>:$scaling,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<I64Attr>:$original_max_position,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<F64Attr>:$beta_fast,
                       OptionalAttr<F64Attr>:$beta_slow,
                       OptionalAttr<BoolAttr>:$truncate,
                       OptionalAttr<F64Attr>:$attention_factor,
                       UnitAttr:$inverse,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_SplitOp : NN_ComputeOp<"split", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "splits the last dimension into equal parts (GPT-2's fused qkv)";
  let arguments = (ins NN_FloatTensor:$input, OptionalAttr<StrAttr>:$module);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
}

def NN_CausalAttentionOp : NN_ComputeOp<"causal_attention", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "causal scaled dot-product attention with grouped-query heads";
  let description = [{
    q is `[B, S, num_heads * D]`, k and v `[B, S, num_kv_heads * D]`; query head
    h reads key/value head `h / (num_heads / num_kv_heads)`. Scores are scaled
    by `1/sqrt(D)` and position i attends to positions 0..i; with `window`
    W (Mistral's sliding window) to positions i-W+1..i only.
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` functional-type(operands, results)
  }];
}

def NN_AttentionOp : NN_ComputeOp<"attention", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "bidirectional scaled dot-product attention with grouped-query heads";
  let description = [{
    The encoders' (BERT, ViT) attention: causal_attention without the mask.
    q is `[B, S, num_heads * D]`, k and v `[B, S, num_kv_heads * D]`; query head
    h reads key/value head `h / (num_heads / num_kv_heads)`. Scores are scaled
    by `1/sqrt(D)` and every position attends to every position 0..S-1.
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` functional-type(operands, results)
  }];
}

def NN_GeluOp : NN_ComputeOp<"gelu", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "GELU, tanh approximation (HF gelu_new) or exact (HF gelu)";
  let description = [{
    `approximate` as torch.nn.functional.gelu's: `"tanh"` (the default, elided
    when printed) is `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, HF's
    gelu_new; `"none"` is the exact `0.5 x (1 + erf(x / sqrt 2))`, HF's gelu.
  }];
  let arguments = (ins NN_FloatTensor:$input, OptionalAttr<StrAttr>:$module,
                       DefaultValuedStrAttr<StrAttr, "tanh">:$approximate);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_SiluMulOp : NN_ComputeOp<"silu_mul", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "SwiGLU's gate: silu(gate) * up";
  let arguments = (ins NN_FloatTensor:$gate, NN_FloatTensor:$up,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $gate `,` $up attr-dict `:` functional-type(operands, results)
  }];
}

def NN_AddOp : NN_ComputeOp<"add", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "elementwise sum of two activations of one shape (residual)";
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def NN_ClassTokenOp : NN_ComputeOp<"class_token", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "ViT's sequence: the class token before the patches, plus positions";
  let description = [{
    `x` is the patch embeddings `[B, P, D]`, `cls` the class token `[1, 1, D]`
    and `positions` the learned position embeddings `[1, P+1, D]` (HF ViT's
    `cls_token` and `position_embeddings`); the result is `[B, P+1, D]`,
    `concat(cls, x)` along the sequence plus `positions`. `positions` is
    static, so P+1 is known; x's and the result's sequence may be dynamic.
    ```mlir
    %h = nn.class_token %x, %cls, %pos : (tensor<?x196x768xf32>, tensor<1x1x768xf32>, tensor<1x197x768xf32>) -> tensor<?x197x768xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$cls,
                       NN_FloatTensor:$positions, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cls `,` $positions attr-dict `:` functional-type(operands, results)
  }];
}

def NN_FirstTokenOp : NN_ComputeOp<"first_token", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "row 0 of each sequence: [B, S, D] gives [B, 1, D] (ViT's CLS token)";
  let arguments = (ins NN_FloatTensor:$input, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_CrossEntropyOp : NN_ComputeOp<"cross_entropy", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "mean cross-entropy of logits[B,S,V] against targets[B,S]";
  let description = [{
    A target of -100 (PyTorch's `ignore_index`; masked-LM's unselected
    tokens) counts neither in the loss nor in its gradient: the mean is over
    the other targets.
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Mixture of experts: routing, the packed buffer, the experts, the combine
//===----------------------------------------------------------------------===//
//
// A sparse MLP over the T = B*S tokens of a micro-batch with E experts of
// which each token uses k: moe_route picks each token's k experts and gives
// each (token, choice) pair its row ("slot") in a packed buffer of exactly
// k*T rows ordered by expert; moe_permute copies the tokens into it, the
// experts' weights apply to their contiguous rows (moe_linear), and
// moe_combine sums each token's k rows back, weighted. Every buffer's size is
// fixed by B, S and k, whatever the routing: the plan's memory is exact.

def NN_MoeRouteOp : NN_ComputeOp<"moe_route", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "each token's top-k experts of router logits[B,S,E]: weights, experts, slots [B,S,k]";
  let description = [{
    p = softmax(logits) in f32 per token; the k largest p, ties to the lower
    expert index, in descending order; `weights` their p, divided by their
    sum when `norm_topk_prob` is set (Mixtral always, Qwen3-MoE as its
    config says), stored in the logits' dtype; `experts` their indices.
    `slots[b, s, j]` is the row of the pair (token b*S+s, choice j) in the
    packed buffer: the pairs sorted by expert, and within an expert by token,
    so expert e's rows are the count of pairs before it onward.
  }];
  let arguments = (ins NN_FloatTensor:$logits, I64Attr:$top_k,
                       UnitAttr:$norm_topk_prob, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$weights, NN_IndexTensor:$experts,
                      NN_IndexTensor:$slots);
  let assemblyFormat = [{
    $logits attr-dict `:` type($logits) `->` type(results)
  }];
}

def NN_MoePermuteOp : NN_ComputeOp<"moe_permute", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "the packed buffer [B,S,k,D]: row slots[t, j] holds token t of x[B,S,D]";
  let arguments = (ins NN_FloatTensor:$input, NN_IndexTensor:$slots,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $slots attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MoeLinearOp : NN_ComputeOp<"moe_linear", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "each expert's weight[out, in] over its rows of a packed buffer [B,S,k,in]";
  let description = [{
    The E weights are torch.nn.Linear's (out_in), one per expert in expert
    order; expert e's rows are those after the pairs of experts 0..e-1, as
    many as `experts` (moe_route's, [B,S,k]) names e. The row counts are
    known only when it runs; the buffers' sizes are not changed by them.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IndexTensor:$experts,
                       Variadic<NN_FloatTensor>:$weights, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $experts `,` $weights attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MoeCombineOp : NN_ComputeOp<"moe_combine", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "y[t] = sum over j of weights[t, j] * rows[slots[t, j]]: [B,S,k,D] to [B,S,D]";
  let description = [{
    The k terms are summed in f32 in ascending expert order (HF's loop over
    the experts), then stored in the result's dtype.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weights,
                       NN_IndexTensor:$slots, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weights `,` $slots attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MoeAuxLossOp : NN_ComputeOp<"moe_aux_loss", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface>]> {
  let summary = "the loss plus coef times HF's load-balancing loss over the router logits";
  let description = [{
    `loss` is the micro-batch's cross-entropy; `logits` the router logits
    [B,S,E] of each sparse layer. Over the L*T rows of all of them, with p =
    softmax in f32 and each row's top-k experts as moe_route picks them:
    f[j, e] = the share of rows whose choice j is e, P[e] = the mean of p;
    aux = E * sum over j, e of f[j, e] * P[e] (transformers'
    `load_balancing_loss_func`). The result is loss + coef * aux, in f32.
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$loss, Variadic<NN_FloatTensor>:$logits,
                       I64Attr:$top_k, F64Attr:$coef, OptionalAttr<StrAttr>:$module);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $loss `,` $logits attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Gradients: the ops the training step's backward pass is made of
//===----------------------------------------------------------------------===//

def NN_CrossEntropyGradOp : NN_ComputeOp<"cross_entropy_grad"> {
  let summary = "d(loss)/d(logits): (softmax(logits) - onehot(targets)) * loss_scale";
  let description = [{
    `loss_scale` is 1 / (tokens in the optimizer step's global batch), or
    of its targets that are not -100 (whose rows get zeros); the runtime
    supplies it, since gradient accumulation is a run-time choice.
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
}

def NN_LinearGradInputOp : NN_ComputeOp<"linear_grad_input"> {
  let summary = "dx = dy Wᵀ (in_out) or dy W (out_in)";
  let arguments = (ins NN_WeightLayout:$layout, NN_FloatTensor:$grad,
                       NN_FloatTensor:$weight, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $layout $grad `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def NN_LinearGradWeightOp : NN_ComputeOp<"linear_grad_weight"> {
  let summary = "dW = xᵀ dy (in_out) or dyᵀ x (out_in), summed over batch and sequence";
  let arguments = (ins NN_WeightLayout:$layout, NN_FloatTensor:$grad,
                       NN_FloatTensor:$input, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $layout $grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
}

def NN_BiasGradOp : NN_ComputeOp<"bias_grad"> {
  let summary = "db = dy summed over all but the last dimension";
  let arguments = (ins NN_FloatTensor:$grad, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
}

def NN_EmbeddingGradOp : NN_ComputeOp<"embedding_grad"> {
  let summary = "dtable: rows of dy added into the rows their ids name";
  let arguments = (ins NN_FloatTensor:$grad, NN_IndexTensor:$ids,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids attr-dict `:` functional-type(operands, results)
  }];
}

def NN_LayerNormGradOp : NN_ComputeOp<"layer_norm_grad"> {
  let summary = "dx, dweight, dbias of LayerNorm (statistics recomputed from x)";
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_FloatTensor:$weight, F64Attr:$eps,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def NN_RMSNormGradOp : NN_ComputeOp<"rms_norm_grad"> {
  let summary = "dx, dweight of RMSNorm (statistics recomputed from x)";
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_FloatTensor:$weight, F64Attr:$eps,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}

def NN_ConcatOp : NN_ComputeOp<"concat"> {
  let summary = "joins parts along the last dimension (the gradient of split)";
  let arguments = (ins Variadic<NN_FloatTensor>:$parts, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $parts attr-dict `:` functional-type(operands, results)
  }];
}

def NN_CausalAttentionGradOp : NN_ComputeOp<"causal_attention_grad"> {
  let summary = "dq, dk, dv of causal attention, recomputing the softmax row by row";
  let description = [{
    Operands: the output's gradient, q, k, v and the forward output (whose
    row-wise dot with its gradient gives softmax's backward term). No S×S
    matrix is kept between forward and backward. `window` as the forward's.
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$query,
                       NN_FloatTensor:$key, NN_FloatTensor:$value,
                       NN_FloatTensor:$output, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
                      NN_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value `,` $output attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_AttentionGradOp : NN_ComputeOp<"attention_grad"> {
  let summary = "dq, dk, dv of bidirectional attention, recomputing the softmax row by row";
  let description = [{
    As causal_attention_grad, for nn.attention: operands the output's
    gradient, q, k, v and the forward output; no S×S matrix is kept.
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$query,
                       NN_FloatTensor:$key, NN_FloatTensor:$value,
                       NN_FloatTensor:$output, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
                      NN_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value `,` $output attr-dict `:`
    functional-type(operands, results)
  }];
}

def NN_GeluGradOp : NN_ComputeOp<"gelu_grad"> {
  let summary = "dx = dy * gelu'(x), of the forward's `approximate` form";
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       OptionalAttr<StrAttr>:$module,
                       DefaultValuedStrAttr<StrAttr, "tanh">:$approximate);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
}

def NN_SiluMulGradOp : NN_ComputeOp<"silu_mul_grad"> {
  let summary = "dgate, dup of silu(gate) * up";
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$gate,
                       NN_FloatTensor:$up, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$gate_grad, NN_FloatTensor:$up_grad);
  let assemblyFormat = [{
    $grad `,` $gate `,` $up attr-dict `:` functional-type(operands, results)
  }];
}

def NN_ClassTokenGradOp : NN_ComputeOp<"class_token_grad"> {
  let summary = "dx, dcls, dpositions of class_token: rows 1.. of dy, and dy summed over the batch";
  let arguments = (ins NN_FloatTensor:$grad, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$cls_grad,
                      NN_FloatTensor:$positions_grad);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type(results)";
}

def NN_FirstTokenGradOp : NN_ComputeOp<"first_token_grad"> {
  let summary = "dx of first_token: dy in row 0 of each sequence, zeros elsewhere";
  let description = [{
    The result's type (that of first_token's input) gives the sequence length.
  }];
  let arguments = (ins NN_FloatTensor:$grad, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
}

def NN_MoeRouteGradOp : NN_ComputeOp<"moe_route_grad"> {
  let summary = "dlogits[B,S,E] of moe_route from dweights[B,S,k] (p recomputed from logits)";
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$logits,
                       NN_IndexTensor:$experts, UnitAttr:$norm_topk_prob,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $experts attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MoePermuteGradOp : NN_ComputeOp<"moe_permute_grad"> {
  let summary = "dx[t] = sum over j of dpacked[slots[t, j]]: [B,S,k,D] to [B,S,D]";
  let arguments = (ins NN_FloatTensor:$grad, NN_IndexTensor:$slots,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $slots attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MoeLinearGradInputOp : NN_ComputeOp<"moe_linear_grad_input"> {
  let summary = "dx = dy W_e over each expert's rows";
  let arguments = (ins NN_FloatTensor:$grad, NN_IndexTensor:$experts,
                       Variadic<NN_FloatTensor>:$weights, OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $experts `,` $weights attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MoeLinearGradWeightOp : NN_ComputeOp<"moe_linear_grad_weight"> {
  let summary = "dW_e = dyᵀ x over expert e's rows (zeros for an expert no token chose)";
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_IndexTensor:$experts, OptionalAttr<StrAttr>:$module);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let assemblyFormat = [{
    $grad `,` $input `,` $experts attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MoeCombineGradOp : NN_ComputeOp<"moe_combine_grad"> {
  let summary = "drows, dweights of moe_combine";
  let description = [{
    drows[slots[t, j]] = weights[t, j] * dy[t]; dweights[t, j] = the f32 dot
    product of rows[slots[t, j]] and dy[t].
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_FloatTensor:$weights, NN_IndexTensor:$slots,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weights_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weights `,` $slots attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MoeAuxLossGradOp : NN_ComputeOp<"moe_aux_loss_grad"> {
  let summary = "d(coef * aux)/d(logits) of each sparse layer, times the micro-batch's loss weight";
  let description = [{
    The runtime supplies `loss_scale` as to cross_entropy_grad (one over the
    step's counted targets); the micro-batch's share of the step's loss is
    its T tokens times that, so each row's gradient is
    coef * T * loss_scale * E / (L*T) * p * (f' - sum(p * f')), f'[e] the
    share of rows choosing e summed over the choices.
  }];
  let arguments = (ins Variadic<NN_FloatTensor>:$logits, I64Attr:$top_k, F64Attr:$coef,
                       OptionalAttr<StrAttr>:$module);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let assemblyFormat = [{
    $logits attr-dict `:` functional-type(operands, results)
  }];
}

#endif // FSDP_NN_OPS
