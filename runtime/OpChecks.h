//===- OpChecks.h - each program op's checks (internal) ----------*- C++ -*-===//
//
// Shared by the loader (ProgramLoad.cpp) and the op checks (OpChecks.cpp);
// not part of the runtime's interface.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_OPCHECKS_H
#define FSDP_RUNTIME_OPCHECKS_H

#include "runtime/Program.h"

#include <string>
#include <vector>

namespace fsdp::program::detail {

using i128 = __int128;
std::string str(i128 v);
/// The product of the dimensions, saturated at 2^100 (no wrap-around).
i128 elements(const std::vector<int64_t> &shape);
i128 elementBytes(DType d);

/// Why an instruction is refused (the loader adds where it is).
struct CheckError {
  std::string what;
};
/// Checks `inst` against its op and the program, and decodes its Call into
/// it (decodeCall). Throws CheckError.
void checkInstruction(const Program &p, Instruction &inst);

} // namespace fsdp::program::detail

#endif
