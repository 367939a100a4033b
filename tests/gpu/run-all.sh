#!/usr/bin/env bash
# On a GPU machine (NVIDIA, CUDA 13 nvcc, CMake, ninja, PyTorch with CUDA as
# python3; no LLVM/MLIR needed), with gpu-stage/ from tests/gpu/stage.sh
# carried into the repository root. In about 8 minutes on 16 cores:
#
#   1. builds the runtime, fsdp-run (with --backend nccl) and the GPU kernel
#      tests, runtime-only (-DFSDP_RUNTIME_ONLY=ON), for CUDA_ARCH (90);
#   2. runs the kernel tests (tests/gpu/KernelsGpuTest.cpp);
#   3. trains the small GPT-2 and LLaMA with --backend nccl and --backend
#      threads on the same plan, weights and data and compares the losses
#      (tests/gpu/gpu_checks.py: 1e-4 relative), with resume, the final
#      weights, a trace, and two ranks on one GPU (must fail, not hang);
#   4. benchmarks GPT-2 medium (bf16 parameters) against PyTorch FSDP2
#      (tests/gpu/bench_fsdp2.py): tokens/s and MFU.
#
# Results under $OUT (or ./gpu-results), at most 8 files: summary.json,
# build.log, kernels.log, kernels-gtest.json, train.log, train.json,
# trace-gpt2-tiny.json, bench.json (the benchmark's log is in train.log).
# The whole run keeps within BUDGET seconds (default 540, under the device
# tool's 600 s a command): each stage's timeout is its cap or what is left
# after the later stages' reserve, and summary.json is rewritten after every
# stage, so a run cut short still says how far it got.
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
build_status=null kernels=null train=null bench=null

summary() { # stage ok
  printf '{"stage": "%s", "ok": %s, "seconds": %d, "build_exit": %s, "kernel_tests_exit": %s, "training_checks_exit": %s, "benchmark_exit": %s}\n' \
    "$1" "$2" "$(( $(date +%s) - start ))" "$build_status" "$kernels" "$train" "$bench" \
    > "$RESULTS/summary.json"
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
# The deadline the Python stages budget against (seconds since the epoch).
export FSDP_GPU_DEADLINE=$(( start + BUDGET ))

if [ ! -d "$STAGE/plans" ]; then
  echo "run-all.sh: no $STAGE/plans: run tests/gpu/stage.sh on the development machine and carry gpu-stage" >&2
  summary stage false
  exit 1
fi

# --- 1. build ---------------------------------------------------------------
# The staged OpenBLAS's own needs (libgfortran), after the system's: for the
# link and for every run.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$STAGE/lib"
NVCC="${NVCC:-}"
if [ -z "$NVCC" ]; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc; else NVCC="$(command -v nvcc || true)"; fi
fi
# NCCL: NCCL_HOME, the toolkit's, or the pip package nvidia-nccl-cu13.
nccl_inc="" nccl_lib=""
find_nccl() { # dir with include/ and lib/
  local d="$1"
  [ -f "$d/include/nccl.h" ] || return 1
  nccl_inc="$d/include"
  nccl_lib="$(ls "$d"/lib/libnccl.so "$d"/lib/libnccl.so.[0-9]* "$d"/lib64/libnccl.so "$d"/lib64/libnccl.so.[0-9]* 2>/dev/null | head -1)"
  [ -n "$nccl_lib" ]
}
cuda_root="$(dirname "$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")")"
# Any pip package under nvidia/ (the cu13 wheels' layout may differ from the
# cu12 ones' nvidia/nccl/{include,lib}): nccl.h and libnccl.so* wherever they are.
find_nccl_pip() {
  local d h l
  for d in $("$PY" -c 'import nvidia; print(*nvidia.__path__)' 2>/dev/null); do
    h="$(find "$d" -name nccl.h 2>/dev/null | head -1)"
    l="$(find "$d" -name 'libnccl.so*' 2>/dev/null | sort | head -1)"
    if [ -n "$h" ] && [ -n "$l" ]; then nccl_inc="$(dirname "$h")"; nccl_lib="$l"; return 0; fi
  done
  return 1
}
find_nccl "${NCCL_HOME:-/nonexistent}" || find_nccl "$cuda_root" || find_nccl /usr/local/cuda || \
  find_nccl "$("$PY" -c 'import nvidia.nccl as m, os; print(list(m.__path__)[0])' 2>/dev/null)" || \
  find_nccl_pip || find_nccl /usr || { nccl_inc="" nccl_lib=""; }

