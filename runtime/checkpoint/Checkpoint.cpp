//===- Checkpoint.cpp -----------------------------------------------------===//
//
// The layout is in Checkpoint.h. A shard file is a header (magic, step,
// member, members, payload bytes, block bytes, the header's CRC-32, four zero
// bytes), the payload (for each unit: the parameter, exp_avg and exp_avg_sq
// shards, f32) and one CRC-32 per block of the payload. meta.json places every
// parameter in its unit's flat layout, so that a plan with other units, shard
// sizes or world size finds each element of its own shards; it also holds the
// model's identity, each shard file's size and header CRC, and a CRC-32 of
// itself, so that a checkpoint is verified as a whole before step 1.
//
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/io/Crc32.h"
#include "runtime/io/Files.h"
#include "support/InputFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <tuple>
#include <unistd.h>

using namespace fsdp;
using namespace fsdp::checkpoint;
using namespace fsdp::io;
using nlohmann::json;

namespace {

constexpr char kMagic[8] = {'F', 'S', 'D', 'P', 'C', 'K', 'P', '3'};
constexpr int kVersion = 3;
constexpr int64_t kBlockBytes = int64_t(1) << 20;
constexpr const char *kLockName = "lock";

struct ShardHeader {
  char magic[8];
  int64_t step, member, members, payloadBytes, blockBytes;
  uint32_t headerCrc, pad;
};
static_assert(sizeof(ShardHeader) == 56, "the shard header is 56 bytes on disk");

// Over all 56 bytes, the CRC field read as zero: a flip anywhere in the
// header, the padding included, is found.
uint32_t headerCrc(ShardHeader h) {
  h.headerCrc = 0;
  return crc32(&h, sizeof h);
}

int64_t payloadBytesOf(const program::Program &p) {
  int64_t payload = 0;
  for (const auto &u : p.units)
    payload += 3 * u.shardNumel * 4;
  return payload;
}

// Header, payload and one CRC a block.
int64_t shardFileBytes(int64_t payload, int64_t blockBytes) {
  return (int64_t)sizeof(ShardHeader) + payload + (payload + blockBytes - 1) / blockBytes * 4;
}

ShardHeader shardHeader(const program::Program &p, int64_t step, int64_t member) {
  ShardHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.step = step;
  h.member = member;
  h.members = p.shardSize * p.tp;
  h.payloadBytes = payloadBytesOf(p);
  h.blockBytes = kBlockBytes;
  h.headerCrc = headerCrc(h);
  return h;
}

// The CRC-32 meta.json carries of itself: of its compact dump (keys sorted,
// as nlohmann::json orders them) without the "checksum" key, so that it does
// not depend on the whitespace it was written with.
uint32_t metaChecksum(json meta) {
  meta.erase("checksum");
  std::string text = meta.dump(-1, ' ', false, json::error_handler_t::replace);
  return crc32(text.data(), text.size());
}

// What makes the model's maths, as the program's instructions say it: the
// family, and each attribute of the forward ops that is not a tensor shape
// (shapes and names are compared parameter by parameter). One value per key
// when every instruction agrees, else the sorted distinct values. Nothing
// here depends on the sequence length, the world, the strategy, the wrap,
// the micro-batch, recomputation or the dtypes.
json modelIdentity(const program::Program &p) {
  std::map<std::string, std::set<json>> seen;
  auto note = [&](const char *op, const char *attr, const json &v) {
    seen[std::string(op) + "." + attr].insert(v);
  };
  // Under tensor parallelism an attention's heads are the rank's. The
  // model's: num_heads x tp, and num_kv_heads x the pieces the key/value
  // projections are cut into (fewer than tp where ranks share a piece: the
  // fewest of any cut parameter in the unit). A rope's heads are its
  // unit's attention's (the query's and the key's).
  std::map<int64_t, std::pair<int64_t, int64_t>> wholeHeads; // unit -> (heads, kv)
  if (p.tp > 1)
    for (const auto &i : p.microStep.compute) {
      if ((i.op != program::Op::CausalAttention && i.op != program::Op::Attention) || i.unit < 0 ||
          i.unit >= (int64_t)p.units.size())
        continue;
      int64_t fewest = p.tp;
      for (const auto &prm : p.units[i.unit].params)
        if (prm.isCut())
          fewest = std::min(fewest, prm.tpPieces);
      wholeHeads[i.unit] = {i.numHeads * p.tp, i.numKvHeads * fewest};
    }
  auto heads = [&](const program::Instruction &i) {
    auto it = wholeHeads.find(i.unit);
    return it == wholeHeads.end() ? std::pair(i.numHeads, i.numKvHeads) : it->second;
  };
  for (const auto &i : p.microStep.compute) {
    switch (i.op) {
    case program::Op::LayerNorm:
      note("layer_norm", "eps", i.eps);
      break;
    case program::Op::RMSNorm:
      note("rms_norm", "eps", i.eps);
      break;
    case program::Op::Rope:
      note("rope", "theta", i.theta);
      if (auto it = wholeHeads.find(i.unit); it != wholeHeads.end()) {
        note("rope", "num_heads", it->second.first);
        note("rope", "num_heads", it->second.second);
      } else {
        note("rope", "num_heads", i.numHeads);
      }
      if (const auto &s = i.ropeScaling) {
        note("rope", support::kRopeScalingKey, support::ropeScalingName(s->kind));
        for (const support::RopeScalingField &f : support::ropeScalingFields()) {
          if (!support::ropeScalingReads(s->kind, f.name))
            continue;
          switch (f.type) {
          case support::RopeScalingField::Type::F64:
            note("rope", f.name, (*s).*f.f64);
            break;
          case support::RopeScalingField::Type::I64:
            note("rope", f.name, (*s).*f.i64);
            break;
          case support::RopeScalingField::Type::Bool:
            note("rope", f.name, (*s).*f.boolean);
            break;
          }
        }
      }
      break;
    case program::Op::CausalAttention:
      note("causal_attention", "num_heads", heads(i).first);
      note("causal_attention", "num_kv_heads", heads(i).second);
      note("causal_attention", "window", i.window);
      break;
    case program::Op::Attention:
      note("attention", "num_heads", heads(i).first);
      note("attention", "num_kv_heads", heads(i).second);
      break;
    case program::Op::Gelu:
      note("gelu", "approximate",
           i.approximate == program::GeluApproximate::None ? "none" : "tanh");
      break;
    default:
      break;
    }
  }
  json id = json::object();
  id["family"] = p.modelType;
  std::vector<std::string> tied = p.tiedCopies;
  std::sort(tied.begin(), tied.end());
  id["tied_copies"] = tied;
  for (const auto &[key, values] : seen)
    id[key] = values.size() == 1 ? *values.begin() : json(values);
  return id;
}

std::string shardName(int64_t member) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%05lld.bin", (long long)member);
  return name;
}

