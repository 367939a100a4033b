//===- Program.cpp - the program format: its ops, their calls, writing it -===//
//
// The op list (Ops.def), each instruction's decoded call, the issue order of
// a phase, and the writer lowering uses; the loader is ProgramLoad.cpp, each
// op's checks OpChecks.cpp.
//
//===----------------------------------------------------------------------===//
#include "runtime/Program.h"

#include <nlohmann/json.hpp>

#include <set>

using namespace fsdp::program;

int64_t Tensor::numel() const {
  for (int64_t d : shape)
    if (d == 0)
      return 0; // before a product of large dimensions could overflow
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}
int64_t Tensor::bytes() const {
  return numel() * (dtype == DType::I64 ? 8 : dtype == DType::BF16 ? 2 : 4);
}

namespace {
const OpInfo kOps[] = {
#define FSDP_OP(Name, json, stream, minIn, maxIn, minOut, maxOut)                                  \
  {Op::Name, json, OpStream::stream, minIn, maxIn, minOut, maxOut},
#include "runtime/Ops.def"
};
} // namespace

const OpInfo &fsdp::program::opInfo(Op op) { return kOps[static_cast<size_t>(op)]; }

const char *fsdp::program::opName(Op op) { return opInfo(op).name; }

const char *fsdp::program::targetName(Target t) { return t == Target::Cuda ? "cuda" : "cpu"; }

std::optional<Target> fsdp::program::parseTarget(const std::string &name) {
  if (name == "cpu")
    return Target::Cpu;
  if (name == "cuda")
    return Target::Cuda;
  return std::nullopt;
}

const char *fsdp::program::offloadName(Offload o) {
  return o == Offload::All ? "all" : o == Offload::Optimizer ? "optimizer" : "none";
}

std::optional<Offload> fsdp::program::parseOffload(const std::string &name) {
  for (Offload o : {Offload::None, Offload::Optimizer, Offload::All})
    if (name == offloadName(o))
      return o;
  return std::nullopt;
}

const OpInfo *fsdp::program::findOp(const std::string &name) {
  for (const OpInfo &info : kOps)
    if (name == info.name)
      return &info;
  return nullptr;
}

