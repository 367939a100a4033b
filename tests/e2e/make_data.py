#!/usr/bin/python3
"""Write a flat little-endian uint16 token file (nanoGPT's train.bin).

usage: make_data.py OUT.bin --text FILE
       make_data.py OUT.bin --random N --vocab V [--seed S]

--text: byte-level tokens, one token per byte of FILE (values 0..255).
--random: N tokens uniform in [0, V) from numpy's default_rng(S).
"""
import argparse

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    m = ap.add_mutually_exclusive_group(required=True)
    m.add_argument("--text", metavar="FILE")
    m.add_argument("--random", type=int, metavar="N")
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.text is not None:
        with open(a.text, "rb") as f:
            toks = np.frombuffer(f.read(), dtype=np.uint8).astype("<u2")
    else:
        if a.vocab is None or not (1 <= a.vocab <= 65536):
            ap.error("--random needs --vocab V with 1 <= V <= 65536")
        if a.random < 0:
            ap.error("--random N needs N >= 0")
        toks = np.random.default_rng(a.seed).integers(0, a.vocab, size=a.random).astype("<u2")
    toks.tofile(a.out)
    print(f"{a.out}: {toks.size} tokens, max {int(toks.max()) if toks.size else '-'}")


if __name__ == "__main__":
    main()
