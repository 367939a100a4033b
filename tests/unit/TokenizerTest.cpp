//===- TokenizerTest.cpp - UTF-8 checks and byte-level BPE by hand --------===//
//
// The exactness against real vocabularies is tests/tokenize (npm's
// implementations); here the rules on inputs small enough to work by hand.
//
//===----------------------------------------------------------------------===//
#include "support/Suggest.h"
#include "tokenizer/Formats.h"
#include "tokenizer/Text.h"

#include <gtest/gtest.h>

#include <unistd.h>

using namespace fsdp;
using namespace fsdp::tokenizer;
using nlohmann::json;

TEST(Utf8, ValidSequencesPass) {
  EXPECT_EQ(checkUtf8("plain ASCII"), "");
  EXPECT_EQ(checkUtf8("\xC3\xA9 \xE6\xBC\xA2 \xF0\x9F\x98\x80"), ""); // é 漢 😀
  EXPECT_EQ(checkUtf8("\xF4\x8F\xBF\xBF"), "");                       // U+10FFFF
  EXPECT_EQ(checkUtf8(std::string("nul \0 inside", 12)), "");
}

TEST(Utf8, EachBadClassNamesItsOffset) {
  struct Case {
    std::string text;
    int64_t offset;
  } cases[] = {
      {"ab\x80", 2},             // a lone continuation byte
      {"a\xC3", 1},              // truncated at the end
      {"a\xC3(", 1},             // a lead byte without its continuation
      {"\xC0\xAF", 0},           // overlong (C0, C1 never start a sequence)
      {"x\xE0\x80\xAF", 1},      // overlong 3-byte
      {"xy\xF0\x80\x80\xAF", 2}, // overlong 4-byte
      {"\xED\xA0\x80", 0},       // a surrogate (U+D800)
      {"z\xF4\x90\x80\x80", 1},  // past U+10FFFF
      {"\xF5\x80\x80\x80", 0},   // F5..FF never start one
      {"ok\xFF", 2},
  };
  for (const Case &c : cases) {
    int64_t at = -1;
    std::string err = checkUtf8(c.text, &at);
    EXPECT_NE(err, "") << c.text;
    EXPECT_EQ(at, c.offset) << c.text;
    EXPECT_EQ(err.rfind("byte " + std::to_string(c.offset) + ":", 0), 0u) << err;
  }
}

TEST(Utf8, ReplacementFollowsMaximalSubparts) {
  int64_t n = 0;
  // WHATWG: E1 80 (truncated 3-byte) is one U+FFFD; a lone 80 another.
  EXPECT_EQ(replaceInvalidUtf8("a\xE1\x80"
                               "b\x80"
                               "c",
                               &n),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD"
            "c");
  EXPECT_EQ(n, 2);
  // ED A0 80: ED's second byte must be below A0, so three replacements.
  EXPECT_EQ(replaceInvalidUtf8("\xED\xA0\x80", &n), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(n, 3);
}

TEST(AddedTokens, LeftmostLongestAndStripping) {
  std::vector<AddedToken> added = {{"<a>", 1}, {"<a><b>", 2}, {"<b>", 3, false, true, true}};
  std::vector<Segment> s;
  splitAddedTokens("x<a><b>y <b> z", added, &s);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].text, "x");
  EXPECT_EQ(s[1].id, 2); // the longer at the same place
  EXPECT_EQ(s[2].text, "y");
  EXPECT_EQ(s[3].id, 3); // " <b> " taken whole (lstrip, rstrip)
  EXPECT_EQ(s[3].text, " <b> ");
  EXPECT_EQ(s[4].text, "z");
}

