//===- ModelOps.h - the ops and dtypes of a model ----------------*- C++ -*-===//
//
// One table (GraphJSON.cpp's) says which nn ops a model's forward holds and
// which dtypes; the JSON importer and exporter and verifyModelGraph read it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_IMPORT_MODELOPS_H
#define FSDP_PLANNER_IMPORT_MODELOPS_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace fsdp {

/// Whether `name` (without "nn.") is a forward op a model holds.
bool isModelOpName(llvm::StringRef name);

/// The forward ops a model holds, comma-separated, for messages.
std::string modelOpNames();

/// Whether a model's tensors may hold `type` (f32, bf16, f16, f64, i64, i32).
bool isModelDtype(mlir::Type type);

} // namespace fsdp

#endif
