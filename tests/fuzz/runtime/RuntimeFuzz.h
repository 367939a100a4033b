//===- RuntimeFuzz.h - what the runtime's fuzz harnesses share -*- C++ -*-===//
//
// The readers of fsdp-run take paths, so each harness writes its input to a
// private temporary file (one a process, overwritten for every input) and
// calls the reader on it. A broken contract (an exception that escapes, an
// error without a message or without the file's name, a success that breaks
// what the reader promises) calls violation(), which prints what broke and
// aborts, so libFuzzer keeps the input. smallProgram() is a fixed, valid
// program of two ranks for the readers that fill a program's shards.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TESTS_FUZZ_RUNTIME_RUNTIMEFUZZ_H
#define FSDP_TESTS_FUZZ_RUNTIME_RUNTIMEFUZZ_H

#include "runtime/Program.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace fsdp::fuzz {

[[noreturn]] inline void violation(const std::string &what) {
  std::fprintf(stderr, "fuzz harness: contract broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// A private folder of this process, made once (removed by nobody: the
/// files in it are overwritten for each input).
inline const std::string &scratchDir() {
  static std::string dir = [] {
    const char *base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/fsdp-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
      violation("cannot make a temporary folder " + tmpl);
    return tmpl;
  }();
  return dir;
}

/// Writes `size` bytes to `path` whole, or aborts (the harness's own failure).
inline void writeFile(const std::string &path, const void *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
    violation("cannot write the input to " + path);
}

/// A failure must say what is wrong, and name the file it read.
inline void checkError(const std::string &error, const std::string &file, const char *reader) {
  static bool verbose = std::getenv("FSDP_FUZZ_VERBOSE") != nullptr;
  if (verbose)
    std::fprintf(stderr, "%s: %s\n", reader, error.c_str());
  if (error.empty())
    violation(std::string(reader) + " failed without an error message");
  if (error.find(file) == std::string::npos)
    violation(std::string(reader) + " error does not name " + file + ": " + error);
}

/// A program of two ranks (full-shard) with one unit of two parameters,
/// "w" [2, 3] and "b" [3], padded to 10 elements in two shards of 5; the
/// streams are empty. What the safetensors and checkpoint harnesses read into.
inline const char *smallProgramJson() {
  return R"({"format": "fsdp-program", "version": 1,
  "model": {"name": "fuzz", "model_type": "gpt2", "parameters": 9},
  "world_size": 2, "strategy": "full-shard", "shard_size": 2,
  "micro_batch": 1, "seq_len": 2, "arena_bytes": 128, "events": 0,
  "inputs": {"tokens": 0, "targets": 1}, "loss": 2,
  "tensors": [{"id": 0, "offset": 0, "shape": [1, 2], "dtype": "i64"},
              {"id": 1, "offset": 16, "shape": [1, 2], "dtype": "i64"},
              {"id": 2, "offset": 32, "shape": [], "dtype": "f32"}],
  "units": [{"name": "u0", "module": "m", "numel": 9, "padded_numel": 10, "shard_size": 2,
             "shard_numel": 5, "shard_offset": 36, "grad_shard_offset": 56,
             "exp_avg_offset": 76, "exp_avg_sq_offset": 96,
             "params": [{"name": "w", "shape": [2, 3], "dtype": "f32", "offset": 0, "numel": 6, "decay": true},
                        {"name": "b", "shape": [3], "dtype": "f32", "offset": 6, "numel": 3, "decay": false}]}],
  "micro_step": {"compute": [], "comm": []},
  "optimizer": {"compute": [], "comm": []}})";
}

inline const program::Program &smallProgram() {
  static program::Program p = [] {
    std::string path = scratchDir() + "/small-program.json";
    std::string text = smallProgramJson();
    writeFile(path, text.data(), text.size());
    program::Program q;
    std::string err = program::loadProgram(path, q);
    if (!err.empty())
      violation("the harness's own program does not load: " + err);
    return q;
  }();
  return p;
}

} // namespace fsdp::fuzz

#endif
