//===- Checkpoint.h - sharded checkpoints and full weights -------*- C++ -*-===//
#ifndef FSDP_RUNTIME_IO_CHECKPOINT_H
#define FSDP_RUNTIME_IO_CHECKPOINT_H

#include "runtime/Backend.h"
#include "runtime/Program.h"

#include <string>

namespace fsdp::io {

/// Every rank writes its shards (parameters, Adam moments) and the step;
/// the directory appears whole or not at all (a temporary, then a rename).
std::string saveCheckpoint(const std::string &dir, const program::Program &p,
                           runtime::Communicator &comm, char *arena, int64_t step);

/// Checks the checkpoint against the plan and its checksums, then fills this
/// rank's shards; *step is the number of optimizer steps already taken.
std::string loadCheckpoint(const std::string &dir, const program::Program &p, int rank,
                           char *arena, int64_t *step);

/// Gathers the parameters and writes them with HF names and layouts.
std::string saveFullWeights(const std::string &path, const program::Program &p,
                            runtime::Communicator &comm, char *arena);

} // namespace fsdp::io

#endif
