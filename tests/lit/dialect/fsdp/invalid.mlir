// Each verifier of the fsdp dialect, one error per split: the wrap unit's
// flat layout, explicit allocation, and the structure the ops declare in ODS
// (which ops live in a step, what their operands and attributes are).
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// fsdp.unit: the flat-parameter layout
//===----------------------------------------------------------------------===//

// One offset and one size per parameter: an offset is missing...
// expected-error @+1 {{'fsdp.unit' op has 2 params but 1 offsets and 2 sizes}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = 2 : i64}

// -----

// ... or a size is one too many.
// expected-error @+1 {{'fsdp.unit' op has 2 params but 2 offsets and 3 sizes}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = 2 : i64}

// -----

// The first parameter starts the buffer.
// expected-error @+1 {{'fsdp.unit' op parameter "transformer.h.0.ln_1.weight" must start at element 0, but starts at 4}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 4, 12>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = 2 : i64}

// -----

// Parameters are packed: no gap...
// expected-error @+1 {{'fsdp.unit' op parameter "transformer.h.0.ln_1.bias" must start at element 8, but starts at 12}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 12>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = 2 : i64}

// -----

// ... and no overlap.
// expected-error @+1 {{parameter "transformer.h.0.ln_1.bias" must start at element 8, but starts at 4}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 4>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = 2 : i64}

// -----

// Parameters are in declaration order; the offsets do not reorder them.
// expected-error @+1 {{parameter "transformer.h.0.ln_1.weight" must start at element 0, but starts at 8}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 8, 0>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = 2 : i64}

// -----

// A parameter holds at least one element.
// expected-error @+1 {{'fsdp.unit' op parameter "transformer.h.0.ln_1.bias" has size 0}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 0>,
                   numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}

// -----

// Sizes are never negative.
// expected-error @+1 {{parameter "transformer.h.0.ln_1.weight" has size -8}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: -8>,
                   numel = -8 : i64, padded_numel = 0 : i64, shard_size = 2 : i64}

// -----

// numel is the sum of the sizes.
// expected-error @+1 {{'fsdp.unit' op numel = 20 but its parameters hold 16}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8>,
                   numel = 20 : i64, padded_numel = 20 : i64, shard_size = 2 : i64}

// -----

// A unit is sharded over at least one rank...
// expected-error @+1 {{'fsdp.unit' op shard_size must be positive, but is 0}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = 0 : i64}

// -----

// ... never a negative number of them.
// expected-error @+1 {{shard_size must be positive, but is -2}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = -2 : i64}

// -----

// The padded buffer holds every element...
// expected-error @+1 {{'fsdp.unit' op padded_numel = 14 must be the least multiple of shard_size = 2 that holds numel = 16}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 14 : i64, shard_size = 2 : i64}

// -----

// ... splits into equal shards...
// expected-error @+1 {{padded_numel = 17 must be the least multiple of shard_size = 3 that holds numel = 16}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 17 : i64, shard_size = 3 : i64}

// -----

// ... even when numel is already the size asked for...
// expected-error @+1 {{padded_numel = 16 must be the least multiple of shard_size = 3 that holds numel = 16}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 16 : i64, shard_size = 3 : i64}

// -----

// ... and pads by less than a whole shard.
// expected-error @+1 {{padded_numel = 21 must be the least multiple of shard_size = 3 that holds numel = 16}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 21 : i64, shard_size = 3 : i64}

// -----

// Every layout attribute is required.
// expected-error @+1 {{'fsdp.unit' op requires attribute 'shard_size'}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64}

// -----

// Offsets are i64 element counts.
// expected-error @+1 {{'fsdp.unit' op attribute 'offsets' failed to satisfy constraint: i64 dense array attribute}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i32: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 1 : i64}

// -----

//===----------------------------------------------------------------------===//
// fsdp.alloc
//===----------------------------------------------------------------------===//

// Parameters are not allocated: the all_gather brings them to life.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %g = fsdp.all_gather @block0
  fsdp.wait %g
  // expected-error @+1 {{'fsdp.alloc' op only gradient buffers are allocated explicitly; parameters come to life with their all_gather}}
  fsdp.alloc params @block0
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// Not even with an arena offset.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{only gradient buffers are allocated explicitly}}
  fsdp.alloc params @block0 {offset = 1024 : i64}
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// A buffer is params, grads or resharded.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [params, grads, resharded]}}
  fsdp.alloc weights @block0
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// Structure: what lives in a step, and what the ops take
//===----------------------------------------------------------------------===//

// A gradient belongs to a training step, not to a model graph.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %w = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  // expected-error @+1 {{'fsdp.grad' op expects parent op 'fsdp.step'}}
  fsdp.grad "transformer.wte.weight", %w : tensor<16x8xf32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// fsdp.return ends a step, not a graph.
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  // expected-error @+1 {{'fsdp.return' op expects parent op 'fsdp.step'}}
  fsdp.return %loss : tensor<f32>
}

// -----

