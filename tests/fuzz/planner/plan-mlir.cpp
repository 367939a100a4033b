//===- plan-mlir.cpp - fuzz a plan as a user hands it to the tools --------===//
//
// The input is a plan (`fsdp-plan -o plan.mlir`: fsdp.unit ops and one
// fsdp.step), perhaps edited by hand, as `fsdp-translate --export-program`
// and `fsdp-run PLAN.mlir` read it. It is parsed and verified by the
// dialects' verifiers, checked by the plan verifier (fsdp-verify-plan) and
// lowered to the runtime's program. Each step must succeed or fail with a
// diagnostic; a program that lowering writes must be one that the runtime's
// loader accepts (PlannerFuzz.h).
//
//===----------------------------------------------------------------------===//
#include "PlannerFuzz.h"

#include "planner/Passes.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"

#include <exception>

using namespace fsdp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    mlir::MLIRContext &ctx = fuzz::context();
    llvm::StringRef text(reinterpret_cast<const char *>(data), size);
    unsigned before = fuzz::diagnosticErrors();
    // What fsdp-translate and fsdp-opt do first: parse and verify. A copy,
    // as importMLIR makes: MLIR's lexer reads up to the NUL that ends a
    // MemoryBuffer, and the fuzzer's bytes have none.
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.mlir"),
                                 llvm::SMLoc());
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, mlir::ParserConfig(&ctx));
    if (!module) {
      if (fuzz::diagnosticErrors() == before)
        fuzz::violation("parsing failed without a diagnostic");
      return 0;
    }

    // fsdp-opt --fsdp-verify-plan.
    before = fuzz::diagnosticErrors();
    mlir::PassManager pm(&ctx, mlir::ModuleOp::getOperationName());
    pm.addPass(createVerifyPlan());
    if (mlir::failed(pm.run(*module))) {
      if (fuzz::diagnosticErrors() == before)
        fuzz::violation("the plan verifier failed without a diagnostic");
      return 0;
    }

    // fsdp-translate --export-program, whose program fsdp-run loads.
    std::string program;
    llvm::raw_string_ostream os(program);
    before = fuzz::diagnosticErrors();
    if (mlir::failed(lowerToProgram(*module, os))) {
      if (fuzz::diagnosticErrors() == before)
        fuzz::violation("lowering failed without a diagnostic");
      return 0;
    }
    fuzz::checkProgramLoads(program);
  } catch (const std::exception &e) {
    fuzz::violation(std::string("an exception escaped: ") + e.what());
  } catch (...) {
    fuzz::violation("an exception escaped");
  }
  return 0;
}
