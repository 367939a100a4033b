#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test: GoogleTest and lit
# (through CTest), each test once. Exit status is non-zero if any test fails.
# The CUDA kernels run too, on a CPU emulator (label "cuda-emulated").
# Timing checks (label "timing": the cost model's prediction against a
# measured step) are left out: they need a quiet machine, and run with
# `ctest --test-dir build -L timing`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ROOT="$PWD"
cd "${BUILD_DIR:-build}"
status=0
ctest --output-on-failure -j "$(nproc)" -LE timing || status=$?
# How many of runtime/kernels' CUDA kernels ran on the emulator (test
# cuda-emulated, tests/cuda-emu): its last line, from the log of the run above.
grep -h '^emulated kernels:' Testing/Temporary/LastTest.log || true
# What ran on the emulated GPU device (gpu-emulated-summary, tests/cuda-emu/e2e.py).
grep -h '^emulated device:' Testing/Temporary/LastTest.log || true
# A failure told again at the end, in brief (a CI log keeps its head and tail).
if [ "$status" -ne 0 ]; then
  /usr/bin/python3 "$ROOT/scripts/failed-tests.py" Testing/Temporary/LastTest.log || true
  exit "$status"
fi
