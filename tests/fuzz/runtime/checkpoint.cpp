//===- checkpoint.cpp - fuzz the checkpoint reader (fsdp-run --resume) ----===//
//
// The input is a checkpoint folder in one file: DIR/meta.json, a NUL byte,
// then DIR/shard-00000.bin (with no NUL, all of it is meta.json and the shard
// file is missing). checkpoint::loadCheckpoint, for shard member 0 of a small fixed
// program (global batch 2), must reject it with a message naming the folder,
// or accept it with a step count that fsdp-run can resume from (not
// negative). The saved layout may be any: the loader reshards.
//
//===----------------------------------------------------------------------===//
#include "RuntimeFuzz.h"

#include "runtime/checkpoint/Checkpoint.h"

#include <cstring>
#include <exception>
#include <sys/stat.h>
#include <vector>

using namespace fsdp;
using fsdp::fuzz::violation;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string dir = fuzz::scratchDir() + "/ckpt";
  static bool made = [&] {
    if (::mkdir(dir.c_str(), 0755) != 0)
      violation("cannot make " + dir);
    return true;
  }();
  (void)made;
  const uint8_t *nul = static_cast<const uint8_t *>(std::memchr(data, 0, size));
  size_t metaSize = nul ? (size_t)(nul - data) : size;
  fuzz::writeFile(dir + "/meta.json", data, metaSize);
  std::string rankPath = dir + "/shard-00000.bin";
  if (nul)
    fuzz::writeFile(rankPath, nul + 1, size - metaSize - 1);
  else
    std::remove(rankPath.c_str());

  const program::Program &p = fuzz::smallProgram();
  std::vector<char> arena(p.arenaBytes);
  int64_t step = -12345;
  std::string err;
  try {
    err =
        checkpoint::loadCheckpoint(dir, p, 0, /*tpRank=*/0, /*globalBatch=*/2, arena.data(), &step);
  } catch (const std::exception &e) {
    violation(std::string("loadCheckpoint threw: ") + e.what());
  } catch (...) {
    violation("loadCheckpoint threw something");
  }
  if (!err.empty()) {
    fuzz::checkError(err, dir, "loadCheckpoint");
    return 0;
  }
  if (step < 0)
    violation("loadCheckpoint accepted a negative step " + std::to_string(step));
  return 0;
}
