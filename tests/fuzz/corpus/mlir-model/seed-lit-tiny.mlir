nn.graph @tiny(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "blocks", num_blocks = 1 : i64, max_seq_len = 8 : i64} {
  %e = nn.param "emb.weight" : tensor<16x8xf32>
  %w = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
  %h = nn.param "head.weight" : tensor<16x8xf32>
  %x = nn.embedding %tokens, %e {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %y = nn.linear out_in %x, %w {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %y, %h {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}
