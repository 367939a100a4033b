// fsdp-mixed-precision alone, on a full-shard step: bf16 gathers, every
// compute use of a parameter read through fsdp.cast right before the op,
// bf16 reductions; the shards and the optimizer stay f32. With bf16 compute,
// every value an nn op makes is bf16 but the loss, and the casts give bf16.
// RUN: fsdp-opt %s --fsdp-mixed-precision="param-dtype=bf16 reduce-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: fsdp-opt %s --fsdp-mixed-precision="reduce-dtype=bf16" | FileCheck %s --check-prefix=REDUCE
// RUN: fsdp-opt %s --fsdp-mixed-precision="param-dtype=bf16 compute-dtype=bf16" | FileCheck %s --check-prefix=COMPUTE
// RUN: not fsdp-opt %s --fsdp-mixed-precision="param-dtype=fp8" 2>&1 | FileCheck %s --check-prefix=BAD

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

// BF16: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// BF16: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// BF16: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// BF16-LABEL: fsdp.step @train_step(
// BF16-SAME: block_prefix = "blocks", compute_dtype = #fsdp<dtype f32>, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, param_dtype = #fsdp<dtype bf16>, reduce_dtype = #fsdp<dtype bf16>, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64
// BF16-NEXT: %emb.weight = nn.param "emb.weight"
// BF16-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// BF16-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// BF16-NEXT: %head.weight = nn.param "head.weight"
// BF16-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root in  bf16
// BF16-NEXT: fsdp.wait [[V0]]
// BF16-NEXT: [[V1:%[0-9]+]] = fsdp.cast %emb.weight
// BF16-NEXT: [[V2:%[0-9]+]] = nn.embedding %tokens, [[V1]] {module = "emb"}
// BF16-NEXT: [[V3:%[0-9]+]] = fsdp.all_gather @block0 in  bf16
// BF16-NEXT: fsdp.wait [[V3]]
// BF16-NEXT: [[V4:%[0-9]+]] = fsdp.cast %blocks.0.fc.weight
// BF16-NEXT: [[V5:%[0-9]+]] = nn.linear out_in [[V2]], [[V4]] {module = "blocks.0.fc"}
// BF16-NEXT: fsdp.free params @block0
// BF16-NEXT: [[V6:%[0-9]+]] = nn.gelu [[V5]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// BF16-NEXT: [[V7:%[0-9]+]] = fsdp.all_gather @block1 in  bf16
// BF16-NEXT: fsdp.wait [[V7]]
// BF16-NEXT: [[V8:%[0-9]+]] = fsdp.cast %blocks.1.fc.weight
// BF16-NEXT: [[V9:%[0-9]+]] = nn.linear out_in [[V6]], [[V8]] {module = "blocks.1.fc"}
// BF16-NEXT: fsdp.free params @block1
// BF16-NEXT: [[V10:%[0-9]+]] = fsdp.cast %head.weight
// BF16-NEXT: [[V11:%[0-9]+]] = nn.linear out_in [[V9]], [[V10]] {module = "head"}
// BF16-NEXT: [[V12:%[0-9]+]] = nn.cross_entropy [[V11]], %targets
// BF16-NEXT: [[V13:%[0-9]+]] = nn.cross_entropy_grad [[V11]], %targets
// BF16-NEXT: [[V14:%[0-9]+]] = fsdp.cast %head.weight
// BF16-NEXT: [[V15:%[0-9]+]] = nn.linear_grad_input out_in [[V13]], [[V14]] {module = "head"}
// BF16-NEXT: fsdp.free params @root
// BF16-NEXT: fsdp.alloc grads @root
// BF16-NEXT: [[V16:%[0-9]+]] = nn.linear_grad_weight out_in [[V13]], [[V9]] {module = "head"}
// BF16-NEXT: fsdp.grad "head.weight", [[V16]]
// BF16-NEXT: [[V17:%[0-9]+]] = fsdp.all_gather @block1 in  bf16
// BF16-NEXT: fsdp.wait [[V17]]
// BF16-NEXT: [[V18:%[0-9]+]] = fsdp.cast %blocks.1.fc.weight
// BF16-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_input out_in [[V15]], [[V18]] {module = "blocks.1.fc"}
// BF16-NEXT: fsdp.free params @block1
// BF16-NEXT: fsdp.alloc grads @block1
// BF16-NEXT: [[V20:%[0-9]+]] = nn.linear_grad_weight out_in [[V15]], [[V6]] {module = "blocks.1.fc"}
// BF16-NEXT: fsdp.grad "blocks.1.fc.weight", [[V20]]
// BF16-NEXT: [[V21:%[0-9]+]] = fsdp.reduce_scatter @block1 in  bf16
// BF16-NEXT: [[V22:%[0-9]+]] = nn.gelu_grad [[V19]], [[V5]] {module = "blocks.0.act"}
// BF16-NEXT: [[V23:%[0-9]+]] = fsdp.all_gather @block0 in  bf16
// BF16-NEXT: fsdp.wait [[V23]]
// BF16-NEXT: [[V24:%[0-9]+]] = fsdp.cast %blocks.0.fc.weight
// BF16-NEXT: [[V25:%[0-9]+]] = nn.linear_grad_input out_in [[V22]], [[V24]] {module = "blocks.0.fc"}
// BF16-NEXT: fsdp.free params @block0
// BF16-NEXT: fsdp.alloc grads @block0
// BF16-NEXT: [[V26:%[0-9]+]] = nn.linear_grad_weight out_in [[V22]], [[V2]] {module = "blocks.0.fc"}
// BF16-NEXT: fsdp.grad "blocks.0.fc.weight", [[V26]]
// BF16-NEXT: fsdp.wait [[V21]]
// BF16-NEXT: fsdp.free grads @block1
// BF16-NEXT: [[V27:%[0-9]+]] = fsdp.reduce_scatter @block0 in  bf16
// BF16-NEXT: [[V28:%[0-9]+]] = nn.embedding_grad [[V25]], %tokens {module = "emb"}
// BF16-NEXT: fsdp.grad "emb.weight", [[V28]]
// BF16-NEXT: fsdp.wait [[V27]]
// BF16-NEXT: fsdp.free grads @block0
// BF16-NEXT: [[V29:%[0-9]+]] = fsdp.reduce_scatter @root in  bf16
// BF16-NEXT: fsdp.wait [[V29]]
// BF16-NEXT: fsdp.free grads @root
// BF16-NEXT: [[V30:%[0-9]+]] = fsdp.grad_norm
// BF16-NEXT: fsdp.wait [[V30]]
// BF16-NEXT: fsdp.optimizer_step @root
// BF16-NEXT: fsdp.optimizer_step @block0
// BF16-NEXT: fsdp.optimizer_step @block1
// BF16-NEXT: fsdp.return [[V12]]
// BF16-NEXT: }

