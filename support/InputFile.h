//===- InputFile.h - reading the tools' input files, bounded ----*- C++ -*-===//
//
// What fsdp-plan and fsdp-run read (models, cluster files, programs) comes
// from users: a FIFO must not block the tool, a device such as /dev/zero must
// not grow its memory without bound, and a JSON text nested 100000 deep must
// not exhaust the stack of a recursive reader. Shared by the planner and the
// runtime, so it depends on nothing but the C++ library.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SUPPORT_INPUTFILE_H
#define FSDP_SUPPORT_INPUTFILE_H

#include <cstdint>
#include <string>

namespace fsdp::support {

/// The largest JSON input the tools read (64 MiB).
constexpr int64_t kMaxJsonBytes = int64_t(64) << 20;
/// The deepest nesting of arrays and objects the tools accept in JSON (and
/// of brackets in MLIR).
constexpr int kMaxJsonDepth = 512;

/// Reads `path`, a regular file of at most `maxBytes`, into `text`. Opens
/// without blocking (a FIFO is refused, not waited on) and checks the kind and
/// size before reading. Returns "" or why not, starting with the path.
std::string readRegularFile(const std::string &path, int64_t maxBytes, const std::string &what,
                            std::string *text);

/// Opens `path` for reading: a regular file of at most `maxBytes`, checked
/// after an open that does not block (a FIFO is refused, not waited on) and
/// before any byte is read. On success *fd (the caller closes it) and *size.
/// Returns "" or why not, starting with the path.
std::string openRegularFile(const std::string &path, int64_t maxBytes, const std::string &what,
                            int *fd, int64_t *size);

/// Checks that `path` is a regular file of at most `maxBytes` without reading
/// it. Returns "" or why not, starting with the path.
std::string checkRegularFile(const std::string &path, int64_t maxBytes, const std::string &what);

/// Scans JSON `text` (outside strings) for nesting deeper than `maxDepth`.
/// Returns "" or the error, with *line and *col (from 1) at the bracket that
/// passes the limit.
std::string checkJsonDepth(const std::string &text, unsigned *line, unsigned *col,
                           int maxDepth = kMaxJsonDepth);

/// The same for MLIR text (the parser recurses over nested regions,
/// attributes and types): brackets of every kind, outside strings and
/// comments.
std::string checkMlirDepth(const std::string &text, unsigned *line, unsigned *col,
                           int maxDepth = kMaxJsonDepth);

/// What a file of `st_mode` is, for an error: "a directory", "a FIFO",
/// "a device", "a socket", "a special file".
const char *fileKind(unsigned mode);

/// "64.0 MiB", "1.5 GiB", "512 B".
std::string describeBytes(double bytes);

/// A size in bytes as a person writes it, for flags such as fsdp-plan's
/// --memory-budget and fsdp-run's --max-shard-size: a number (fractions
/// allowed), then a unit: none or B (bytes); KiB, MiB, GiB, TiB (or K, M, G,
/// T: powers of 1024); KB, MB, GB, TB (powers of 1000, as transformers reads
/// "5GB"); any case, spaces around. -1 when it does not parse or passes 2^62.
int64_t parseByteSize(const std::string &text);

} // namespace fsdp::support

#endif
