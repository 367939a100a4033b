//===- Safetensors.cpp ----------------------------------------------------===//
#include "runtime/io/Safetensors.h"
#include "runtime/io/Files.h"
#include "support/InputFile.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp::io;
using nlohmann::json;

SafetensorsReader::~SafetensorsReader() {
  if (fd >= 0)
    ::close(fd);
}

static int64_t elementSize(const std::string &dtype) {
  if (dtype == "F32" || dtype == "I32" || dtype == "U32")
    return 4;
  if (dtype == "BF16" || dtype == "F16" || dtype == "I16" || dtype == "U16")
    return 2;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64")
    return 8;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL")
    return 1;
  return 0;
}

std::string SafetensorsReader::open(const std::string &p) {
  path = p;
  // O_NONBLOCK: a FIFO is refused below, not waited on.
  fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return path + ": cannot open the weights: " + std::strerror(errno);
  struct stat st;
  fstat(fd, &st);
  if (!S_ISREG(st.st_mode))
    return path + ": cannot open the weights: " + support::fileKind(st.st_mode) +
           ", not a regular file";
  fileSize = st.st_size;
  uint64_t headerLen = 0;
  if (fileSize < 8 || ::pread(fd, &headerLen, 8, 0) != 8)
    return path + ": not a safetensors file (shorter than its 8-byte header length)";
  if (headerLen > (uint64_t)fileSize - 8 || headerLen > (1u << 30))
    return path + ": not a safetensors file (header length " + std::to_string(headerLen) +
           " exceeds the file)";
  std::string header(headerLen, '\0');
  if (::pread(fd, header.data(), headerLen, 8) != (ssize_t)headerLen)
    return path + ": cannot read the safetensors header";
  dataStart = 8 + headerLen;
  unsigned line = 0, col = 0;
  std::string deep = support::checkJsonDepth(header, &line, &col);
  if (!deep.empty())
    return path + ": malformed safetensors header: " + deep;
  json j;
  try {
    j = json::parse(header);
  } catch (const json::exception &e) {
    return path + ": malformed safetensors header: " + e.what();
  }
  if (!j.is_object())
    return path + ": malformed safetensors header: not an object";
  for (auto &[name, v] : j.items()) {
    if (name == "__metadata__")
      continue;
    try {
      TensorInfo t;
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = v.at("shape").get<std::vector<int64_t>>();
      auto offs = v.at("data_offsets").get<std::vector<int64_t>>();
      if (offs.size() != 2)
        return path + ": tensor '" + name + "' has malformed data_offsets";
      t.begin = offs[0];
      t.end = offs[1];
      int64_t n = 1;
      for (int64_t d : t.shape)
        n *= d;
      int64_t es = elementSize(t.dtype);
      if (es == 0)
        return path + ": tensor '" + name + "' has unknown dtype " + t.dtype;
      if (t.end - t.begin != n * es || t.begin < 0 || dataStart + t.end > fileSize)
        return path + ": tensor '" + name +
               "' has a byte range that does not match its "
               "shape or lies past the end of the file";
      infos[name] = t;
    } catch (const json::exception &) {
      return path + ": tensor '" + name + "' has a malformed header entry";
    }
  }
  return "";
}

static float bf16ToF32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static float f16ToF32(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp((float)mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp((float)(mant | 0x400), (int)exp - 25);
  return sign ? -v : v;
}

std::string SafetensorsReader::readF32(const std::string &name, int64_t first, int64_t count,
                                       float *out) const {
  auto it = infos.find(name);
  if (it == infos.end())
    return path + ": no tensor '" + name + "'";
  const TensorInfo &t = it->second;
  int64_t es = elementSize(t.dtype);
  int64_t at = dataStart + t.begin + first * es;
  if (t.dtype == "F32") {
    if (::pread(fd, out, count * 4, at) != count * 4)
      return path + ": short read of '" + name + "'";
    return "";
  }
  if (t.dtype == "BF16" || t.dtype == "F16") {
    std::vector<uint16_t> buf(count);
    if (::pread(fd, buf.data(), count * 2, at) != count * 2)
      return path + ": short read of '" + name + "'";
    for (int64_t i = 0; i < count; ++i)
      out[i] = t.dtype == "BF16" ? bf16ToF32(buf[i]) : f16ToF32(buf[i]);
    return "";
  }
  return path + ": tensor '" + name + "' is " + t.dtype + "; weights must be F32, BF16 or F16";
}

std::string fsdp::io::writeSafetensors(const std::string &path,
                                       const std::vector<NamedTensor> &tensors) {
  json header = json::object();
  int64_t offset = 0;
  for (const NamedTensor &t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape)
      n *= d;
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * 4}}};
    offset += n * 4;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0)
    h += ' ';
  // A temporary beside the file, made durable, then renamed over it: a
  // crash leaves the old file or the new one, never half of one.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  removeTree(tmp);
  DurableFile f;
  uint64_t len = h.size();
  std::string err = f.create(tmp);
  if (err.empty())
    err = f.write(&len, 8);
  if (err.empty())
    err = f.write(h.data(), h.size());
  for (const NamedTensor &t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape)
      n *= d;
    if (err.empty())
      err = f.write(t.data, size_t(n) * 4);
  }
  if (err.empty())
    err = f.close();
  if (err.empty())
    err = renameDurable(tmp, path);
  if (!err.empty()) {
    removeTree(tmp);
    return path + ": not written: " + err;
  }
  return "";
}
