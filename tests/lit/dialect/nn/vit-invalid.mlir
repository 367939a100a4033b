// The verifiers of ViT's ops (nn.class_token, nn.first_token, their
// gradients, and nn.linear's out_in weights of more than two dimensions),
// one error per split. Activations of odd shapes come from
// builtin.unrealized_conversion_cast with no inputs.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// The patch kernel [D, C, p, p] reads inputs of C * p * p.
nn.graph @patch_width(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %w = nn.param "w" : tensor<8x3x2x2xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x10xf32>
  // expected-error @+1 {{'nn.linear' op weight [8, 3, 2, 2] is out_in, so the input's last dimension must be 12 (the product of the weight's trailing dimensions), but the input is [?, ?, 10]}}
  %y = nn.linear out_in %x, %w : (tensor<?x?x10xf32>, tensor<8x3x2x2xf32>) -> tensor<?x?x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// Only an out_in weight may have more than two dimensions.
nn.graph @patch_in_out(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %w = nn.param "w" : tensor<3x2x2x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x12xf32>
  // expected-error @+1 {{'nn.linear' op weight must have rank 2 (in_out), or be an out_in [out, d1, ..., dk] weight read as [out, d1 * ... * dk], but it is [3, 2, 2, 8]}}
  %y = nn.linear in_out %x, %w : (tensor<?x?x12xf32>, tensor<3x2x2x8xf32>) -> tensor<?x?x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// The weight gradient is shaped as the weight.
nn.graph @patch_grad_weight(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %dy = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x12xf32>
  // expected-error @+1 {{'nn.linear_grad_weight' op result [8, 3, 2, 3] must be [8, ...] with trailing dimensions of 12 elements}}
  %dw = nn.linear_grad_weight out_in %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x12xf32>) -> tensor<8x3x2x3xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// Positions are [1, P+1, D]: the patches are [B, P, D].
nn.graph @cls_patches(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %cls = nn.param "cls" : tensor<1x1x8xf32>
  %pos = nn.param "pos" : tensor<1x5x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x5x8xf32>
  // expected-error @+1 {{'nn.class_token' op input must be [B, 4, 8] (one position fewer than the 5 positions), but it is [?, 5, 8]}}
  %h = nn.class_token %x, %cls, %pos : (tensor<?x5x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>) -> tensor<?x6x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// The result is the patches and the class token: one row more.
nn.graph @cls_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %cls = nn.param "cls" : tensor<1x1x8xf32>
  %pos = nn.param "pos" : tensor<1x5x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x4x8xf32>
  // expected-error @+1 {{'nn.class_token' op result must be [?, 5, 8] (the class token and the patches), but it is [?, 4, 8]}}
  %h = nn.class_token %x, %cls, %pos : (tensor<?x4x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>) -> tensor<?x4x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// Patches and sequence both dynamic would be one length.
nn.graph @cls_dynamic(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %cls = nn.param "cls" : tensor<1x1x8xf32>
  %pos = nn.param "pos" : tensor<1x5x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.class_token' op input [B, 4, D] and result [B, 5, D] differ in sequence length, so one of them must be static}}
  %h = nn.class_token %x, %cls, %pos : (tensor<?x?x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>) -> tensor<?x?x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// The class token is [1, 1, D].
nn.graph @cls_token_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %cls = nn.param "cls" : tensor<1x2x8xf32>
  %pos = nn.param "pos" : tensor<1x5x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.class_token' op class token must be [1, 1, 8], but it is [1, 2, 8]}}
  %h = nn.class_token %x, %cls, %pos : (tensor<?x?x8xf32>, tensor<1x2x8xf32>, tensor<1x5x8xf32>) -> tensor<?x5x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// Positions are static: they fix P+1.
nn.graph @cls_positions(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %cls = nn.param "cls" : tensor<1x1x8xf32>
  %pos = builtin.unrealized_conversion_cast to tensor<1x?x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x4x8xf32>
  // expected-error @+1 {{'nn.class_token' op positions must be a static [1, P+1, D] with P >= 1, but they are [1, ?, 8]}}
  %h = nn.class_token %x, %cls, %pos : (tensor<?x4x8xf32>, tensor<1x1x8xf32>, tensor<1x?x8xf32>) -> tensor<?x5x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// One element type.
nn.graph @cls_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %cls = nn.param "cls" : tensor<1x1x8xbf16>
  %pos = nn.param "pos" : tensor<1x5x8xf32>
  %x = builtin.unrealized_conversion_cast to tensor<?x4x8xf32>
  // expected-error @+1 {{'nn.class_token' op a tensor has element type 'bf16', expected 'f32'}}
  %h = nn.class_token %x, %cls, %pos : (tensor<?x4x8xf32>, tensor<1x1x8xbf16>, tensor<1x5x8xf32>) -> tensor<?x5x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// The gradient's results are the forward's operands' shapes.
nn.graph @cls_grad(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %dy = builtin.unrealized_conversion_cast to tensor<?x5x8xf32>
  // expected-error @+1 {{'nn.class_token_grad' op positions must have rank 3, but it is [5, 8]}}
  %dx, %dc, %dp = nn.class_token_grad %dy : tensor<?x5x8xf32> -> tensor<?x4x8xf32>, tensor<1x1x8xf32>, tensor<5x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

nn.graph @cls_grad_input(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %dy = builtin.unrealized_conversion_cast to tensor<?x5x8xf32>
  // expected-error @+1 {{'nn.class_token_grad' op input gradient must be [B, 4, 8] (one position fewer than the 5 positions), but it is [?, 5, 8]}}
  %dx, %dc, %dp = nn.class_token_grad %dy : tensor<?x5x8xf32> -> tensor<?x5x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// first_token keeps one row of each sequence.
nn.graph @first_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %x = builtin.unrealized_conversion_cast to tensor<?x5x8xf32>
  // expected-error @+1 {{'nn.first_token' op result must be [?, 1, 8] (row 0 of each sequence of [?, 5, 8]), but it is [?, ?, 8]}}
  %f = nn.first_token %x : tensor<?x5x8xf32> -> tensor<?x?x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

nn.graph @first_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %x = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.first_token' op input must have rank 3, but it is [?, 8]}}
  %f = nn.first_token %x : tensor<?x8xf32> -> tensor<?x1x8xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}

// -----

// Its gradient: the rows back into a sequence of the result's length.
nn.graph @first_grad(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "", num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %dy = builtin.unrealized_conversion_cast to tensor<?x1x8xf32>
  // expected-error @+1 {{'nn.first_token_grad' op gradient must be [?, 1, 6] (row 0 of each sequence of [?, 5, 6]), but it is [?, 1, 8]}}
  %dx = nn.first_token_grad %dy : tensor<?x1x8xf32> -> tensor<?x5x6xf32>
  %l = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %l : tensor<f32>
}
