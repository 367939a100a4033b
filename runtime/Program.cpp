//===- Program.cpp - loading and validating a program ---------------------===//
//
// Nothing is executed from a program that has not been checked whole:
// offsets against the arena, operands against the op, events against their
// records. Errors name the instruction: "micro_step.compute[12] (linear)".
//
//===----------------------------------------------------------------------===//
#include "runtime/Program.h"
#include "runtime/kernels/cpu.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>
#include <type_traits>
#include <sys/stat.h>
#include <map>
#include <set>
#include <sstream>

using namespace fsdp::program;
using nlohmann::json;

namespace {
using i128 = __int128;

std::string str(i128 v) {
  if (v < 0)
    return "-" + str(-v);
  std::string s;
  do {
    s.insert(s.begin(), char('0' + (int)(v % 10)));
    v /= 10;
  } while (v > 0);
  return s;
}

// The product of the dimensions, saturated far past any arena (2^100), so that
// a shape of huge dimensions cannot wrap around to a small size.
i128 elements(const std::vector<int64_t> &shape) {
  for (int64_t d : shape)
    if (d == 0)
      return 0;
  i128 n = 1;
  for (int64_t d : shape) {
    n *= d;
    if (n > ((i128)1 << 100) || n < -((i128)1 << 100))
      return n > 0 ? (i128)1 << 100 : -((i128)1 << 100);
  }
  return n;
}

i128 elementBytes(DType d) { return d == DType::I64 ? 8 : d == DType::BF16 ? 2 : 4; }
} // namespace

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
#define FSDP_OP(Name, json, stream, minIn, maxIn, minOut, maxOut)                                \
  {Op::Name, json, OpStream::stream, minIn, maxIn, minOut, maxOut},
#include "runtime/Ops.def"
};
} // namespace

const OpInfo &fsdp::program::opInfo(Op op) { return kOps[static_cast<size_t>(op)]; }

const char *fsdp::program::opName(Op op) { return opInfo(op).name; }

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
    c.in = i.layoutInOut ? w[0] : w[1], c.out = i.layoutInOut ? w[1] : w[0];
    // Rows by the input's elements (forward) or the output gradient's.
    c.n = i.op == Op::Linear ? rows(numel(0, In), c.in) : rows(numel(0, In), c.out);
    c.bias = i.op == Op::Linear && i.in.size() == 3;
    break;
  }
  case Op::BiasGrad:
  case Op::LayerNorm:
  case Op::RMSNorm: // rows of the first input's last dimension
    c.D = last(0, In), c.n = rows(numel(0, In), c.D);
    break;
  case Op::LayerNormGrad:
  case Op::RMSNormGrad: // dy, x, w: rows of x
    c.D = last(1, In), c.n = rows(numel(1, In), c.D);
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
  case Op::CausalAttentionGrad: {
    const auto &q = shape(i.op == Op::CausalAttention ? 0 : 1, In);
    c.B = q[0], c.S = q[1], c.H = i.numHeads, c.KV = i.numKvHeads;
    c.Dh = i.numHeads > 0 ? q[2] / i.numHeads : 0;
    break;
  }
  case Op::Gelu:
  case Op::GeluGrad:
  case Op::SiluMul:
  case Op::SiluMulGrad:
  case Op::Add:
    c.n = numel(0, In);
    break;
  case Op::CrossEntropy:
  case Op::CrossEntropyGrad: // logits, targets
    c.n = numel(1, In), c.V = last(0, In);
    break;
  case Op::Upcast:
    c.n = numel(0, In), c.fromBf16 = p.tensors[i.in[0]].dtype == DType::BF16;
    break;
  default:
    break;
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

namespace {

struct LoadError {
  std::string message;
};

class Loader {
public:
  Loader(const std::string &path, Program &p) : path(path), p(p) {}
  void run(const std::string &text);

private:
  [[noreturn]] void fail(const std::string &where, const std::string &what) {
    throw LoadError{path + ": " + where + ": " + what};
  }
  template <typename T> T get(const json &j, const char *key, const std::string &where) {
    const json &v = at(j, key, where);
    // Integers are read exactly: nlohmann would truncate 2.5 to 2 and convert
    // a number past the integer's range with undefined behaviour.
    if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int>) {
      return (T)integer(v, key, where, std::numeric_limits<T>::min(),
                        std::numeric_limits<T>::max());
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      if (!v.is_array())
        fail(where, std::string("'") + key + "' must be a list of integers, not " + v.dump());
      std::vector<int64_t> out;
      for (const json &e : v)
        out.push_back(integer(e, key, where, std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max(), /*element=*/true));
      return out;
    } else {
      try {
        return v.get<T>();
      } catch (const json::exception &) {
        fail(where, std::string("'") + key + "' has the wrong type: " + v.dump());
      }
    }
  }
  const json &at(const json &j, const char *key, const std::string &where) {
    if (!j.is_object() || !j.contains(key))
      fail(where, std::string("missing '") + key + "'");
    return j.at(key);
  }
  const json &list(const json &j, const char *key, const std::string &where) {
    const json &v = at(j, key, where);
    if (!v.is_array())
      fail(where, std::string("'") + key + "' must be a list");
    return v;
  }
  int64_t integer(const json &v, const char *key, const std::string &where, int64_t lo,
                  int64_t hi, bool element = false) {
    bool ok = v.is_number_integer();
    if (ok && v.is_number_unsigned())
      ok = v.get<uint64_t>() <= (uint64_t)hi;
    if (ok && !v.is_number_unsigned())
      ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    if (!ok)
      fail(where, std::string("'") + key + (element ? "' must hold integers" : "' must be an integer") +
                      (v.is_number_integer() ? " in range" : "") + ", not " + v.dump());
    return v.is_number_unsigned() ? (int64_t)v.get<uint64_t>() : v.get<int64_t>();
  }
  // Sizes are products of the program's numbers: 128 bits hold any product
  // of an int64 and a few small factors, so nothing here overflows.
  void checkRange(const std::string &where, int64_t offset, i128 bytes) {
    if (offset < 0 || bytes < 0 || offset + bytes > p.arenaBytes)
      fail(where, "bytes [" + std::to_string(offset) + ", " + str(offset + bytes) +
                      ") lie outside the arena of " + std::to_string(p.arenaBytes) + " bytes");
  }
  void loadStream(const json &j, const std::string &phase, Stream &s);
  Instruction loadInstruction(const json &j, const std::string &where, bool comm);
  void checkInstruction(Instruction &inst, const std::string &where);
  void checkIndices(const std::string &phase, const Stream &s);
  const Tensor &tensor(int64_t id, const std::string &where) {
    if (id < 0 || id >= (int64_t)p.tensors.size())
      fail(where, "tensor " + std::to_string(id) + " does not exist");
    return p.tensors[id];
  }

