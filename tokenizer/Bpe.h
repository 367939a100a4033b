//===- Bpe.h - byte-level BPE: GPT-2, Llama 3, Qwen, tiktoken ----*- C++ -*-===//
#ifndef FSDP_TOKENIZER_BPE_H
#define FSDP_TOKENIZER_BPE_H

#include "tokenizer/Text.h"
#include "tokenizer/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace fsdp::tokenizer {

/// The split patterns of tiktoken's encodings by name (r50k_base,
/// p50k_base, cl100k_base, o200k_base), "" for another name.
std::string tiktokenPattern(const std::string &name);

/// An HF tokenizer.json whose model is BPE (`json` parsed from `file`).
std::string loadHFBpe(const nlohmann::json &json, const std::string &file,
                      const std::string &eosToken, std::unique_ptr<Tokenizer> *out);
/// GPT-2's vocab.json and merges.txt.
std::string loadGPT2Files(const std::string &vocabFile, const std::string &mergesFile,
                          std::unique_ptr<Tokenizer> *out);
/// A tiktoken rank file; `pattern`: a name or a regex, "" to take the name
/// from the file's.
std::string loadTiktoken(const std::string &file, const std::string &pattern,
                         std::unique_ptr<Tokenizer> *out);

} // namespace fsdp::tokenizer

#endif
