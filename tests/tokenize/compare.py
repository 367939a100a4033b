#!/usr/bin/env python3
"""fsdp-tokenize against an npm reference, document by document, id by id.

usage: compare.py FSDP_TOKENIZE WORKDIR CASE

CASE: gpt2-files (GPT-2's vocab.json + merges.txt against gpt-3-encoder),
gpt2-json (a tokenizer.json of the same vocabulary against
@huggingface/tokenizers), bert-json and bert-vocab (BERT's uncased WordPiece
vocabulary as a tokenizer.json and as a vocab.txt, both against
@huggingface/tokenizers on the tokenizer.json), r50k_base, cl100k_base, o200k_base (rank files
against js-tiktoken), spm-unigram and spm-bpe (SentencePiece models trained
here against @sctg/sentencepiece-js, the same C++ library compiled to
WebAssembly: it checks fsdp's use of the library, not another algorithm). Exit 1 naming the first document that differs, with
both id lists and the first differing position.
"""
import json
import os
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_MODULES = os.path.join(HERE, "node_modules")


def run(cmd):
    t = time.time()
    subprocess.run(cmd, check=True)
    return time.time() - t


def main():
    tool, work, case = sys.argv[1:4]
    if not os.path.isdir(NODE_MODULES):
        sys.exit("compare.py: %s is missing: scripts/install-deps.sh installs the npm references "
                 "(npm ci in tests/tokenize)" % NODE_MODULES)
    os.makedirs(work, exist_ok=True)
    corpus = os.path.join(work, "corpus.jsonl")
    run([sys.executable, os.path.join(HERE, "make_corpus.py"), corpus]
        + (["--no-astral-cjk"] if case.startswith("bert") else []))
    ref = os.path.join(HERE, "reference.cjs")
    out = os.path.join(work, case + ".ref.jsonl")
    if case in ("gpt2-files", "gpt2-json"):
        gpt2 = os.path.join(work, "gpt2")
        run(["node", ref, "write-gpt2", gpt2])
        if case == "gpt2-files":
            tokenizer, args = gpt2, []
            t_ref = run(["node", ref, "gpt-3-encoder", corpus, out])
        else:
            tokenizer, args = os.path.join(gpt2, "json", "tokenizer.json"), []
            t_ref = run(["node", ref, "tokenizer.json", tokenizer, corpus, out])
    elif case in ("bert-json", "bert-vocab"):
        bert = os.path.join(work, "bert")
        run(["node", ref, "write-bert", bert])
        json_file = os.path.join(bert, "json", "tokenizer.json")
        tokenizer = json_file if case == "bert-json" else os.path.join(bert, "vocab.txt")
        args = []
        t_ref = run(["node", ref, "tokenizer.json", json_file, corpus, out])
    elif case in ("spm-unigram", "spm-bpe"):
        # A model trained here on the GPL-3 by Debian's spm_train; the BPE one
        # falls back to bytes for what it has not seen.
        tokenizer, args = os.path.join(work, case + ".model"), []
        kind = case.split("-")[1]
        run(["spm_train", "--input=/usr/share/common-licenses/GPL-3",
             "--model_prefix=" + tokenizer[:-len(".model")], "--vocab_size=800",
             "--model_type=" + kind, "--byte_fallback=" + ("true" if kind == "bpe" else "false"),
             "--character_coverage=1.0", "--minloglevel=2"])
        t_ref = run(["node", ref, "sentencepiece", tokenizer, corpus, out])
    else:
        tokenizer, args = os.path.join(work, case + ".tiktoken"), []
        run(["node", ref, "write-tiktoken", case, tokenizer])
        t_ref = run(["node", ref, "tiktoken", case, corpus, out])
    ids_file = os.path.join(work, case + ".bin")
    t_fsdp = run([tool, "--tokenizer", tokenizer, "-o", ids_file, "--eos-id", "none",
                  "--dtype", "uint32", "--doc-index", corpus] + args)
    meta = json.load(open(ids_file + ".json"))
    data = open(ids_file, "rb").read()
    ids = struct.unpack("<%dI" % (len(data) // 4), data)
    idx = open(ids_file + ".idx", "rb").read()
    offsets = struct.unpack("<%dQ" % (len(idx) // 8), idx)
    texts = [json.loads(l)["text"] for l in open(corpus, encoding="utf-8") if l.strip()]
    refs = [json.loads(l) for l in open(out) if l.strip()]
    if len(refs) != len(texts) or meta["documents"] != len(texts) or len(offsets) != len(texts) + 1:
        sys.exit("compare.py: %s: %d documents, %d reference lines, %d by fsdp-tokenize, %d offsets"
                 % (case, len(texts), len(refs), meta["documents"], len(offsets)))
    for d, (text, want) in enumerate(zip(texts, refs)):
        got = list(ids[offsets[d]:offsets[d + 1]])
        if got != want:
            k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            sys.exit("compare.py: %s: document %d differs at id %d\n  text: %r\n  fsdp-tokenize: %s\n"
                     "  reference:     %s" % (case, d, k, text[:400], got[max(0, k - 5):k + 10],
                                             want[max(0, k - 5):k + 10]))
    print("%s: %d documents, %d tokens identical (fsdp-tokenize %.2f s, reference %.2f s, "
          "whole runs)" % (case, len(texts), len(ids), t_fsdp, t_ref))


if __name__ == "__main__":
    main()
