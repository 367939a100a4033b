//===- Dataset.h - token streams (nanoGPT's train.bin) -----------*- C++ -*-===//
#ifndef FSDP_RUNTIME_IO_DATASET_H
#define FSDP_RUNTIME_IO_DATASET_H

#include "runtime/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::io {

/// Flat little-endian uint16 tokens, validated whole against the model's
/// vocabulary before the first step. Without a file: synthetic tokens.
class Dataset {
public:
  std::string open(const std::string &path, const program::Program &p, uint64_t seed = 0);
  int64_t size() const { return tokens.size(); }
  int64_t token(int64_t i) const { return tokens[i]; }
  int64_t bytes() const { return tokens.size() * sizeof(uint16_t); }

private:
  /// Makes room for n tokens, or says why not.
  std::string allocate(int64_t n);
  std::vector<uint16_t> tokens;
};

} // namespace fsdp::io

#endif
