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
       hf-folder.py crash OLD NEW WORK [--fail eio|enospc] -- COMMAND...
           for every fault point N of COMMAND (FSDP_FAULT=list counts them;
           the word WORK in COMMAND is the folder it saves into): WORK a copy
           of the folder OLD with a config.json and a tokenizer.json, COMMAND
           killed at point N; then the index (with the shards it names) and
           model.safetensors, each that is there, hold either OLD's tensors
           or NEW's (a folder or file), bit for bit, and one of them is
           there; config.json and generation_config.json each the earlier
           one (or none) or the new one, whole; the other files unchanged;
           and COMMAND run again
           leaves the files of an uninterrupted save (no temporary, no old
           shard) and NEW's tensors. Last, a temporary named with a live
           process's id stays, one of a dead process goes. With --fail, the
           operation at point N fails instead: COMMAND exits 1 naming the
           reason (or succeeds), and the same holds after
       hf-folder.py break DIR CASE OUT
           OUT: a copy of the folder DIR with one thing wrong (CASE: notjson,
           dotdot, slash, missing-shard, missing-tensor, not-in-shard, shape,
           total-size, symlink-out, overlap, flip-data, flip-header)
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


def read_index(path):
    """The tensors of the folder's index and the shards it names (an HF-style reader)."""
    with open(os.path.join(path, INDEX)) as f:
        index = json.load(f)
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        tensors, meta = read_file(os.path.join(path, shard))
        assert meta is None or meta.get("format") == "pt", f"{shard}: metadata {meta}"
        for name, t in tensors.items():
            assert index["weight_map"][name] == shard, f"{name} is not where the index says"
            out[name] = t
    assert set(out) == set(index["weight_map"]), "the index and the shards differ"
    total = sum(len(t[2]) for t in out.values())
    assert index["metadata"]["total_size"] == total, "total_size is not the tensors' bytes"
    return out


