#!/usr/bin/python3
"""Checkpoint safety of fsdp-run --save, driven by fault injection (FSDP_FAULT).

usage: checkpoint-safety.test.py PROGRAM.json DATA.bin WORK_DIR CASE

CASE is one of:
  kill     SIGKILL at every fault point of a run that saves after steps 2 and 4
           (--keep 1: the second save removes the first); afterwards the folder
           must hold a complete checkpoint whenever the first save had become
           visible, and a resumed run (or a fresh one, before that) must give
           the losses of an uninterrupted run, bit for bit.
  enospc   ENOSPC and EIO at every fault point of the second save: a non-zero
           exit naming the system's reason, no temporary left, the first
           checkpoint intact and resumable to the same losses.
  tmpfs    (inside a private mount namespace, given a small tmpfs as WORK_DIR)
           a real full disk: the run stops at the save that does not fit, the
           older checkpoints stay and resume.
Prints one line per case, then a summary; exits 1 on the first broken promise.
"""
import json
import os
import re
import shutil
import subprocess
import sys

STEPS = 4


def run(args, env_extra=None, check=True):
    env = dict(os.environ)
    env.pop("FSDP_FAULT", None)
    env.update(env_extra or {})
    r = subprocess.run(["fsdp-run"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, timeout=300)
    if check and r.returncode != 0:
        fail("fsdp-run %s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def fail(why):
    print("FAILED: " + why)
    sys.exit(1)


def losses(path):
    with open(path) as f:
        return {json.loads(l)["step"]: json.loads(l)["loss"] for l in f if l.strip()}


def complete(folder):
    """Steps of the complete checkpoints (step-NNNNNNNN) in folder."""
    if not os.path.isdir(folder):
        return []
    return sorted(int(n[5:]) for n in os.listdir(folder) if re.fullmatch(r"step-\d{8,}", n))


def leftovers(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith("step-") and not re.fullmatch(r"step-\d{8,}", n))


def resume_and_compare(plan, data, work, ck, reference, label):
    """Resumes from ck (or starts afresh when it holds nothing) to STEPS steps
    and checks the losses of the steps it ran against the reference."""
    metrics = os.path.join(work, "resumed.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    args = [plan, "--data", data, "--steps", str(STEPS), "--save", ck, "--keep", "1",
            "--metrics", metrics, "--quiet"]
    have = complete(ck)
    if have:
        args += ["--resume", ck]
    run(args)
    got = losses(metrics) if os.path.exists(metrics) else {}
    first = have[-1] + 1 if have else 1
    want = {s: reference[s] for s in range(first, STEPS + 1)}
    if got != want:
        fail("%s: resumed from %s, losses %s, uninterrupted %s" % (label, have, got, want))
    # (A run resumed at its last step saves nothing: what was there stays.)
    if complete(ck)[-1:] != [STEPS] or leftovers(ck):
        fail("%s: after the resumed run the folder holds %s" % (label, sorted(os.listdir(ck))))
    return have


def list_points(plan, data, ck, extra):
    shutil.rmtree(ck, ignore_errors=True)
    r = run([plan, "--data", data, "--steps", str(STEPS), "--save", ck, "--quiet"] + extra,
            {"FSDP_FAULT": "list"})
    points = []
    for line in r.stderr.splitlines():
        m = re.fullmatch(r"fsdp-fault: (\d+) (\S+) (.*)", line)
        if m:
            points.append((int(m.group(1)), m.group(2), m.group(3)))
    if not points:
        fail("FSDP_FAULT=list printed no fault point:\n" + r.stderr)
    return points


def case_kill(plan, data, work, reference):
    ck = os.path.join(work, "kill-ck")
    extra = ["--save-every", "2", "--keep", "1"]
    points = list_points(plan, data, ck, extra)
    # The first save is visible once its rename has happened.
    visible = next(n for n, what, path in points
                   if what == "rename-after" and path.endswith("step-00000002"))
    recovered = 0
    for n, what, path in points:
        shutil.rmtree(ck, ignore_errors=True)
        r = run([plan, "--data", data, "--steps", str(STEPS), "--save", ck, "--quiet"] + extra,
                {"FSDP_FAULT": "%d:kill" % n}, check=False)
        if r.returncode != -9:
            fail("kill at point %d (%s %s): exit %d, not SIGKILL" % (n, what, path, r.returncode))
        have = complete(ck)
        if n >= visible and not have:
            fail("kill at point %d (%s %s), after the first save: no complete checkpoint in %s"
                 % (n, what, path, sorted(os.listdir(ck))))
        resume_and_compare(plan, data, work, ck, reference, "kill at point %d (%s)" % (n, what))
        recovered += 1
    print("kill: %d of %d fault points recovered (a complete checkpoint after point %d, "
          "the first save's rename)" % (recovered, len(points), visible))


def case_enospc(plan, data, work, reference):
    ck = os.path.join(work, "enospc-ck")
    extra = ["--save-every", "2", "--keep", "1"]
    points = list_points(plan, data, ck, extra)
    second = [(n, what, path) for n, what, path in points if "step-00000004" in path]
    tried = 0
    for action, reason in (("enospc", "No space left on device"), ("eio", "Input/output error")):
        for n, what, path in second:
            shutil.rmtree(ck, ignore_errors=True)
            metrics = os.path.join(work, "enospc.jsonl")
            r = run([plan, "--data", data, "--steps", str(STEPS), "--save", ck, "--quiet",
                     "--metrics", metrics] + extra,
                    {"FSDP_FAULT": "%d:%s" % (n, action)}, check=False)
            label = "%s at point %d (%s %s)" % (action, n, what, path)
            if r.returncode == 0 or r.returncode < 0:
                fail("%s: exit %d, expected an error" % (label, r.returncode))
            if reason not in r.stderr or "fsdp-run: error:" not in r.stderr:
                fail("%s: the error does not give the reason:\n%s" % (label, r.stderr))
            if leftovers(ck):
                fail("%s: the failed save left %s" % (label, leftovers(ck)))
            # Before its rename the new checkpoint is not there and the old one
            # is; after it (removing the old one failed) the new one is.
            have = complete(ck)
            if not have or have[-1] not in (2, 4):
                fail("%s: the folder holds %s" % (label, sorted(os.listdir(ck))))
            if have[-1] == 2 and len(losses(metrics)) != STEPS:
                fail("%s: %d metrics lines" % (label, len(losses(metrics))))
            resume_and_compare(plan, data, work, ck, reference, label)
            tried += 1
    print("enospc: %d failed saves (ENOSPC and EIO at each of the %d fault points of the "
          "second save): each an error naming the reason, the previous checkpoint resumable"
          % (tried, len(second)))


def case_tmpfs(plan, data, work, reference):
    # A checkpoint of the plan is about 1.7 MB: the third does not fit in 4 MB
    # beside two others (--keep 2 removes the oldest only after a new one).
    ck = os.path.join(work, "ck")
    r = run([plan, "--data", data, "--steps", str(STEPS), "--save", ck, "--save-every", "1",
             "--keep", "2", "--quiet"], check=False)
    if r.returncode == 0:
        fail("tmpfs: the run did not fill the disk (%s)" % sorted(os.listdir(ck)))
    if "No space left on device" not in r.stderr:
        fail("tmpfs: the error does not say the disk is full:\n" + r.stderr)
    have = complete(ck)
    if not have or leftovers(ck):
        fail("tmpfs: after the failed save the folder holds %s" % sorted(os.listdir(ck)))
    # Room for the resumed run: its own checkpoints replace the old ones one by one.
    for s in have[:-1]:
        shutil.rmtree(os.path.join(ck, "step-%08d" % s))
    resume_and_compare(plan, data, work, ck, reference, "tmpfs")
    print("tmpfs: a full disk at the save after step %d: %s" % (
        have[-1] + 1, r.stderr.strip().splitlines()[-1]))


def main():
    plan, data, work, case = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    ref = os.path.join(work, "reference.jsonl")
    if not os.path.exists(ref):
        run([plan, "--data", data, "--steps", str(STEPS), "--metrics", ref, "--quiet"])
    reference = losses(ref)
    {"kill": case_kill, "enospc": case_enospc, "tmpfs": case_tmpfs}[case](plan, data, work, reference)


if __name__ == "__main__":
    main()
