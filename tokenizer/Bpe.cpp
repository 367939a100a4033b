//===- Bpe.cpp - byte-level BPE: GPT-2, Llama 3, Qwen, tiktoken -----------===//
//
// One algorithm serves HF's byte-level BPE and tiktoken: a document is split
// at its added tokens, each piece between them is split by the model's
// pattern (PCRE2, UTF and Unicode properties), and each pre-token's bytes are
// merged: start from one token per byte, then repeatedly merge the adjacent
// pair of lowest rank, leftmost first, until no adjacent pair has a rank.
// HF's BPE ranks pairs by their line in `merges` (its Word::merge_all pops
// (rank, position) from a heap: the same order); tiktoken ranks a pair by the
// rank of the token it makes, and first takes a pre-token that is itself a
// token whole (as HF does with ignore_merges, Llama 3).
//
//===----------------------------------------------------------------------===//
#include "tokenizer/Bpe.h"
#include "tokenizer/Formats.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <queue>
#include <sstream>
#include <unordered_map>

using namespace fsdp::tokenizer;
using nlohmann::json;

namespace {

//===----------------------------------------------------------------------===//
// The pattern
//===----------------------------------------------------------------------===//

/// A PCRE2 pattern compiled once (JIT where the machine has it) and matched
/// from any thread: the match data and the JIT stack are the thread's.
class Pattern {
public:
  ~Pattern() {
    if (code)
      pcre2_code_free(code);
  }
  static std::string compile(const std::string &regex, std::unique_ptr<Pattern> *out) {
    auto p = std::make_unique<Pattern>();
    int err = 0;
    PCRE2_SIZE at = 0;
    p->code = pcre2_compile((PCRE2_SPTR)regex.data(), regex.size(), PCRE2_UTF | PCRE2_UCP, &err,
                            &at, nullptr);
    if (!p->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return "pattern /" + regex + "/ does not compile at offset " + std::to_string(at) + ": " +
             (const char *)msg;
    }
    pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE); // without JIT: the interpreter
    *out = std::move(p);
    return "";
  }

  /// Appends the pieces of `text`: the matches, and with `keepGaps` the
  /// spans between them too (HF's Split behaviour "Isolated"); tiktoken
  /// drops them (its findall).
  void split(std::string_view text, bool keepGaps, std::vector<std::string_view> *out) const {
    struct Thread {
      pcre2_match_data *data = nullptr;
      pcre2_match_context *context = nullptr;
      pcre2_jit_stack *stack = nullptr;
      ~Thread() {
        if (data)
          pcre2_match_data_free(data);
        if (context)
          pcre2_match_context_free(context);
        if (stack)
          pcre2_jit_stack_free(stack);
      }
    };
    thread_local Thread t;
    if (!t.data) {
      t.data = pcre2_match_data_create(4, nullptr);
      t.context = pcre2_match_context_create(nullptr);
      // Long runs of one class (a 1 MB line of spaces) need a deep stack.
      t.stack = pcre2_jit_stack_create(32 << 10, 64 << 20, nullptr);
      pcre2_jit_stack_assign(t.context, nullptr, t.stack);
    }
    size_t pos = 0, emitted = 0;
    while (pos <= text.size()) {
      int rc = pcre2_match(code, (PCRE2_SPTR)text.data(), text.size(), pos, PCRE2_NO_UTF_CHECK,
                           t.data, t.context);
      if (rc < 0) {
        if (rc != PCRE2_ERROR_NOMATCH)
          throw std::runtime_error("the pre-tokenizer's pattern failed (PCRE2 error " +
                                   std::to_string(rc) + ")");
        break;
      }
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t.data);
      size_t b = ov[0], e = ov[1];
      if (e == b) { // an empty match: step over one character
        if (b >= text.size())
          break;
        pos = b + 1;
        while (pos < text.size() && ((unsigned char)text[pos] & 0xC0) == 0x80)
          ++pos;
        continue;
      }
      if (keepGaps && b > emitted)
        out->push_back(text.substr(emitted, b - emitted));
      out->push_back(text.substr(b, e - b));
      emitted = pos = e;
    }
    if (keepGaps && emitted < text.size())
      out->push_back(text.substr(emitted));
  }

