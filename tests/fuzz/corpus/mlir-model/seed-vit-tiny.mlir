module {
  nn.graph @"vit-tiny"(%patches: tensor<?x16x48xf32>, %labels: tensor<?x1xi64>) -> tensor<f32> attributes {block_prefix = "vit.encoder.layer", image = {channels = 3 : i64, height = 16 : i64, patch_height = 4 : i64, patch_width = 4 : i64, width = 16 : i64}, inputs_kind = "images", max_seq_len = 17 : i64, model_type = "vit", num_blocks = 2 : i64} {
    %vit.embeddings.cls_token = nn.param "vit.embeddings.cls_token" : tensor<1x1x64xf32>
    %vit.embeddings.position_embeddings = nn.param "vit.embeddings.position_embeddings" : tensor<1x17x64xf32>
    %vit.embeddings.patch_embeddings.projection.weight = nn.param "vit.embeddings.patch_embeddings.projection.weight" : tensor<64x3x4x4xf32>
    %vit.embeddings.patch_embeddings.projection.bias = nn.param "vit.embeddings.patch_embeddings.projection.bias" : tensor<64xf32>
    %vit.encoder.layer.0.attention.attention.query.weight = nn.param "vit.encoder.layer.0.attention.attention.query.weight" : tensor<64x64xf32>
    %vit.encoder.layer.0.attention.attention.query.bias = nn.param "vit.encoder.layer.0.attention.attention.query.bias" : tensor<64xf32>
    %vit.encoder.layer.0.attention.attention.key.weight = nn.param "vit.encoder.layer.0.attention.attention.key.weight" : tensor<64x64xf32>
    %vit.encoder.layer.0.attention.attention.key.bias = nn.param "vit.encoder.layer.0.attention.attention.key.bias" : tensor<64xf32>
    %vit.encoder.layer.0.attention.attention.value.weight = nn.param "vit.encoder.layer.0.attention.attention.value.weight" : tensor<64x64xf32>
    %vit.encoder.layer.0.attention.attention.value.bias = nn.param "vit.encoder.layer.0.attention.attention.value.bias" : tensor<64xf32>
    %vit.encoder.layer.0.attention.output.dense.weight = nn.param "vit.encoder.layer.0.attention.output.dense.weight" : tensor<64x64xf32>
    %vit.encoder.layer.0.attention.output.dense.bias = nn.param "vit.encoder.layer.0.attention.output.dense.bias" : tensor<64xf32>
    %vit.encoder.layer.0.intermediate.dense.weight = nn.param "vit.encoder.layer.0.intermediate.dense.weight" : tensor<128x64xf32>
    %vit.encoder.layer.0.intermediate.dense.bias = nn.param "vit.encoder.layer.0.intermediate.dense.bias" : tensor<128xf32>
    %vit.encoder.layer.0.output.dense.weight = nn.param "vit.encoder.layer.0.output.dense.weight" : tensor<64x128xf32>
    %vit.encoder.layer.0.output.dense.bias = nn.param "vit.encoder.layer.0.output.dense.bias" : tensor<64xf32>
    %vit.encoder.layer.0.layernorm_before.weight = nn.param "vit.encoder.layer.0.layernorm_before.weight" : tensor<64xf32>
    %vit.encoder.layer.0.layernorm_before.bias = nn.param "vit.encoder.layer.0.layernorm_before.bias" : tensor<64xf32>
    %vit.encoder.layer.0.layernorm_after.weight = nn.param "vit.encoder.layer.0.layernorm_after.weight" : tensor<64xf32>
    %vit.encoder.layer.0.layernorm_after.bias = nn.param "vit.encoder.layer.0.layernorm_after.bias" : tensor<64xf32>
    %vit.encoder.layer.1.attention.attention.query.weight = nn.param "vit.encoder.layer.1.attention.attention.query.weight" : tensor<64x64xf32>
    %vit.encoder.layer.1.attention.attention.query.bias = nn.param "vit.encoder.layer.1.attention.attention.query.bias" : tensor<64xf32>
    %vit.encoder.layer.1.attention.attention.key.weight = nn.param "vit.encoder.layer.1.attention.attention.key.weight" : tensor<64x64xf32>
    %vit.encoder.layer.1.attention.attention.key.bias = nn.param "vit.encoder.layer.1.attention.attention.key.bias" : tensor<64xf32>
    %vit.encoder.layer.1.attention.attention.value.weight = nn.param "vit.encoder.layer.1.attention.attention.value.weight" : tensor<64x64xf32>
    %vit.encoder.layer.1.attention.attention.value.bias = nn.param "vit.encoder.layer.1.attention.attention.value.bias" : tensor<64xf32>
    %vit.encoder.layer.1.attention.output.dense.weight = nn.param "vit.encoder.layer.1.attention.output.dense.weight" : tensor<64x64xf32>
    %vit.encoder.layer.1.attention.output.dense.bias = nn.param "vit.encoder.layer.1.attention.output.dense.bias" : tensor<64xf32>
    %vit.encoder.layer.1.intermediate.dense.weight = nn.param "vit.encoder.layer.1.intermediate.dense.weight" : tensor<128x64xf32>
    %vit.encoder.layer.1.intermediate.dense.bias = nn.param "vit.encoder.layer.1.intermediate.dense.bias" : tensor<128xf32>
    %vit.encoder.layer.1.output.dense.weight = nn.param "vit.encoder.layer.1.output.dense.weight" : tensor<64x128xf32>
    %vit.encoder.layer.1.output.dense.bias = nn.param "vit.encoder.layer.1.output.dense.bias" : tensor<64xf32>
    %vit.encoder.layer.1.layernorm_before.weight = nn.param "vit.encoder.layer.1.layernorm_before.weight" : tensor<64xf32>
    %vit.encoder.layer.1.layernorm_before.bias = nn.param "vit.encoder.layer.1.layernorm_before.bias" : tensor<64xf32>
    %vit.encoder.layer.1.layernorm_after.weight = nn.param "vit.encoder.layer.1.layernorm_after.weight" : tensor<64xf32>
    %vit.encoder.layer.1.layernorm_after.bias = nn.param "vit.encoder.layer.1.layernorm_after.bias" : tensor<64xf32>
    %vit.layernorm.weight = nn.param "vit.layernorm.weight" : tensor<64xf32>
    %vit.layernorm.bias = nn.param "vit.layernorm.bias" : tensor<64xf32>
    %classifier.weight = nn.param "classifier.weight" : tensor<10x64xf32>
    %classifier.bias = nn.param "classifier.bias" : tensor<10xf32>
    %0 = nn.linear out_in %patches, %vit.embeddings.patch_embeddings.projection.weight, %vit.embeddings.patch_embeddings.projection.bias {module = "vit.embeddings.patch_embeddings.projection"} : (tensor<?x16x48xf32>, tensor<64x3x4x4xf32>, tensor<64xf32>) -> tensor<?x16x64xf32>
    %1 = nn.class_token %0, %vit.embeddings.cls_token, %vit.embeddings.position_embeddings {module = "vit.embeddings"} : (tensor<?x16x64xf32>, tensor<1x1x64xf32>, tensor<1x17x64xf32>) -> tensor<?x?x64xf32>
    %2 = nn.layer_norm %1, %vit.encoder.layer.0.layernorm_before.weight, %vit.encoder.layer.0.layernorm_before.bias {eps = 9.9999999999999998E-13 : f64, module = "vit.encoder.layer.0.layernorm_before"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %3 = nn.linear out_in %2, %vit.encoder.layer.0.attention.attention.query.weight, %vit.encoder.layer.0.attention.attention.query.bias {module = "vit.encoder.layer.0.attention.attention.query"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %4 = nn.linear out_in %2, %vit.encoder.layer.0.attention.attention.key.weight, %vit.encoder.layer.0.attention.attention.key.bias {module = "vit.encoder.layer.0.attention.attention.key"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %5 = nn.linear out_in %2, %vit.encoder.layer.0.attention.attention.value.weight, %vit.encoder.layer.0.attention.attention.value.bias {module = "vit.encoder.layer.0.attention.attention.value"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %6 = nn.attention %3, %4, %5 {module = "vit.encoder.layer.0.attention.attention", num_heads = 4 : i64, num_kv_heads = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %7 = nn.linear out_in %6, %vit.encoder.layer.0.attention.output.dense.weight, %vit.encoder.layer.0.attention.output.dense.bias {module = "vit.encoder.layer.0.attention.output.dense"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %8 = nn.add %7, %1 {module = "vit.encoder.layer.0"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %9 = nn.layer_norm %8, %vit.encoder.layer.0.layernorm_after.weight, %vit.encoder.layer.0.layernorm_after.bias {eps = 9.9999999999999998E-13 : f64, module = "vit.encoder.layer.0.layernorm_after"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %10 = nn.linear out_in %9, %vit.encoder.layer.0.intermediate.dense.weight, %vit.encoder.layer.0.intermediate.dense.bias {module = "vit.encoder.layer.0.intermediate.dense"} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
    %11 = nn.gelu %10 {approximate = "none", module = "vit.encoder.layer.0.intermediate.intermediate_act_fn"} : tensor<?x?x128xf32> -> tensor<?x?x128xf32>
    %12 = nn.linear out_in %11, %vit.encoder.layer.0.output.dense.weight, %vit.encoder.layer.0.output.dense.bias {module = "vit.encoder.layer.0.output.dense"} : (tensor<?x?x128xf32>, tensor<64x128xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %13 = nn.add %12, %8 {module = "vit.encoder.layer.0.output"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %14 = nn.layer_norm %13, %vit.encoder.layer.1.layernorm_before.weight, %vit.encoder.layer.1.layernorm_before.bias {eps = 9.9999999999999998E-13 : f64, module = "vit.encoder.layer.1.layernorm_before"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %15 = nn.linear out_in %14, %vit.encoder.layer.1.attention.attention.query.weight, %vit.encoder.layer.1.attention.attention.query.bias {module = "vit.encoder.layer.1.attention.attention.query"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %16 = nn.linear out_in %14, %vit.encoder.layer.1.attention.attention.key.weight, %vit.encoder.layer.1.attention.attention.key.bias {module = "vit.encoder.layer.1.attention.attention.key"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %17 = nn.linear out_in %14, %vit.encoder.layer.1.attention.attention.value.weight, %vit.encoder.layer.1.attention.attention.value.bias {module = "vit.encoder.layer.1.attention.attention.value"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %18 = nn.attention %15, %16, %17 {module = "vit.encoder.layer.1.attention.attention", num_heads = 4 : i64, num_kv_heads = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %19 = nn.linear out_in %18, %vit.encoder.layer.1.attention.output.dense.weight, %vit.encoder.layer.1.attention.output.dense.bias {module = "vit.encoder.layer.1.attention.output.dense"} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %20 = nn.add %19, %13 {module = "vit.encoder.layer.1"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %21 = nn.layer_norm %20, %vit.encoder.layer.1.layernorm_after.weight, %vit.encoder.layer.1.layernorm_after.bias {eps = 9.9999999999999998E-13 : f64, module = "vit.encoder.layer.1.layernorm_after"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %22 = nn.linear out_in %21, %vit.encoder.layer.1.intermediate.dense.weight, %vit.encoder.layer.1.intermediate.dense.bias {module = "vit.encoder.layer.1.intermediate.dense"} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
    %23 = nn.gelu %22 {approximate = "none", module = "vit.encoder.layer.1.intermediate.intermediate_act_fn"} : tensor<?x?x128xf32> -> tensor<?x?x128xf32>
    %24 = nn.linear out_in %23, %vit.encoder.layer.1.output.dense.weight, %vit.encoder.layer.1.output.dense.bias {module = "vit.encoder.layer.1.output.dense"} : (tensor<?x?x128xf32>, tensor<64x128xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %25 = nn.add %24, %20 {module = "vit.encoder.layer.1.output"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %26 = nn.layer_norm %25, %vit.layernorm.weight, %vit.layernorm.bias {eps = 9.9999999999999998E-13 : f64, module = "vit.layernorm"} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %27 = nn.first_token %26 {module = "vit"} : tensor<?x?x64xf32> -> tensor<?x1x64xf32>
    %28 = nn.linear out_in %27, %classifier.weight, %classifier.bias {module = "classifier"} : (tensor<?x1x64xf32>, tensor<10x64xf32>, tensor<10xf32>) -> tensor<?x1x10xf32>
    %29 = nn.cross_entropy %28, %labels : (tensor<?x1x10xf32>, tensor<?x1xi64>) -> tensor<f32>
    nn.return %29 : tensor<f32>
  }
}