namespace {
/// A byte-level vocabulary: the 256 bytes (GPT-2's alphabet), then `extra`
/// tokens, with `merges`.
json tinyBpe(const std::vector<std::string> &extra, const std::vector<std::string> &merges,
             bool ignoreMerges = false) {
  json vocab = json::object();
  // GPT-2's byte-to-unicode alphabet, as the tokenizer reads it.
  int next = 256, id = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    uint32_t cp = printable ? uint32_t(b) : uint32_t(next++);
    std::string s;
    if (cp < 0x80) {
      s += char(cp);
    } else {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    }
    vocab[s] = id++;
  }
  for (const std::string &t : extra)
    vocab[t] = id++;
  return {
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", ignoreMerges}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"added_tokens", json::array()}};
}

std::vector<int64_t> encode(const Tokenizer &t, const std::string &text) {
  std::vector<int64_t> ids;
  t.encode(text, &ids);
  return ids;
}
} // namespace

TEST(ByteLevelBpe, LowestRankFirstLeftmostOnTies) {
  // "ab" (rank 0) before "bc" (rank 1): "abc" is ab + c, not a + bc.
  std::unique_ptr<Tokenizer> t;
  ASSERT_EQ(loadHFBpe(tinyBpe({"ab", "bc", "abc"}, {"a b", "b c", "ab c"}), "t.json", "", &t), "");
  EXPECT_EQ(encode(*t, "abc"), (std::vector<int64_t>{258})); // ab, then ab+c
  EXPECT_EQ(encode(*t, "bcab"),
            (std::vector<int64_t>{257, 256})); // bc | ab: two merges of their own
  // Ties: "aaa" with "a a" merges the leftmost pair first: aa + a.
  ASSERT_EQ(loadHFBpe(tinyBpe({"aa"}, {"a a"}), "t.json", "", &t), "");
  EXPECT_EQ(encode(*t, "aaa"), (std::vector<int64_t>{256, 'a'})); // byte b is id b here
}

TEST(ByteLevelBpe, PreTokensSplitBeforeMerging) {
  // " a" is one pre-token (GPT-2's pattern: " ?\p{L}+"); its space is
  // byte 0x20, written U+0120 'Ġ' in the alphabet.
  std::unique_ptr<Tokenizer> t;
  ASSERT_EQ(loadHFBpe(tinyBpe({"\xC4\xA0"
                               "a"},
                              {"\xC4\xA0 a"}),
                      "t.json", "", &t),
            "");
  std::vector<int64_t> ids = encode(*t, "a a");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[1], 256);
}

TEST(ByteLevelBpe, IgnoreMergesTakesAWholeTokenFirst) {
  // "abc" is a token that the merges cannot reach (no "ab c" merge).
  std::unique_ptr<Tokenizer> t;
  ASSERT_EQ(loadHFBpe(tinyBpe({"ab", "abc"}, {"a b"}, false), "t.json", "", &t), "");
  EXPECT_EQ(encode(*t, "abc").size(), 2u);
  ASSERT_EQ(loadHFBpe(tinyBpe({"ab", "abc"}, {"a b"}, true), "t.json", "", &t), "");
  EXPECT_EQ(encode(*t, "abc"), (std::vector<int64_t>{257}));
}

TEST(ByteLevelBpe, RefusesWhatItDoesNotImplement) {
  std::unique_ptr<Tokenizer> t;
  json j = tinyBpe({}, {});
  j["model"]["byte_fallback"] = true;
  EXPECT_NE(loadHFBpe(j, "t.json", "", &t).find("model.byte_fallback"), std::string::npos);
  j = tinyBpe({}, {});
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(loadHFBpe(j, "t.json", "", &t).find("t.json: normalizer"), std::string::npos);
  j = tinyBpe({}, {"a zz"});
  EXPECT_NE(loadHFBpe(j, "t.json", "", &t).find("model.merges[0]"), std::string::npos);
  j = tinyBpe({}, {});
  j["model"]["vocab"].erase("a");
  EXPECT_NE(loadHFBpe(j, "t.json", "", &t).find("has no token"), std::string::npos);
}

