// The training step: forward as in the graph, then each op's gradient rule
// last op first, an fsdp.grad where each parameter's gradient is complete,
// and the optimizer. A tied weight sums its two gradients.
// RUN: fsdp-opt %s --fsdp-training-step | FileCheck %s

nn.graph @tied(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "gpt2", block_prefix = "h", num_blocks = 0 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "wte.weight" : tensor<16x8xf32>
  %g = nn.param "ln.weight" : tensor<8xf32>
  %x = nn.embedding %tokens, %wte {module = "wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %n = nn.rms_norm %x, %g {eps = 1.0e-5 : f64, module = "ln"} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %r = nn.add %x, %n {module = "h"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %l = nn.linear out_in %r, %wte {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %l, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// CHECK-NOT: nn.graph
// CHECK-LABEL: fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
// CHECK-SAME: model = "tied"
// CHECK: %[[X:.*]] = nn.embedding %tokens, %wte.weight
// CHECK-NEXT: %[[N:.*]] = nn.rms_norm %[[X]], %ln.weight
// CHECK-NEXT: %[[R:.*]] = nn.add %[[X]], %[[N]]
// CHECK-NEXT: %[[L:.*]] = nn.linear out_in %[[R]], %wte.weight
// CHECK-NEXT: %[[LOSS:.*]] = nn.cross_entropy %[[L]], %targets
// CHECK-NEXT: %[[DL:.*]] = nn.cross_entropy_grad %[[L]], %targets
// CHECK-NEXT: %[[DR:.*]] = nn.linear_grad_input out_in %[[DL]], %wte.weight {module = "lm_head"}
// CHECK-NEXT: %[[DW1:.*]] = nn.linear_grad_weight out_in %[[DL]], %[[R]] {module = "lm_head"}
// The residual's gradient flows to both of its operands.
// CHECK-NEXT: %[[DX:.*]], %[[DG:.*]] = nn.rms_norm_grad %[[DR]], %[[X]], %ln.weight
// CHECK-NEXT: %[[DXS:.*]] = nn.add %[[DR]], %[[DX]]
// CHECK-NEXT: fsdp.grad "ln.weight", %[[DG]]
// CHECK-NEXT: %[[DW2:.*]] = nn.embedding_grad %[[DXS]], %tokens {module = "wte"}
// The tied weight: two contributions, summed, complete only now.
// CHECK-NEXT: %[[DW:.*]] = nn.add %[[DW1]], %[[DW2]]
// CHECK-NEXT: fsdp.grad "wte.weight", %[[DW]]
// CHECK-NEXT: fsdp.optimizer_step
// CHECK-NEXT: fsdp.return %[[LOSS]] : tensor<f32>
