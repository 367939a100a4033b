// The encoders' ops (BERT, ViT): bidirectional nn.attention and exact GELU
// (nn.gelu {approximate = "none"}) parse, verify and print back the same way,
// in the custom and in the generic form; the training step gives them
// nn.attention_grad and an nn.gelu_grad of the same form. The default form,
// tanh, is elided in the custom form; the generic form shows it, as the
// parser fills in a default-valued attribute.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: fsdp-opt %s --fsdp-training-step | FileCheck %s --check-prefix=GRAD
// RUN: fsdp-opt %s --fsdp-training-step --mlir-print-op-generic | FileCheck %s --check-prefix=GRAD-GENERIC

// GENERIC: "nn.attention"(%{{.*}}, %{{.*}}, %{{.*}}) <{module = "encoder.layer.0.attention", num_heads = 4 : i64, num_kv_heads = 2 : i64}> : (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
// GENERIC: "nn.gelu"(%{{.*}}) <{approximate = "none", module = "encoder.layer.0.intermediate"}> : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
// GENERIC: "nn.gelu"(%{{.*}}) <{approximate = "tanh", module = "encoder.layer.0.output"}> : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
// GENERIC: "nn.gelu"(%{{.*}}) <{approximate = "tanh", module = "encoder.layer.0.output2"}> : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
// GRAD-GENERIC: "nn.gelu_grad"(%{{.*}}, %{{.*}}) <{approximate = "none", module = "encoder.layer.0.intermediate"}> : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
// GRAD-GENERIC: "nn.attention_grad"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{module = "encoder.layer.0.attention", num_heads = 4 : i64, num_kv_heads = 2 : i64}> : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)

// CHECK-LABEL: nn.graph @encoder
nn.graph @encoder(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model_type = "bert", block_prefix = "encoder.layer", num_blocks = 1 : i64, max_seq_len = 8 : i64} {
  %wte = nn.param "embeddings.word_embeddings.weight" : tensor<32x16xf32>
  %wk = nn.param "encoder.layer.0.attention.key.weight" : tensor<8x16xf32>
  %h = nn.embedding %tokens, %wte : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
  %k = nn.linear out_in %h, %wk : (tensor<?x?x16xf32>, tensor<8x16xf32>) -> tensor<?x?x8xf32>
  // CHECK: %[[A:[0-9]+]] = nn.attention %{{.*}}, %[[K:[0-9]+]], %[[K]] {module = "encoder.layer.0.attention", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  %a = nn.attention %h, %k, %k {module = "encoder.layer.0.attention", num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[G:[0-9]+]] = nn.gelu %[[A]] {approximate = "none", module = "encoder.layer.0.intermediate"} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  %g = nn.gelu %a {approximate = "none", module = "encoder.layer.0.intermediate"} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  // An explicit "tanh" is the default, printed without it.
  // CHECK-NEXT: %[[T:[0-9]+]] = nn.gelu %[[G]] {module = "encoder.layer.0.output"} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  %t = nn.gelu %g {approximate = "tanh", module = "encoder.layer.0.output"} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  // CHECK-NEXT: nn.gelu %[[T]] {module = "encoder.layer.0.output2"} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  %t2 = nn.gelu %t {module = "encoder.layer.0.output2"} : tensor<?x?x16xf32> -> tensor<?x?x16xf32>
  %logits = nn.linear out_in %t2, %wte {module = "cls.predictions.decoder"} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x32xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<f32>
  nn.return %loss : tensor<f32>
}

// Each gradient op has its forward's form; the attention's is
// nn.attention_grad, never the causal one.
// GRAD-NOT: causal_attention
// GRAD: %[[T2G:[0-9]+]] = nn.gelu_grad %{{.*}}, %{{.*}} {module = "encoder.layer.0.output2"}
// GRAD-NEXT: %[[TG:[0-9]+]] = nn.gelu_grad %[[T2G]], %{{.*}} {module = "encoder.layer.0.output"}
// GRAD-NEXT: %[[GG:[0-9]+]] = nn.gelu_grad %[[TG]], %{{.*}} {approximate = "none", module = "encoder.layer.0.intermediate"}
// GRAD-NEXT: %query_grad, %key_grad, %value_grad = nn.attention_grad %[[GG]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {module = "encoder.layer.0.attention", num_heads = 4 : i64, num_kv_heads = 2 : i64}
// GRAD-NOT: causal_attention
