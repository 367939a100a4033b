//===- Run.cpp - a training run as a front end starts it ------------------===//
//
// See Run.h. The order of the checks is what a user sees first: the backend
// and its flags, the device, the plan, the data, then the outputs; under MPI
// rank 0 speaks for the job where every process fails alike.
//
//===----------------------------------------------------------------------===//
#include "runtime/Run.h"

#include "runtime/Communicator.h"
#include "runtime/DeviceExecutor.h"
#include "runtime/Trainer.h"
#include "runtime/data/Inputs.h"
#include "runtime/io/Files.h"
#include "runtime/weights/Safetensors.h"
#include "runtime/weights/Weights.h"
#include "support/InputFile.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace fsdp;
using namespace fsdp::runtime;

#if !FSDP_HAVE_MPI
// Without MPI in the build the MPI backend is refused before any of these
// is reached; they exist so that run() has one path for every build.
bool fsdp::runtime::initMPI(int *, char ***, int *, int *, double) { return false; }
void fsdp::runtime::finalizeMPI() {}
void fsdp::runtime::abortMPI() {}
std::unique_ptr<Communicator> fsdp::runtime::mpiCommunicator(int, double, int, int) {
  return nullptr;
}
#endif

namespace {

constexpr bool kHaveMpi = FSDP_HAVE_MPI;
constexpr const char *kPluginVariable = "FSDP_NCCL_PLUGIN";

// The number of processes an MPI launcher started, read from the environment
// it gives each (OpenMPI's mpirun, PMIx's prterun, MPICH's hydra): -1 when
// not under a launcher, 0 when under one that does not say how many.
int64_t mpiLauncherSize(int64_t *rank) {
  auto env = [](const char *name) -> const char * {
    const char *v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  *rank = 0;
  for (const char *r : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char *v = env(r)) {
      *rank = std::atoll(v);
      break;
    }
  for (const char *n : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *v = env(n))
      return std::max<int64_t>(std::atoll(v), 0);
  return env("PMIX_RANK") || env("PMIX_NAMESPACE") ? 0 : -1;
}

// The NCCL backend: the library FSDP_NCCL_PLUGIN names (the emulated device
// of tests/cuda-emu, built as lib/libfsdp-nccl-emulated.so), or else
// libfsdp-nccl.so beside this binary. Opened for --backend nccl only, so that
// a CPU run never loads CUDA, cuBLAS or NCCL.
const NcclBackend *loadNcclBackend(std::string &err) {
  std::string path, named;
  if (const char *plugin = std::getenv(kPluginVariable)) {
    if (!*plugin) {
      err = "--backend nccl: FSDP_NCCL_PLUGIN is set but empty (name the plugin's file, or "
            "unset it for " +
            std::string(kNcclBackendLibrary) + " beside fsdp-run)";
      return nullptr;
    }
    // A bare name would be looked for on the library path: a path is meant.
    path = std::strchr(plugin, '/') ? plugin : std::string("./") + plugin;
    named = "FSDP_NCCL_PLUGIN=" + std::string(plugin) + ": ";
  } else {
#if !FSDP_HAVE_NCCL
    err = "--backend nccl: this fsdp-run was built without CUDA/NCCL (configure where the CUDA "
          "toolkit and NCCL are found, or set FSDP_NCCL_PLUGIN to the emulated device's "
          "plugin; see tests/gpu/README.md)";
    return nullptr;
#endif
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = ".";
    if (n > 0) {
      std::string exe(self, size_t(n));
      dir = exe.substr(0, exe.rfind('/'));
    }
    path = dir + "/" + kNcclBackendLibrary;
  }
  void *lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    err = "--backend nccl: " + named + "cannot load " + path + ": " + ::dlerror();
    return nullptr;
  }
  using Entry = const NcclBackend *(*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(lib, kNcclBackendEntry));
  const NcclBackend *backend = entry ? entry() : nullptr;
  if (!backend || backend->version != kNcclBackendVersion) {
    err = "--backend nccl: " + named + path +
          " is not this fsdp-run's NCCL backend (no fsdp_nccl_backend of version " +
          std::to_string(kNcclBackendVersion) + "; rebuild both)";
    return nullptr;
  }
  return backend;
}

bool isMlir(const std::string &path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".mlir") == 0;
}

