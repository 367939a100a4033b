//===- OpsTest.cpp - nn's compute ops and runtime/Ops.def, one list -------===//
//
// The dialect and the runtime name their ops apart (NNOps.td, Ops.def) and
// meet by name: in lowering (LowerToProgram.cpp) and in the kernel-scratch
// model (planner/KernelScratch.cpp). These tests fail when an op is added
// on one side only, and when a tool's context lacks the scratch model.
//
//===----------------------------------------------------------------------===//
#include "dialect/FSDP/FSDPDialect.h"
#include "dialect/NN/NNDialect.h"
#include "planner/Import/Import.h"
#include "planner/KernelScratch.h"
#include "planner/Pipeline.h"
#include "runtime/Program.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace fsdp;

namespace {

/// The names of `dialect`'s registered ops (its compute ops only, where
/// computeOnly), without the dialect's prefix.
std::set<std::string> opNames(mlir::MLIRContext &ctx, llvm::StringRef dialect, bool computeOnly) {
  std::set<std::string> names;
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations())
    if (op.getDialectNamespace() == dialect && (!computeOnly || op.hasTrait<nn::ComputeOp>()))
      names.insert(op.stripDialect().str());
  return names;
}

/// Every row of runtime/Ops.def, by its name in a program.
std::set<std::string> opsDefRows() {
  return {
#define FSDP_OP(Name, json, stream, minIn, maxIn, minOut, maxOut) json,
#include "runtime/Ops.def"
  };
}

} // namespace

// Every nn compute op is a compute row of Ops.def, and every row is an nn
// compute op, an fsdp op lowered to an instruction, or the event record.
TEST(Ops, EveryComputeOpHasARowAndEveryRowAnOp) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<nn::NNDialect, plan::FSDPDialect>();
  std::set<std::string> compute = opNames(ctx, "nn", /*computeOnly=*/true);
  std::set<std::string> planOps = opNames(ctx, "fsdp", /*computeOnly=*/false);
  std::set<std::string> rows = opsDefRows();
  ASSERT_GT(compute.size(), 20u);
  for (const std::string &name : compute) {
    const program::OpInfo *info = program::findOp(name);
    EXPECT_TRUE(info) << "nn." << name << " has no row in runtime/Ops.def";
    if (info)
      EXPECT_EQ(info->stream, program::OpStream::Compute) << name;
  }
  for (const std::string &row : rows)
    EXPECT_TRUE(compute.count(row) || planOps.count(row) || row == "record")
        << "runtime/Ops.def's row '" << row << "' is no nn compute op and no fsdp op";
  // An nn op that is not a compute op must not share a row's name either:
  // lowering would take it for the instruction.
  for (const std::string &name : opNames(ctx, "nn", /*computeOnly=*/false))
    EXPECT_TRUE(compute.count(name) || !rows.count(name))
        << "nn." << name << " is named as a row of Ops.def but is no compute op";
}

// The planner's registration gives every compute op its scratch, and nothing
// else.
TEST(Ops, ThePlannerAttachesScratchToEveryComputeOp) {
  mlir::MLIRContext ctx;
  loadPlannerDialects(ctx);
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations())
    EXPECT_EQ(op.hasInterface<KernelScratchOpInterface>(), op.hasTrait<nn::ComputeOp>())
        << op.getStringRef().str();
}

// Planning in a context without the scratch model fails with an error that
// names the registration, instead of planning no scratch.
TEST(Ops, PlanningWithoutTheScratchModelSaysSo) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<nn::NNDialect, plan::FSDPDialect>();
  std::string errors;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    errors += d.str() + "\n";
    return mlir::success();
  });
  ImportError error;
  auto module =
      loadModel(std::string(FSDP_SOURCE_DIR) + "/models/gpt2-tiny/config.json", &ctx, {}, error);
  ASSERT_TRUE(module) << error.str();
  EXPECT_TRUE(mlir::failed(runPlanPipeline(*module, PlanOptions())));
  EXPECT_NE(errors.find("has no kernel-scratch model: the tool must register it"),
            std::string::npos)
      << errors;
}
