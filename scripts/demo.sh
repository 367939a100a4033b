#!/usr/bin/env bash
# The main job: install, build, and plan real models ahead of time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
run() { echo; echo "== $*"; "$@"; }
run build/bin/fsdp-plan models/Meta-Llama-3-8B/config.json --world-size 64 \
  --micro-batch 1 --seq-len 4096 --memory-budget 80GiB --summary
run build/bin/fsdp-plan models/gpt2-tiny/config.json --world-size 4 --micro-batch 2 \
  --seq-len 64 --summary -o build/gpt2-tiny.plan.json
echo
echo "The lowered program for the runtime: build/gpt2-tiny.plan.json"
