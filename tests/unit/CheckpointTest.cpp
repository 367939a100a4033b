//===- CheckpointTest.cpp - resharding checkpoints between layouts --------===//
//
// A checkpoint saved under one layout (units, shard size, world size) loads
// into another: every element of every shard, parameter and both Adam
// moments, lands where the new layout puts it, and the padding is zero. The
// values are a function of (parameter, element, kind), so a misplaced or
// missing element shows which.
//
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/Communicator.h"
#include "runtime/io/Crc32.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <sys/file.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace fsdp;

namespace {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Four small parameters and one of 420,000 elements (1.6 MiB: its shards
// span several of the checkpoint's 1 MiB blocks, each read and checked).
const std::vector<ParamSpec> kModel = {{"embed.weight", {7}},
                                       {"block.w", {3, 4}},
                                       {"block.b", {5}},
                                       {"big.w", {600, 700}},
                                       {"head.bias", {3}}};

int64_t numel(const ParamSpec &p) {
  int64_t n = 1;
  for (int64_t d : p.shape)
    n *= d;
  return n;
}

// The value of element e of parameter i in buffer kind k (0 the weights,
// 1 exp_avg, 2 exp_avg_sq): distinct for every triple, and exact in f32.
float valueOf(size_t i, int64_t e, int kind) { return float(kind * 4194304 + e * 8 + i + 1); }

// A program whose units hold the model's parameters grouped as `groups` (the
// number of parameters in each unit, in order), sharded over `shardSize`
// ranks of a world of `worldSize`. Only what checkpoints use is filled; the
// arena holds every unit's four shards one after the other.
program::Program layout(const std::vector<int> &groups, int64_t shardSize, int64_t worldSize) {
  program::Program p;
  p.modelName = "test";
  p.worldSize = worldSize;
  p.shardSize = shardSize;
  p.microBatch = 12 / worldSize;
  size_t next = 0;
  int64_t arena = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    program::Unit u;
    u.name = "unit" + std::to_string(g);
    for (int k = 0; k < groups[g]; ++k, ++next) {
      program::Param prm;
      prm.name = kModel[next].name;
      prm.shape = kModel[next].shape;
      prm.offset = u.numel;
      prm.numel = numel(kModel[next]);
      u.numel += prm.numel;
      u.params.push_back(prm);
    }
    u.shardSize = shardSize;
    u.shardNumel = (u.numel + shardSize - 1) / shardSize;
    u.paddedNumel = u.shardNumel * shardSize;
    u.shardOffset = arena;
    u.gradShardOffset = arena + 4 * u.shardNumel;
    u.expAvgOffset = arena + 8 * u.shardNumel;
    u.expAvgSqOffset = arena + 12 * u.shardNumel;
    arena += 16 * u.shardNumel;
    p.units.push_back(u);
  }
  p.arenaBytes = arena;
  return p;
}

size_t modelIndex(const std::string &name) {
  for (size_t i = 0; i < kModel.size(); ++i)
    if (kModel[i].name == name)
      return i;
  return SIZE_MAX;
}

// Shard member m's buffers of `p`, as training would hold them.
std::vector<char> filledArena(const program::Program &p, int64_t member) {
  std::vector<char> arena(p.arenaBytes, 0);
  for (const auto &u : p.units)
    for (int kind = 0; kind < 3; ++kind) {
      int64_t off = kind == 0 ? u.shardOffset : kind == 1 ? u.expAvgOffset : u.expAvgSqOffset;
      float *dst = reinterpret_cast<float *>(arena.data() + off);
      for (int64_t j = 0; j < u.shardNumel; ++j) {
        int64_t flat = member * u.shardNumel + j;
        for (const auto &prm : u.params)
          if (flat >= prm.offset && flat < prm.offset + prm.numel)
            dst[j] = valueOf(modelIndex(prm.name), flat - prm.offset, kind);
      }
    }
  return arena;
}

std::string scratch(const std::string &name) {
  std::string dir = std::filesystem::temp_directory_path().string() + "/fsdp-ckpt-test-" +
                    std::to_string(::getpid()) + "-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Saves `p` (every rank a thread) into dir as the checkpoint of step 5.
void save(const program::Program &p, const std::string &dir, int64_t keep = 2, int64_t step = 5) {
  auto world = runtime::createThreadsWorld((int)p.worldSize, (int)p.shardSize);
  std::vector<std::string> errors(p.worldSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < p.worldSize; ++r)
    threads.emplace_back([&, r] {
      auto comm = runtime::threadsCommunicator(world, r);
      std::vector<char> arena = filledArena(p, r % p.shardSize);
      errors[r] = checkpoint::saveCheckpoint(dir, keep, p, *comm, arena.data(), step, 12);
    });
  for (auto &t : threads)
    t.join();
  for (int r = 0; r < p.worldSize; ++r)
    ASSERT_EQ(errors[r], "") << "rank " << r;
}

struct Case {
  const char *name;
  std::vector<int> savedGroups;
  int64_t savedShard, savedWorld;
  std::vector<int> loadedGroups;
  int64_t loadedShard, loadedWorld;
};

class Reshard : public ::testing::TestWithParam<Case> {};

TEST_P(Reshard, EveryElementLandsWhereTheNewLayoutPutsIt) {
  const Case &c = GetParam();
  program::Program saved = layout(c.savedGroups, c.savedShard, c.savedWorld);
  program::Program loaded = layout(c.loadedGroups, c.loadedShard, c.loadedWorld);
  std::string dir = scratch(c.name);
  save(saved, dir);
  checkpoint::CheckpointRef ref;
  ASSERT_EQ(checkpoint::resolveCheckpoint(dir, &ref), "");
  EXPECT_EQ(ref.step, 5);
  for (int64_t member = 0; member < loaded.shardSize; ++member) {
    std::vector<char> arena(loaded.arenaBytes, 0x7f); // not zero: the loader writes all
    int64_t step = -1;
    ASSERT_EQ(checkpoint::loadCheckpoint(ref.path, loaded, (int)member, 0, 12, arena.data(), &step),
              "");
    EXPECT_EQ(step, 5);
    std::vector<char> want = filledArena(loaded, member);
    for (const auto &u : loaded.units)
      for (int64_t off : {u.shardOffset, u.expAvgOffset, u.expAvgSqOffset})
        for (int64_t j = 0; j < u.shardNumel; ++j) {
          float got = reinterpret_cast<float *>(arena.data() + off)[j];
          float exp = reinterpret_cast<float *>(want.data() + off)[j];
          ASSERT_EQ(got, exp) << u.name << " member " << member << " element " << j
                              << " of the buffer at " << off;
        }
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Reshard,
    ::testing::Values(Case{"same", {1, 2, 1, 1}, 2, 2, {1, 2, 1, 1}, 2, 2},
                      Case{"fewer_ranks", {1, 2, 1, 1}, 4, 4, {1, 2, 1, 1}, 2, 2},
                      Case{"more_ranks", {1, 2, 1, 1}, 1, 1, {1, 2, 1, 1}, 3, 3},
                      Case{"three_to_four", {1, 2, 2}, 3, 3, {1, 2, 2}, 4, 4},
                      Case{"one_unit_to_units", {5}, 4, 4, {1, 1, 1, 1, 1}, 3, 3},
                      Case{"units_to_one_unit", {1, 1, 1, 1, 1}, 2, 4, {5}, 4, 4},
                      Case{"hybrid_to_full", {2, 3}, 2, 4, {1, 4}, 4, 4},
                      Case{"no_shard_to_hybrid", {1, 2, 2}, 1, 4, {4, 1}, 2, 4}),
    [](const ::testing::TestParamInfo<Case> &i) { return std::string(i.param.name); });

TEST(Checkpoint, RefusesAnotherModelOrGlobalBatch) {
  program::Program p = layout({1, 2, 2}, 2, 2);
  std::string dir = scratch("refuse");
  save(p, dir);
  std::string path = checkpoint::checkpointPath(dir, 5);
  std::vector<char> arena(p.arenaBytes);
  int64_t step = 0;
  std::string err = checkpoint::loadCheckpoint(path, p, 0, 0, 6, arena.data(), &step);
  EXPECT_NE(err.find("meta.json: 'global_batch' is 12 sequences, but this run's is 6"),
            std::string::npos)
      << err;
  program::Program other = p;
  other.units[1].params[0].shape = {4, 3};
  err = checkpoint::loadCheckpoint(path, other, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find("parameter 'block.w' was saved with shape [3, 4], but this plan's model "
                     "has [4, 3]"),
            std::string::npos)
      << err;
  other = p;
  other.units[2].params[1].name = "lm_head.bias";
  err = checkpoint::loadCheckpoint(path, other, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find("holds no parameter 'lm_head.bias'"), std::string::npos) << err;
  other = p;
  other.units[0].params.clear();
  other.units[0].numel = 0;
  err = checkpoint::loadCheckpoint(path, other, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find("holds parameter 'embed.weight', which this plan's model does not have"),
            std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, KeepsTheNewestAndListsThemInOrder) {
  program::Program p = layout({1, 2, 2}, 2, 2);
  std::string dir = scratch("keep");
  for (int64_t step : {3, 100000000, 7, 12})
    save(p, dir, /*keep=*/3, step);
  std::vector<checkpoint::CheckpointRef> all;
  ASSERT_EQ(checkpoint::listCheckpoints(dir, &all), "");
  // Oldest first; 3 was removed when the fourth completed.
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].step, 7);
  EXPECT_EQ(all[1].step, 12);
  EXPECT_EQ(all[2].step, 100000000);
  EXPECT_EQ(all[2].path, dir + "/step-100000000");
  checkpoint::CheckpointRef newest;
  ASSERT_EQ(checkpoint::resolveCheckpoint(dir, &newest), "");
  EXPECT_EQ(newest.step, 100000000);
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, TheLockRefusesASecondWriter) {
  std::string dir = scratch("lock");
  std::unique_ptr<checkpoint::CheckpointDir> first, second;
  ASSERT_EQ(checkpoint::CheckpointDir::open(dir + "/ck", "", &first), "");
  // flock(2) locks belong to the open file: a second open in this process
  // conflicts as another process's would.
  std::string err = checkpoint::CheckpointDir::open(dir + "/ck", "", &second);
  EXPECT_NE(err.find("in use by another run"), std::string::npos) << err;
  EXPECT_NE(err.find("process " + std::to_string(::getpid())), std::string::npos) << err;
  first.reset();
  EXPECT_EQ(checkpoint::CheckpointDir::open(dir + "/ck", "", &second), "");
  std::filesystem::remove_all(dir);
}

// Every rank of `p` a thread running `body(comm, rank)`; each rank's result.
std::vector<std::string>
onEveryRank(const program::Program &p,
            const std::function<std::string(runtime::Communicator &, int)> &body) {
  auto world = runtime::createThreadsWorld((int)p.worldSize, (int)p.shardSize);
  std::vector<std::string> results(p.worldSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < p.worldSize; ++r)
    threads.emplace_back([&, r] {
      auto comm = runtime::threadsCommunicator(world, r);
      results[r] = body(*comm, r);
    });
  for (auto &t : threads)
    t.join();
  return results;
}

std::string readText(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A value that is not finite in any rank's shards (a weight, or an Adam
// moment) stops the save on every rank with the same error naming the step
// and the model's first such parameter; nothing is written and no older
// checkpoint is removed.
TEST(Checkpoint, SavesNothingThatIsNotFinite) {
  program::Program p = layout({1, 2, 2}, 2, 2);
  std::string dir = scratch("finite");
  save(p, dir, /*keep=*/1, /*step=*/3);
  struct Poison {
    int64_t member, unit;
    int kind; // 0 weights, 1 exp_avg, 2 exp_avg_sq
    int64_t element;
    float value;
    const char *says;
  };
  // Unit 2 holds big.w (420,000 elements) then head.bias, 210,002 elements
  // a member: element 210,007 of the unit is big.w's, in member 1's shard.
  const Poison cases[] = {
      {1, 2, 0, 210007, std::numeric_limits<float>::infinity(),
       "step 4: parameter 'big.w' holds a value that is not finite (element 210007)"},
      {0, 1, 2, 3, std::numeric_limits<float>::quiet_NaN(),
       "step 4: exp_avg_sq of 'block.w' holds a value that is not finite (element 3)"},
  };
  for (const Poison &c : cases) {
    std::vector<std::string> errors = onEveryRank(p, [&](runtime::Communicator &comm, int r) {
      std::vector<char> arena = filledArena(p, r % p.shardSize);
      const auto &u = p.units[c.unit];
      int64_t off = c.kind == 0 ? u.shardOffset : c.kind == 1 ? u.expAvgOffset : u.expAvgSqOffset;
      if (r % p.shardSize == c.member)
        reinterpret_cast<float *>(arena.data() + off)[c.element - c.member * u.shardNumel] =
            c.value;
      return checkpoint::saveCheckpoint(dir, 1, p, comm, arena.data(), 4, 12);
    });
    for (const std::string &err : errors)
      EXPECT_NE(err.find(c.says), std::string::npos) << err;
    std::vector<checkpoint::CheckpointRef> all;
    ASSERT_EQ(checkpoint::listCheckpoints(dir, &all), "");
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].step, 3);
    EXPECT_FALSE(std::filesystem::exists(checkpoint::checkpointPath(dir, 4) + ".tmp"));
  }
  std::filesystem::remove_all(dir);
}

// meta.json is checked whole: its checksum catches an edit that its other
// checks cannot place, and an offset that overlaps the parameter before it
// is named; a shard header's padding counts.
TEST(Checkpoint, RefusesEditsNamingFileAndField) {
  program::Program p = layout({1, 2, 2}, 2, 2);
  std::string dir = scratch("edits");
  save(p, dir);
  std::string path = checkpoint::checkpointPath(dir, 5), meta = path + "/meta.json";
  std::string text = readText(meta);
  std::vector<char> arena(p.arenaBytes);
  int64_t step = 0;
  ASSERT_EQ(checkpoint::loadCheckpoint(path, p, 0, 0, 12, arena.data(), &step), "");
  // "block.b" begins where "block.w" (12 elements) ends: 12 -> 11 overlaps.
  size_t at = text.find("\"offset\": 12");
  ASSERT_NE(at, std::string::npos);
  writeText(meta, text.substr(0, at) + "\"offset\": 11" + text.substr(at + 12));
  std::string err = checkpoint::loadCheckpoint(path, p, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find(meta + ": units[1].params[1].offset is 11: it overlaps the parameter "
                            "'block.w' before it, which ends at 12"),
            std::string::npos)
      << err;
  at = text.find("\"step\": 5");
  ASSERT_NE(at, std::string::npos);
  writeText(meta, text.substr(0, at) + "\"step\": 6" + text.substr(at + 9));
  err = checkpoint::loadCheckpoint(path, p, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find(meta + ": 'checksum' is "), std::string::npos) << err;
  writeText(meta, text);
  // Byte 53, in the header's padding.
  std::string shard = path + "/shard-00001.bin", bytes = readText(shard);
  std::string flipped = bytes;
  flipped[53] ^= 1;
  writeText(shard, flipped);
  err = checkpoint::loadCheckpoint(path, p, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find(shard + ": header field 'pad' (bytes 52-55) is 256, but must be 0"),
            std::string::npos)
      << err;
  writeText(shard, bytes);
  EXPECT_EQ(checkpoint::loadCheckpoint(path, p, 0, 0, 12, arena.data(), &step), "");
  std::filesystem::remove_all(dir);
}

// The model's identity (family and the ops' attributes) must match.
TEST(Checkpoint, RefusesAnotherModelIdentity) {
  program::Program p = layout({1, 2, 2}, 2, 2);
  p.modelType = "llama";
  std::string dir = scratch("identity");
  save(p, dir);
  program::Program other = p;
  other.modelType = "mistral";
  std::vector<char> arena(p.arenaBytes);
  int64_t step = 0;
  std::string err = checkpoint::loadCheckpoint(checkpoint::checkpointPath(dir, 5), other, 0, 0, 12,
                                               arena.data(), &step);
  EXPECT_NE(err.find("identity 'family' is \"llama\" in the checkpoint, but \"mistral\" in "
                     "this plan's model"),
            std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

// A rope's scaling is part of the identity: its kind and each parameter.
// A checkpoint written before scaling had kinds names Llama 3.1's scaling
// rope.llama3_*: it resumes under the same scaling, named as it is now.
TEST(Checkpoint, RopeScalingIsPartOfTheIdentity) {
  program::Program p = layout({1, 2, 2}, 2, 2);
  p.modelType = "llama";
  program::Instruction rope;
  rope.op = program::Op::Rope;
  rope.theta = 500000.0;
  rope.numHeads = 2;
  support::RopeScaling llama3;
  llama3.kind = support::RopeScalingKind::Llama3;
  llama3.factor = 8.0, llama3.originalMaxPosition = 8192;
  llama3.lowFreqFactor = 1.0, llama3.highFreqFactor = 4.0;
  rope.ropeScaling = llama3;
  p.microStep.compute.push_back(rope);
  std::string dir = scratch("rope-identity");
  save(p, dir);
  const std::string path = checkpoint::checkpointPath(dir, 5), meta = path + "/meta.json";
  std::vector<char> arena(p.arenaBytes);
  int64_t step = 0;
  ASSERT_EQ(checkpoint::loadCheckpoint(path, p, 0, 0, 12, arena.data(), &step), "");

  program::Program yarn = p;
  support::RopeScaling &y = *yarn.microStep.compute.back().ropeScaling;
  y = support::RopeScaling{};
  y.kind = support::RopeScalingKind::Yarn;
  y.factor = 8.0, y.originalMaxPosition = 8192, y.attentionFactor = 1.2;
  std::string err = checkpoint::loadCheckpoint(path, yarn, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find("identity 'rope.attention_factor' is absent in the checkpoint, but 1.2 in "
                     "this plan's model"),
            std::string::npos)
      << err;
  program::Program other = p;
  other.microStep.compute.back().ropeScaling->highFreqFactor = 2.0;
  err = checkpoint::loadCheckpoint(path, other, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find("identity 'rope.high_freq_factor' is 4.0 in the checkpoint, but 2.0 in this "
                     "plan's model"),
            std::string::npos)
      << err;

  // The same checkpoint as an older version wrote it.
  nlohmann::json m = nlohmann::json::parse(readText(meta));
  nlohmann::json &id = m["identity"];
  ASSERT_EQ(id["rope.scaling"], "llama3");
  for (const char *k : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position"}) {
    std::string now = std::string("rope.") + (std::string(k) == "factor" ? "scaling_factor" : k);
    ASSERT_TRUE(id.contains(now)) << now;
    id[std::string("rope.llama3_") + k] = id[now];
    id.erase(now);
  }
  id.erase("rope.scaling");
  m.erase("checksum");
  const std::string compact = m.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  m["checksum"] = io::crc32(compact.data(), compact.size());
  writeText(meta, m.dump(2));
  EXPECT_EQ(checkpoint::loadCheckpoint(path, p, 0, 0, 12, arena.data(), &step), "");
  err = checkpoint::loadCheckpoint(path, other, 0, 0, 12, arena.data(), &step);
  EXPECT_NE(err.find("identity 'rope.high_freq_factor' is 4.0 in the checkpoint"),
            std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

// A checkpoint that a resuming run holds (flock LOCK_SH) is not removed by
// --keep: it stays until a save after the reader let go.
TEST(Checkpoint, KeepsACheckpointThatIsBeingRead) {
  program::Program p = layout({1, 2, 2}, 2, 2);
  std::string dir = scratch("held");
  save(p, dir, /*keep=*/1, /*step=*/3);
  int fd = ::open(checkpoint::checkpointPath(dir, 3).c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  save(p, dir, /*keep=*/1, /*step=*/4);
  std::vector<checkpoint::CheckpointRef> all;
  ASSERT_EQ(checkpoint::listCheckpoints(dir, &all), "");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].step, 3);
  ::close(fd);
  save(p, dir, /*keep=*/1, /*step=*/5);
  ASSERT_EQ(checkpoint::listCheckpoints(dir, &all), "");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].step, 5);
  std::filesystem::remove_all(dir);
}

// --resume is one decision: every rank reads what rank 0 chose, and a read
// error on one rank (its shard file gone) is an error on every rank.
TEST(Checkpoint, ResumeIsChosenOnceAndFailsTogether) {
  program::Program p = layout({1, 2, 2}, 2, 2);
  std::string dir = scratch("resume");
  save(p, dir, /*keep=*/2, /*step=*/3);
  save(p, dir, /*keep=*/2, /*step=*/4);
  std::vector<int64_t> steps(p.worldSize, -1);
  std::vector<std::string> errors = onEveryRank(p, [&](runtime::Communicator &comm, int r) {
    std::vector<char> arena(p.arenaBytes);
    return checkpoint::resumeCheckpoint(dir, p, comm, 12, arena.data(), &steps[r]);
  });
  for (int r = 0; r < p.worldSize; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(steps[r], 4) << "rank " << r;
  }
  std::filesystem::remove(checkpoint::checkpointPath(dir, 4) + "/shard-00001.bin");
  errors = onEveryRank(p, [&](runtime::Communicator &comm, int r) {
    std::vector<char> arena(p.arenaBytes);
    std::string err = checkpoint::resumeCheckpoint(dir, p, comm, 12, arena.data(), &steps[r]);
    if (!err.empty())
      comm.abort("rank " + std::to_string(r) + ": " + err); // as the executors do
    return err;
  });
  for (int r = 0; r < p.worldSize; ++r)
    EXPECT_NE(errors[r].find("shard-00001.bin"), std::string::npos)
        << "rank " << r << ": " << errors[r];
  std::filesystem::remove_all(dir);
}

} // namespace
