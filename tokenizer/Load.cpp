//===- Load.cpp - finding and reading a model's tokenizer -----------------===//
#include "support/InputFile.h"
#include "tokenizer/Formats.h"

#include <sys/stat.h>

using namespace fsdp;
using namespace fsdp::tokenizer;
using nlohmann::json;

static bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
static bool isDir(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
static bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
static std::string dirOf(const std::string &p) {
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

/// tokenizer_config.json's eos_token beside `file`, or "".
static std::string configEosToken(const std::string &file) {
  std::string path = dirOf(file) + "/tokenizer_config.json", text;
  if (!isFile(path) || !support::readRegularFile(path, support::kMaxJsonBytes, "", &text).empty())
    return "";
  json c = json::parse(text, nullptr, false);
  if (!c.is_object() || !c.contains("eos_token"))
    return "";
  const json &e = c["eos_token"];
  if (e.is_string())
    return e;
  if (e.is_object() && e.contains("content") && e["content"].is_string())
    return e["content"];
  return "";
}

static std::string loadFile(const std::string &file, const LoadOptions &options,
                            std::unique_ptr<Tokenizer> *out) {
  std::string base = file.substr(file.find_last_of('/') + 1);
  if (endsWith(base, ".tiktoken"))
    return loadTiktoken(file, options.pattern, out);
  if (!options.pattern.empty())
    return "--pattern is for tiktoken rank files; " + file + " says its own";
  if (base == "tokenizer.model" || endsWith(base, ".model"))
    return loadSentencePiece(file, out);
  if (endsWith(base, ".txt") && base != "merges.txt") {
    std::string text;
    if (std::string err = readTokenizerFile(file, &text); !err.empty())
      return err;
    return loadWordPiece(nullptr, text, file, out);
  }
  if (base == "vocab.json" || base == "merges.txt") {
    std::string dir = dirOf(file);
    if (!isFile(dir + "/vocab.json") || !isFile(dir + "/merges.txt"))
      return file + ": GPT-2's format needs vocab.json and merges.txt side by side";
    return loadGPT2Files(dir + "/vocab.json", dir + "/merges.txt", out);
  }
  std::string text;
  if (std::string err = readTokenizerFile(file, &text); !err.empty())
    return err;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error &e) {
    return file + ": not JSON (" + e.what() + ")";
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    return file + ": not an HF tokenizer.json (no 'model' object)";
  std::string type = j["model"].value("type", "");
  if (type == "BPE")
    return loadHFBpe(j, file, configEosToken(file), out);
  if (type == "WordPiece")
    return loadWordPiece(&j, "", file, out);
  return file + ": model.type '" + type + "' is not implemented (BPE and WordPiece are)";
}

std::string fsdp::tokenizer::load(const std::string &path, const LoadOptions &options,
                                  std::unique_ptr<Tokenizer> *out, std::string *source) {
  std::string file = path;
  if (isDir(path)) {
    file.clear();
    for (const char *name : {"tokenizer.json", "vocab.json", "tokenizer.model", "vocab.txt"})
      if (isFile(path + "/" + name)) {
        file = path + "/" + name;
        break;
      }
    if (file.empty()) {
      return path + ": a folder with no tokenizer in it (looked for tokenizer.json, "
                    "vocab.json with merges.txt, tokenizer.model, vocab.txt)";
    }
  } else if (!isFile(path)) {
    return path + ": no such file or folder";
  }
  if (source)
    *source = file;
  return loadFile(file, options, out);
}
