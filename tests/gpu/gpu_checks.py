#!/usr/bin/env python3
"""fsdp-run --backend nccl against --backend threads on a GPU machine.

usage: gpu_checks.py BIN STAGE WORK RESULTS

BIN holds fsdp-run; STAGE is tests/gpu/stage.sh's folder (plans/, data.bin);
WORK a scratch folder; RESULTS where train.json (and a small trace) go.

For each small model, the same plan, weights (tests/e2e/make_weights.py) and
data run on the threads backend and on the nccl backend (world size 1, one
GPU); per step the losses must agree to LOSS_TOL relative (grad norms are
reported). Then, on the GPU only: a checkpoint resumed (losses of the resumed
steps against the uninterrupted run), the final weights against the threads
backend's (tests/e2e/compare.py), a measured trace, and two ranks on one GPU
through the id file, which NCCL refuses: both must stop with an error, not
hang. Prints one line per check; exits 1 if a check failed.

RESULTS/train.json is rewritten after every case and check, so a run stopped
by run-all.sh's timeout leaves what it had. With FSDP_GPU_DEADLINE (seconds
since the epoch, from run-all.sh) every command's timeout keeps within it,
less BENCH_RESERVE seconds for the benchmark after this script; a check with
no time left is recorded as skipped (and fails the run).
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
E2E = os.path.join(ROOT, "tests", "e2e")
PY = sys.executable
LOSS_TOL = 1e-4
RUN_TIMEOUT = 120  # one fsdp-run of a tiny model takes seconds
BENCH_RESERVE = 90
DEADLINE = float(os.environ.get("FSDP_GPU_DEADLINE", "0") or 0)


def left():
    """Seconds this script may still use (a large number without a deadline)."""
    return DEADLINE - BENCH_RESERVE - time.time() if DEADLINE else 1e9


def run(cmd, timeout=RUN_TIMEOUT, env=None):
    timeout = max(5, min(timeout, left()))
    t0 = time.time()
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env)
        code, out = r.returncode, r.stdout
    except subprocess.TimeoutExpired as e:
        code, out = 124, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    print("$ " + " ".join(cmd) + "  [exit %d, %.1f s]" % (code, time.time() - t0), flush=True)
    if out.strip():
        print(out.rstrip()[-4000:], flush=True)
    return code, out


def metrics(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    return rows


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def compare(a_rows, b_rows, tol=LOSS_TOL, steps=None):
    a = {r["step"]: r for r in a_rows}
    b = {r["step"]: r for r in b_rows}
    want = steps or sorted(a)
    if not want or any(s not in a or s not in b for s in want):
        return {"ok": False, "why": "missing steps", "steps_a": sorted(a), "steps_b": sorted(b)}
    loss = [rel(a[s]["loss"], b[s]["loss"]) for s in want]
    gn = [rel(a[s]["grad_norm"], b[s]["grad_norm"]) for s in want]
    return {"ok": max(loss) <= tol, "tolerance": tol, "steps": len(want),
            "max_rel_loss": max(loss), "max_rel_grad_norm": max(gn),
            "first_loss": [a[want[0]]["loss"], b[want[0]]["loss"]],
            "last_loss": [a[want[-1]]["loss"], b[want[-1]]["loss"]]}


def main():
    bin_dir, stage, work, results = sys.argv[1:5]
    run_bin = os.path.join(bin_dir, "fsdp-run")
    plans = os.path.join(stage, "plans")
    data = os.path.join(stage, "data.bin")
    os.makedirs(work, exist_ok=True)
    os.makedirs(results, exist_ok=True)
    out = {"cases": {}, "checks": {}}
    failed = []

    def save():
        out["failed"] = failed
        out["ok"] = not failed
        tmp = os.path.join(results, "train.json.tmp")
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, os.path.join(results, "train.json"))

    def out_of_time(kind, name):
        if left() >= 15:
            return False
        out[kind][name] = {"ok": False, "why": "skipped: out of time"}
        failed.append(name)
        print("%s %s: SKIPPED (out of time)" % ("CASE" if kind == "cases" else "CHECK", name),
              flush=True)
        save()
        return True

    # The last two also take the device executor's other paths: gradient
    # accumulation (inputs double-buffered, a loss a micro-step) and clipping
    # (the optimizer waits on the host for the gradient norm mid-phase).
    cases = [
        ("gpt2-tiny", "gpt2-tiny", 20, []),
        ("llama-tiny", "llama-tiny", 20, []),
        ("gpt2-tiny-bf16", "gpt2-tiny", 10, []),  # planned with --grad-accum 3
        ("llama-tiny-ckpt", "llama-tiny", 10, ["--clip-grad-norm", "0.5"]),
    ]
    weights = {}
    for name, model, steps, extra in cases:
        if out_of_time("cases", name):
            continue
        plan = os.path.join(plans, name + ".json")
        if model not in weights:
            w = os.path.join(work, model + ".safetensors")
            code, _ = run([PY, os.path.join(E2E, "make_weights.py"),
                           os.path.join(ROOT, "models", model, "config.json"), w, "--seed", "1"])
            weights[model] = w if code == 0 else None
        w = weights[model]
        if not w:
            out["cases"][name] = {"ok": False, "why": "make_weights.py failed"}
            failed.append(name)
            continue
        res = {}
        for backend in ("threads", "nccl"):
            m = os.path.join(work, "%s.%s.jsonl" % (name, backend))
            # The same plan, for each backend's kernels (stage.sh).
            prog = plan if backend == "nccl" else os.path.join(plans, name + "-cpu.json")
            code, text = run([run_bin, prog, "--backend", backend, "--weights", w, "--data", data,
                              "--steps", str(steps), "--metrics", m,
                              "--save-weights", os.path.join(work, "%s.%s.safetensors" % (name, backend))]
                             + extra)
            res[backend] = {"exit": code, "metrics": metrics(m),
                            "tail": text.strip().splitlines()[-2:] if text.strip() else []}
        case = {"threads_exit": res["threads"]["exit"], "nccl_exit": res["nccl"]["exit"],
                "nccl_tail": res["nccl"]["tail"]}
        if res["threads"]["exit"] == 0 and res["nccl"]["exit"] == 0:
            case.update(compare(res["threads"]["metrics"], res["nccl"]["metrics"]))
            last = res["nccl"]["metrics"][-1] if res["nccl"]["metrics"] else {}
            case["nccl_peak_bytes"] = last.get("peak_bytes")
            case["predicted_peak_bytes"] = last.get("predicted_peak_bytes")
            case["nccl_outside_arena_bytes"] = last.get("outside_arena_bytes")
            case["peak_exact"] = last.get("peak_bytes") == last.get("predicted_peak_bytes")
            code, text = run([PY, os.path.join(E2E, "compare.py"), "--weights",
                              os.path.join(work, "%s.threads.safetensors" % name),
                              os.path.join(work, "%s.nccl.safetensors" % name),
                              "--weight-tol", "1e-3"])
            case["final_weights_within_1e-3"] = code == 0
            case["final_weights_report"] = text.strip().splitlines()[-3:]
        else:
            case["ok"] = False
        out["cases"][name] = case
        print("CASE %s: %s" % (name, "ok" if case.get("ok") else "FAILED"), flush=True)
        if not case.get("ok"):
            failed.append(name)
        save()

    # Resume on the GPU: 5 steps and a checkpoint, then steps 6..10 from it,
    # against 10 uninterrupted steps.
    plan = os.path.join(plans, "llama-tiny.json")
    w = weights.get("llama-tiny")
    ck = os.path.join(work, "ckpt")
    if not out_of_time("checks", "resume"):
        resume_check(run_bin, plan, data, w, ck, work, out, failed)
        save()

    if not out_of_time("checks", "trace"):
        trace_check(run_bin, plans, data, results, out, failed)
        save()

    if not out_of_time("checks", "two_ranks_one_gpu"):
        two_ranks_check(run_bin, plans, data, work, out, failed)
    save()
    return 0 if not failed else 1


def resume_check(run_bin, plan, data, w, ck, work, out, failed):
    full, part = os.path.join(work, "resume.full.jsonl"), os.path.join(work, "resume.part.jsonl")
    c1, _ = run([run_bin, plan, "--backend", "nccl", "--weights", w or "", "--data", data,
                 "--steps", "10", "--metrics", full, "--quiet"])
    c2, _ = run([run_bin, plan, "--backend", "nccl", "--weights", w or "", "--data", data,
                 "--steps", "5", "--save", ck, "--quiet"])
    c3, _ = run([run_bin, plan, "--backend", "nccl", "--data", data, "--steps", "10",
                 "--resume", ck, "--metrics", part, "--quiet"])
    chk = {"exits": [c1, c2, c3]}
    if c1 == c2 == c3 == 0:
        chk.update(compare(metrics(full), metrics(part), steps=list(range(6, 11))))
    else:
        chk["ok"] = False
    out["checks"]["resume"] = chk
    print("CHECK resume: %s" % ("ok" if chk.get("ok") else "FAILED"), flush=True)
    if not chk.get("ok"):
        failed.append("resume")


def trace_check(run_bin, plans, data, results, out, failed):
    # A measured trace on the GPU: both streams, every step.
    trace = os.path.join(results, "trace-gpt2-tiny.json")
    code, _ = run([run_bin, os.path.join(plans, "gpt2-tiny.json"), "--backend", "nccl",
                   "--data", data, "--steps", "3", "--trace", trace, "--quiet"])
    chk = {"exit": code}
    try:
        ev = json.load(open(trace))["traceEvents"]
        xs = [e for e in ev if e.get("ph") == "X"]
        chk.update({"events": len(xs), "compute": sum(e["tid"] == 0 for e in xs),
                    "comm": sum(e["tid"] == 1 for e in xs),
                    "steps": sorted({e["args"]["step"] for e in xs}),
                    "negative_durations": sum(e["dur"] < 0 for e in xs)})
        chk["ok"] = code == 0 and chk["compute"] > 0 and chk["comm"] > 0 and \
            chk["steps"] == [0, 1, 2] and chk["negative_durations"] == 0
    except (OSError, ValueError, KeyError) as e:
        chk.update({"ok": False, "why": str(e)})
    out["checks"]["trace"] = chk
    print("CHECK trace: %s" % ("ok" if chk.get("ok") else "FAILED"), flush=True)
    if not chk.get("ok"):
        failed.append("trace")


def two_ranks_check(run_bin, plans, data, work, out, failed):
    # Two ranks on one GPU through the id file: NCCL refuses a GPU shared by
    # two ranks of a communicator; both processes must exit non-zero with an
    # error line, well before the 60 s the test allows them (no hang).
    idf = os.path.join(work, "nccl.id")
    for f in (idf, idf + ".failed"):
        if os.path.exists(f):
            os.remove(f)
    plan2 = os.path.join(plans, "llama-tiny-2.json")
    t0 = time.time()
    limit = str(int(max(10, min(60, left()))))
    procs = [subprocess.Popen(["timeout", "-k", "5", limit, run_bin, plan2, "--backend", "nccl",
                               "--rank", str(r), "--nccl-id-file", idf, "--nccl-timeout", "30",
                               "--data", data, "--steps", "2"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    outs = [p.communicate()[0] for p in procs]
    codes = [p.returncode for p in procs]
    chk = {"exits": codes, "seconds": round(time.time() - t0, 1),
           "output": [o.strip().splitlines()[-3:] for o in outs]}
    # Either NCCL refused (both non-zero, none timed out), or it ran (0, 0).
    chk["ok"] = not {124, 137} & set(codes) and (all(c != 0 for c in codes) or codes == [0, 0])
    chk["refused"] = all(c != 0 for c in codes)
    out["checks"]["two_ranks_one_gpu"] = chk
    print("CHECK two ranks on one GPU: %s %s" % ("ok" if chk["ok"] else "FAILED", codes), flush=True)
    if not chk["ok"]:
        failed.append("two_ranks_one_gpu")


if __name__ == "__main__":
    sys.exit(main())
