#!/usr/bin/env bash
# The main job: install, build, and plan a real model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo
echo "== fsdp-plan models/Meta-Llama-3-8B/config.json --summary"
build/bin/fsdp-plan models/Meta-Llama-3-8B/config.json --summary
echo
echo "== fsdp-plan models/gpt2/config.json --no-dropout --summary"
build/bin/fsdp-plan models/gpt2/config.json --no-dropout --summary
