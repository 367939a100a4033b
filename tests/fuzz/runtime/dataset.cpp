//===- dataset.cpp - fuzz the training data reader (fsdp-run --data) ------===//
//
// The input is a 16-byte header, then the data file (flat little-endian
// uint16 tokens). The header gives the program the file is opened for and
// where training starts (fsdp-run --resume can start at any step a
// checkpoint holds):
//
//   bytes 0-1  vocabulary - 1 (little-endian; 1 to 65536 words)
//   byte  2    seq_len - 1 (mod 32)       byte 3  micro_batch - 1 (mod 4)
//   byte  4    world_size - 1 (mod 4)     byte 5  --grad-accum - 1 (mod 4)
//   bytes 6-7  unused
//   bytes 8-15 the first step (little-endian, the top bit cleared)
//
// The harness writes a small program of that shape (tokens, targets, logits
// [micro_batch, seq_len, vocabulary] and the cross_entropy that makes the
// vocabulary), loads it as fsdp-run does, and opens the data file for it.
// data::Dataset::open must refuse the file with a message naming it, or accept
// it; then every rank reads the tokens and targets of every micro-step of
// three steps from the first (data::fillTokens, what both executors call),
// and each must be the documented sample of the file (docs/training-semantics.md: sample g
// of step t starts at token ((t*G + g)*S) mod (n - S - 1), computed here
// exactly), inside the vocabulary.
//
//===----------------------------------------------------------------------===//
#include "RuntimeFuzz.h"

#include "runtime/Executor.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/Inputs.h"

#include <cstring>
#include <exception>
#include <vector>

using namespace fsdp;
using fsdp::fuzz::violation;

namespace {

struct Shape {
  int64_t vocab, seqLen, microBatch, worldSize, gradAccum, firstStep;
};

Shape readHeader(const uint8_t *data, size_t size) {
  uint8_t h[16] = {0};
  std::memcpy(h, data, size < 16 ? size : 16);
  Shape s;
  s.vocab = 1 + (h[0] | (h[1] << 8));
  s.seqLen = 1 + h[2] % 32;
  s.microBatch = 1 + h[3] % 4;
  s.worldSize = 1 + h[4] % 4;
  s.gradAccum = 1 + h[5] % 4;
  uint64_t step = 0;
  for (int i = 0; i < 8; ++i)
    step |= (uint64_t)h[8 + i] << (8 * i);
  s.firstStep = (int64_t)(step & (uint64_t)INT64_MAX);
  return s;
}

/// The program of that shape: one rank's inputs and a cross-entropy over
/// logits of the vocabulary, no units, no communication.
std::string programJson(const Shape &s) {
  int64_t bs = s.microBatch * s.seqLen;
  int64_t targets = bs * 8, loss = 2 * bs * 8, logits = loss + 8;
  int64_t arena = logits + bs * s.vocab * 4;
  auto shape = [&](bool vocab) {
    return "[" + std::to_string(s.microBatch) + ", " + std::to_string(s.seqLen) +
           (vocab ? ", " + std::to_string(s.vocab) : std::string()) + "]";
  };
  return R"({"format": "fsdp-program", "version": 1,
  "model": {"name": "fuzz", "model_type": "gpt2", "parameters": 0},
  "world_size": )" +
         std::to_string(s.worldSize) + R"(, "strategy": "full-shard", "shard_size": )" +
         std::to_string(s.worldSize) + R"(, "micro_batch": )" + std::to_string(s.microBatch) +
         R"(, "seq_len": )" + std::to_string(s.seqLen) + R"(, "arena_bytes": )" +
         std::to_string(arena) + R"(, "events": 0,
  "inputs": {"tokens": 0, "targets": 1}, "loss": 2,
  "tensors": [{"id": 0, "offset": 0, "shape": )" +
         shape(false) + R"(, "dtype": "i64"},
              {"id": 1, "offset": )" +
         std::to_string(targets) + R"(, "shape": )" + shape(false) + R"(, "dtype": "i64"},
              {"id": 2, "offset": )" +
         std::to_string(loss) + R"(, "shape": [], "dtype": "f32"},
              {"id": 3, "offset": )" +
         std::to_string(logits) + R"(, "shape": )" + shape(true) +
         R"(, "dtype": "f32"}],
  "units": [],
  "micro_step": {"compute": [{"op": "cross_entropy", "in": [3, 1], "out": [2]}], "comm": []},
  "optimizer": {"compute": [], "comm": []}})";
}

