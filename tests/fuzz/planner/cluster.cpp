//===- cluster.cpp - fuzz the cluster description reader ------------------===//
//
// The input is a cluster file (models/hardware/*.json, docs/cost-model.md),
// read by loadCluster as `fsdp-plan --cluster` does. It must be accepted or
// refused with a message; an accepted cluster must give a finite,
// non-negative prediction for small planned models (full-shard over 4 ranks,
// and hybrid-shard of 2 x 2, so that both links are used however many ranks
// a node holds), and their predicted traces.
//
//===----------------------------------------------------------------------===//
#include "PlannerFuzz.h"

#include <exception>
#include <fstream>
#include <unistd.h>

using namespace fsdp;

namespace {

mlir::OwningOpRef<mlir::ModuleOp> plannedTinyModel(llvm::StringRef type, const PlanOptions &o) {
  ModelConfig c;
  c.modelType = type.str();
  c.name = c.modelType + "-tiny";
  c.vocabSize = 61;
  c.hiddenSize = 16;
  c.numLayers = 2;
  c.numHeads = 4;
  c.numKvHeads = type == "llama" ? 2 : 4;
  c.headDim = 4;
  c.intermediateSize = 40;
  c.maxSeqLen = 16;
  c.tieWordEmbeddings = type == "gpt2";
  mlir::MLIRContext &ctx = fuzz::context();
  auto module =
      mlir::OwningOpRef<mlir::ModuleOp>(mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx)));
  buildGraph(c, *module);
  if (mlir::failed(runPlanPipeline(*module, o)))
    fuzz::violation("the harness's own tiny model does not plan");
  return module;
}

struct Planned {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  int64_t worldSize;
};

std::vector<Planned> &plannedModels() {
  static std::vector<Planned> models = [] {
    std::vector<Planned> m;
    PlanOptions full;
    full.worldSize = 4;
    full.seqLen = 16;
    m.push_back({plannedTinyModel("gpt2", full), 4});
    PlanOptions hybrid = full;
    hybrid.strategy = "hybrid-shard";
    hybrid.shardSize = 2;
    hybrid.paramDtype = hybrid.reduceDtype = "bf16";
    m.push_back({plannedTinyModel("llama", hybrid), 4});
    return m;
  }();
  return models;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    std::vector<Planned> &models = plannedModels();
    // loadCluster reads a file, as --cluster does.
    static const std::string path =
        "/tmp/fsdp-fuzz-cluster-" + std::to_string(::getpid()) + ".json";
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char *>(data), (std::streamsize)size);
      if (!out)
        fuzz::violation("cannot write " + path);
    }
    Cluster cluster;
    std::string err = loadCluster(path, cluster);
    if (!err.empty()) {
      if (err.find(path) != 0)
        fuzz::violation("a cluster error that does not name the file: " + err);
      return 0;
    }
    for (Planned &p : models) {
      for (int64_t accum : {1, 3}) {
        Prediction pred = predict(*p.module, cluster, accum);
        fuzz::checkPrediction(pred, "an accepted cluster");
        (void)predictedTrace(pred, p.worldSize).dump();
      }
    }
  } catch (const std::exception &e) {
    fuzz::violation(std::string("an exception escaped: ") + e.what());
  } catch (...) {
    fuzz::violation("an exception escaped");
  }
  return 0;
}
