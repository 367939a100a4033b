// fsdp-activation-checkpointing alone, on the training step before units:
// of each block's forward values only those that leave the block stay alive;
// the others are recomputed by copies of the block's forward ops (marked
// `recompute`) placed before the block's first gradient op that needs them.
// RUN: fsdp-opt %s --fsdp-activation-checkpointing="mode=blocks" | FileCheck %s
// RUN: not fsdp-opt %s --fsdp-activation-checkpointing="mode=layers" 2>&1 | FileCheck %s --check-prefix=BAD

module {
  fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {block_prefix = "blocks", max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64} {
    %emb.weight = nn.param "emb.weight" : tensor<16x8xf32>
    %blocks.0.fc.weight = nn.param "blocks.0.fc.weight" : tensor<8x8xf32>
    %blocks.1.fc.weight = nn.param "blocks.1.fc.weight" : tensor<8x8xf32>
    %head.weight = nn.param "head.weight" : tensor<16x8xf32>
    %0 = nn.embedding %tokens, %emb.weight {module = "emb"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %1 = nn.linear out_in %0, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %2 = nn.gelu %1 {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %3 = nn.linear out_in %2, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %4 = nn.linear out_in %3, %head.weight {module = "head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
    %5 = nn.cross_entropy %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
    %6 = nn.cross_entropy_grad %4, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %7 = nn.linear_grad_input out_in %6, %head.weight {module = "head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %8 = nn.linear_grad_weight out_in %6, %3 {module = "head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
    fsdp.grad "head.weight", %8 : tensor<16x8xf32>
    %9 = nn.linear_grad_input out_in %7, %blocks.1.fc.weight {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %10 = nn.linear_grad_weight out_in %7, %2 {module = "blocks.1.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.1.fc.weight", %10 : tensor<8x8xf32>
    %11 = nn.gelu_grad %9, %1 {module = "blocks.0.act"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %12 = nn.linear_grad_input out_in %11, %blocks.0.fc.weight {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %13 = nn.linear_grad_weight out_in %11, %0 {module = "blocks.0.fc"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8x8xf32>
    fsdp.grad "blocks.0.fc.weight", %13 : tensor<8x8xf32>
    %14 = nn.embedding_grad %12, %tokens {module = "emb"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
    fsdp.grad "emb.weight", %14 : tensor<16x8xf32>
    fsdp.optimizer_step
    fsdp.return %5 : tensor<f32>
  }
}

// CHECK-LABEL: fsdp.step @train_step(
// CHECK-SAME: activation_checkpointing = #fsdp<checkpointing blocks>, block_prefix = "blocks", checkpointed_blocks = 2 : i64, max_seq_len = 8 : i64, model = "tiny", model_type = "llama", num_blocks = 2 : i64
// CHECK-NEXT: %emb.weight = nn.param "emb.weight"
// CHECK-NEXT: %blocks.0.fc.weight = nn.param "blocks.0.fc.weight"
// CHECK-NEXT: %blocks.1.fc.weight = nn.param "blocks.1.fc.weight"
// CHECK-NEXT: %head.weight = nn.param "head.weight"
// CHECK-NEXT: [[V0:%[0-9]+]] = nn.embedding %tokens, %emb.weight {module = "emb"}
// CHECK-NEXT: [[V1:%[0-9]+]] = nn.linear out_in [[V0]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// CHECK-NEXT: [[V2:%[0-9]+]] = nn.gelu [[V1]] {module = "blocks.0.act"} : tensor<?x?x8xf32> -> tensor<?x?x8xf32>
// CHECK-NEXT: [[V3:%[0-9]+]] = nn.linear out_in [[V2]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// CHECK-NEXT: [[V4:%[0-9]+]] = nn.linear out_in [[V3]], %head.weight {module = "head"}
// CHECK-NEXT: [[V5:%[0-9]+]] = nn.cross_entropy [[V4]], %targets
// CHECK-NEXT: [[V6:%[0-9]+]] = nn.cross_entropy_grad [[V4]], %targets
// CHECK-NEXT: [[V7:%[0-9]+]] = nn.linear_grad_input out_in [[V6]], %head.weight {module = "head"}
// CHECK-NEXT: [[V8:%[0-9]+]] = nn.linear_grad_weight out_in [[V6]], [[V3]] {module = "head"}
// CHECK-NEXT: fsdp.grad "head.weight", [[V8]]
// CHECK-NEXT: [[V9:%[0-9]+]] = nn.linear_grad_input out_in [[V7]], %blocks.1.fc.weight {module = "blocks.1.fc"}
// CHECK-NEXT: [[V10:%[0-9]+]] = nn.linear_grad_weight out_in [[V7]], [[V2]] {module = "blocks.1.fc"}
// CHECK-NEXT: fsdp.grad "blocks.1.fc.weight", [[V10]]
// CHECK-NEXT: [[V11:%[0-9]+]] = nn.linear out_in [[V0]], %blocks.0.fc.weight {module = "blocks.0.fc", recompute}
// CHECK-NEXT: [[V12:%[0-9]+]] = nn.gelu_grad [[V9]], [[V11]] {module = "blocks.0.act"}
// CHECK-NEXT: [[V13:%[0-9]+]] = nn.linear_grad_input out_in [[V12]], %blocks.0.fc.weight {module = "blocks.0.fc"}
// CHECK-NEXT: [[V14:%[0-9]+]] = nn.linear_grad_weight out_in [[V12]], [[V0]] {module = "blocks.0.fc"}
// CHECK-NEXT: fsdp.grad "blocks.0.fc.weight", [[V14]]
// CHECK-NEXT: [[V15:%[0-9]+]] = nn.embedding_grad [[V13]], %tokens {module = "emb"}
// CHECK-NEXT: fsdp.grad "emb.weight", [[V15]]
// CHECK-NEXT: fsdp.optimizer_step
// CHECK-NEXT: fsdp.return [[V5]]
// CHECK-NEXT: }

// BAD: for the --mode option: Cannot find option named 'layers'!