  std::string path;
  Program &p;
};

void Loader::run(const std::string &text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error &e) {
    throw LoadError{path + ": malformed JSON: " + e.what()};
  }
  if (!j.is_object())
    fail("top level", "a program is a JSON object");
  std::string format = get<std::string>(j, "format", "top level");
  if (format != kFormat)
    fail("format", "\"" + format + "\" is not an fsdp program");
  int version = get<int>(j, "version", "top level");
  if (version != kVersion)
    fail("version", "program version " + std::to_string(version) +
                        " is not supported; this fsdp-run reads version " +
                        std::to_string(kVersion) + " (re-plan with this build's fsdp-plan)");
  const json &model = at(j, "model", "top level");
  p.modelName = get<std::string>(model, "name", "model");
  p.modelType = get<std::string>(model, "model_type", "model");
  p.parameters = get<int64_t>(model, "parameters", "model");
  p.worldSize = get<int64_t>(j, "world_size", "top level");
  p.strategy = get<std::string>(j, "strategy", "top level");
  p.shardSize = get<int64_t>(j, "shard_size", "top level");
  p.microBatch = get<int64_t>(j, "micro_batch", "top level");
  p.seqLen = get<int64_t>(j, "seq_len", "top level");
  p.arenaBytes = get<int64_t>(j, "arena_bytes", "top level");
  p.events = get<int64_t>(j, "events", "top level");
  if (j.contains("param_dtype"))
    p.paramDtype = get<std::string>(j, "param_dtype", "top level");
  if (j.contains("reduce_dtype"))
    p.reduceDtype = get<std::string>(j, "reduce_dtype", "top level");
  for (const std::string &d : {p.paramDtype, p.reduceDtype})
    if (d != "f32" && d != "bf16")
      fail("top level", "dtype '" + d + "' is not supported (f32 or bf16)");
  if (p.worldSize > kMaxRanks)
    fail("top level", "world_size " + std::to_string(p.worldSize) +
                          " is more ranks than fsdp-run runs (at most 1048576)");
  if (p.worldSize < 1 || p.shardSize < 1 || p.worldSize % p.shardSize != 0)
    fail("top level", "shard_size " + std::to_string(p.shardSize) +
                          " must divide world_size " + std::to_string(p.worldSize));
  if (p.microBatch < 1 || p.seqLen < 1 || p.arenaBytes < 0 || p.events < 0)
    fail("top level", "micro_batch, seq_len, arena_bytes and events must be positive");
  if (j.contains("predicted_micro_step_s"))
    p.predictedMicroStepS = get<double>(j, "predicted_micro_step_s", "top level");
  if (j.contains("predicted_optimizer_s"))
    p.predictedOptimizerS = get<double>(j, "predicted_optimizer_s", "top level");
  if (j.contains("memory")) {
    if (!j["memory"].is_object())
      fail("memory", "must be an object of integers");
    for (auto &[k, v] : j["memory"].items())
      p.memory.push_back({k, get<int64_t>(j["memory"], k.c_str(), "memory")});
    if (j["memory"].contains("peak_bytes"))
      p.predictedPeakBytes = get<int64_t>(j["memory"], "peak_bytes", "memory");
  }

  const json &tensors = list(j, "tensors", "top level");
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string where = "tensors[" + std::to_string(i) + "]";
    Tensor t;
    if (get<int64_t>(tensors[i], "id", where) != (int64_t)i)
      fail(where, "ids must be 0, 1, 2, ... in order");
    t.offset = get<int64_t>(tensors[i], "offset", where);
    t.shape = get<std::vector<int64_t>>(tensors[i], "shape", where);
    std::string dtype = get<std::string>(tensors[i], "dtype", where);
    if (dtype == "f32")
      t.dtype = DType::F32;
    else if (dtype == "i64")
      t.dtype = DType::I64;
    else if (dtype == "bf16")
      t.dtype = DType::BF16;
    else
      fail(where, "dtype '" + dtype + "' is not supported by the CPU runtime");
    for (int64_t d : t.shape)
      if (d < 0)
        fail(where, "negative dimension");
    checkRange(where, t.offset, elements(t.shape) * elementBytes(t.dtype));
    p.tensors.push_back(t);
  }

  const json &units = list(j, "units", "top level");
  for (size_t i = 0; i < units.size(); ++i) {
    std::string where = "units[" + std::to_string(i) + "]";
    const json &uj = units[i];
    Unit u;
    u.name = get<std::string>(uj, "name", where);
    u.module = get<std::string>(uj, "module", where);
    u.numel = get<int64_t>(uj, "numel", where);
    u.paddedNumel = get<int64_t>(uj, "padded_numel", where);
    u.shardCount = get<int64_t>(uj, "shard_count", where);
    u.shardNumel = get<int64_t>(uj, "shard_numel", where);
    u.shardOffset = get<int64_t>(uj, "shard_offset", where);
    u.gradShardOffset = get<int64_t>(uj, "grad_shard_offset", where);
    u.expAvgOffset = get<int64_t>(uj, "exp_avg_offset", where);
    u.expAvgSqOffset = get<int64_t>(uj, "exp_avg_sq_offset", where);
    if (u.shardCount != p.shardSize || u.numel < 0 || u.shardNumel < 0 ||
        (i128)u.shardNumel * u.shardCount != u.paddedNumel || u.paddedNumel < u.numel)
      fail(where, "unit '" + u.name + "' has an inconsistent layout (numel " +
                      std::to_string(u.numel) + ", padded " + std::to_string(u.paddedNumel) +
                      ", " + std::to_string(u.shardCount) + " shards of " +
                      std::to_string(u.shardNumel) + ")");
    for (int64_t off : {u.shardOffset, u.gradShardOffset, u.expAvgOffset, u.expAvgSqOffset})
      checkRange(where, off, (i128)u.shardNumel * 4);
    int64_t next = 0;
    for (const json &pj : list(uj, "params", where)) {
      Param prm;
      prm.name = get<std::string>(pj, "name", where);
      prm.shape = get<std::vector<int64_t>>(pj, "shape", where);
      prm.offset = get<int64_t>(pj, "offset", where);
      prm.numel = get<int64_t>(pj, "numel", where);
      prm.decay = get<bool>(pj, "decay", where);
      bool negative = false;
      for (int64_t d : prm.shape)
        negative |= d < 0;
      if (negative || elements(prm.shape) != prm.numel || prm.offset != next)
        fail(where, "parameter '" + prm.name + "' does not fit the unit's flat layout");
      next += prm.numel; // at most numel: the next parameter is checked against it
      if (next > u.numel)
        fail(where, "unit '" + u.name + "' parameters hold more than numel = " +
                        std::to_string(u.numel) + " elements");
      u.params.push_back(prm);
    }
    if (next != u.numel)
      fail(where, "unit '" + u.name + "' parameters hold " + std::to_string(next) +
                      " elements, not numel = " + std::to_string(u.numel));
    p.units.push_back(u);
  }

  p.tokens = get<int64_t>(at(j, "inputs", "top level"), "tokens", "inputs");
  p.targets = get<int64_t>(at(j, "inputs", "top level"), "targets", "inputs");
  p.loss = get<int64_t>(j, "loss", "top level");
  for (int64_t id : {p.tokens, p.targets})
    if (tensor(id, "inputs").dtype != DType::I64 ||
        tensor(id, "inputs").shape != std::vector<int64_t>{p.microBatch, p.seqLen})
      fail("inputs", "tokens and targets must be i64 [micro_batch, seq_len]");
  if (tensor(p.loss, "loss").numel() != 1)
    fail("loss", "the loss must be a scalar");

  loadStream(at(j, "micro_step", "top level"), "micro_step", p.microStep);
  loadStream(at(j, "optimizer", "top level"), "optimizer", p.optimizer);
}

