//===- Dataset.cpp --------------------------------------------------------===//
#include "runtime/data/Dataset.h"
#include "support/InputFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp::data;

std::string Dataset::allocate(int64_t n) {
  // A program may ask for sequences longer than any memory holds (the
  // loader bounds them by its arena only); say so rather than throw.
  try {
    t16.clear();
    t32.clear();
    if (wide)
      t32.resize(n);
    else
      t16.resize(n);
  } catch (const std::exception &) {
    t16 = {};
    t32 = {};
    return "cannot hold " + std::to_string(n) + " tokens (" + std::to_string(n * width()) +
           " bytes) in memory";
  }
  return "";
}

std::string Dataset::open(const std::string &path, const program::Program &p,
                          const std::string &dtype, uint64_t seed) {
  int64_t vocab = p.vocabSize();
  int64_t need = p.seqLen + 2; // one sample and its shifted targets, with room to wrap
  if (dtype == "uint32")
    wide = true;
  else if (dtype == "uint16")
    wide = false;
  else if (dtype.empty())
    wide = tokenWidthFor(vocab) == 4;
  else
    return "--data-dtype '" + dtype + "': expected uint16 or uint32";
  if (!wide && vocab > 65536)
    return "--data-dtype uint16 cannot hold the model's vocabulary of " + std::to_string(vocab) +
           " tokens; use uint32";
  if (path.empty()) {
    // Synthetic: a fixed pseudo-random stream over the vocabulary.
    std::string err = allocate(std::max<int64_t>(need, 1 << 16));
    if (!err.empty())
      return "synthetic data (no --data): " + err + ", for the program's seq_len of " +
             std::to_string(p.seqLen);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < size(); ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      uint64_t t = x % (uint64_t)std::max<int64_t>(vocab, 1);
      if (wide)
        t32[i] = (uint32_t)t;
      else
        t16[i] = (uint16_t)t;
    }
    return "";
  }
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
  const char *type = wide ? "uint32" : "uint16";
  int64_t bytes = st.st_size;
  if (bytes % width() != 0) {
    ::close(fd);
    return path + ": " + std::to_string(bytes) + " bytes is not a whole number of " + type +
           " tokens (" + std::to_string(width()) + " bytes each): the token at byte offset " +
           std::to_string(bytes - bytes % width()) + " is cut short (--data-dtype)";
  }
  std::string err = allocate(bytes / width());
  if (!err.empty()) {
    ::close(fd);
    return path + ": " + err;
  }
  char *to = data();
  for (int64_t done = 0; done < bytes;) {
    ssize_t n = ::read(fd, to + done, (size_t)std::min<int64_t>(bytes - done, 1 << 30));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = n < 0 ? errno : 0;
      ::close(fd);
      return path + ": cannot read the data: " + (e ? std::strerror(e) : "short read");
    }
    done += n;
  }
  ::close(fd);
  if (size() < need)
    return path + ": " + std::to_string(size()) + " tokens is shorter than one sample (" +
           std::to_string(p.seqLen) + " tokens, their targets, and one more)";
  for (int64_t i = 0; i < size(); ++i)
    if (vocab > 0 && token(i) >= vocab)
      return path + ": token " + std::to_string(token(i)) + " at byte offset " +
             std::to_string(i * width()) + " (" + type + " token " + std::to_string(i) +
             ") is outside the model's vocabulary of " + std::to_string(vocab);
  // uint32 tokens read as uint16 pass the vocabulary check whenever the
  // tokens are small: every second uint16 (the high halves) is then zero.
  if (!wide && size() >= 64) {
    bool highHalves = true, anyLow = false;
    for (int64_t i = 0; i + 1 < size() && highHalves; i += 2) {
      highHalves = t16[i + 1] == 0;
      anyLow = anyLow || t16[i] != 0;
    }
    if (highHalves && anyLow)
      return path + ": read as uint16 tokens, every second one is 0: these look like uint32 "
                    "tokens; say --data-dtype uint32 (or uint16 data without this pattern)";
  }
  return "";
}
