//===- emu_report.h - What the emulated test's driver reads -----*- C++ -*-===//
#ifndef FSDP_TESTS_CUDA_EMU_EMU_REPORT_H
#define FSDP_TESTS_CUDA_EMU_EMU_REPORT_H

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace cuda_emu {
// Base names (no namespace, no template arguments) of the kernels launched.
std::set<std::string> launchedKernels();
// Every failure of a kernel or a cuBLAS call since the last call, in order
// (the emulator's self-test takes those it provoked).
std::vector<std::string> takeFailures();
// Clears the errors of the device (the failures stay recorded).
void resetDevice();
// The device memory's capacity for the tests that follow (0: the setting's,
// FSDP_EMULATED_GPU_MEMORY or 80 GiB), without reading the environment again.
void setMemoryCapacity(size_t bytes);
// The stream-order checker's reports since the last call, each pair of
// operations once (each also said on stderr as found); taking them also
// keeps them from setting the exit status (emu.cpp).
std::vector<std::string> takeStreamOrderReports();
// Drops the n-th cudaStreamWaitEvent from now on (0: none), as
// FSDP_EMU_DROP_WAIT=n does from the process's start.
void setWaitDrop(uint64_t n);
} // namespace cuda_emu

#endif
