//===- fsdp-run.cpp - execute a lowered plan and train --------------------===//
//
// fsdp-run PROGRAM.json [options]: runs the program fsdp-plan wrote, on N ranks as
// threads of this process (the default backend), as MPI processes (--backend
// mpi) or on one GPU a rank with NCCL (--backend nccl, where built), and
// reports each step's loss, throughput and measured peak memory beside the
// plan's prediction.
// Links the runtime only: no MLIR. A .mlir plan is lowered by running
// fsdp-translate, found beside this binary. The tool parses flags and prints;
// what a run does (backend, bootstrap, checks, metrics) is runtime/Run.h's.
//
//===----------------------------------------------------------------------===//
#include "runtime/Blas.h"
#include "runtime/Run.h"
#include "runtime/Signals.h"
#include "runtime/io/Files.h"
#include "runtime/weights/Safetensors.h"
#include "support/InputFile.h"
#include "support/Suggest.h"
#include "tools/Version.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace fsdp;

// --help's text: also the list of flags an unknown one is matched against.
static const char *const kUsage =
    "usage: fsdp-run PROGRAM.json|PLAN.mlir [options]\n"
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
    "                        BUILD/lib/libfsdp-nccl-emulated.so (tests/gpu/README.md);\n"
    "                        set for another backend, it is an error\n"
    "Training:\n"
    "  --steps K             the run's last step, the schedule's horizon (default 1; a\n"
    "                        resumed run: its checkpoint's, which a larger K extends)\n"
    "  --grad-accum A        micro-steps per optimizer step: the plan's (fsdp-plan\n"
    "                        --grad-accum); another value is an error\n"
    "  --seed S              initialisation seed when no --weights are given (default 0)\n"
    "  --shuffle SEED        each epoch's windows of --data in a permutation of their own\n"
    "                        (docs/sampling.md; default: in order); a resumed run keeps\n"
    "                        its checkpoint's\n"
    "  --weights FILE.safetensors|DIR  initial weights with HF names and layouts; DIR:\n"
    "                        an HF checkpoint folder (model.safetensors.index.json and\n"
    "                        its shards, or model.safetensors), or the index itself\n"
    "                        (default: the seeded initialisation)\n"
    "  --data FILE[,FILE..]  tokens, flat little-endian (fsdp-tokenize, nanoGPT's train.bin),\n"
    "                        memory-mapped; several files, or a folder's *.bin in name\n"
    "                        order, are one stream (required, unless --synthetic-data);\n"
    "                        for a program whose inputs are images, a .npy of uint8\n"
    "                        [N, height, width, channels]\n"
    "  --synthetic-data      a token model trains on seeded random tokens, without --data\n"
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
    "                        model and global batch) with the settings it records (lr,\n"
    "                        schedule, warmup, min-lr, steps, AdamW's, clipping, seed,\n"
    "                        data order): a flag given with another value is a change,\n"
    "                        applied and said\n"
    "  --save-weights FILE.safetensors|DIR  full weights with HF names after the last\n"
    "                        step; DIR (a folder, or a path not ending in .safetensors):\n"
    "                        HF shards, their index and the model's config.json (and\n"
    "                        generation_config.json), as save_pretrained writes them\n"
    "  --save-dtype f32|bf16  the dtype --save-weights writes (bf16: the f32 master weights\n"
    "                        rounded to nearest even; default: the plan's param_dtype)\n"
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
    "(see docs/checkpoint-format.md).\n";

static void usage(FILE *to) { std::fputs(kUsage, to); }

// Every flag --help names ("--lr", "--save-weights", ...).
static std::vector<std::string> knownFlags() {
  std::vector<std::string> flags;
  std::string text = kUsage;
  for (size_t at = text.find("--"); at != std::string::npos; at = text.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < text.size() && (std::islower((unsigned char)text[end]) || text[end] == '-'))
      ++end;
    if (end > at + 2 &&
        std::find(flags.begin(), flags.end(), text.substr(at, end - at)) == flags.end())
      flags.push_back(text.substr(at, end - at));
  }
  return flags;
}

// The most steps a run takes (a step counter with a checkpoint's steps before
// it stays far inside int64) and micro-steps a step accumulates.
constexpr uint64_t kMaxCount = uint64_t(1) << 40;
constexpr uint64_t kMaxGradAccum = uint64_t(1) << 20;
// --timeout: beyond a year is no bound (and a deadline must not overflow).
constexpr double kMaxTimeoutS = 365.0 * 24 * 3600;

