#!/usr/bin/env bash
# A rank's private memory does not grow with the token file: a 4-rank MPI
# run over a 2 GB token file (sparse: every token 0) against the same run
# over a 2 MB one, each rank's peak RssAnon (/proc/PID/status: anonymous
# pages; a mapped file's pages are the page cache's) sampled every 50 ms.
# usage: bench/data-memory.sh [BUILD_DIR] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-build}/bin"
STEPS="${2:-40}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
truncate -s 2G "$WORK/big.bin"
truncate -s 2M "$WORK/small.bin"
"$BIN/fsdp-plan" models/gpt2-tiny/config.json --world-size 4 --micro-batch 4 --seq-len 64 \
  -o "$WORK/plan.json" >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for data in small big; do
  mpirun -np 4 --oversubscribe "$BIN/fsdp-run" "$WORK/plan.json" --backend mpi \
    --data "$WORK/$data.bin" --shuffle 1 --steps "$STEPS" --quiet &
  LAUNCHER=$!
  declare -A PEAK=()
  while kill -0 "$LAUNCHER" 2>/dev/null; do
    for pid in $(pgrep -f "^[^ ]*fsdp-run $WORK/plan.json" || true); do
      kb=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
      [ -n "$kb" ] && [ "$kb" -gt "${PEAK[$pid]:-0}" ] && PEAK[$pid]=$kb
    done
    sleep 0.05
  done
  wait "$LAUNCHER"
  line="$data ($(stat -c %s "$WORK/$data.bin") bytes): peak RssAnon per rank"
  for pid in "${!PEAK[@]}"; do line+=" $(awk -v k="${PEAK[$pid]}" 'BEGIN {printf "%.1f", k / 1024}') MiB"; done
  echo "$line"
  eval "PEAKS_$data=\"${PEAK[*]}\""
  unset PEAK
done
python3 - "$PEAKS_small" "$PEAKS_big" <<'PY'
import sys
small, big = (sorted(int(v) for v in a.split()) for a in sys.argv[1:3])
print("largest rank: %.1f MiB (2 MB file), %.1f MiB (2 GB file): %+.1f MiB"
      % (small[-1] / 1024, big[-1] / 1024, (big[-1] - small[-1]) / 1024))
PY