// "step-" and 8 or more digits, nothing else: a complete checkpoint's name.
bool parseStepName(const std::string &name, int64_t *step) {
  if (name.size() < 13 || name.size() > 23 || name.compare(0, 5, "step-") != 0)
    return false;
  int64_t s = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || s > (INT64_MAX - 9) / 10)
      return false;
    s = s * 10 + (name[i] - '0');
  }
  *step = s;
  return true;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

json metaOf(const program::Program &p, int64_t step, int64_t globalBatch, const RunRecord &record) {
  json units = json::array();
  for (const auto &u : p.units) {
    json params = json::array();
    for (const auto &prm : u.params) {
      // The whole parameter's shape; under tensor parallelism, its cut.
      json entry = {{"name", prm.name}, {"shape", prm.wholeShape()}, {"offset", prm.offset}};
      if (prm.isCut()) {
        entry["tp_dim"] = prm.tpDim;
        entry["tp_pieces"] = prm.tpPieces;
        entry["tp_sections"] = prm.tpSections;
      }
      params.push_back(entry);
    }
    units.push_back({{"name", u.name}, {"shard_numel", u.shardNumel}, {"params", params}});
  }
  json shards = json::array();
  int64_t bytes = shardFileBytes(payloadBytesOf(p), kBlockBytes);
  for (int64_t m = 0; m < p.shardSize * p.tp; ++m)
    shards.push_back({{"bytes", bytes}, {"header_crc", shardHeader(p, step, m).headerCrc}});
  json meta = {{"format", "fsdp-checkpoint"},
               {"version", kVersion},
               {"step", step},
               {"global_batch", globalBatch},
               {"model", p.modelName},
               {"identity", modelIdentity(p)},
               {"world_size", p.worldSize},
               {"strategy", p.strategy},
               {"tp", p.tp},
               {"shard_files", p.shardSize * p.tp},
               {"shards", shards},
               {"block_bytes", kBlockBytes},
               {"units", units},
               {"sampling",
                {{"shuffle", record.sampling.shuffle},
                 {"seed", record.sampling.seed},
                 {"tokens", record.sampling.tokens}}}};
  const Settings &t = record.settings;
  meta["training"] = {{"lr", t.lr},
                      {"lr_schedule", t.lrSchedule},
                      {"warmup_steps", t.warmupSteps},
                      {"min_lr", t.minLr},
                      {"steps", t.steps},
                      {"beta1", t.beta1},
                      {"beta2", t.beta2},
                      {"eps", t.eps},
                      {"weight_decay", t.weightDecay},
                      {"clip_grad_norm", t.clipGradNorm},
                      {"grad_accum", t.gradAccum},
                      {"seed", t.seed},
                      {"mask_token_id", t.maskTokenId}};
  meta["checksum"] = metaChecksum(meta);
  return meta;
}

// This member's shard file: header, payload, block CRCs; created, written
// and fsynced, or an error.
std::string writeShard(const std::string &path, const program::Program &p, const char *arena,
                       const char *host, int64_t step, int64_t member) {
  const char *moments = p.momentsBase(arena, host);
  ShardHeader h = shardHeader(p, step, member);
  DurableFile f;
  std::string err = f.create(path);
  if (err.empty())
    err = f.write(&h, sizeof h);
  std::vector<uint32_t> crcs;
  uint32_t crc = 0;
  int64_t inBlock = 0;
  for (const auto &u : p.units)
    for (int kind = 0; kind < 3; ++kind) {
      const char *data = kind == 0   ? p.paramShard(u, arena, host)
                         : kind == 1 ? moments + u.expAvgOffset
                                     : moments + u.expAvgSqOffset;
      int64_t left = u.shardNumel * 4;
      if (err.empty())
        err = f.write(data, size_t(left));
      while (left > 0) {
        int64_t n = std::min(left, kBlockBytes - inBlock);
        crc = crc32(data, size_t(n), crc);
        data += n;
        left -= n;
        inBlock += n;
        if (inBlock == kBlockBytes) {
          crcs.push_back(crc);
          crc = 0;
          inBlock = 0;
        }
      }
    }
  if (inBlock > 0)
    crcs.push_back(crc);
  if (err.empty())
    err = f.write(crcs.data(), crcs.size() * 4);
  if (err.empty())
    err = f.close();
  return err;
}

//===----------------------------------------------------------------------===//
// Reading: meta.json, checked field by field (it is input: fuzzed)
//===----------------------------------------------------------------------===//

struct SavedParam {
  std::vector<int64_t> shape;              // the whole parameter's
  int64_t unit = 0, offset = 0, numel = 0; // numel: of a piece under tp
  program::Param cut;                      // its tp_dim, tp_pieces, tp_sections; shape: a piece's
};

struct Meta {
  int64_t step = 0, globalBatch = 0, members = 0, blockBytes = 0, payloadBytes = 0;
  int64_t tp = 1; // shard files t x (members / tp) + m: tp rank t's shard member m
  std::vector<int64_t> shardNumel, unitStart; // per unit; unitStart: byte offset in the payload
  std::vector<uint32_t> headerCrcs;           // per shard file
  std::map<std::string, SavedParam> params;
  json identity;
};

// A non-negative integer of JSON within [lo, hi], or false.
bool intIn(const json *v, int64_t lo, int64_t hi, int64_t *out) {
  if (!v || !v->is_number_integer())
    return false;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > (uint64_t)INT64_MAX)
      return false;
    *out = (int64_t)u;
  } else {
    *out = v->get<int64_t>();
  }
  return *out >= lo && *out <= hi;
}