TEST(Tiktoken, RanksPairsByTheTokenTheyMake) {
  // A rank file by hand: the 256 bytes, then "ab" and "abc"; "bc" is not a
  // token, so "abc" comes from ab + c.
  char path[] = "/tmp/fsdp-tiktoken-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string file = std::string(path) + ".tiktoken";
  static const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto enc = [&](const std::string &s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i += 3) {
      uint32_t v = (unsigned char)s[i] << 16;
      if (i + 1 < s.size())
        v |= (unsigned char)s[i + 1] << 8;
      if (i + 2 < s.size())
        v |= (unsigned char)s[i + 2];
      out += b64[(v >> 18) & 63];
      out += b64[(v >> 12) & 63];
      out += i + 1 < s.size() ? b64[(v >> 6) & 63] : '=';
      out += i + 2 < s.size() ? b64[v & 63] : '=';
    }
    return out;
  };
  std::string text;
  for (int b = 0; b < 256; ++b)
    text += enc(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
  text += enc("ab") + " 256\n" + enc("abc") + " 257\n";
  FILE *f = fopen(file.c_str(), "w");
  fputs(text.c_str(), f);
  fclose(f);
  std::unique_ptr<Tokenizer> t;
  EXPECT_NE(loadTiktoken(file, "", &t), ""); // its name says no pattern
  ASSERT_EQ(loadTiktoken(file, "r50k_base", &t), "");
  EXPECT_EQ(encode(*t, "abc"), (std::vector<int64_t>{257}));
  EXPECT_EQ(encode(*t, "abd"), (std::vector<int64_t>{256, 'd'}));
  EXPECT_EQ(encode(*t, "x<|endoftext|>"), (std::vector<int64_t>{'x', 50256}));
  ::unlink(file.c_str());
  ::close(fd);
  ::unlink(path);
}

TEST(Suggest, NearestFlag) {
  std::vector<std::string> flags = {"--tokenizer", "--field", "--eos-id", "--threads"};
  EXPECT_EQ(support::nearest("--tokeniser", flags), "--tokenizer");
  EXPECT_EQ(support::nearest("--eos_id", flags), "--eos-id");
  EXPECT_EQ(support::nearest("--feild", flags), "--field");
  EXPECT_EQ(support::nearest("--xyz", flags), "");
}

TEST(WordPiece, GreedyLongestMatchAndItsRules) {
  // A vocab.txt by hand: bert-base-uncased's settings.
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\naff\n##a\n"
                      "!\nhello\ncafe\n\xE6\xBC\xA2\n";
  std::unique_ptr<Tokenizer> t;
  ASSERT_EQ(loadWordPiece(nullptr, vocab, "vocab.txt", &t), "");
  EXPECT_EQ(t->vocabSize(), 14);
  EXPECT_EQ(t->defaultEosId(), 3);
  EXPECT_EQ(t->maskId(), 4);
  // Longest first: un + ##aff + ##able, not un + ##a + ...
  EXPECT_EQ(encode(*t, "unaffable"), (std::vector<int64_t>{5, 6, 7}));
  // Punctuation is a word of its own; case and accents go (NFD, then Mn
  // dropped, then lowercase): "Café" is cafe.
  EXPECT_EQ(encode(*t, "HELLO!Caf\xC3\xA9"), (std::vector<int64_t>{11, 10, 12}));
  // A word with a piece the vocabulary lacks is one [UNK], whole.
  EXPECT_EQ(encode(*t, "unaffz hello"), (std::vector<int64_t>{1, 11}));
  // CJK ideographs are words of their own; control characters vanish.
  EXPECT_EQ(encode(*t, "hello\xE6\xBC\xA2\x01hello"), (std::vector<int64_t>{11, 13, 11}));
  // Special tokens in the raw text are their ids.
  EXPECT_EQ(encode(*t, "[CLS]hello[SEP]"), (std::vector<int64_t>{2, 11, 3}));
  // Past 100 characters a word is [UNK] even when pieces would cover it.
  std::string longWord = "un";
  for (int i = 0; i < 33; ++i)
    longWord += "aff";
  EXPECT_EQ(encode(*t, longWord), (std::vector<int64_t>{1}));
  EXPECT_EQ(encode(*t, longWord.substr(0, 98)).size(), 33u);
}
