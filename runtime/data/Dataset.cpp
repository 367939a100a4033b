//===- Dataset.cpp - token streams (nanoGPT's train.bin) ------------------===//
#include "runtime/data/Dataset.h"
#include "support/InputFile.h"
#include "support/Random.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp;
using namespace fsdp::data;

Dataset::~Dataset() { close(); }

void Dataset::close() {
  for (Part &part : parts) {
    if (part.fd >= 0 && part.base && part.bytes > 0)
      ::munmap(const_cast<unsigned char *>(part.base), size_t(part.bytes));
    if (part.fd >= 0)
      ::close(part.fd);
  }
  parts.clear();
  synthetic.clear();
  sides.clear();
  n = counted = 0;
  wide = shuffled = false;
  shuffleSeed = 0;
}

/// The files of `spec`: comma-separated paths, a folder's *.bin in name order.
static std::string expand(const std::string &spec, const char *flag,
                          std::vector<std::string> *files) {
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string one =
        spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (one.empty())
      return std::string(flag) + " '" + spec + "': an empty path in the list";
    struct stat st{};
    if (::stat(one.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR *d = ::opendir(one.c_str());
      if (!d)
        return one + ": cannot read the folder: " + std::strerror(errno);
      std::vector<std::string> names;
      while (dirent *e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0)
          names.push_back(name);
      }
      ::closedir(d);
      std::sort(names.begin(), names.end());
      if (names.empty())
        return one + ": a folder with no *.bin token files in it";
      for (const std::string &name : names)
        files->push_back(one + "/" + name);
    } else {
      files->push_back(one);
    }
  }
  return "";
}

std::string fsdp::data::readSidecar(const std::string &file, bool *found, Sidecar *out) {
  std::string path = file + ".json", text;
  struct stat st{};
  *found = ::stat(path.c_str(), &st) == 0;
  if (!*found)
    return "";
  if (std::string err = support::readRegularFile(path, support::kMaxJsonBytes, "sidecar", &text);
      !err.empty())
    return err;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || j.value("format", "") != "fsdp-tokens")
    return path + ": not an fsdp-tokenize sidecar (\"format\": \"fsdp-tokens\"); move it away "
                  "or fix it";
  try {
    out->path = path;
    out->dtype = j.at("dtype").get<std::string>();
    out->vocabSize = j.at("vocab_size").get<int64_t>();
    out->tokens = j.at("tokens").get<int64_t>();
    out->tokenizer = j.value("tokenizer", "");
    out->eosId =
        j.contains("eos_id") && j["eos_id"].is_number_integer() ? j["eos_id"].get<int64_t>() : -1;
    out->maskId = j.contains("mask_id") && j["mask_id"].is_number_integer()
                      ? j["mask_id"].get<int64_t>()
                      : -1;
  } catch (const nlohmann::json::exception &e) {
    return path + ": " + e.what();
  }
  if (out->dtype != "uint16" && out->dtype != "uint32")
    return path + ": dtype '" + out->dtype + "' (uint16 or uint32)";
  return "";
}

std::string Dataset::openFile(const std::string &path, const program::Program &p,
                              const char *flag) {
  // O_NONBLOCK: a FIFO given as the data must not block the open; it is
  // refused below as not a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return path + ": cannot read the data: " + std::strerror(errno);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return path + ": cannot read the data: " + support::fileKind(st.st_mode) +
           ", not a regular file";
  }
  Part part;
  part.path = path;
  part.fd = fd;
  part.bytes = st.st_size;
  part.first = n;
  const char *type = wide ? "uint32" : "uint16";
  if (part.bytes % width() != 0) {
    ::close(fd);
    return path + ": " + std::to_string(part.bytes) + " bytes is not a whole number of " + type +
           " tokens (" + std::to_string(width()) + " bytes each): the token at byte offset " +
           std::to_string(part.bytes - part.bytes % width()) + " is cut short (--data-dtype)" +
           (wide && part.bytes % 2 == 0 && p.vocabSize() <= 65536
                ? "; as uint16 tokens it is whole: say --data-dtype uint16 "
                  "if it holds those"
                : "");
  }
  if (part.bytes > 0) {
    void *m = ::mmap(nullptr, size_t(part.bytes), PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return path + ": cannot map the data: " + std::strerror(e);
    }
    part.base = static_cast<const unsigned char *>(m);
    ::madvise(m, size_t(part.bytes), MADV_SEQUENTIAL); // the check reads it once, in order
  }
  n += part.bytes / width();
  parts.push_back(part);
  return "";
}

