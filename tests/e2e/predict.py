#!/usr/bin/env python3
"""Prediction against measurement on the threads backend, after calibration.

Calibrates this machine (fsdp-calibrate), plans the small GPT-2 and LLaMA at
world sizes 1, 2 and 4 with that cluster file, runs each plan, and checks
that the predicted step time is within 15% of the measured one (the median
step of a run, after the first, the lower of two runs; fsdp-calibrate
likewise takes medians) and that the measured peak equals the plan's.

usage: predict.py BIN_DIR WORK_DIR [--tolerance 0.15]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print("FAILED: " + " ".join(cmd) + "\n" + r.stdout)
        sys.exit(1)
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--tolerance", type=float, default=0.15)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cluster = os.path.join(args.work, "cluster.json")
    run([os.path.join(args.bin, "fsdp-calibrate"), "-o", cluster])
    data = os.path.join(args.work, "gpl3.bin")
    run([PY, os.path.join(HERE, "make_data.py"), data, "--text", "/usr/share/common-licenses/GPL-3"])
    failures = total = 0
    print("%-11s %5s %12s %12s %7s %s" % ("model", "world", "predicted", "measured", "ratio", "peak"))
    for model in ("gpt2-tiny", "llama-tiny"):
        config = os.path.join(ROOT, "models", model, "config.json")
        for world in (1, 2, 4):
            plan = os.path.join(args.work, "%s.%d.json" % (model, world))
            report = os.path.join(args.work, "%s.%d.report.json" % (model, world))
            run([os.path.join(args.bin, "fsdp-plan"), config, "--world-size", str(world),
                 "--micro-batch", str(16 // world), "--seq-len", "128", "--cluster", cluster,
                 "-o", plan, "--report", report])
            predicted = json.load(open(report))["predicted"]["step_time_s"]
            medians, exact = [], True
            for attempt in range(2):
                metrics = os.path.join(args.work, "%s.%d.%d.jsonl" % (model, world, attempt))
                run([os.path.join(args.bin, "fsdp-run"), plan, "--data", data, "--steps", "16",
                     "--metrics", metrics, "--quiet"])
                steps = [json.loads(l) for l in open(metrics)]
                medians.append(statistics.median(s["step_time_s"] for s in steps[1:]))
                exact &= all(s["peak_bytes"] == s["predicted_peak_bytes"] for s in steps)
            measured = min(medians)
            ratio = measured / predicted
            ok = abs(ratio - 1) <= args.tolerance and exact
            total += 1
            failures += not ok
            print("%-11s %5d %10.2f ms %10.2f ms %7.2f %s %s" % (
                model, world, predicted * 1e3, measured * 1e3, ratio,
                "exact" if exact else "DIFFERENT", "ok" if ok else "FAILED"))
    print("%d passed, %d failed" % (total - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