void Loader::loadStream(const json &j, const std::string &phase, Stream &s) {
  std::set<int64_t> recorded;
  for (const char *name : {"compute", "comm"}) {
    bool comm = std::string(name) == "comm";
    const json &insts = list(j, name, phase);
    auto &out = comm ? s.comm : s.compute;
    for (size_t i = 0; i < insts.size(); ++i) {
      std::string where = phase + "." + name + "[" + std::to_string(i) + "]";
      Instruction inst = loadInstruction(insts[i], where, comm);
      inst.index = i;
      where += std::string(" (") + opName(inst.op) + ")";
      checkInstruction(inst, where);
      if (inst.op == Op::Record && !recorded.insert(inst.event).second)
        fail(where, "event " + std::to_string(inst.event) + " is recorded twice");
      out.push_back(inst);
    }
  }
  checkIndices(phase, s);
  // Every wait must have its record in the same phase, or it would hang.
  for (const char *name : {"compute", "comm"}) {
    const auto &list = std::string(name) == "comm" ? s.comm : s.compute;
    for (const Instruction &inst : list)
      if (inst.op == Op::Wait && !recorded.count(inst.event))
        fail(phase + "." + name + "[" + std::to_string(inst.index) + "] (wait)",
             "waits for event " + std::to_string(inst.event) + ", which is never recorded");
  }
  // ... and before it in an order the two streams can both keep.
  std::vector<Slot> order;
  std::string why = issueOrder(s, order);
  if (!why.empty())
    fail(phase, why);
}

