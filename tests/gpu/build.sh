#!/usr/bin/env bash
# The build stage of tests/gpu/run-all.sh, alone, so that tests/gpu/preflight.sh
# builds with the very same code: configures $BUILD_DIR runtime-only
# (-DFSDP_RUNTIME_ONLY=ON, no MLIR) for CUDA_ARCH with the staged headers,
# GoogleTest and OpenBLAS of $STAGE (tests/gpu/stage.sh), MPI left out, NCCL
# from NCCL_HOME, the toolkit, or the pip package nvidia-nccl-cu13; builds
# fsdp-run and fsdp-gpu-tests into $BUILD_DIR/bin; fails if fsdp-run does
# not link NCCL. Everything goes to stdout/stderr (run-all.sh keeps it in
# build.log).
#
#   STAGE=gpu-stage BUILD_DIR=/tmp/b JOBS=16 CUDA_ARCH=90 tests/gpu/build.sh
#   BUILD_TIMEOUT=200 ...     # seconds for the compilation (default: none)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STAGE="${STAGE:-$ROOT/gpu-stage}"
BUILD_DIR="${BUILD_DIR:-/tmp/fsdp-gpu-build}"
CUDA_ARCH="${CUDA_ARCH:-90}"
JOBS="${JOBS:-$(nproc)}"
PY="${PYTHON:-python3}"

for f in include/nlohmann/json.hpp include/cblas.h googletest/CMakeLists.txt lib/libopenblas.so.0; do
  [ -e "$STAGE/$f" ] || { echo "build.sh: $STAGE/$f is missing: run tests/gpu/stage.sh" >&2; exit 1; }
done
# The staged OpenBLAS's own needs (libgfortran), after the system's.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$STAGE/lib"

NVCC="${NVCC:-}"
if [ -z "$NVCC" ]; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc; else NVCC="$(command -v nvcc || true)"; fi
fi
[ -n "$NVCC" ] || { echo "build.sh: no nvcc (set NVCC)" >&2; exit 1; }

# NCCL: NCCL_HOME, the toolkit's, or the pip package nvidia-nccl-cu13.
nccl_inc="" nccl_lib=""
find_nccl() { # dir with include/ and lib/
  local d="$1"
  [ -f "$d/include/nccl.h" ] || return 1
  nccl_inc="$d/include"
  nccl_lib="$(ls "$d"/lib/libnccl.so "$d"/lib/libnccl.so.[0-9]* "$d"/lib64/libnccl.so "$d"/lib64/libnccl.so.[0-9]* 2>/dev/null | head -1)"
  [ -n "$nccl_lib" ]
}
cuda_root="$(dirname "$(dirname "$NVCC")")"
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

echo "nvcc: $NVCC"; "$NVCC" --version | tail -2
echo "nccl: ${nccl_inc:-none} ${nccl_lib:-none}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || echo "nvidia-smi: no GPU listed"
cmake -G Ninja -S "$ROOT" -B "$BUILD_DIR" -DFSDP_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
  -DFSDP_NLOHMANN_INCLUDE_DIR="$STAGE/include" -DFSDP_OPENBLAS_INCLUDE_DIR="$STAGE/include" \
  -DFSDP_GTEST_SOURCE_DIR="$STAGE/googletest" -DFSDP_OPENBLAS_HINT="$STAGE/lib" \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  ${nccl_inc:+-DNCCL_INCLUDE_DIR="$nccl_inc"} ${nccl_lib:+-DNCCL_LIBRARY="$nccl_lib"} || exit 1
timeout -k 5 "${BUILD_TIMEOUT:-0}" cmake --build "$BUILD_DIR" -j"$JOBS" --target fsdp-run fsdp-gpu-tests || exit 1

# ldd's whole output first: `ldd | grep -q` under pipefail fails whenever grep
# exits before ldd has written everything (and ldd then dies of SIGPIPE).
# The NCCL backend is libfsdp-nccl.so beside fsdp-run (opened for --backend
# nccl only).
libs="$(ldd "$BUILD_DIR/bin/libfsdp-nccl.so" 2>&1)"
case "$libs" in
  *libnccl*) ;;
  *) echo "build.sh: fsdp-run was built without NCCL (nccl.h or libnccl not found: no $BUILD_DIR/bin/libfsdp-nccl.so linking libnccl)"; exit 1 ;;
esac
echo "build.sh: $BUILD_DIR/bin/fsdp-run and fsdp-gpu-tests built"
