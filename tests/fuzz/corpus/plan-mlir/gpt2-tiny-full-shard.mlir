module {
  fsdp.unit @root {exp_avg_offset = 162048 : i64, exp_avg_sq_offset = 243072 : i64, grad_shard_offset = 81024 : i64, index = 0 : i64, module = "", numel = 40512 : i64, offsets = array<i64: 0, 32192, 40384, 40448>, padded_numel = 40512 : i64, params = ["transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"], shard_size = 2 : i64, shard_offset = 0 : i64, sizes = array<i64: 32192, 8192, 64, 64>}
  fsdp.unit @block0 {exp_avg_offset = 524032 : i64, exp_avg_sq_offset = 624000 : i64, grad_shard_offset = 424064 : i64, index = 1 : i64, module = "transformer.h.0", numel = 49984 : i64, offsets = array<i64: 0, 64, 128, 12416, 12608, 16704, 16768, 16832, 16896, 33280, 33536, 49920>, padded_numel = 49984 : i64, params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias", "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.weight", "transformer.h.0.attn.c_proj.bias", "transformer.h.0.ln_2.weight", "transformer.h.0.ln_2.bias", "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_fc.bias", "transformer.h.0.mlp.c_proj.weight", "transformer.h.0.mlp.c_proj.bias"], shard_size = 2 : i64, shard_offset = 324096 : i64, sizes = array<i64: 64, 64, 12288, 192, 4096, 64, 64, 64, 16384, 256, 16384, 64>}
  fsdp.unit @block1 {exp_avg_offset = 923904 : i64, exp_avg_sq_offset = 1023872 : i64, grad_shard_offset = 823936 : i64, index = 2 : i64, module = "transformer.h.1", numel = 49984 : i64, offsets = array<i64: 0, 64, 128, 12416, 12608, 16704, 16768, 16832, 16896, 33280, 33536, 49920>, padded_numel = 49984 : i64, params = ["transformer.h.1.ln_1.weight", "transformer.h.1.ln_1.bias", "transformer.h.1.attn.c_attn.weight", "transformer.h.1.attn.c_attn.bias", "transformer.h.1.attn.c_proj.weight", "transformer.h.1.attn.c_proj.bias", "transformer.h.1.ln_2.weight", "transformer.h.1.ln_2.bias", "transformer.h.1.mlp.c_fc.weight", "transformer.h.1.mlp.c_fc.bias", "transformer.h.1.mlp.c_proj.weight", "transformer.h.1.mlp.c_proj.bias"], shard_size = 2 : i64, shard_offset = 723968 : i64, sizes = array<i64: 64, 64, 12288, 192, 4096, 64, 64, 64, 16384, 256, 16384, 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {arena_bytes = 2166276 : i64, backward_prefetch = #fsdp<backward_prefetch pre>, block_prefix = "transformer.h", forward_prefetch = 1 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 128 : i64, memory = #fsdp.memory<peak_bytes = 2166276, live_peak_bytes = 2166276, params_bytes = 280960, grads_bytes = 280960, optimizer_bytes = 561920, unsharded_bytes = 761856, activations_bytes = 280580, fragmentation_bytes = 0>, micro_batch = 1 : i64, model = "gpt2-tiny", model_type = "gpt2", num_blocks = 2 : i64, param_dtype = #fsdp<dtype f32>, predicted_micro_step_s = 6.1893959999999976E-4 : f64, predicted_optimizer_s = 2.4076959999999982E-4 : f64, reduce_dtype = #fsdp<dtype f32>, seq_len = 16 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy full_shard>, targets_offset = 1698048 : i64, tokens_offset = 2166016 : i64, world_size = 2 : i64} {
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
    %0 = nn.position_ids %tokens {module = "transformer.wpe", offsets = array<i64: 2166144>} : tensor<?x?xi64> -> tensor<?x?xi64>
    %1 = fsdp.all_gather @root {offset = 1523712 : i64}
    fsdp.wait %1
    %2 = fsdp.all_gather @block0 {offset = 1123840 : i64}
    %3 = nn.embedding %tokens, %transformer.wte.weight {module = "transformer.wte", offsets = array<i64: 1323776>} : (tensor<?x?xi64>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    %4 = nn.embedding %0, %transformer.wpe.weight {module = "transformer.wpe", offsets = array<i64: 1327872>} : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
    %5 = nn.add %3, %4 {module = "transformer", offsets = array<i64: 2096384>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.wait %2
    %6 = fsdp.all_gather @block1 {offset = 1323776 : i64}
    %7 = nn.layer_norm %5, %transformer.h.0.ln_1.weight, %transformer.h.0.ln_1.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1", offsets = array<i64: 2100480>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %8 = nn.linear in_out %7, %transformer.h.0.attn.c_attn.weight, %transformer.h.0.attn.c_attn.bias {module = "transformer.h.0.attn.c_attn", offsets = array<i64: 1685760>} : (tensor<?x?x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
    %9:3 = nn.split %8 {module = "transformer.h.0.attn", offsets = array<i64: 2104576, 2108672, 2112768>} : tensor<?x?x192xf32> -> tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
    %10 = nn.causal_attention %9#0, %9#1, %9#2 {module = "transformer.h.0.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64, offsets = array<i64: 2116864>, scratch_offset = 1685760 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %11 = nn.linear in_out %10, %transformer.h.0.attn.c_proj.weight, %transformer.h.0.attn.c_proj.bias {module = "transformer.h.0.attn.c_proj", offsets = array<i64: 1685760>} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %12 = nn.add %5, %11 {module = "transformer.h.0", offsets = array<i64: 2120960>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %13 = nn.layer_norm %12, %transformer.h.0.ln_2.weight, %transformer.h.0.ln_2.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_2", offsets = array<i64: 2125056>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %14 = nn.linear in_out %13, %transformer.h.0.mlp.c_fc.weight, %transformer.h.0.mlp.c_fc.bias {module = "transformer.h.0.mlp.c_fc", offsets = array<i64: 2014464>} : (tensor<?x?x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    %15 = nn.gelu %14 {module = "transformer.h.0.mlp.act", offsets = array<i64: 2030848>} : tensor<?x?x256xf32> -> tensor<?x?x256xf32>
    %16 = nn.linear in_out %15, %transformer.h.0.mlp.c_proj.weight, %transformer.h.0.mlp.c_proj.bias {module = "transformer.h.0.mlp.c_proj", offsets = array<i64: 1685760>} : (tensor<?x?x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    fsdp.free params @block0
    %17 = nn.add %12, %16 {module = "transformer.h.0", offsets = array<i64: 2129152>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.wait %6
    %18 = nn.layer_norm %17, %transformer.h.1.ln_1.weight, %transformer.h.1.ln_1.bias {eps = 1.000000e-05 : f64, module = "transformer.h.1.ln_1", offsets = array<i64: 2133248>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %19 = nn.linear in_out %18, %transformer.h.1.attn.c_attn.weight, %transformer.h.1.attn.c_attn.bias {module = "transformer.h.1.attn.c_attn", offsets = array<i64: 1123840>} : (tensor<?x?x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
    %20:3 = nn.split %19 {module = "transformer.h.1.attn", offsets = array<i64: 2137344, 2141440, 2145536>} : tensor<?x?x192xf32> -> tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
    %21 = nn.causal_attention %20#0, %20#1, %20#2 {module = "transformer.h.1.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64, offsets = array<i64: 2149632>, scratch_offset = 1123840 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %22 = nn.linear in_out %21, %transformer.h.1.attn.c_proj.weight, %transformer.h.1.attn.c_proj.bias {module = "transformer.h.1.attn.c_proj", offsets = array<i64: 1123840>} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %23 = nn.add %17, %22 {module = "transformer.h.1", offsets = array<i64: 2153728>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %24 = nn.layer_norm %23, %transformer.h.1.ln_2.weight, %transformer.h.1.ln_2.bias {eps = 1.000000e-05 : f64, module = "transformer.h.1.ln_2", offsets = array<i64: 2157824>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %25 = nn.linear in_out %24, %transformer.h.1.mlp.c_fc.weight, %transformer.h.1.mlp.c_fc.bias {module = "transformer.h.1.mlp.c_fc", offsets = array<i64: 2047232>} : (tensor<?x?x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    %26 = nn.gelu %25 {module = "transformer.h.1.mlp.act", offsets = array<i64: 2063616>} : tensor<?x?x256xf32> -> tensor<?x?x256xf32>
    %27 = nn.linear in_out %26, %transformer.h.1.mlp.c_proj.weight, %transformer.h.1.mlp.c_proj.bias {module = "transformer.h.1.mlp.c_proj", offsets = array<i64: 1123840>} : (tensor<?x?x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    fsdp.free params @block1
    %28 = nn.add %23, %27 {module = "transformer.h.1", offsets = array<i64: 1355968>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %29 = nn.layer_norm %28, %transformer.ln_f.weight, %transformer.ln_f.bias {eps = 1.000000e-05 : f64, module = "transformer.ln_f", offsets = array<i64: 1360064>} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %30 = nn.linear out_in %29, %transformer.wte.weight {module = "lm_head", offsets = array<i64: 1123840>} : (tensor<?x?x64xf32>, tensor<503x64xf32>) -> tensor<?x?x503xf32>
    %31 = nn.cross_entropy %30, %targets {offsets = array<i64: 2166272>} : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<f32>
    %32 = nn.cross_entropy_grad %30, %targets {offsets = array<i64: 1323776>} : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<?x?x503xf32>
    %33 = fsdp.all_gather @block1 {offset = 1123840 : i64}
    %34 = nn.linear_grad_input out_in %32, %transformer.wte.weight {module = "lm_head", offsets = array<i64: 1364160>} : (tensor<?x?x503xf32>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    %35 = nn.linear_grad_weight out_in %32, %29 {module = "lm_head", offsets = array<i64: 1885696>} : (tensor<?x?x503xf32>, tensor<?x?x64xf32>) -> tensor<503x64xf32>
    fsdp.alloc grads @root {offset = 1723648 : i64}
    %input_grad, %weight_grad, %bias_grad = nn.layer_norm_grad %34, %28, %transformer.ln_f.weight {eps = 1.000000e-05 : f64, module = "transformer.ln_f", offsets = array<i64: 2161920, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    fsdp.free params @root
    fsdp.grad "transformer.ln_f.weight", %weight_grad : tensor<64xf32>
    fsdp.grad "transformer.ln_f.bias", %bias_grad : tensor<64xf32>
    fsdp.wait %33
    %36 = fsdp.all_gather @block0 {offset = 1323776 : i64}
    %37 = nn.linear_grad_input in_out %input_grad, %transformer.h.1.mlp.c_proj.weight {module = "transformer.h.1.mlp.c_proj", offsets = array<i64: 2080000>} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
    fsdp.alloc grads @block1 {offset = 1523712 : i64}
    %38 = nn.linear_grad_weight in_out %input_grad, %26 {module = "transformer.h.1.mlp.c_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x256xf32>) -> tensor<256x64xf32>
    %39 = nn.bias_grad %input_grad {module = "transformer.h.1.mlp.c_proj", offsets = array<i64: -1>} : tensor<?x?x64xf32> -> tensor<64xf32>
    fsdp.grad "transformer.h.1.mlp.c_proj.weight", %38 : tensor<256x64xf32>
    fsdp.grad "transformer.h.1.mlp.c_proj.bias", %39 : tensor<64xf32>
    %40 = nn.gelu_grad %37, %25 {module = "transformer.h.1.mlp.act", offsets = array<i64: 2063616>} : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    %41 = nn.linear_grad_input in_out %40, %transformer.h.1.mlp.c_fc.weight {module = "transformer.h.1.mlp.c_fc", offsets = array<i64: 2047232>} : (tensor<?x?x256xf32>, tensor<64x256xf32>) -> tensor<?x?x64xf32>
    %42 = nn.linear_grad_weight in_out %40, %24 {module = "transformer.h.1.mlp.c_fc", offsets = array<i64: -1>} : (tensor<?x?x256xf32>, tensor<?x?x64xf32>) -> tensor<64x256xf32>
    %43 = nn.bias_grad %40 {module = "transformer.h.1.mlp.c_fc", offsets = array<i64: -1>} : tensor<?x?x256xf32> -> tensor<256xf32>
    fsdp.grad "transformer.h.1.mlp.c_fc.weight", %42 : tensor<64x256xf32>
    fsdp.grad "transformer.h.1.mlp.c_fc.bias", %43 : tensor<256xf32>
    %input_grad_0, %weight_grad_1, %bias_grad_2 = nn.layer_norm_grad %41, %23, %transformer.h.1.ln_2.weight {eps = 1.000000e-05 : f64, module = "transformer.h.1.ln_2", offsets = array<i64: 2051328, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    %44 = nn.add %input_grad, %input_grad_0 {module = "transformer.h.1.ln_2", offsets = array<i64: 2059520>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "transformer.h.1.ln_2.weight", %weight_grad_1 : tensor<64xf32>
    fsdp.grad "transformer.h.1.ln_2.bias", %bias_grad_2 : tensor<64xf32>
    %45 = nn.linear_grad_input in_out %44, %transformer.h.1.attn.c_proj.weight {module = "transformer.h.1.attn.c_proj", offsets = array<i64: 2047232>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %46 = nn.linear_grad_weight in_out %44, %21 {module = "transformer.h.1.attn.c_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    %47 = nn.bias_grad %44 {module = "transformer.h.1.attn.c_proj", offsets = array<i64: -1>} : tensor<?x?x64xf32> -> tensor<64xf32>
    fsdp.grad "transformer.h.1.attn.c_proj.weight", %46 : tensor<64x64xf32>
    fsdp.grad "transformer.h.1.attn.c_proj.bias", %47 : tensor<64xf32>
    %query_grad, %key_grad, %value_grad = nn.causal_attention_grad %45, %20#0, %20#1, %20#2, %21 {module = "transformer.h.1.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64, offsets = array<i64: 2063616, 2067712, 2071808>, scratch_offset = 2051328 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>)
    %48 = nn.concat %query_grad, %key_grad, %value_grad {module = "transformer.h.1.attn", offsets = array<i64: 2047232>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x192xf32>
    %49 = nn.linear_grad_input in_out %48, %transformer.h.1.attn.c_attn.weight {module = "transformer.h.1.attn.c_attn", offsets = array<i64: 2063616>} : (tensor<?x?x192xf32>, tensor<64x192xf32>) -> tensor<?x?x64xf32>
    %50 = nn.linear_grad_weight in_out %48, %18 {module = "transformer.h.1.attn.c_attn", offsets = array<i64: -1>} : (tensor<?x?x192xf32>, tensor<?x?x64xf32>) -> tensor<64x192xf32>
    %51 = nn.bias_grad %48 {module = "transformer.h.1.attn.c_attn", offsets = array<i64: -1>} : tensor<?x?x192xf32> -> tensor<192xf32>
    fsdp.grad "transformer.h.1.attn.c_attn.weight", %50 : tensor<64x192xf32>
    fsdp.grad "transformer.h.1.attn.c_attn.bias", %51 : tensor<192xf32>
    %input_grad_3, %weight_grad_4, %bias_grad_5 = nn.layer_norm_grad %49, %17, %transformer.h.1.ln_1.weight {eps = 1.000000e-05 : f64, module = "transformer.h.1.ln_1", offsets = array<i64: 2047232, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    fsdp.free params @block1
    %52 = nn.add %44, %input_grad_3 {module = "transformer.h.1.ln_1", offsets = array<i64: 2063616>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "transformer.h.1.ln_1.weight", %weight_grad_4 : tensor<64xf32>
    fsdp.grad "transformer.h.1.ln_1.bias", %bias_grad_5 : tensor<64xf32>
    %53 = fsdp.reduce_scatter @block1
    fsdp.wait %36
    %54 = nn.linear_grad_input in_out %52, %transformer.h.0.mlp.c_proj.weight {module = "transformer.h.0.mlp.c_proj", offsets = array<i64: 2047232>} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
    fsdp.alloc grads @block0 {offset = 1123840 : i64}
    %55 = nn.linear_grad_weight in_out %52, %15 {module = "transformer.h.0.mlp.c_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x256xf32>) -> tensor<256x64xf32>
    %56 = nn.bias_grad %52 {module = "transformer.h.0.mlp.c_proj", offsets = array<i64: -1>} : tensor<?x?x64xf32> -> tensor<64xf32>
    fsdp.grad "transformer.h.0.mlp.c_proj.weight", %55 : tensor<256x64xf32>
    fsdp.grad "transformer.h.0.mlp.c_proj.bias", %56 : tensor<64xf32>
    %57 = nn.gelu_grad %54, %14 {module = "transformer.h.0.mlp.act", offsets = array<i64: 2030848>} : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    %58 = nn.linear_grad_input in_out %57, %transformer.h.0.mlp.c_fc.weight {module = "transformer.h.0.mlp.c_fc", offsets = array<i64: 2014464>} : (tensor<?x?x256xf32>, tensor<64x256xf32>) -> tensor<?x?x64xf32>
    %59 = nn.linear_grad_weight in_out %57, %13 {module = "transformer.h.0.mlp.c_fc", offsets = array<i64: -1>} : (tensor<?x?x256xf32>, tensor<?x?x64xf32>) -> tensor<64x256xf32>
    %60 = nn.bias_grad %57 {module = "transformer.h.0.mlp.c_fc", offsets = array<i64: -1>} : tensor<?x?x256xf32> -> tensor<256xf32>
    fsdp.grad "transformer.h.0.mlp.c_fc.weight", %59 : tensor<64x256xf32>
    fsdp.grad "transformer.h.0.mlp.c_fc.bias", %60 : tensor<256xf32>
    %input_grad_6, %weight_grad_7, %bias_grad_8 = nn.layer_norm_grad %58, %12, %transformer.h.0.ln_2.weight {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_2", offsets = array<i64: 2018560, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    %61 = nn.add %52, %input_grad_6 {module = "transformer.h.0.ln_2", offsets = array<i64: 2026752>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "transformer.h.0.ln_2.weight", %weight_grad_7 : tensor<64xf32>
    fsdp.grad "transformer.h.0.ln_2.bias", %bias_grad_8 : tensor<64xf32>
    %62 = nn.linear_grad_input in_out %61, %transformer.h.0.attn.c_proj.weight {module = "transformer.h.0.attn.c_proj", offsets = array<i64: 2014464>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %63 = nn.linear_grad_weight in_out %61, %10 {module = "transformer.h.0.attn.c_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    %64 = nn.bias_grad %61 {module = "transformer.h.0.attn.c_proj", offsets = array<i64: -1>} : tensor<?x?x64xf32> -> tensor<64xf32>
    fsdp.grad "transformer.h.0.attn.c_proj.weight", %63 : tensor<64x64xf32>
    fsdp.grad "transformer.h.0.attn.c_proj.bias", %64 : tensor<64xf32>
    %query_grad_9, %key_grad_10, %value_grad_11 = nn.causal_attention_grad %62, %9#0, %9#1, %9#2, %10 {module = "transformer.h.0.attn", num_heads = 4 : i64, num_kv_heads = 4 : i64, offsets = array<i64: 2030848, 2034944, 2039040>, scratch_offset = 2018560 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>)
    %65 = nn.concat %query_grad_9, %key_grad_10, %value_grad_11 {module = "transformer.h.0.attn", offsets = array<i64: 2014464>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x192xf32>
    %66 = nn.linear_grad_input in_out %65, %transformer.h.0.attn.c_attn.weight {module = "transformer.h.0.attn.c_attn", offsets = array<i64: 2030848>} : (tensor<?x?x192xf32>, tensor<64x192xf32>) -> tensor<?x?x64xf32>
    %67 = nn.linear_grad_weight in_out %65, %7 {module = "transformer.h.0.attn.c_attn", offsets = array<i64: -1>} : (tensor<?x?x192xf32>, tensor<?x?x64xf32>) -> tensor<64x192xf32>
    %68 = nn.bias_grad %65 {module = "transformer.h.0.attn.c_attn", offsets = array<i64: -1>} : tensor<?x?x192xf32> -> tensor<192xf32>
    fsdp.grad "transformer.h.0.attn.c_attn.weight", %67 : tensor<64x192xf32>
    fsdp.grad "transformer.h.0.attn.c_attn.bias", %68 : tensor<192xf32>
    %input_grad_12, %weight_grad_13, %bias_grad_14 = nn.layer_norm_grad %66, %5, %transformer.h.0.ln_1.weight {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1", offsets = array<i64: 2014464, -1, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    fsdp.free params @block0
    %69 = nn.add %61, %input_grad_12 {module = "transformer.h.0.ln_1", offsets = array<i64: 1452544>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "transformer.h.0.ln_1.weight", %weight_grad_13 : tensor<64xf32>
    fsdp.grad "transformer.h.0.ln_1.bias", %bias_grad_14 : tensor<64xf32>
    fsdp.wait %53
    fsdp.free grads @block1
    %70 = fsdp.reduce_scatter @block0
    %71 = nn.embedding_grad %69, %0 {module = "transformer.wpe", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<128x64xf32>
    fsdp.grad "transformer.wpe.weight", %71 : tensor<128x64xf32>
    %72 = nn.embedding_grad %69, %tokens {module = "transformer.wte", offsets = array<i64: 1323776>} : (tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<503x64xf32>
    %73 = nn.add %35, %72 {module = "transformer.wte", offsets = array<i64: -1>} : (tensor<503x64xf32>, tensor<503x64xf32>) -> tensor<503x64xf32>
    fsdp.grad "transformer.wte.weight", %73 : tensor<503x64xf32>
    fsdp.wait %70
    fsdp.free grads @block0
    %74 = fsdp.reduce_scatter @root
    fsdp.wait %74
    fsdp.free grads @root
    %75 = fsdp.grad_norm
    fsdp.wait %75
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.optimizer_step @block1
    fsdp.return %31 : tensor<f32>
  }
}
