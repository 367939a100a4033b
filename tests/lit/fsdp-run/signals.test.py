#!/usr/bin/python3
"""SIGTERM, SIGINT and SIGHUP stop fsdp-run after a step (runtime/Signals.h).

usage: signals.test.py PROGRAM.json DATA.bin WORK_DIR CASE

The program is a two-rank one. Every stop is held to the same promises: the
exit status is 128 + the signal's number; the last line on stderr names the
signal, the step after which the run stopped and the checkpoint written; the
metrics hold exactly the steps up to that one, with the uninterrupted run's
values; the checkpoint folder holds the checkpoints due up to that step and
that step's, nothing half-written; and --resume continues with the
uninterrupted run's losses, bit for bit.

CASE is one of:
  steps     FSDP_TEST_SIGNAL: each signal, raised on rank 0 and on rank 1,
            during start-up, mid-run, at a step with a save due and at the
            last step; also without --save, with --trace and --save-weights,
            and during --save-weights (after the last step's agreement: a
            complete run, still 128 + N).
  save      FSDP_FAULT=N:sigterm at every fault point up to the end of the
            second save (the first with a --keep removal): the save completes
            and the run stops after its step (before step 1 when the point is
            --save's mkdir at start-up).
  second    a second signal during the save of the stop: the process ends at
            once with the one-line message; the last complete checkpoint
            resumes.
  external  signals sent from outside (kill), to the process, at moments
            this driver sees on stdout: the stop step is the one named.
  mpi       mpirun -np 2 --backend mpi: a signal raised on rank 1 only, one
            sent from outside to one rank's process, and SIGTERM to mpirun
            itself (which passes SIGTERM to the ranks after
            odls_base_sigkill_timeout seconds, and SIGKILL after as many
            again).
Prints one line per case, then a summary; exits 1 on the first broken promise.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

STEPS = 30
EVERY = 10
SIGS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT, "HUP": signal.SIGHUP}
MPIRUN = ["env", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "mpirun"]


def fail(why):
    print("FAILED: " + why)
    sys.exit(1)


def clean_env(extra=None):
    env = dict(os.environ)
    for k in ("FSDP_FAULT", "FSDP_TEST_SIGNAL"):
        env.pop(k, None)
    env.update(extra or {})
    return env


def run(cmd, env_extra=None):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=clean_env(env_extra), timeout=300)


def metrics(path):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    return {r["step"]: (r["loss"], r["grad_norm"]) for r in rows}


def complete(folder):
    if not os.path.isdir(folder):
        return []
    return sorted(int(n[5:]) for n in os.listdir(folder) if re.fullmatch(r"step-\d{8,}", n))


def leftovers(folder):
    if not os.path.isdir(folder):
        return []
    return sorted(n for n in os.listdir(folder)
                  if n.startswith("step-") and not re.fullmatch(r"step-\d{8,}", n))


class Driver:
    def __init__(self, plan, data, work):
        self.plan, self.data, self.work = plan, data, work
        self.n = 0
        ref = os.path.join(work, "ref.jsonl")
        r = run(["fsdp-run", plan, "--data", data, "--steps", str(STEPS), "--metrics", ref,
                 "--quiet"])
        if r.returncode != 0:
            fail("the uninterrupted run exited %d: %s" % (r.returncode, r.stderr))
        self.ref = metrics(ref)

    def fresh(self):
        self.n += 1
        d = os.path.join(self.work, "c%d" % self.n)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def base(self, d, steps=STEPS, every=EVERY):
        return [self.plan, "--data", self.data, "--steps", str(steps), "--save-every",
                str(every), "--save", d + "/ckpt", "--metrics", d + "/m.jsonl", "--quiet"]

    def check(self, what, r_code, stderr, d, sig, step, keep=None, saved=True, before=False,
              steps=STEPS, resume=True, every=EVERY, ref=None):
        """The promises of a stop after `step` (before step 1 when `before`)."""
        ck, name = d + "/ckpt", "SIG" + sig
        ref = ref or self.ref
        if r_code != 128 + SIGS[sig]:
            fail("%s: exit status %s, not %d\n%s" % (what, r_code, 128 + SIGS[sig], stderr))
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        if before:
            want = "fsdp-run: %s: stopping before step %d (no step run, nothing saved)" % (
                name, step + 1)
        elif saved:
            want = "fsdp-run: %s: stopping after step %d; checkpoint written to %s" % (
                name, step, "%s/step-%08d" % (ck, step))
        else:
            want = "fsdp-run: %s: stopping after step %d; no checkpoint written (no --save)" % (
                name, step)
        if not last.startswith(want):
            fail("%s: the last line on stderr is\n  %s\nnot\n  %s" % (what, last, want))
        got = metrics(d + "/m.jsonl")
        if sorted(got) != list(range(1, step + 1)):
            fail("%s: the metrics hold steps %s, not 1..%d" % (what, sorted(got), step))
        for s, v in got.items():
            if v != ref[s]:
                fail("%s: step %d's loss and norm %s, uninterrupted %s" % (what, s, v, ref[s]))
        if not saved:
            return
        due = [s for s in range(every, step + 1, every)] + ([step] if step else [])
        due = sorted(set(due))
        due = due[-(keep or 2):]  # --keep, 2 by default
        if complete(ck) != due or leftovers(ck):
            fail("%s: the checkpoints are %s (and %s), not %s" % (what, complete(ck),
                                                                   leftovers(ck), due))
        if resume and step > 0:
            self.resume(what, d, step, steps, ref)

    def resume(self, what, d, step, steps=STEPS, ref=None, save=False):
        ref = ref or self.ref
        out = d + "/resumed.jsonl"
        r = run(["fsdp-run", self.plan, "--data", self.data, "--steps", str(steps), "--resume",
                 d + "/ckpt", "--metrics", out, "--quiet"] +
                (["--save", d + "/ckpt", "--save-every", str(EVERY)] if save else []))
        if r.returncode != 0:
            fail("%s: the resumed run exited %d: %s" % (what, r.returncode, r.stderr))
        got = metrics(out)
        if sorted(got) != list(range(step + 1, steps + 1)):
            fail("%s: the resumed run's steps are %s" % (what, sorted(got)))
        for s, v in got.items():
            if v != ref[s]:
                fail("%s: resumed, step %d's loss and norm %s, uninterrupted %s" %
                     (what, s, v, ref[s]))

    # FSDP_TEST_SIGNAL: each signal, on each rank, at each kind of moment.
    def steps(self):
        tried = 0
        for sig in SIGS:
            for rank in (0, 1):
                for step in (0, 7, EVERY, STEPS):
                    d = self.fresh()
                    what = "%s on rank %d at step %d" % (sig, rank, step)
                    r = run(["fsdp-run"] + self.base(d),
                            {"FSDP_TEST_SIGNAL": "%d:%s:%d" % (step, sig, rank)})
                    self.check(what, r.returncode, r.stderr, d, sig, step, before=step == 0)
                    tried += 1
        # Without --save: said, nothing written.
        d = self.fresh()
        r = run(["fsdp-run", self.plan, "--data", self.data, "--steps", str(STEPS), "--metrics",
                 d + "/m.jsonl", "--quiet"], {"FSDP_TEST_SIGNAL": "5:TERM"})
        self.check("TERM without --save", r.returncode, r.stderr, d, "TERM", 5, saved=False)
        tried += 1
        # --trace is written (it is written at the end); --save-weights is not
        # (the model is not the final one), and the message says so.
        d = self.fresh()
        r = run(["fsdp-run"] + self.base(d) + ["--trace", d + "/trace.json", "--save-weights",
                                               d + "/w.safetensors"],
                {"FSDP_TEST_SIGNAL": "12:INT"})
        self.check("INT with --trace", r.returncode, r.stderr, d, "INT", 12)
        if "--save-weights %s/w.safetensors not written" % d not in r.stderr:
            fail("INT with --save-weights: not said: " + r.stderr)
        if os.path.exists(d + "/w.safetensors"):
            fail("INT with --save-weights: the weights of an unfinished run were written")
        with open(d + "/trace.json") as f:
            steps_traced = {e["args"]["step"] for e in json.load(f)["traceEvents"]
                            if e.get("ph") == "X"}
        if steps_traced != set(range(12)):
            fail("INT with --trace: the trace holds steps %s" % sorted(steps_traced))
        tried += 1
        # A signal during --save-weights, after the last step's agreement: the
        # run is complete (weights written), and the status still says so.
        d = self.fresh()
        r = run(["fsdp-run", self.plan, "--data", self.data, "--steps", "3", "--metrics",
                 d + "/m.jsonl", "--save-weights", d + "/w.safetensors", "--quiet"],
                {"FSDP_FAULT": "2:sigterm"})
        if (r.returncode != 128 + signal.SIGTERM or not r.stderr.endswith(
                "fsdp-run: SIGTERM: received after the last step; the run is complete\n") or
                sorted(metrics(d + "/m.jsonl")) != [1, 2, 3] or
                sorted(os.listdir(d)) != ["m.jsonl", "w.safetensors"]):
            fail("TERM during --save-weights: status %d, %s, %s" % (r.returncode, r.stderr,
                                                                    os.listdir(d)))
        tried += 1
        print("steps: %d of %d stops handled" % (tried, tried))

    # FSDP_FAULT=N:sigterm at each fault point up to the second save's end.
    def save(self):
        d = self.fresh()
        r = run(["fsdp-run"] + self.base(d) + ["--keep", "1"], {"FSDP_FAULT": "list"})
        points = []
        for line in r.stderr.splitlines():
            m = re.match(r"fsdp-fault: (\d+) \S+ (.*)", line)
            if m:
                seen = [int(x) for x in re.findall(r"step-(\d{8})", m.group(2))]
                points.append((int(m.group(1)), max(seen) if seen else 0))
        points.sort()
        # The save a point belongs to: the newest step its path or an earlier
        # point's names (the removal of step 10 is part of step 20's save).
        owner, newest = {}, 0
        for n, s in points:
            newest = max(newest, s)
            owner[n] = newest
        # Every point of the second save (the first with a --keep removal);
        # of the first, its first and last; and --save's mkdir at start-up.
        first = [n for n in owner if owner[n] == EVERY]
        todo = sorted({1, min(first), max(first)} |
                      {n for n in owner if owner[n] == 2 * EVERY})
        if len(todo) < 30 or owner[1] != 0:
            fail("FSDP_FAULT=list: unexpected fault points %s" % points[:5])
        for n in todo:
            d = self.fresh()
            r = run(["fsdp-run"] + self.base(d) + ["--keep", "1"],
                    {"FSDP_FAULT": "%d:sigterm" % n})
            step = owner[n]
            # Resume checks are the slow part: each save's first and last
            # points, and every fourth.
            self.check("SIGTERM at fault point %d" % n, r.returncode, r.stderr, d, "TERM", step,
                       keep=1, before=step == 0,
                       resume=n % 4 == 0 or owner.get(n + 1) != step or owner.get(n - 1) != step)
        print("save: %d of %d fault points stopped after their save" % (len(todo), len(todo)))

    # A second signal ends the process at once, inside the stop's save.
    def second(self):
        d = self.fresh()
        r = run(["fsdp-run"] + self.base(d), {"FSDP_FAULT": "list"})
        first = min(int(m.group(1)) for m in re.finditer(
            r"fsdp-fault: (\d+) write \S*step-%08d" % (2 * EVERY), r.stderr))
        d = self.fresh()
        # SIGTERM at step 20's end, SIGINT in its save's first write.
        r = run(["fsdp-run"] + self.base(d), {"FSDP_TEST_SIGNAL": "%d:TERM" % (2 * EVERY),
                                             "FSDP_FAULT": "%d:sigint" % first})
        if r.returncode != 128 + signal.SIGINT:
            fail("second signal: exit status %d, not %d\n%s" % (r.returncode,
                                                                128 + signal.SIGINT, r.stderr))
        if not r.stderr.endswith("fsdp-run: a second signal: stopping now, within the step; "
                                 "resume from the last checkpoint written\n"):
            fail("second signal: stderr ends\n" + r.stderr[-300:])
        if complete(d + "/ckpt") != [EVERY]:
            fail("second signal: the checkpoints are %s" % complete(d + "/ckpt"))
        self.resume("second signal", d, EVERY, save=True)
        if leftovers(d + "/ckpt"):
            fail("second signal: the resumed run left %s" % leftovers(d + "/ckpt"))
        print("second: 1 of 1 second signals ended the run at once")

    # Signals from outside, to the process, when stdout shows step `at`.
    def external(self):
        tried = 0
        for sig, at in (("TERM", 3), ("INT", 50), ("HUP", 120)):
            d = self.fresh()
            steps = 100000
            args = self.base(d, steps, 100)
            args.remove("--quiet")
            p = subprocess.Popen(["fsdp-run"] + args,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=clean_env())
            for line in p.stdout:
                if line.startswith("step %d/" % at):
                    p.send_signal(SIGS[sig])
                    break
            out, err = p.communicate(timeout=300)
            m = re.search(r"stopping after step (\d+)", err)
            if not m or int(m.group(1)) < at:
                fail("external %s at step %d: %s" % (sig, at, err))
            step = int(m.group(1))
            # The uninterrupted run's losses for the steps it ran.
            self.check("external %s" % sig, p.returncode, err, d, sig, step, steps=step + 5,
                       every=100, ref=self.ref_long(step + 5))
            tried += 1
        print("external: %d of %d signals stopped the run at the step named" % (tried, tried))

    def ref_long(self, steps):
        out = os.path.join(self.work, "ref-long.jsonl")
        if getattr(self, "long", None) and max(self.long) >= steps:
            return self.long
        r = run(["fsdp-run", self.plan, "--data", self.data, "--steps", str(steps), "--metrics",
                 out, "--quiet"])
        if r.returncode != 0:
            fail("the long uninterrupted run exited %d" % r.returncode)
        self.long = metrics(out)
        return self.long

    def mpi(self):
        tried = 0
        mpi = MPIRUN + ["-np", "2", "--oversubscribe"]
        # Raised on rank 1 only: rank 0 stops after the same step.
        d = self.fresh()
        r = run(mpi + ["-x", "FSDP_TEST_SIGNAL", "fsdp-run"] + self.base(d) +
                ["--backend", "mpi"], {"FSDP_TEST_SIGNAL": "13:TERM:1"})
        err = "\n".join(l for l in r.stderr.splitlines() if l.startswith("fsdp-run:"))
        self.check("mpi: TERM raised on rank 1", r.returncode, err, d, "TERM", 13)
        tried += 1
        # From outside, to rank 1's process; then SIGTERM to mpirun, which
        # passes it on after odls_base_sigkill_timeout seconds.
        for target in ("rank", "mpirun"):
            d = self.fresh()
            args = self.base(d, 100000, 100)
            # Once signalled, mpirun stops relaying the ranks' output, and
            # rank 0's progress lines would fill the pipe and block it: the
            # step is seen in the metrics instead (docs/checkpoint-format.md).
            args.remove("--quiet") if target == "rank" else None
            # The ranks have odls_base_sigkill_timeout seconds to finish the
            # step and its checkpoint once mpirun passes SIGTERM on: 2 s was
            # too little beside a loaded test run (milliseconds when quiet).
            env = clean_env({"OMPI_MCA_odls_base_sigkill_timeout": "6"})
            p = subprocess.Popen(mpi + ["fsdp-run"] + args + ["--backend", "mpi"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env)
            if target == "mpirun":
                while len(metrics_lines(d + "/m.jsonl")) < 20:
                    time.sleep(0.05)
                p.send_signal(signal.SIGTERM)
            else:
                for line in p.stdout:
                    if line.startswith("step 20/"):
                        os.kill(rank_pid(p.pid, 1), signal.SIGTERM)
                        break
            out, err = p.communicate(timeout=300)
            lines = [l for l in err.splitlines() if l.startswith("fsdp-run:")]
            m = re.search(r"stopping after step (\d+)", err)
            if not m or int(m.group(1)) < 20:
                fail("mpi: SIGTERM to %s: %s" % (target, err))
            step = int(m.group(1))
            # mpirun's status when it was signalled is its own (1); the
            # ranks' 143 otherwise.
            code = 128 + signal.SIGTERM if target == "rank" else None
            if target == "mpirun" and p.returncode == 0:
                fail("mpi: SIGTERM to mpirun: status 0")
            self.check("mpi: SIGTERM to " + target, code or 128 + signal.SIGTERM,
                       "\n".join(lines), d, "TERM", step, steps=step + 5, every=100,
                       ref=self.ref_long(step + 5))
            tried += 1
        print("mpi: %d of %d stops agreed by both ranks" % (tried, tried))


def metrics_lines(path):
    try:
        with open(path) as f:
            return [l for l in f.read().split("\n")[:-1]]
    except OSError:
        return []


def rank_pid(root, rank):
    """The pid of the fsdp-run process of `rank` under mpirun `root`."""
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        for k in kids:
            try:
                with open("/proc/%d/environ" % k, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if b"OMPI_COMM_WORLD_RANK=%d" % rank in env:
                return k
            todo.append(k)
    fail("no process of rank %d under mpirun %d" % (rank, root))


def main():
    plan, data, work, case = sys.argv[1:5]
    d = Driver(plan, data, work)
    getattr(d, case)()


if __name__ == "__main__":
    main()
