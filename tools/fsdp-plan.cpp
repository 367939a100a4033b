//===- fsdp-plan.cpp - decide a training plan ahead of time ---------------===//
//
// Reads a model (HF config.json, JSON graph or .mlir). Today it prints the
// model's summary and writes its report; planning lands with the planner.
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/ModelSummary.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace fsdp;
namespace cl = llvm::cl;

static cl::OptionCategory category("fsdp-plan options");
static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<config.json|graph.json|model.mlir>"),
                                      cl::Required, cl::cat(category));
static cl::opt<bool> summary("summary", cl::desc("print a human-readable summary"),
                             cl::cat(category));
static cl::opt<std::string> reportPath("report", cl::desc("write the report as JSON to FILE"),
                                       cl::value_desc("FILE"), cl::cat(category));
static cl::opt<bool> noDropout(
    "no-dropout",
    cl::desc("train without dropout although the HF config sets it (GPT-2's published "
             "configs set 0.1)"),
    cl::cat(category));

static int fail(const std::string &message) {
  llvm::errs() << "fsdp-plan: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "fsdp-plan: plan fully sharded data parallel training\n");

  mlir::MLIRContext context;
  ImportOptions options;
  options.noDropout = noDropout;
  ImportError error;
  auto module = loadModel(inputPath, &context, options, error);
  if (!module) {
    if (!error.message.empty())
      llvm::errs() << error.str() << "\n";
    return 1;
  }
  ModelSummary s = summarize(getGraph(*module));

  if (!reportPath.empty()) {
    nlohmann::ordered_json report = summaryJson(s);
    // Written to a temporary and renamed, so a failed run leaves no half file.
    if (llvm::Error e = llvm::writeToOutput(reportPath, [&](llvm::raw_ostream &os) {
          os << report.dump(2) << "\n";
          return llvm::Error::success();
        }))
      return fail("cannot write the report '" + reportPath + "': " +
                  llvm::toString(std::move(e)));
  }
  if (summary || reportPath.empty())
    printSummary(s, llvm::outs());
  return 0;
}
