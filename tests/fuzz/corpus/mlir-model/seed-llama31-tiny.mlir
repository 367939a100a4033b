module {
  nn.graph @llama(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "model.layers", max_seq_len = 128 : i64, model_type = "llama", num_blocks = 1 : i64} {
    %model.embed_tokens.weight = nn.param "model.embed_tokens.weight" : tensor<37x64xf32>
    %model.layers.0.self_attn.q_proj.weight = nn.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
    %model.layers.0.self_attn.k_proj.weight = nn.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
    %model.layers.0.self_attn.v_proj.weight = nn.param "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
    %model.layers.0.self_attn.o_proj.weight = nn.param "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
    %model.layers.0.mlp.gate_proj.weight = nn.param "model.layers.0.mlp.gate_proj.weight" : tensor<176x64xf32>
    %model.layers.0.mlp.up_proj.weight = nn.param "model.layers.0.mlp.up_proj.weight" : tensor<176x64xf32>
    %model.layers.0.mlp.down_proj.weight = nn.param "model.layers.0.mlp.down_proj.weight" : tensor<64x176xf32>
    %model.layers.0.input_layernorm.weight = nn.param "model.layers.0.input_layernorm.weight" : tensor<64xf32>
    %model.layers.0.post_attention_layernorm.weight = nn.param "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
    %model.norm.weight = nn.param "model.norm.weight" : tensor<64xf32>
    %lm_head.weight = nn.param "lm_head.weight" : tensor<37x64xf32>
    %0 = nn.embedding %tokens, %model.embed_tokens.weight {module = "model.embed_tokens"} : (tensor<?x?xi64>, tensor<37x64xf32>) -> tensor<?x?x64xf32>
    %1 = nn.rms_norm %0, %model.layers.0.input_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.0.input_layernorm"} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %2 = nn.linear out_in %1, %model.layers.0.self_attn.q_proj.weight {module = "model.layers.0.self_attn.q_proj"} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %3 = nn.linear out_in %1, %model.layers.0.self_attn.k_proj.weight {module = "model.layers.0.self_attn.k_proj"} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %4 = nn.linear out_in %1, %model.layers.0.self_attn.v_proj.weight {module = "model.layers.0.self_attn.v_proj"} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %5 = nn.rope %2 {high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, original_max_position = 64 : i64, scaling = "llama3", scaling_factor = 8.000000e+00 : f64, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %6 = nn.rope %3 {high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, original_max_position = 64 : i64, scaling = "llama3", scaling_factor = 8.000000e+00 : f64, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %7 = nn.causal_attention %5, %6, %4 {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
    %8 = nn.linear out_in %7, %model.layers.0.self_attn.o_proj.weight {module = "model.layers.0.self_attn.o_proj"} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %9 = nn.add %0, %8 {module = "model.layers.0"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %10 = nn.rms_norm %9, %model.layers.0.post_attention_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm"} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %11 = nn.linear out_in %10, %model.layers.0.mlp.gate_proj.weight {module = "model.layers.0.mlp.gate_proj"} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %12 = nn.linear out_in %10, %model.layers.0.mlp.up_proj.weight {module = "model.layers.0.mlp.up_proj"} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %13 = nn.silu_mul %11, %12 {module = "model.layers.0.mlp.act_fn"} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    %14 = nn.linear out_in %13, %model.layers.0.mlp.down_proj.weight {module = "model.layers.0.mlp.down_proj"} : (tensor<?x?x176xf32>, tensor<64x176xf32>) -> tensor<?x?x64xf32>
    %15 = nn.add %9, %14 {module = "model.layers.0"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %16 = nn.rms_norm %15, %model.norm.weight {eps = 1.000000e-05 : f64, module = "model.norm"} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %17 = nn.linear out_in %16, %lm_head.weight {module = "lm_head"} : (tensor<?x?x64xf32>, tensor<37x64xf32>) -> tensor<?x?x37xf32>
    %18 = nn.cross_entropy %17, %targets : (tensor<?x?x37xf32>, tensor<?x?xi64>) -> tensor<f32>
    nn.return %18 : tensor<f32>
  }
}