std::string Dataset::open(const std::string &spec, const program::Program &p,
                          const std::string &dtype, uint64_t seed, const char *flag,
                          int64_t countId) {
  close(); // a Dataset opened again is the new stream only
  int64_t vocab = p.vocabSize();
  int64_t need = p.seqLen + 2; // one sample and its shifted targets, with room to wrap
  std::vector<std::string> files;
  if (!spec.empty())
    if (std::string err = expand(spec, flag, &files); !err.empty())
      return err;
  // The sidecars first: they say the width, and what the tokenizer was.
  std::string sideDtype;
  for (const std::string &f : files) {
    bool found = false;
    Sidecar s;
    if (std::string err = readSidecar(f, &found, &s); !err.empty())
      return err;
    if (!found)
      continue;
    if (!dtype.empty() && s.dtype != dtype)
      return s.path + " says its tokens are " + s.dtype + ", but --data-dtype is " + dtype;
    if (!sideDtype.empty() && s.dtype != sideDtype)
      return s.path + " says its tokens are " + s.dtype + ", another sidecar " + sideDtype +
             ": the files of " + flag + " must share one width";
    sideDtype = s.dtype;
    if (vocab > 0 && s.vocabSize > vocab)
      return s.path + ": its tokenizer's vocabulary of " + std::to_string(s.vocabSize) + " ids (" +
             s.tokenizer + ") is larger than the model's " + std::to_string(vocab) +
             ": tokens past the model's embedding would be refused; tokenise with the model's "
             "tokenizer";
    sides.push_back(s);
  }
  std::string want = !dtype.empty() ? dtype : sideDtype;
  if (want == "uint32")
    wide = true;
  else if (want == "uint16")
    wide = false;
  else if (want.empty())
    wide = tokenWidthFor(vocab) == 4;
  else
    return "--data-dtype '" + dtype + "': expected uint16 or uint32";
  if (!wide && vocab > 65536)
    return "--data-dtype uint16 cannot hold the model's vocabulary of " + std::to_string(vocab) +
           " tokens; use uint32";
  if (files.empty()) {
    // Synthetic: a fixed pseudo-random stream over the vocabulary.
    int64_t count = std::max<int64_t>(need, 1 << 16);
    try {
      synthetic.assign(size_t(count) * width(), 0);
    } catch (const std::exception &) {
      return "--synthetic-data: cannot hold " + std::to_string(count) + " tokens (" +
             std::to_string(count * width()) + " bytes) in memory, for the program's seq_len of " +
             std::to_string(p.seqLen);
    }
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < count; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      uint64_t t = x % (uint64_t)std::max<int64_t>(vocab, 1);
      for (int b = 0; b < width(); ++b)
        synthetic[size_t(i) * width() + b] = (unsigned char)(t >> (8 * b));
    }
    Part part;
    part.path = "(synthetic)";
    part.base = synthetic.data();
    part.bytes = (int64_t)synthetic.size();
    parts.push_back(part);
    n = count;
    return "";
  }
  for (const std::string &f : files)
    if (std::string err = openFile(f, p, flag); !err.empty())
      return err;
  for (const Sidecar &s : sides)
    for (const Part &part : parts)
      if (part.path + ".json" == s.path && part.bytes / width() != s.tokens)
        return s.path + " says " + std::to_string(s.tokens) + " tokens, but " + part.path +
               " holds " + std::to_string(part.bytes / width()) +
               ": not the file it describes (written again since?)";
  const std::string where = files.size() == 1 ? files[0] : std::string(flag);
  if (size() < need)
    return where + ": " + std::to_string(size()) + " tokens is shorter than one sample (" +
           std::to_string(p.seqLen) + " tokens, their targets, and one more)";
  // One pass over every token: the vocabulary, the id to count.
  const char *type = wide ? "uint32" : "uint16";
  for (const Part &part : parts) {
    int64_t count = part.bytes / width();
    for (int64_t j = 0; j < count; ++j) {
      const unsigned char *b = part.base + j * width();
      int64_t t = wide ? int64_t(b[0] | b[1] << 8 | b[2] << 16 | uint32_t(b[3]) << 24)
                       : int64_t(b[0] | b[1] << 8);
      if (vocab > 0 && t >= vocab) {
        // uint16 tokens read as uint32 pair two tokens into one large one:
        // say so when every 16-bit value of the file is a token.
        bool narrow = wide && sides.empty() && vocab <= 65536;
        for (int64_t k = 0; narrow && k < part.bytes / 2; ++k)
          narrow = int64_t(part.base[2 * k] | part.base[2 * k + 1] << 8) < vocab;
        return part.path + ": token " + std::to_string(t) + " at byte offset " +
               std::to_string(j * width()) + " (" + type + " token " + std::to_string(j) +
               ") is outside the model's vocabulary of " + std::to_string(vocab) +
               (narrow ? "; read as uint16, every token of it is inside: these look like uint16 "
                         "tokens; say --data-dtype uint16"
                       : "");
      }
      counted += t == countId;
    }
    if (part.bytes > 0) // windows come from anywhere from now on
      ::madvise(const_cast<unsigned char *>(part.base), size_t(part.bytes), MADV_RANDOM);
  }
  // uint32 tokens read as uint16 pass the vocabulary check whenever the
  // tokens are small: every second uint16 (the high halves) is then zero.
  if (!wide && size() >= 64 && sides.empty()) {
    bool highHalves = true, anyLow = false;
    for (int64_t i = 0; i + 1 < size() && highHalves; i += 2) {
      highHalves = token(i + 1) == 0;
      anyLow = anyLow || token(i) != 0;
    }
    if (highHalves && anyLow)
      return where + ": read as uint16 tokens, every second one is 0: these look like uint32 "
                     "tokens; say --data-dtype uint32 (or uint16 data without this pattern)";
  }
  return "";
}

