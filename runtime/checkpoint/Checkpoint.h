//===- Checkpoint.h - sharded checkpoints that reshard on load ---*- C++ -*-===//
//
// A checkpoint folder DIR (fsdp-run --save DIR) holds, in the layout of docs/checkpoint-format.md:
//   DIR/lock                   the run that saves here holds flock(2) on it
//   DIR/step-NNNNNNNN/         one complete checkpoint after step N:
//       meta.json              the step, the global batch, the model's
//                              identity, every parameter's place in the units'
//                              flat layout, each shard file's size and header
//                              CRC, and a CRC-32 of itself
//       shard-MMMMM.bin        shard member M's parameter, exp_avg and
//                              exp_avg_sq shards, unit by unit, with a CRC-32
//                              of every block
//   DIR/step-NNNNNNNN.tmp/     a save in progress (removed if it fails)
// A checkpoint becomes visible under its name only when complete (everything
// in it fsynced, then one rename). It loads under any plan of the same model:
// each rank reads, from the shard files, only the byte ranges of its new
// shards (resharding).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define FSDP_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/Communicator.h"
#include "runtime/Program.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fsdp::checkpoint {

/// The --save folder of a run, created (not its parents) and locked by the
/// process of rank 0 for the life of the run.
class CheckpointDir {
public:
  ~CheckpointDir();
  CheckpointDir(const CheckpointDir &) = delete;
  CheckpointDir &operator=(const CheckpointDir &) = delete;

  /// Creates `dir` if missing, takes its lock (another run holding it: an
  /// error naming that run's process) and removes what failed saves left.
  /// A folder that already holds checkpoints is refused unless the run
  /// resumes from it (`resumeFrom` names the same folder).
  static std::string open(const std::string &dir, const std::string &resumeFrom,
                          std::unique_ptr<CheckpointDir> *out);

private:
  CheckpointDir() = default;
  int fd = -1;
};

struct CheckpointRef {
  std::string path; // DIR/step-NNNNNNNN
  int64_t step = 0;
};

/// The complete checkpoints in `dir`, oldest first.
std::string listCheckpoints(const std::string &dir, std::vector<CheckpointRef> *out);

/// What --resume PATH names: PATH itself when it is one checkpoint (it holds
/// meta.json), else the newest complete checkpoint in PATH; an error naming
/// PATH when there is none.
std::string resolveCheckpoint(const std::string &path, CheckpointRef *out);

/// The checkpoint folder of `step` in `dir` (step-NNNNNNNN, 8 digits or more).
std::string checkpointPath(const std::string &dir, int64_t step);

/// Collective over every rank: writes the checkpoint of `step` into `dir`,
/// then removes the oldest complete ones beyond the `keep` newest (one that a
/// resuming run holds stays until a later save). A parameter or Adam moment
/// that is not finite on any rank is an error on every rank naming the step
/// and the first such parameter, and nothing is written or removed. A failure
/// on any rank is an error on every rank (naming the path and the system's
/// reason), and what the save wrote is removed.
/// How the run draws its samples (docs/sampling.md), recorded in meta.json
/// so that a resumed run continues the same order.
struct Sampling {
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t tokens = 0; // the training stream's length (0: images)
};
/// Every setting that shapes training (docs/checkpoint-format.md,
/// `training`), recorded in meta.json so that a resumed run continues the
/// same run: the learning rate's schedule and horizon (`steps`, the run's
/// last step), AdamW's, clipping, the accumulation, the initialisation
/// seed and the masked-LM mask id (-1: not a masked-LM run).
struct Settings {
  double lr = 0, minLr = 0, beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0, clipGradNorm = 0;
  std::string lrSchedule; // constant, linear or cosine
  int64_t warmupSteps = 0, steps = 0, gradAccum = 0, maskTokenId = -1;
  uint64_t seed = 0;
};
/// What a checkpoint records of its run besides the state; `has*`: false
/// for a checkpoint written before fsdp recorded that part.
struct RunRecord {
  Sampling sampling;
  Settings settings;
  bool hasSampling = true, hasSettings = true;
};
std::string saveCheckpoint(const std::string &dir, int64_t keep, const program::Program &p,
                           runtime::Communicator &comm, char *arena, int64_t step,
                           int64_t globalBatch, const RunRecord &record = {}, char *host = nullptr);

/// The run record of the checkpoint folder `path` (one step's); an error
/// names the file and the field.
std::string readRunRecord(const std::string &path, RunRecord *out);

/// `arena` is host memory laid out as the plan's arena; `host` the rank's
/// host pool, which holds the moments under offload (and under offload all
/// the parameter shards; null without offload): Program::momentsBase and
/// paramShard.
///
/// Fills shard member `shardMember`'s parameter, exp_avg and exp_avg_sq
/// shards of `p` (of tp rank `tpRank`'s pieces) in `arena` (zero beyond the parameters) from the
/// checkpoint folder `path`, whatever plan of the same model wrote it, reading only the blocks that
/// hold them (each checked against its CRC). meta.json is checked whole first (its checksum, every
/// offset and size, the model's identity against `p`'s), then the shard headers (member 0: every
/// file's). *step: the steps already taken. The global batch must be the one it was saved with. An
/// error names the file and the field.
std::string loadCheckpoint(const std::string &path, const program::Program &p, int shardMember,
                           int tpRank, int64_t globalBatch, char *arena, int64_t *step,
                           char *host = nullptr);

/// Collective over every rank: what --resume `path` names is chosen by rank
/// 0, held with a shared lock (a run saving there does not remove it while
/// it is read) and read by every rank (loadCheckpoint). An error on any rank
/// is an error on every rank.
std::string resumeCheckpoint(const std::string &path, const program::Program &p,
                             runtime::Communicator &comm, int64_t globalBatch, char *arena,
                             int64_t *step, char *host = nullptr);

/// Every rank's outcome of one stage of a save (a checkpoint's, or the
/// weights'): "" when every rank's `mine` is "". Otherwise rank 0 first
/// runs `cleanUp` (removing what the save wrote; every rank has finished the
/// stage), then a failed rank returns its own error (its caller aborts the
/// world with it) and the others wait for that abort and return it, after
/// `stopped`.
std::string agree(runtime::Communicator &comm, const std::string &mine,
                  const std::function<void()> &cleanUp,
                  const std::string &stopped = "checkpoint not written");

/// Collective: every rank's shards of `p` (the parameters; the Adam moments
/// too when `moments`) checked for a value that is not finite. Every rank
/// learns the first such element of the whole model (in unit order, the
/// parameters before the moments) and returns the same error, naming `step`
/// and saying that no `what` is written, or "".
std::string checkFiniteState(const program::Program &p, runtime::Communicator &comm,
                             const char *arena, int64_t step, bool moments, int shardMember,
                             const std::string &what, const char *host = nullptr);

} // namespace fsdp::checkpoint

#endif