/// (a * b) mod m for a, b >= 0, m > 0, without overflow.
int64_t mulMod(int64_t a, int64_t b, int64_t m) {
  return (int64_t)((unsigned __int128)(a % m) * (unsigned __int128)(b % m) % (unsigned __int128)m);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Shape s = readHeader(data, size);
  const std::string programPath = fuzz::scratchDir() + "/program.json";
  std::string text = programJson(s);
  fuzz::writeFile(programPath, text.data(), text.size());
  program::Program p;
  std::string err = program::loadProgram(programPath, p);
  if (!err.empty())
    violation("the harness's own program does not load: " + err);
  if (p.vocabSize() != s.vocab)
    violation("the harness's program has a vocabulary of " + std::to_string(p.vocabSize()) +
              ", not " + std::to_string(s.vocab));

  const std::string path = fuzz::scratchDir() + "/train.bin";
  const uint8_t *file = data + (size < 16 ? size : 16);
  size_t fileSize = size < 16 ? 0 : size - 16;
  fuzz::writeFile(path, file, fileSize);
  int64_t n = (int64_t)(fileSize / 2);
  auto fileToken = [&](int64_t i) -> int64_t {
    if (i < 0 || i >= n)
      violation("the sample reaches token " + std::to_string(i) + " of a file of " +
                std::to_string(n));
    return file[2 * i] | (file[2 * i + 1] << 8);
  };

  try {
    data::Dataset d;
    err = d.open(path, p);
    if (!err.empty()) {
      fuzz::checkError(err, path, "Dataset::open");
      return 0;
    }
    if (fileSize % 2 != 0)
      violation("accepted a file of " + std::to_string(fileSize) + " bytes, half a token");
    if (d.size() != n)
      violation("read " + std::to_string(d.size()) + " tokens from a file of " + std::to_string(n));
    if (n < s.seqLen + 2)
      violation("accepted " + std::to_string(n) + " tokens for samples of " +
                std::to_string(s.seqLen) + " and their targets");
    int64_t B = s.microBatch, S = s.seqLen, R = s.worldSize, A = s.gradAccum;
    int64_t G = B * R * A, wrap = n - S - 1;
    std::vector<int64_t> tokens(B * S), targets(B * S);
    // Steps t < --steps <= INT64_MAX.
    for (int64_t k = 0; k < 3 && s.firstStep < INT64_MAX - k; ++k)
      for (int64_t t = s.firstStep + k, a = 0; a < A; ++a)
        for (int r = 0; r < R; ++r) {
          std::fill(tokens.begin(), tokens.end(), -1);
          std::fill(targets.begin(), targets.end(), -1);
          data::fillTokens(p, d, A, r, t, a, tokens.data(), targets.data());
          for (int64_t b = 0; b < B; ++b) {
            int64_t g = a * B * R + r * B + b;
            int64_t start = mulMod((mulMod(t, G, wrap) + g) % wrap, S, wrap);
            for (int64_t i = 0; i < S; ++i) {
              int64_t tok = tokens[b * S + i], tgt = targets[b * S + i];
              if (tok < 0 || tok >= s.vocab || tgt < 0 || tgt >= s.vocab)
                violation("step " + std::to_string(t) + ", rank " + std::to_string(r) + ": token " +
                          std::to_string(tok) + " or target " + std::to_string(tgt) +
                          " outside the vocabulary of " + std::to_string(s.vocab));
              if (tok != fileToken(start + i) || tgt != fileToken(start + i + 1))
                violation("step " + std::to_string(t) + ", micro-step " + std::to_string(a) +
                          ", rank " + std::to_string(r) + ", sample " + std::to_string(g) +
                          ": read tokens other than those from " + std::to_string(start) +
                          " of the file");
            }
          }
        }
  } catch (const std::exception &e) {
    violation(std::string("the data reader threw: ") + e.what());
  } catch (...) {
    violation("the data reader threw something");
  }
  return 0;
}