static int fail(const std::string &msg) {
  std::fprintf(stderr, "fsdp-run: error: %s\n", msg.c_str());
  return 1;
}

// Seconds as H:MM:SS.
static std::string hms(double seconds) {
  long long s = std::isfinite(seconds) && seconds > 0 ? (long long)(seconds + 0.5) : 0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

// What fsdp-run prints of a run: the first line, a progress line a step,
// the memory per rank after the last, and where a stop signal stopped it.
static runtime::RunEvents printer(const runtime::RunRequest &req, bool quiet, int64_t logEvery) {
  runtime::RunEvents events;
  events.error = [](const std::string &why) { fail(why); };
  events.warning = [](const std::string &note) {
    std::fprintf(stderr, "fsdp-run: warning: %s\n", note.c_str());
  };
  events.notice = [](const std::string &note) {
    std::printf("fsdp-run: %s\n", note.c_str());
    std::fflush(stdout);
  };
  if (!quiet)
    events.resuming = [](const checkpoint::CheckpointRef &from) {
      std::printf("fsdp-run: resuming from %s (step %lld)\n", from.path.c_str(),
                  (long long)from.step);
    };
  auto predictedTime = std::make_shared<std::string>();
  // What the progress line needs of the run: whether it counts images, and
  // the clock and step it started at (elapsed and ETA).
  struct Progress {
    bool images = false;
    std::chrono::steady_clock::time_point start;
    int64_t firstStep = -1; // the step before this run's first
  };
  auto progress = std::make_shared<Progress>();
  events.started = [=](const runtime::RunStart &s) {
    progress->images = s.program->inputKind == program::InputKind::Images;
    progress->start = std::chrono::steady_clock::now();
    if (s.predictedStepS > 0) {
      char buf[48];
      std::snprintf(buf, sizeof buf, " (predicted %.3f s)", s.predictedStepS);
      *predictedTime = buf;
    }
    if (quiet)
      return;
    const program::Program &p = *s.program;
    bool nccl = s.backend == runtime::BackendKind::Nccl;
    std::string kernels = nccl ? std::string("CUDA kernels")
                               : "OpenBLAS " + std::string(openblas_get_corename()) + " kernels";
    std::printf("fsdp-run: %s, %s over %lld ranks (%s), arena %s per rank; "
                "%lld x %lld tokens per rank per micro-step, %lld micro-steps%s, "
                "global batch %lld sequences; %s%s\n",
                p.modelName.c_str(), p.strategy.c_str(), (long long)p.worldSize,
                s.backend == runtime::BackendKind::Mpi ? "MPI processes"
                : nccl                                 ? "GPUs, NCCL"
                                                       : "threads",
                support::describeBytes(p.arenaBytes).c_str(), (long long)p.microBatch,
                (long long)p.seqLen, (long long)s.options->gradAccum,
                p.syncsAtLastMicroStep() ? " (gradients reduced at the last)" : "",
                (long long)s.globalBatch, kernels.c_str(),
                s.options->syntheticData ? "; random tokens (--synthetic-data)" : "");
  };
  events.step = [=](const runtime::StepReport &r) {
    if (progress->firstStep < 0)
      progress->firstStep = r.step - 1;
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - progress->start).count();
    if (!quiet && (r.step % logEvery == 0 || r.step == 1 || r.step == r.steps || r.evaluated)) {
      char eval[80] = "";
      if (r.evaluated && r.evalAccuracy >= 0)
        std::snprintf(eval, sizeof eval, " | eval loss %.4f, accuracy %.1f%%", r.evalLoss,
                      100.0 * r.evalAccuracy);
      else if (r.evaluated)
        std::snprintf(eval, sizeof eval, " | eval loss %.4f", r.evalLoss);
      char rate[48];
      if (progress->images)
        std::snprintf(rate, sizeof rate, "%.1f images/s", r.samplesPerS);
      else
        std::snprintf(rate, sizeof rate, "%.0f tok/s", r.tokensPerS);
      char mfu[32] = "";
      if (r.mfu > 0)
        std::snprintf(mfu, sizeof mfu, " | MFU %.1f%%", 100.0 * r.mfu);
      // ETA: this run's mean step so far (eval and saves included) times
      // the steps left.
      double eta = elapsed / double(r.step - progress->firstStep) * double(r.steps - r.step);
      char epoch[64] = "";
      if (r.epochSamples)
        std::snprintf(epoch, sizeof epoch, " | epoch %lld (%.0f%%)", (long long)r.epoch,
                      100.0 * double(r.epochPosition) / double(r.epochSamples));
      std::printf("step %lld/%lld | loss %.4f%s | grad norm %.3f | lr %.3g | %s | "
                  "%.3f s%s%s | elapsed %s, ETA %s | peak %s per rank (predicted %s)%s\n",
                  (long long)r.step, (long long)r.steps, r.loss, eval, r.gradNorm, r.lr, rate,
                  r.stepTimeS, predictedTime->c_str(), mfu, hms(elapsed).c_str(), hms(eta).c_str(),
                  support::describeBytes(r.peakBytes).c_str(),
                  support::describeBytes(r.predictedPeakBytes).c_str(), epoch);
    }
    if (!quiet && r.epochEnded)
      std::printf("fsdp-run: epoch %lld of the data done after step %lld\n", (long long)r.epoch,
                  (long long)r.step);
    std::fflush(stdout);
  };
  events.finished = [=](const runtime::RunResult &res) {
    const runtime::StepReport &last = res.last;
    // Outside the arena: on a GPU the host collectives' device staging (the
    // plan places the kernels' scratch, the collectives' staging and cuBLAS's
    // workspace in the arena); on a CPU the communication staging and data.
    if (!quiet && last.step > 0)
      std::printf("memory per rank: arena peak %s measured, %s predicted (%s); outside the "
                  "arena %s\n",
                  support::describeBytes(last.peakBytes).c_str(),
                  support::describeBytes(last.predictedPeakBytes).c_str(),
                  last.peakBytes == last.predictedPeakBytes ? "exact" : "DIFFERENT",
                  (support::describeBytes(last.outsideArenaBytes) +
                   (res.backend == runtime::BackendKind::Nccl
                        ? " of device memory (the staging of the loss, eval and checkpoint "
                          "collectives; NCCL's own buffers not counted)"
                        : " (communication staging and the token data)"))
                      .c_str());
    if (!quiet && last.step > 0 && last.predictedHostPeakBytes > 0)
      std::printf("host memory per rank (--offload): pool peak %s measured, %s predicted (%s)\n",
                  support::describeBytes(last.hostPeakBytes).c_str(),
                  support::describeBytes(last.predictedHostPeakBytes).c_str(),
                  last.hostPeakBytes == last.predictedHostPeakBytes ? "exact" : "DIFFERENT");
    // Rank 0 speaks for the job (the ranks agreed on the step).
    const runtime::StopRecord &stopped = res.stop;
    if (stopped.signal && res.rank == 0) {
      std::string what;
      if (stopped.beforeFirstStep)
        what = "stopping before step " + std::to_string(stopped.step + 1) +
               " (no step run, nothing saved)";
      else
        what = "stopping after step " + std::to_string(stopped.step) +
               (stopped.checkpoint.empty() ? "; no checkpoint written (no --save)"
                                           : "; checkpoint written to " + stopped.checkpoint);
      if (!req.options.saveWeights.empty())
        what +=
            "; --save-weights " + req.options.saveWeights + " not written (the run did not finish)";
      std::fflush(stdout);
      std::fprintf(stderr, "fsdp-run: %s: %s\n", runtime::signalName(stopped.signal).c_str(),
                   what.c_str());
    }
    if (res.lateSignal) {
      std::fflush(stdout);
      std::fprintf(stderr, "fsdp-run: %s: received after the last step; the run is complete\n",
                   runtime::signalName(res.lateSignal).c_str());
    }
  };
  return events;
}

