//===- Safetensors.h - reading shards of, and writing, safetensors -*- C++ -*-===//
//
// Weights with HF names and layouts, in one safetensors file or in an HF
// checkpoint folder as transformers' save_pretrained writes it:
//   DIR/model.safetensors.index.json   {"metadata": {"total_size": BYTES},
//                                       "weight_map": {tensor: shard file}}
//   DIR/model-00001-of-0000N.safetensors ...
// or, when the weights fit in one shard, DIR/model.safetensors and no index.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_WEIGHTS_SAFETENSORS_H
#define FSDP_RUNTIME_WEIGHTS_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fsdp::weights {

struct TensorInfo {
  std::string dtype; // "F32", "BF16", "F16", ...
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0; // byte range within the data section
};

/// An open safetensors file: the header is parsed and checked against the
/// format (it begins with '{', only spaces pad it, keys are unique, offsets
/// are integers, the data is contiguous and ends with the file, __metadata__
/// maps strings to strings), the data is read on demand, element range by
/// element range, so that a rank reads only its shards. A file fsdp wrote
/// carries CRC-32s in __metadata__: the header's is checked at open, each
/// data block's before its bytes are used.
class SafetensorsReader {
public:
  ~SafetensorsReader();
  /// Empty string on success, else the error.
  std::string open(const std::string &path);
  const std::map<std::string, TensorInfo> &tensors() const { return infos; }
  const std::string &path() const { return file; }
  /// Reads elements [first, first + count) of `name` as f32 (from F32, BF16
  /// or F16 storage).
  std::string readF32(const std::string &name, int64_t first, int64_t count, float *out) const;
  /// Closes the file, keeping the header: each read opens it again. For the
  /// shards of a folder, so that ranks x shards files are not held open.
  void release();

private:
  std::string checkWrittenByFsdp(const std::map<std::string, std::string> &metadata,
                                 const std::string &header, uint64_t headerLen);

  std::string file;
  int fd = -1;
  int64_t dataStart = 0, fileSize = 0;
  std::map<std::string, TensorInfo> infos;
  // For a file fsdp wrote (checksums in __metadata__): one CRC-32 per
  // crcBlock bytes of the data, checked as the data is read. Empty otherwise.
  int64_t crcBlock = 0;
  std::vector<uint32_t> blockCrcs;
};

/// The index of an HF checkpoint folder and the single file's names in it.
constexpr const char *kIndexName = "model.safetensors.index.json";
constexpr const char *kSingleFileName = "model.safetensors";
/// The model's files a folder save writes beside the weights.
constexpr const char *kConfigName = "config.json";
constexpr const char *kGenerationConfigName = "generation_config.json";
/// transformers' default max_shard_size, "5GB" (decimal).
constexpr int64_t kDefaultMaxShardSize = 5000000000;

/// What --weights names: a safetensors file, an HF checkpoint folder (its
/// index, or model.safetensors alone), or the index file itself. Maps each
/// tensor name to the file that holds it and its header entry, so that a
/// reader reads byte ranges without caring which file they lie in.
class WeightSource {
public:
  /// Parses the index and every shard's header (no tensor data). Errors name
  /// the file, and the tensor where there is one.
  std::string open(const std::string &path);
  /// What errors about the weights as a whole name: the file, or the index.
  const std::string &path() const { return where; }
  /// Every tensor the index maps (or the file holds), by name.
  const std::map<std::string, TensorInfo> &tensors() const { return infos; }
  /// The file that holds tensor `name` (which must be in tensors()).
  const std::string &fileOf(const std::string &name) const;
  /// Reads elements [first, first + count) of `name` as f32.
  std::string readF32(const std::string &name, int64_t first, int64_t count, float *out) const;
  /// What is odd but not wrong (an index's total_size that is not the sum of
  /// its tensors' bytes), for the tool to print once.
  const std::vector<std::string> &warnings() const { return notes; }

private:
  std::string where;
  std::vector<std::unique_ptr<SafetensorsReader>> files;
  std::map<std::string, TensorInfo> infos;
  std::map<std::string, size_t> fileIndex; // tensor -> files[i]
  std::vector<std::string> notes;
};

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data;
};

/// The dtype a save writes (--save-dtype): the f32 values as they are, or
/// each rounded to bf16, to nearest even (torch's .to(torch.bfloat16);
/// kernels::toBf16, as the bf16 gathers round).
enum class SaveDtype { F32, BF16 };
/// "F32" or "BF16", as safetensors names them.
const char *saveDtypeName(SaveDtype dtype);

/// A file of a --save-weights folder besides the weights (config.json,
/// generation_config.json): its name in the folder and its contents.
struct FolderFile {
  std::string name, text;
};

/// Writes the tensors in `dtype` (F32 by default), through a temporary renamed into place (and
/// removes the temporaries of earlier saves killed before their rename). The data lies in name
/// order, as the safetensors library lays it out; __metadata__ holds "format": "pt" and the CRC-32s
/// SafetensorsReader checks.
std::string writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors,
                             SaveDtype dtype = SaveDtype::F32);

/// True when --save-weights PATH means a folder: an existing folder, or a
/// path that does not end in ".safetensors".
bool isWeightsFolder(const std::string &path);

/// "" when --save-weights PATH says what it means; else why not: a name
/// with the extension of another kind of weights or tensor file
/// ("out.bin", "model.pt", "w.npz"), which would become a folder of that
/// name. A trailing '/' or an existing folder
/// means a folder whatever its name.
std::string saveWeightsNameError(const std::string &path);

/// Which tensors (indices into `tensors`) go into which shard, as
/// huggingface_hub's split_state_dict_into_shards does: in the given order,
/// a new shard when the next tensor would take the current one past
/// `maxShardSize` (bytes in `dtype`); a tensor larger than that alone in a
/// shard of its own (placed when it is met, before the shard being filled).
std::vector<std::vector<size_t>> planWeightShards(const std::vector<NamedTensor> &tensors,
                                                  int64_t maxShardSize,
                                                  SaveDtype dtype = SaveDtype::F32);

/// Writes `tensors` (in `dtype`) and the files `files` (config.json,
/// generation_config.json) into the folder `dir` (created if missing, not its
/// parents) as save_pretrained does: shards model-0000i-of-0000N.safetensors
/// of at most `maxShardSize` bytes of tensor data each and
/// model.safetensors.index.json, or model.safetensors alone when one shard
/// holds everything. Over an earlier save, atomically for both kinds of
/// reader (the index first, as fsdp-run; model.safetensors first, as
/// transformers): the shards are written under temporary names, an index
/// naming them replaces the earlier one, each gets its own name by a hard
/// link (a copy where there are none) renamed into place, a second index
/// names those, and only then do the earlier save's files, this save's
/// temporaries and those of killed saves go. One shard: model.safetensors
/// replaced by a rename, then the earlier index removed. At every moment the
/// index and model.safetensors, each that exists, name a whole model, the
/// earlier or this one. `files` are written durably under temporary names
/// with the shards (a failure there removes them all and leaves the earlier
/// save as it was) and each renamed over its name after the last switch.
/// Other files in `dir` are never touched. A failure before the first
/// switch removes what this save wrote.
std::string writeSafetensorsFolder(const std::string &dir, const std::vector<NamedTensor> &tensors,
                                   int64_t maxShardSize, SaveDtype dtype = SaveDtype::F32,
                                   const std::vector<FolderFile> &files = {});

} // namespace fsdp::weights

#endif
