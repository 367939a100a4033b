#!/usr/bin/env bash
# On a GPU machine (NVIDIA, CUDA 13 nvcc, CMake, ninja, PyTorch with CUDA as
# python3; no LLVM/MLIR needed), with gpu-stage/ from tests/gpu/stage.sh
# carried into the repository root (tests/gpu/preflight.sh has checked on
# the development machine that the stage is all the build needs):
#
#   1. builds the runtime, fsdp-run (with --backend nccl) and the GPU kernel
#      tests, runtime-only, for CUDA_ARCH (90): tests/gpu/build.sh;
#   2. runs the kernel tests (tests/gpu/KernelsGpuTest.cpp) with
#      FSDP_REQUIRE_GPU=1: no usable GPU is a failure, not a skip;
#   3. trains the small GPT-2 and LLaMA with --backend nccl and --backend
#      threads on the same plan, weights and data and compares the losses
#      (tests/gpu/gpu_checks.py: 1e-4 relative), with resume, the final
#      weights, a trace, and two ranks on one GPU (must fail, not hang);
#   4. benchmarks GPT-2 medium (bf16 parameters) against PyTorch FSDP2
#      (tests/gpu/bench_fsdp2.py): tokens/s and MFU;
#   5. compute-sanitizer memcheck, then racecheck, over the attention and
#      norm kernel tests.
#
# Results under $OUT (or ./gpu-results): summary.json, build.log,
# kernels.log, kernels-gtest.json, train.log, train.json,
# trace-gpt2-tiny.json, bench.json, sanitizer.log (the benchmark's log is in
# train.log). Each stage's time limit is at most its cap (build 200 s,
# kernels 40, training 150, benchmark 90, sanitizer 60: 540 s together,
# under the device tool's 600 s a command), less when earlier stages ran
# long and the later ones' caps must still fit in BUDGET (default 540);
# summary.json is rewritten after every stage, so a run cut short still
# says how far it got.
#
#   tests/gpu/run-all.sh
#   CUDA_ARCH=80 JOBS=16 STAGE=/path/gpu-stage tests/gpu/run-all.sh
#   NCCL_HOME=/opt/nccl tests/gpu/run-all.sh      # include/nccl.h, lib/libnccl.so*
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STAGE="${STAGE:-$ROOT/gpu-stage}"
RESULTS="${OUT:-$PWD/gpu-results}"
BUILD_DIR="${BUILD_DIR:-/tmp/fsdp-gpu-build}"
WORK="${WORK:-/tmp/fsdp-gpu-work}"
CUDA_ARCH="${CUDA_ARCH:-90}"
JOBS="${JOBS:-$(nproc)}"
PY="${PYTHON:-python3}"
BUDGET="${BUDGET:-540}"
mkdir -p "$RESULTS" "$WORK"
export PYTHONUNBUFFERED=1
start=$(date +%s)
build_status=null kernels=null train=null bench=null sanitizer=null

# Stage caps in seconds, in order; they add up to at most 540.
CAP_BUILD=200 CAP_KERNELS=40 CAP_TRAIN=150 CAP_BENCH=90 CAP_SANITIZER=60

summary() { # stage ok
  printf '{"stage": "%s", "ok": %s, "seconds": %d, "build_exit": %s, "kernel_tests_exit": %s, "training_checks_exit": %s, "benchmark_exit": %s, "sanitizer_exit": %s}\n' \
    "$1" "$2" "$(( $(date +%s) - start ))" "$build_status" "$kernels" "$train" "$bench" \
    "$sanitizer" > "$RESULTS/summary.json"
  cat "$RESULTS/summary.json"
}
# Seconds a stage may take: its cap, or what is left of the budget after the
# reserve kept for the stages after it (at least 20).
limit() { # cap reserve
  local left=$(( BUDGET - ($(date +%s) - start) - $2 ))
  [ "$left" -gt "$1" ] && left=$1
  [ "$left" -lt 20 ] && left=20
  echo "$left"
}
ok_word() { [ "$1" -eq 0 ] && echo true || echo false; }
# The deadline the Python stages budget against (seconds since the epoch):
# the sanitizer's cap is kept for after them.
export FSDP_GPU_DEADLINE=$(( start + BUDGET - CAP_SANITIZER ))

if [ ! -d "$STAGE/plans" ]; then
  echo "run-all.sh: no $STAGE/plans: run tests/gpu/stage.sh on the development machine and carry gpu-stage" >&2
  summary stage false
  exit 1
fi

