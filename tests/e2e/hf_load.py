"""An HF checkpoint folder loaded as transformers' from_pretrained loads it,
into the PyTorch reference models of this suite (models.py), with numpy and
the standard library only (no transformers, no safetensors package).

The rules, from transformers' PreTrainedModel.from_pretrained and
modeling_utils:
  * the folder's config.json says what to build (model_type) and, with
    torch_dtype="auto", the dtype the weights are in (torch_dtype:
    "float32" or "bfloat16"); a folder without config.json does not load
    (PretrainedConfig.from_pretrained: "does not appear to have a file named
    config.json");
  * the weights: model.safetensors when it is there (taken first), else
    model.safetensors.index.json, whose "weight_map" maps each tensor to a
    shard; shards are named model-0000i-of-0000N.safetensors (huggingface_hub's
    "{i:05d}" pattern), N the same in every name and every i from 1 to N
    present;
  * each safetensors file: an 8-byte little-endian header length, the JSON
    header (per tensor "dtype", "shape", "data_offsets" relative to the data
    after the header; "__metadata__" skipped), the data; the ranges contiguous
    from 0 to the end of the file;
  * a tied head (tie_word_embeddings, GPT-2's default true) is the embedding:
    lm_head.weight may be absent, and is ignored when present (tie_weights
    runs after loading);
  * strict here where transformers warns: a parameter missing from the
    checkpoint, or a tensor the model does not have, is an error (a warning in
    transformers, and a randomly initialised parameter: a wrong export).

usage (as a module): load(folder, dtype) -> (model, config, info)
"""
import json
import os
import re
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
SHARD = re.compile(r"^model-(\d{5,})-of-(\d{5,})\.safetensors$")
TORCH_DTYPES = {"float32": "F32", "bfloat16": "BF16"}


class LoadError(ValueError):
    pass


def read_safetensors(path):
    """name -> (dtype, shape, np.float32 array of the values), parsed by hand."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise LoadError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise LoadError(f"{path}: header length {n} past the end of the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    out = {}
    ranges = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (a, b) = info["dtype"], info["shape"], info["data_offsets"]
        count = int(np.prod(shape)) if shape else 1
        size = {"F32": 4, "BF16": 2}.get(dtype)
        if size is None:
            raise LoadError(f"{path}: tensor {name!r} is {dtype}; this loader reads F32 and BF16")
        if b - a != count * size or not 0 <= a <= b <= len(data):
            raise LoadError(f"{path}: tensor {name!r}: data_offsets {[a, b]} do not hold "
                            f"{shape} of {dtype}")
        raw = data[a:b]
        if dtype == "F32":
            values = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        else:  # bf16: the top half of an f32
            values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        out[name] = (dtype, list(shape), values.reshape(shape))
        ranges.append((a, b))
    ranges.sort()
    at = 0
    for a, b in ranges:
        if a != at:
            raise LoadError(f"{path}: the data is not contiguous at byte {at}")
        at = b
    if at != len(data):
        raise LoadError(f"{path}: {len(data) - at} bytes after the last tensor")
    return out


def read_folder(folder):
    """(config, tensors, info): the folder's config.json and every tensor
    (name -> (dtype, shape, values)); info: "shards" (file names read),
    "dtypes" (the tensors' dtypes)."""
    config_path = os.path.join(folder, "config.json")
    if not os.path.isfile(config_path):
        raise LoadError(f"{folder} does not appear to have a file named config.json")
    with open(config_path) as f:
        config = json.load(f)
    if not isinstance(config, dict) or "model_type" not in config:
        raise LoadError(f"{config_path}: no model_type")
    torch_dtype = config.get("torch_dtype")
    if torch_dtype not in TORCH_DTYPES:
        raise LoadError(f"{config_path}: torch_dtype {torch_dtype!r}, not float32 or bfloat16")
    single = os.path.join(folder, SINGLE)
    index = os.path.join(folder, INDEX)
    tensors = {}
    if os.path.isfile(single):  # transformers takes it first
        shards = [SINGLE]
        tensors = read_safetensors(single)
    elif os.path.isfile(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        shards = sorted(set(weight_map.values()))
        totals = set()
        numbers = set()
        for name in shards:
            m = SHARD.match(name)
            if not m:
                raise LoadError(f"{index}: shard {name!r} is not named "
                                "model-0000i-of-0000N.safetensors")
            numbers.add(int(m.group(1)))
            totals.add(int(m.group(2)))
        if len(totals) != 1 or numbers != set(range(1, totals.pop() + 1)):
            raise LoadError(f"{index}: shards {shards} are not model-00001 to -0000N of N")
        for shard in shards:
            got = read_safetensors(os.path.join(folder, shard))
            mapped = {t for t, s in weight_map.items() if s == shard}
            if set(got) != mapped:
                raise LoadError(f"{folder}/{shard}: holds {sorted(set(got) ^ mapped)} other than "
                                "the index maps to it")
            tensors.update(got)
    else:
        raise LoadError(f"{folder}: neither {SINGLE} nor {INDEX}")
    dtypes = sorted({t[0] for t in tensors.values()})
    return config, tensors, {"shards": shards, "dtypes": dtypes, "torch_dtype": torch_dtype}


def load(folder, dtype=torch.float32):
    """The reference model of the folder's config, its parameters the folder's
    tensors (converted to `dtype`, exactly for f32 and bf16 values into f32 or
    f64). Returns (model, config, info)."""
    config, tensors, info = read_folder(folder)
    if info["dtypes"] != [TORCH_DTYPES[info["torch_dtype"]]]:
        raise LoadError(f"{folder}: config.json says torch_dtype {info['torch_dtype']}, the "
                        f"tensors are {info['dtypes']}")
    model = models.build_model(config, dtype)
    params = dict(model.named_parameters())
    used = set()
    with torch.no_grad():
        for name, p in params.items():
            if name not in tensors:
                raise LoadError(f"{folder}: no tensor {name!r} (the model's parameter)")
            _, shape, values = tensors[name]
            if tuple(shape) != tuple(p.shape):
                raise LoadError(f"{folder}: {name!r} has shape {shape}, the model {list(p.shape)}")
            p.copy_(torch.from_numpy(np.array(values)).to(dtype))
            used.add(name)
    for name in tensors:
        if name in used or (name == "lm_head.weight" and model.tied):
            continue
        raise LoadError(f"{folder}: tensor {name!r} is not a parameter of the model")
    return model, config, info
