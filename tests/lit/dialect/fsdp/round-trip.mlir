// Every fsdp op parses, verifies and prints back the same way, in the custom
// and in the generic form: wrap units with their flat layout, the training
// step with its collectives, events, waits, buffer lifetimes, gradients and
// optimizer updates.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Every attribute of a unit and of the step is declared: a property, the
// arena offsets the memory plan adds (shard_offset, ...) and the plan's
// settings (strategy, world_size, ...) included.
// GENERIC: "fsdp.unit"() <{exp_avg_offset = 144 : i64, exp_avg_sq_offset = 216 : i64, grad_shard_offset = 72 : i64, index = 0 : i64, module = "", numel = 144 : i64, offsets = array<i64: 0, 128, 136>, padded_numel = 144 : i64, params = ["transformer.wte.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"], shard_offset = 0 : i64, shard_size = 2 : i64, sizes = array<i64: 128, 8, 8>, sym_name = "root"}> : () -> ()
// GENERIC: "fsdp.unit"() <{exp_avg_offset = 300 : i64, exp_avg_sq_offset = 306 : i64, grad_shard_offset = 294 : i64, index = 1 : i64, module = "transformer.h.0", numel = 16 : i64, offsets = array<i64: 0, 8>, padded_numel = 18 : i64, params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"], shard_offset = 288 : i64, shard_size = 3 : i64, sizes = array<i64: 8, 8>, sym_name = "block0"}> : () -> ()
// GENERIC: "fsdp.step"() <{backward_prefetch = #fsdp<backward_prefetch post>, function_type = (tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<f32>, memory = #fsdp.memory<peak_bytes = 4096, live_peak_bytes = 4000, params_bytes = 720, grads_bytes = 720, optimizer_bytes = 1440, unsharded_bytes = 600, activations_bytes = 520, fragmentation_bytes = 96>, model = "gpt2-tiny", param_dtype = #fsdp<dtype bf16>, shard_size = 3 : i64, strategy = #fsdp<strategy hybrid_shard>, sym_name = "train_step", world_size = 6 : i64}> ({
// GENERIC-NEXT: ^bb0(%{{.*}}: tensor<?x?xi64>, %{{.*}}: tensor<?x?xi64>):
// GENERIC: %[[G:.*]] = "fsdp.all_gather"() <{offset = 1024 : i64, unit = @root}> : () -> !fsdp.event
// GENERIC-NEXT: "fsdp.wait"(%[[G]]) : (!fsdp.event) -> ()
// GENERIC-NEXT: "fsdp.all_gather"() <{dtype = #fsdp<dtype bf16>, offset = 1600 : i64, unit = @block0}> : () -> !fsdp.event
// GENERIC: "fsdp.free"() <{kind = 0 : i32, unit = @block0}> : () -> ()
// GENERIC: "fsdp.alloc"() <{kind = 1 : i32, offset = 2048 : i64, unit = @root}> : () -> ()
// GENERIC: "fsdp.grad"(%{{.*}}) <{param = "transformer.ln_f.weight"}> : (tensor<8xf32>) -> ()
// GENERIC: "fsdp.alloc"() <{kind = 1 : i32, unit = @block0}> : () -> ()
// GENERIC: "fsdp.reduce_scatter"() <{unit = @block0}> : () -> !fsdp.event
// GENERIC: "fsdp.free"() <{kind = 1 : i32, unit = @block0}> : () -> ()
// GENERIC: "fsdp.reduce_scatter"() <{dtype = #fsdp<dtype bf16>, unit = @root}> : () -> !fsdp.event
// GENERIC: "fsdp.all_reduce"() <{unit = @block0}> : () -> !fsdp.event
// GENERIC: "fsdp.all_reduce"() <{unit = @root}> : () -> !fsdp.event
// GENERIC: "fsdp.grad_norm"() : () -> !fsdp.event
// GENERIC: "fsdp.optimizer_step"() <{unit = @root}> : () -> ()
// GENERIC: "fsdp.return"(%{{.*}}) : (tensor<f32>) -> ()
// GENERIC-NEXT: }) : () -> ()
// GENERIC: "fsdp.grad_norm"() : () -> !fsdp.event
// GENERIC: "fsdp.optimizer_step"() : () -> ()
// GENERIC: "fsdp.step"() <{function_type = (tensor<4xf32>) -> (), sym_name = "no_result"}> ({
// GENERIC-NEXT: ^bb0(%{{.*}}: tensor<4xf32>):
// GENERIC-NEXT: "fsdp.return"() : () -> ()