private:
  pcre2_code *code = nullptr;
};

/// PCRE2 text that matches `s` literally (HF's Split with a String pattern).
std::string literalRegex(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (std::strchr("\\^$.|?*+()[]{}", c))
      out += '\\';
    out += c;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// GPT-2's byte-to-unicode map
//===----------------------------------------------------------------------===//

/// Byte b as the code point GPT-2's byte-level alphabet writes it: the
/// printable Latin-1 bytes as themselves, the others as 256, 257, ... in
/// byte order.
const std::vector<uint32_t> &byteToCodePoint() {
  static const std::vector<uint32_t> map = [] {
    std::vector<uint32_t> m(256);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      m[b] = printable ? uint32_t(b) : next++;
    }
    return m;
  }();
  return map;
}

/// A byte-level token's text back to its bytes; false when some character
/// is not in the alphabet (an added token such as "<|endoftext|>" is in it;
/// a token that is not byte-level is not).
bool byteLevelToBytes(const std::string &s, std::string *bytes) {
  static const std::unordered_map<uint32_t, uint8_t> inverse = [] {
    std::unordered_map<uint32_t, uint8_t> m;
    for (int b = 0; b < 256; ++b)
      m[byteToCodePoint()[b]] = uint8_t(b);
    return m;
  }();
  bytes->clear();
  for (size_t i = 0; i < s.size();) {
    int n = utf8SequenceLength(s, i);
    if (n == 0)
      return false;
    uint32_t cp = (unsigned char)s[i];
    if (n > 1) {
      cp &= 0xFF >> (n + 1);
      for (int k = 1; k < n; ++k)
        cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
    }
    auto it = inverse.find(cp);
    if (it == inverse.end())
      return false;
    bytes->push_back(char(it->second));
    i += n;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

class ByteLevelBpe final : public Tokenizer {
public:
  std::string kindName = "bpe";
  std::unordered_map<std::string, int32_t> byBytes; // a token's bytes -> its id
  std::unordered_map<std::string, int64_t> byText;  // a token's text (as the file writes it)
  int32_t byteId[256];
  struct Merge {
    int32_t rank, merged;
  };
  std::unordered_map<uint64_t, Merge> merges;     // (left id << 32 | right id)
  bool wholeFirst = false;                        // tiktoken; HF's ignore_merges
  std::vector<std::unique_ptr<Pattern>> patterns; // applied in turn
  bool keepGaps = true;
  bool prefixSpace = false; // HF ByteLevel's add_prefix_space
  const icu::Normalizer2 *nfc = nullptr;
  std::vector<AddedToken> added;
  int64_t vocab = 0, eos = -1, mask = -1;

  ByteLevelBpe() { std::fill(std::begin(byteId), std::end(byteId), -1); }

  void encode(std::string_view text, std::vector<int64_t> *ids) const override {
    std::vector<Segment> segments;
    splitAddedTokens(text, added, &segments);
    std::vector<std::string_view> pieces, next;
    std::string normalized;
    for (const Segment &s : segments) {
      if (s.id >= 0) {
        ids->push_back(s.id);
        continue;
      }
      std::string_view body = s.text;
      if (nfc) {
        UErrorCode status = U_ZERO_ERROR;
        icu::UnicodeString u =
            icu::UnicodeString::fromUTF8(icu::StringPiece(body.data(), (int32_t)body.size()));
        icu::UnicodeString n = nfc->normalize(u, status);
        normalized.clear();
        n.toUTF8String(normalized);
        body = normalized;
      }
      std::string prefixed;
      if (prefixSpace && !body.empty() && body[0] != ' ') {
        prefixed = " " + std::string(body);
        body = prefixed;
      }
      pieces.assign(1, body);
      for (const auto &p : patterns) {
        next.clear();
        for (std::string_view piece : pieces)
          p->split(piece, keepGaps, &next);
        pieces.swap(next);
      }
      for (std::string_view piece : pieces)
        encodePiece(piece, ids);
    }
  }

  void encodePiece(std::string_view piece, std::vector<int64_t> *ids) const {
    if (piece.empty())
      return;
    if (wholeFirst) {
      auto it = byBytes.find(std::string(piece));
      if (it != byBytes.end()) {
        ids->push_back(it->second);
        return;
      }
    }
    // Parts in a linked list, candidate pairs in a heap by (rank, first
    // byte): the lowest rank first, the leftmost among equals, as HF's
    // Word::merge_all and tiktoken choose, and a long piece (a run of 100k
    // letters) costs O(n log n), not O(n^2).
    struct Part {
      int32_t id;
      int64_t prev, next;
    };
    std::vector<Part> parts(piece.size());
    for (size_t i = 0; i < piece.size(); ++i)
      parts[i] = {byteId[(unsigned char)piece[i]], int64_t(i) - 1, // every byte has one
                  i + 1 < piece.size() ? int64_t(i) + 1 : -1};
    struct Candidate {
      int32_t rank;
      int64_t left, right; // part indices; the left one's index is its first byte
      int32_t leftId, rightId, merged;
      bool operator>(const Candidate &o) const {
        return rank != o.rank ? rank > o.rank : left > o.left;
      }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    auto push = [&](int64_t l, int64_t r) {
      if (l < 0 || r < 0)
        return;
      auto it = merges.find(uint64_t(uint32_t(parts[l].id)) << 32 | uint32_t(parts[r].id));
      if (it != merges.end())
        heap.push({it->second.rank, l, r, parts[l].id, parts[r].id, it->second.merged});
    };
    for (int64_t i = 0; i + 1 < int64_t(parts.size()); ++i)
      push(i, i + 1);
    while (!heap.empty()) {
      Candidate c = heap.top();
      heap.pop();
      Part &l = parts[c.left], &r = parts[c.right];
      // Stale when either side has merged since (a merged-away part is -1).
      if (l.id != c.leftId || l.next != c.right || r.id != c.rightId)
        continue;
      l.id = c.merged;
      l.next = r.next;
      if (r.next >= 0)
        parts[r.next].prev = c.left;
      r.id = -1;
      push(l.prev, c.left);
      push(c.left, l.next);
    }
    for (int64_t i = 0; i >= 0; i = parts[i].next)
      ids->push_back(parts[i].id);
  }

  int64_t vocabSize() const override { return vocab; }
  std::string kind() const override { return kindName; }
  int64_t tokenId(std::string_view token) const override {
    for (const AddedToken &a : added)
      if (a.content == token)
        return a.id;
    auto it = byText.find(std::string(token));
    return it == byText.end() ? -1 : it->second;
  }
  int64_t defaultEosId() const override { return eos; }
  int64_t maskId() const override { return mask; }

  /// Every byte must be a token, else a document could hold a byte the model
  /// cannot write.
  std::string checkBytes(const std::string &file) {
    for (int b = 0; b < 256; ++b) {
      auto it = byBytes.find(std::string(1, char(b)));
      if (it == byBytes.end())
        return file + ": byte " + std::to_string(b) + " has no token: not a byte-level vocabulary";
      byteId[b] = it->second;
    }
    return "";
  }

  /// The usual end-of-document tokens, first found: `eosToken` (from
  /// tokenizer_config.json) when given.
  void chooseEos(const std::string &eosToken) {
    for (const char *name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
      if (!eosToken.empty() && eosToken != name)
        continue;
      eos = tokenId(name);
      if (eos >= 0)
        return;
    }
    if (!eosToken.empty())
      eos = tokenId(eosToken);
  }
};

std::string jsonWhere(const std::string &file, const std::string &key) { return file + ": " + key; }

} // namespace

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

std::string fsdp::tokenizer::tiktokenPattern(const std::string &name) {
  static const char *gpt2 =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  if (name == "r50k_base" || name == "p50k_base" || name == "gpt2")
    return gpt2;
  if (name == "cl100k_base")
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (name == "o200k_base")
    return R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return "";
}

/// tiktoken's special tokens of each encoding.
static std::vector<AddedToken> tiktokenSpecials(const std::string &name) {
  if (name == "r50k_base" || name == "p50k_base" || name == "gpt2")
    return {{"<|endoftext|>", 50256, true}};
  if (name == "cl100k_base")
    return {{"<|endoftext|>", 100257, true},
            {"<|fim_prefix|>", 100258, true},
            {"<|fim_middle|>", 100259, true},
            {"<|fim_suffix|>", 100260, true},
            {"<|endofprompt|>", 100276, true}};
  if (name == "o200k_base")
    return {{"<|endoftext|>", 199999, true}, {"<|endofprompt|>", 200018, true}};
  return {};
}

static std::string decodeBase64(std::string_view s, std::string *out) {
  static const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=')
      break;
    size_t v = alphabet.find(c);
    if (v == std::string::npos)
      return std::string("not base64 ('") + c + "')";
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(char((acc >> bits) & 0xFF));
    }
  }
  return "";
}

