module {
  fsdp.unit @root {exp_avg_offset = 257792 : i64, exp_avg_sq_offset = 386688 : i64, grad_shard_offset = 128896 : i64, index = 0 : i64, module = "", numel = 64448 : i64, offsets = array<i64: 0, 32192, 32256>, padded_numel = 64448 : i64, params = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"], shard_size = 2 : i64, shard_offset = 0 : i64, sizes = array<i64: 32192, 64, 32192>}
  fsdp.unit @block0 {exp_avg_offset = 700416 : i64, exp_avg_sq_offset = 792832 : i64, grad_shard_offset = 608000 : i64, index = 1 : i64, module = "model.layers.0", numel = 46208 : i64, offsets = array<i64: 0, 4096, 6144, 8192, 12288, 23552, 34816, 46080, 46144>, padded_numel = 46208 : i64, params = ["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight"], shard_size = 2 : i64, shard_offset = 515584 : i64, sizes = array<i64: 4096, 2048, 2048, 4096, 11264, 11264, 11264, 64, 64>}
  fsdp.unit @block1 {exp_avg_offset = 1070080 : i64, exp_avg_sq_offset = 1162496 : i64, grad_shard_offset = 977664 : i64, index = 2 : i64, module = "model.layers.1", numel = 46208 : i64, offsets = array<i64: 0, 4096, 6144, 8192, 12288, 23552, 34816, 46080, 46144>, padded_numel = 46208 : i64, params = ["model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight", "model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight", "model.layers.1.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight"], shard_size = 2 : i64, shard_offset = 885248 : i64, sizes = array<i64: 4096, 2048, 2048, 4096, 11264, 11264, 11264, 64, 64>}
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {activation_checkpointing = #fsdp<checkpointing blocks>, arena_bytes = 2079364 : i64, backward_prefetch = #fsdp<backward_prefetch pre>, block_prefix = "model.layers", checkpointed_blocks = 2 : i64, forward_prefetch = 1 : i64, max_inflight_gathers = 2 : i64, max_seq_len = 128 : i64, memory = #fsdp.memory<peak_bytes = 2079364, live_peak_bytes = 2079364, params_bytes = 313728, grads_bytes = 313728, optimizer_bytes = 627456, unsharded_bytes = 764928, activations_bytes = 59524, fragmentation_bytes = 0>, micro_batch = 1 : i64, model = "llama-tiny", model_type = "llama", num_blocks = 2 : i64, param_dtype = #fsdp<dtype bf16>, predicted_micro_step_s = 0.0010931619999999993 : f64, predicted_optimizer_s = 2.6698400000000006E-4 : f64, reduce_dtype = #fsdp<dtype bf16>, seq_len = 16 : i64, shard_size = 2 : i64, strategy = #fsdp<strategy shard_grad_op>, targets_offset = 1415872 : i64, tokens_offset = 2079232 : i64, world_size = 2 : i64} {
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
    %0 = fsdp.all_gather @root in bf16 {offset = 1512704 : i64}
    fsdp.wait %0
    %1 = fsdp.all_gather @block0 in bf16 {offset = 1882368 : i64}
    %2 = fsdp.upcast %model.embed_tokens.weight {offsets = array<i64: 1254912>} : tensor<503x64xf32>
    %3 = nn.embedding %tokens, %2 {module = "model.embed_tokens", offsets = array<i64: 2042368>} : (tensor<?x?xi64>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    fsdp.wait %1
    %4 = fsdp.all_gather @block1 in bf16 {offset = 1697536 : i64}
    %5 = fsdp.upcast %model.layers.0.input_layernorm.weight {offsets = array<i64: 1254912>} : tensor<64xf32>
    %6 = nn.rms_norm %3, %5 {eps = 1.000000e-05 : f64, module = "model.layers.0.input_layernorm", offsets = array<i64: 1271296>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %7 = fsdp.upcast %model.layers.0.self_attn.q_proj.weight {offsets = array<i64: 1254912>} : tensor<64x64xf32>
    %8 = nn.linear out_in %6, %7 {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: 1275392>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %9 = fsdp.upcast %model.layers.0.self_attn.k_proj.weight {offsets = array<i64: 1254912>} : tensor<32x64xf32>
    %10 = nn.linear out_in %6, %9 {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: 1263104>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %11 = fsdp.upcast %model.layers.0.self_attn.v_proj.weight {offsets = array<i64: 1254912>} : tensor<32x64xf32>
    %12 = nn.linear out_in %6, %11 {module = "model.layers.0.self_attn.v_proj", offsets = array<i64: 1265152>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %13 = nn.rope %8 {module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 1254912>, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %14 = nn.rope %10 {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 1259008>, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %15 = nn.causal_attention %13, %14, %12 {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 1271296>, scratch_offset = 1261056 : i64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
    %16 = fsdp.upcast %model.layers.0.self_attn.o_proj.weight {offsets = array<i64: 1254912>} : tensor<64x64xf32>
    %17 = nn.linear out_in %15, %16 {module = "model.layers.0.self_attn.o_proj", offsets = array<i64: 1275392>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %18 = nn.add %3, %17 {module = "model.layers.0", offsets = array<i64: 1333760>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %19 = fsdp.upcast %model.layers.0.post_attention_layernorm.weight {offsets = array<i64: 1254912>} : tensor<64xf32>
    %20 = nn.rms_norm %18, %19 {eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm", offsets = array<i64: 1322496>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %21 = fsdp.upcast %model.layers.0.mlp.gate_proj.weight {offsets = array<i64: 1254912>} : tensor<176x64xf32>
    %22 = nn.linear out_in %20, %21 {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: 1299968>} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %23 = fsdp.upcast %model.layers.0.mlp.up_proj.weight {offsets = array<i64: 1254912>} : tensor<176x64xf32>
    %24 = nn.linear out_in %20, %23 {module = "model.layers.0.mlp.up_proj", offsets = array<i64: 1311232>} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %25 = nn.silu_mul %22, %24 {module = "model.layers.0.mlp.act_fn", offsets = array<i64: 1322496>} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    %26 = fsdp.upcast %model.layers.0.mlp.down_proj.weight {offsets = array<i64: 1254912>} : tensor<64x176xf32>
    %27 = nn.linear out_in %25, %26 {module = "model.layers.0.mlp.down_proj", offsets = array<i64: 1299968>} : (tensor<?x?x176xf32>, tensor<64x176xf32>) -> tensor<?x?x64xf32>
    %28 = nn.add %18, %27 {module = "model.layers.0", offsets = array<i64: 1857536>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.wait %4
    %29 = fsdp.upcast %model.layers.1.input_layernorm.weight {offsets = array<i64: 1254912>} : tensor<64xf32>
    %30 = nn.rms_norm %28, %29 {eps = 1.000000e-05 : f64, module = "model.layers.1.input_layernorm", offsets = array<i64: 1271296>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %31 = fsdp.upcast %model.layers.1.self_attn.q_proj.weight {offsets = array<i64: 1254912>} : tensor<64x64xf32>
    %32 = nn.linear out_in %30, %31 {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: 1275392>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %33 = fsdp.upcast %model.layers.1.self_attn.k_proj.weight {offsets = array<i64: 1254912>} : tensor<32x64xf32>
    %34 = nn.linear out_in %30, %33 {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: 1263104>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %35 = fsdp.upcast %model.layers.1.self_attn.v_proj.weight {offsets = array<i64: 1254912>} : tensor<32x64xf32>
    %36 = nn.linear out_in %30, %35 {module = "model.layers.1.self_attn.v_proj", offsets = array<i64: 1265152>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %37 = nn.rope %32 {module = "model.layers.1.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 1254912>, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %38 = nn.rope %34 {module = "model.layers.1.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 1259008>, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %39 = nn.causal_attention %37, %38, %36 {module = "model.layers.1.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 1271296>, scratch_offset = 1261056 : i64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
    %40 = fsdp.upcast %model.layers.1.self_attn.o_proj.weight {offsets = array<i64: 1254912>} : tensor<64x64xf32>
    %41 = nn.linear out_in %39, %40 {module = "model.layers.1.self_attn.o_proj", offsets = array<i64: 1275392>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %42 = nn.add %28, %41 {module = "model.layers.1", offsets = array<i64: 1333760>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %43 = fsdp.upcast %model.layers.1.post_attention_layernorm.weight {offsets = array<i64: 1254912>} : tensor<64xf32>
    %44 = nn.rms_norm %42, %43 {eps = 1.000000e-05 : f64, module = "model.layers.1.post_attention_layernorm", offsets = array<i64: 1322496>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %45 = fsdp.upcast %model.layers.1.mlp.gate_proj.weight {offsets = array<i64: 1254912>} : tensor<176x64xf32>
    %46 = nn.linear out_in %44, %45 {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: 1299968>} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %47 = fsdp.upcast %model.layers.1.mlp.up_proj.weight {offsets = array<i64: 1254912>} : tensor<176x64xf32>
    %48 = nn.linear out_in %44, %47 {module = "model.layers.1.mlp.up_proj", offsets = array<i64: 1311232>} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %49 = nn.silu_mul %46, %48 {module = "model.layers.1.mlp.act_fn", offsets = array<i64: 1322496>} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    %50 = fsdp.upcast %model.layers.1.mlp.down_proj.weight {offsets = array<i64: 1254912>} : tensor<64x176xf32>
    %51 = nn.linear out_in %49, %50 {module = "model.layers.1.mlp.down_proj", offsets = array<i64: 1299968>} : (tensor<?x?x176xf32>, tensor<64x176xf32>) -> tensor<?x?x64xf32>
    %52 = nn.add %42, %51 {module = "model.layers.1", offsets = array<i64: 1673792>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %53 = fsdp.upcast %model.norm.weight {offsets = array<i64: 1254912>} : tensor<64xf32>
    %54 = nn.rms_norm %52, %53 {eps = 1.000000e-05 : f64, module = "model.norm", offsets = array<i64: 1677888>} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %55 = fsdp.upcast %lm_head.weight {offsets = array<i64: 1254912>} : tensor<503x64xf32>
    %56 = nn.linear out_in %54, %55 {module = "lm_head", offsets = array<i64: 1383680>} : (tensor<?x?x64xf32>, tensor<503x64xf32>) -> tensor<?x?x503xf32>
    %57 = nn.cross_entropy %56, %targets {offsets = array<i64: 2079360>} : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<f32>
    %58 = nn.cross_entropy_grad %56, %targets {offsets = array<i64: 1641600>} : (tensor<?x?x503xf32>, tensor<?x?xi64>) -> tensor<?x?x503xf32>
    %59 = fsdp.upcast %lm_head.weight {offsets = array<i64: 1254912>} : tensor<503x64xf32>
    %60 = nn.linear_grad_input out_in %58, %59 {module = "lm_head", offsets = array<i64: 1681984>} : (tensor<?x?x503xf32>, tensor<503x64xf32>) -> tensor<?x?x64xf32>
    fsdp.alloc grads @root {offset = 1254912 : i64}
    %61 = nn.linear_grad_weight out_in %58, %54 {module = "lm_head", offsets = array<i64: -1>} : (tensor<?x?x503xf32>, tensor<?x?x64xf32>) -> tensor<503x64xf32>
    fsdp.grad "lm_head.weight", %61 : tensor<503x64xf32>
    %62 = fsdp.upcast %model.norm.weight {offsets = array<i64: 1641600>} : tensor<64xf32>
    %input_grad, %weight_grad = nn.rms_norm_grad %60, %52, %62 {eps = 1.000000e-05 : f64, module = "model.norm", offsets = array<i64: 1861632, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    fsdp.free params @root
    fsdp.grad "model.norm.weight", %weight_grad : tensor<64xf32>
    %63 = fsdp.upcast %model.layers.1.mlp.down_proj.weight {offsets = array<i64: 1512704>} : tensor<64x176xf32>
    %64 = nn.linear_grad_input out_in %input_grad, %63 {module = "model.layers.1.mlp.down_proj", offsets = array<i64: 1789952>} : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
    %65 = fsdp.upcast %model.layers.1.input_layernorm.weight {offsets = array<i64: 1512704>} : tensor<64xf32>
    %66 = nn.rms_norm %28, %65 {eps = 1.000000e-05 : f64, module = "model.layers.1.input_layernorm", offsets = array<i64: 1865728>, recompute} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %67 = fsdp.upcast %model.layers.1.self_attn.q_proj.weight {offsets = array<i64: 1512704>} : tensor<64x64xf32>
    %68 = nn.linear out_in %66, %67 {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: 1529088>, recompute} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %69 = fsdp.upcast %model.layers.1.self_attn.k_proj.weight {offsets = array<i64: 1512704>} : tensor<32x64xf32>
    %70 = nn.linear out_in %66, %69 {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: 1520896>, recompute} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %71 = fsdp.upcast %model.layers.1.self_attn.v_proj.weight {offsets = array<i64: 1512704>} : tensor<32x64xf32>
    %72 = nn.linear out_in %66, %71 {module = "model.layers.1.self_attn.v_proj", offsets = array<i64: 1982976>, recompute} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %73 = nn.rope %68 {module = "model.layers.1.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 1869824>, recompute, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %74 = nn.rope %70 {module = "model.layers.1.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 1985024>, recompute, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %75 = nn.causal_attention %73, %74, %72 {module = "model.layers.1.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 1873920>, recompute, scratch_offset = 1512704 : i64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
    %76 = fsdp.upcast %model.layers.1.self_attn.o_proj.weight {offsets = array<i64: 1512704>} : tensor<64x64xf32>
    %77 = nn.linear out_in %75, %76 {module = "model.layers.1.self_attn.o_proj", offsets = array<i64: 1529088>, recompute} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %78 = nn.add %28, %77 {module = "model.layers.1", offsets = array<i64: 1878016>, recompute} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %79 = fsdp.upcast %model.layers.1.post_attention_layernorm.weight {offsets = array<i64: 1512704>} : tensor<64xf32>
    %80 = nn.rms_norm %78, %79 {eps = 1.000000e-05 : f64, module = "model.layers.1.post_attention_layernorm", offsets = array<i64: 1974784>, recompute} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %81 = fsdp.upcast %model.layers.1.mlp.gate_proj.weight {offsets = array<i64: 1512704>} : tensor<176x64xf32>
    %82 = nn.linear out_in %80, %81 {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: 1801216>, recompute} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %83 = fsdp.upcast %model.layers.1.mlp.up_proj.weight {offsets = array<i64: 1512704>} : tensor<176x64xf32>
    %84 = nn.linear out_in %80, %83 {module = "model.layers.1.mlp.up_proj", offsets = array<i64: 1812480>, recompute} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %85 = nn.silu_mul %82, %84 {module = "model.layers.1.mlp.act_fn", offsets = array<i64: 1823744>, recompute} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    fsdp.alloc grads @block1 {offset = 1512704 : i64}
    %86 = nn.linear_grad_weight out_in %input_grad, %85 {module = "model.layers.1.mlp.down_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x176xf32>) -> tensor<64x176xf32>
    fsdp.grad "model.layers.1.mlp.down_proj.weight", %86 : tensor<64x176xf32>
    %gate_grad, %up_grad = nn.silu_mul_grad %64, %82, %84 {module = "model.layers.1.mlp.act_fn", offsets = array<i64: 1835008, 1846272>} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> (tensor<?x?x176xf32>, tensor<?x?x176xf32>)
    %87 = fsdp.upcast %model.layers.1.mlp.up_proj.weight {offsets = array<i64: 1789952>} : tensor<176x64xf32>
    %88 = nn.linear_grad_input out_in %up_grad, %87 {module = "model.layers.1.mlp.up_proj", offsets = array<i64: 1978880>} : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
    %89 = nn.linear_grad_weight out_in %up_grad, %80 {module = "model.layers.1.mlp.up_proj", offsets = array<i64: -1>} : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<176x64xf32>
    fsdp.grad "model.layers.1.mlp.up_proj.weight", %89 : tensor<176x64xf32>
    %90 = fsdp.upcast %model.layers.1.mlp.gate_proj.weight {offsets = array<i64: 1789952>} : tensor<176x64xf32>
    %91 = nn.linear_grad_input out_in %gate_grad, %90 {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: 1846272>} : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
    %92 = nn.linear_grad_weight out_in %gate_grad, %80 {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: -1>} : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<176x64xf32>
    %93 = nn.add %88, %91 {module = "model.layers.1.mlp.gate_proj", offsets = array<i64: 1789952>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.mlp.gate_proj.weight", %92 : tensor<176x64xf32>
    %94 = fsdp.upcast %model.layers.1.post_attention_layernorm.weight {offsets = array<i64: 1798144>} : tensor<64xf32>
    %input_grad_0, %weight_grad_1 = nn.rms_norm_grad %93, %78, %94 {eps = 1.000000e-05 : f64, module = "model.layers.1.post_attention_layernorm", offsets = array<i64: 1794048, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    %95 = nn.add %input_grad, %input_grad_0 {module = "model.layers.1.post_attention_layernorm", offsets = array<i64: 1806336>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.post_attention_layernorm.weight", %weight_grad_1 : tensor<64xf32>
    %96 = fsdp.upcast %model.layers.1.self_attn.o_proj.weight {offsets = array<i64: 1789952>} : tensor<64x64xf32>
    %97 = nn.linear_grad_input out_in %95, %96 {module = "model.layers.1.self_attn.o_proj", offsets = array<i64: 1810432>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %98 = nn.linear_grad_weight out_in %95, %75 {module = "model.layers.1.self_attn.o_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    fsdp.grad "model.layers.1.self_attn.o_proj.weight", %98 : tensor<64x64xf32>
    %query_grad, %key_grad, %value_grad = nn.causal_attention_grad %97, %73, %74, %72, %75 {module = "model.layers.1.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 1789952, 1794048, 1802240>, scratch_offset = 1796096 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
    %99 = nn.rope %key_grad {inverse, module = "model.layers.1.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 1814528>, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %100 = nn.rope %query_grad {inverse, module = "model.layers.1.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 1810432>, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %101 = fsdp.upcast %model.layers.1.self_attn.v_proj.weight {offsets = array<i64: 1789952>} : tensor<32x64xf32>
    %102 = nn.linear_grad_input out_in %value_grad, %101 {module = "model.layers.1.self_attn.v_proj", offsets = array<i64: 1798144>} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    %103 = nn.linear_grad_weight out_in %value_grad, %66 {module = "model.layers.1.self_attn.v_proj", offsets = array<i64: -1>} : (tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> tensor<32x64xf32>
    fsdp.grad "model.layers.1.self_attn.v_proj.weight", %103 : tensor<32x64xf32>
    %104 = fsdp.upcast %model.layers.1.self_attn.k_proj.weight {offsets = array<i64: 1789952>} : tensor<32x64xf32>
    %105 = nn.linear_grad_input out_in %99, %104 {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: 1802240>} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    %106 = nn.linear_grad_weight out_in %99, %66 {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: -1>} : (tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> tensor<32x64xf32>
    %107 = nn.add %102, %105 {module = "model.layers.1.self_attn.k_proj", offsets = array<i64: 1814528>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.self_attn.k_proj.weight", %106 : tensor<32x64xf32>
    %108 = fsdp.upcast %model.layers.1.self_attn.q_proj.weight {offsets = array<i64: 1789952>} : tensor<64x64xf32>
    %109 = nn.linear_grad_input out_in %100, %108 {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: 1818624>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %110 = nn.linear_grad_weight out_in %100, %66 {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    %111 = nn.add %107, %109 {module = "model.layers.1.self_attn.q_proj", offsets = array<i64: 1789952>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.self_attn.q_proj.weight", %110 : tensor<64x64xf32>
    %112 = fsdp.upcast %model.layers.1.input_layernorm.weight {offsets = array<i64: 1798144>} : tensor<64xf32>
    %input_grad_2, %weight_grad_3 = nn.rms_norm_grad %111, %28, %112 {eps = 1.000000e-05 : f64, module = "model.layers.1.input_layernorm", offsets = array<i64: 1794048, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    fsdp.free params @block1
    %113 = nn.add %95, %input_grad_2 {module = "model.layers.1.input_layernorm", offsets = array<i64: 2046464>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.1.input_layernorm.weight", %weight_grad_3 : tensor<64xf32>
    %114 = fsdp.reduce_scatter @block1 in bf16
    %115 = fsdp.upcast %model.layers.0.mlp.down_proj.weight {offsets = array<i64: 1697536>} : tensor<64x176xf32>
    %116 = nn.linear_grad_input out_in %113, %115 {module = "model.layers.0.mlp.down_proj", offsets = array<i64: 1974784>} : (tensor<?x?x64xf32>, tensor<64x176xf32>) -> tensor<?x?x176xf32>
    %117 = fsdp.upcast %model.layers.0.input_layernorm.weight {offsets = array<i64: 1697536>} : tensor<64xf32>
    %118 = nn.rms_norm %3, %117 {eps = 1.000000e-05 : f64, module = "model.layers.0.input_layernorm", offsets = array<i64: 2050560>, recompute} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %119 = fsdp.upcast %model.layers.0.self_attn.q_proj.weight {offsets = array<i64: 1697536>} : tensor<64x64xf32>
    %120 = nn.linear out_in %118, %119 {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: 1713920>, recompute} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %121 = fsdp.upcast %model.layers.0.self_attn.k_proj.weight {offsets = array<i64: 1697536>} : tensor<32x64xf32>
    %122 = nn.linear out_in %118, %121 {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: 1705728>, recompute} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %123 = fsdp.upcast %model.layers.0.self_attn.v_proj.weight {offsets = array<i64: 1697536>} : tensor<32x64xf32>
    %124 = nn.linear out_in %118, %123 {module = "model.layers.0.self_attn.v_proj", offsets = array<i64: 2075136>, recompute} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
    %125 = nn.rope %120 {module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 2054656>, recompute, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %126 = nn.rope %122 {module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 2077184>, recompute, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %127 = nn.causal_attention %125, %126, %124 {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 2058752>, recompute, scratch_offset = 1697536 : i64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
    %128 = fsdp.upcast %model.layers.0.self_attn.o_proj.weight {offsets = array<i64: 1697536>} : tensor<64x64xf32>
    %129 = nn.linear out_in %127, %128 {module = "model.layers.0.self_attn.o_proj", offsets = array<i64: 1713920>, recompute} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %130 = nn.add %3, %129 {module = "model.layers.0", offsets = array<i64: 2062848>, recompute} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    %131 = fsdp.upcast %model.layers.0.post_attention_layernorm.weight {offsets = array<i64: 1697536>} : tensor<64xf32>
    %132 = nn.rms_norm %130, %131 {eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm", offsets = array<i64: 2066944>, recompute} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %133 = fsdp.upcast %model.layers.0.mlp.gate_proj.weight {offsets = array<i64: 1697536>} : tensor<176x64xf32>
    %134 = nn.linear out_in %132, %133 {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: 1986048>, recompute} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %135 = fsdp.upcast %model.layers.0.mlp.up_proj.weight {offsets = array<i64: 1697536>} : tensor<176x64xf32>
    %136 = nn.linear out_in %132, %135 {module = "model.layers.0.mlp.up_proj", offsets = array<i64: 1997312>, recompute} : (tensor<?x?x64xf32>, tensor<176x64xf32>) -> tensor<?x?x176xf32>
    %137 = nn.silu_mul %134, %136 {module = "model.layers.0.mlp.act_fn", offsets = array<i64: 2008576>, recompute} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> tensor<?x?x176xf32>
    fsdp.alloc grads @block0 {offset = 1697536 : i64}
    %138 = nn.linear_grad_weight out_in %113, %137 {module = "model.layers.0.mlp.down_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x176xf32>) -> tensor<64x176xf32>
    fsdp.grad "model.layers.0.mlp.down_proj.weight", %138 : tensor<64x176xf32>
    %gate_grad_4, %up_grad_5 = nn.silu_mul_grad %116, %134, %136 {module = "model.layers.0.mlp.act_fn", offsets = array<i64: 2019840, 2031104>} : (tensor<?x?x176xf32>, tensor<?x?x176xf32>, tensor<?x?x176xf32>) -> (tensor<?x?x176xf32>, tensor<?x?x176xf32>)
    %139 = fsdp.upcast %model.layers.0.mlp.up_proj.weight {offsets = array<i64: 1974784>} : tensor<176x64xf32>
    %140 = nn.linear_grad_input out_in %up_grad_5, %139 {module = "model.layers.0.mlp.up_proj", offsets = array<i64: 2071040>} : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
    %141 = nn.linear_grad_weight out_in %up_grad_5, %132 {module = "model.layers.0.mlp.up_proj", offsets = array<i64: -1>} : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<176x64xf32>
    fsdp.grad "model.layers.0.mlp.up_proj.weight", %141 : tensor<176x64xf32>
    %142 = fsdp.upcast %model.layers.0.mlp.gate_proj.weight {offsets = array<i64: 1974784>} : tensor<176x64xf32>
    %143 = nn.linear_grad_input out_in %gate_grad_4, %142 {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: 2031104>} : (tensor<?x?x176xf32>, tensor<176x64xf32>) -> tensor<?x?x64xf32>
    %144 = nn.linear_grad_weight out_in %gate_grad_4, %132 {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: -1>} : (tensor<?x?x176xf32>, tensor<?x?x64xf32>) -> tensor<176x64xf32>
    %145 = nn.add %140, %143 {module = "model.layers.0.mlp.gate_proj", offsets = array<i64: 1974784>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.mlp.gate_proj.weight", %144 : tensor<176x64xf32>
    %146 = fsdp.upcast %model.layers.0.post_attention_layernorm.weight {offsets = array<i64: 1982976>} : tensor<64xf32>
    %input_grad_6, %weight_grad_7 = nn.rms_norm_grad %145, %130, %146 {eps = 1.000000e-05 : f64, module = "model.layers.0.post_attention_layernorm", offsets = array<i64: 1978880, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    %147 = nn.add %113, %input_grad_6 {module = "model.layers.0.post_attention_layernorm", offsets = array<i64: 1991168>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.post_attention_layernorm.weight", %weight_grad_7 : tensor<64xf32>
    %148 = fsdp.upcast %model.layers.0.self_attn.o_proj.weight {offsets = array<i64: 1974784>} : tensor<64x64xf32>
    %149 = nn.linear_grad_input out_in %147, %148 {module = "model.layers.0.self_attn.o_proj", offsets = array<i64: 1995264>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %150 = nn.linear_grad_weight out_in %147, %127 {module = "model.layers.0.self_attn.o_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    fsdp.grad "model.layers.0.self_attn.o_proj.weight", %150 : tensor<64x64xf32>
    %query_grad_8, %key_grad_9, %value_grad_10 = nn.causal_attention_grad %149, %125, %126, %124, %127 {module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, offsets = array<i64: 1974784, 1978880, 1987072>, scratch_offset = 1980928 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
    %151 = nn.rope %key_grad_9 {inverse, module = "model.layers.0.self_attn.rotary_emb", num_heads = 2 : i64, offsets = array<i64: 1999360>, theta = 1.000000e+04 : f64} : tensor<?x?x32xf32> -> tensor<?x?x32xf32>
    %152 = nn.rope %query_grad_8 {inverse, module = "model.layers.0.self_attn.rotary_emb", num_heads = 4 : i64, offsets = array<i64: 1995264>, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
    %153 = fsdp.upcast %model.layers.0.self_attn.v_proj.weight {offsets = array<i64: 1974784>} : tensor<32x64xf32>
    %154 = nn.linear_grad_input out_in %value_grad_10, %153 {module = "model.layers.0.self_attn.v_proj", offsets = array<i64: 1982976>} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    %155 = nn.linear_grad_weight out_in %value_grad_10, %118 {module = "model.layers.0.self_attn.v_proj", offsets = array<i64: -1>} : (tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> tensor<32x64xf32>
    fsdp.grad "model.layers.0.self_attn.v_proj.weight", %155 : tensor<32x64xf32>
    %156 = fsdp.upcast %model.layers.0.self_attn.k_proj.weight {offsets = array<i64: 1974784>} : tensor<32x64xf32>
    %157 = nn.linear_grad_input out_in %151, %156 {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: 1987072>} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
    %158 = nn.linear_grad_weight out_in %151, %118 {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: -1>} : (tensor<?x?x32xf32>, tensor<?x?x64xf32>) -> tensor<32x64xf32>
    %159 = nn.add %154, %157 {module = "model.layers.0.self_attn.k_proj", offsets = array<i64: 1999360>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.self_attn.k_proj.weight", %158 : tensor<32x64xf32>
    %160 = fsdp.upcast %model.layers.0.self_attn.q_proj.weight {offsets = array<i64: 1974784>} : tensor<64x64xf32>
    %161 = nn.linear_grad_input out_in %152, %160 {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: 2003456>} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %162 = nn.linear_grad_weight out_in %152, %118 {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<64x64xf32>
    %163 = nn.add %159, %161 {module = "model.layers.0.self_attn.q_proj", offsets = array<i64: 1974784>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.self_attn.q_proj.weight", %162 : tensor<64x64xf32>
    %164 = fsdp.upcast %model.layers.0.input_layernorm.weight {offsets = array<i64: 1982976>} : tensor<64xf32>
    %input_grad_11, %weight_grad_12 = nn.rms_norm_grad %163, %3, %164 {eps = 1.000000e-05 : f64, module = "model.layers.0.input_layernorm", offsets = array<i64: 1978880, -1>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<64xf32>)
    fsdp.free params @block0
    %165 = nn.add %147, %input_grad_11 {module = "model.layers.0.input_layernorm", offsets = array<i64: 1882368>} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    fsdp.grad "model.layers.0.input_layernorm.weight", %weight_grad_12 : tensor<64xf32>
    fsdp.wait %114
    fsdp.free grads @block1
    %166 = fsdp.reduce_scatter @block0 in bf16
    %167 = nn.embedding_grad %165, %tokens {module = "model.embed_tokens", offsets = array<i64: -1>} : (tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<503x64xf32>
    fsdp.grad "model.embed_tokens.weight", %167 : tensor<503x64xf32>
    fsdp.wait %166
    fsdp.free grads @block0
    %168 = fsdp.reduce_scatter @root in bf16
    fsdp.wait %168
    fsdp.free grads @root
    %169 = fsdp.grad_norm
    fsdp.wait %169
    fsdp.optimizer_step @root
    fsdp.optimizer_step @block0
    fsdp.optimizer_step @block1
    fsdp.return %57 : tensor<f32>
  }
}
