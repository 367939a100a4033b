//===- Dataset.h - token streams (nanoGPT's train.bin) -----------*- C++ -*-===//
//
// A run's tokens: one or more files of flat little-endian uint16 or uint32
// ids (fsdp-tokenize's output, nanoGPT's train.bin), read through read-only
// memory maps and taken as one stream, or synthetic tokens without a file.
// A mapped file's pages are the page cache's, shared by every process that
// maps it: a rank's private memory does not grow with the corpus.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DATA_DATASET_H
#define FSDP_RUNTIME_DATA_DATASET_H

#include "runtime/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::data {

/// What an fsdp-tokenize sidecar (FILE.json) says of its token file.
struct Sidecar {
  std::string path, dtype, tokenizer;
  int64_t vocabSize = 0, tokens = 0, eosId = -1, maskId = -1;
};

/// FILE.json beside a token file: *found, and what it says. "" or why it
/// is not a sidecar fsdp-run can read.
std::string readSidecar(const std::string &file, bool *found, Sidecar *out);

class Dataset {
public:
  Dataset() = default;
  Dataset(const Dataset &) = delete;
  Dataset &operator=(const Dataset &) = delete;
  ~Dataset();

  /// `spec`: a token file, several joined by commas, or a folder whose
  /// `*.bin` files are taken in name order; "" for synthetic tokens (from
  /// `seed`). `flag` names the flag in errors. `dtype`: "uint16", "uint32",
  /// or "" for a sidecar's or else the narrowest that holds the vocabulary.
  /// Every token is checked against the vocabulary in one pass, counting
  /// the occurrences of `countId` (-1: none) for maskCount.
  std::string open(const std::string &spec, const program::Program &p,
                   const std::string &dtype = "", uint64_t seed = 0, const char *flag = "--data",
                   int64_t countId = -1);
  int64_t size() const { return n; }
  int64_t token(int64_t i) const {
    size_t lo = 0;
    for (size_t hi = parts.size(); hi - lo > 1;) { // the last part starting at or before i
      size_t mid = (lo + hi) / 2;
      (parts[mid].first <= i ? lo : hi) = mid;
    }
    const unsigned char *b = parts[lo].base + (i - parts[lo].first) * width();
    return wide ? int64_t(b[0] | b[1] << 8 | b[2] << 16 | uint32_t(b[3]) << 24)
                : int64_t(b[0] | b[1] << 8);
  }
  /// The bytes this process holds privately for the stream: the synthetic
  /// tokens (a mapped file's pages are the page cache's).
  int64_t bytes() const { return (int64_t)synthetic.size(); }
  int width() const { return wide ? 4 : 2; }
  /// The sidecars of the files, in order (files without one: none).
  const std::vector<Sidecar> &sidecars() const { return sides; }
  /// Occurrences of open's `countId`.
  int64_t countOfId() const { return counted; }
  /// "" while every file has the size it was opened with, else the error
  /// naming it (a file truncated under a map would be SIGBUS on the next
  /// read of the pages past its end; one that grew would not be the stream
  /// that was checked).
  std::string checkUnchanged() const;

  /// --shuffle SEED: samples are windows of a permutation per epoch
  /// (docs/sampling.md), instead of the sequential order.
  void shuffle(uint64_t seed) {
    shuffled = true;
    shuffleSeed = seed;
  }
  bool isShuffled() const { return shuffled; }
  uint64_t seed() const { return shuffleSeed; }
  /// Where sample k (= step G + g) falls: its epoch (from 0) and its place in
  /// it, and the samples an epoch has.
  struct EpochPlace {
    int64_t epoch = 0, position = 0, samples = 1;
  };
  EpochPlace epochOf(int64_t S, int64_t k) const;

private:
  struct Part {
    std::string path;
    int fd = -1;
    const unsigned char *base = nullptr;
    int64_t bytes = 0, first = 0; // its first token's index in the stream
  };
  void close();
  std::string openFile(const std::string &path, const program::Program &p, const char *flag);
  std::vector<Part> parts;
  std::vector<unsigned char> synthetic;
  std::vector<Sidecar> sides;
  int64_t n = 0, counted = 0;
  bool wide = false, shuffled = false;
  uint64_t shuffleSeed = 0;
};

/// The token width a vocabulary needs: 2 (uint16) up to 65536 tokens, else 4.
inline int tokenWidthFor(int64_t vocab) { return vocab > 65536 ? 4 : 2; }

/// The window that sample position `x` of epoch `epoch` takes among `n`
/// windows under --shuffle `seed`: a keyed permutation of [0, n)
/// (docs/sampling.md gives it exactly).
uint64_t shuffledWindow(uint64_t seed, uint64_t epoch, uint64_t x, uint64_t n);

} // namespace fsdp::data

#endif
