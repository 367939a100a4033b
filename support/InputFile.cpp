//===- InputFile.cpp ------------------------------------------------------===//
#include "support/InputFile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp;

std::string support::describeBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

int64_t support::parseByteSize(const std::string &text) {
  size_t b = text.find_first_not_of(" \t"), e = text.find_last_not_of(" \t");
  if (b == std::string::npos)
    return -1;
  std::string t = text.substr(b, e - b + 1);
  size_t i = 0;
  while (i < t.size() && (std::isdigit((unsigned char)t[i]) || t[i] == '.'))
    ++i;
  if (i == 0 || std::count(t.begin(), t.begin() + i, '.') > 1 || t.substr(0, i) == ".")
    return -1;
  double value = std::strtod(t.substr(0, i).c_str(), nullptr);
  std::string unit;
  for (char c : t.substr(i))
    if (c != ' ' && c != '\t')
      unit += (char)std::tolower((unsigned char)c);
  static const std::pair<const char *, double> units[] = {
      {"", 1},         {"b", 1},      {"k", 0x1p10},   {"kib", 0x1p10}, {"m", 0x1p20},
      {"mib", 0x1p20}, {"g", 0x1p30}, {"gib", 0x1p30}, {"t", 0x1p40},   {"tib", 0x1p40},
      {"kb", 1e3},     {"mb", 1e6},   {"gb", 1e9},     {"tb", 1e12}};
  for (auto [name, scale] : units)
    if (unit == name) {
      double bytes = std::round(value * scale);
      return bytes <= 0x1p62 ? (int64_t)bytes : -1;
    }
  return -1;
}

const char *support::fileKind(unsigned mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "a special file";
}

std::string support::openRegularFile(const std::string &path, int64_t maxBytes,
                                     const std::string &what, int *fd, int64_t *size) {
  *fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (*fd < 0)
    return path + ": cannot read the " + what + ": " + std::strerror(errno);
  struct stat st;
  bool known = ::fstat(*fd, &st) == 0;
  if (!known || !S_ISREG(st.st_mode)) {
    std::string kind = known ? support::fileKind(st.st_mode) : std::strerror(errno);
    ::close(*fd);
    return path + ": cannot read the " + what + ": " + kind + ", not a regular file";
  }
  if (st.st_size > maxBytes) {
    ::close(*fd);
    return path + ": cannot read the " + what + ": " + std::to_string((long long)st.st_size) +
           " bytes, over the limit of " + support::describeBytes(maxBytes);
  }
  // Regular files ignore O_NONBLOCK; cleared so that the caller reads as usual.
  int flags = ::fcntl(*fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK);
  *size = st.st_size;
  return "";
}

std::string support::checkRegularFile(const std::string &path, int64_t maxBytes,
                                      const std::string &what) {
  int fd = -1;
  int64_t size = 0;
  std::string err = openRegularFile(path, maxBytes, what, &fd, &size);
  if (err.empty())
    ::close(fd);
  return err;
}

std::string support::readRegularFile(const std::string &path, int64_t maxBytes,
                                     const std::string &what, std::string *text) {
  int fd = -1;
  int64_t size = 0;
  std::string err = openRegularFile(path, maxBytes, what, &fd, &size);
  if (!err.empty())
    return err;
  text->clear();
  // The file may grow while read: never past the limit.
  text->resize((size_t)size);
  int64_t done = 0;
  for (;;) {
    if (done == (int64_t)text->size()) {
      if ((int64_t)text->size() >= maxBytes + 1)
        break;
      text->resize((size_t)std::min<int64_t>(maxBytes + 1, done + 4096));
    }
    ssize_t n = ::read(fd, &(*text)[done], text->size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return path + ": cannot read the " + what + ": " + std::strerror(e);
    }
    if (n == 0)
      break;
    done += n;
  }
  ::close(fd);
  if (done > maxBytes)
    return path + ": cannot read the " + what + ": over the limit of " + describeBytes(maxBytes);
  text->resize((size_t)done);
  return "";
}

namespace {

// Scans `text` for brackets nested deeper than `maxDepth`, outside strings
// (and, for MLIR, outside comments). MLIR's '<' opens a level too (nested
// types), its "->" closes none.
std::string checkDepth(const std::string &text, bool mlir, unsigned *atLine, unsigned *atCol,
                       int maxDepth) {
  int depth = 0;
  unsigned line = 1, col = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++col;
    if (c == '\n') {
      ++line;
      col = 0;
      inString = false; // neither format's strings hold a raw newline
      continue;
    }
    if (inString) {
      if (c == '\\')
        ++i, ++col;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (mlir && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '[' || c == '{' || (mlir && (c == '(' || c == '<'))) {
      if (++depth > maxDepth) {
        *atLine = line;
        *atCol = col;
        return std::string(mlir ? "MLIR" : "JSON") + " nested deeper than " +
               std::to_string(maxDepth) + (mlir ? " brackets" : " arrays and objects") +
               "; refused without parsing it";
      }
    } else if (c == ']' || c == '}' ||
               (mlir && (c == ')' || (c == '>' && (i == 0 || text[i - 1] != '-'))))) {
      if (depth > 0)
        --depth;
    }
  }
  return "";
}

} // namespace

std::string support::checkJsonDepth(const std::string &text, unsigned *line, unsigned *col,
                                    int maxDepth) {
  return checkDepth(text, /*mlir=*/false, line, col, maxDepth);
}

std::string support::checkMlirDepth(const std::string &text, unsigned *line, unsigned *col,
                                    int maxDepth) {
  return checkDepth(text, /*mlir=*/true, line, col, maxDepth);
}
