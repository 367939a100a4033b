//===- Files.cpp ----------------------------------------------------------===//
#include "runtime/io/Files.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp;
using namespace fsdp::io;

namespace {

// FSDP_FAULT, read once: 0 off, 1 listing, 2 acting at point `target`.
struct FaultConfig {
  int mode = 0;
  long long target = 0;
  enum Action { Kill, Fail, Signal } action = Kill;
  int error = 0;       // Fail: the errno; Signal: the signal's number
  std::string invalid; // why FSDP_FAULT is not understood (then: off)
};

const FaultConfig &faultConfig() {
  static const FaultConfig config = [] {
    FaultConfig c;
    const char *v = std::getenv("FSDP_FAULT");
    if (!v || !*v)
      return c;
    std::string s(v);
    if (s == "list") {
      c.mode = 1;
      return c;
    }
    size_t colon = s.find(':');
    char *end = nullptr;
    long long n = std::strtoll(s.c_str(), &end, 10);
    std::string action = colon == std::string::npos ? "" : s.substr(colon + 1);
    int sig = action == "sigterm"  ? SIGTERM
              : action == "sigint" ? SIGINT
              : action == "sighup" ? SIGHUP
                                   : 0;
    if (colon == std::string::npos || end != s.c_str() + colon || n < 1 ||
        (action != "kill" && action != "enospc" && action != "eio" && !sig)) {
      c.invalid = "FSDP_FAULT must be 'list' or N:kill, N:enospc, N:eio, N:sigterm, N:sigint or "
                  "N:sighup (N from 1), not '" +
                  s + "'";
      return c;
    }
    c.mode = 2;
    c.target = n;
    c.action = action == "kill" ? FaultConfig::Kill : sig ? FaultConfig::Signal : FaultConfig::Fail;
    c.error = sig ? sig : action == "enospc" ? ENOSPC : EIO;
    return c;
  }();
  return config;
}

std::atomic<long long> faultCount{0};

std::string failure(const std::string &what, const std::string &path, int err) {
  return path + ": " + what + ": " + std::strerror(err);
}

} // namespace

std::string fsdp::io::faultInjectionError() { return faultConfig().invalid; }

int fsdp::io::faultPoint(const char *what, const std::string &path) {
  const FaultConfig &c = faultConfig();
  if (c.mode == 0)
    return 0;
  long long n = ++faultCount;
  if (c.mode == 1) {
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    std::fprintf(stderr, "fsdp-fault: %lld %s %s\n", n, what, path.c_str());
    return 0;
  }
  if (n != c.target)
    return 0;
  if (c.action == FaultConfig::Kill) {
    std::fflush(stdout);
    std::raise(SIGKILL);
  }
  if (c.action == FaultConfig::Signal) { // handled before raise returns; then go on
    std::raise(c.error);
    return 0;
  }
  return c.error;
}

DurableFile::~DurableFile() {
  if (fd >= 0)
    ::close(fd);
}

std::string DurableFile::create(const std::string &p) {
  path = p;
  if (int e = faultPoint("create", path))
    return failure("cannot create", path, e);
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return failure("cannot create", path, errno);
  return "";
}

std::string DurableFile::write(const void *data, size_t bytes) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    if (int e = faultPoint("write", path))
      return failure("cannot write", path, e);
    // At most 1 GiB a call: Linux writes at most about 2 GiB at once anyway.
    ssize_t n = ::write(fd, p, bytes < (size_t(1) << 30) ? bytes : size_t(1) << 30);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return failure("cannot write", path, n < 0 ? errno : ENOSPC);
    p += n;
    bytes -= size_t(n);
  }
  return "";
}

std::string DurableFile::close() {
  int e = faultPoint("fsync-before", path);
  if (!e && ::fsync(fd) != 0)
    e = errno;
  if (!e)
    e = faultPoint("fsync-after", path);
  int rc = ::close(fd);
  fd = -1;
  if (!e && rc != 0)
    e = errno;
  return e ? failure("cannot write", path, e) : "";
}

std::string fsdp::io::writeFileDurable(const std::string &path, const std::string &contents) {
  DurableFile f;
  std::string err = f.create(path);
  if (err.empty())
    err = f.write(contents.data(), contents.size());
  if (err.empty())
    err = f.close();
  return err;
}

std::string fsdp::io::syncDirectory(const std::string &dir) {
  int e = faultPoint("fsync-before", dir);
  int fd = -1;
  if (!e) {
    fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0)
      e = errno;
    if (fd >= 0)
      ::close(fd);
  }
  if (!e)
    e = faultPoint("fsync-after", dir);
  return e ? failure("cannot sync the folder", dir, e) : "";
}

std::string fsdp::io::renameDurable(const std::string &from, const std::string &to) {
  int e = faultPoint("rename-before", to);
  if (!e && std::rename(from.c_str(), to.c_str()) != 0)
    e = errno;
  if (!e)
    e = faultPoint("rename-after", to);
  if (e)
    return failure("cannot rename " + from + " to it", to, e);
  return syncDirectory(parentOf(to));
}

std::string fsdp::io::linkDurable(const std::string &from, const std::string &to) {
  int e = faultPoint("link-before", to);
  if (!e && ::link(from.c_str(), to.c_str()) != 0)
    e = errno;
  if (!e)
    e = faultPoint("link-after", to);
  if (e)
    return failure("cannot link " + from + " to it", to, e);
  return syncDirectory(parentOf(to));
}

std::string fsdp::io::makeDirectory(const std::string &dir) {
  int e = faultPoint("mkdir", dir);
  if (!e && ::mkdir(dir.c_str(), 0755) != 0)
    e = errno;
  return e ? failure("cannot create the folder", dir, e) : "";
}

std::string fsdp::io::removeTree(const std::string &path) {
  if (int e = faultPoint("remove", path))
    return failure("cannot remove", path, e);
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  return ec ? path + ": cannot remove: " + ec.message() : "";
}

std::string fsdp::io::parentOf(const std::string &path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  size_t slash = p.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

namespace {

std::string checkParent(const std::string &flag, const std::string &path) {
  std::string parent = parentOf(path);
  struct stat st;
  if (::stat(parent.c_str(), &st) != 0)
    return flag + " " + path + ": the folder " + parent + " does not exist (" +
           std::strerror(errno) + ")";
  if (!S_ISDIR(st.st_mode))
    return flag + " " + path + ": " + parent + " is not a folder";
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    return flag + " " + path + ": cannot write in " + parent + " (" + std::strerror(errno) + ")";
  return "";
}

} // namespace

std::string fsdp::io::checkOutputFile(const std::string &flag, const std::string &path) {
  if (path.empty())
    return flag + " needs a path";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return flag + " " + path + ": is a folder, but a file is written there";
    if (!S_ISREG(st.st_mode))
      return flag + " " + path + ": is not a regular file";
    if (::access(path.c_str(), W_OK) != 0)
      return flag + " " + path + ": cannot be written (" + std::strerror(errno) + ")";
  }
  return checkParent(flag, path);
}

std::string fsdp::io::checkOutputDirectory(const std::string &flag, const std::string &path) {
  if (path.empty())
    return flag + " needs a path";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return flag + " " + path + ": is not a folder";
    if (::access(path.c_str(), W_OK | X_OK) != 0)
      return flag + " " + path + ": cannot write in it (" + std::strerror(errno) + ")";
    return "";
  }
  return checkParent(flag, path);
}
