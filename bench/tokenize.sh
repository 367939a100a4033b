#!/usr/bin/env bash
# fsdp-tokenize's rate beside the npm reference's (js-tiktoken), on about
# 100 MB of text: tests/tokenize's hard-case corpus and the GPL-3, repeated.
# The reference runs on the first REF_MB (default 10) of it: it is two
# orders of magnitude slower, and its rate does not depend on the length.
# usage: bench/tokenize.sh [BUILD_DIR] [MB] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-build}/bin"
MB="${2:-100}"
THREADS="${3:-2}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 tests/tokenize/make_corpus.py "$WORK/one.jsonl" --docs 2000
/usr/bin/python3 - "$WORK/one.jsonl" "$WORK/corpus.jsonl" "$MB" <<'PY'
import os, sys
one = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    for _ in range(max(1, int(float(sys.argv[3]) * 1e6 / len(one)))):
        f.write(one)
PY
SIZE=$(stat -c %s "$WORK/corpus.jsonl")
head -c "$(( ${REF_MB:-10} * 1000000 ))" "$WORK/corpus.jsonl" | head -n -1 > "$WORK/ref.jsonl"
for name in r50k_base cl100k_base; do
  node tests/tokenize/reference.cjs write-tiktoken "$name" "$WORK/$name.tiktoken"
  START=$(date +%s.%N)
  "$BIN/fsdp-tokenize" --tokenizer "$WORK/$name.tiktoken" --threads "$THREADS" -o "$WORK/$name.bin" \
    "$WORK/corpus.jsonl" 2>/dev/null
  END=$(date +%s.%N)
  python3 -c "import sys; s=float(sys.argv[2])-float(sys.argv[1]); b=int(sys.argv[3]); print('fsdp-tokenize $name: %.1f MB in %.1f s: %.2f MB/s ($THREADS threads)' % (b/1e6, s, b/1e6/s))" "$START" "$END" "$SIZE"
  node tests/tokenize/reference.cjs rate "$name" "$WORK/ref.jsonl"
done
