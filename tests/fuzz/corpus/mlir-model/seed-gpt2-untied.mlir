module {
  nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "transformer.h", max_seq_len = 16 : i64, model_type = "gpt2", num_blocks = 1 : i64} {
    %transformer.wte.weight = nn.param "transformer.wte.weight" : tensor<29x64xf32>
    %transformer.wpe.weight = nn.param "transformer.wpe.weight" : tensor<16x64xf32>
    %transformer.h.0.ln_1.weight = nn.param "transformer.h.0.ln_1.weight" : tensor<64xf32>
    %transformer.h.0.ln_1.bias = nn.param "transformer.h.0.ln_1.bias" : tensor<64xf32>
    %transformer.h.0.attn.c_attn.weight = nn.param "transformer.h.0.attn.c_attn.weight" : tensor<64x192xf32>
    %transformer.h.0.attn.c_attn.bias = nn.param "transformer.h.0.attn.c_attn.bias" : tensor<192xf32>
    %transformer.h.0.attn.c_proj.weight = nn.param "transformer.h.0.attn.c_proj.weight" : tensor<64x64xf32>
    %transformer.h.0.attn.c_proj.bias = nn.param "transformer.h.0.attn.c_proj.bias" : tensor<64xf32>
    %transformer.h.0.ln_2.weight = nn.param "transformer.h.0.ln_2.weight" : tensor<64xf32>
    %transformer.h.0.ln_2.bias = nn.param "transformer.h.0.ln_2.bias" : tensor<64xf32>
    %transformer.h.0.mlp.c_fc.weight = nn.param "transformer.h.0.mlp.c_fc.weight" : tensor<64x48xf32>
    %transformer.h.0.mlp.c_fc.bias = nn.param "transformer.h.0.mlp.c_fc.bias" : tensor<48xf32>
    %transformer.h.0.mlp.c_proj.weight = nn.param "transformer.h.0.mlp.c_proj.weight" : tensor<48x64xf32>
    %transformer.h.0.mlp.c_proj.bias = nn.param "transformer.h.0.mlp.c_proj.bias" : tensor<64xf32>
    %transformer.ln_f.weight = nn.param "transformer.ln_f.weight" : tensor<64xf32>
    %transformer.ln_f.bias = nn.param "transformer.ln_f.bias" : tensor<64xf32>
    %lm_head.weight = nn.param "lm_head.weight" : tensor<29x64xf32>
    %0 = nn.position_ids %tokens {module = "transformer.wpe"} : tensor<?x?xi64> -> tensor<?x?xi64>
    %1 = nn.embedding %tokens, %transformer.wte.weight {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<29x64xf32>) -> tensor<?x?x64xf32>
    %2 = nn.embedding %0, %transformer.wpe.weight {module = "transformer.wpe"} : (tensor<?x?xi64>, tensor<16x64xf32>) -> tensor<?x?x64xf32>
    %3 = nn.add %1, %2 {module = "transformer"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %4 = nn.layer_norm %3, %transformer.h.0.ln_1.weight, %transformer.h.0.ln_1.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %5 = nn.linear in_out %4, %transformer.h.0.attn.c_attn.weight, %transformer.h.0.attn.c_attn.bias {module = "transformer.h.0.attn.c_attn"} : (tensor<?x?x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
    %6:3 = nn.split %5 {module = "transformer.h.0.attn"} : tensor<?x?x192xf32> -> tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
    %7 = nn.causal_attention %6#0, %6#1, %6#2 {module = "transformer.h.0.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %8 = nn.linear in_out %7, %transformer.h.0.attn.c_proj.weight, %transformer.h.0.attn.c_proj.bias {module = "transformer.h.0.attn.c_proj"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %9 = nn.add %3, %8 {module = "transformer.h.0"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %10 = nn.layer_norm %9, %transformer.h.0.ln_2.weight, %transformer.h.0.ln_2.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_2"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %11 = nn.linear in_out %10, %transformer.h.0.mlp.c_fc.weight, %transformer.h.0.mlp.c_fc.bias {module = "transformer.h.0.mlp.c_fc"} : (tensor<?x?x64xf32>, tensor<64x48xf32>, tensor<48xf32>) -> tensor<?x?x48xf32>
    %12 = nn.gelu %11 {module = "transformer.h.0.mlp.act"} : tensor<?x?x48xf32> -> tensor<?x?x48xf32>
    %13 = nn.linear in_out %12, %transformer.h.0.mlp.c_proj.weight, %transformer.h.0.mlp.c_proj.bias {module = "transformer.h.0.mlp.c_proj"} : (tensor<?x?x48xf32>, tensor<48x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %14 = nn.add %9, %13 {module = "transformer.h.0"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %15 = nn.layer_norm %14, %transformer.ln_f.weight, %transformer.ln_f.bias {eps = 1.000000e-05 : f64, module = "transformer.ln_f"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %16 = nn.linear out_in %15, %lm_head.weight {module = "lm_head"} : (tensor<?x?x64xf32>, tensor<29x64xf32>) -> tensor<?x?x29xf32>
    %17 = nn.cross_entropy %16, %targets : (tensor<?x?x29xf32>, tensor<?x?xi64>) -> tensor<f32>
    nn.return %17 : tensor<f32>
  }
}
