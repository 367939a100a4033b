#!/usr/bin/env bash
# ThreadSanitizer over the threads backend: fsdp-run built runtime-only (no
# MLIR) with -fsanitize=thread into $TSAN_DIR (default build-tsan), then run
# on programs that the normal build's fsdp-plan ($BIN, default build/bin)
# writes: every strategy, bf16 gathers and reductions, accumulation and
# clipping, checkpoints saved and resumed, eval, a trace. Any report fails the
# run (halt_on_error); the last line says how many runs were clean.
#
#   scripts/tsan.sh            # after scripts/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
BIN="${BIN:-$ROOT/build/bin}"
TSAN_DIR="${TSAN_DIR:-$ROOT/build-tsan}"
JOBS="${JOBS:-$(nproc)}"
[ -x "$BIN/fsdp-plan" ] || { echo "tsan.sh: no $BIN/fsdp-plan (run scripts/build.sh first)" >&2; exit 2; }

# No target_clones in the kernels: their ifunc resolvers run before
# ThreadSanitizer is set up (SIGSEGV at load).
flags="-fsanitize=thread -g -O1 -DFSDP_KERNELS_NO_CLONES"
if [ ! -f "$TSAN_DIR/build.ninja" ]; then
  cmake -G Ninja -S "$ROOT" -B "$TSAN_DIR" -DFSDP_RUNTIME_ONLY=ON -DFSDP_ENABLE_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" > "$TSAN_DIR.configure.log" 2>&1 ||
    { cat "$TSAN_DIR.configure.log"; exit 1; }
fi
ninja -C "$TSAN_DIR" -j "$JOBS" fsdp-run > /dev/null

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$ROOT/tests/e2e/make_data.py" "$work/data.bin" --text /usr/share/common-licenses/GPL-3 > /dev/null
plan() { "$BIN/fsdp-plan" "$ROOT/models/$1/config.json" --seq-len 16 "${@:2}" > /dev/null; }
plan gpt2-tiny --world-size 2 --micro-batch 2 -o "$work/full.json"
plan gpt2-tiny --world-size 4 --micro-batch 1 --strategy hybrid-shard --shard-size 2 \
  --param-dtype bf16 --reduce-dtype bf16 --grad-accum 2 -o "$work/hybrid.json"
plan llama-tiny --world-size 3 --micro-batch 1 --strategy shard-grad-op -o "$work/zero2.json"
plan gpt2-tiny --world-size 2 --micro-batch 2 --strategy no-shard \
  --activation-checkpointing blocks -o "$work/ddp.json"
# Tensor parallelism: the compute stream's tp collectives beside the comm
# stream's (sequence parallel at 2 x 2; GQA's shared pieces at tp 4).
plan llama-tiny --world-size 4 --tp 2 --micro-batch 2 -o "$work/tp2.json"
plan llama-tiny --world-size 4 --tp 4 --micro-batch 4 --sequence-parallel false -o "$work/tp4.json"

export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
runs=0
run() {
  if ! "$TSAN_DIR/bin/fsdp-run" "$@" --quiet > "$work/out.txt" 2>&1; then
    cat "$work/out.txt"
    echo "tsan.sh: FAILED: fsdp-run $*" >&2
    exit 1
  fi
  runs=$((runs + 1))
}
D=(--data "$work/data.bin")
run "$work/full.json" "${D[@]}" --steps 3 --save "$work/ck" --save-every 1 --trace "$work/t.json"
run "$work/full.json" "${D[@]}" --steps 5 --resume "$work/ck" --save "$work/ck" \
  --eval-data "$work/data.bin" --eval-every 2
run "$work/hybrid.json" "${D[@]}" --steps 3 --clip-grad-norm 0.5
run "$work/zero2.json" "${D[@]}" --steps 3 --lr-schedule cosine --warmup-steps 1
run "$work/ddp.json" "${D[@]}" --steps 6 --resume "$work/ck"
run "$work/tp2.json" "${D[@]}" --steps 3 --clip-grad-norm 0.5
run "$work/tp4.json" "${D[@]}" --steps 3
echo "tsan: $runs of $runs threads-backend runs clean (ThreadSanitizer, $TSAN_DIR/bin/fsdp-run)"
