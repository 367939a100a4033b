//===- CostModel.cpp ------------------------------------------------------===//
#include "planner/CostModel.h"

#include "planner/Buffers.h"
#include "planner/Import/JsonReader.h"
#include "runtime/TraceFormat.h"
#include "support/InputFile.h"
#include <map>

#include <cmath>
#include <fstream>
#include <iterator>

using namespace mlir;
using namespace fsdp;
using nlohmann::json;

std::string fsdp::loadCluster(const std::string &path, Cluster &c) {
  std::string text;
  std::string err =
      support::readRegularFile(path, support::kMaxJsonBytes, "cluster description", &text);
  if (!err.empty())
    return err;
  // The importers' reader: every error names the line and column of the
  // value it is about.
  ImportError error;
  JsonReader r(text, path, error);
  auto failed = [&]() {
    std::string s = path;
    if (error.line)
      s += ":" + std::to_string(error.line) + ":" + std::to_string(error.col);
    return s + ": " + error.message;
  };
  if (!r.parse())
    return failed();
  if (!r.root().is_object()) {
    r.fail({}, "a cluster description must be a JSON object, but this is " +
                   JsonReader::describe(r.root()));
    return failed();
  }
  c.reserved.clear();
  c.reservedBytes = 0;
  // What the file does not give is unknown, not the defaults' (the host).
  c.hostLink = {0, 0, 1};
  c.hostMemoryBytes = 0;
  c.hostAdamwRate = 0;
  auto format = r.getString({"format"}, std::string());
  auto version = format ? r.getInt({"version"}, int64_t(0), INT64_MIN) : std::nullopt;
  if (!version)
    return failed();
  if (*format != "fsdp-cluster" || *version != 1) {
    r.fail(*format != "fsdp-cluster" ? JsonPath{"format"} : JsonPath{"version"},
           "not an fsdp-cluster file of version 1");
    return failed();
  }
  auto name = r.getString({"name"});
  auto ranks = name ? r.getInt({"ranks_per_node"}) : std::nullopt;
  auto cores = ranks ? r.getInt({"cores"}, int64_t(0), 0) : std::nullopt;
  auto memory = cores ? r.getInt({"memory_bytes"}, std::nullopt, 0) : std::nullopt;
  if (!memory)
    return failed();
  auto device = r.getString({"device"}, std::string("cpu"));
  if (!device)
    return failed();
  if (*device != "cpu" && *device != "cuda") {
    r.fail({"device"}, "device must be \"cpu\" or \"cuda\", but is \"" + *device + "\"");
    return failed();
  }
  // What a process needs beyond the plan: 0, or an object of parts, each
  // {"bytes": N, "source": "..."}; a figure without its parts and sources
  // is refused.
  if (const json *reserved = r.get({"reserved_bytes"}, false); reserved && !reserved->is_null()) {
    if (reserved->is_number_integer() && reserved->get<int64_t>() == 0) {
      // nothing reserved (a CPU file)
    } else if (!reserved->is_object()) {
      r.fail({"reserved_bytes"},
             "reserved_bytes must be 0 or an object of parts, each {\"bytes\": N, \"source\": "
             "\"...\"}, but is " +
                 JsonReader::describe(*reserved));
      return failed();
    } else {
      for (auto it = reserved->begin(); it != reserved->end(); ++it) {
        JsonPath p = {"reserved_bytes", it.key()};
        if (!it->is_object()) {
          r.fail(p, JsonReader::pathStr(p) +
                        " must be an object {\"bytes\": N, \"source\": \"...\"}, but is " +
                        JsonReader::describe(*it));
          return failed();
        }
        for (auto f = it->begin(); f != it->end(); ++f)
          if (f.key() != "bytes" && f.key() != "source") {
            r.fail(p + JsonPath{f.key()}, "unknown field '" + f.key() + "' in " +
                                              JsonReader::pathStr(p) + " (bytes, source)");
            return failed();
          }
        auto bytes = r.getInt(p + JsonPath{"bytes"}, std::nullopt, 0);
        auto source = bytes ? r.getString(p + JsonPath{"source"}) : std::nullopt;
        if (!source)
          return failed();
        if (source->find_first_not_of(" \t\n") == std::string::npos) {
          r.fail(p + JsonPath{"source"}, JsonReader::pathStr(p + JsonPath{"source"}) +
                                             " must say where the figure comes from, but is empty");
          return failed();
        }
        if (*bytes > INT64_MAX - c.reservedBytes) {
          r.fail(p + JsonPath{"bytes"}, "reserved_bytes' parts sum past 2^63");
          return failed();
        }
        c.reserved.push_back({it.key(), *source, *bytes});
        c.reservedBytes += *bytes;
      }
    }
    if (*memory > 0 && c.reservedBytes >= *memory) {
      r.fail({"reserved_bytes"}, "reserved_bytes' parts sum to " + std::to_string(c.reservedBytes) +
                                     " bytes, which leaves nothing of memory_bytes " +
                                     std::to_string(*memory) + " for the plan");
      return failed();
    }
  }
  c.device = *device;
  c.name = *name;
  c.ranksPerNode = *ranks;
  c.cores = *cores;
  c.memoryBytes = *memory;

  // A rate is positive; an efficiency a fraction in (0, 1]; a time >= 0.
  enum Kind { Rate, Efficiency, Time, RateOrZero, Fraction };
  auto number = [&](const JsonPath &p, double &out, Kind kind,
                    std::optional<double> def = std::nullopt) {
    auto x = r.getNumber(p, def);
    if (!x)
      return false;
    bool ok = kind == Rate         ? *x > 0
              : kind == Efficiency ? *x > 0 && *x <= 1
              : kind == Fraction   ? *x >= 0 && *x < 1
                                   : *x >= 0;
    if (!ok)
      return r.fail(p, JsonReader::pathStr(p) +
                           (kind == Rate         ? " must be positive"
                            : kind == Efficiency ? " must lie in (0, 1]"
                            : kind == Fraction   ? " must lie in [0, 1)"
                            : kind == Time       ? " must not be negative"
                                                 : " must not be negative (0: not limiting)") +
                           ", but is " + json(*x).dump());
    out = *x;
    return true;
  };
  bool ok = number({"compute", "f32_flops"}, c.f32Flops, Rate) &&
            number({"compute", "bf16_flops"}, c.bf16Flops, Rate) &&
            number({"compute", "matmul_efficiency"}, c.matmulEfficiency, Efficiency) &&
            number({"compute", "memory_bandwidth"}, c.memoryBandwidth, Rate) &&
            number({"compute", "memory_efficiency"}, c.memoryEfficiency, Efficiency) &&
            number({"compute", "op_overhead_s"}, c.opOverheadS, Time) &&
            number({"compute", "vector_flops"}, c.vectorFlops, RateOrZero, 0.0) &&
            number({"compute", "parallel_efficiency"}, c.parallelEfficiency, Efficiency, 1.0) &&
            number({"compute", "comm_interference"}, c.commInterference, Fraction, 0.0);
  for (auto [link, key] : {std::pair<Link *, const char *>{&c.intraNode, "intra_node"},
                           std::pair<Link *, const char *>{&c.interNode, "inter_node"}})
    ok = ok && number({key, "bandwidth"}, link->bandwidth, Rate) &&
         number({key, "latency_s"}, link->latencyS, Time) &&
         number({key, "efficiency"}, link->efficiency, Efficiency);
  // Per-op efficiencies: an object of known keys, each a fraction.
  if (ok && r.get({"compute", "op_efficiency"}, false)) {
    const json *o = r.get({"compute", "op_efficiency"});
    if (!o->is_object()) {
      r.fail({"compute", "op_efficiency"},
             "compute.op_efficiency must be an object, but is " + JsonReader::describe(*o));
      return failed();
    }
    std::pair<const char *, double *> keys[] = {
        {"attention_forward", &c.opEfficiency.attentionForward},
        {"attention_backward", &c.opEfficiency.attentionBackward},
        {"norm", &c.opEfficiency.norm},
        {"elementwise", &c.opEfficiency.elementwise},
        {"loss", &c.opEfficiency.loss}};
    for (auto it = o->begin(); it != o->end() && ok; ++it) {
      double *field = nullptr;
      for (auto [key, f] : keys)
        if (it.key() == key)
          field = f;
      if (!field) {
        r.fail({"compute", "op_efficiency", it.key()},
               "unknown op kind '" + it.key() +
                   "' in compute.op_efficiency (attention_forward, attention_backward, "
                   "norm, elementwise, loss)");
        return failed();
      }
      ok = number({"compute", "op_efficiency", it.key()}, *field, Efficiency);
    }
  }
  // The host (--offload): optional, but whole where given.
  if (ok && r.get({"host_link"}, false))
    ok = number({"host_link", "bandwidth"}, c.hostLink.bandwidth, Rate) &&
         number({"host_link", "latency_s"}, c.hostLink.latencyS, Time) &&
         number({"host_link", "efficiency"}, c.hostLink.efficiency, Efficiency);
  if (ok && r.get({"host"}, false)) {
    ok = number({"host", "adamw_elements_per_s"}, c.hostAdamwRate, Rate);
    auto bytes = ok ? r.getInt({"host", "memory_bytes"}, std::nullopt, 1) : std::nullopt;
    if (!bytes)
      return failed();
    c.hostMemoryBytes = *bytes;
  }
  if (ok && (r.get({"host_link"}, false) != nullptr) != (r.get({"host"}, false) != nullptr)) {
    r.fail({r.get({"host_link"}, false) ? "host_link" : "host"},
           "host_link and host come together: the link to the host's memory, and that memory "
           "with its AdamW rate");
    return failed();
  }
  if (ok) {
    auto nics = r.getInt({"inter_node", "nics"}, int64_t(1), 1);
    if (!nics)
      return failed();
    c.interNode.nics = *nics;
  }
  if (!ok)
    return failed();
  // Measured matmul rates: [m, k, n, FLOP/s], all positive.
  const json *rates = r.get({"compute", "gemm_rates"}, false);
  if (rates && !rates->is_null()) {
    if (!rates->is_array()) {
      r.fail({"compute", "gemm_rates"},
             "compute.gemm_rates must be an array of [m, k, n, FLOP/s], but is " +
                 JsonReader::describe(*rates));
      return failed();
    }
    for (size_t i = 0; i < rates->size(); ++i) {
      JsonPath p = {"compute", "gemm_rates", std::to_string(i)};
      if (!(*rates)[i].is_array() || (*rates)[i].size() != 4) {
        r.fail(p, JsonReader::pathStr(p) + " must be [m, k, n, FLOP/s], but is " +
                      JsonReader::describe((*rates)[i]));
        return failed();
      }
      Cluster::GemmRate g;
      double *fields[] = {&g.m, &g.k, &g.n, &g.rate};
      for (size_t f = 0; f < 4; ++f)
        if (!number(p + JsonPath{std::to_string(f)}, *fields[f], Rate))
          return failed();
      c.gemmRates.push_back(g);
    }
  }
  return "";
}

