// fsdp-prefetch alone, on a full-shard step of three units: only where a
// gather is issued moves; its wait stays right before the unit's first use.
// RUN: fsdp-opt %s --fsdp-prefetch="forward-prefetch=1 backward-prefetch=pre" | FileCheck %s --check-prefix=PRE
// RUN: fsdp-opt %s --fsdp-prefetch="forward-prefetch=0 backward-prefetch=post" | FileCheck %s --check-prefix=POST
// RUN: fsdp-opt %s --fsdp-prefetch="forward-prefetch=2 backward-prefetch=none max-inflight-gathers=1" | FileCheck %s --check-prefix=LIMIT
// RUN: not fsdp-opt %s --fsdp-prefetch="backward-prefetch=later" 2>&1 | FileCheck %s --check-prefix=BAD

module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %blocks.1.fc.weight = nn.param "blocks.1.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.gelu %3 {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %5 = fsdp.all_gather @block1
    fsdp.wait %5
    %6 = nn.linear out_in %4, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block1
    %7 = nn.linear out_in %6, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %8 = nn.cross_entropy %7, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %9 = nn.cross_entropy_grad %7, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %10 = nn.linear_grad_input out_in %9, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %11 = nn.linear_grad_weight out_in %9, %6 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %11 : tensor<16x8xf32>
    %12 = fsdp.all_gather @block1
    fsdp.wait %12
    %13 = nn.linear_grad_input out_in %10, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block1
    fsdp.alloc grads @block1
    %14 = nn.linear_grad_weight out_in %10, %4 {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.1.fc.weight", %14 : tensor<8x8xf32>
    %15 = fsdp.reduce_scatter @block1
    %16 = nn.gelu_grad %13, %3 {module = "blocks.0.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %17 = fsdp.all_gather @block0
    fsdp.wait %17
    %18 = nn.linear_grad_input out_in %16, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %19 = nn.linear_grad_weight out_in %16, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %19 : tensor<8x8xf32>
    fsdp.wait %15
    fsdp.free grads @block1
    %20 = fsdp.reduce_scatter @block0
    %21 = nn.embedding_grad %18, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %21 : tensor<16x8xf32>
    fsdp.wait %20
    fsdp.free grads @block0
    %22 = fsdp.reduce_scatter @root
    fsdp.wait %22
    fsdp.free grads @root
    %23 = fsdp.grad_norm
    fsdp.wait %23
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.optimizer_step @block1
    fsdp.return %8 : tensor<f32>
  }
}