const json *field(const json &obj, const char *key) {
  return obj.is_object() && obj.contains(key) ? &obj[key] : nullptr;
}

std::string shown(const json *v) { return v ? v->dump() : std::string("missing"); }

std::string readMeta(const std::string &dir, Meta &m) {
  std::string path = dir + "/meta.json";
  std::string text;
  // Not blocking on a FIFO, not reading a device without end.
  std::string err = support::readRegularFile(path, support::kMaxJsonBytes, "checkpoint", &text);
  if (!err.empty())
    return err;
  unsigned line = 0, col = 0;
  err = support::checkJsonDepth(text, &line, &col);
  if (!err.empty())
    return path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + err;
  json meta = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded())
    return path + ": corrupt (not JSON)";
  const json *format = field(meta, "format"), *version = field(meta, "version");
  int64_t v = 0;
  if (!format || !format->is_string() || *format != "fsdp-checkpoint")
    return path + ": not an fsdp checkpoint: 'format' must be \"fsdp-checkpoint\", not " +
           shown(format);
  if (!intIn(version, 0, INT64_MAX, &v))
    return path + ": 'version' must be an integer, not " + shown(version);
  if (v != kVersion)
    return path + ": 'version' is " + std::to_string(v) +
           ", a checkpoint format this fsdp-run does not read; it reads version " +
           std::to_string(kVersion) +
           (v == 2 ? " (version 2 holds no checksum of meta.json and no model identity, so "
                     "it cannot be verified before step 1: resume it with the fsdp-run "
                     "that wrote it, or start from its --save-weights)"
                   : "");
  if (!intIn(field(meta, "step"), 0, INT64_MAX, &m.step))
    return path + ": 'step' must be a count of steps (0 or more), not " +
           shown(field(meta, "step"));
  if (!intIn(field(meta, "global_batch"), 1, INT64_MAX, &m.globalBatch))
    return path + ": 'global_batch' must be an integer of 1 or more, not " +
           shown(field(meta, "global_batch"));
  if (!intIn(field(meta, "shard_files"), 1, int64_t(1) << 20, &m.members))
    return path + ": 'shard_files' must be an integer from 1 to 1048576, not " +
           shown(field(meta, "shard_files"));
  // Absent in a checkpoint written before tensor parallelism: 1.
  if (const json *tp = field(meta, "tp");
      tp && (!intIn(tp, 1, m.members, &m.tp) || m.members % m.tp != 0))
    return path + ": 'tp' must be an integer of 1 or more that divides 'shard_files' " +
           std::to_string(m.members) + ", not " + shown(tp);
  if (!intIn(field(meta, "block_bytes"), 4, int64_t(1) << 30, &m.blockBytes) || m.blockBytes % 4)
    return path + ": 'block_bytes' must be a multiple of 4 from 4 to 2^30, not " +
           shown(field(meta, "block_bytes"));
  const json *identity = field(meta, "identity");
  if (!identity || !identity->is_object() || !field(*identity, "family"))
    return path + ": 'identity' must be an object naming the model's 'family'";
  m.identity = *identity;
  const json *units = field(meta, "units");
  if (!units || !units->is_array())
    return path + ": 'units' must be an array";
  constexpr int64_t kLimit = int64_t(1) << 62;
  __int128 payload = 0;
  for (size_t ui = 0; ui < units->size(); ++ui) {
    const json &u = (*units)[ui];
    std::string where = path + ": units[" + std::to_string(ui) + "]";
    int64_t shardNumel = 0;
    if (!intIn(field(u, "shard_numel"), 0, kLimit, &shardNumel))
      return where + ".shard_numel must be an integer of 0 or more, not " +
             shown(field(u, "shard_numel"));
    m.unitStart.push_back((int64_t)payload);
    m.shardNumel.push_back(shardNumel);
    payload += (__int128)shardNumel * 12;
    if (payload > kLimit)
      return where + ".shard_numel: the shards are larger than fsdp-run reads (2^62 bytes)";
    __int128 padded = (__int128)shardNumel * (m.members / m.tp);
    const json *params = field(u, "params");
    if (!params || !params->is_array())
      return where + ".params must be an array";
    // The writer lists a unit's parameters in their order in its flat
    // buffer: each begins at or after the end of the one before.
    int64_t end = 0;
    std::string before;
    for (size_t pi = 0; pi < params->size(); ++pi) {
      const json &prm = (*params)[pi];
      std::string at = where + ".params[" + std::to_string(pi) + "]";
      const json *name = field(prm, "name"), *shape = field(prm, "shape");
      SavedParam s;
      s.unit = (int64_t)ui;
      if (!name || !name->is_string())
        return at + ".name must be a string";
      if (!shape || !shape->is_array() || shape->size() > 8)
        return at + ".shape must be an array of at most 8 sizes";
      __int128 numel = 1;
      for (const json &d : *shape) {
        int64_t n = 0;
        if (!intIn(&d, 0, kLimit, &n))
          return at + ".shape must hold sizes of 0 or more";
        s.shape.push_back(n);
        numel *= n;
        if (numel > kLimit)
          return at + ".shape: more elements than fsdp-run holds (2^62)";
      }
      // Cut under tensor parallelism: each tp rank's file holds a piece.
      if (const json *dim = field(prm, "tp_dim")) {
        int64_t d = 0, pieces = 0, sections = 0;
        if (!intIn(dim, 0, (int64_t)s.shape.size() - 1, &d) ||
            !intIn(field(prm, "tp_pieces"), 2, m.tp, &pieces) || m.tp % pieces != 0 ||
            !intIn(field(prm, "tp_sections"), 1, kLimit, &sections) ||
            s.shape[d] % (pieces * sections) != 0)
          return at + ": tp_dim " + shown(dim) + ", tp_pieces " + shown(field(prm, "tp_pieces")) +
                 " and tp_sections " + shown(field(prm, "tp_sections")) +
                 " must name one of its dimensions, cut into pieces that divide 'tp' " +
                 std::to_string(m.tp) + ", with sections that divide its extent";
        s.cut.tpDim = d;
        s.cut.tpPieces = pieces;
        s.cut.tpSections = sections;
        s.cut.shape = s.shape;
        s.cut.shape[d] /= pieces;
        numel /= pieces;
      } else {
        s.cut.shape = s.shape;
      }
      s.numel = (int64_t)numel;
      const json *offset = field(prm, "offset");
      if (!intIn(offset, 0, kLimit, &s.offset) || s.offset + numel > padded)
        return at + ".offset is " + shown(offset) + ": it must place the parameter's " +
               std::to_string((long long)numel) + " elements within the unit's " +
               std::to_string((long long)padded) + " (" + where.substr(path.size() + 2) +
               ".shard_numel x shard_files / tp)";
      if (s.offset < end)
        return at + ".offset is " + std::to_string(s.offset) + ": it overlaps the parameter '" +
               before + "' before it, which ends at " + std::to_string(end);
      end = s.offset + s.numel;
      before = name->get<std::string>();
      if (!m.params.emplace(name->get<std::string>(), s).second)
        return at + ".name: the parameter '" + name->get<std::string>() + "' is saved twice";
    }
  }
  m.payloadBytes = (int64_t)payload;
  // Each shard file's size and header CRC, as the writer made them.
  const json *shards = field(meta, "shards");
  if (!shards || !shards->is_array() || (int64_t)shards->size() != m.members)
    return path + ": 'shards' must be an array of " + std::to_string(m.members) +
           " entries, as 'shard_files' says";
  int64_t fileBytes = shardFileBytes(m.payloadBytes, m.blockBytes);
  for (size_t i = 0; i < shards->size(); ++i) {
    std::string at = path + ": shards[" + std::to_string(i) + "]";
    int64_t bytes = 0, crc = 0;
    if (!intIn(field((*shards)[i], "bytes"), 0, INT64_MAX, &bytes) || bytes != fileBytes)
      return at + ".bytes is " + shown(field((*shards)[i], "bytes")) + ", but the " +
             "units[*].shard_numel and block_bytes make each shard file " +
             std::to_string(fileBytes) + " bytes";
    if (!intIn(field((*shards)[i], "header_crc"), 0, UINT32_MAX, &crc))
      return at + ".header_crc must be a CRC-32 (an integer from 0 to 2^32-1), not " +
             shown(field((*shards)[i], "header_crc"));
    m.headerCrcs.push_back((uint32_t)crc);
  }
  // Last, the catch-all: any edit the checks above let through.
  int64_t checksum = 0;
  if (!intIn(field(meta, "checksum"), 0, UINT32_MAX, &checksum))
    return path + ": 'checksum' must be a CRC-32 (an integer from 0 to 2^32-1), not " +
           shown(field(meta, "checksum"));
  uint32_t actual = metaChecksum(meta);
  if ((uint32_t)checksum != actual)
    return path + ": 'checksum' is " + std::to_string(checksum) + ", but the file's contents " +
           "give " + std::to_string(actual) + ": meta.json was changed after it was saved";
  return "";
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// One shard file, read block by block, each block checked against its CRC
// before any of its bytes is used.
class ShardReader {
public:
  ~ShardReader() {
    if (fd >= 0)
      ::close(fd);
  }
  // The header, field by field, against meta.json: an error names the field.
  std::string open(const std::string &p, const Meta &m, int64_t member) {
    path = p;
    payload = m.payloadBytes;
    blockBytes = m.blockBytes;
    blocks = (payload + blockBytes - 1) / blockBytes;
    int64_t size = 0;
    std::string err = support::openRegularFile(path, INT64_MAX, "checkpoint", &fd, &size);
    if (!err.empty())
      return err;
    ShardHeader h{};
    if (::pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
      return path + ": corrupt checkpoint: shorter than its 56-byte header";
    auto bad = [&](const char *name, int64_t got, int64_t want) {
      return path + ": header field '" + name + "' is " + std::to_string((long long)got) +
             ", but meta.json makes it " + std::to_string((long long)want);
    };
    if (std::memcmp(h.magic, kMagic, 8) != 0)
      return path + ": header field 'magic' is not FSDPCKP3 (bytes 0-7)";
    if (h.step != m.step)
      return bad("step", h.step, m.step);
    if (h.member != member)
      return bad("member", h.member, member);
    if (h.members != m.members)
      return bad("members", h.members, m.members);
    if (h.payloadBytes != payload)
      return bad("payload_bytes", h.payloadBytes, payload);
    if (h.blockBytes != blockBytes)
      return bad("block_bytes", h.blockBytes, blockBytes);
    if (h.pad != 0)
      return path + ": header field 'pad' (bytes 52-55) is " + std::to_string(h.pad) +
             ", but must be 0";
    if (h.headerCrc != headerCrc(h))
      return path + ": header field 'header_crc' is " + std::to_string(h.headerCrc) +
             ", but the header's bytes give " + std::to_string(headerCrc(h));
    if (h.headerCrc != m.headerCrcs[member])
      return bad("header_crc", h.headerCrc, m.headerCrcs[member]);
    int64_t want = shardFileBytes(payload, blockBytes);
    if (size != want)
      return path + ": corrupt checkpoint: " + std::to_string((long long)size) +
             " bytes, but meta.json's shards[" + std::to_string(member) + "].bytes is " +
             std::to_string((long long)want);
    return "";
  }
  // Bytes [at, at + bytes) of the payload into dst.
  std::string read(int64_t at, int64_t bytes, char *dst) {
    while (bytes > 0) {
      int64_t b = at / blockBytes;
      if (b != cached) {
        std::string err = load(b);
        if (!err.empty())
          return err;
      }
      int64_t within = at - b * blockBytes;
      int64_t n = std::min(bytes, (int64_t)block.size() - within);
      std::memcpy(dst, block.data() + within, size_t(n));
      dst += n;
      at += n;
      bytes -= n;
    }
    return "";
  }

private:
  std::string load(int64_t b) {
    int64_t start = b * blockBytes, n = std::min(blockBytes, payload - start);
    block.resize(size_t(n));
    uint32_t want = 0;
    off_t base = (off_t)sizeof(ShardHeader);
    if (::pread(fd, block.data(), size_t(n), base + start) != (ssize_t)n ||
        ::pread(fd, &want, 4, base + payload + b * 4) != 4)
      return path + ": cannot read: " + std::strerror(errno);
    if (crc32(block.data(), size_t(n)) != want)
      return path + ": corrupt checkpoint (checksum mismatch in block " + std::to_string(b) + ")";
    cached = b;
    return "";
  }

  std::string path;
  int fd = -1;
  int64_t payload = 0, blockBytes = 1, blocks = 0, cached = -1;
  std::vector<char> block;
};

// An identity as this version writes it: checkpoints written before rope
// scaling had kinds name Llama 3.1's `rope.llama3_*` (its factor,
// low_freq_factor, high_freq_factor and original_max_position).
json currentIdentity(json id) {
  const char *const renamed[][2] = {
      {"rope.llama3_factor", "rope.scaling_factor"},
      {"rope.llama3_low_freq_factor", "rope.low_freq_factor"},
      {"rope.llama3_high_freq_factor", "rope.high_freq_factor"},
      {"rope.llama3_original_max_position", "rope.original_max_position"}};
  if (!id.is_object() || !id.contains(renamed[0][0]))
    return id;
  for (const auto &[from, to] : renamed)
    if (id.contains(from)) {
      id[to] = id[from];
      id.erase(from);
    }
  id["rope.scaling"] = "llama3";
  return id;
}

// The model of the checkpoint against the plan's, key by key.
std::string compareIdentity(const std::string &path, const json &savedAsWritten, const json &now) {
  const json saved = currentIdentity(savedAsWritten);
  // The family first: the plainest difference to read.
  std::vector<std::string> order = {"family"};
  std::set<std::string> keys;
  for (const auto &[k, v] : saved.items())
    keys.insert(k);
  for (const auto &[k, v] : now.items())
    keys.insert(k);
  keys.erase("family");
  order.insert(order.end(), keys.begin(), keys.end());
  for (const std::string &k : order) {
    const json *a = field(saved, k.c_str()), *b = field(now, k.c_str());
    if (a && b && *a == *b)
      continue;
    return path + "/meta.json: the checkpoint is of another model: identity '" + k + "' is " +
           (a ? a->dump() : std::string("absent")) + " in the checkpoint, but " +
           (b ? b->dump() : std::string("absent")) + " in this plan's model";
  }
  return "";
}

// The step folder that a resume reads, held with flock(LOCK_SH) so that a
// run saving into the same folder does not remove it meanwhile.
struct HeldCheckpoint {
  ~HeldCheckpoint() {
    if (fd >= 0)
      ::close(fd);
  }
  int fd = -1;
};

// Resolves `path` and locks the chosen folder shared, then checks that its
// name still names the folder locked (a writer renames a checkpoint away
// only while holding the lock exclusively). A rotation in between: again.
std::string resolveAndHold(const std::string &path, CheckpointRef *ref, HeldCheckpoint *held) {
  std::string err;
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (attempt > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    err = resolveCheckpoint(path, ref);
    if (!err.empty())
      return err;
    int fd = ::open(ref->path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      err = ref->path + ": cannot open: " + std::strerror(errno);
      continue;
    }
    // Held exclusively: a writer is renaming it away (never the newest), so
    // choose again; not waited on, so that a stopped writer cannot stop this
    // run. Without flock(2) on this file system (EBADF, ENOLCK, EOPNOTSUPP)
    // the read is not held, as before the lock existed.
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      err = ref->path + ": being removed by the run that saves there";
      ::close(fd);
      continue;
    }
    struct stat locked, named;
    if (::fstat(fd, &locked) != 0 || ::stat(ref->path.c_str(), &named) != 0 ||
        locked.st_ino != named.st_ino || locked.st_dev != named.st_dev) {
      err = ref->path + ": removed while it was being opened (another run saves here)";
      ::close(fd);
      continue;
    }
    held->fd = fd;
    return "";
  }
  return err;
}

} // namespace

