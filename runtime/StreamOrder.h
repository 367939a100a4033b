//===- StreamOrder.h - what a phase's events must order ----------*- C++ -*-===//
//
// A phase's compute and comm lists run concurrently (two streams, or two
// threads), ordered only by the program's events; the phases themselves are
// joined (each starts after everything of the one before, on both lists).
// Two instructions on different lists conflict when they touch the same
// arena bytes and one of them writes: the events must order every such pair.
//
// The loader refuses a program where they do not (the pair, the bytes);
// lowering drops every wait that orders no conflicting pair that the other
// waits leave unordered, and the device executor joins phases only as far as
// pairs across the boundary need (phaseJoin), so that each wait the device
// is given is needed (the emulated device's checker drops each in turn,
// tests/cuda-emu/race.py).
// The emulated device's checker takes each kernel's bytes from the same
// accesses(); its copies, GEMMs and collectives declare their own.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_STREAMORDER_H
#define FSDP_RUNTIME_STREAMORDER_H

#include "runtime/Program.h"

#include <string>
#include <vector>

namespace fsdp::program {

/// Arena bytes an instruction reads or writes: [offset, offset + bytes).
struct ArenaBytes {
  int64_t offset, bytes;
  bool write;
};

/// What `i` reads and writes in the arena, as the executors run it:
///   * a compute op: its input tensors read, its outputs and scratch written;
///     alloc writes the gradient buffer from zero_from; optimizer_step its
///     unit's four shards; free, record and wait nothing;
///   * all_gather: the unit's shard read (over the reshard group: this
///     member's resharded copy), the gathered buffer written (in bf16,
///     after the shard is rounded into this rank's slot of it);
///   * reshard: the gathered buffer read, the resharded copy written;
///   * reduce_scatter: the unsharded gradients read (written too where f32
///     gradients are rounded to bf16 in place), its staging scratch and the
///     gradient shard written;
///   * all_reduce: the gradient shard written; grad_norm: every unit's
///     gradient shard read, its scratch written.
std::vector<ArenaBytes> accesses(const Program &p, const Instruction &i);

/// "" when the events order every conflicting pair of `s`'s two lists;
/// otherwise the first pair not ordered: both instructions ("compute[12]
/// (matmul)", "comm[3] (all_gather)"), what each does and the bytes.
std::string checkStreamOrder(const Program &p, const Phase &s);

/// Drops each wait of `s` whose conflicting pairs the other waits order too
/// (trying the waits in program order, so the set left is irreducible: each
/// wait left orders a pair no other does), then each record no wait is left
/// for, and renumbers the instructions' indices. Returns the waits dropped.
/// `s` must pass checkStreamOrder; it still does after.
int64_t dropRedundantWaits(const Program &p, Phase &s);

/// The waits that join a phase to the one after it on the device (the
/// executor's, not the program's): compute's for the end of comm's list,
/// comm's for the end of compute's.
struct PhaseJoin {
  bool computeWaits = true, commWaits = true;
};

/// Which of the join's two waits the pairs that conflict across the end of
/// `before` and the start of `after` need (the micro-step to the next, or to
/// the optimizer), given the waits inside each and the executor's own work
/// on compute between them (the loss's copy to the host; before a
/// micro-step, its inputs' copies to the device): one no pair needs is left
/// out. Where the host synchronizes with both streams between two phases
/// (the step's end, an eval batch's), nothing on the device joins them.
PhaseJoin phaseJoin(const Program &p, const Phase &before, const Phase &after);

} // namespace fsdp::program

#endif
