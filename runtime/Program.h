//===- Program.h - the runtime's program format ------------------*- C++ -*-===//
//
// The versioned JSON program that fsdp-plan lowers a plan to and fsdp-run
// executes (docs/plan-format.md). The runtime owns the format; the planner
// includes this header for the constants and never the reverse. Plain C++:
// nothing here knows MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PROGRAM_H
#define FSDP_RUNTIME_PROGRAM_H

namespace fsdp::program {

inline constexpr const char *kFormat = "fsdp-program";
inline constexpr int kVersion = 1;

} // namespace fsdp::program

#endif