Cluster fsdp::defaultCluster() {
  Cluster c;
  c.name = "cpu-local (defaults; run fsdp-calibrate for this machine's figures)";
  c.ranksPerNode = 1024;
  c.cores = 2;
  c.memoryBytes = 24LL << 30;
  c.f32Flops = c.bf16Flops = 100e9;
  c.matmulEfficiency = 0.8;
  c.memoryBandwidth = 10e9;
  c.memoryEfficiency = 1.0;
  c.opOverheadS = 2e-6;
  c.intraNode = c.interNode = {5e9, 5e-6, 1.0};
  // A CPU rank's host pool is more of the same memory: the copies are
  // memcpy (read and write at memory_bandwidth), AdamW reads 16 and writes
  // 12 bytes an element.
  c.hostLink = {5e9, 2e-6, 1.0};
  c.hostMemoryBytes = c.memoryBytes;
  c.hostAdamwRate = 10e9 / 28;
  return c;
}

Link fsdp::groupLink(const Cluster &c, int64_t groupSize, int64_t ranksPerGroupPerNode,
                     int64_t concurrentPerNode) {
  if (groupSize <= ranksPerGroupPerNode)
    return c.intraNode;
  // Across nodes: NCCL's channels each take a NIC, so a ring's crossing
  // moves at the NICs' sum (nccl-tests' bus bandwidth: 85-96% of it on
  // nodes of four 200 Gb/s NICs, the `efficiency`), shared by the groups
  // crossing at once and capped by the node's own link.
  Link l = c.interNode;
  double nicShare = (double)c.interNode.nics / (double)std::max<int64_t>(1, concurrentPerNode);
  double across = c.interNode.bandwidth * c.interNode.efficiency * std::max(nicShare, 1e-9);
  double within = c.intraNode.bandwidth * c.intraNode.efficiency;
  l.bandwidth = std::min(across, within);
  l.efficiency = 1;
  l.nics = 1;
  return l;
}

