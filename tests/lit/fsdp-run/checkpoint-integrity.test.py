#!/usr/bin/python3
"""Checkpoint integrity of fsdp-run --resume: every file verified before step 1.

usage: checkpoint-integrity.test.py PROGRAM.json DATA.bin WORK_DIR CASE

CASE is one of:
  edits    a checkpoint saved after step 4, then one edit at a time: each digit
           of every offset, shard_numel, size, CRC, step and global batch in
           meta.json changed, and each of the 56 header bytes of a shard file
           flipped; each must be refused before step 1 with a non-zero exit
           and an error naming the file and the field. The unedited
           checkpoint must resume (the control).
  readers  a run saving with --save-every 1 --keep 1 while other runs resume
           from the same folder, one after the other: every reader must
           resume (its first step printed), whatever the writer removes.
Prints one line per case; exits 1 on the first broken promise.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time


def run(args, check=True):
    env = dict(os.environ)
    env.pop("FSDP_FAULT", None)
    r = subprocess.run(["fsdp-run"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, timeout=120)
    if check and r.returncode != 0:
        fail("fsdp-run %s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def fail(why):
    print("FAILED: " + why)
    sys.exit(1)


def edited_digits(text, keys):
    """Every single-digit change of the values of `keys` in meta.json's text:
    (key, position, new text). A leading digit never becomes 0 (the text
    stays JSON, so the reader must find the edit by its checks)."""
    for m in re.finditer(r'"(%s)": (\d+)' % "|".join(keys), text):
        start = m.start(2)
        for i, d in enumerate(m.group(2)):
            new = str((int(d) + 1) % 10)
            if i == 0 and new == "0":
                new = "1" if d != "1" else "2"
            yield m.group(1), start + i, text[:start + i] + new + text[start + i + 1:]


def case_edits(plan, data, work):
    ck = os.path.join(work, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    run([plan, "--data", data, "--steps", "4", "--save", ck, "--quiet"])
    step = os.path.join(ck, "step-00000004")
    meta_path = os.path.join(step, "meta.json")
    with open(meta_path) as f:
        meta = f.read()
    resume = [plan, "--data", data, "--steps", "5", "--resume", ck, "--log-every", "1"]
    r = run(resume)
    if "step 5/5" not in r.stdout:
        fail("the unedited checkpoint did not resume:\n" + r.stdout)

    def refused(what, file, fields):
        r = run(resume, check=False)
        err = r.stderr.strip()
        if r.returncode == 0 or "step 5/" in r.stdout:
            fail("%s: resumed (exit %d)" % (what, r.returncode))
        # A field is named as 'key' or as the last part of a path
        # (units[2].params[1].offset).
        named = [f for f in fields if "'%s'" % f in err or ".%s " % f in err]
        if file + ":" not in err or not named:
            fail("%s: the error does not name %s and one of %s:\n%s" % (what, file, fields, err))
        return named

    keys = ["offset", "shard_numel", "bytes", "header_crc", "step", "global_batch",
            "block_bytes", "shard_files", "checksum"]
    tried = exact = checksum = 0
    for key, pos, text in edited_digits(meta, keys):
        with open(meta_path, "w") as f:
            f.write(text)
        # The edited field by name, or (an edit its checks cannot place) the
        # checksum of the whole file.
        named = refused("meta.json %s edit at byte %d" % (key, pos), meta_path,
                        keys + ["shards"])
        tried += 1
        exact += key in named
        checksum += key != "checksum" and named == ["checksum"]
    with open(meta_path, "w") as f:
        f.write(meta)
    print("meta.json edits: %d tried, %d refused naming meta.json and a field "
          "(%d the edited field, %d only the checksum)" % (tried, tried, exact, checksum))

    # Byte ranges of the header's fields, as the reader names them.
    layout = [(0, 8, "magic"), (8, 16, "step"), (16, 24, "member"), (24, 32, "members"),
              (32, 40, "payload_bytes"), (40, 48, "block_bytes"), (48, 52, "header_crc"),
              (52, 56, "pad")]
    fields = [name for lo, hi, name in layout]
    shard = os.path.join(step, "shard-00001.bin")
    with open(shard, "rb") as f:
        original = f.read()
    flips = 0
    for i in range(56):
        field = next(name for lo, hi, name in layout if lo <= i < hi)
        with open(shard, "wb") as f:
            f.write(original[:i] + bytes([original[i] ^ 0x10]) + original[i + 1:])
        named = refused("header byte %d" % i, shard, fields)
        if named != [field]:
            fail("header byte %d: the error names %s, not %s" % (i, named, field))
        flips += 1
    with open(shard, "wb") as f:
        f.write(original)
    run(resume)
    print("shard header flips: %d tried, %d refused naming the file and the field" % (flips, flips))


def case_readers(plan, data, work, reader_plan):
    ck = os.path.join(work, "rotating")
    shutil.rmtree(ck, ignore_errors=True)
    writer = subprocess.Popen(["fsdp-run", plan, "--data", data, "--steps", "1000000",
                               "--save", ck, "--save-every", "1", "--keep", "1", "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # The first checkpoint: the writer says nothing, so wait for the folder.
        while not any(re.fullmatch(r"step-\d{8}", n) for n in
                      (os.listdir(ck) if os.path.isdir(ck) else [])):
            if writer.poll() is not None:
                fail("the writer stopped: " + writer.stderr.read())
            time.sleep(0.01)
        tries = 60
        for t in range(tries):
            reader = subprocess.Popen(["fsdp-run", reader_plan, "--data", data, "--steps",
                                       "1000000", "--resume", ck, "--log-every", "1",
                                       "--timeout", "20"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            resumed = False
            for line in reader.stdout:
                if line.startswith("step "):
                    resumed = True
                    break
            if resumed:
                reader.kill()
            reader.wait()
            err = reader.stderr.read()
            reader.stdout.close()
            reader.stderr.close()
            if not resumed:
                fail("reader %d of %d did not resume (exit %d):\n%s" % (t + 1, tries,
                                                                         reader.returncode, err))
            if writer.poll() is not None:
                fail("the writer stopped: " + writer.stderr.read())
        print("readers: %d tried while the writer rotated, %d resumed" % (tries, tries))
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()


def main():
    plan, data, work, case = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    if case == "edits":
        case_edits(plan, data, work)
    elif case == "readers":
        case_readers(plan, data, work, sys.argv[5])
    else:
        fail("unknown case " + case)


if __name__ == "__main__":
    main()
