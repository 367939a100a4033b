//===- Batches.h - the samples of each step ---------------------*- C++ -*-===//
//
// Which data a rank's micro-step takes, for each kind of input a program
// names (program::InputKind): token windows, masked-LM windows, images cut
// into patches. Sample g of the step numbered t from 0 (g in [0, G), G =
// micro_batch x ranks x grad_accum) is taken by rank r = (g mod (B R)) / B in
// micro-step a = g / (B R), as row b = g mod B of its batch. Every function
// here is a function of the data and those numbers alone: no rank needs
// another's data, and a resumed run takes the same samples.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DATA_BATCHES_H
#define FSDP_RUNTIME_DATA_BATCHES_H

#include "runtime/Program.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/Images.h"
#include "runtime/kernels/cpu.h"
#include "support/Random.h"

#include <cstdint>

namespace fsdp::data {

/// How a step's samples are split: rows per rank per micro-step (B), ranks
/// (R) and micro-steps (A). G = B R A.
struct BatchLayout {
  int64_t microBatch = 1, ranks = 1, gradAccum = 1;
  int64_t global() const { return microBatch * ranks * gradAccum; }
  /// The sample a row of a rank's micro-step is.
  int64_t sample(int64_t micro, int64_t rank, int64_t row) const {
    return (micro * ranks + rank) * microBatch + row;
  }
};

using support::splitmix64; // support/Random.h
/// Whether the token at absolute index `p` of a file is selected for the
/// masked-LM loss (docs/training-semantics.md): splitmix64(p) mod 20 < 3,
/// about 15%.
inline bool maskSelected(uint64_t p) { return splitmix64(p) % 20 < 3; }

/// The first token of sample g of step t in a file of n tokens, windows of S
/// tokens: ((t G + g) S) mod (n - S - 1), exactly for any t >= 0 (n > S + 1).
int64_t windowStart(int64_t n, int64_t S, int64_t G, int64_t step, int64_t g);

/// The first token of sample g of step t (global batch G, windows of S
/// tokens and their targets) in `data`: windowStart, or with --shuffle the
/// window shuffledWindow gives (docs/sampling.md).
int64_t sampleStart(const Dataset &data, int64_t S, int64_t G, int64_t step, int64_t g);

/// The image of sample g of step t among n: (t G + g) mod n, exactly.
int64_t imageIndex(int64_t n, int64_t G, int64_t step, int64_t g);

/// Masked-LM inputs of rank `rank`'s micro-step `micro` of step `step`:
/// tokens [B, S] are the window's tokens with each selected position (by
/// its absolute index in `data`) replaced by `maskTokenId`; targets [B, S]
/// hold the original token at selected positions and
/// kernels::kIgnoreIndex elsewhere.
void fillMaskedTokens(const Dataset &data, int64_t S, const BatchLayout &l, int64_t rank,
                      int64_t step, int64_t micro, int64_t maskTokenId, int64_t *tokens,
                      int64_t *targets);

/// The selected positions of step `step`'s whole global batch (every rank
/// and micro-step): the count the masked-LM loss divides by.
int64_t maskedCount(const Dataset &data, int64_t S, const BatchLayout &l, int64_t step);

/// The selected positions of rank `rank`'s micro-step `micro` of step
/// `step` (the targets fillMaskedTokens writes that are not
/// kernels::kIgnoreIndex): the rows its cross_entropy means over, and so
/// the weight of that mean in the step's loss. Over every rank and
/// micro-step they sum to maskedCount. Of the micro-batch's B x S tokens
/// (row-major) only those in [lo, hi): a tp rank's part under sequence
/// parallelism.
int64_t maskedMicroCount(const Dataset &data, int64_t S, const BatchLayout &l, int64_t rank,
                         int64_t step, int64_t micro, int64_t lo = 0, int64_t hi = INT64_MAX);

/// A pixel as the model takes it: (x / 255 - 0.5) / 0.5, in f32 as
/// torch computes (x.float() / 255 - 0.5) / 0.5.
inline float pixelValue(uint8_t x) { return (float(x) / 255.0f - 0.5f) / 0.5f; }

/// One image (H x W x C bytes, channels last) as its patches, [P, C ph pw]:
/// patch q = py (W / pw) + px in row-major order over the image, its values
/// in (c, dy, dx) order, pixel (py ph + dy, px pw + dx) of channel c. So
/// patches x W^T, with HF's Conv2d weight [D, C, ph, pw] viewed as
/// [D, C ph pw], is the convolution with stride = kernel = patch.
void patchify(const uint8_t *image, const program::ImageSpec &spec, float *patches);

/// Image inputs of rank `rank`'s micro-step `micro` of step `step`: patches
/// [B, P, C ph pw] and the labels, targets [B, 1].
void fillImages(const ImageSet &data, const program::ImageSpec &spec, const BatchLayout &l,
                int64_t rank, int64_t step, int64_t micro, float *patches, int64_t *targets);

} // namespace fsdp::data

#endif
