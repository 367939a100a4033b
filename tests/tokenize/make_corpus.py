#!/usr/bin/env python3
"""Writes the corpus fsdp-tokenize is compared on (one JSON object a line,
its text in "text"): the GPL-3 that Debian ships, in paragraphs, and
generated documents of the cases tokenizers get wrong. Seeded: the same
corpus on every machine.

usage: make_corpus.py OUT.jsonl [--docs N] [--seed S] [--no-special] [--no-astral-cjk]

Left out on purpose: U+0085 and U+FEFF. JavaScript's \\s (the npm
references' regexes) counts U+FEFF as a space and U+0085 not; Rust's and
PCRE2's Unicode \\s the other way round, so there the references, not
fsdp-tokenize, differ from the Rust tokenizers.

--no-astral-cjk (the WordPiece cases) leaves out CJK ideographs past U+FFFF
(Extension B on): tokenizers.js's BertNormalizer tests each UTF-16 code
unit for an ideograph, so it never spaces them out, where HF's Rust
BertNormalizer and BERT's Python tokenizer (and fsdp-tokenize) do.
"""
import json
import random
import sys

PIECES = {
    "whitespace": [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000",
                   "\u2003", "\u2009 ", "\t\t  \n", "      "],
    "contractions": ["it's", "don't", "they're", "we've", "I'm", "you'll", "he'd", "IT'S",
                     "DON'T", "They'Re", "WE'VE", "I'M", "YOU'LL", "HE'D", "'s", "''", "o'clock"],
    "words": ["the", "General", "Public", "License", "software", "freedom", "tokenizer",
              "Ünïcödé", "naïve", "façade", "Zürich", "Straße", "İstanbul", "ǅemal", "ΑΘΗΝΑ",
              "Москва", "hello", "HELLO", "HeLLo", "mixedCASEWords", "snake_case_name",
              "kebab-case-name", "e-mail", "U.S.A.", "don", "supercalifragilisticexpialidocious"],
    "cjk": ["漢字", "日本語のテキスト", "中文分词测试", "한국어 텍스트", "ひらがなカタカナ", "龍"],
    "scripts": ["مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Ελληνικά",
                "ქართული", "Հայերեն", "ᚠᛇᚻ"],
    "combining": ["e\u0301", "a\u0308o\u0308u\u0308", "n\u0303", "Z\u0351\u0352\u0353",
                  "\u0915\u094d\u0937", "cafe\u0301"],
    "emoji": ["😀", "👍🏽", "👩‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "❤️", "🤖🤖🤖", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
              "𐍈", "𠜎𠜱"],
    "punct": ["!", "?!", "...", "—", "–", "«»", "“quoted”", "(", ")", "[x]", "{y}", "#", "@",
              "$100", "%", "&&", "||", "->", "=>", "::", "/*", "*/", "<", ">", "```", "~~~"],
    "specials": ["<|endoftext|>", "<|endoftext|><|endoftext|>", "<|endoftext", "|>"],
}


def number(rng):
    n = rng.randint(1, 12)
    return "".join(rng.choice("0123456789") for _ in range(n))


def document(rng, special, astral_cjk=True):
    kinds = [k for k in PIECES if special or k != "specials"] + ["number", "long"]
    parts = []
    for _ in range(rng.randint(1, 40)):
        k = rng.choice(kinds)
        if k == "number":
            parts.append(number(rng) + rng.choice(["", ".", ",", "%", " ", "e10", "x"]))
        elif k == "long":
            parts.append(rng.choice("abcxyz") * rng.randint(20, 300))
        else:
            piece = rng.choice(PIECES[k])
            if not astral_cjk:
                piece = "".join(c for c in piece if not 0x20000 <= ord(c) <= 0x2FA1F)
            parts.append(piece)
        parts.append(rng.choice(["", " ", " ", "\n", "  ", "\t"]))
    return "".join(parts)


def main():
    args = sys.argv[1:]
    out = args[0]
    docs = int(args[args.index("--docs") + 1]) if "--docs" in args else 400
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 0
    special = "--no-special" not in args
    astral_cjk = "--no-astral-cjk" not in args
    rng = random.Random(seed)
    texts = []
    gpl = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    texts += [p for p in gpl.split("\n\n") if p.strip()]
    texts.append(gpl)  # the whole text as one document too
    texts += [document(rng, special, astral_cjk) for _ in range(docs)]
    with open(out, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
