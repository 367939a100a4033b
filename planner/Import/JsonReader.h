//===- JsonReader.h - typed, located access to a parsed JSON file -*- C++ -*-===//
#ifndef FSDP_PLANNER_IMPORT_JSONREADER_H
#define FSDP_PLANNER_IMPORT_JSONREADER_H

#include "planner/Import/Import.h"
#include "planner/Import/JsonLocation.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace fsdp {

using JsonPath = std::vector<std::string>;

inline JsonPath operator+(JsonPath a, const JsonPath &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Parses a JSON text and answers typed questions about it; each failed
/// question fills `error` with the position of the offending value.
class JsonReader {
public:
  JsonReader(llvm::StringRef text, llvm::StringRef file, ImportError &error)
      : text(text.str()), locator(text.str()), file(file.str()), error(error) {}

  /// Parses the text; false (with a line:col error) if it is not JSON.
  bool parse();

  const nlohmann::json &root() const { return doc; }

  /// Records an error at `path` and returns false.
  bool fail(const JsonPath &path, const std::string &message);

  /// The value at `path`, or nullptr (and an error if `required`).
  const nlohmann::json *get(const JsonPath &path, bool required = true);

  std::optional<int64_t> getInt(const JsonPath &path, std::optional<int64_t> def = {},
                                int64_t min = 1);
  std::optional<double> getNumber(const JsonPath &path, std::optional<double> def = {});
  std::optional<std::string> getString(const JsonPath &path, std::optional<std::string> def = {});
  std::optional<bool> getBool(const JsonPath &path, std::optional<bool> def = {});

  /// Positions of the elements of the array at `path`.
  std::vector<size_t> elementOffsets(const JsonPath &path) const { return locator.elements(path); }
  size_t offsetOf(const JsonPath &path) const { return locator.find(path); }
  std::pair<unsigned, unsigned> lineCol(size_t offset) const { return locator.lineCol(offset); }
  const std::string &fileName() const { return file; }

  static std::string describe(const nlohmann::json &v);
  static std::string pathStr(const JsonPath &path);

private:
  std::string text;
  JsonLocator locator;
  std::string file;
  ImportError &error;
  nlohmann::json doc;
};

} // namespace fsdp

#endif
