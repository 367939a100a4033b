// fsdp-insert-collectives alone, on a step of three units (root, block0,
// block1) sharded over two ranks, per strategy.
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=2" | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=shard-grad-op world-size=2" | FileCheck %s --check-prefix=ZERO2
// RUN: fsdp-opt %s --fsdp-insert-collectives="strategy=hybrid-shard world-size=4 shard-size=2" | FileCheck %s --check-prefix=HYBRID
// RUN: not fsdp-opt %s --fsdp-insert-collectives="strategy=full-shard world-size=4" 2>&1 | FileCheck %s --check-prefix=MISMATCH
// RUN: not fsdp-opt %s --fsdp-insert-collectives="strategy=zero-3" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

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

// full-shard: each block gathered for forward and again for backward, the
// root (last in forward, first in backward) kept gathered in between; each
// gradient buffer allocated before its first gradient, reduce-scattered after
// its last and freed once the next unit's reduction is issued.
// FULL: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// FULL: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// FULL: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// FULL-LABEL: fsdp.step @train_step(
// FULL-SAME: block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64
// FULL-NEXT: %emb.weight = nn.param "emb.weight"
// FULL-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// FULL-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// FULL-NEXT: %head.weight = nn.param "head.weight"
// FULL-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root
// FULL-NEXT: fsdp.wait [[V0]]
// FULL-NEXT: [[V1:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// FULL-NEXT: [[V2:%[0-9]+]] = fsdp.all_gather @block0
// FULL-NEXT: fsdp.wait [[V2]]
// FULL-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// FULL-NEXT: fsdp.free params @block0
// FULL-NEXT: [[V4:%[0-9]+]] = nn.gelu [[V3]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// FULL-NEXT: [[V5:%[0-9]+]] = fsdp.all_gather @block1
// FULL-NEXT: fsdp.wait [[V5]]
// FULL-NEXT: [[V6:%[0-9]+]] = nn.linear out_in [[V4]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// FULL-NEXT: fsdp.free params @block1
// FULL-NEXT: [[V7:%[0-9]+]] = nn.linear out_in [[V6]], %head.weight {module = "head"}
// FULL-NEXT: [[V8:%[0-9]+]] = nn.cross_entropy [[V7]], %targets
// FULL-NEXT: [[V9:%[0-9]+]] = nn.cross_entropy_grad [[V7]], %targets
// FULL-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_input out_in [[V9]], %head.weight {module = "head"}
// FULL-NEXT: fsdp.free params @root
// FULL-NEXT: fsdp.alloc grads @root
// FULL-NEXT: [[V11:%[0-9]+]] = nn.linear_grad_weight out_in [[V9]], [[V6]] {module = "head"}
// FULL-NEXT: fsdp.grad "head.weight", [[V11]]
// FULL-NEXT: [[V12:%[0-9]+]] = fsdp.all_gather @block1
// FULL-NEXT: fsdp.wait [[V12]]
// FULL-NEXT: [[V13:%[0-9]+]] = nn.linear_grad_input out_in [[V10]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// FULL-NEXT: fsdp.free params @block1
// FULL-NEXT: fsdp.alloc grads @block1
// FULL-NEXT: [[V14:%[0-9]+]] = nn.linear_grad_weight out_in [[V10]], [[V4]] {module = "blocks.1.fc"}
// FULL-NEXT: fsdp.grad "blocks.1.fc.weight", [[V14]]
// FULL-NEXT: [[V15:%[0-9]+]] = fsdp.reduce_scatter @block1
// FULL-NEXT: [[V16:%[0-9]+]] = nn.gelu_grad [[V13]], [[V3]] {module = "blocks.0.act"}
// FULL-NEXT: [[V17:%[0-9]+]] = fsdp.all_gather @block0
// FULL-NEXT: fsdp.wait [[V17]]
// FULL-NEXT: [[V18:%[0-9]+]] = nn.linear_grad_input out_in [[V16]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// FULL-NEXT: fsdp.free params @block0
// FULL-NEXT: fsdp.alloc grads @block0
// FULL-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_weight out_in [[V16]], [[V1]] {module = "blocks.0.fc"}
// FULL-NEXT: fsdp.grad "blocks.0.fc.weight", [[V19]]
// FULL-NEXT: fsdp.wait [[V15]]
// FULL-NEXT: fsdp.free grads @block1
// FULL-NEXT: [[V20:%[0-9]+]] = fsdp.reduce_scatter @block0
// FULL-NEXT: [[V21:%[0-9]+]] = nn.embedding_grad [[V18]], %tokens {module = "emb"}
// FULL-NEXT: fsdp.grad "emb.weight", [[V21]]
// FULL-NEXT: fsdp.wait [[V20]]
// FULL-NEXT: fsdp.free grads @block0
// FULL-NEXT: [[V22:%[0-9]+]] = fsdp.reduce_scatter @root
// FULL-NEXT: fsdp.wait [[V22]]
// FULL-NEXT: fsdp.free grads @root
// FULL-NEXT: [[V23:%[0-9]+]] = fsdp.grad_norm
// FULL-NEXT: fsdp.wait [[V23]]
// FULL-NEXT: fsdp.optimizer_step @root
// FULL-NEXT: fsdp.optimizer_step @block0
// FULL-NEXT: fsdp.optimizer_step @block1
// FULL-NEXT: fsdp.return [[V8]]
// FULL-NEXT: }

