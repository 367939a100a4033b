//===- Formats.h - the tokenizer files load() reads --------------*- C++ -*-===//
#ifndef FSDP_TOKENIZER_FORMATS_H
#define FSDP_TOKENIZER_FORMATS_H

#include "tokenizer/Bpe.h"

namespace fsdp::tokenizer {

/// BERT's WordPiece: an HF tokenizer.json whose model is WordPiece
/// (`tokenizerJson`), or a vocab.txt (`vocabTxt`, its text; null json) with
/// bert-base-uncased's settings. `file` names it in errors.
std::string loadWordPiece(const nlohmann::json *tokenizerJson, const std::string &vocabTxt,
                          const std::string &file, std::unique_ptr<Tokenizer> *out);

/// A SentencePiece model file (tokenizer.model: Llama 2, Mistral).
std::string loadSentencePiece(const std::string &modelFile, std::unique_ptr<Tokenizer> *out);

} // namespace fsdp::tokenizer

#endif
