//===- JsonReader.cpp -----------------------------------------------------===//
#include "planner/Import/JsonReader.h"
#include "support/InputFile.h"

#include <cmath>

using namespace fsdp;
using nlohmann::json;

std::string ImportError::str() const {
  std::string s = file;
  if (line)
    s += ":" + std::to_string(line) + ":" + std::to_string(col);
  return s + ": error: " + message;
}

bool JsonReader::parse() {
  // Nesting past the limit is refused before parsing: the reader, the
  // locator and the error's formatting all recurse over the document.
  std::string deep = support::checkJsonDepth(text, &error.line, &error.col);
  if (!deep.empty()) {
    error.file = file;
    error.message = deep;
    return false;
  }
  try {
    doc = json::parse(text);
  } catch (const json::parse_error &e) {
    // what() reads "[json.exception.parse_error.101] parse error at line L,
    // column C: syntax error while parsing ..."; keep the part after the
    // position, and compute the position ourselves.
    std::string what = e.what();
    size_t colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    // e.byte is the last character read: back up to the start of the token.
    size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    if (offset < text.size() && text[offset] == '"' && offset > 0) {
      size_t i = offset - 1;
      while (i > 0 && !(text[i] == '"' && text[i - 1] != '\\'))
        --i;
      offset = i;
    } else {
      auto tokenChar = [](char c) {
        return std::isalnum((unsigned char)c) || c == '+' || c == '-' || c == '.';
      };
      while (offset > 0 && offset < text.size() && tokenChar(text[offset]) &&
             tokenChar(text[offset - 1]))
        --offset;
    }
    auto [line, col] = locator.lineCol(offset);
    error.file = file;
    error.line = line;
    error.col = col;
    error.message = "malformed JSON: " + detail;
    return false;
  } catch (const json::out_of_range &e) {
    // A number past a double's range: what() reads "... number overflow
    // parsing '1e405'" and gives no position. The parser stops at the first
    // one, so the first such token outside a string is it.
    std::string what = e.what();
    size_t a = what.find('\''), b = what.rfind('\'');
    std::string token = a != std::string::npos && b > a ? what.substr(a + 1, b - a - 1) : "";
    size_t offset = 0;
    for (size_t i = 0; !token.empty() && i < text.size(); ++i) {
      if (text[i] == '"') {
        for (++i; i < text.size() && text[i] != '"'; ++i)
          if (text[i] == '\\')
            ++i;
        continue;
      }
      if (text.compare(i, token.size(), token) == 0) {
        offset = i;
        break;
      }
    }
    auto [line, col] = locator.lineCol(offset);
    error.file = file;
    error.line = line;
    error.col = col;
    error.message = "malformed JSON: the number " + token + " is out of range";
    return false;
  }
  return true;
}

std::string JsonReader::pathStr(const JsonPath &path) {
  std::string s;
  for (const std::string &p : path) {
    bool index = !p.empty() && std::all_of(p.begin(), p.end(), ::isdigit);
    if (index)
      s += "[" + p + "]";
    else
      s += (s.empty() ? "" : ".") + p;
  }
  return s.empty() ? "the document" : s;
}

std::string JsonReader::describe(const json &v) {
  std::string d = v.dump();
  if (d.size() > 40)
    d = d.substr(0, 37) + "...";
  return d + " (" + v.type_name() + ")";
}

bool JsonReader::fail(const JsonPath &path, const std::string &message) {
  auto [line, col] = locator.lineCol(locator.find(path));
  error.file = file;
  error.line = line;
  error.col = col;
  error.message = message;
  return false;
}

const json *JsonReader::get(const JsonPath &path, bool required) {
  const json *cur = &doc;
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string &p = path[i];
    const json *next = nullptr;
    if (cur->is_object()) {
      auto it = cur->find(p);
      if (it != cur->end())
        next = &*it;
    } else if (cur->is_array()) {
      size_t idx = std::strtoull(p.c_str(), nullptr, 10);
      if (idx < cur->size())
        next = &(*cur)[idx];
    }
    if (!next) {
      if (required) {
        JsonPath parent(path.begin(), path.begin() + i);
        if (!cur->is_object() && !cur->is_array())
          fail(parent, pathStr(parent) + " must be an object, but is " + describe(*cur));
        else
          fail(parent, "missing key '" + pathStr(path) + "'");
      }
      return nullptr;
    }
    cur = next;
  }
  return cur;
}

std::optional<int64_t> JsonReader::getInt(const JsonPath &path, std::optional<int64_t> def,
                                          int64_t min) {
  const json *v = get(path, !def.has_value());
  if (!v)
    return def;
  if (v->is_null() && def)
    return def;
  if (v->is_number_unsigned() && v->get<uint64_t>() > (uint64_t)INT64_MAX) {
    fail(path, pathStr(path) + " is too large");
    return std::nullopt;
  }
  if (!v->is_number_integer()) {
    fail(path, pathStr(path) + " must be an integer, but is " + describe(*v));
    return std::nullopt;
  }
  int64_t x = v->get<int64_t>();
  if (x < min) {
    fail(path, pathStr(path) + " must be at least " + std::to_string(min) + ", but is " +
                   std::to_string(x));
    return std::nullopt;
  }
  return x;
}

std::optional<double> JsonReader::getNumber(const JsonPath &path, std::optional<double> def) {
  const json *v = get(path, !def.has_value());
  if (!v)
    return def;
  if (v->is_null() && def)
    return def;
  if (!v->is_number()) {
    fail(path, pathStr(path) + " must be a number, but is " + describe(*v));
    return std::nullopt;
  }
  double x = v->get<double>();
  if (!std::isfinite(x)) {
    fail(path, pathStr(path) + " must be finite");
    return std::nullopt;
  }
  return x;
}

std::optional<std::string> JsonReader::getString(const JsonPath &path,
                                                 std::optional<std::string> def) {
  const json *v = get(path, !def.has_value());
  if (!v)
    return def;
  if (!v->is_string()) {
    fail(path, pathStr(path) + " must be a string, but is " + describe(*v));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<bool> JsonReader::getBool(const JsonPath &path, std::optional<bool> def) {
  const json *v = get(path, !def.has_value());
  if (!v)
    return def;
  if (!v->is_boolean()) {
    fail(path, pathStr(path) + " must be true or false, but is " + describe(*v));
    return std::nullopt;
  }
  return v->get<bool>();
}
