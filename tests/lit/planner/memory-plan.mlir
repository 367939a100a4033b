// fsdp-memory-plan alone, for two sequences of four tokens: persistent shards
// at the bottom of the arena, every other buffer where nothing live at the
// same time is; the peak and its parts recorded on the step.
// RUN: fsdp-opt %s --fsdp-memory-plan="micro-batch=2 seq-len=4" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-memory-plan="micro-batch=2 seq-len=4 target=cuda" | FileCheck %s --check-prefix=CUDA
// RUN: not fsdp-opt %s --fsdp-memory-plan="seq-len=9" 2>&1 | FileCheck %s --check-prefix=SEQ
// offload=optimizer: the moments, the master shards and the gradients'
// host copies in the host pool, one after another (each unit's moments,
// master shard and gradient copy in turn); the arena keeps the parameter
// and gradient shards, and shrinks by the moments' 1536 bytes.
// RUN: fsdp-opt %s --fsdp-memory-plan="micro-batch=2 seq-len=4 offload=optimizer" | FileCheck %s --check-prefix=OFFLOAD
// OFFLOAD: fsdp.unit @root {exp_avg_offset = 0 : i64, exp_avg_sq_offset = 512 : i64, grad_shard_offset = 512 : i64, host_grad_offset = 1536 : i64, host_shard_offset = 1024 : i64,
// OFFLOAD: fsdp.unit @block0 {exp_avg_offset = 2048 : i64, exp_avg_sq_offset = 2176 : i64, grad_shard_offset = 1152 : i64, host_grad_offset = 2432 : i64, host_shard_offset = 2304 : i64,
// OFFLOAD: fsdp.unit @block1 {exp_avg_offset = 2560 : i64, exp_avg_sq_offset = 2688 : i64, grad_shard_offset = 1408 : i64, host_grad_offset = 2944 : i64, host_shard_offset = 2816 : i64,
// OFFLOAD-LABEL: fsdp.step @train_step(
// OFFLOAD-SAME: arena_bytes = 4740 : i64,
// OFFLOAD-SAME: host_bytes = 3072 : i64,
// OFFLOAD-SAME: memory = #fsdp.memory<peak_bytes = 4740, live_peak_bytes = 4740, params_bytes = 768, grads_bytes = 768, optimizer_bytes = 0, unsharded_bytes = 1024, activations_bytes = 2180, fragmentation_bytes = 0>
// OFFLOAD-SAME: offload = #fsdp<offload optimizer>
// offload=all: no parameter shard in the arena (the host's master copy is
// it; f32 parameters, so no bf16 copies): 768 bytes less again.
// RUN: fsdp-opt %s --fsdp-memory-plan="micro-batch=2 seq-len=4 offload=all" | FileCheck %s --check-prefix=ALL
// ALL: fsdp.unit @root {exp_avg_offset = 0 : i64, exp_avg_sq_offset = 512 : i64, grad_shard_offset = 0 : i64, host_grad_offset = 1536 : i64, host_shard_offset = 1024 : i64, index
// ALL-NOT: {{ }}shard_offset =
// ALL-LABEL: fsdp.step @train_step(
// ALL-SAME: arena_bytes = 3972 : i64,
// ALL-SAME: host_bytes = 3072 : i64,
// ALL-SAME: memory = #fsdp.memory<peak_bytes = 3972, live_peak_bytes = 3972, params_bytes = 0, grads_bytes = 768, optimizer_bytes = 0,
// ALL-SAME: offload = #fsdp<offload all>
// Planned again without it, nothing of the host pool stays.
// RUN: fsdp-opt %s --fsdp-memory-plan="micro-batch=2 seq-len=4 offload=optimizer" | fsdp-opt --fsdp-memory-plan="micro-batch=2 seq-len=4" | FileCheck %s --check-prefix=AGAIN
// AGAIN-NOT: host_
// AGAIN-NOT: offload

module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
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

