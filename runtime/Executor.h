//===- Executor.h - running a program on ranks -------------------*- C++ -*-===//
//
// The runtime executes; it decides nothing the plan decided. Each rank owns
// one arena laid out by the plan, a compute stream (its thread) and a
// communication stream (a second thread), joined by the program's events.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_EXECUTOR_H
#define FSDP_RUNTIME_EXECUTOR_H

#include "runtime/Program.h"

#include <functional>
#include <string>

namespace fsdp::runtime {

struct RunOptions {
  int64_t steps = 1;
  uint64_t seed = 0;
  int64_t gradAccum = 1;
  std::string weights, data, save, resume, saveWeights;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  double clipGradNorm = 0;
  std::string trace; // write the measured timeline here (Chrome trace)
};

struct StepReport {
  int64_t step = 0, steps = 0;
  double loss = 0, gradNorm = 0, stepTimeS = 0, tokensPerS = 0;
  int64_t peakBytes = 0;          // largest rank's measured arena high-water mark
  int64_t predictedPeakBytes = 0; // the plan's
  int64_t outsideArenaBytes = 0;  // largest rank's allocations outside the arena
};

/// Runs `program` with every rank a thread of this process. Calls `onStep`
/// once per optimizer step (from rank 0). Returns "" or the first error,
/// naming the rank and the instruction.
std::string runThreads(const program::Program &program, const RunOptions &options,
                       const std::function<void(const StepReport &)> &onStep);

class Communicator;
/// Runs this process's rank of `program` with `comm` (MPI: one process a
/// rank). `onStep` is called on rank 0.
std::string runRank(const program::Program &program, const RunOptions &options,
                    Communicator &comm, const std::function<void(const StepReport &)> &onStep);

} // namespace fsdp::runtime

#endif
