// Each verifier of the nn dialect, one error per split: the graphs are valid
// except for the op under test. Values the nn ops cannot produce in a valid
// graph (rank-1 ids, activations of odd shapes) come from
// builtin.unrealized_conversion_cast with no inputs.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// nn.graph
//===----------------------------------------------------------------------===//

// A graph takes exactly (tokens, targets).
// expected-error @+1 {{'nn.graph' op takes (tokens, targets), but has 1 arguments}}
nn.graph @one_arg(%tokens: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %tokens : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// Three arguments are one too many.
// expected-error @+1 {{takes (tokens, targets), but has 3 arguments}}
nn.graph @three_args(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>, %extra: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// Token ids are integers.
// expected-error @+1 {{tokens must be a rank-2 integer tensor [batch, seq], but is 'tensor<?x?xf32>'}}
nn.graph @float_tokens(%tokens: tensor<?x?xf32>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// Targets are [batch, seq].
// expected-error @+1 {{targets must be a rank-2 integer tensor [batch, seq], but is 'tensor<?xi64>'}}
nn.graph @rank1_targets(%tokens: tensor<?x?xi64>, %targets: tensor<?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %tokens : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// Targets must be a tensor at all.
// expected-error @+1 {{targets must be a rank-2 integer tensor [batch, seq], but is 'i64'}}
nn.graph @scalar_targets(%tokens: tensor<?x?xi64>, %targets: i64) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %tokens : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// The loss is a scalar f32 tensor.
// expected-error @+1 {{must return the loss as tensor<f32>}}
nn.graph @vector_loss(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<2xf32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<2xf32>
  nn.return %w : tensor<2xf32>
}

// -----

// Exactly one result.
// expected-error @+1 {{must return the loss as tensor<f32>}}
nn.graph @no_loss(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>)
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  nn.return
}

// -----

// Blocks need a prefix.
// expected-error @+1 {{block_prefix must name the block list when num_blocks > 0}}
nn.graph @no_prefix(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "", num_blocks = 2 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// max_seq_len = 0 admits no sequence.
// expected-error @+1 {{max_seq_len must be positive, but is 0}}
nn.graph @zero_seq(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 0 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// model_type is required to be non-empty.
// expected-error @+1 {{model_type must not be empty}}
nn.graph @no_model_type(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// A parameter name is declared once; the error is on the second declaration.
nn.graph @duplicate(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-note @+1 {{first declared here}}
  %w = nn.param "transformer.wte.weight" : tensor<1x1x4xf32>
  // expected-error @+1 {{'nn.param' op duplicate parameter name 'transformer.wte.weight'}}
  %w2 = nn.param "transformer.wte.weight" : tensor<4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.return
//===----------------------------------------------------------------------===//

// The loss must be returned.
nn.graph @return_nothing(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-error @+1 {{'nn.return' op returns 0 values, but the graph declares 1}}
  nn.return
}

// -----

// One value, not two.
nn.graph @return_two(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{returns 2 values, but the graph declares 1}}
  nn.return %loss, %loss : tensor<f32>, tensor<f32>
}

// -----

// The returned type is the declared one.
nn.graph @return_tokens(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-error @+1 {{'nn.return' op returns 'tensor<?x?xi64>', but the graph declares 'tensor<f32>'}}
  nn.return %tokens : tensor<?x?xi64>
}

// -----

//===----------------------------------------------------------------------===//
// nn.param
//===----------------------------------------------------------------------===//

// A parameter has a name.
nn.graph @empty_name(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.param' op parameter name must not be empty}}
  %p = nn.param "" : tensor<4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Checkpoint keys have no spaces.
nn.graph @space_in_name(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{parameter name 'wte weight' must not contain whitespace}}
  %p = nn.param "wte weight" : tensor<4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Nor tabs.
nn.graph @tab_in_name(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{must not contain whitespace}}
  %p = nn.param "wte\09weight" : tensor<4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Nor newlines.
nn.graph @newline_in_name(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{must not contain whitespace}}
  %p = nn.param "wte.weight\0A" : tensor<4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// A parameter has rank >= 1.
nn.graph @scalar_param(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{parameter 'scale' must have a static shape of rank >= 1, but it is []}}
  %p = nn.param "scale" : tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// A parameter has a static shape.
nn.graph @dynamic_param(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{parameter 'w' must have a static shape of rank >= 1, but it is [?, 8]}}
  %p = nn.param "w" : tensor<?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// No dimension is zero.
nn.graph @empty_param(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{parameter 'w' has a non-positive dimension in [0, 8]}}
  %p = nn.param "w" : tensor<0x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.position_ids
//===----------------------------------------------------------------------===//

// A module path, when given, is not empty.
nn.graph @pos_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.position_ids' op module path must not be empty}}
  %p = nn.position_ids %tokens {module = ""} : tensor<?x?xi64> -> tensor<?x?xi64>
  nn.return %loss : tensor<f32>
}

// -----

// Token ids are [batch, seq].
nn.graph @pos_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %ids = builtin.unrealized_conversion_cast to tensor<?xi64>
  // expected-error @+1 {{'nn.position_ids' op tokens must have rank 2, but it is [?]}}
  %p = nn.position_ids %ids : tensor<?xi64> -> tensor<?xi64>
  nn.return %loss : tensor<f32>
}

// -----

// Positions have the ids' type.
nn.graph @pos_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{result type 'tensor<?x?xi32>' must equal the tokens' type 'tensor<?x?xi64>'}}
  %p = nn.position_ids %tokens : tensor<?x?xi64> -> tensor<?x?xi32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.token_type_ids
//===----------------------------------------------------------------------===//

// A module path, when given, is not empty.
nn.graph @types_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "bert.encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.token_type_ids' op module path must not be empty}}
  %t = nn.token_type_ids %tokens {module = ""} : tensor<?x?xi64> -> tensor<?x?xi64>
  nn.return %loss : tensor<f32>
}

// -----

// Token ids are [batch, seq].
nn.graph @types_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "bert.encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %ids = builtin.unrealized_conversion_cast to tensor<?xi64>
  // expected-error @+1 {{'nn.token_type_ids' op tokens must have rank 2, but it is [?]}}
  %t = nn.token_type_ids %ids : tensor<?xi64> -> tensor<?xi64>
  nn.return %loss : tensor<f32>
}

// -----

// Token types have the ids' type.
nn.graph @types_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "bert.encoder.layer", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.token_type_ids' op result type 'tensor<?x?xi32>' must equal the tokens' type 'tensor<?x?xi64>'}}
  %t = nn.token_type_ids %tokens : tensor<?x?xi64> -> tensor<?x?xi32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.embedding
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @emb_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.embedding' op module path must not be empty}}
  %e = nn.embedding %tokens, %wte {module = ""} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Ids are [batch, seq].
nn.graph @emb_ids_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %ids = builtin.unrealized_conversion_cast to tensor<?xi64>
  // expected-error @+1 {{'nn.embedding' op ids must have rank 2, but it is [?]}}
  %e = nn.embedding %ids, %wte : (tensor<?xi64>, tensor<16x8xf32>) -> tensor<?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The table is [vocab, dim].
nn.graph @emb_table_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %t = nn.param "t" : tensor<128xf32>
  // expected-error @+1 {{'nn.embedding' op table must have rank 2, but it is [128]}}
  %e = nn.embedding %tokens, %t : (tensor<?x?xi64>, tensor<128xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Rows keep the table's dtype.
nn.graph @emb_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.embedding' op result has element type 'bf16', expected 'f32'}}
  %e = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xbf16>
  nn.return %loss : tensor<f32>
}

// -----

// Rows have the table's width.
nn.graph @emb_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.embedding' op result must be [?, ?, 8], but it is [?, ?, 16]}}
  %e = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result is [batch, seq, dim].
nn.graph @emb_result_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.embedding' op result must be [?, ?, 8], but it is [?, 8]}}
  %e = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.linear
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @lin_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xf32>
  // expected-error @+1 {{'nn.linear' op module path must not be empty}}
  %y = nn.linear in_out %h, %w {module = ""} : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The weight is a matrix.
nn.graph @lin_weight_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  // expected-error @+1 {{'nn.linear' op weight must have rank 2, or be an out_in [out, d1, ..., dk] weight read as [out, d1 * ... * dk], but it is [8]}}
  %y = nn.linear in_out %h, %w : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The weight has the input's dtype.
nn.graph @lin_weight_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xbf16>
  // expected-error @+1 {{'nn.linear' op weight has element type 'bf16', expected 'f32'}}
  %y = nn.linear in_out %h, %w : (tensor<?x?x8xf32>, tensor<8x4xbf16>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// So has the result.
nn.graph @lin_result_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xf32>
  // expected-error @+1 {{'nn.linear' op result has element type 'bf16', expected 'f32'}}
  %y = nn.linear in_out %h, %w : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xbf16>
  nn.return %loss : tensor<f32>
}

// -----

// The input has a feature dimension.
nn.graph @lin_scalar_input(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xf32>
  // expected-error @+1 {{'nn.linear' op input must have rank >= 1}}
  %y = nn.linear in_out %loss, %w : (tensor<f32>, tensor<8x4xf32>) -> tensor<4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// in_out reads the weight as [in, out].
nn.graph @lin_in_out_width(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<4x8xf32>
  // expected-error @+1 {{'nn.linear' op weight [4, 8] is in_out, so the input's last dimension must be 4, but the input is [?, ?, 8]}}
  %y = nn.linear in_out %h, %w : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// out_in reads the weight as [out, in].
nn.graph @lin_out_in_width(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xf32>
  // expected-error @+1 {{'nn.linear' op weight [8, 4] is out_in, so the input's last dimension must be 4, but the input is [?, ?, 8]}}
  %y = nn.linear out_in %h, %w : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The bias has the output width (in_out).
nn.graph @lin_bias_shape_in_out(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.linear' op bias must be [4], but it is [8]}}
  %y = nn.linear in_out %h, %w, %b : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The bias has the output width (out_in).
nn.graph @lin_bias_shape_out_in(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<4x8xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.linear' op bias must be [4], but it is [8]}}
  %y = nn.linear out_in %h, %w, %b : (tensor<?x?x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The bias is a vector.
nn.graph @lin_bias_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xf32>
  %b = nn.param "b" : tensor<1x4xf32>
  // expected-error @+1 {{'nn.linear' op bias must be [4], but it is [1, 4]}}
  %y = nn.linear in_out %h, %w, %b : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<1x4xf32>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The bias has the input's dtype.
nn.graph @lin_bias_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xf32>
  %b = nn.param "b" : tensor<4xbf16>
  // expected-error @+1 {{'nn.linear' op bias has element type 'bf16', expected 'f32'}}
  %y = nn.linear in_out %h, %w, %b : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<4xbf16>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the output width.
nn.graph @lin_result_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8x4xf32>
  // expected-error @+1 {{'nn.linear' op result must be [?, ?, 4], but it is [?, ?, 8]}}
  %y = nn.linear in_out %h, %w : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result keeps the input's rank.
nn.graph @lin_result_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<4x8xf32>
  // expected-error @+1 {{'nn.linear' op result must be [?, ?, 4], but it is [?, 4]}}
  %y = nn.linear out_in %h, %w : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.layer_norm
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @ln_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm' op module path must not be empty}}
  %y = nn.layer_norm %h, %w, %b {eps = 1.0e-05 : f64, module = ""} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The normalized width is static.
nn.graph @ln_dynamic_width(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x?xf32>
  %w = nn.param "w" : tensor<8xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm' op input must have a static last dimension, but it is [?, ?, ?]}}
  %y = nn.layer_norm %x, %w, %b {eps = 1.0e-05 : f64} : (tensor<?x?x?xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x?xf32>
  nn.return %loss : tensor<f32>
}

// -----

// A scalar has no last dimension.
nn.graph @ln_scalar_input(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm' op input must have a static last dimension, but it is []}}
  %y = nn.layer_norm %loss, %w, %b {eps = 1.0e-05 : f64} : (tensor<f32>, tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// The weight has the normalized width.
nn.graph @ln_weight(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<4xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm' op weight must be [8], but it is [4]}}
  %y = nn.layer_norm %h, %w, %b {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// So has the bias.
nn.graph @ln_bias(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  %b = nn.param "b" : tensor<4xf32>
  // expected-error @+1 {{'nn.layer_norm' op bias must be [8], but it is [4]}}
  %y = nn.layer_norm %h, %w, %b {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<4xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// eps keeps the rsqrt finite.
nn.graph @ln_eps_zero(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm' op eps must be positive, but is 0.000000e+00}}
  %y = nn.layer_norm %h, %w, %b {eps = 0.0 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Negative eps.
nn.graph @ln_eps_negative(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm' op eps must be positive, but is -1.000000e-05}}
  %y = nn.layer_norm %h, %w, %b {eps = -1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// NaN eps.
nn.graph @ln_eps_nan(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm' op eps must be positive, but is nan}}
  %y = nn.layer_norm %h, %w, %b {eps = 0x7FF8000000000000 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the input's type.
nn.graph @ln_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  %b = nn.param "b" : tensor<8xf32>
  // expected-error @+1 {{'nn.layer_norm' op result type 'tensor<?x?x8xbf16>' must equal the input type 'tensor<?x?x8xf32>'}}
  %y = nn.layer_norm %h, %w, %b {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xbf16>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.rms_norm
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @rms_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  // expected-error @+1 {{'nn.rms_norm' op module path must not be empty}}
  %y = nn.rms_norm %h, %w {eps = 1.0e-05 : f64, module = ""} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The normalized width is static.
nn.graph @rms_dynamic_width(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x?xf32>
  %w = nn.param "w" : tensor<8xf32>
  // expected-error @+1 {{'nn.rms_norm' op input must have a static last dimension, but it is [?, ?, ?]}}
  %y = nn.rms_norm %x, %w {eps = 1.0e-05 : f64} : (tensor<?x?x?xf32>, tensor<8xf32>) -> tensor<?x?x?xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The weight has the normalized width.
nn.graph @rms_weight(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<16xf32>
  // expected-error @+1 {{'nn.rms_norm' op weight must be [8] or a static [n] with n dividing 8 (rows of its length), but it is [16]}}
  %y = nn.rms_norm %h, %w {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<16xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// eps keeps the rsqrt finite.
nn.graph @rms_eps(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  // expected-error @+1 {{'nn.rms_norm' op eps must be positive, but is 0.000000e+00}}
  %y = nn.rms_norm %h, %w {eps = 0.0 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the input's type.
nn.graph @rms_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  // expected-error @+1 {{'nn.rms_norm' op result type 'tensor<?x?x4xf32>' must equal the input type 'tensor<?x?x8xf32>'}}
  %y = nn.rms_norm %h, %w {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.rope
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @rope_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op module path must not be empty}}
  %y = nn.rope %h {module = "", num_heads = 2 : i64, theta = 1.0e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The input is [batch, seq, heads * head_dim].
nn.graph @rope_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.rope' op input must have rank 3, but it is [?, 8]}}
  %y = nn.rope %x {num_heads = 2 : i64, theta = 1.0e+04 : f64} : tensor<?x8xf32> -> tensor<?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The width is static.
nn.graph @rope_dynamic_width(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x?xf32>
  // expected-error @+1 {{'nn.rope' op input must have a static last dimension, but it is [?, ?, ?]}}
  %y = nn.rope %x {num_heads = 2 : i64, theta = 1.0e+04 : f64} : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
  nn.return %loss : tensor<f32>
}

// -----

// At least one head.
nn.graph @rope_zero_heads(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op num_heads must be positive, but is 0}}
  %y = nn.rope %h {num_heads = 0 : i64, theta = 1.0e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Negative head count.
nn.graph @rope_negative_heads(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op num_heads must be positive, but is -2}}
  %y = nn.rope %h {num_heads = -2 : i64, theta = 1.0e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The width splits into heads.
nn.graph @rope_heads_divide(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op the last dimension 8 does not divide into num_heads = 3}}
  %y = nn.rope %h {num_heads = 3 : i64, theta = 1.0e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Rotate-half needs an even head dimension.
nn.graph @rope_odd_head_dim(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x6xf32>
  // expected-error @+1 {{'nn.rope' op head dimension 3 must be even to rotate halves}}
  %y = nn.rope %x {num_heads = 2 : i64, theta = 1.0e+04 : f64} : tensor<?x?x6xf32> -> tensor<?x?x6xf32>
  nn.return %loss : tensor<f32>
}

// -----

// theta is a positive base.
nn.graph @rope_theta(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op theta must be positive, but is 0.000000e+00}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 0.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// An infinite theta (1e400 in f64), which JSON cannot hold (found by the
// mlir-model fuzzer: the graph export wrote null, which did not import).
nn.graph @rope_theta_inf(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op theta must be finite, but is INF}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 1.0e+400 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// An infinite eps.
nn.graph @rms_eps_inf(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<8xf32>
  // expected-error @+1 {{'nn.rms_norm' op eps must be finite, but is INF}}
  %y = nn.rms_norm %h, %w {eps = 0x7FF0000000000000 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Negative theta.
nn.graph @rope_theta_negative(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op theta must be positive, but is -1.000000e+04}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = -1.0e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Scaling: its kind's parameters, every one (llama3 without its original context).
nn.graph @rope_llama3_missing(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op llama3 scaling needs scaling_factor, original_max_position, low_freq_factor and high_freq_factor, but original_max_position is missing}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "llama3", scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// A parameter without a kind.
nn.graph @rope_scaling_parameter_alone(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op low_freq_factor is given without scaling}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, low_freq_factor = 1.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// A kind fsdp does not compute.
nn.graph @rope_scaling_kind(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op scaling 'ntk' is not one of linear, dynamic, yarn, llama3}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "ntk", scaling_factor = 2.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Another kind's parameter.
nn.graph @rope_scaling_foreign_parameter(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op beta_fast is not a parameter of linear scaling (its parameters: scaling_factor)}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "linear", scaling_factor = 2.0 : f64, beta_fast = 32.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The llama3_* attributes of before: refused, not dropped.
nn.graph @rope_scaling_old_names(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op llama3_factor is the name Llama 3.1's scaling had before scaling kinds; write scaling = "llama3" with scaling_factor, low_freq_factor, high_freq_factor and original_max_position}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, llama3_factor = 8.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The scaling factor is positive.
nn.graph @rope_llama3_factor(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op llama3 scaling needs a finite scaling_factor > 0, but it is 0}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "llama3", scaling_factor = 0.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// low_freq_factor is positive.
nn.graph @rope_llama3_low(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op llama3 scaling needs finite 0 < low_freq_factor < high_freq_factor, but they are -1 and 4}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "llama3", scaling_factor = 8.0 : f64, low_freq_factor = -1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// high_freq_factor exceeds low_freq_factor.
nn.graph @rope_llama3_high(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op llama3 scaling needs finite 0 < low_freq_factor < high_freq_factor, but they are 1 and 1}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "llama3", scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 1.0 : f64, original_max_position = 8192 : i64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The original context length is positive.
nn.graph @rope_llama3_max_position(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op llama3 scaling needs original_max_position > 0, but it is 0}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "llama3", scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 0 : i64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// YaRN: 0 < beta_slow <= beta_fast.
nn.graph @rope_yarn_betas(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op yarn scaling needs finite 0 < beta_slow <= beta_fast, but they are 2 and 1}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "yarn", scaling_factor = 4.0 : f64, original_max_position = 32 : i64, beta_fast = 1.0 : f64, beta_slow = 2.0 : f64, truncate = true, attention_factor = 1.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// YaRN: a positive attention factor.
nn.graph @rope_yarn_attention_factor(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op yarn scaling needs a finite attention_factor > 0, but it is 0}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "yarn", scaling_factor = 4.0 : f64, original_max_position = 32 : i64, beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, truncate = true, attention_factor = 0.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// YaRN: truncate is a bool.
nn.graph @rope_yarn_truncate(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op attribute 'truncate' failed to satisfy constraint: bool attribute}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "yarn", scaling_factor = 4.0 : f64, original_max_position = 32 : i64, beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, truncate = 1 : i64, attention_factor = 1.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// YaRN divides by log(theta).
nn.graph @rope_yarn_theta(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op yarn scaling needs theta other than 1 (it divides by log(theta))}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 1.0 : f64, scaling = "yarn", scaling_factor = 4.0 : f64, original_max_position = 32 : i64, beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, truncate = true, attention_factor = 1.0 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Dynamic NTK: transformers' frequencies hold up to original_max_position; the graph's sequences may not be longer.
nn.graph @rope_dynamic_longer(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op dynamic scaling computes transformers' frequencies for sequences of at most original_max_position = 4 tokens, but the graph's max_seq_len is 8 (transformers rescales them for a longer sequence, which fsdp does not)}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 5.0e+05 : f64, scaling = "dynamic", scaling_factor = 2.0 : f64, original_max_position = 4 : i64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Dynamic NTK: its exponent dim / (dim - 2) needs a head above 2.
nn.graph @rope_dynamic_head(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op dynamic scaling needs a head dimension above 2 (its exponent is dim / (dim - 2)), but it is 2}}
  %y = nn.rope %h {num_heads = 4 : i64, theta = 5.0e+05 : f64, scaling = "dynamic", scaling_factor = 2.0 : f64, original_max_position = 8 : i64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the input's type.
nn.graph @rope_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.rope' op result type 'tensor<?x?x8xbf16>' must equal the input type 'tensor<?x?x8xf32>'}}
  %y = nn.rope %h {num_heads = 2 : i64, theta = 1.0e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xbf16>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.split
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @split_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.split' op module path must not be empty}}
  %a, %b = nn.split %h {module = ""} : tensor<?x?x8xf32> -> tensor<?x?x4xf32>, tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// A split has at least two parts.
nn.graph @split_one(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.split' op must produce at least 2 parts, but produces 1}}
  %a = nn.split %h : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The split width is static.
nn.graph @split_dynamic_width(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x?xf32>
  // expected-error @+1 {{'nn.split' op input must have a static last dimension, but it is [?, ?, ?]}}
  %a, %b = nn.split %x : tensor<?x?x?xf32> -> tensor<?x?x?xf32>, tensor<?x?x?xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The parts are equal.
nn.graph @split_divide(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.split' op the last dimension 8 does not split into 3 equal parts}}
  %a, %b, %c = nn.split %h : tensor<?x?x8xf32> -> tensor<?x?x3xf32>, tensor<?x?x3xf32>, tensor<?x?x2xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Each part has width / n.
nn.graph @split_part_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x12xf32>
  // expected-error @+1 {{'nn.split' op part 2 must be [?, ?, 4], but it is [?, ?, 8]}}
  %a, %b, %c = nn.split %x : tensor<?x?x12xf32> -> tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Each part keeps the input's rank.
nn.graph @split_part_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.split' op part 0 must be [?, ?, 4], but it is [?, 4]}}
  %a, %b = nn.split %h : tensor<?x?x8xf32> -> tensor<?x4xf32>, tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Each part keeps the input's dtype.
nn.graph @split_part_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.split' op a part has element type 'bf16', expected 'f32'}}
  %a, %b = nn.split %h : tensor<?x?x8xf32> -> tensor<?x?x4xf32>, tensor<?x?x4xbf16>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.causal_attention
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @attn_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.causal_attention' op module path must not be empty}}
  %y = nn.causal_attention %h, %h, %h {module = "", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// A sliding window is at least one key (the query's own).
nn.graph @attn_window(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "mistral", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.causal_attention' op window must be at least 1 (absent: full causal), but is 0}}
  %y = nn.causal_attention %h, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64, window = 0 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// A weight of 3 does not divide rows of 8 (Qwen3's per-head norm needs n | 8).
nn.graph @rms_head_weight(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "qwen3", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %w = nn.param "w" : tensor<3xf32>
  // expected-error @+1 {{'nn.rms_norm' op weight must be [8] or a static [n] with n dividing 8 (rows of its length), but it is [3]}}
  %y = nn.rms_norm %h, %w {eps = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<3xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The query is [batch, seq, width].
nn.graph @attn_query_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.causal_attention' op query must have rank 3, but it is [?, 8]}}
  %y = nn.causal_attention %x, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// So is the key.
nn.graph @attn_key_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.causal_attention' op key must have rank 3, but it is [?, 8]}}
  %y = nn.causal_attention %h, %x, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// And the value.
nn.graph @attn_value_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.causal_attention' op value must have rank 3, but it is [?, 8]}}
  %y = nn.causal_attention %h, %h, %x {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// At least one head.
nn.graph @attn_zero_heads(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.causal_attention' op num_heads and num_kv_heads must be positive, but are 0 and 2}}
  %y = nn.causal_attention %h, %h, %h {num_heads = 0 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// At least one kv head.
nn.graph @attn_zero_kv_heads(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.causal_attention' op num_heads and num_kv_heads must be positive, but are 2 and 0}}
  %y = nn.causal_attention %h, %h, %h {num_heads = 2 : i64, num_kv_heads = 0 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Query heads group evenly over kv heads.
nn.graph @attn_gqa_groups(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.causal_attention' op num_heads = 4 must be a multiple of num_kv_heads = 3}}
  %y = nn.causal_attention %h, %h, %h {num_heads = 4 : i64, num_kv_heads = 3 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The query width is static.
nn.graph @attn_dynamic_width(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x?xf32>
  // expected-error @+1 {{'nn.causal_attention' op query must have a static last dimension, but it is [?, ?, ?]}}
  %y = nn.causal_attention %x, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x?xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x?xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The query width splits into heads.
nn.graph @attn_query_heads(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.causal_attention' op query width 8 does not divide into 3 heads}}
  %y = nn.causal_attention %h, %h, %h {num_heads = 3 : i64, num_kv_heads = 1 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// GQA: the key has num_kv_heads heads.
nn.graph @attn_key_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %kv = builtin.unrealized_conversion_cast to tensor<?x?x4xf32>
  // expected-error @+1 {{'nn.causal_attention' op key must be [?, ?, 4] (2 kv heads of dimension 2), but it is [?, ?, 8]}}
  %y = nn.causal_attention %h, %h, %kv {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// GQA: so has the value.
nn.graph @attn_value_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %kv = builtin.unrealized_conversion_cast to tensor<?x?x4xf32>
  // expected-error @+1 {{'nn.causal_attention' op value must be [?, ?, 4] (2 kv heads of dimension 2), but it is [?, ?, 8]}}
  %y = nn.causal_attention %h, %kv, %h {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// MHA: the key has the query's width.
nn.graph @attn_mha_key_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %kv = builtin.unrealized_conversion_cast to tensor<?x?x4xf32>
  // expected-error @+1 {{'nn.causal_attention' op key must be [?, ?, 8] (2 kv heads of dimension 4), but it is [?, ?, 4]}}
  %y = nn.causal_attention %h, %kv, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Keys share the query's batch.
nn.graph @attn_key_batch(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %q = builtin.unrealized_conversion_cast to tensor<2x?x8xf32>
  %k = builtin.unrealized_conversion_cast to tensor<3x?x8xf32>
  // expected-error @+1 {{'nn.causal_attention' op key must be [2, ?, 8] (2 kv heads of dimension 4), but it is [3, ?, 8]}}
  %y = nn.causal_attention %q, %k, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x?x8xf32>, tensor<3x?x8xf32>, tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The key has the query's dtype.
nn.graph @attn_key_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xbf16>
  // expected-error @+1 {{'nn.causal_attention' op key has element type 'bf16', expected 'f32'}}
  %y = nn.causal_attention %h, %x, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xbf16>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// So has the value.
nn.graph @attn_value_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xbf16>
  // expected-error @+1 {{'nn.causal_attention' op value has element type 'bf16', expected 'f32'}}
  %y = nn.causal_attention %h, %h, %x {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xbf16>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the query's type.
nn.graph @attn_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.causal_attention' op result type 'tensor<?x?x4xf32>' must equal the query type 'tensor<?x?x8xf32>'}}
  %y = nn.causal_attention %h, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.gelu
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @gelu_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.gelu' op module path must not be empty}}
  %y = nn.gelu %h {module = ""} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the input's type.
nn.graph @gelu_result(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.gelu' op result type 'tensor<?x?x4xf32>' must equal the input type 'tensor<?x?x8xf32>'}}
  %y = nn.gelu %h : tensor<?x?x8xf32> -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.silu_mul
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @silu_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.silu_mul' op module path must not be empty}}
  %y = nn.silu_mul %h, %h {module = ""} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Gate and up have one shape.
nn.graph @silu_shapes(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x4xf32>
  // expected-error @+1 {{'nn.silu_mul' op gate [?, ?, 8] and up [?, ?, 4] must have one shape}}
  %y = nn.silu_mul %h, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Gate and up have one dtype.
nn.graph @silu_up_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xbf16>
  // expected-error @+1 {{'nn.silu_mul' op up has element type 'bf16', expected 'f32'}}
  %y = nn.silu_mul %h, %x : (tensor<?x?x8xf32>, tensor<?x?x8xbf16>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the gate's dtype.
nn.graph @silu_result_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.silu_mul' op result has element type 'bf16', expected 'f32'}}
  %y = nn.silu_mul %h, %h : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xbf16>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the gate's shape.
nn.graph @silu_result_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.silu_mul' op result must be [?, ?, 8], but it is [?, ?, 4]}}
  %y = nn.silu_mul %h, %h : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x4xf32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.add
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @add_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.add' op module path must not be empty}}
  %y = nn.add %h, %h {module = ""} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// A residual adds activations of one shape.
nn.graph @add_shapes(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x4xf32>
  // expected-error @+1 {{'nn.add' op operands [?, ?, 8] and [?, ?, 4] must have one shape}}
  %y = nn.add %h, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// Ranks differ.
nn.graph @add_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.add' op operands [?, ?, 8] and [?, 8] must have one shape}}
  %y = nn.add %h, %x : (tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// One dtype.
nn.graph @add_rhs_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x?x8xbf16>
  // expected-error @+1 {{'nn.add' op rhs has element type 'bf16', expected 'f32'}}
  %y = nn.add %h, %x : (tensor<?x?x8xf32>, tensor<?x?x8xbf16>) -> tensor<?x?x8xf32>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the operands' dtype.
nn.graph @add_result_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.add' op result has element type 'bf16', expected 'f32'}}
  %y = nn.add %h, %h : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xbf16>
  nn.return %loss : tensor<f32>
}

// -----

// The result has the operands' shape.
nn.graph @add_result_shape(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.add' op result must be [?, ?, 8], but it is [?, ?, 16]}}
  %y = nn.add %h, %h : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  nn.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// nn.cross_entropy
//===----------------------------------------------------------------------===//

// Empty module path.
nn.graph @ce_module(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  // expected-error @+1 {{'nn.cross_entropy' op module path must not be empty}}
  %l = nn.cross_entropy %h, %targets {module = ""} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// Logits are [batch, seq, vocab].
nn.graph @ce_logits_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x8xf32>
  // expected-error @+1 {{'nn.cross_entropy' op logits must have rank 3, but it is [?, 8]}}
  %l = nn.cross_entropy %x, %targets : (tensor<?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// Targets are [batch, seq].
nn.graph @ce_targets_rank(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %t = builtin.unrealized_conversion_cast to tensor<?xi64>
  // expected-error @+1 {{'nn.cross_entropy' op targets must have rank 2, but it is [?]}}
  %l = nn.cross_entropy %h, %t : (tensor<?x?x8xf32>, tensor<?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// Targets match the logits' batch.
nn.graph @ce_targets_batch(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<2x?x8xf32>
  %t = builtin.unrealized_conversion_cast to tensor<3x?xi64>
  // expected-error @+1 {{'nn.cross_entropy' op targets [3, ?] must match the logits' batch and sequence [2, ?]}}
  %l = nn.cross_entropy %x, %t : (tensor<2x?x8xf32>, tensor<3x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// And the logits' sequence.
nn.graph @ce_targets_seq(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %loss = nn.cross_entropy %h, %targets : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<f32>
  %x = builtin.unrealized_conversion_cast to tensor<?x5x8xf32>
  %t = builtin.unrealized_conversion_cast to tensor<?x4xi64>
  // expected-error @+1 {{'nn.cross_entropy' op targets [?, 4] must match the logits' batch and sequence [?, 5]}}
  %l = nn.cross_entropy %x, %t : (tensor<?x5x8xf32>, tensor<?x4xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// I64Attr values are read signed: a negative block count is an error.
// expected-error @+1 {{'nn.graph' op num_blocks must be >= 0, but is -1}}
nn.graph @negative_blocks(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = -1 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'nn.graph' op max_seq_len must be positive, but is -8}}
nn.graph @negative_seq(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = -8 : i64} {
  %w = nn.param "w" : tensor<1x1x4xf32>
  %loss = nn.cross_entropy %w, %targets : (tensor<1x1x4xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @rope_negative_orig(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %e = nn.param "e" : tensor<16x8xf32>
  %x = nn.embedding %tokens, %e : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{llama3 scaling needs original_max_position > 0, but it is -1}}
  %r = nn.rope %x {num_heads = 2 : i64, theta = 10000.0 : f64, scaling = "llama3", scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = -1 : i64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
  %w = nn.param "w" : tensor<16x8xf32>
  %l = nn.linear out_in %r, %w : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

nn.graph @norm_dtype(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "llama", block_prefix = "model.layers", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %e = nn.param "e" : tensor<16x8xf32>
  %g = nn.param "g" : tensor<8xbf16>
  %x = nn.embedding %tokens, %e : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // expected-error @+1 {{'nn.rms_norm' op weight has element type 'bf16', expected 'f32'}}
  %n = nn.rms_norm %x, %g {eps = 1.0e-5 : f64} : (tensor<?x?x8xf32>, tensor<8xbf16>) -> tensor<?x?x8xf32>
  %w = nn.param "w" : tensor<16x8xf32>
  %l = nn.linear out_in %n, %w : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}
