//===- safetensors.cpp - fuzz the weights reader (fsdp-run --weights) -----===//
//
// The input is a safetensors file. SafetensorsReader::open must reject it
// with a message naming the file, or accept a header whose every tensor has
// non-negative dimensions and a byte range of its shape inside the file, the
// ranges contiguous from byte 0 to the end of the file; then
// each small float tensor reads whole, and the runtime's initialisation
// (weights::initShards, what every rank of fsdp-run --weights does) fills both
// shards of a small fixed program from it or says why not.
//
//===----------------------------------------------------------------------===//
#include "RuntimeFuzz.h"

#include "runtime/Executor.h"
#include "runtime/weights/Safetensors.h"
#include "runtime/weights/Weights.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

using namespace fsdp;
using fsdp::fuzz::violation;

static void checkInfos(const weights::SafetensorsReader &r, const uint8_t *header,
                       int64_t fileSize) {
  for (const auto &[name, t] : r.tensors()) {
    __int128 n = 1;
    for (int64_t d : t.shape) {
      if (d < 0)
        violation("accepted tensor '" + name + "' with a negative dimension");
      n *= d;
      if (n > ((__int128)1 << 80))
        violation("accepted tensor '" + name + "' of more elements than any file holds");
    }
    if (t.begin < 0 || t.end < t.begin || t.end > fileSize)
      violation("accepted tensor '" + name + "' whose byte range lies outside the file");
  }
  // The format: the data ranges, sorted, follow one another from byte 0 to
  // the end of the file, with no gap and no overlap.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto &[name, t] : r.tensors())
    ranges.push_back({t.begin, t.end});
  std::sort(ranges.begin(), ranges.end());
  int64_t at = 0;
  for (auto [b, e] : ranges) {
    if (b != at)
      violation("accepted data_offsets with a gap or an overlap at byte " + std::to_string(b));
    at = e;
  }
  uint64_t headerLen = 0;
  std::memcpy(&headerLen, header, 8);
  if (8 + (int64_t)headerLen + at != fileSize)
    violation("accepted a file whose data does not end with the file");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string path = fuzz::scratchDir() + "/weights.safetensors";
  fuzz::writeFile(path, data, size);
  try {
    {
      weights::SafetensorsReader r;
      std::string err = r.open(path);
      if (!err.empty()) {
        fuzz::checkError(err, path, "SafetensorsReader::open");
      } else {
        checkInfos(r, data, (int64_t)size);
        for (const auto &[name, t] : r.tensors()) {
          if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16")
            continue;
          int64_t n = 1;
          for (int64_t d : t.shape)
            n *= d;
          if (n > (1 << 20))
            continue;
          std::vector<float> out(n);
          err = r.readF32(name, 0, n, out.data());
          if (!err.empty())
            fuzz::checkError(err, path, "SafetensorsReader::readF32");
        }
      }
    }
    // What each rank of fsdp-run --weights does with the file.
    const program::Program &p = fuzz::smallProgram();
    std::vector<char> arena(p.arenaBytes);
    runtime::RunOptions o;
    o.weights = path;
    for (int member = 0; member < p.shardSize; ++member) {
      std::string err = weights::initShards(p, o, member, arena.data());
      if (!err.empty()) {
        fuzz::checkError(err, path, "initShards");
        break;
      }
    }
  } catch (const std::exception &e) {
    violation(std::string("the weights reader threw: ") + e.what());
  } catch (...) {
    violation("the weights reader threw something");
  }
  return 0;
}
