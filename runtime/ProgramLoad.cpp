//===- ProgramLoad.cpp - reading a program and validating it whole --------===//
//
// Nothing is executed from a program that has not been checked whole:
// offsets against the arena, operands against the op (OpChecks.cpp), events
// against their records. Errors name the instruction: "micro_step.compute[12]
// (linear)".
//
//===----------------------------------------------------------------------===//
#include "runtime/OpChecks.h"
#include "runtime/Program.h"
#include "runtime/Scratch.h"
#include "runtime/StreamOrder.h"
#include "runtime/kernels/cpu.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <type_traits>

using namespace fsdp::program;
using namespace fsdp::program::detail;
using nlohmann::json;

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
  int64_t integer(const json &v, const char *key, const std::string &where, int64_t lo, int64_t hi,
                  bool element = false) {
    bool ok = v.is_number_integer();
    if (ok && v.is_number_unsigned())
      ok = v.get<uint64_t>() <= (uint64_t)hi;
    if (ok && !v.is_number_unsigned())
      ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    if (!ok)
      fail(where, std::string("'") + key +
                      (element ? "' must hold integers" : "' must be an integer") +
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
  void checkHostRange(const std::string &where, int64_t offset, i128 bytes) {
    if (offset < 0 || bytes < 0 || offset + bytes > p.hostBytes)
      fail(where, "bytes [" + std::to_string(offset) + ", " + str(offset + bytes) +
                      ") lie outside the host pool of " + std::to_string(p.hostBytes) + " bytes");
  }
  void loadPhase(const json &j, const std::string &phase, Phase &s);
  Instruction loadInstruction(const json &j, const std::string &where, bool comm);
  void loadRopeScaling(const json &j, const std::string &where, Instruction &inst);
  void checkInstruction(Instruction &inst, const std::string &where) {
    try {
      detail::checkInstruction(p, inst);
    } catch (const detail::CheckError &e) {
      fail(where, e.what);
    }
  }
  void checkIndices(const std::string &phase, const Phase &s);
  void loadInputs(const json &j);
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
  // A model's config.json is what fsdp-plan reads, not a program.
  if (!j.contains("format") && j.contains("model_type") && j["model_type"].is_string())
    throw LoadError{path + ": a model's config.json (model_type '" +
                    j["model_type"].get<std::string>() +
                    "'), not a program: plan it first, e.g. fsdp-plan " + path +
                    " --world-size 4 -o program.json, then fsdp-run program.json"};
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
  if (model.contains("tied_copies"))
    p.tiedCopies = get<std::vector<std::string>>(model, "tied_copies", "model");
  if (model.contains("unused_weight_prefixes"))
    p.unusedWeightPrefixes =
        get<std::vector<std::string>>(model, "unused_weight_prefixes", "model");
  // The HF config the model came from, and its generation config: objects,
  // kept as compact text for --save-weights DIR to write back.
  for (auto [key, into] :
       {std::pair{"hf_config", &p.hfConfig}, std::pair{"generation_config", &p.generationConfig}})
    if (model.contains(key)) {
      if (!model[key].is_object())
        fail("model", std::string("'") + key + "' must be a JSON object (the model's " +
                          (into == &p.hfConfig ? "config.json" : "generation_config.json") +
                          "), not " + model[key].dump());
      *into = model[key].dump();
    }
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
  if (j.contains("compute_dtype"))
    p.computeDtype = get<std::string>(j, "compute_dtype", "top level");
  if (j.contains("target")) {
    std::string t = get<std::string>(j, "target", "top level");
    auto target = parseTarget(t);
    if (!target)
      fail("top level", "target '" + t + "' is not cpu or cuda");
    p.target = *target;
  }
  if (j.contains("workspace")) {
    const json &w = at(j, "workspace", "top level");
    p.workspaceOffset = get<int64_t>(w, "offset", "workspace");
    p.workspaceBytes = get<int64_t>(w, "bytes", "workspace");
  }
  for (const std::string &d : {p.paramDtype, p.reduceDtype, p.computeDtype})
    if (d != "f32" && d != "bf16")
      fail("top level", "dtype '" + d + "' is not supported (f32 or bf16)");
  if (p.worldSize > kMaxRanks)
    fail("top level", "world_size " + std::to_string(p.worldSize) +
                          " is more ranks than fsdp-run runs (at most 1048576)");
  if (j.contains("tp")) {
    p.tp = get<int64_t>(j, "tp", "top level");
    if (p.tp < 2 || p.worldSize < 1 || p.worldSize % p.tp != 0)
      fail("tp", std::to_string(p.tp) +
                     ": the tensor-parallel degree must be at least 2 and "
                     "divide world_size " +
                     std::to_string(p.worldSize));
    p.sequenceParallel = get<bool>(j, "sequence_parallel", "top level");
  } else if (j.contains("sequence_parallel")) {
    fail("sequence_parallel", "only a program with tp has sequence parallelism");
  }
  if (p.worldSize < 1 || p.shardSize < 1 || p.dpSize() % p.shardSize != 0)
    fail("top level", "shard_size " + std::to_string(p.shardSize) + " must divide world_size " +
                          std::to_string(p.worldSize) +
                          (p.tp > 1 ? " / tp " + std::to_string(p.tp) : std::string()));
  if (p.microBatch < 1 || p.seqLen < 1 || p.arenaBytes < 0 || p.events < 0)
    fail("top level", "micro_batch, seq_len, arena_bytes and events must be positive");
  // cuBLAS's workspace: the plan's, on cuda only.
  if (int64_t need = stepWorkspaceBytes(p.target)) {
    if (p.workspaceBytes < need)
      fail("workspace", "the cuda target needs " + std::to_string(need) +
                            " bytes of cuBLAS workspace, the plan gives " +
                            std::to_string(p.workspaceBytes));
    checkRange("workspace", p.workspaceOffset, p.workspaceBytes);
  }
  if (j.contains("predicted_micro_step_s"))
    p.predictedMicroStepS = get<double>(j, "predicted_micro_step_s", "top level");
  if (j.contains("predicted_optimizer_s"))
    p.predictedOptimizerS = get<double>(j, "predicted_optimizer_s", "top level");
  if (j.contains("grad_sync")) {
    p.gradSync = get<std::string>(j, "grad_sync", "top level");
    if (p.gradSync != "every" && p.gradSync != "last")
      fail("grad_sync", "'" + p.gradSync + "' is not every or last");
  }
  if (j.contains("reshard_after_backward"))
    p.reshardAfterBackward = get<bool>(j, "reshard_after_backward", "top level");
  if (j.contains("reshard_after_forward")) {
    p.reshardAfterForward = get<int64_t>(j, "reshard_after_forward", "top level");
    if (p.reshardAfterForward < 2 || p.shardSize % p.reshardAfterForward != 0 ||
        p.reshardAfterForward >= p.shardSize)
      fail("reshard_after_forward", std::to_string(p.reshardAfterForward) +
                                        ": the reshard groups must have at least 2 "
                                        "ranks, divide shard_size " +
                                        std::to_string(p.shardSize) + " and be smaller");
    if (!p.reshardAfterBackward)
      fail("reshard_after_forward", "with reshard_after_backward false nothing is resharded");
  }
  if (j.contains("offload")) {
    std::string o = get<std::string>(j, "offload", "top level");
    std::optional<Offload> offload = parseOffload(o);
    if (!offload)
      fail("offload", "'" + o + "' is not none, optimizer or all");
    p.offload = *offload;
    if (p.offloadsParams() && p.shardSize < 2)
      fail("offload", "offload all needs shard groups of 2 ranks or more: with shard_size " +
                          std::to_string(p.shardSize) + " compute reads the shard in place");
  }
  if (j.contains("host_bytes")) {
    if (!p.offloadsOptimizer())
      fail("host_bytes", "a host pool is for offload optimizer or all, which this program does "
                         "not have");
    p.hostBytes = get<int64_t>(j, "host_bytes", "top level");
    if (p.hostBytes < 0)
      fail("host_bytes", "must not be negative");
  } else if (p.offloadsOptimizer()) {
    fail("offload", std::string("offload ") + offloadName(p.offload) +
                        " needs host_bytes, the host pool's size");
  }
  if (j.contains("grad_accum")) {
    p.gradAccum = get<int64_t>(j, "grad_accum", "top level");
    if (p.gradAccum < 1 || p.gradAccum > kMaxGradAccum)
      fail("grad_accum", "must be from 1 to " + std::to_string(kMaxGradAccum));
  }
  for (auto [key, field] :
       {std::pair<const char *, double *>{"model_flops_per_micro_step", &p.modelFlopsPerMicroStep},
        {"peak_flops", &p.peakFlops}})
    if (j.contains(key)) {
      *field = get<double>(j, key, "top level");
      if (!std::isfinite(*field) || *field < 0)
        fail(key, "must be a finite number of FLOPs, at least 0");
    }
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
    u.shardSize = get<int64_t>(uj, "shard_size", where);
    u.shardNumel = get<int64_t>(uj, "shard_numel", where);
    // offload all: no parameter shard in the arena (the host pool's
    // master copy is it).
    if (!p.offloadsParams())
      u.shardOffset = get<int64_t>(uj, "shard_offset", where);
    else if (uj.contains("shard_offset"))
      fail(where, "has a shard_offset, but under offload all the parameter shard is the host "
                  "pool's");
    else
      u.shardOffset = -1;
    u.gradShardOffset = get<int64_t>(uj, "grad_shard_offset", where);
    u.expAvgOffset = get<int64_t>(uj, "exp_avg_offset", where);
    u.expAvgSqOffset = get<int64_t>(uj, "exp_avg_sq_offset", where);
    if (u.shardSize != p.shardSize || u.numel < 0 || u.shardNumel < 0 ||
        (i128)u.shardNumel * u.shardSize != u.paddedNumel || u.paddedNumel < u.numel)
      fail(where, "unit '" + u.name + "' has an inconsistent layout (numel " +
                      std::to_string(u.numel) + ", padded " + std::to_string(u.paddedNumel) + ", " +
                      std::to_string(u.shardSize) + " shards of " + std::to_string(u.shardNumel) +
                      ")");
    for (int64_t off : p.arenaStateOffsets(u))
      checkRange(where, off, (i128)u.shardNumel * 4);
    // offload optimizer: the moments, the master shard and the gradient's
    // copy in the host pool.
    if (p.offloadsOptimizer()) {
      u.hostShardOffset = get<int64_t>(uj, "host_shard_offset", where);
      u.hostGradOffset = get<int64_t>(uj, "host_grad_offset", where);
      for (int64_t off : p.hostStateOffsets(u))
        checkHostRange(where, off, (i128)u.shardNumel * 4);
      // offload all with bf16 gathers: the master's bf16 copy they send.
      bool bf16 = p.offloadsParams() && p.paramDtype == "bf16";
      if (uj.contains("host_gather_offset") != bf16)
        fail(where, bf16 ? "needs a host_gather_offset: offload all gathers bf16 parameters "
                           "from the master shard's bf16 copy"
                         : "has a host_gather_offset, which only offload all with bf16 "
                           "parameters has");
      if (bf16) {
        u.hostGatherOffset = get<int64_t>(uj, "host_gather_offset", where);
        checkHostRange(where, u.hostGatherOffset, (i128)u.shardNumel * 2);
      }
    } else {
      if (uj.contains("host_shard_offset") || uj.contains("host_grad_offset") ||
          uj.contains("host_gather_offset"))
        fail(where, "has host offsets, which only a program with offload optimizer has");
    }
    // grad_sync last: the f32 accumulation buffer, the whole unit's.
    if (uj.contains("accumulated_offset")) {
      if (!p.syncsAtLastMicroStep())
        fail(where, "has an accumulated_offset, which only a program with grad_sync last has");
      u.accumulatedOffset = get<int64_t>(uj, "accumulated_offset", where);
      checkRange(where, u.accumulatedOffset, (i128)u.paddedNumel * 4);
    }
    int64_t next = 0;
    for (const json &pj : list(uj, "params", where)) {
      Param prm;
      prm.name = get<std::string>(pj, "name", where);
      prm.shape = get<std::vector<int64_t>>(pj, "shape", where);
      prm.offset = get<int64_t>(pj, "offset", where);
      prm.numel = get<int64_t>(pj, "numel", where);
      prm.decay = get<bool>(pj, "decay", where);
      if (pj.contains("tp_dim")) {
        if (p.tp == 1)
          fail(where,
               "parameter '" + prm.name + "' is cut (tp_dim), which only a program with tp is");
        prm.tpDim = get<int64_t>(pj, "tp_dim", where);
        prm.tpPieces = get<int64_t>(pj, "tp_pieces", where);
        prm.tpSections = get<int64_t>(pj, "tp_sections", where);
        if (prm.tpDim < 0 || prm.tpDim >= (int64_t)prm.shape.size() || prm.tpPieces < 1 ||
            p.tp % prm.tpPieces != 0 || prm.tpSections < 1 ||
            prm.shape[prm.tpDim] % prm.tpSections != 0)
          fail(where, "parameter '" + prm.name + "': tp_dim " + std::to_string(prm.tpDim) +
                          ", tp_pieces " + std::to_string(prm.tpPieces) + " and tp_sections " +
                          std::to_string(prm.tpSections) +
                          " must name one of its dimensions, cut into pieces that divide tp " +
                          std::to_string(p.tp) + ", with sections that divide its extent");
      }
      if (pj.contains("tp_partial")) {
        if (p.tp == 1)
          fail(where,
               "parameter '" + prm.name +
                   "' has a partial gradient (tp_partial), which only a program with tp has");
        prm.tpPartial = get<bool>(pj, "tp_partial", where);
      }
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

  loadInputs(at(j, "inputs", "top level"));
  p.loss = get<int64_t>(j, "loss", "top level");
  if (tensor(p.loss, "loss").numel() != 1)
    fail("loss", "the loss must be a scalar");

  loadPhase(at(j, "micro_step", "top level"), "micro_step", p.microStep);
  // reshard_after_backward false: the first micro-step of a step gathers
  // (read after micro_step, whose cross_entropy gives the vocabulary).
  if (p.keepsGatheredAcrossMicroSteps() && !j.contains("first_micro_step"))
    fail("first_micro_step", "missing: reshard_after_backward false gathers in a step's first "
                             "micro-step, whose lists these are");
  if (p.keepsGatheredAcrossMicroSteps())
    loadPhase(at(j, "first_micro_step", "top level"), "first_micro_step", p.firstMicroStep);
  else if (j.contains("first_micro_step"))
    fail("first_micro_step", "only a program with reshard_after_backward false has one");
  // grad_sync last: the last micro-step of a step has lists of its own.
  if (p.hasLastMicroStep() && !j.contains("last_micro_step"))
    fail("last_micro_step",
         std::string("missing: ") +
             (p.syncsAtLastMicroStep()
                  ? "grad_sync last reduces in a step's last micro-step, whose lists these are"
                  : "the replica groups' all-reduce runs in a step's last micro-step, whose lists "
                    "these are (a program written before it did must be planned again)"));
  if (p.hasLastMicroStep())
    loadPhase(at(j, "last_micro_step", "top level"), "last_micro_step", p.lastMicroStep);
  else if (j.contains("last_micro_step"))
    fail("last_micro_step", "only a program with grad_sync last or replica groups has one");
  // The all-reduce sums each gradient shard whole: in a micro-step before
  // the last it would add the step's earlier micro-steps again.
  for (auto [s, name] :
       {std::pair{&p.firstMicroStep, "first_micro_step"}, {&p.microStep, "micro_step"}})
    for (const Instruction &i : s->comm)
      if (i.op == Op::AllReduce)
        fail(std::string(name) + ".comm[" + std::to_string(i.index) + "] (all_reduce)",
             "all-reduces a gradient shard before the step's last micro-step, where it holds "
             "the micro-steps so far and their sum would be added again: it belongs in "
             "last_micro_step (plan again)");
  loadPhase(at(j, "optimizer", "top level"), "optimizer", p.optimizer);
  // What the two lists touch must be ordered wherever they conflict.
  for (auto [s, name] : {std::pair{&p.firstMicroStep, "first_micro_step"},
                         {&p.microStep, "micro_step"},
                         {&p.lastMicroStep, "last_micro_step"},
                         {&p.optimizer, "optimizer"}})
    if (std::string why = checkStreamOrder(p, *s); !why.empty())
      fail(name, why);
}

// The model's inputs: their kind (left out: tokens) and tensors; an image
// program's image and patch sizes and classes.
void Loader::loadInputs(const json &j) {
  if (!j.is_object())
    fail("inputs", "must be an object");
  for (auto &[key, v] : j.items())
    if (key != "kind" && key != "tokens" && key != "targets" && key != "image")
      fail("inputs", "unknown key '" + key + "' (kind, tokens, targets, image)");
  if (j.contains("kind")) {
    std::string kind = get<std::string>(j, "kind", "inputs");
    auto k = parseInputKind(kind);
    if (!k)
      fail("inputs", "kind '" + kind + "' is not tokens, masked_tokens or images");
    p.inputKind = *k;
  }
  p.tokens = get<int64_t>(j, "tokens", "inputs");
  p.targets = get<int64_t>(j, "targets", "inputs");
  const Tensor &tokens = tensor(p.tokens, "inputs"), &targets = tensor(p.targets, "inputs");
  if (p.tokens == p.targets)
    fail("inputs", "tokens and targets must be two tensors");
  if (p.inputKind != InputKind::Images) {
    if (j.contains("image"))
      fail("inputs", "'image' belongs to a program whose inputs are images, not " +
                         std::string(inputKindName(p.inputKind)));
    for (const Tensor *t : {&tokens, &targets})
      if (t->dtype != DType::I64 || t->shape != std::vector<int64_t>{p.microBatch, p.seqLen})
        fail("inputs", "tokens and targets must be i64 [micro_batch, seq_len]");
    return;
  }
  const json &im = at(j, "image", "inputs");
  ImageSpec &s = p.image;
  s.height = get<int64_t>(im, "height", "inputs.image");
  s.width = get<int64_t>(im, "width", "inputs.image");
  s.channels = get<int64_t>(im, "channels", "inputs.image");
  s.patchHeight = get<int64_t>(im, "patch_height", "inputs.image");
  s.patchWidth = get<int64_t>(im, "patch_width", "inputs.image");
  s.classes = get<int64_t>(im, "classes", "inputs.image");
  for (auto &[key, v] : im.items())
    if (key != "height" && key != "width" && key != "channels" && key != "patch_height" &&
        key != "patch_width" && key != "classes")
      fail("inputs.image", "unknown key '" + key +
                               "' (height, width, channels, patch_height, patch_width, classes)");
  for (int64_t v : {s.height, s.width, s.channels, s.patchHeight, s.patchWidth, s.classes})
    if (v < 1)
      fail("inputs.image", "height, width, channels, patch_height, patch_width and classes "
                           "must be at least 1");
  if (s.height % s.patchHeight != 0 || s.width % s.patchWidth != 0)
    fail("inputs.image", "the image (" + std::to_string(s.height) + " x " +
                             std::to_string(s.width) + ") is not a whole number of patches (" +
                             std::to_string(s.patchHeight) + " x " + std::to_string(s.patchWidth) +
                             ")");
  // Each factor is below 2^63: their products fit in 128 bits.
  i128 pixels = (i128)s.height * s.width * s.channels;
  if (pixels > ((i128)1 << 40))
    fail("inputs.image", "an image of " + str(pixels) + " values is more than fsdp-run reads");
  if (p.seqLen != s.patches() + 1)
    fail("inputs.image", "seq_len " + std::to_string(p.seqLen) + " must be the patches and " +
                             "the CLS token, " + std::to_string(s.patches() + 1));
  std::vector<int64_t> patchShape = {p.microBatch, s.patches(), s.patchValues()};
  if ((tokens.dtype != DType::F32 && tokens.dtype != DType::BF16) || tokens.shape != patchShape)
    fail("inputs", "an image program's tokens (its patches) must be f32 or bf16 [micro_batch, " +
                       std::to_string(s.patches()) + " patches, " +
                       std::to_string(s.patchValues()) + " values]");
  if (targets.dtype != DType::I64 || targets.shape != std::vector<int64_t>{p.microBatch, 1})
    fail("inputs", "an image program's targets (its labels) must be i64 [micro_batch, 1]");
}

void Loader::loadPhase(const json &j, const std::string &phase, Phase &s) {
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
// sequence length; and the table must have that many rows. Masked targets
// also hold kernels::kIgnoreIndex, which only the loss and its gradient skip.
void Loader::checkIndices(const std::string &phase, const Phase &s) {
  std::map<int64_t, int64_t> positions; // position_ids output -> its sequence length
  // Or the token types a token_type_ids of the phase writes, all 0: a table
  // of at least 1 row.
  std::set<int64_t> tokenTypes;
  for (const Instruction &inst : s.compute)
    if (inst.op == Op::PositionIds) {
      int64_t &S = positions[inst.out[0]];
      S = std::max(S, p.tensors[inst.in[0]].shape[1]);
    } else if (inst.op == Op::TokenTypeIds) {
      tokenTypes.insert(inst.out[0]);
    }
  // Sequence parallelism: a tp_chunk's part of the tokens or the targets
  // holds their values.
  std::map<int64_t, int64_t> partOf;
  for (const Instruction &inst : s.compute)
    if (inst.op == Op::TpChunk && (inst.in[0] == p.tokens || inst.in[0] == p.targets))
      partOf[inst.out[0]] = inst.in[0];
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
    if (auto part = partOf.find(ids); part != partOf.end())
      ids = part->second;
    std::string where =
        phase + ".compute[" + std::to_string(inst.index) + "] (" + opName(inst.op) + ")";
    std::string rowsText =
        std::to_string(rows) +
        (inst.op == Op::CrossEntropy || inst.op == Op::CrossEntropyGrad ? " classes" : " rows");
    if (p.inputKind == InputKind::Images && ids == p.tokens) {
      fail(where, "indexes by the image patches, which are not ids");
    } else if (p.inputKind == InputKind::Images && ids == p.targets) {
      // Labels: the data reader holds them below the classes.
      if (p.image.classes > rows)
        fail(where, "labels up to " + std::to_string(p.image.classes - 1) + " (of " +
                        std::to_string(p.image.classes) + " classes) index " + table + " " +
                        rowsText);
    } else if (p.inputKind == InputKind::MaskedTokens && ids == p.targets &&
               inst.op != Op::CrossEntropy && inst.op != Op::CrossEntropyGrad) {
      // Only the loss skips the unselected positions' target.
      fail(where, "indexes by the targets of masked_tokens inputs, which hold " +
                      std::to_string(fsdp::kernels::kIgnoreIndex) +
                      " at every position not selected; only cross_entropy and "
                      "cross_entropy_grad skip them (docs/program-format.md, Inputs)");
    } else if (ids == p.tokens || ids == p.targets) {
      if (vocab <= 0)
        fail(where, "indexes by token, but no cross_entropy gives the vocabulary");
      if (vocab > rows)
        fail(where, "token ids up to " + std::to_string(vocab - 1) + " (the vocabulary of " +
                        std::to_string(vocab) + ") index " + table + " " + rowsText);
    } else if (positions.count(ids)) {
      if (positions[ids] > rows)
        fail(where, "positions up to " + std::to_string(positions[ids] - 1) + " index " + table +
                        " " + rowsText);
    } else if (tokenTypes.count(ids)) {
      if (rows < 1)
        fail(where, "token types (0) index " + std::string(table) + " " + rowsText);
    } else {
      fail(where, "indexes by tensor " + std::to_string(ids) +
                      ", which is neither the tokens, the targets, nor a position_ids or "
                      "token_type_ids output");
    }
  }
}

// A rope's `scaling` and the parameters of its kind, each required, none of
// another kind's; values the kernels compute (fsdp::support::checkRopeScaling).
void Loader::loadRopeScaling(const json &j, const std::string &where, Instruction &inst) {
  using fsdp::support::RopeScalingField;
  const char *key = fsdp::support::kRopeScalingKey;
  // A program written before scaling had kinds: read as it stands, its
  // llama3_* keys would be ignored and Llama 3.1's rope run unscaled.
  for (const char *old : {"llama3_factor", "llama3_low_freq_factor", "llama3_high_freq_factor",
                          "llama3_original_max_position"})
    if (j.contains(old))
      fail(where, std::string("'") + old +
                      "' is the key Llama 3.1's rope scaling had before scaling kinds "
                      "(docs/program-format.md); plan the model again");
  if (!j.contains(key)) {
    for (const RopeScalingField &f : fsdp::support::ropeScalingFields())
      if (j.contains(f.name))
        fail(where, std::string("'") + f.name + "' is given without '" + key + "'");
    return;
  }
  std::string name = get<std::string>(j, key, where);
  auto kind = fsdp::support::parseRopeScalingKind(name);
  if (!kind)
    fail(where, std::string("'") + key + "' must be one of " + fsdp::support::ropeScalingNames() +
                    ", not \"" + name + "\"");
  fsdp::support::RopeScaling s;
  s.kind = *kind;
  for (const RopeScalingField &f : fsdp::support::ropeScalingFields()) {
    if (!fsdp::support::ropeScalingReads(*kind, f.name)) {
      if (j.contains(f.name))
        fail(where, std::string("'") + f.name + "' is not a parameter of " + name +
                        " scaling (its parameters: " + fsdp::support::ropeScalingFieldList(*kind) +
                        ")");
      continue;
    }
    switch (f.type) {
    case RopeScalingField::Type::F64:
      s.*f.f64 = get<double>(j, f.name, where);
      break;
    case RopeScalingField::Type::I64:
      s.*f.i64 = get<int64_t>(j, f.name, where);
      break;
    case RopeScalingField::Type::Bool:
      s.*f.boolean = get<bool>(j, f.name, where);
      break;
    }
  }
  std::string problem = fsdp::support::checkRopeScaling(s);
  if (!problem.empty())
    fail(where, problem);
  inst.ropeScaling = s;
}

Instruction Loader::loadInstruction(const json &j, const std::string &where, bool comm) {
  Instruction inst;
  std::string name = get<std::string>(j, "op", where);
  const OpInfo *info = findOp(name);
  if (!info)
    fail(where, "unknown op '" + name + "'");
  inst.op = info->op;
  if (info->stream != OpStream::Either && (info->stream == OpStream::Comm) != comm)
    fail(where,
         "op '" + name + "' does not belong on the " + (comm ? "comm" : "compute") + " stream");
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
  if (j.contains("kind")) {
    std::string k = get<std::string>(j, "kind", where);
    if (k != "params" && k != "grads" && k != "resharded")
      fail(where, "kind must be \"params\", \"grads\" or \"resharded\", but is \"" + k + "\"");
    inst.kind = k == "params"      ? BufferKind::Params
                : k == "resharded" ? BufferKind::Resharded
                                   : BufferKind::Grads;
  }
  if (j.contains("group")) {
    std::string g = get<std::string>(j, "group", where);
    if (g != "shard" && g != "reshard" && g != "tp")
      fail(where,
           "group must be \"shard\" (the default), \"reshard\" or \"tp\", but is \"" + g + "\"");
    inst.overReshard = g == "reshard";
    if (inst.overReshard && inst.op != Op::AllGather)
      fail(where, "only an all_gather runs over the reshard group");
    inst.overTp = g == "tp";
    if (inst.overTp && inst.op != Op::AllReduce)
      fail(where, "only an all_reduce runs over the tp group");
  }
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
  if (j.contains("window"))
    inst.window = get<int64_t>(j, "window", where);
  if (j.contains("approximate")) {
    std::string a = get<std::string>(j, "approximate", where);
    if (a != "tanh" && a != "none")
      fail(where, "approximate must be \"tanh\" or \"none\", but is \"" + a + "\"");
    inst.approximate = a == "none" ? GeluApproximate::None : GeluApproximate::Tanh;
  }
  if (j.contains("inverse"))
    inst.inverse = get<bool>(j, "inverse", where);
  if (j.contains("top_k"))
    inst.topK = get<int64_t>(j, "top_k", where);
  if (j.contains("norm_topk_prob"))
    inst.normTopkProb = get<bool>(j, "norm_topk_prob", where);
  if (j.contains("coef"))
    inst.coef = get<double>(j, "coef", where);
  loadRopeScaling(j, where, inst);
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

} // namespace

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