std::string Dataset::checkUnchanged() const {
  for (const Part &part : parts) {
    if (part.fd < 0)
      continue;
    struct stat st{};
    if (::fstat(part.fd, &st) != 0)
      return part.path + ": cannot check the data: " + std::strerror(errno);
    if (st.st_size != part.bytes)
      return part.path + ": the data changed size during the run (" + std::to_string(part.bytes) +
             " bytes when opened, " + std::to_string(st.st_size) +
             " now); the run stops: the stream it trains on is not the one it checked";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Sampling (docs/sampling.md)
//===----------------------------------------------------------------------===//

uint64_t fsdp::data::shuffledWindow(uint64_t seed, uint64_t epoch, uint64_t x, uint64_t n) {
  using support::splitmix64;
  // A 4-round Feistel network on 2h bits (2^(2h) >= n), walked until the
  // value falls below n: a permutation of [0, n) that keeps no table.
  int bits = 2;
  while ((uint64_t(1) << bits) < n)
    ++bits;
  int h = (bits + 1) / 2;
  uint64_t mask = (uint64_t(1) << h) - 1;
  uint64_t keys[4];
  for (uint64_t r = 0; r < 4; ++r)
    keys[r] = splitmix64(seed ^ splitmix64(4 * epoch + r));
  do {
    uint64_t l = x >> h, r = x & mask;
    for (int k = 0; k < 4; ++k) {
      uint64_t f = splitmix64(keys[k] ^ r) & mask;
      uint64_t next = l ^ f;
      l = r;
      r = next;
    }
    x = l << h | r;
  } while (x >= n);
  return x;
}

Dataset::EpochPlace Dataset::epochOf(int64_t S, int64_t k) const {
  // Shuffled: the non-overlapping windows of S + 1 tokens at stride S.
  // Sequential: the starts wrap at n - S - 1 tokens, S apart.
  EpochPlace e;
  if (shuffled) {
    e.samples = std::max<int64_t>(1, (n - 1) / S);
  } else {
    e.samples = std::max<int64_t>(1, (n - S - 1 + S - 1) / S);
  }
  e.epoch = k / e.samples;
  e.position = k % e.samples;
  return e;
}