// Two wrap units with every attribute the planner gives them. The root holds
// 144 elements, a multiple of its 2 shards; block0's 16 are padded to 18 for
// its 3 shards.

// CHECK-LABEL: module {
// CHECK-NEXT: fsdp.unit @root {exp_avg_offset = 144 : i64, exp_avg_sq_offset = 216 : i64, grad_shard_offset = 72 : i64, index = 0 : i64, module = "", numel = 144 : i64, offsets = array<i64: 0, 128, 136>, padded_numel = 144 : i64, params = ["transformer.wte.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"], shard_offset = 0 : i64, shard_size = 2 : i64, sizes = array<i64: 128, 8, 8>}
// CHECK-NEXT: fsdp.unit @block0 {exp_avg_offset = 300 : i64, exp_avg_sq_offset = 306 : i64, grad_shard_offset = 294 : i64, index = 1 : i64, module = "transformer.h.0", numel = 16 : i64, offsets = array<i64: 0, 8>, padded_numel = 18 : i64, params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"], shard_offset = 288 : i64, shard_size = 3 : i64, sizes = array<i64: 8, 8>}
fsdp.unit @root {index = 0 : i64, module = "",
                 params = ["transformer.wte.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"],
                 offsets = array<i64: 0, 128, 136>, sizes = array<i64: 128, 8, 8>,
                 numel = 144 : i64, padded_numel = 144 : i64, shard_size = 2 : i64,
                 shard_offset = 0 : i64, grad_shard_offset = 72 : i64,
                 exp_avg_offset = 144 : i64, exp_avg_sq_offset = 216 : i64}
fsdp.unit @block0 {index = 1 : i64, module = "transformer.h.0",
                   params = ["transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"],
                   offsets = array<i64: 0, 8>, sizes = array<i64: 8, 8>,
                   numel = 16 : i64, padded_numel = 18 : i64, shard_size = 3 : i64,
                   shard_offset = 288 : i64, grad_shard_offset = 294 : i64,
                   exp_avg_offset = 300 : i64, exp_avg_sq_offset = 306 : i64}

// A hybrid-shard step (3 ranks per shard group, 2 replicas): gathers with
// their buffer offsets and shard-group ranks, waits on their events, frees of
// parameters after the forward and again after the backward, gradient buffers
// allocated before their first gradient, reduce-scatters over the shard group,
// all-reduces over the replica group, the global norm and per-unit updates.