// Forward: block1's gather issued as soon as block0 computes. Backward pre:
// the next unit's gather issued before the current unit's gradient ops.
// PRE: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// PRE: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// PRE: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// PRE-LABEL: fsdp.step @train_step(
// PRE-SAME: backward_prefetch = #fsdp<backward_prefetch pre>, block_prefix = "blocks", forward_prefetch = 1 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64
// PRE-NEXT: %emb.weight = nn.param "emb.weight"
// PRE-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// PRE-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// PRE-NEXT: %head.weight = nn.param "head.weight"
// PRE-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root
// PRE-NEXT: fsdp.wait [[V0]]
// PRE-NEXT: [[V1:%[0-9]+]] = fsdp.all_gather @block0
// PRE-NEXT: [[V2:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// PRE-NEXT: fsdp.wait [[V1]]
// PRE-NEXT: [[V3:%[0-9]+]] = fsdp.all_gather @block1
// PRE-NEXT: [[V4:%[0-9]+]] = nn.linear out_in [[V2]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// PRE-NEXT: fsdp.free params @block0
// PRE-NEXT: [[V5:%[0-9]+]] = nn.gelu [[V4]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// PRE-NEXT: fsdp.wait [[V3]]
// PRE-NEXT: [[V6:%[0-9]+]] = nn.linear out_in [[V5]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// PRE-NEXT: fsdp.free params @block1
// PRE-NEXT: [[V7:%[0-9]+]] = nn.linear out_in [[V6]], %head.weight {module = "head"}
// PRE-NEXT: [[V8:%[0-9]+]] = nn.cross_entropy [[V7]], %targets
// PRE-NEXT: [[V9:%[0-9]+]] = nn.cross_entropy_grad [[V7]], %targets
// PRE-NEXT: [[V10:%[0-9]+]] = fsdp.all_gather @block1
// PRE-NEXT: [[V11:%[0-9]+]] = nn.linear_grad_input out_in [[V9]], %head.weight {module = "head"}
// PRE-NEXT: fsdp.free params @root
// PRE-NEXT: fsdp.alloc grads @root
// PRE-NEXT: [[V12:%[0-9]+]] = nn.linear_grad_weight out_in [[V9]], [[V6]] {module = "head"}
// PRE-NEXT: fsdp.grad "head.weight", [[V12]]
// PRE-NEXT: fsdp.wait [[V10]]
// PRE-NEXT: [[V13:%[0-9]+]] = fsdp.all_gather @block0
// PRE-NEXT: [[V14:%[0-9]+]] = nn.linear_grad_input out_in [[V11]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// PRE-NEXT: fsdp.free params @block1
// PRE-NEXT: fsdp.alloc grads @block1
// PRE-NEXT: [[V15:%[0-9]+]] = nn.linear_grad_weight out_in [[V11]], [[V5]] {module = "blocks.1.fc"}
// PRE-NEXT: fsdp.grad "blocks.1.fc.weight", [[V15]]
// PRE-NEXT: [[V16:%[0-9]+]] = fsdp.reduce_scatter @block1
// PRE-NEXT: [[V17:%[0-9]+]] = nn.gelu_grad [[V14]], [[V4]] {module = "blocks.0.act"}
// PRE-NEXT: fsdp.wait [[V13]]
// PRE-NEXT: [[V18:%[0-9]+]] = nn.linear_grad_input out_in [[V17]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// PRE-NEXT: fsdp.free params @block0
// PRE-NEXT: fsdp.alloc grads @block0
// PRE-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_weight out_in [[V17]], [[V2]] {module = "blocks.0.fc"}
// PRE-NEXT: fsdp.grad "blocks.0.fc.weight", [[V19]]
// PRE-NEXT: fsdp.wait [[V16]]
// PRE-NEXT: fsdp.free grads @block1
// PRE-NEXT: [[V20:%[0-9]+]] = fsdp.reduce_scatter @block0
// PRE-NEXT: [[V21:%[0-9]+]] = nn.embedding_grad [[V18]], %tokens {module = "emb"}
// PRE-NEXT: fsdp.grad "emb.weight", [[V21]]
// PRE-NEXT: fsdp.wait [[V20]]
// PRE-NEXT: fsdp.free grads @block0
// PRE-NEXT: [[V22:%[0-9]+]] = fsdp.reduce_scatter @root
// PRE-NEXT: fsdp.wait [[V22]]
// PRE-NEXT: fsdp.free grads @root
// PRE-NEXT: [[V23:%[0-9]+]] = fsdp.grad_norm
// PRE-NEXT: fsdp.wait [[V23]]
// PRE-NEXT: fsdp.optimizer_step @root
// PRE-NEXT: fsdp.optimizer_step @block0
// PRE-NEXT: fsdp.optimizer_step @block1
// PRE-NEXT: fsdp.return [[V8]]
// PRE-NEXT: }

