module {
  nn.graph @"bert-tiny"(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "bert.encoder.layer", inputs_kind = "masked_tokens", max_seq_len = 128 : i64, model_type = "bert", num_blocks = 2 : i64} {
    %bert.embeddings.word_embeddings.weight = nn.param "bert.embeddings.word_embeddings.weight" : tensor<503x64xf32>
    %bert.embeddings.position_embeddings.weight = nn.param "bert.embeddings.position_embeddings.weight" : tensor<128x64xf32>
    %bert.embeddings.token_type_embeddings.weight = nn.param "bert.embeddings.token_type_embeddings.weight" : tensor<2x64xf32>
    %bert.embeddings.LayerNorm.weight = nn.param "bert.embeddings.LayerNorm.weight" : tensor<64xf32>
    %bert.embeddings.LayerNorm.bias = nn.param "bert.embeddings.LayerNorm.bias" : tensor<64xf32>
    %bert.encoder.layer.0.attention.self.query.weight = nn.param "bert.encoder.layer.0.attention.self.query.weight" : tensor<64x64xf32>
    %bert.encoder.layer.0.attention.self.query.bias = nn.param "bert.encoder.layer.0.attention.self.query.bias" : tensor<64xf32>
    %bert.encoder.layer.0.attention.self.key.weight = nn.param "bert.encoder.layer.0.attention.self.key.weight" : tensor<64x64xf32>
    %bert.encoder.layer.0.attention.self.key.bias = nn.param "bert.encoder.layer.0.attention.self.key.bias" : tensor<64xf32>
    %bert.encoder.layer.0.attention.self.value.weight = nn.param "bert.encoder.layer.0.attention.self.value.weight" : tensor<64x64xf32>
    %bert.encoder.layer.0.attention.self.value.bias = nn.param "bert.encoder.layer.0.attention.self.value.bias" : tensor<64xf32>
    %bert.encoder.layer.0.attention.output.dense.weight = nn.param "bert.encoder.layer.0.attention.output.dense.weight" : tensor<64x64xf32>
    %bert.encoder.layer.0.attention.output.dense.bias = nn.param "bert.encoder.layer.0.attention.output.dense.bias" : tensor<64xf32>
    %bert.encoder.layer.0.attention.output.LayerNorm.weight = nn.param "bert.encoder.layer.0.attention.output.LayerNorm.weight" : tensor<64xf32>
    %bert.encoder.layer.0.attention.output.LayerNorm.bias = nn.param "bert.encoder.layer.0.attention.output.LayerNorm.bias" : tensor<64xf32>
    %bert.encoder.layer.0.intermediate.dense.weight = nn.param "bert.encoder.layer.0.intermediate.dense.weight" : tensor<128x64xf32>
    %bert.encoder.layer.0.intermediate.dense.bias = nn.param "bert.encoder.layer.0.intermediate.dense.bias" : tensor<128xf32>
    %bert.encoder.layer.0.output.dense.weight = nn.param "bert.encoder.layer.0.output.dense.weight" : tensor<64x128xf32>
    %bert.encoder.layer.0.output.dense.bias = nn.param "bert.encoder.layer.0.output.dense.bias" : tensor<64xf32>
    %bert.encoder.layer.0.output.LayerNorm.weight = nn.param "bert.encoder.layer.0.output.LayerNorm.weight" : tensor<64xf32>
    %bert.encoder.layer.0.output.LayerNorm.bias = nn.param "bert.encoder.layer.0.output.LayerNorm.bias" : tensor<64xf32>
    %bert.encoder.layer.1.attention.self.query.weight = nn.param "bert.encoder.layer.1.attention.self.query.weight" : tensor<64x64xf32>
    %bert.encoder.layer.1.attention.self.query.bias = nn.param "bert.encoder.layer.1.attention.self.query.bias" : tensor<64xf32>
    %bert.encoder.layer.1.attention.self.key.weight = nn.param "bert.encoder.layer.1.attention.self.key.weight" : tensor<64x64xf32>
    %bert.encoder.layer.1.attention.self.key.bias = nn.param "bert.encoder.layer.1.attention.self.key.bias" : tensor<64xf32>
    %bert.encoder.layer.1.attention.self.value.weight = nn.param "bert.encoder.layer.1.attention.self.value.weight" : tensor<64x64xf32>
    %bert.encoder.layer.1.attention.self.value.bias = nn.param "bert.encoder.layer.1.attention.self.value.bias" : tensor<64xf32>
    %bert.encoder.layer.1.attention.output.dense.weight = nn.param "bert.encoder.layer.1.attention.output.dense.weight" : tensor<64x64xf32>
    %bert.encoder.layer.1.attention.output.dense.bias = nn.param "bert.encoder.layer.1.attention.output.dense.bias" : tensor<64xf32>
    %bert.encoder.layer.1.attention.output.LayerNorm.weight = nn.param "bert.encoder.layer.1.attention.output.LayerNorm.weight" : tensor<64xf32>
    %bert.encoder.layer.1.attention.output.LayerNorm.bias = nn.param "bert.encoder.layer.1.attention.output.LayerNorm.bias" : tensor<64xf32>
    %bert.encoder.layer.1.intermediate.dense.weight = nn.param "bert.encoder.layer.1.intermediate.dense.weight" : tensor<128x64xf32>
    %bert.encoder.layer.1.intermediate.dense.bias = nn.param "bert.encoder.layer.1.intermediate.dense.bias" : tensor<128xf32>
    %bert.encoder.layer.1.output.dense.weight = nn.param "bert.encoder.layer.1.output.dense.weight" : tensor<64x128xf32>
    %bert.encoder.layer.1.output.dense.bias = nn.param "bert.encoder.layer.1.output.dense.bias" : tensor<64xf32>
    %bert.encoder.layer.1.output.LayerNorm.weight = nn.param "bert.encoder.layer.1.output.LayerNorm.weight" : tensor<64xf32>
    %bert.encoder.layer.1.output.LayerNorm.bias = nn.param "bert.encoder.layer.1.output.LayerNorm.bias" : tensor<64xf32>
    %cls.predictions.bias = nn.param "cls.predictions.bias" : tensor<503xf32>
    %cls.predictions.transform.dense.weight = nn.param "cls.predictions.transform.dense.weight" : tensor<64x64xf32>
    %cls.predictions.transform.dense.bias = nn.param "cls.predictions.transform.dense.bias" : tensor<64xf32>
    %cls.predictions.transform.LayerNorm.weight = nn.param "cls.predictions.transform.LayerNorm.weight" : tensor<64xf32>
    %cls.predictions.transform.LayerNorm.bias = nn.param "cls.predictions.transform.LayerNorm.bias" : tensor<64xf32>
    %0 = nn.position_ids %tokens {module = "bert.embeddings.position_embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
    %1 = nn.token_type_ids %tokens {module = "bert.embeddings.token_type_embeddings"} : tensor<?x?xi64> -> tensor<?x?xi64>
    %2 = nn.embedding %tokens, %bert.embeddings.word_embeddings.weight {module = "bert.embeddings.word_embeddings"} : (tensor<?x?xi64>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    %3 = nn.embedding %1, %bert.embeddings.token_type_embeddings.weight {module = "bert.embeddings.token_type_embeddings"} : (tensor<?x?xi64>, tensor<2x64xf32>) -> tensor<?x?x64xf32>
    %4 = nn.embedding %0, %bert.embeddings.position_embeddings.weight {module = "bert.embeddings.position_embeddings"} : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
    %5 = nn.add %2, %3 {module = "bert.embeddings"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %6 = nn.add %5, %4 {module = "bert.embeddings"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %7 = nn.layer_norm %6, %bert.embeddings.LayerNorm.weight, %bert.embeddings.LayerNorm.bias {eps = 9.9999999999999998E-13 : f64, module = "bert.embeddings.LayerNorm"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %8 = nn.linear out_in %7, %bert.encoder.layer.0.attention.self.query.weight, %bert.encoder.layer.0.attention.self.query.bias {module = "bert.encoder.layer.0.attention.self.query"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %9 = nn.linear out_in %7, %bert.encoder.layer.0.attention.self.key.weight, %bert.encoder.layer.0.attention.self.key.bias {module = "bert.encoder.layer.0.attention.self.key"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %10 = nn.linear out_in %7, %bert.encoder.layer.0.attention.self.value.weight, %bert.encoder.layer.0.attention.self.value.bias {module = "bert.encoder.layer.0.attention.self.value"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %11 = nn.attention %8, %9, %10 {module = "bert.encoder.layer.0.attention.self", num_heads = 4 : i64, num_kv_heads = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %12 = nn.linear out_in %11, %bert.encoder.layer.0.attention.output.dense.weight, %bert.encoder.layer.0.attention.output.dense.bias {module = "bert.encoder.layer.0.attention.output.dense"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %13 = nn.add %12, %7 {module = "bert.encoder.layer.0.attention.output"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %14 = nn.layer_norm %13, %bert.encoder.layer.0.attention.output.LayerNorm.weight, %bert.encoder.layer.0.attention.output.LayerNorm.bias {eps = 9.9999999999999998E-13 : f64, module = "bert.encoder.layer.0.attention.output.LayerNorm"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %15 = nn.linear out_in %14, %bert.encoder.layer.0.intermediate.dense.weight, %bert.encoder.layer.0.intermediate.dense.bias {module = "bert.encoder.layer.0.intermediate.dense"} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
    %16 = nn.gelu %15 {approximate = "none", module = "bert.encoder.layer.0.intermediate.intermediate_act_fn"} : tensor<?x?x128xf32> -> tensor<?x?x128xf32>
    %17 = nn.linear out_in %16, %bert.encoder.layer.0.output.dense.weight, %bert.encoder.layer.0.output.dense.bias {module = "bert.encoder.layer.0.output.dense"} : (tensor<?x?x128xf32>, tensor<64x128xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %18 = nn.add %17, %14 {module = "bert.encoder.layer.0.output"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %19 = nn.layer_norm %18, %bert.encoder.layer.0.output.LayerNorm.weight, %bert.encoder.layer.0.output.LayerNorm.bias {eps = 9.9999999999999998E-13 : f64, module = "bert.encoder.layer.0.output.LayerNorm"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %20 = nn.linear out_in %19, %bert.encoder.layer.1.attention.self.query.weight, %bert.encoder.layer.1.attention.self.query.bias {module = "bert.encoder.layer.1.attention.self.query"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %21 = nn.linear out_in %19, %bert.encoder.layer.1.attention.self.key.weight, %bert.encoder.layer.1.attention.self.key.bias {module = "bert.encoder.layer.1.attention.self.key"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %22 = nn.linear out_in %19, %bert.encoder.layer.1.attention.self.value.weight, %bert.encoder.layer.1.attention.self.value.bias {module = "bert.encoder.layer.1.attention.self.value"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %23 = nn.attention %20, %21, %22 {module = "bert.encoder.layer.1.attention.self", num_heads = 4 : i64, num_kv_heads = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %24 = nn.linear out_in %23, %bert.encoder.layer.1.attention.output.dense.weight, %bert.encoder.layer.1.attention.output.dense.bias {module = "bert.encoder.layer.1.attention.output.dense"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %25 = nn.add %24, %19 {module = "bert.encoder.layer.1.attention.output"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %26 = nn.layer_norm %25, %bert.encoder.layer.1.attention.output.LayerNorm.weight, %bert.encoder.layer.1.attention.output.LayerNorm.bias {eps = 9.9999999999999998E-13 : f64, module = "bert.encoder.layer.1.attention.output.LayerNorm"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %27 = nn.linear out_in %26, %bert.encoder.layer.1.intermediate.dense.weight, %bert.encoder.layer.1.intermediate.dense.bias {module = "bert.encoder.layer.1.intermediate.dense"} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
    %28 = nn.gelu %27 {approximate = "none", module = "bert.encoder.layer.1.intermediate.intermediate_act_fn"} : tensor<?x?x128xf32> -> tensor<?x?x128xf32>
    %29 = nn.linear out_in %28, %bert.encoder.layer.1.output.dense.weight, %bert.encoder.layer.1.output.dense.bias {module = "bert.encoder.layer.1.output.dense"} : (tensor<?x?x128xf32>, tensor<64x128xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %30 = nn.add %29, %26 {module = "bert.encoder.layer.1.output"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %31 = nn.layer_norm %30, %bert.encoder.layer.1.output.LayerNorm.weight, %bert.encoder.layer.1.output.LayerNorm.bias {eps = 9.9999999999999998E-13 : f64, module = "bert.encoder.layer.1.output.LayerNorm"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %32 = nn.linear out_in %31, %cls.predictions.transform.dense.weight, %cls.predictions.transform.dense.bias {module = "cls.predictions.transform.dense"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %33 = nn.gelu %32 {approximate = "none", module = "cls.predictions.transform.transform_act_fn"} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %34 = nn.layer_norm %33, %cls.predictions.transform.LayerNorm.weight, %cls.predictions.transform.LayerNorm.bias {eps = 9.9999999999999998E-13 : f64, module = "cls.predictions.transform.LayerNorm"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %35 = nn.linear out_in %34, %bert.embeddings.word_embeddings.weight, %cls.predictions.bias {module = "cls.predictions.decoder"} : (tensor<?x?x64xf32>, tensor<503x64xf32>, tensor<503xf32>) -> tensor<?x?x503xf32>
    %36 = nn.cross_entropy %35, %targets : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<f32>
    nn.return %36 : tensor<f32>
  }
}
