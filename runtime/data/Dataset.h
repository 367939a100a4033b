//===- Dataset.h - token streams (nanoGPT's train.bin) -----------*- C++ -*-===//
#ifndef FSDP_RUNTIME_DATA_DATASET_H
#define FSDP_RUNTIME_DATA_DATASET_H

#include "runtime/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::data {

/// Flat little-endian uint16 or uint32 tokens, validated whole against the
/// model's vocabulary before the first step. Without a file: synthetic tokens.
class Dataset {
public:
  /// `dtype`: "uint16", "uint32", or "" for the narrowest that holds the
  /// vocabulary (uint16 when vocab_size <= 65536).
  std::string open(const std::string &path, const program::Program &p,
                   const std::string &dtype = "", uint64_t seed = 0);
  int64_t size() const { return wide ? (int64_t)t32.size() : (int64_t)t16.size(); }
  int64_t token(int64_t i) const { return wide ? (int64_t)t32[i] : (int64_t)t16[i]; }
  int64_t bytes() const { return size() * width(); }
  int width() const { return wide ? 4 : 2; }

private:
  /// Makes room for n tokens, or says why not.
  std::string allocate(int64_t n);
  char *data() { return wide ? (char *)t32.data() : (char *)t16.data(); }
  bool wide = false;
  std::vector<uint16_t> t16;
  std::vector<uint32_t> t32;
};

/// The token width a vocabulary needs: 2 (uint16) up to 65536 tokens, else 4.
inline int tokenWidthFor(int64_t vocab) { return vocab > 65536 ? 4 : 2; }

} // namespace fsdp::data

#endif