// Backward post: the next gather issued after the current unit's gradient
// ops, once its parameters are freed.
// POST: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// POST: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// POST: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// POST-LABEL: fsdp.step @train_step(
// POST-SAME: backward_prefetch = #fsdp<backward_prefetch post>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64
// POST-NEXT: %emb.weight = nn.param "emb.weight"
// POST-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// POST-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// POST-NEXT: %head.weight = nn.param "head.weight"
// POST-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root
// POST-NEXT: fsdp.wait [[V0]]
// POST-NEXT: [[V1:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// POST-NEXT: [[V2:%[0-9]+]] = fsdp.all_gather @block0
// POST-NEXT: fsdp.wait [[V2]]
// POST-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// POST-NEXT: fsdp.free params @block0
// POST-NEXT: [[V4:%[0-9]+]] = nn.gelu [[V3]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// POST-NEXT: [[V5:%[0-9]+]] = fsdp.all_gather @block1
// POST-NEXT: fsdp.wait [[V5]]
// POST-NEXT: [[V6:%[0-9]+]] = nn.linear out_in [[V4]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// POST-NEXT: fsdp.free params @block1
// POST-NEXT: [[V7:%[0-9]+]] = nn.linear out_in [[V6]], %head.weight {module = "head"}
// POST-NEXT: [[V8:%[0-9]+]] = nn.cross_entropy [[V7]], %targets
// POST-NEXT: [[V9:%[0-9]+]] = nn.cross_entropy_grad [[V7]], %targets
// POST-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_input out_in [[V9]], %head.weight {module = "head"}
// POST-NEXT: fsdp.free params @root
// POST-NEXT: [[V11:%[0-9]+]] = fsdp.all_gather @block1
// POST-NEXT: fsdp.alloc grads @root
// POST-NEXT: [[V12:%[0-9]+]] = nn.linear_grad_weight out_in [[V9]], [[V6]] {module = "head"}
// POST-NEXT: fsdp.grad "head.weight", [[V12]]
// POST-NEXT: fsdp.wait [[V11]]
// POST-NEXT: [[V13:%[0-9]+]] = nn.linear_grad_input out_in [[V10]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// POST-NEXT: fsdp.free params @block1
// POST-NEXT: [[V14:%[0-9]+]] = fsdp.all_gather @block0
// POST-NEXT: fsdp.alloc grads @block1
// POST-NEXT: [[V15:%[0-9]+]] = nn.linear_grad_weight out_in [[V10]], [[V4]] {module = "blocks.1.fc"}
// POST-NEXT: fsdp.grad "blocks.1.fc.weight", [[V15]]
// POST-NEXT: [[V16:%[0-9]+]] = fsdp.reduce_scatter @block1
// POST-NEXT: [[V17:%[0-9]+]] = nn.gelu_grad [[V13]], [[V3]] {module = "blocks.0.act"}
// POST-NEXT: fsdp.wait [[V14]]
// POST-NEXT: [[V18:%[0-9]+]] = nn.linear_grad_input out_in [[V17]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// POST-NEXT: fsdp.free params @block0
// POST-NEXT: fsdp.alloc grads @block0
// POST-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_weight out_in [[V17]], [[V1]] {module = "blocks.0.fc"}
// POST-NEXT: fsdp.grad "blocks.0.fc.weight", [[V19]]
// POST-NEXT: fsdp.wait [[V16]]
// POST-NEXT: fsdp.free grads @block1
// POST-NEXT: [[V20:%[0-9]+]] = fsdp.reduce_scatter @block0
// POST-NEXT: [[V21:%[0-9]+]] = nn.embedding_grad [[V18]], %tokens {module = "emb"}
// POST-NEXT: fsdp.grad "emb.weight", [[V21]]
// POST-NEXT: fsdp.wait [[V20]]
// POST-NEXT: fsdp.free grads @block0
// POST-NEXT: [[V22:%[0-9]+]] = fsdp.reduce_scatter @root
// POST-NEXT: fsdp.wait [[V22]]
// POST-NEXT: fsdp.free grads @root
// POST-NEXT: [[V23:%[0-9]+]] = fsdp.grad_norm
// POST-NEXT: fsdp.wait [[V23]]
// POST-NEXT: fsdp.optimizer_step @root
// POST-NEXT: fsdp.optimizer_step @block0
// POST-NEXT: fsdp.optimizer_step @block1
// POST-NEXT: fsdp.return [[V8]]
// POST-NEXT: }

