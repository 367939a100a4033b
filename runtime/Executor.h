//===- Executor.h - running a program on ranks -------------------*- C++ -*-===//
//
// The runtime executes; it decides nothing the plan decided. Each rank owns
// one arena laid out by the plan, a compute stream (its thread) and a
// communication stream (a second thread), joined by the program's events.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_EXECUTOR_H
#define FSDP_RUNTIME_EXECUTOR_H

#include "runtime/Options.h"
#include "runtime/Program.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace fsdp::data {
struct Inputs;
}

namespace fsdp::runtime {

/// The most ranks the threads backend runs: two threads a rank in one
/// process. Measured on a 2-core machine: 2048 ranks of the tiny GPT-2 train
/// reliably (tests/lit/fsdp-run/many-ranks.test; 20 of 20 runs, and 6 of 6
/// beside two busy processes, since OpenBLAS's buffer table can no longer
/// overflow: kernels/cpu.cpp); 4096 and 8192 ran a step alone (20 s; 83 s
/// and 12.5 GB).
/// Past 2048 a program needs --backend mpi.
inline constexpr int64_t kMaxThreadRanks = 2048;
/// "" when the threads backend runs `program`, else the refusal, pointing to
/// MPI (`plan` names the program in the command it suggests).
std::string threadsBackendRefuses(const program::Program &program, const std::string &plan);

/// Runs `program` with every rank a thread of this process. Calls `onStep`
/// once per optimizer step (from rank 0). `inputs`: the data already opened
/// (data::Inputs::open), or null to open it here. Returns "" or the first
/// error, naming the rank and the instruction.
std::string runThreads(const program::Program &program, const RunOptions &options,
                       const StepCallback &onStep, const data::Inputs *inputs = nullptr);

class Communicator;
/// Runs this process's rank of `program` with `comm` (MPI: one process a
/// rank). `onStep` is called on rank 0.
std::string runRank(const program::Program &program, const RunOptions &options, Communicator &comm,
                    const StepCallback &onStep);

} // namespace fsdp::runtime

#endif
