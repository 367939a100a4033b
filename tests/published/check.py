#!/usr/bin/env python3
"""The cost model against published FSDP training runs.

usage: check.py BIN_DIR WORK_DIR [--markdown]

Plans each run of runs.json (next to this file) with fsdp-plan on its
published cluster and settings, and checks, for every gated run, that the
predicted tokens/s per GPU is within 15% of the published figure, and for
every run that the plan fits the device exactly when the run did (a run
that trained fits; one its authors say did not fit does not). Prints a table
of published against predicted figures (--markdown: the table of
docs/cost-model.md) and exits 1 if any check fails.
"""
import json
import os
import subprocess
import sys

TOLERANCE = 0.15


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    bindir, work = sys.argv[1], sys.argv[2]
    markdown = "--markdown" in sys.argv[3:]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    spec = json.load(open(os.path.join(here, "runs.json")))
    os.makedirs(work, exist_ok=True)
    failures, rows = [], []
    for i, run in enumerate(spec["runs"]):
        report = os.path.join(work, "run%d.json" % i)
        if os.path.exists(report):
            os.remove(report)
        cmd = [os.path.join(bindir, "fsdp-plan"), os.path.join(root, run["model"]),
               "--cluster", os.path.join(here, run["cluster"]), "--report", report,
               *run["flags"]]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if not os.path.exists(report):
            failures.append("%s: fsdp-plan wrote no report (exit %d): %s"
                            % (run["name"], proc.returncode, proc.stderr.strip()))
            continue
        r = json.load(open(report))
        world = int(run["flags"][run["flags"].index("--world-size") + 1])
        fits = bool(r["fits"])
        # A plan over the device memory exits 1 with the report written.
        if proc.returncode != (0 if fits else 1):
            failures.append("%s: fsdp-plan exit %d with fits=%s" % (run["name"], proc.returncode, fits))
        peak = r["memory"]["peak_bytes"] / 2**30
        if fits != run["fits"]:
            failures.append("%s: planned %s (peak %.1f GiB), published %s"
                            % (run["name"], "fits" if fits else "does not fit", peak,
                               "trained" if run["fits"] else "does not fit"))
        pub = run.get("tokens_per_s_per_gpu")
        pred = r["predicted"]["tokens_per_s"] / world
        ratio = pred / pub if pub else None
        gated = run.get("gated", True) and pub is not None
        if gated and abs(ratio - 1) > TOLERANCE:
            failures.append("%s: predicted %.0f tokens/s per GPU, published %d (ratio %.3f, outside %d%%)"
                            % (run["name"], pred, pub, ratio, TOLERANCE * 100))
        if run.get("memory_gib") is not None and peak > run["memory_gib"]:
            # PyTorch's figure includes its allocator's reserve: a plan
            # needing more than the run measured is wrong.
            failures.append("%s: planned peak %.1f GiB above the published %.1f GiB"
                            % (run["name"], peak, run["memory_gib"]))
        rows.append((run, pub, pred, ratio, gated, peak, fits))

    if markdown:
        print("| run | source | published tokens/s/GPU | predicted | ratio | peak GiB (published) | fits |")
        print("|---|---|---|---|---|---|---|")
    for run, pub, pred, ratio, gated, peak, fits in rows:
        mem = "%.1f" % peak + (" (%.1f)" % run["memory_gib"] if run.get("memory_gib") else "")
        if markdown:
            print("| %s | %s | %s | %s | %s | %s | %s |" % (
                run["name"], run["source"], "%d" % pub if pub else "-",
                "%.0f" % pred if pub else "-",
                ("%.3f" % ratio + ("" if gated else " (not gated)")) if ratio else "-",
                mem, "yes" if fits else "no"))
        else:
            print("%-52s published %6s predicted %6s ratio %6s%s peak %s GiB %s" % (
                run["name"], pub if pub else "-", "%.0f" % pred if pub else "-",
                "%.3f" % ratio if ratio else "-", "" if gated or not pub else " (not gated)",
                mem, "fits" if fits else "does not fit"))
            if not gated and pub:
                print("    not gated: " + run["why_not_gated"])
    gatedRatios = sorted(abs(x[3] - 1) for x in rows if x[4])
    if gatedRatios:
        print("gated runs: %d, median |ratio - 1| %.3f, worst %.3f"
              % (len(gatedRatios), gatedRatios[len(gatedRatios) // 2], gatedRatios[-1]))
    for f in failures:
        print("FAIL: " + f)
    print("%d of %d runs pass" % (len(rows) - len({f.split(':')[0] for f in failures}), len(spec["runs"])))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