// The kernels index tables (embedding rows, cross-entropy logits) with i64
// values they do not check: those must be the token inputs, which the data
// reader holds below the vocabulary (the first cross_entropy's last
// dimension), or the positions a position_ids of the phase writes, below its
// sequence length; and the table must have that many rows.
void Loader::checkIndices(const std::string &phase, const Stream &s) {
  std::map<int64_t, int64_t> positions; // position_ids output -> its sequence length
  for (const Instruction &inst : s.compute)
    if (inst.op == Op::PositionIds) {
      int64_t &S = positions[inst.out[0]];
      S = std::max(S, p.tensors[inst.in[0]].shape[1]);
    }
  int64_t vocab = p.vocabSize();
  for (const Instruction &inst : s.compute) {
    int64_t ids, rows;
    const char *table;
    if (inst.op == Op::Embedding) {
      ids = inst.in[0], rows = p.tensors[inst.in[1]].shape[0], table = "an embedding of";
    } else if (inst.op == Op::EmbeddingGrad) {
      ids = inst.in[1], rows = p.tensors[inst.out[0]].shape[0], table = "an embedding of";
    } else if (inst.op == Op::CrossEntropy || inst.op == Op::CrossEntropyGrad) {
      ids = inst.in[1], rows = p.tensors[inst.in[0]].shape.back(), table = "logits of";
    } else {
      continue;
    }
    std::string where = phase + ".compute[" + std::to_string(inst.index) + "] (" +
                        opName(inst.op) + ")";
    std::string rowsText = std::to_string(rows) + (inst.op == Op::CrossEntropy ||
                                                           inst.op == Op::CrossEntropyGrad
                                                       ? " classes"
                                                       : " rows");
    if (ids == p.tokens || ids == p.targets) {
      if (vocab <= 0)
        fail(where, "indexes by token, but no cross_entropy gives the vocabulary");
      if (vocab > rows)
        fail(where, "token ids up to " + std::to_string(vocab - 1) + " (the vocabulary of " +
                        std::to_string(vocab) + ") index " + table + " " + rowsText);
    } else if (positions.count(ids)) {
      if (positions[ids] > rows)
        fail(where, "positions up to " + std::to_string(positions[ids] - 1) + " index " + table +
                        " " + rowsText);
    } else {
      fail(where, "indexes by tensor " + std::to_string(ids) +
                      ", which is neither the tokens, the targets, nor a position_ids output");
    }
  }
}

Instruction Loader::loadInstruction(const json &j, const std::string &where, bool comm) {
  Instruction inst;
  std::string name = get<std::string>(j, "op", where);
  const OpInfo *info = findOp(name);
  if (!info)
    fail(where, "unknown op '" + name + "'");
  inst.op = info->op;
  if (info->stream != OpStream::Either && (info->stream == OpStream::Comm) != comm)
    fail(where, "op '" + name + "' does not belong on the " + (comm ? "comm" : "compute") +
                    " stream");
  if (j.contains("in"))
    inst.in = get<std::vector<int64_t>>(j, "in", where);
  if (j.contains("out"))
    inst.out = get<std::vector<int64_t>>(j, "out", where);
  if (j.contains("event"))
    inst.event = get<int64_t>(j, "event", where);
  if (j.contains("unit"))
    inst.unit = get<int64_t>(j, "unit", where);
  if (j.contains("dst"))
    inst.dst = get<int64_t>(j, "dst", where);
  if (j.contains("src"))
    inst.src = get<int64_t>(j, "src", where);
  if (j.contains("zero_from"))
    inst.zeroFrom = get<int64_t>(j, "zero_from", where);
  if (j.contains("kind"))
    inst.freeParams = get<std::string>(j, "kind", where) == "params";
  if (j.contains("layout"))
    inst.layoutInOut = get<std::string>(j, "layout", where) == "in_out";
  if (j.contains("eps"))
    inst.eps = get<double>(j, "eps", where);
  if (j.contains("theta"))
    inst.theta = get<double>(j, "theta", where);
  if (j.contains("num_heads"))
    inst.numHeads = get<int64_t>(j, "num_heads", where);
  if (j.contains("num_kv_heads"))
    inst.numKvHeads = get<int64_t>(j, "num_kv_heads", where);
  if (j.contains("inverse"))
    inst.inverse = get<bool>(j, "inverse", where);
  if (j.contains("llama3_factor")) {
    inst.llama3Factor = get<double>(j, "llama3_factor", where);
    inst.llama3Low = get<double>(j, "llama3_low_freq_factor", where);
    inst.llama3High = get<double>(j, "llama3_high_freq_factor", where);
    inst.llama3OriginalMax = get<int64_t>(j, "llama3_original_max_position", where);
  }
  if (j.contains("scratch")) {
    inst.scratch = get<int64_t>(j, "scratch", where);
    inst.scratchBytes = get<int64_t>(j, "scratch_bytes", where);
  }
  if (j.contains("module"))
    inst.module = get<std::string>(j, "module", where);
  if (j.contains("phase"))
    inst.phase = get<std::string>(j, "phase", where);
  if (j.contains("dtype")) {
    std::string d = get<std::string>(j, "dtype", where);
    if (d != "bf16" && d != "f32")
      fail(where, "dtype '" + d + "' is not supported (f32 or bf16)");
    inst.bf16 = d == "bf16";
  }
  return inst;
}