Call fsdp::program::decodeCall(const Program &p, const Instruction &i) {
  Call c;
  auto shape = [&](size_t k, bool out) -> const std::vector<int64_t> & {
    return p.tensors[(out ? i.out : i.in)[k]].shape;
  };
  auto numel = [&](size_t k, bool out) { return p.tensors[(out ? i.out : i.in)[k]].numel(); };
  auto last = [&](size_t k, bool out) { return shape(k, out).empty() ? 1 : shape(k, out).back(); };
  auto rows = [](int64_t elements, int64_t width) { return width > 0 ? elements / width : 0; };
  const bool In = false, Out = true;
  switch (i.op) {
  case Op::PositionIds:
  case Op::TokenTypeIds:
    c.B = shape(0, In)[0], c.S = shape(0, In)[1];
    break;
  case Op::Embedding: // ids, table -> out
    c.n = numel(0, In), c.D = last(1, In);
    break;
  case Op::EmbeddingGrad: // dout, ids -> dtable [V, D]
    c.n = numel(1, In), c.V = shape(0, Out)[0], c.D = last(0, Out);
    break;
  case Op::Linear:
  case Op::LinearGradInput:
  case Op::LinearGradWeight: {
    const auto &w = i.op == Op::LinearGradWeight ? shape(0, Out) : shape(1, In);
    c.layoutInOut = i.layoutInOut;
    // An out_in weight [out, d1, ..., dk] is read flat as [out, d1 * ... * dk].
    int64_t trailing = 1;
    for (size_t k = 1; k < w.size(); ++k)
      trailing *= w[k];
    c.in = i.layoutInOut ? w[0] : trailing, c.out = i.layoutInOut ? w[1] : w[0];
    // Rows by the input's elements (forward) or the output gradient's.
    c.n = i.op == Op::Linear ? rows(numel(0, In), c.in) : rows(numel(0, In), c.out);
    c.bias = i.op == Op::Linear && i.in.size() == 3;
    break;
  }
  case Op::BiasGrad:
  case Op::LayerNorm: // rows of the first input's last dimension
    c.D = last(0, In), c.n = rows(numel(0, In), c.D);
    break;
  case Op::RMSNorm: // x, w: rows of the weight's length (a head of x for Qwen3's q/k norms)
    c.D = numel(1, In), c.n = rows(numel(0, In), c.D);
    break;
  case Op::LayerNormGrad: // dy, x, w: rows of x
    c.D = last(1, In), c.n = rows(numel(1, In), c.D);
    break;
  case Op::RMSNormGrad: // dy, x, w: rows of the weight's length
    c.D = numel(2, In), c.n = rows(numel(1, In), c.D);
    break;
  case Op::Rope:
    c.B = shape(0, In)[0], c.S = shape(0, In)[1], c.H = i.numHeads;
    c.Dh = i.numHeads > 0 ? shape(0, In)[2] / i.numHeads : 0;
    break;
  case Op::Split:
  case Op::Concat: {
    bool split = i.op == Op::Split;
    c.parts = int64_t(split ? i.out.size() : i.in.size());
    c.W = last(0, split);
    c.n = rows(numel(0, split), c.W);
    break;
  }
  case Op::CausalAttention:
  case Op::CausalAttentionGrad:
  case Op::Attention:
  case Op::AttentionGrad: {
    const bool fwd = i.op == Op::CausalAttention || i.op == Op::Attention;
    const auto &q = shape(fwd ? 0 : 1, In);
    c.B = q[0], c.S = q[1], c.H = i.numHeads, c.KV = i.numKvHeads, c.window = i.window;
    c.causal = i.op == Op::CausalAttention || i.op == Op::CausalAttentionGrad;
    c.Dh = i.numHeads > 0 ? q[2] / i.numHeads : 0;
    break;
  }
  case Op::Gelu:
  case Op::GeluGrad:
    c.n = numel(0, In), c.approximate = i.approximate;
    break;
  case Op::SiluMul:
  case Op::SiluMulGrad:
  case Op::Add:
    c.n = numel(0, In);
    break;
  case Op::ClassToken:     // x [B, S-1, D], cls, positions -> [B, S, D]
  case Op::FirstTokenGrad: // dy [B, 1, D] -> dx [B, S, D]
    c.B = shape(0, Out)[0], c.S = shape(0, Out)[1], c.D = last(0, Out);
    break;
  case Op::ClassTokenGrad: // dy [B, S, D] -> dx, dcls, dpositions
  case Op::FirstToken:     // x [B, S, D] -> [B, 1, D]
    c.B = shape(0, In)[0], c.S = shape(0, In)[1], c.D = last(0, In);
    break;
  case Op::CrossEntropy:
  case Op::CrossEntropyGrad: // logits, targets
    c.n = numel(1, In), c.V = last(0, In);
    break;
  case Op::Cast:
    c.n = numel(0, In), c.castFrom = p.tensors[i.in[0]].dtype;
    break;
  // Tensor parallelism: n the part's elements (all_reduce: the whole's), D
  // the rows' length (the bias's), parts the tp degree (all_reduce: 1).
  case Op::TpAllGather: // part -> whole
  case Op::TpUnchunk:
    c.n = numel(0, In), c.D = last(0, In), c.parts = p.tp;
    break;
  case Op::TpReduceScatter: // whole (, bias) -> part
  case Op::TpChunk:
    c.n = numel(0, Out), c.D = last(0, Out), c.parts = p.tp, c.bias = i.in.size() > 1;
    break;
  case Op::TpAllReduce: // whole (, bias) -> whole
    c.n = numel(0, In), c.D = last(0, In), c.parts = 1, c.bias = i.in.size() > 1;
    break;
  case Op::MoeRoute: // logits [B, S, E] -> weights, experts, slots [B, S, k]
    c.E = last(0, In), c.k = last(0, Out), c.n = rows(numel(0, In), c.E);
    break;
  case Op::MoeRouteGrad: // dweights [B, S, k], logits [B, S, E], experts
    c.E = last(1, In), c.k = last(0, In), c.n = rows(numel(1, In), c.E);
    break;
  case Op::MoePermute: // x [B, S, D], slots [B, S, k] -> [B, S, k, D]
    c.D = last(0, In), c.k = last(1, In), c.n = rows(numel(0, In), c.D);
    break;
  case Op::MoePermuteGrad: // dpacked [B, S, k, D], slots [B, S, k] -> [B, S, D]
    c.D = last(0, In), c.k = last(1, In), c.n = rows(numel(1, In), c.k);
    break;
  case Op::MoeLinear: // x [B, S, k, in], experts [B, S, k], E weights [out, in]
  case Op::MoeLinearGradInput:
    c.E = int64_t(i.in.size()) - 2, c.k = last(1, In), c.n = rows(numel(1, In), c.k);
    if (shape(2, In).size() == 2)
      c.out = shape(2, In)[0], c.in = shape(2, In)[1];
    break;
  case Op::MoeLinearGradWeight: // dy, x, experts -> E weight gradients
    c.E = int64_t(i.out.size()), c.k = last(2, In), c.n = rows(numel(2, In), c.k);
    if (shape(0, Out).size() == 2)
      c.out = shape(0, Out)[0], c.in = shape(0, Out)[1];
    break;
  case Op::MoeCombine: // packed [B, S, k, D], weights, slots [B, S, k] -> [B, S, D]
    c.D = last(0, In), c.k = last(2, In), c.n = rows(numel(2, In), c.k);
    break;
  case Op::MoeCombineGrad: // dy [B, S, D], packed, weights, slots
    c.D = last(0, In), c.k = last(3, In), c.n = rows(numel(3, In), c.k);
    break;
  case Op::MoeAuxLoss: // loss, then each sparse layer's logits [B, S, E]
  case Op::MoeAuxLossGrad: {
    size_t first = i.op == Op::MoeAuxLoss ? 1 : 0;
    c.parts = int64_t(i.in.size() - first), c.k = i.topK;
    if (i.in.size() > first)
      c.E = last(first, In), c.n = rows(numel(first, In), c.E);
    break;
  }
  default:
    break;
  }
  // The kernel's storage type: that of its float tensors, which the loader
  // has checked are of one dtype; a cast's is its output's, and the loss is
  // f32 whatever its logits are.
  // moe_aux_loss's loss in and out are f32 too: its type is its logits'.
  for (const auto *ids : {&i.out, &i.in}) {
    if ((i.op == Op::CrossEntropy || i.op == Op::MoeAuxLoss) && ids == &i.out)
      continue;
    for (int64_t id : *ids)
      if (p.tensors[id].dtype != DType::I64 &&
          !(i.op == Op::MoeAuxLoss && ids == &i.in && id == i.in[0])) {
        c.dtype = p.tensors[id].dtype;
        return c;
      }
  }
  return c;
}

