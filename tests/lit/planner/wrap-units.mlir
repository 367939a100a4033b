// fsdp-wrap-units alone, on a training step of two blocks: a unit per block
// and a root for the rest (FSDP's transformer wrapping), contiguous units of
// at least N parameters, or one unit; each unit's flat size padded to a
// multiple of the shard size.
// RUN: fsdp-opt %s --fsdp-wrap-units="policy=block shard-size=3" | FileCheck %s --check-prefix=BLOCK
// RUN: fsdp-opt %s --fsdp-wrap-units="policy=size:200 shard-size=2" | FileCheck %s --check-prefix=SIZE
// RUN: fsdp-opt %s --fsdp-wrap-units="policy=none shard-size=7" | FileCheck %s --check-prefix=NONE
// RUN: not fsdp-opt %s --fsdp-wrap-units="policy=layers" 2>&1 | FileCheck %s --check-prefix=BAD

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

// One unit per block, the root first; 256 and 64 elements padded to
// multiples of 3.
// BLOCK-LABEL: fsdp.unit @root {index = 0 : i64, module = "", numel = 256 : i64, offsets = array<i64: 0, 128>, padded_numel = 258 : i64, params = ["emb.weight", "head.weight"], shard_size = 3 : i64, sizes = array<i64: 128, 128>}
// BLOCK-NEXT: fsdp.unit @block0 {index = 1 : i64, module = "blocks.0", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 66 : i64, params = ["blocks.0.fc.weight"], shard_size = 3 : i64, sizes = array<i64: 64>}
// BLOCK-NEXT: fsdp.unit @block1 {index = 2 : i64, module = "blocks.1", numel = 64 : i64, offsets = array<i64: 0>, padded_numel = 66 : i64, params = ["blocks.1.fc.weight"], shard_size = 3 : i64, sizes = array<i64: 64>}
// BLOCK-NEXT: fsdp.step @train_step(

// Units close once they reach 200 elements; the short tail joins the last.
// SIZE-LABEL: fsdp.unit @unit0 {index = 0 : i64, module = "emb,blocks.0-1,head", numel = 384 : i64, offsets = array<i64: 0, 128, 192, 256>, padded_numel = 384 : i64, params = ["emb.weight", "blocks.0.fc.weight", "blocks.1.fc.weight", "head.weight"], shard_size = 2 : i64, sizes = array<i64: 128, 64, 64, 128>}
// SIZE-NEXT: fsdp.step @train_step(

// NONE-LABEL: fsdp.unit @all {index = 0 : i64, module = "", numel = 384 : i64, offsets = array<i64: 0, 128, 192, 256>, padded_numel = 385 : i64, params = ["emb.weight", "blocks.0.fc.weight", "blocks.1.fc.weight", "head.weight"], shard_size = 7 : i64, sizes = array<i64: 128, 64, 64, 128>}
// NONE-NEXT: fsdp.step @train_step(

// BAD: error: unknown wrap policy 'layers'; expected block, experts, size:N or none
