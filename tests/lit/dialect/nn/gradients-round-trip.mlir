// The gradient ops of the nn dialect (and nn.rope's `inverse`) parse, verify
// and print back the same way, in the custom and in the generic form, inside
// an fsdp.step and inside an nn.graph. Each backward chain is the one the
// training-step pass builds for its forward ops.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// GENERIC: "nn.cross_entropy_grad"(%{{.*}}, %{{.*}}) : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
// GENERIC: "nn.linear_grad_input"(%{{.*}}, %{{.*}}) <{layout = 1 : i32, module = "lm_head"}> : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
// GENERIC: "nn.linear_grad_weight"(%{{.*}}, %{{.*}}) <{layout = 1 : i32, module = "lm_head"}> : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
// GENERIC: %{{.*}}:3 = "nn.causal_attention_grad"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{module = "transformer.h.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64}>
// GENERIC: "nn.linear_grad_input"(%{{.*}}, %{{.*}}) <{layout = 0 : i32, module = "transformer.h.0.attn.c_attn"}>
// GENERIC: %{{.*}}:3 = "nn.layer_norm_grad"(%{{.*}}, %{{.*}}, %{{.*}}) <{eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1"}>
// GENERIC: "fsdp.grad"(%{{.*}}) <{param = "transformer.wte.weight"}> : (tensor<16x8xf32>) -> ()
// GENERIC: %{{.*}}:2 = "nn.silu_mul_grad"(%{{.*}}, %{{.*}}, %{{.*}}) <{module = "model.layers.0.mlp"}>
// GENERIC: %{{.*}}:2 = "nn.rms_norm_grad"(%{{.*}}, %{{.*}}, %{{.*}}) <{eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm"}>
// GENERIC: "nn.rope"(%{{.*}}) <{inverse, module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, theta = 1.000000e+04 : f64}> : (tensor<?x?x16xbf16>) -> tensor<?x?x16xbf16>

// GPT-2 style, in a training step: tied embedding and head (in_out weight with
// bias, out_in head), LayerNorm, fused qkv, MHA, GELU.

