//===- Run.h - a training run as a front end starts it -----------*- C++ -*-===//
//
// The policy of a run, for fsdp-run or any other front end: which backend
// runs the program (an MPI launcher's processes, the NCCL backend's plugin),
// how the ranks find each other (MPI, or --rank and an id file for NCCL),
// what is checked before step 1 (the plan, the data, the outputs, the
// weights, the resume and the checkpoint lock) and the metrics file. Nothing
// here prints or exits: what a front end shows comes through RunEvents, and
// run() returns the process's exit status with the error, if any.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_RUN_H
#define FSDP_RUNTIME_RUN_H

#include "runtime/Executor.h"
#include "runtime/Signals.h"
#include "runtime/checkpoint/Checkpoint.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::runtime {

/// Where the ranks run: threads of this process, MPI processes, or one GPU
/// a process with NCCL.
enum class BackendKind { Threads, Mpi, Nccl };
/// "threads", "mpi", "nccl".
const char *backendName(BackendKind kind);
/// The kind named `name`, or none.
std::optional<BackendKind> parseBackend(const std::string &name);

struct RunRequest {
  /// A program (PROGRAM.json), or a plan (PLAN.mlir) that `translateTool`
  /// (fsdp-translate) lowers first.
  std::string plan, translateTool;
  /// --backend; none: threads, or mpi when an MPI launcher started several
  /// processes.
  std::optional<BackendKind> backend;
  /// --metrics: JSON lines, one a step, written by the process of rank 0.
  std::string metrics;
  /// --rank and --nccl-id-file: the NCCL backend's ranks without mpirun
  /// (-1 and "": not given).
  int64_t rank = -1;
  std::string ncclIdFile;
  /// RunResult::reports keeps every step's report (a test's; a long run's
  /// front end takes them through RunEvents::step instead).
  bool keepReports = false;
  /// The front end installed the stop handlers (installStopHandlers): once
  /// the run returns, further stop signals are ignored, for only the exit is
  /// left (under mpirun, the first rank to exit non-zero makes mpirun signal
  /// the others while they finalize).
  bool stopHandlers = false;
  RunOptions options;
};

/// What a run looks like before step 1, for its first line.
struct RunStart {
  const program::Program *program = nullptr;
  BackendKind backend = BackendKind::Threads;
  int64_t globalBatch = 0;
  double predictedStepS = 0; // the plan's step (micro-steps and optimizer); 0: none
  /// What the run resolved: its options (the plan's grad-accum, a resumed
  /// run's settings).
  const RunOptions *options = nullptr;
};

/// What a run came to: an error before or during the run, or the end of one
/// that returned (status 0, or stopped by a signal).
struct RunResult {
  /// The process's exit status: 0, 1 (an error), 128 + a stop signal.
  int status = 0;
  /// Why the run failed ("" when it did not); said through RunEvents::error
  /// by the processes that speak for it.
  std::string error;
  BackendKind backend = BackendKind::Threads;
  int rank = 0;                    // this process's (0 for the threads backend)
  StepReport last;                 // rank 0's last step (step 0: none ran here)
  StopRecord stop;                 // where a stop signal stopped the run (signal 0: none)
  int lateSignal = 0;              // a stop signal after the last step's decision
  std::vector<StepReport> reports; // with RunRequest::keepReports, on rank 0
};

/// What a run says as it goes; each may be empty. An error is said once per
/// failing job by the process(es) that report it, before MPI may abort the
/// job; `resuming`, `started` and `step` come on the process of rank 0 only.
struct RunEvents {
  /// `notice`: what the run decided that the user should read (a resumed
  /// run's changed settings), said by the process of rank 0.
  std::function<void(const std::string &)> error, warning, notice;
  std::function<void(const checkpoint::CheckpointRef &)> resuming;
  std::function<void(const RunStart &)> started;
  std::function<void(const StepReport &)> step;
  /// After a run that returned, on every process, before MPI is finalized
  /// (under mpirun a process that exits first may get its peers killed).
  std::function<void(const RunResult &)> finished;
};

/// Checks, starts and runs `request` on its backend; returns when every rank
/// of this process has stopped.
RunResult run(const RunRequest &request, const RunEvents &events = {});

} // namespace fsdp::runtime

#endif
