"""Minimal reader and writer for the safetensors format (no `safetensors` package).

Layout: 8-byte little-endian u64 N, then N bytes of UTF-8 JSON
  {"__metadata__": {str: str}, name: {"dtype": D, "shape": [...], "data_offsets": [b, e]}, ...}
padded with spaces to a multiple of 8 bytes (as the Rust library does), then the
raw little-endian tensor bytes; offsets are relative to the end of the header,
contiguous, and cover the whole data section.

save() writes tensors sorted by name, each contiguous, offsets in that order.
load() returns name -> torch.Tensor. Unsigned types torch 1.13 lacks (U16, U32)
are widened to int32 / int64; U64 is read as int64 (values >= 2**63 wrap).
"""
import json
import math
import os
import struct

import numpy as np
import torch

# safetensors dtype -> (numpy dtype for the bytes, element size)
_NP = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # reinterpreted as torch.bfloat16
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"), "U8": np.dtype("u1"), "BOOL": np.dtype("u1"),
    "U16": np.dtype("<u2"), "U32": np.dtype("<u4"), "U64": np.dtype("<u8"),
}

_TORCH_TO_ST = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
    torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
    torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}

_NUMPY_TO_ST = {
    np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16",
    np.dtype("int64"): "I64", np.dtype("int32"): "I32", np.dtype("int16"): "I16",
    np.dtype("int8"): "I8", np.dtype("uint8"): "U8", np.dtype("bool"): "BOOL",
    np.dtype("uint16"): "U16", np.dtype("uint32"): "U32", np.dtype("uint64"): "U64",
}

MAX_HEADER = 100_000_000  # the library's limit


class SafetensorsError(ValueError):
    pass


def _to_bytes(name, t):
    """(dtype string, shape list, raw little-endian bytes) of a tensor or array."""
    if isinstance(t, torch.Tensor):
        if t.dtype not in _TORCH_TO_ST:
            raise SafetensorsError(f"{name}: unsupported torch dtype {t.dtype}")
        dt = _TORCH_TO_ST[t.dtype]
        t = t.detach().cpu().contiguous()
        shape = list(t.shape)
        if t.dtype == torch.bfloat16:
            arr = t.view(torch.int16).numpy()
        elif t.dtype == torch.bool:
            arr = t.to(torch.uint8).numpy()
        else:
            arr = t.numpy()
    elif isinstance(t, np.ndarray):
        if t.dtype not in _NUMPY_TO_ST:
            raise SafetensorsError(f"{name}: unsupported numpy dtype {t.dtype}")
        dt = _NUMPY_TO_ST[t.dtype]
        shape = list(t.shape)
        arr = t
    else:
        raise SafetensorsError(f"{name}: expected a torch.Tensor or numpy array, got {type(t)}")
    arr = np.ascontiguousarray(arr)
    arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    data = arr.tobytes()
    assert len(data) == math.prod(shape) * _NP[dt].itemsize
    return dt, shape, data


def serialize(tensors, metadata=None):
    """The bytes of a safetensors file holding `tensors` (dict name -> tensor)."""
    header = {}
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafetensorsError("metadata must be a dict of str -> str")
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name in sorted(tensors):
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError(f"bad tensor name {name!r}")
        dt, shape, data = _to_bytes(name, tensors[name])
        header[name] = {"dtype": dt, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    hbytes = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)
    return struct.pack("<Q", len(hbytes)) + hbytes + b"".join(blobs)


def save(tensors, path, metadata=None):
    """Write dict name -> torch.Tensor (or numpy array) to `path`."""
    buf = serialize(tensors, metadata)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(buf)
    os.replace(tmp, path)


def parse_header(buf, path="<bytes>"):
    """(header dict without __metadata__, metadata or None, data start offset)."""
    if len(buf) < 8:
        raise SafetensorsError(f"{path}: file too small ({len(buf)} bytes)")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > MAX_HEADER or 8 + n > len(buf):
        raise SafetensorsError(f"{path}: header length {n} is invalid for a file of {len(buf)} bytes")
    raw = bytes(buf[8:8 + n])
    if not raw.startswith(b"{"):
        raise SafetensorsError(f"{path}: header does not start with '{{'")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    meta = header.pop("__metadata__", None)
    data_start = 8 + n
    data_len = len(buf) - data_start
    # Validate as the library does: offsets sorted, contiguous, sized, covering.
    entries = []
    for name, info in header.items():
        try:
            dt, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"{path}: tensor {name!r} has a malformed entry {info!r}") from None
        if dt not in _NP:
            raise SafetensorsError(f"{path}: tensor {name!r} has unsupported dtype {dt}")
        if not all(isinstance(s, int) and s >= 0 for s in shape):
            raise SafetensorsError(f"{path}: tensor {name!r} has bad shape {shape}")
        if e - b != math.prod(shape) * _NP[dt].itemsize:
            raise SafetensorsError(f"{path}: tensor {name!r}: offsets [{b}, {e}] do not match "
                                   f"{dt}{shape}")
        entries.append((b, e, name))
    entries.sort()
    pos = 0
    for b, e, name in entries:
        if b != pos:
            raise SafetensorsError(f"{path}: tensor {name!r} starts at {b}, expected {pos}")
        pos = e
    if pos != data_len:
        raise SafetensorsError(f"{path}: tensors cover {pos} bytes but the data section has {data_len}")
    return header, meta, data_start


def _tensor(buf, data_start, info):
    dt, shape, b = info["dtype"], info["shape"], info["data_offsets"][0]
    arr = np.frombuffer(buf, dtype=_NP[dt], count=math.prod(shape),
                        offset=data_start + b).reshape(shape)
    arr = arr.astype(arr.dtype.newbyteorder("="), copy=True)  # own, writable, native
    if dt == "BF16":
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    if dt == "BOOL":
        return torch.from_numpy(arr).to(torch.bool)
    if dt == "U16":
        return torch.from_numpy(arr.astype(np.int32))
    if dt in ("U32", "U64"):
        return torch.from_numpy(arr.astype(np.int64))
    return torch.from_numpy(arr)


def load(path, with_metadata=False):
    """dict name -> torch.Tensor (and the metadata dict when with_metadata)."""
    with open(path, "rb") as f:
        buf = f.read()
    header, meta, data_start = parse_header(buf, path)
    out = {name: _tensor(buf, data_start, info) for name, info in header.items()}
    return (out, meta) if with_metadata else out


def read_info(path):
    """dict name -> (dtype string, shape tuple) without reading the data."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(f"{path}: file too small")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise SafetensorsError(f"{path}: header length {n} is invalid")
        raw = f.read(n)
    header = json.loads(raw.decode("utf-8"))
    header.pop("__metadata__", None)
    return {k: (v["dtype"], tuple(v["shape"])) for k, v in header.items()}
