//===- Encoder.h - what the BERT and ViT families share ----------*- C++ -*-===//
//
// Both are encoders of the same block: biased query, key and value linears,
// every query seeing every key, exact (erf) GELU, two LayerNorms; BERT puts
// the norms after the attention and the MLP (post-LN), ViT before (pre-LN).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_IMPORT_FAMILIES_ENCODER_H
#define FSDP_PLANNER_IMPORT_FAMILIES_ENCODER_H

#include "planner/Import/Families/Family.h"

namespace fsdp {

/// An encoder block's parameters, in the family's state-dict order: BERT's
/// post-LN norms follow the attention output and the MLP
/// (attention.output.LayerNorm, output.LayerNorm), ViT's pre-LN ones come
/// last (layernorm_before, layernorm_after).
struct EncoderBlock {
  LinearParams query, key, value, attentionOut, up, down;
  NormParams norm1, norm2;
};

class EncoderFamily : public ModelFamily {
public:
  /// The encoder's keys, then the family's (encoderKeys).
  std::vector<const char *> implementedKeys() const final;

protected:
  virtual std::vector<const char *> encoderKeys() const = 0;
  /// The encoder's widths, exact GELU and no dropout (transformers'
  /// default `hfDropout` when absent).
  static bool parseEncoder(JsonReader &r, const ImportOptions &opts, double hfDropout,
                           ModelConfig &c);
  /// Block `i`'s parameters; `self` is the attention's module under the
  /// block (BERT's "attention.self", ViT's "attention.attention").
  EncoderBlock blockParams(GraphBuilder &g, int64_t i, const char *self, bool postLN) const;
  /// The attention over `x` (its module `<block>.<self>`) and its output
  /// dense (`<block>.attention.output.dense`).
  static mlir::Value attention(GraphBuilder &g, mlir::Value x, const EncoderBlock &w,
                               const std::string &block, const char *self);
  /// intermediate.dense, its GELU, output.dense.
  static mlir::Value mlp(GraphBuilder &g, mlir::Value x, const EncoderBlock &w,
                         const std::string &block);
};

} // namespace fsdp

#endif
