// Mutations of a reshard_after_forward = 2 plan (insert-collectives-hpz.mlir's
// full-shard one at world 4); each is rejected at the op that breaks it.
// RUN: fsdp-opt %s --fsdp-verify-plan -split-input-file -verify-diagnostics

// block1's reshard removed: its backward would gather a copy never made.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 4 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, reshard_after_forward = 2 : i64, shard_size = 4 : i64, strategy = #fsdp<strategy full_shard>, world_size = 4 : i64} {
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
    fsdp.reshard @block0
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
    // expected-error @+1 {{gathers unit @block1 over its reshard group, but no resharded copy of it is live here}}
    %12 = fsdp.all_gather @block1 over reshard
    fsdp.wait %12
    fsdp.free resharded @block1
    %13 = nn.linear_grad_input out_in %10, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block1
    fsdp.alloc grads @block1
    %14 = nn.linear_grad_weight out_in %10, %4 {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.1.fc.weight", %14 : tensor<8x8xf32>
    %15 = fsdp.reduce_scatter @block1
    %16 = nn.gelu_grad %13, %3 {module = "blocks.0.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %17 = fsdp.all_gather @block0 over reshard
    fsdp.wait %17
    fsdp.free resharded @block0
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

// -----

// block1's resharded copy freed before the gather reading it is waited for.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 4 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, reshard_after_forward = 2 : i64, shard_size = 4 : i64, strategy = #fsdp<strategy full_shard>, world_size = 4 : i64} {
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
    fsdp.reshard @block0
    fsdp.free params @block0
    %4 = nn.gelu %3 {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %5 = fsdp.all_gather @block1
    fsdp.wait %5
    %6 = nn.linear out_in %4, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.reshard @block1
    fsdp.free params @block1
    %7 = nn.linear out_in %6, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %8 = nn.cross_entropy %7, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %9 = nn.cross_entropy_grad %7, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %10 = nn.linear_grad_input out_in %9, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %11 = nn.linear_grad_weight out_in %9, %6 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %11 : tensor<16x8xf32>
    %12 = fsdp.all_gather @block1 over reshard
    // expected-error @+1 {{frees the resharded copy of unit @block1 before the gather reading it has completed}}
    fsdp.free resharded @block1
    fsdp.wait %12
    %13 = nn.linear_grad_input out_in %10, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block1
    fsdp.alloc grads @block1
    %14 = nn.linear_grad_weight out_in %10, %4 {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.1.fc.weight", %14 : tensor<8x8xf32>
    %15 = fsdp.reduce_scatter @block1
    %16 = nn.gelu_grad %13, %3 {module = "blocks.0.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %17 = fsdp.all_gather @block0 over reshard
    fsdp.wait %17
    fsdp.free resharded @block0
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

// -----

// block0's resharded copy never freed.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 4 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, reshard_after_forward = 2 : i64, shard_size = 4 : i64, strategy = #fsdp<strategy full_shard>, world_size = 4 : i64} {
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
    // expected-error @+1 {{reshards unit @block0, whose copy is never freed}}
    fsdp.reshard @block0
    fsdp.free params @block0
    %4 = nn.gelu %3 {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %5 = fsdp.all_gather @block1
    fsdp.wait %5
    %6 = nn.linear out_in %4, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.reshard @block1
    fsdp.free params @block1
    %7 = nn.linear out_in %6, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %8 = nn.cross_entropy %7, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %9 = nn.cross_entropy_grad %7, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %10 = nn.linear_grad_input out_in %9, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %11 = nn.linear_grad_weight out_in %9, %6 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %11 : tensor<16x8xf32>
    %12 = fsdp.all_gather @block1 over reshard
    fsdp.wait %12
    fsdp.free resharded @block1
    %13 = nn.linear_grad_input out_in %10, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block1
    fsdp.alloc grads @block1
    %14 = nn.linear_grad_weight out_in %10, %4 {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.1.fc.weight", %14 : tensor<8x8xf32>
    %15 = fsdp.reduce_scatter @block1
    %16 = nn.gelu_grad %13, %3 {module = "blocks.0.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %17 = fsdp.all_gather @block0 over reshard
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

// -----

// block0 resharded after its parameters are freed.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 4 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.1.fc.weight"], shard_size = 4 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64, reshard_after_forward = 2 : i64, shard_size = 4 : i64, strategy = #fsdp<strategy full_shard>, world_size = 4 : i64} {
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
    // expected-error @+1 {{reshards unit @block0, which is not gathered here}}
    fsdp.reshard @block0
    %4 = nn.gelu %3 {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %5 = fsdp.all_gather @block1
    fsdp.wait %5
    %6 = nn.linear out_in %4, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.reshard @block1
    fsdp.free params @block1
    %7 = nn.linear out_in %6, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %8 = nn.cross_entropy %7, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %9 = nn.cross_entropy_grad %7, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %10 = nn.linear_grad_input out_in %9, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %11 = nn.linear_grad_weight out_in %9, %6 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %11 : tensor<16x8xf32>
    %12 = fsdp.all_gather @block1 over reshard
    fsdp.wait %12
    fsdp.free resharded @block1
    %13 = nn.linear_grad_input out_in %10, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block1
    fsdp.alloc grads @block1
    %14 = nn.linear_grad_weight out_in %10, %4 {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.1.fc.weight", %14 : tensor<8x8xf32>
    %15 = fsdp.reduce_scatter @block1
    %16 = nn.gelu_grad %13, %3 {module = "blocks.0.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %17 = fsdp.all_gather @block0 over reshard
    fsdp.wait %17
    fsdp.free resharded @block0
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