// CHECK-NEXT: fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> attributes {backward_prefetch = #fsdp<backward_prefetch post>, memory = #fsdp.memory<peak_bytes = 4096, live_peak_bytes = 4000, params_bytes = 720, grads_bytes = 720, optimizer_bytes = 1440, unsharded_bytes = 600, activations_bytes = 520, fragmentation_bytes = 96>, model = "gpt2-tiny", param_dtype = #fsdp<dtype bf16>, shard_size = 3 : i64, strategy = #fsdp<strategy hybrid_shard>, world_size = 6 : i64} {
fsdp.step @train_step(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32>
    attributes {model = "gpt2-tiny", strategy = #fsdp<strategy hybrid_shard>, world_size = 6 : i64, shard_size = 3 : i64,
                param_dtype = #fsdp<dtype bf16>, backward_prefetch = #fsdp<backward_prefetch post>,
                memory = #fsdp.memory<peak_bytes = 4096, live_peak_bytes = 4000, params_bytes = 720, grads_bytes = 720,
                                      optimizer_bytes = 1440, unsharded_bytes = 600, activations_bytes = 520, fragmentation_bytes = 96>} {
  // CHECK-NEXT: %transformer.wte.weight = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  // CHECK-NEXT: %transformer.h.0.ln_1.weight = nn.param "transformer.h.0.ln_1.weight" : tensor<8xf32>
  // CHECK-NEXT: %transformer.h.0.ln_1.bias = nn.param "transformer.h.0.ln_1.bias" : tensor<8xf32>
  // CHECK-NEXT: %transformer.ln_f.weight = nn.param "transformer.ln_f.weight" : tensor<8xf32>
  // CHECK-NEXT: %transformer.ln_f.bias = nn.param "transformer.ln_f.bias" : tensor<8xf32>
  %wte = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  %ln_w = nn.param "transformer.h.0.ln_1.weight" : tensor<8xf32>
  %ln_b = nn.param "transformer.h.0.ln_1.bias" : tensor<8xf32>
  %lnf_w = nn.param "transformer.ln_f.weight" : tensor<8xf32>
  %lnf_b = nn.param "transformer.ln_f.bias" : tensor<8xf32>

  // Forward.
  // CHECK-NEXT: %[[G_ROOT:[0-9]+]] = fsdp.all_gather @root {offset = 1024 : i64}
  // CHECK-NEXT: fsdp.wait %[[G_ROOT]]
  // CHECK-NEXT: %[[G_BLOCK:[0-9]+]] = fsdp.all_gather @block0 in bf16 {offset = 1600 : i64}
  // CHECK-NEXT: %[[H:[0-9]+]] = nn.embedding %tokens, %transformer.wte.weight {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: fsdp.wait %[[G_BLOCK]]
  // CHECK-NEXT: %[[LN:[0-9]+]] = nn.layer_norm %[[H]], %transformer.h.0.ln_1.weight, %transformer.h.0.ln_1.bias {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: fsdp.free params @block0
  // CHECK-NEXT: %[[LNF:[0-9]+]] = nn.layer_norm %[[LN]], %transformer.ln_f.weight, %transformer.ln_f.bias {eps = 1.000000e-05 : f64, module = "transformer.ln_f"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[LOGITS:[0-9]+]] = nn.linear out_in %[[LNF]], %transformer.wte.weight {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[LOSS:[0-9]+]] = nn.cross_entropy %[[LOGITS]], %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  %g_root = fsdp.all_gather @root {offset = 1024 : i64}
  fsdp.wait %g_root
  %g_block = fsdp.all_gather @block0 in bf16 {offset = 1600 : i64}
  %h = nn.embedding %tokens, %wte {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  fsdp.wait %g_block
  %ln = nn.layer_norm %h, %ln_w, %ln_b {eps = 1.0e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  fsdp.free params @block0
  %lnf = nn.layer_norm %ln, %lnf_w, %lnf_b {eps = 1.0e-05 : f64, module = "transformer.ln_f"} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %logits = nn.linear out_in %lnf, %wte {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>

  // Backward.
  // CHECK-NEXT: %[[DLOGITS:[0-9]+]] = nn.cross_entropy_grad %[[LOGITS]], %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[DLNF:[0-9]+]] = nn.linear_grad_input out_in %[[DLOGITS]], %transformer.wte.weight {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[DHEAD:[0-9]+]] = nn.linear_grad_weight out_in %[[DLOGITS]], %[[LNF]] {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
  // CHECK-NEXT: fsdp.alloc grads @root {offset = 2048 : i64}
  // CHECK-NEXT: %input_grad, %weight_grad, %bias_grad = nn.layer_norm_grad %[[DLNF]], %[[LN]], %transformer.ln_f.weight {eps = 1.000000e-05 : f64, module = "transformer.ln_f"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: fsdp.grad "transformer.ln_f.weight", %weight_grad : tensor<8xf32>
  // CHECK-NEXT: fsdp.grad "transformer.ln_f.bias", %bias_grad : tensor<8xf32>
  // CHECK-NEXT: %[[G_BLOCK2:[0-9]+]] = fsdp.all_gather @block0 in bf16 {offset = 1600 : i64}
  // CHECK-NEXT: fsdp.wait %[[G_BLOCK2]]
  // CHECK-NEXT: fsdp.alloc grads @block0{{$}}
  // CHECK-NEXT: %input_grad_0, %weight_grad_1, %bias_grad_2 = nn.layer_norm_grad %input_grad, %[[H]], %transformer.h.0.ln_1.weight {eps = 1.000000e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: fsdp.free params @block0
  // CHECK-NEXT: fsdp.grad "transformer.h.0.ln_1.weight", %weight_grad_1 : tensor<8xf32>
  // CHECK-NEXT: fsdp.grad "transformer.h.0.ln_1.bias", %bias_grad_2 : tensor<8xf32>
  // CHECK-NEXT: %[[RS_BLOCK:[0-9]+]] = fsdp.reduce_scatter @block0
  // CHECK-NEXT: %[[DEMB:[0-9]+]] = nn.embedding_grad %input_grad_0, %tokens {module = "transformer.wte"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
  // CHECK-NEXT: %[[DWTE:[0-9]+]] = nn.add %[[DHEAD]], %[[DEMB]] {module = "transformer.wte"} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  // CHECK-NEXT: fsdp.grad "transformer.wte.weight", %[[DWTE]] : tensor<16x8xf32>
  // CHECK-NEXT: fsdp.free params @root
  // CHECK-NEXT: fsdp.wait %[[RS_BLOCK]]
  // CHECK-NEXT: fsdp.free grads @block0
  // CHECK-NEXT: %[[RS_ROOT:[0-9]+]] = fsdp.reduce_scatter @root in bf16{{$}}
  // CHECK-NEXT: fsdp.wait %[[RS_ROOT]]
  // CHECK-NEXT: fsdp.free grads @root
  %dlogits = nn.cross_entropy_grad %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  %dlnf = nn.linear_grad_input out_in %dlogits, %wte {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %dhead = nn.linear_grad_weight out_in %dlogits, %lnf {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
  fsdp.alloc grads @root {offset = 2048 : i64}
  %dln, %dlnf_w, %dlnf_b = nn.layer_norm_grad %dlnf, %ln, %lnf_w {eps = 1.0e-05 : f64, module = "transformer.ln_f"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  fsdp.grad "transformer.ln_f.weight", %dlnf_w : tensor<8xf32>
  fsdp.grad "transformer.ln_f.bias", %dlnf_b : tensor<8xf32>
  %g_block2 = fsdp.all_gather @block0 in bf16 {offset = 1600 : i64}
  fsdp.wait %g_block2
  fsdp.alloc grads @block0
  %dh, %dln_w, %dln_b = nn.layer_norm_grad %dln, %h, %ln_w {eps = 1.0e-05 : f64, module = "transformer.h.0.ln_1"} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>)
  fsdp.free params @block0
  fsdp.grad "transformer.h.0.ln_1.weight", %dln_w : tensor<8xf32>
  fsdp.grad "transformer.h.0.ln_1.bias", %dln_b : tensor<8xf32>
  %rs_block = fsdp.reduce_scatter @block0
  %demb = nn.embedding_grad %dh, %tokens {module = "transformer.wte"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
  %dwte = nn.add %dhead, %demb {module = "transformer.wte"} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  fsdp.grad "transformer.wte.weight", %dwte : tensor<16x8xf32>
  fsdp.free params @root
  fsdp.wait %rs_block
  fsdp.free grads @block0
  %rs_root = fsdp.reduce_scatter @root in bf16
  fsdp.wait %rs_root
  fsdp.free grads @root

  // Optimizer.
  // CHECK-NEXT: %[[AR_BLOCK:[0-9]+]] = fsdp.all_reduce @block0
  // CHECK-NEXT: %[[AR_ROOT:[0-9]+]] = fsdp.all_reduce @root{{$}}
  // CHECK-NEXT: fsdp.wait %[[AR_BLOCK]]
  // CHECK-NEXT: fsdp.wait %[[AR_ROOT]]
  // CHECK-NEXT: %[[NORM:[0-9]+]] = fsdp.grad_norm
  // CHECK-NEXT: fsdp.wait %[[NORM]]
  // CHECK-NEXT: fsdp.optimizer_step @root
  // CHECK-NEXT: fsdp.optimizer_step @block0
  // CHECK-NEXT: fsdp.return %[[LOSS]] : tensor<f32>
  // CHECK-NEXT: }
  %ar_block = fsdp.all_reduce @block0
  %ar_root = fsdp.all_reduce @root
  fsdp.wait %ar_block
  fsdp.wait %ar_root
  %norm = fsdp.grad_norm
  fsdp.wait %norm
  fsdp.optimizer_step @root
  fsdp.optimizer_step @block0
  fsdp.return %loss : tensor<f32>
}

// The step as fsdp-training-step builds it, before there are units: one
// optimizer step for every parameter, no collectives but the norm.

// CHECK-NEXT: fsdp.step @before_units(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
fsdp.step @before_units(%tokens: tensor<?x?xi64>, %targets: tensor<?x?xi64>) -> tensor<f32> {
  // CHECK-NEXT: %transformer.wte.weight = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  // CHECK-NEXT: %[[H:[0-9]+]] = nn.embedding %tokens, %transformer.wte.weight {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[LOGITS:[0-9]+]] = nn.linear out_in %[[H]], %transformer.wte.weight {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[LOSS:[0-9]+]] = nn.cross_entropy %[[LOGITS]], %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  // CHECK-NEXT: %[[DLOGITS:[0-9]+]] = nn.cross_entropy_grad %[[LOGITS]], %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  // CHECK-NEXT: %[[DH:[0-9]+]] = nn.linear_grad_input out_in %[[DLOGITS]], %transformer.wte.weight {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK-NEXT: %[[DHEAD:[0-9]+]] = nn.linear_grad_weight out_in %[[DLOGITS]], %[[H]] {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
  // CHECK-NEXT: %[[DEMB:[0-9]+]] = nn.embedding_grad %[[DH]], %tokens {module = "transformer.wte"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
  // CHECK-NEXT: %[[DWTE:[0-9]+]] = nn.add %[[DHEAD]], %[[DEMB]] {module = "transformer.wte"} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  // CHECK-NEXT: fsdp.grad "transformer.wte.weight", %[[DWTE]] : tensor<16x8xf32>
  // CHECK-NEXT: %[[NORM:[0-9]+]] = fsdp.grad_norm{{$}}
  // CHECK-NEXT: fsdp.wait %[[NORM]]
  // CHECK-NEXT: fsdp.optimizer_step{{$}}
  // CHECK-NEXT: fsdp.return %[[LOSS]] : tensor<f32>
  // CHECK-NEXT: }
  %wte = nn.param "transformer.wte.weight" : tensor<16x8xf32>
  %h = nn.embedding %tokens, %wte {module = "transformer.wte"} : (tensor<?x?xi64>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %logits = nn.linear out_in %h, %wte {module = "lm_head"} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %loss = nn.cross_entropy %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<f32>
  %dlogits = nn.cross_entropy_grad %logits, %targets : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
  %dh = nn.linear_grad_input out_in %dlogits, %wte {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %dhead = nn.linear_grad_weight out_in %dlogits, %h {module = "lm_head"} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
  %demb = nn.embedding_grad %dh, %tokens {module = "transformer.wte"} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<16x8xf32>
  %dwte = nn.add %dhead, %demb {module = "transformer.wte"} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  fsdp.grad "transformer.wte.weight", %dwte : tensor<16x8xf32>
  %norm = fsdp.grad_norm
  fsdp.wait %norm
  fsdp.optimizer_step
  fsdp.return %loss : tensor<f32>
}

// A step without results returns nothing; only a step's two arguments
// (tokens, targets) are given names.

// CHECK-NEXT: fsdp.step @no_result(%arg0: tensor<4xf32>) {
// CHECK-NEXT: fsdp.return{{$}}
// CHECK-NEXT: }
// CHECK-NEXT: }
fsdp.step @no_result(%x: tensor<4xf32>) {
  fsdp.return
}
