//===- fsdp-run.cpp - execute a lowered plan and train --------------------===//
//
// fsdp-run PROGRAM.json [options]: runs the program fsdp-plan wrote, on N ranks as
// threads of this process (the default backend), as MPI processes (--backend
// mpi) or on one GPU a rank with NCCL (--backend nccl, where built), and
// reports each step's loss, throughput and measured peak memory beside the
// plan's prediction.
// Links the runtime only: no MLIR. A .mlir plan is lowered by running
// fsdp-translate, found beside this binary.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"
#include "runtime/Blas.h"
#include "runtime/DeviceExecutor.h"
#include "runtime/Executor.h"
#include "runtime/Program.h"
#include "runtime/Signals.h"
#include "runtime/io/Checkpoint.h"
#include "runtime/io/Files.h"
#include "runtime/io/Safetensors.h"
#include "support/InputFile.h"
#include "tools/Version.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <map>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace fsdp;

using runtime::chooseBlasKernels;

static void usage(FILE *to) {
  std::fprintf(
      to, "usage: fsdp-run PROGRAM.json|PLAN.mlir [options]\n"
          "Trains with the program fsdp-plan wrote (a .mlir plan is lowered first).\n"
          "\n"
          "Launch:\n"
          "  --backend threads|mpi|nccl  threads: every rank a thread of this process (the\n"
          "                        default); mpi: one process a rank (mpirun -np N; the default\n"
          "                        under mpirun with more than one process); nccl: one GPU a rank\n"
          "  --timeout SECONDS     the longest wait on a peer (a collective, an event, start-up)\n"
          "                        before every rank stops, naming the ranks that did not arrive\n"
          "                        (default 600; --nccl-timeout is the same flag)\n"
          "  --rank R --nccl-id-file PATH  --backend nccl without mpirun: this process's rank;\n"
          "                        rank 0 writes the NCCL id to PATH, the others wait for it\n"
          "  (environment) FSDP_NCCL_PLUGIN=PATH  --backend nccl loads this library instead of\n"
          "                        libfsdp-nccl.so beside fsdp-run: the emulated device,\n"
          "                        BUILD/lib/libfsdp-nccl-emulated.so (tests/gpu/README.md)\n"
          "Training:\n"
          "  --steps K             optimizer steps (default 1)\n"
          "  --grad-accum A        micro-steps per optimizer step (default 1)\n"
          "  --seed S              initialisation seed when no --weights are given (default 0)\n"
          "  --weights FILE.safetensors|DIR  initial weights with HF names and layouts; DIR:\n"
          "                        an HF checkpoint folder (model.safetensors.index.json and\n"
          "                        its shards, or model.safetensors), or the index itself\n"
          "                        (default: the seeded initialisation)\n"
          "  --data FILE           tokens, flat little-endian (nanoGPT's train.bin); without it,\n"
          "                        synthetic tokens; for a program whose inputs are images, a\n"
          "                        .npy of uint8 [N, height, width, channels]\n"
          "  --labels FILE         images' labels, a .npy of int64 or int32 [N] in [0, classes)\n"
          "  --mask-token-id ID    masked-LM programs: the input of a selected token (default\n"
          "                        103, BERT's [MASK]); below the vocabulary\n"
          "  --data-dtype uint16|uint32  token width of --data and --eval-data (default:\n"
          "                        uint16 when the vocabulary has at most 65536 tokens)\n"
          "  --lr X                AdamW learning rate (default 1e-3)\n"
          "  --beta1 X, --beta2 X  AdamW moment decays (defaults 0.9, 0.95)\n"
          "  --eps X               AdamW epsilon (default 1e-8)\n"
          "  --weight-decay X      decoupled weight decay on parameters of 2+ dims (default 0.1)\n"
          "  --clip-grad-norm X    clip by the global gradient norm (default 0: off)\n"
          "  --lr-schedule constant|linear|cosine  the learning rate after warmup, from --lr\n"
          "                        down to --min-lr over the steps left (default constant)\n"
          "  --warmup-steps W      step t <= W takes lr*t/W (default 0)\n"
          "  --min-lr X            the schedule's last rate (default 0)\n"
          "Evaluation:\n"
          "  --eval-data FILE      held-out tokens (same width as --data), or images; eval_loss\n"
          "                        in --metrics and the progress line\n"
          "  --eval-labels FILE    the labels of --eval-data images (.npy, as --labels)\n"
          "  --eval-every N        evaluate after every N steps (default 0: after the last only)\n"
          "  --eval-batches K      batches an evaluation averages (default 1)\n"
          "Outputs (their folders checked before step 1):\n"
          "  --metrics FILE        JSON lines, one a step: loss, grad_norm, times, peak bytes\n"
          "  --trace FILE          the measured timeline, Chrome trace JSON\n"
          "  --save DIR            sharded checkpoints DIR/step-NNNNNNNN, locked while running\n"
          "  --save-every N        a checkpoint every N steps (default 0: only after the last)\n"
          "  --keep K              the K newest checkpoints kept (default 2)\n"
          "  --resume DIR          continue from DIR's newest checkpoint (any plan of the same\n"
          "                        model and global batch)\n"
          "  --save-weights FILE.safetensors|DIR  full weights with HF names after the last\n"
          "                        step; DIR (a folder, or a path not ending in .safetensors):\n"
          "                        HF shards and their index, as save_pretrained writes them\n"
          "  --max-shard-size SIZE  the largest shard of a --save-weights DIR: 5GB (the\n"
          "                        default; GB = 10^9 bytes, as transformers reads it), 500MB,\n"
          "                        2GiB or bytes; a larger tensor gets a shard of its own\n"
          "  --log-every N         a progress line every N steps (default 1)\n"
          "  --quiet               no progress lines\n"
          "  --help, --version\n"
          "\n"
          "SIGTERM, SIGINT or SIGHUP: every rank finishes its step, the checkpoint of that step\n"
          "is written (with --save), and fsdp-run exits 128 + the signal's number; a second\n"
          "signal stops at once. Under mpirun: --mca odls_base_sigkill_timeout SECONDS\n"
          "(see docs/checkpoint-format.md).\n");
}

