//===- Safetensors.cpp ----------------------------------------------------===//
#include "runtime/weights/Safetensors.h"
#include "runtime/io/Crc32.h"
#include "runtime/io/Files.h"
#include "runtime/kernels/cpu.h"
#include "support/InputFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <iterator>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp::weights;
using namespace fsdp::io;
using nlohmann::json;

SafetensorsReader::~SafetensorsReader() {
  if (fd >= 0)
    ::close(fd);
}

static int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
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

// Checksums fsdp's writer records in __metadata__ (string values, as the
// format requires): the block size, one CRC-32 per block of the data section
// (hex, comma-separated) and the CRC-32 of the 8-byte length and the header
// with this value's 8 digits read as "00000000". Files from elsewhere have
// none and are read unchecked.
static const char *const kCrcBlockKey = "fsdp_crc32_block_bytes";
static const char *const kCrcDataKey = "fsdp_crc32_data";
static const char *const kCrcHeaderKey = "fsdp_crc32_header";
// As checkpoints: a flipped byte costs re-reading at most two such blocks.
constexpr int64_t kCrcBlockBytes = int64_t(1) << 20;

static std::string hex8(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

static bool parseHex8(const std::string &s, uint32_t *v) {
  if (s.size() != 8 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
    return false;
  *v = (uint32_t)std::strtoul(s.c_str(), nullptr, 16);
  return true;
}

// The CRC-32 of the length and the header, the header checksum's digits
// read as zeros. `at`: where those 8 digits start in `header`.
static uint32_t headerCrc(uint64_t len, std::string header, size_t at) {
  header.replace(at, 8, "00000000");
  return crc32(header.data(), header.size(), crc32(&len, 8));
}

// The entry of the header checksum in the text, `"fsdp_crc32_header":"`,
// exactly once (a duplicate key is refused before this), or npos.
static size_t findHeaderCrc(const std::string &header) {
  std::string key = std::string("\"") + kCrcHeaderKey + "\":\"";
  size_t at = header.find(key);
  if (at == std::string::npos || header.find(key, at + 1) != std::string::npos)
    return std::string::npos;
  return at + key.size();
}

std::string SafetensorsReader::open(const std::string &p) {
  file = p;
  // A FIFO or a device is refused before a byte is read, never waited on.
  std::string err = support::openRegularFile(file, INT64_MAX, "weights", &fd, &fileSize);
  if (!err.empty()) {
    fd = -1;
    return err;
  }
  uint64_t headerLen = 0;
  if (fileSize < 8 || ::pread(fd, &headerLen, 8, 0) != 8)
    return file + ": not a safetensors file (shorter than its 8-byte header length)";
  if (headerLen > (uint64_t)fileSize - 8 || headerLen > (1u << 30))
    return file + ": not a safetensors file (header length " + std::to_string(headerLen) +
           " exceeds the file)";
  std::string header(headerLen, '\0');
  if (::pread(fd, header.data(), headerLen, 8) != (ssize_t)headerLen)
    return file + ": cannot read the safetensors header";
  dataStart = 8 + headerLen;
  // The format: the header begins with '{' and may end in spaces (0x20)
  // after its '}', nothing else.
  if (header.empty() || header[0] != '{') {
    char b[8];
    std::snprintf(b, sizeof b, "0x%02x", header.empty() ? 0u : (unsigned char)header[0]);
    return file + ": malformed safetensors header: it must begin with '{', not " +
           (header.empty() ? std::string("be empty") : std::string("byte ") + b) +
           " (at byte 8 of the file)";
  }
  size_t last = header.find_last_not_of(' ');
  if (header[last] != '}')
    return file + ": malformed safetensors header: after its closing '}' only spaces (0x20) " +
           "may pad it, but byte " + std::to_string(8 + last) + " of the file is not one";
  unsigned line = 0, col = 0;
  std::string deep = support::checkJsonDepth(header, &line, &col);
  if (!deep.empty())
    return file + ": malformed safetensors header: " + deep;
  // nlohmann keeps the last of duplicate keys: the callback sees each key as
  // it is parsed, so a duplicate is refused, not resolved.
  std::vector<std::vector<std::string>> keys; // per open object
  std::string top, duplicate;
  auto callback = [&](int, json::parse_event_t ev, json &parsed) {
    if (ev == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (ev == json::parse_event_t::key && duplicate.empty()) {
      std::string k = parsed.get<std::string>();
      std::vector<std::string> &seen = keys.back();
      if (std::find(seen.begin(), seen.end(), k) != seen.end())
        duplicate = keys.size() == 1
                        ? "'" + k + "' appears twice in the header"
                        : "key '" + k + "' appears twice in the entry of '" + top + "'";
      seen.push_back(k);
      if (keys.size() == 1)
        top = k;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(header, callback);
  } catch (const json::exception &e) {
    return file + ": malformed safetensors header: " + e.what();
  }
  if (!duplicate.empty())
    return file + ": malformed safetensors header: " + duplicate;
  if (!j.is_object())
    return file + ": malformed safetensors header: not an object";
  std::map<std::string, std::string> metadata;
  for (auto &[name, v] : j.items()) {
    if (name == "__metadata__") {
      // A map of strings to strings, as the format says.
      if (!v.is_object())
        return file + ": \"__metadata__\" is " + v.dump() + ", not an object of strings";
      for (auto &[k, s] : v.items()) {
        if (!s.is_string())
          return file + ": \"__metadata__\": '" + k + "' is " + s.dump() + ", not a string";
        metadata[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object())
      return file + ": tensor '" + name + "' has a malformed header entry (not an object)";
    auto integers = [](const json &a) {
      if (!a.is_array())
        return false;
      for (const json &x : a)
        if (!x.is_number_integer() || (!x.is_number_unsigned() && x.get<int64_t>() < 0))
          return false;
      return true;
    };
    if (!v.contains("dtype") || !v["dtype"].is_string())
      return file + ": tensor '" + name + "' has no \"dtype\" string";
    if (!v.contains("shape") || !integers(v["shape"]))
      return file + ": tensor '" + name + "' has a \"shape\" that is not a list of sizes: " +
             (v.contains("shape") ? v["shape"].dump() : std::string("none"));
    if (!v.contains("data_offsets") || !integers(v["data_offsets"]) ||
        v["data_offsets"].size() != 2)
      return file + ": tensor '" + name +
             "' has malformed data_offsets (two integer byte offsets): " +
             (v.contains("data_offsets") ? v["data_offsets"].dump() : std::string("none"));
    TensorInfo t;
    t.dtype = v["dtype"].get<std::string>();
    int64_t es = elementSize(t.dtype);
    if (es == 0)
      return file + ": tensor '" + name + "' has unknown dtype " + t.dtype;
    // Sizes and offsets beyond the file are refused before any product can
    // overflow.
    int64_t n = es;
    bool fits = true;
    for (const json &d : v["shape"]) {
      uint64_t u = d.get<uint64_t>();
      fits = fits && u <= (uint64_t)fileSize && (u == 0 || n <= fileSize / (int64_t)u);
      if (fits)
        n *= (int64_t)u;
      t.shape.push_back(fits ? (int64_t)u : 0);
    }
    uint64_t b = v["data_offsets"][0].get<uint64_t>(), e = v["data_offsets"][1].get<uint64_t>();
    if (!fits || b > e || e > (uint64_t)(fileSize - dataStart) || int64_t(e - b) != n)
      return file + ": tensor '" + name + "' has a byte range " + v["data_offsets"].dump() +
             " that does not match its shape " + v["shape"].dump() + " and dtype " + t.dtype +
             " or lies past the end of the file";
    t.begin = (int64_t)b;
    t.end = (int64_t)e;
    infos[name] = t;
  }
  // The data section: the tensors one after another from byte 0, no gap, no
  // overlap, ending with the file (as the safetensors library checks).
  std::vector<std::pair<const std::string *, const TensorInfo *>> order;
  for (auto &[name, t] : infos)
    order.push_back({&name, &t});
  std::sort(order.begin(), order.end(), [](auto &a, auto &b) {
    return std::make_pair(a.second->begin, a.second->end) <
           std::make_pair(b.second->begin, b.second->end);
  });
  int64_t expect = 0;
  const std::string *previous = nullptr;
  for (auto [name, t] : order) {
    auto range = [](const TensorInfo *x) {
      return "[" + std::to_string(x->begin) + ", " + std::to_string(x->end) + "]";
    };
    if (t->begin < expect)
      return file + ": tensor '" + *name + "' has data_offsets " + range(t) +
             " that overlap those of '" + *previous + "' (" + range(&infos[*previous]) + ")";
    if (t->begin > expect)
      return file + ": tensor '" + *name + "' has data_offsets " + range(t) + ": " +
             std::to_string(t->begin - expect) + " bytes before it belong to no tensor" +
             " (the data must be contiguous)";
    expect = t->end;
    previous = name;
  }
  if (dataStart + expect != fileSize)
    return file + ": " + std::to_string(fileSize - dataStart - expect) +
           " bytes after the last tensor's data (the data must end with the file)";
  if (metadata.count(kCrcBlockKey) || metadata.count(kCrcDataKey) ||
      metadata.count(kCrcHeaderKey)) {
    std::string e = checkWrittenByFsdp(metadata, header, headerLen);
    if (!e.empty())
      return e;
  }
  return "";
}

// The checksums of a file fsdp wrote: all three keys, the header's now, the
// data's block by block as it is read.
std::string SafetensorsReader::checkWrittenByFsdp(const std::map<std::string, std::string> &m,
                                                  const std::string &header, uint64_t headerLen) {
  std::string meta = file + ": \"__metadata__\": ";
  for (const char *k : {kCrcBlockKey, kCrcDataKey, kCrcHeaderKey})
    if (!m.count(k))
      return meta + "'" + k + "' is missing (fsdp writes it with the other checksums)";
  const std::string &blockText = m.at(kCrcBlockKey);
  if (blockText.empty() || blockText.size() > 10 ||
      blockText.find_first_not_of("0123456789") != std::string::npos || std::stoll(blockText) < 1 ||
      std::stoll(blockText) > (int64_t(1) << 30))
    return meta + "'" + kCrcBlockKey + "' is '" + blockText + "', not a size in bytes";
  crcBlock = std::stoll(blockText);
  int64_t dataBytes = fileSize - dataStart;
  size_t blocks = size_t((dataBytes + crcBlock - 1) / crcBlock);
  const std::string &list = m.at(kCrcDataKey);
  blockCrcs.clear();
  for (size_t at = 0; !list.empty() && at <= list.size();) {
    size_t comma = list.find(',', at);
    std::string one = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    uint32_t v;
    if (!parseHex8(one, &v))
      return meta + "'" + kCrcDataKey + "' holds '" + one + "', not 8 hex digits";
    blockCrcs.push_back(v);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  if (blockCrcs.size() != blocks)
    return meta + "'" + kCrcDataKey + "' holds " + std::to_string(blockCrcs.size()) +
           " checksums, but the data is " + std::to_string(blocks) + " blocks of " + blockText +
           " bytes";
  uint32_t want;
  size_t at = findHeaderCrc(header);
  if (at == std::string::npos || !parseHex8(m.at(kCrcHeaderKey), &want) ||
      header.compare(at, 8, m.at(kCrcHeaderKey)) != 0)
    return meta + "'" + kCrcHeaderKey + "' is not 8 hex digits written as fsdp writes them";
  if (headerCrc(headerLen, header, at) != want)
    return file + ": the header does not match its checksum ('" + kCrcHeaderKey +
           "' in \"__metadata__\"): the file changed after fsdp wrote it";
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
    return file + ": no tensor '" + name + "'";
  const TensorInfo &t = it->second;
  int64_t es = elementSize(t.dtype);
  if (first < 0 || count < 0 || first + count > (t.end - t.begin) / es)
    return file + ": tensor '" + name + "' has no elements [" + std::to_string(first) + ", " +
           std::to_string(first + count) + ")";
  int64_t at = dataStart + t.begin + first * es;
  if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16")
    return file + ": tensor '" + name + "' is " + t.dtype + "; weights must be F32, BF16 or F16";
  // A released file is opened for this read only.
  int f = fd;
  if (f < 0) {
    int64_t size = 0;
    std::string err = support::openRegularFile(file, INT64_MAX, "weights", &f, &size);
    if (!err.empty())
      return err;
  }
  struct Closer {
    int f;
    bool own;
    ~Closer() {
      if (own)
        ::close(f);
    }
  } closer{f, fd < 0};
  if (!blockCrcs.empty()) {
    // A file fsdp wrote: the whole blocks that hold the range are read and
    // checked before a byte of them is used.
    int64_t lo = at - dataStart, hi = lo + count * es, dataBytes = fileSize - dataStart;
    if (count <= 0)
      return "";
    int64_t from = lo / crcBlock * crcBlock,
            to = std::min(dataBytes, (hi + crcBlock - 1) / crcBlock * crcBlock);
    std::vector<char> buf(size_t(to - from));
    if (::pread(f, buf.data(), buf.size(), dataStart + from) != (ssize_t)buf.size())
      return file + ": short read of '" + name + "'";
    for (int64_t b = from; b < to; b += crcBlock) {
      size_t k = size_t(b / crcBlock);
      if (crc32(buf.data() + (b - from), size_t(std::min(crcBlock, to - b))) != blockCrcs[k])
        return file + ": tensor '" + name + "': data block " + std::to_string(k) + " (bytes " +
               std::to_string(b) + " to " + std::to_string(std::min(b + crcBlock, dataBytes)) +
               " of the data) does not match its checksum in \"__metadata__\": the file " +
               "changed after fsdp wrote it";
    }
    const char *p = buf.data() + (lo - from);
    if (t.dtype == "F32") {
      std::memcpy(out, p, size_t(count) * 4);
      return "";
    }
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = t.dtype == "BF16" ? bf16ToF32(h) : f16ToF32(h);
    }
    return "";
  }
  if (t.dtype == "F32") {
    if (::pread(f, out, count * 4, at) != count * 4)
      return file + ": short read of '" + name + "'";
    return "";
  }
  std::vector<uint16_t> buf(count);
  if (::pread(f, buf.data(), count * 2, at) != count * 2)
    return file + ": short read of '" + name + "'";
  for (int64_t i = 0; i < count; ++i)
    out[i] = t.dtype == "BF16" ? bf16ToF32(buf[i]) : f16ToF32(buf[i]);
  return "";
}

void SafetensorsReader::release() {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

const std::string &WeightSource::fileOf(const std::string &name) const {
  return files[fileIndex.at(name)]->path();
}

std::string WeightSource::readF32(const std::string &name, int64_t first, int64_t count,
                                  float *out) const {
  auto it = fileIndex.find(name);
  if (it == fileIndex.end())
    return where + ": no tensor '" + name + "'";
  return files[it->second]->readF32(name, first, count, out);
}

static bool endsWith(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A file a folder or an index names must be in that folder: a symbolic link
// that leads out of it (to /etc/passwd, another user's files) is refused.
static std::string checkInside(const std::string &dir, const std::string &path,
                               const std::string &namedBy) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
    return "";
  char *d = ::realpath(dir.c_str(), nullptr), *f = ::realpath(path.c_str(), nullptr);
  std::string realDir = d ? d : "", target = f ? f : "";
  std::free(d);
  std::free(f);
  if (target.empty()) // a dangling link: opening it says why
    return "";
  if (!realDir.empty() && target.compare(0, realDir.size() + 1, realDir + "/") == 0)
    return "";
  // The Hugging Face hub's cache keeps a snapshot's files as links into the
  // repository's content-addressed store, REPO/snapshots/REV/NAME ->
  // ../../blobs/HASH: they stay inside REPO, the folder the hub downloaded,
  // and refusing them would refuse every model loaded from that cache.
  std::string revs = parentOf(realDir), repo = parentOf(revs);
  if (!realDir.empty() && revs.size() > repo.size() &&
      revs.compare(repo.size(), std::string::npos, repo == "/" ? "snapshots" : "/snapshots") == 0 &&
      target.compare(0, repo.size() + 7, repo + "/blobs/") == 0 &&
      target.find('/', repo.size() + 7) == std::string::npos)
    return "";
  return path + ": a symbolic link to " + target + ", outside " + dir + namedBy +
         ": the weights of a folder must be in it";
}

std::string WeightSource::open(const std::string &p) {
  where = p;
  std::string index;
  struct stat st;
  if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::string dir = p;
    while (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    index = dir + "/" + kIndexName;
    if (::lstat(index.c_str(), &st) == 0) {
      std::string err = checkInside(dir, index, "");
      if (!err.empty())
        return err;
    }
    if (::stat(index.c_str(), &st) != 0) {
      std::string single = dir + "/" + kSingleFileName;
      if (::stat(single.c_str(), &st) != 0)
        return p + ": cannot open the weights: a folder with neither " + kIndexName + " nor " +
               kSingleFileName + " in it";
      index.clear();
      where = single;
      std::string err = checkInside(dir, single, "");
      if (!err.empty())
        return err;
    }
  } else if (endsWith(p, ".json")) {
    index = p;
  }
  if (index.empty()) {
    files.push_back(std::make_unique<SafetensorsReader>());
    std::string err = files[0]->open(where);
    if (!err.empty())
      return err;
    infos = files[0]->tensors();
    for (auto &[name, info] : infos)
      fileIndex[name] = 0;
    return "";
  }
  where = index;
  // The index: bounded, regular, nested within the limit, then parsed.
  std::string text;
  std::string err = support::readRegularFile(index, support::kMaxJsonBytes, "weights index", &text);
  if (!err.empty())
    return err;
  unsigned line = 0, col = 0;
  err = support::checkJsonDepth(text, &line, &col);
  if (!err.empty())
    return index + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + err;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception &e) {
    return index + ": not a weights index: not JSON: " + e.what();
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return index + ": not a weights index: no \"weight_map\" object (tensor name to shard file)";
  bool haveTotal = false;
  int64_t total = 0;
  if (j.contains("metadata")) {
    const json &m = j["metadata"];
    if (!m.is_object())
      return index + ": not a weights index: \"metadata\" is not an object";
    if (m.contains("total_size")) {
      const json &t = m["total_size"];
      if (!t.is_number_integer() || t.get<int64_t>() < 0)
        return index + ": \"metadata\": \"total_size\" is not a byte count: " + t.dump();
      haveTotal = true;
      total = t.get<int64_t>();
    }
  }
  std::string dir = parentOf(index);
  std::map<std::string, size_t> shardIndex; // shard file name -> files[i]
  int64_t sum = 0;
  for (auto &[name, v] : j["weight_map"].items()) {
    if (!v.is_string())
      return index + ": tensor '" + name + "' maps to " + v.dump() + ", not a shard file name";
    std::string shard = v.get<std::string>();
    // The shards live beside the index: a name that leads elsewhere is refused.
    if (shard.empty() || shard == "." || shard == ".." ||
        shard.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
      return index + ": tensor '" + name + "' maps to '" + shard +
             "': a shard must be a file name in " + dir + " (no path separator, not '..')";
    auto [it, added] = shardIndex.try_emplace(shard, files.size());
    if (added) {
      files.push_back(std::make_unique<SafetensorsReader>());
      std::string namedBy = " (a shard " + index + " names, for tensor '" + name + "')";
      err = checkInside(dir, dir + "/" + shard, namedBy);
      if (!err.empty())
        return err;
      err = files.back()->open(dir + "/" + shard);
      if (!err.empty())
        return err + " (a shard " + index + " names, for tensor '" + name + "')";
      files.back()->release();
    }
    const SafetensorsReader &r = *files[it->second];
    auto t = r.tensors().find(name);
    if (t == r.tensors().end())
      return r.path() + ": no tensor '" + name + "', which " + index + " places there";
    infos[name] = t->second;
    fileIndex[name] = it->second;
    sum += t->second.end - t->second.begin;
  }
  // transformers does not read total_size either; what is read is checked
  // tensor by tensor, so a total that disagrees is only noted.
  if (haveTotal && total != sum)
    notes.push_back(index + ": \"total_size\" says " + std::to_string(total) +
                    " bytes, but the tensors it maps hold " + std::to_string(sum) +
                    " (ignored: each tensor's own entry is checked)");
  return "";
}

const char *fsdp::weights::saveDtypeName(SaveDtype dtype) {
  return dtype == SaveDtype::BF16 ? "BF16" : "F32";
}

static int64_t saveBytes(const std::vector<int64_t> &shape, SaveDtype dtype) {
  return numel(shape) * (dtype == SaveDtype::BF16 ? 2 : 4);
}

// Writes the safetensors file `path` (which must not exist) and makes it
// durable: the data in name order, as the safetensors library lays it out,
// in `dtype` (bf16: each value rounded to nearest even).
static std::string writeSafetensorsFile(const std::string &path,
                                        const std::vector<NamedTensor> &given, SaveDtype dtype) {
  std::vector<const NamedTensor *> tensors;
  for (const NamedTensor &t : given)
    tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(),
            [](const NamedTensor *a, const NamedTensor *b) { return a->name < b->name; });
  // bf16: every tensor rounded once, up front (the checksums and the write
  // read the same bytes).
  std::vector<std::vector<uint16_t>> rounded;
  std::vector<const void *> bytesOf;
  for (const NamedTensor *t : tensors) {
    if (dtype == SaveDtype::F32) {
      bytesOf.push_back(t->data);
      continue;
    }
    rounded.emplace_back(size_t(numel(t->shape)));
    fsdp::kernels::toBf16(t->data, rounded.back().data(), numel(t->shape));
    bytesOf.push_back(rounded.back().data());
  }
  json header = json::object();
  int64_t offset = 0;
  // The data's checksums, block by block across the tensors, as the reader
  // checks them.
  std::string crcs;
  uint32_t crc = 0;
  int64_t inBlock = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const NamedTensor *t = tensors[k];
    int64_t bytes = saveBytes(t->shape, dtype);
    header[t->name] = {{"dtype", saveDtypeName(dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    const char *p = reinterpret_cast<const char *>(bytesOf[k]);
    for (int64_t done = 0; done < bytes;) {
      int64_t n = std::min(bytes - done, kCrcBlockBytes - inBlock);
      crc = crc32(p + done, size_t(n), crc);
      done += n;
      inBlock += n;
      if (inBlock == kCrcBlockBytes) {
        crcs += (crcs.empty() ? "" : ",") + hex8(crc);
        crc = 0;
        inBlock = 0;
      }
    }
  }
  if (inBlock > 0)
    crcs += (crcs.empty() ? "" : ",") + hex8(crc);
  header["__metadata__"] = {{"format", "pt"},
                            {kCrcBlockKey, std::to_string(kCrcBlockBytes)},
                            {kCrcDataKey, crcs},
                            {kCrcHeaderKey, "00000000"}};
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0)
    h += ' ';
  size_t at = findHeaderCrc(h);
  h.replace(at, 8, hex8(headerCrc(h.size(), h, at)));
  DurableFile f;
  uint64_t len = h.size();
  std::string err = f.create(path);
  if (err.empty())
    err = f.write(&len, 8);
  if (err.empty())
    err = f.write(h.data(), h.size());
  for (size_t k = 0; k < tensors.size(); ++k)
    if (err.empty())
      err = f.write(bytesOf[k], size_t(saveBytes(tensors[k]->shape, dtype)));
  if (err.empty())
    err = f.close();
  return err;
}

// "NAME.tmp.PID" or "NAME.tmp.PID.link" (the temporaries of a save) where
// `isName(NAME)` and PID is this process or one that is gone: what a save
// killed before it finished left. A live process's are its own business.
static std::vector<std::string>
staleTemporaries(const std::string &dir, bool (*isName)(const std::string &, const std::string &),
                 const std::string &arg) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || !isName(name.substr(0, at), arg))
      continue;
    std::string pid = name.substr(at + 5);
    if (endsWith(pid, ".link"))
      pid.resize(pid.size() - 5);
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos)
      continue;
    pid_t p = (pid_t)std::stol(pid);
    if (p == ::getpid() || (::kill(p, 0) != 0 && errno == ESRCH))
      out.push_back(dir + "/" + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

static bool isNamed(const std::string &name, const std::string &want) { return name == want; }

std::string fsdp::weights::writeSafetensors(const std::string &path,
                                            const std::vector<NamedTensor> &tensors,
                                            SaveDtype dtype) {
  // A temporary beside the file, made durable, then renamed over it: a
  // crash leaves the old file or the new one, never half of one.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  removeTree(tmp);
  std::string err = writeSafetensorsFile(tmp, tensors, dtype);
  if (err.empty())
    err = renameDurable(tmp, path);
  if (!err.empty()) {
    removeTree(tmp);
    return path + ": not written: " + err;
  }
  // What earlier saves killed before their rename left.
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  for (const std::string &stale : staleTemporaries(parentOf(path), isNamed, base)) {
    err = removeTree(stale);
    if (!err.empty())
      return path + ": written, but an earlier save's temporary stays: " + err;
  }
  return "";
}

bool fsdp::weights::isWeightsFolder(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return true;
  return !endsWith(path, ".safetensors");
}

std::string fsdp::weights::saveWeightsNameError(const std::string &path) {
  struct stat st;
  // An existing path is checked as such (a file where a folder is meant is
  // an error of its own, io::checkOutputDirectory's).
  if (path.empty() || path.back() == '/' || endsWith(path, ".safetensors") ||
      ::stat(path.c_str(), &st) == 0)
    return "";
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  size_t dot = base.rfind('.');
  if (dot == std::string::npos || dot == 0)
    return "";
  // The extensions of weight and tensor files people write: any other
  // ("run.v2", "gpt2-tiny.saved") is a folder's name like another.
  std::string ext = base.substr(dot + 1);
  for (char &c : ext)
    c = char(std::tolower((unsigned char)c));
  static const char *const fileKinds[] = {"bin",  "pt",  "pth",  "ckpt",    "safetensor",
                                          "st",   "h5",  "npz",  "npy",     "json",
                                          "gguf", "pkl", "onnx", "msgpack", "model"};
  if (std::find(std::begin(fileKinds), std::end(fileKinds), ext) == std::end(fileKinds))
    return "";
  std::string stem = path.substr(0, path.size() - (base.size() - dot));
  return "--save-weights " + path + " looks like a file's name ('" + base.substr(dot) +
         "'), but it would be a folder of HF shards: give " + stem +
         ".safetensors for one file, or a folder's name (" + stem + ", or " + path +
         "/ to keep the name)";
}

std::vector<std::vector<size_t>>
fsdp::weights::planWeightShards(const std::vector<NamedTensor> &tensors, int64_t maxShardSize,
                                SaveDtype dtype) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  int64_t currentBytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t bytes = saveBytes(tensors[i].shape, dtype);
    if (bytes > maxShardSize) {
      shards.push_back({i});
      continue;
    }
    if (currentBytes + bytes > maxShardSize) {
      shards.push_back(std::move(current));
      current.clear();
      currentBytes = 0;
    }
    current.push_back(i);
    currentBytes += bytes;
  }
  if (!current.empty())
    shards.push_back(std::move(current));
  return shards;
}

// "model-00002-of-00005.safetensors": five digits at least, as
// huggingface_hub's "{idx:05d}" writes them.
static std::string shardFileName(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// A file an earlier save_pretrained-style save leaves in a folder: the
// index, the single file or a shard "model-NNNNN-of-NNNNN.safetensors".
static bool isSavedWeightsFile(const std::string &name) {
  if (name == kIndexName || name == kSingleFileName)
    return true;
  const std::string head = "model-", mid = "-of-", tail = ".safetensors";
  if (name.compare(0, head.size(), head) != 0 || !endsWith(name, tail))
    return false;
  std::string core = name.substr(head.size(), name.size() - head.size() - tail.size());
  size_t at = core.find(mid);
  if (at == std::string::npos)
    return false;
  std::string a = core.substr(0, at), b = core.substr(at + mid.size());
  auto digits = [](const std::string &d) {
    return d.size() >= 5 && d.find_first_not_of("0123456789") == std::string::npos;
  };
  return digits(a) && digits(b);
}

// The weights' files and the model's files a save writes beside them: whose
// temporaries a killed save leaves.
static bool isSavedWeightsName(const std::string &name, const std::string &) {
  return isSavedWeightsFile(name) || name == kConfigName || name == kGenerationConfigName;
}

std::string fsdp::weights::writeSafetensorsFolder(const std::string &dirGiven,
                                                  const std::vector<NamedTensor> &tensors,
                                                  int64_t maxShardSize, SaveDtype dtype,
                                                  const std::vector<FolderFile> &files) {
  std::string dir = dirGiven;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  struct stat st;
  bool made = ::stat(dir.c_str(), &st) != 0;
  if (made) {
    std::string err = makeDirectory(dir);
    if (err.empty())
      err = syncDirectory(parentOf(dir));
    if (!err.empty())
      return dir + ": weights not written: " + err;
  }
  std::vector<std::vector<size_t>> plan = planWeightShards(tensors, maxShardSize, dtype);
  size_t n = plan.size();
  std::vector<std::string> names;
  int64_t total = 0;
  for (size_t s = 0; s < n; ++s) {
    names.push_back(n == 1 ? std::string(kSingleFileName) : shardFileName(s, n));
    for (size_t i : plan[s])
      total += saveBytes(tensors[i].shape, dtype);
  }
  std::string suffix = ".tmp." + std::to_string(::getpid());
  auto temp = [&](const std::string &name) { return dir + "/" + name + suffix; };
  auto link = [&](const std::string &name) { return dir + "/" + name + suffix + ".link"; };
  auto shard = [&](size_t s) {
    std::vector<NamedTensor> out;
    for (size_t i : plan[s])
      out.push_back(tensors[i]);
    return out;
  };
  std::string index = dir + "/" + kIndexName, single = dir + "/" + kSingleFileName;
  // The index naming shard s by fileName(s), through a temporary renamed
  // over the index in place: readers see the earlier index or this one.
  auto writeIndex = [&](const std::function<std::string(size_t)> &fileName) {
    json weightMap = json::object();
    for (size_t s = 0; s < n; ++s)
      for (size_t i : plan[s])
        weightMap[tensors[i].name] = fileName(s);
    json doc = {{"metadata", {{"total_size", total}}}, {"weight_map", weightMap}};
    removeTree(temp(kIndexName));
    std::string err = writeFileDurable(temp(kIndexName), doc.dump(2) + "\n");
    if (err.empty())
      err = renameDurable(temp(kIndexName), index);
    return err;
  };
  // Whether a rename that reported a failure took place all the same (the
  // failure came after it, from the folder's fsync): then what it renamed is
  // what readers see, and must stay.
  auto renamed = [](const std::string &from) {
    struct stat gone;
    return ::lstat(from.c_str(), &gone) != 0 && errno == ENOENT;
  };
  // Before the new weights are in place: what this save wrote goes, the
  // earlier save stays as it was.
  auto failed = [&](const std::string &err) {
    for (size_t s = 0; s < n; ++s)
      removeTree(temp(names[s]));
    for (const FolderFile &file : files)
      removeTree(temp(file.name));
    removeTree(temp(kIndexName));
    if (made) // the folder this save made goes too, if nothing else is in it
      ::rmdir(dir.c_str());
    return dir + ": weights not written: " + err;
  };
  // A reader of the folder (fsdp-run --weights) takes the index when there
  // is one, else model.safetensors; transformers takes model.safetensors
  // first. At every moment each of the two that exists names a complete
  // model, the earlier one or this one, so either reader finds one whole.
  //
  // 1. Every shard under a temporary name, durable: a full disk here leaves
  // the earlier save as it was.
  for (size_t s = 0; s < n; ++s) {
    removeTree(temp(names[s]));
    std::string err = writeSafetensorsFile(temp(names[s]), shard(s), dtype);
    if (!err.empty())
      return failed(err);
  }
  // ... and the model's files (config.json, generation_config.json).
  for (const FolderFile &file : files) {
    removeTree(temp(file.name));
    std::string err = writeFileDurable(temp(file.name), file.text);
    if (!err.empty())
      return failed(err);
  }
  if (n == 1) {
    // 2. model.safetensors replaced in one rename; an earlier index, while it
    // stays, still names the earlier shards, untouched.
    std::string err = renameDurable(temp(kSingleFileName), single);
    if (!err.empty() && renamed(temp(kSingleFileName)))
      return dir + ": weights written to " + single + ", but: " + err;
    if (!err.empty())
      return failed(err);
    // 3. The earlier index goes: its readers fall back to the new file.
    if (::lstat(index.c_str(), &st) == 0) {
      err = removeTree(index);
      if (err.empty())
        err = syncDirectory(dir);
      if (!err.empty())
        return dir + ": weights written to " + single + ", but the earlier index stays: " + err;
    }
  } else {
    // 2. The first switch: an index naming the temporaries. Their names
    // collide with no earlier shard's, so the earlier files stay as they
    // were until nothing names them.
    std::string err = writeIndex([&](size_t s) { return names[s] + suffix; });
    // From here the new weights are what the index names: a failure leaves
    // them whole (under temporary names, until the next save).
    auto stays = [&](const std::string &err) {
      removeTree(temp(kIndexName));
      for (const FolderFile &file : files)
        removeTree(temp(file.name));
      for (size_t s = 0; s < n; ++s)
        removeTree(link(names[s]));
      return dir + ": weights written, but under temporary names (" + index +
             " names them): " + err;
    };
    if (!err.empty())
      return renamed(temp(kIndexName)) ? stays(err) : failed(err);
    // 3. Each shard also under its own name: a hard link renamed over
    // whatever has that name (an earlier shard, which nothing names now).
    // Where the file system has no hard links, a second copy.
    for (size_t s = 0; s < n; ++s) {
      removeTree(link(names[s]));
      err = linkDurable(temp(names[s]), link(names[s]));
      if (!err.empty()) {
        removeTree(link(names[s]));
        err = writeSafetensorsFile(link(names[s]), shard(s), dtype);
      }
      if (err.empty())
        err = renameDurable(link(names[s]), dir + "/" + names[s]);
      if (!err.empty())
        return stays(err);
    }
    // 4. The second switch: the index naming the shards by their names.
    err = writeIndex([&](size_t s) { return names[s]; });
    if (!err.empty())
      return stays(err);
  }
  // The model's files take their names once the new weights are in place
  // (each in one rename: a reader sees the earlier file or this one).
  for (size_t k = 0; k < files.size(); ++k) {
    std::string to = dir + "/" + files[k].name;
    std::string err = renameDurable(temp(files[k].name), to);
    if (!err.empty()) {
      bool in = renamed(temp(files[k].name));
      for (size_t j = in ? k + 1 : k; j < files.size(); ++j)
        removeTree(temp(files[j].name));
      return dir + ": weights written, but " + to + (in ? " written with an error: " : " not: ") +
             err;
    }
  }
  // 5. Last, what nothing names any more: an earlier save's shards, index or
  // single file; this save's temporaries; and those of saves killed before
  // they finished. Other files (the tokenizer's; config.json and
  // generation_config.json when the program has none to write) stay.
  std::error_code ec;
  std::vector<std::string> stale;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (isSavedWeightsFile(name) && std::find(names.begin(), names.end(), name) == names.end() &&
        !(n > 1 && name == kIndexName))
      stale.push_back(dir + "/" + name);
  }
  std::sort(stale.begin(), stale.end());
  for (const std::string &path : staleTemporaries(dir, isSavedWeightsName, ""))
    stale.push_back(path);
  for (const std::string &path : stale) {
    std::string err = removeTree(path);
    if (!err.empty())
      return dir + ": weights written, but an earlier save's file stays: " + err;
  }
  return "";
}
