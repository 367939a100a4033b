"""wrap-auto-flags.test: the plan --wrap auto --micro-batch max chose, planned
again with its settings given, fits at its micro-batch and not at one more.

usage: wrap-auto-flags.test.py REPORT BUDGET MODEL
"""
import json
import subprocess
import sys

report_path, budget, model = sys.argv[1:4]
r = json.load(open(report_path))
b = r["micro_batch"]


def plan(micro_batch):
    args = ["fsdp-plan", model, "--world-size", str(r["world_size"]),
            "--seq-len", str(r["seq_len"]), "--micro-batch", str(micro_batch),
            "--strategy", r["strategy"], "--wrap", r["wrap"],
            "--forward-prefetch", str(r["forward_prefetch"]),
            "--backward-prefetch", r["backward_prefetch"],
            "--activation-checkpointing", r["activation_checkpointing"],
            "--memory-budget", budget]
    if r["strategy"] == "hybrid-shard":
        args += ["--shard-size", str(r["shard_size"])]
    return subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


# Checkpointing the first N blocks has no flag: the plan replanned must
# checkpoint none (as on gpt2-tiny at 12 MiB).
assert r["activation_checkpointing"] == "none", r["activation_checkpointing"]
assert plan(b) == 0, f"the chosen plan does not fit at micro-batch {b}"
assert plan(b + 1) == 1, f"the chosen plan fits at micro-batch {b + 1} too"
print(f"fits at {b}; not at {b + 1}")
