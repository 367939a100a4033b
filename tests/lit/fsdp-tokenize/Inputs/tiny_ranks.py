"""Writes a small tiktoken rank file: the 256 bytes, then the most frequent
adjacent pairs of a text merged in turn (a BPE vocabulary of SIZE tokens,
learned the way tiktoken's are), so that the lit tests need no download.

usage: tiny_ranks.py TEXT SIZE OUT.tiktoken"""
import base64
import collections
import sys

text, size, out = open(sys.argv[1], "rb").read(), int(sys.argv[2]), sys.argv[3]
ranks = {bytes([b]): b for b in range(256)}
words = [[bytes([b]) for b in w] for w in text.split(b" ") if w]
while len(ranks) < size:
    pairs = collections.Counter()
    for w in words:
        pairs.update(zip(w, w[1:]))
    if not pairs:
        break
    (a, b), _ = pairs.most_common(1)[0]
    ranks[a + b] = len(ranks)
    for w in words:
        i = 0
        while i + 1 < len(w):
            if w[i] == a and w[i + 1] == b:
                w[i:i + 2] = [a + b]
            i += 1
with open(out, "w") as f:
    for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        f.write("%s %d\n" % (base64.b64encode(tok).decode(), r))
