//===- plan_bench.cpp - how fast and how lean planning is -----------------===//
//
// Plans Llama-3.1-405B for 1,024 ranks (full-shard, wrap by block, 1 x 4096
// tokens per rank), lowering to the JSON program included, and the same
// model cut to 12, 48, 126 and 1,000 layers, so that growth can be seen;
// then the whole model for 16,384 ranks as dp 2048 x tp 8 (sequence
// parallel, 1 x 8192 tokens per tp group), planned but not lowered (fsdp-run
// does not run tensor parallelism yet). Each case runs in a child process,
// so its peak resident memory is its own.
//
//   fsdp-plan-bench [--world-size N] [--config FILE]
//
//===----------------------------------------------------------------------===//
#include "planner/Import/Import.h"
#include "planner/KernelScratch.h"
#include "planner/LowerToProgram.h"
#include "planner/Pipeline.h"
#include "planner/PlanUtils.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace fsdp;

struct Result {
  double seconds;
  long maxRssKiB;
  int64_t ops;
  int64_t programBytes;
  int ok;
};

static Result runCase(const std::string &configPath, int64_t layers, int64_t world,
                      int64_t tp = 1) {
  Result r{0, 0, 0, 0, 0};
  auto buffer = llvm::MemoryBuffer::getFile(configPath);
  if (!buffer)
    return r;
  auto start = std::chrono::steady_clock::now();
  mlir::MLIRContext context;
  loadPlannerDialects(context);
  context.disableMultithreading();
  ImportError error;
  auto config = parseHFConfig((*buffer)->getBuffer(), configPath, {}, error);
  if (!config) {
    fprintf(stderr, "%s\n", error.str().c_str());
    return r;
  }
  config->numLayers = layers;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  buildGraph(*config, *module);
  PlanOptions o;
  o.worldSize = world;
  o.microBatch = 1;
  o.seqLen = tp > 1 ? 8192 : 4096;
  o.tp = tp;
  if (mlir::failed(runPlanPipeline(*module, o)))
    return r;
  std::string program;
  llvm::raw_string_ostream os(program);
  if (tp == 1 && mlir::failed(lowerToProgram(*module, os)))
    return r;
  os.flush();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  module->walk([&](mlir::Operation *) { ++r.ops; });
  r.programBytes = program.size();
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  r.maxRssKiB = usage.ru_maxrss;
  r.ok = 1;
  return r;
}

int main(int argc, char **argv) {
  int64_t world = 1024;
  std::string config = std::string(FSDP_SOURCE_DIR) + "/models/Llama-3.1-405B/config.json";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--world-size") && i + 1 < argc)
      world = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--config") && i + 1 < argc)
      config = argv[++i];
  }
  printf("planning %s (layers varied) for %lld ranks, full-shard, 1 x 4096 tokens per rank,\n"
         "lowering to the JSON program included; each case in its own process\n\n",
         config.c_str(), (long long)world);
  printf("%8s  %10s  %12s  %10s  %14s  %12s\n", "layers", "seconds", "ms/layer", "ops",
         "program bytes", "peak RSS");
  bool allOk = true;
  // One case in a child process: its time and its own peak RSS.
  auto inChild = [&](int64_t layers, int64_t ranks, int64_t tp) {
    Result r{};
    int fds[2];
    if (pipe(fds) != 0)
      return r;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      Result c = runCase(config, layers, ranks, tp);
      if (write(fds[1], &c, sizeof c) != (ssize_t)sizeof c)
        _exit(1);
      _exit(0);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof r)
      r.ok = 0;
    return r;
  };
  for (int64_t layers : {12, 48, 126, 1000}) {
    Result r = inChild(layers, world, 1);
    if (!r.ok) {
      printf("%8lld  failed\n", (long long)layers);
      allOk = false;
      continue;
    }
    printf("%8lld  %10.3f  %12.3f  %10lld  %14lld  %9.1f MiB\n", (long long)layers, r.seconds,
           1000.0 * r.seconds / layers, (long long)r.ops, (long long)r.programBytes,
           r.maxRssKiB / 1024.0);
  }
  Result tp = inChild(126, 16384, 8);
  if (tp.ok)
    printf("\n126 layers for 16,384 ranks as dp 2048 x tp 8 (sequence parallel, 1 x 8192 tokens "
           "per tp group; planned, not lowered): %.3f s, %lld ops, %.1f MiB peak RSS\n",
           tp.seconds, (long long)tp.ops, tp.maxRssKiB / 1024.0);
  else
    printf("\n126 layers for 16,384 ranks as dp 2048 x tp 8: failed\n");
  allOk &= tp.ok != 0;
  printf("\ntarget: the 126-layer cases (Llama-3.1-405B itself) under 2 s and 1 GiB\n");
  return allOk ? 0 : 1;
}