// bf16 reductions only: the gathers and compute stay f32.
// REDUCE: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// REDUCE: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// REDUCE: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
// REDUCE-LABEL: fsdp.step @train_step(
// REDUCE-SAME: block_prefix = "blocks", compute_dtype = #fsdp<dtype f32>, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, param_dtype = #fsdp<dtype f32>, reduce_dtype = #fsdp<dtype bf16>, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64
// REDUCE-NEXT: %emb.weight = nn.param "emb.weight"
// REDUCE-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// REDUCE-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// REDUCE-NEXT: %head.weight = nn.param "head.weight"
// REDUCE-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root
// REDUCE-NEXT: fsdp.wait [[V0]]
// REDUCE-NEXT: [[V1:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// REDUCE-NEXT: [[V2:%[0-9]+]] = fsdp.all_gather @block0
// REDUCE-NEXT: fsdp.wait [[V2]]
// REDUCE-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// REDUCE-NEXT: fsdp.free params @block0
// REDUCE-NEXT: [[V4:%[0-9]+]] = nn.gelu [[V3]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// REDUCE-NEXT: [[V5:%[0-9]+]] = fsdp.all_gather @block1
// REDUCE-NEXT: fsdp.wait [[V5]]
// REDUCE-NEXT: [[V6:%[0-9]+]] = nn.linear out_in [[V4]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// REDUCE-NEXT: fsdp.free params @block1
// REDUCE-NEXT: [[V7:%[0-9]+]] = nn.linear out_in [[V6]], %head.weight {module = "head"}
// REDUCE-NEXT: [[V8:%[0-9]+]] = nn.cross_entropy [[V7]], %targets
// REDUCE-NEXT: [[V9:%[0-9]+]] = nn.cross_entropy_grad [[V7]], %targets
// REDUCE-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_input out_in [[V9]], %head.weight {module = "head"}
// REDUCE-NEXT: fsdp.free params @root
// REDUCE-NEXT: fsdp.alloc grads @root
// REDUCE-NEXT: [[V11:%[0-9]+]] = nn.linear_grad_weight out_in [[V9]], [[V6]] {module = "head"}
// REDUCE-NEXT: fsdp.grad "head.weight", [[V11]]
// REDUCE-NEXT: [[V12:%[0-9]+]] = fsdp.all_gather @block1
// REDUCE-NEXT: fsdp.wait [[V12]]
// REDUCE-NEXT: [[V13:%[0-9]+]] = nn.linear_grad_input out_in [[V10]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// REDUCE-NEXT: fsdp.free params @block1
// REDUCE-NEXT: fsdp.alloc grads @block1
// REDUCE-NEXT: [[V14:%[0-9]+]] = nn.linear_grad_weight out_in [[V10]], [[V4]] {module = "blocks.1.fc"}
// REDUCE-NEXT: fsdp.grad "blocks.1.fc.weight", [[V14]]
// REDUCE-NEXT: [[V15:%[0-9]+]] = fsdp.reduce_scatter @block1 in  bf16
// REDUCE-NEXT: [[V16:%[0-9]+]] = nn.gelu_grad [[V13]], [[V3]] {module = "blocks.0.act"}
// REDUCE-NEXT: [[V17:%[0-9]+]] = fsdp.all_gather @block0
// REDUCE-NEXT: fsdp.wait [[V17]]
// REDUCE-NEXT: [[V18:%[0-9]+]] = nn.linear_grad_input out_in [[V16]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// REDUCE-NEXT: fsdp.free params @block0
// REDUCE-NEXT: fsdp.alloc grads @block0
// REDUCE-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_weight out_in [[V16]], [[V1]] {module = "blocks.0.fc"}
// REDUCE-NEXT: fsdp.grad "blocks.0.fc.weight", [[V19]]
// REDUCE-NEXT: fsdp.wait [[V15]]
// REDUCE-NEXT: fsdp.free grads @block1
// REDUCE-NEXT: [[V20:%[0-9]+]] = fsdp.reduce_scatter @block0 in  bf16
// REDUCE-NEXT: [[V21:%[0-9]+]] = nn.embedding_grad [[V18]], %tokens {module = "emb"}
// REDUCE-NEXT: fsdp.grad "emb.weight", [[V21]]
// REDUCE-NEXT: fsdp.wait [[V20]]
// REDUCE-NEXT: fsdp.free grads @block0
// REDUCE-NEXT: [[V22:%[0-9]+]] = fsdp.reduce_scatter @root in  bf16
// REDUCE-NEXT: fsdp.wait [[V22]]
// REDUCE-NEXT: fsdp.free grads @root
// REDUCE-NEXT: [[V23:%[0-9]+]] = fsdp.grad_norm
// REDUCE-NEXT: fsdp.wait [[V23]]
// REDUCE-NEXT: fsdp.optimizer_step @root
// REDUCE-NEXT: fsdp.optimizer_step @block0
// REDUCE-NEXT: fsdp.optimizer_step @block1
// REDUCE-NEXT: fsdp.return [[V8]]
// REDUCE-NEXT: }

