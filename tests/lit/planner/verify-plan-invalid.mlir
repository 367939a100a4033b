// Mutations of a correct plan; each is rejected at the op that breaks it.
// RUN: fsdp-opt %s --fsdp-verify-plan -split-input-file -verify-diagnostics

// A removed all_gather: the block's weight is read while only a shard is here.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{uses parameter 'blocks.0.fc.weight' of unit @block0, which is not gathered here}}
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    fsdp.wait %12
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// A free moved before a use.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    // expected-note @+1 {{freed here}}
    fsdp.free params @block0
    // expected-error @+1 {{uses parameter 'blocks.0.fc.weight' of unit @block0, which is not gathered here}}
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    fsdp.wait %12
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// A use before the gather is waited for.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    // expected-note @+1 {{gathered here}}
    %2 = fsdp.all_gather @block0
    // expected-error @+1 {{uses parameter 'blocks.0.fc.weight' of unit @block0 before waiting for its all_gather}}
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.wait %2
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    fsdp.wait %12
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// A dropped reduce_scatter: the gradient would be lost.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    // expected-error @+1 {{frees the gradients of unit @block0 without reducing them: they would be lost}}
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// A dropped reduce_scatter and free: the gradient is never reduced.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    // expected-error @+1 {{updates unit @block0, whose gradients were never reduced}}
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// A gradient reduced twice.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    // expected-error @+1 {{reduces unit @block0's gradients a second time}}
    %99 = fsdp.reduce_scatter @block0
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    fsdp.wait %12
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// A gradient completed after its unit was reduced.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    // expected-error @+1 {{completes the gradient of 'blocks.0.fc.weight' after unit @block0 was reduced: it would be lost}}
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    fsdp.wait %12
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// Gradients freed before their reduction completes.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    // expected-error @+1 {{frees the gradients of unit @block0 before their reduction has completed}}
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// A unit updated before the global norm is known.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    fsdp.wait %12
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    // expected-error @+1 {{updates unit @root before the global gradient norm is known}}
    fsdp.optimizer_step @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}



// -----

// A unit gathered twice without a free.
module {
  fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch none>, block_prefix = "blocks", forward_prefetch = 0 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root
    fsdp.wait %0
    %1 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %2 = fsdp.all_gather @block0
    fsdp.wait %2
    %3 = nn.linear out_in %1, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    // expected-error @+1 {{gathers unit @block0 again while it is still gathered}}
    %9 = fsdp.all_gather @block0
    fsdp.wait %9
    %10 = nn.linear_grad_input out_in %7, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.alloc grads @block0
    %11 = nn.linear_grad_weight out_in %7, %1 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    %13 = nn.embedding_grad %10, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %13 : tensor<16x8xf32>
    fsdp.wait %12
    fsdp.free grads @block0
    %14 = fsdp.reduce_scatter @root
    fsdp.wait %14
    fsdp.free grads @root
    %15 = fsdp.grad_norm
    fsdp.wait %15
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.return %5 : tensor<f32>
  }
}


