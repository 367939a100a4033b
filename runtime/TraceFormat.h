//===- TraceFormat.h - the Chrome trace both timelines share -----*- C++ -*-===//
//
// fsdp-plan's predicted timeline (planner/CostModel.cpp) and fsdp-run's
// measured one (runtime/Trainer.cpp) are one format, so that
// fsdp-trace-compare and a trace viewer read both alike: a pid per rank,
// thread 0 the compute stream, thread 1 the comm stream.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_TRACEFORMAT_H
#define FSDP_RUNTIME_TRACEFORMAT_H

#include <cstdint>
#include <string>

namespace fsdp::trace {

/// Appends rank `rank`'s metadata events (its process, named "rank R (kind)",
/// and its two streams) to `events`, a JSON array.
template <typename Json> void addRankHeader(Json &events, int64_t rank, const char *kind) {
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank},
                    {"args", {{"name", "rank " + std::to_string(rank) + " (" + kind + ")"}}}});
  for (int tid : {0, 1})
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", tid},
                      {"args", {{"name", tid == 0 ? "compute" : "comm"}}}});
}

} // namespace fsdp::trace

#endif
