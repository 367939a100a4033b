// fsdp-tensor-parallel cuts the model's graph into one tensor-parallel
// rank's: GPT-2's fused q, k, v in three sections cut alike, the attention
// by heads, the MLP by columns, the row-parallel bias added once after the
// sum; embeddings, norms between regions and the head stay whole.
// Without sequence parallelism the activations between the regions are
// whole: a region begins with fsdp.tp_copy and ends with fsdp.tp_all_reduce.
// RUN: fsdp-opt %s --split-input-file --fsdp-tensor-parallel="tp=2 sequence-parallel=false" | FileCheck %s
// The training step reads the copy's input in its place; the copy's
// gradient is the sum of the region's input gradients.
// RUN: fsdp-opt %s --split-input-file --fsdp-tensor-parallel="tp=2 sequence-parallel=false" --fsdp-training-step | FileCheck %s --check-prefix=STEP
// Shared key/value heads (GQA, tp a multiple of them) and q/k norms.
// RUN: fsdp-opt %s --split-input-file --fsdp-tensor-parallel="tp=4 sequence-parallel=false" | FileCheck %s --check-prefix=GQA
// Sequence parallelism (the default): between the regions each rank holds
// its part of the tokens; every parameter not cut has a partial gradient.
// RUN: fsdp-opt %s --split-input-file --fsdp-tensor-parallel=tp=2 | FileCheck %s --check-prefix=SP
// RUN: fsdp-opt %s --split-input-file --fsdp-tensor-parallel=tp=2 --fsdp-training-step | FileCheck %s --check-prefix=SPSTEP
// tp=1 changes nothing.
// RUN: fsdp-opt %s --split-input-file --fsdp-tensor-parallel=tp=1 | FileCheck %s --check-prefix=NONE