// What a run reads of a plan before loading it: a regular file within the
// limit on JSON input, nested within the limit (JSON's or MLIR's).
std::string checkPlanFile(const std::string &path) {
  std::string text;
  std::string err = support::readRegularFile(path, support::kMaxJsonBytes, "plan", &text);
  struct stat st;
  if (!err.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
      ::stat((path + "/config.json").c_str(), &st) == 0)
    return err + " (it holds a model's config.json: plan it first, e.g. fsdp-plan " + path +
           "/config.json --world-size 4 -o program.json, then fsdp-run program.json)";
  if (!err.empty())
    return err;
  unsigned line = 0, col = 0;
  err = isMlir(path) ? support::checkMlirDepth(text, &line, &col)
                     : support::checkJsonDepth(text, &line, &col);
  return err.empty() ? err
                     : path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + err;
}

// The data flags against what the program's model takes (its inputs.kind):
// images need --data and --labels (and --eval-labels with --eval-data);
// masked tokens a --mask-token-id below the vocabulary; a flag of another
// kind of input is an error rather than ignored. The files themselves are
// read and checked whole before the first step (data::Inputs::open).
std::string checkInputFlags(const program::Program &p, const std::string &plan, const RunOptions &o,
                            bool maskGiven) {
  using program::InputKind;
  std::string kind = std::string(plan) + "'s inputs are " + program::inputKindName(p.inputKind);
  if (p.inputKind != InputKind::Images) {
    if (!o.labels.empty())
      return "--labels is for a model that takes images; " + kind;
    if (!o.evalLabels.empty())
      return "--eval-labels is for a model that takes images; " + kind;
  }
  if (p.inputKind != InputKind::MaskedTokens && maskGiven)
    return "--mask-token-id is for a masked-LM model (inputs masked_tokens); " + kind;
  if (p.inputKind == InputKind::Images) {
    if (!o.dataDtype.empty())
      return "--data-dtype is for token files; " + kind + " (.npy files say their dtype)";
    if (o.shuffle)
      return "--shuffle is for token files; " + kind +
             " (images are taken in order, sample k the image k mod N)";
    if (o.data.empty())
      return kind + ": give them with --data IMAGES.npy (uint8 [N, " +
             std::to_string(p.image.height) + ", " + std::to_string(p.image.width) + ", " +
             std::to_string(p.image.channels) + "]) and --labels LABELS.npy";
    if (o.labels.empty())
      return "--data " + o.data + " needs its labels: --labels LABELS.npy (int64 or int32 [N])";
    if (!o.evalData.empty() && o.evalLabels.empty())
      return "--eval-data " + o.evalData +
             " needs its labels: --eval-labels LABELS.npy (int64 or int32 [N])";
  }
  if (p.inputKind != InputKind::Images && o.data.empty() && !o.syntheticData)
    return kind + ": give them with --data FILE (fsdp-tokenize writes one), or train on random "
                  "tokens with --synthetic-data";
  if (p.inputKind == InputKind::Images && o.syntheticData)
    return "--synthetic-data is for token models; " + kind;
  if (p.inputKind == InputKind::MaskedTokens) {
    int64_t vocab = p.vocabSize();
    std::string id =
        "--mask-token-id " + std::to_string(o.maskTokenId) + (maskGiven ? "" : " (the default)");
    if (vocab <= 0)
      return id + ": " + plan + " gives no vocabulary (no cross_entropy) to check it against";
    if (o.maskTokenId >= vocab)
      return id + " is outside the model's vocabulary of " + std::to_string(vocab) +
             " tokens (it must be below vocab_size)";
  }
  return "";
}

