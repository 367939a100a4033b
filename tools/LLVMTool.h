//===- LLVMTool.h - what fsdp's LLVM-based tools share ------------*- C++ -*-===//
//
// fsdp-plan, fsdp-translate and fsdp-opt parse flags with llvm::cl, which
// would print LLVM's version for --version and list LLVM's own options (a few
// hundred lines) under --help.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLS_LLVMTOOL_H
#define FSDP_TOOLS_LLVMTOOL_H

#include "tools/Version.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace fsdp::tools {

/// --version prints "TOOL (fsdp) VERSION".
inline void printFsdpVersion(const char *tool) {
  static const char *name;
  name = tool;
  llvm::cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << name << " (fsdp) " << FSDP_VERSION << "\n"; });
}

/// Hides every option registered so far (LLVM's and MLIR's library options,
/// registered when the program starts) from --help; --help-hidden still lists
/// them. The driver's own options, registered after this, stay visible.
inline void hideLibraryOptions() {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.getKey();
    if (name == "help" || name == "help-hidden" || name == "version" || name == "h")
      continue;
    entry.getValue()->setHiddenFlag(llvm::cl::Hidden);
  }
}

} // namespace fsdp::tools

#endif