// Nor the module.
%loss = builtin.unrealized_conversion_cast to tensor<f32>
// expected-error @+1 {{'fsdp.return' op expects parent op 'fsdp.step'}}
fsdp.return %loss : tensor<f32>

// -----

// Collectives are issued from a step.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-error @+1 {{'fsdp.all_gather' op expects parent op 'fsdp.step'}}
  %g = fsdp.all_gather @block0
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-error @+1 {{'fsdp.reduce_scatter' op expects parent op 'fsdp.step'}}
  %r = fsdp.reduce_scatter @block0
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-error @+1 {{'fsdp.all_reduce' op expects parent op 'fsdp.step'}}
  %r = fsdp.all_reduce @block0
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-error @+1 {{'fsdp.grad_norm' op expects parent op 'fsdp.step'}}
  %n = fsdp.grad_norm
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// So are waits...
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %e = builtin.unrealized_conversion_cast to !fsdp.event
  // expected-error @+1 {{'fsdp.wait' op expects parent op 'fsdp.step'}}
  fsdp.wait %e
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// ... buffer lifetimes...
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-error @+1 {{'fsdp.alloc' op expects parent op 'fsdp.step'}}
  fsdp.alloc grads @block0
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
nn.graph @gpt2(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "transformer.h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  // expected-error @+1 {{'fsdp.free' op expects parent op 'fsdp.step'}}
  fsdp.free params @block0
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  nn.return %loss : tensor<f32>
}

// -----

// ... and optimizer updates.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
// expected-error @+1 {{'fsdp.optimizer_step' op expects parent op 'fsdp.step'}}
fsdp.optimizer_step @block0

// -----

// A step is one straight-line block.
// expected-error @+1 {{'fsdp.step' op region #0 ('body') failed to verify constraint: region with 1 blocks}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
^bb1:
  fsdp.return %loss : tensor<f32>
}

// -----

// A wait waits for an event.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
// expected-note @+1 {{prior use here}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{use of value '%tokens' expects different type than prior uses: '!fsdp.event' vs 'tensor<?x?xi64>'}}
  fsdp.wait %tokens
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// A collective yields an event.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{'fsdp.all_gather' op result #0 must be completion of a collective on the communication stream, but got 'tensor<f32>'}}
  %g = "fsdp.all_gather"() <{unit = @block0}> : () -> tensor<f32>
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// Every rank runs every op (SPMD): an op for some ranks only (`ranks`, which
// no lowering reads) is no attribute of a collective.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{'fsdp.all_gather' op has attribute 'ranks', which it does not declare (another dialect's attributes are named 'dialect.name')}}
  %g = fsdp.all_gather @block0 {ranks = array<i32: 0, 1>}
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// The arena offset is an i64.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{'fsdp.all_gather' op attribute 'offset' failed to satisfy constraint: 64-bit signless integer attribute}}
  %g = fsdp.all_gather @block0 {offset = 1.0 : f64}
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// A gradient has a shape (in the generic form, which parses any type).
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  %x = builtin.unrealized_conversion_cast to tensor<*xf32>
  // expected-error @+1 {{'fsdp.grad' op operand #0 must be ranked tensor of any type values, but got 'tensor<*xf32>'}}
  "fsdp.grad"(%x) <{param = "transformer.wte.weight"}> : (tensor<*xf32>) -> ()
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// A collective's dtype is bf16 (mixed precision) or none (f32): lowering
// gathers any other into a bf16 buffer, and fsdp-run refuses it.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{'fsdp.all_gather' op runs in bf16 or, without a dtype, in f32; 'in f32' is not written}}
  %0 = fsdp.all_gather @block0 in f32
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+2 {{expected ::fsdp::plan::Dtype to be one of: f32, bf16}}
  // expected-error @+2 {{failed to parse FSDP_DtypeAttr parameter 'value'}}
  %0 = fsdp.reduce_scatter @block0 in bf12
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

//===----------------------------------------------------------------------===//
// fsdp.step: the plan's settings
//===----------------------------------------------------------------------===//

// -----

// A setting of the wrong kind is refused where it is written, not read as
// no setting.
// expected-error @+1 {{custom op 'fsdp.step' attribute 'world_size' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {world_size = "4"} {
  fsdp.return
}

// -----

// No tokens in a micro-batch.
// expected-error @+1 {{custom op 'fsdp.step' attribute 'micro_batch' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {micro_batch = 0 : i64, seq_len = 8 : i64, world_size = 2 : i64} {
  fsdp.return
}

// -----

// An arena offset is never negative.
// expected-error @+1 {{custom op 'fsdp.step' attribute 'tokens_offset' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {tokens_offset = -64 : i64} {
  fsdp.return
}

// -----

// A dtype fsdp-run does not gather in.
// expected-error @+2 {{expected ::fsdp::plan::Dtype to be one of: f32, bf16}}
// expected-error @+1 {{failed to parse FSDP_DtypeAttr parameter 'value'}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {param_dtype = #fsdp<dtype f16>, world_size = 2 : i64} {
  fsdp.return
}

// -----

