//===- Signals.h - SIGTERM, SIGINT and SIGHUP: stop after a step -*- C++ -*-===//
//
// Schedulers (Slurm, Kubernetes) send SIGTERM some time before they kill, and
// a user's Ctrl-C is SIGINT. fsdp-run's handlers turn the first of these
// signals into a request: every rank finishes the step in progress, the
// ranks agree (a collective) to stop after that same step, the checkpoint of
// that step is written when --save is given, and fsdp-run exits with status
// 128 + the signal's number. A second signal ends the process at once.
//
// Test-only: FSDP_TEST_SIGNAL=STEP:NAME[:RANK] makes rank RANK (default 0)
// raise NAME (TERM, INT or HUP) at the end of step STEP (counted from 1; 0:
// during start-up, before the first step), so that a test knows the moment
// (raise: the rank's own thread takes it before going on, where kill(1)'s
// may reach another thread a little later); FSDP_FAULT=N:sigterm
// (runtime/io/Files.h) raises one during a write.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SIGNALS_H
#define FSDP_RUNTIME_SIGNALS_H

#include <cstdint>
#include <string>

namespace fsdp::runtime {

class Communicator;

/// Installs the handlers of SIGTERM, SIGINT and SIGHUP (fsdp-run calls this
/// first thing: a signal before it kills the process, as before).
void installStopHandlers();

/// Once the run has returned: further stop signals are ignored, for only
/// the exit is left (under mpirun, the first rank to exit non-zero makes
/// mpirun send SIGTERM to the others while they finalize).
void ignoreStopSignals();

/// The first stop signal this process received, or 0.
int stopSignal();

/// "SIGTERM", "SIGINT", "SIGHUP" (or "signal N").
std::string signalName(int signal);

/// Where a run stopped on a signal: recorded by every rank of the process
/// (each the same), read by fsdp-run once the run has returned.
struct StopRecord {
  int signal = 0;   // 0: the run was not stopped by a signal
  int64_t step = 0; // the last step run (the resumed one if none)
  bool beforeFirstStep = false;
  std::string checkpoint; // the checkpoint of `step`, when one was written
};
StopRecord recordedStop();

/// The signal received and the stop recorded: one per process, fsdp-run's.
/// The NCCL backend is a module of its own (libfsdp-nccl.so, with its own
/// copy of the runtime), so the executors reach it through
/// RunOptions::stopState, never through a global of their own copy.
struct StopState;
StopState *processStopState();

/// Test-only: "" when FSDP_TEST_SIGNAL is unset or understood, else why not.
std::string testSignalError();

/// Collective over the world, at a step's end: whether some rank has received
/// a stop signal; then *signal is the one to report (SIGTERM before SIGINT
/// before SIGHUP when ranks received different ones). "" or the collective's
/// failure.
std::string agreeStop(Communicator &comm, StopState *state, bool *stop, int *signal);
/// Records where the run stopped, in `state` (null: this module's).
void recordStop(StopState *state, const StopRecord &r);
/// FSDP_TEST_SIGNAL: sends the signal when `rank` is at `step`.
void testSignal(int rank, int64_t step);

} // namespace fsdp::runtime

#endif
