//===- Dataset.cpp --------------------------------------------------------===//
#include "runtime/io/Dataset.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sys/stat.h>

using namespace fsdp::io;

std::string Dataset::allocate(int64_t n) {
  // A program may ask for sequences longer than any memory holds (the
  // loader bounds them by its arena only); say so rather than throw.
  try {
    tokens.clear();
    tokens.resize(n);
  } catch (const std::exception &) {
    tokens = {};
    return "cannot hold " + std::to_string(n) + " tokens (" +
           std::to_string(n * (int64_t)sizeof(uint16_t)) + " bytes) in memory";
  }
  return "";
}

std::string Dataset::open(const std::string &path, const program::Program &p, uint64_t seed) {
  int64_t vocab = p.vocabSize();
  int64_t need = p.seqLen + 2; // one sample and its shifted targets, with room to wrap
  if (path.empty()) {
    // Synthetic: a fixed pseudo-random stream over the vocabulary.
    std::string err = allocate(std::max<int64_t>(need, 1 << 16));
    if (!err.empty())
      return "synthetic data (no --data): " + err + ", for the program's seq_len of " +
             std::to_string(p.seqLen);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (auto &t : tokens) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      t = (uint16_t)(x % (uint64_t)std::max<int64_t>(vocab, 1));
    }
    return "";
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return path + ": cannot read the data: not a file";
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return path + ": cannot read the data: " + std::strerror(errno);
  std::fseek(f, 0, SEEK_END);
  long bytes = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  if (bytes % 2 != 0) {
    std::fclose(f);
    return path + ": " + std::to_string(bytes) +
           " bytes is not a whole number of uint16 tokens";
  }
  std::string err = allocate(bytes / 2);
  if (!err.empty()) {
    std::fclose(f);
    return path + ": " + err;
  }
  size_t got = std::fread(tokens.data(), 2, tokens.size(), f);
  std::fclose(f);
  if (got != tokens.size())
    return path + ": short read";
  if ((int64_t)tokens.size() < need)
    return path + ": " + std::to_string(tokens.size()) + " tokens is shorter than one sample (" +
           std::to_string(p.seqLen) + " tokens, their targets, and one more)";
  for (size_t i = 0; i < tokens.size(); ++i)
    if (vocab > 0 && tokens[i] >= vocab)
      return path + ": token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
             " is outside the model's vocabulary of " + std::to_string(vocab);
  return "";
}