void Loader::checkInstruction(Instruction &inst, const std::string &where) {
  auto t = [&](int64_t id) -> const Tensor & { return tensor(id, where); };
  auto n = [&](int64_t id) { return elements(t(id).shape); };
  auto f32 = [&](int64_t id) {
    if (t(id).dtype != DType::F32)
      fail(where, "tensor " + std::to_string(id) + " must be f32");
  };
  auto sameShape = [&](int64_t a, int64_t b) {
    if (t(a).shape != t(b).shape)
      fail(where, "tensors " + std::to_string(a) + " and " + std::to_string(b) +
                      " must have one shape");
  };
  auto last = [&](int64_t id) -> int64_t { return t(id).shape.empty() ? 1 : t(id).shape.back(); };
  // The dimensions the executor indexes must be there.
  auto rank = [&](int64_t id, size_t dims) {
    if (t(id).shape.size() < dims)
      fail(where, "tensor " + std::to_string(id) + " needs at least " + std::to_string(dims) +
                      " dimensions");
  };
  // The kernel counts rows of `by` elements of the tensor.
  auto rowsOf = [&](int64_t id, i128 by) {
    if (by <= 0)
      fail(where, "tensor " + std::to_string(id) + " has rows of " + str(by) +
                      " elements; the kernel needs at least 1");
  };
  // What the kernel reads or writes of a tensor: `count` elements of f32
  // (or i64) from its start, which must lie within it.
  auto touches = [&](int64_t id, i128 count, i128 esize = 4) {
    i128 have = n(id) * elementBytes(t(id).dtype);
    if (count * esize > have)
      fail(where, "the kernel touches " + str(count * esize) + " bytes of tensor " +
                      std::to_string(id) + ", which holds " + str(have));
  };
  auto unit = [&]() -> const Unit & {
    if (inst.unit < 0 || inst.unit >= (int64_t)p.units.size())
      fail(where, "unit " + std::to_string(inst.unit) + " does not exist");
    return p.units[inst.unit];
  };
  auto event = [&]() {
    if (inst.event < 0 || inst.event >= p.events)
      fail(where, "event " + std::to_string(inst.event) + " is out of range");
  };
  auto scratch = [&](i128 need) {
    if (inst.scratchBytes < need)
      fail(where, "needs " + str(need) + " bytes of scratch, the plan gives " +
                      std::to_string(inst.scratchBytes));
    checkRange(where, inst.scratch, inst.scratchBytes);
  };
  for (int64_t id : inst.in)
    t(id);
  for (int64_t id : inst.out)
    t(id);
  // Operand counts, from the op list (runtime/Ops.def).
  const OpInfo &info = opInfo(inst.op);
  auto count = [](int lo, int hi) {
    return lo == hi  ? std::to_string(lo)
           : hi < 0  ? "at least " + std::to_string(lo)
                     : std::to_string(lo) + " or " + std::to_string(hi);
  };
  auto within = [](size_t k, int lo, int hi) { return (int)k >= lo && (hi < 0 || (int)k <= hi); };
  if (!within(inst.in.size(), info.minIn, info.maxIn) ||
      !within(inst.out.size(), info.minOut, info.maxOut))
    fail(where, "takes " + count(info.minIn, info.maxIn) + " inputs and " +
                    count(info.minOut, info.maxOut) + " outputs, not " +
                    std::to_string(inst.in.size()) + " and " + std::to_string(inst.out.size()));

  // First what the call is decoded from (shapes, dtypes, attributes); then
  // the decoded call (the executors' very arguments) proves that the
  // kernel's reads and writes lie within its tensors.
  switch (inst.op) {
  case Op::PositionIds:
    rank(inst.in[0], 2);
    break;
  case Op::Embedding:
    f32(inst.in[1]);
    if (t(inst.in[0]).dtype != DType::I64 || t(inst.in[1]).shape.size() != 2 ||
        last(inst.out[0]) != t(inst.in[1]).shape[1] ||
        n(inst.out[0]) != n(inst.in[0]) * last(inst.out[0]))
      fail(where, "embedding shapes do not match");
    break;
  case Op::EmbeddingGrad:
    if (t(inst.out[0]).shape.size() != 2 || last(inst.in[0]) != last(inst.out[0]) ||
        t(inst.in[1]).dtype != DType::I64)
      fail(where, "embedding gradient shapes do not match");
    break;
  case Op::Linear:
  case Op::LinearGradInput:
  case Op::LinearGradWeight: {
    int64_t wid = inst.op == Op::LinearGradWeight ? inst.out[0] : inst.in[1];
    const Tensor &w = t(wid);
    if (w.shape.size() != 2)
      fail(where, "the weight must be 2-D");
    int64_t in = inst.layoutInOut ? w.shape[0] : w.shape[1];
    int64_t out = inst.layoutInOut ? w.shape[1] : w.shape[0];
    int64_t x = inst.op == Op::Linear ? inst.in[0]
                : inst.op == Op::LinearGradInput ? inst.out[0] : inst.in[1];
    int64_t y = inst.op == Op::Linear ? inst.out[0] : inst.in[0];
    if (last(x) != in || last(y) != out || (in > 0 && out > 0 && n(x) / in != n(y) / out))
      fail(where, "input, weight and output shapes do not match");
    if (inst.op == Op::Linear && inst.in.size() == 3 && n(inst.in[2]) != out)
      fail(where, "the bias must have " + std::to_string(out) + " elements");
    rowsOf(inst.op == Op::Linear ? x : inst.in[0], inst.op == Op::Linear ? in : out);
    break;
  }
  case Op::BiasGrad:
    if (last(inst.in[0]) != n(inst.out[0]))
      fail(where, "bias gradient size does not match");
    rank(inst.in[0], 1);
    rowsOf(inst.in[0], last(inst.in[0]));
    break;
  case Op::LayerNorm:
    sameShape(inst.in[0], inst.out[0]);
    if (n(inst.in[1]) != last(inst.in[0]) || n(inst.in[2]) != last(inst.in[0]))
      fail(where, "weight and bias must match the last dimension");
    rank(inst.in[0], 1);
    rowsOf(inst.in[0], last(inst.in[0]));
    break;
  case Op::LayerNormGrad:
  case Op::RMSNormGrad:
    sameShape(inst.in[0], inst.in[1]);
    if (inst.op == Op::LayerNormGrad)
      sameShape(inst.in[1], inst.out[0]);
    rank(inst.in[1], 1);
    rowsOf(inst.in[1], last(inst.in[1]));
    break;
  case Op::RMSNorm:
    sameShape(inst.in[0], inst.out[0]);
    if (n(inst.in[1]) != last(inst.in[0]))
      fail(where, "weight must match the last dimension");
    rank(inst.in[0], 1);
    rowsOf(inst.in[0], last(inst.in[0]));
    break;
  case Op::Rope:
    sameShape(inst.in[0], inst.out[0]);
    if (inst.numHeads <= 0 || last(inst.in[0]) % inst.numHeads != 0 ||
        (last(inst.in[0]) / inst.numHeads) % 2 != 0 || t(inst.in[0]).shape.size() != 3)
      fail(where, "rope needs [B, S, heads * even head_dim]");
    break;
  case Op::Split:
  case Op::Concat: {
    bool split = inst.op == Op::Split;
    const auto &whole = split ? inst.in : inst.out;
    const auto &parts = split ? inst.out : inst.in;
    i128 sum = 0;
    for (int64_t id : parts)
      sum += n(id);
    if (sum != n(whole[0]))
      fail(where, "parts do not add up to the whole");
    // The kernel cuts rows of the whole into equal parts, each [rows, W].
    for (int64_t id : parts)
      if (t(id).shape != t(parts[0]).shape)
        fail(where, "parts " + std::to_string(parts[0]) + " and " + std::to_string(id) +
                        " must have one shape");
    rank(parts[0], 1);
    rowsOf(parts[0], last(parts[0]));
    break;
  }
  case Op::CausalAttention:
  case Op::CausalAttentionGrad: {
    bool fwd = inst.op == Op::CausalAttention;
    int64_t q = fwd ? inst.in[0] : inst.in[1], k = fwd ? inst.in[1] : inst.in[2];
    if (inst.numHeads <= 0 || inst.numKvHeads <= 0 || inst.numHeads % inst.numKvHeads != 0 ||
        last(q) % inst.numHeads != 0 ||
        last(k) != last(q) / inst.numHeads * inst.numKvHeads || t(q).shape.size() != 3)
      fail(where, "query, key and value do not match the heads");
    break;
  }
  case Op::Gelu:
    sameShape(inst.in[0], inst.out[0]);
    break;
  case Op::Upcast:
    f32(inst.out[0]);
    if (n(inst.in[0]) != n(inst.out[0]) || t(inst.in[0]).dtype == DType::I64)
      fail(where, "upcast reads a bf16 or f32 parameter of the output's size");
    break;
  case Op::GeluGrad:
  case Op::SiluMul:
  case Op::SiluMulGrad:
  case Op::Add:
    sameShape(inst.in[0], inst.in[1]);
    if (inst.op == Op::Add && n(inst.in[0]) != n(inst.out[0]))
      fail(where, "output size does not match");
    break;
  case Op::CrossEntropy:
  case Op::CrossEntropyGrad:
    if (t(inst.in[1]).dtype != DType::I64 || t(inst.in[0]).shape.empty() ||
        n(inst.in[0]) != n(inst.in[1]) * last(inst.in[0]))
      fail(where, "logits and targets do not match");
    break;
  case Op::Record:
  case Op::Wait:
    event();
    return;
  case Op::Alloc:
    checkRange(where, inst.dst, (i128)unit().paddedNumel * 4);
    if (inst.zeroFrom < 0 || inst.zeroFrom > unit().paddedNumel)
      fail(where, "zero_from " + std::to_string(inst.zeroFrom) + " lies outside the unit");
    return;
  case Op::AllGather:
    checkRange(where, inst.dst, (i128)unit().paddedNumel * (inst.bf16 ? 2 : 4));
    return;
  case Op::ReduceScatter:
    checkRange(where, inst.src, (i128)unit().paddedNumel * 4);
    return;
  case Op::Free:
  case Op::OptimizerStep:
  case Op::AllReduce:
    unit();
    return;
  case Op::GradNorm:
    return;
  }

  inst.call = decodeCall(p, inst);
  const Call &c = inst.call;
  const auto &in = inst.in, &out = inst.out;
  i128 nD = (i128)c.n * c.D;
  switch (inst.op) {
  case Op::PositionIds:
    touches(out[0], (i128)c.B * c.S, 8);
    break;
  case Op::Embedding:
    touches(in[0], c.n, 8);
    touches(in[1], (i128)t(in[1]).shape[0] * c.D);
    touches(out[0], nD);
    break;
  case Op::EmbeddingGrad:
    touches(in[0], nD);
    touches(in[1], c.n, 8);
    touches(out[0], (i128)c.V * c.D);
    break;
  case Op::Linear:
    touches(in[0], (i128)c.n * c.in);
    touches(in[1], (i128)c.in * c.out);
    if (c.bias)
      touches(in[2], c.out);
    touches(out[0], (i128)c.n * c.out);
    break;
  case Op::LinearGradInput: // dy, w -> dx
    touches(in[0], (i128)c.n * c.out);
    touches(in[1], (i128)c.in * c.out);
    touches(out[0], (i128)c.n * c.in);
    break;
  case Op::LinearGradWeight: // dy, x -> dw
    touches(in[0], (i128)c.n * c.out);
    touches(in[1], (i128)c.n * c.in);
    touches(out[0], (i128)c.in * c.out);
    break;
  case Op::BiasGrad:
    touches(in[0], nD);
    touches(out[0], c.D);
    break;
  case Op::LayerNorm:
  case Op::RMSNorm:
    touches(in[0], nD);
    touches(out[0], nD);
    for (size_t k = 1; k < in.size(); ++k)
      touches(in[k], c.D);
    break;
  case Op::LayerNormGrad:
  case Op::RMSNormGrad: // dy, x, w -> dx, dw (, db)
    for (int64_t id : {in[0], in[1], out[0]})
      touches(id, nD);
    touches(in[2], c.D);
    for (size_t k = 1; k < out.size(); ++k)
      touches(out[k], c.D);
    break;
  case Op::Rope:
    for (int64_t id : {in[0], out[0]})
      touches(id, (i128)c.B * c.S * c.H * c.Dh);
    break;
  case Op::Split:
  case Op::Concat: {
    bool split = inst.op == Op::Split;
    for (int64_t id : split ? out : in)
      touches(id, (i128)c.n * c.W);
    touches((split ? in : out)[0], (i128)c.n * c.W * c.parts);
    break;
  }
  case Op::CausalAttention:
  case Op::CausalAttentionGrad: {
    // q, out [B, S, H*Dh] and k, v [B, S, KV*Dh].
    bool fwd = inst.op == Op::CausalAttention;
    i128 qn = (i128)c.B * c.S * c.H * c.Dh, kvn = (i128)c.B * c.S * c.KV * c.Dh;
    if (fwd) {
      for (int64_t id : {in[0], out[0]})
        touches(id, qn);
      for (int64_t id : {in[1], in[2]})
        touches(id, kvn);
    } else {
      for (int64_t id : {in[0], in[1], in[4], out[0]})
        touches(id, qn);
      for (int64_t id : {in[2], in[3], out[1], out[2]})
        touches(id, kvn);
    }
    scratch((i128)fsdp::kernels::causalAttentionScratchFloats(c.S, !fwd) * 4);
    break;
  }
  case Op::Gelu:
  case Op::GeluGrad:
  case Op::SiluMul:
  case Op::SiluMulGrad:
  case Op::Add: // every operand holds the first input's elements
    for (int64_t id : in)
      touches(id, c.n);
    for (int64_t id : out)
      touches(id, c.n);
    break;
  case Op::CrossEntropy:
  case Op::CrossEntropyGrad:
    touches(in[0], (i128)c.n * c.V);
    touches(in[1], c.n, 8);
    touches(out[0], inst.op == Op::CrossEntropy ? 1 : (i128)c.n * c.V);
    break;
  case Op::Upcast:
    touches(in[0], c.n, c.fromBf16 ? 2 : 4);
    touches(out[0], c.n);
    break;
  default:
    break;
  }
}

} // namespace

