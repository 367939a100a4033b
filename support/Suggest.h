//===- Suggest.h - "did you mean" for the tools' flags -----------*- C++ -*-===//
#ifndef FSDP_SUPPORT_SUGGEST_H
#define FSDP_SUPPORT_SUGGEST_H

#include <string>
#include <vector>

namespace fsdp::support {

/// The candidate nearest to `word` by edit distance (insertions, deletions,
/// substitutions and swaps of neighbours), when it is within a third of the
/// word's length (at least 1, at most 3); "" when none is that close.
std::string nearest(const std::string &word, const std::vector<std::string> &candidates);

} // namespace fsdp::support

#endif
