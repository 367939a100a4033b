//===- JsonLocation.h - where a JSON value sits in its text ------*- C++ -*-===//
//
// nlohmann::json forgets positions once parsed. Errors about a value
// ("n_embd must be divisible by n_head") should still point at it, so this
// scanner finds the byte offset of a value by its path, only when needed.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PLANNER_IMPORT_JSONLOCATION_H
#define FSDP_PLANNER_IMPORT_JSONLOCATION_H

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace fsdp {

class JsonLocator {
public:
  explicit JsonLocator(std::string text) : text(std::move(text)) {}

  /// Offset of the value at `path` (object keys and array indices as
  /// strings), or of the deepest enclosing value that exists.
  size_t find(const std::vector<std::string> &path) const;

  /// Offsets of each element of the array at `path` (empty if not an array).
  std::vector<size_t> elements(const std::vector<std::string> &path) const;

  /// 1-based line and column of a byte offset.
  std::pair<unsigned, unsigned> lineCol(size_t offset) const;

private:
  size_t skipWs(size_t pos) const;
  size_t skipString(size_t pos) const;
  size_t skipValue(size_t pos) const;
  std::string readString(size_t pos) const;
  std::string text;
};

} // namespace fsdp

#endif