std::string fsdp::program::issueOrder(const Stream &s, std::vector<Slot> &order) {
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

std::string fsdp::program::parseProgram(const std::string &text, const std::string &name,
                                        Program &program) {
  program = Program();
  try {
    Loader(name, program).run(text);
  } catch (const LoadError &e) {
    return e.message;
  } catch (const json::exception &e) {
    return name + ": " + e.what();
  } catch (const std::exception &e) {
    return name + ": cannot read the program: " + e.what();
  }
  return "";
}

std::string fsdp::program::loadProgram(const std::string &path, Program &program) {
  program = Program();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return path + ": cannot read the program: not a file";
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf()))
    return path + ": cannot read the program";
  return parseProgram(text.str(), path, program);
}

//===----------------------------------------------------------------------===//
// Writing (what lowering produces) and comparing
//===----------------------------------------------------------------------===//

namespace {

const char *dtypeText(DType d) { return d == DType::I64 ? "i64" : d == DType::BF16 ? "bf16" : "f32"; }

using ojson = nlohmann::ordered_json;

ojson instructionJson(const Instruction &i) {
  ojson j;
  j["op"] = opName(i.op);
  if (!i.module.empty())
    j["module"] = i.module;
  if (i.op == Op::Alloc || i.op == Op::Free)
    j["kind"] = i.op == Op::Free && i.freeParams ? "params" : "grads";
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
    if (i.llama3Factor) {
      j["llama3_factor"] = *i.llama3Factor;
      j["llama3_high_freq_factor"] = *i.llama3High;
      j["llama3_low_freq_factor"] = *i.llama3Low;
      j["llama3_original_max_position"] = *i.llama3OriginalMax;
    }
    j["num_heads"] = i.numHeads;
    j["theta"] = i.theta;
    break;
  case Op::CausalAttention:
  case Op::CausalAttentionGrad:
    j["num_heads"] = i.numHeads;
    j["num_kv_heads"] = i.numKvHeads;
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
  top["world_size"] = p.worldSize;
  top["strategy"] = p.strategy;
  top["shard_size"] = p.shardSize;
  top["param_dtype"] = p.paramDtype;
  top["reduce_dtype"] = p.reduceDtype;
  top["micro_batch"] = p.microBatch;
  top["seq_len"] = p.seqLen;
  top["arena_bytes"] = p.arenaBytes;
  // The cost model's figures, when the planner computed them.
  if (p.predictedMicroStepS > 0)
    top["predicted_micro_step_s"] = p.predictedMicroStepS;
  if (p.predictedOptimizerS > 0)
    top["predicted_optimizer_s"] = p.predictedOptimizerS;
  ojson memory = ojson::object();
  for (const auto &[k, v] : p.memory)
    memory[k] = v;
  top["memory"] = memory;
  top["events"] = p.events;
  top["inputs"] = {{"tokens", p.tokens}, {"targets", p.targets}};
  top["loss"] = p.loss;
  std::vector<ojson> units, tensors;
  for (const Unit &u : p.units) {
    ojson params = ojson::array();
    for (const Param &prm : u.params)
      params.push_back({{"name", prm.name}, {"shape", prm.shape}, {"offset", prm.offset},
                        {"numel", prm.numel}, {"decay", prm.decay}});
    units.push_back({{"name", u.name}, {"module", u.module}, {"numel", u.numel},
                     {"padded_numel", u.paddedNumel}, {"shard_count", u.shardCount},
                     {"shard_numel", u.shardNumel}, {"shard_offset", u.shardOffset},
                     {"grad_shard_offset", u.gradShardOffset}, {"exp_avg_offset", u.expAvgOffset},
                     {"exp_avg_sq_offset", u.expAvgSqOffset}, {"params", params}});
  }
  for (size_t k = 0; k < p.tensors.size(); ++k)
    tensors.push_back({{"id", k}, {"offset", p.tensors[k].offset}, {"shape", p.tensors[k].shape},
                       {"dtype", dtypeText(p.tensors[k].dtype)}});
  std::string out = "{\n";
  for (auto &[k, v] : top.items())
    out += "  \"" + k + "\": " + v.dump() + ",\n";
  out += "  \"units\": " + lines(units, "  ") + ",\n";
  out += "  \"tensors\": " + lines(tensors, "  ") + ",\n";
  const std::pair<const char *, const Stream *> phases[2] = {{"micro_step", &p.microStep},
                                                            {"optimizer", &p.optimizer}};
  for (int k = 0; k < 2; ++k) {
    std::vector<ojson> compute, comm;
    for (const Instruction &i : phases[k].second->compute)
      compute.push_back(instructionJson(i));
    for (const Instruction &i : phases[k].second->comm)
      comm.push_back(instructionJson(i));
    out += std::string("  \"") + phases[k].first + "\": {\n";
    out += "    \"compute\": " + lines(compute, "    ") + ",\n";
    out += "    \"comm\": " + lines(comm, "    ") + "\n";
    out += k == 0 ? "  },\n" : "  }\n";
  }
  return out + "}\n";
}

bool fsdp::program::operator==(const Tensor &a, const Tensor &b) {
  return a.offset == b.offset && a.shape == b.shape && a.dtype == b.dtype;
}
bool fsdp::program::operator==(const Param &a, const Param &b) {
  return a.name == b.name && a.shape == b.shape && a.offset == b.offset && a.numel == b.numel &&
         a.decay == b.decay;
}
bool fsdp::program::operator==(const Unit &a, const Unit &b) {
  return a.name == b.name && a.module == b.module && a.numel == b.numel &&
         a.paddedNumel == b.paddedNumel && a.shardCount == b.shardCount &&
         a.shardNumel == b.shardNumel && a.shardOffset == b.shardOffset &&
         a.gradShardOffset == b.gradShardOffset && a.expAvgOffset == b.expAvgOffset &&
         a.expAvgSqOffset == b.expAvgSqOffset && a.params == b.params;
}
bool fsdp::program::operator==(const Instruction &a, const Instruction &b) {
  return a.op == b.op && a.in == b.in && a.out == b.out && a.event == b.event &&
         a.unit == b.unit && a.dst == b.dst && a.src == b.src && a.zeroFrom == b.zeroFrom &&
         a.freeParams == b.freeParams && a.bf16 == b.bf16 && a.layoutInOut == b.layoutInOut &&
         a.eps == b.eps && a.theta == b.theta && a.numHeads == b.numHeads &&
         a.numKvHeads == b.numKvHeads && a.inverse == b.inverse &&
         a.llama3Factor == b.llama3Factor && a.llama3Low == b.llama3Low &&
         a.llama3High == b.llama3High && a.llama3OriginalMax == b.llama3OriginalMax &&
         a.scratch == b.scratch && a.scratchBytes == b.scratchBytes && a.module == b.module &&
         a.phase == b.phase && a.index == b.index;
}
bool fsdp::program::operator==(const Stream &a, const Stream &b) {
  return a.compute == b.compute && a.comm == b.comm;
}
bool fsdp::program::operator==(const Program &a, const Program &b) {
  return a.modelName == b.modelName && a.modelType == b.modelType && a.strategy == b.strategy &&
         a.parameters == b.parameters && a.worldSize == b.worldSize &&
         a.shardSize == b.shardSize && a.microBatch == b.microBatch && a.seqLen == b.seqLen &&
         a.paramDtype == b.paramDtype && a.reduceDtype == b.reduceDtype &&
         a.arenaBytes == b.arenaBytes && a.predictedPeakBytes == b.predictedPeakBytes &&
         a.memory == b.memory && a.events == b.events &&
         a.predictedMicroStepS == b.predictedMicroStepS &&
         a.predictedOptimizerS == b.predictedOptimizerS && a.tokens == b.tokens &&
         a.targets == b.targets && a.loss == b.loss && a.units == b.units &&
         a.tensors == b.tensors && a.microStep == b.microStep && a.optimizer == b.optimizer;
}