double fsdp::collectiveSeconds(CollectiveKind kind, double bytes, int64_t n, const Link &link) {
  if (n <= 1)
    return 0;
  double bw = link.bandwidth * link.efficiency;
  double steps = n - 1;
  switch (kind) {
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
    // nccl-tests: busbw = algbw (n-1)/n
    return steps * link.latencyS + bytes * steps / n / bw;
  case CollectiveKind::AllReduce: {
    // Ring: busbw = algbw 2(n-1)/n. Tree: the same volume, log-depth latency.
    double ring = 2 * steps * link.latencyS + bytes * 2 * steps / n / bw;
    double tree = 2 * std::ceil(std::log2((double)n)) * link.latencyS + bytes * 2 * steps / n / bw;
    return std::min(ring, tree);
  }
  }
  return 0;
}

namespace {

struct OpCost {
  double flops = 0, bytes = 0;
  double vectorFlops = 0; // element-wise arithmetic (exp, tanh, statistics)
  bool matmul = false;
};

// The (query, key) pairs causal attention computes: S (S+1) / 2, or with a
// sliding window W < S (a query sees itself and W-1 keys before it)
// W (W+1) / 2 + (S - W) W.
double attendedPairs(int64_t S, int64_t window) {
  double s = S;
  if (window <= 0 || window >= S)
    return s * (s + 1) / 2;
  double w = window;
  return w * (w + 1) / 2 + (s - w) * w;
}

// Element-wise arithmetic per element, counting a transcendental function
// as about 10 operations; the kernels' loops have these shapes.
double elementFlops(Operation *op) {
  if (isa<nn::GeluOp>(op))
    return 20;
  if (isa<nn::GeluGradOp>(op))
    return 30;
  if (isa<nn::SiluMulOp>(op))
    return 15;
  if (isa<nn::SiluMulGradOp>(op))
    return 25;
  if (isa<nn::LayerNormOp, nn::RMSNormOp>(op))
    return 8;
  if (isa<nn::LayerNormGradOp, nn::RMSNormGradOp>(op))
    return 16;
  if (isa<nn::RopeOp>(op))
    return 20;
  if (isa<nn::CrossEntropyOp>(op))
    return 20; // per logit: max, exp, sum
  if (isa<nn::CrossEntropyGradOp>(op))
    return 45; // and the softmax written back
  if (isa<nn::MoeRouteOp>(op))
    return 20; // per router logit: the softmax, and the top-k scans
  if (isa<nn::MoeRouteGradOp>(op))
    return 30;
  if (isa<nn::MoeCombineOp>(op))
    return 2; // per packed element: a multiply-add
  if (isa<nn::MoeCombineGradOp>(op))
    return 4;
  return 0;
}

// An activation's sequence: the run's S, or the length the model fixes
// (ViT's class token and patches).
int64_t seqOf(Value v, int64_t B, int64_t S) { return concreteShape(v.getType(), B, S)[1]; }

int64_t numel(Value v, int64_t B, int64_t S) {
  int64_t n = 1;
  for (int64_t d : concreteShape(v.getType(), B, S))
    n *= d;
  return n;
}

// The kind of op whose efficiency applies (Cluster::OpEfficiency).
enum class OpKind { Matmul, AttentionForward, AttentionBackward, Norm, Loss, Elementwise };

/// Whether tensor parallelism split `op` over the tp ranks: an attention
/// (split by heads), or a linear of a cut weight (read through its cast).
bool splitByTp(Operation *op) {
  auto step = op->getParentOfType<plan::StepOp>();
  if (!step || step.getTpOr1() < 2)
    return false;
  if (isa<nn::CausalAttentionOp, nn::AttentionOp, nn::CausalAttentionGradOp, nn::AttentionGradOp>(
          op))
    return true;
  // Sequence parallelism: an op on the rank's part of the tokens.
  auto parted = [](Type t) {
    auto rt = dyn_cast<RankedTensorType>(t);
    return rt && rt.getEncoding();
  };
  if (llvm::any_of(op->getOperandTypes(), parted) || llvm::any_of(op->getResultTypes(), parted))
    return true;
  for (Value v : op->getOperands()) {
    if (auto c = v.getDefiningOp<plan::CastOp>())
      v = c.getParam();
    if (auto p = v.getDefiningOp<nn::ParamOp>(); p && p.getTpDim())
      return true;
  }
  return false;
}

OpKind opKind(Operation *op) {
  if (isa<nn::LinearOp, nn::LinearGradInputOp, nn::LinearGradWeightOp, nn::MoeLinearOp,
          nn::MoeLinearGradInputOp, nn::MoeLinearGradWeightOp>(op))
    return OpKind::Matmul;
  if (isa<nn::CausalAttentionOp, nn::AttentionOp>(op))
    return OpKind::AttentionForward;
  if (isa<nn::CausalAttentionGradOp, nn::AttentionGradOp>(op))
    return OpKind::AttentionBackward;
  if (isa<nn::LayerNormOp, nn::RMSNormOp, nn::LayerNormGradOp, nn::RMSNormGradOp>(op))
    return OpKind::Norm;
  if (isa<nn::CrossEntropyOp, nn::CrossEntropyGradOp>(op))
    return OpKind::Loss;
  return OpKind::Elementwise;
}

// The fraction of the memory bandwidth an op of this kind sustains.
double bandwidthEfficiency(const Cluster &c, OpKind kind) {
  double e = kind == OpKind::Norm          ? c.opEfficiency.norm
             : kind == OpKind::Loss        ? c.opEfficiency.loss
             : kind == OpKind::Elementwise ? c.opEfficiency.elementwise
                                           : 0;
  return e > 0 ? e : c.memoryEfficiency;
}

// A linear's (or its gradients') product: rows of the activation by the
// weight read as its matrix, [in, out] or [out, in], an out_in weight of more
// dimensions [out, d1, ..., dk] read flat (ViT's patch kernel). The rows are
// the activation's, B x S for most, B for a linear after first_token.
struct LinearGemm {
  double rows, in, out;
  double groups = 1; // moe_linear's experts: `rows` in `groups` products
};
std::optional<LinearGemm> linearGemm(Operation *op, int64_t B, int64_t S) {
  Value w, act;
  bool inOut;
  if (auto l = dyn_cast<nn::LinearOp>(op))
    w = l.getWeight(), act = l.getInput(), inOut = l.getLayout() == nn::WeightLayout::in_out;
  else if (auto l = dyn_cast<nn::LinearGradInputOp>(op))
    w = l.getWeight(), act = l.getResult(), inOut = l.getLayout() == nn::WeightLayout::in_out;
  else if (auto l = dyn_cast<nn::LinearGradWeightOp>(op))
    w = l.getResult(), act = l.getInput(), inOut = l.getLayout() == nn::WeightLayout::in_out;
  else if (isa<nn::MoeLinearOp, nn::MoeLinearGradInputOp, nn::MoeLinearGradWeightOp>(op)) {
    // The k*T routed rows over the E experts' [out, in] weights: k of E
    // experts' FLOPs per token, priced as E products of the balanced
    // share of the rows (what a uniform routing gives).
    bool dw = isa<nn::MoeLinearGradWeightOp>(op);
    w = dw ? op->getResult(0) : op->getOperand(2);
    act = isa<nn::MoeLinearGradInputOp>(op) ? op->getResult(0) : op->getOperand(dw ? 1 : 0);
    auto shape = cast<RankedTensorType>(w.getType()).getShape();
    LinearGemm g;
    g.in = (double)shape[1], g.out = (double)shape[0];
    g.rows = g.in > 0 ? (double)numel(act, B, S) / g.in : 0;
    g.groups = dw ? (double)op->getNumResults() : (double)(op->getNumOperands() - 2);
    return g;
  } else
    return std::nullopt;
  auto shape = cast<RankedTensorType>(w.getType()).getShape();
  double trailing = 1;
  for (int64_t d : shape.drop_front())
    trailing *= (double)d;
  LinearGemm g;
  g.in = inOut ? (double)shape[0] : trailing;
  g.out = inOut ? (double)shape[1] : (double)shape[0];
  g.rows = g.in > 0 ? (double)numel(act, B, S) / g.in : 0;
  return g;
}

OpCost opCost(Operation *op, int64_t B, int64_t S) {
  OpCost c;
  for (Value v : op->getOperands())
    if (isa<RankedTensorType>(v.getType()))
      c.bytes += tensorBytes(v.getType(), B, S);
  for (Value v : op->getResults())
    if (isa<RankedTensorType>(v.getType()))
      c.bytes += tensorBytes(v.getType(), B, S);
  if (auto g = linearGemm(op, B, S)) {
    c.flops = 2.0 * g->rows * g->in * g->out;
    c.matmul = true;
  } else if (isa<nn::CausalAttentionOp, nn::AttentionOp, nn::CausalAttentionGradOp,
                 nn::AttentionGradOp>(op)) {
    // Forward: QKᵀ and PV over the (query, key) pairs attended, 4 B H Dh a
    // pair, and a softmax (an exp and a few operations) over every score.
    // Backward: recomputed scores, dP, dQ, dK, dV, five products over the
    // pairs, and the softmax again with its gradient. Causal attention
    // attends attendedPairs; bidirectional attention every S x S pair.
    bool fwd = isa<nn::CausalAttentionOp, nn::AttentionOp>(op);
    Value q = fwd ? op->getOperand(0) : op->getOperand(1);
    int64_t width = cast<RankedTensorType>(q.getType()).getShape().back();
    int64_t heads = op->getAttrOfType<IntegerAttr>("num_heads").getInt();
    auto window = op->getAttrOfType<IntegerAttr>("window");
    int64_t Sq = seqOf(q, B, S); // a fixed sequence (ViT) or the plan's
    double pairs = isa<nn::AttentionOp, nn::AttentionGradOp>(op)
                       ? (double)Sq * Sq
                       : attendedPairs(Sq, window ? window.getInt() : 0);
    c.flops = (fwd ? 4.0 : 10.0) * B * width * pairs;
    c.vectorFlops = (fwd ? 15.0 : 25.0) * B * heads * pairs;
    c.matmul = true;
  } else if (auto e = dyn_cast<nn::EmbeddingGradOp>(op)) {
    c.bytes += tensorBytes(e.getResult().getType(), B, S); // zeroing the table
  } else if (double per = elementFlops(op)) {
    c.vectorFlops = per * (double)numel(op->getOperand(0), B, S);
  }
  return c;
}

// Seconds for an m x k by k x n matmul: at the rate of the nearest measured
// shape (in log space) where there are measurements.
// `efficiency` (0: matmul_efficiency) applies without measured rates.
double gemmSeconds(const Cluster &c, double m, double k, double n, bool bf16,
                   double efficiency = 0) {
  double flops = 2 * m * k * n;
  if (flops <= 0)
    return 0;
  if (c.gemmRates.empty())
    return flops /
           ((bf16 ? c.bf16Flops : c.f32Flops) * (efficiency > 0 ? efficiency : c.matmulEfficiency));
  double bestDist = 1e300, rate = 0;
  for (const auto &r : c.gemmRates) {
    double d = std::pow(std::log(m / r.m), 2) + std::pow(std::log(k / r.k), 2) +
               std::pow(std::log(n / r.n), 2);
    if (d < bestDist) {
      bestDist = d;
      rate = r.rate;
    }
  }
  return flops / rate;
}

// Matmul seconds of an op, by its shapes: linears as one product, attention
// as the products on 64-row query tiles the kernels make.
double matmulSeconds(Operation *op, const Cluster &c, int64_t B, int64_t S, bool bf16) {
  if (auto g = linearGemm(op, B, S); g && g->groups > 1) { // moe_linear: E products
    double rows = g->rows / g->groups;
    if (isa<nn::MoeLinearOp>(op))
      return g->groups * gemmSeconds(c, rows, g->in, g->out, bf16);
    if (isa<nn::MoeLinearGradInputOp>(op))
      return g->groups * gemmSeconds(c, rows, g->out, g->in, bf16);
    return g->groups * gemmSeconds(c, g->out, rows, g->in, bf16);
  }
  if (auto g = linearGemm(op, B, S)) {
    if (isa<nn::LinearOp>(op)) // [rows, in] x [in, out]
      return gemmSeconds(c, g->rows, g->in, g->out, bf16);
    if (isa<nn::LinearGradInputOp>(op)) // [rows, out] x [out, in]
      return gemmSeconds(c, g->rows, g->out, g->in, bf16);
    // the weight's shape, [in, out] or [out, in], over the rows
    bool inOut = cast<nn::LinearGradWeightOp>(op).getLayout() == nn::WeightLayout::in_out;
    return gemmSeconds(c, inOut ? g->in : g->out, g->rows, inOut ? g->out : g->in, bf16);
  }
  bool fwd = isa<nn::CausalAttentionOp, nn::AttentionOp>(op);
  if (!fwd && !isa<nn::CausalAttentionGradOp, nn::AttentionGradOp>(op))
    return 0;
  // Bidirectional attention: every query tile meets all S keys.
  bool causal = isa<nn::CausalAttentionOp, nn::CausalAttentionGradOp>(op);
  Value q = fwd ? op->getOperand(0) : op->getOperand(1);
  S = seqOf(q, B, S);
  int64_t heads = op->getAttrOfType<IntegerAttr>("num_heads").getInt();
  double dh = (double)cast<RankedTensorType>(q.getType()).getShape().back() / heads;
  // With a sliding window W, a tile of t rows from i0 meets at most t+W-1 keys.
  auto windowAttr = op->getAttrOfType<IntegerAttr>("window");
  double window = windowAttr && windowAttr.getInt() > 0 ? (double)windowAttr.getInt() : 0;
  // Query tile i (64 rows, the last maybe fewer) meets the keys up to its
  // end. Up to kExactTiles tiles each is priced; past that (sequences longer
  // than 64K tokens) consecutive tiles are priced in kExactTiles equal runs,
  // each as its middle tile times its length: the keys grow linearly along a
  // run, so the sum moves by far less than the rates' own accuracy, and the
  // walk stays bounded however long the sequence.
  constexpr int64_t kExactTiles = 1024;
  // Attention's kernels sustain their own fraction of peak (FlashAttention
  // on H100 reaches far less of it than a GEMM does).
  double eff = fwd ? c.opEfficiency.attentionForward : c.opEfficiency.attentionBackward;
  auto tileSeconds = [&](double t, double keys) {
    if (window > 0)
      keys = std::min(keys, t + window - 1);
    double qk = gemmSeconds(c, t, dh, keys, bf16, eff), pv = gemmSeconds(c, t, keys, dh, bf16, eff);
    return fwd ? qk + pv
               : 2 * qk + gemmSeconds(c, t, keys, dh, bf16, eff) +
                     2 * gemmSeconds(c, keys, t, dh, bf16, eff);
  };
  int64_t full = S / 64, rest = S % 64;
  double total = rest ? tileSeconds(rest, S) : 0;
  if (!causal)
    return (total + full * tileSeconds(64, S)) * B * heads;
  int64_t runs = std::min(full, kExactTiles);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t first = full * r / runs, end = full * (r + 1) / runs; // tiles [first, end)
    double middle = (first + end - 1) / 2.0;
    total += (end - first) * tileSeconds(64, 64 * (middle + 1));
  }
  return total * B * heads;
}

} // namespace

