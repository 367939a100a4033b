//===- Safetensors.cpp ----------------------------------------------------===//
#include "runtime/io/Safetensors.h"
#include "runtime/io/Files.h"
#include "support/InputFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

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

std::string SafetensorsReader::open(const std::string &p) {
  file = p;
  // O_NONBLOCK: a FIFO is refused below, not waited on.
  fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return file + ": cannot open the weights: " + std::strerror(errno);
  struct stat st;
  fstat(fd, &st);
  if (!S_ISREG(st.st_mode))
    return file + ": cannot open the weights: " + support::fileKind(st.st_mode) +
           ", not a regular file";
  fileSize = st.st_size;
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
  unsigned line = 0, col = 0;
  std::string deep = support::checkJsonDepth(header, &line, &col);
  if (!deep.empty())
    return file + ": malformed safetensors header: " + deep;
  json j;
  try {
    j = json::parse(header);
  } catch (const json::exception &e) {
    return file + ": malformed safetensors header: " + e.what();
  }
  if (!j.is_object())
    return file + ": malformed safetensors header: not an object";
  for (auto &[name, v] : j.items()) {
    if (name == "__metadata__")
      continue;
    try {
      TensorInfo t;
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = v.at("shape").get<std::vector<int64_t>>();
      auto offs = v.at("data_offsets").get<std::vector<int64_t>>();
      if (offs.size() != 2)
        return file + ": tensor '" + name + "' has malformed data_offsets";
      t.begin = offs[0];
      t.end = offs[1];
      int64_t n = 1;
      for (int64_t d : t.shape)
        n *= d;
      int64_t es = elementSize(t.dtype);
      if (es == 0)
        return file + ": tensor '" + name + "' has unknown dtype " + t.dtype;
      if (t.end - t.begin != n * es || t.begin < 0 || dataStart + t.end > fileSize)
        return file + ": tensor '" + name +
               "' has a byte range that does not match its "
               "shape or lies past the end of the file";
      infos[name] = t;
    } catch (const json::exception &) {
      return file + ": tensor '" + name + "' has a malformed header entry";
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
    return file + ": no tensor '" + name + "'";
  const TensorInfo &t = it->second;
  int64_t es = elementSize(t.dtype);
  int64_t at = dataStart + t.begin + first * es;
  if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16")
    return file + ": tensor '" + name + "' is " + t.dtype + "; weights must be F32, BF16 or F16";
  // A released file is opened for this read only.
  int f = fd >= 0 ? fd : ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f < 0)
    return file + ": cannot open the weights: " + std::strerror(errno);
  struct Closer {
    int f;
    bool own;
    ~Closer() {
      if (own)
        ::close(f);
    }
  } closer{f, fd < 0};
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

std::string WeightSource::open(const std::string &p) {
  where = p;
  std::string index;
  struct stat st;
  if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::string dir = p;
    while (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    index = dir + "/" + kIndexName;
    if (::stat(index.c_str(), &st) != 0) {
      std::string single = dir + "/" + kSingleFileName;
      if (::stat(single.c_str(), &st) != 0)
        return p + ": cannot open the weights: a folder with neither " + kIndexName + " nor " +
               kSingleFileName + " in it";
      index.clear();
      where = single;
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

// Writes the safetensors file `path` (which must not exist) and makes it
// durable: the data in name order, as the safetensors library lays it out.
static std::string writeSafetensorsFile(const std::string &path,
                                        const std::vector<NamedTensor> &given) {
  std::vector<const NamedTensor *> tensors;
  for (const NamedTensor &t : given)
    tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(),
            [](const NamedTensor *a, const NamedTensor *b) { return a->name < b->name; });
  json header = json::object();
  int64_t offset = 0;
  for (const NamedTensor *t : tensors) {
    int64_t bytes = numel(t->shape) * 4;
    header[t->name] = {
        {"dtype", "F32"}, {"shape", t->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0)
    h += ' ';
  DurableFile f;
  uint64_t len = h.size();
  std::string err = f.create(path);
  if (err.empty())
    err = f.write(&len, 8);
  if (err.empty())
    err = f.write(h.data(), h.size());
  for (const NamedTensor *t : tensors)
    if (err.empty())
      err = f.write(t->data, size_t(numel(t->shape)) * 4);
  if (err.empty())
    err = f.close();
  return err;
}

std::string fsdp::io::writeSafetensors(const std::string &path,
                                       const std::vector<NamedTensor> &tensors) {
  // A temporary beside the file, made durable, then renamed over it: a
  // crash leaves the old file or the new one, never half of one.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  removeTree(tmp);
  std::string err = writeSafetensorsFile(tmp, tensors);
  if (err.empty())
    err = renameDurable(tmp, path);
  if (!err.empty()) {
    removeTree(tmp);
    return path + ": not written: " + err;
  }
  return "";
}

bool fsdp::io::isWeightsFolder(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return true;
  return !endsWith(path, ".safetensors");
}

std::vector<std::vector<size_t>> fsdp::io::planWeightShards(const std::vector<NamedTensor> &tensors,
                                                            int64_t maxShardSize) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  int64_t currentBytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t bytes = numel(tensors[i].shape) * 4;
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

std::string fsdp::io::writeSafetensorsFolder(const std::string &dirGiven,
                                             const std::vector<NamedTensor> &tensors,
                                             int64_t maxShardSize) {
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
  std::vector<std::vector<size_t>> plan = planWeightShards(tensors, maxShardSize);
  size_t n = plan.size();
  std::vector<std::string> names;
  json weightMap = json::object();
  int64_t total = 0;
  for (size_t s = 0; s < n; ++s) {
    names.push_back(n == 1 ? std::string(kSingleFileName) : shardFileName(s, n));
    for (size_t i : plan[s]) {
      weightMap[tensors[i].name] = names.back();
      total += numel(tensors[i].shape) * 4;
    }
  }
  std::string suffix = ".tmp." + std::to_string(::getpid());
  std::vector<std::string> written; // what this save has put in place
  auto failed = [&](const std::string &err, size_t temps) {
    for (size_t s = 0; s < temps; ++s)
      removeTree(dir + "/" + names[s] + suffix);
    for (const std::string &path : written)
      removeTree(path);
    removeTree(dir + "/" + kIndexName + suffix);
    if (made) // the folder this save made goes too, if nothing else is in it
      ::rmdir(dir.c_str());
    return dir + ": weights not written: " + err;
  };
  // 1. Every shard under a temporary name, durable: a full disk here leaves
  // the earlier save as it was.
  for (size_t s = 0; s < n; ++s) {
    std::vector<NamedTensor> shard;
    for (size_t i : plan[s])
      shard.push_back(tensors[i]);
    std::string tmp = dir + "/" + names[s] + suffix;
    removeTree(tmp);
    std::string err = writeSafetensorsFile(tmp, shard);
    if (!err.empty())
      return failed(err, s + 1);
  }
  // 2. No index while the shards change under it: an earlier save's goes.
  std::string index = dir + "/" + kIndexName;
  if (::lstat(index.c_str(), &st) == 0) {
    std::string err = removeTree(index);
    if (err.empty())
      err = syncDirectory(dir);
    if (!err.empty())
      return failed(err, n);
  }
  // 3. The shards under their names, then 4. the index that names them.
  for (size_t s = 0; s < n; ++s) {
    std::string err = renameDurable(dir + "/" + names[s] + suffix, dir + "/" + names[s]);
    if (!err.empty())
      return failed(err, n);
    written.push_back(dir + "/" + names[s]);
  }
  if (n > 1) {
    json doc = {{"metadata", {{"total_size", total}}}, {"weight_map", weightMap}};
    std::string err = writeFileDurable(index + suffix, doc.dump(2) + "\n");
    if (err.empty())
      err = renameDurable(index + suffix, index);
    if (!err.empty())
      return failed(err, 0);
  }
  // 5. What an earlier save left that this one did not replace.
  std::error_code ec;
  std::vector<std::string> stale;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (isSavedWeightsFile(name) && std::find(names.begin(), names.end(), name) == names.end() &&
        !(n > 1 && name == kIndexName))
      stale.push_back(dir + "/" + name);
  }
  for (const std::string &path : stale) {
    std::string err = removeTree(path);
    if (!err.empty())
      return dir + ": weights written, but an earlier save's file stays: " + err;
  }
  return "";
}