// shard-grad-op: each unit gathered once, kept until its backward is done.
// ZERO2: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// ZERO2: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// ZERO2: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// ZERO2-LABEL: fsdp.step @train_step(
// ZERO2-SAME: block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy shard_grad_op>, world_size = 2 : i64
// ZERO2-NEXT: %emb.weight = nn.param "emb.weight"
// ZERO2-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// ZERO2-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// ZERO2-NEXT: %head.weight = nn.param "head.weight"
// ZERO2-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root
// ZERO2-NEXT: fsdp.wait [[V0]]
// ZERO2-NEXT: [[V1:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// ZERO2-NEXT: [[V2:%[0-9]+]] = fsdp.all_gather @block0
// ZERO2-NEXT: fsdp.wait [[V2]]
// ZERO2-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// ZERO2-NEXT: [[V4:%[0-9]+]] = nn.gelu [[V3]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// ZERO2-NEXT: [[V5:%[0-9]+]] = fsdp.all_gather @block1
// ZERO2-NEXT: fsdp.wait [[V5]]
// ZERO2-NEXT: [[V6:%[0-9]+]] = nn.linear out_in [[V4]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// ZERO2-NEXT: [[V7:%[0-9]+]] = nn.linear out_in [[V6]], %head.weight {module = "head"}
// ZERO2-NEXT: [[V8:%[0-9]+]] = nn.cross_entropy [[V7]], %targets
// ZERO2-NEXT: [[V9:%[0-9]+]] = nn.cross_entropy_grad [[V7]], %targets
// ZERO2-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_input out_in [[V9]], %head.weight {module = "head"}
// ZERO2-NEXT: fsdp.free params @root
// ZERO2-NEXT: fsdp.alloc grads @root
// ZERO2-NEXT: [[V11:%[0-9]+]] = nn.linear_grad_weight out_in [[V9]], [[V6]] {module = "head"}
// ZERO2-NEXT: fsdp.grad "head.weight", [[V11]]
// ZERO2-NEXT: [[V12:%[0-9]+]] = nn.linear_grad_input out_in [[V10]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// ZERO2-NEXT: fsdp.free params @block1
// ZERO2-NEXT: fsdp.alloc grads @block1
// ZERO2-NEXT: [[V13:%[0-9]+]] = nn.linear_grad_weight out_in [[V10]], [[V4]] {module = "blocks.1.fc"}
// ZERO2-NEXT: fsdp.grad "blocks.1.fc.weight", [[V13]]
// ZERO2-NEXT: [[V14:%[0-9]+]] = fsdp.reduce_scatter @block1
// ZERO2-NEXT: [[V15:%[0-9]+]] = nn.gelu_grad [[V12]], [[V3]] {module = "blocks.0.act"}
// ZERO2-NEXT: [[V16:%[0-9]+]] = nn.linear_grad_input out_in [[V15]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// ZERO2-NEXT: fsdp.free params @block0
// ZERO2-NEXT: fsdp.alloc grads @block0
// ZERO2-NEXT: [[V17:%[0-9]+]] = nn.linear_grad_weight out_in [[V15]], [[V1]] {module = "blocks.0.fc"}
// ZERO2-NEXT: fsdp.grad "blocks.0.fc.weight", [[V17]]
// ZERO2-NEXT: fsdp.wait [[V14]]
// ZERO2-NEXT: fsdp.free grads @block1
// ZERO2-NEXT: [[V18:%[0-9]+]] = fsdp.reduce_scatter @block0
// ZERO2-NEXT: [[V19:%[0-9]+]] = nn.embedding_grad [[V16]], %tokens {module = "emb"}
// ZERO2-NEXT: fsdp.grad "emb.weight", [[V19]]
// ZERO2-NEXT: fsdp.wait [[V18]]
// ZERO2-NEXT: fsdp.free grads @block0
// ZERO2-NEXT: [[V20:%[0-9]+]] = fsdp.reduce_scatter @root
// ZERO2-NEXT: fsdp.wait [[V20]]
// ZERO2-NEXT: fsdp.free grads @root
// ZERO2-NEXT: [[V21:%[0-9]+]] = fsdp.grad_norm
// ZERO2-NEXT: fsdp.wait [[V21]]
// ZERO2-NEXT: fsdp.optimizer_step @root
// ZERO2-NEXT: fsdp.optimizer_step @block0
// ZERO2-NEXT: fsdp.optimizer_step @block1
// ZERO2-NEXT: fsdp.return [[V8]]
// ZERO2-NEXT: }