std::string fsdp::tokenizer::loadTiktoken(const std::string &file, const std::string &pattern,
                                          std::unique_ptr<Tokenizer> *out) {
  std::string text;
  if (std::string err = readTokenizerFile(file, &text); !err.empty())
    return err;
  std::string name = pattern, regex;
  if (name.empty()) {
    std::string base = file.substr(file.find_last_of('/') + 1);
    name = base.substr(0, base.find('.'));
    if (tiktokenPattern(name).empty())
      return file + ": no split pattern: name one with --pattern (r50k_base, p50k_base, "
                    "cl100k_base, o200k_base) or give the regex";
  }
  regex = tiktokenPattern(name);
  if (regex.empty()) { // a regex of the user's
    regex = name;
    name.clear();
  }
  auto t = std::make_unique<ByteLevelBpe>();
  t->kindName = "tiktoken";
  t->wholeFirst = true;
  t->keepGaps = false;
  std::unique_ptr<Pattern> p;
  if (std::string err = Pattern::compile(regex, &p); !err.empty())
    return "--pattern: " + err;
  t->patterns.push_back(std::move(p));
  std::istringstream in(text);
  std::string line, bytes;
  int64_t lineNo = 0, maxRank = -1;
  std::vector<std::string> byRank;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty())
      continue;
    size_t sp = line.find(' ');
    char *end = nullptr;
    long long rank = sp == std::string::npos ? -1 : std::strtoll(line.c_str() + sp + 1, &end, 10);
    if (sp == std::string::npos || rank < 0 || rank > INT32_MAX - 1 || *end != '\0')
      return file + ":" + std::to_string(lineNo) + ": expected 'BASE64 RANK'";
    if (std::string err = decodeBase64(std::string_view(line).substr(0, sp), &bytes); !err.empty())
      return file + ":" + std::to_string(lineNo) + ": " + err;
    if (!t->byBytes.emplace(bytes, int32_t(rank)).second)
      return file + ":" + std::to_string(lineNo) + ": token repeated";
    if ((int64_t)byRank.size() <= rank)
      byRank.resize(rank + 1);
    byRank[rank] = bytes;
    maxRank = std::max<int64_t>(maxRank, rank);
  }
  if (std::string err = t->checkBytes(file); !err.empty())
    return err;
  // A pair's rank is the rank of the token it makes.
  for (const auto &[tok, rank] : t->byBytes)
    for (size_t i = 1; i < tok.size(); ++i) {
      auto l = t->byBytes.find(tok.substr(0, i)), r = t->byBytes.find(tok.substr(i));
      if (l != t->byBytes.end() && r != t->byBytes.end())
        t->merges[uint64_t(uint32_t(l->second)) << 32 | uint32_t(r->second)] = {rank, rank};
    }
  t->vocab = maxRank + 1;
  for (AddedToken &a : tiktokenSpecials(name)) {
    t->added.push_back(a);
    t->vocab = std::max(t->vocab, a.id + 1);
  }
  t->chooseEos("");
  *out = std::move(t);
  return "";
}

