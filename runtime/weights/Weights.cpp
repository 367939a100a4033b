//===- Weights.cpp - a model's weights in and out, HF's names -------------===//
#include "runtime/weights/Weights.h"
#include "runtime/Communicator.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "support/Random.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

using namespace fsdp;
using namespace fsdp::weights;
using namespace fsdp::program;

std::string fsdp::weights::checkWeights(const Program &p, const weights::WeightSource &w,
                                        std::vector<std::string> *ignored) {
  std::set<std::string> names;
  for (const Unit &u : p.units)
    for (const Param &prm : u.params)
      names.insert(prm.name);
  for (const Unit &u : p.units)
    for (const Param &prm : u.params) {
      auto it = w.tensors().find(prm.name);
      if (it == w.tensors().end())
        return w.path() + ": missing tensor '" + prm.name + "'";
      const std::string &file = w.fileOf(prm.name);
      if (it->second.shape != prm.wholeShape()) {
        std::string want, got;
        for (int64_t d : prm.wholeShape())
          want += (want.empty() ? "" : ", ") + std::to_string(d);
        for (int64_t d : it->second.shape)
          got += (got.empty() ? "" : ", ") + std::to_string(d);
        return file + ": tensor '" + prm.name + "' has shape [" + got + "], the model needs [" +
               want + "]";
      }
      const std::string &dt = it->second.dtype;
      if (dt != "F32" && dt != "BF16" && dt != "F16")
        return file + ": tensor '" + prm.name + "' is " + dt + "; weights must be F32, BF16 or F16";
    }
  // Beyond the model's tensors, what the program says a checkpoint of it
  // may hold: a tied copy is the same tensor again; a head the model does
  // not have is ignored, named. Anything else is not this model's, and
  // reading the checkpoint as if it were would be silent loss.
  for (const auto &[name, info] : w.tensors()) {
    if (names.count(name) ||
        std::find(p.tiedCopies.begin(), p.tiedCopies.end(), name) != p.tiedCopies.end())
      continue;
    auto unused =
        std::find_if(p.unusedWeightPrefixes.begin(), p.unusedWeightPrefixes.end(),
                     [&](const std::string &prefix) { return name.rfind(prefix, 0) == 0; });
    if (unused != p.unusedWeightPrefixes.end()) {
      if (ignored)
        ignored->push_back(w.fileOf(name) + ": tensor '" + name + "' is not part of " +
                           p.modelName + " (" + *unused + "*); ignored");
      continue;
    }
    return w.fileOf(name) + ": tensor '" + name + "' is not a parameter of " + p.modelName +
           " (a checkpoint of another model, or of another configuration?)";
  }
  return "";
}