std::string fsdp::checkpoint::agree(runtime::Communicator &comm, const std::string &mine,
                                    const std::function<void()> &cleanUp,
                                    const std::string &stopped) {
  double failed = mine.empty() ? 0 : 1;
  if (!comm.allReduceScalar(runtime::Group::World, &failed))
    return stopped + ": " + comm.error();
  if (failed == 0)
    return "";
  if (comm.rank() == 0)
    cleanUp();
  double none = 0;
  bool cleaned = comm.allReduceScalar(runtime::Group::World, &none);
  if (!mine.empty())
    return mine;
  if (cleaned) // released only by the failed rank's abort
    comm.allReduceScalar(runtime::Group::World, &none);
  return stopped + ": " + comm.error();
}

std::string fsdp::checkpoint::checkFiniteState(const program::Program &p,
                                               runtime::Communicator &comm, const char *arena,
                                               int64_t step, bool moments, int shardMember,
                                               const std::string &what, const char *host) {
  // (kind, unit, flat element) of this rank's first; INT64_MAX: none.
  int64_t mine[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
  bool inFirstGroup = comm.dpRank() < p.shardSize; // of each tp rank's pieces
  for (int kind = 0; inFirstGroup && kind < (moments ? 3 : 1) && mine[0] == INT64_MAX; ++kind)
    for (size_t ui = 0; ui < p.units.size() && mine[0] == INT64_MAX; ++ui) {
      const auto &u = p.units[ui];
      const char *x8 = kind == 0   ? p.paramShard(u, arena, host)
                       : kind == 1 ? p.momentsBase(arena, host) + u.expAvgOffset
                                   : p.momentsBase(arena, host) + u.expAvgSqOffset;
      const float *x = reinterpret_cast<const float *>(x8);
      for (int64_t j = 0; j < u.shardNumel; ++j)
        if (!std::isfinite(x[j])) {
          mine[0] = kind;
          mine[1] = (int64_t)ui;
          mine[2] = shardMember * u.shardNumel + j;
          break;
        }
    }
  std::vector<int64_t> all(size_t(comm.worldSize()) * 3);
  if (!comm.allGather(runtime::Group::World, mine, all.data(), sizeof mine))
    return what + " not written: " + comm.error();
  int64_t first[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
  for (int r = 0; r < comm.worldSize(); ++r)
    if (std::lexicographical_compare(&all[r * 3], &all[r * 3 + 3], first, first + 3))
      std::copy(&all[r * 3], &all[r * 3 + 3], first);
  if (first[0] == INT64_MAX)
    return "";
  const auto &u = p.units[first[1]];
  std::string name = "(padding of unit " + u.name + ")";
  int64_t element = first[2];
  for (const auto &prm : u.params)
    if (first[2] >= prm.offset && first[2] < prm.offset + prm.numel) {
      name = "'" + prm.name + "'";
      element = first[2] - prm.offset;
    }
  const char *kinds[3] = {"parameter ", "exp_avg of ", "exp_avg_sq of "};
  return "step " + std::to_string(step) + ": " + kinds[first[0]] + name + " holds a value " +
         "that is not finite (element " + std::to_string(element) + "): the run stops here, " +
         "and no " + what + " of this state is written";
}

//===----------------------------------------------------------------------===//
// The --save folder
//===----------------------------------------------------------------------===//

CheckpointDir::~CheckpointDir() {
  if (fd >= 0)
    ::close(fd); // releases the lock
}

std::string fsdp::checkpoint::CheckpointDir::open(const std::string &dir,
                                                  const std::string &resumeFrom,
                                                  std::unique_ptr<CheckpointDir> *out) {
  std::string err = checkOutputDirectory("--save", dir);
  if (!err.empty())
    return err;
  if (!isDirectory(dir)) {
    err = makeDirectory(dir);
    if (!err.empty())
      return "--save " + err;
  }
  std::unique_ptr<CheckpointDir> d(new CheckpointDir());
  std::string lockPath = dir + "/" + kLockName;
  d->fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (d->fd < 0)
    return "--save " + lockPath + ": cannot open the lock: " + std::strerror(errno);
  if (::flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    char holder[256] = {0};
    ssize_t n = ::pread(d->fd, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, size_t(n)) : std::string();
    while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
      who.pop_back();
    if (e == EWOULDBLOCK)
      return "--save " + dir + ": in use by another run (" + lockPath + " is locked" +
             (who.empty() ? std::string("") : " by " + who) + ")";
    return "--save " + lockPath + ": cannot lock: " + std::strerror(e);
  }
  char host[128] = {0};
  ::gethostname(host, sizeof host - 1);
  std::string me = "process " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(d->fd, 0) != 0 || ::pwrite(d->fd, me.data(), me.size(), 0) != (ssize_t)me.size())
    return "--save " + lockPath + ": cannot write: " + std::strerror(errno);
  // What failed saves and removals left (never visible as checkpoints).
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    int64_t step = 0;
    size_t dot = name.rfind('.');
    std::string suffix = dot == std::string::npos ? "" : name.substr(dot);
    if ((suffix == ".tmp" || suffix == ".removing") && parseStepName(name.substr(0, dot), &step)) {
      err = removeTree(entry.path().string());
      if (!err.empty())
        return "--save " + err;
    }
  }
  if (ec)
    return "--save " + dir + ": cannot list: " + ec.message();
  std::vector<CheckpointRef> existing;
  err = listCheckpoints(dir, &existing);
  if (!err.empty())
    return "--save " + err;
  if (!existing.empty()) {
    bool same = false;
    if (!resumeFrom.empty()) {
      std::error_code e1;
      CheckpointRef from;
      same = std::filesystem::equivalent(dir, resumeFrom, e1) ||
             (resolveCheckpoint(resumeFrom, &from).empty() &&
              std::filesystem::equivalent(dir, parentOf(from.path), e1));
    }
    if (!same)
      return "--save " + dir + ": already holds checkpoints (the newest " + existing.back().path +
             "); resume from it with --resume " + dir + ", or save to another folder";
  }
  *out = std::move(d);
  return "";
}

