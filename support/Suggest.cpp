//===- Suggest.cpp - "did you mean" for the tools' flags ------------------===//
#include "support/Suggest.h"

#include <algorithm>

// Optimal string alignment distance (Damerau-Levenshtein without repeated
// edits of one substring).
static size_t distance(const std::string &a, const std::string &b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string fsdp::support::nearest(const std::string &word,
                                   const std::vector<std::string> &candidates) {
  size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3), best = limit + 1;
  std::string found;
  for (const std::string &c : candidates) {
    size_t d = distance(word, c);
    if (d < best) {
      best = d;
      found = c;
    }
  }
  return found;
}
