#!/usr/bin/env bash
# The runtime-only configuration (-DFSDP_RUNTIME_ONLY=ON: no MLIR, as a GPU
# machine builds it) with this machine's libraries: built whole into
# $RT_DIR (default build-runtime-only), and its tests run (the runtime's
# GoogleTests and the emulated CUDA kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
RT_DIR="${RT_DIR:-build-runtime-only}"
if [ ! -f "$RT_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$RT_DIR" -DFSDP_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
ninja -C "$RT_DIR" ${NINJA_JOBS:+-j "$NINJA_JOBS"}
# No MLIR anywhere in what it built.
if grep -l "libMLIR\|libLLVM" "$RT_DIR"/bin/* 2>/dev/null; then
  echo "runtime-only.sh: a runtime-only binary links LLVM or MLIR" >&2
  exit 1
fi
ctest --test-dir "$RT_DIR" --output-on-failure -j "$(nproc)"
