#!/usr/bin/python3
"""Self-checks of safetensors_io: round trips, the exact byte layout, and rejection of bad files."""
import json
import os
import struct
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402


def main():
    d = tempfile.mkdtemp()
    p = os.path.join(d, "t.safetensors")
    g = torch.Generator().manual_seed(0)
    tensors = {
        "f32": torch.randn(3, 5, generator=g),
        "f64": torch.randn(7, generator=g, dtype=torch.float64),
        "bf16": torch.randn(2, 3, 3, generator=g).to(torch.bfloat16),
        "f16": torch.randn(4, generator=g).to(torch.float16),
        "i64": torch.arange(-5, 6, dtype=torch.int64),
        "i32": torch.arange(9, dtype=torch.int32).reshape(3, 3),
        "i16": torch.tensor([-3, 7], dtype=torch.int16),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 4),
        "noncontig": torch.arange(12.0).reshape(3, 4).t(),
        "a.z.weight": torch.randn(1, 1, generator=g),
    }
    st.save(tensors, p, metadata={"format": "pt"})
    back, meta = st.load(p, with_metadata=True)
    assert meta == {"format": "pt"}, meta
    assert set(back) == set(tensors)
    for k, t in tensors.items():
        assert back[k].dtype == t.dtype, (k, back[k].dtype, t.dtype)
        assert tuple(back[k].shape) == tuple(t.shape), k
        assert torch.equal(back[k], t), k
    # numpy unsigned types (torch 1.13 has no uint16): written as U16, read back widened
    st.save({"u16": np.array([0, 1, 65535], dtype=np.uint16)}, p)
    assert st.read_info(p) == {"u16": ("U16", (3,))}
    assert st.load(p)["u16"].tolist() == [0, 1, 65535]

    # Layout: header compact JSON, metadata first, tensors sorted by name with contiguous
    # offsets, padded with spaces to a multiple of 8, as the safetensors library writes it.
    buf = st.serialize({"b": torch.tensor([1.0, 2.0]), "a": torch.tensor([3], dtype=torch.int64)},
                       {"format": "pt"})
    (n,) = struct.unpack("<Q", buf[:8])
    hdr = buf[8:8 + n]
    want = (b'{"__metadata__":{"format":"pt"},"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},'
            b'"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}')
    assert n % 8 == 0 and hdr.rstrip(b" ") == want and len(hdr) - len(want) < 8, hdr
    assert buf[8 + n:] == struct.pack("<q", 3) + struct.pack("<ff", 1.0, 2.0)
    # header order matches the sorted data order
    assert list(json.loads(hdr))[1:] == ["a", "b"]

    # A hand-written file (as another writer might produce: unsorted header, no metadata).
    h = b'{"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"y":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}'
    h += b" " * ((8 - len(h) % 8) % 8)
    raw = struct.pack("<Q", len(h)) + h + struct.pack("<HH", 0x3F80, 0xC000) + struct.pack("<f", 0.5)
    with open(p, "wb") as f:
        f.write(raw)
    got = st.load(p)
    assert got["x"].tolist() == [0.5] and got["y"].float().tolist() == [1.0, -2.0], got

    # Bad files are rejected.
    bad = [
        raw[:-1],                                                    # truncated data
        raw + b"\0",                                                 # trailing bytes
        struct.pack("<Q", 10**9) + raw[8:],                          # header length too big
        raw.replace(b"[4,8]", b"[5,8]").replace(b"[0,4]", b"[0,5]"),  # size mismatch
    ]
    for i, b in enumerate(bad):
        with open(p, "wb") as f:
            f.write(b)
        try:
            st.load(p)
        except st.SafetensorsError:
            continue
        raise AssertionError(f"bad file {i} was accepted")
    print("safetensors: round trip of 13 tensors (F32 F64 BF16 F16 I64 I32 I16 U8 BOOL, scalar, "
          "empty, non-contiguous), U16, exact layout, foreign file, 4 bad files rejected: OK")


if __name__ == "__main__":
    main()
