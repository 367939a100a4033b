//===- Safetensors.h - reading shards of, and writing, safetensors -*- C++ -*-===//
#ifndef FSDP_RUNTIME_IO_SAFETENSORS_H
#define FSDP_RUNTIME_IO_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fsdp::io {

struct TensorInfo {
  std::string dtype; // "F32", "BF16", "F16", ...
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0; // byte range within the data section
};

/// An open safetensors file: the header is parsed, the data is read on
/// demand, element range by element range, so that a rank reads only its
/// shards.
class SafetensorsReader {
public:
  ~SafetensorsReader();
  /// Empty string on success, else the error.
  std::string open(const std::string &path);
  const std::map<std::string, TensorInfo> &tensors() const { return infos; }
  /// Reads elements [first, first + count) of `name` as f32 (from F32, BF16
  /// or F16 storage).
  std::string readF32(const std::string &name, int64_t first, int64_t count, float *out) const;

private:
  std::string path;
  int fd = -1;
  int64_t dataStart = 0, fileSize = 0;
  std::map<std::string, TensorInfo> infos;
};

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data;
};

/// Writes F32 tensors, through a temporary renamed into place.
std::string writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors);

} // namespace fsdp::io

#endif