int main(int argc, char **argv) {
  // First: from here on SIGTERM, SIGINT and SIGHUP stop the run after a step.
  runtime::installStopHandlers();
  runtime::chooseBlasKernels(argv);
  for (const std::string &why : {io::faultInjectionError(), runtime::testSignalError()})
    if (!why.empty()) {
      fail(why);
      return 2;
    }
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  runtime::RunRequest req;
  runtime::RunOptions &o = req.options;
  std::string backend = "threads";
  o.stopState = runtime::processStopState(); // shared with the NCCL backend's module
  bool quiet = false;
  int64_t logEvery = 1;
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
      {"--metrics", &req.metrics},     {"--save", &o.save},
      {"--resume", &o.resume},         {"--save-weights", &o.saveWeights},
      {"--trace", &o.trace},           {"--nccl-id-file", &req.ncclIdFile},
      {"--eval-data", &o.evalData},    {"--labels", &o.labels},
      {"--eval-labels", &o.evalLabels}};
  std::string schedule = "constant";
  bool evalFlags = false, maxShardGiven = false;
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
    if (a.size() > 2 && a[0] == '-' && a[1] == '-')
      o.given.insert(a == "--nccl-timeout" ? "--timeout" : a);
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
    } else if (a == "--shuffle") {
      o.shuffle = true;
      o.shuffleSeed = (uint64_t)integer(value(), a, 0, UINT64_MAX);
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
      req.rank = (int64_t)integer(value(), a, 0, INT32_MAX);
    } else if (a == "--backend") {
      backend = value();
      backendGiven = true;
    } else if (a == "--mask-token-id") {
      o.maskTokenId = (int64_t)integer(value(), a, 0, INT64_MAX);
      o.maskTokenIdGiven = true;
    } else if (a == "--save-dtype") {
      o.saveDtype = value();
      if (o.saveDtype != "f32" && o.saveDtype != "bf16")
        return fail("--save-dtype expects f32 or bf16, not '" + o.saveDtype + "'");
    } else if (a == "--data-dtype") {
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
    } else if (a == "--synthetic-data") {
      o.syntheticData = true;
    } else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("fsdp-run (fsdp) %s\n", FSDP_VERSION);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::string near = support::nearest(a.substr(0, a.find('=')), knownFlags());
      std::fprintf(stderr, "fsdp-run: error: unknown option %s%s (see fsdp-run --help)\n",
                   a.c_str(), near.empty() ? "" : ("; did you mean " + near + "?").c_str());
      return 2;
    } else if (req.plan.empty()) {
      req.plan = a;
    } else {
      return fail("one plan only; got '" + req.plan + "' and '" + a + "'");
    }
  }
  if (req.plan.empty()) {
    usage(stderr);
    return 2;
  }
  if (o.steps < 1 || o.gradAccum < 1)
    return fail("--steps and --grad-accum must be at least 1");
  // Flags that act only with another: alone, an error rather than nothing.
  for (const char *flag : {"--save-every", "--keep"})
    if (o.given.count(flag) && o.save.empty())
      return fail(std::string(flag) +
                  " is for checkpoints, which only --save DIR writes: give --save DIR too");
  if (!o.weights.empty() && !o.resume.empty())
    return fail("--weights " + o.weights + " and --resume " + o.resume +
                ": a resumed run continues from its checkpoint's weights; drop --weights");
  if (o.syntheticData && !o.data.empty())
    return fail("--synthetic-data and --data " + o.data +
                ": give one (--data trains on its tokens, --synthetic-data on random ones)");
  if (!o.saveWeights.empty())
    if (std::string why = weights::saveWeightsNameError(o.saveWeights); !why.empty())
      return fail(why);
  if (!o.evalLabels.empty() && o.evalData.empty())
    return fail("--eval-labels " + o.evalLabels + " needs --eval-data FILE, the held-out images");
  if (evalFlags && o.evalData.empty())
    return fail("--eval-every and --eval-batches need --eval-data FILE, the held-out tokens");
  if (maxShardGiven && (o.saveWeights.empty() || !weights::isWeightsFolder(o.saveWeights)))
    return fail("--max-shard-size is for --save-weights DIR (a folder of HF shards), not " +
                (o.saveWeights.empty() ? std::string("without --save-weights")
                                       : "the single file " + o.saveWeights));
  if (!o.saveDtype.empty() && o.saveWeights.empty())
    return fail("--save-dtype " + o.saveDtype +
                " is the dtype of --save-weights, which is not given (nothing to save)");
  if (o.minLr < 0 || o.minLr > o.lr)
    return fail("--min-lr must be from 0 to --lr (" + std::to_string(o.lr) + ")");
  std::optional<runtime::BackendKind> kind = runtime::parseBackend(backend);
  if (!kind)
    return fail("unknown backend '" + backend + "'; expected threads, mpi or nccl");
  if (backendGiven)
    req.backend = kind;
  req.stopHandlers = true;
  // fsdp-translate, beside this binary, lowers a .mlir plan.
  std::string self(argv[0]);
  req.translateTool =
      (self.find('/') == std::string::npos ? "." : self.substr(0, self.rfind('/'))) +
      "/fsdp-translate";
  return runtime::run(req, printer(req, quiet, logEvery)).status;
}
