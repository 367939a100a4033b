//===- fsdp-plan.cpp - decide a training plan ahead of time ---------------===//
//
// Reads a model (HF config.json, JSON graph or .mlir) and the cluster, runs
// the planner's pipeline, and writes the plan as MLIR or as the runtime's
// JSON program, with a summary and a report of memory and communication.
//
//===----------------------------------------------------------------------===//
#include "planner/CostModel.h"
#include "planner/Import/Import.h"
#include "planner/KernelScratch.h"
#include "planner/LowerToProgram.h"
#include "planner/ModelSummary.h"
#include "planner/Pipeline.h"
#include "planner/PlanUtils.h"
#include "planner/Search.h"
#include "tools/LLVMTool.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <unistd.h>

using namespace fsdp;
namespace cl = llvm::cl;

static cl::OptionCategory category("fsdp-plan options");
static cl::opt<std::string> inputPath(cl::Positional,
                                      cl::desc("<config.json|graph.json|model.mlir>"), cl::Required,
                                      cl::cat(category));
static cl::opt<std::string>
    outputPath("o", cl::desc("write the plan (.mlir) or its program (.json, what fsdp-run runs)"),
               cl::value_desc("PLAN"), cl::cat(category));
static cl::opt<int64_t> worldSize("world-size",
                                  cl::desc("ranks, 1 to 1048576 (required to write a plan; "
                                           "without it, the model is described)"),
                                  cl::init(0), cl::cat(category));
static cl::opt<std::string>
    microBatch("micro-batch",
               cl::desc("sequences per rank per micro-step, or 'max': the largest that fits "
                        "--memory-budget (default 1)"),
               cl::init("1"), cl::cat(category));
static cl::opt<int64_t>
    seqLen("seq-len",
           cl::desc("tokens per sequence, 1 to the model's positions (default: the model's "
                    "maximum)"),
           cl::init(0), cl::cat(category));
static cl::opt<std::string>
    strategy("strategy",
             cl::desc("full-shard | shard-grad-op | no-shard | hybrid-shard (default full-shard)"),
             cl::init("full-shard"), cl::cat(category));
static cl::opt<int64_t> shardSize("shard-size",
                                  cl::desc("hybrid-shard's group size, dividing --world-size"),
                                  cl::init(0), cl::cat(category));
static cl::opt<std::string>
    wrap("wrap",
         cl::desc("block | experts | size:N | none | auto (experts: as block, with each block's "
                  "experts a unit of their own; auto: the fastest plan that fits, searching the "
                  "settings not given: strategy, shard size, prefetch, checkpointing); "
                  "default block"),
         cl::init("block"), cl::cat(category));
static cl::opt<int64_t>
    forwardPrefetch("forward-prefetch",
                    cl::desc("units gathered ahead in forward, 0 to 1024 (default 1)"), cl::init(1),
                    cl::cat(category));
static cl::opt<std::string>
    backwardPrefetch("backward-prefetch",
                     cl::desc("backward gathers: pre | post | none (default pre)"), cl::init("pre"),
                     cl::cat(category));
static cl::opt<int64_t>
    maxInflight("max-inflight-gathers",
                cl::desc("gathers in flight ahead of compute, at most; 1 to 1024 (default 2)"),
                cl::init(2), cl::cat(category));
static cl::opt<std::string>
    activationCheckpointing("activation-checkpointing",
                            cl::desc("none | blocks | selective: recompute each block's "
                                     "activations in backward (blocks: all but its input; "
                                     "selective: all but its matmul and attention outputs) "
                                     "(default none)"),
                            cl::init("none"), cl::cat(category));
static cl::opt<std::string>
    paramDtype("param-dtype",
               cl::desc("f32 | bf16: parameters for compute and gathers (default f32)"),
               cl::init("f32"), cl::cat(category));
static cl::opt<std::string> computeDtype(
    "compute-dtype",
    cl::desc("f32 | bf16: matmul operands and every activation (default: --param-dtype)"),
    cl::init(""), cl::cat(category));
static cl::opt<std::string> reduceDtype("reduce-dtype",
                                        cl::desc("f32 | bf16: gradient reductions (default f32)"),
                                        cl::init("f32"), cl::cat(category));
static cl::opt<std::string>
    memoryBudget("memory-budget",
                 cl::desc("per-rank bytes, e.g. 80GiB, or none; a plan that does not fit "
                          "exits 1 (default: the --cluster file's device memory less its "
                          "reserved_bytes; without --cluster, none)"),
                 cl::value_desc("SIZE"), cl::cat(category));
static cl::opt<std::string>
    clusterPath("cluster",
                cl::desc("hardware description, JSON up to 64 MiB (models/hardware/*.json; "
                         "default: this machine's CPU, cpu-local)"),
                cl::value_desc("FILE"), cl::cat(category));
static cl::opt<int64_t>
    gradAccum("grad-accum",
              cl::desc("micro-steps per optimizer step, for the prediction; 1 to 1048576 "
                       "(default 1)"),
              cl::init(1), cl::cat(category));
static cl::opt<std::string>
    gradSync("grad-sync",
             cl::desc("every | last: reduce the gradients every micro-step, or keep their "
                      "unsharded f32 sum across the step's micro-steps and reduce it at the "
                      "last (FSDP's no-sync); last needs --grad-accum above 1 (default every)"),
             cl::init("every"), cl::cat(category));
static cl::opt<std::string> reshardAfterBackward(
    "reshard-after-backward",
    cl::desc("true | false: free each unit's gathered parameters after its backward, or keep "
             "them from the step's first micro-step to its last, gathering once a step "
             "(FSDP2's set_reshard_after_backward); false needs --grad-accum above 1 and a "
             "strategy that shards (default true)"),
    cl::init("true"), cl::cat(category));