// The strategies are named as the IR spells them.
// expected-error @+2 {{expected ::fsdp::plan::Strategy to be one of: full_shard, shard_grad_op, no_shard, hybrid_shard}}
// expected-error @+1 {{failed to parse FSDP_StrategyAttr parameter 'value'}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {strategy = #fsdp<strategy full-shard>} {
  fsdp.return
}

// -----

// A string where the enumeration belongs.
// expected-error @+1 {{custom op 'fsdp.step' attribute 'strategy' failed to satisfy constraint: how parameters are sharded}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {strategy = "full-shard"} {
  fsdp.return
}

// -----

// A misspelt setting would be read by nothing.
// expected-error @+1 {{'fsdp.step' op has attribute 'world_sise', which it does not declare}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {world_sise = 4 : i64} {
  fsdp.return
}

// -----

// Another dialect's attribute is allowed.
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {test.note = "kept"} {
  fsdp.return
}

// -----

// A world of one rank with shard groups of two (the runtime refuses it).
// expected-error @+1 {{'fsdp.step' op shard_size 2 must divide world_size 1}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {shard_size = 2 : i64, strategy = #fsdp<strategy hybrid_shard>, world_size = 1 : i64} {
  fsdp.return
}

// -----

// full_shard and shard_grad_op shard over the whole world...
// expected-error @+1 {{'fsdp.step' op shards over the whole world with strategy shard_grad_op, but shard_size 2 is not world_size 4}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {shard_size = 2 : i64, strategy = #fsdp<strategy shard_grad_op>, world_size = 4 : i64} {
  fsdp.return
}

// -----

// ... and no_shard over no one.
// expected-error @+1 {{'fsdp.step' op replicates every parameter with strategy no_shard, but shard_size is 2}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {shard_size = 2 : i64, strategy = #fsdp<strategy no_shard>, world_size = 4 : i64} {
  fsdp.return
}

// -----

// A sequence longer than the model's positions.
// expected-error @+1 {{'fsdp.step' op seq_len 256 is past the model's max_seq_len 128}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {max_seq_len = 128 : i64, seq_len = 256 : i64} {
  fsdp.return
}

// -----

// More checkpointed blocks than the model has.
// expected-error @+1 {{'fsdp.step' op checkpoints 3 blocks of the model's 2}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {checkpointed_blocks = 3 : i64, num_blocks = 2 : i64} {
  fsdp.return
}

// -----

// Every memory figure is a count of bytes.
// expected-error @+1 {{memory figure 'grads_bytes' must be at least 0, but is -1}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {memory = #fsdp.memory<peak_bytes = 0, live_peak_bytes = 0, params_bytes = 0, grads_bytes = -1, optimizer_bytes = 0, unsharded_bytes = 0, activations_bytes = 0, fragmentation_bytes = 0>} {
  fsdp.return
}

// -----

// A unit's arena offsets are never negative.
// expected-error @+1 {{'fsdp.unit' op attribute 'grad_shard_offset' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64,
                   grad_shard_offset = -8 : i64}

// -----

// reshard_after_forward = N: groups of N within a shard group, and smaller.
// expected-error @+1 {{reshards after forward to groups of 3 ranks, which must be at least 2, divide shard_size 4 and be smaller}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {world_size = 4 : i64, shard_size = 4 : i64, reshard_after_forward = 3 : i64} {
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{reshards after forward to groups of 4 ranks, which must be at least 2, divide shard_size 4 and be smaller}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {world_size = 4 : i64, shard_size = 4 : i64, reshard_after_forward = 4 : i64} {
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// Shard-grad-op keeps the gathered parameters: nothing to reshard.
// expected-error @+1 {{reshards after forward to groups of 2 ranks, but strategy shard_grad_op does not reshard after forward}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {world_size = 4 : i64, shard_size = 4 : i64, strategy = #fsdp<strategy shard_grad_op>,
                reshard_after_forward = 2 : i64} {
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{reshards after forward to groups of 2 ranks, but reshard_after_backward = false keeps every gathered unit all step}}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {world_size = 4 : i64, shard_size = 4 : i64, reshard_after_backward = false,
                reshard_after_forward = 2 : i64} {
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

// A resharded copy and a gather over the reshard group need the step's N.
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{keeps a 1/N copy of gathered parameters, which only a step with reshard_after_forward = N does}}
  fsdp.reshard @block0
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{gathers over the reshard group, which only a step with reshard_after_forward = N has}}
  %e = fsdp.all_gather @block0 over reshard
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}

// -----

fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0", params = ["transformer.h.0.ln_1.weight"],
                   offsets = array<i64: 0>, sizes = array<i64: 8>, numel = 8 : i64, padded_numel = 8 : i64, shard_size = 2 : i64}
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // expected-error @+1 {{gathers over the shard group (written without a group) or over reshard, not over replica}}
  %e = fsdp.all_gather @block0 over replica
  %loss = builtin.unrealized_conversion_cast to tensor<f32>
  fsdp.return %loss : tensor<f32>
}