{
  echo "nvcc: $NVCC"; "$NVCC" --version | tail -2
  echo "nccl: ${nccl_inc:-none} ${nccl_lib:-none}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  cmake -G Ninja -S "$ROOT" -B "$BUILD_DIR" -DFSDP_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
    -DFSDP_NLOHMANN_INCLUDE_DIR="$STAGE/include" -DFSDP_GTEST_SOURCE_DIR="$STAGE/googletest" \
    -DFSDP_OPENBLAS_HINT="$STAGE/lib" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
    ${nccl_inc:+-DNCCL_INCLUDE_DIR="$nccl_inc"} ${nccl_lib:+-DNCCL_LIBRARY="$nccl_lib"} &&
  timeout -k 5 "$(limit 300 200)" cmake --build "$BUILD_DIR" -j"$JOBS" --target fsdp-run fsdp-gpu-tests
} > "$RESULTS/build.log" 2>&1
status=$?
build_status=$status
echo "build: exit $status, $(( $(date +%s) - start )) s"
if [ $status -eq 0 ] && ! ldd "$BUILD_DIR/bin/fsdp-run" | grep -q libnccl; then
  echo "fsdp-run was built without NCCL (nccl.h or libnccl not found)" >> "$RESULTS/build.log"
  status=1
fi
if [ $status -ne 0 ]; then
  tail -40 "$RESULTS/build.log"
  summary build false
  exit 1
fi
summary build true

# --- 2. kernel tests ----------------------------------------------------------
timeout -k 5 "$(limit 120 180)" "$BUILD_DIR/bin/fsdp-gpu-tests" \
  --gtest_output="json:$RESULTS/kernels-gtest.json" > "$RESULTS/kernels.log" 2>&1
kernels=$?
summary kernels "$([ $kernels -eq 0 ] && echo true || echo false)"
echo "kernel tests: exit $kernels ($(grep -c '^\[       OK \]' "$RESULTS/kernels.log") ok, $(grep -c '^\[  FAILED  \]' "$RESULTS/kernels.log") failed lines, $(grep -c '^\[  SKIPPED \]' "$RESULTS/kernels.log") skipped)"

# --- 3. training: nccl against threads --------------------------------------
timeout -k 5 "$(limit 240 90)" "$PY" "$ROOT/tests/gpu/gpu_checks.py" "$BUILD_DIR/bin" "$STAGE" \
  "$WORK" "$RESULTS" > "$RESULTS/train.log" 2>&1
train=$?
summary training "$([ $train -eq 0 ] && echo true || echo false)"
grep -E '^(CASE|CHECK)' "$RESULTS/train.log"
echo "training checks: exit $train"

# --- 4. benchmark -----------------------------------------------------------
timeout -k 5 "$(limit 420 5)" "$PY" "$ROOT/tests/gpu/bench_fsdp2.py" "$BUILD_DIR/bin" "$STAGE" \
  "$WORK" "$RESULTS" >> "$RESULTS/train.log" 2>&1
bench=$?
grep -E '^(fsdp|pytorch_fsdp2):' "$RESULTS/train.log"
echo "benchmark: exit $bench"

ok=false
[ $kernels -eq 0 ] && [ $train -eq 0 ] && [ $bench -eq 0 ] && ok=true
summary done $ok
$ok
