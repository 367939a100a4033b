// fsdp-insert-collectives alone, strategy no-shard (DDP): units of one shard
// are never gathered; their gradients are reduced locally and all-reduced
// over the world.
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=no-shard world-size=4" | FileCheck %s

module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 1 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 1 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 1 : i64, sizes = array<i64: 64>}
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

// CHECK: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 1 : i64, sizes = array<i64: 128, 128>}
// CHECK: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 1 : i64, sizes = array<i64: 64>}
// CHECK: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 1 : i64, sizes = array<i64: 64>}
// CHECK-LABEL: fsdp.step @train_step(
// CHECK-SAME: block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 1 : i64, strategy = #fsdp<strategy no_shard>, world_size = 4 : i64
// CHECK-NEXT: %emb.weight = nn.param "emb.weight"
// CHECK-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// CHECK-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// CHECK-NEXT: %head.weight = nn.param "head.weight"
// CHECK-NEXT: [[V0:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// CHECK-NEXT: [[V1:%[0-9]+]] = nn.linear out_in [[V0]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// CHECK-NEXT: [[V2:%[0-9]+]] = nn.gelu [[V1]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// CHECK-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V2]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// CHECK-NEXT: [[V4:%[0-9]+]] = nn.linear out_in [[V3]], %head.weight {module = "head"}
// CHECK-NEXT: [[V5:%[0-9]+]] = nn.cross_entropy [[V4]], %targets
// CHECK-NEXT: [[V6:%[0-9]+]] = nn.cross_entropy_grad [[V4]], %targets
// CHECK-NEXT: [[V7:%[0-9]+]] = nn.linear_grad_input out_in [[V6]], %head.weight {module = "head"}
// CHECK-NEXT: fsdp.alloc grads @root
// CHECK-NEXT: [[V8:%[0-9]+]] = nn.linear_grad_weight out_in [[V6]], [[V3]] {module = "head"}
// CHECK-NEXT: fsdp.grad "head.weight", [[V8]]
// CHECK-NEXT: [[V9:%[0-9]+]] = nn.linear_grad_input out_in [[V7]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// CHECK-NEXT: fsdp.alloc grads @block1
// CHECK-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_weight out_in [[V7]], [[V2]] {module = "blocks.1.fc"}
// CHECK-NEXT: fsdp.grad "blocks.1.fc.weight", [[V10]]
// CHECK-NEXT: [[V11:%[0-9]+]] = fsdp.reduce_scatter @block1
// CHECK-NEXT: [[V12:%[0-9]+]] = fsdp.all_reduce @block1
// CHECK-NEXT: [[V13:%[0-9]+]] = nn.gelu_grad [[V9]], [[V1]] {module = "blocks.0.act"}
// CHECK-NEXT: [[V14:%[0-9]+]] = nn.linear_grad_input out_in [[V13]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// CHECK-NEXT: fsdp.alloc grads @block0
// CHECK-NEXT: [[V15:%[0-9]+]] = nn.linear_grad_weight out_in [[V13]], [[V0]] {module = "blocks.0.fc"}
// CHECK-NEXT: fsdp.grad "blocks.0.fc.weight", [[V15]]
// CHECK-NEXT: fsdp.wait [[V11]]
// CHECK-NEXT: fsdp.wait [[V12]]
// CHECK-NEXT: fsdp.free grads @block1
// CHECK-NEXT: [[V16:%[0-9]+]] = fsdp.reduce_scatter @block0
// CHECK-NEXT: [[V17:%[0-9]+]] = fsdp.all_reduce @block0
// CHECK-NEXT: [[V18:%[0-9]+]] = nn.embedding_grad [[V14]], %tokens {module = "emb"}
// CHECK-NEXT: fsdp.grad "emb.weight", [[V18]]
// CHECK-NEXT: fsdp.wait [[V16]]
// CHECK-NEXT: fsdp.wait [[V17]]
// CHECK-NEXT: fsdp.free grads @block0
// CHECK-NEXT: [[V19:%[0-9]+]] = fsdp.reduce_scatter @root
// CHECK-NEXT: [[V20:%[0-9]+]] = fsdp.all_reduce @root
// CHECK-NEXT: fsdp.wait [[V19]]
// CHECK-NEXT: fsdp.wait [[V20]]
// CHECK-NEXT: fsdp.free grads @root
// CHECK-NEXT: [[V21:%[0-9]+]] = fsdp.grad_norm
// CHECK-NEXT: fsdp.wait [[V21]]
// CHECK-NEXT: fsdp.optimizer_step @root
// CHECK-NEXT: fsdp.optimizer_step @block0
// CHECK-NEXT: fsdp.optimizer_step @block1
// CHECK-NEXT: fsdp.return [[V5]]
// CHECK-NEXT: }
