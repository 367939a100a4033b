//===- Inputs.h - what each micro-step takes of a run's data -----*- C++ -*-===//
//
// The data of a run as the trainer (runtime/Trainer.h) takes it, on every
// device: the files opened and checked once, each rank's inputs of each
// micro-step, and how the step's loss is normalised, so that every rank
// trains the same model on the same data at any world size.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DATA_INPUTS_H
#define FSDP_RUNTIME_DATA_INPUTS_H

#include "runtime/Options.h"
#include "runtime/Program.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/Images.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::data {

using runtime::RunOptions;

/// The data of a run, as the program's inputs.kind takes it: token streams
/// (tokens, masked_tokens: --data or synthetic, --eval-data) or images and
/// labels (--data and --labels, --eval-data and --eval-labels), read and
/// checked whole once, before the first step.
struct Inputs {
  Dataset train, eval;
  ImageSet trainImages, evalImages;
  std::string open(const program::Program &p, const RunOptions &options);
  /// The masked-LM input of a selected token: --mask-token-id, or else
  /// the sidecar's mask_id, or else its default.
  int64_t maskTokenId = 103;
  /// What open found worth saying (a mask id that occurs in the data).
  std::vector<std::string> warnings;
  /// "" while the token files have the sizes they were opened with.
  std::string checkUnchanged() const {
    std::string err = train.checkUnchanged();
    return err.empty() ? eval.checkUnchanged() : err;
  }
  int64_t bytes() const {
    return train.bytes() + eval.bytes() + trainImages.bytes() + evalImages.bytes();
  }
};

/// Rank `rank`'s tokens and targets ([micro_batch, seq_len] each) for
/// micro-step `micro` of optimizer step `step` (DESIGN.md's data semantics).
void fillTokens(const program::Program &p, const Dataset &data, int64_t gradAccum, int rank,
                int64_t step, int64_t micro, int64_t *tokens, int64_t *targets);

/// The inputs of data-parallel rank `rank` (every rank without tensor
/// parallelism; the tp group's ranks take the same) for micro-step `micro`
/// of step `step` (or, `eval`,
/// of eval batch `step`), as the program's inputs.kind says: `input` receives
/// the bytes of tensor p.tokens (i64 tokens, or f32 or bf16 patches),
/// `targets` the elements of p.targets (data/Batches.h).
void fillInputs(const program::Program &p, const RunOptions &options, const Inputs &data, bool eval,
                int rank, int64_t step, int64_t micro, char *input, int64_t *targets);

/// How the loss of step `step` (from 0; with `eval`, of eval batch `step`)
/// is normalised, so that it and its gradients are those of the step's mean
/// loss. `gradScale` scales the loss's gradient (cross_entropy_grad);
/// `divisor` turns the sum, over ranks and micro-steps, of each micro-step's
/// loss tensor times its lossWeight into the step's loss. Tokens: each
/// micro-step's loss is the mean over its B x S tokens, so 1 / (G S), weight
/// 1 and divisor R A; images: the mean over its B images, 1 / G, 1 and R A;
/// masked tokens: the mean over the micro-step's selected positions (the
/// kernels skip kernels::kIgnoreIndex targets; 0 when there are none), so
/// 1 / n, weight the rank's selected positions in that micro-step
/// (data::maskedMicroCount) and divisor n, n the selected positions of the
/// whole global batch (data::maskedCount). A masked step (or eval batch) with
/// none selected is an error naming it.
struct LossNorm {
  float gradScale = 1;
  double divisor = 1;
};
std::string lossNorm(const program::Program &p, const RunOptions &options, const Inputs &data,
                     bool eval, int64_t step, LossNorm *norm);

/// The weight of the loss tensor of data-parallel rank `rank` (tp rank
/// `tpRank` of its group) after micro-step `micro` of step `step` (with
/// `eval`, of eval batch `step`) in the sum LossNorm::divisor divides: 1,
/// or for masked tokens the selected positions its mean is over: under
/// sequence parallelism those of the tp rank's part of the tokens; without
/// it every tp rank's mean is the whole micro-batch's, counted once (tp
/// rank 0's).
double lossWeight(const program::Program &p, const RunOptions &options, const Inputs &data,
                  bool eval, int rank, int tpRank, int64_t step, int64_t micro);

/// Sequences a step takes over all ranks: micro-batch x data-parallel ranks x
/// grad-accum.
int64_t globalBatch(const program::Program &p, const RunOptions &options);

} // namespace fsdp::data

#endif