def read_any(path):
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, INDEX)):
            return read_file(os.path.join(path, "model.safetensors"))[0]
        return read_index(path)
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
    elif case == "symlink-out":  # the first tensor's shard a link to /etc/passwd
        os.remove(os.path.join(out, wm[first]))
        os.symlink("/etc/passwd", os.path.join(out, wm[first]))
        return
    elif case == "overlap":  # in some shard, a tensor on the bytes of another of its size
        for shard in sorted(set(wm.values())):
            path = os.path.join(out, shard)
            with open(path, "rb") as f:
                buf = f.read()
            (n,) = struct.unpack("<Q", buf[:8])
            header = json.loads(buf[8:8 + n])
            by_size = {}
            for k in sorted(header):
                if k != "__metadata__":
                    b, e = header[k]["data_offsets"]
                    by_size.setdefault(e - b, []).append(k)
            pair = next((ks for ks in by_size.values() if len(ks) > 1), None)
            if pair:
                header[pair[1]]["data_offsets"] = list(header[pair[0]]["data_offsets"])
                h = json.dumps(header, separators=(",", ":")).encode()
                h += b" " * ((8 - len(h) % 8) % 8)
                with open(path, "wb") as f:
                    f.write(struct.pack("<Q", len(h)) + h + buf[8 + n:])
                return
        sys.exit("break: overlap needs two tensors of one size in a shard")
    elif case in ("flip-data", "flip-header"):  # one bit of the first shard
        shard = os.path.join(out, wm[first])
        with open(shard, "r+b") as f:
            buf = bytearray(f.read())
            (n,) = struct.unpack("<Q", buf[:8])
            at = 8 + n + 1001 if case == "flip-data" else buf.index(b'"pt"') + 1
            buf[at] ^= 0x01
            f.seek(0)
            f.write(buf)
        return
    else:
        sys.exit(f"break: unknown case {case}")
    with open(path, "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)


# Files of a model folder that are not weights: an earlier config.json, which
# a save replaces (MODEL_FILES, whole: the earlier or the new), and a
# tokenizer's file, which a save never touches.
EXTRAS = {"config.json": b'{"model_type": "gpt2"}\n', "tokenizer.json": b'{"version": "1.0"}\n'}
MODEL_FILES = ("config.json", "generation_config.json")


def views(work):
    """What each reader finds in the folder: fsdp-run takes the index when there
    is one, else model.safetensors; transformers takes model.safetensors first."""
    index = os.path.join(work, INDEX)
    single = os.path.join(work, "model.safetensors")
    got = {}
    if os.path.exists(index):
        got["index"] = read_index(work)
    if os.path.exists(single):
        got["single"] = read_file(single)[0]
    return got


def dead_pid():
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def crash(old, new, work, command, action="kill"):
    command = [work if w == "WORK" else w for w in command]

    def fresh():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(old, work)
        for name, data in EXTRAS.items():
            with open(os.path.join(work, name), "wb") as f:
                f.write(data)

    def fail(why):
        sys.exit(f"crash: {why}")

    def content(name):
        try:
            with open(os.path.join(work, name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def extras_kept(when, done=False):
        # The model's files the save writes (config.json,
        # generation_config.json) are each the earlier one (or none) or the
        # new one, whole; once the save is done, the new one. The rest stay.
        for name, data in EXTRAS.items():
            if name not in written and content(name) != data:
                fail(f"{when}: {name} changed")
        for name, data in written.items():
            allowed = [data] if done else [data, EXTRAS.get(name)]
            if content(name) not in allowed:
                fail(f"{when}: {name} is neither the earlier one nor the new one")

    fresh()
    listed = subprocess.run(command, env=dict(os.environ, FSDP_FAULT="list"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    points = [line for line in listed.stderr.splitlines() if line.startswith("fsdp-fault: ")]
    if listed.returncode != 0 or not points:
        fail(f"the listing run failed ({listed.returncode}):\n{listed.stderr}")
    want_files = sorted(os.listdir(work))
    written = {name: content(name) for name in MODEL_FILES if content(name) is not None}
    if content("config.json") == EXTRAS["config.json"]:
        fail("the save did not write config.json: the test could not tell it apart")
    want_old, want_new = read_any(old), read_any(new)
    if want_old == want_new:
        fail("the old and the new weights are the same: the test could not tell them apart")
    seen = {"fsdp-run": {"old": 0, "new": 0}, "transformers": {"old": 0, "new": 0}}
    for n in range(1, len(points) + 1):
        at = f"point {n} ({points[n - 1]})"
        fresh()
        run = subprocess.run(command, env=dict(os.environ, FSDP_FAULT=f"{n}:{action}"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if action == "kill" and run.returncode != -9:
            fail(f"{at}: exit {run.returncode}, not killed")
        # A failed operation: exit 1 naming the file and the reason (a
        # failure that is handled, a second copy where a link fails, may
        # end in a save that succeeds).
        reason = "Input/output error" if action == "eio" else "No space left on device"
        if action != "kill" and run.returncode != 0 and (
                run.returncode != 1 or "fsdp-run: error: " not in run.stderr
                or reason not in run.stderr):
            fail(f"{at}: exit {run.returncode}, not 1 with the error: {run.stderr}")
        try:
            got = views(work)
        except (OSError, AssertionError, KeyError, ValueError) as e:
            fail(f"{at}: an index or model.safetensors is there, but: {e!r}")
        if not got:
            fail(f"{at}: neither {INDEX} nor model.safetensors: no model")
        for view, tensors in got.items():
            if tensors not in (want_old, want_new):
                fail(f"{at}: the {view} holds neither the old weights nor the new")
        for reader, first in (("fsdp-run", "index"), ("transformers", "single")):
            tensors = got.get(first, got.get("single" if first == "index" else "index"))
            seen[reader]["old" if tensors == want_old else "new"] += 1
        extras_kept(at)
        # The next save finishes the job: the new weights, and nothing the
        # killed one left (its temporaries, the old shards).
        again = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        if again.returncode != 0:
            fail(f"{at}: the next save failed ({again.returncode}):\n{again.stderr}")
        if sorted(os.listdir(work)) != want_files:
            fail(f"{at}: after the next save the folder holds {sorted(os.listdir(work))}, "
                 f"not {want_files}")
        if any(t != want_new for t in views(work).values()):
            fail(f"{at}: the next save did not leave the new weights")
        extras_kept(f"{at}, after the next save", done=True)
    # A temporary of a process that is still running is its own: kept; one
    # of a process that is gone is removed.
    fresh()
    live = os.path.join(work, f"model-00001-of-00002.safetensors.tmp.{os.getpid()}")
    gone = os.path.join(work, f"model.safetensors.index.json.tmp.{dead_pid()}.link")
    for path in (live, gone):
        with open(path, "wb") as f:
            f.write(b"x")
    if subprocess.run(command, stdout=subprocess.DEVNULL).returncode != 0:
        fail("the save beside a live process's temporary failed")
    if not os.path.exists(live) or os.path.exists(gone):
        fail(f"a live process's temporary kept: {os.path.exists(live)}, "
             f"a dead one's removed: {not os.path.exists(gone)}")
    print(f"crash: {len(points)} of {len(points)} fault points: " +
          "; ".join(f"{r} reads " + ", ".join(f"{k} {v}" for k, v in c.items())
                    for r, c in seen.items()) +
          "; the next save left no temporary")


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
        action = args[args.index("--fail") + 1] if "--fail" in args[:args.index("--")] else "kill"
        crash(args[0], args[1], args[2], args[args.index("--") + 1:], action)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
