module {
  fsdp.unit @root {exp_avg_offset = 1024 : i64, exp_avg_sq_offset = 1536 : i64, grad_shard_offset = 512 : i64, index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 256 : i64, params = ["emb.weight", "head.weight"], shard_size = 2 : i64, shard_offset = 0 : i64, sizes = array<i64: 128, 128>}
  fsdp.unit @block0 {exp_avg_offset = 2304 : i64, exp_avg_sq_offset = 2432 : i64, grad_shard_offset = 2176 : i64, index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 64 : i64, params = ["blocks.0.fc.weight"], shard_size = 2 : i64, shard_offset = 2048 : i64, sizes = array<i64: 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {arena_bytes = 4548 : i64, backward_prefetch = #fsdp<backward_prefetch pre>, block_prefix = "blocks", forward_prefetch = 1 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 8 : i64, memory = #fsdp.memory<peak_bytes = 4548, live_peak_bytes = 4516, params_bytes = 640, grads_bytes = 640, optimizer_bytes = 1280, unsharded_bytes = 1280, activations_bytes = 676, fragmentation_bytes = 32>, micro_batch = 1 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64, param_dtype = #fsdp<dtype f32>, predicted_micro_step_s = 3.7634000000000006E-5 : f64, predicted_optimizer_s = 1.4513600000000003E-5 : f64, reduce_dtype = #fsdp<dtype f32>, seq_len = 4 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, targets_offset = 4352 : i64, tokens_offset = 4480 : i64, world_size = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = fsdp.all_gather @root {offset = 2560 : i64}
    fsdp.wait %0
    %1 = fsdp.all_gather @block0 {offset = 3584 : i64}
    %2 = nn.embedding %tokens, %emb.weight {module = "emb", offsets = array<i64: 4096>} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.wait %1
    %3 = nn.linear out_in %2, %blocks.0.fc.weight {module = "blocks.0.fc", offsets = array<i64: 4224>} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    %4 = nn.linear out_in %3, %head.weight {module = "head", offsets = array<i64: 3584>} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets {offsets = array<i64: 4544>} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets {offsets = array<i64: 3840>} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = fsdp.all_gather @block0 {offset = 3584 : i64}
    %8 = nn.linear_grad_input out_in %6, %head.weight {module = "head", offsets = array<i64: 4352>} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @root
    fsdp.alloc grads @root {offset = 2560 : i64}
    %9 = nn.linear_grad_weight out_in %6, %3 {module = "head", offsets = array<i64: -1>} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %9 : tensor<16x8xf32>
    fsdp.wait %7
    %10 = nn.linear_grad_input out_in %8, %blocks.0.fc.weight {module = "blocks.0.fc", offsets = array<i64: 3840>} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    fsdp.free params @block0
    fsdp.alloc grads @block0 {offset = 3584 : i64}
    %11 = nn.linear_grad_weight out_in %8, %2 {module = "blocks.0.fc", offsets = array<i64: -1>} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %11 : tensor<8x8xf32>
    %12 = fsdp.reduce_scatter @block0
    %13 = nn.embedding_grad %10, %tokens {module = "emb", offsets = array<i64: -1>} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
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
