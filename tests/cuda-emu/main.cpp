//===- main.cpp - The emulated kernel tests' driver -----------------------===//
//
// Runs tests/gpu/KernelsGpuTest.cpp against the emulated device (and the
// emulator's own checks, SelfTest.cpp, whose kernels are named selfTest*),
// then counts
// the __global__ kernels defined in runtime/kernels/*.cu (Y, by scanning the
// sources, so the count cannot drift) and those the tests launched (X, by
// the emulator's record of launches) and prints, last,
//
//   emulated kernels: X of Y
//
// Exit status non-zero if a test failed, a kernel or cuBLAS call failed on
// the emulated device, or (running every test) X != Y.
//
//===----------------------------------------------------------------------===//
#include "tests/cuda-emu/emu_report.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

// Each test starts on a device without a previous test's errors.
struct ResetDevice : testing::EmptyTestEventListener {
  void OnTestStart(const testing::TestInfo &) override { cuda_emu::resetDevice(); }
};

std::string withoutComments(const std::string &s) {
  static const std::regex comments(R"(//[^\n]*|/\*[\s\S]*?\*/)");
  return std::regex_replace(s, comments, " ");
}

// Names of the __global__ functions defined in dir/*.cu (templates once).
std::set<std::string> definedKernels(const std::filesystem::path &dir, size_t &files) {
  static const std::regex global(
      R"(__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\()");
  std::set<std::string> names;
  files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".cu")
      continue;
    ++files;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string code = withoutComments(text.str());
    for (std::sregex_iterator it(code.begin(), code.end(), global), end; it != end; ++it)
      names.insert((*it)[1]);
  }
  return names;
}

} // namespace

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  testing::UnitTest::GetInstance()->listeners().Append(new ResetDevice);
  const bool everyTest = testing::GTEST_FLAG(filter) == "*";
  const int testsStatus = RUN_ALL_TESTS();

  size_t files = 0;
  const std::set<std::string> defined = definedKernels(FSDP_CUDA_KERNELS_DIR, files);
  const std::set<std::string> launched = cuda_emu::launchedKernels();
  size_t ran = 0;
  for (const std::string &k : defined) {
    if (launched.count(k))
      ++ran;
    else
      std::printf("not launched: %s\n", k.c_str());
  }
  bool ok = testsStatus == 0;
  for (const std::string &k : launched)
    if (!defined.count(k) && k.rfind("selfTest", 0) != 0) { // SelfTest.cpp's own
      std::printf("launched, but not defined in %s/*.cu: %s\n", FSDP_CUDA_KERNELS_DIR, k.c_str());
      ok = false;
    }
  const auto failures = cuda_emu::takeFailures();
  if (!failures.empty()) {
    std::printf("%zu failures on the emulated device (first: %s)\n", failures.size(),
                failures.front().c_str());
    ok = false;
  }
  if (defined.empty()) {
    std::printf("no __global__ kernel found in %zu .cu files of %s\n", files,
                FSDP_CUDA_KERNELS_DIR);
    ok = false;
  }
  if (everyTest && ran != defined.size())
    ok = false;
  std::printf("emulated kernels: %zu of %zu\n", ran, defined.size());
  std::fflush(stdout);
  return ok ? 0 : 1;
}
