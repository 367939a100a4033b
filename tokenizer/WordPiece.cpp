//===- WordPiece.cpp - BERT's tokenizer: normaliser, pre-tokenizer, model -===//
//
// HF's BertNormalizer (clean the text, space out CJK ideographs, strip
// accents, lowercase, in that order), BertPreTokenizer (split at
// whitespace, each punctuation character a word of its own) and WordPiece
// (greedy longest match first, continuing pieces prefixed "##", [UNK] for a
// word it cannot cover or longer than max_input_chars_per_word characters).
// Special tokens are split out of the raw text first.
//
//===----------------------------------------------------------------------===//
#include "tokenizer/Formats.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <sstream>
#include <unordered_map>

using namespace fsdp::tokenizer;
using nlohmann::json;

namespace {

void appendUtf8(std::string *out, UChar32 c) {
  char buf[4];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buf, n, c); // c is a code point: 4 bytes hold it
  out->append(buf, size_t(n));
}

bool isChineseChar(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// HF's: \t \n \r and Unicode White_Space.
bool isWhitespace(UChar32 c) { return c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(c); }

// HF's: the "other" categories (Cc, Cf, Cn, Co, Cs), but not \t \n \r.
bool isControl(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r')
    return false;
  int8_t t = u_charType(c);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_UNASSIGNED ||
         t == U_PRIVATE_USE_CHAR || t == U_SURROGATE;
}

// BERT's: ASCII punctuation and symbols, and Unicode's P* categories.
bool isPunctuation(UChar32 c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  int8_t t = u_charType(c);
  return t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
         t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION ||
         t == U_OTHER_PUNCTUATION;
}

class WordPiece final : public Tokenizer {
public:
  std::unordered_map<std::string, int64_t> vocab;
  std::string prefix = "##";
  int64_t unk = -1, maxChars = 100, size = 0, sep = -1, mask = -1;
  bool cleanText = true, chineseChars = true, stripAccents = true, lowercase = true;
  std::vector<AddedToken> added;
  const icu::Normalizer2 *nfd = nullptr;

  std::string normalize(std::string_view text) const {
    std::string a;
    a.reserve(text.size());
    int32_t i = 0, n = (int32_t)text.size();
    while (i < n) {
      UChar32 c;
      U8_NEXT(text.data(), i, n, c);
      if (cleanText) {
        if (c == 0 || c == 0xFFFD || c < 0 || isControl(c))
          continue;
        if (isWhitespace(c)) {
          a += ' ';
          continue;
        }
      }
      if (chineseChars && isChineseChar(c)) {
        a += ' ';
        appendUtf8(&a, c);
        a += ' ';
        continue;
      }
      appendUtf8(&a, c);
    }
    if (stripAccents) {
      UErrorCode status = U_ZERO_ERROR;
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(a));
      icu::UnicodeString d = nfd->normalize(u, status);
      std::string b;
      d.toUTF8String(b);
      a.clear();
      i = 0, n = (int32_t)b.size();
      while (i < n) {
        UChar32 c;
        U8_NEXT(b.data(), i, n, c);
        if (u_charType(c) != U_NON_SPACING_MARK)
          appendUtf8(&a, c);
      }
    }
    if (lowercase) {
      std::string b;
      i = 0, n = (int32_t)a.size();
      while (i < n) {
        UChar32 c;
        U8_NEXT(a.data(), i, n, c);
        if (c == 0x130) // İ: Rust's to_lowercase gives i and a combining dot
          b += "i\xCC\x87";
        else
          appendUtf8(&b, u_tolower(c));
      }
      a.swap(b);
    }
    return a;
  }

  void encodeWord(std::string_view w, std::vector<int64_t> *ids) const {
    // Character boundaries: pieces end only there.
    std::vector<int32_t> at;
    for (int32_t i = 0, n = (int32_t)w.size(); i < n;) {
      at.push_back(i);
      U8_FWD_1(w.data(), i, n);
    }
    at.push_back((int32_t)w.size());
    int64_t chars = (int64_t)at.size() - 1;
    if (chars > maxChars) {
      ids->push_back(unk);
      return;
    }
    size_t before = ids->size();
    std::string piece;
    for (int64_t s = 0; s < chars;) {
      int64_t found = -1, e = chars;
      for (; e > s; --e) {
        piece.assign(s > 0 ? prefix : "");
        piece.append(w.substr(at[s], at[e] - at[s]));
        auto it = vocab.find(piece);
        if (it != vocab.end()) {
          found = it->second;
          break;
        }
      }
      if (found < 0) { // the whole word is unknown
        ids->resize(before);
        ids->push_back(unk);
        return;
      }
      ids->push_back(found);
      s = e;
    }
  }

  void encode(std::string_view text, std::vector<int64_t> *ids) const override {
    std::vector<Segment> segments;
    splitAddedTokens(text, added, &segments);
    for (const Segment &seg : segments) {
      if (seg.id >= 0) {
        ids->push_back(seg.id);
        continue;
      }
      std::string norm = normalize(seg.text);
      // BertPreTokenizer: whitespace ends a word; punctuation is one.
      std::string word;
      int32_t i = 0, n = (int32_t)norm.size();
      auto flush = [&] {
        if (!word.empty())
          encodeWord(word, ids);
        word.clear();
      };
      while (i < n) {
        int32_t start = i;
        UChar32 c;
        U8_NEXT(norm.data(), i, n, c);
        if (isWhitespace(c)) {
          flush();
        } else if (isPunctuation(c)) {
          flush();
          encodeWord(std::string_view(norm).substr(start, i - start), ids);
        } else {
          word.append(norm, start, i - start);
        }
      }
      flush();
    }
  }
  int64_t vocabSize() const override { return size; }
  std::string kind() const override { return "wordpiece"; }
  int64_t tokenId(std::string_view token) const override {
    auto it = vocab.find(std::string(token));
    return it == vocab.end() ? -1 : it->second;
  }
  int64_t defaultEosId() const override { return sep; }
  int64_t maskId() const override { return mask; }
};

} // namespace

