// A unit's shard size and the step's agree: each unit is
// sharded over one group. The step's own figures are its verifier's
// (dialect/fsdp/invalid.mlir); this is the plan's, across ops.
// RUN: fsdp-opt %s --fsdp-verify-plan -split-input-file -verify-diagnostics

// A unit sharded over more ranks than a shard group holds.
module {
  // expected-error @+1 {{'fsdp.unit' op is sharded over 4 ranks, but the step's shard groups are of 2}}
  fsdp.unit @root {index = 0 : i64, module = "", numel = 128 : i64, offsets = array<i64: 0>, padded_numel = 128 : i64, params = ["emb.weight"], shard_size = 4 : i64, sizes = array<i64: 128>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) attributes {shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    fsdp.return
  }
}