int64_t Program::vocabSize() const {
  for (const Instruction &inst : microStep.compute)
    if (inst.op == Op::CrossEntropy && !inst.in.empty() && inst.in[0] >= 0 &&
        inst.in[0] < (int64_t)tensors.size() && !tensors[inst.in[0]].shape.empty())
      return tensors[inst.in[0]].shape.back();
  return 0;
}

std::string fsdp::program::issueOrder(const Phase &s, std::vector<Slot> &order) {
  order.clear();
  const std::vector<Instruction> *lists[2] = {&s.compute, &s.comm};
  size_t next[2] = {0, 0};
  std::set<int64_t> issued;
  auto blocked = [&](int stream) {
    const Instruction &i = (*lists[stream])[next[stream]];
    return i.op == Op::Wait && !issued.count(i.event);
  };
  while (next[0] < lists[0]->size() || next[1] < lists[1]->size()) {
    bool progressed = false;
    for (int stream : {0, 1})
      while (next[stream] < lists[stream]->size() && !blocked(stream)) {
        const Instruction &i = (*lists[stream])[next[stream]];
        if (i.op == Op::Record)
          issued.insert(i.event);
        order.push_back({stream, next[stream]++});
        progressed = true;
      }
    if (!progressed) {
      std::string why = "deadlock: ";
      for (int stream : {0, 1})
        if (next[stream] < lists[stream]->size()) {
          const Instruction &i = (*lists[stream])[next[stream]];
          if (why.size() > 10)
            why += " while ";
          why += std::string(stream ? "comm" : "compute") + "[" + std::to_string(i.index) +
                 "] waits for event " + std::to_string(i.event);
        }
      return why + "; no record of these events can be issued before these waits";
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Writing (what lowering produces) and comparing
//===----------------------------------------------------------------------===//

namespace {

const char *dtypeText(DType d) {
  return d == DType::I64 ? "i64" : d == DType::BF16 ? "bf16" : "f32";
}

using ojson = nlohmann::ordered_json;

// A rope's scaling: its kind, then the parameters the kind reads.
void writeRopeScaling(ojson &j, const fsdp::support::RopeScaling &s) {
  j[fsdp::support::kRopeScalingKey] = fsdp::support::ropeScalingName(s.kind);
  for (const fsdp::support::RopeScalingField &f : fsdp::support::ropeScalingFields()) {
    if (!fsdp::support::ropeScalingReads(s.kind, f.name))
      continue;
    switch (f.type) {
    case fsdp::support::RopeScalingField::Type::F64:
      j[f.name] = s.*f.f64;
      break;
    case fsdp::support::RopeScalingField::Type::I64:
      j[f.name] = s.*f.i64;
      break;
    case fsdp::support::RopeScalingField::Type::Bool:
      j[f.name] = s.*f.boolean;
      break;
    }
  }
}

} // namespace

const char *fsdp::program::bufferKindName(BufferKind k) {
  switch (k) {
  case BufferKind::Params:
    return "params";
  case BufferKind::Grads:
    return "grads";
  case BufferKind::Resharded:
    return "resharded";
  }
  return "?";
}

namespace {

ojson instructionJson(const Instruction &i) {
  ojson j;
  j["op"] = opName(i.op);
  if (!i.module.empty())
    j["module"] = i.module;
  if (i.op == Op::Alloc || i.op == Op::Free)
    j["kind"] = bufferKindName(i.op == Op::Free ? i.kind : BufferKind::Grads);
  if (i.overReshard)
    j["group"] = "reshard";
  if (i.overTp)
    j["group"] = "tp";
  // The op's attributes, in the order the plan's ops list them.
  switch (i.op) {
  case Op::LayerNorm:
  case Op::LayerNormGrad:
  case Op::RMSNorm:
  case Op::RMSNormGrad:
    j["eps"] = i.eps;
    break;
  case Op::Linear:
  case Op::LinearGradInput:
  case Op::LinearGradWeight:
    j["layout"] = i.layoutInOut ? "in_out" : "out_in";
    break;
  case Op::Rope:
    if (i.inverse)
      j["inverse"] = true;
    if (i.ropeScaling)
      writeRopeScaling(j, *i.ropeScaling);
    j["num_heads"] = i.numHeads;
    j["theta"] = i.theta;
    break;
  case Op::MoeRoute:
  case Op::MoeRouteGrad:
    if (i.normTopkProb)
      j["norm_topk_prob"] = true;
    if (i.op == Op::MoeRoute)
      j["top_k"] = i.topK;
    break;
  case Op::MoeAuxLoss:
  case Op::MoeAuxLossGrad:
    j["coef"] = i.coef;
    j["top_k"] = i.topK;
    break;
  case Op::CausalAttention:
  case Op::CausalAttentionGrad:
  case Op::Attention:
  case Op::AttentionGrad:
    j["num_heads"] = i.numHeads;
    j["num_kv_heads"] = i.numKvHeads;
    if (i.window)
      j["window"] = i.window;
    break;
  case Op::Gelu:
  case Op::GeluGrad:
    if (i.approximate == GeluApproximate::None)
      j["approximate"] = "none";
    break;
  default:
    break;
  }
  const OpInfo &info = opInfo(i.op);
  if (info.maxIn != 0 || info.maxOut != 0 || !i.in.empty() || !i.out.empty()) {
    j["in"] = i.in;
    j["out"] = i.out;
  }
  if (i.op == Op::Record || i.op == Op::Wait)
    j["event"] = i.event;
  if (i.unit >= 0)
    j["unit"] = i.unit;
  if (i.dst >= 0)
    j["dst"] = i.dst;
  if (i.src >= 0)
    j["src"] = i.src;
  if (i.op == Op::Alloc)
    j["zero_from"] = i.zeroFrom;
  if (i.bf16)
    j["dtype"] = "bf16";
  if (!i.phase.empty())
    j["phase"] = i.phase;
  if (i.scratch >= 0) {
    j["scratch"] = i.scratch;
    j["scratch_bytes"] = i.scratchBytes;
  }
  return j;
}

// A JSON list with one element a line, so that a person can read a program
// and a diff shows what changed.
std::string lines(const std::vector<ojson> &items, const char *indent) {
  std::string s = "[";
  for (size_t k = 0; k < items.size(); ++k)
    s += std::string(k ? ",\n" : "\n") + indent + "  " + items[k].dump();
  return s + (items.empty() ? "]" : std::string("\n") + indent + "]");
}

} // namespace

std::string fsdp::program::writeProgram(const Program &p) {
  ojson top;
  top["format"] = kFormat;
  top["version"] = kVersion;
  top["model"] = {{"name", p.modelName}, {"model_type", p.modelType}, {"parameters", p.parameters}};
  if (!p.tiedCopies.empty())
    top["model"]["tied_copies"] = p.tiedCopies;
  if (!p.unusedWeightPrefixes.empty())
    top["model"]["unused_weight_prefixes"] = p.unusedWeightPrefixes;
  // JSON objects, written as objects (the planner checked them).
  if (!p.hfConfig.empty())
    top["model"]["hf_config"] = ojson::parse(p.hfConfig);
  if (!p.generationConfig.empty())
    top["model"]["generation_config"] = ojson::parse(p.generationConfig);
  top["world_size"] = p.worldSize;
  top["strategy"] = p.strategy;
  top["shard_size"] = p.shardSize;
  top["param_dtype"] = p.paramDtype;
  top["reduce_dtype"] = p.reduceDtype;
  top["compute_dtype"] = p.computeDtype;
  top["target"] = targetName(p.target);
  if (p.workspaceOffset >= 0)
    top["workspace"] = {{"offset", p.workspaceOffset}, {"bytes", p.workspaceBytes}};
  top["micro_batch"] = p.microBatch;
  top["seq_len"] = p.seqLen;
  top["arena_bytes"] = p.arenaBytes;
  // The cost model's figures, when the planner computed them.
  if (p.predictedMicroStepS > 0)
    top["predicted_micro_step_s"] = p.predictedMicroStepS;
  if (p.predictedOptimizerS > 0)
    top["predicted_optimizer_s"] = p.predictedOptimizerS;
  if (p.gradAccum > 0)
    top["grad_accum"] = p.gradAccum;
  if (p.syncsAtLastMicroStep()) // every, the default, is written without
    top["grad_sync"] = p.gradSync;
  if (!p.reshardAfterBackward) // as is true
    top["reshard_after_backward"] = false;
  if (p.reshardAfterForward) // as is: none
    top["reshard_after_forward"] = p.reshardAfterForward;
  if (p.tp > 1) { // 1, the default, is written without
    top["tp"] = p.tp;
    top["sequence_parallel"] = p.sequenceParallel;
  }
  if (p.offloadsOptimizer()) { // none, the default, is written without
    top["offload"] = offloadName(p.offload);
    top["host_bytes"] = p.hostBytes;
  }
  if (p.modelFlopsPerMicroStep > 0)
    top["model_flops_per_micro_step"] = p.modelFlopsPerMicroStep;
  if (p.peakFlops > 0)
    top["peak_flops"] = p.peakFlops;
  ojson memory = ojson::object();
  for (const auto &[k, v] : p.memory)
    memory[k] = v;
  top["memory"] = memory;
  top["events"] = p.events;
  // A token program writes no kind: the default, as every program before
  // the field had.
  ojson inputs = ojson::object();
  if (p.inputKind != InputKind::Tokens)
    inputs["kind"] = inputKindName(p.inputKind);
  inputs["tokens"] = p.tokens;
  inputs["targets"] = p.targets;
  if (p.inputKind == InputKind::Images)
    inputs["image"] = {{"height", p.image.height},          {"width", p.image.width},
                       {"channels", p.image.channels},      {"patch_height", p.image.patchHeight},
                       {"patch_width", p.image.patchWidth}, {"classes", p.image.classes}};
  top["inputs"] = inputs;
  top["loss"] = p.loss;
  std::vector<ojson> units, tensors;
  for (const Unit &u : p.units) {
    ojson params = ojson::array();
    for (const Param &prm : u.params) {
      ojson pj = {{"name", prm.name},
                  {"shape", prm.shape},
                  {"offset", prm.offset},
                  {"numel", prm.numel},
                  {"decay", prm.decay}};
      if (prm.tpDim >= 0) { // whole, the default, is written without
        pj["tp_dim"] = prm.tpDim;
        pj["tp_pieces"] = prm.tpPieces;
        pj["tp_sections"] = prm.tpSections;
      }
      if (prm.tpPartial)
        pj["tp_partial"] = true;
      params.push_back(pj);
    }
    ojson unit = {{"name", u.name},
                  {"module", u.module},
                  {"numel", u.numel},
                  {"padded_numel", u.paddedNumel},
                  {"shard_size", u.shardSize},
                  {"shard_numel", u.shardNumel}};
    if (u.shardOffset >= 0) // offload all: the host pool's master copy is the shard
      unit["shard_offset"] = u.shardOffset;
    unit["grad_shard_offset"] = u.gradShardOffset;
    unit["exp_avg_offset"] = u.expAvgOffset;
    unit["exp_avg_sq_offset"] = u.expAvgSqOffset;
    unit["params"] = params;
    units.push_back(unit);
    if (u.accumulatedOffset >= 0)
      units.back()["accumulated_offset"] = u.accumulatedOffset;
    if (u.hostShardOffset >= 0) {
      units.back()["host_shard_offset"] = u.hostShardOffset;
      units.back()["host_grad_offset"] = u.hostGradOffset;
    }
    if (u.hostGatherOffset >= 0)
      units.back()["host_gather_offset"] = u.hostGatherOffset;
  }
  for (size_t k = 0; k < p.tensors.size(); ++k)
    tensors.push_back({{"id", k},
                       {"offset", p.tensors[k].offset},
                       {"shape", p.tensors[k].shape},
                       {"dtype", dtypeText(p.tensors[k].dtype)}});
  std::string out = "{\n";
  for (auto &[k, v] : top.items())
    out += "  \"" + k + "\": " + v.dump() + ",\n";
  out += "  \"units\": " + lines(units, "  ") + ",\n";
  out += "  \"tensors\": " + lines(tensors, "  ") + ",\n";
  std::vector<std::pair<const char *, const Phase *>> phases;
  if (p.keepsGatheredAcrossMicroSteps())
    phases.push_back({"first_micro_step", &p.firstMicroStep});
  phases.push_back({"micro_step", &p.microStep});
  if (p.hasLastMicroStep())
    phases.push_back({"last_micro_step", &p.lastMicroStep});
  phases.push_back({"optimizer", &p.optimizer});
  for (size_t k = 0; k < phases.size(); ++k) {
    std::vector<ojson> compute, comm;
    for (const Instruction &i : phases[k].second->compute)
      compute.push_back(instructionJson(i));
    for (const Instruction &i : phases[k].second->comm)
      comm.push_back(instructionJson(i));
    out += std::string("  \"") + phases[k].first + "\": {\n";
    out += "    \"compute\": " + lines(compute, "    ") + ",\n";
    out += "    \"comm\": " + lines(comm, "    ") + "\n";
    out += k + 1 < phases.size() ? "  },\n" : "  }\n";
  }
  return out + "}\n";
}

bool fsdp::program::operator==(const Tensor &a, const Tensor &b) {
  return a.offset == b.offset && a.shape == b.shape && a.dtype == b.dtype;
}
bool fsdp::program::operator==(const Param &a, const Param &b) {
  return a.name == b.name && a.shape == b.shape && a.offset == b.offset && a.numel == b.numel &&
         a.decay == b.decay && a.tpDim == b.tpDim && a.tpPieces == b.tpPieces &&
         a.tpSections == b.tpSections && a.tpPartial == b.tpPartial;
}
bool fsdp::program::operator==(const Unit &a, const Unit &b) {
  return a.name == b.name && a.module == b.module && a.numel == b.numel &&
         a.paddedNumel == b.paddedNumel && a.shardSize == b.shardSize &&
         a.shardNumel == b.shardNumel && a.shardOffset == b.shardOffset &&
         a.gradShardOffset == b.gradShardOffset && a.expAvgOffset == b.expAvgOffset &&
         a.expAvgSqOffset == b.expAvgSqOffset && a.accumulatedOffset == b.accumulatedOffset &&
         a.hostShardOffset == b.hostShardOffset && a.hostGradOffset == b.hostGradOffset &&
         a.hostGatherOffset == b.hostGatherOffset && a.params == b.params;
}
bool fsdp::program::operator==(const Instruction &a, const Instruction &b) {
  return a.op == b.op && a.in == b.in && a.out == b.out && a.event == b.event && a.unit == b.unit &&
         a.dst == b.dst && a.src == b.src && a.zeroFrom == b.zeroFrom && a.kind == b.kind &&
         a.overReshard == b.overReshard && a.overTp == b.overTp && a.bf16 == b.bf16 &&
         a.layoutInOut == b.layoutInOut && a.eps == b.eps && a.theta == b.theta &&
         a.numHeads == b.numHeads && a.numKvHeads == b.numKvHeads && a.window == b.window &&
         a.inverse == b.inverse && a.approximate == b.approximate &&
         a.ropeScaling == b.ropeScaling && a.topK == b.topK && a.normTopkProb == b.normTopkProb &&
         a.coef == b.coef && a.scratch == b.scratch && a.scratchBytes == b.scratchBytes &&
         a.module == b.module && a.phase == b.phase && a.index == b.index;
}
bool fsdp::program::operator==(const Phase &a, const Phase &b) {
  return a.compute == b.compute && a.comm == b.comm;
}
bool fsdp::program::operator==(const Program &a, const Program &b) {
  return a.modelName == b.modelName && a.modelType == b.modelType && a.strategy == b.strategy &&
         a.hfConfig == b.hfConfig && a.generationConfig == b.generationConfig &&
         a.parameters == b.parameters && a.worldSize == b.worldSize && a.shardSize == b.shardSize &&
         a.microBatch == b.microBatch && a.seqLen == b.seqLen && a.paramDtype == b.paramDtype &&
         a.reduceDtype == b.reduceDtype && a.computeDtype == b.computeDtype &&
         a.target == b.target && a.workspaceOffset == b.workspaceOffset &&
         a.workspaceBytes == b.workspaceBytes && a.arenaBytes == b.arenaBytes &&
         a.predictedPeakBytes == b.predictedPeakBytes && a.memory == b.memory &&
         a.events == b.events && a.predictedMicroStepS == b.predictedMicroStepS &&
         a.predictedOptimizerS == b.predictedOptimizerS && a.gradAccum == b.gradAccum &&
         a.modelFlopsPerMicroStep == b.modelFlopsPerMicroStep && a.peakFlops == b.peakFlops &&
         a.tokens == b.tokens && a.targets == b.targets && a.loss == b.loss &&
         a.inputKind == b.inputKind && a.image == b.image && a.units == b.units &&
         a.tensors == b.tensors && a.gradSync == b.gradSync &&
         a.reshardAfterBackward == b.reshardAfterBackward &&
         a.reshardAfterForward == b.reshardAfterForward && a.tp == b.tp &&
         a.sequenceParallel == b.sequenceParallel && a.offload == b.offload &&
         a.hostBytes == b.hostBytes && a.firstMicroStep == b.firstMicroStep &&
         a.microStep == b.microStep && a.lastMicroStep == b.lastMicroStep &&
         a.optimizer == b.optimizer;
}

int64_t fsdp::program::Param::wholeElement(int64_t e, int64_t t, int64_t tp) const {
  if (!isCut())
    return e;
  // Row-major: the index of dimension tpDim, and the elements before and
  // after it.
  int64_t inner = 1;
  for (size_t d = tpDim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t len = shape[tpDim]; // the piece's extent along tpDim
  int64_t outer = e / (len * inner), i = e / inner % len, rest = e % inner;
  // The piece holds, of each of the sections, its 1/tpPieces part.
  int64_t piece = t / (tp / tpPieces), perSection = len / tpSections;
  int64_t section = i / perSection, within = i % perSection;
  int64_t wholeLen = len * tpPieces, wholeSection = wholeLen / tpSections;
  int64_t wi = section * wholeSection + piece * perSection + within;
  return (outer * wholeLen + wi) * inner + rest;
}

int64_t fsdp::program::Param::pieceElement(int64_t w, int64_t *piece) const {
  *piece = 0;
  if (!isCut())
    return w;
  int64_t inner = 1;
  for (size_t d = tpDim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t len = shape[tpDim], wholeLen = len * tpPieces;
  int64_t outer = w / (wholeLen * inner), wi = w / inner % wholeLen, rest = w % inner;
  int64_t perSection = len / tpSections, wholeSection = wholeLen / tpSections;
  int64_t section = wi / wholeSection, inSection = wi % wholeSection;
  *piece = inSection / perSection;
  int64_t i = section * perSection + inSection % perSection;
  return (outer * len + i) * inner + rest;
}