// The most steps a run takes (a step counter with a checkpoint's steps before
// it stays far inside int64) and micro-steps a step accumulates.
constexpr uint64_t kMaxCount = uint64_t(1) << 40;
constexpr uint64_t kMaxGradAccum = uint64_t(1) << 20;
// --timeout: beyond a year is no bound (and a deadline must not overflow).
constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;

// The number of processes an MPI launcher started, read from the environment
// it gives each (OpenMPI's mpirun, PMIx's prterun, MPICH's hydra): -1 when
// not under a launcher, 0 when under one that does not say how many.
static int64_t mpiLauncherSize(int64_t *rank) {
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

static int fail(const std::string &msg) {
  std::fprintf(stderr, "fsdp-run: error: %s\n", msg.c_str());
  return 1;
}

// The NCCL backend: the library FSDP_NCCL_PLUGIN names (the emulated device
// of tests/cuda-emu, built as lib/libfsdp-nccl-emulated.so), or else
// libfsdp-nccl.so beside this binary. Opened for --backend nccl only, so that
// a CPU run never loads CUDA, cuBLAS or NCCL.
static const runtime::NcclBackend *loadNcclBackend(std::string &err) {
  std::string path, named;
  if (const char *plugin = std::getenv("FSDP_NCCL_PLUGIN")) {
    if (!*plugin) {
      err = "--backend nccl: FSDP_NCCL_PLUGIN is set but empty (name the plugin's file, or "
            "unset it for " +
            std::string(runtime::kNcclBackendLibrary) + " beside fsdp-run)";
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
    path = dir + "/" + runtime::kNcclBackendLibrary;
  }
  void *lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    err = "--backend nccl: " + named + "cannot load " + path + ": " + ::dlerror();
    return nullptr;
  }
  using Entry = const runtime::NcclBackend *(*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(lib, runtime::kNcclBackendEntry));
  const runtime::NcclBackend *backend = entry ? entry() : nullptr;
  if (!backend || backend->version != runtime::kNcclBackendVersion) {
    err = "--backend nccl: " + named + path +
          " is not this fsdp-run's NCCL backend (no fsdp_nccl_backend of version " +
          std::to_string(runtime::kNcclBackendVersion) + "; rebuild both)";
    return nullptr;
  }
  return backend;
}

// What fsdp-run reads of a plan before loading it: a regular file within
// the limit on JSON input, nested within the limit (JSON's or MLIR's).
static std::string checkPlanFile(const std::string &path) {
  std::string text;
  std::string err = support::readRegularFile(path, support::kMaxJsonBytes, "plan", &text);
  if (!err.empty())
    return err;
  unsigned line = 0, col = 0;
  bool mlir = path.size() > 5 && path.compare(path.size() - 5, 5, ".mlir") == 0;
  err = mlir ? support::checkMlirDepth(text, &line, &col)
             : support::checkJsonDepth(text, &line, &col);
  return err.empty() ? err
                     : path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + err;
}

// The data flags against what the program's model takes (its inputs.kind):
// images need --data and --labels (and --eval-labels with --eval-data);
// masked tokens a --mask-token-id below the vocabulary; a flag of another
// kind of input is an error rather than ignored. The files themselves are
// read and checked whole before the first step (detail::Inputs::open).
static std::string checkInputFlags(const program::Program &p, const std::string &plan,
                                   const runtime::RunOptions &o, bool maskGiven, bool dtypeGiven) {
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
    if (dtypeGiven)
      return "--data-dtype is for token files; " + kind + " (.npy files say their dtype)";
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

// Lowers a .mlir plan to its program with fsdp-translate, next to this binary.
static std::string lowerMlir(const std::string &plan, const char *argv0, std::string &json) {
  std::string self(argv0);
  std::string dir = self.find('/') == std::string::npos ? "." : self.substr(0, self.rfind('/'));
  std::string tool = dir + "/fsdp-translate";
  json = "/tmp/fsdp-run-" + std::to_string(::getpid()) + ".json";
  pid_t pid = fork();
  if (pid == 0) {
    execl(tool.c_str(), tool.c_str(), "--export-program", plan.c_str(), "-o", json.c_str(),
          (char *)nullptr);
    std::fprintf(stderr, "fsdp-run: error: cannot run %s to lower %s\n", tool.c_str(),
                 plan.c_str());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return plan + ": could not be lowered to a program";
  return "";
}

int main(int argc, char **argv) {
  // First: from here on SIGTERM, SIGINT and SIGHUP stop the run after a step.
  runtime::installStopHandlers();
  chooseBlasKernels(argv);
  for (const std::string &why : {io::faultInjectionError(), runtime::testSignalError()})
    if (!why.empty()) {
      fail(why);
      return 2;
    }
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string planPath, backend = "threads", metricsPath, ncclIdFile;
  runtime::RunOptions o;
  o.stopState = runtime::processStopState(); // shared with the NCCL backend's module
  bool quiet = false;
  int64_t logEvery = 1;
  int64_t rankFlag = -1;
  bool backendGiven = false;
  std::map<std::string, double *> doubles = {{"--lr", &o.lr},
                                             {"--beta1", &o.beta1},
                                             {"--beta2", &o.beta2},
                                             {"--eps", &o.eps},
                                             {"--weight-decay", &o.weightDecay},
                                             {"--clip-grad-norm", &o.clipGradNorm},
                                             {"--min-lr", &o.minLr}};
  std::map<std::string, std::string *> strings = {
      {"--weights", &o.weights},       {"--data", &o.data},
      {"--metrics", &metricsPath},     {"--save", &o.save},
      {"--resume", &o.resume},         {"--save-weights", &o.saveWeights},
      {"--trace", &o.trace},           {"--nccl-id-file", &ncclIdFile},
      {"--eval-data", &o.evalData},    {"--labels", &o.labels},
      {"--eval-labels", &o.evalLabels}};
  std::string schedule = "constant";
  bool evalFlags = false, maxShardGiven = false, maskGiven = false, dtypeGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fsdp-run: error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](const std::string &v, const std::string &flag) {
      char *end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(d)) {
        std::fprintf(stderr, "fsdp-run: error: %s expects a number, not '%s'\n", flag.c_str(),
                     v.c_str());
        std::exit(2);
      }
      return d;
    };
    // A count: decimal digits only, within [lo, hi] (no 2.5 cut to 2, no 1e30
    // cast with undefined behaviour).
    auto integer = [&](const std::string &v, const std::string &flag, uint64_t lo, uint64_t hi) {
      uint64_t n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi) {
        std::fprintf(stderr, "fsdp-run: error: %s expects an integer from %llu to %llu, not '%s'\n",
                     flag.c_str(), (unsigned long long)lo, (unsigned long long)hi, v.c_str());
        std::exit(2);
      }
      return n;
    };
    if (doubles.count(a)) {
      double x = number(value(), a);
      // AdamW's ranges, as torch.optim.AdamW checks them.
      bool beta = a == "--beta1" || a == "--beta2";
      if (beta ? !(x >= 0 && x < 1) : a == "--eps" ? !(x > 0) : !(x >= 0))
        return fail(a + " must be " +
                    (beta           ? "from 0 to below 1"
                     : a == "--eps" ? "above 0"
                                    : "at least 0") +
                    ", not " + argv[i]);
      *doubles[a] = x;
    } else if (strings.count(a)) {
      *strings[a] = value();
    } else if (a == "--steps") {
      o.steps = (int64_t)integer(value(), a, 1, kMaxCount);
    } else if (a == "--seed") {
      o.seed = integer(value(), a, 0, UINT64_MAX);
    } else if (a == "--grad-accum") {
      o.gradAccum = (int64_t)integer(value(), a, 1, kMaxGradAccum);
    } else if (a == "--lr-schedule") {
      schedule = value();
      if (schedule == "constant")
        o.lrSchedule = runtime::RunOptions::Schedule::Constant;
      else if (schedule == "linear")
        o.lrSchedule = runtime::RunOptions::Schedule::Linear;
      else if (schedule == "cosine")
        o.lrSchedule = runtime::RunOptions::Schedule::Cosine;
      else
        return fail("--lr-schedule expects constant, linear or cosine, not '" + schedule + "'");
    } else if (a == "--warmup-steps") {
      o.warmupSteps = (int64_t)integer(value(), a, 0, kMaxCount);
    } else if (a == "--eval-every") {
      o.evalEvery = (int64_t)integer(value(), a, 0, kMaxCount);
      evalFlags = true;
    } else if (a == "--eval-batches") {
      o.evalBatches = (int64_t)integer(value(), a, 1, kMaxCount);
      evalFlags = true;
    } else if (a == "--save-every") {
      o.saveEvery = (int64_t)integer(value(), a, 0, kMaxCount);
    } else if (a == "--keep") {
      o.keep = (int64_t)integer(value(), a, 1, kMaxCount);
    } else if (a == "--max-shard-size") {
      std::string v = value();
      int64_t bytes = support::parseByteSize(v);
      if (bytes < 1)
        return fail("--max-shard-size expects a size from 1 byte to 2^62 bytes (5GB, 500MB, "
                    "2GiB, 1000000), not '" +
                    v + "'");
      o.maxShardSize = bytes;
      maxShardGiven = true;
    } else if (a == "--rank") {
      rankFlag = (int64_t)integer(value(), a, 0, INT32_MAX);
    } else if (a == "--backend") {
      backend = value();
      backendGiven = true;
    } else if (a == "--mask-token-id") {
      o.maskTokenId = (int64_t)integer(value(), a, 0, INT64_MAX);
      maskGiven = true;
    } else if (a == "--data-dtype") {
      dtypeGiven = true;
      o.dataDtype = value();
      if (o.dataDtype != "uint16" && o.dataDtype != "uint32")
        return fail("--data-dtype expects uint16 or uint32, not '" + o.dataDtype + "'");
    } else if (a == "--timeout" || a == "--nccl-timeout") {
      o.timeoutS = number(value(), a);
      if (!(o.timeoutS > 0) || o.timeoutS > kMaxTimeoutS)
        return fail(a + " expects seconds above 0, at most " +
                    std::to_string((long long)kMaxTimeoutS) + " (a year)");
    } else if (a == "--log-every") {
      logEvery = (int64_t)integer(value(), a, 1, INT64_MAX);
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("fsdp-run (fsdp) %s\n", FSDP_VERSION);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "fsdp-run: error: unknown option %s (see fsdp-run --help)\n", a.c_str());
      return 2;
    } else if (planPath.empty()) {
      planPath = a;
    } else {
      return fail("one plan only; got '" + planPath + "' and '" + a + "'");
    }
  }
  if (planPath.empty()) {
    usage(stderr);
    return 2;
  }
  if (o.steps < 1 || o.gradAccum < 1)
    return fail("--steps and --grad-accum must be at least 1");
  if (!o.evalLabels.empty() && o.evalData.empty())
    return fail("--eval-labels " + o.evalLabels + " needs --eval-data FILE, the held-out images");
  if (evalFlags && o.evalData.empty())
    return fail("--eval-every and --eval-batches need --eval-data FILE, the held-out tokens");
  if (maxShardGiven && (o.saveWeights.empty() || !io::isWeightsFolder(o.saveWeights)))
    return fail("--max-shard-size is for --save-weights DIR (a folder of HF shards), not " +
                (o.saveWeights.empty() ? std::string("without --save-weights")
                                       : "the single file " + o.saveWeights));
  if (o.minLr < 0 || o.minLr > o.lr)
    return fail("--min-lr must be from 0 to --lr (" + std::to_string(o.lr) + ")");
  if (backend != "threads" && backend != "mpi" && backend != "nccl")
    return fail("unknown backend '" + backend + "'; expected threads, mpi or nccl");
  // Under an MPI launcher with several processes each one runs this: the
  // threads backend would run the whole job once per process.
  int64_t launcherRank = 0, launcherSize = mpiLauncherSize(&launcherRank);
  if (launcherSize == 0 || launcherSize > 1) {
    std::string started = launcherSize > 1
                              ? "as one of " + std::to_string(launcherSize) + " processes"
                              : "under a PMIx launcher";
    if (backendGiven && backend == "threads")
      return launcherRank == 0
                 ? fail("--backend threads: fsdp-run was started by an MPI launcher " + started +
                        ", and each would run the whole job; use --backend mpi (the default "
                        "under mpirun), or start one process")
                 : 1;
#if FSDP_HAVE_MPI
    if (!backendGiven)
      backend = "mpi";
#else
    if (!backendGiven)
      return launcherRank == 0
                 ? fail("fsdp-run was started by an MPI launcher " + started +
                        ", but this fsdp-run was built without MPI: each would run the whole "
                        "job; start one process")
                 : 1;
#endif
  }
  // The file bootstrap of --backend nccl: both flags or neither.
  if ((rankFlag >= 0 || !ncclIdFile.empty()) && backend != "nccl")
    return fail("--rank and --nccl-id-file are for --backend nccl");
  if (!ncclIdFile.empty() && rankFlag < 0)
    return fail("--nccl-id-file needs --rank R, this process's rank");
  if (rankFlag >= 0 && ncclIdFile.empty())
    return fail("--rank needs --nccl-id-file PATH, through which the ranks find each other "
                "(under mpirun, leave both out)");
