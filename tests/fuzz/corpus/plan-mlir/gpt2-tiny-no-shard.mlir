module {
  fsdp.unit @root {exp_avg_offset = 324096 : i64, exp_avg_sq_offset = 486144 : i64, grad_shard_offset = 162048 : i64, index = 0 : i64, module = "", numel = 40512 : i64, offsets = array<i64: 0, 32192, 40384, 40448>, padded_numel = 40512 : i64, params = ["transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"], shard_size = 1 : i64, shard_offset = 0 : i64, sizes = array<i64: 32192, 8192, 64, 64>}
  fsdp.unit @block0 {exp_avg_offset = 1048064 : i64, exp_avg_sq_offset = 1248000 : i64, grad_shard_offset = 848128 : i64, index = 1 : i64, module = "transformer.h.0", numel = 49984 : i64, offsets = array<i64: 0, 64, 128, 12416, 12608, 16704, 16768, 16832, 16896, 33280, 33536, 49920>, padded_numel = 49984 : i64, params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias", "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.weight", "transformer.h.0.attn.c_proj.bias", "transformer.h.0.ln_2.weight", "transformer.h.0.ln_2.bias", "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_fc.bias", "transformer.h.0.mlp.c_proj.weight", "transformer.h.0.mlp.c_proj.bias"], shard_size = 1 : i64, shard_offset = 648192 : i64, sizes = array<i64: 64, 64, 12288, 192, 4096, 64, 64, 64, 16384, 256, 16384, 64>}
  fsdp.unit @block1 {exp_avg_offset = 1847808 : i64, exp_avg_sq_offset = 2047744 : i64, grad_shard_offset = 1647872 : i64, index = 2 : i64, module = "transformer.h.1", numel = 49984 : i64, offsets = array<i64: 0, 64, 128, 12416, 12608, 16704, 16768, 16832, 16896, 33280, 33536, 49920>, padded_numel = 49984 : i64, params = ["transformer.h.1.ln_1.weight", "transformer.h.1.ln_1.bias", "transformer.h.1.attn.c_attn.weight", "transformer.h.1.attn.c_attn.bias", "transformer.h.1.attn.c_proj.weight", "transformer.h.1.attn.c_proj.bias", "transformer.h.1.ln_2.weight", "transformer.h.1.ln_2.bias", "transformer.h.1.mlp.c_fc.weight", "transformer.h.1.mlp.c_fc.bias", "transformer.h.1.mlp.c_proj.weight", "transformer.h.1.mlp.c_proj.bias"], shard_size = 1 : i64, shard_offset = 1447936 : i64, sizes = array<i64: 64, 64, 12288, 192, 4096, 64, 64, 64, 16384, 256, 16384, 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {arena_bytes = 3024644 : i64, backward_prefetch = #fsdp<backward_prefetch pre>, block_prefix = "transformer.h", forward_prefetch = 1 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 128 : i64, memory = #fsdp.memory<peak_bytes = 3024644, live_peak_bytes = 3024644, params_bytes = 561920, grads_bytes = 561920, optimizer_bytes = 1123840, unsharded_bytes = 561920, activations_bytes = 215044, fragmentation_bytes = 0>, micro_batch = 1 : i64, model = "gpt2-tiny", model_type = "gpt2", num_blocks = 2 : i64, param_dtype = #fsdp<dtype f32>, predicted_micro_step_s = 6.6277480000000004E-4 : f64, predicted_optimizer_s = 4.555360e-04 : f64, reduce_dtype = #fsdp<dtype f32>, seq_len = 16 : i64, shard_size = 1 : i64, strategy = #fsdp<strategy no_shard>, targets_offset = 2320256 : i64, tokens_offset = 3024384 : i64, world_size = 2 : i64} {
    %transformer.wte.weight = nn.param "transformer.wte.weight" : tensor<503x64xf32>
    %transformer.wpe.weight = nn.param "transformer.wpe.weight" : tensor<128x64xf32>
    %transformer.h.0.ln_1.weight = nn.param "transformer.h.0.ln_1.weight" : tensor<64xf32>
    %transformer.h.0.ln_1.bias = nn.param "transformer.h.0.ln_1.bias" : tensor<64xf32>
    %transformer.h.0.attn.c_attn.weight = nn.param "transformer.h.0.attn.c_attn.weight" : tensor<64x192xf32>
    %transformer.h.0.attn.c_attn.bias = nn.param "transformer.h.0.attn.c_attn.bias" : tensor<192xf32>
    %transformer.h.0.attn.c_proj.weight = nn.param "transformer.h.0.attn.c_proj.weight" : tensor<64x64xf32>
    %transformer.h.0.attn.c_proj.bias = nn.param "transformer.h.0.attn.c_proj.bias" : tensor<64xf32>
    %transformer.h.0.ln_2.weight = nn.param "transformer.h.0.ln_2.weight" : tensor<64xf32>
    %transformer.h.0.ln_2.bias = nn.param "transformer.h.0.ln_2.bias" : tensor<64xf32>
    %transformer.h.0.mlp.c_fc.weight = nn.param "transformer.h.0.mlp.c_fc.weight" : tensor<64x256xf32>
    %transformer.h.0.mlp.c_fc.bias = nn.param "transformer.h.0.mlp.c_fc.bias" : tensor<256xf32>
    %transformer.h.0.mlp.c_proj.weight = nn.param "transformer.h.0.mlp.c_proj.weight" : tensor<256x64xf32>
    %transformer.h.0.mlp.c_proj.bias = nn.param "transformer.h.0.mlp.c_proj.bias" : tensor<64xf32>
    %transformer.h.1.ln_1.weight = nn.param "transformer.h.1.ln_1.weight" : tensor<64xf32>
    %transformer.h.1.ln_1.bias = nn.param "transformer.h.1.ln_1.bias" : tensor<64xf32>
    %transformer.h.1.attn.c_attn.weight = nn.param "transformer.h.1.attn.c_attn.weight" : tensor<64x192xf32>
    %transformer.h.1.attn.c_attn.bias = nn.param "transformer.h.1.attn.c_attn.bias" : tensor<192xf32>
    %transformer.h.1.attn.c_proj.weight = nn.param "transformer.h.1.attn.c_proj.weight" : tensor<64x64xf32>
    %transformer.h.1.attn.c_proj.bias = nn.param "transformer.h.1.attn.c_proj.bias" : tensor<64xf32>
    %transformer.h.1.ln_2.weight = nn.param "transformer.h.1.ln_2.weight" : tensor<64xf32>
    %transformer.h.1.ln_2.bias = nn.param "transformer.h.1.ln_2.bias" : tensor<64xf32>
    %transformer.h.1.mlp.c_fc.weight = nn.param "transformer.h.1.mlp.c_fc.weight" : tensor<64x256xf32>
    %transformer.h.1.mlp.c_fc.bias = nn.param "transformer.h.1.mlp.c_fc.bias" : tensor<256xf32>
    %transformer.h.1.mlp.c_proj.weight = nn.param "transformer.h.1.mlp.c_proj.weight" : tensor<256x64xf32>
    %transformer.h.1.mlp.c_proj.bias = nn.param "transformer.h.1.mlp.c_proj.bias" : tensor<64xf32>
    %transformer.ln_f.weight = nn.param "transformer.ln_f.weight" : tensor<64xf32>
    %transformer.ln_f.bias = nn.param "transformer.ln_f.bias" : tensor<64xf32>
    %0 = nn.position_ids %tokens {module = "transformer.wpe", offsets = array<i64: 3024512>} : tensor<?x?xi64> -> tensor<?x?xi64>
    %1 = nn.embedding %tokens, %transformer.wte.weight {module = "transformer.wte", offsets = array<i64: 2247680>} : (tensor<?x?xi64>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    %2 = nn.embedding %0, %transformer.wpe.weight {module = "transformer.wpe", offsets = array<i64: 2251776>} : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
    %3 = nn.add %1, %2 {module = "transformer", offsets = array<i64: 2987520>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %4 = nn.layer_norm %3, %transformer.h.0.ln_1.weight, %transformer.h.0.ln_1.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1", offsets = array<i64: 2991616>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %5 = nn.linear in_out %4, %transformer.h.0.attn.c_attn.weight, %transformer.h.0.attn.c_attn.bias {module = "transformer.h.0.attn.c_attn", offsets = array<i64: 2247680>} : (tensor<?x?x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
    %6:3 = nn.split %5 {module = "transformer.h.0.attn", offsets = array<i64: 2995712, 2999808, 3003904>} : tensor<?x?x192xf32> -> tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
    %7 = nn.causal_attention %6#0, %6#1, %6#2 {module = "transformer.h.0.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64, offsets = array<i64: 3008000>, scratch_offset = 2247680 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %8 = nn.linear in_out %7, %transformer.h.0.attn.c_proj.weight, %transformer.h.0.attn.c_proj.bias {module = "transformer.h.0.attn.c_proj", offsets = array<i64: 2247680>} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %9 = nn.add %3, %8 {module = "transformer.h.0", offsets = array<i64: 3012096>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %10 = nn.layer_norm %9, %transformer.h.0.ln_2.weight, %transformer.h.0.ln_2.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_2", offsets = array<i64: 3016192>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %11 = nn.linear in_out %10, %transformer.h.0.mlp.c_fc.weight, %transformer.h.0.mlp.c_fc.bias {module = "transformer.h.0.mlp.c_fc", offsets = array<i64: 2938368>} : (tensor<?x?x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    %12 = nn.gelu %11 {module = "transformer.h.0.mlp.act", offsets = array<i64: 2954752>} : tensor<?x?x256xf32> -> tensor<?x?x256xf32>
    %13 = nn.linear in_out %12, %transformer.h.0.mlp.c_proj.weight, %transformer.h.0.mlp.c_proj.bias {module = "transformer.h.0.mlp.c_proj", offsets = array<i64: 2247680>} : (tensor<?x?x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %14 = nn.add %9, %13 {module = "transformer.h.0", offsets = array<i64: 2496768>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %15 = nn.layer_norm %14, %transformer.h.1.ln_1.weight, %transformer.h.1.ln_1.bias {eps = 1.000000e-05 : f64, module = "transformer.h.1.ln_1", offsets = array<i64: 2500864>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %16 = nn.linear in_out %15, %transformer.h.1.attn.c_attn.weight, %transformer.h.1.attn.c_attn.bias {module = "transformer.h.1.attn.c_attn", offsets = array<i64: 2247680>} : (tensor<?x?x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
    %17:3 = nn.split %16 {module = "transformer.h.1.attn", offsets = array<i64: 2504960, 2509056, 2513152>} : tensor<?x?x192xf32> -> tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
    %18 = nn.causal_attention %17#0, %17#1, %17#2 {module = "transformer.h.1.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64, offsets = array<i64: 2517248>, scratch_offset = 2247680 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %19 = nn.linear in_out %18, %transformer.h.1.attn.c_proj.weight, %transformer.h.1.attn.c_proj.bias {module = "transformer.h.1.attn.c_proj", offsets = array<i64: 2247680>} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %20 = nn.add %14, %19 {module = "transformer.h.1", offsets = array<i64: 2521344>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %21 = nn.layer_norm %20, %transformer.h.1.ln_2.weight, %transformer.h.1.ln_2.bias {eps = 1.000000e-05 : f64, module = "transformer.h.1.ln_2", offsets = array<i64: 2525440>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %22 = nn.linear in_out %21, %transformer.h.1.mlp.c_fc.weight, %transformer.h.1.mlp.c_fc.bias {module = "transformer.h.1.mlp.c_fc", offsets = array<i64: 2447616>} : (tensor<?x?x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    %23 = nn.gelu %22 {module = "transformer.h.1.mlp.act", offsets = array<i64: 2464000>} : tensor<?x?x256xf32> -> tensor<?x?x256xf32>
    %24 = nn.linear in_out %23, %transformer.h.1.mlp.c_proj.weight, %transformer.h.1.mlp.c_proj.bias {module = "transformer.h.1.mlp.c_proj", offsets = array<i64: 2247680>} : (tensor<?x?x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %25 = nn.add %20, %24 {module = "transformer.h.1", offsets = array<i64: 2312064>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %26 = nn.layer_norm %25, %transformer.ln_f.weight, %transformer.ln_f.bias {eps = 1.000000e-05 : f64, module = "transformer.ln_f", offsets = array<i64: 2316160>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %27 = nn.linear out_in %26, %transformer.wte.weight {module = "lm_head", offsets = array<i64: 2247680>} : (tensor<?x?x64xf32>, tensor<503x64xf32>) -> tensor<?x?x503xf32>
    %28 = nn.cross_entropy %27, %targets {offsets = array<i64: 3024640>} : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<f32>
    %29 = nn.cross_entropy_grad %27, %targets {offsets = array<i64: 2279872>} : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<?x?x503xf32>
    %30 = nn.linear_grad_input out_in %29, %transformer.wte.weight {module = "lm_head", offsets = array<i64: 2247680>} : (tensor<?x?x503xf32>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    %31 = nn.linear_grad_weight out_in %29, %26 {module = "lm_head", offsets = array<i64: 2809600>} : (tensor<?x?x503xf32>, tensor<?x?x64xf32>) -> tensor<503x64xf32>
    fsdp.alloc grads @root {offset = 2647552 : i64}
    %input_grad, %weight_grad, %bias_grad = nn.layer_norm_grad %30, %25, %transformer.ln_f.weight {eps = 1.000000e-05 : f64, module = "transformer.ln_f", offsets = array<i64: 2529536, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    fsdp.grad "transformer.ln_f.weight", %weight_grad : tensor<64xf32>
    fsdp.grad "transformer.ln_f.bias", %bias_grad : tensor<64xf32>
    %32 = nn.linear_grad_input in_out %input_grad, %transformer.h.1.mlp.c_proj.weight {module = "transformer.h.1.mlp.c_proj", offsets = array<i64: 2480384>} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
    fsdp.alloc grads @block1 {offset = 2247680 : i64}
    %33 = nn.linear_grad_weight in_out %input_grad, %23 {module = "transformer.h.1.mlp.c_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x256xf32>) -> tensor<256x64xf32>
    %34 = nn.bias_grad %input_grad {module = "transformer.h.1.mlp.c_proj", offsets = array<i64: -1>} : tensor<?x?x64xf32> -> tensor<64xf32>
    fsdp.grad "transformer.h.1.mlp.c_proj.weight", %33 : tensor<256x64xf32>
    fsdp.grad "transformer.h.1.mlp.c_proj.bias", %34 : tensor<64xf32>
    %35 = nn.gelu_grad %32, %22 {module = "transformer.h.1.mlp.act", offsets = array<i64: 2464000>} : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    %36 = nn.linear_grad_input in_out %35, %transformer.h.1.mlp.c_fc.weight {module = "transformer.h.1.mlp.c_fc", offsets = array<i64: 2447616>} : (tensor<?x?x256xf32>, tensor<64x256xf32>) -> tensor<?x?x64xf32>
    %37 = nn.linear_grad_weight in_out %35, %21 {module = "transformer.h.1.mlp.c_fc", offsets = array<i64: -1>} : (tensor<?x?x256xf32>, tensor<?x?x64xf32>) -> tensor<64x256xf32>
    %38 = nn.bias_grad %35 {module = "transformer.h.1.mlp.c_fc", offsets = array<i64: -1>} : tensor<?x?x256xf32> -> tensor<256xf32>
    fsdp.grad "transformer.h.1.mlp.c_fc.weight", %37 : tensor<64x256xf32>
    fsdp.grad "transformer.h.1.mlp.c_fc.bias", %38 : tensor<256xf32>
    %input_grad_0, %weight_grad_1, %bias_grad_2 = nn.layer_norm_grad %36, %20, %transformer.h.1.ln_2.weight {eps = 1.000000e-05 : f64, module = "transformer.h.1.ln_2", offsets = array<i64: 2451712, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    %39 = nn.add %input_grad, %input_grad_0 {module = "transformer.h.1.ln_2", offsets = array<i64: 2459904>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "transformer.h.1.ln_2.weight", %weight_grad_1 : tensor<64xf32>
    fsdp.grad "transformer.h.1.ln_2.bias", %bias_grad_2 : tensor<64xf32>
    %40 = nn.linear_grad_input in_out %39, %transformer.h.1.attn.c_proj.weight {module = "transformer.h.1.attn.c_proj", offsets = array<i64: 2447616>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %41 = nn.linear_grad_weight in_out %39, %18 {module = "transformer.h.1.attn.c_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    %42 = nn.bias_grad %39 {module = "transformer.h.1.attn.c_proj", offsets = array<i64: -1>} : tensor<?x?x64xf32> -> tensor<64xf32>
    fsdp.grad "transformer.h.1.attn.c_proj.weight", %41 : tensor<64x64xf32>
    fsdp.grad "transformer.h.1.attn.c_proj.bias", %42 : tensor<64xf32>
    %query_grad, %key_grad, %value_grad = nn.causal_attention_grad %40, %17#0, %17#1, %17#2, %18 {module = "transformer.h.1.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64, offsets = array<i64: 2464000, 2468096, 2472192>, scratch_offset = 2451712 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>)
    %43 = nn.concat %query_grad, %key_grad, %value_grad {module = "transformer.h.1.attn", offsets = array<i64: 2447616>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x192xf32>
    %44 = nn.linear_grad_input in_out %43, %transformer.h.1.attn.c_attn.weight {module = "transformer.h.1.attn.c_attn", offsets = array<i64: 2464000>} : (tensor<?x?x192xf32>, tensor<64x192xf32>) -> tensor<?x?x64xf32>
    %45 = nn.linear_grad_weight in_out %43, %15 {module = "transformer.h.1.attn.c_attn", offsets = array<i64: -1>} : (tensor<?x?x192xf32>, tensor<?x?x64xf32>) -> tensor<64x192xf32>
    %46 = nn.bias_grad %43 {module = "transformer.h.1.attn.c_attn", offsets = array<i64: -1>} : tensor<?x?x192xf32> -> tensor<192xf32>
    fsdp.grad "transformer.h.1.attn.c_attn.weight", %45 : tensor<64x192xf32>
    fsdp.grad "transformer.h.1.attn.c_attn.bias", %46 : tensor<192xf32>
    %input_grad_3, %weight_grad_4, %bias_grad_5 = nn.layer_norm_grad %44, %14, %transformer.h.1.ln_1.weight {eps = 1.000000e-05 : f64, module = "transformer.h.1.ln_1", offsets = array<i64: 2447616, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    %47 = nn.add %39, %input_grad_3 {module = "transformer.h.1.ln_1", offsets = array<i64: 3020288>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "transformer.h.1.ln_1.weight", %weight_grad_4 : tensor<64xf32>
    fsdp.grad "transformer.h.1.ln_1.bias", %bias_grad_5 : tensor<64xf32>
    %48 = fsdp.reduce_scatter @block1
    %49 = fsdp.all_reduce @block1
    %50 = nn.linear_grad_input in_out %47, %transformer.h.0.mlp.c_proj.weight {module = "transformer.h.0.mlp.c_proj", offsets = array<i64: 2971136>} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
    fsdp.alloc grads @block0 {offset = 2447616 : i64}
    %51 = nn.linear_grad_weight in_out %47, %12 {module = "transformer.h.0.mlp.c_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x256xf32>) -> tensor<256x64xf32>
    %52 = nn.bias_grad %47 {module = "transformer.h.0.mlp.c_proj", offsets = array<i64: -1>} : tensor<?x?x64xf32> -> tensor<64xf32>
    fsdp.grad "transformer.h.0.mlp.c_proj.weight", %51 : tensor<256x64xf32>
    fsdp.grad "transformer.h.0.mlp.c_proj.bias", %52 : tensor<64xf32>
    %53 = nn.gelu_grad %50, %11 {module = "transformer.h.0.mlp.act", offsets = array<i64: 2954752>} : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    %54 = nn.linear_grad_input in_out %53, %transformer.h.0.mlp.c_fc.weight {module = "transformer.h.0.mlp.c_fc", offsets = array<i64: 2938368>} : (tensor<?x?x256xf32>, tensor<64x256xf32>) -> tensor<?x?x64xf32>
    %55 = nn.linear_grad_weight in_out %53, %10 {module = "transformer.h.0.mlp.c_fc", offsets = array<i64: -1>} : (tensor<?x?x256xf32>, tensor<?x?x64xf32>) -> tensor<64x256xf32>
    %56 = nn.bias_grad %53 {module = "transformer.h.0.mlp.c_fc", offsets = array<i64: -1>} : tensor<?x?x256xf32> -> tensor<256xf32>
    fsdp.grad "transformer.h.0.mlp.c_fc.weight", %55 : tensor<64x256xf32>
    fsdp.grad "transformer.h.0.mlp.c_fc.bias", %56 : tensor<256xf32>
    %input_grad_6, %weight_grad_7, %bias_grad_8 = nn.layer_norm_grad %54, %9, %transformer.h.0.ln_2.weight {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_2", offsets = array<i64: 2942464, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    %57 = nn.add %47, %input_grad_6 {module = "transformer.h.0.ln_2", offsets = array<i64: 2950656>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "transformer.h.0.ln_2.weight", %weight_grad_7 : tensor<64xf32>
    fsdp.grad "transformer.h.0.ln_2.bias", %bias_grad_8 : tensor<64xf32>
    %58 = nn.linear_grad_input in_out %57, %transformer.h.0.attn.c_proj.weight {module = "transformer.h.0.attn.c_proj", offsets = array<i64: 2938368>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %59 = nn.linear_grad_weight in_out %57, %7 {module = "transformer.h.0.attn.c_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    %60 = nn.bias_grad %57 {module = "transformer.h.0.attn.c_proj", offsets = array<i64: -1>} : tensor<?x?x64xf32> -> tensor<64xf32>
    fsdp.grad "transformer.h.0.attn.c_proj.weight", %59 : tensor<64x64xf32>
    fsdp.grad "transformer.h.0.attn.c_proj.bias", %60 : tensor<64xf32>
    %query_grad_9, %key_grad_10, %value_grad_11 = nn.causal_attention_grad %58, %6#0, %6#1, %6#2, %7 {module = "transformer.h.0.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64, offsets = array<i64: 2954752, 2958848, 2962944>, scratch_offset = 2942464 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>)
    %61 = nn.concat %query_grad_9, %key_grad_10, %value_grad_11 {module = "transformer.h.0.attn", offsets = array<i64: 2938368>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x192xf32>
    %62 = nn.linear_grad_input in_out %61, %transformer.h.0.attn.c_attn.weight {module = "transformer.h.0.attn.c_attn", offsets = array<i64: 2954752>} : (tensor<?x?x192xf32>, tensor<64x192xf32>) -> tensor<?x?x64xf32>
    %63 = nn.linear_grad_weight in_out %61, %4 {module = "transformer.h.0.attn.c_attn", offsets = array<i64: -1>} : (tensor<?x?x192xf32>, tensor<?x?x64xf32>) -> tensor<64x192xf32>
    %64 = nn.bias_grad %61 {module = "transformer.h.0.attn.c_attn", offsets = array<i64: -1>} : tensor<?x?x192xf32> -> tensor<192xf32>
    fsdp.grad "transformer.h.0.attn.c_attn.weight", %63 : tensor<64x192xf32>
    fsdp.grad "transformer.h.0.attn.c_attn.bias", %64 : tensor<192xf32>
    %input_grad_12, %weight_grad_13, %bias_grad_14 = nn.layer_norm_grad %62, %3, %transformer.h.0.ln_1.weight {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1", offsets = array<i64: 2938368, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    %65 = nn.add %57, %input_grad_12 {module = "transformer.h.0.ln_1", offsets = array<i64: 2942464>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "transformer.h.0.ln_1.weight", %weight_grad_13 : tensor<64xf32>
    fsdp.grad "transformer.h.0.ln_1.bias", %bias_grad_14 : tensor<64xf32>
    fsdp.wait %48
    fsdp.wait %49
    fsdp.free grads @block1
    %66 = fsdp.reduce_scatter @block0
    %67 = fsdp.all_reduce @block0
    %68 = nn.embedding_grad %65, %0 {module = "transformer.wpe", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<128x64xf32>
    fsdp.grad "transformer.wpe.weight", %68 : tensor<128x64xf32>
    %69 = nn.embedding_grad %65, %tokens {module = "transformer.wte", offsets = array<i64: 2247680>} : (tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<503x64xf32>
    %70 = nn.add %31, %69 {module = "transformer.wte", offsets = array<i64: -1>} : (tensor<503x64xf32>, tensor<503x64xf32>) -> tensor<503x64xf32>
    fsdp.grad "transformer.wte.weight", %70 : tensor<503x64xf32>
    fsdp.wait %66
    fsdp.wait %67
    fsdp.free grads @block0
    %71 = fsdp.reduce_scatter @root
    %72 = fsdp.all_reduce @root
    fsdp.wait %71
    fsdp.wait %72
    fsdp.free grads @root
    %73 = fsdp.grad_norm
    fsdp.wait %73
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.optimizer_step @block1
    fsdp.return %28 : tensor<f32>
  }
}