std::string fsdp::tokenizer::loadWordPiece(const json *j, const std::string &vocabTxt,
                                           const std::string &file,
                                           std::unique_ptr<Tokenizer> *out) {
  auto t = std::make_unique<WordPiece>();
  UErrorCode status = U_ZERO_ERROR;
  t->nfd = icu::Normalizer2::getNFDInstance(status);
  if (U_FAILURE(status))
    return "ICU's NFD normalizer is not available";
  std::string unkToken = "[UNK]";
  if (j) {
    const json &m = (*j)["model"];
    if (!m.contains("vocab") || !m["vocab"].is_object())
      return file + ": model.vocab: expected an object of token: id";
    for (const auto &[tok, id] : m["vocab"].items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        return file + ": model.vocab[\"" + tok + "\"]: expected an id";
      t->vocab[tok] = id.get<int64_t>();
    }
    unkToken = m.value("unk_token", "[UNK]");
    t->prefix = m.value("continuing_subword_prefix", "##");
    t->maxChars = m.value("max_input_chars_per_word", 100);
    const json &norm = j->contains("normalizer") ? (*j)["normalizer"] : json();
    if (!norm.is_object() || norm.value("type", "") != "BertNormalizer")
      return file + ": normalizer: " + norm.dump().substr(0, 80) +
             " is not implemented for WordPiece (BertNormalizer is)";
    t->cleanText = norm.value("clean_text", true);
    t->chineseChars = norm.value("handle_chinese_chars", true);
    t->lowercase = norm.value("lowercase", true);
    t->stripAccents = norm.contains("strip_accents") && norm["strip_accents"].is_boolean()
                          ? norm["strip_accents"].get<bool>()
                          : t->lowercase;
    const json &pre = j->contains("pre_tokenizer") ? (*j)["pre_tokenizer"] : json();
    if (!pre.is_object() || pre.value("type", "") != "BertPreTokenizer")
      return file + ": pre_tokenizer: " + pre.dump().substr(0, 80) +
             " is not implemented for WordPiece (BertPreTokenizer is)";
    if (j->contains("added_tokens") && (*j)["added_tokens"].is_array())
      for (const json &a : (*j)["added_tokens"]) {
        if (!a.contains("content") || !a["content"].is_string() || !a.contains("id") ||
            !a["id"].is_number_integer())
          return file + ": added_tokens: expected content and id";
        if (!a.value("special", false) && a.value("normalized", true))
          return file + ": added_tokens: a normalized non-special token ('" +
                 a["content"].get<std::string>() + "') is not implemented";
        t->added.push_back({a["content"], a["id"], a.value("special", false),
                            a.value("lstrip", false), a.value("rstrip", false)});
      }
  } else {
    // vocab.txt: a token a line, its id the line's number from 0; BERT's
    // uncased defaults.
    std::istringstream in(vocabTxt);
    std::string line;
    int64_t id = 0;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      t->vocab.emplace(line, id++);
    }
    for (const char *s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
      if (t->vocab.count(s))
        t->added.push_back({s, t->vocab[s], true});
  }
  for (const auto &[tok, id] : t->vocab)
    t->size = std::max(t->size, id + 1);
  for (const AddedToken &a : t->added)
    t->size = std::max(t->size, a.id + 1);
  t->unk = t->tokenId(unkToken);
  if (t->unk < 0)
    return file + ": the unknown token '" + unkToken + "' is not in the vocabulary";
  t->sep = t->tokenId("[SEP]");
  t->mask = t->tokenId("[MASK]");
  *out = std::move(t);
  return "";
}
