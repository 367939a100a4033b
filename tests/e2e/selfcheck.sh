#!/bin/bash
# Self-check of the PyTorch reference side of the end-to-end tests.
#   (a) safetensors round trips and exact layout; model pieces against independent formulations
#   (b) gpt2-tiny and llama-tiny: 3 steps in f32 and in f64 from the same weights and data agree
#   (c) --grad-accum 2 gives the losses and weights of --grad-accum 1
# plus --clip-grad-norm and --bf16-params, and the command-line entry points.
# Bounds: measured from the f32 run's gap to f64 (bounds.py) or analysed (0).
# usage: tests/e2e/selfcheck.sh [WORKDIR]   (default: a fresh /tmp/fsdp-e2e-selfcheck.*)
set -euo pipefail
PY=/usr/bin/python3
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
W="${1:-$(mktemp -d /tmp/fsdp-e2e-selfcheck.XXXXXX)}"
mkdir -p "$W"
echo "workdir: $W"

$PY "$HERE/make_data.py" "$W/gpl3.bin" --text /usr/share/common-licenses/GPL-3
$PY "$HERE/make_data.py" "$W/random.bin" --random 5000 --vocab 503 --seed 7
# Everything else in one process (torch imports once).
$PY "$HERE/selfcheck.py" "$W"

echo "== command line: make_weights.py, reference.py, compare.py as separate processes"
$PY "$HERE/make_weights.py" "$ROOT/models/llama-tiny/config.json" "$W/cli.init.safetensors" --seed 1234
cmp "$W/cli.init.safetensors" "$W/llama-tiny.init.safetensors"
$PY "$HERE/reference.py" --config "$ROOT/models/llama-tiny/config.json" --weights "$W/cli.init.safetensors" \
  --data "$W/gpl3.bin" --steps 3 --global-batch 4 --seq-len 16 --dtype f32 \
  --metrics "$W/cli.jsonl" --save-weights "$W/cli.safetensors"
# a separate process gives bit-identical results
$PY "$HERE/compare.py" --metrics "$W/cli.jsonl" "$W/llama-tiny.f32.jsonl" --loss-tol 0 --grad-norm-tol 0 \
  --weights "$W/cli.safetensors" "$W/llama-tiny.f32.safetensors" --weight-tol 0
# compare.py exits 1, naming the step / tensor, on a mismatch: clipping is
# outside the bounds measured from the f32 run's gap to f64
rc=0
$PY "$HERE/compare.py" --metrics "$W/llama-tiny.f32.jsonl" "$W/llama-tiny.f32-clip.jsonl" \
  --weights "$W/llama-tiny.f32.safetensors" "$W/llama-tiny.f32-clip.safetensors" \
  --bound-from "$W/llama-tiny.f64.jsonl" "$W/llama-tiny.f64.safetensors" > /dev/null 2> "$W/fail.txt" || rc=$?
if [ "$rc" != 1 ]; then
  echo "FAIL: compare.py gave $rc on different runs, not 1"; cat "$W/fail.txt"; exit 1
fi
echo "  (expected) compare.py rc=1:"; sed 's/^/    /' "$W/fail.txt" | head -4
echo "selfcheck: all OK"
