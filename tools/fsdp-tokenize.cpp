//===- fsdp-tokenize.cpp - text to the token files fsdp-run trains on -----===//
//
// fsdp-tokenize --tokenizer PATH -o OUT [options] FILES...
//
// Reads UTF-8 text files (one document each) or JSONL (one document a line,
// its text in --field) and writes OUT, the flat little-endian token file
// fsdp-run reads with --data, the documents in input order with the EOS id
// after each, and OUT.json, what it holds (docs/data.md). Documents are
// tokenised on --threads threads in chunks; a bounded number of chunks is in
// flight, so memory does not grow with the corpus. Output is whole or absent:
// written beside OUT under temporary names and renamed at the end.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/Files.h"
#include "support/InputFile.h"
#include "support/Suggest.h"
#include "tokenizer/Text.h"
#include "tokenizer/Tokenizer.h"
#include "tools/Version.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

using namespace fsdp;
using nlohmann::json;

namespace {

const char *kUsage =
    "usage: fsdp-tokenize --tokenizer PATH -o OUT [options] FILES...\n"
    "\n"
    "Tokenises text for fsdp-run --data: each plain text file is one document,\n"
    "each line of a .jsonl file one document (its text in --field). Writes OUT,\n"
    "the token ids (little-endian uint16 or uint32) with the EOS id after each\n"
    "document, and OUT.json, what OUT holds.\n"
    "\n"
    "  --tokenizer PATH      a model folder, or its tokenizer.json, vocab.json (with\n"
    "                        merges.txt beside it) or a tiktoken *.tiktoken rank file\n"
    "  -o OUT                the token file to write (OUT.json beside it)\n"
    "  --field NAME          JSONL: the key of the text (default: text)\n"
    "  --eos-id N|auto|none  the id after each document (default auto: the\n"
    "                        tokenizer's end-of-text token)\n"
    "  --pattern NAME|REGEX  tiktoken: the split pattern (r50k_base, p50k_base,\n"
    "                        cl100k_base, o200k_base, or a PCRE2 regex); default: from\n"
    "                        the file's name\n"
    "  --dtype uint16|uint32 the width of an id (default: uint16 when the vocabulary\n"
    "                        fits in 65536)\n"
    "  --threads N           threads that tokenise (default: the CPUs)\n"
    "  --replace-invalid     replace invalid UTF-8 with U+FFFD instead of stopping\n"
    "  --doc-index           also write OUT.idx: uint64 offsets, in tokens, of each\n"
    "                        document's start, and the total at the end\n"
    "  --version, --help\n";

struct Options {
  std::string tokenizer, out, field = "text", eos = "auto", pattern, dtype;
  int threads = 0;
  bool replaceInvalid = false, docIndex = false;
  std::vector<std::string> files;
};

int fail(const std::string &message) {
  std::fprintf(stderr, "fsdp-tokenize: error: %s\n", message.c_str());
  return 1;
}

/// One document as read: its bytes and where it came from.
struct Doc {
  std::string text;
  const std::string *file;
  int64_t line;   // JSONL: its line (from 1); 0: a whole text file
  int64_t offset; // its first byte in the file
};

/// Documents tokenised together, and what came of them.
struct Chunk {
  std::vector<Doc> docs;
  std::vector<int64_t> ids;
  std::vector<uint64_t> lengths; // tokens of each document, EOS included
  int64_t inputBytes = 0, replaced = 0;
  std::string error;
  bool done = false;
};

class Pipeline {
public:
  Pipeline(const Options &o, const tokenizer::Tokenizer &tok, int64_t eos)
      : o(o), tok(tok), eos(eos) {}