// A deterministic initialisation that does not depend on the world size:
// each element's value is a function of the seed, the parameter's name and
// the element's index (support/Random.h).
std::string fsdp::weights::initShards(const Program &p, const RunOptions &o, int shardMember,
                                      char *arena, char *host, int tpRank) {
  auto at = [&](int64_t offset) { return reinterpret_cast<float *>(arena + offset); };
  // A file or an HF checkpoint folder: each rank reads, from whichever shard
  // file holds it, only the byte ranges of its own shards.
  weights::WeightSource reader;
  if (!o.weights.empty()) {
    std::string err = reader.open(o.weights);
    // Every parameter must be there with its shape: checked whole, before
    // any rank reads its shards.
    if (err.empty())
      err = checkWeights(p, reader);
    if (!err.empty())
      return err;
  }
  for (const Unit &u : p.units) {
    // The moments (in the host pool under offload) are the trainer's to
    // zero.
    float *shard = reinterpret_cast<float *>(p.paramShard(u, arena, host));
    std::memset(shard, 0, u.shardNumel * 4);
    std::memset(at(u.gradShardOffset), 0, u.shardNumel * 4);
    for (const Param &prm : u.params) {
      ShardSlice slice = shardSlice(u, shardMember, prm);
      if (!slice.count)
        continue;
      // The piece's element e is the whole parameter's prm.wholeElement(e).
      auto whole = [&](int64_t e) { return prm.wholeElement(e, tpRank, p.tp); };
      if (!o.weights.empty()) {
        // Runs of the piece that are runs of the whole: one read each (the
        // whole slice, for a parameter that is not cut).
        for (int64_t i = 0; i < slice.count;) {
          int64_t from = whole(slice.inParam + i), len = 1;
          while (i + len < slice.count && whole(slice.inParam + i + len) == from + len)
            ++len;
          std::string err = reader.readF32(prm.name, from, len, shard + slice.inShard + i);
          if (!err.empty())
            return err;
          i += len;
        }
        continue;
      }
      uint64_t nameHash = 1469598103934665603ull;
      for (char c : prm.name)
        nameHash = (nameHash ^ (unsigned char)c) * 1099511628211ull;
      bool isBias = prm.name.size() >= 5 && prm.name.compare(prm.name.size() - 5, 5, ".bias") == 0;
      for (int64_t i = 0; i < slice.count; ++i) {
        int64_t e = whole(slice.inParam + i); // the whole parameter's element
        float v;
        if (prm.shape.size() >= 2) {
          uint64_t r1 =
              support::splitmix64(o.seed ^ support::splitmix64(nameHash ^ (uint64_t)e * 2));
          uint64_t r2 = support::splitmix64(r1);
          double u1 = ((r1 >> 11) + 1) * 0x1.0p-53, u2 = (r2 >> 11) * 0x1.0p-53;
          v = (float)(0.02 * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
        } else {
          v = isBias ? 0.0f : 1.0f;
        }
        shard[slice.inShard + i] = v;
      }
    }
  }
  return "";
}

SaveDtype fsdp::weights::saveDtypeOf(const Program &p, const std::string &saveDtype) {
  const std::string &name = saveDtype.empty() ? p.paramDtype : saveDtype;
  return name == "bf16" ? SaveDtype::BF16 : SaveDtype::F32;
}

std::vector<FolderFile> fsdp::weights::modelFiles(const Program &p, SaveDtype dtype) {
  std::vector<FolderFile> files;
  if (p.hfConfig.empty())
    return files;
  // nlohmann::json keeps keys sorted, as transformers' to_json_string
  // (sort_keys=True, indent 2) writes them; the loader checked both are
  // objects.
  nlohmann::json config = nlohmann::json::parse(p.hfConfig);
  config["torch_dtype"] = dtype == SaveDtype::BF16 ? "bfloat16" : "float32";
  files.push_back({kConfigName, config.dump(2) + "\n"});
  if (!p.generationConfig.empty())
    files.push_back(
        {kGenerationConfigName, nlohmann::json::parse(p.generationConfig).dump(2) + "\n"});
  return files;
}

std::string fsdp::weights::saveFullWeights(const std::string &path, const program::Program &p,
                                           runtime::Communicator &comm, char *arena,
                                           int64_t maxShardSize, int64_t step,
                                           const std::string &saveDtype, char *host) {
  std::string err =
      checkpoint::checkFiniteState(p, comm, arena, step, /*moments=*/false,
                                   comm.memberIndex(runtime::Group::Shard), "weights file", host);
  if (!err.empty())
    return err;
  // The first shard group holds one whole copy (under tensor parallelism,
  // of its tp rank's pieces); its members gather each unit.
  bool inFirstGroup = comm.dpRank() < p.shardSize;
  std::vector<std::vector<float>> full(p.units.size());
  if (inFirstGroup)
    for (size_t i = 0; i < p.units.size(); ++i) {
      const auto &u = p.units[i];
      full[i].resize(u.paddedNumel);
      if (!comm.allGather(runtime::Group::Shard, p.paramShard(u, arena, host), full[i].data(),
                          u.shardNumel * 4))
        return "weights not written: " + comm.error();
    }
  // Tensor parallelism: rank 0 gathers the pieces of its tp group.
  std::vector<std::vector<float>> pieces(p.units.size());
  if (p.tp > 1 && comm.dpRank() == 0)
    for (size_t i = 0; i < p.units.size(); ++i) {
      pieces[i].resize(size_t(p.tp * p.units[i].paddedNumel));
      if (!comm.allGather(runtime::Group::Tp, full[i].data(), pieces[i].data(),
                          p.units[i].paddedNumel * 4))
        return "weights not written: " + comm.error();
    }
  if (comm.rank() == 0) {
    std::vector<NamedTensor> tensors;
    // Cut parameters put together (a vector's move keeps its data where
    // the tensors point).
    std::vector<std::vector<float>> wholes;
    for (size_t i = 0; i < p.units.size(); ++i)
      for (const auto &prm : p.units[i].params) {
        if (!prm.isCut()) {
          tensors.push_back({prm.name, prm.shape, full[i].data() + prm.offset});
          continue;
        }
        // Each piece from the first tp rank holding it.
        std::vector<float> whole(size_t(prm.numel * prm.tpPieces));
        int64_t padded = p.units[i].paddedNumel;
        for (int64_t t = 0; t < p.tp; t += p.tp / prm.tpPieces)
          for (int64_t e = 0; e < prm.numel; ++e)
            whole[prm.wholeElement(e, t, p.tp)] = pieces[i][t * padded + prm.offset + e];
        wholes.push_back(std::move(whole));
        tensors.push_back({prm.name, prm.wholeShape(), wholes.back().data()});
      }
    // The program's parameters: each tensor once (a tied head is not one),
    // in the order the model's importer lists them, its state-dict order.
    SaveDtype dtype = saveDtypeOf(p, saveDtype);
    err = isWeightsFolder(path)
              ? writeSafetensorsFolder(path, tensors, maxShardSize, dtype, modelFiles(p, dtype))
              : writeSafetensors(path, tensors, dtype);
  }
  return checkpoint::agree(comm, err, [] {});
}
