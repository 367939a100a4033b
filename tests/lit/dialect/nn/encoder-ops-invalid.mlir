// The verifiers of nn.attention, nn.attention_grad and GELU's `approximate`,
// one error per split.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// GELU's forms are torch's names: "tanh" or "none".
nn.graph @gelu_form(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.gelu' op approximate must be "tanh" or "none" (exact), but is "erf"}}
  %y = nn.gelu %h {approximate = "erf"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @gelu_grad_form(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.gelu_grad' op approximate must be "tanh" or "none" (exact), but is ""}}
  %y = nn.gelu_grad %h, %h {approximate = ""} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Bidirectional attention has no sliding window: `window` is not its attribute.
nn.graph @attention_window(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.attention' op has no sliding window: 'window' is nn.causal_attention's; bidirectional attention sees every key}}
  %y = nn.attention %h, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64, window = 4 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @attention_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.attention' op module path must not be empty}}
  %y = nn.attention %h, %h, %h {module = "", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @attention_heads(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.attention' op num_heads = 3 must be a multiple of num_kv_heads = 2}}
  %y = nn.attention %h, %h, %h {num_heads = 3 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @attention_key(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x6xf32>
  // expected-error @+1 {{'nn.attention' op key must be [?, ?, 4] (1 kv heads of dimension 4), but it is [?, ?, 6]}}
  %y = nn.attention %h, %k, %k {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<?x?x8xf32>, tensor<?x?x6xf32>, tensor<?x?x6xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @attention_grad_output(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x4xf32>
  // expected-error @+1 {{'nn.attention_grad' op output must be 'tensor<?x?x8xf32>', but it is 'tensor<?x?x4xf32>'}}
  %dq, %dk, %dv = nn.attention_grad %h, %h, %h, %h, %o {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @attention_grad_heads(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.attention_grad' op num_heads and num_kv_heads must be positive, but are 0 and 2}}
  %dq, %dk, %dv = nn.attention_grad %h, %h, %h, %h, %h {num_heads = 0 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  nn.return %loss : tensor<f32>
}