  /// A document's text: the file's bytes or the JSONL line's field,
  /// checked (or repaired) UTF-8. "" or the error, naming the file.
  std::string documentText(Doc &d, int64_t *replaced) const {
    std::string where = *d.file + (d.line ? ":" + std::to_string(d.line) : "");
    int64_t bad = 0;
    std::string err = tokenizer::checkUtf8(d.text, &bad);
    if (!err.empty()) {
      if (!o.replaceInvalid)
        return where + ": byte " + std::to_string(d.offset + bad) +
               " of the file: invalid UTF-8 (--replace-invalid replaces it with U+FFFD)";
      int64_t n = 0;
      d.text = tokenizer::replaceInvalidUtf8(d.text, &n);
      *replaced += n;
    }
    if (!d.line)
      return "";
    json j = json::parse(d.text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return where + ": not a JSON object";
    auto it = j.find(o.field);
    if (it == j.end())
      return where + ": no \"" + o.field + "\" (--field names the text's key)";
    if (!it->is_string())
      return where + ": \"" + o.field + "\" is " + std::string(it->type_name()) + ", not a string";
    d.text = it->get<std::string>();
    return "";
  }

  void work(Chunk &c) const {
    try {
      for (Doc &d : c.docs) {
        if (std::string err = documentText(d, &c.replaced); !err.empty()) {
          c.error = err;
          return;
        }
        size_t before = c.ids.size();
        tok.encode(d.text, &c.ids);
        if (eos >= 0)
          c.ids.push_back(eos);
        c.lengths.push_back(c.ids.size() - before);
        d.text = std::string(); // the memory goes back now
      }
    } catch (const std::exception &e) {
      c.error = *c.docs.front().file + ": " + e.what();
    }
  }

  const Options &o;
  const tokenizer::Tokenizer &tok;
  int64_t eos;
};

/// Chunks in flight, in input order: the reader adds, the workers fill, the
/// writer takes them in order.
class Queue {
public:
  explicit Queue(size_t limit) : limit(limit) {}
  /// Blocks while `limit` chunks are in flight; false once stopped.
  bool push(std::unique_ptr<Chunk> c) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return chunks.size() < limit || stopped; });
    if (stopped)
      return false;
    chunks.push_back(std::move(c));
    cv.notify_all();
    return true;
  }
  /// The next chunk no worker has taken, or null when none will come.
  Chunk *take() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return taken < chunks.size() || closed || stopped; });
    if (stopped || taken == chunks.size())
      return nullptr;
    return chunks[taken++].get();
  }
  void finished(Chunk *c) {
    std::lock_guard<std::mutex> l(mu);
    c->done = true;
    cv.notify_all();
  }
  /// The oldest chunk once done, or null at the end.
  std::unique_ptr<Chunk> next() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] {
      return (!chunks.empty() && chunks.front()->done) || (closed && chunks.empty()) || stopped;
    });
    if (stopped || chunks.empty())
      return nullptr;
    std::unique_ptr<Chunk> c = std::move(chunks.front());
    chunks.pop_front();
    --taken;
    cv.notify_all();
    return c;
  }
  void close() {
    std::lock_guard<std::mutex> l(mu);
    closed = true;
    cv.notify_all();
  }
  void stop() {
    std::lock_guard<std::mutex> l(mu);
    stopped = true;
    cv.notify_all();
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Chunk>> chunks;
  size_t taken = 0, limit;
  bool closed = false, stopped = false;
};

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

/// A progress line on a terminal: documents, MB/s, ETA.
class Progress {
public:
  Progress(int64_t total) : total(total), tty(::isatty(2)), start(clock::now()), last(start) {}
  void update(int64_t docs, int64_t bytes, bool final = false) {
    if (!tty)
      return;
    auto now = clock::now();
    if (!final && now - last < std::chrono::milliseconds(250))
      return;
    last = now;
    double s = std::chrono::duration<double>(now - start).count();
    double rate = s > 0 ? bytes / s : 0;
    double eta = rate > 0 ? (total - bytes) / rate : 0;
    std::fprintf(stderr, "\r%lld documents, %.1f of %.1f MB, %.1f MB/s, ETA %.0f s   ",
                 (long long)docs, bytes / 1e6, total / 1e6, rate / 1e6, final ? 0.0 : eta);
    if (final)
      std::fprintf(stderr, "\n");
  }

private:
  using clock = std::chrono::steady_clock;
  int64_t total;
  bool tty;
  clock::time_point start, last;
};

} // namespace

