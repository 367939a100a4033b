#!/usr/bin/python3
"""Stops one rank of an fsdp-run job on the emulated GPU device (--backend nccl).

usage: hang-nccl.py [--mpirun] [--stop R:PATTERN] LIMIT WORLD IDFILE -- FSDP_RUN ARGS...

Runs WORLD ranks of `FSDP_RUN ARGS --backend nccl` with FSDP_NCCL_PLUGIN naming
the emulated plugin (BUILD/lib/libfsdp-nccl-emulated.so, beside FSDP_RUN's
bin/, unless FSDP_NCCL_PLUGIN names one): one process a rank, each with --rank R --nccl-id-file IDFILE in a
session of its own, or with --mpirun under `mpirun -np WORLD` (the rank's
process found by OMPI_COMM_WORLD_RANK in its environment). FSDP_TEST_STALL
passes through (a stalled rank stops itself with SIGSTOP); with --stop, rank
R's process gets SIGSTOP from outside at the first line of the job's output
containing PATTERN.

The job (every rank but a stopped one; under mpirun, mpirun itself) must
end within LIMIT seconds of the stop (of the start, when the rank stopped
itself). Then a stopped rank gets SIGCONT and a few seconds to stop on its
own (its peer's failure note tells it why), then SIGKILL; whatever is left
of the job is killed by pid. It prints, in this order: "hang-nccl: rank R
exited S" for each rank that ended by itself (the file bootstrap), or
"hang-nccl: mpirun exited S"; "hang-nccl: the job did NOT end within LIMIT
s" instead, when it did not; each rank's output (file bootstrap: "---
rank R" first; mpirun: the job's output); then "hang-nccl: stopped rank R"
and how it ended after SIGCONT; "hang-nccl: nothing left running" or the
pids left; "hang-nccl: nothing left in /dev/shm" or the names the job left
there. Exits 1 when the job did not end, else 0.
"""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import descendants, rank_of as mpi_rank_of  # noqa: E402


def state(pid):
    """The process's state letter, or None once it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
    return None if s in ("Z", "X") else s


def shm_names():
    # The emulated NCCL's segments and the places of --timeout's report.
    return {n for n in os.listdir("/dev/shm") if n.startswith("fsdp")}


def main():
    args = sys.argv[1:]
    mpi = stop = None
    while args and args[0].startswith("--"):
        if args[0] == "--mpirun":
            mpi, args = True, args[1:]
        elif args[0] == "--stop" and len(args) > 1:
            r, pattern = args[1].split(":", 1)
            stop, args = (int(r), pattern), args[2:]
        else:
            break
    if len(args) < 5 or args[3] != "--":
        sys.exit(__doc__)
    limit, world, idfile, cmd = float(args[0]), int(args[1]), args[2], args[4:]
    plugin = os.environ.get("FSDP_NCCL_PLUGIN") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(cmd[0]))), "lib", "libfsdp-nccl-emulated.so")
    env = dict(os.environ, FSDP_NCCL_PLUGIN=plugin, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    shm_before = shm_names()
    cmd = cmd + ["--backend", "nccl"]
    if mpi:
        passed = ["-x", "FSDP_NCCL_PLUGIN"] + (["-x", "FSDP_TEST_STALL"]
                                               if "FSDP_TEST_STALL" in env else [])
        jobs = [subprocess.Popen(["mpirun", "-np", str(world), "--oversubscribe"] + passed + cmd,
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)]
    else:
        jobs = [subprocess.Popen(cmd + ["--rank", str(r), "--nccl-id-file", idfile], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True) for r in range(world)]
    # The outputs on threads of their own, so that a deadline holds even when
    # the job hangs without printing.
    outputs = [[] for _ in jobs]
    seen = threading.Event()

    def read(i):
        for line in jobs[i].stdout:
            outputs[i].append(line)
            if stop and stop[1] in line:
                seen.set()

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(jobs))]
    for t in readers:
        t.start()

    def rank_pid(r):
        if not mpi:
            return jobs[r].pid
        for pid in descendants(jobs[0].pid):
            if mpi_rank_of(pid) == r:
                return pid
        return None

    notes, status = [], 0
    stopped = None
    if stop:
        # Until the pattern, or until the job has ended without it.
        until = time.monotonic() + limit * 4
        while (not seen.wait(0.1) and time.monotonic() < until
               and any(j.poll() is None for j in jobs)):
            pass
        if not seen.is_set():
            notes.append(f"hang-nccl: '{stop[1]}' never appeared")
            status = 1
        else:
            stopped = rank_pid(stop[0])
            if stopped:
                os.kill(stopped, signal.SIGSTOP)
    # Every rank but the stopped one (by us or by itself) must end.
    deadline = time.monotonic() + limit
    pids = {r: rank_pid(r) for r in range(world)} if mpi else {r: j.pid for r, j in
                                                              enumerate(jobs)}
    ended = {}
    while time.monotonic() < deadline:
        if mpi:
            for r in range(world):
                if pids[r] is None:
                    pids[r] = rank_pid(r)
            if jobs[0].poll() is not None:
                break
        else:
            for r, j in enumerate(jobs):
                if r not in ended and j.poll() is not None:
                    ended[r] = j.returncode
            left = [r for r in range(world) if r not in ended]
            if all(pids[r] == stopped or state(pids[r]) == "T" for r in left):
                break
        time.sleep(0.05)
    else:
        notes.append(f"hang-nccl: the job did NOT end within {limit:g} s")
        status = 1
    if mpi:
        if jobs[0].poll() is not None:
            print(f"hang-nccl: mpirun exited {jobs[0].returncode}")
    else:
        for r in sorted(ended):
            print(f"hang-nccl: rank {r} exited {ended[r]}")
    # A stopped rank: resumed, it finds its peer's failure note and ends.
    halted = [r for r, pid in pids.items()
              if pid and (pid == stopped or state(pid) == "T") and r not in ended]
    for r in halted:
        os.kill(pids[r], signal.SIGCONT)
        how = "was killed"
        if not mpi:
            try:
                jobs[r].wait(timeout=10)
                how = f"exited {jobs[r].returncode}"
            except subprocess.TimeoutExpired:
                pass
        notes.append(f"hang-nccl: stopped rank {r}; resumed, it {how}")
    # A rank that mpirun ended may still be on its way out: a few seconds.
    grace = time.monotonic() + 10
    while time.monotonic() < grace and any(p and state(p) for p in pids.values()):
        time.sleep(0.05)
    # Nothing outlives the test: what is left gets SIGCONT, then SIGKILL.
    left = []
    for j in jobs:
        if j.poll() is None:
            left += descendants(j.pid) + [j.pid]
    for p in list(pids.values()):
        if p and state(p) and p not in left:
            left.append(p)
    for sig in (signal.SIGCONT, signal.SIGKILL):
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    for j in jobs:
        j.wait()
    for t in readers:
        t.join(timeout=5)
    for i, out in enumerate(outputs):
        if not mpi:
            print(f"--- rank {i}")
        sys.stdout.write("".join(out))
    for n in notes:
        print(n)
    print("hang-nccl: nothing left running" if not left else
          "hang-nccl: left running: " + ", ".join(map(str, left)))
    # A name another job holds for a moment (its start-up) is gone again in
    # a second look; one this job left stays.
    new = shm_names() - shm_before
    if new:
        time.sleep(0.5)
        new &= shm_names()
    print("hang-nccl: nothing left in /dev/shm" if not new else
          "hang-nccl: left in /dev/shm: " + ", ".join(sorted(new)))
    sys.exit(status)


if __name__ == "__main__":
    main()
