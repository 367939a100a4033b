//===- Npy.cpp - NumPy .npy arrays ----------------------------------------===//
//
// The format (numpy/lib/format.py): "\x93NUMPY", major and minor version
// bytes, the header's length (uint16 little-endian in 1.0; uint32 in 2.0 and
// 3.0), then the header, an ASCII (1.0, 2.0: latin-1; 3.0: UTF-8) Python
// dict literal padded with spaces and ended by a newline, then the data.
// numpy reads the dict with ast.literal_eval; this reader accepts the dict
// literals of that grammar that can describe an array it reads: string keys,
// a string, a bool and a tuple of integers as values, quotes of either kind,
// whitespace anywhere between tokens, an optional trailing comma.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Npy.h"
#include "support/InputFile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp::io;

const char *fsdp::io::npyTypeName(NpyType t) {
  switch (t) {
  case NpyType::U8:
    return "uint8";
  case NpyType::I32:
    return "int32";
  case NpyType::I64:
    return "int64";
  }
  return "?";
}

int fsdp::io::npyTypeBytes(NpyType t) { return t == NpyType::U8 ? 1 : t == NpyType::I32 ? 4 : 8; }

int64_t NpyArray::at(int64_t i) const {
  const uint8_t *p = data() + i * npyTypeBytes(type);
  switch (type) {
  case NpyType::U8:
    return p[0];
  case NpyType::I32: {
    uint32_t v = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    return (int64_t)(int32_t)v;
  }
  case NpyType::I64: {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k)
      v |= uint64_t(p[k]) << (8 * k);
    return (int64_t)v;
  }
  }
  return 0;
}

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 62;
constexpr size_t kMaxDims = 32; // numpy's own limit (NPY_MAXDIMS) in 1.x

/// The header dict, token by token. Errors say what was expected where.
class HeaderParser {
public:
  HeaderParser(const std::string &text) : s(text) {}
  std::string error;

  void skipSpace() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
      ++i;
  }
  bool fail(const std::string &what) {
    if (error.empty())
      error = what + " at character " + std::to_string(i) + " of the header";
    return false;
  }
  bool expect(char c) {
    skipSpace();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return fail(std::string("expected '") + c + "'");
  }
  bool peek(char c) {
    skipSpace();
    return i < s.size() && s[i] == c;
  }
  // A Python string literal in single or double quotes, without escapes
  // (no key or value numpy writes has one).
  bool string(std::string &out) {
    skipSpace();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      return fail("expected a quoted string");
    char q = s[i++];
    size_t start = i;
    while (i < s.size() && s[i] != q) {
      if (s[i] == '\\' || s[i] == '\n')
        return fail("unsupported character in a string");
      ++i;
    }
    if (i >= s.size())
      return fail("unterminated string");
    out = s.substr(start, i - start);
    ++i;
    return true;
  }
  bool word(const char *w) {
    size_t n = std::strlen(w);
    if (s.compare(i, n, w) != 0)
      return false;
    // Not a prefix of a longer name (Falsey).
    if (i + n < s.size() && (std::isalnum((unsigned char)s[i + n]) || s[i + n] == '_'))
      return false;
    i += n;
    return true;
  }
  bool boolean(bool &out) {
    skipSpace();
    if (word("True"))
      out = true;
    else if (word("False"))
      out = false;
    else
      return fail("expected True or False");
    return true;
  }
  // A non-negative decimal integer as Python writes it (no sign, no leading
  // zero, no underscores, no suffix), below 2^62.
  bool integer(int64_t &out) {
    skipSpace();
    if (i >= s.size() || !std::isdigit((unsigned char)s[i]))
      return fail("expected a non-negative integer");
    size_t start = i;
    out = 0;
    while (i < s.size() && std::isdigit((unsigned char)s[i])) {
      if (out > (kMaxElements - 9) / 10)
        return fail("dimension too large");
      out = out * 10 + (s[i] - '0');
      ++i;
    }
    if (s[start] == '0' && i - start > 1)
      return fail("integer with a leading zero");
    if (i < s.size() && (std::isalpha((unsigned char)s[i]) || s[i] == '_' || s[i] == '.'))
      return fail("expected an integer");
    return true;
  }
  // A tuple of integers: "()", "(5,)", "(2, 3)", "(2, 3,)". "(5)" is the
  // integer 5, not a tuple.
  bool tuple(std::vector<int64_t> &out) {
    out.clear();
    if (!expect('('))
      return fail("expected a tuple");
    if (peek(')')) {
      ++i;
      return true;
    }
    bool comma = false;
    for (;;) {
      int64_t d;
      if (!integer(d))
        return false;
      if (out.size() == kMaxDims)
        return fail("more than " + std::to_string(kMaxDims) + " dimensions");
      out.push_back(d);
      if (peek(',')) {
        ++i;
        comma = true;
        if (peek(')')) {
          ++i;
          return true;
        }
        continue;
      }
      if (peek(')')) {
        ++i;
        if (!comma)
          return fail("'shape' must be a tuple: a one-dimensional shape is written (N,)");
        return true;
      }
      return fail("expected ',' or ')' in the shape");
    }
  }

  const std::string &s;
  size_t i = 0;
};

} // namespace

