//===- Checkpoint.cpp -----------------------------------------------------===//
//
// DIR/meta.json names the plan the checkpoint belongs to; DIR/rank-NNNNN.bin
// holds a header (magic, step, rank, payload size, CRC-32) and the rank's
// parameter, exp_avg and exp_avg_sq shards, unit by unit.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp;
using namespace fsdp::io;
using nlohmann::json;

namespace {

constexpr char kMagic[8] = {'F', 'S', 'D', 'P', 'C', 'K', 'P', '1'};

struct Header {
  char magic[8];
  int64_t step, rank, worldSize, payloadBytes;
  uint32_t crc, pad;
};

uint32_t crc32(const void *data, size_t n, uint32_t crc = 0) {
  static uint32_t table[256];
  static bool init = false;
  if (!init) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    init = true;
  }
  crc = ~crc;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::string rankFile(const std::string &dir, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "/rank-%05d.bin", rank);
  return dir + name;
}

json planIdentity(const program::Program &p) {
  json units = json::array();
  for (const auto &u : p.units)
    units.push_back({{"name", u.name}, {"shard_numel", u.shardNumel}});
  return {{"model", p.modelName}, {"world_size", p.worldSize}, {"shard_size", p.shardSize},
          {"strategy", p.strategy}, {"units", units}};
}

bool barrier(runtime::Communicator &comm) {
  double x = 0;
  return comm.allReduceScalar(runtime::Group::World, &x);
}

} // namespace

std::string fsdp::io::saveCheckpoint(const std::string &dir, const program::Program &p,
                                     runtime::Communicator &comm, char *arena, int64_t step) {
  std::string tmp = dir + ".tmp";
  if (comm.rank() == 0) {
    std::string rm = "rm -rf '" + tmp + "'";
    if (std::system(rm.c_str()) != 0 || ::mkdir(tmp.c_str(), 0755) != 0)
      comm.abort("cannot create " + tmp + ": " + std::strerror(errno));
  }
  if (!barrier(comm))
    return "checkpoint not written: " + comm.error();
  std::string err;
  {
    int64_t payload = 0;
    for (const auto &u : p.units)
      payload += 3 * u.shardNumel * 4;
    Header h{};
    std::memcpy(h.magic, kMagic, 8);
    h.step = step;
    h.rank = comm.rank();
    h.worldSize = p.worldSize;
    h.payloadBytes = payload;
    uint32_t crc = 0;
    for (const auto &u : p.units)
      for (int64_t off : {u.shardOffset, u.expAvgOffset, u.expAvgSqOffset})
        crc = crc32(arena + off, u.shardNumel * 4, crc);
    h.crc = crc;
    std::string path = rankFile(tmp, comm.rank());
    FILE *f = std::fopen(path.c_str(), "wb");
    bool ok = f && std::fwrite(&h, sizeof h, 1, f) == 1;
    for (const auto &u : p.units)
      for (int64_t off : {u.shardOffset, u.expAvgOffset, u.expAvgSqOffset})
        ok = ok && std::fwrite(arena + off, 4, u.shardNumel, f) == (size_t)u.shardNumel;
    ok = ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
    if (f)
      std::fclose(f);
    if (!ok)
      err = path + ": cannot write the checkpoint: " + std::strerror(errno);
  }
  if (!err.empty())
    comm.abort("rank " + std::to_string(comm.rank()) + ": " + err);
  if (!barrier(comm))
    return err.empty() ? "checkpoint not written: " + comm.error() : err;
  if (comm.rank() == 0) {
    json meta = {{"format", "fsdp-checkpoint"}, {"version", 1}, {"step", step},
                 {"plan", planIdentity(p)}};
    std::ofstream(tmp + "/meta.json") << meta.dump(2) << "\n";
    // Replace the directory in one rename; an old one is moved aside first.
    std::string old = dir + ".old";
    std::string rm = "rm -rf '" + old + "'";
    if (std::system(rm.c_str()) != 0)
      return "cannot remove " + old;
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0 && std::rename(dir.c_str(), old.c_str()) != 0)
      return dir + ": cannot replace the checkpoint: " + std::strerror(errno);
    if (std::rename(tmp.c_str(), dir.c_str()) != 0)
      return dir + ": cannot write the checkpoint: " + std::strerror(errno);
    rm = "rm -rf '" + old + "'";
    if (std::system(rm.c_str()) != 0)
      return "cannot remove " + old;
  }
  return barrier(comm) ? "" : "checkpoint: " + comm.error();
}

