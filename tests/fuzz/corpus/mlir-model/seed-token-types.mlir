module {
  nn.graph @"token-types-tiny"(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "bert.encoder.layer", max_seq_len = 16 : i64, model_type = "bert", num_blocks = 1 : i64} {
    %bert.embeddings.word_embeddings.weight = nn.param "bert.embeddings.word_embeddings.weight" : tensor<10x8xf32>
    %bert.embeddings.position_embeddings.weight = nn.param "bert.embeddings.position_embeddings.weight" : tensor<16x8xf32>
    %bert.embeddings.token_type_embeddings.weight = nn.param "bert.embeddings.token_type_embeddings.weight" : tensor<2x8xf32>
    %bert.embeddings.LayerNorm.weight = nn.param "bert.embeddings.LayerNorm.weight" : tensor<8xf32>
    %bert.embeddings.LayerNorm.bias = nn.param "bert.embeddings.LayerNorm.bias" : tensor<8xf32>
    %bert.encoder.layer.0.intermediate.dense.weight = nn.param "bert.encoder.layer.0.intermediate.dense.weight" : tensor<16x8xf32>
    %bert.encoder.layer.0.intermediate.dense.bias = nn.param "bert.encoder.layer.0.intermediate.dense.bias" : tensor<16xf32>
    %bert.encoder.layer.0.output.dense.weight = nn.param "bert.encoder.layer.0.output.dense.weight" : tensor<8x16xf32>
    %bert.encoder.layer.0.output.dense.bias = nn.param "bert.encoder.layer.0.output.dense.bias" : tensor<8xf32>
    %bert.encoder.layer.0.output.LayerNorm.weight = nn.param "bert.encoder.layer.0.output.LayerNorm.weight" : tensor<8xf32>
    %bert.encoder.layer.0.output.LayerNorm.bias = nn.param "bert.encoder.layer.0.output.LayerNorm.bias" : tensor<8xf32>
    %cls.predictions.bias = nn.param "cls.predictions.bias" : tensor<10xf32>
    %0 = nn.position_ids %tokens {module = "bert.embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
    %1 = nn.token_type_ids %tokens {module = "bert.embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
    %2 = nn.embedding %tokens, %bert.embeddings.word_embeddings.weight {module = "bert.embeddings.word_embeddings"} : (tensor<?x?xi64>, tensor<10x8xf32>) -> tensor<?x?x8xf32>
    %3 = nn.embedding %1, %bert.embeddings.token_type_embeddings.weight {module = "bert.embeddings.token_type_embeddings"} : (tensor<?x?xi64>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
    %4 = nn.embedding %0, %bert.embeddings.position_embeddings.weight {module = "bert.embeddings.position_embeddings"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %5 = nn.add %2, %3 {module = "bert.embeddings"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %6 = nn.add %5, %4 {module = "bert.embeddings"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %7 = nn.layer_norm %6, %bert.embeddings.LayerNorm.weight, %bert.embeddings.LayerNorm.bias {eps = 9.9999999999999998E-13 : f64, module = "bert.embeddings.LayerNorm"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    %8 = nn.linear out_in %7, %bert.encoder.layer.0.intermediate.dense.weight, %bert.encoder.layer.0.intermediate.dense.bias {module = "bert.encoder.layer.0.intermediate.dense"} : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
    %9 = nn.gelu %8 {approximate = "none", module = "bert.encoder.layer.0.intermediate.intermediate_act_fn"} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
    %10 = nn.linear out_in %9, %bert.encoder.layer.0.output.dense.weight, %bert.encoder.layer.0.output.dense.bias {module = "bert.encoder.layer.0.output.dense"} : (tensor<?x?x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    %11 = nn.add %10, %7 {module = "bert.encoder.layer.0.output"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %12 = nn.layer_norm %11, %bert.encoder.layer.0.output.LayerNorm.weight, %bert.encoder.layer.0.output.LayerNorm.bias {eps = 9.9999999999999998E-13 : f64, module = "bert.encoder.layer.0.output.LayerNorm"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    %13 = nn.linear out_in %12, %bert.embeddings.word_embeddings.weight, %cls.predictions.bias {module = "cls.predictions.decoder"} : (tensor<?x?x8xf32>, tensor<10x8xf32>, tensor<10xf32>) -> tensor<?x?x10xf32>
    %14 = nn.cross_entropy %13, %targets : (tensor<?x?x10xf32>, tensor<?x?xi64>) -> tensor<f32>
    nn.return %14 : tensor<f32>
  }
}