# --- 1. build (tests/gpu/build.sh, as tests/gpu/preflight.sh ran it) ---------
# The staged OpenBLAS's own needs (libgfortran), after the system's: for
# every run below.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$STAGE/lib"
STAGE="$STAGE" BUILD_DIR="$BUILD_DIR" JOBS="$JOBS" CUDA_ARCH="$CUDA_ARCH" PYTHON="$PY" \
  BUILD_TIMEOUT="$(limit $CAP_BUILD $(( CAP_KERNELS + CAP_TRAIN + CAP_BENCH + CAP_SANITIZER )))" \
  "$ROOT/tests/gpu/build.sh" > "$RESULTS/build.log" 2>&1
build_status=$?
echo "build: exit $build_status, $(( $(date +%s) - start )) s"
if [ $build_status -ne 0 ]; then
  tail -40 "$RESULTS/build.log"
  summary build false
  exit 1
fi
summary build true

# --- 2. kernel tests ----------------------------------------------------------
FSDP_REQUIRE_GPU=1 timeout -k 5 "$(limit $CAP_KERNELS $(( CAP_TRAIN + CAP_BENCH + CAP_SANITIZER )))" \
  "$BUILD_DIR/bin/fsdp-gpu-tests" --gtest_output="json:$RESULTS/kernels-gtest.json" \
  > "$RESULTS/kernels.log" 2>&1
kernels=$?
summary kernels "$(ok_word $kernels)"
echo "kernel tests: exit $kernels ($(grep -c '^\[       OK \]' "$RESULTS/kernels.log") ok, $(grep -c '^\[  FAILED  \]' "$RESULTS/kernels.log") failed lines, $(grep -c '^\[  SKIPPED \]' "$RESULTS/kernels.log") skipped)"

# --- 3. training: nccl against threads --------------------------------------
timeout -k 5 "$(limit $CAP_TRAIN $(( CAP_BENCH + CAP_SANITIZER )))" "$PY" "$ROOT/tests/gpu/gpu_checks.py" \
  "$BUILD_DIR/bin" "$STAGE" "$WORK" "$RESULTS" > "$RESULTS/train.log" 2>&1
train=$?
summary training "$(ok_word $train)"
grep -E '^(CASE|CHECK)' "$RESULTS/train.log"
echo "training checks: exit $train"

# --- 4. benchmark -----------------------------------------------------------
timeout -k 5 "$(limit $CAP_BENCH $CAP_SANITIZER)" "$PY" "$ROOT/tests/gpu/bench_fsdp2.py" \
  "$BUILD_DIR/bin" "$STAGE" "$WORK" "$RESULTS" >> "$RESULTS/train.log" 2>&1
bench=$?
summary benchmark "$(ok_word $bench)"
grep -E '^(fsdp|pytorch_fsdp2):' "$RESULTS/train.log"
echo "benchmark: exit $bench"

# --- 5. compute-sanitizer: memcheck, then racecheck ----------------------------
# Over the kernels with shared memory and warp shuffles (attention, norms);
# half the stage's time each.
cuda_bin="$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")"
SANITIZER="$(command -v compute-sanitizer || true)"
for c in "$cuda_bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer \
         /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -z "$SANITIZER" ] && [ -x "$c" ] && SANITIZER="$c"
done
half=$(( $(limit $CAP_SANITIZER 0) / 2 ))
{
  if [ -z "$SANITIZER" ]; then
    echo "run-all.sh: compute-sanitizer not found (PATH, the toolkit's bin/)"
    sanitizer=127
  else
    sanitizer=0
    for tool in memcheck racecheck; do
      echo "== compute-sanitizer --tool $tool (at most $half s)"
      FSDP_REQUIRE_GPU=1 timeout -k 5 "$half" "$SANITIZER" --tool "$tool" --error-exitcode 1 \
        "$BUILD_DIR/bin/fsdp-gpu-tests" \
        --gtest_filter='KernelsGpu.CausalAttention*:KernelsGpu.LayerNorm:KernelsGpu.RmsNorm'
      rc=$?
      echo "== $tool: exit $rc"
      [ $rc -ne 0 ] && sanitizer=$rc
    done
  fi
} > "$RESULTS/sanitizer.log" 2>&1
grep -E '^== |ERROR SUMMARY|RACECHECK SUMMARY|not found' "$RESULTS/sanitizer.log"
echo "sanitizer: exit $sanitizer"

ok=false
[ $kernels -eq 0 ] && [ $train -eq 0 ] && [ $bench -eq 0 ] && [ $sanitizer -eq 0 ] && ok=true
summary done $ok
$ok
