// Each verifier of the nn dialect's gradient ops, one error per split: every
// op sits in an otherwise valid training step. Operands of the shapes under
// test come from builtin.unrealized_conversion_cast with no inputs.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// nn.cross_entropy_grad
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %l = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.cross_entropy_grad' op module path must not be empty}}
  %r = nn.cross_entropy_grad %l, %targets {module = ""} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// Logits are [B, S, V].
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %l = builtin.unrealized_conversion_cast to tensor<?x16xf32>
  // expected-error @+1 {{'nn.cross_entropy_grad' op logits must have rank 3, but it is [?, 16]}}
  %r = nn.cross_entropy_grad %l, %targets : (tensor<?x16xf32>, tensor<?x?xi64>) -> tensor<?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// Targets are [B, S].
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %l = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %t = builtin.unrealized_conversion_cast to tensor<?xi64>
  // expected-error @+1 {{'nn.cross_entropy_grad' op targets must have rank 2, but it is [?]}}
  %r = nn.cross_entropy_grad %l, %t : (tensor<?x?x16xf32>, tensor<?xi64>) -> tensor<?x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient has the logits' type: their shape...
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %l = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.cross_entropy_grad' op result must be 'tensor<?x?x16xf32>', but it is 'tensor<?x?x8xf32>'}}
  %r = nn.cross_entropy_grad %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// ... and their element type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %l = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  // expected-error @+1 {{result must be 'tensor<?x?x16xbf16>', but it is 'tensor<?x?x16xf32>'}}
  %r = nn.cross_entropy_grad %l, %targets : (tensor<?x?x16xbf16>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.linear_grad_input
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8x24xf32>
  // expected-error @+1 {{'nn.linear_grad_input' op module path must not be empty}}
  %r = nn.linear_grad_input in_out %dy, %w {module = ""} : (tensor<?x?x24xf32>, tensor<8x24xf32>) -> tensor<?x?x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The weight is a matrix.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  %w = builtin.unrealized_conversion_cast to tensor<24xf32>
  // expected-error @+1 {{'nn.linear_grad_input' op weight must have rank 2, or be an out_in [out, d1, ..., dk] weight read as [out, d1 * ... * dk], but it is [24]}}
  %r = nn.linear_grad_input in_out %dy, %w : (tensor<?x?x24xf32>, tensor<24xf32>) -> tensor<?x?x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// An in_out weight [8, 24] has 24 outputs: the gradient ends in 24.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8x24xf32>
  // expected-error @+1 {{'nn.linear_grad_input' op gradient [?, ?, 16] must end in 24 to match the weight [8, 24]}}
  %r = nn.linear_grad_input in_out %dy, %w : (tensor<?x?x16xf32>, tensor<8x24xf32>) -> tensor<?x?x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// An out_in weight [16, 8] has 16 outputs.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %w = builtin.unrealized_conversion_cast to tensor<16x8xf32>
  // expected-error @+1 {{gradient [?, ?, 8] must end in 16 to match the weight [16, 8]}}
  %r = nn.linear_grad_input out_in %dy, %w : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// A scalar gradient has no last dimension.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<f32>
  %w = builtin.unrealized_conversion_cast to tensor<8x24xf32>
  // expected-error @+1 {{gradient [] must end in 24 to match the weight [8, 24]}}
  %r = nn.linear_grad_input in_out %dy, %w : (tensor<f32>, tensor<8x24xf32>) -> tensor<8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dx has the gradient's shape with the last dimension the weight's inputs.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8x24xf32>
  // expected-error @+1 {{'nn.linear_grad_input' op result must be [?, ?, 8], but it is [?, ?, 24]}}
  %r = nn.linear_grad_input in_out %dy, %w : (tensor<?x?x24xf32>, tensor<8x24xf32>) -> tensor<?x?x24xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.linear_grad_weight
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.linear_grad_weight' op module path must not be empty}}
  %r = nn.linear_grad_weight in_out %dy, %x {module = ""} : (tensor<?x?x24xf32>, tensor<?x?x8xf32>) -> tensor<8x24xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient and the input have one rank.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.linear_grad_weight' op gradient [?, ?, 24] and input [?, 8] must have one rank}}
  %r = nn.linear_grad_weight in_out %dy, %x : (tensor<?x?x24xf32>, tensor<?x8xf32>) -> tensor<8x24xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// Scalars have no features.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<f32>
  // expected-error @+1 {{gradient [] and input [] must have one rank}}
  %r = nn.linear_grad_weight in_out %dy, %x : (tensor<f32>, tensor<f32>) -> tensor<1x1xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient and the input agree on batch and sequence.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<2x?x24xf32>
  %x = builtin.unrealized_conversion_cast to tensor<3x?x8xf32>
  // expected-error @+1 {{'nn.linear_grad_weight' op gradient [2, ?, 24] and input [3, ?, 8] must agree on all but the last dimension}}
  %r = nn.linear_grad_weight in_out %dy, %x : (tensor<2x?x24xf32>, tensor<3x?x8xf32>) -> tensor<8x24xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// in_out: dW is [in, out].
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.linear_grad_weight' op result must be [8, 24], but it is [24, 8]}}
  %r = nn.linear_grad_weight in_out %dy, %x : (tensor<?x?x24xf32>, tensor<?x?x8xf32>) -> tensor<24x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// out_in: dW is [out, in].
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{result must be [16, 8], but it is [8, 16]}}
  %r = nn.linear_grad_weight out_in %dy, %x : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<8x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.bias_grad
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  // expected-error @+1 {{'nn.bias_grad' op module path must not be empty}}
  %r = nn.bias_grad %dy {module = ""} : tensor<?x?x24xf32> -> tensor<24xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// A scalar gradient has no features to sum into.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<f32>
  // expected-error @+1 {{'nn.bias_grad' op gradient must have rank >= 1}}
  %r = nn.bias_grad %dy : tensor<f32> -> tensor<1xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// db is [out].
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  // expected-error @+1 {{'nn.bias_grad' op result must be [24], but it is [8]}}
  %r = nn.bias_grad %dy : tensor<?x?x24xf32> -> tensor<8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// db is a vector.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  // expected-error @+1 {{result must be [24], but it is [1, 24]}}
  %r = nn.bias_grad %dy : tensor<?x?x24xf32> -> tensor<1x24xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.embedding_grad
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.embedding_grad' op module path must not be empty}}
  %r = nn.embedding_grad %dy, %tokens {module = ""} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient is [B, S, D].
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.embedding_grad' op gradient must have rank 3, but it is [?, 8]}}
  %r = nn.embedding_grad %dy, %tokens : (tensor<?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The ids are [B, S].
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %ids = builtin.unrealized_conversion_cast to tensor<?xi64>
  // expected-error @+1 {{'nn.embedding_grad' op ids must have rank 2, but it is [?]}}
  %r = nn.embedding_grad %dy, %ids : (tensor<?x?x8xf32>, tensor<?xi64>) -> tensor<16x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dtable is a table [V, D].
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.embedding_grad' op result must have rank 2, but it is [128]}}
  %r = nn.embedding_grad %dy, %tokens : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<128xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient's batch and sequence are the ids'.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<2x?x8xf32>
  %ids = builtin.unrealized_conversion_cast to tensor<3x?xi64>
  // expected-error @+1 {{'nn.embedding_grad' op gradient [2, ?, 8] must match the ids [3, ?]}}
  %r = nn.embedding_grad %dy, %ids : (tensor<2x?x8xf32>, tensor<3x?xi64>) -> tensor<16x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dtable has the table's static shape...
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.embedding_grad' op result must be a static [V, 8] table, but it is [?, 8]}}
  %r = nn.embedding_grad %dy, %tokens : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// ... whose rows are as wide as the gradient.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{result must be a static [V, 8] table, but it is [16, 4]}}
  %r = nn.embedding_grad %dy, %tokens : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x4xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.layer_norm_grad
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm_grad' op module path must not be empty}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64, module = ""} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient has the input's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xbf16>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm_grad' op gradient must be 'tensor<?x?x8xf32>', but it is 'tensor<?x?x8xbf16>'}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x8xbf16>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dx has the input's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm_grad' op input gradient must be 'tensor<?x?x8xf32>', but it is 'tensor<?x?x4xf32>'}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dweight has the weight's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm_grad' op weight gradient must be 'tensor<8xf32>', but it is 'tensor<4xf32>'}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<4xf32>, tensor<8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dbias has the weight's type too (weight and bias are alike).
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm_grad' op bias gradient must be 'tensor<8xf32>', but it is 'tensor<8xbf16>'}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The normalized dimension is static.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x?xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x?xf32>
  %w = builtin.unrealized_conversion_cast to tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm_grad' op input must have a static last dimension, but it is [?, ?, ?]}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<8xf32>) -> (tensor<?x?x?xf32>, tensor<8xf32>, tensor<8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// A scalar input has no dimension to normalize.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<f32>
  %w = builtin.unrealized_conversion_cast to tensor<8xf32>
  // expected-error @+1 {{input must have a static last dimension, but it is []}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<f32>, tensor<f32>, tensor<8xf32>) -> (tensor<f32>, tensor<8xf32>, tensor<8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The weight is as wide as the input.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %w = builtin.unrealized_conversion_cast to tensor<4xf32>
  // expected-error @+1 {{'nn.layer_norm_grad' op weight must be [8], but it is [4]}}
  %dx, %dw, %db = nn.layer_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<4xf32>) -> (tensor<?x?x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.rms_norm_grad
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %w = builtin.unrealized_conversion_cast to tensor<16xbf16>
  // expected-error @+1 {{'nn.rms_norm_grad' op module path must not be empty}}
  %dx, %dw = nn.rms_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64, module = ""} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<16xbf16>) -> (tensor<?x?x16xbf16>, tensor<16xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient has the input's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %w = builtin.unrealized_conversion_cast to tensor<16xbf16>
  // expected-error @+1 {{'nn.rms_norm_grad' op gradient must be 'tensor<?x?x16xbf16>', but it is 'tensor<?x?x16xf32>'}}
  %dx, %dw = nn.rms_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xbf16>, tensor<16xbf16>) -> (tensor<?x?x16xbf16>, tensor<16xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dx has the input's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %w = builtin.unrealized_conversion_cast to tensor<16xbf16>
  // expected-error @+1 {{'nn.rms_norm_grad' op input gradient must be 'tensor<?x?x16xbf16>', but it is 'tensor<?x16xbf16>'}}
  %dx, %dw = nn.rms_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<16xbf16>) -> (tensor<?x16xbf16>, tensor<16xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dweight has the weight's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %w = builtin.unrealized_conversion_cast to tensor<16xbf16>
  // expected-error @+1 {{'nn.rms_norm_grad' op weight gradient must be 'tensor<16xbf16>', but it is 'tensor<16xf32>'}}
  %dx, %dw = nn.rms_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<16xbf16>) -> (tensor<?x?x16xbf16>, tensor<16xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The normalized dimension is static.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x?xbf16>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x?xbf16>
  %w = builtin.unrealized_conversion_cast to tensor<16xbf16>
  // expected-error @+1 {{'nn.rms_norm_grad' op input must have a static last dimension, but it is [?, ?, ?]}}
  %dx, %dw = nn.rms_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x?xbf16>, tensor<?x?x?xbf16>, tensor<16xbf16>) -> (tensor<?x?x?xbf16>, tensor<16xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The weight is as wide as the input.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %w = builtin.unrealized_conversion_cast to tensor<16x1xbf16>
  // expected-error @+1 {{'nn.rms_norm_grad' op weight must be [16] or a static [n] with n dividing 16 (rows of its length), but it is [16, 1]}}
  %dx, %dw = nn.rms_norm_grad %dy, %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x16xbf16>, tensor<?x?x16xbf16>, tensor<16x1xbf16>) -> (tensor<?x?x16xbf16>, tensor<16x1xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.concat
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %a = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.concat' op module path must not be empty}}
  %r = nn.concat %a, %a {module = ""} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// One part is not a concatenation.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %a = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.concat' op needs at least 2 parts, but has 1}}
  %r = nn.concat %a : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The parts have one rank...
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %a = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %b = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.concat' op parts [?, ?, 8] and [?, 8] must agree on all but the last dimension}}
  %r = nn.concat %a, %b : (tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// ... and agree on batch and sequence.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %a = builtin.unrealized_conversion_cast to tensor<2x?x8xf32>
  %b = builtin.unrealized_conversion_cast to tensor<3x?x8xf32>
  // expected-error @+1 {{parts [2, ?, 8] and [3, ?, 8] must agree on all but the last dimension}}
  %r = nn.concat %a, %b : (tensor<2x?x8xf32>, tensor<3x?x8xf32>) -> tensor<2x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The joined widths are known.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %a = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %b = builtin.unrealized_conversion_cast to tensor<?x?x?xf32>
  // expected-error @+1 {{'nn.concat' op parts must have a static last dimension}}
  %r = nn.concat %a, %b : (tensor<?x?x8xf32>, tensor<?x?x?xf32>) -> tensor<?x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The result's last dimension is the sum of the parts'.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %a = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.concat' op result must be [?, ?, 16], but it is [?, ?, 24]}}
  %r = nn.concat %a, %a : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x24xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.causal_attention_grad
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.causal_attention_grad' op module path must not be empty}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {module = "", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The output's gradient has the query's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.causal_attention_grad' op gradient must be 'tensor<?x?x16xf32>', but it is 'tensor<?x?x16xbf16>'}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xbf16>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The forward output has the query's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.causal_attention_grad' op output must be 'tensor<?x?x16xf32>', but it is 'tensor<?x?x8xf32>'}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dq has the query's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.causal_attention_grad' op query gradient must be 'tensor<?x?x16xf32>', but it is 'tensor<?x?x8xf32>'}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dk has the key's type: with grouped-query heads it is narrower than dq.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.causal_attention_grad' op key gradient must be 'tensor<?x?x8xf32>', but it is 'tensor<?x?x16xf32>'}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dv has the value's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.causal_attention_grad' op value gradient must be 'tensor<?x?x8xf32>', but it is 'tensor<?x?x8xbf16>'}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// num_heads is positive...
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.causal_attention_grad' op num_heads and num_kv_heads must be positive, but are 0 and 2}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 0 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// ... and so is num_kv_heads...
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{num_heads and num_kv_heads must be positive, but are 4 and -1}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 4 : i64, num_kv_heads = -1 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// ... and each kv head serves a whole group of query heads.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{num_heads = 4 must be a multiple of num_kv_heads = 3}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 4 : i64, num_kv_heads = 3 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// Key and value hold num_kv_heads heads of the query's head dimension, as
// the forward op's do (the runtime's kernel reads them so): 16 = 2 heads of
// 8 is 2 kv heads of 8, not the 8 wide key here.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %q = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %k = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %v = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %o = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.causal_attention_grad' op key must be [?, ?, 16] (2 kv heads of dimension 8), but it is [?, ?, 8]}}
  %dq, %dk, %dv = nn.causal_attention_grad %dy, %q, %k, %v, %o {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.gelu_grad
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.gelu_grad' op module path must not be empty}}
  %r = nn.gelu_grad %dy, %x {module = ""} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient has the input's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.gelu_grad' op gradient must be 'tensor<?x?x16xf32>', but it is 'tensor<?x?x8xf32>'}}
  %r = nn.gelu_grad %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dx has the input's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x16xf32>
  // expected-error @+1 {{'nn.gelu_grad' op result must be 'tensor<?x?x16xf32>', but it is 'tensor<?x?x16xbf16>'}}
  %r = nn.gelu_grad %dy, %x : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xbf16>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.silu_mul_grad
