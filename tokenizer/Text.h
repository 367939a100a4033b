//===- Text.h - UTF-8, files and added tokens for the tokenizers -*- C++ -*-===//
#ifndef FSDP_TOKENIZER_TEXT_H
#define FSDP_TOKENIZER_TEXT_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fsdp::tokenizer {

/// The length of the valid UTF-8 sequence at text[i], or 0 when the bytes
/// there are not one (truncated, overlong, a surrogate, past U+10FFFF).
int utf8SequenceLength(std::string_view text, size_t i);

/// `text` with each maximal invalid subsequence replaced by U+FFFD, as the
/// WHATWG decoder (and Python's errors="replace", and Rust's
/// String::from_utf8_lossy) replaces them. *replaced: how many.
std::string replaceInvalidUtf8(std::string_view text, int64_t *replaced = nullptr);

/// Reads `path` whole (a regular file of at most `maxBytes`): "" or the
/// error, naming the file.
std::string readTokenizerFile(const std::string &path, std::string *text,
                              int64_t maxBytes = int64_t(1) << 30);

/// A token written in text that encodes as itself (HF's added tokens,
/// tiktoken's special tokens).
struct AddedToken {
  std::string content;
  int64_t id = -1;
  bool special = false;
  bool lstrip = false, rstrip = false; // takes the whitespace before / after
};

/// One piece of a document: text to run through the model, or an added token.
struct Segment {
  std::string_view text;
  int64_t id = -1; // >= 0: an added token
};

/// Splits `text` at the added tokens it holds, leftmost first and, at one
/// position, longest first (HF's leftmost-longest matching); lstrip/rstrip
/// tokens take the ASCII and Unicode whitespace beside them.
void splitAddedTokens(std::string_view text, const std::vector<AddedToken> &added,
                      std::vector<Segment> *out);

} // namespace fsdp::tokenizer

#endif
