//===- Text.cpp - UTF-8, files and added tokens for the tokenizers --------===//
#include "tokenizer/Text.h"
#include "support/InputFile.h"
#include "tokenizer/Tokenizer.h"

#include <algorithm>

using namespace fsdp;
using namespace fsdp::tokenizer;

int fsdp::tokenizer::utf8SequenceLength(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return (unsigned char)s[k]; };
  unsigned char c = b(i);
  if (c < 0x80)
    return 1;
  int n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0; // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (i + n > s.size())
    return 0;
  for (int k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

std::string fsdp::tokenizer::checkUtf8(std::string_view text, int64_t *badOffset) {
  for (size_t i = 0; i < text.size();) {
    int n = utf8SequenceLength(text, i);
    if (n == 0) {
      if (badOffset)
        *badOffset = (int64_t)i;
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", (unsigned char)text[i]);
      return "byte " + std::to_string(i) + ": invalid UTF-8 (" + hex + ")";
    }
    i += n;
  }
  return "";
}

// The maximal invalid subsequence at i: the longest prefix of a valid
// sequence's shape (WHATWG's "maximal subpart"), at least one byte.
static size_t maximalSubpart(std::string_view s, size_t i) {
  unsigned char c = (unsigned char)s[i];
  int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
  size_t k = 1;
  for (; (int)k < n && i + k < s.size(); ++k) {
    unsigned char d = (unsigned char)s[i + k];
    unsigned char lo = 0x80, hi = 0xBF;
    if (k == 1) { // the second byte's range excludes overlongs and surrogates
      if (c == 0xE0)
        lo = 0xA0;
      else if (c == 0xED)
        hi = 0x9F;
      else if (c == 0xF0)
        lo = 0x90;
      else if (c == 0xF4)
        hi = 0x8F;
    }
    if (d < lo || d > hi)
      break;
  }
  return k;
}

std::string fsdp::tokenizer::replaceInvalidUtf8(std::string_view text, int64_t *replaced) {
  std::string out;
  out.reserve(text.size());
  int64_t count = 0;
  for (size_t i = 0; i < text.size();) {
    int n = utf8SequenceLength(text, i);
    if (n > 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    out += "\xEF\xBF\xBD";
    ++count;
    i += maximalSubpart(text, i);
  }
  if (replaced)
    *replaced = count;
  return out;
}

std::string fsdp::tokenizer::readTokenizerFile(const std::string &path, std::string *text,
                                               int64_t maxBytes) {
  return support::readRegularFile(path, maxBytes, "tokenizer file", text);
}

// Whitespace as HF's added-token stripping sees it (Rust's char::is_whitespace).
static size_t whitespaceBefore(std::string_view s, size_t end) {
  size_t i = end;
  while (i > 0) {
    unsigned char c = (unsigned char)s[i - 1];
    if (c == ' ' || (c >= '\t' && c <= '\r'))
      --i;
    else if (i >= 2 && (unsigned char)s[i - 2] == 0xC2 && (c == 0x85 || c == 0xA0))
      i -= 2;
    else if (i >= 3 && (unsigned char)s[i - 3] == 0xE3 && (unsigned char)s[i - 2] == 0x80 &&
             c == 0x80)
      i -= 3;
    else if (i >= 3 && (unsigned char)s[i - 3] == 0xE2 && (unsigned char)s[i - 2] == 0x80 &&
             ((c >= 0x80 && c <= 0x8A) || c == 0xA8 || c == 0xA9 || c == 0xAF))
      i -= 3;
    else if (i >= 3 && (unsigned char)s[i - 3] == 0xE2 && (unsigned char)s[i - 2] == 0x81 &&
             c == 0x9F)
      i -= 3;
    else if (i >= 3 && (unsigned char)s[i - 3] == 0xE1 && (unsigned char)s[i - 2] == 0x9A &&
             c == 0x80)
      i -= 3;
    else
      break;
  }
  return end - i;
}

static size_t whitespaceAfter(std::string_view s, size_t begin) {
  size_t i = begin;
  while (i < s.size()) {
    size_t n = 0;
    for (size_t k = 1; k <= 3 && i + k <= s.size(); ++k)
      if (whitespaceBefore(s.substr(0, i + k), i + k) == k) {
        n = k;
        break;
      }
    if (!n)
      break;
    i += n;
  }
  return i - begin;
}

void fsdp::tokenizer::splitAddedTokens(std::string_view text, const std::vector<AddedToken> &added,
                                       std::vector<Segment> *out) {
  out->clear();
  size_t start = 0; // the text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    // The earliest match, longest at that position.
    size_t best = std::string_view::npos, bestLen = 0;
    const AddedToken *tok = nullptr;
    for (const AddedToken &a : added) {
      if (a.content.empty())
        continue;
      size_t at = text.find(a.content, pos);
      if (at == std::string_view::npos)
        continue;
      if (at < best || (at == best && a.content.size() > bestLen)) {
        best = at;
        bestLen = a.content.size();
        tok = &a;
      }
    }
    if (!tok)
      break;
    size_t lo = best, hi = best + bestLen;
    if (tok->lstrip)
      lo -= std::min(lo - start, whitespaceBefore(text, lo));
    if (tok->rstrip)
      hi += whitespaceAfter(text, hi);
    if (lo > start)
      out->push_back({text.substr(start, lo - start), -1});
    out->push_back({text.substr(lo, hi - lo), tok->id});
    start = pos = hi;
  }
  if (start < text.size())
    out->push_back({text.substr(start), -1});
}