#if !FSDP_HAVE_MPI
  if (backend == "mpi")
    return fail("--backend mpi: this fsdp-run was built without MPI");
#endif
  const runtime::NcclBackend *ncclBackend = nullptr;
  if (backend == "nccl") {
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
  int mpiRank = 0, mpiSize = 1;
  bool usingMpi = false;
  (void)usingMpi; // without MPI in the build
  auto startMpi = [&]() -> bool {
#if FSDP_HAVE_MPI
    usingMpi = true;
    if (!runtime::initMPI(&argc, &argv, &mpiRank, &mpiSize, o.timeoutS))
      return false;
    if (mpiRank != 0)
      quiet = true;
    return true;
#else
    return false;
#endif
  };
  if (backend == "mpi" && !startMpi())
    return fail("MPI does not provide the thread support fsdp-run needs (serialized)");
  auto finish = [&](int rc) {
#if FSDP_HAVE_MPI
    if (usingMpi)
      runtime::finalizeMPI();
#endif
    return rc;
  };

  // The plan: a regular file of bounded size and nesting, checked before
  // anything reads it (a FIFO would block the reader, /dev/zero fill memory).
  std::string planErr = checkPlanFile(planPath);
  if (!planErr.empty())
    return finish(mpiRank == 0 ? fail(planErr) : 1);
  std::string programPath = planPath, tmp;
  if (planPath.size() > 5 && planPath.compare(planPath.size() - 5, 5, ".mlir") == 0) {
    std::string err = lowerMlir(planPath, argv[0], tmp);
    if (!err.empty())
      return fail(err);
    programPath = tmp;
  }
  program::Program p;
  std::string err = program::loadProgram(programPath, p);
  if (!tmp.empty())
    std::remove(tmp.c_str());
  if (!err.empty())
    return finish(mpiRank == 0 ? fail(err) : 1);
  // Tokens a step: counted in int64 by the executors and the progress line.
  if ((__int128)p.microBatch * p.seqLen * p.worldSize * o.gradAccum > ((__int128)1 << 62))
    return finish(mpiRank == 0
                      ? fail("--grad-accum " + std::to_string(o.gradAccum) + " makes a step of " +
                             std::to_string(p.microBatch) + " x " + std::to_string(p.seqLen) +
                             " tokens x " + std::to_string(p.worldSize) + " ranks x " +
                             std::to_string(o.gradAccum) +
                             " micro-steps, more tokens than fsdp-run counts (2^62)")
                      : 1);
  if (std::string why = checkInputFlags(p, planPath, o, maskGiven, dtypeGiven); !why.empty())
    return finish(mpiRank == 0 ? fail(why) : 1);
  if (std::string why = runtime::threadsBackendRefuses(p, planPath);
      backend == "threads" && !why.empty())
    return fail(why);
  // A program's kernel scratch is its target's (runtime/Scratch.h).
  bool cudaBackend = backend == "nccl";
  if ((p.target == program::Target::Cuda) != cudaBackend)
    return finish(mpiRank == 0
                      ? fail(planPath + ": planned for the " + program::targetName(p.target) +
                             " target, which --backend " + backend + " does not run: " +
                             (cudaBackend ? "plan it with a GPU --cluster file (device \"cuda\", "
                                            "e.g. models/hardware/H100-SXM.json)"
                                          : "run it with --backend nccl, or plan it without a GPU "
                                            "--cluster file for the CPU backends"))
                      : 1);
  if (backend == "mpi" && mpiSize != p.worldSize)
    return finish(mpiRank == 0
                      ? fail("the plan is for " + std::to_string(p.worldSize) +
                             " ranks, but mpirun started " + std::to_string(mpiSize) + " processes")
                      : 1);
  // This process's rank: the --rank of the file bootstrap, MPI's, or 0.
  int myRank = 0;
  runtime::NcclBootstrap boot;
  if (backend == "nccl") {
    boot.worldSize = (int)p.worldSize;
    boot.timeoutS = o.timeoutS;
    if (!ncclIdFile.empty()) {
      if (rankFlag >= p.worldSize)
        return fail("--rank " + std::to_string(rankFlag) + " is outside the plan's " +
                    std::to_string(p.worldSize) + " ranks");
      boot.kind = runtime::NcclBootstrap::Kind::File;
      boot.rank = (int)rankFlag;
      boot.idFile = ncclIdFile;
    } else if (p.worldSize > 1) {
#if FSDP_HAVE_MPI
      if (!startMpi())
        return finish(fail("MPI does not provide the thread support fsdp-run needs (serialized)"));
      if (mpiSize != p.worldSize)
        return finish(mpiRank == 0
                          ? fail("the plan is for " + std::to_string(p.worldSize) +
                                 " ranks: start one process a rank, with mpirun -np " +
                                 std::to_string(p.worldSize) +
                                 ", or each with --rank R --nccl-id-file PATH (mpirun started " +
                                 std::to_string(mpiSize) + ")")
                          : 1);
      boot.kind = runtime::NcclBootstrap::Kind::Mpi;
      boot.rank = mpiRank;
#else
      return fail("the plan is for " + std::to_string(p.worldSize) +
                  " ranks: start each with --rank R --nccl-id-file PATH (this fsdp-run was "
                  "built without MPI)");
#endif
    }
    myRank = boot.rank;
    if (myRank != 0)
      quiet = true;
  }
  if (backend == "mpi")
    myRank = mpiRank;

  // Outputs, checked before the first step by the process of rank 0: each
  // file's folder exists and is writable (a --save-weights DIR: DIR, or its
  // parent when DIR is to be made); --save is created and locked for the life
  // of the run. The --weights are checked against the model here too, so that
  // an error is said once. Under MPI a failure here ends every process.
  std::unique_ptr<io::CheckpointDir> saveDir;
  // The threads backend's data (every rank's), read and checked whole before
  // any output is made: a file that does not fit leaves nothing behind. (The
  // other backends' processes read their own, before their first step.)
  runtime::detail::Inputs threadsInputs;
  if (backend == "threads") {
    std::string dataErr = threadsInputs.open(p, o);
    if (!dataErr.empty())
      return fail(dataErr);
  }
  if (myRank == 0) {
    std::string outErr;
    for (auto [flag, path] :
         {std::pair<const char *, std::string *>{"--metrics", &metricsPath}, {"--trace", &o.trace}})
      if (outErr.empty() && !path->empty())
        outErr = io::checkOutputFile(flag, *path);
    if (outErr.empty() && !o.saveWeights.empty())
      outErr = io::isWeightsFolder(o.saveWeights)
                   ? io::checkOutputDirectory("--save-weights", o.saveWeights)
                   : io::checkOutputFile("--save-weights", o.saveWeights);
    if (outErr.empty() && !o.weights.empty() && o.resume.empty()) { // resuming reads no weights
      io::WeightSource weights;
      outErr = weights.open(o.weights);
      std::vector<std::string> notes = weights.warnings();
      if (outErr.empty())
        outErr = runtime::detail::checkWeights(p, weights, &notes);
      for (const std::string &note : notes)
        std::fprintf(stderr, "fsdp-run: warning: %s\n", note.c_str());
    }
    io::CheckpointRef from;
    if (outErr.empty() && !o.resume.empty()) {
      outErr = io::resolveCheckpoint(o.resume, &from);
      if (outErr.empty() && !quiet)
        std::printf("fsdp-run: resuming from %s (step %lld)\n", from.path.c_str(),
                    (long long)from.step);
      if (outErr.empty() && from.step > o.steps)
        outErr = o.resume + ": its checkpoint is of step " + std::to_string(from.step) +
                 ", past --steps " + std::to_string(o.steps);
    }
    if (outErr.empty() && !o.save.empty())
      outErr = io::CheckpointDir::open(o.save, o.resume, &saveDir);
    if (!outErr.empty()) {
      fail(outErr);
#if FSDP_HAVE_MPI
      if (usingMpi && mpiSize > 1)
        runtime::abortMPI();
#endif
      return finish(1);
    }
  }
  // --metrics is opened (and truncated) at the first step: only once the
  // inputs have been read and checked.
  std::ofstream metrics;
  int64_t G = runtime::detail::globalBatch(p, o);
  if (!quiet) {
    std::string kernels = backend == "nccl"
                              ? std::string("CUDA kernels")
                              : "OpenBLAS " + std::string(openblas_get_corename()) + " kernels";
    std::printf("fsdp-run: %s, %s over %lld ranks (%s), arena %s per rank; "
                "%lld x %lld tokens per rank per micro-step, %lld micro-steps, "
                "global batch %lld sequences; %s\n",
                p.modelName.c_str(), p.strategy.c_str(), (long long)p.worldSize,
                backend == "mpi"    ? "MPI processes"
                : backend == "nccl" ? "GPUs, NCCL"
                                    : "threads",
                support::describeBytes(p.arenaBytes).c_str(), (long long)p.microBatch,
                (long long)p.seqLen, (long long)o.gradAccum, (long long)G, kernels.c_str());
  }
  runtime::StepReport lastReport;
  std::string predictedTime;
  double predictedStep = p.predictedMicroStepS * o.gradAccum + p.predictedOptimizerS;
  if (predictedStep > 0) {
    char buf[48];
    std::snprintf(buf, sizeof buf, " (predicted %.3f s)", predictedStep);
    predictedTime = buf;
  }
  auto onStep = [&](const runtime::StepReport &r) -> std::string {
    lastReport = r;
    if (!quiet && (r.step % logEvery == 0 || r.step == 1 || r.step == r.steps || r.evaluated)) {
      char eval[48] = "";
      if (r.evaluated)
        std::snprintf(eval, sizeof eval, " | eval loss %.4f", r.evalLoss);
      std::printf("step %lld/%lld | loss %.4f%s | grad norm %.3f | lr %.3g | %.0f tok/s | "
                  "%.3f s%s | peak %s per rank (predicted %s)\n",
                  (long long)r.step, (long long)r.steps, r.loss, eval, r.gradNorm, r.lr,
                  r.tokensPerS, r.stepTimeS, predictedTime.c_str(),
                  support::describeBytes(r.peakBytes).c_str(),
                  support::describeBytes(r.predictedPeakBytes).c_str());
    }
    std::fflush(stdout);
    if (metricsPath.empty() || myRank != 0)
      return std::string();
    if (!metrics.is_open()) {
      metrics.open(metricsPath, std::ios::trunc);
      if (!metrics)
        return metricsPath + ": cannot write the metrics: " + std::strerror(errno);
    }
    // JSON has no NaN or infinity: a value that is not finite is null.
    auto num = [](double v, const char *format) {
      char buf[64];
      if (!std::isfinite(v))
        return std::string("null");
      std::snprintf(buf, sizeof buf, format, v);
      return std::string(buf);
    };
    std::string line =
        "{\"step\": " + std::to_string(r.step) + ", \"loss\": " + num(r.loss, "%.9g") +
        ", \"grad_norm\": " + num(r.gradNorm, "%.9g") + ", \"lr\": " + num(r.lr, "%.9g") +
        (r.evaluated ? ", \"eval_loss\": " + num(r.evalLoss, "%.9g") : "") +
        ", \"step_time_s\": " + num(r.stepTimeS, "%.6f") +
        ", \"tokens_per_s\": " + num(r.tokensPerS, "%.3f") +
        ", \"peak_bytes\": " + std::to_string(r.peakBytes) +
        ", \"predicted_peak_bytes\": " + std::to_string(r.predictedPeakBytes) +
        ", \"outside_arena_bytes\": " + std::to_string(r.outsideArenaBytes) +
        ", \"predicted_step_time_s\": " + num(predictedStep, "%.6f") + "}\n";
    metrics << line;
    metrics.flush();
    if (!metrics)
      return metricsPath + ": cannot write the metrics: " + std::strerror(errno);
    return std::string();
  };
  if (backend == "nccl") {
    err = ncclBackend->runNccl(p, o, boot, onStep);
    if (!err.empty()) {
      fail(err);
#if FSDP_HAVE_MPI
      // A rank that failed before its communicators existed: its peers may
      // wait in MPI for it (the id's broadcast), so end the job.
      if (usingMpi)
        runtime::abortMPI();
#endif
      return finish(1);
    }
  } else if (backend == "mpi") {
#if FSDP_HAVE_MPI
    auto comm = runtime::mpiCommunicator((int)p.shardSize, o.timeoutS);
    err = runtime::runRank(p, o, *comm, onStep);
    comm.reset();
    if (!err.empty()) // the failing rank has aborted the job; this is a peer
      return finish(fail(err));
#endif
  } else {
    err = runtime::runThreads(p, o, onStep, &threadsInputs);
    if (!err.empty())
      return fail(err);
  }
  runtime::ignoreStopSignals(); // the run has returned: only the exit is left
  if (!quiet && lastReport.step > 0 && backend == "nccl")
    std::printf("memory per rank: arena peak %s measured, %s predicted (%s); outside the "
                "arena %s of device memory (kernel scratch, cuBLAS workspace, reduce-scatter "
                "staging; NCCL's own buffers not counted)\n",
                support::describeBytes(lastReport.peakBytes).c_str(),
                support::describeBytes(lastReport.predictedPeakBytes).c_str(),
                lastReport.peakBytes == lastReport.predictedPeakBytes ? "exact" : "DIFFERENT",
                support::describeBytes(lastReport.outsideArenaBytes).c_str());
  else if (!quiet && lastReport.step > 0)
    std::printf("memory per rank: arena peak %s measured, %s predicted (%s); outside the "
                "arena %s (communication staging and the token data)\n",
                support::describeBytes(lastReport.peakBytes).c_str(),
                support::describeBytes(lastReport.predictedPeakBytes).c_str(),
                lastReport.peakBytes == lastReport.predictedPeakBytes ? "exact" : "DIFFERENT",
                support::describeBytes(lastReport.outsideArenaBytes).c_str());
  // Stopped by a signal: where, and what was saved; the status is 128 + the
  // signal's number, as a shell reports a process the signal killed, so that
  // a scheduler sees the run did not finish. Rank 0 speaks for the job (the
  // ranks agreed on the step).
  runtime::StopRecord stopped = runtime::recordedStop();
  if (stopped.signal) {
    if (myRank == 0) {
      std::string name = runtime::signalName(stopped.signal), what;
      if (stopped.beforeFirstStep)
        what = "stopping before step " + std::to_string(stopped.step + 1) +
               " (no step run, nothing saved)";
      else
        what = "stopping after step " + std::to_string(stopped.step) +
               (stopped.checkpoint.empty() ? "; no checkpoint written (no --save)"
                                           : "; checkpoint written to " + stopped.checkpoint);
      if (!o.saveWeights.empty())
        what += "; --save-weights " + o.saveWeights + " not written (the run did not finish)";
      std::fflush(stdout);
      std::fprintf(stderr, "fsdp-run: %s: %s\n", name.c_str(), what.c_str());
    }
    return finish(128 + stopped.signal);
  }
  // A signal after the last step's decision: the run is complete.
  if (int late = runtime::stopSignal()) {
    std::fflush(stdout);
    std::fprintf(stderr, "fsdp-run: %s: received after the last step; the run is complete\n",
                 runtime::signalName(late).c_str());
    return finish(128 + late);
  }
  return finish(0);
}
