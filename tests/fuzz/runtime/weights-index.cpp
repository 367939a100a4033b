//===- weights-index.cpp - fuzz the HF index reader (--weights DIR) -------===//
//
// The input is a model.safetensors.index.json, in a folder beside two valid
// shards: a.safetensors holding "w" [2, 3] and b.safetensors holding "b" [3]
// (and "w" again). WeightSource::open must reject it with a message naming a
// file in that folder, or accept it with every tensor it maps read from a
// file in that folder; then the runtime's initialisation (weights::initShards,
// what every rank of fsdp-run --weights DIR does) fills both shards of a
// small fixed program from it or says why not.
//
//===----------------------------------------------------------------------===//
#include "RuntimeFuzz.h"

#include "runtime/Executor.h"
#include "runtime/weights/Safetensors.h"
#include "runtime/weights/Weights.h"

#include <exception>
#include <sys/stat.h>
#include <vector>

using namespace fsdp;
using fsdp::fuzz::violation;

// The folder, with its two shards written once.
static const std::string &folder() {
  static std::string dir = [] {
    std::string d = fuzz::scratchDir() + "/hf";
    ::mkdir(d.c_str(), 0755);
    std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9};
    if (!weights::writeSafetensors(d + "/a.safetensors", {{"w", {2, 3}, w.data()}}).empty() ||
        !weights::writeSafetensors(d + "/b.safetensors",
                                   {{"b", {3}, b.data()}, {"w", {2, 3}, w.data()}})
             .empty())
      violation("cannot write the shards in " + d);
    return d;
  }();
  return dir;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &dir = folder();
  fuzz::writeFile(dir + "/" + weights::kIndexName, data, size);
  try {
    {
      weights::WeightSource w;
      std::string err = w.open(dir);
      if (!err.empty()) {
        fuzz::checkError(err, dir, "WeightSource::open");
      } else {
        for (const auto &[name, t] : w.tensors()) {
          if (w.fileOf(name).compare(0, dir.size() + 1, dir + "/") != 0)
            violation("tensor '" + name + "' read from " + w.fileOf(name) + ", outside " + dir);
          std::vector<float> out(t.end - t.begin);
          if (t.dtype == "F32" &&
              !(err = w.readF32(name, 0, (t.end - t.begin) / 4, out.data())).empty())
            fuzz::checkError(err, dir, "WeightSource::readF32");
        }
      }
    }
    const program::Program &p = fuzz::smallProgram();
    std::vector<char> arena(p.arenaBytes);
    runtime::RunOptions o;
    o.weights = dir;
    for (int member = 0; member < p.shardSize; ++member) {
      std::string err = weights::initShards(p, o, member, arena.data());
      if (!err.empty()) {
        fuzz::checkError(err, dir, "initShards");
        break;
      }
    }
  } catch (const std::exception &e) {
    violation(std::string("the weights index reader threw: ") + e.what());
  } catch (...) {
    violation("the weights index reader threw something");
  }
  return 0;
}
