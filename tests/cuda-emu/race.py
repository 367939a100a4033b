#!/usr/bin/env python3
"""The stream-order checker against the real executor (CTest label gpu-emulated).

usage: race.py BIN_DIR PLUGIN MODELS_DIR WORK_DIR

gpt2-tiny planned for the cuda target at world 2 runs 2 steps through
`fsdp-run --backend nccl` on the emulated device (one process a rank,
--rank/--nccl-id-file), with --grad-accum 1 and 2 (so that the join of a
micro-step to the next is among the waits), and at world 4 with
--reshard-after-forward 2 (the copies on the compute stream that the
backward's gathers over the reshard group read):

  * FSDP_EMU_DROP_WAIT=list: the normal run, which must exit 0 with no
    stream-order report, lists every cudaStreamWaitEvent; the two steps
    must issue the same waits, W a step;
  * for each wait of step 1, FSDP_EMU_DROP_WAIT=N drops it: the checker must
    report a race (the ranks are stopped at the first report; the report's
    exit status is checked on the first run to the end). Every wait the
    device is given is needed: lowering drops the program's waits that order
    nothing, and the executor joins phases only as far as needed
    (runtime/StreamOrder.h);
  * malformed FSDP_EMU_DROP_WAIT values: exit 1 naming the variable.

The last line: "dropped waits: C of W caught; stream-order reports in normal
runs: 0"; WORK_DIR/result.json holds the figures for gpu-emulated-summary.
"""
import json
import os
import subprocess
import sys

TIMEOUT_S = 120


def label(line, phase):
    """A wait's name from its list line: its instruction, or '<phase> end: ...'."""
    what = line.split(": ", 2)[2]
    if "(wait): " in what:
        return what.split(": ")[0]
    waits, _, rec = what.partition(" waits for a record on ")
    streams = {"stream 0": "compute", "stream 1": "comm"}
    return "%s end: %s waits for %s" % (phase, streams.get(waits, waits), streams.get(rec, rec))