static cl::opt<std::string> reshardAfterForward(
    "reshard-after-forward",
    cl::desc("true | false | N: after a unit's forward, free its gathered parameters (true), "
             "keep them until its backward (false: shard-grad-op), or keep this rank's 1/N of "
             "them and gather them in backward within groups of N consecutive ranks (FSDP2's "
             "int, ZeRO++'s hpZ; N divides the shard group's size and is smaller; full-shard "
             "and hybrid-shard) (default true)"),
    cl::init("true"), cl::cat(category));
static cl::opt<std::string> offload(
    "offload",
    cl::desc("none | optimizer | all: keep Adam's moments and an f32 master copy of each "
             "parameter shard in host memory and run AdamW on the host, the gradient shard "
             "copied out and the parameter shard copied back each step (optimizer, "
             "ZeRO-Offload's); all: the parameter shards live on the host too, each gather "
             "copying the rank's shard in first (FSDP2's CPUOffloadPolicy; the gradient shards "
             "stay on the device); priced with the cluster file's host_link and host "
             "(default none)"),
    cl::init("none"), cl::cat(category));
static cl::opt<std::string> tensorParallelFlag(
    "tp",
    cl::desc("N | auto: tensor-parallel ranks N, the world as a (world / N) x N mesh, the N "
             "ranks of a group consecutive, within a node; each attention split by heads, each "
             "MLP by columns (Megatron's), the strategy over the world / N ranks of each tp "
             "index; auto, with --wrap auto: searched among 1, 2, 4 and 8 within a node, "
             "each degree as many plans again (default 1: none)"),
    cl::value_desc("N"), cl::init("1"), cl::cat(category));
static cl::opt<std::string> sequenceParallel(
    "sequence-parallel",
    cl::desc("true | false: with --tp, each rank holds 1/N of the tokens between the "
             "tensor-parallel regions (norms, residuals, head, loss), the regions gathering "
             "them and reduce-scattering their sums (Megatron's sequence parallelism), or whole "
             "activations there, the regions' sums all-reduced (default true)"),
    cl::init("true"), cl::cat(category));
// --tp's degree (1 under auto: the search's base) and whether it is auto.
static int64_t tensorParallel = 1;
static bool tensorParallelAuto = false;
static cl::opt<std::string> tracePath("trace",
                                      cl::desc("write the predicted timeline (Chrome trace)"),
                                      cl::value_desc("FILE"), cl::cat(category));
static cl::opt<bool> summary("summary",
                             cl::desc("print a human-readable summary (the default "
                                      "when no file is written)"),
                             cl::cat(category));
static cl::opt<std::string> reportPath("report", cl::desc("write the report as JSON to FILE"),
                                       cl::value_desc("FILE"), cl::cat(category));
static cl::opt<bool>
    noDropout("no-dropout",
              cl::desc("train without dropout although the HF config sets it (GPT-2's published "
                       "configs set 0.1)"),
              cl::cat(category));

// " / --tp N" where the strategy's groups are of the data-parallel ranks.
static std::string dpSuffix() {
  return tensorParallel > 1 ? " / --tp " + std::to_string(tensorParallel) : "";
}

// Blocks a plan checkpoints: none, the first N, or all of them (-1).
static int64_t checkpointedBlocks(const PlanOptions &o, int64_t numBlocks) {
  if (o.activationCheckpointing == "none")
    return 0;
  return o.checkpointedBlocks < 0 ? numBlocks : o.checkpointedBlocks;
}

// Whether fsdp-plan lowers a tensor-parallel plan of `o` to what -o writes:
// a program of bf16 compute is not lowered under tp yet.
static bool tpLowered(const PlanOptions &o) {
  return o.resolvedComputeDtype() == "f32" || llvm::sys::path::extension(outputPath) != ".json";
}

// The flags --wrap auto kept as given, as the command line spells them.
static std::vector<std::string> keptFlags(const SearchFixed &fixed) {
  std::vector<std::string> kept;
  if (fixed.strategy && strategy.getNumOccurrences())
    kept.push_back("--strategy " + strategy);
  if (fixed.shardSize)
    kept.push_back("--shard-size " + std::to_string(shardSize));
  if (fixed.forwardPrefetch)
    kept.push_back("--forward-prefetch " + std::to_string(forwardPrefetch));
  if (fixed.backwardPrefetch)
    kept.push_back("--backward-prefetch " + backwardPrefetch);
  if (fixed.activationCheckpointing)
    kept.push_back("--activation-checkpointing " + activationCheckpointing);
  if (gradSync.getNumOccurrences())
    kept.push_back("--grad-sync " + gradSync);
  if (reshardAfterBackward.getNumOccurrences())
    kept.push_back("--reshard-after-backward " + reshardAfterBackward);
  if (reshardAfterForward.getNumOccurrences())
    kept.push_back("--reshard-after-forward " + reshardAfterForward);
  if (offload.getNumOccurrences())
    kept.push_back("--offload " + offload);
  if (tensorParallelFlag.getNumOccurrences() && !tensorParallelAuto)
    kept.push_back("--tp " + std::to_string(tensorParallel));
  // Never searched; named where given, since they are kept too.
  if (paramDtype.getNumOccurrences())
    kept.push_back("--param-dtype " + paramDtype);
  if (computeDtype.getNumOccurrences())
    kept.push_back("--compute-dtype " + computeDtype);
  if (reduceDtype.getNumOccurrences())
    kept.push_back("--reduce-dtype " + reduceDtype);
  return kept;
}

static int fail(const std::string &message) {
  llvm::errs() << "fsdp-plan: error: " << message << "\n";
  return 1;
}

// Written to a temporary and renamed: a failed run leaves no half file.
static bool writeAtomically(const std::string &path,
                            llvm::function_ref<bool(llvm::raw_ostream &)> write) {
  bool ok = true;
  llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) -> llvm::Error {
    ok = write(os);
    if (!ok)
      return llvm::make_error<llvm::StringError>("lowering failed", llvm::inconvertibleErrorCode());
    return llvm::Error::success();
  });
  if (e) {
    std::string msg = llvm::toString(std::move(e));
    if (ok)
      llvm::errs() << "fsdp-plan: error: cannot write '" << path << "': " << msg << "\n";
    return false;
  }
  return true;
}