int main(int argc, char **argv) {
  Options o;
  const std::vector<std::string> flags = {
      "--tokenizer", "-o",        "--field",   "--eos-id",
      "--pattern",   "--dtype",   "--threads", "--replace-invalid",
      "--doc-index", "--version", "--help"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string *to) {
      if (i + 1 >= argc)
        return false;
      *to = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("fsdp-tokenize %s\n", FSDP_VERSION);
      return 0;
    } else if (a == "--replace-invalid") {
      o.replaceInvalid = true;
    } else if (a == "--doc-index") {
      o.docIndex = true;
    } else if (a == "--tokenizer" || a == "-o" || a == "--field" || a == "--eos-id" ||
               a == "--pattern" || a == "--dtype" || a == "--threads") {
      if (!value(&v))
        return fail(a + " needs a value");
      if (a == "--tokenizer")
        o.tokenizer = v;
      else if (a == "-o")
        o.out = v;
      else if (a == "--field")
        o.field = v;
      else if (a == "--eos-id")
        o.eos = v;
      else if (a == "--pattern")
        o.pattern = v;
      else if (a == "--dtype")
        o.dtype = v;
      else {
        char *end = nullptr;
        long n = std::strtol(v.c_str(), &end, 10);
        if (*end || n < 1 || n > 1024)
          return fail("--threads expects a count from 1 to 1024, not '" + v + "'");
        o.threads = int(n);
      }
    } else if (a.size() > 1 && a[0] == '-') {
      std::string flag = a.substr(0, a.find('='));
      std::string near = support::nearest(flag, flags);
      return fail("unknown flag '" + a + "'" +
                  (near.empty() ? "" : "; did you mean " + near + "?") + " (fsdp-tokenize --help)");
    } else {
      o.files.push_back(a);
    }
  }
  if (o.tokenizer.empty())
    return fail("--tokenizer PATH is required (a model folder or its tokenizer file)");
  if (o.out.empty())
    return fail("-o OUT is required");
  if (o.files.empty())
    return fail("no input files (text files, or .jsonl with --field)");
  if (o.dtype != "" && o.dtype != "uint16" && o.dtype != "uint32")
    return fail("--dtype expects uint16 or uint32, not '" + o.dtype + "'");
  if (std::string err = io::faultInjectionError(); !err.empty())
    return fail(err);

  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::string source;
  tokenizer::LoadOptions lo;
  lo.pattern = o.pattern;
  if (std::string err = tokenizer::load(o.tokenizer, lo, &tok, &source); !err.empty())
    return fail("--tokenizer: " + err);

  int64_t vocab = tok->vocabSize(), eos = -1;
  if (o.eos == "auto") {
    eos = tok->defaultEosId();
    if (eos < 0)
      return fail("--eos-id auto: " + source +
                  " names no end-of-text token; give --eos-id N or --eos-id none");
  } else if (o.eos != "none") {
    char *end = nullptr;
    long long n = std::strtoll(o.eos.c_str(), &end, 10);
    if (o.eos.empty() || *end || n < 0 || n >= vocab)
      return fail("--eos-id '" + o.eos + "': expected auto, none or an id below the vocabulary's " +
                  std::to_string(vocab));
    eos = n;
  }
  std::string dtype = o.dtype.empty() ? (vocab <= 65536 ? "uint16" : "uint32") : o.dtype;
  if (dtype == "uint16" && vocab > 65536)
    return fail("--dtype uint16 cannot hold ids of a vocabulary of " + std::to_string(vocab) +
                "; use uint32");

  // Inputs checked before anything is written; their size for the ETA.
  int64_t totalBytes = 0;
  for (const std::string &f : o.files) {
    int fd = -1;
    int64_t size = 0;
    if (std::string err = support::openRegularFile(f, int64_t(1) << 50, "input", &fd, &size);
        !err.empty())
      return fail(err);
    ::close(fd);
    totalBytes += size;
  }
  std::string idx = o.out + ".idx", meta = o.out + ".json";
  for (const std::string &path : {o.out, meta})
    if (std::string err = io::checkOutputFile("-o", path); !err.empty())
      return fail(err);
  std::string suffix = ".tmp." + std::to_string(::getpid());
  io::DurableFile tokens, index;
  if (std::string err = tokens.create(o.out + suffix); !err.empty())
    return fail(err);
  if (o.docIndex)
    if (std::string err = index.create(idx + suffix); !err.empty())
      return fail(err);
  auto cleanUp = [&] {
    for (const std::string &p : {o.out + suffix, idx + suffix, meta + suffix})
      io::removeTree(p);
  };

  Pipeline pipe(o, *tok, eos);
  int threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  Queue queue(size_t(threads) * 4);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      while (Chunk *c = queue.take()) {
        pipe.work(*c);
        queue.finished(c);
      }
    });

  // The writer: chunks in input order.
  std::string writeError;
  int64_t documents = 0, written = 0, replaced = 0, doneBytes = 0;
  Progress progress(totalBytes);
  std::thread writer([&] {
    std::vector<char> buf;
    int width = dtype == "uint16" ? 2 : 4;
    while (std::unique_ptr<Chunk> c = queue.next()) {
      if (!c->error.empty()) {
        writeError = c->error;
        queue.stop();
        return;
      }
      buf.resize(c->ids.size() * width);
      for (size_t k = 0; k < c->ids.size(); ++k) {
        uint32_t id = uint32_t(c->ids[k]);
        for (int b = 0; b < width; ++b)
          buf[k * width + b] = char((id >> (8 * b)) & 0xFF);
      }
      std::string err = tokens.write(buf.data(), buf.size());
      for (uint64_t len : c->lengths) {
        if (err.empty() && o.docIndex) {
          uint64_t at = uint64_t(written);
          char le[8];
          for (int b = 0; b < 8; ++b)
            le[b] = char((at >> (8 * b)) & 0xFF);
          err = index.write(le, 8);
        }
        written += int64_t(len);
        ++documents;
      }
      if (!err.empty()) {
        writeError = err;
        queue.stop();
        return;
      }
      replaced += c->replaced;
      doneBytes += c->inputBytes;
      progress.update(documents, doneBytes);
    }
  });

  // The reader: documents into chunks of about 1 MB.
  const int64_t chunkBytes = 1 << 20;
  std::unique_ptr<Chunk> chunk = std::make_unique<Chunk>();
  auto flush = [&] {
    if (chunk->docs.empty())
      return true;
    bool ok = queue.push(std::move(chunk));
    chunk = std::make_unique<Chunk>();
    return ok;
  };
  auto add = [&](Doc d) {
    chunk->inputBytes += int64_t(d.text.size()) + (d.line ? 1 : 0);
    chunk->docs.push_back(std::move(d));
    return chunk->inputBytes < chunkBytes || flush();
  };
  std::string readError;
  bool going = true;
  for (const std::string &f : o.files) {
    if (!going)
      break;
    if (endsWith(f, ".jsonl")) {
      std::ifstream in(f, std::ios::binary);
      std::string line;
      int64_t lineNo = 0, offset = 0;
      while (going && std::getline(in, line)) {
        ++lineNo;
        int64_t at = offset;
        offset += int64_t(line.size()) + 1;
        if (!line.empty() && line.back() == '\r')
          line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos)
          continue; // a blank line is no document
        going = add({std::move(line), &f, lineNo, at});
      }
      if (in.bad()) {
        readError = f + ": read error";
        break;
      }
    } else {
      Doc d{"", &f, 0, 0};
      if (std::string err = support::readRegularFile(f, int64_t(1) << 40, "input", &d.text);
          !err.empty()) {
        readError = err;
        break;
      }
      going = add(std::move(d));
    }
  }
  if (going && readError.empty())
    flush();
  queue.close();
  if (!readError.empty())
    queue.stop();
  for (std::thread &w : workers)
    w.join();
  writer.join();

  std::string err = !readError.empty() ? readError : writeError;
  if (err.empty())
    err = tokens.close();
  if (err.empty() && o.docIndex) {
    char le[8];
    for (int b = 0; b < 8; ++b)
      le[b] = char((uint64_t(written) >> (8 * b)) & 0xFF);
    err = index.write(le, 8);
    if (err.empty())
      err = index.close();
  }
  if (err.empty()) {
    json m = {{"format", "fsdp-tokens"}, {"tokenizer", source},
              {"kind", tok->kind()},     {"vocab_size", vocab},
              {"dtype", dtype},          {"documents", documents},
              {"tokens", written},       {"eos_id", eos >= 0 ? json(eos) : json(nullptr)}};
    if (tok->maskId() >= 0)
      m["mask_id"] = tok->maskId();
    if (o.docIndex)
      m["doc_index"] = idx.substr(idx.find_last_of('/') + 1);
    if (replaced)
      m["replaced_invalid_utf8"] = replaced;
    err = io::writeFileDurable(meta + suffix, m.dump(2) + "\n");
  }
  // The data first, the index, then the sidecar: a sidecar names a whole
  // file. A failure on the way removes what was renamed too.
  std::vector<std::string> renamed;
  for (const std::string &path : {o.out, idx, meta}) {
    if (!err.empty() || (path == idx && !o.docIndex))
      continue;
    err = io::renameDurable(path + suffix, path);
    if (err.empty())
      renamed.push_back(path);
  }
  if (!err.empty()) {
    cleanUp();
    for (const std::string &path : renamed)
      io::removeTree(path);
    return fail(err + " (nothing written)");
  }
  progress.update(documents, doneBytes, true);
  std::fprintf(stderr, "fsdp-tokenize: %lld documents, %lld tokens (%s, vocabulary %lld) -> %s\n",
               (long long)documents, (long long)written, dtype.c_str(), (long long)vocab,
               o.out.c_str());
  if (replaced)
    std::fprintf(stderr,
                 "fsdp-tokenize: warning: %lld invalid UTF-8 sequences replaced by U+FFFD\n",
                 (long long)replaced);
  return 0;
}
