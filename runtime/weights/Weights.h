//===- Weights.h - a model's weights in and out, HF's names ------*- C++ -*-===//
//
// The rank's first shards, from --weights (an HF safetensors file or
// folder, checked against the model first) or the seeded initialisation,
// and the full weights written back with HF's names and layouts
// (--save-weights). The files themselves: Safetensors.h.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_WEIGHTS_WEIGHTS_H
#define FSDP_RUNTIME_WEIGHTS_WEIGHTS_H

#include "runtime/Options.h"
#include "runtime/Program.h"
#include "runtime/weights/Safetensors.h"

#include <string>
#include <vector>

namespace fsdp::runtime {
class Communicator;
}

namespace fsdp::weights {

using runtime::RunOptions;

/// Fills the rank's persistent buffers of every unit in `arena`, host memory
/// laid out as the plan's arena (only the units' shard ranges are written):
/// the parameter shard of member `shardMember` from options.weights (its byte
/// ranges only, after checking every tensor's presence, shape and dtype) or
/// the seeded initialisation; the gradient shard zeroed (the moments are the
/// trainer's). Under offload all the parameter shard is the host pool's,
/// `host` (Program::paramShard). Under tensor parallelism the shard is of
/// tp rank `tpRank`'s pieces, each element the whole parameter's it is
/// (Param::wholeElement). Returns "" or the error.
std::string initShards(const program::Program &p, const RunOptions &options, int shardMember,
                       char *arena, char *host = nullptr, int tpRank = 0);

/// Every parameter of `p` is in `weights` with its shape and a dtype the
/// runtime reads (F32, BF16, F16), and every tensor of `weights` is one of
/// them, one of the program's tied copies, or under one of its unused weight
/// prefixes (each such tensor named in `ignored`); an error names the file
/// and the tensor.
std::string checkWeights(const program::Program &p, const WeightSource &weights,
                         std::vector<std::string> *ignored = nullptr);

/// Gathers the parameters and writes them with HF names and layouts, in
/// `saveDtype` ("f32", "bf16"; "": the program's param_dtype): one
/// safetensors file, or, when `path` is a folder (isWeightsFolder), HF shards
/// of at most `maxShardSize` bytes, their index and the model's files
/// (modelFiles). Only rank 0 writes. A parameter that is not finite is an
/// error on every rank naming `step` and the parameter, and nothing is
/// written.
std::string saveFullWeights(const std::string &path, const program::Program &p,
                            runtime::Communicator &comm, char *arena, int64_t maxShardSize,
                            int64_t step, const std::string &saveDtype = "", char *host = nullptr);

/// What a --save-weights folder gets beside the weights, from the program:
/// config.json (the HF config the model was imported from, its torch_dtype
/// the saved dtype's: "float32" or "bfloat16") and, for a model that
/// generates, generation_config.json; as transformers writes them (indent 2,
/// keys sorted). None for a program without an HF config (a JSON or MLIR
/// graph's).
std::vector<FolderFile> modelFiles(const program::Program &p, SaveDtype dtype);

/// The dtype a save writes: `saveDtype` ("f32", "bf16"), or by default the
/// program's param_dtype.
SaveDtype saveDtypeOf(const program::Program &p, const std::string &saveDtype);

} // namespace fsdp::weights

#endif
