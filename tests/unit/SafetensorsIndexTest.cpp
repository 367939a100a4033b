//===- SafetensorsIndexTest.cpp - HF checkpoint folders in and out --------===//
//
// fsdp-run --weights DIR and --save-weights DIR: a folder written with a
// small shard size reads back bit for bit, a rank reads its shard's elements
// from whichever files hold them, and each malformed index is an error that
// names the file (and the tensor).
//
//===----------------------------------------------------------------------===//
#include "runtime/Executor.h"
#include "runtime/io/Files.h"
#include "runtime/weights/Safetensors.h"
#include "runtime/weights/Weights.h"
#include "support/InputFile.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
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

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
};

// 4-byte elements: 28, 48, 20, 400 and 12 bytes, in state-dict order.
const std::vector<Spec> kTensors = {{"embed.weight", {7}},
                                    {"block.w", {3, 4}},
                                    {"block.b", {5}},
                                    {"big.w", {10, 10}},
                                    {"head.bias", {3}}};

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// Element e of tensor i: distinct bit patterns, a NaN payload and a negative
// zero among them, so that "bit for bit" means it.
float valueOf(size_t i, int64_t e) {
  if (i == 1 && e == 0)
    return -0.0f;
  if (i == 2 && e == 1) {
    uint32_t bits = 0x7fc01234u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return float(i + 1) * 1000.0f + float(e) * 0.1f;
}

struct Data {
  std::vector<std::vector<float>> values;
  std::vector<weights::NamedTensor> tensors;
  Data() {
    for (size_t i = 0; i < kTensors.size(); ++i) {
      values.emplace_back(numel(kTensors[i].shape));
      for (int64_t e = 0; e < (int64_t)values[i].size(); ++e)
        values[i][e] = valueOf(i, e);
    }
    for (size_t i = 0; i < kTensors.size(); ++i)
      tensors.push_back({kTensors[i].name, kTensors[i].shape, values[i].data()});
  }
};

std::string scratch(const std::string &name) {
  std::string dir = std::filesystem::temp_directory_path().string() + "/fsdp-hf-test-" +
                    std::to_string(::getpid()) + "-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The header of a safetensors file, parsed.
json headerOf(const std::string &path) {
  std::string bytes = slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return json::parse(bytes.substr(8, n));
}

std::vector<std::string> listing(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

void expectReadsBack(const weights::WeightSource &w) {
  for (size_t i = 0; i < kTensors.size(); ++i) {
    int64_t n = numel(kTensors[i].shape);
    std::vector<float> got(n);
    ASSERT_EQ(w.readF32(kTensors[i].name, 0, n, got.data()), "");
    for (int64_t e = 0; e < n; ++e)
      EXPECT_TRUE(sameBits(got[e], valueOf(i, e))) << kTensors[i].name << "[" << e << "]";
  }
}

} // namespace

TEST(SafetensorsIndex, ShardsAsHuggingfaceHubSplitsThem) {
  Data d;
  // At most 100 bytes: embed.weight, block.w and block.b fill 96; big.w (400)
  // gets a shard of its own, placed when met, before the one being filled;
  // head.bias (12) does not fit beside the 96 and starts the last.
  std::vector<std::vector<size_t>> want = {{3}, {0, 1, 2}, {4}};
  EXPECT_EQ(weights::planWeightShards(d.tensors, 100), want);
  EXPECT_EQ(weights::planWeightShards(d.tensors, 1 << 20).size(), 1u);
  EXPECT_EQ(weights::planWeightShards(d.tensors, 1).size(), kTensors.size());
}

TEST(SafetensorsIndex, WritesShardsAndTheIndexThenReadsBackBitForBit) {
  Data d;
  std::string dir = scratch("write") + "/out"; // created by the writer
  ASSERT_EQ(weights::writeSafetensorsFolder(dir, d.tensors, 100), "");
  EXPECT_EQ(listing(dir),
            (std::vector<std::string>{"model-00001-of-00003.safetensors",
                                      "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors", weights::kIndexName}));
  json index = json::parse(slurp(dir + "/" + weights::kIndexName));
  EXPECT_EQ(index["metadata"]["total_size"], 28 + 48 + 20 + 400 + 12);
  EXPECT_EQ(index["weight_map"]["big.w"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["embed.weight"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["block.w"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["block.b"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["head.bias"], "model-00003-of-00003.safetensors");
  for (int s = 1; s <= 3; ++s) {
    json h = headerOf(dir + "/model-0000" + std::to_string(s) + "-of-00003.safetensors");
    // "pt", as transformers reads it, and the checksums fsdp's reader checks.
    EXPECT_EQ(h["__metadata__"]["format"], "pt");
    EXPECT_EQ(h["__metadata__"]["fsdp_crc32_block_bytes"], "1048576");
  }
  // Within a shard the data lies in name order, as safetensors writes it.
  json h2 = headerOf(dir + "/model-00002-of-00003.safetensors");
  EXPECT_EQ(h2["block.b"]["data_offsets"], (json{0, 20}));
  EXPECT_EQ(h2["block.w"]["data_offsets"], (json{20, 68}));
  EXPECT_EQ(h2["embed.weight"]["data_offsets"], (json{68, 96}));

  auto openFiles = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator());
  };
  for (std::string path : {dir, dir + "/", dir + "/" + weights::kIndexName}) {
    weights::WeightSource w;
    auto before = openFiles();
    ASSERT_EQ(w.open(path), "") << path;
    // The shards' headers are kept, their files not held open (ranks x
    // shards of them would be): each read opens its file.
    EXPECT_EQ(openFiles(), before);
    EXPECT_EQ(w.path(), dir + "/" + weights::kIndexName);
    EXPECT_TRUE(w.warnings().empty());
    EXPECT_EQ(w.fileOf("big.w"), dir + "/model-00001-of-00003.safetensors");
    expectReadsBack(w);
  }
  std::filesystem::remove_all(io::parentOf(dir));
}

TEST(SafetensorsIndex, OneShardIsModelSafetensorsAndAnEarlierSaveIsReplaced) {
  Data d;
  std::string dir = scratch("one");
  spit(dir + "/config.json", "{}"); // not the writer's: stays
  ASSERT_EQ(weights::writeSafetensorsFolder(dir, d.tensors, 100), "");
  ASSERT_EQ(weights::writeSafetensorsFolder(dir, d.tensors, weights::kDefaultMaxShardSize), "");
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"config.json", weights::kSingleFileName}));
  weights::WeightSource w;
  ASSERT_EQ(w.open(dir), "");
  EXPECT_EQ(w.path(), dir + "/" + weights::kSingleFileName);
  expectReadsBack(w);
  // And back to shards: the single file goes once the index is in place.
  ASSERT_EQ(weights::writeSafetensorsFolder(dir, d.tensors, 30), "");
  std::vector<std::string> names = listing(dir);
  EXPECT_EQ(std::count(names.begin(), names.end(), weights::kSingleFileName), 0);
  EXPECT_EQ(names.size(), 2u + weights::planWeightShards(d.tensors, 30).size());
  weights::WeightSource again;
  ASSERT_EQ(again.open(dir), "");
  expectReadsBack(again);
  std::filesystem::remove_all(dir);
}

namespace {

// A program of one unit holding every tensor, sharded over `members`.
program::Program oneUnit(int64_t members) {
  program::Program p;
  p.worldSize = members;
  p.shardSize = members;
  program::Unit u;
  for (const Spec &s : kTensors) {
    program::Param prm;
    prm.name = s.name;
    prm.shape = s.shape;
    prm.offset = u.numel;
    prm.numel = numel(s.shape);
    u.numel += prm.numel;
    u.params.push_back(prm);
  }
  u.shardSize = members;
  u.shardNumel = (u.numel + members - 1) / members;
  u.paddedNumel = u.shardNumel * members;
  u.shardOffset = 0;
  u.gradShardOffset = 4 * u.shardNumel;
  u.expAvgOffset = 8 * u.shardNumel;
  u.expAvgSqOffset = 12 * u.shardNumel;
  p.arenaBytes = 16 * u.shardNumel;
  p.units.push_back(u);
  return p;
}

} // namespace

TEST(SafetensorsIndex, EachRankReadsItsShardAcrossShardFiles) {
  Data d;
  std::string dir = scratch("ranks");
  ASSERT_EQ(weights::writeSafetensorsFolder(dir, d.tensors, 60), "");
  // 7 members: shard boundaries fall inside tensors and across files.
  program::Program p = oneUnit(7);
  const program::Unit &u = p.units[0];
  runtime::RunOptions o;
  o.weights = dir;
  for (int m = 0; m < 7; ++m) {
    std::vector<char> arena(p.arenaBytes, 1);
    ASSERT_EQ(weights::initShards(p, o, m, arena.data()), "") << "member " << m;
    const float *shard = reinterpret_cast<const float *>(arena.data());
    for (int64_t j = 0; j < u.shardNumel; ++j) {
      int64_t flat = m * u.shardNumel + j;
      float want = 0.0f; // the padding
      for (size_t i = 0; i < u.params.size(); ++i)
        if (flat >= u.params[i].offset && flat < u.params[i].offset + u.params[i].numel)
          want = valueOf(i, flat - u.params[i].offset);
      EXPECT_TRUE(sameBits(shard[j], want)) << "member " << m << " element " << j;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsIndex, TheModelIsCheckedAgainstTheIndex) {
  Data d;
  std::string dir = scratch("model");
  ASSERT_EQ(weights::writeSafetensorsFolder(dir, d.tensors, 100), "");
  weights::WeightSource w;
  ASSERT_EQ(w.open(dir), "");
  program::Program p = oneUnit(2);
  EXPECT_EQ(weights::checkWeights(p, w), "");
  program::Program other = p;
  other.units[0].params[3].shape = {20, 5};
  EXPECT_EQ(weights::checkWeights(other, w),
            dir + "/model-00001-of-00003.safetensors: tensor 'big.w' has shape [10, 10], the "
                  "model needs [20, 5]");
  other = p;
  other.units[0].params[4].name = "lm_head.weight";
  EXPECT_EQ(weights::checkWeights(other, w),
            dir + "/" + weights::kIndexName + ": missing tensor 'lm_head.weight'");
  std::filesystem::remove_all(dir);
}

// A tensor the model does not have is an error naming it, but for a tied
// copy (ignored) and BERT pretraining's heads (ignored, each named).
TEST(SafetensorsIndex, ExtraTensorsAreRefusedButTiedCopiesAndPretrainingHeads) {
  Data d;
  program::Program p = oneUnit(2);
  p.modelName = "tiny";
  // What the planner writes for a BERT whose head is the tied kind.
  p.tiedCopies = {"lm_head.weight", "cls.predictions.decoder.bias"};
  p.unusedWeightPrefixes = {"bert.pooler.", "cls.seq_relationship."};
  static const float two[2] = {1, 2};
  auto withExtra = [&](const std::string &name) {
    auto tensors = d.tensors;
    tensors.push_back({name, {2}, two});
    return tensors;
  };
  for (const char *name :
       {"lm_head.weight", "cls.predictions.decoder.bias", "bert.pooler.dense.bias",
        "cls.seq_relationship.bias", "model.layers.9.mlp.up_proj.weight"}) {
    std::string dir = scratch("extra");
    ASSERT_EQ(weights::writeSafetensorsFolder(dir, withExtra(name), 100), "");
    weights::WeightSource w;
    ASSERT_EQ(w.open(dir), "");
    std::vector<std::string> ignored;
    std::string err = weights::checkWeights(p, w, &ignored);
    std::string n = name;
    if (n.rfind("model.", 0) == 0) {
      EXPECT_NE(err.find(": tensor '" + n + "' is not a parameter of tiny"), std::string::npos)
          << err;
    } else {
      EXPECT_EQ(err, "") << name;
      bool pretraining = n.rfind("bert.", 0) == 0 || n.rfind("cls.seq", 0) == 0;
      ASSERT_EQ(ignored.size(), pretraining ? 1u : 0u) << name;
      if (pretraining)
        EXPECT_NE(ignored[0].find("'" + n + "' is not part of tiny"), std::string::npos);
    }
    std::filesystem::remove_all(dir);
  }
}

namespace {

// The error of opening the weights folder `dir`.
std::string openError(const std::string &dir) {
  weights::WeightSource w;
  return w.open(dir);
}

} // namespace

TEST(SafetensorsIndex, EachBadIndexIsAnErrorNamingTheFile) {
  Data d;
  std::string dir = scratch("bad");
  ASSERT_EQ(weights::writeSafetensorsFolder(dir, d.tensors, 100), "");
  std::string index = dir + "/" + weights::kIndexName;
  std::string good = slurp(index);
  auto withIndex = [&](const std::string &text) {
    spit(index, text);
    return openError(dir);
  };
  auto has = [](const std::string &err, const std::string &part) {
    return err.find(part) != std::string::npos;
  };
  std::string e = withIndex("{\"weight_map\": ");
  EXPECT_TRUE(has(e, index + ": not a weights index: not JSON")) << e;
  e = withIndex("[1, 2]");
  EXPECT_TRUE(has(e, index + ": not a weights index: no \"weight_map\" object")) << e;
  e = withIndex("{\"metadata\": {}, \"weight_map\": []}");
  EXPECT_TRUE(has(e, index + ": not a weights index: no \"weight_map\" object")) << e;
  e = withIndex("{\"metadata\": 3, \"weight_map\": {}}");
  EXPECT_TRUE(has(e, index + ": not a weights index: \"metadata\" is not an object")) << e;
  e = withIndex("{\"metadata\": {\"total_size\": \"big\"}, \"weight_map\": {}}");
  EXPECT_TRUE(has(e, index + ": \"metadata\": \"total_size\" is not a byte count: \"big\"")) << e;
  e = withIndex("{\"weight_map\": {\"big.w\": 7}}");
  EXPECT_EQ(e, index + ": tensor 'big.w' maps to 7, not a shard file name");
  for (std::string bad : {"../model-00001-of-00003.safetensors", "sub/x.safetensors", "/etc/passwd",
                          "..", "", "a\\b.safetensors"}) {
    e = withIndex(json{{"weight_map", {{"big.w", bad}}}}.dump());
    EXPECT_EQ(e, index + ": tensor 'big.w' maps to '" + bad + "': a shard must be a file name in " +
                     dir + " (no path separator, not '..')");
  }
  e = withIndex(json{{"weight_map", {{"big.w", "model-00009-of-00009.safetensors"}}}}.dump());
  EXPECT_EQ(e, dir +
                   "/model-00009-of-00009.safetensors: cannot read the weights: No such file "
                   "or directory (a shard " +
                   index + " names, for tensor 'big.w')");
  std::filesystem::create_directory(dir + "/adir.safetensors");
  e = withIndex(json{{"weight_map", {{"big.w", "adir.safetensors"}}}}.dump());
  EXPECT_EQ(e, dir +
                   "/adir.safetensors: cannot read the weights: a directory, not a regular "
                   "file (a shard " +
                   index + " names, for tensor 'big.w')");
  e = withIndex(json{{"weight_map", {{"big.w", "model-00002-of-00003.safetensors"}}}}.dump());
  EXPECT_EQ(e, dir + "/model-00002-of-00003.safetensors: no tensor 'big.w', which " + index +
                   " places there");
  e = withIndex(std::string(600, '[') + std::string(600, ']'));
  EXPECT_TRUE(has(e, index + ":1:513: ")) << e;
  // The index itself a folder, a FIFO: refused without blocking.
  std::filesystem::remove(index);
  std::filesystem::create_directory(index);
  e = openError(dir);
  EXPECT_EQ(e, index + ": cannot read the weights index: a directory, not a regular file");
  std::filesystem::remove(index);
  ASSERT_EQ(::mkfifo(index.c_str(), 0644), 0);
  e = openError(dir);
  EXPECT_EQ(e, index + ": cannot read the weights index: a FIFO, not a regular file");
  std::filesystem::remove(index);
  // A folder with neither the index nor model.safetensors.
  e = openError(dir);
  EXPECT_EQ(e, dir + ": cannot open the weights: a folder with neither " +
                   std::string(weights::kIndexName) + " nor " + weights::kSingleFileName +
                   " in it");
  // A total_size that disagrees: noted, not refused (transformers ignores it).
  json j = json::parse(good);
  j["metadata"]["total_size"] = 12345;
  spit(index, j.dump());
  weights::WeightSource w;
  ASSERT_EQ(w.open(dir), "");
  ASSERT_EQ(w.warnings().size(), 1u);
  EXPECT_EQ(w.warnings()[0], index + ": \"total_size\" says 12345 bytes, but the tensors it maps "
                                     "hold 508 (ignored: each tensor's own entry is checked)");
  expectReadsBack(w);
  std::filesystem::remove_all(dir);
}

TEST(SafetensorsIndex, SaveWeightsPathsAndSizes) {
  std::string dir = scratch("paths");
  EXPECT_TRUE(weights::isWeightsFolder(dir));
  EXPECT_TRUE(weights::isWeightsFolder(dir + "/new-folder"));
  EXPECT_FALSE(weights::isWeightsFolder(dir + "/w.safetensors"));
  std::filesystem::create_directory(dir + "/odd.safetensors");
  EXPECT_TRUE(weights::isWeightsFolder(dir + "/odd.safetensors"));
  std::filesystem::remove_all(dir);

  EXPECT_EQ(support::parseByteSize("5GB"), 5000000000);
  EXPECT_EQ(support::parseByteSize("500MB"), 500000000);
  EXPECT_EQ(support::parseByteSize("2GiB"), int64_t(2) << 30);
  EXPECT_EQ(support::parseByteSize("1.5 mib"), 1572864);
  EXPECT_EQ(support::parseByteSize("4096"), 4096);
  EXPECT_EQ(support::parseByteSize(" 10 kb "), 10000);
  EXPECT_EQ(support::parseByteSize("4096B"), 4096);
  EXPECT_EQ(support::parseByteSize("lots"), -1);
  EXPECT_EQ(support::parseByteSize("5 parsecs"), -1);
  EXPECT_EQ(support::parseByteSize("1.2.3"), -1);
  EXPECT_EQ(support::parseByteSize("-5"), -1);
  EXPECT_EQ(support::parseByteSize(""), -1);
  EXPECT_EQ(support::parseByteSize("99999999TB"), -1); // past 2^62
}