std::string fsdp::checkpoint::checkpointPath(const std::string &dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "/step-%08lld", (long long)step);
  return dir + name;
}

std::string fsdp::checkpoint::listCheckpoints(const std::string &dir,
                                              std::vector<CheckpointRef> *out) {
  out->clear();
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    int64_t step = 0;
    std::string name = entry.path().filename().string();
    if (parseStepName(name, &step) && isDirectory(entry.path().string()))
      out->push_back({dir + "/" + name, step});
  }
  if (ec)
    return dir + ": cannot list: " + ec.message();
  std::sort(out->begin(), out->end(),
            [](const CheckpointRef &a, const CheckpointRef &b) { return a.step < b.step; });
  return "";
}

std::string fsdp::checkpoint::resolveCheckpoint(const std::string &path, CheckpointRef *out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return path + ": no checkpoint here (" + std::strerror(errno) + ")";
  if (!S_ISDIR(st.st_mode))
    return path + ": not a checkpoint folder";
  if (::stat((path + "/meta.json").c_str(), &st) == 0) {
    Meta m;
    std::string err = readMeta(path, m);
    if (!err.empty())
      return err;
    *out = {path, m.step};
    return "";
  }
  // A listing taken while another run renames in a new checkpoint and an
  // old one out may see neither: an empty listing is taken again.
  std::vector<CheckpointRef> all;
  for (int attempt = 0; attempt < 4 && all.empty(); ++attempt) {
    if (attempt > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::string err = listCheckpoints(path, &all);
    if (!err.empty())
      return err;
  }
  if (all.empty())
    return path + ": holds no complete checkpoint (no step-NNNNNNNN folder)";
  *out = all.back();
  return "";
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

std::string fsdp::checkpoint::saveCheckpoint(const std::string &dir, int64_t keep,
                                             const program::Program &p, runtime::Communicator &comm,
                                             char *arena, int64_t step, int64_t globalBatch,
                                             const RunRecord &record, char *host) {
  std::string final = checkpointPath(dir, step), tmp = final + ".tmp";
  auto removeTmp = [&] { removeTree(tmp); };
  bool rank0 = comm.rank() == 0;
  // 0. Nothing that is not finite is saved (and so no older checkpoint is
  // removed for it).
  std::string err = checkFiniteState(p, comm, arena, step, /*moments=*/true,
                                     comm.memberIndex(runtime::Group::Shard), "checkpoint", host);
  if (!err.empty())
    return err;
  // 1. The temporary folder (a leftover of an earlier failure removed).
  std::string mine;
  if (rank0) {
    mine = removeTree(tmp);
    if (mine.empty())
      mine = makeDirectory(tmp);
  }
  err = agree(comm, mine, removeTmp);
  if (!err.empty())
    return err;
  // 2. Shard group 0 holds one copy of everything (under tensor
  // parallelism, of each tp rank's pieces): each member its file.
  mine.clear();
  if (comm.dpRank() < p.shardSize) {
    int64_t file = (comm.rank() % p.tp) * p.shardSize + comm.memberIndex(runtime::Group::Shard);
    mine = writeShard(tmp + "/" + shardName(file), p, arena, host, step, file);
  }
  err = agree(comm, mine, removeTmp);
  if (!err.empty())
    return err;
  // 3. meta.json, the folder made durable, then visible in one rename; only
  // then are the oldest beyond `keep` removed.
  mine.clear();
  if (rank0) {
    mine =
        writeFileDurable(tmp + "/meta.json", metaOf(p, step, globalBatch, record).dump(1) + "\n");
    if (mine.empty())
      mine = syncDirectory(tmp);
    if (mine.empty())
      mine = renameDurable(tmp, final);
    std::vector<CheckpointRef> all;
    if (mine.empty())
      mine = listCheckpoints(dir, &all);
    for (size_t i = 0; mine.empty() && i + keep < all.size(); ++i) {
      // A run resuming from it holds it shared (resolveAndHold): it stays,
      // and a later save removes it.
      int fd = ::open(all[i].path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) {
        mine = all[i].path + ": cannot open: " + std::strerror(errno);
        break;
      }
      // Held by a reader: kept. A file system without flock(2) (EBADF,
      // ENOLCK, EOPNOTSUPP) removes as before the lock existed.
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        ::close(fd);
        continue;
      }
      // Out of sight first, so that a crash never leaves half a checkpoint
      // under a checkpoint's name.
      std::string gone = all[i].path + ".removing";
      mine = renameDurable(all[i].path, gone);
      ::close(fd);
      if (mine.empty())
        mine = removeTree(gone);
    }
  }
  return agree(comm, mine, removeTmp);
}

//===----------------------------------------------------------------------===//
// Loading, resharded
//===----------------------------------------------------------------------===//

std::string fsdp::checkpoint::loadCheckpoint(const std::string &path, const program::Program &p,
                                             int shardMember, int tpRank, int64_t globalBatch,
                                             char *arena, int64_t *step, char *host) {
  Meta m;
  std::string err = readMeta(path, m);
  if (!err.empty())
    return err;
  const std::string meta = path + "/meta.json";
  if (m.globalBatch != globalBatch)
    return meta + ": 'global_batch' is " + std::to_string(m.globalBatch) +
           " sequences, but this run's is " + std::to_string(globalBatch) +
           " (micro-batch x ranks x --grad-accum); resume with the same global batch";
  // The same model: the same parameters with the same shapes.
  size_t matched = 0;
  for (const auto &u : p.units)
    for (const auto &prm : u.params) {
      auto it = m.params.find(prm.name);
      if (it == m.params.end())
        return meta + ": holds no parameter '" + prm.name + "', which this plan's model has";
      if (it->second.shape != prm.wholeShape())
        return meta + ": parameter '" + prm.name + "' was saved with shape " +
               shapeText(it->second.shape) + ", but this plan's model has " +
               shapeText(prm.wholeShape());
      ++matched;
    }
  if (matched != m.params.size())
    for (const auto &[name, s] : m.params) {
      bool found = false;
      for (const auto &u : p.units)
        for (const auto &prm : u.params)
          found = found || prm.name == name;
      if (!found)
        return meta + ": holds parameter '" + name + "', which this plan's model does not have";
    }
  // The same parameters can make another model (llama and mistral, another
  // number of heads, another eps): the rest of the identity.
  err = compareIdentity(path, m.identity, modelIdentity(p));
  if (!err.empty())
    return err;
  std::map<int64_t, std::unique_ptr<ShardReader>> readers;
  auto reader = [&](int64_t member, ShardReader **r) -> std::string {
    auto &slot = readers[member];
    if (!slot) {
      slot = std::make_unique<ShardReader>();
      std::string e = slot->open(path + "/" + shardName(member), m, member);
      if (!e.empty()) {
        readers.erase(member);
        return e;
      }
    }
    *r = slot.get();
    return "";
  };
  // The whole checkpoint before any byte of it is used: shard member 0
  // checks every file's header, the others those they read.
  for (int64_t member = 0; shardMember == 0 && member < m.members; ++member) {
    ShardReader *r = nullptr;
    err = reader(member, &r);
    if (!err.empty())
      return err;
  }
  // Parameters, then exp_avg, then exp_avg_sq: each file read in order.
  for (int kind = 0; kind < 3; ++kind)
    for (const auto &u : p.units) {
      float *dst =
          reinterpret_cast<float *>(kind == 0   ? p.paramShard(u, arena, host)
                                    : kind == 1 ? p.momentsBase(arena, host) + u.expAvgOffset
                                                : p.momentsBase(arena, host) + u.expAvgSqOffset);
      std::memset(dst, 0, size_t(u.shardNumel * 4)); // the padding past the last parameter
      int64_t base = shardMember * u.shardNumel;
      for (const auto &prm : u.params) {
        int64_t lo = std::max(base, prm.offset),
                hi = std::min(base + u.shardNumel, prm.offset + prm.numel);
        const SavedParam &s = m.params.at(prm.name);
        int64_t oldShard = m.shardNumel[s.unit], oldMembers = m.members / m.tp;
        // Element e of this rank's piece is element w of the whole
        // parameter, element `at` of the saved piece k, held by the first
        // saved tp rank of those holding k, at `at` in its unit: in the
        // shard of member (s.offset + at) / oldShard.
        auto place = [&](int64_t e, int64_t *file) {
          int64_t k = 0, w = prm.wholeElement(e, tpRank, p.tp);
          int64_t flat = s.offset + s.cut.pieceElement(w, &k);
          *file = k * (m.tp / s.cut.tpPieces) * oldMembers + flat / oldShard;
          return flat;
        };
        bool plain = !prm.isCut() && !s.cut.isCut();
        for (int64_t e = lo - prm.offset; e < hi - prm.offset;) {
          int64_t file = 0, flat = place(e, &file), member = flat / oldShard;
          int64_t n = std::min(hi - prm.offset - e, (member + 1) * oldShard - flat);
          // A run of elements that are a run in the saved shard.
          if (!plain)
            for (int64_t j = 1, f = 0; j < n; ++j)
              if (place(e + j, &f) != flat + j || f != file) {
                n = j;
                break;
              }
          ShardReader *r = nullptr;
          err = reader(file, &r);
          if (err.empty())
            err = r->read(m.unitStart[s.unit] + (kind * oldShard + flat - member * oldShard) * 4,
                          n * 4, reinterpret_cast<char *>(dst + (prm.offset + e - base)));
          if (!err.empty())
            return err;
          e += n;
        }
      }
    }
  *step = m.step;
  return "";
}

std::string fsdp::checkpoint::resumeCheckpoint(const std::string &path, const program::Program &p,
                                               runtime::Communicator &comm, int64_t globalBatch,
                                               char *arena, int64_t *step, char *host) {
  // Rank 0 chooses and holds the checkpoint; every rank reads that one.
  HeldCheckpoint held;
  CheckpointRef ref;
  std::string mine;
  char name[64] = {0}; // the chosen folder's name in `path`; empty: `path` itself
  if (comm.rank() == 0) {
    mine = resolveAndHold(path, &ref, &held);
    if (mine.empty() && ref.path != path) {
      std::string leaf = ref.path.substr(ref.path.rfind('/') + 1);
      std::snprintf(name, sizeof name, "%s", leaf.c_str());
    }
  }
  std::string err = agree(comm, mine, [] {}, "checkpoint not read");
  if (!err.empty())
    return err;
  std::vector<char> names(size_t(comm.worldSize()) * sizeof name);
  if (!comm.allGather(runtime::Group::World, name, names.data(), sizeof name))
    return "checkpoint not read: " + comm.error();
  std::string chosen = names[0] ? path + "/" + std::string(names.data()) : path;
  mine = loadCheckpoint(chosen, p, comm.memberIndex(runtime::Group::Shard),
                        comm.rank() % comm.tpSize(), globalBatch, arena, step, host);
  // Held until every rank has read it.
  return agree(comm, mine, [] {}, "checkpoint not read");
}

std::string fsdp::checkpoint::readRunRecord(const std::string &path, RunRecord *out) {
  std::string text, file = path + "/meta.json";
  *out = RunRecord();
  if (std::string err = support::readRegularFile(file, support::kMaxJsonBytes, "checkpoint", &text);
      !err.empty())
    return err;
  json meta = json::parse(text, nullptr, false);
  if (!meta.is_object())
    return file + ": not JSON";
  out->hasSampling = meta.contains("sampling");
  if (out->hasSampling) {
    const json &s = meta["sampling"];
    if (!s.is_object() || !s.contains("shuffle") || !s["shuffle"].is_boolean() ||
        !s.contains("seed") || !s["seed"].is_number_unsigned() || !s.contains("tokens") ||
        !s["tokens"].is_number_integer())
      return file + ": sampling: expected {\"shuffle\": bool, \"seed\": n, \"tokens\": n}";
    out->sampling.shuffle = s["shuffle"];
    out->sampling.seed = s["seed"];
    out->sampling.tokens = s["tokens"];
  }
  out->hasSettings = meta.contains("training");
  if (!out->hasSettings)
    return "";
  const json &t = meta["training"];
  if (!t.is_object())
    return file + ": training: expected an object of the run's settings";
  Settings &st = out->settings;
  auto number = [&](const char *key, double *to) {
    if (!t.contains(key) || !t[key].is_number() || !std::isfinite(t[key].get<double>()))
      return file + ": training." + key + ": expected a finite number";
    *to = t[key].get<double>();
    return std::string();
  };
  auto integer = [&](const char *key, int64_t lo, int64_t *to) {
    if (!t.contains(key) || !t[key].is_number_integer() || t[key].get<int64_t>() < lo)
      return file + ": training." + key + ": expected an integer of at least " + std::to_string(lo);
    *to = t[key].get<int64_t>();
    return std::string();
  };
  std::string err;
  for (auto [key, to] : {std::pair<const char *, double *>{"lr", &st.lr},
                         {"min_lr", &st.minLr},
                         {"beta1", &st.beta1},
                         {"beta2", &st.beta2},
                         {"eps", &st.eps},
                         {"weight_decay", &st.weightDecay},
                         {"clip_grad_norm", &st.clipGradNorm}})
    if (err.empty())
      err = number(key, to);
  for (auto [key, lo, to] :
       {std::tuple<const char *, int64_t, int64_t *>{"warmup_steps", 0, &st.warmupSteps},
        {"steps", 1, &st.steps},
        {"grad_accum", 1, &st.gradAccum},
        {"mask_token_id", -1, &st.maskTokenId}})
    if (err.empty())
      err = integer(key, lo, to);
  if (!err.empty())
    return err;
  if (!t.contains("seed") || !t["seed"].is_number_unsigned())
    return file + ": training.seed: expected an integer of at least 0";
  st.seed = t["seed"];
  if (!t.contains("lr_schedule") || !t["lr_schedule"].is_string() ||
      (t["lr_schedule"] != "constant" && t["lr_schedule"] != "linear" &&
       t["lr_schedule"] != "cosine"))
    return file + ": training.lr_schedule: expected constant, linear or cosine";
  st.lrSchedule = t["lr_schedule"];
  return "";
}
