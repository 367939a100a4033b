// The verifiers of the mixture-of-experts ops, one error per split.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

nn.graph @top_k_too_large(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.moe_route' op top_k = 5 must be in [1, E = 4]}}
  %w, %e, %s = nn.moe_route %l {top_k = 5 : i64} : tensor<?x?x4xf32> -> tensor<?x?x5xf32>, tensor<?x?x5xi64>, tensor<?x?x5xi64>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @route_k_mismatch(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.moe_route' op slots [?, ?, 3] must have k = 2 choices}}
  %w, %e, %s = nn.moe_route %l {top_k = 2 : i64} : tensor<?x?x4xf32> -> tensor<?x?x2xf32>, tensor<?x?x2xi64>, tensor<?x?x3xi64>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @route_float_experts(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.moe_route' op experts must hold i64 indices, but holds 'i32'}}
  %w, %e, %s = nn.moe_route %l {top_k = 2 : i64} : tensor<?x?x4xf32> -> tensor<?x?x2xf32>, tensor<?x?x2xi32>, tensor<?x?x2xi64>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @permute_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w, %e, %s = nn.moe_route %l {top_k = 2 : i64} : tensor<?x?x4xf32> -> tensor<?x?x2xf32>, tensor<?x?x2xi64>, tensor<?x?x2xi64>
  // expected-error @+1 {{'nn.moe_permute' op result must be [?, ?, 2, 8], but it is [?, ?, 8]}}
  %p = nn.moe_permute %h, %s : (tensor<?x?x8xf32>, tensor<?x?x2xi64>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @linear_one_expert(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w, %e, %s = nn.moe_route %l {top_k = 2 : i64} : tensor<?x?x4xf32> -> tensor<?x?x2xf32>, tensor<?x?x2xi64>, tensor<?x?x2xi64>
  %p = nn.moe_permute %h, %s : (tensor<?x?x8xf32>, tensor<?x?x2xi64>) -> tensor<?x?x2x8xf32>
  // expected-error @+1 {{'nn.moe_linear' op needs the weights of at least 2 experts, but has 1}}
  %y = nn.moe_linear %p, %e, %w0 : (tensor<?x?x2x8xf32>, tensor<?x?x2xi64>, tensor<6x8xf32>) -> tensor<?x?x2x6xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @linear_features(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w, %e, %s = nn.moe_route %l {top_k = 2 : i64} : tensor<?x?x4xf32> -> tensor<?x?x2xf32>, tensor<?x?x2xi64>, tensor<?x?x2xi64>
  %p = nn.moe_permute %h, %s : (tensor<?x?x8xf32>, tensor<?x?x2xi64>) -> tensor<?x?x2x8xf32>
  // expected-error @+1 {{'nn.moe_linear' op result must be [?, ?, 2, 6], but it is [?, ?, 2, 8]}}
  %y = nn.moe_linear %p, %e, %w0, %w1 : (tensor<?x?x2x8xf32>, tensor<?x?x2xi64>, tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<?x?x2x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @combine_k(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w, %e, %s = nn.moe_route %l {top_k = 2 : i64} : tensor<?x?x4xf32> -> tensor<?x?x2xf32>, tensor<?x?x2xi64>, tensor<?x?x2xi64>
  %p = nn.moe_permute %h, %s : (tensor<?x?x8xf32>, tensor<?x?x2xi64>) -> tensor<?x?x2x8xf32>
  %w3:3 = nn.moe_route %l {top_k = 3 : i64} : tensor<?x?x4xf32> -> tensor<?x?x3xf32>, tensor<?x?x3xi64>, tensor<?x?x3xi64>
  // expected-error @+1 {{'nn.moe_combine' op weights [?, ?, 3] must have k = 2 choices}}
  %y = nn.moe_combine %p, %w3#0, %s : (tensor<?x?x2x8xf32>, tensor<?x?x3xf32>, tensor<?x?x2xi64>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @aux_coef(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.moe_aux_loss' op coef must be finite and >= 0, but is -1}}
  %t = nn.moe_aux_loss %loss, %l {coef = -1.0 : f64, top_k = 2 : i64} : (tensor<f32>, tensor<?x?x4xf32>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @aux_layers_differ(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mixtral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %gate = nn.param "gate" : tensor<4x8xf32>
  %w0 = nn.param "e0" : tensor<6x8xf32>
  %w1 = nn.param "e1" : tensor<6x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %h, %gate : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %l2 = nn.linear out_in %h, %w0 : (tensor<?x?x8xf32>, tensor<6x8xf32>) -> tensor<?x?x6xf32>
  // expected-error @+1 {{'nn.moe_aux_loss' op layer 1's logits 'tensor<?x?x6xf32>' differ from layer 0's 'tensor<?x?x4xf32>'}}
  %t = nn.moe_aux_loss %loss, %l, %l2 {coef = 0.01 : f64, top_k = 2 : i64} : (tensor<f32>, tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}
