// ViT's ops (nn.class_token, nn.first_token, an out_in nn.linear of a 4-D
// patch kernel) and their gradients parse, verify and print back the same
// way, in the custom and in the generic form.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// GENERIC: "nn.linear"(%{{.*}}, %{{.*}}, %{{.*}}) <{layout = 1 : i32, module = "vit.embeddings.patch_embeddings.projection"}> : (tensor<?x?x12xf32>, tensor<8x3x2x2xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
// GENERIC: "nn.class_token"(%{{.*}}, %{{.*}}, %{{.*}}) <{module = "vit.embeddings"}> : (tensor<?x?x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>) -> tensor<?x5x8xf32>
// GENERIC: "nn.first_token"(%{{.*}}) : (tensor<?x5x8xf32>) -> tensor<?x1x8xf32>
// GENERIC: "nn.first_token_grad"(%{{.*}}) : (tensor<?x1x8xf32>) -> tensor<?x5x8xf32>
// GENERIC: %{{.*}}:3 = "nn.class_token_grad"(%{{.*}}) <{module = "vit.embeddings"}> : (tensor<?x5x8xf32>) -> (tensor<?x?x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>)
// GENERIC: "nn.linear_grad_weight"(%{{.*}}, %{{.*}}) <{layout = 1 : i32}> : (tensor<?x?x8xf32>, tensor<?x?x12xf32>) -> tensor<8x3x2x2xf32>
// GENERIC: "nn.linear_grad_input"(%{{.*}}, %{{.*}}) <{layout = 1 : i32}> : (tensor<?x?x8xf32>, tensor<8x3x2x2xf32>) -> tensor<?x?x12xf32>

// CHECK-LABEL: nn.graph @vit
nn.graph @vit(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "vit", block_prefix = "vit.encoder.layer",
                num_blocks = 0 : i64, max_seq_len = 4 : i64} {
  %pixels = nn.param "pixels" : tensor<16x12xf32>
  %w = nn.param "vit.embeddings.patch_embeddings.projection.weight" : tensor<8x3x2x2xf32>
  %b = nn.param "vit.embeddings.patch_embeddings.projection.bias" : tensor<8xf32>
  %cls = nn.param "vit.embeddings.cls_token" : tensor<1x1x8xf32>
  %pos = nn.param "vit.embeddings.position_embeddings" : tensor<1x5x8xf32>
  %head = nn.param "classifier.weight" : tensor<16x8xf32>
  // CHECK: %[[P:.*]] = nn.embedding
  %p = nn.embedding %tokens, %pixels : (tensor<?x?xi64>, tensor<16x12xf32>) -> tensor<?x?x12xf32>
  // CHECK-NEXT: %[[X:.*]] = nn.linear out_in %[[P]], %vit.embeddings.patch_embeddings.projection.weight, %vit.embeddings.patch_embeddings.projection.bias {module = "vit.embeddings.patch_embeddings.projection"} : (tensor<?x?x12xf32>, tensor<8x3x2x2xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %x = nn.linear out_in %p, %w, %b {module = "vit.embeddings.patch_embeddings.projection"} : (tensor<?x?x12xf32>, tensor<8x3x2x2xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[H:.*]] = nn.class_token %[[X]], %vit.embeddings.cls_token, %vit.embeddings.position_embeddings {module = "vit.embeddings"} : (tensor<?x?x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>) -> tensor<?x5x8xf32>
  %h = nn.class_token %x, %cls, %pos {module = "vit.embeddings"} : (tensor<?x?x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>) -> tensor<?x5x8xf32>
  // CHECK-NEXT: %[[F:.*]] = nn.first_token %[[H]] : tensor<?x5x8xf32> -> tensor<?x1x8xf32>
  %f = nn.first_token %h : tensor<?x5x8xf32> -> tensor<?x1x8xf32>
  %logits = nn.linear out_in %f, %head : (tensor<?x1x8xf32>, tensor<16x8xf32>) -> tensor<?x1x16xf32>
  // CHECK: nn.first_token_grad %{{.*}} : tensor<?x1x8xf32> -> tensor<?x5x8xf32>
  %df = nn.first_token_grad %f : tensor<?x1x8xf32> -> tensor<?x5x8xf32>
  // CHECK-NEXT: %[[DX:.*]], %{{.*}}, %{{.*}} = nn.class_token_grad %{{.*}} {module = "vit.embeddings"} : tensor<?x5x8xf32> -> tensor<?x?x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>
  %dx, %dcls, %dpos = nn.class_token_grad %df {module = "vit.embeddings"} : tensor<?x5x8xf32> -> tensor<?x?x8xf32>, tensor<1x1x8xf32>, tensor<1x5x8xf32>
  // CHECK-NEXT: nn.linear_grad_weight out_in %[[DX]], %[[P]] : (tensor<?x?x8xf32>, tensor<?x?x12xf32>) -> tensor<8x3x2x2xf32>
  %dw = nn.linear_grad_weight out_in %dx, %p : (tensor<?x?x8xf32>, tensor<?x?x12xf32>) -> tensor<8x3x2x2xf32>
  // CHECK-NEXT: nn.linear_grad_input out_in %[[DX]], %vit.embeddings.patch_embeddings.projection.weight : (tensor<?x?x8xf32>, tensor<8x3x2x2xf32>) -> tensor<?x?x12xf32>
  %dp = nn.linear_grad_input out_in %dx, %w : (tensor<?x?x8xf32>, tensor<8x3x2x2xf32>) -> tensor<?x?x12xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x1x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}