namespace {
/// One micro-step and the optimizer of a planned module, as predict()
/// describes; with `last` false, a micro-step before a step's last: without
/// the replica groups' all-reduces (which sum the step's shards once) and,
/// under grad_sync = last, without its reduce-scatters, each with the waits
/// for it; with `gather` false without its gathers and their waits (one
/// after the first under reshard_after_backward = false).
Prediction simulate(ModuleOp module, const Cluster &c, int64_t gradAccum, bool last, bool gather) {
  Prediction p;
  plan::StepOp step = getStep(module);
  int64_t B = step.getMicroBatch().value_or(1), S = step.getSeqLen().value_or(1);
  int64_t world = step.getWorldSizeOr1(), group = step.getShardSizeOr1();
  // Tensor parallelism: tp consecutive ranks (within a node) share a
  // micro-batch; the strategy's groups are of the dp = world / tp ranks of
  // a tp index, so a node holds ranksPerNode / tp of each and tp groups of
  // each kind cross nodes from it at once.
  const int64_t tp = step.getTpOr1(), dp = world / tp;
  const int64_t dpPerNode = std::max<int64_t>(1, c.ranksPerNode / tp);
  // Matmuls and attention run at the compute dtype's rate (bf16: the
  // device's bf16 rate); element-wise work moves its operands' bytes, which
  // their types give.
  bool bf16 = step.getComputeDtypeOrF32() == plan::Dtype::BF16;
  bool syncLast = step.syncsAtLastMicroStep();
  // Ranks sharing a node's cores (CPU ranks as threads) slow each other.
  double share = 1;
  if (c.cores > 0) {
    double ranks = (double)std::min(world, c.ranksPerNode);
    share = std::max(1.0, ranks / (double)c.cores);
    if (ranks > 1) // side by side, each core runs slower than alone
      share /= c.parallelEfficiency;
  }
  // Shard groups are consecutive ranks: one crosses nodes only when it is
  // larger than a node, and then alone. Replica groups take every group-th
  // rank: a node holds ranksPerNode / group of each (at least one) and
  // min(group, ranksPerNode) of them cross nodes at once.
  const Link shardLink = groupLink(c, group, dpPerNode, tp);
  // reshard_after_forward = N: groups of N consecutive ranks, within a shard
  // group, so within a node whenever N fits in one.
  const int64_t reshard = step.getReshardSizeOr0();
  const Link reshardLink = groupLink(c, std::max<int64_t>(1, reshard), dpPerNode, tp);
  int64_t replicas = dp / std::max<int64_t>(1, group);
  const Link replicaLink =
      dp > dpPerNode
          ? groupLink(c, replicas, std::max<int64_t>(1, dpPerNode / std::max<int64_t>(1, group)),
                      std::min(group, dpPerNode) * tp)
          : c.intraNode;
  auto byParam = unitsByParam(module);
  auto byName = unitsByName(module);
  StringRef prefix = step.getBlockPrefix().value_or("");
  Operation *bwdStart = backwardStart(step);

  // Live bytes at each op, from the buffers' lifetimes, for memory counters.
  std::vector<int64_t> live;
  if (auto model = collectBuffers(module, B, S); succeeded(model)) {
    std::vector<int64_t> delta(model->numPositions + 1, 0);
    for (const Buffer &b : model->buffers) {
      if (b.host) // the device's memory only
        continue;
      delta[b.start] += b.bytes;
      delta[b.end + 1] -= b.bytes;
    }
    int64_t sum = 0;
    for (int64_t k = 0; k < model->numPositions; ++k)
      live.push_back(sum += delta[k]);
  }
  int64_t position = -1;

  double tc = 0, tm = 0, exposed = 0, compute = 0, comm = 0;
  double phaseStart = 0;
  bool inOptimizer = false, inBackward = false;
  DenseMap<Value, double> done;
  // The comm stream's busy intervals, in order (they do not overlap), and
  // the first that may still overlap compute.
  std::vector<std::pair<double, double>> busy;
  size_t firstBusy = 0;
  // Seconds of [from, to) during which a collective is in flight.
  auto commOverlap = [&](double from, double to) {
    while (firstBusy < busy.size() && busy[firstBusy].second <= from)
      ++firstBusy;
    double sum = 0;
    for (size_t i = firstBusy; i < busy.size() && busy[i].first < to; ++i)
      sum += std::max(0.0, std::min(to, busy[i].second) - std::max(from, busy[i].first));
    return sum;
  };
  double forwardFlops = 0;

  for (Operation &op : step.getBody().front()) {
    ++position;
    if (position < (int64_t)live.size() && !inOptimizer)
      p.liveBytes.push_back({tc, live[position]});
    if (&op == bwdStart)
      inBackward = true;
    if (isa<plan::GradNormOp>(op) && !inOptimizer) {
      // The micro-step ends when both streams are done.
      p.microStepTimeS = std::max(tc, tm);
      p.computeS = compute;
      p.commS = comm;
      p.exposedCommS = exposed;
      inOptimizer = true;
      tc = tm = phaseStart = p.microStepTimeS;
    }
    const char *phase = inOptimizer ? "optimizer" : inBackward ? "backward" : "forward";
    auto addEvent = [&](StringRef name, int stream, double start, double dur) {
      TraceEvent e;
      e.name = name.str();
      e.unit = unitNameOf(&op, byParam, prefix);
      e.phase = phase;
      if (auto m = op.getAttrOfType<StringAttr>("module"))
        e.module = m.getValue().str();
      e.stream = stream;
      e.start = start;
      e.duration = dur;
      p.events.push_back(e);
    };

    if (!inOptimizer) {
      // A collective this micro-step does not make, or a wait for one.
      Operation *made = &op;
      if (auto w = dyn_cast<plan::WaitOp>(op))
        made = w.getEvent().getDefiningOp();
      if (made && ((!last && isa<plan::AllReduceOp>(made)) ||
                   (!last && syncLast && isa<plan::ReduceScatterOp>(made)) ||
                   (!gather && isa<plan::AllGatherOp>(made))))
        continue;
    }
    if (isa<plan::AllGatherOp, plan::ReduceScatterOp, plan::AllReduceOp, plan::GradNormOp>(op)) {
      plan::UnitOp u = unitOfOp(&op, byName);
      double seconds = 0;
      if (auto g = dyn_cast<plan::AllGatherOp>(op)) {
        bool overReshard = g.getGroup() == plan::Group::reshard;
        seconds = collectiveSeconds(
            CollectiveKind::AllGather, u.getPaddedNumel() * (double)collectiveElementBytes(&op),
            overReshard ? reshard : group, overReshard ? reshardLink : shardLink);
        // offload all: the rank's shard copied in from the host first, on
        // the same stream.
        if (!overReshard && step.offloadsParams() && c.hostLink.bandwidth > 0)
          seconds += c.hostLink.latencyS + u.getShardNumel() * (double)collectiveElementBytes(&op) /
                                               (c.hostLink.bandwidth * c.hostLink.efficiency);
      } else if (isa<plan::ReduceScatterOp>(op)) {
        double bytes = u.getPaddedNumel() * (double)collectiveElementBytes(&op);
        seconds = group > 1
                      ? collectiveSeconds(CollectiveKind::ReduceScatter, bytes, group, shardLink)
                      : 2 * bytes / (c.memoryBandwidth * c.memoryEfficiency);
      } else if (auto ar = dyn_cast<plan::AllReduceOp>(op)) {
        seconds = ar.getGroup() == plan::Group::tp
                      ? collectiveSeconds(CollectiveKind::AllReduce, tpPartialShardNumel(u) * 4.0,
                                          tp, c.intraNode)
                      : collectiveSeconds(CollectiveKind::AllReduce, u.getShardNumel() * 4.0,
                                          replicas, replicaLink);
      } else {
        double bytes = 0;
        for (plan::UnitOp unit : getUnits(module))
          bytes += unit.getShardNumel() * 4.0;
        seconds = bytes / (c.memoryBandwidth * c.memoryEfficiency) * share +
                  collectiveSeconds(CollectiveKind::AllReduce, 8, group, shardLink);
      }
      // Ranks sharing cores share them for the collectives' copies too.
      seconds *= share;
      double start = std::max(tm, tc); // issued at its place in the program
      tm = start + seconds;
      busy.push_back({start, tm});
      comm += seconds;
      done[op.getResult(0)] = tm;
      addEvent(op.getName().stripDialect(), 1, start, seconds);
      continue;
    }
    if (auto w = dyn_cast<plan::WaitOp>(op)) {
      double ready = done.lookup(w.getEvent());
      if (ready > tc) {
        if (!inOptimizer)
          exposed += ready - tc;
        tc = ready;
      }
      continue;
    }
    double seconds = 0;
    if (auto o = dyn_cast<plan::OptimizerStepOp>(op)) {
      plan::UnitOp u = unitOfOp(&op, byName);
      double shard = u ? u.getShardNumel() * 4.0 : 0;
      if (step.offloadsOptimizer()) {
        // The gradient shard to the host, AdamW there, the master shard
        // back (not under offload all: the gathers copy it in, and with
        // bf16 the host rounds its copy), one after another (the device's
        // stream waits for the host).
        const Link &h = c.hostLink;
        double copy = h.bandwidth > 0 ? h.latencyS + shard / (h.bandwidth * h.efficiency) : 0;
        double adamw = c.hostAdamwRate > 0 ? shard / 4 / c.hostAdamwRate : 0;
        seconds = c.opOverheadS + ((step.offloadsParams() ? 1 : 2) * copy + adamw) * share;
      } else {
        double bytes = shard * 7; // read p g m v, write p m v
        seconds = c.opOverheadS + bytes / (c.memoryBandwidth * c.memoryEfficiency) * share;
      }
      addEvent("optimizer_step", 0, tc, seconds);
    } else if (auto a = dyn_cast<plan::AllocOp>(op)) {
      plan::UnitOp u = unitOfOp(&op, byName);
      seconds = u.getPaddedNumel() * (double)gradElementBytes(step) /
                (c.memoryBandwidth * c.memoryEfficiency) * share;
      addEvent("alloc", 0, tc, seconds);
    } else if (isa<plan::ReshardOp>(op)) {
      // Copies this rank's 1/N of the gathered parameters.
      plan::UnitOp u = unitOfOp(&op, byName);
      seconds = c.opOverheadS + 2.0 * u.getPaddedNumel() / reshard * gatheredElementBytes(step) /
                                    (c.memoryBandwidth * c.memoryEfficiency) * share;
      addEvent("reshard", 0, tc, seconds);
    } else if (isa<plan::AccumulateOp>(op)) {
      // Reads the gradients and the f32 sum, writes the sum.
      plan::UnitOp u = unitOfOp(&op, byName);
      seconds = c.opOverheadS + u.getPaddedNumel() * (gradElementBytes(step) + 8.0) /
                                    (c.memoryBandwidth * c.memoryEfficiency) * share;
      addEvent("accumulate", 0, tc, seconds);
    } else if (auto cast = dyn_cast<plan::CastOp>(op); cast && castIsGatheredValue(cast, byParam)) {
      continue; // the gathered value is what compute reads: no instruction
    } else if (isa<plan::TpAllReduceOp, plan::TpAllGatherOp, plan::TpReduceScatterOp>(op)) {
      // The tp group's sum (or gather) of its activations, within the node;
      // compute waits for it (the next op reads it), then the bias is
      // added. Sizes are the whole activation's (nccl-tests' "size").
      Value whole = isa<plan::TpAllGatherOp>(op) ? op.getResult(0) : op.getOperand(0);
      double bytes = tensorBytes(whole.getType(), B, S);
      CollectiveKind kind = isa<plan::TpAllReduceOp>(op)   ? CollectiveKind::AllReduce
                            : isa<plan::TpAllGatherOp>(op) ? CollectiveKind::AllGather
                                                           : CollectiveKind::ReduceScatter;
      seconds = (c.opOverheadS + collectiveSeconds(kind, bytes, tp, c.intraNode)) * share;
      comm += seconds;
      exposed += seconds;
      addEvent(op.getName().stripDialect(), 0, tc, seconds);
      tc += seconds;
      continue;
    } else if (producesTensors(&op)) {
      OpCost cost = opCost(&op, B, S);
      double t = cost.bytes / (c.memoryBandwidth * bandwidthEfficiency(c, opKind(&op)));
      double arithmetic = 0;
      if (cost.matmul)
        arithmetic += matmulSeconds(&op, c, B, S, bf16);
      if (c.vectorFlops > 0)
        arithmetic += cost.vectorFlops / c.vectorFlops;
      t = std::max(t, arithmetic);
      seconds = (c.opOverheadS + t) * share;
      if (c.commInterference > 0)
        seconds += c.commInterference * commOverlap(tc, tc + seconds);
      // Model FLOPs count each once: an op split over the tp ranks (an
      // attention, a linear of a cut weight) did 1/tp of it here; a whole
      // one (the head) did all of it on each of them.
      if (!inBackward && cost.matmul && !op.hasAttr("recompute"))
        forwardFlops += splitByTp(&op) ? cost.flops : cost.flops / tp;
      addEvent(op.getName().stripDialect(), 0, tc, seconds);
    } else {
      continue;
    }
    tc += seconds;
    compute += seconds;
  }
  p.optimizerTimeS = std::max(tc, tm) - phaseStart;
  p.stepTimeS = gradAccum * p.microStepTimeS + p.optimizerTimeS;
  double tokens = (double)B * S * dp * gradAccum; // a tp group shares its micro-batch
  p.tokensPerS = p.stepTimeS > 0 ? tokens / p.stepTimeS : 0;
  // Model FLOPs: forward matmuls and their two backward products, on every
  // rank and micro-step, against every rank's peak for the matmul dtype.
  p.modelFlopsPerStep = 3 * forwardFlops * world * gradAccum;
  double peak = (bf16 ? c.bf16Flops : c.f32Flops) * world;
  p.mfu = p.stepTimeS > 0 ? p.modelFlopsPerStep / p.stepTimeS / peak : 0;

  return p;
}
} // namespace

