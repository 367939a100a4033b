//===- Inputs.h - what a model takes as input --------------------*- C++ -*-===//
//
// The kinds of input a model takes and an image model's geometry: words of
// the IR (nn.graph's `inputs_kind` and `image`, checked by its verifier) and
// of the program (its `inputs`, read by the runtime's batches) alike, so they
// live here, below both: the dialect includes nothing of the runtime, and
// the runtime nothing of MLIR. runtime/Program.h names them in
// fsdp::program, where the runtime uses them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SUPPORT_INPUTS_H
#define FSDP_SUPPORT_INPUTS_H

#include <cstdint>
#include <optional>
#include <string>

namespace fsdp::support {

/// What the model takes as input (the program's `inputs.kind`,
/// docs/program-format.md), and so how the runtime builds each batch
/// (runtime/data/Batches.h):
/// - Tokens: `tokens` and `targets` i64 [micro_batch, seq_len], targets the
///   next tokens (causal LM; the default);
/// - MaskedTokens: the same windows, about 15% of positions selected by
///   absolute file index and replaced by the mask token; targets hold the
///   original at selected positions and kernels::kIgnoreIndex elsewhere (BERT);
/// - Images: `tokens` is the patches, f32 or bf16 [micro_batch, patches,
///   channels * patch_height * patch_width], `targets` the labels, i64
///   [micro_batch, 1] (ViT).
enum class InputKind { Tokens, MaskedTokens, Images };
const char *inputKindName(InputKind k);
std::optional<InputKind> parseInputKind(const std::string &name);

/// An image program's input: images of height x width x channels cut into
/// patches of patch_height x patch_width, and the classifier's classes.
struct ImageSpec {
  int64_t height = 0, width = 0, channels = 0, patchHeight = 0, patchWidth = 0, classes = 0;
  int64_t patches() const { return (height / patchHeight) * (width / patchWidth); }
  int64_t patchValues() const { return channels * patchHeight * patchWidth; }
};
bool operator==(const ImageSpec &a, const ImageSpec &b);

} // namespace fsdp::support

#endif
