// The step's figures that fsdp-run reads, as a hand-edited plan may get them
// wrong; each is rejected at the op before the plan is lowered.
// RUN: fsdp-opt %s --fsdp-verify-plan -split-input-file -verify-diagnostics

// A world of one rank with shard groups of two (the runtime refuses it).
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 128 : i64, offsets = array<i64: 0>, padded_numel = 128 : i64, params = ["emb.weight"], shard_count = 2 : i64, sizes = array<i64: 128>}
  // expected-error @+1 {{'fsdp.step' op shard_size 2 must divide world_size 1}}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {shard_size = 2 : i64, strategy = "full-shard", world_size = 1 : i64} {
    fsdp.return
  }
}

// -----

// A unit sharded over more ranks than a shard group holds.
module {
  // expected-error @+1 {{'fsdp.unit' op is sharded over 4 ranks, but the step's shard groups are of 2}}
  fsdp.unit @root {index = 0 : i64, module = "", numel = 128 : i64, offsets = array<i64: 0>, padded_numel = 128 : i64, params = ["emb.weight"], shard_count = 4 : i64, sizes = array<i64: 128>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {shard_size = 2 : i64, strategy = "full-shard", world_size = 2 : i64} {
    fsdp.return
  }
}

// -----

// No tokens in a micro-batch.
module {
  // expected-error @+1 {{'fsdp.step' op micro_batch must be at least 1, but is 0}}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {micro_batch = 0 : i64, seq_len = 8 : i64, world_size = 2 : i64} {
    fsdp.return
  }
}

// -----

// A dtype fsdp-run does not gather in.
module {
  // expected-error @+1 {{'fsdp.step' op param_dtype must be "f32" or "bf16", but is "f16"}}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {param_dtype = "f16", world_size = 2 : i64} {
    fsdp.return
  }
}
