//===- LLVMTool.h - what fsdp's LLVM-based tools share ------------*- C++ -*-===//
//
// fsdp-plan, fsdp-translate and fsdp-opt parse flags with llvm::cl, which
// would print LLVM's version for --version and list LLVM's own options (a few
// hundred lines) under --help. And their input is read here, as fsdp-plan
// reads a model, before any MLIR parser sees it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLS_LLVMTOOL_H
#define FSDP_TOOLS_LLVMTOOL_H

#include "support/InputFile.h"
#include "tools/Version.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>

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

/// The input of fsdp-opt and fsdp-translate, under fsdp-plan's rules: a
/// regular file (a FIFO is refused, never waited on; a device such as
/// /dev/zero is refused, not read), at most 64 MiB, nested at most 512 deep
/// (`mlir`: MLIR's brackets, else JSON's), checked before any parser (each
/// recurses) sees it. "-" is standard input, which may be a pipe: read up to
/// the same limit. Null after printing the error, naming the file (and the
/// line and column of the bracket past the limit).
inline std::unique_ptr<llvm::MemoryBuffer> readInput(const char *tool, const std::string &path,
                                                     bool mlir) {
  std::string text, err;
  std::string name = path == "-" ? "<stdin>" : path;
  if (path == "-") {
    text.resize(4096);
    size_t done = 0;
    for (;;) {
      if (done == text.size()) {
        if ((int64_t)done > support::kMaxJsonBytes)
          break;
        text.resize(std::min<size_t>(support::kMaxJsonBytes + 1, done * 2));
      }
      ssize_t n = ::read(0, &text[done], text.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        err = name + ": cannot read the input: " + std::strerror(errno);
        break;
      }
      if (n == 0)
        break;
      done += (size_t)n;
    }
    if (err.empty() && (int64_t)done > support::kMaxJsonBytes)
      err = name + ": cannot read the input: over the limit of " +
            support::describeBytes(support::kMaxJsonBytes);
    text.resize(done);
  } else {
    err = support::readRegularFile(path, support::kMaxJsonBytes, "input", &text);
  }
  if (!err.empty()) {
    llvm::errs() << tool << ": error: " << err << "\n";
    return nullptr;
  }
  unsigned line = 0, col = 0;
  err = mlir ? support::checkMlirDepth(text, &line, &col)
             : support::checkJsonDepth(text, &line, &col);
  if (!err.empty()) {
    llvm::errs() << name << ":" << line << ":" << col << ": error: " << err << "\n";
    return nullptr;
  }
  return llvm::MemoryBuffer::getMemBufferCopy(text, name);
}

} // namespace fsdp::tools

#endif