// hybrid-shard: full-shard within groups of two, and every gradient shard
// all-reduced across the two groups before the norm.
// HYBRID: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// HYBRID: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// HYBRID: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// HYBRID-LABEL: fsdp.step @train_step(
// HYBRID-SAME: block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy hybrid_shard>, world_size = 4 : i64
// HYBRID-NEXT: %emb.weight = nn.param "emb.weight"
// HYBRID-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// HYBRID-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// HYBRID-NEXT: %head.weight = nn.param "head.weight"
// HYBRID-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root
// HYBRID-NEXT: fsdp.wait [[V0]]
// HYBRID-NEXT: [[V1:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// HYBRID-NEXT: [[V2:%[0-9]+]] = fsdp.all_gather @block0
// HYBRID-NEXT: fsdp.wait [[V2]]
// HYBRID-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// HYBRID-NEXT: fsdp.free params @block0
// HYBRID-NEXT: [[V4:%[0-9]+]] = nn.gelu [[V3]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// HYBRID-NEXT: [[V5:%[0-9]+]] = fsdp.all_gather @block1
// HYBRID-NEXT: fsdp.wait [[V5]]
// HYBRID-NEXT: [[V6:%[0-9]+]] = nn.linear out_in [[V4]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// HYBRID-NEXT: fsdp.free params @block1
// HYBRID-NEXT: [[V7:%[0-9]+]] = nn.linear out_in [[V6]], %head.weight {module = "head"}
// HYBRID-NEXT: [[V8:%[0-9]+]] = nn.cross_entropy [[V7]], %targets
// HYBRID-NEXT: [[V9:%[0-9]+]] = nn.cross_entropy_grad [[V7]], %targets
// HYBRID-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_input out_in [[V9]], %head.weight {module = "head"}
// HYBRID-NEXT: fsdp.free params @root
// HYBRID-NEXT: fsdp.alloc grads @root
// HYBRID-NEXT: [[V11:%[0-9]+]] = nn.linear_grad_weight out_in [[V9]], [[V6]] {module = "head"}
// HYBRID-NEXT: fsdp.grad "head.weight", [[V11]]
// HYBRID-NEXT: [[V12:%[0-9]+]] = fsdp.all_gather @block1
// HYBRID-NEXT: fsdp.wait [[V12]]
// HYBRID-NEXT: [[V13:%[0-9]+]] = nn.linear_grad_input out_in [[V10]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// HYBRID-NEXT: fsdp.free params @block1
// HYBRID-NEXT: fsdp.alloc grads @block1
// HYBRID-NEXT: [[V14:%[0-9]+]] = nn.linear_grad_weight out_in [[V10]], [[V4]] {module = "blocks.1.fc"}
// HYBRID-NEXT: fsdp.grad "blocks.1.fc.weight", [[V14]]
// HYBRID-NEXT: [[V15:%[0-9]+]] = fsdp.reduce_scatter @block1
// HYBRID-NEXT: [[V16:%[0-9]+]] = fsdp.all_reduce @block1
// HYBRID-NEXT: [[V17:%[0-9]+]] = nn.gelu_grad [[V13]], [[V3]] {module = "blocks.0.act"}
// HYBRID-NEXT: [[V18:%[0-9]+]] = fsdp.all_gather @block0
// HYBRID-NEXT: fsdp.wait [[V18]]
// HYBRID-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_input out_in [[V17]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// HYBRID-NEXT: fsdp.free params @block0
// HYBRID-NEXT: fsdp.alloc grads @block0
// HYBRID-NEXT: [[V20:%[0-9]+]] = nn.linear_grad_weight out_in [[V17]], [[V1]] {module = "blocks.0.fc"}
// HYBRID-NEXT: fsdp.grad "blocks.0.fc.weight", [[V20]]
// HYBRID-NEXT: fsdp.wait [[V15]]
// HYBRID-NEXT: fsdp.wait [[V16]]
// HYBRID-NEXT: fsdp.free grads @block1
// HYBRID-NEXT: [[V21:%[0-9]+]] = fsdp.reduce_scatter @block0
// HYBRID-NEXT: [[V22:%[0-9]+]] = fsdp.all_reduce @block0
// HYBRID-NEXT: [[V23:%[0-9]+]] = nn.embedding_grad [[V19]], %tokens {module = "emb"}
// HYBRID-NEXT: fsdp.grad "emb.weight", [[V23]]
// HYBRID-NEXT: fsdp.wait [[V21]]
// HYBRID-NEXT: fsdp.wait [[V22]]
// HYBRID-NEXT: fsdp.free grads @block0
// HYBRID-NEXT: [[V24:%[0-9]+]] = fsdp.reduce_scatter @root
// HYBRID-NEXT: [[V25:%[0-9]+]] = fsdp.all_reduce @root
// HYBRID-NEXT: fsdp.wait [[V24]]
// HYBRID-NEXT: fsdp.wait [[V25]]
// HYBRID-NEXT: fsdp.free grads @root
// HYBRID-NEXT: [[V26:%[0-9]+]] = fsdp.grad_norm
// HYBRID-NEXT: fsdp.wait [[V26]]
// HYBRID-NEXT: fsdp.optimizer_step @root
// HYBRID-NEXT: fsdp.optimizer_step @block0
// HYBRID-NEXT: fsdp.optimizer_step @block1
// HYBRID-NEXT: fsdp.return [[V8]]
// HYBRID-NEXT: }

// MISMATCH: error: 'fsdp.unit' op is sharded over 2 ranks, but strategy full-shard at world size 4 shards over 4

// UNKNOWN: for the --strategy option: Cannot find option named 'zero-3'!
