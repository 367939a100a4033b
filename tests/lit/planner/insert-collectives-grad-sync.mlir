// fsdp-insert-collectives grad-sync=last (FSDP's no-sync accumulation) on
// the step of insert-collectives.mlir: each unit's gradients, once complete,
// are added into its accumulation buffer and their buffer is freed at once;
// the reduce-scatter (and, across replica groups, the all-reduce) reads the
// sum and is waited for at the next unit's reduction, as with every.
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=2 grad-sync=last" | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=hybrid-shard world-size=4 shard-size=2 grad-sync=last" | FileCheck %s --check-prefix=HYBRID
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=2 grad-sync=last" --fsdp-verify-plan | FileCheck %s --check-prefix=VERIFIED
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=2" | FileCheck %s --check-prefix=EVERY
// RUN: not fsdp-opt %s --fsdp-insert-collectives="grad-sync=first" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// reshard-after-backward=false: each unit gathered once, before its first
// use, and freed after its last (the gathered parameters then stay across
// micro-steps); the step says so, and verify-plan accepts it.
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=2 reshard-after-backward=false grad-sync=last" --fsdp-verify-plan | FileCheck %s --check-prefix=KEPT

module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %blocks.1.fc.weight = nn.param "blocks.1.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %1 = nn.linear out_in %0, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %2 = nn.gelu %1 {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %3 = nn.linear out_in %2, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = nn.linear_grad_input out_in %7, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %10 = nn.linear_grad_weight out_in %7, %2 {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.1.fc.weight", %10 : tensor<8x8xf32>
    %11 = nn.gelu_grad %9, %1 {module = "blocks.0.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %12 = nn.linear_grad_input out_in %11, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %13 = nn.linear_grad_weight out_in %11, %0 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %13 : tensor<8x8xf32>
    %14 = nn.embedding_grad %12, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %14 : tensor<16x8xf32>
    fsdp.optimizer_step
    fsdp.return %5 : tensor<f32>
  }
}

// FULL-LABEL: fsdp.step @train_step(
// FULL-SAME: grad_sync = #fsdp<grad_sync last>
// FULL: fsdp.alloc grads @root
// FULL: fsdp.grad "head.weight"
// FULL-NOT: fsdp.accumulate @root
// FULL: fsdp.alloc grads @block1
// FULL: fsdp.grad "blocks.1.fc.weight"
// FULL-NEXT: fsdp.accumulate @block1
// FULL-NEXT: fsdp.free grads @block1
// FULL-NEXT: [[RS1:%[0-9]+]] = fsdp.reduce_scatter @block1
// FULL: fsdp.grad "blocks.0.fc.weight"
// FULL-NEXT: fsdp.accumulate @block0
// FULL-NEXT: fsdp.free grads @block0
// FULL-NEXT: fsdp.wait [[RS1]]
// FULL-NEXT: [[RS0:%[0-9]+]] = fsdp.reduce_scatter @block0
// FULL: fsdp.grad "emb.weight"
// FULL-NEXT: fsdp.accumulate @root
// FULL-NEXT: fsdp.free grads @root
// FULL-NEXT: fsdp.wait [[RS0]]
// FULL-NEXT: [[RSR:%[0-9]+]] = fsdp.reduce_scatter @root
// FULL-NEXT: fsdp.wait [[RSR]]
// FULL-NEXT: [[N:%[0-9]+]] = fsdp.grad_norm
// FULL-NOT: fsdp.free grads

// HYBRID: fsdp.accumulate @block1
// HYBRID-NEXT: fsdp.free grads @block1
// HYBRID-NEXT: [[RS:%[0-9]+]] = fsdp.reduce_scatter @block1
// HYBRID-NEXT: [[AR:%[0-9]+]] = fsdp.all_reduce @block1
// HYBRID: fsdp.accumulate @block0
// HYBRID-NEXT: fsdp.free grads @block0
// HYBRID-NEXT: fsdp.wait [[RS]]
// HYBRID-NEXT: fsdp.wait [[AR]]

// VERIFIED: fsdp.accumulate @block1

// with every (the default): no accumulation, and each gradient buffer lives
// until its reduction has completed.
// EVERY-NOT: grad_sync
// EVERY-NOT: fsdp.accumulate
// EVERY: [[RS1:%[0-9]+]] = fsdp.reduce_scatter @block1
// EVERY: fsdp.wait [[RS1]]
// EVERY-NEXT: fsdp.free grads @block1

// UNKNOWN: for the --grad-sync option: Cannot find option named 'first'!

// KEPT-LABEL: fsdp.step @train_step(
// KEPT-SAME: grad_sync = #fsdp<grad_sync last>
// KEPT-SAME: reshard_after_backward = false
// KEPT: fsdp.all_gather @root
// KEPT: fsdp.all_gather @block0
// KEPT: fsdp.all_gather @block1
// KEPT-NOT: fsdp.all_gather
// KEPT-NOT: fsdp.free params @block0
// KEPT: fsdp.free params @block1
// KEPT: fsdp.free params @block0
// KEPT-NOT: fsdp.all_gather
