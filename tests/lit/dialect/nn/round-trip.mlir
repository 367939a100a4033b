// Every nn op parses, verifies and prints back the same way, in the custom
// and in the generic form.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// GENERIC: "nn.graph"()
// GENERIC-SAME: block_prefix = "transformer.h"
// GENERIC-SAME: function_type = (tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<f32>
// GENERIC-SAME: max_seq_len = 8 : i64
// GENERIC-SAME: model_type = "gpt2"
// GENERIC-SAME: num_blocks = 1 : i64
// GENERIC-SAME: sym_name = "gpt2_block"
// GENERIC: "nn.param"() <{name = "transformer.wte.weight"}> : () -> tensor<16x8xf32>
// GENERIC: "nn.linear"(%{{.*}}, %{{.*}}, %{{.*}}) <{layout = 0 : i32, module = "transformer.h.0.attn.c_attn"}>
// GENERIC: "nn.return"(%{{.*}}) : (tensor<f32>) -> ()

// GPT-2 style: learned positions, LayerNorm, in_out linears with bias, fused
// qkv split, MHA, GELU, tied head (out_in, no bias).

// CHECK-LABEL: nn.graph @gpt2_block(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
// CHECK-SAME: attributes {block_prefix = "transformer.h", max_seq_len = 8 : i64, model_type = "gpt2", num_blocks = 1 : i64} {
nn.graph @gpt2_block(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h",
                num_blocks = 1 : i64, max_seq_len = 8 : i64} {
  // CHECK-NEXT: %transformer.wte.weight = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  // CHECK-NEXT: %transformer.wpe.weight = nn.param "transformer.wpe.weight" : tensor<8x8xf32>
  // CHECK-NEXT: %transformer.h.0.ln_1.weight = nn.param "transformer.h.0.ln_1.weight" : tensor<8xf32>
  // CHECK-NEXT: %transformer.h.0.ln_1.bias = nn.param "transformer.h.0.ln_1.bias" : tensor<8xf32>
  // CHECK-NEXT: %transformer.h.0.attn.c_attn.weight = nn.param "transformer.h.0.attn.c_attn.weight" : tensor<8x24xf32>
  // CHECK-NEXT: %transformer.h.0.attn.c_attn.bias = nn.param "transformer.h.0.attn.c_attn.bias" : tensor<24xf32>
  %wte = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  %wpe = nn.param "transformer.wpe.weight" : tensor<8x8xf32>
  %ln_w = nn.param "transformer.h.0.ln_1.weight" : tensor<8xf32>
  %ln_b = nn.param "transformer.h.0.ln_1.bias" : tensor<8xf32>
  %attn_w = nn.param "transformer.h.0.attn.c_attn.weight" : tensor<8x24xf32>
  %attn_b = nn.param "transformer.h.0.attn.c_attn.bias" : tensor<24xf32>

  // CHECK-NEXT: %[[POS:[0-9]+]] = nn.position_ids %tokens {module = "transformer.wpe"} : tensor<?x?xi64> -> tensor<?x?xi64>
  // CHECK-NEXT: %[[TOK:[0-9]+]] = nn.embedding %tokens, %transformer.wte.weight {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[PE:[0-9]+]] = nn.embedding %[[POS]], %transformer.wpe.weight {module = "transformer.wpe"} : (tensor<?x?xi64>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[H:[0-9]+]] = nn.add %[[TOK]], %[[PE]] {module = "transformer"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %pos = nn.position_ids %tokens {module = "transformer.wpe"} : tensor<?x?xi64> -> tensor<?x?xi64>
  %tok = nn.embedding %tokens, %wte {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %pe = nn.embedding %pos, %wpe {module = "transformer.wpe"} : (tensor<?x?xi64>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %h = nn.add %tok, %pe {module = "transformer"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>

  // CHECK-NEXT: %[[LN:[0-9]+]] = nn.layer_norm %[[H]], %transformer.h.0.ln_1.weight, %transformer.h.0.ln_1.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[QKV:[0-9]+]] = nn.linear in_out %[[LN]], %transformer.h.0.attn.c_attn.weight, %transformer.h.0.attn.c_attn.bias {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<?x?x24xf32>
  // CHECK-NEXT: %[[SPLIT:[0-9]+]]:3 = nn.split %[[QKV]] {module = "transformer.h.0.attn"} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
  // CHECK-NEXT: %[[ATTN:[0-9]+]] = nn.causal_attention %[[SPLIT]]#0, %[[SPLIT]]#1, %[[SPLIT]]#2 {module = "transformer.h.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[ACT:[0-9]+]] = nn.gelu %[[ATTN]] {module = "transformer.h.0.mlp.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  %ln = nn.layer_norm %h, %ln_w, %ln_b {eps = 1.0e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %qkv = nn.linear in_out %ln, %attn_w, %attn_b {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<?x?x24xf32>
  %q, %k, %v = nn.split %qkv {module = "transformer.h.0.attn"} : tensor<?x?x24xf32> -> tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
  %attn = nn.causal_attention %q, %k, %v {module = "transformer.h.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %act = nn.gelu %attn {module = "transformer.h.0.mlp.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>

  // CHECK-NEXT: %[[LOGITS:[0-9]+]] = nn.linear out_in %[[ACT]], %transformer.wte.weight {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[LOSS:[0-9]+]] = nn.cross_entropy %[[LOGITS]], %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  // CHECK-NEXT: nn.return %[[LOSS]] : tensor<f32>
  // CHECK-NEXT: }
  %logits = nn.linear out_in %act, %wte {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// LLaMA style: bf16 parameters, RMSNorm, out_in linears without bias, RoPE
// (plain and with Llama 3.1 scaling), GQA, SwiGLU.

// CHECK-LABEL: nn.graph @llama_block(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
// CHECK-SAME: attributes {block_prefix = "model.layers", max_seq_len = 16 : i64, model_type = "llama", num_blocks = 1 : i64} {
nn.graph @llama_block(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "model.layers",
                num_blocks = 1 : i64, max_seq_len = 16 : i64} {
  // CHECK-NEXT: %model.embed_tokens.weight = nn.param "model.embed_tokens.weight" : tensor<32x16xbf16>
  // CHECK-NEXT: %model.layers.0.input_layernorm.weight = nn.param "model.layers.0.input_layernorm.weight" : tensor<16xbf16>
  // CHECK-NEXT: %model.layers.0.self_attn.q_proj.weight = nn.param "model.layers.0.self_attn.q_proj.weight" : tensor<16x16xbf16>
  // CHECK-NEXT: %model.layers.0.self_attn.k_proj.weight = nn.param "model.layers.0.self_attn.k_proj.weight" : tensor<8x16xbf16>
  // CHECK-NEXT: %model.layers.0.mlp.gate_proj.weight = nn.param "model.layers.0.mlp.gate_proj.weight" : tensor<24x16xbf16>
  // CHECK-NEXT: %model.layers.0.mlp.down_proj.weight = nn.param "model.layers.0.mlp.down_proj.weight" : tensor<32x24xbf16>
  %embed = nn.param "model.embed_tokens.weight" : tensor<32x16xbf16>
  %norm_w = nn.param "model.layers.0.input_layernorm.weight" : tensor<16xbf16>
  %q_w = nn.param "model.layers.0.self_attn.q_proj.weight" : tensor<16x16xbf16>
  %k_w = nn.param "model.layers.0.self_attn.k_proj.weight" : tensor<8x16xbf16>
  %gate_w = nn.param "model.layers.0.mlp.gate_proj.weight" : tensor<24x16xbf16>
  %down_w = nn.param "model.layers.0.mlp.down_proj.weight" : tensor<32x24xbf16>

  // CHECK-NEXT: %[[X:[0-9]+]] = nn.embedding %tokens, %model.embed_tokens.weight {module = "model.embed_tokens"} : (tensor<?x?xi64>, tensor<32x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[N:[0-9]+]] = nn.rms_norm %[[X]], %model.layers.0.input_layernorm.weight {eps = 9.9999999999999995E-7 : f64, module = "model.layers.0.input_layernorm"} : (tensor<?x?x16xbf16>, tensor<16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[Q:[0-9]+]] = nn.linear out_in %[[N]], %model.layers.0.self_attn.q_proj.weight {module = "model.layers.0.self_attn.q_proj"} : (tensor<?x?x16xbf16>, tensor<16x16xbf16>) -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[K:[0-9]+]] = nn.linear out_in %[[N]], %model.layers.0.self_attn.k_proj.weight {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x16xbf16>, tensor<8x16xbf16>) -> tensor<?x?x8xbf16>
  %x = nn.embedding %tokens, %embed {module = "model.embed_tokens"} : (tensor<?x?xi64>, tensor<32x16xbf16>) -> tensor<?x?x16xbf16>
  %n = nn.rms_norm %x, %norm_w {eps = 1.0e-06 : f64, module = "model.layers.0.input_layernorm"} : (tensor<?x?x16xbf16>, tensor<16xbf16>) -> tensor<?x?x16xbf16>
  %q = nn.linear out_in %n, %q_w {module = "model.layers.0.self_attn.q_proj"} : (tensor<?x?x16xbf16>, tensor<16x16xbf16>) -> tensor<?x?x16xbf16>
  %k = nn.linear out_in %n, %k_w {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x16xbf16>, tensor<8x16xbf16>) -> tensor<?x?x8xbf16>

  // CHECK-NEXT: %[[QR:[0-9]+]] = nn.rope %[[Q]] {module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, theta = 1.000000e+04 : f64} : tensor<?x?x16xbf16> -> tensor<?x?x16xbf16>
  // CHECK-NEXT: %[[KR:[0-9]+]] = nn.rope %[[K]] {high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, original_max_position = 8192 : i64, scaling = "llama3", scaling_factor = 8.000000e+00 : f64, theta = 5.000000e+05 : f64} : tensor<?x?x8xbf16> -> tensor<?x?x8xbf16>
  // CHECK-NEXT: %[[A:[0-9]+]] = nn.causal_attention %[[QR]], %[[KR]], %[[K]] {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>) -> tensor<?x?x16xbf16>
  %qr = nn.rope %q {module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, theta = 1.0e+04 : f64} : tensor<?x?x16xbf16> -> tensor<?x?x16xbf16>
  %kr = nn.rope %k {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, theta = 5.0e+05 : f64,
                    scaling = "llama3", scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64,
                    high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : tensor<?x?x8xbf16> -> tensor<?x?x8xbf16>
  %a = nn.causal_attention %qr, %kr, %k {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>) -> tensor<?x?x16xbf16>

  // CHECK-NEXT: %[[G:[0-9]+]] = nn.linear out_in %[[A]], %model.layers.0.mlp.gate_proj.weight {module = "model.layers.0.mlp.gate_proj"} : (tensor<?x?x16xbf16>, tensor<24x16xbf16>) -> tensor<?x?x24xbf16>
  // CHECK-NEXT: %[[S:[0-9]+]] = nn.silu_mul %[[G]], %[[G]] {module = "model.layers.0.mlp.act_fn"} : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> tensor<?x?x24xbf16>
  // CHECK-NEXT: %[[L:[0-9]+]] = nn.linear out_in %[[S]], %model.layers.0.mlp.down_proj.weight {module = "lm_head"} : (tensor<?x?x24xbf16>, tensor<32x24xbf16>) -> tensor<?x?x32xbf16>
  // CHECK-NEXT: %[[LOSS:[0-9]+]] = nn.cross_entropy %[[L]], %targets {module = "loss"} : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<f32>
  // CHECK-NEXT: nn.return %[[LOSS]] : tensor<f32>
  // CHECK-NEXT: }
  %g = nn.linear out_in %a, %gate_w {module = "model.layers.0.mlp.gate_proj"} : (tensor<?x?x16xbf16>, tensor<24x16xbf16>) -> tensor<?x?x24xbf16>
  %s = nn.silu_mul %g, %g {module = "model.layers.0.mlp.act_fn"} : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> tensor<?x?x24xbf16>
  %logits = nn.linear out_in %s, %down_w {module = "lm_head"} : (tensor<?x?x24xbf16>, tensor<32x24xbf16>) -> tensor<?x?x32xbf16>
  %loss = nn.cross_entropy %logits, %targets {module = "loss"} : (tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// BERT style embeddings: word, position and token-type (all 0) embeddings.

// CHECK-LABEL: nn.graph @bert_embeddings(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
// CHECK-SAME: attributes {block_prefix = "bert.encoder.layer", max_seq_len = 8 : i64, model_type = "bert", num_blocks = 0 : i64} {
nn.graph @bert_embeddings(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "bert.encoder.layer",
                num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // CHECK-NEXT: %bert.embeddings.word_embeddings.weight = nn.param "bert.embeddings.word_embeddings.weight" : tensor<16x8xf32>
  // CHECK-NEXT: %bert.embeddings.position_embeddings.weight = nn.param "bert.embeddings.position_embeddings.weight" : tensor<8x8xf32>
  // CHECK-NEXT: %bert.embeddings.token_type_embeddings.weight = nn.param "bert.embeddings.token_type_embeddings.weight" : tensor<2x8xf32>
  %word = nn.param "bert.embeddings.word_embeddings.weight" : tensor<16x8xf32>
  %position = nn.param "bert.embeddings.position_embeddings.weight" : tensor<8x8xf32>
  %type = nn.param "bert.embeddings.token_type_embeddings.weight" : tensor<2x8xf32>

  // CHECK-NEXT: %[[POS:[0-9]+]] = nn.position_ids %tokens {module = "bert.embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
  // CHECK-NEXT: %[[TYPES:[0-9]+]] = nn.token_type_ids %tokens {module = "bert.embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
  // CHECK-NEXT: %[[W:[0-9]+]] = nn.embedding %tokens, %bert.embeddings.word_embeddings.weight {module = "bert.embeddings.word_embeddings"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[T:[0-9]+]] = nn.embedding %[[TYPES]], %bert.embeddings.token_type_embeddings.weight {module = "bert.embeddings.token_type_embeddings"} : (tensor<?x?xi64>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[P:[0-9]+]] = nn.embedding %[[POS]], %bert.embeddings.position_embeddings.weight {module = "bert.embeddings.position_embeddings"} : (tensor<?x?xi64>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[WT:[0-9]+]] = nn.add %[[W]], %[[T]] {module = "bert.embeddings"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[E:[0-9]+]] = nn.add %[[WT]], %[[P]] {module = "bert.embeddings"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %pos = nn.position_ids %tokens {module = "bert.embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
  %types = nn.token_type_ids %tokens {module = "bert.embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
  %w = nn.embedding %tokens, %word {module = "bert.embeddings.word_embeddings"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %t = nn.embedding %types, %type {module = "bert.embeddings.token_type_embeddings"} : (tensor<?x?xi64>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
  %p = nn.embedding %pos, %position {module = "bert.embeddings.position_embeddings"} : (tensor<?x?xi64>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %wt = nn.add %w, %t {module = "bert.embeddings"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %e = nn.add %wt, %p {module = "bert.embeddings"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>

  // CHECK-NEXT: %[[L:[0-9]+]] = nn.linear out_in %[[E]], %bert.embeddings.word_embeddings.weight {module = "cls.predictions.decoder"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[LOSS:[0-9]+]] = nn.cross_entropy %[[L]], %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  // CHECK-NEXT: nn.return %[[LOSS]] : tensor<f32>
  // CHECK-NEXT: }
  %logits = nn.linear out_in %e, %word {module = "cls.predictions.decoder"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// RoPE's other frequency scalings, each with its own parameters: linear,
// dynamic (up to the graph's max_seq_len), YaRN (truncate a bool, the
// attention factor kept to the last bit).

// CHECK-LABEL: nn.graph @rope_scalings
nn.graph @rope_scalings(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "model.layers",
                num_blocks = 1 : i64, max_seq_len = 16 : i64} {
  // CHECK: %[[X:[0-9]+]] = nn.embedding
  // CHECK-NEXT: %[[L:[0-9]+]] = nn.rope %[[X]] {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, scaling = "linear", scaling_factor = 2.500000e+00 : f64, theta = 1.000000e+04 : f64} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[D:[0-9]+]] = nn.rope %[[L]] {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, original_max_position = 16 : i64, scaling = "dynamic", scaling_factor = 2.000000e+00 : f64, theta = 1.000000e+04 : f64} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[Y:[0-9]+]] = nn.rope %[[D]] {attention_factor = 1.1386294361119891 : f64, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, original_max_position = 4 : i64, scaling = "yarn", scaling_factor = 4.000000e+00 : f64, theta = 1.000000e+04 : f64, truncate = false} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  // GENERIC: "nn.rope"(%{{.*}}) <{attention_factor = 1.1386294361119891 : f64, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, original_max_position = 4 : i64, scaling = "yarn", scaling_factor = 4.000000e+00 : f64, theta = 1.000000e+04 : f64, truncate = false}>
  %embed = nn.param "model.embed_tokens.weight" : tensor<32x16xf32>
  %x = nn.embedding %tokens, %embed {module = "model.embed_tokens"} : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
  %l = nn.rope %x {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, theta = 1.0e+04 : f64,
                   scaling = "linear", scaling_factor = 2.5 : f64} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  %d = nn.rope %l {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, theta = 1.0e+04 : f64,
                   scaling = "dynamic", scaling_factor = 2.0 : f64, original_max_position = 16 : i64} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  %y = nn.rope %d {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, theta = 1.0e+04 : f64,
                   scaling = "yarn", scaling_factor = 4.0 : f64, original_max_position = 4 : i64,
                   beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, truncate = false,
                   attention_factor = 1.138629436111989 : f64} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  %logits = nn.linear out_in %y, %embed {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x32xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}