// Lowers a .mlir plan to its program (*json, a file to remove) with
// fsdp-translate.
std::string lowerMlir(const std::string &plan, const std::string &tool, const RunEvents &events,
                      std::string &json) {
  json = "/tmp/fsdp-run-" + std::to_string(::getpid()) + ".json";
  std::string cannot = "cannot run " + tool + " to lower " + plan; // said by the child
  pid_t pid = fork();
  if (pid == 0) {
    execl(tool.c_str(), tool.c_str(), "--export-program", plan.c_str(), "-o", json.c_str(),
          (char *)nullptr);
    if (events.error)
      events.error(cannot);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return plan + ": could not be lowered to a program";
  return "";
}

// A step's line of --metrics. JSON has no NaN or infinity: a value that is
// not finite is null.
std::string metricsLine(const StepReport &r, double predictedStepS) {
  auto num = [](double v, const char *format) {
    char buf[64];
    if (!std::isfinite(v))
      return std::string("null");
    std::snprintf(buf, sizeof buf, format, v);
    return std::string(buf);
  };
  return "{\"step\": " + std::to_string(r.step) + ", \"loss\": " + num(r.loss, "%.9g") +
         ", \"grad_norm\": " + num(r.gradNorm, "%.9g") + ", \"lr\": " + num(r.lr, "%.9g") +
         (r.evaluated ? ", \"eval_loss\": " + num(r.evalLoss, "%.9g") : "") +
         (r.evaluated && r.evalAccuracy >= 0 ? ", \"eval_accuracy\": " + num(r.evalAccuracy, "%.9g")
                                             : "") +
         ", \"step_time_s\": " + num(r.stepTimeS, "%.6f") +
         ", \"tokens_per_s\": " + num(r.tokensPerS, "%.3f") +
         ", \"samples_per_s\": " + num(r.samplesPerS, "%.3f") +
         (r.mfu > 0 ? ", \"mfu\": " + num(r.mfu, "%.6g") : "") +
         ", \"peak_bytes\": " + std::to_string(r.peakBytes) +
         ", \"predicted_peak_bytes\": " + std::to_string(r.predictedPeakBytes) +
         ", \"outside_arena_bytes\": " + std::to_string(r.outsideArenaBytes) +
         (r.predictedHostPeakBytes > 0
              ? ", \"host_peak_bytes\": " + std::to_string(r.hostPeakBytes) +
                    ", \"predicted_host_peak_bytes\": " + std::to_string(r.predictedHostPeakBytes)
              : "") +
         (r.epochSamples ? ", \"epoch\": " + std::to_string(r.epoch) +
                               ", \"epoch_position\": " + std::to_string(r.epochPosition) +
                               ", \"epoch_samples\": " + std::to_string(r.epochSamples)
                         : "") +
         ", \"predicted_step_time_s\": " + num(predictedStepS, "%.6f") + "}\n";
}

// A number as people write it (%g with 9 digits).
std::string shortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A resumed run continues the run its checkpoint recorded
// (docs/checkpoint-format.md, `training` and `sampling`): a setting whose
// flag was not given takes the checkpoint's value; a flag given with
// another value is applied and said as a change (`notes`). The sampling
// order may not change: a --shuffle that differs from the recorded one is
// an error naming both. The stream's size is checked against the recorded
// one once the data is open (the trainer's resume).
std::string resumeRun(RunOptions *o, const program::Program &p, std::vector<std::string> *notes) {
  if (o->resume.empty())
    return "";
  checkpoint::CheckpointRef from;
  checkpoint::RunRecord saved;
  // A run saving into the folder may rotate the newest away between its
  // choice and the read (--keep): then choose again, as the resume does.
  for (int attempt = 0;; ++attempt) {
    if (!checkpoint::resolveCheckpoint(o->resume, &from).empty())
      return ""; // a checkpoint that does not resolve is checkOutputs' to report
    std::string err = checkpoint::readRunRecord(from.path, &saved);
    if (err.empty())
      break;
    struct stat st;
    if (attempt >= 100 || from.path == o->resume || ::stat(from.path.c_str(), &st) == 0)
      return err;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (saved.hasSampling) {
    o->resumeTokens = saved.sampling.tokens;
    auto name = [](bool shuffle, uint64_t seed) {
      return shuffle ? "--shuffle " + std::to_string(seed) : std::string("the sequential order");
    };
    if (o->shuffle && (!saved.sampling.shuffle || saved.sampling.seed != o->shuffleSeed))
      return o->resume + ": its run drew samples in " +
             name(saved.sampling.shuffle, saved.sampling.seed) + ", this one asks for " +
             name(true, o->shuffleSeed) +
             ": a resumed run continues its order (drop --shuffle, or start a new run)";
    if (!o->shuffle && saved.sampling.shuffle) {
      o->shuffle = true;
      o->shuffleSeed = saved.sampling.seed;
      notes->push_back("resuming with --shuffle " + std::to_string(saved.sampling.seed) + ", as " +
                       from.path + " was saved");
    }
  }
  if (!saved.hasSettings) {
    notes->push_back(from.path +
                     " records no training settings (it was saved before fsdp recorded them): "
                     "the flags given, and their defaults, apply");
    return "";
  }
  const checkpoint::Settings &t = saved.settings;
  auto shown = [](double v) { return shortNumber(v); };
  // One setting: taken from the checkpoint unless its flag was given; a
  // given value that differs is a change, said.
  auto take = [&](const char *flag, auto *value, auto savedValue, auto show) {
    if (!o->given.count(flag))
      *value = savedValue;
    else if (*value != savedValue)
      notes->push_back(std::string(flag + 2) + ": " + show(savedValue) + " in " + from.path + ", " +
                       show(*value) + " now");
  };
  auto integer = [](auto v) { return std::to_string(v); };
  take("--lr", &o->lr, t.lr, shown);
  take("--min-lr", &o->minLr, t.minLr, shown);
  take("--beta1", &o->beta1, t.beta1, shown);
  take("--beta2", &o->beta2, t.beta2, shown);
  take("--eps", &o->eps, t.eps, shown);
  take("--weight-decay", &o->weightDecay, t.weightDecay, shown);
  take("--clip-grad-norm", &o->clipGradNorm, t.clipGradNorm, shown);
  take("--lr-schedule", &o->lrSchedule, *parseSchedule(t.lrSchedule),
       [](RunOptions::Schedule s) { return std::string(scheduleName(s)); });
  take("--warmup-steps", &o->warmupSteps, t.warmupSteps, integer);
  take("--steps", &o->steps, t.steps, integer);
  take("--seed", &o->seed, t.seed, integer);
  if (p.inputKind == program::InputKind::MaskedTokens && t.maskTokenId >= 0) {
    take("--mask-token-id", &o->maskTokenId, t.maskTokenId, integer);
    o->maskTokenIdGiven = true; // the checkpoint's, not the sidecar's
  }
  // The accumulation is the plan's (or, for a program that does not record
  // it, the flag's); the checkpoint's is taken only where neither says. A
  // plan of another world size accumulates differently for the same global
  // batch, which the load checks.
  if (p.gradAccum == 0 && !o->given.count("--grad-accum"))
    o->gradAccum = t.gradAccum;
  else if (o->gradAccum != t.gradAccum)
    notes->push_back("grad-accum: " + std::to_string(t.gradAccum) + " in " + from.path + ", " +
                     std::to_string(o->gradAccum) + " now (" +
                     (p.gradAccum ? "the plan's" : "--grad-accum") +
                     "; the global batch must stay the checkpoint's)");
  return "";
}

// The checks of rank 0's process before the first step: each output file's
// folder exists and is writable (a --save-weights DIR: DIR, or its parent
// when DIR is to be made); --save is created and locked for the life of the
// run (*saveDir). The --weights are checked against the model here too, so
// that an error is said once.
std::string checkOutputs(const program::Program &p, const RunRequest &req, const RunEvents &events,
                         std::unique_ptr<checkpoint::CheckpointDir> *saveDir) {
  const RunOptions &o = req.options;
  std::string err;
  for (auto [flag, path] : {std::pair<const char *, const std::string *>{"--metrics", &req.metrics},
                            {"--trace", &o.trace}})
    if (err.empty() && !path->empty())
      err = io::checkOutputFile(flag, *path);
  if (err.empty() && !o.saveWeights.empty())
    err = weights::isWeightsFolder(o.saveWeights)
              ? io::checkOutputDirectory("--save-weights", o.saveWeights)
              : io::checkOutputFile("--save-weights", o.saveWeights);
  // A folder is for from_pretrained, which needs the model's config.json:
  // only a program planned from an HF config has one to write.
  if (err.empty() && !o.saveWeights.empty() && weights::isWeightsFolder(o.saveWeights) &&
      p.hfConfig.empty() && events.warning)
    events.warning("--save-weights " + o.saveWeights + ": the program carries no HF config (" +
                   p.modelName +
                   " was planned from a JSON or MLIR graph, not a config.json), so the folder "
                   "gets the weights and their index but no config.json; transformers' "
                   "from_pretrained needs one beside them");
  if (err.empty() && !o.weights.empty() && o.resume.empty()) { // resuming reads no weights
    weights::WeightSource weights;
    err = weights.open(o.weights);
    std::vector<std::string> notes = weights.warnings();
    if (err.empty())
      err = weights::checkWeights(p, weights, &notes);
    for (const std::string &note : notes)
      if (events.warning)
        events.warning(note);
  }
  checkpoint::CheckpointRef from;
  if (err.empty() && !o.resume.empty()) {
    err = checkpoint::resolveCheckpoint(o.resume, &from);
    if (err.empty() && events.resuming)
      events.resuming(from);
    if (err.empty() && from.step > o.steps)
      err = o.resume + ": its checkpoint is of step " + std::to_string(from.step) +
            ", past --steps " + std::to_string(o.steps);
    else if (err.empty() && from.step == o.steps && !o.given.count("--steps"))
      err = o.resume + ": its checkpoint is of step " + std::to_string(from.step) +
            ", the last of its run: give --steps above " + std::to_string(from.step) +
            " to train on";
  }
  if (err.empty() && !o.save.empty())
    err = checkpoint::CheckpointDir::open(o.save, o.resume, saveDir);
  return err;
}

} // namespace

const char *fsdp::runtime::backendName(BackendKind kind) {
  switch (kind) {
  case BackendKind::Threads:
    return "threads";
  case BackendKind::Mpi:
    return "mpi";
  case BackendKind::Nccl:
    return "nccl";
  }
  return "?";
}

std::optional<BackendKind> fsdp::runtime::parseBackend(const std::string &name) {
  for (BackendKind k : {BackendKind::Threads, BackendKind::Mpi, BackendKind::Nccl})
    if (name == backendName(k))
      return k;
  return std::nullopt;
}

RunResult fsdp::runtime::run(const RunRequest &given, const RunEvents &events) {
  // What the run resolves (a resumed run's sampling) changes its copy.
  RunRequest req = given;
  RunOptions &o = req.options;
  RunResult res;
  int mpiRank = 0, mpiSize = 1;
  bool usingMpi = false;
  // Every return: MPI, once started, is finalized.
  auto finish = [&]() {
    if (usingMpi)
      finalizeMPI();
    return std::move(res);
  };
  // An error, said by this process when `speak` (else a peer says it).
  auto say = [&](const std::string &why, bool speak = true) {
    res.status = 1;
    res.error = why;
    if (speak && events.error)
      events.error(why);
  };
  auto fail = [&](const std::string &why, bool speak = true) {
    say(why, speak);
    return finish();
  };
  auto startMpi = [&]() {
    usingMpi = true;
    return initMPI(nullptr, nullptr, &mpiRank, &mpiSize, o.timeoutS);
  };

  // Under an MPI launcher with several processes each one runs this: the
  // threads backend would run the whole job once per process.
  BackendKind backend = req.backend.value_or(BackendKind::Threads);
  int64_t launcherRank = 0, launcherSize = mpiLauncherSize(&launcherRank);
  if (launcherSize == 0 || launcherSize > 1) {
    std::string started = launcherSize > 1
                              ? "as one of " + std::to_string(launcherSize) + " processes"
                              : "under a PMIx launcher";
    if (req.backend == BackendKind::Threads)
      return fail("--backend threads: fsdp-run was started by an MPI launcher " + started +
                      ", and each would run the whole job; use --backend mpi (the default "
                      "under mpirun), or start one process",
                  launcherRank == 0);
    if (!req.backend && !kHaveMpi)
      return fail("fsdp-run was started by an MPI launcher " + started +
                      ", but this fsdp-run was built without MPI: each would run the whole "
                      "job; start one process",
                  launcherRank == 0);
    if (!req.backend)
      backend = BackendKind::Mpi;
  }
  res.backend = backend;
  // The file bootstrap of --backend nccl: both flags or neither.
  if ((req.rank >= 0 || !req.ncclIdFile.empty()) && backend != BackendKind::Nccl)
    return fail("--rank and --nccl-id-file are for --backend nccl");
  if (!req.ncclIdFile.empty() && req.rank < 0)
    return fail("--nccl-id-file needs --rank R, this process's rank");
  if (req.rank >= 0 && req.ncclIdFile.empty())
    return fail("--rank needs --nccl-id-file PATH, through which the ranks find each other "
                "(under mpirun, leave both out)");
  if (!kHaveMpi && backend == BackendKind::Mpi)
    return fail("--backend mpi: this fsdp-run was built without MPI");
  // The plugin is the NCCL backend's: set for another, it says the run was
  // meant for the device (a forgotten --backend nccl), which is not ignored.
  if (const char *plugin = std::getenv(kPluginVariable); plugin && backend != BackendKind::Nccl)
    return fail(std::string(kPluginVariable) + " is set ('" + plugin + "'), but --backend " +
                    backendName(backend) +
                    " loads no NCCL plugin: run with --backend nccl, or unset " + kPluginVariable,
                launcherRank == 0);
  const NcclBackend *ncclBackend = nullptr;
  if (backend == BackendKind::Nccl) {
    // Before anything else: without a device there is nothing to run on.
    std::string err;
    ncclBackend = loadNcclBackend(err);
    if (!ncclBackend)
      return fail(err);
    int devices = 0;
    err = ncclBackend->probeCudaDevices(&devices);
    if (!err.empty())
      return fail("--backend nccl: " + err);
  }
  // Under MPI every process is a rank; rank 0 speaks for the job. The nccl
  // backend runs under MPI when the plan has several ranks and no id file is
  // given; that needs the plan's world size, so MPI starts after the plan is
  // read (below).
  const char *noThreads = "MPI does not provide the thread support fsdp-run needs (serialized)";
  if (backend == BackendKind::Mpi && !startMpi())
    return fail(noThreads);

  // The plan: a regular file of bounded size and nesting, checked before
  // anything reads it (a FIFO would block the reader, /dev/zero fill memory).
  if (std::string err = checkPlanFile(req.plan); !err.empty())
    return fail(err, mpiRank == 0);
  std::string programPath = req.plan, tmp;
  if (isMlir(req.plan)) {
    if (std::string err = lowerMlir(req.plan, req.translateTool, events, tmp); !err.empty())
      return fail(err);
    programPath = tmp;
  }
  program::Program p;
  std::string err = program::loadProgram(programPath, p);
  if (!tmp.empty())
    std::remove(tmp.c_str());
  if (!err.empty())
    return fail(err, mpiRank == 0);
  // The plan's accumulation is the run's; a flag may only repeat it.
  if (p.gradAccum > 0) {
    if (o.given.count("--grad-accum") && o.gradAccum != p.gradAccum)
      return fail("--grad-accum " + std::to_string(o.gradAccum) + " contradicts " + req.plan +
                      ", planned with --grad-accum " + std::to_string(p.gradAccum) +
                      " (its memory and predicted time are for that): plan again with "
                      "fsdp-plan --grad-accum " +
                      std::to_string(o.gradAccum) + ", or drop the flag",
                  mpiRank == 0);
    o.gradAccum = p.gradAccum;
  }
  std::vector<std::string> resumeNotes;
  if (std::string why = resumeRun(&o, p, &resumeNotes); !why.empty())
    return fail(why, mpiRank == 0);
  // Tokens a step: counted in int64 by the executors and the progress line.
  if ((__int128)p.microBatch * p.seqLen * p.worldSize * o.gradAccum > ((__int128)1 << 62))
    return fail("--grad-accum " + std::to_string(o.gradAccum) + " makes a step of " +
                    std::to_string(p.microBatch) + " x " + std::to_string(p.seqLen) + " tokens x " +
                    std::to_string(p.worldSize) + " ranks x " + std::to_string(o.gradAccum) +
                    " micro-steps, more tokens than fsdp-run counts (2^62)",
                mpiRank == 0);
  if (std::string why = checkInputFlags(p, req.plan, o, o.maskTokenIdGiven); !why.empty())
    return fail(why, mpiRank == 0);
  if (std::string why = threadsBackendRefuses(p, req.plan);
      backend == BackendKind::Threads && !why.empty())
    return fail(why);
  // Tensor parallelism takes token inputs, masked or not, so far: what it
  // does not do yet is said, not skipped.
  if (p.tp > 1 && p.inputKind == program::InputKind::Images)
    return fail(req.plan + ": a tensor-parallel program (tp " + std::to_string(p.tp) +
                ") takes token inputs only, not yet " + inputKindName(p.inputKind));
  // A program's kernel scratch is its target's (runtime/Scratch.h).
  bool cudaBackend = backend == BackendKind::Nccl;
  if ((p.target == program::Target::Cuda) != cudaBackend)
    return fail(req.plan + ": planned for the " + program::targetName(p.target) +
                    " target, which --backend " + backendName(backend) + " does not run: " +
                    (cudaBackend ? "plan it with a GPU --cluster file (device \"cuda\", "
                                   "e.g. models/hardware/H100-SXM.json)"
                                 : "run it with --backend nccl, or plan it without a GPU "
                                   "--cluster file for the CPU backends"),
                mpiRank == 0);
  if (backend == BackendKind::Mpi && mpiSize != p.worldSize)
    return fail("the plan is for " + std::to_string(p.worldSize) + " ranks, but mpirun started " +
                    std::to_string(mpiSize) + " processes",
                mpiRank == 0);
  // This process's rank: the --rank of the file bootstrap, MPI's, or 0.
  NcclBootstrap boot;
  if (backend == BackendKind::Nccl) {
    boot.worldSize = (int)p.worldSize;
    boot.timeoutS = o.timeoutS;
    if (!req.ncclIdFile.empty()) {
      if (req.rank >= p.worldSize)
        return fail("--rank " + std::to_string(req.rank) + " is outside the plan's " +
                    std::to_string(p.worldSize) + " ranks");
      boot.kind = NcclBootstrap::Kind::File;
      boot.rank = (int)req.rank;
      boot.idFile = req.ncclIdFile;
    } else if (p.worldSize > 1) {
      if (!kHaveMpi)
        return fail("the plan is for " + std::to_string(p.worldSize) +
                    " ranks: start each with --rank R --nccl-id-file PATH (this fsdp-run was "
                    "built without MPI)");
      if (!startMpi())
        return fail(noThreads);
      if (mpiSize != p.worldSize)
        return fail("the plan is for " + std::to_string(p.worldSize) +
                        " ranks: start one process a rank, with mpirun -np " +
                        std::to_string(p.worldSize) +
                        ", or each with --rank R --nccl-id-file PATH (mpirun started " +
                        std::to_string(mpiSize) + ")",
                    mpiRank == 0);
      boot.kind = NcclBootstrap::Kind::Mpi;
      boot.rank = mpiRank;
    }
  }
  res.rank = backend == BackendKind::Nccl ? boot.rank : mpiRank;

  // The threads backend's data (every rank's), read and checked whole before
  // any output is made: a file that does not fit leaves nothing behind. (The
  // other backends' processes read their own, before their first step.)
  data::Inputs threadsInputs;
  if (backend == BackendKind::Threads)
    if (std::string dataErr = threadsInputs.open(p, o); !dataErr.empty())
      return fail(dataErr);
  for (const std::string &note : threadsInputs.warnings)
    if (events.warning)
      events.warning(note);
  if (backend != BackendKind::Threads)
    o.dataWarning = events.warning;
  // Outputs, checked by the process of rank 0. Under MPI a failure here ends
  // every process.
  std::unique_ptr<checkpoint::CheckpointDir> saveDir;
  if (res.rank == 0)
    if (std::string outErr = checkOutputs(p, req, events, &saveDir); !outErr.empty()) {
      say(outErr);
      if (usingMpi && mpiSize > 1)
        abortMPI();
      return finish();
    }
  if (res.rank == 0 && events.notice)
    for (const std::string &note : resumeNotes)
      events.notice(note);
  if (res.rank == 0 && events.warning && o.warmupSteps >= o.steps && o.warmupSteps > 0)
    events.warning("--warmup-steps " + std::to_string(o.warmupSteps) + " is not below --steps " +
                   std::to_string(o.steps) +
                   ": the run ends before the learning rate reaches --lr " +
                   "(its last step takes " + shortNumber(learningRate(o, o.steps)) + ")");
  double predictedStepS = p.predictedMicroStepS * o.gradAccum + p.predictedOptimizerS;
  if (res.rank == 0 && events.started)
    events.started({&p, backend, data::globalBatch(p, o), predictedStepS, &o});
  // --metrics is opened (and truncated) at the first step: only once the
  // inputs have been read and checked.
  std::ofstream metrics;
  auto onStep = [&](const StepReport &r) -> std::string {
    res.last = r;
    if (req.keepReports)
      res.reports.push_back(r);
    if (events.step)
      events.step(r);
    if (req.metrics.empty() || res.rank != 0)
      return std::string();
    if (!metrics.is_open()) {
      metrics.open(req.metrics, std::ios::trunc);
      if (!metrics)
        return req.metrics + ": cannot write the metrics: " + std::strerror(errno);
    }
    metrics << metricsLine(r, predictedStepS);
    metrics.flush();
    if (!metrics)
      return req.metrics + ": cannot write the metrics: " + std::strerror(errno);
    return std::string();
  };
  if (backend == BackendKind::Nccl) {
    err = ncclBackend->runNccl(p, o, boot, onStep);
    if (!err.empty()) {
      say(err);
      // A rank that failed before its communicators existed: its peers may
      // wait in MPI for it (the id's broadcast), so end the job.
      if (usingMpi)
        abortMPI();
      return finish();
    }
  } else if (backend == BackendKind::Mpi) {
    auto comm =
        mpiCommunicator((int)p.shardSize, o.timeoutS, (int)p.reshardAfterForward, (int)p.tp);
    err = runRank(p, o, *comm, onStep);
    comm.reset();
    if (!err.empty()) // the failing rank has aborted the job; this is a peer
      return fail(err);
  } else if (err = runThreads(p, o, onStep, &threadsInputs); !err.empty()) {
    return fail(err);
  }
  if (req.stopHandlers)
    ignoreStopSignals(); // the run has returned: only the exit is left
  // Stopped by a signal: the status is 128 + the signal's number, as a shell
  // reports a process the signal killed, so that a scheduler sees the run
  // did not finish. A signal after the last step's decision: the run is
  // complete, with that status too.
  res.stop = recordedStop();
  if (res.stop.signal)
    res.status = 128 + res.stop.signal;
  else if ((res.lateSignal = stopSignal()))
    res.status = 128 + res.lateSignal;
  if (events.finished)
    events.finished(res);
  return finish();
}