// At most one gather ahead of the unit computing: block1's waits for
// block0's free although the depth is 2.
// LIMIT: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// LIMIT: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// LIMIT: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// LIMIT-LABEL: fsdp.step @train_step(
// LIMIT-SAME: backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 2 : i64, max_inflight_gathers = 1 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64
// LIMIT-NEXT: %emb.weight = nn.param "emb.weight"
// LIMIT-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// LIMIT-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// LIMIT-NEXT: %head.weight = nn.param "head.weight"
// LIMIT-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root
// LIMIT-NEXT: fsdp.wait [[V0]]
// LIMIT-NEXT: [[V1:%[0-9]+]] = fsdp.all_gather @block0
// LIMIT-NEXT: [[V2:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// LIMIT-NEXT: fsdp.wait [[V1]]
// LIMIT-NEXT: [[V3:%[0-9]+]] = fsdp.all_gather @block1
// LIMIT-NEXT: [[V4:%[0-9]+]] = nn.linear out_in [[V2]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// LIMIT-NEXT: fsdp.free params @block0
// LIMIT-NEXT: [[V5:%[0-9]+]] = nn.gelu [[V4]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// LIMIT-NEXT: fsdp.wait [[V3]]
// LIMIT-NEXT: [[V6:%[0-9]+]] = nn.linear out_in [[V5]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// LIMIT-NEXT: fsdp.free params @block1
// LIMIT-NEXT: [[V7:%[0-9]+]] = nn.linear out_in [[V6]], %head.weight {module = "head"}
// LIMIT-NEXT: [[V8:%[0-9]+]] = nn.cross_entropy [[V7]], %targets
// LIMIT-NEXT: [[V9:%[0-9]+]] = nn.cross_entropy_grad [[V7]], %targets
// LIMIT-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_input out_in [[V9]], %head.weight {module = "head"}
// LIMIT-NEXT: fsdp.free params @root
// LIMIT-NEXT: fsdp.alloc grads @root
// LIMIT-NEXT: [[V11:%[0-9]+]] = nn.linear_grad_weight out_in [[V9]], [[V6]] {module = "head"}
// LIMIT-NEXT: fsdp.grad "head.weight", [[V11]]
// LIMIT-NEXT: [[V12:%[0-9]+]] = fsdp.all_gather @block1
// LIMIT-NEXT: fsdp.wait [[V12]]
// LIMIT-NEXT: [[V13:%[0-9]+]] = nn.linear_grad_input out_in [[V10]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// LIMIT-NEXT: fsdp.free params @block1
// LIMIT-NEXT: fsdp.alloc grads @block1
// LIMIT-NEXT: [[V14:%[0-9]+]] = nn.linear_grad_weight out_in [[V10]], [[V5]] {module = "blocks.1.fc"}
// LIMIT-NEXT: fsdp.grad "blocks.1.fc.weight", [[V14]]
// LIMIT-NEXT: [[V15:%[0-9]+]] = fsdp.reduce_scatter @block1
// LIMIT-NEXT: [[V16:%[0-9]+]] = nn.gelu_grad [[V13]], [[V4]] {module = "blocks.0.act"}
// LIMIT-NEXT: [[V17:%[0-9]+]] = fsdp.all_gather @block0
// LIMIT-NEXT: fsdp.wait [[V17]]
// LIMIT-NEXT: [[V18:%[0-9]+]] = nn.linear_grad_input out_in [[V16]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// LIMIT-NEXT: fsdp.free params @block0
// LIMIT-NEXT: fsdp.alloc grads @block0
// LIMIT-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_weight out_in [[V16]], [[V2]] {module = "blocks.0.fc"}
// LIMIT-NEXT: fsdp.grad "blocks.0.fc.weight", [[V19]]
// LIMIT-NEXT: fsdp.wait [[V15]]
// LIMIT-NEXT: fsdp.free grads @block1
// LIMIT-NEXT: [[V20:%[0-9]+]] = fsdp.reduce_scatter @block0
// LIMIT-NEXT: [[V21:%[0-9]+]] = nn.embedding_grad [[V18]], %tokens {module = "emb"}
// LIMIT-NEXT: fsdp.grad "emb.weight", [[V21]]
// LIMIT-NEXT: fsdp.wait [[V20]]
// LIMIT-NEXT: fsdp.free grads @block0
// LIMIT-NEXT: [[V22:%[0-9]+]] = fsdp.reduce_scatter @root
// LIMIT-NEXT: fsdp.wait [[V22]]
// LIMIT-NEXT: fsdp.free grads @root
// LIMIT-NEXT: [[V23:%[0-9]+]] = fsdp.grad_norm
// LIMIT-NEXT: fsdp.wait [[V23]]
// LIMIT-NEXT: fsdp.optimizer_step @root
// LIMIT-NEXT: fsdp.optimizer_step @block0
// LIMIT-NEXT: fsdp.optimizer_step @block1
// LIMIT-NEXT: fsdp.return [[V8]]
// LIMIT-NEXT: }

// BAD: for the --backward-prefetch option: Cannot find option named 'later'!