std::string fsdp::tokenizer::loadGPT2Files(const std::string &vocabFile,
                                           const std::string &mergesFile,
                                           std::unique_ptr<Tokenizer> *out) {
  std::string vocabText, mergesText;
  if (std::string err = readTokenizerFile(vocabFile, &vocabText); !err.empty())
    return err;
  if (std::string err = readTokenizerFile(mergesFile, &mergesText); !err.empty())
    return err;
  json vocab = json::parse(vocabText, nullptr, false);
  if (!vocab.is_object())
    return vocabFile + ": not a JSON object of token: id";
  json merges = json::array();
  std::istringstream in(mergesText);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0)
      continue;
    merges.push_back(line);
  }
  // GPT-2's slow tokenizer as its tokenizer.json writes it.
  json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"byte_fallback", false}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"normalizer", nullptr},
      {"added_tokens", json::array()}};
  if (vocab.contains("<|endoftext|>"))
    j["added_tokens"].push_back(
        {{"content", "<|endoftext|>"}, {"id", vocab["<|endoftext|>"]}, {"special", true}});
  return loadHFBpe(j, vocabFile + " and " + mergesFile, "", out);
}

std::string fsdp::tokenizer::loadHFBpe(const json &j, const std::string &file,
                                       const std::string &eosToken,
                                       std::unique_ptr<Tokenizer> *out) {
  const json &model = j["model"];
  auto t = std::make_unique<ByteLevelBpe>();
  // What the importer does not implement is refused, named.
  for (const char *key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null() &&
        !(model[key].is_string() && model[key] == ""))
      return jsonWhere(file, std::string("model.") + key) + ": " + model[key].dump() +
             " is not implemented (byte-level BPE has none)";
  if (model.value("byte_fallback", false))
    return jsonWhere(file, "model.byte_fallback") +
           ": true is not implemented (a SentencePiece-style BPE: give tokenizer.model)";
  t->wholeFirst = model.value("ignore_merges", false);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return jsonWhere(file, "model.vocab") + ": expected an object of token: id";
  std::string bytes;
  for (const auto &[tok, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= INT32_MAX)
      return jsonWhere(file, "model.vocab[\"" + tok + "\"]") + ": expected an id";
    int64_t v = id.get<int64_t>();
    t->byText[tok] = v;
    t->vocab = std::max(t->vocab, v + 1);
    if (byteLevelToBytes(tok, &bytes))
      t->byBytes[bytes] = int32_t(v);
  }
  if (std::string err = t->checkBytes(file); !err.empty())
    return err;
  const json &merges = model["merges"];
  if (!merges.is_array())
    return jsonWhere(file, "model.merges") + ": expected an array";
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string a, b;
    if (merges[r].is_string()) {
      std::string m = merges[r];
      size_t sp = m.find(' ');
      if (sp == std::string::npos)
        return jsonWhere(file, "model.merges[" + std::to_string(r) + "]") + ": expected 'A B'";
      a = m.substr(0, sp);
      b = m.substr(sp + 1);
    } else if (merges[r].is_array() && merges[r].size() == 2 && merges[r][0].is_string() &&
               merges[r][1].is_string()) {
      a = merges[r][0];
      b = merges[r][1];
    } else {
      return jsonWhere(file, "model.merges[" + std::to_string(r) + "]") +
             ": expected 'A B' or [A, B]";
    }
    auto ia = t->byText.find(a), ib = t->byText.find(b), im = t->byText.find(a + b);
    if (ia == t->byText.end() || ib == t->byText.end() || im == t->byText.end())
      return jsonWhere(file, "model.merges[" + std::to_string(r) + "]") + ": '" + a + " " + b +
             "' names a token that is not in model.vocab";
    // The first line of a pair ranks it (HF keeps the first).
    t->merges.emplace(uint64_t(uint32_t(ia->second)) << 32 | uint32_t(ib->second),
                      ByteLevelBpe::Merge{int32_t(r), int32_t(im->second)});
  }
  // The normalizer: none, or NFC (Qwen2).
  const json &norm = j.contains("normalizer") ? j["normalizer"] : json();
  if (!norm.is_null()) {
    if (norm.value("type", "") != "NFC")
      return jsonWhere(file, "normalizer") + ": " + norm.dump() +
             " is not implemented for BPE (null and NFC are)";
    UErrorCode status = U_ZERO_ERROR;
    t->nfc = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status))
      return "ICU's NFC normalizer is not available";
  }
  // The pre-tokenizer: ByteLevel (with GPT-2's pattern), or Splits then a
  // ByteLevel without it (Llama 3, Qwen2).
  const json &pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  std::vector<json> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers"))
    steps.assign(pre["pretokenizers"].begin(), pre["pretokenizers"].end());
  else if (pre.is_object())
    steps.push_back(pre);
  bool byteLevel = false;
  for (size_t k = 0; k < steps.size(); ++k) {
    const json &s = steps[k];
    std::string where = steps.size() > 1 ? "pre_tokenizer.pretokenizers[" + std::to_string(k) + "]"
                                         : std::string("pre_tokenizer");
    std::string type = s.value("type", "");
    std::string regex;
    if (type == "ByteLevel" && !byteLevel) {
      byteLevel = true;
      t->prefixSpace = s.value("add_prefix_space", false);
      if (s.value("use_regex", true))
        regex = tiktokenPattern("gpt2");
    } else if (type == "Split" && !byteLevel) {
      if (s.value("behavior", "") != "Isolated" || s.value("invert", false))
        return jsonWhere(file, where) + ": a Split other than behavior Isolated, invert false is "
                                        "not implemented";
      const json &pat = s.contains("pattern") ? s["pattern"] : json();
      if (pat.contains("Regex") && pat["Regex"].is_string())
        regex = pat["Regex"];
      else if (pat.contains("String") && pat["String"].is_string())
        regex = literalRegex(pat["String"]);
      else
        return jsonWhere(file, where + ".pattern") +
               ": expected {\"Regex\": ...} or {\"String\": ...}";
    } else {
      return jsonWhere(file, where) + ": " + s.dump().substr(0, 80) +
             " is not implemented (byte-level BPE takes Split steps, then one ByteLevel)";
    }
    if (!regex.empty()) {
      std::unique_ptr<Pattern> p;
      if (std::string err = Pattern::compile(regex, &p); !err.empty())
        return jsonWhere(file, where) + ": " + err;
      t->patterns.push_back(std::move(p));
    }
  }
  if (!byteLevel)
    return jsonWhere(file, "pre_tokenizer") + ": byte-level BPE needs a ByteLevel pre-tokenizer";
  // Added tokens: split out of the text first, each its id.
  if (j.contains("added_tokens")) {
    if (!j["added_tokens"].is_array())
      return jsonWhere(file, "added_tokens") + ": expected an array";
    for (size_t k = 0; k < j["added_tokens"].size(); ++k) {
      const json &a = j["added_tokens"][k];
      std::string where = "added_tokens[" + std::to_string(k) + "]";
      if (!a.contains("content") || !a["content"].is_string() || !a.contains("id") ||
          !a["id"].is_number_integer())
        return jsonWhere(file, where) + ": expected content and id";
      if (a.value("single_word", false))
        return jsonWhere(file, where + ".single_word") + ": true is not implemented";
      AddedToken tok{a["content"], a["id"], a.value("special", false), a.value("lstrip", false),
                     a.value("rstrip", false)};
      t->vocab = std::max(t->vocab, tok.id + 1);
      t->added.push_back(tok);
    }
  }
  t->chooseEos(eosToken);
  *out = std::move(t);
  return "";
}