nn.graph @gpt(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "h", num_blocks = 1 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte.weight" : tensor<16x8xf32>
  %ln = nn.param "h.0.ln_1.weight" : tensor<8xf32>
  %caw = nn.param "h.0.attn.c_attn.weight" : tensor<8x24xf32>
  %cab = nn.param "h.0.attn.c_attn.bias" : tensor<24xf32>
  %cpw = nn.param "h.0.attn.c_proj.weight" : tensor<8x8xf32>
  %cpb = nn.param "h.0.attn.c_proj.bias" : tensor<8xf32>
  %fcw = nn.param "h.0.mlp.c_fc.weight" : tensor<8x32xf32>
  %fcb = nn.param "h.0.mlp.c_fc.bias" : tensor<32xf32>
  %mpw = nn.param "h.0.mlp.c_proj.weight" : tensor<32x8xf32>
  %x = nn.embedding %tokens, %wte {module = "wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %n = nn.rms_norm %x, %ln {eps = 1.0e-5 : f64, module = "h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %qkv = nn.linear in_out %n, %caw, %cab {module = "h.0.attn.c_attn"} : (tensor<?x?x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<?x?x24xf32>
  %q, %k, %v = nn.split %qkv {module = "h.0.attn"} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
  %a = nn.causal_attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 4 : i64, module = "h.0.attn"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %o = nn.linear in_out %a, %cpw, %cpb {module = "h.0.attn.c_proj"} : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %r = nn.add %x, %o {module = "h.0"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %h = nn.linear in_out %r, %fcw, %fcb {module = "h.0.mlp.c_fc"} : (tensor<?x?x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %g = nn.gelu %h {module = "h.0.mlp.act"} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
  %m = nn.linear in_out %g, %mpw {module = "h.0.mlp.c_proj"} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
  %r2 = nn.add %r, %m {module = "h.0"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %r2, %wte {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// CHECK-LABEL: nn.graph @gpt
// CHECK: %wte.weight = nn.param "wte.weight" : tensor<16x8xf32>
// CHECK: %h.0.ln_1.weight = nn.param "h.0.ln_1.weight" : tensor<8xf32>
// CHECK: nn.param "h.0.attn.c_attn.weight" {tp_dim = 1 : i64, tp_pieces = 2 : i64, tp_sections = 3 : i64} : tensor<8x12xf32>
// CHECK: nn.param "h.0.attn.c_attn.bias" {tp_dim = 0 : i64, tp_pieces = 2 : i64, tp_sections = 3 : i64} : tensor<12xf32>
// CHECK: nn.param "h.0.attn.c_proj.weight" {tp_dim = 0 : i64, tp_pieces = 2 : i64} : tensor<4x8xf32>
// CHECK: %h.0.attn.c_proj.bias = nn.param "h.0.attn.c_proj.bias" : tensor<8xf32>
// CHECK: nn.param "h.0.mlp.c_fc.weight" {tp_dim = 1 : i64, tp_pieces = 2 : i64} : tensor<8x16xf32>
// CHECK: nn.param "h.0.mlp.c_fc.bias" {tp_dim = 0 : i64, tp_pieces = 2 : i64} : tensor<16xf32>
// CHECK: nn.param "h.0.mlp.c_proj.weight" {tp_dim = 0 : i64, tp_pieces = 2 : i64} : tensor<16x8xf32>
// CHECK: %[[N:.*]] = nn.rms_norm
// CHECK-NEXT: %[[C:.*]] = fsdp.tp_copy %[[N]] {module = "h.0.attn"} : tensor<?x?x8xf32>
// CHECK-NEXT: %[[QKV:.*]] = nn.linear in_out %[[C]], %h.0.attn.c_attn.weight, %h.0.attn.c_attn.bias {{.*}} -> tensor<?x?x12xf32>
// CHECK-NEXT: nn.split %[[QKV]] {{.*}} -> tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>
// CHECK-NEXT: nn.causal_attention {{.*}} {module = "h.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} {{.*}} -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[O:.*]] = nn.linear in_out %{{.*}}, %h.0.attn.c_proj.weight {module = "h.0.attn.c_proj"} : (tensor<?x?x4xf32>, tensor<4x8xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[S:.*]] = fsdp.tp_all_reduce %[[O]] bias %h.0.attn.c_proj.bias {module = "h.0.attn.c_proj"} : tensor<?x?x8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[R:.*]] = nn.add %{{.*}}, %[[S]]
// CHECK-NEXT: %[[RC:.*]] = fsdp.tp_copy %[[R]] {module = "h.0.mlp.act"}
// CHECK-NEXT: nn.linear in_out %[[RC]], %h.0.mlp.c_fc.weight, %h.0.mlp.c_fc.bias {{.*}} -> tensor<?x?x16xf32>
// CHECK-NEXT: nn.gelu {{.*}} -> tensor<?x?x16xf32>
// CHECK-NEXT: %[[M:.*]] = nn.linear in_out
// CHECK-NEXT: %[[MS:.*]] = fsdp.tp_all_reduce %[[M]] {module = "h.0.mlp.c_proj"} : tensor<?x?x8xf32>
// CHECK-NEXT: nn.add %[[R]], %[[MS]]
// CHECK-NEXT: nn.linear out_in %{{.*}}, %wte.weight {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>

// STEP-LABEL: fsdp.step @train_step
// STEP-NOT: fsdp.tp_copy
// STEP: %[[S:.*]] = fsdp.tp_all_reduce %{{.*}} bias %h.0.attn.c_proj.bias
// The backward: the row-parallel sum passes its gradient through; the
// bias's is summed over the rows; each region's input gradient is summed
// over tp.
// STEP: nn.linear_grad_input in_out %[[DM:[^,]*]], %h.0.mlp.c_proj.weight
// STEP: %[[DFC:.*]] = nn.linear_grad_input in_out %{{.*}}, %h.0.mlp.c_fc.weight
// STEP: fsdp.tp_all_reduce %[[DFC]] {module = "h.0.mlp.act"} : tensor<?x?x8xf32>
// STEP: nn.bias_grad %{{.*}} {module = "h.0.attn.c_proj"} : tensor<?x?x8xf32> -> tensor<8xf32>
// STEP: %[[DQKV:.*]] = nn.linear_grad_input in_out %{{.*}}, %h.0.attn.c_attn.weight
// STEP: %[[DN:.*]] = fsdp.tp_all_reduce %[[DQKV]] {module = "h.0.attn"} : tensor<?x?x8xf32>
// STEP-NEXT: nn.rms_norm_grad %[[DN]]

// SP-LABEL: nn.graph @gpt
// SP: %wte.weight = nn.param "wte.weight" {tp_partial, tp_pieces = 1 : i64} : tensor<16x8xf32>
// SP: %h.0.attn.c_proj.bias = nn.param "h.0.attn.c_proj.bias" {tp_partial, tp_pieces = 1 : i64} : tensor<8xf32>
// SP: %[[X:.*]] = nn.embedding %tokens, %wte.weight {{.*}} -> tensor<?x?x8xf32>
// SP-NEXT: %[[T:.*]] = fsdp.tp_chunk %targets : tensor<?x?xi64> -> tensor<?x?xi64, #fsdp.token_shard<2>>
// SP-NEXT: %[[XP:.*]] = fsdp.tp_chunk %[[X]] : tensor<?x?x8xf32> -> tensor<?x?x8xf32, #fsdp.token_shard<2>>
// SP-NEXT: %[[N:.*]] = nn.rms_norm %[[XP]], %h.0.ln_1.weight {{.*}} -> tensor<?x?x8xf32, #fsdp.token_shard<2>>
// SP-NEXT: %[[G:.*]] = fsdp.tp_all_gather %[[N]] {module = "h.0.attn"} : tensor<?x?x8xf32, #fsdp.token_shard<2>> -> tensor<?x?x8xf32>
// SP-NEXT: nn.linear in_out %[[G]], %h.0.attn.c_attn.weight
// SP: %[[O:.*]] = nn.linear in_out %{{.*}}, %h.0.attn.c_proj.weight {module = "h.0.attn.c_proj"} : (tensor<?x?x4xf32>, tensor<4x8xf32>) -> tensor<?x?x8xf32>
// SP-NEXT: %[[S:.*]] = fsdp.tp_reduce_scatter %[[O]] bias %h.0.attn.c_proj.bias {module = "h.0.attn.c_proj"} : tensor<?x?x8xf32>, tensor<8xf32> -> tensor<?x?x8xf32, #fsdp.token_shard<2>>
// SP-NEXT: %[[R:.*]] = nn.add %[[XP]], %[[S]] {{.*}} -> tensor<?x?x8xf32, #fsdp.token_shard<2>>
// SP: %[[R2:.*]] = nn.add %[[R]], %{{.*}} -> tensor<?x?x8xf32, #fsdp.token_shard<2>>
// SP-NEXT: %[[L:.*]] = nn.linear out_in %[[R2]], %wte.weight {{.*}} -> tensor<?x?x16xf32, #fsdp.token_shard<2>>
// SP-NEXT: nn.cross_entropy %[[L]], %[[T]] : (tensor<?x?x16xf32, #fsdp.token_shard<2>>, tensor<?x?xi64, #fsdp.token_shard<2>>) -> tensor<f32>

// The backward: a region's exit gathers its gradient, its entry
// reduce-scatters the region's input gradient, and the embeddings get the
// rank's part placed among zeros (their gradients partial, as the head's).
// SPSTEP-LABEL: fsdp.step @train_step
// SPSTEP: %[[DR:.*]] = nn.linear_grad_input out_in %{{.*}}, %wte.weight
// SPSTEP: fsdp.tp_all_gather %[[DR]] {module = "h.0.mlp.c_proj"} : tensor<?x?x8xf32, #fsdp.token_shard<2>> -> tensor<?x?x8xf32>
// SPSTEP: %[[DFC:.*]] = nn.linear_grad_input in_out %{{.*}}, %h.0.mlp.c_fc.weight
// SPSTEP: fsdp.tp_reduce_scatter %[[DFC]] {module = "h.0.mlp.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32, #fsdp.token_shard<2>>
// SPSTEP: nn.bias_grad %{{.*}} {module = "h.0.attn.c_proj"} : tensor<?x?x8xf32, #fsdp.token_shard<2>> -> tensor<8xf32>
// SPSTEP: %[[DX:.*]] = fsdp.tp_unchunk %{{.*}} : tensor<?x?x8xf32, #fsdp.token_shard<2>> -> tensor<?x?x8xf32>
// SPSTEP-NEXT: nn.embedding_grad %[[DX]], %tokens

// NONE-LABEL: nn.graph @gpt
// NONE-NOT: tp_
// NONE: nn.param "h.0.attn.c_attn.weight" : tensor<8x24xf32>
// NONE-NOT: tp_

// -----

// Qwen3-like: 4 query heads of 4, 2 key/value heads, q/k norms.
nn.graph @gqa(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "qwen3", block_prefix = "layers", num_blocks = 1 : i64, max_seq_len = 8 : i64} {
  %emb = nn.param "embed.weight" : tensor<16x16xf32>
  %qw = nn.param "layers.0.q_proj.weight" : tensor<16x16xf32>
  %kw = nn.param "layers.0.k_proj.weight" : tensor<8x16xf32>
  %vw = nn.param "layers.0.v_proj.weight" : tensor<8x16xf32>
  %qn = nn.param "layers.0.q_norm.weight" : tensor<4xf32>
  %kn = nn.param "layers.0.k_norm.weight" : tensor<4xf32>
  %ow = nn.param "layers.0.o_proj.weight" : tensor<16x16xf32>
  %x = nn.embedding %tokens, %emb {module = "embed"} : (tensor<?x?xi64>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %q = nn.linear out_in %x, %qw {module = "layers.0.q_proj"} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %k = nn.linear out_in %x, %kw {module = "layers.0.k_proj"} : (tensor<?x?x16xf32>, tensor<8x16xf32>) -> tensor<?x?x8xf32>
  %v = nn.linear out_in %x, %vw {module = "layers.0.v_proj"} : (tensor<?x?x16xf32>, tensor<8x16xf32>) -> tensor<?x?x8xf32>
  %q1 = nn.rms_norm %q, %qn {eps = 1.0e-6 : f64, module = "layers.0.q_norm"} : (tensor<?x?x16xf32>, tensor<4xf32>) -> tensor<?x?x16xf32>
  %k1 = nn.rms_norm %k, %kn {eps = 1.0e-6 : f64, module = "layers.0.k_norm"} : (tensor<?x?x8xf32>, tensor<4xf32>) -> tensor<?x?x8xf32>
  %q2 = nn.rope %q1 {num_heads = 4 : i64, theta = 1.0e4 : f64, module = "layers.0.rope"} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  %k2 = nn.rope %k1 {num_heads = 2 : i64, theta = 1.0e4 : f64, module = "layers.0.rope"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  %a = nn.causal_attention %q2, %k2, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, module = "layers.0"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  %o = nn.linear out_in %a, %ow {module = "layers.0.o_proj"} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %r = nn.add %x, %o {module = "layers.0"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %l = nn.linear out_in %r, %emb {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// Each rank: one query head; one key/value head, shared by two ranks
// (2 pieces, gradient partial); the norms whole, their gradients partial.
// GQA-LABEL: nn.graph @gqa
// GQA: nn.param "layers.0.q_proj.weight" {tp_dim = 0 : i64, tp_pieces = 4 : i64} : tensor<4x16xf32>
// GQA: nn.param "layers.0.k_proj.weight" {tp_dim = 0 : i64, tp_partial, tp_pieces = 2 : i64} : tensor<4x16xf32>
// GQA: nn.param "layers.0.v_proj.weight" {tp_dim = 0 : i64, tp_partial, tp_pieces = 2 : i64} : tensor<4x16xf32>
// GQA: nn.param "layers.0.q_norm.weight" {tp_partial, tp_pieces = 1 : i64} : tensor<4xf32>
// GQA: nn.param "layers.0.k_norm.weight" {tp_partial, tp_pieces = 1 : i64} : tensor<4xf32>
// GQA: nn.param "layers.0.o_proj.weight" {tp_dim = 1 : i64, tp_pieces = 4 : i64} : tensor<16x4xf32>
// GQA: %[[C:.*]] = fsdp.tp_copy %{{.*}} {module = "layers.0"} : tensor<?x?x16xf32>
// GQA-NEXT: nn.linear out_in %[[C]], %layers.0.q_proj.weight {{.*}} -> tensor<?x?x4xf32>
// GQA-NEXT: nn.linear out_in %[[C]], %layers.0.k_proj.weight {{.*}} -> tensor<?x?x4xf32>
// GQA-NEXT: nn.linear out_in %[[C]], %layers.0.v_proj.weight {{.*}} -> tensor<?x?x4xf32>
// GQA-NEXT: nn.rms_norm {{.*}} -> tensor<?x?x4xf32>
// GQA-NEXT: nn.rms_norm {{.*}} -> tensor<?x?x4xf32>
// GQA-NEXT: nn.rope {{.*}}num_heads = 1 : i64{{.*}} -> tensor<?x?x4xf32>
// GQA-NEXT: nn.rope {{.*}}num_heads = 1 : i64{{.*}} -> tensor<?x?x4xf32>
// GQA-NEXT: nn.causal_attention {{.*}}num_heads = 1 : i64, num_kv_heads = 1 : i64{{.*}} -> tensor<?x?x4xf32>
// GQA-NEXT: nn.linear out_in {{.*}} -> tensor<?x?x16xf32>
// GQA-NEXT: fsdp.tp_all_reduce
