//===- emu_report.h - What the emulated test's driver reads -----*- C++ -*-===//
#ifndef FSDP_TESTS_CUDA_EMU_EMU_REPORT_H
#define FSDP_TESTS_CUDA_EMU_EMU_REPORT_H

#include <set>
#include <string>
#include <vector>

namespace cuda_emu {
// Base names (no namespace, no template arguments) of the kernels launched.
std::set<std::string> launchedKernels();
// Every failure of a kernel or a cuBLAS call so far, in order.
std::vector<std::string> failures();
// Clears the errors of the device (the failures stay recorded).
void resetDevice();
} // namespace cuda_emu

#endif