//===----------------------------------------------------------------------===//

// The module path, when given, is not empty.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %g = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %u = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  // expected-error @+1 {{'nn.silu_mul_grad' op module path must not be empty}}
  %dg, %du = nn.silu_mul_grad %dy, %g, %u {module = ""} : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// up has the gate's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %g = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %u = builtin.unrealized_conversion_cast to tensor<?x?x16xbf16>
  // expected-error @+1 {{'nn.silu_mul_grad' op up must be 'tensor<?x?x24xbf16>', but it is 'tensor<?x?x16xbf16>'}}
  %dg, %du = nn.silu_mul_grad %dy, %g, %u : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>, tensor<?x?x16xbf16>) -> (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The gradient has the gate's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xf32>
  %g = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %u = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  // expected-error @+1 {{'nn.silu_mul_grad' op gradient must be 'tensor<?x?x24xbf16>', but it is 'tensor<?x?x24xf32>'}}
  %dg, %du = nn.silu_mul_grad %dy, %g, %u : (tensor<?x?x24xf32>, tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dgate has the gate's type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %g = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %u = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  // expected-error @+1 {{'nn.silu_mul_grad' op gate gradient must be 'tensor<?x?x24xbf16>', but it is 'tensor<?x24xbf16>'}}
  %dg, %du = nn.silu_mul_grad %dy, %g, %u : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> (tensor<?x24xbf16>, tensor<?x?x24xbf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// dup has the gate's (and up's) type.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %g = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  %u = builtin.unrealized_conversion_cast to tensor<?x?x24xbf16>
  // expected-error @+1 {{'nn.silu_mul_grad' op up gradient must be 'tensor<?x?x24xbf16>', but it is 'tensor<?x?x24xf16>'}}
  %dg, %du = nn.silu_mul_grad %dy, %g, %u : (tensor<?x?x24xbf16>, tensor<?x?x24xbf16>, tensor<?x?x24xbf16>) -> (tensor<?x?x24xbf16>, tensor<?x?x24xf16>)
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

fsdp.step @concat_rank0(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %a = builtin.unrealized_conversion_cast to tensor<f32>
  // expected-error @+1 {{'nn.concat' op parts must have rank >= 1}}
  %c = nn.concat %a, %a : (tensor<f32>, tensor<f32>) -> tensor<f32>
  fsdp.return %a : tensor<f32>
}