std::string fsdp::io::loadCheckpoint(const std::string &dir, const program::Program &p, int rank,
                                     char *arena, int64_t *step) {
  std::ifstream metaFile(dir + "/meta.json");
  if (!metaFile)
    return dir + ": not a checkpoint (no meta.json)";
  json meta;
  try {
    meta = json::parse(metaFile);
  } catch (const json::exception &e) {
    return dir + "/meta.json: corrupt: " + e.what();
  }
  // Looked at field by field: nlohmann's value() and get() throw on another
  // type, and convert a number past int64 with undefined behaviour.
  auto field = [&](const char *key) -> const json * {
    return meta.is_object() && meta.contains(key) ? &meta[key] : nullptr;
  };
  const json *format = field("format"), *version = field("version"), *stepJson = field("step");
  if (!format || !format->is_string() || *format != "fsdp-checkpoint" || !version ||
      !version->is_number_integer() || *version != 1 || !stepJson || !field("plan"))
    return dir + "/meta.json: not an fsdp checkpoint of version 1";
  // A step count fsdp-run can resume from: steps already taken, 0 or more.
  if (!stepJson->is_number_integer() ||
      (stepJson->is_number_unsigned() ? stepJson->get<uint64_t>() > (uint64_t)INT64_MAX
                                      : stepJson->get<int64_t>() < 0))
    return dir + "/meta.json: 'step' must be a count of steps (0 or more), not " +
           stepJson->dump();
  int64_t metaStep = stepJson->is_number_unsigned() ? (int64_t)stepJson->get<uint64_t>()
                                                    : stepJson->get<int64_t>();
  if (meta["plan"] != planIdentity(p))
    return dir + ": saved for another plan (" + meta["plan"].dump() + "); this plan is " +
           planIdentity(p).dump();
  std::string path = rankFile(dir, rank);
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return path + ": missing: " + std::strerror(errno);
  Header h{};
  int64_t payload = 0;
  for (const auto &u : p.units)
    payload += 3 * u.shardNumel * 4;
  bool ok = std::fread(&h, sizeof h, 1, f) == 1 && std::memcmp(h.magic, kMagic, 8) == 0 &&
            h.rank == rank && h.worldSize == p.worldSize && h.payloadBytes == payload &&
            h.step == metaStep;
  for (const auto &u : p.units)
    for (int64_t off : {u.shardOffset, u.expAvgOffset, u.expAvgSqOffset})
      ok = ok && std::fread(arena + off, 4, u.shardNumel, f) == (size_t)u.shardNumel;
  char extra;
  ok = ok && std::fread(&extra, 1, 1, f) == 0;
  std::fclose(f);
  if (!ok)
    return path + ": corrupt checkpoint (bad header or size)";
  uint32_t crc = 0;
  for (const auto &u : p.units)
    for (int64_t off : {u.shardOffset, u.expAvgOffset, u.expAvgSqOffset})
      crc = crc32(arena + off, u.shardNumel * 4, crc);
  if (crc != h.crc)
    return path + ": corrupt checkpoint (checksum mismatch)";
  *step = h.step;
  return "";
}

std::string fsdp::io::saveFullWeights(const std::string &path, const program::Program &p,
                                      runtime::Communicator &comm, char *arena) {
  // The first shard group holds one whole copy; its members gather each unit.
  bool inFirstGroup = comm.rank() < p.shardSize;
  std::vector<std::vector<float>> full(p.units.size());
  if (inFirstGroup)
    for (size_t i = 0; i < p.units.size(); ++i) {
      const auto &u = p.units[i];
      full[i].resize(u.paddedNumel);
      if (!comm.allGather(runtime::Group::Shard, arena + u.shardOffset, full[i].data(),
                          u.shardNumel * 4))
        return "weights not written: " + comm.error();
    }
  std::string err;
  if (comm.rank() == 0) {
    std::vector<NamedTensor> tensors;
    for (size_t i = 0; i < p.units.size(); ++i)
      for (const auto &prm : p.units[i].params)
        tensors.push_back({prm.name, prm.shape, full[i].data() + prm.offset});
    err = writeSafetensors(path, tensors);
    if (!err.empty())
      comm.abort("rank 0: " + err);
  }
  if (!barrier(comm))
    return err.empty() ? "weights not written: " + comm.error() : err;
  return "";
}