def run_ranks(fsdp_run, plan, env, work, tag, stop_at_report, world):
    """Runs every rank; returns (exit statuses, rank 0's output, the others'
    together)."""
    idf = os.path.join(work, "id-" + tag)
    if os.path.exists(idf):
        os.remove(idf)
    cmd = [fsdp_run, plan, "--backend", "nccl", "--steps", "2", "--quiet", "--timeout", "60",
           "--synthetic-data", "--nccl-id-file", idf]
    logs = [open(os.path.join(work, "rank%d-%s.txt" % (r, tag)), "w+") for r in range(1, world)]
    others = [subprocess.Popen(cmd + ["--rank", str(r)], env=env, stdout=log,
                               stderr=subprocess.STDOUT) for r, log in zip(range(1, world), logs)]
    p0 = subprocess.Popen(cmd + ["--rank", "0"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    out0 = []
    try:
        for line in p0.stdout:
            out0.append(line)
            if stop_at_report and "stream-order race" in line:
                for p in [p0] + others:
                    p.kill()
                break
        status = tuple(p.wait(timeout=TIMEOUT_S) for p in [p0] + others)
    except subprocess.TimeoutExpired:
        for p in [p0] + others:
            p.kill()
        sys.exit("FAILED (hang): %s %s" % (tag, " ".join(cmd)))
    for log in logs:
        log.seek(0)
    return status, "".join(out0), "".join(log.read() for log in logs)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    bin_dir, plugin, models, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    result = os.path.join(work, "result.json")
    if os.path.exists(result):  # an earlier run's
        os.remove(result)
    fsdp_plan, fsdp_run = os.path.join(bin_dir, "fsdp-plan"), os.path.join(bin_dir, "fsdp-run")
    env = dict(os.environ, FSDP_NCCL_PLUGIN=plugin)
    for k in ("FSDP_EMU_DROP_WAIT", "FSDP_EMULATED_GPU_MEMORY", "FSDP_EMU_NCCL_FAULT"):
        env.pop(k, None)
    # One program a case, (world, grad-accum, fsdp-plan flags): the
    # program's grad-accum decides the run's.
    cases = [(2, 1, []), (2, 2, []), (4, 1, ["--reshard-after-forward", "2"])]
    plans = []
    for world, accum, flags in cases:
        plans.append(os.path.join(work, "gpt2-tiny-w%d-accum%d%s.json"
                                  % (world, accum, "-hpz" if flags else "")))
        r = subprocess.run([fsdp_plan, os.path.join(models, "gpt2-tiny", "config.json"),
                            "--world-size", str(world), "--micro-batch", "1", "--seq-len", "8",
                            "--grad-accum", str(accum), "--cluster",
                            os.path.join(models, "hardware", "H100-SXM.json"), "-o", plans[-1]]
                           + flags, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.exit("FAILED: fsdp-plan\n" + r.stdout)
    plan = plans[0]

    # Malformed settings: refused before any step, naming the variable.
    for bad in ["0", "-1", "x", "3x", "", "LIST", "99999999999999999999"]:
        r = subprocess.run([fsdp_run, plan, "--backend", "nccl", "--steps", "1",
                            "--synthetic-data"],
                           env=dict(env, FSDP_EMU_DROP_WAIT=bad), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
        if r.returncode != 1 or "FSDP_EMU_DROP_WAIT" not in r.stdout or "step 1" in r.stdout:
            sys.exit("FAILED: FSDP_EMU_DROP_WAIT='%s': exit %d, not 1 naming the variable\n%s"
                     % (bad, r.returncode, r.stdout))

    caught = total = 0
    for (world, accum, flags), plan in zip(cases, plans):
        c, w = drop_each(fsdp_run, plan, env, work, world, accum, " ".join(flags))
        caught += c
        total += w
    print("dropped waits: %d of %d caught; stream-order reports in normal runs: 0"
          % (caught, total))
    with open(result, "w") as f:
        json.dump({"waits": total, "caught": caught, "normal_reports": 0}, f)
    if caught != total:
        sys.exit("FAILED: %d dropped waits not reported" % (total - caught))


def drop_each(fsdp_run, plan, env, work, world, accum, flags):
    """The normal run's waits, then each dropped in turn: (caught, waits)."""
    tag = "w%d-accum%d%s-" % (world, accum, "-hpz" if flags else "")
    what = "world %d --grad-accum %d%s" % (world, accum, " " + flags if flags else "")
    status, out0, out1 = run_ranks(fsdp_run, plan, dict(env, FSDP_EMU_DROP_WAIT="list"), work,
                                   tag + "list", False, world)
    normal_reports = (out0 + out1).count("stream-order race")
    if any(status) or normal_reports:
        sys.exit("FAILED: the normal run (%s): exit %s, %d stream-order reports\n"
                 "%s\n%s" % (what, status, normal_reports, out0, out1))
    lines = [l for l in out0.splitlines() if l.startswith("cuda-emu: wait ")]
    names, phase = [], "micro_step"
    for l in lines:
        if "optimizer." in l:
            phase = "optimizer"
        elif "micro_step." in l:
            phase = "micro_step"
        names.append(label(l, phase))
    w = len(names) // 2
    if w == 0 or names[:w] != names[w:]:
        sys.exit("FAILED: the two steps issued different waits:\n" + "\n".join(lines))

    caught = 0
    for n in range(1, w + 1):
        name = names[n - 1]
        env_n = dict(env, FSDP_EMU_DROP_WAIT=str(n))
        # The first drop runs to its end: the exit status, and the summary.
        full = n == 1
        status, out0, out1 = run_ranks(fsdp_run, plan, env_n, work, tag + "drop%d" % n, not full,
                                       world)
        dropped = "FSDP_EMU_DROP_WAIT=%d: dropped wait %d: " % (n, n)
        if dropped not in out0:
            sys.exit("FAILED: wait %d (%s) was not dropped\n%s" % (n, name, out0))
        if "stream-order race" not in out0 + out1:
            print("%s: wait %d of a step (%s): dropped, and no stream-order report"
                  % (what, n, name))
            continue
        if full and (status[0] == 0 or "the stream-order checker found" not in out0):
            sys.exit("FAILED: wait %d (%s): reported, but exit %s or no summary\n%s"
                     % (n, name, status, out0))
        first = next(l for l in out0.splitlines() if "stream-order race" in l)
        print("%s: wait %d of a step (%s): dropped, reported: %s"
              % (what, n, name, first[:300]))
        caught += 1
    return caught, w


if __name__ == "__main__":
    main()
