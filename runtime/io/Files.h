//===- Files.h - checked, durable file writes and fault injection -*- C++ -*-===//
//
// Everything fsdp-run writes that must survive a crash goes through here:
// every write, fsync, rename and removal is checked and reported with the
// path and the system's reason, and none goes through a shell.
//
// Fault injection (tests only): FSDP_FAULT=N:ACTION makes the Nth fault point
// this process reaches (counted from 1, over every rank of the process) act:
// `kill` raises SIGKILL there, `enospc` and `eio` make that operation fail
// with ENOSPC or EIO, and `sigterm`, `sigint` or `sighup` sends that signal
// to the process there and goes on (runtime/Signals.h). FSDP_FAULT=list
// prints each point to stderr as it is reached ("fsdp-fault: 7 fsync-before
// PATH"). The points: each write call, before and after each fsync, before
// and after each rename and link, each mkdir and each removal. Without
// FSDP_FAULT a point costs one relaxed load.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_IO_FILES_H
#define FSDP_RUNTIME_IO_FILES_H

#include <cstddef>
#include <string>

namespace fsdp::io {

/// "" when FSDP_FAULT is unset or understood, else why not: a tool checks it
/// before anything runs (a fault point ignores what it does not understand).
std::string faultInjectionError();

/// A fault point: returns 0, or the errno the operation must fail with.
/// May not return (kill).
int faultPoint(const char *what, const std::string &path);

/// A new file, written with checked writes and made durable by close().
class DurableFile {
public:
  DurableFile() = default;
  DurableFile(const DurableFile &) = delete;
  DurableFile &operator=(const DurableFile &) = delete;
  ~DurableFile(); // closes (without fsync) a file not closed

  /// Creates `path`, which must not exist.
  std::string create(const std::string &path);
  /// Writes all of [data, data + bytes) at the end of the file.
  std::string write(const void *data, size_t bytes);
  /// fsync, then close; the file's data is on disk when this returns "".
  std::string close();

private:
  int fd = -1;
  std::string path;
};

/// Writes `path` whole (create, write, fsync, close); `path` must not exist.
std::string writeFileDurable(const std::string &path, const std::string &contents);
/// fsync of a directory, so that entries created or renamed in it persist.
std::string syncDirectory(const std::string &dir);
/// rename(2), then fsync of the destination's directory.
std::string renameDurable(const std::string &from, const std::string &to);
/// link(2): a second name `to` (which must not exist) for the file `from`,
/// then fsync of `to`'s directory. Fault points "link-before"/"link-after".
std::string linkDurable(const std::string &from, const std::string &to);
/// mkdir(2) of one folder (its parent must exist).
std::string makeDirectory(const std::string &dir);
/// Removes a file or a folder and everything in it (no shell).
std::string removeTree(const std::string &path);

/// The folder that holds `path` ("." for a bare name).
std::string parentOf(const std::string &path);

/// Checks, before anything runs, that `path` can be written as a file by
/// `flag`: its parent exists, is a folder and is writable, and `path` is not a
/// folder. Leaves nothing behind. Returns "" or the error naming the flag.
std::string checkOutputFile(const std::string &flag, const std::string &path);
/// The same for a folder that fsdp-run creates if missing (not its parents).
std::string checkOutputDirectory(const std::string &flag, const std::string &path);

} // namespace fsdp::io

#endif
