//===- RunTest.cpp - a run through runtime/Run.h, as a front end calls it -===//
//
// runtime::run without fsdp-run: a tiny GPT-2 program (the program fuzzer's
// seed, planned for 2 ranks) trains on the threads backend and returns every
// step's report, says nothing on stdout, and writes --metrics; a check
// before step 1 fails with its error through the result and the error sink,
// and nothing runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/Run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace fsdp;

namespace {

const char *kProgram = FSDP_SOURCE_DIR "/tests/fuzz/corpus/program/seed-gpt2-ws2.json";

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/run-" + std::to_string(::getpid()) + "-" + name;
}

/// Counts what a run says through its events.
struct Heard {
  std::vector<std::string> errors;
  std::vector<runtime::StepReport> steps;
  int started = 0, finished = 0;
  runtime::RunEvents events() {
    runtime::RunEvents e;
    e.error = [this](const std::string &why) { errors.push_back(why); };
    e.started = [this](const runtime::RunStart &) { ++started; };
    e.step = [this](const runtime::StepReport &r) { steps.push_back(r); };
    e.finished = [this](const runtime::RunResult &) { ++finished; };
    return e;
  }
};

TEST(Run, TinyThreadsRunReturnsEveryStep) {
  runtime::RunRequest req;
  req.plan = kProgram;
  req.options.steps = 3;
  req.options.syntheticData = true;
  req.metrics = tempPath("metrics.jsonl");
  req.keepReports = true;
  Heard heard;
  ::testing::internal::CaptureStdout();
  runtime::RunResult res = runtime::run(req, heard.events());
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  ASSERT_EQ(res.status, 0) << res.error;
  EXPECT_EQ(res.error, "");
  EXPECT_EQ(res.backend, runtime::BackendKind::Threads);
  EXPECT_TRUE(heard.errors.empty());
  EXPECT_EQ(heard.started, 1);
  EXPECT_EQ(heard.finished, 1);
  ASSERT_EQ(res.reports.size(), 3u);
  ASSERT_EQ(heard.steps.size(), 3u);
  for (int64_t t = 0; t < 3; ++t) {
    const runtime::StepReport &r = res.reports[t];
    EXPECT_EQ(r.step, t + 1);
    EXPECT_EQ(r.steps, 3);
    EXPECT_TRUE(std::isfinite(r.loss) && r.loss > 0) << r.loss;
    EXPECT_GT(r.gradNorm, 0);
    EXPECT_EQ(r.peakBytes, r.predictedPeakBytes); // the plan's peak, exactly
    EXPECT_EQ(heard.steps[t].loss, r.loss);
  }
  EXPECT_EQ(res.last.step, 3);
  EXPECT_EQ(res.stop.signal, 0);
  // --metrics: one line a step.
  std::ifstream in(req.metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line))
    EXPECT_EQ(line.rfind("{\"step\": " + std::to_string(++lines) + ",", 0), 0u) << line;
  EXPECT_EQ(lines, 3);
  std::remove(req.metrics.c_str());
}

// A --save-weights file whose folder does not exist is refused before step
// 1: the error comes back and is said once, no step runs, and the metrics
// file is not made.
TEST(Run, PreRunCheckFailsWithItsError) {
  runtime::RunRequest req;
  req.plan = kProgram;
  req.metrics = tempPath("refused.jsonl");
  req.options.syntheticData = true;
  req.options.saveWeights = tempPath("no-such-folder") + "/model.safetensors";
  Heard heard;
  runtime::RunResult res = runtime::run(req, heard.events());
  EXPECT_EQ(res.status, 1);
  EXPECT_NE(res.error.find("--save-weights"), std::string::npos) << res.error;
  EXPECT_NE(res.error.find("no-such-folder"), std::string::npos) << res.error;
  ASSERT_EQ(heard.errors.size(), 1u);
  EXPECT_EQ(heard.errors[0], res.error);
  EXPECT_EQ(heard.started, 0);
  EXPECT_EQ(heard.finished, 0);
  EXPECT_TRUE(heard.steps.empty());
  EXPECT_EQ(res.last.step, 0);
  EXPECT_NE(::access(req.metrics.c_str(), F_OK), 0);
}

// FSDP_NCCL_PLUGIN belongs to --backend nccl: set for the threads backend it
// is refused, naming the variable and the backend, not ignored.
TEST(Run, PluginVariableRefusedForACpuBackend) {
  ::setenv("FSDP_NCCL_PLUGIN", "libfsdp-nccl-emulated.so", 1);
  runtime::RunRequest req;
  req.plan = kProgram;
  Heard heard;
  runtime::RunResult res = runtime::run(req, heard.events());
  ::unsetenv("FSDP_NCCL_PLUGIN");
  EXPECT_EQ(res.status, 1) << res.error;
  EXPECT_NE(res.error.find("FSDP_NCCL_PLUGIN"), std::string::npos) << res.error;
  EXPECT_NE(res.error.find("--backend threads"), std::string::npos) << res.error;
  EXPECT_TRUE(heard.steps.empty());
}

} // namespace
