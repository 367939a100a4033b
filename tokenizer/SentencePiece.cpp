//===- SentencePiece.cpp - Llama 2's and Mistral's tokenizer.model --------===//
//
// A SentencePiece model (unigram or BPE, with or without byte fallback)
// through Debian's libsentencepiece: the model's own normaliser, dummy
// prefix and pieces, exactly as the library encodes. Control symbols
// written in the text (<s>, </s>) are split out first and become their ids,
// as the HF tokenizers of Llama 2 and Mistral treat their special tokens;
// the library alone would encode them as text.
//
//===----------------------------------------------------------------------===//
#include "tokenizer/Formats.h"

#include <sentencepiece_processor.h>

using namespace fsdp::tokenizer;

namespace {

class SentencePiece final : public Tokenizer {
public:
  sentencepiece::SentencePieceProcessor sp;
  std::vector<AddedToken> added;

  void encode(std::string_view text, std::vector<int64_t> *ids) const override {
    std::vector<Segment> segments;
    splitAddedTokens(text, added, &segments);
    std::vector<int> pieces;
    for (const Segment &s : segments) {
      if (s.id >= 0) {
        ids->push_back(s.id);
        continue;
      }
      // Encode is const: one processor serves every thread.
      sentencepiece::util::Status status = sp.Encode(s.text, &pieces);
      if (!status.ok())
        throw std::runtime_error("SentencePiece: " + status.ToString());
      ids->insert(ids->end(), pieces.begin(), pieces.end());
    }
  }
  int64_t vocabSize() const override { return sp.GetPieceSize(); }
  std::string kind() const override { return "sentencepiece"; }
  int64_t tokenId(std::string_view token) const override {
    int id = sp.PieceToId(token);
    // PieceToId answers the unknown id for a piece it lacks.
    return id == sp.unk_id() && sp.IdToPiece(id) != token ? -1 : id;
  }
  int64_t defaultEosId() const override { return sp.eos_id(); }
};

} // namespace

std::string fsdp::tokenizer::loadSentencePiece(const std::string &modelFile,
                                               std::unique_ptr<Tokenizer> *out) {
  std::string bytes;
  if (std::string err = readTokenizerFile(modelFile, &bytes); !err.empty())
    return err;
  auto t = std::make_unique<SentencePiece>();
  sentencepiece::util::Status status = t->sp.LoadFromSerializedProto(bytes);
  if (!status.ok())
    return modelFile + ": not a SentencePiece model (" + status.ToString() + ")";
  for (int id = 0; id < t->sp.GetPieceSize(); ++id)
    if (t->sp.IsControl(id) && !t->sp.IdToPiece(id).empty())
      t->added.push_back({t->sp.IdToPiece(id), id, true});
  *out = std::move(t);
  return "";
}
