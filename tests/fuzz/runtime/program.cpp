//===- program.cpp - fuzz the program loader (fsdp-run PROGRAM.json) ------===//
//
// The input is a program file. loadProgram must reject it with a message
// naming the file, or accept a program that the executor can run without
// touching memory outside the arena or outside a tensor: every tensor, shard,
// gathered and scratch buffer inside the arena, every operand, unit and event
// there, both phases issuable, and, op by op, what the CPU executor's kernel
// reads and writes (Executor.cpp's computeOne) inside the tensors it names,
// with the shape dimensions it indexes present and the sizes it divides by
// non-zero. Indices (embedding rows, cross-entropy targets) must come from the
// token inputs, a position_ids output or a token_type_ids output (all 0) and
// fit the table they index.
//
//===----------------------------------------------------------------------===//
#include "RuntimeFuzz.h"

#include "runtime/Program.h"
#include "runtime/kernels/cpu.h"

#include <exception>
#include <set>

using namespace fsdp;
using namespace fsdp::program;
using fsdp::fuzz::violation;

namespace {

using i128 = __int128;

i128 numel(const Tensor &t) {
  i128 n = 1;
  for (int64_t d : t.shape) {
    n *= d;
    if (n > ((i128)1 << 80))
      return n; // far past any arena already
  }
  return n;
}

i128 elementBytes(DType d) { return d == DType::I64 ? 8 : d == DType::BF16 ? 2 : 4; }

void inArena(const Program &p, const std::string &what, i128 offset, i128 bytes) {
  if (offset < 0 || bytes < 0 || offset + bytes > p.arenaBytes)
    violation("accepted: " + what + " lies outside the arena");
}

// offload optimizer: what the trainer reads and writes in the host pool.
void inHostPool(const Program &p, const std::string &what, i128 offset, i128 bytes) {
  if (!p.offloadsOptimizer() || offset < 0 || bytes < 0 || offset + bytes > p.hostBytes)
    violation("accepted: " + what + " lies outside the host pool");
}

class Checker {
public:
  explicit Checker(const Program &p) : p(p) {}
  void run();

private:
  const Program &p;
  std::string where;
  std::set<int64_t> positionOutputs; // i64 tensors position_ids writes (values < S)
  std::set<int64_t> positionLimit;
  std::set<int64_t> typeOutputs; // i64 tensors token_type_ids writes (values 0)