// The range every integer flag is checked against where it is parsed, named
// in the error: --world-size at most 2^20 for a program.
constexpr int64_t kMaxWorldSize = int64_t(1) << 20;
constexpr int64_t kMaxGradAccum = int64_t(1) << 20;
constexpr int64_t kMaxPrefetch = 1024;

static std::string outOfRange(const char *flag, int64_t lo, int64_t hi, int64_t value) {
  return std::string("--") + flag + " must be an integer from " + std::to_string(lo) + " to " +
         std::to_string(hi) + ", not " + std::to_string(value);
}

// Before any planning: what each output path needs (its folder exists and is
// writable; -o's extension), so that a run refused for an output writes none.
static std::string checkOutputPath(const char *flag, const std::string &path) {
  if (path.empty())
    return "";
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  std::string folder = dir.empty() ? "." : dir.str();
  if (llvm::sys::fs::is_directory(path))
    return std::string(flag) + " '" + path + "' is a folder; it names the file to write";
  if (!llvm::sys::fs::is_directory(folder))
    return std::string(flag) + " '" + path + "': the folder '" + folder + "' does not exist";
  if (::access(folder.c_str(), W_OK) != 0)
    return std::string(flag) + " '" + path + "': the folder '" + folder + "' is not writable";
  return "";
}

// A flag's value that is not one of the words it takes: the flag, the value
// and what it takes, before anything is read (not a position in the model).
static std::string notOneOf(const char *flag, std::initializer_list<const char *> accepted,
                            const std::string &value) {
  std::string list;
  size_t i = 0;
  for (const char *a : accepted) {
    list += i == 0 ? "" : i + 1 == accepted.size() ? " or " : ", ";
    list += a;
    ++i;
  }
  return std::string("--") + flag + " expects " + list + ", not '" + value + "'";
}

static bool oneOf(const std::string &value, std::initializer_list<const char *> accepted) {
  for (const char *a : accepted)
    if (value == a)
      return true;
  return false;
}

// Every flag that takes a word, checked before the model is read: the error
// names the flag, its value and the values it takes.
static std::string checkWordFlags() {
  if (!plan::parseStrategyFlagName(strategy))
    return notOneOf("strategy", {"full-shard", "shard-grad-op", "no-shard", "hybrid-shard"},
                    strategy);
  llvm::StringRef w = wrap;
  if (w.consume_front("size:")) {
    int64_t n = 0;
    if (w.getAsInteger(10, n) || n <= 0)
      return "--wrap size:N expects N a positive integer (the fewest parameters a unit holds), not "
             "'" +
             wrap + "'";
  } else if (!oneOf(wrap, {"block", "experts", "none", "auto"})) {
    return notOneOf("wrap", {"block", "experts", "size:N", "none", "auto"}, wrap);
  }
  if (!oneOf(backwardPrefetch, {"pre", "post", "none"}))
    return notOneOf("backward-prefetch", {"pre", "post", "none"}, backwardPrefetch);
  if (!oneOf(activationCheckpointing, {"none", "blocks", "selective"}))
    return notOneOf("activation-checkpointing", {"none", "blocks", "selective"},
                    activationCheckpointing);
  if (!oneOf(paramDtype, {"f32", "bf16"}))
    return notOneOf("param-dtype", {"f32", "bf16"}, paramDtype);
  if (computeDtype.getNumOccurrences() && !oneOf(computeDtype, {"f32", "bf16"}))
    return notOneOf("compute-dtype", {"f32", "bf16"}, computeDtype);
  if (!oneOf(reduceDtype, {"f32", "bf16"}))
    return notOneOf("reduce-dtype", {"f32", "bf16"}, reduceDtype);
  if (!oneOf(gradSync, {"every", "last"}))
    return notOneOf("grad-sync", {"every", "last"}, gradSync);
  if (!oneOf(reshardAfterBackward, {"true", "false"}))
    return notOneOf("reshard-after-backward", {"true", "false"}, reshardAfterBackward);
  if (!oneOf(offload, {"none", "optimizer", "all"}))
    return notOneOf("offload", {"none", "optimizer", "all"}, offload);
  if (!oneOf(sequenceParallel, {"true", "false"}))
    return notOneOf("sequence-parallel", {"true", "false"}, sequenceParallel);
  if (!oneOf(reshardAfterForward, {"true", "false"})) {
    int64_t n = 0;
    if (llvm::StringRef(reshardAfterForward).getAsInteger(10, n) || n < 2 || n > kMaxWorldSize)
      return "--reshard-after-forward expects true, false or N, a group size from 2 to " +
             std::to_string(kMaxWorldSize) + ", not '" + reshardAfterForward + "'";
  }
  if (microBatch != "max") {
    int64_t b = 0;
    if (llvm::StringRef(microBatch).getAsInteger(10, b) || b < 1)
      return "--micro-batch expects a positive integer or max, not '" + microBatch + "'";
  }
  return "";
}

