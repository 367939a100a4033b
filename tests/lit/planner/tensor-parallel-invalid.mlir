// What fsdp-tensor-parallel refuses, at the op.
// RUN: fsdp-opt %s --split-input-file --fsdp-tensor-parallel=tp=4 --verify-diagnostics

nn.graph @heads(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "layers", num_blocks = 1 : i64, max_seq_len = 8 : i64} {
  %emb = nn.param "embed.weight" : tensor<16x12xf32>
  %qw = nn.param "layers.0.q_proj.weight" : tensor<12x12xf32>
  %x = nn.embedding %tokens, %emb {module = "embed"} : (tensor<?x?xi64>, tensor<16x12xf32>) -> tensor<?x?x12xf32>
  %q = nn.linear out_in %x, %qw {module = "layers.0.q_proj"} : (tensor<?x?x12xf32>, tensor<12x12xf32>) -> tensor<?x?x12xf32>
  // expected-error @+1 {{has 6 heads, which 4 tensor-parallel ranks do not divide}}
  %a = nn.causal_attention %q, %q, %q {num_heads = 6 : i64, num_kv_heads = 6 : i64, module = "layers.0"} : (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %l = nn.linear out_in %a, %emb {module = "lm_head"} : (tensor<?x?x12xf32>, tensor<16x12xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @kv(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "layers", num_blocks = 1 : i64, max_seq_len = 8 : i64} {
  %emb = nn.param "embed.weight" : tensor<16x24xf32>
  %qw = nn.param "layers.0.q_proj.weight" : tensor<24x24xf32>
  %kw = nn.param "layers.0.k_proj.weight" : tensor<6x24xf32>
  %x = nn.embedding %tokens, %emb {module = "embed"} : (tensor<?x?xi64>, tensor<16x24xf32>) -> tensor<?x?x24xf32>
  %q = nn.linear out_in %x, %qw {module = "layers.0.q_proj"} : (tensor<?x?x24xf32>, tensor<24x24xf32>) -> tensor<?x?x24xf32>
  %k = nn.linear out_in %x, %kw {module = "layers.0.k_proj"} : (tensor<?x?x24xf32>, tensor<6x24xf32>) -> tensor<?x?x6xf32>
  // expected-error @+1 {{has 3 key/value heads: 4 tensor-parallel ranks neither divide them nor are a multiple of them}}
  %a = nn.causal_attention %q, %k, %k {num_heads = 12 : i64, num_kv_heads = 3 : i64, module = "layers.0"} : (tensor<?x?x24xf32>, tensor<?x?x6xf32>, tensor<?x?x6xf32>) -> tensor<?x?x24xf32>
  %l = nn.linear out_in %a, %emb {module = "lm_head"} : (tensor<?x?x24xf32>, tensor<16x24xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// A column-parallel weight read elsewhere too (here tied to the head).
nn.graph @tied(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "layers", num_blocks = 1 : i64, max_seq_len = 8 : i64} {
  %emb = nn.param "embed.weight" : tensor<16x16xf32>
  %qw = nn.param "layers.0.q_proj.weight" : tensor<16x16xf32>
  %x = nn.embedding %tokens, %emb {module = "embed"} : (tensor<?x?xi64>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %q = nn.linear out_in %x, %qw {module = "layers.0.q_proj"} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %ow = nn.param "layers.0.o_proj.weight" : tensor<16x16xf32>
  %a = nn.causal_attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 4 : i64, module = "layers.0"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %o = nn.linear out_in %a, %ow {module = "layers.0.o_proj"} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  // expected-error @+1 {{reads parameter 'layers.0.q_proj.weight', which tensor parallelism cuts for nn.linear "layers.0.q_proj"}}
  %l = nn.linear out_in %o, %qw {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}
