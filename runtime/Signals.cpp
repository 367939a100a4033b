//===- Signals.cpp - SIGTERM, SIGINT and SIGHUP: stop after a step --------===//
//
// The handler only records the signal (an atomic store) or, the second time,
// writes one line and _exits: nothing else is async-signal-safe. The ranks
// read the record at each step's end and agree on it in one all-reduce.
// SA_RESTART: a system call the signal interrupts (a write of a checkpoint,
// a wait for a peer) resumes, so a signal never shows as an I/O error or a
// --timeout.
//
//===----------------------------------------------------------------------===//
#include "runtime/Signals.h"
#include "runtime/Communicator.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unistd.h>

using namespace fsdp::runtime;

namespace fsdp::runtime {
struct StopState {
  std::atomic<int> received{0};
  std::mutex mu;
  StopRecord record;
};
} // namespace fsdp::runtime

namespace {

StopState state;

// The second signal's line: a constant, for the handler may only write(2).
constexpr char kSecondLine[] = "fsdp-run: a second signal: stopping now, within the step; "
                               "resume from the last checkpoint written\n";

extern "C" void onStopSignal(int sig) {
  int none = 0;
  if (state.received.compare_exchange_strong(none, sig))
    return;
  // A second signal: now, without finishing the step (a save in progress
  // stays a .tmp folder, removed by the next run).
  int saved = errno;
  ssize_t n = ::write(STDERR_FILENO, kSecondLine, sizeof kSecondLine - 1);
  (void)n;
  errno = saved;
  ::_exit(128 + sig);
}

// The signals a rank can report, in the order one is chosen.
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};

struct TestSignal {
  int64_t step = -1; // -1: off
  int signal = 0;
  int rank = 0;
  std::string invalid;
};

const TestSignal &testConfig() {
  static const TestSignal config = [] {
    TestSignal t;
    const char *v = std::getenv("FSDP_TEST_SIGNAL");
    if (!v || !*v)
      return t;
    std::string s(v);
    size_t c1 = s.find(':');
    size_t c2 = c1 == std::string::npos ? c1 : s.find(':', c1 + 1);
    std::string name = c1 == std::string::npos ? "" : s.substr(c1 + 1, c2 - c1 - 1);
    char *end = nullptr;
    long long step = std::strtoll(s.c_str(), &end, 10);
    long long rank = 0;
    bool ok = c1 != std::string::npos && c1 > 0 && end == s.c_str() + c1 && step >= 0;
    if (ok && c2 != std::string::npos) {
      const char *r = s.c_str() + c2 + 1;
      rank = std::strtoll(r, &end, 10);
      ok = *r && !*end && rank >= 0;
    }
    int sig = name == "TERM" ? SIGTERM : name == "INT" ? SIGINT : name == "HUP" ? SIGHUP : 0;
    if (!ok || !sig) {
      t.invalid = "FSDP_TEST_SIGNAL must be STEP:TERM, STEP:INT or STEP:HUP, optionally "
                  "followed by :RANK (STEP and RANK from 0), not '" +
                  s + "'";
      return t;
    }
    t.step = step;
    t.signal = sig;
    t.rank = (int)rank;
    return t;
  }();
  return config;
}

} // namespace

void fsdp::runtime::installStopHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onStopSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kStopSignals)
    sigaddset(&sa.sa_mask, sig); // one handler at a time
  for (int sig : kStopSignals)
    sigaction(sig, &sa, nullptr);
}

void fsdp::runtime::ignoreStopSignals() {
  for (int sig : kStopSignals)
    std::signal(sig, SIG_IGN);
}

int fsdp::runtime::stopSignal() { return state.received.load(); }

StopState *fsdp::runtime::processStopState() { return &state; }

std::string fsdp::runtime::signalName(int signal) {
  switch (signal) {
  case SIGTERM:
    return "SIGTERM";
  case SIGINT:
    return "SIGINT";
  case SIGHUP:
    return "SIGHUP";
  }
  return "signal " + std::to_string(signal);
}

void fsdp::runtime::recordStop(StopState *s, const StopRecord &r) {
  s = s ? s : &state;
  std::lock_guard<std::mutex> lock(s->mu);
  s->record = r;
}

StopRecord fsdp::runtime::recordedStop() {
  std::lock_guard<std::mutex> lock(state.mu);
  return state.record;
}

std::string fsdp::runtime::testSignalError() { return testConfig().invalid; }

std::string fsdp::runtime::agreeStop(Communicator &comm, StopState *s, bool *stop, int *signal) {
  // One sum says which signals reached some rank: a rank adds 65536^k for
  // the kth of kStopSignals (exact in a double below 65536 ranks).
  int mine = (s ? s : &state)->received.load();
  double flag = 0, digit = 1;
  for (int sig : kStopSignals) {
    if (mine == sig)
      flag = digit;
    digit *= 65536;
  }
  if (!comm.allReduceScalar(Group::World, &flag))
    return "stopped: " + comm.error();
  *stop = flag > 0;
  *signal = 0;
  uint64_t sum = (uint64_t)flag;
  for (int sig : kStopSignals) {
    if (sum % 65536 != 0) {
      *signal = sig;
      break;
    }
    sum /= 65536;
  }
  return "";
}

void fsdp::runtime::testSignal(int rank, int64_t step) {
  const TestSignal &t = testConfig();
  if (t.step == step && t.rank == rank)
    std::raise(t.signal); // to this thread: handled before raise returns
}