Prediction fsdp::predict(ModuleOp module, const Cluster &c, int64_t gradAccum) {
  Prediction p = simulate(module, c, gradAccum, /*last=*/true, /*gather=*/true);
  plan::StepOp step = getStep(module);
  bool syncLast = step.syncsAtLastMicroStep(), keep = step.keepsGatheredAcrossMicroSteps();
  bool replicas = step.getWorldSizeOr1() > step.getShardSizeOr1();
  if ((!syncLast && !keep && !replicas) || gradAccum < 2)
    return p;
  // Micro-step m of a step gathers unless gathered parameters are kept and
  // m is not the first; only the last all-reduces across replica groups,
  // and under grad_sync = last only it reduce-scatters. The per-micro-step figures are the step's
  // means, so that gradAccum of them and the optimizer are the step; the trace is the whole
  // micro-step's (p's).
  std::map<std::pair<bool, bool>, Prediction> variant;
  auto of = [&](int64_t m) -> const Prediction & {
    bool gather = !keep || m == 0, last = m + 1 == gradAccum;
    auto it = variant.find({last, gather});
    if (it == variant.end())
      it = variant
               .emplace(std::make_pair(last, gather), simulate(module, c, gradAccum, last, gather))
               .first;
    return it->second;
  };
  // The first, the last, and the gradAccum - 2 alike between them.
  double micro = 0, compute = 0, comm = 0, exposed = 0;
  for (auto [m, times] :
       {std::pair<int64_t, double>{0, 1.0}, {1, (double)(gradAccum - 2)}, {gradAccum - 1, 1.0}}) {
    if (times <= 0)
      continue;
    const Prediction &v = of(m);
    micro += times * v.microStepTimeS;
    compute += times * v.computeS;
    comm += times * v.commS;
    exposed += times * v.exposedCommS;
  }
  double a = (double)gradAccum, before = p.stepTimeS;
  p.microStepTimeS = micro / a;
  p.computeS = compute / a;
  p.commS = comm / a;
  p.exposedCommS = exposed / a;
  p.stepTimeS = micro + p.optimizerTimeS;
  // The same tokens and FLOPs in another time.
  p.tokensPerS = p.stepTimeS > 0 ? p.tokensPerS * before / p.stepTimeS : 0;
  p.mfu = p.stepTimeS > 0 ? p.mfu * before / p.stepTimeS : 0;
  return p;
}

nlohmann::ordered_json fsdp::predictedTrace(const Prediction &p, int64_t worldSize,
                                            int64_t maxRanks) {
  using ojson = nlohmann::ordered_json;
  ojson events = ojson::array();
  int64_t ranks = std::min(worldSize, maxRanks);
  for (int64_t r = 0; r < ranks; ++r) {
    trace::addRankHeader(events, r, "predicted");
    for (const TraceEvent &e : p.events) {
      ojson ev = {{"name", e.name},
                  {"cat", e.phase},
                  {"ph", "X"},
                  {"pid", r},
                  {"tid", e.stream},
                  {"ts", e.start * 1e6},
                  {"dur", e.duration * 1e6},
                  {"args", {{"unit", e.unit}, {"phase", e.phase}}}};
      if (!e.module.empty())
        ev["args"]["module"] = e.module;
      events.push_back(ev);
    }
    for (auto [t, bytes] : p.liveBytes)
      events.push_back({{"name", "memory"},
                        {"ph", "C"},
                        {"pid", r},
                        {"ts", t * 1e6},
                        {"args", {{"live bytes", bytes}}}});
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"kind", "predicted"}, {"world_size", worldSize}, {"step_time_s", p.stepTimeS}}}};
}
