//===- JsonLocation.cpp ---------------------------------------------------===//
#include "planner/Import/JsonLocation.h"

using namespace fsdp;

size_t JsonLocator::skipWs(size_t pos) const {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
    ++pos;
  return pos;
}

size_t JsonLocator::skipString(size_t pos) const {
  // pos is at the opening quote.
  ++pos;
  while (pos < text.size() && text[pos] != '"')
    pos += text[pos] == '\\' ? 2 : 1;
  return pos < text.size() ? pos + 1 : text.size();
}

std::string JsonLocator::readString(size_t pos) const {
  std::string out;
  ++pos;
  while (pos < text.size() && text[pos] != '"') {
    if (text[pos] == '\\' && pos + 1 < text.size()) {
      out += text[pos + 1];
      pos += 2;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

size_t JsonLocator::skipValue(size_t pos) const {
  pos = skipWs(pos);
  if (pos >= text.size())
    return pos;
  char c = text[pos];
  if (c == '"')
    return skipString(pos);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    pos = skipWs(pos + 1);
    while (pos < text.size() && text[pos] != close) {
      if (c == '{') {
        pos = skipWs(skipString(skipWs(pos)));
        if (pos < text.size() && text[pos] == ':')
          ++pos;
      }
      pos = skipWs(skipValue(pos));
      if (pos < text.size() && text[pos] == ',')
        pos = skipWs(pos + 1);
      else
        break;
    }
    pos = skipWs(pos);
    return pos < text.size() ? pos + 1 : pos;
  }
  // number, true, false, null
  while (pos < text.size() && text[pos] != ',' && text[pos] != '}' && text[pos] != ']' &&
         text[pos] != ' ' && text[pos] != '\n' && text[pos] != '\r' && text[pos] != '\t')
    ++pos;
  return pos;
}

size_t JsonLocator::find(const std::vector<std::string> &path) const {
  size_t pos = skipWs(0);
  for (const std::string &part : path) {
    if (pos >= text.size())
      return pos;
    char c = text[pos];
    if (c != '{' && c != '[')
      return pos;
    size_t container = pos;
    size_t index = 0;
    bool found = false;
    pos = skipWs(pos + 1);
    while (pos < text.size() && text[pos] != '}' && text[pos] != ']') {
      bool match;
      if (c == '{') {
        std::string key = readString(pos);
        pos = skipWs(skipString(pos));
        if (pos < text.size() && text[pos] == ':')
          pos = skipWs(pos + 1);
        match = key == part;
      } else {
        match = std::to_string(index) == part;
      }
      if (match) {
        found = true;
        break;
      }
      pos = skipWs(skipValue(pos));
      ++index;
      if (pos < text.size() && text[pos] == ',')
        pos = skipWs(pos + 1);
      else
        break;
    }
    if (!found)
      return container;
  }
  return pos;
}

std::vector<size_t> JsonLocator::elements(const std::vector<std::string> &path) const {
  std::vector<size_t> out;
  size_t pos = find(path);
  if (pos >= text.size() || text[pos] != '[')
    return out;
  pos = skipWs(pos + 1);
  while (pos < text.size() && text[pos] != ']') {
    out.push_back(pos);
    pos = skipWs(skipValue(pos));
    if (pos < text.size() && text[pos] == ',')
      pos = skipWs(pos + 1);
    else
      break;
  }
  return out;
}

std::pair<unsigned, unsigned> JsonLocator::lineCol(size_t offset) const {
  unsigned line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}