// CHECK-LABEL: fsdp.step @gpt2_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
fsdp.step @gpt2_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // CHECK-NEXT: %transformer.wte.weight = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  // CHECK-NEXT: %transformer.h.0.ln_1.weight = nn.param "transformer.h.0.ln_1.weight" : tensor<8xf32>
  // CHECK-NEXT: %transformer.h.0.ln_1.bias = nn.param "transformer.h.0.ln_1.bias" : tensor<8xf32>
  // CHECK-NEXT: %transformer.h.0.attn.c_attn.weight = nn.param "transformer.h.0.attn.c_attn.weight" : tensor<8x24xf32>
  // CHECK-NEXT: %transformer.h.0.attn.c_attn.bias = nn.param "transformer.h.0.attn.c_attn.bias" : tensor<24xf32>
  %wte = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  %ln_w = nn.param "transformer.h.0.ln_1.weight" : tensor<8xf32>
  %ln_b = nn.param "transformer.h.0.ln_1.bias" : tensor<8xf32>
  %attn_w = nn.param "transformer.h.0.attn.c_attn.weight" : tensor<8x24xf32>
  %attn_b = nn.param "transformer.h.0.attn.c_attn.bias" : tensor<24xf32>

  // Forward.
  // CHECK-NEXT: %[[H:[0-9]+]] = nn.embedding %tokens, %transformer.wte.weight {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[LN:[0-9]+]] = nn.layer_norm %[[H]], %transformer.h.0.ln_1.weight, %transformer.h.0.ln_1.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[QKV:[0-9]+]] = nn.linear in_out %[[LN]], %transformer.h.0.attn.c_attn.weight, %transformer.h.0.attn.c_attn.bias {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<?x?x24xf32>
  // CHECK-NEXT: %[[SPLIT:[0-9]+]]:3 = nn.split %[[QKV]] {module = "transformer.h.0.attn"} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
  // CHECK-NEXT: %[[ATTN:[0-9]+]] = nn.causal_attention %[[SPLIT]]#0, %[[SPLIT]]#1, %[[SPLIT]]#2 {module = "transformer.h.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[ACT:[0-9]+]] = nn.gelu %[[ATTN]] {module = "transformer.h.0.mlp.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[LOGITS:[0-9]+]] = nn.linear out_in %[[ACT]], %transformer.wte.weight {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[LOSS:[0-9]+]] = nn.cross_entropy %[[LOGITS]], %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  %h = nn.embedding %tokens, %wte {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %ln = nn.layer_norm %h, %ln_w, %ln_b {eps = 1.0e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %qkv = nn.linear in_out %ln, %attn_w, %attn_b {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<?x?x24xf32>
  %q, %k, %v = nn.split %qkv {module = "transformer.h.0.attn"} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
  %attn = nn.causal_attention %q, %k, %v {module = "transformer.h.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %act = nn.gelu %attn {module = "transformer.h.0.mlp.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  %logits = nn.linear out_in %act, %wte {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>

  // Backward: the loss, the tied head, GELU, attention, the fused qkv
  // projection (concat is split's gradient), LayerNorm, the embedding; the
  // two gradients of the tied weight are summed.
  // CHECK-NEXT: %[[DLOGITS:[0-9]+]] = nn.cross_entropy_grad %[[LOGITS]], %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[DACT:[0-9]+]] = nn.linear_grad_input out_in %[[DLOGITS]], %transformer.wte.weight {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[DHEAD:[0-9]+]] = nn.linear_grad_weight out_in %[[DLOGITS]], %[[ACT]] {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
  // CHECK-NEXT: %[[DATTN:[0-9]+]] = nn.gelu_grad %[[DACT]], %[[ATTN]] {module = "transformer.h.0.mlp.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %query_grad, %key_grad, %value_grad = nn.causal_attention_grad %[[DATTN]], %[[SPLIT]]#0, %[[SPLIT]]#1, %[[SPLIT]]#2, %[[ATTN]] {module = "transformer.h.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  // CHECK-NEXT: %[[DQKV:[0-9]+]] = nn.concat %query_grad, %key_grad, %value_grad {module = "transformer.h.0.attn"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x24xf32>
  // CHECK-NEXT: %[[DLN:[0-9]+]] = nn.linear_grad_input in_out %[[DQKV]], %transformer.h.0.attn.c_attn.weight {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x24xf32>, tensor<8x24xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[DW:[0-9]+]] = nn.linear_grad_weight in_out %[[DQKV]], %[[LN]] {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x24xf32>, tensor<?x?x8xf32>) -> tensor<8x24xf32>
  // CHECK-NEXT: %[[DB:[0-9]+]] = nn.bias_grad %[[DQKV]] {module = "transformer.h.0.attn.c_attn"} : tensor<?x?x24xf32> -> tensor<24xf32>
  // CHECK-NEXT: %input_grad, %weight_grad, %bias_grad = nn.layer_norm_grad %[[DLN]], %[[H]], %transformer.h.0.ln_1.weight {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: %[[DEMB:[0-9]+]] = nn.embedding_grad %input_grad, %tokens {module = "transformer.wte"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
  // CHECK-NEXT: %[[DWTE:[0-9]+]] = nn.add %[[DHEAD]], %[[DEMB]] {module = "transformer.wte"} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %dlogits = nn.cross_entropy_grad %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  %dact = nn.linear_grad_input out_in %dlogits, %wte {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %dhead = nn.linear_grad_weight out_in %dlogits, %act {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
  %dattn = nn.gelu_grad %dact, %attn {module = "transformer.h.0.mlp.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %dq, %dk, %dv = nn.causal_attention_grad %dattn, %q, %k, %v, %attn {module = "transformer.h.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %dqkv = nn.concat %dq, %dk, %dv {module = "transformer.h.0.attn"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x24xf32>
  %dln = nn.linear_grad_input in_out %dqkv, %attn_w {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x24xf32>, tensor<8x24xf32>) -> tensor<?x?x8xf32>
  %dattn_w = nn.linear_grad_weight in_out %dqkv, %ln {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x24xf32>, tensor<?x?x8xf32>) -> tensor<8x24xf32>
  %dattn_b = nn.bias_grad %dqkv {module = "transformer.h.0.attn.c_attn"} : tensor<?x?x24xf32> -> tensor<24xf32>
  %dh, %dln_w, %dln_b = nn.layer_norm_grad %dln, %h, %ln_w {eps = 1.0e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %demb = nn.embedding_grad %dh, %tokens {module = "transformer.wte"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
  %dwte = nn.add %dhead, %demb {module = "transformer.wte"} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>

  // CHECK-NEXT: fsdp.grad "transformer.wte.weight", %[[DWTE]] : tensor<16x8xf32>
  // CHECK-NEXT: fsdp.grad "transformer.h.0.ln_1.weight", %weight_grad : tensor<8xf32>
  // CHECK-NEXT: fsdp.grad "transformer.h.0.ln_1.bias", %bias_grad : tensor<8xf32>
  // CHECK-NEXT: fsdp.grad "transformer.h.0.attn.c_attn.weight", %[[DW]] : tensor<8x24xf32>
  // CHECK-NEXT: fsdp.grad "transformer.h.0.attn.c_attn.bias", %[[DB]] : tensor<24xf32>
  // CHECK-NEXT: fsdp.return %[[LOSS]] : tensor<f32>
  // CHECK-NEXT: }
  fsdp.grad "transformer.wte.weight", %dwte : tensor<16x8xf32>
  fsdp.grad "transformer.h.0.ln_1.weight", %dln_w : tensor<8xf32>
  fsdp.grad "transformer.h.0.ln_1.bias", %dln_b : tensor<8xf32>
  fsdp.grad "transformer.h.0.attn.c_attn.weight", %dattn_w : tensor<8x24xf32>
  fsdp.grad "transformer.h.0.attn.c_attn.bias", %dattn_b : tensor<24xf32>
  fsdp.return %loss : tensor<f32>
}

// LLaMA style MLP, in a training step: bf16, RMSNorm, out_in linears without
// bias, SwiGLU.

// CHECK-LABEL: fsdp.step @llama_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
fsdp.step @llama_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // CHECK-NEXT: %model.embed_tokens.weight = nn.param "model.embed_tokens.weight" : tensor<32x16xbf16>
  // CHECK-NEXT: %model.layers.0.post_attention_layernorm.weight = nn.param "model.layers.0.post_attention_layernorm.weight" : tensor<16xbf16>
  // CHECK-NEXT: %model.layers.0.mlp.gate_proj.weight = nn.param "model.layers.0.mlp.gate_proj.weight" : tensor<24x16xbf16>
  // CHECK-NEXT: %model.layers.0.mlp.up_proj.weight = nn.param "model.layers.0.mlp.up_proj.weight" : tensor<24x16xbf16>
  // CHECK-NEXT: %lm_head.weight = nn.param "lm_head.weight" : tensor<32x24xbf16>
  %emb = nn.param "model.embed_tokens.weight" : tensor<32x16xbf16>
  %norm_w = nn.param "model.layers.0.post_attention_layernorm.weight" : tensor<16xbf16>
  %gate_w = nn.param "model.layers.0.mlp.gate_proj.weight" : tensor<24x16xbf16>
  %up_w = nn.param "model.layers.0.mlp.up_proj.weight" : tensor<24x16xbf16>
  %lm_w = nn.param "lm_head.weight" : tensor<32x24xbf16>

  // CHECK-NEXT: %[[H:[0-9]+]] = nn.embedding %tokens, %model.embed_tokens.weight {module = "model.embed_tokens"} : (tensor<?x?xi64>, tensor<32x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[N:[0-9]+]] = nn.rms_norm %[[H]], %model.layers.0.post_attention_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm"} : (tensor<?x?x16xbf16>, tensor<16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[G:[0-9]+]] = nn.linear out_in %[[N]], %model.layers.0.mlp.gate_proj.weight {module = "model.layers.0.mlp.gate_proj"} : (tensor<?x?x16xbf16>, tensor<24x16xbf16>) -> tensor<?x?x24xbf16>
  // CHECK-NEXT: %[[U:[0-9]+]] = nn.linear out_in %[[N]], %model.layers.0.mlp.up_proj.weight {module = "model.layers.0.mlp.up_proj"} : (tensor<?x?x16xbf16>, tensor<24x16xbf16>) -> tensor<?x?x24xbf16>
  // CHECK-NEXT: %[[M:[0-9]+]] = nn.silu_mul %[[G]], %[[U]] {module = "model.layers.0.mlp"} : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> tensor<?x?x24xbf16>
  // CHECK-NEXT: %[[LOGITS:[0-9]+]] = nn.linear out_in %[[M]], %lm_head.weight {module = "lm_head"} : (tensor<?x?x24xbf16>, tensor<32x24xbf16>) -> tensor<?x?x32xbf16>
  // CHECK-NEXT: %[[LOSS:[0-9]+]] = nn.cross_entropy %[[LOGITS]], %targets : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<f32>
  %h = nn.embedding %tokens, %emb {module = "model.embed_tokens"} : (tensor<?x?xi64>, tensor<32x16xbf16>) -> tensor<?x?x16xbf16>
  %n = nn.rms_norm %h, %norm_w {eps = 1.0e-05 : f64, module = "model.layers.0.post_attention_layernorm"} : (tensor<?x?x16xbf16>, tensor<16xbf16>) -> tensor<?x?x16xbf16>
  %g = nn.linear out_in %n, %gate_w {module = "model.layers.0.mlp.gate_proj"} : (tensor<?x?x16xbf16>, tensor<24x16xbf16>) -> tensor<?x?x24xbf16>
  %u = nn.linear out_in %n, %up_w {module = "model.layers.0.mlp.up_proj"} : (tensor<?x?x16xbf16>, tensor<24x16xbf16>) -> tensor<?x?x24xbf16>
  %m = nn.silu_mul %g, %u {module = "model.layers.0.mlp"} : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> tensor<?x?x24xbf16>
  %logits = nn.linear out_in %m, %lm_w {module = "lm_head"} : (tensor<?x?x24xbf16>, tensor<32x24xbf16>) -> tensor<?x?x32xbf16>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<f32>

  // CHECK-NEXT: %[[DLOGITS:[0-9]+]] = nn.cross_entropy_grad %[[LOGITS]], %targets {module = "lm_head"} : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<?x?x32xbf16>
  // CHECK-NEXT: %[[DM:[0-9]+]] = nn.linear_grad_input out_in %[[DLOGITS]], %lm_head.weight {module = "lm_head"} : (tensor<?x?x32xbf16>, tensor<32x24xbf16>) -> tensor<?x?x24xbf16>
  // CHECK-NEXT: %[[DLM:[0-9]+]] = nn.linear_grad_weight out_in %[[DLOGITS]], %[[M]] {module = "lm_head"} : (tensor<?x?x32xbf16>, tensor<?x?x24xbf16>) -> tensor<32x24xbf16>
  // CHECK-NEXT: %gate_grad, %up_grad = nn.silu_mul_grad %[[DM]], %[[G]], %[[U]] {module = "model.layers.0.mlp"} : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>)
  // CHECK-NEXT: %[[DNG:[0-9]+]] = nn.linear_grad_input out_in %gate_grad, %model.layers.0.mlp.gate_proj.weight {module = "model.layers.0.mlp.gate_proj"} : (tensor<?x?x24xbf16>, tensor<24x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[DNU:[0-9]+]] = nn.linear_grad_input out_in %up_grad, %model.layers.0.mlp.up_proj.weight {module = "model.layers.0.mlp.up_proj"} : (tensor<?x?x24xbf16>, tensor<24x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[DN:[0-9]+]] = nn.add %[[DNG]], %[[DNU]] {module = "model.layers.0.mlp"} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %input_grad, %weight_grad = nn.rms_norm_grad %[[DN]], %[[H]], %model.layers.0.post_attention_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm"} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<16xbf16>) -> (tensor<?x?x16xbf16>, tensor<16xbf16>)
  // CHECK-NEXT: %[[DEMB:[0-9]+]] = nn.embedding_grad %input_grad, %tokens {module = "model.embed_tokens"} : (tensor<?x?x16xbf16>, tensor<?x?xi64>) -> tensor<32x16xbf16>
  %dlogits = nn.cross_entropy_grad %logits, %targets {module = "lm_head"} : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<?x?x32xbf16>
  %dm = nn.linear_grad_input out_in %dlogits, %lm_w {module = "lm_head"} : (tensor<?x?x32xbf16>, tensor<32x24xbf16>) -> tensor<?x?x24xbf16>
  %dlm = nn.linear_grad_weight out_in %dlogits, %m {module = "lm_head"} : (tensor<?x?x32xbf16>, tensor<?x?x24xbf16>) -> tensor<32x24xbf16>
  %dg, %du = nn.silu_mul_grad %dm, %g, %u {module = "model.layers.0.mlp"} : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>)
  %dng = nn.linear_grad_input out_in %dg, %gate_w {module = "model.layers.0.mlp.gate_proj"} : (tensor<?x?x24xbf16>, tensor<24x16xbf16>) -> tensor<?x?x16xbf16>
  %dnu = nn.linear_grad_input out_in %du, %up_w {module = "model.layers.0.mlp.up_proj"} : (tensor<?x?x24xbf16>, tensor<24x16xbf16>) -> tensor<?x?x16xbf16>
  %dn = nn.add %dng, %dnu {module = "model.layers.0.mlp"} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>) -> tensor<?x?x16xbf16>
  %dh, %dnorm_w = nn.rms_norm_grad %dn, %h, %norm_w {eps = 1.0e-05 : f64, module = "model.layers.0.post_attention_layernorm"} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<16xbf16>) -> (tensor<?x?x16xbf16>, tensor<16xbf16>)
  %demb = nn.embedding_grad %dh, %tokens {module = "model.embed_tokens"} : (tensor<?x?x16xbf16>, tensor<?x?xi64>) -> tensor<32x16xbf16>

  // CHECK-NEXT: fsdp.grad "lm_head.weight", %[[DLM]] : tensor<32x24xbf16>
  // CHECK-NEXT: fsdp.grad "model.layers.0.post_attention_layernorm.weight", %weight_grad : tensor<16xbf16>
  // CHECK-NEXT: fsdp.grad "model.embed_tokens.weight", %[[DEMB]] : tensor<32x16xbf16>
  // CHECK-NEXT: fsdp.return %[[LOSS]] : tensor<f32>
  // CHECK-NEXT: }
  fsdp.grad "lm_head.weight", %dlm : tensor<32x24xbf16>
  fsdp.grad "model.layers.0.post_attention_layernorm.weight", %dnorm_w : tensor<16xbf16>
  fsdp.grad "model.embed_tokens.weight", %demb : tensor<32x16xbf16>
  fsdp.return %loss : tensor<f32>
}

// LLaMA style attention, in an nn.graph (gradient ops have no parent
// restriction): RoPE plain and with Llama 3.1 scaling, and its inverse (the
// gradient of the rotation); grouped-query attention, whose key and value
// gradients take the key and value types.

// CHECK-LABEL: nn.graph @llama_attention(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
// CHECK-SAME: attributes {block_prefix = "model.layers", max_seq_len = 16 : i64, model_type = "llama", num_blocks = 1 : i64} {
nn.graph @llama_attention(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "model.layers",
                num_blocks = 1 : i64, max_seq_len = 16 : i64} {
  // CHECK-NEXT: %model.embed_tokens.weight = nn.param "model.embed_tokens.weight" : tensor<32x16xbf16>
  // CHECK-NEXT: %model.layers.0.self_attn.k_proj.weight = nn.param "model.layers.0.self_attn.k_proj.weight" : tensor<8x16xbf16>
  %emb = nn.param "model.embed_tokens.weight" : tensor<32x16xbf16>
  %k_w = nn.param "model.layers.0.self_attn.k_proj.weight" : tensor<8x16xbf16>

  // CHECK-NEXT: %[[X:[0-9]+]] = nn.embedding %tokens, %model.embed_tokens.weight {module = "model.embed_tokens"} : (tensor<?x?xi64>, tensor<32x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[K:[0-9]+]] = nn.linear out_in %[[X]], %model.layers.0.self_attn.k_proj.weight {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x16xbf16>, tensor<8x16xbf16>) -> tensor<?x?x8xbf16>
  // CHECK-NEXT: %[[QR:[0-9]+]] = nn.rope %[[X]] {module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, theta = 1.000000e+04 : f64} : tensor<?x?x16xbf16> -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[KR:[0-9]+]] = nn.rope %[[K]] {high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, original_max_position = 8192 : i64, scaling = "llama3", scaling_factor = 8.000000e+00 : f64, theta = 5.000000e+05 : f64} : tensor<?x?x8xbf16> -> tensor<?x?x8xbf16>
  // CHECK-NEXT: %[[A:[0-9]+]] = nn.causal_attention %[[QR]], %[[KR]], %[[K]] {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[LOGITS:[0-9]+]] = nn.linear out_in %[[A]], %model.embed_tokens.weight {module = "lm_head"} : (tensor<?x?x16xbf16>, tensor<32x16xbf16>) -> tensor<?x?x32xbf16>
  // CHECK-NEXT: %[[LOSS:[0-9]+]] = nn.cross_entropy %[[LOGITS]], %targets : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<f32>
  %x = nn.embedding %tokens, %emb {module = "model.embed_tokens"} : (tensor<?x?xi64>, tensor<32x16xbf16>) -> tensor<?x?x16xbf16>
  %k = nn.linear out_in %x, %k_w {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x16xbf16>, tensor<8x16xbf16>) -> tensor<?x?x8xbf16>
  %qr = nn.rope %x {module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, theta = 1.0e+04 : f64} : tensor<?x?x16xbf16> -> tensor<?x?x16xbf16>
  %kr = nn.rope %k {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, theta = 5.0e+05 : f64,
                    scaling = "llama3", scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64,
                    high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : tensor<?x?x8xbf16> -> tensor<?x?x8xbf16>
  %a = nn.causal_attention %qr, %kr, %k {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>) -> tensor<?x?x16xbf16>
  %logits = nn.linear out_in %a, %emb {module = "lm_head"} : (tensor<?x?x16xbf16>, tensor<32x16xbf16>) -> tensor<?x?x32xbf16>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<f32>

  // CHECK-NEXT: %[[DLOGITS:[0-9]+]] = nn.cross_entropy_grad %[[LOGITS]], %targets : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<?x?x32xbf16>
  // CHECK-NEXT: %[[DA:[0-9]+]] = nn.linear_grad_input out_in %[[DLOGITS]], %model.embed_tokens.weight {module = "lm_head"} : (tensor<?x?x32xbf16>, tensor<32x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %query_grad, %key_grad, %value_grad = nn.causal_attention_grad %[[DA]], %[[QR]], %[[KR]], %[[K]], %[[A]] {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>, tensor<?x?x16xbf16>) -> (tensor<?x?x16xbf16>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>)
  // CHECK-NEXT: %[[DQ:[0-9]+]] = nn.rope %query_grad {inverse, module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, theta = 1.000000e+04 : f64} : tensor<?x?x16xbf16> -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[DK:[0-9]+]] = nn.rope %key_grad {high_freq_factor = 4.000000e+00 : f64, inverse, low_freq_factor = 1.000000e+00 : f64, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, original_max_position = 8192 : i64, scaling = "llama3", scaling_factor = 8.000000e+00 : f64, theta = 5.000000e+05 : f64} : tensor<?x?x8xbf16> -> tensor<?x?x8xbf16>
  // CHECK-NEXT: %[[DKV:[0-9]+]] = nn.add %[[DK]], %value_grad {module = "model.layers.0.self_attn"} : (tensor<?x?x8xbf16>, tensor<?x?x8xbf16>) -> tensor<?x?x8xbf16>
  // CHECK-NEXT: %[[DKW:[0-9]+]] = nn.linear_grad_weight out_in %[[DKV]], %[[X]] {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x8xbf16>, tensor<?x?x16xbf16>) -> tensor<8x16xbf16>
  // CHECK-NEXT: %[[DX:[0-9]+]] = nn.linear_grad_input out_in %[[DKV]], %model.layers.0.self_attn.k_proj.weight {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x8xbf16>, tensor<8x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[DX2:[0-9]+]] = nn.add %[[DQ]], %[[DX]] {module = "model.layers.0.self_attn"} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[DEMB:[0-9]+]] = nn.embedding_grad %[[DX2]], %tokens {module = "model.embed_tokens"} : (tensor<?x?x16xbf16>, tensor<?x?xi64>) -> tensor<32x16xbf16>
  // CHECK-NEXT: nn.return %[[LOSS]] : tensor<f32>
  // CHECK-NEXT: }
  %dlogits = nn.cross_entropy_grad %logits, %targets : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<?x?x32xbf16>
  %da = nn.linear_grad_input out_in %dlogits, %emb {module = "lm_head"} : (tensor<?x?x32xbf16>, tensor<32x16xbf16>) -> tensor<?x?x16xbf16>
  %dqr, %dkr, %dv = nn.causal_attention_grad %da, %qr, %kr, %k, %a {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>, tensor<?x?x16xbf16>) -> (tensor<?x?x16xbf16>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>)
  %dq = nn.rope %dqr {inverse, module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, theta = 1.0e+04 : f64} : tensor<?x?x16xbf16> -> tensor<?x?x16xbf16>
  %dk = nn.rope %dkr {inverse, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, theta = 5.0e+05 : f64,
                      scaling = "llama3", scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64,
                      high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : tensor<?x?x8xbf16> -> tensor<?x?x8xbf16>
  %dkv = nn.add %dk, %dv {module = "model.layers.0.self_attn"} : (tensor<?x?x8xbf16>, tensor<?x?x8xbf16>) -> tensor<?x?x8xbf16>
  %dk_w = nn.linear_grad_weight out_in %dkv, %x {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x8xbf16>, tensor<?x?x16xbf16>) -> tensor<8x16xbf16>
  %dx = nn.linear_grad_input out_in %dkv, %k_w {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x8xbf16>, tensor<8x16xbf16>) -> tensor<?x?x16xbf16>
  %dx2 = nn.add %dq, %dx {module = "model.layers.0.self_attn"} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>) -> tensor<?x?x16xbf16>
  %demb = nn.embedding_grad %dx2, %tokens {module = "model.embed_tokens"} : (tensor<?x?x16xbf16>, tensor<?x?xi64>) -> tensor<32x16xbf16>
  nn.return %loss : tensor<f32>
}