// The model to read: INPUT, or, where INPUT is a folder (an HF model's),
// the config.json in it.
static std::string modelFile(std::string &error) {
  if (!llvm::sys::fs::is_directory(inputPath))
    return inputPath;
  llvm::SmallString<256> config(inputPath);
  llvm::sys::path::append(config, "config.json");
  if (llvm::sys::fs::exists(config))
    return std::string(config);
  error = "'" + inputPath + "' is a folder, and there is no " + std::string(config) +
          " in it; give an HF config.json (or the folder that holds it), a JSON graph or a "
          ".mlir model";
  return "";
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  fsdp::tools::printFsdpVersion("fsdp-plan");
  cl::ParseCommandLineOptions(argc, argv, "fsdp-plan: plan fully sharded data parallel training\n");

  // Every flag's range, before the model is read: nothing runs, nothing is
  // written for a flag out of range.
  bool planning = worldSize.getNumOccurrences() > 0;
  if (planning && (worldSize < 1 || worldSize > kMaxWorldSize))
    return fail(outOfRange("world-size", 1, kMaxWorldSize, worldSize));
  tensorParallelAuto = tensorParallelFlag == "auto";
  if (!tensorParallelAuto) {
    if (llvm::StringRef(tensorParallelFlag).getAsInteger(10, tensorParallel))
      return fail("--tp expects a tensor-parallel degree N or auto, not '" + tensorParallelFlag +
                  "'");
    if (tensorParallel < 1 || tensorParallel > kMaxWorldSize)
      return fail(outOfRange("tp", 1, kMaxWorldSize, tensorParallel));
  } else if (wrap != "auto") {
    return fail("--tp auto is searched by --wrap auto, which --wrap " + wrap + " is not");
  }
  if (sequenceParallel.getNumOccurrences() && !tensorParallelAuto && tensorParallel == 1)
    return fail("--sequence-parallel " + sequenceParallel +
                " parts the tokens among tensor-parallel ranks, which --tp 1 has none of");
  if (planning && worldSize % tensorParallel != 0)
    return fail("--tp " + std::to_string(tensorParallel) + " must divide --world-size " +
                std::to_string(worldSize) + " (the mesh is world / tp data-parallel ranks by tp)");
  if (seqLen.getNumOccurrences() && seqLen < 1)
    return fail("--seq-len must be at least 1 (tokens per sequence), not " +
                std::to_string(seqLen) + "; leave it out for the model's maximum");
  if (gradAccum < 1 || gradAccum > kMaxGradAccum)
    return fail(outOfRange("grad-accum", 1, kMaxGradAccum, gradAccum));
  // With one micro-step there is nothing to accumulate: last would only
  // cost the accumulation buffers.
  if (reshardAfterBackward == "false" && gradAccum < 2)
    return fail("--reshard-after-backward false keeps the gathered parameters across a step's "
                "micro-steps: it needs --grad-accum 2 or more, not " +
                std::to_string(gradAccum));
  if (gradSync == "last" && gradAccum < 2)
    return fail("--grad-sync last accumulates over a step's micro-steps: it needs --grad-accum "
                "2 or more, not " +
                std::to_string(gradAccum));
  if (forwardPrefetch < 0 || forwardPrefetch > kMaxPrefetch)
    return fail(outOfRange("forward-prefetch", 0, kMaxPrefetch, forwardPrefetch));
  if (maxInflight < 1 || maxInflight > kMaxPrefetch)
    return fail(outOfRange("max-inflight-gathers", 1, kMaxPrefetch, maxInflight));
  if (shardSize.getNumOccurrences() && (shardSize < 1 || shardSize > kMaxWorldSize))
    return fail(outOfRange("shard-size", 1, kMaxWorldSize, shardSize));
  if (std::string err = checkWordFlags(); !err.empty())
    return fail(err);
  if (!outputPath.empty() && llvm::sys::path::extension(outputPath) != ".json" &&
      llvm::sys::path::extension(outputPath) != ".mlir")
    return fail("-o must name a .mlir or .json file, not '" + outputPath + "'");
  if (!outputPath.empty() && !planning)
    return fail("--world-size is required to write a plan");
  for (auto [flag, path] : {std::pair<const char *, std::string>{"-o", outputPath},
                            {"--report", reportPath},
                            {"--trace", tracePath}}) {
    std::string err = checkOutputPath(flag, path);
    if (!err.empty())
      return fail(err);
  }

  mlir::MLIRContext context;
  loadPlannerDialects(context);
  // Diagnostics as compilers print them: "file:line:col: error: ...", with
  // the line of the model file it points at.
  llvm::SourceMgr diagnosticSources;
  mlir::SourceMgrDiagnosticHandler diagnostics(diagnosticSources, &context);
  context.printOpOnDiagnostic(false); // the op is the line shown; a plan dump would bury it
  ImportOptions importOptions;
  importOptions.noDropout = noDropout;
  // Only printing: a config with dropout is summarised (what training
  // needs is said); a plan, report or trace still refuses it.
  std::vector<std::string> dropoutNotes;
  if (outputPath.empty() && reportPath.empty() && tracePath.empty())
    importOptions.dropoutNotes = &dropoutNotes;
  std::string folderError;
  std::string modelPath = modelFile(folderError);
  if (modelPath.empty())
    return fail(folderError);
  ImportError error;
  auto module = loadModel(modelPath, &context, importOptions, error);
  if (!module) {
    if (!error.message.empty())
      llvm::errs() << error.str() << "\n";
    return 1;
  }
  for (const std::string &note : dropoutNotes)
    llvm::errs() << "fsdp-plan: note: " << note << "\n";
  ModelSummary model = summarize(getGraph(*module));

  if (seqLen.getNumOccurrences() && model.maxSeqLen > 0 && seqLen > model.maxSeqLen)
    return fail("--seq-len " + std::to_string(seqLen) + " is more than the model's " +
                std::to_string(model.maxSeqLen) + " positions");
  // An image's sequence is its patches and the class token, no other length.
  if (seqLen.getNumOccurrences() && model.inputsKind == "images" && seqLen != model.maxSeqLen)
    return fail("--seq-len " + std::to_string(seqLen) + ": " + model.name + " takes images of " +
                std::to_string(model.maxSeqLen - 1) + " patches, so its sequence is " +
                std::to_string(model.maxSeqLen) +
                " (the patches and the class token); leave --seq-len out");

  // Without a world size there is nothing to plan: describe the model.
  if (!planning) {
    if (!reportPath.empty()) {
      nlohmann::ordered_json report = summaryJson(model);
      if (!writeAtomically(reportPath, [&](llvm::raw_ostream &os) {
            os << report.dump(2) << "\n";
            return true;
          }))
        return 1;
    }
    if (summary || reportPath.empty())
      printSummary(model, llvm::outs());
    return 0;
  }

  PlanOptions o;
  o.worldSize = worldSize;
  o.tp = tensorParallel;
  o.sequenceParallel = sequenceParallel == "true";
  bool searchMicroBatch = microBatch == "max";
  if (!searchMicroBatch)
    llvm::StringRef(microBatch).getAsInteger(10, o.microBatch); // checkWordFlags checked it
  o.seqLen = seqLen ? (int64_t)seqLen : model.maxSeqLen;
  // The planner counts bytes in int64: a micro-step's tokens (8 bytes each)
  // past 2^60 are refused here, in the flags' terms.
  if (!searchMicroBatch && (__int128)o.microBatch * o.seqLen * 8 > ((__int128)1 << 60))
    return fail("--micro-batch " + std::to_string(o.microBatch) + " with --seq-len " +
                std::to_string(o.seqLen) +
                " makes a micro-step's tokens alone more than 2^60 "
                "bytes a rank");
  o.strategy = strategy;
  o.wrap = wrap;
  o.forwardPrefetch = forwardPrefetch;
  o.backwardPrefetch = backwardPrefetch;
  o.maxInflightGathers = maxInflight;
  o.activationCheckpointing = activationCheckpointing;
  o.paramDtype = paramDtype;
  o.reduceDtype = reduceDtype;
  o.computeDtype = computeDtype;
  o.gradSync = gradSync;
  o.reshardAfterBackward = reshardAfterBackward == "true";
  o.offload = offload;
  // --reshard-after-forward: false is shard-grad-op's behaviour (one plan,
  // one name: the plan's strategy is shard-grad-op); N reshards full-shard
  // or hybrid-shard to groups of N.
  if (reshardAfterForward == "false") {
    if (strategy.getNumOccurrences() && strategy != "full-shard" && strategy != "shard-grad-op")
      return fail("--reshard-after-forward false keeps the gathered parameters from forward to "
                  "backward (shard-grad-op), which --strategy " +
                  strategy + " does not do");
    o.strategy = "shard-grad-op";
  } else if (reshardAfterForward != "true") {
    o.reshardAfterForward = std::stoll(reshardAfterForward);
    if (strategy.getNumOccurrences() && strategy != "full-shard" && strategy != "hybrid-shard")
      return fail("--reshard-after-forward " + reshardAfterForward +
                  " reshards after forward, which --strategy " + strategy +
                  " does not (full-shard and hybrid-shard do)");
    if (strategy.getNumOccurrences() == 0)
      o.strategy = "full-shard";
    if (!o.reshardAfterBackward)
      return fail("--reshard-after-forward " + reshardAfterForward +
                  " with --reshard-after-backward false: each unit stays gathered all step, "
                  "so nothing is resharded");
  } else if (strategy == "shard-grad-op" && reshardAfterForward.getNumOccurrences()) {
    return fail("--reshard-after-forward true frees the gathered parameters after forward, "
                "which --strategy shard-grad-op does not (it keeps them until backward)");
  }
  if (!o.reshardAfterBackward && strategy == "no-shard" && strategy.getNumOccurrences())
    return fail("--reshard-after-backward false keeps gathered parameters across micro-steps, "
                "but --strategy no-shard gathers none");
  // --wrap auto searches what was not given: what was given stays as given.
  bool autoWrap = o.wrap == "auto";
  SearchFixed fixed;
  // --reshard-after-forward false or N chose the strategy (shard-grad-op;
  // full-shard unless hybrid-shard was given).
  fixed.strategy = strategy.getNumOccurrences() > 0 || reshardAfterForward != "true";
  fixed.reshardAfterForward = reshardAfterForward.getNumOccurrences() > 0;
  fixed.offload = offload.getNumOccurrences() > 0;
  // Searched when asked (--tp auto): each degree multiplies the settings
  // priced (the README's Llama-3-8B search at 64 ranks: 58 s at tp 1, 395 s
  // over tp 1, 2, 4 and 8), so --wrap auto alone keeps the degree given.
  fixed.tp = !tensorParallelAuto;
  // A program of bf16 compute is not lowered under tp yet: said before the
  // search, not after it.
  if (tensorParallelAuto && !tpLowered(o))
    return fail("--tp auto with bf16 compute and -o " + outputPath +
                ": a tensor-parallel program of bf16 compute is not lowered yet (fsdp-run does "
                "not run it); search with --compute-dtype f32, or write the plan as .mlir");
  fixed.shardSize = shardSize.getNumOccurrences() > 0;
  fixed.forwardPrefetch = forwardPrefetch.getNumOccurrences() > 0;
  fixed.backwardPrefetch = backwardPrefetch.getNumOccurrences() > 0;
  fixed.activationCheckpointing = activationCheckpointing.getNumOccurrences() > 0;
  fixed.microBatch = !searchMicroBatch;
  // Searched only where there is something to accumulate.
  fixed.gradSync = gradSync.getNumOccurrences() > 0 || gradAccum < 2;
  fixed.reshardAfterBackward = reshardAfterBackward.getNumOccurrences() > 0 || gradAccum < 2;
  if (autoWrap && !fixed.strategy) {
    // The strategy is searched; a shard size given limits it to the
    // strategies that shard over that many ranks.
    if (fixed.shardSize && (worldSize / tensorParallel) % shardSize != 0)
      return fail("--shard-size " + std::to_string(shardSize) + " must divide --world-size " +
                  std::to_string(worldSize) + dpSuffix());
    o.shardSize = shardSize;
  } else if (o.strategy == "hybrid-shard" && autoWrap && !fixed.shardSize) {
    o.shardSize = 0; // the search picks the group
  } else {
    if (o.strategy == "hybrid-shard" &&
        (shardSize < 1 || (worldSize / tensorParallel) % shardSize != 0))
      return fail("hybrid-shard needs --shard-size G dividing --world-size " +
                  std::to_string(worldSize) + dpSuffix() + ", but G is " +
                  std::to_string(shardSize));
    // The other strategies fix the shard size; given, it must be theirs.
    o.shardSize = o.strategy == "hybrid-shard" ? int64_t(shardSize) : 0;
    o.shardSize = o.resolvedShardSize();
    if (o.strategy != "hybrid-shard" && fixed.shardSize && shardSize != o.shardSize)
      return fail("--shard-size " + std::to_string(shardSize) + ": " + o.strategy +
                  " shards over " + std::to_string(o.shardSize) +
                  (o.shardSize == 1 ? " rank" : " ranks (the world)") +
                  "; a shard size of its own is hybrid-shard's");
    int64_t n = o.reshardAfterForward, g = o.resolvedShardSize();
    if (n && (g % n != 0 || n >= g))
      return fail("--reshard-after-forward " + std::to_string(n) + ": its groups of " +
                  std::to_string(n) + " consecutive ranks must divide the shard group of " +
                  std::to_string(g) + " (" + o.strategy + " at --world-size " +
                  std::to_string(worldSize) + ") and be smaller" +
                  (n == g ? "; resharding to the shard group itself is true" : ""));
  }

  // Offloaded parameters reach the device by their gathers: no-shard (and
  // hybrid-shard over groups of one) has none.
  if (o.offload == "all" && (!autoWrap || fixed.strategy) && o.resolvedShardSize() < 2)
    return fail("--offload all keeps the parameter shards on the host and copies each in for "
                "its gather, but " +
                o.strategy + " with shard groups of " + std::to_string(o.resolvedShardSize()) +
                " gathers nothing (its compute reads the shard in place); --offload optimizer "
                "offloads the optimizer's state only");

  // The cluster: the cost model's figures, and the kernels a plan is for
  // (a GPU cluster file: the CUDA kernels' scratch, the nccl backend).
  Cluster cluster = defaultCluster();
  if (!clusterPath.empty()) {
    std::string err = loadCluster(clusterPath, cluster);
    if (!err.empty())
      return fail(err);
  }
  o.target = cluster.device;
  // Tensor parallelism's groups stay within a node (its link, not the
  // network, carries every layer's sums).
  if (tensorParallel > cluster.ranksPerNode)
    return fail("--tp " + std::to_string(tensorParallel) + " spans nodes, but " +
                (clusterPath.empty() ? std::string("this machine (cpu-local)") : clusterPath) +
                " has " + std::to_string(cluster.ranksPerNode) +
                " ranks a node; a tensor-parallel group stays within one");
  if (o.offload != "none" && !cluster.hasHost())
    return fail("--offload " + o.offload +
                " prices the copies between device and host memory and the host's AdamW, but " +
                clusterPath +
                " has no host_link and host (docs/cost-model.md: the link's bandwidth, the "
                "host's memory and its AdamW rate, each with its source)");
  // The budget: as given; with --cluster, the device's memory; `none`: no check.
  std::optional<int64_t> budget;
  std::string budgetSource; // said in the error where the budget was not given
  if (llvm::StringRef(memoryBudget).trim().equals_insensitive("none")) {
    budget = std::nullopt;
  } else if (memoryBudget.getNumOccurrences()) {
    budget = parseSize(memoryBudget);
    if (!budget || *budget <= 0)
      return fail("--memory-budget '" + memoryBudget +
                  "' is not a size (examples: 80GiB, 512MiB, 1e9 bytes as 1000000000) or none");
  } else if (!clusterPath.empty() && cluster.memoryBytes > 0) {
    // What the plan may use of the device: its memory less what a process
    // needs there beyond the plan (loadCluster keeps it below the memory).
    budget = cluster.memoryBytes - cluster.reservedBytes;
    budgetSource = "the device memory of " + clusterPath + " (" + humanBytes(cluster.memoryBytes) +
                   ") less its reserved_bytes (" + humanBytes(cluster.reservedBytes) +
                   "; --memory-budget none turns the check off)";
  }
  std::optional<Headroom> headroom;
  if (!clusterPath.empty())
    headroom = Headroom{clusterPath, cluster.memoryBytes, cluster.reservedBytes, cluster.reserved,
                        !memoryBudget.getNumOccurrences() && cluster.memoryBytes > 0};

  // --micro-batch max: the largest micro-batch whose plan fits the budget
  // (with --wrap auto, for each plan the search tries).
  std::optional<std::pair<int64_t, int64_t>> nextTooBig; // (micro-batch, its peak)
  if (searchMicroBatch && !budget)
    return fail("--micro-batch max needs --memory-budget (or --cluster, whose device memory "
                "less its reserved_bytes is the default budget)");
  if (searchMicroBatch && !autoWrap) {
    std::string why;
    mlir::FailureOr<MicroBatchSearch> found = fsdp::searchMicroBatch(*module, o, *budget, why);
    if (mlir::failed(found))
      return why.empty() ? 1 : fail(why);
    o.microBatch = found->largest;
    nextTooBig = {{found->next, found->nextPeakBytes}};
  }

  // --wrap auto: the fastest predicted plan that fits, from a search.
  std::vector<Candidate> searched;
  if (autoWrap) {
    int64_t blockParams = 0;
    for (const ModuleRow &r : model.modules)
      if (llvm::StringRef(r.module).ends_with(".0") && model.numBlocks > 0)
        blockParams = r.params;
    // It runs for up to a minute on a large model: on a terminal, its
    // progress in place; always, a last line of what it priced and how long
    // it took (stderr: the summary on stdout stays as it is).
    using Clock = std::chrono::steady_clock;
    Clock::time_point start = Clock::now(), shown = start - std::chrono::seconds(1);
    bool tty = ::isatty(STDERR_FILENO);
    auto seconds = [&](Clock::time_point t) {
      return std::chrono::duration<double>(t - start).count();
    };
    SearchProgress progress;
    if (tty)
      progress.onProgress = [&](const SearchProgress &p) {
        Clock::time_point now = Clock::now();
        if (now - shown < std::chrono::milliseconds(100))
          return;
        shown = now;
        llvm::errs() << llvm::format("\r--wrap auto: setting %zu of %zu, %lld plans priced, %.1f s",
                                     p.settingsDone, p.settings, (long long)p.priced, seconds(now))
                     << "\x1b[K";
        llvm::errs().flush();
      };
    searched = searchPlans(*module, o, fixed, cluster, gradAccum, budget, model.numBlocks,
                           blockParams, &progress);
    if (tty)
      llvm::errs() << "\r\x1b[K";
    llvm::errs() << llvm::format("fsdp-plan: --wrap auto priced %lld plans over %zu settings in "
                                 "%.1f s; %zu distinct\n",
                                 (long long)progress.priced, progress.settings,
                                 seconds(Clock::now()), searched.size());
    if (searched.empty())
      return fail("--wrap auto found no plan for this model and world size" +
                  std::string(searchMicroBatch ? " with a micro-batch that fits the budget" : ""));
    o = searched.front().options;
    if (searchMicroBatch && searched.front().nextMicroBatch > 0)
      nextTooBig = {{searched.front().nextMicroBatch, searched.front().nextPeakBytes}};
  }

  if (mlir::failed(runPlanPipeline(*module, o)))
    return 1; // the pass has reported where
  PlanFigures figures = planFigures(*module, cluster, gradAccum);
  // The program carries the prediction, so that fsdp-run can show it.
  auto f64 = [&](double v) { return mlir::FloatAttr::get(mlir::Float64Type::get(&context), v); };
  getStep(*module)->setAttr("predicted_micro_step_s", f64(figures.predicted->microStepTimeS));
  getStep(*module)->setAttr("predicted_optimizer_s", f64(figures.predicted->optimizerTimeS));
  // What fsdp-run takes from the plan: its accumulation (the run's
  // default), and what MFU needs (a device's peak only from a cluster file:
  // the default cluster's figures are no device's).
  getStep(*module)->setAttr(
      "grad_accum", mlir::IntegerAttr::get(mlir::IntegerType::get(&context, 64), gradAccum));
  getStep(*module)->setAttr("model_flops_per_micro_step",
                            f64(figures.predicted->modelFlopsPerStep / gradAccum));
  if (!clusterPath.empty()) {
    bool bf16 = o.resolvedComputeDtype() == "bf16";
    getStep(*module)->setAttr("peak_flops", f64(bf16 ? cluster.bf16Flops : cluster.f32Flops));
  }
  bool hostFits = fitsHostMemory(figures, cluster, o.worldSize);
  bool fits = (!budget || figures.peakBytes <= *budget) && hostFits;
  // The plan is rendered before any file is written: a lowering that fails
  // leaves no report or trace behind either.
  std::string planText;
  if (fits && !outputPath.empty()) {
    llvm::raw_string_ostream os(planText);
    if (llvm::sys::path::extension(outputPath) == ".json") {
      if (mlir::failed(lowerToProgram(*module, os)))
        return 1; // the lowering has reported where
    } else {
      module->print(os);
    }
  }

  // What the memory and precision settings did: the same plan without them.
  std::optional<PlanFigures> baseline;
  if (o.activationCheckpointing != "none" || o.paramDtype != "f32" || o.reduceDtype != "f32" ||
      o.resolvedComputeDtype() != "f32") {
    mlir::MLIRContext baseContext;
    loadPlannerDialects(baseContext);
    ImportError baseError;
    auto base = loadModel(modelPath, &baseContext, importOptions, baseError);
    PlanOptions bo = o;
    bo.activationCheckpointing = "none";
    bo.paramDtype = bo.reduceDtype = bo.computeDtype = "f32";
    if (base && mlir::succeeded(runPlanPipeline(*base, bo)))
      baseline = planFigures(*base);
  }

  if (fits && !tracePath.empty()) {
    auto trace = predictedTrace(*figures.predicted, o.worldSize);
    if (!writeAtomically(tracePath, [&](llvm::raw_ostream &os) {
          os << trace.dump() << "\n";
          return true;
        }))
      return 1;
  }
  // The report is written for a plan over the budget too (fits: false).
  if (!reportPath.empty()) {
    nlohmann::ordered_json report =
        planReport(model, o, figures, budget, headroom ? &*headroom : nullptr);
    // A host pool the node's memory cannot hold does not fit either
    // (fsdp-plan refuses it below).
    if (report.contains("host_memory")) {
      report["host_memory"]["fits"] = hostFits;
      report["fits"] = fits;
    }
    if (baseline)
      report["without_settings"] = {{"activation_checkpointing", "none"},
                                    {"param_dtype", "f32"},
                                    {"reduce_dtype", "f32"},
                                    {"compute_dtype", "f32"},
                                    {"peak_bytes", baseline->peakBytes},
                                    {"activations_bytes", baseline->activationsBytes},
                                    {"unsharded_bytes", baseline->unshardedBytes},
                                    {"all_gather", baseline->allGatherBytes},
                                    {"reduce_scatter", baseline->reduceScatterBytes}};
    if (!searched.empty()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (size_t i = 0; i < searched.size() && i < 6; ++i) {
        const Candidate &c = searched[i];
        list.push_back({{"strategy", c.options.strategy},
                        {"shard_size", c.options.resolvedShardSize()},
                        {"wrap", c.options.wrap},
                        {"forward_prefetch", c.options.forwardPrefetch},
                        {"backward_prefetch", c.options.backwardPrefetch},
                        {"grad_sync", c.options.gradSync},
                        {"reshard_after_backward", c.options.reshardAfterBackward},
                        {"reshard_after_forward", reshardAfterForwardValue(c.options)},
                        {"offload", c.options.offload},
                        {"tp", c.options.tp},
                        {"activation_checkpointing", c.options.activationCheckpointing},
                        {"checkpointed_blocks", checkpointedBlocks(c.options, model.numBlocks)},
                        {"micro_batch", c.options.microBatch},
                        {"step_time_s", c.figures.predicted->stepTimeS},
                        {"tokens_per_s", c.figures.predicted->tokensPerS},
                        {"peak_bytes", c.figures.peakBytes},
                        {"fits", c.fits}});
      }
      report["search"] = {{"plans", searched.size()}, {"kept", keptFlags(fixed)}, {"best", list}};
    }
    if (nextTooBig)
      report["micro_batch_search"] = {{"largest_that_fits", o.microBatch},
                                      {"next", nextTooBig->first},
                                      {"next_peak_bytes", nextTooBig->second}};
    if (!writeAtomically(reportPath, [&](llvm::raw_ostream &os) {
          os << report.dump(2) << "\n";
          return true;
        }))
      return 1;
  }
  // Asked for, or the only output: a plan that writes nothing says what it found.
  bool show = summary || (outputPath.empty() && reportPath.empty() && tracePath.empty());
  if (show)
    printPlanSummary(model, o, figures, budget, llvm::outs(), headroom ? &*headroom : nullptr);
  if (show && !searched.empty()) {
    // Plans whose figures are identical are one plan (searchPlans).
    llvm::outs() << "\n--wrap auto searched " << searched.size()
                 << " plans; the fastest that fit, the chosen first";
    std::vector<std::string> kept = keptFlags(fixed);
    if (!kept.empty())
      llvm::outs() << " (as given: " << llvm::join(kept, ", ") << ")";
    llvm::outs() << ":\n";
    // "prefetch" is forward's; backward's and the micro-batch follow the peak.
    llvm::outs() << llvm::format(
        "  %-36s %-14s %8s %12s %12s %12s %9s %11s %14s %14s\n", (const char *)"strategy",
        (const char *)"wrap", (const char *)"prefetch", (const char *)"checkpointed",
        (const char *)"step s", (const char *)"peak", (const char *)"backward",
        (const char *)"micro-batch", (const char *)"tokens/s/rank", (const char *)"tokens/s total");
    for (size_t i = 0; i < searched.size() && i < 6; ++i) {
      const Candidate &c = searched[i];
      std::string name = c.options.strategy;
      if (c.options.strategy == "hybrid-shard")
        name += ":" + std::to_string(c.options.resolvedShardSize());
      // No-sync accumulation; gathered once a step.
      // No-sync accumulation; gathered once a step; resharded to N after forward.
      std::vector<std::string> notes;
      if (c.options.gradSync == "last")
        notes.push_back("sync last");
      if (!c.options.reshardAfterBackward)
        notes.push_back("kept");
      if (c.options.reshardAfterForward)
        notes.push_back("hpZ " + std::to_string(c.options.reshardAfterForward));
      if (c.options.offload != "none")
        notes.push_back("offload " + c.options.offload);
      if (c.options.tp > 1)
        notes.push_back("tp " + std::to_string(c.options.tp));
      if (!notes.empty())
        name += " (" + llvm::join(notes, ", ") + ")";
      // The checkpointed blocks, and how: "4 blocks", "4 selective".
      int64_t n = checkpointedBlocks(c.options, model.numBlocks);
      std::string checkpointed = std::to_string(n);
      if (n)
        checkpointed += " " + c.options.activationCheckpointing;
      llvm::outs() << llvm::format(
          "  %-36s %-14s %8lld %12s %12.4f %12s %9s %11lld %14.0f %14.0f%s\n", name.c_str(),
          c.options.wrap.c_str(), (long long)c.options.forwardPrefetch, checkpointed.c_str(),
          c.figures.predicted->stepTimeS, humanBytes(c.figures.peakBytes).c_str(),
          c.options.backwardPrefetch.c_str(), (long long)c.options.microBatch,
          c.figures.predicted->tokensPerS / double(c.options.worldSize),
          c.figures.predicted->tokensPerS, c.fits ? "" : "  (does not fit)");
    }
  }
  if (show && baseline) {
    auto change = [&](const char *what, int64_t before, int64_t after) {
      llvm::outs() << "  " << llvm::left_justify(what, 34)
                   << llvm::right_justify(humanBytes(before), 10) << " -> "
                   << llvm::right_justify(humanBytes(after), 10) << "\n";
    };
    llvm::outs() << "\nwhat checkpointing " << o.activationCheckpointing << ", parameters "
                 << o.paramDtype << ", compute " << o.resolvedComputeDtype() << " and reductions "
                 << o.reduceDtype << " did (against none, f32, f32, f32)\n";
    change("peak per rank", baseline->peakBytes, figures.peakBytes);
    change("activations at the peak", baseline->activationsBytes, figures.activationsBytes);
    change("unsharded at the peak", baseline->unshardedBytes, figures.unshardedBytes);
    change("all_gather per micro-step", baseline->allGatherBytes, figures.allGatherBytes);
    change("reduce_scatter per micro-step", baseline->reduceScatterBytes,
           figures.reduceScatterBytes);
  }
  if (nextTooBig && (summary || outputPath.empty()))
    llvm::outs() << "largest micro-batch that fits " << humanBytes(*budget) << ": " << o.microBatch
                 << " (" << humanBytes(figures.peakBytes) << " per rank); " << nextTooBig->first
                 << " would need " << humanBytes(nextTooBig->second) << "\n";
  if (!hostFits)
    return fail("the plan's host pool of " + humanBytes(figures.hostBytes) +
                " per rank (--offload " + o.offload + "), times the " +
                std::to_string(std::min<int64_t>(cluster.ranksPerNode, o.worldSize)) +
                " ranks of a node, is over the node's host memory of " +
                humanBytes(cluster.hostMemoryBytes) +
                (clusterPath.empty() ? std::string() : " (" + clusterPath + ")") +
                "; no plan written");
  if (!fits) {
    return fail("the plan needs " + humanBytes(figures.peakBytes) + " (" +
                withCommas(figures.peakBytes) + " bytes) per rank, over the budget of " +
                humanBytes(*budget) + (budgetSource.empty() ? "" : ", " + budgetSource) +
                ": parameter shards " + humanBytes(figures.paramsBytes) + ", gradient shards " +
                humanBytes(figures.gradsBytes) + ", optimizer state " +
                humanBytes(figures.optimizerBytes) + ", unsharded parameters and gradients " +
                humanBytes(figures.unshardedBytes) + ", activations " +
                humanBytes(figures.activationsBytes) + "; no plan written");
  }
  if (!outputPath.empty() && !writeAtomically(outputPath, [&](llvm::raw_ostream &os) {
        os << planText;
        return true;
      }))
    return 1;
  return 0;
}