std::string fsdp::io::parseNpy(const std::string &name, const uint8_t *data, size_t size,
                               NpyArray &out) {
  out = NpyArray();
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(data, magic, 6) != 0)
    return name + ": not a NumPy .npy file (it does not start with \\x93NUMPY)";
  out.major = data[6];
  out.minor = data[7];
  if ((out.major != 1 && out.major != 2 && out.major != 3) || out.minor != 0)
    return name + ": .npy format version " + std::to_string(out.major) + "." +
           std::to_string(out.minor) + " is not supported (1.0, 2.0 or 3.0)";
  size_t lenBytes = out.major == 1 ? 2 : 4;
  if (size < 8 + lenBytes)
    return name + ": the .npy header is cut short (" + std::to_string(size) + " bytes)";
  uint64_t headerLen = 0;
  for (size_t k = 0; k < lenBytes; ++k)
    headerLen |= uint64_t(data[8 + k]) << (8 * k);
  size_t start = 8 + lenBytes;
  if (headerLen > size - start)
    return name + ": the .npy header says it is " + std::to_string(headerLen) +
           " bytes, but the file has " + std::to_string(size - start) + " after its length";
  std::string header(reinterpret_cast<const char *>(data + start), size_t(headerLen));
  for (size_t k = 0; k < header.size(); ++k)
    if ((unsigned char)header[k] >= 0x80 || header[k] == '\0')
      return name + ": the .npy header holds byte " + std::to_string((unsigned char)header[k]) +
             " at character " + std::to_string(k) + ", not ASCII text";
  if (header.empty() || header.back() != '\n')
    return name + ": the .npy header does not end with a newline";

  HeaderParser h(header);
  std::string descr;
  bool fortran = false, haveDescr = false, haveOrder = false, haveShape = false;
  auto bad = [&]() { return name + ": malformed .npy header: " + h.error; };
  if (!h.expect('{'))
    return bad();
  while (!h.peek('}')) {
    std::string key;
    if (!h.string(key) || !h.expect(':'))
      return bad();
    if (key == "descr" && !haveDescr) {
      haveDescr = true;
      if (!h.string(descr))
        return bad();
    } else if (key == "fortran_order" && !haveOrder) {
      haveOrder = true;
      if (!h.boolean(fortran))
        return bad();
    } else if (key == "shape" && !haveShape) {
      haveShape = true;
      if (!h.tuple(out.shape))
        return bad();
    } else if (key == "descr" || key == "fortran_order" || key == "shape") {
      return name + ": malformed .npy header: the key '" + key + "' is given twice";
    } else {
      return name + ": malformed .npy header: unexpected key '" + key +
             "' (a .npy header has 'descr', 'fortran_order' and 'shape')";
    }
    if (h.peek(',')) {
      ++h.i;
      continue;
    }
    if (!h.peek('}')) {
      h.fail("expected ',' or '}'");
      return bad();
    }
  }
  ++h.i; // '}'
  h.skipSpace();
  if (h.i != header.size()) {
    h.fail("text after the dict");
    return bad();
  }
  if (!haveDescr || !haveOrder || !haveShape)
    return name + ": malformed .npy header: missing '" +
           (!haveDescr   ? "descr"
            : !haveOrder ? "fortran_order"
                         : "shape") +
           "'";

  // The dtype: byte order, kind, size.
  std::string order = descr.empty() ? "" : descr.substr(0, 1);
  std::string code = descr;
  if (order == "<" || order == ">" || order == "|" || order == "=")
    code = descr.substr(1);
  else
    order.clear();
  if (code == "u1")
    out.type = NpyType::U8;
  else if (code == "i4")
    out.type = NpyType::I32;
  else if (code == "i8")
    out.type = NpyType::I64;
  else
    return name + ": dtype '" + descr +
           "' is not supported: fsdp reads uint8 ('|u1') images and int32 ('<i4') or int64 "
           "('<i8') labels";
  if (out.type != NpyType::U8 && order != "<")
    return name + ": dtype '" + descr + "' is " +
           (order == ">" ? "big-endian" : "not marked little-endian") + "; fsdp reads '<" + code +
           "' (numpy: .astype('<" + code + "'))";
  if (fortran)
    return name + ": the array is in Fortran order; fsdp reads C order only "
                  "(numpy: np.ascontiguousarray)";

  // The data: exactly the shape's bytes.
  int64_t count = 1;
  for (int64_t d : out.shape) {
    if (d != 0 && count > kMaxElements / d)
      return name + ": the shape holds more than 2^62 elements";
    count *= d;
  }
  out.count = count;
  int width = npyTypeBytes(out.type);
  if (count > kMaxElements / width)
    return name + ": the array's data passes 2^62 bytes";
  out.offset = start + size_t(headerLen);
  uint64_t have = size - out.offset, want = uint64_t(count) * width;
  if (have < want)
    return name + ": the data is cut short: the shape needs " + std::to_string(want) + " bytes (" +
           std::to_string(count) + " " + npyTypeName(out.type) + "), the file holds " +
           std::to_string(have) + " after the header";
  if (have > want)
    return name + ": " + std::to_string(have - want) +
           " bytes follow the array's data (the shape needs " + std::to_string(want) + ")";
  return "";
}

std::string fsdp::io::readNpy(const std::string &path, NpyArray &out) {
  out = NpyArray();
  // O_NONBLOCK: a FIFO must not block the open; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return path + ": cannot read the array: " + std::strerror(errno);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return path + ": cannot read the array: " + support::fileKind(st.st_mode) +
           ", not a regular file";
  }
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(size_t(st.st_size));
  } catch (const std::exception &) {
    ::close(fd);
    return path + ": cannot hold its " + std::to_string((long long)st.st_size) + " bytes in memory";
  }
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::read(fd, bytes.data() + done, std::min<size_t>(bytes.size() - done, 1 << 30));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = n < 0 ? errno : 0;
      ::close(fd);
      return path + ": cannot read the array: " + (e ? std::strerror(e) : "short read");
    }
    done += size_t(n);
  }
  ::close(fd);
  std::string err = parseNpy(path, bytes.data(), bytes.size(), out);
  if (err.empty())
    out.bytes = std::move(bytes);
  else
    out = NpyArray();
  return err;
}