  [[noreturn]] void bad(const std::string &what) { violation("accepted " + where + ": " + what); }
  const Tensor &t(int64_t id) {
    if (id < 0 || id >= (int64_t)p.tensors.size())
      bad("tensor " + std::to_string(id) + " does not exist");
    return p.tensors[id];
  }
  int64_t dim(int64_t id, size_t k) {
    if (t(id).shape.size() <= k)
      bad("the executor reads dimension " + std::to_string(k) + " of tensor " + std::to_string(id));
    return t(id).shape[k];
  }
  int64_t last(int64_t id) {
    if (t(id).shape.empty())
      bad("the executor reads the last dimension of scalar tensor " + std::to_string(id));
    return t(id).shape.back();
  }
  i128 n(int64_t id) { return numel(t(id)); }
  i128 div(i128 a, i128 b) {
    if (b == 0)
      bad("the executor divides by a zero size");
    return a / b;
  }
  // The kernel touches `count` elements of `esize` bytes from the tensor's
  // start (0: of the tensor's own dtype, as the kernels read f32 and bf16
  // tensors alike).
  void touches(int64_t id, i128 count, i128 esize = 0) {
    if (esize == 0)
      esize = elementBytes(t(id).dtype);
    if (count < 0 || count * esize > numel(t(id)) * elementBytes(t(id).dtype))
      bad("the kernel touches " + std::to_string((long long)count) + " elements of tensor " +
          std::to_string(id) + ", which holds fewer bytes");
  }
  int64_t arity(const Instruction &i, size_t in, size_t out) {
    if (i.in.size() < in || i.out.size() < out)
      bad("fewer operands than the executor reads");
    return 0;
  }
  // An index tensor's values lie in [0, limit) for the largest limit returned.
  void indices(int64_t id, int64_t rows) {
    int64_t vocab = p.vocabSize();
    if (id == p.tokens || id == p.targets) {
      if (vocab <= 0 || vocab > rows)
        bad("token ids (vocabulary " + std::to_string(vocab) + ") index a table of " +
            std::to_string(rows) + " rows");
      return;
    }
    if (positionOutputs.count(id)) {
      for (int64_t s : positionLimit)
        if (s > rows)
          bad("positions up to " + std::to_string(s) + " index a table of " + std::to_string(rows) +
              " rows");
      return;
    }
    if (typeOutputs.count(id)) {
      if (rows < 1)
        bad("token types (0) index a table of " + std::to_string(rows) + " rows");
      return;
    }
    bad("indices in tensor " + std::to_string(id) +
        " come from neither the tokens, positions nor token types");
  }
  void instruction(const Instruction &i);
  void phase(const Phase &s, const char *name);
};

void Checker::instruction(const Instruction &i) {
  for (int64_t id : i.in)
    t(id);
  for (int64_t id : i.out)
    t(id);
  auto unit = [&]() -> const Unit & {
    if (i.unit < 0 || i.unit >= (int64_t)p.units.size())
      bad("unit " + std::to_string(i.unit) + " does not exist");
    return p.units[i.unit];
  };
  switch (i.op) {
  case Op::PositionIds: {
    arity(i, 1, 1);
    int64_t B = dim(i.in[0], 0), S = dim(i.in[0], 1);
    touches(i.out[0], (i128)B * S, 8);
    positionOutputs.insert(i.out[0]);
    positionLimit.insert(S);
    break;
  }
  case Op::TokenTypeIds: {
    arity(i, 1, 1);
    int64_t B = dim(i.in[0], 0), S = dim(i.in[0], 1);
    touches(i.out[0], (i128)B * S, 8);
    typeOutputs.insert(i.out[0]);
    break;
  }
  case Op::Embedding: {
    arity(i, 2, 1);
    i128 N = n(i.in[0]), D = last(i.in[1]);
    touches(i.in[0], N, 8);
    touches(i.out[0], N * D);
    int64_t rows = dim(i.in[1], 0);
    touches(i.in[1], (i128)rows * D);
    indices(i.in[0], rows);
    break;
  }
  case Op::EmbeddingGrad: {
    arity(i, 2, 1);
    i128 N = n(i.in[1]), V = dim(i.out[0], 0), D = last(i.out[0]);
    touches(i.in[0], N * D);
    touches(i.in[1], N, 8);
    touches(i.out[0], V * D);
    indices(i.in[1], (int64_t)V);
    break;
  }
  case Op::Linear:
  case Op::LinearGradInput:
  case Op::LinearGradWeight: {
    arity(i, 2, 1);
    int64_t wid = i.op == Op::LinearGradWeight ? i.out[0] : i.in[1];
    i128 a = dim(wid, 0), b = dim(wid, 1);
    i128 in = i.layoutInOut ? a : b, out = i.layoutInOut ? b : a;
    touches(wid, in * out);
    if (i.op == Op::Linear) {
      i128 rows = div(n(i.in[0]), in);
      touches(i.in[0], rows * in);
      touches(i.out[0], rows * out);
      if (i.in.size() == 3)
        touches(i.in[2], out);
    } else if (i.op == Op::LinearGradInput) {
      i128 rows = div(n(i.in[0]), out);
      touches(i.in[0], rows * out);
      touches(i.out[0], rows * in);
    } else {
      i128 rows = div(n(i.in[0]), out);
      touches(i.in[0], rows * out);
      touches(i.in[1], rows * in);
    }
    break;
  }
  case Op::BiasGrad: {
    arity(i, 1, 1);
    i128 D = last(i.in[0]), rows = div(n(i.in[0]), D);
    touches(i.in[0], rows * D);
    touches(i.out[0], D);
    break;
  }
  case Op::LayerNorm:
  case Op::RMSNorm: {
    bool ln = i.op == Op::LayerNorm;
    arity(i, ln ? 3 : 2, 1);
    i128 D = last(i.in[0]), rows = div(n(i.in[0]), D);
    touches(i.in[0], rows * D);
    touches(i.out[0], rows * D);
    touches(i.in[1], D);
    if (ln)
      touches(i.in[2], D);
    break;
  }
  case Op::LayerNormGrad:
  case Op::RMSNormGrad: {
    bool ln = i.op == Op::LayerNormGrad;
    arity(i, 3, ln ? 3 : 2);
    i128 D = last(i.in[1]), rows = div(n(i.in[1]), D);
    touches(i.in[0], rows * D);
    touches(i.in[1], rows * D);
    touches(i.in[2], D);
    touches(i.out[0], rows * D);
    touches(i.out[1], D);
    if (ln)
      touches(i.out[2], D);
    break;
  }
  case Op::Rope: {
    arity(i, 1, 1);
    i128 all = (i128)dim(i.in[0], 0) * dim(i.in[0], 1) * dim(i.in[0], 2);
    if (i.numHeads <= 0)
      bad("rope without heads");
    touches(i.in[0], all);
    touches(i.out[0], all);
    break;
  }
  case Op::Split:
  case Op::Concat: {
    bool split = i.op == Op::Split;
    const auto &parts = split ? i.out : i.in;
    const auto &whole = split ? i.in : i.out;
    if (parts.empty() || whole.empty())
      bad("split or concat without parts");
    i128 W = last(parts[0]), rows = div(n(parts[0]), W);
    for (int64_t id : parts)
      touches(id, rows * W);
    touches(whole[0], rows * W * (i128)parts.size());
    break;
  }
  case Op::CausalAttention:
  case Op::CausalAttentionGrad:
  case Op::Attention:
  case Op::AttentionGrad: {
    bool fwd = i.op == Op::CausalAttention || i.op == Op::Attention;
    arity(i, fwd ? 3 : 5, fwd ? 1 : 3);
    int64_t q = fwd ? i.in[0] : i.in[1];
    i128 B = dim(q, 0), S = dim(q, 1), H = i.numHeads, KV = i.numKvHeads;
    if (H <= 0 || KV <= 0 || H % KV != 0)
      bad("attention heads");
    i128 Dh = div(dim(q, 2), H);
    i128 qn = B * S * H * Dh, kvn = B * S * KV * Dh;
    if (fwd) {
      touches(i.in[0], qn);
      touches(i.in[1], kvn);
      touches(i.in[2], kvn);
      touches(i.out[0], qn);
    } else {
      touches(i.in[0], qn);
      touches(i.in[1], qn);
      touches(i.in[2], kvn);
      touches(i.in[3], kvn);
      touches(i.in[4], qn);
      touches(i.out[0], qn);
      touches(i.out[1], kvn);
      touches(i.out[2], kvn);
    }
    i128 need = (i128)kernels::attentionScratchFloats((int64_t)S, !fwd) * 4;
    if (i.scratchBytes < need)
      bad("attention scratch too small");
    inArena(p, where + " scratch", i.scratch, i.scratchBytes);
    break;
  }
  case Op::Gelu:
  case Op::GeluGrad:
  case Op::SiluMul:
  case Op::SiluMulGrad:
  case Op::Add: {
    size_t ins = i.op == Op::Gelu ? 1 : i.op == Op::SiluMulGrad ? 3 : 2;
    size_t outs = i.op == Op::SiluMulGrad ? 2 : 1;
    arity(i, ins, outs);
    i128 N = n(i.in[0]);
    for (size_t k = 0; k < ins; ++k)
      touches(i.in[k], N);
    for (size_t k = 0; k < outs; ++k)
      touches(i.out[k], N);
    break;
  }
  case Op::CrossEntropy:
  case Op::CrossEntropyGrad: {
    arity(i, 2, 1);
    i128 N = n(i.in[1]), V = last(i.in[0]);
    touches(i.in[0], N * V);
    touches(i.in[1], N, 8);
    touches(i.out[0], i.op == Op::CrossEntropy ? 1 : N * V);
    indices(i.in[1], (int64_t)V);
    break;
  }
  case Op::Cast:
    arity(i, 1, 1);
    touches(i.out[0], n(i.in[0]));
    if (t(i.in[0]).dtype == DType::I64)
      bad("cast of an i64 tensor");
    break;
  case Op::Record:
  case Op::Wait:
    if (i.event < 0 || i.event >= p.events)
      bad("event out of range");
    break;
  case Op::Alloc: {
    const Unit &u = unit();
    inArena(p, where + " gradient buffer", i.dst, (i128)u.paddedNumel * 4);
    if (i.zeroFrom < 0 || i.zeroFrom > u.paddedNumel)
      bad("zero_from outside the unit");
    break;
  }
  case Op::AllGather:
    inArena(p, where + " gathered buffer", i.dst, (i128)unit().paddedNumel * (i.bf16 ? 2 : 4));
    if (i.overReshard) {
      if (p.reshardAfterForward < 2 || p.shardSize % p.reshardAfterForward)
        bad("a gather over reshard groups the program does not have");
      inArena(p, where + " resharded copy", i.src,
              (i128)unit().paddedNumel / p.reshardAfterForward * (i.bf16 ? 2 : 4));
    } else if (p.offloadsParams()) {
      // offload all: the shard (or its bf16 copy) from the host pool.
      if (i.bf16)
        inHostPool(p, where + " host bf16 copy", unit().hostGatherOffset,
                   (i128)unit().shardNumel * 2);
      else
        inHostPool(p, where + " host shard", unit().hostShardOffset, (i128)unit().shardNumel * 4);
    }
    break;
  case Op::Reshard:
    if (p.reshardAfterForward < 2 || p.shardSize % p.reshardAfterForward)
      bad("a reshard into groups the program does not have");
    inArena(p, where + " gathered buffer", i.src, (i128)unit().paddedNumel * (i.bf16 ? 2 : 4));
    inArena(p, where + " resharded copy", i.dst,
            (i128)unit().paddedNumel / p.reshardAfterForward * (i.bf16 ? 2 : 4));
    break;
  case Op::Accumulate:
    inArena(p, where + " gradient buffer", i.src, (i128)unit().paddedNumel * p.gradElementBytes());
    inArena(p, where + " accumulation buffer", i.dst, (i128)unit().paddedNumel * 4);
    break;
  case Op::ReduceScatter:
    inArena(p, where + " reduced buffer", i.src, (i128)unit().paddedNumel * 4);
    break;
  case Op::Free:
  case Op::OptimizerStep:
  case Op::AllReduce:
    unit();
    break;
  case Op::GradNorm:
    break;
  }
}

void Checker::phase(const Phase &s, const char *name) {
  for (int stream : {0, 1}) {
    const auto &list = stream ? s.comm : s.compute;
    for (size_t k = 0; k < list.size(); ++k) {
      where = std::string(name) + (stream ? ".comm[" : ".compute[") + std::to_string(k) + "] (" +
              opName(list[k].op) + ")";
      instruction(list[k]);
    }
  }
  std::vector<Slot> order;
  std::string why = issueOrder(s, order);
  if (!why.empty())
    violation(std::string("accepted a phase that cannot be issued: ") + name + ": " + why);
  if (order.size() != s.compute.size() + s.comm.size())
    violation(std::string("issueOrder left instructions out: ") + name);
}

void Checker::run() {
  if (p.worldSize < 1 || p.shardSize < 1 || p.worldSize % p.shardSize || p.microBatch < 1 ||
      p.seqLen < 1 || p.arenaBytes < 0 || p.events < 0)
    violation("accepted inconsistent top-level sizes");
  for (size_t k = 0; k < p.tensors.size(); ++k) {
    const Tensor &x = p.tensors[k];
    for (int64_t d : x.shape)
      if (d < 0)
        violation("accepted a negative dimension in tensors[" + std::to_string(k) + "]");
    inArena(p, "tensors[" + std::to_string(k) + "]", x.offset, numel(x) * elementBytes(x.dtype));
  }
  for (size_t k = 0; k < p.units.size(); ++k) {
    const Unit &u = p.units[k];
    std::string w = "units[" + std::to_string(k) + "]";
    if (u.shardSize != p.shardSize || (i128)u.shardNumel * u.shardSize != u.paddedNumel ||
        u.numel > u.paddedNumel || u.numel < 0 || u.shardNumel < 0)
      violation("accepted an inconsistent layout in " + w);
    // offload all: the parameter shard is the host pool's master copy.
    if (p.offloadsParams() ? u.shardOffset != -1 || p.shardSize < 2 : false)
      violation("accepted an arena parameter shard, or no gathers, under offload all in " + w);
    if (!p.offloadsParams())
      inArena(p, w + " shard", u.shardOffset, (i128)u.shardNumel * 4);
    inArena(p, w + " gradient shard", u.gradShardOffset, (i128)u.shardNumel * 4);
    if (p.offloadsOptimizer()) {
      for (int64_t off : {u.expAvgOffset, u.expAvgSqOffset, u.hostShardOffset, u.hostGradOffset})
        inHostPool(p, w + " host buffer", off, (i128)u.shardNumel * 4);
      if (u.hostGatherOffset >= 0)
        inHostPool(p, w + " host bf16 copy", u.hostGatherOffset, (i128)u.shardNumel * 2);
      bool bf16Gathers = p.offloadsParams() && p.paramDtype == "bf16";
      if ((u.hostGatherOffset >= 0) != bf16Gathers)
        violation("accepted a host bf16 copy where gathers do not send one, or none where they "
                  "do, in " +
                  w);
    } else {
      for (int64_t off : {u.expAvgOffset, u.expAvgSqOffset})
        inArena(p, w + " moment", off, (i128)u.shardNumel * 4);
      if (u.hostShardOffset >= 0 || u.hostGradOffset >= 0 || p.hostBytes != 0)
        violation("accepted a host pool in a program without offload in " + w);
    }
    i128 next = 0;
    for (const Param &prm : u.params) {
      i128 m = 1;
      for (int64_t d : prm.shape) {
        if (d < 0)
          violation("accepted a parameter with a negative dimension in " + w);
        m *= d;
      }
      if (m != prm.numel || prm.offset != next || prm.numel < 0)
        violation("accepted a parameter outside the flat layout in " + w);
      next += prm.numel;
    }
    if (next != u.numel)
      violation("accepted parameters that do not add up in " + w);
  }
  where = "inputs";
  for (int64_t id : {p.tokens, p.targets})
    if (t(id).dtype != DType::I64 || t(id).shape != std::vector<int64_t>{p.microBatch, p.seqLen})
      bad("token inputs that are not i64 [micro_batch, seq_len]");
  where = "loss";
  if (numel(t(p.loss)) != 1)
    bad("a loss that is not one element");
  touches(p.loss, 1);
  // Every list a run may issue: a step's first and last micro-steps have
  // their own where the program says so.
  for (auto [s, name] :
       {std::pair<const Phase *, const char *>{&p.firstMicroStep, "first_micro_step"},
        {&p.microStep, "micro_step"},
        {&p.lastMicroStep, "last_micro_step"}})
    if (!s->compute.empty() || !s->comm.empty())
      phase(*s, name);
  positionOutputs.clear();
  positionLimit.clear();
  phase(p.optimizer, "optimizer");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string path = fuzz::scratchDir() + "/program.json";
  fuzz::writeFile(path, data, size);
  Program p;
  std::string err;
  try {
    err = loadProgram(path, p);
  } catch (const std::exception &e) {
    violation(std::string("loadProgram threw: ") + e.what());
  } catch (...) {
    violation("loadProgram threw something");
  }
  if (!err.empty()) {
    fuzz::checkError(err, path, "loadProgram");
    return 0;
  }
  Checker(p).run();
  return 0;
}
