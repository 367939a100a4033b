#!/usr/bin/python3
"""HF checkpoint folders for hf-folder.test, with the standard library only.

usage: hf-folder.py split SRC.safetensors DIR MAX_BYTES
           DIR gets SRC's tensors as transformers' save_pretrained shards them
           (huggingface_hub's rule, in SRC's data order): model-0000i-of-0000N
           .safetensors and model.safetensors.index.json
       hf-folder.py same A B
           A and B (each a .safetensors file or an HF folder) hold the same
           tensors: names, dtypes, shapes and bytes; exit 1 naming the first
           difference
       hf-folder.py losses A.jsonl B.jsonl
           the same loss and grad_norm at every step, exactly
       hf-folder.py crash OLD NEW WORK -- COMMAND...
           for every fault point N of COMMAND (FSDP_FAULT=list counts them;
           the word WORK in COMMAND is the folder it saves into): WORK a copy
           of the folder OLD, COMMAND killed at point N; then WORK has no index,
           or an index whose shards are all there and hold either OLD's
           tensors or NEW's (a folder or file), bit for bit
       hf-folder.py break DIR CASE OUT
           OUT: a copy of the folder DIR with one thing wrong (CASE: notjson,
           dotdot, slash, missing-shard, missing-tensor, not-in-shard, shape,
           total-size)
"""
import json
import os
import shutil
import struct
import subprocess
import sys

INDEX = "model.safetensors.index.json"


def read_file(path):
    """name -> (dtype, shape, bytes), in the order of the data."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", None)
    out = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], list(info["shape"]), buf[8 + n + b:8 + n + e])
    return out, meta


def read_any(path):
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, INDEX)):
            return read_file(os.path.join(path, "model.safetensors"))[0]
        with open(os.path.join(path, INDEX)) as f:
            index = json.load(f)
        out = {}
        for shard in sorted(set(index["weight_map"].values())):
            tensors, meta = read_file(os.path.join(path, shard))
            assert meta == {"format": "pt"}, f"{shard}: metadata {meta}"
            for name, t in tensors.items():
                assert index["weight_map"][name] == shard, f"{name} is not where the index says"
                out[name] = t
        assert set(out) == set(index["weight_map"]), "the index and the shards differ"
        total = sum(len(t[2]) for t in out.values())
        assert index["metadata"]["total_size"] == total, "total_size is not the tensors' bytes"
        return out
    return read_file(path)[0]


def write_file(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def split(src, out, max_bytes):
    tensors = read_file(src)[0]
    shards, current, size = [], {}, 0
    for name, t in tensors.items():
        n = len(t[2])
        if n > max_bytes:
            shards.append({name: t})
            continue
        if size + n > max_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name] = t
        size += n
    if current:
        shards.append(current)
    os.makedirs(out, exist_ok=True)
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_file(os.path.join(out, name), shard)
        weight_map.update({k: name for k in shard})
    index = {"metadata": {"total_size": sum(len(t[2]) for t in tensors.values())},
             "weight_map": weight_map}
    with open(os.path.join(out, INDEX), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"{out}: {len(tensors)} tensors in {len(shards)} shards")


def same(a, b):
    ta, tb = read_any(a), read_any(b)
    if set(ta) != set(tb):
        sys.exit(f"same: {a} and {b} hold different tensors: {sorted(set(ta) ^ set(tb))}")
    for name in sorted(ta):
        if ta[name] != tb[name]:
            sys.exit(f"same: tensor {name} differs between {a} and {b}")
    print(f"same: {len(ta)} tensors, {sum(len(t[2]) for t in ta.values())} bytes, bit for bit")


def losses(a, b):
    def rows(p):
        with open(p) as f:
            return [json.loads(line) for line in f if line.strip()]
    ra, rb = rows(a), rows(b)
    if len(ra) != len(rb) or not ra:
        sys.exit(f"losses: {a} has {len(ra)} steps, {b} {len(rb)}")
    for x, y in zip(ra, rb):
        if (x["loss"], x["grad_norm"]) != (y["loss"], y["grad_norm"]):
            sys.exit(f"losses: step {x['step']}: {x['loss']} {x['grad_norm']} vs "
                     f"{y['loss']} {y['grad_norm']}")
    print(f"same losses: {len(ra)} steps")


def break_folder(src, case, out):
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    path = os.path.join(out, INDEX)
    with open(path) as f:
        index = json.load(f)
    wm = index["weight_map"]
    first = sorted(wm)[0]
    if case == "notjson":
        with open(path, "w") as f:
            f.write('{"weight_map": {')
        return
    if case == "dotdot":
        wm[first] = "../" + wm[first]
    elif case == "slash":
        wm[first] = "/etc/passwd"
    elif case == "missing-shard":
        os.remove(os.path.join(out, wm[first]))
    elif case == "missing-tensor":
        del wm[first]
    elif case == "not-in-shard":
        other = sorted(set(wm.values()) - {wm[first]})[0]
        wm[first] = other
    elif case == "shape":  # the first matrix, its dimensions turned (same bytes)
        for name in sorted(wm):
            shard = os.path.join(out, wm[name])
            tensors = read_file(shard)[0]
            dtype, shape, data = tensors[name]
            if len(shape) == 2:
                tensors[name] = (dtype, [shape[1], shape[0]], data)
                write_file(shard, tensors)
                break
    elif case == "total-size":
        index["metadata"]["total_size"] += 8
    else:
        sys.exit(f"break: unknown case {case}")
    with open(path, "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)


def crash(old, new, work, command):
    command = [work if w == "WORK" else w for w in command]
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(old, work)
    listed = subprocess.run(command, env=dict(os.environ, FSDP_FAULT="list"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    points = [line for line in listed.stderr.splitlines() if line.startswith("fsdp-fault: ")]
    if listed.returncode != 0 or not points:
        sys.exit(f"crash: the listing run failed ({listed.returncode}):\n{listed.stderr}")
    want_old, want_new = read_any(old), read_any(new)
    seen = {"old": 0, "new": 0, "no index": 0}
    for n in range(1, len(points) + 1):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(old, work)
        run = subprocess.run(command, env=dict(os.environ, FSDP_FAULT=f"{n}:kill"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if run.returncode != -9:
            sys.exit(f"crash: point {n} ({points[n - 1]}): exit {run.returncode}, not killed")
        if not os.path.exists(os.path.join(work, INDEX)):
            seen["no index"] += 1
            continue
        try:
            got = read_any(work)
        except (OSError, AssertionError, KeyError, ValueError) as e:
            sys.exit(f"crash: point {n} ({points[n - 1]}): the index is there, but: {e!r}")
        if got == want_old:
            seen["old"] += 1
        elif got == want_new:
            seen["new"] += 1
        else:
            sys.exit(f"crash: point {n} ({points[n - 1]}): neither the old weights nor the new")
    print(f"crash: {len(points)} of {len(points)} fault points: " +
          ", ".join(f"{k} {v}" for k, v in seen.items()))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "split":
        split(args[0], args[1], int(args[2]))
    elif cmd == "same":
        same(*args)
    elif cmd == "losses":
        losses(*args)
    elif cmd == "break":
        break_folder(*args)
    elif cmd == "crash":
        crash(args[0], args[1], args[2], args[args.index("--") + 1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
