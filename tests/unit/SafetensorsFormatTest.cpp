//===- SafetensorsFormatTest.cpp - the weights reader enforces the format -===//
//
// fsdp-run --weights reads safetensors files from anywhere: each violation of
// the format (bytes before the header's '{' or after the data, a duplicate
// key, float offsets, overlapping or gapped data, a __metadata__ that is not
// a string map) is an error naming the file and the tensor or field; a
// folder's shards must be in the folder; a FIFO or a device is refused, not
// waited on; and a file fsdp wrote is checked against the CRC-32s it
// recorded, so that any flipped byte is refused.
//
//===----------------------------------------------------------------------===//
#include "runtime/weights/Safetensors.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace fsdp;
using nlohmann::json;

namespace {

// The folders the tests made, removed when the program ends.
struct Scratch {
  std::vector<std::string> dirs;
  ~Scratch() {
    std::error_code ec;
    for (const std::string &d : dirs)
      std::filesystem::remove_all(d, ec);
  }
} made;

std::string scratch(const std::string &name) {
  std::string dir = std::filesystem::temp_directory_path().string() + "/fsdp-st-format-" +
                    std::to_string(::getpid()) + "-" + name;
  std::filesystem::remove_all(dir);
  made.dirs.push_back(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A safetensors file: the 8-byte length, `header` as given, `data` bytes.
std::string file(const std::string &header, size_t data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char *>(&n), 8);
  return out + header + std::string(data, '\0');
}

// Two F32 tensors of 4 elements, "a" then "b": the valid base that each case
// changes in one way.
const char *kValid = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                     R"("b":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]}})";

std::string openError(const std::string &bytes, std::string *path) {
  static int count = 0;
  *path = scratch("case") + "/w" + std::to_string(count++) + ".safetensors";
  spit(*path, bytes);
  weights::SafetensorsReader r;
  return r.open(*path);
}

struct Case {
  const char *what;
  std::string bytes;
  const char *names; // what the error must say, besides the file
};

} // namespace

TEST(SafetensorsFormat, EachViolationIsAnErrorNamingTheFileAndTheField) {
  std::string v = kValid;
  auto with = [&](const std::string &from, const std::string &to) {
    std::string h = v;
    size_t at = h.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return h.replace(at, from.size(), to);
  };
  std::vector<Case> cases = {
      {"a space before the '{'", file(" " + v, 32), "must begin with '{'"},
      {"a newline before the '{'", file("\n" + v, 32), "must begin with '{'"},
      {"an empty header", file("", 32), "must begin with '{'"},
      {"a newline after the '}'", file(v + "\n", 32), "only spaces (0x20)"},
      {"a tab among the padding", file(v + " \t ", 32), "only spaces (0x20)"},
      {"the same tensor twice", file(with("\"b\":", "\"a\":"), 32), "'a' appears twice"},
      {"a key twice in an entry", file(with("\"shape\":[4]", "\"shape\":[4],\"shape\":[4]"), 32),
       "key 'shape' appears twice in the entry of 'a'"},
      {"a float offset", file(with("[16,32]", "[16.0,32]"), 32), "tensor 'b' has malformed"},
      {"a float end offset", file(with("[0,16]", "[0,16.0]"), 32), "tensor 'a' has malformed"},
      {"a negative offset", file(with("[0,16]", "[-16,0]"), 32), "tensor 'a' has malformed"},
      {"one offset", file(with("[0,16]", "[16]"), 32), "tensor 'a' has malformed"},
      {"a float dimension", file(with("[4]", "[4.0]"), 32), "tensor 'a' has a \"shape\""},
      {"a negative dimension", file(with("[2,2]", "[-2,-2]"), 32), "tensor 'b' has a \"shape\""},
      {"no dtype", file(with("\"dtype\":\"F32\",\"shape\":[4]", "\"shape\":[4]"), 32),
       "tensor 'a' has no \"dtype\""},
      {"an entry that is a list",
       file(with("{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}", "[]"), 32),
       "tensor 'a' has a malformed header entry"},
      {"identical offsets", file(with("[16,32]", "[0,16]"), 32), "overlap"},
      {"overlapping offsets", file(with("[16,32]", "[8,24]"), 32), "overlap"},
      {"a gap before a tensor", file(with("[16,32]", "[20,36]"), 36), "4 bytes before it"},
      {"data not from byte 0", file(with("[0,16]", "[32,48]"), 48), "16 bytes before it"},
      {"bytes after the data", file(v, 40), "8 bytes after the last tensor's data"},
      {"data past the file", file(v, 24), "lies past the end of the file"},
      {"a range of the wrong size", file(with("[16,32]", "[16,28]"), 32),
       "does not match its shape"},
      {"a number as __metadata__ value",
       file(with("{\"a\"", "{\"__metadata__\":{\"format\":1},\"a\""), 32),
       "\"__metadata__\": 'format' is 1, not a string"},
      {"a nested __metadata__ value",
       file(with("{\"a\"", "{\"__metadata__\":{\"x\":{\"y\":\"z\"}},\"a\""), 32),
       "\"__metadata__\": 'x' is {\"y\":\"z\"}, not a string"},
      {"__metadata__ a list", file(with("{\"a\"", "{\"__metadata__\":[\"pt\"],\"a\""), 32),
       "\"__metadata__\" is [\"pt\"], not an object"},
      {"a duplicate __metadata__ key",
       file(with("{\"a\"", "{\"__metadata__\":{\"f\":\"1\",\"f\":\"2\"},\"a\""), 32),
       "key 'f' appears twice in the entry of '__metadata__'"},
      {"checksums only in part",
       file(with("{\"a\"", "{\"__metadata__\":{\"fsdp_crc32_data\":\"00000000\"},\"a\""), 32),
       "'fsdp_crc32_block_bytes' is missing"},
  };
  int handled = 0;
  for (const Case &c : cases) {
    std::string path;
    std::string err = openError(c.bytes, &path);
    EXPECT_EQ(err.rfind(path + ": ", 0), 0u) << c.what << ": " << err;
    EXPECT_NE(err.find(c.names), std::string::npos) << c.what << ": " << err;
    handled += err.rfind(path + ": ", 0) == 0 && err.find(c.names) != std::string::npos;
  }
  EXPECT_EQ(handled, (int)cases.size());
  std::printf("format violations: %zu tried, %d refused naming the file and field\n", cases.size(),
              handled);
}

TEST(SafetensorsFormat, WhatTheFormatAllowsIsRead) {
  std::string v = kValid;
  std::string path;
  // Trailing spaces pad the header; a __metadata__ of strings; empty
  // tensors share an offset; the entries in any order.
  EXPECT_EQ(openError(file(v + "       ", 32), &path), "");
  EXPECT_EQ(openError(file("{\"__metadata__\":{\"format\":\"pt\"}," + v.substr(1), 32), &path), "");
  EXPECT_EQ(openError(file(R"({"b":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]},)"
                           R"("e":{"dtype":"F32","shape":[0],"data_offsets":[16,16]},)"
                           R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                           R"("z":{"dtype":"F32","shape":[0,3],"data_offsets":[16,16]}})",
                           32),
                      &path),
            "");
  EXPECT_EQ(openError(file(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", 0), &path),
            "");
}

namespace {

// A file fsdp writes: tensors of `sizes` elements, values that differ.
std::string writeOurs(const std::string &path, const std::vector<int64_t> &sizes,
                      std::vector<std::vector<float>> *values) {
  std::vector<weights::NamedTensor> tensors;
  values->clear();
  values->reserve(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    values->emplace_back(sizes[i]);
    for (int64_t e = 0; e < sizes[i]; ++e)
      (*values)[i][e] = float(i + 1) + float(e) * 0.25f;
  }
  for (size_t i = 0; i < sizes.size(); ++i)
    tensors.push_back({"t" + std::to_string(i), {sizes[i]}, (*values)[i].data()});
  return weights::writeSafetensors(path, tensors);
}

// Opens `path` and reads every tensor whole: "" or the first error.
std::string readAll(const std::string &path) {
  weights::SafetensorsReader r;
  std::string err = r.open(path);
  if (!err.empty())
    return err;
  for (const auto &[name, t] : r.tensors()) {
    int64_t n = (t.end - t.begin) / 4;
    std::vector<float> out(n);
    err = r.readF32(name, 0, n, out.data());
    if (!err.empty())
      return err;
  }
  return "";
}

} // namespace

TEST(SafetensorsChecksums, EveryFlippedByteOfAFileFsdpWroteIsRefused) {
  std::string dir = scratch("flip");
  std::string path = dir + "/w.safetensors";
  std::vector<std::vector<float>> values;
  ASSERT_EQ(writeOurs(path, {5, 12, 3, 40}, &values), "");
  ASSERT_EQ(readAll(path), "");
  std::string good = slurp(path);
  uint64_t headerLen = 0;
  std::memcpy(&headerLen, good.data(), 8);
  json meta = json::parse(good.substr(8, headerLen))["__metadata__"];
  EXPECT_EQ(meta["format"], "pt");
  EXPECT_EQ(meta["fsdp_crc32_block_bytes"], "1048576");
  // Each byte, one bit and all bits flipped: the length, the header, the data.
  size_t tried = 0, refused = 0, namedTensor = 0, dataFlips = 0;
  for (size_t at = 0; at < good.size(); ++at)
    for (unsigned char mask : {0x01, 0xff}) {
      std::string bad = good;
      bad[at] = char(bad[at] ^ mask);
      spit(path, bad);
      std::string err = readAll(path);
      ++tried;
      bool ok = err.rfind(path + ": ", 0) == 0;
      refused += ok;
      EXPECT_TRUE(ok) << "byte " << at << " ^ " << int(mask) << ": '" << err << "'";
      if (at >= 8 + headerLen) {
        ++dataFlips;
        namedTensor += err.find("tensor 't") != std::string::npos &&
                       err.find("does not match its checksum") != std::string::npos;
      }
    }
  EXPECT_EQ(refused, tried);
  EXPECT_EQ(namedTensor, dataFlips);
  std::printf("flipped bytes of a weights file fsdp wrote: %zu tried, %zu refused naming the "
              "file (%zu of %zu in the data naming the tensor)\n",
              tried, refused, namedTensor, dataFlips);
}

TEST(SafetensorsChecksums, ABlockIsCheckedWhenItsBytesAreRead) {
  std::string dir = scratch("blocks");
  std::string path = dir + "/w.safetensors";
  std::vector<std::vector<float>> values;
  // 2.5 MiB of data: three blocks of the checksums, "t0" in the first two.
  ASSERT_EQ(writeOurs(path, {400000, 255360}, &values), "");
  std::string bytes = slurp(path);
  uint64_t headerLen = 0;
  std::memcpy(&headerLen, bytes.data(), 8);
  // A byte of the third block (t1's last elements) changed.
  size_t at = 8 + headerLen + (size_t(4) << 19) + 100;
  ASSERT_LT(at, bytes.size());
  bytes[at] = char(bytes[at] ^ 0x10);
  spit(path, bytes);
  weights::SafetensorsReader r;
  ASSERT_EQ(r.open(path), "");
  std::vector<float> out(1000);
  // What lies in the blocks that are intact reads; what lies in the changed
  // one does not, naming the tensor and the block.
  EXPECT_EQ(r.readF32("t0", 0, 1000, out.data()), "");
  EXPECT_EQ(out[999], values[0][999]);
  EXPECT_EQ(r.readF32("t1", 0, 1000, out.data()), "");
  std::string err = r.readF32("t1", 255360 - 1000, 1000, out.data());
  EXPECT_EQ(err, path + ": tensor 't1': data block 2 (bytes 2097152 to 2621440 of the data) does "
                        "not match its checksum in \"__metadata__\": the file changed after fsdp "
                        "wrote it");
}

TEST(SafetensorsFolder, ShardsThatLeadOutOfTheFolderAreRefusedNamingThem) {
  std::string out = scratch("outside");
  std::vector<std::vector<float>> values;
  ASSERT_EQ(writeOurs(out + "/elsewhere.safetensors", {4}, &values), "");
  std::vector<weights::NamedTensor> tensors = {{"t0", {4}, values[0].data()}};
  size_t tried = 0, refused = 0;
  auto expectRefused = [&](const std::string &dir, const std::string &link,
                           const std::string &target) {
    weights::WeightSource w;
    std::string err = w.open(dir);
    ++tried;
    std::string want = dir + "/" + link + ": a symbolic link to " + target + ", outside " + dir;
    EXPECT_EQ(err.rfind(want, 0), 0u) << err;
    refused += err.rfind(want, 0) == 0;
  };
  // A shard of the index, to /etc/passwd and to a valid file elsewhere.
  for (std::string target : {std::string("/etc/passwd"), out + "/elsewhere.safetensors"}) {
    std::string dir = scratch("links");
    ASSERT_EQ(weights::writeSafetensorsFolder(dir, tensors, 1), "");
    std::filesystem::remove(dir + "/model.safetensors");
    spit(dir + "/model.safetensors.index.json",
         R"({"weight_map": {"t0": "model-00001-of-00001.safetensors"}})");
    std::filesystem::create_symlink(target, dir + "/model-00001-of-00001.safetensors");
    expectRefused(dir, "model-00001-of-00001.safetensors", target);
  }
  // model.safetensors, and the index itself.
  std::string single = scratch("single-link");
  std::filesystem::create_symlink(out + "/elsewhere.safetensors", single + "/model.safetensors");
  expectRefused(single, "model.safetensors", out + "/elsewhere.safetensors");
  std::string index = scratch("index-link");
  spit(out + "/index.json", R"({"weight_map": {}})");
  std::filesystem::create_symlink(out + "/index.json", index + "/model.safetensors.index.json");
  expectRefused(index, "model.safetensors.index.json", out + "/index.json");
  EXPECT_EQ(refused, tried);
  std::printf("symbolic links out of a weights folder: %zu tried, %zu refused naming them\n", tried,
              refused);
  // A link inside the folder is the folder's own file.
  std::string inside = scratch("inside");
  ASSERT_EQ(writeOurs(inside + "/real.safetensors", {4}, &values), "");
  std::filesystem::create_symlink("real.safetensors", inside + "/model.safetensors");
  weights::WeightSource w;
  EXPECT_EQ(w.open(inside), "");
  // The Hugging Face hub's cache: REPO/snapshots/REV/NAME -> ../../blobs/HASH
  // reads; a link from it to a blob of another repository does not.
  std::string repo = scratch("hub") + "/models--org--tiny";
  std::filesystem::create_directories(repo + "/blobs");
  std::filesystem::create_directories(repo + "/snapshots/0123abcd");
  ASSERT_EQ(writeOurs(repo + "/blobs/9f86d081", {4}, &values), "");
  std::filesystem::create_symlink("../../blobs/9f86d081",
                                  repo + "/snapshots/0123abcd/model.safetensors");
  weights::WeightSource hub;
  EXPECT_EQ(hub.open(repo + "/snapshots/0123abcd"), "");
  std::string other = scratch("hub-other") + "/models--org--other";
  std::filesystem::create_directories(other + "/snapshots/0123abcd");
  std::filesystem::create_symlink(repo + "/blobs/9f86d081",
                                  other + "/snapshots/0123abcd/model.safetensors");
  weights::WeightSource foreign;
  std::string err = foreign.open(other + "/snapshots/0123abcd");
  EXPECT_NE(err.find("a symbolic link to " + repo + "/blobs/9f86d081, outside"), std::string::npos)
      << err;
}

TEST(SafetensorsFolder, SpecialFilesAreRefusedNotWaitedOn) {
  size_t tried = 0, refused = 0;
  auto expect = [&](const std::string &what, const std::string &err, const std::string &want) {
    ++tried;
    EXPECT_NE(err.find(want), std::string::npos) << what << ": " << err;
    refused += err.find(want) != std::string::npos;
  };
  // A FIFO as the single file, as a shard, as the index.
  std::string dir = scratch("fifo");
  ASSERT_EQ(::mkfifo((dir + "/model.safetensors").c_str(), 0644), 0);
  weights::WeightSource a;
  expect("model.safetensors a FIFO", a.open(dir),
         dir + "/model.safetensors: cannot read the weights: a FIFO, not a regular file");
  std::string sharded = scratch("fifo-shard");
  spit(sharded + "/model.safetensors.index.json",
       R"({"weight_map": {"t0": "model-00001-of-00001.safetensors"}})");
  ASSERT_EQ(::mkfifo((sharded + "/model-00001-of-00001.safetensors").c_str(), 0644), 0);
  weights::WeightSource b;
  expect("a shard a FIFO", b.open(sharded),
         sharded + "/model-00001-of-00001.safetensors: cannot read the weights: a FIFO");
  std::string fifoIndex = scratch("fifo-index");
  ASSERT_EQ(::mkfifo((fifoIndex + "/model.safetensors.index.json").c_str(), 0644), 0);
  weights::WeightSource c;
  expect("the index a FIFO", c.open(fifoIndex),
         fifoIndex + "/model.safetensors.index.json: cannot read the weights index: a FIFO");
  // A device named as the weights.
  weights::WeightSource d;
  expect("/dev/zero", d.open("/dev/zero"), "/dev/zero: cannot read the weights: a device");
  weights::SafetensorsReader e;
  expect("/dev/null", e.open("/dev/null"), "/dev/null: cannot read the weights: a device");
  EXPECT_EQ(refused, tried);
  std::printf("special files as weights: %zu tried, %zu refused naming them\n", tried, refused);
}
