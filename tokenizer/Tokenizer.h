//===- Tokenizer.h - text to token ids for training data ---------*- C++ -*-===//
//
// The tokenizers fsdp-tokenize applies to a corpus, each read from the file a
// model ships: an HF tokenizer.json (byte-level BPE: GPT-2, Llama 3, Qwen2/3;
// WordPiece: BERT), GPT-2's vocab.json with merges.txt, a tiktoken rank file
// (r50k_base, cl100k_base, o200k_base) and a SentencePiece model (Llama 2,
// Mistral). A tokenizer is immutable once loaded: encode() may run on many
// threads at once.
//
// Neither the planner nor the runtime links this library: it is the data
// side's front end (docs/data.md).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOKENIZER_TOKENIZER_H
#define FSDP_TOKENIZER_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fsdp::tokenizer {

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// Appends the ids of one document to *ids. `text` is valid UTF-8 (the
  /// caller checks: checkUtf8). Special and added tokens written in the text
  /// are their ids, as HF's tokenizers and tiktoken with allowed_special
  /// "all" encode them. No post-processing (no BOS, CLS or SEP is added):
  /// documents are joined by the caller with eosId().
  virtual void encode(std::string_view text, std::vector<int64_t> *ids) const = 0;
  /// One more than the largest id encode() can return, added tokens included.
  virtual int64_t vocabSize() const = 0;
  /// "bpe", "wordpiece", "tiktoken" or "sentencepiece".
  virtual std::string kind() const = 0;
  /// The id of `token` (a special or ordinary token's text), or -1.
  virtual int64_t tokenId(std::string_view token) const = 0;
  /// The token that ends a document by the tokenizer's own convention
  /// (GPT-2's <|endoftext|>, Llama 3's <|end_of_text|>, BERT's [SEP],
  /// SentencePiece's </s>), or -1 when it names none.
  virtual int64_t defaultEosId() const = 0;
  /// The masked-LM mask token's id ([MASK], <mask>), or -1.
  virtual int64_t maskId() const { return -1; }
};

/// How a tokenizer is read.
struct LoadOptions {
  /// For a tiktoken rank file: the split pattern, a name (r50k_base,
  /// p50k_base, cl100k_base, o200k_base) or a PCRE2 regex; "" takes the name
  /// from the file's name when it is one of those.
  std::string pattern;
};

/// Reads the tokenizer at `path`: a file (tokenizer.json, vocab.json with
/// merges.txt beside it, *.tiktoken, tokenizer.model, vocab.txt) or a model
/// folder holding one (tokenizer.json first). *source receives the file
/// read. Returns "" or the error, naming the file (and the line or JSON key
/// where it is wrong).
std::string load(const std::string &path, const LoadOptions &options,
                 std::unique_ptr<Tokenizer> *out, std::string *source);

/// "" when `text` is valid UTF-8 (no overlong forms, surrogates or code
/// points past U+10FFFF), else the byte offset of the first bad sequence and
/// why, "byte 1234: ...".
std::string checkUtf8(std::string_view text, int64_t *badOffset = nullptr);

} // namespace fsdp::tokenizer

#endif
