module {
  fsdp.unit @root {exp_avg_offset = 257792 : i64, exp_avg_sq_offset = 386688 : i64, grad_shard_offset = 128896 : i64, index = 0 : i64, module = "", numel = 64448 : i64, offsets = array<i64: 0, 32192, 32256>, padded_numel = 64448 : i64, params = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"], shard_size = 2 : i64, shard_offset = 0 : i64, sizes = array<i64: 32192, 64, 32192>}
  fsdp.unit @block0 {exp_avg_offset = 700416 : i64, exp_avg_sq_offset = 792832 : i64, grad_shard_offset = 608000 : i64, index = 1 : i64, module = "model.layers.0", numel = 46208 : i64, offsets = array<i64: 0, 4096, 6144, 8192, 12288, 23552, 34816, 46080, 46144>, padded_numel = 46208 : i64, params = ["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight"], shard_size = 2 : i64, shard_offset = 515584 : i64, sizes = array<i64: 4096, 2048, 2048, 4096, 11264, 11264, 11264, 64, 64>}
  fsdp.unit @block1 {exp_avg_offset = 1070080 : i64, exp_avg_sq_offset = 1162496 : i64, grad_shard_offset = 977664 : i64, index = 2 : i64, module = "model.layers.1", numel = 46208 : i64, offsets = array<i64: 0, 4096, 6144, 8192, 12288, 23552, 34816, 46080, 46144>, padded_numel = 46208 : i64, params = ["model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight", "model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight", "model.layers.1.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight"], shard_size = 2 : i64, shard_offset = 885248 : i64, sizes = array<i64: 4096, 2048, 2048, 4096, 11264, 11264, 11264, 64, 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {arena_bytes = 2269316 : i64, backward_prefetch = #fsdp<backward_prefetch pre>, block_prefix = "model.layers", forward_prefetch = 1 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 128 : i64, memory = #fsdp.memory<peak_bytes = 2269316, live_peak_bytes = 2218884, params_bytes = 313728, grads_bytes = 313728, optimizer_bytes = 627456, unsharded_bytes = 812288, activations_bytes = 151684, fragmentation_bytes = 50432>, micro_batch = 1 : i64, model = "llama-tiny", model_type = "llama", num_blocks = 2 : i64, param_dtype = #fsdp<dtype f32>, predicted_micro_step_s = 0.0013646280000000005 : f64, predicted_optimizer_s = 5.9071359999999986E-4 : f64, reduce_dtype = #fsdp<dtype f32>, seq_len = 16 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy hybrid_shard>, targets_offset = 1888512 : i64, tokens_offset = 2269184 : i64, world_size = 4 : i64} {
    %model.embed_tokens.weight = nn.param "model.embed_tokens.weight" : tensor<503x64xf32>
    %model.layers.0.self_attn.q_proj.weight = nn.param "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
    %model.layers.0.self_attn.k_proj.weight = nn.param "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
    %model.layers.0.self_attn.v_proj.weight = nn.param "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
    %model.layers.0.self_attn.o_proj.weight = nn.param "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
    %model.layers.0.mlp.gate_proj.weight = nn.param "model.layers.0.mlp.gate_proj.weight" : tensor<176x64xf32>
    %model.layers.0.mlp.up_proj.weight = nn.param "model.layers.0.mlp.up_proj.weight" : tensor<176x64xf32>
    %model.layers.0.mlp.down_proj.weight = nn.param "model.layers.0.mlp.down_proj.weight" : tensor<64x176xf32>
    %model.layers.0.input_layernorm.weight = nn.param "model.layers.0.input_layernorm.weight" : tensor<64xf32>
    %model.layers.0.post_attention_layernorm.weight = nn.param "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
    %model.layers.1.self_attn.q_proj.weight = nn.param "model.layers.1.self_attn.q_proj.weight" : tensor<64x64xf32>
    %model.layers.1.self_attn.k_proj.weight = nn.param "model.layers.1.self_attn.k_proj.weight" : tensor<32x64xf32>
    %model.layers.1.self_attn.v_proj.weight = nn.param "model.layers.1.self_attn.v_proj.weight" : tensor<32x64xf32>
    %model.layers.1.self_attn.o_proj.weight = nn.param "model.layers.1.self_attn.o_proj.weight" : tensor<64x64xf32>
    %model.layers.1.mlp.gate_proj.weight = nn.param "model.layers.1.mlp.gate_proj.weight" : tensor<176x64xf32>
    %model.layers.1.mlp.up_proj.weight = nn.param "model.layers.1.mlp.up_proj.weight" : tensor<176x64xf32>
    %model.layers.1.mlp.down_proj.weight = nn.param "model.layers.1.mlp.down_proj.weight" : tensor<64x176xf32>
    %model.layers.1.input_layernorm.weight = nn.param "model.layers.1.input_layernorm.weight" : tensor<64xf32>
    %model.layers.1.post_attention_layernorm.weight = nn.param "model.layers.1.post_attention_layernorm.weight" : tensor<64xf32>
    %model.norm.weight = nn.param "model.norm.weight" : tensor<64xf32>
    %lm_head.weight = nn.param "lm_head.weight" : tensor<503x64xf32>
    %0 = fsdp.all_gather @root {offset = 1254912 : i64}
    fsdp.wait %0
    %1 = fsdp.all_gather @block0 {offset = 1512704 : i64}
    %2 = nn.embedding %tokens, %model.embed_tokens.weight {module = "model.embed_tokens", offsets = array<i64: 2207744>} : (tensor<?x?xi64>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    fsdp.wait %1
    %3 = fsdp.all_gather @block1 {offset = 1697536 : i64}
    %4 = nn.rms_norm %2, %model.layers.0.input_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.0.input_layernorm", offsets = array<i64: 2211840>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %5 = nn.linear out_in %4, %model.layers.0.self_attn.q_proj.weight {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: 1882368>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %6 = nn.linear out_in %4, %model.layers.0.self_attn.k_proj.weight {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: 1886464>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %7 = nn.linear out_in %4, %model.layers.0.self_attn.v_proj.weight {module = "model.layers.0.self_attn.v_proj", offsets = array<i64: 2260992>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %8 = nn.rope %5 {module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 2215936>, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %9 = nn.rope %6 {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 2263040>, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %10 = nn.causal_attention %8, %9, %7 {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 2220032>, scratch_offset = 1882368 : i64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
    %11 = nn.linear out_in %10, %model.layers.0.self_attn.o_proj.weight {module = "model.layers.0.self_attn.o_proj", offsets = array<i64: 1882368>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %12 = nn.add %2, %11 {module = "model.layers.0", offsets = array<i64: 2224128>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %13 = nn.rms_norm %12, %model.layers.0.post_attention_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm", offsets = array<i64: 2228224>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %14 = nn.linear out_in %13, %model.layers.0.mlp.gate_proj.weight {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: 2140160>} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %15 = nn.linear out_in %13, %model.layers.0.mlp.up_proj.weight {module = "model.layers.0.mlp.up_proj", offsets = array<i64: 2151424>} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %16 = nn.silu_mul %14, %15 {module = "model.layers.0.mlp.act_fn", offsets = array<i64: 2162688>} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    %17 = nn.linear out_in %16, %model.layers.0.mlp.down_proj.weight {module = "model.layers.0.mlp.down_proj", offsets = array<i64: 1882368>} : (tensor<?x?x176xf32>, tensor<64x176xf32>) -> tensor<?x?x64xf32>
    fsdp.free params @block0
    %18 = nn.add %12, %17 {module = "model.layers.0", offsets = array<i64: 2232320>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.wait %3
    %19 = nn.rms_norm %18, %model.layers.1.input_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.1.input_layernorm", offsets = array<i64: 2236416>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %20 = nn.linear out_in %19, %model.layers.1.self_attn.q_proj.weight {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: 1512704>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %21 = nn.linear out_in %19, %model.layers.1.self_attn.k_proj.weight {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: 1516800>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %22 = nn.linear out_in %19, %model.layers.1.self_attn.v_proj.weight {module = "model.layers.1.self_attn.v_proj", offsets = array<i64: 2265088>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %23 = nn.rope %20 {module = "model.layers.1.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 2240512>, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %24 = nn.rope %21 {module = "model.layers.1.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 2267136>, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %25 = nn.causal_attention %23, %24, %22 {module = "model.layers.1.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 2244608>, scratch_offset = 1512704 : i64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
    %26 = nn.linear out_in %25, %model.layers.1.self_attn.o_proj.weight {module = "model.layers.1.self_attn.o_proj", offsets = array<i64: 1512704>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %27 = nn.add %18, %26 {module = "model.layers.1", offsets = array<i64: 2248704>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %28 = nn.rms_norm %27, %model.layers.1.post_attention_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.1.post_attention_layernorm", offsets = array<i64: 2252800>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %29 = nn.linear out_in %28, %model.layers.1.mlp.gate_proj.weight {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: 2173952>} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %30 = nn.linear out_in %28, %model.layers.1.mlp.up_proj.weight {module = "model.layers.1.mlp.up_proj", offsets = array<i64: 2185216>} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %31 = nn.silu_mul %29, %30 {module = "model.layers.1.mlp.act_fn", offsets = array<i64: 2196480>} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    %32 = nn.linear out_in %31, %model.layers.1.mlp.down_proj.weight {module = "model.layers.1.mlp.down_proj", offsets = array<i64: 1512704>} : (tensor<?x?x176xf32>, tensor<64x176xf32>) -> tensor<?x?x64xf32>
    fsdp.free params @block1
    %33 = nn.add %27, %32 {module = "model.layers.1", offsets = array<i64: 1987520>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %34 = nn.rms_norm %33, %model.norm.weight {eps = 1.000000e-05 : f64, module = "model.norm", offsets = array<i64: 1991616>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %35 = nn.linear out_in %34, %lm_head.weight {module = "lm_head", offsets = array<i64: 1512704>} : (tensor<?x?x64xf32>, tensor<503x64xf32>) -> tensor<?x?x503xf32>
    %36 = nn.cross_entropy %35, %targets {offsets = array<i64: 2269312>} : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<f32>
    %37 = nn.cross_entropy_grad %35, %targets {offsets = array<i64: 1955328>} : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<?x?x503xf32>
    %38 = fsdp.all_gather @block1 {offset = 1770496 : i64}
    %39 = nn.linear_grad_input out_in %37, %lm_head.weight {module = "lm_head", offsets = array<i64: 1995712>} : (tensor<?x?x503xf32>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    fsdp.alloc grads @root {offset = 1512704 : i64}
    %40 = nn.linear_grad_weight out_in %37, %34 {module = "lm_head", offsets = array<i64: -1>} : (tensor<?x?x503xf32>, tensor<?x?x64xf32>) -> tensor<503x64xf32>
    fsdp.grad "lm_head.weight", %40 : tensor<503x64xf32>
    %input_grad, %weight_grad = nn.rms_norm_grad %39, %33, %model.norm.weight {eps = 1.000000e-05 : f64, module = "model.norm", offsets = array<i64: 2256896, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    fsdp.free params @root
    fsdp.grad "model.norm.weight", %weight_grad : tensor<64xf32>
    fsdp.wait %38
    %41 = fsdp.all_gather @block0 {offset = 1254912 : i64}
    %42 = nn.linear_grad_input out_in %input_grad, %model.layers.1.mlp.down_proj.weight {module = "model.layers.1.mlp.down_proj", offsets = array<i64: 1439744>} : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
    fsdp.alloc grads @block1 {offset = 1955328 : i64}
    %43 = nn.linear_grad_weight out_in %input_grad, %31 {module = "model.layers.1.mlp.down_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x176xf32>) -> tensor<64x176xf32>
    fsdp.grad "model.layers.1.mlp.down_proj.weight", %43 : tensor<64x176xf32>
    %gate_grad, %up_grad = nn.silu_mul_grad %42, %29, %30 {module = "model.layers.1.mlp.act_fn", offsets = array<i64: 1451008, 1462272>} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> (tensor<?x?x176xf32>, tensor<?x?x176xf32>)
    %44 = nn.linear_grad_input out_in %up_grad, %model.layers.1.mlp.up_proj.weight {module = "model.layers.1.mlp.up_proj", offsets = array<i64: 1439744>} : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
    %45 = nn.linear_grad_weight out_in %up_grad, %28 {module = "model.layers.1.mlp.up_proj", offsets = array<i64: -1>} : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<176x64xf32>
    fsdp.grad "model.layers.1.mlp.up_proj.weight", %45 : tensor<176x64xf32>
    %46 = nn.linear_grad_input out_in %gate_grad, %model.layers.1.mlp.gate_proj.weight {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: 1443840>} : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
    %47 = nn.linear_grad_weight out_in %gate_grad, %28 {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: -1>} : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<176x64xf32>
    %48 = nn.add %44, %46 {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: 1447936>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.mlp.gate_proj.weight", %47 : tensor<176x64xf32>
    %input_grad_0, %weight_grad_1 = nn.rms_norm_grad %48, %27, %model.layers.1.post_attention_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.1.post_attention_layernorm", offsets = array<i64: 1439744, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    %49 = nn.add %input_grad, %input_grad_0 {module = "model.layers.1.post_attention_layernorm", offsets = array<i64: 1443840>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.post_attention_layernorm.weight", %weight_grad_1 : tensor<64xf32>
    %50 = nn.linear_grad_input out_in %49, %model.layers.1.self_attn.o_proj.weight {module = "model.layers.1.self_attn.o_proj", offsets = array<i64: 1439744>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %51 = nn.linear_grad_weight out_in %49, %25 {module = "model.layers.1.self_attn.o_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    fsdp.grad "model.layers.1.self_attn.o_proj.weight", %51 : tensor<64x64xf32>
    %query_grad, %key_grad, %value_grad = nn.causal_attention_grad %50, %23, %24, %22, %25 {module = "model.layers.1.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 1447936, 1452032, 1454080>, scratch_offset = 1456128 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
    %52 = nn.rope %key_grad {inverse, module = "model.layers.1.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 1456128>, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %53 = nn.rope %query_grad {inverse, module = "model.layers.1.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 1439744>, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %54 = nn.linear_grad_input out_in %value_grad, %model.layers.1.self_attn.v_proj.weight {module = "model.layers.1.self_attn.v_proj", offsets = array<i64: 1447936>} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    %55 = nn.linear_grad_weight out_in %value_grad, %19 {module = "model.layers.1.self_attn.v_proj", offsets = array<i64: -1>} : (tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> tensor<32x64xf32>
    fsdp.grad "model.layers.1.self_attn.v_proj.weight", %55 : tensor<32x64xf32>
    %56 = nn.linear_grad_input out_in %52, %model.layers.1.self_attn.k_proj.weight {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: 1452032>} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    %57 = nn.linear_grad_weight out_in %52, %19 {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: -1>} : (tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> tensor<32x64xf32>
    %58 = nn.add %54, %56 {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: 1456128>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.self_attn.k_proj.weight", %57 : tensor<32x64xf32>
    %59 = nn.linear_grad_input out_in %53, %model.layers.1.self_attn.q_proj.weight {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: 1447936>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %60 = nn.linear_grad_weight out_in %53, %19 {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    %61 = nn.add %58, %59 {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: 1439744>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.self_attn.q_proj.weight", %60 : tensor<64x64xf32>
    %input_grad_2, %weight_grad_3 = nn.rms_norm_grad %61, %18, %model.layers.1.input_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.1.input_layernorm", offsets = array<i64: 1447936, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    fsdp.free params @block1
    %62 = nn.add %49, %input_grad_2 {module = "model.layers.1.input_layernorm", offsets = array<i64: 1473536>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.input_layernorm.weight", %weight_grad_3 : tensor<64xf32>
    %63 = fsdp.reduce_scatter @block1
    %64 = fsdp.all_reduce @block1
    fsdp.wait %41
    %65 = nn.linear_grad_input out_in %62, %model.layers.0.mlp.down_proj.weight {module = "model.layers.0.mlp.down_proj", offsets = array<i64: 1439744>} : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
    fsdp.alloc grads @block0 {offset = 1770496 : i64}
    %66 = nn.linear_grad_weight out_in %62, %16 {module = "model.layers.0.mlp.down_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x176xf32>) -> tensor<64x176xf32>
    fsdp.grad "model.layers.0.mlp.down_proj.weight", %66 : tensor<64x176xf32>
    %gate_grad_4, %up_grad_5 = nn.silu_mul_grad %65, %14, %15 {module = "model.layers.0.mlp.act_fn", offsets = array<i64: 1451008, 1462272>} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> (tensor<?x?x176xf32>, tensor<?x?x176xf32>)
    %67 = nn.linear_grad_input out_in %up_grad_5, %model.layers.0.mlp.up_proj.weight {module = "model.layers.0.mlp.up_proj", offsets = array<i64: 1439744>} : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
    %68 = nn.linear_grad_weight out_in %up_grad_5, %13 {module = "model.layers.0.mlp.up_proj", offsets = array<i64: -1>} : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<176x64xf32>
    fsdp.grad "model.layers.0.mlp.up_proj.weight", %68 : tensor<176x64xf32>
    %69 = nn.linear_grad_input out_in %gate_grad_4, %model.layers.0.mlp.gate_proj.weight {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: 1443840>} : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
    %70 = nn.linear_grad_weight out_in %gate_grad_4, %13 {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: -1>} : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<176x64xf32>
    %71 = nn.add %67, %69 {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: 1447936>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.mlp.gate_proj.weight", %70 : tensor<176x64xf32>
    %input_grad_6, %weight_grad_7 = nn.rms_norm_grad %71, %12, %model.layers.0.post_attention_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm", offsets = array<i64: 1439744, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    %72 = nn.add %62, %input_grad_6 {module = "model.layers.0.post_attention_layernorm", offsets = array<i64: 1443840>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.post_attention_layernorm.weight", %weight_grad_7 : tensor<64xf32>
    %73 = nn.linear_grad_input out_in %72, %model.layers.0.self_attn.o_proj.weight {module = "model.layers.0.self_attn.o_proj", offsets = array<i64: 1439744>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %74 = nn.linear_grad_weight out_in %72, %10 {module = "model.layers.0.self_attn.o_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    fsdp.grad "model.layers.0.self_attn.o_proj.weight", %74 : tensor<64x64xf32>
    %query_grad_8, %key_grad_9, %value_grad_10 = nn.causal_attention_grad %73, %8, %9, %7, %10 {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 1447936, 1452032, 1454080>, scratch_offset = 1456128 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
    %75 = nn.rope %key_grad_9 {inverse, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 1456128>, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %76 = nn.rope %query_grad_8 {inverse, module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 1439744>, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %77 = nn.linear_grad_input out_in %value_grad_10, %model.layers.0.self_attn.v_proj.weight {module = "model.layers.0.self_attn.v_proj", offsets = array<i64: 1447936>} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    %78 = nn.linear_grad_weight out_in %value_grad_10, %4 {module = "model.layers.0.self_attn.v_proj", offsets = array<i64: -1>} : (tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> tensor<32x64xf32>
    fsdp.grad "model.layers.0.self_attn.v_proj.weight", %78 : tensor<32x64xf32>
    %79 = nn.linear_grad_input out_in %75, %model.layers.0.self_attn.k_proj.weight {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: 1452032>} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    %80 = nn.linear_grad_weight out_in %75, %4 {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: -1>} : (tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> tensor<32x64xf32>
    %81 = nn.add %77, %79 {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: 1456128>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.self_attn.k_proj.weight", %80 : tensor<32x64xf32>
    %82 = nn.linear_grad_input out_in %76, %model.layers.0.self_attn.q_proj.weight {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: 1447936>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %83 = nn.linear_grad_weight out_in %76, %4 {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    %84 = nn.add %81, %82 {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: 1439744>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.self_attn.q_proj.weight", %83 : tensor<64x64xf32>
    %input_grad_11, %weight_grad_12 = nn.rms_norm_grad %84, %2, %model.layers.0.input_layernorm.weight {eps = 1.000000e-05 : f64, module = "model.layers.0.input_layernorm", offsets = array<i64: 1447936, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    fsdp.free params @block0
    %85 = nn.add %72, %input_grad_11 {module = "model.layers.0.input_layernorm", offsets = array<i64: 1254912>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.input_layernorm.weight", %weight_grad_12 : tensor<64xf32>
    fsdp.wait %63
    fsdp.wait %64
    fsdp.free grads @block1
    %86 = fsdp.reduce_scatter @block0
    %87 = fsdp.all_reduce @block0
    %88 = nn.embedding_grad %85, %tokens {module = "model.embed_tokens", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<503x64xf32>
    fsdp.grad "model.embed_tokens.weight", %88 : tensor<503x64xf32>
    fsdp.wait %86
    fsdp.wait %87
    fsdp.free grads @block0
    %89 = fsdp.reduce_scatter @root
    %90 = fsdp.all_reduce @root
    fsdp.wait %89
    fsdp.wait %90
    fsdp.free grads @root
    %91 = fsdp.grad_norm
    fsdp.wait %91
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.optimizer_step @block1
    fsdp.return %36 : tensor<f32>
  }
}