// CHECK: fsdp.unit @root {exp_avg_offset = 1024 : i64, exp_avg_sq_offset = 1536 : i64, grad_shard_offset = 512 : i64, index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_offset = 0 : i64, shard_size = 2 : i64, sizes = array<i64: 128, 128>}
// CHECK: fsdp.unit @block0 {exp_avg_offset = 2304 : i64, exp_avg_sq_offset = 2432 : i64, grad_shard_offset = 2176 : i64, index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_offset = 2048 : i64, shard_size = 2 : i64, sizes = array<i64: 64>}
// CHECK: fsdp.unit @block1 {exp_avg_offset = 2816 : i64, exp_avg_sq_offset = 2944 : i64, grad_shard_offset = 2688 : i64, index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_offset = 2560 : i64, shard_size = 2 : i64, sizes = array<i64: 64>}
// CHECK-LABEL: fsdp.step @train_step(
// CHECK-SAME: arena_bytes = 6276 : i64, backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, memory = #fsdp.memory<peak_bytes = 6276, live_peak_bytes = 6276, params_bytes = 768, grads_bytes = 768, optimizer_bytes = 1536, unsharded_bytes = 1024, activations_bytes = 2180, fragmentation_bytes = 0>, micro_batch = 2 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, seq_len = 4 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, target = #fsdp<target cpu>, targets_offset = 6208 : i64, tokens_offset = 6144 : i64, world_size = 2 : i64
// CHECK-NEXT: %emb.weight = nn.param "emb.weight"
// CHECK-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// CHECK-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// CHECK-NEXT: %head.weight = nn.param "head.weight"
// CHECK-NEXT: [[V0:%[0-9]+]] = fsdp.all_gather @root {offset = 3072 : i64}
// CHECK-NEXT: fsdp.wait [[V0]]
// CHECK-NEXT: [[V1:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb", offsets = array<i64: 5120>}
// CHECK-NEXT: [[V2:%[0-9]+]] = fsdp.all_gather @block0 {offset = 4096 : i64}
// CHECK-NEXT: fsdp.wait [[V2]]
// CHECK-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.fc.weight {module = "blocks.0.fc", offsets = array<i64: 5376>}
// CHECK-NEXT: fsdp.free params @block0
// CHECK-NEXT: [[V4:%[0-9]+]] = nn.gelu [[V3]] {module = "blocks.0.act", offsets = array<i64: 5632>} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// CHECK-NEXT: [[V5:%[0-9]+]] = fsdp.all_gather @block1 {offset = 4096 : i64}
// CHECK-NEXT: fsdp.wait [[V5]]
// CHECK-NEXT: [[V6:%[0-9]+]] = nn.linear out_in [[V4]], %blocks.1.fc.weight {module = "blocks.1.fc", offsets = array<i64: 5888>}
// CHECK-NEXT: fsdp.free params @block1
// CHECK-NEXT: [[V7:%[0-9]+]] = nn.linear out_in [[V6]], %head.weight {module = "head", offsets = array<i64: 4096>}
// CHECK-NEXT: [[V8:%[0-9]+]] = nn.cross_entropy [[V7]], %targets {offsets = array<i64: 6272>}
// CHECK-NEXT: [[V9:%[0-9]+]] = nn.cross_entropy_grad [[V7]], %targets {offsets = array<i64: 4608>}
// CHECK-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_input out_in [[V9]], %head.weight {module = "head", offsets = array<i64: 4096>}
// CHECK-NEXT: fsdp.free params @root
// CHECK-NEXT: fsdp.alloc grads @root {offset = 3072 : i64}
// CHECK-NEXT: [[V11:%[0-9]+]] = nn.linear_grad_weight out_in [[V9]], [[V6]] {module = "head", offsets = array<i64: -1>}
// CHECK-NEXT: fsdp.grad "head.weight", [[V11]]
// CHECK-NEXT: [[V12:%[0-9]+]] = fsdp.all_gather @block1 {offset = 4352 : i64}
// CHECK-NEXT: fsdp.wait [[V12]]
// CHECK-NEXT: [[V13:%[0-9]+]] = nn.linear_grad_input out_in [[V10]], %blocks.1.fc.weight {module = "blocks.1.fc", offsets = array<i64: 4608>}
// CHECK-NEXT: fsdp.free params @block1
// CHECK-NEXT: fsdp.alloc grads @block1 {offset = 4352 : i64}
// CHECK-NEXT: [[V14:%[0-9]+]] = nn.linear_grad_weight out_in [[V10]], [[V4]] {module = "blocks.1.fc", offsets = array<i64: -1>}
// CHECK-NEXT: fsdp.grad "blocks.1.fc.weight", [[V14]]
// CHECK-NEXT: [[V15:%[0-9]+]] = fsdp.reduce_scatter @block1
// CHECK-NEXT: [[V16:%[0-9]+]] = nn.gelu_grad [[V13]], [[V3]] {module = "blocks.0.act", offsets = array<i64: 4096>}
// CHECK-NEXT: [[V17:%[0-9]+]] = fsdp.all_gather @block0 {offset = 4608 : i64}
// CHECK-NEXT: fsdp.wait [[V17]]
// CHECK-NEXT: [[V18:%[0-9]+]] = nn.linear_grad_input out_in [[V16]], %blocks.0.fc.weight {module = "blocks.0.fc", offsets = array<i64: 4864>}
// CHECK-NEXT: fsdp.free params @block0
// CHECK-NEXT: fsdp.alloc grads @block0 {offset = 4608 : i64}
// CHECK-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_weight out_in [[V16]], [[V1]] {module = "blocks.0.fc", offsets = array<i64: -1>}
// CHECK-NEXT: fsdp.grad "blocks.0.fc.weight", [[V19]]
// CHECK-NEXT: fsdp.wait [[V15]]
// CHECK-NEXT: fsdp.free grads @block1
// CHECK-NEXT: [[V20:%[0-9]+]] = fsdp.reduce_scatter @block0
// CHECK-NEXT: [[V21:%[0-9]+]] = nn.embedding_grad [[V18]], %tokens {module = "emb", offsets = array<i64: -1>}
// CHECK-NEXT: fsdp.grad "emb.weight", [[V21]]
// CHECK-NEXT: fsdp.wait [[V20]]
// CHECK-NEXT: fsdp.free grads @block0
// CHECK-NEXT: [[V22:%[0-9]+]] = fsdp.reduce_scatter @root
// CHECK-NEXT: fsdp.wait [[V22]]
// CHECK-NEXT: fsdp.free grads @root
// CHECK-NEXT: [[V23:%[0-9]+]] = fsdp.grad_norm
// CHECK-NEXT: fsdp.wait [[V23]]
// CHECK-NEXT: fsdp.optimizer_step @root
// CHECK-NEXT: fsdp.optimizer_step @block0
// CHECK-NEXT: fsdp.optimizer_step @block1
// CHECK-NEXT: fsdp.return [[V8]]
// CHECK-NEXT: }

// SEQ: error: seq-len 9 is outside the model's 1..8

// For the CUDA kernels: cuBLAS's workspace for the whole step, the loss's
// per-row doubles, the reduce-scatter's staging and the grad norm's partial
// sums are buffers of the arena too (runtime/Scratch.h).
// CUDA-LABEL: fsdp.step @train_step(
// CUDA-SAME: arena_bytes = 33565764 : i64
// CUDA-SAME: target = #fsdp<target cuda>
// CUDA-SAME: workspace_offset = {{[0-9]+}} : i64
// CUDA: nn.cross_entropy %{{.*}} {offsets = array<i64: {{[0-9]+}}>, scratch_offset = {{[0-9]+}} : i64}
// CUDA: fsdp.reduce_scatter @block1 {scratch_offset = {{[0-9]+}} : i64}
// CUDA: fsdp.reduce_scatter @block0 {scratch_offset = {{[0-9]+}} : i64}
// CUDA: fsdp.reduce_scatter @root {scratch_offset = {{[0-9]+}} : i64}
// CUDA: fsdp.grad_norm {scratch_offset = {{[0-9]+}} : i64}
