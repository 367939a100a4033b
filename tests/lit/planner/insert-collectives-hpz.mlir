// fsdp-insert-collectives reshard-after-forward=N (FSDP2's int, ZeRO++'s
// hpZ) on the step of insert-collectives.mlir at world 4: after a unit's
// forward, fsdp.reshard keeps this rank's 1/N before its parameters are
// freed; its backward gathers them over the reshard group, waits, and frees
// the copy; the root unit (computing last in forward, first in backward)
// stays gathered and is not resharded.
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=4 reshard-after-forward=2" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=4 reshard-after-forward=2" --fsdp-verify-plan | FileCheck %s --check-prefix=VERIFIED
// Hybrid-shard: groups of 2 within shard groups of 4, at world 8.
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=hybrid-shard world-size=8 shard-size=4 reshard-after-forward=2" --fsdp-verify-plan | FileCheck %s --check-prefix=HYBRID
// What the pass refuses, naming the option.
// RUN: not fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=4 reshard-after-forward=4" 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: not fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=4 reshard-after-forward=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not fsdp-opt %s --fsdp-insert-collectives="strategy=shard-grad-op world-size=4 reshard-after-forward=2" 2>&1 | FileCheck %s --check-prefix=ZERO2
// RUN: not fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=4 reshard-after-forward=2 reshard-after-backward=false" 2>&1 | FileCheck %s --check-prefix=KEPT

module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 4 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
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

// CHECK-LABEL: fsdp.step @train_step(
// CHECK-SAME: reshard_after_forward = 2 : i64
// CHECK: [[G0:%[0-9]+]] = fsdp.all_gather @block0{{$}}
// CHECK-NEXT: fsdp.wait [[G0]]
// CHECK-NEXT: nn.linear {{.*}}blocks.0.fc
// CHECK-NEXT: fsdp.reshard @block0
// CHECK-NEXT: fsdp.free params @block0
// CHECK: nn.linear {{.*}}blocks.1.fc
// CHECK-NEXT: fsdp.reshard @block1
// CHECK-NEXT: fsdp.free params @block1
// CHECK-NOT: fsdp.reshard @root
// CHECK: nn.cross_entropy
// CHECK: [[B1:%[0-9]+]] = fsdp.all_gather @block1 over reshard
// CHECK-NEXT: fsdp.wait [[B1]]
// CHECK-NEXT: fsdp.free resharded @block1
// CHECK-NEXT: nn.linear_grad_input {{.*}}blocks.1.fc
// CHECK: fsdp.free params @block1
// CHECK: [[B0:%[0-9]+]] = fsdp.all_gather @block0 over reshard
// CHECK-NEXT: fsdp.wait [[B0]]
// CHECK-NEXT: fsdp.free resharded @block0
// CHECK-NEXT: nn.linear_grad_input {{.*}}blocks.0.fc
// CHECK-NOT: fsdp.reshard
// CHECK: fsdp.optimizer_step @root

// VERIFIED: fsdp.all_gather @block0 over reshard

// HYBRID-LABEL: fsdp.step @train_step(
// HYBRID-SAME: reshard_after_forward = 2 : i64
// HYBRID-SAME: shard_size = 4 : i64
// HYBRID: fsdp.reshard @block1
// HYBRID: fsdp.all_gather @block1 over reshard
// HYBRID: fsdp.all_reduce @block1

// WHOLE: reshard-after-forward=4: groups of 4 ranks must be at least 2, divide the shard group's 4 and be smaller
// DIVIDE: reshard-after-forward=3: groups of 3 ranks must be at least 2, divide the shard group's 4 and be smaller
// ZERO2: reshard-after-forward=2 reshards after forward, which strategy shard-grad-op does not (full-shard and hybrid-shard do)
// KEPT: reshard-after-forward=2 with reshard-after-backward=false: kept all step, nothing is resharded
