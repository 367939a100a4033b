// fsdp-activation-checkpointing alone, mode=selective, on one LLaMA-shaped
// block: the outputs of its matmuls (nn.linear) and attention stay alive
// until backward with the block's input; the rest that backward reads (the
// norms, rope, silu_mul, the residual add) is recomputed from them by copies
// marked `recompute`, each right before the first gradient op (or copy) that
// reads it: the MLP's before the MLP's gradients, the attention's after.
// RUN: fsdp-opt %s --fsdp-activation-checkpointing="mode=selective" | FileCheck %s
// RUN: not fsdp-opt %s --fsdp-activation-checkpointing="mode=select" 2>&1 | FileCheck %s --check-prefix=BAD

module {
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 1 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.ln1.weight = nn.param "blocks.0.ln1.weight" : tensor<8xf32>
    %blocks.0.q.weight = nn.param "blocks.0.q.weight" : tensor<8x8xf32>
    %blocks.0.k.weight = nn.param "blocks.0.k.weight" : tensor<8x8xf32>
    %blocks.0.v.weight = nn.param "blocks.0.v.weight" : tensor<8x8xf32>
    %blocks.0.o.weight = nn.param "blocks.0.o.weight" : tensor<8x8xf32>
    %blocks.0.ln2.weight = nn.param "blocks.0.ln2.weight" : tensor<8xf32>
    %blocks.0.gate.weight = nn.param "blocks.0.gate.weight" : tensor<16x8xf32>
    %blocks.0.up.weight = nn.param "blocks.0.up.weight" : tensor<16x8xf32>
    %blocks.0.down.weight = nn.param "blocks.0.down.weight" : tensor<8x16xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %1 = nn.rms_norm %0, %blocks.0.ln1.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln1"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    %2 = nn.linear out_in %1, %blocks.0.q.weight {module = "blocks.0.q"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %3 = nn.linear out_in %1, %blocks.0.k.weight {module = "blocks.0.k"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %4 = nn.linear out_in %1, %blocks.0.v.weight {module = "blocks.0.v"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %5 = nn.rope %2 {module = "blocks.0.rope", num_heads = 2 : i64, theta = 1.000000e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %6 = nn.rope %3 {module = "blocks.0.rope", num_heads = 2 : i64, theta = 1.000000e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %7 = nn.causal_attention %5, %6, %4 {module = "blocks.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %8 = nn.linear out_in %7, %blocks.0.o.weight {module = "blocks.0.o"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %9 = nn.add %0, %8 {module = "blocks.0"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %10 = nn.rms_norm %9, %blocks.0.ln2.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln2"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    %11 = nn.linear out_in %10, %blocks.0.gate.weight {module = "blocks.0.gate"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %12 = nn.linear out_in %10, %blocks.0.up.weight {module = "blocks.0.up"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %13 = nn.silu_mul %11, %12 {module = "blocks.0.act"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    %14 = nn.linear out_in %13, %blocks.0.down.weight {module = "blocks.0.down"} : (tensor<?x?x16xf32>, tensor<8x16xf32>) -> tensor<?x?x8xf32>
    %15 = nn.add %9, %14 {module = "blocks.0"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %16 = nn.linear out_in %15, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %17 = nn.cross_entropy %16, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %18 = nn.cross_entropy_grad %16, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %19 = nn.linear_grad_input out_in %18, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %20 = nn.linear_grad_weight out_in %18, %15 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %20 : tensor<16x8xf32>
    %21 = nn.linear_grad_input out_in %19, %blocks.0.down.weight {module = "blocks.0.down"} : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
    %22 = nn.linear_grad_weight out_in %19, %13 {module = "blocks.0.down"} : (tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> tensor<8x16xf32>
    fsdp.grad "blocks.0.down.weight", %22 : tensor<8x16xf32>
    %gate_grad, %up_grad = nn.silu_mul_grad %21, %11, %12 {module = "blocks.0.act"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x16xf32>)
    %23 = nn.linear_grad_input out_in %up_grad, %blocks.0.up.weight {module = "blocks.0.up"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %24 = nn.linear_grad_weight out_in %up_grad, %10 {module = "blocks.0.up"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "blocks.0.up.weight", %24 : tensor<16x8xf32>
    %25 = nn.linear_grad_input out_in %gate_grad, %blocks.0.gate.weight {module = "blocks.0.gate"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %26 = nn.linear_grad_weight out_in %gate_grad, %10 {module = "blocks.0.gate"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    %27 = nn.add %23, %25 {module = "blocks.0.gate"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    fsdp.grad "blocks.0.gate.weight", %26 : tensor<16x8xf32>
    %input_grad, %weight_grad = nn.rms_norm_grad %27, %9, %blocks.0.ln2.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln2"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>)
    %28 = nn.add %19, %input_grad {module = "blocks.0.ln2"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    fsdp.grad "blocks.0.ln2.weight", %weight_grad : tensor<8xf32>
    %29 = nn.linear_grad_input out_in %28, %blocks.0.o.weight {module = "blocks.0.o"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %30 = nn.linear_grad_weight out_in %28, %7 {module = "blocks.0.o"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.o.weight", %30 : tensor<8x8xf32>
    %query_grad, %key_grad, %value_grad = nn.causal_attention_grad %29, %5, %6, %4, %7 {module = "blocks.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
    %31 = nn.rope %key_grad {inverse, module = "blocks.0.rope", num_heads = 2 : i64, theta = 1.000000e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %32 = nn.rope %query_grad {inverse, module = "blocks.0.rope", num_heads = 2 : i64, theta = 1.000000e+04 : f64} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %33 = nn.linear_grad_input out_in %value_grad, %blocks.0.v.weight {module = "blocks.0.v"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %34 = nn.linear_grad_weight out_in %value_grad, %1 {module = "blocks.0.v"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.v.weight", %34 : tensor<8x8xf32>
    %35 = nn.linear_grad_input out_in %31, %blocks.0.k.weight {module = "blocks.0.k"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %36 = nn.linear_grad_weight out_in %31, %1 {module = "blocks.0.k"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    %37 = nn.add %33, %35 {module = "blocks.0.k"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    fsdp.grad "blocks.0.k.weight", %36 : tensor<8x8xf32>
    %38 = nn.linear_grad_input out_in %32, %blocks.0.q.weight {module = "blocks.0.q"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %39 = nn.linear_grad_weight out_in %32, %1 {module = "blocks.0.q"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    %40 = nn.add %37, %38 {module = "blocks.0.q"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    fsdp.grad "blocks.0.q.weight", %39 : tensor<8x8xf32>
    %input_grad_0, %weight_grad_1 = nn.rms_norm_grad %40, %0, %blocks.0.ln1.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln1"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>)
    %41 = nn.add %28, %input_grad_0 {module = "blocks.0.ln1"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    fsdp.grad "blocks.0.ln1.weight", %weight_grad_1 : tensor<8xf32>
    %42 = nn.embedding_grad %41, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %42 : tensor<16x8xf32>
    fsdp.optimizer_step
    fsdp.return %17 : tensor<f32>
  }
}

// CHECK-LABEL: fsdp.step @train_step(
// CHECK-SAME: activation_checkpointing = #fsdp<checkpointing selective>, block_prefix = "blocks", checkpointed_blocks = 1 : i64
// Forward unchanged.
// CHECK: [[V0:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// The first norm last, from the block's input.
// CHECK-NEXT: [[V1:%[0-9]+]] = nn.rms_norm [[V0]], %blocks.0.ln1.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln1"}
// CHECK-NEXT: [[V2:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.q.weight {module = "blocks.0.q"}
// CHECK-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.k.weight {module = "blocks.0.k"}
// CHECK-NEXT: [[V4:%[0-9]+]] = nn.linear out_in [[V1]], %blocks.0.v.weight {module = "blocks.0.v"}
// CHECK-NEXT: [[V5:%[0-9]+]] = nn.rope [[V2]] {module = "blocks.0.rope", num_heads = 2 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: [[V6:%[0-9]+]] = nn.rope [[V3]] {module = "blocks.0.rope", num_heads = 2 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: [[V7:%[0-9]+]] = nn.causal_attention [[V5]], [[V6]], [[V4]] {module = "blocks.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: [[V8:%[0-9]+]] = nn.linear out_in [[V7]], %blocks.0.o.weight {module = "blocks.0.o"}
// CHECK-NEXT: [[V9:%[0-9]+]] = nn.add [[V0]], [[V8]] {module = "blocks.0"}
// CHECK-NEXT: [[V10:%[0-9]+]] = nn.rms_norm [[V9]], %blocks.0.ln2.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln2"}
// CHECK-NEXT: [[V11:%[0-9]+]] = nn.linear out_in [[V10]], %blocks.0.gate.weight {module = "blocks.0.gate"}
// CHECK-NEXT: [[V12:%[0-9]+]] = nn.linear out_in [[V10]], %blocks.0.up.weight {module = "blocks.0.up"}
// CHECK-NEXT: [[V13:%[0-9]+]] = nn.silu_mul [[V11]], [[V12]] {module = "blocks.0.act"}
// CHECK-NEXT: [[V14:%[0-9]+]] = nn.linear out_in [[V13]], %blocks.0.down.weight {module = "blocks.0.down"}
// CHECK-NEXT: [[V15:%[0-9]+]] = nn.add [[V9]], [[V14]] {module = "blocks.0"}
// CHECK-NEXT: [[V16:%[0-9]+]] = nn.linear out_in [[V15]], %head.weight {module = "head"}
// CHECK-NEXT: [[V17:%[0-9]+]] = nn.cross_entropy [[V16]], %targets
// CHECK-NEXT: [[V18:%[0-9]+]] = nn.cross_entropy_grad [[V16]], %targets
// CHECK-NEXT: [[V19:%[0-9]+]] = nn.linear_grad_input out_in [[V18]], %head.weight {module = "head"}
// CHECK-NEXT: [[V20:%[0-9]+]] = nn.linear_grad_weight out_in [[V18]], [[V15]] {module = "head"}
// CHECK-NEXT: fsdp.grad "head.weight", [[V20]]
// CHECK-NEXT: [[V21:%[0-9]+]] = nn.linear_grad_input out_in [[V19]], %blocks.0.down.weight {module = "blocks.0.down"}
// The MLP: silu_mul from the kept gate and up outputs, right before the
// down projection's weight gradient; silu_mul_grad reads gate and up as kept.
// CHECK-NEXT: [[V22:%[0-9]+]] = nn.silu_mul [[V11]], [[V12]] {module = "blocks.0.act", recompute}
// CHECK-NEXT: [[V23:%[0-9]+]] = nn.linear_grad_weight out_in [[V19]], [[V22]] {module = "blocks.0.down"}
// CHECK-NEXT: fsdp.grad "blocks.0.down.weight", [[V23]]
// CHECK-NEXT: [[GATEGRAD:%gate_grad]], [[UPGRAD:%up_grad]] = nn.silu_mul_grad [[V21]], [[V11]], [[V12]] {module = "blocks.0.act"}
// CHECK-NEXT: [[V24:%[0-9]+]] = nn.linear_grad_input out_in [[UPGRAD]], %blocks.0.up.weight {module = "blocks.0.up"}
// The residual sum from the block's input and the kept o_proj output, and
// the norm from it, before the first gradient op that reads the norm.
// CHECK-NEXT: [[V25:%[0-9]+]] = nn.add [[V0]], [[V8]] {module = "blocks.0", recompute}
// CHECK-NEXT: [[V26:%[0-9]+]] = nn.rms_norm [[V25]], %blocks.0.ln2.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln2", recompute}
// CHECK-NEXT: [[V27:%[0-9]+]] = nn.linear_grad_weight out_in [[UPGRAD]], [[V26]] {module = "blocks.0.up"}
// CHECK-NEXT: fsdp.grad "blocks.0.up.weight", [[V27]]
// CHECK-NEXT: [[V28:%[0-9]+]] = nn.linear_grad_input out_in [[GATEGRAD]], %blocks.0.gate.weight {module = "blocks.0.gate"}
// CHECK-NEXT: [[V29:%[0-9]+]] = nn.linear_grad_weight out_in [[GATEGRAD]], [[V26]] {module = "blocks.0.gate"}
// CHECK-NEXT: [[V30:%[0-9]+]] = nn.add [[V24]], [[V28]] {module = "blocks.0.gate"}
// CHECK-NEXT: fsdp.grad "blocks.0.gate.weight", [[V29]]
// CHECK-NEXT: [[INPUTGRAD:%input_grad]], [[WEIGHTGRAD:%weight_grad]] = nn.rms_norm_grad [[V30]], [[V25]], %blocks.0.ln2.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln2"}
// CHECK-NEXT: [[V31:%[0-9]+]] = nn.add [[V19]], [[INPUTGRAD]] {module = "blocks.0.ln2"}
// CHECK-NEXT: fsdp.grad "blocks.0.ln2.weight", [[WEIGHTGRAD]]
// CHECK-NEXT: [[V32:%[0-9]+]] = nn.linear_grad_input out_in [[V31]], %blocks.0.o.weight {module = "blocks.0.o"}
// Attention's output is kept: o_proj's weight gradient reads it.
// CHECK-NEXT: [[V33:%[0-9]+]] = nn.linear_grad_weight out_in [[V31]], [[V7]] {module = "blocks.0.o"}
// CHECK-NEXT: fsdp.grad "blocks.0.o.weight", [[V33]]
// Rope from the kept q and k projections, after the MLP's copies died; v is
// kept.
// CHECK-NEXT: [[V34:%[0-9]+]] = nn.rope [[V2]] {module = "blocks.0.rope", num_heads = 2 : i64, recompute, theta = 1.000000e+04 : f64}
// CHECK-NEXT: [[V35:%[0-9]+]] = nn.rope [[V3]] {module = "blocks.0.rope", num_heads = 2 : i64, recompute, theta = 1.000000e+04 : f64}
// CHECK-NEXT: [[QUERYGRAD:%query_grad]], [[KEYGRAD:%key_grad]], [[VALUEGRAD:%value_grad]] = nn.causal_attention_grad [[V32]], [[V34]], [[V35]], [[V4]], [[V7]] {module = "blocks.0.attn", num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: [[V36:%[0-9]+]] = nn.rope [[KEYGRAD]] {inverse, module = "blocks.0.rope", num_heads = 2 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: [[V37:%[0-9]+]] = nn.rope [[QUERYGRAD]] {inverse, module = "blocks.0.rope", num_heads = 2 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: [[V38:%[0-9]+]] = nn.linear_grad_input out_in [[VALUEGRAD]], %blocks.0.v.weight {module = "blocks.0.v"}
// The first norm last, from the block's input.
// CHECK-NEXT: [[V39:%[0-9]+]] = nn.rms_norm [[V0]], %blocks.0.ln1.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln1", recompute}
// CHECK-NEXT: [[V40:%[0-9]+]] = nn.linear_grad_weight out_in [[VALUEGRAD]], [[V39]] {module = "blocks.0.v"}
// CHECK-NEXT: fsdp.grad "blocks.0.v.weight", [[V40]]
// CHECK-NEXT: [[V41:%[0-9]+]] = nn.linear_grad_input out_in [[V36]], %blocks.0.k.weight {module = "blocks.0.k"}
// CHECK-NEXT: [[V42:%[0-9]+]] = nn.linear_grad_weight out_in [[V36]], [[V39]] {module = "blocks.0.k"}
// CHECK-NEXT: [[V43:%[0-9]+]] = nn.add [[V38]], [[V41]] {module = "blocks.0.k"}
// CHECK-NEXT: fsdp.grad "blocks.0.k.weight", [[V42]]
// CHECK-NEXT: [[V44:%[0-9]+]] = nn.linear_grad_input out_in [[V37]], %blocks.0.q.weight {module = "blocks.0.q"}
// CHECK-NEXT: [[V45:%[0-9]+]] = nn.linear_grad_weight out_in [[V37]], [[V39]] {module = "blocks.0.q"}
// CHECK-NEXT: [[V46:%[0-9]+]] = nn.add [[V43]], [[V44]] {module = "blocks.0.q"}
// CHECK-NEXT: fsdp.grad "blocks.0.q.weight", [[V45]]
// CHECK-NEXT: [[INPUTGRAD0:%input_grad_0]], [[WEIGHTGRAD1:%weight_grad_1]] = nn.rms_norm_grad [[V46]], [[V0]], %blocks.0.ln1.weight {eps = 1.000000e-05 : f64, module = "blocks.0.ln1"}
// CHECK-NEXT: [[V47:%[0-9]+]] = nn.add [[V31]], [[INPUTGRAD0]] {module = "blocks.0.ln1"}
// CHECK-NEXT: fsdp.grad "blocks.0.ln1.weight", [[WEIGHTGRAD1]]
// CHECK-NEXT: [[V48:%[0-9]+]] = nn.embedding_grad [[V47]], %tokens {module = "emb"}
// CHECK-NEXT: fsdp.grad "emb.weight", [[V48]]
// CHECK-NEXT: fsdp.optimizer_step
// CHECK-NEXT: fsdp.return [[V17]]

// CHECK-NEXT: }

// BAD: for the --mode option: Cannot find option named 'select'!
