#!/usr/bin/python3
"""Write a flat little-endian uint16 or uint32 token file (nanoGPT's train.bin).

usage: make_data.py OUT.bin --text FILE [--dtype uint16|uint32]
       make_data.py OUT.bin --random N --vocab V [--seed S] [--dtype uint16|uint32]

--text: byte-level tokens, one token per byte of FILE (values 0..255).
--random: N tokens uniform in [0, V) from numpy's default_rng(S).
--dtype: the token width (default uint16; V above 65536 needs uint32).
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
    ap.add_argument("--dtype", choices=("uint16", "uint32"), default="uint16")
    a = ap.parse_args(argv)
    le = "<u2" if a.dtype == "uint16" else "<u4"
    top = 65536 if a.dtype == "uint16" else 2**32
    if a.text is not None:
        with open(a.text, "rb") as f:
            toks = np.frombuffer(f.read(), dtype=np.uint8).astype(le)
    else:
        if a.vocab is None or not (1 <= a.vocab <= top):
            ap.error(f"--random needs --vocab V with 1 <= V <= {top} ({a.dtype})")
        if a.random < 0:
            ap.error("--random N needs N >= 0")
        toks = np.random.default_rng(a.seed).integers(0, a.vocab, size=a.random).astype(le)
    toks.tofile(a.out)
    print(f"{a.out}: {toks.size} tokens, max {int(toks.max()) if toks.size else '-'}")


if __name__ == "__main__":
    main()