// BAD: for the --param-dtype option: Cannot find option named 'fp8'!

// COMPUTE-LABEL: fsdp.step @train_step(
// COMPUTE-SAME: compute_dtype = #fsdp<dtype bf16>
// COMPUTE: %[[E:.*]] = fsdp.cast %emb.weight : tensor<16x8xf32> to tensor<16x8xbf16>
// COMPUTE-NEXT: %[[X:.*]] = nn.embedding %tokens, %[[E]] {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xbf16>) -> tensor<?x?x8xbf16>
// COMPUTE: nn.linear out_in %[[X]], %{{.*}} {module = "blocks.0.fc"} : (tensor<?x?x8xbf16>, tensor<8x8xbf16>) -> tensor<?x?x8xbf16>
// COMPUTE: nn.gelu %{{.*}} : tensor<?x?x8xbf16> -> tensor<?x?x8xbf16>
// COMPUTE: %[[L:.*]] = nn.linear out_in %{{.*}} {module = "head"} : (tensor<?x?x8xbf16>, tensor<16x8xbf16>) -> tensor<?x?x16xbf16>
// COMPUTE-NEXT: %[[LOSS:.*]] = nn.cross_entropy %[[L]], %targets : (tensor<?x?x16xbf16>, tensor<?x?xi64>) -> tensor<f32>
// COMPUTE-NEXT: nn.cross_entropy_grad %[[L]], %targets : (tensor<?x?x16xbf16>, tensor<?x?xi64>) -> tensor<?x?x16xbf16>
// COMPUTE: %[[G:.*]] = nn.linear_grad_weight out_in {{.*}} -> tensor<16x8xbf16>
// COMPUTE-NEXT: fsdp.grad "head.weight", %[[G]] : tensor<16x8xbf16>
// COMPUTE: %[[EG:.*]] = nn.embedding_grad {{.*}} -> tensor<16x8xbf16>
// COMPUTE-NEXT: fsdp.grad "emb.weight", %[[EG]] : tensor<16x8xbf16>
// COMPUTE: fsdp.return %[[LOSS]] : tensor<f32>
