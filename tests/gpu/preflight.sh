#!/usr/bin/env bash
# Run HERE (the development machine, as root), after tests/gpu/stage.sh:
# builds what tests/gpu/run-all.sh's build stage builds, with the same code
# (tests/gpu/build.sh), with the system's OpenBLAS, nlohmann-json,
# GoogleTest, MPI, LLVM and Boost.Context hidden (empty folders bind-mounted
# over them in a private mount namespace, `unshare -m`), so that a file
# missing from the stage fails here and not on the GPU machine, where time
# is short. Then checks that the binaries load with the stage's libraries and that the GPU
# tests, with FSDP_REQUIRE_GPU=1 and no usable GPU, fail naming it.
#
#   tests/gpu/stage.sh && tests/gpu/preflight.sh
#   STAGE=/path/gpu-stage BUILD_DIR=/tmp/b OUT=/tmp/o WORK=/tmp/w JOBS=2 tests/gpu/preflight.sh
#
# STAGE, BUILD_DIR, OUT, WORK, JOBS, CUDA_ARCH, NVCC, NCCL_HOME and PYTHON as
# run-all.sh reads them (OUT gets preflight.log). It never stages (a missing
# or incomplete stage fails), leaves fsdp-run and fsdp-gpu-tests in
# $BUILD_DIR/bin, and removes what it made under WORK whatever happens (the
# mounts go with the namespace). Exit 0 only if everything above held; a
# machine that cannot make the namespace (unshare refused) fails too.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STAGE="${STAGE:-$ROOT/gpu-stage}"
BUILD_DIR="${BUILD_DIR:-/tmp/fsdp-gpu-build}"
RESULTS="${OUT:-$PWD/gpu-results}"
WORK="${WORK:-/tmp/fsdp-gpu-work}"
export STAGE BUILD_DIR JOBS="${JOBS:-$(nproc)}"

# What the GPU machine does not have. Folders only (an empty folder hides
# one); the links into them (/usr/include/x86_64-linux-gnu/cblas.h,
# libopenblas.so.0) are left dangling.
HIDE=(
  /usr/include/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu/openblas-pthread
  /usr/include/openblas /usr/lib/x86_64-linux-gnu/blas /usr/lib/x86_64-linux-gnu/lapack
  /usr/include/nlohmann /usr/share/cmake/nlohmann_json /usr/lib/x86_64-linux-gnu/cmake/nlohmann_json
  /usr/include/gtest /usr/include/gmock /usr/src/googletest /usr/src/gtest /usr/src/gmock
  /usr/lib/x86_64-linux-gnu/cmake/GTest
  /usr/lib/x86_64-linux-gnu/openmpi /usr/include/x86_64-linux-gnu/openmpi
  /usr/include/x86_64-linux-gnu/mpich /usr/lib/x86_64-linux-gnu/mpich
  /usr/lib/llvm-19 /usr/include/llvm-19 /usr/include/llvm-c-19 /usr/lib/cmake/mlir /usr/lib/cmake/llvm
  /usr/include/boost/context /usr/lib/x86_64-linux-gnu/cmake/boost_context-1.74.0
)
# Each must be gone inside the namespace, or the preflight proves nothing.
GONE=(
  /usr/include/x86_64-linux-gnu/cblas.h /usr/include/cblas.h /usr/include/nlohmann/json.hpp
  /usr/include/gtest/gtest.h /usr/src/googletest/CMakeLists.txt
  /usr/lib/x86_64-linux-gnu/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h
  /usr/lib/llvm-19/bin/llvm-config /usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake
  /usr/include/boost/context/detail/fcontext.hpp
)

fail() { echo "preflight: $*" >&2; exit 1; }

if [ "${FSDP_PREFLIGHT_INSIDE:-}" != 1 ]; then
  for f in plans data.bin include/nlohmann/json.hpp include/cblas.h googletest lib/libopenblas.so.0; do
    [ -e "$STAGE/$f" ] || fail "$STAGE/$f is missing: run tests/gpu/stage.sh first (the preflight never stages)"
  done
  mkdir -p "$RESULTS" "$WORK"
  empty="$(mktemp -d "$WORK/preflight-empty.XXXXXX")"
  trap 'rmdir "$empty" 2>/dev/null || rm -rf "$empty"' EXIT
  command -v unshare > /dev/null || fail "no unshare (util-linux): cannot hide the system's libraries"
  unshare -m --propagation private true 2> "$empty.err" ||
    { msg="$(cat "$empty.err")"; rm -f "$empty.err"; fail "cannot make a private mount namespace (unshare -m: $msg); run as root where unshare is allowed. Nothing was checked."; }
  rm -f "$empty.err"
  start=$(date +%s)
  status=0
  FSDP_PREFLIGHT_INSIDE=1 FSDP_PREFLIGHT_EMPTY="$empty" \
    unshare -m --propagation private "${BASH_SOURCE[0]}" 2>&1 | tee "$RESULTS/preflight.log" ||
    status=$?
  echo "preflight: exit $status, $(( $(date +%s) - start )) s (log: $RESULTS/preflight.log)"
  exit "$status"
fi

# --- Inside the namespace --------------------------------------------------------
empty="$FSDP_PREFLIGHT_EMPTY"
hidden=()
for d in "${HIDE[@]}"; do
  if [ -d "$d" ]; then
    mount --bind "$empty" "$d" || fail "mount --bind over $d failed"
    hidden+=("$d")
  fi
done
for f in "${GONE[@]}"; do
  [ ! -e "$f" ] || fail "$f is still visible after hiding ${hidden[*]}"
done
echo "preflight: hidden ${hidden[*]}"

# A build from scratch, as on the GPU machine: no cache of found paths.
rm -f "$BUILD_DIR/CMakeCache.txt"
"$ROOT/tests/gpu/build.sh" || fail "the build failed with the system's copies hidden: is something missing from $STAGE (tests/gpu/stage.sh)?"

# The binaries and the NCCL backend load, with OpenBLAS and its libraries from the stage.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$STAGE/lib"
for b in fsdp-run libfsdp-nccl.so fsdp-gpu-tests; do
  [ -f "$BUILD_DIR/bin/$b" ] || fail "no $BUILD_DIR/bin/$b"
  libs="$(ldd "$BUILD_DIR/bin/$b" 2>&1)" || fail "ldd $b: $libs"
  case "$libs" in *"not found"*) fail "$b: a library not found: $(grep 'not found' <<< "$libs")" ;; esac
  grep -q "libopenblas.so.0 => $STAGE/lib/" <<< "$libs" || fail "$b does not load the staged OpenBLAS: $(grep openblas <<< "$libs")"
done
"$BUILD_DIR/bin/fsdp-gpu-tests" --gtest_list_tests > /dev/null || fail "fsdp-gpu-tests does not start"

# Without a usable GPU, FSDP_REQUIRE_GPU=1 must turn every skip into a failure
# that names the GPU. (With a GPU here, the tests must pass instead.)
set +e
out="$(FSDP_REQUIRE_GPU=1 "$BUILD_DIR/bin/fsdp-gpu-tests" --gtest_filter='KernelsGpu.PositionIds' 2>&1)"
rc=$?
set -e
if grep -q 'no NVIDIA GPU can be used' <<< "$out"; then
  [ $rc -ne 0 ] || fail "FSDP_REQUIRE_GPU=1 without a GPU exited 0"
  echo "preflight: FSDP_REQUIRE_GPU=1 without a GPU: exit $rc, '$(grep -m1 -o 'no NVIDIA GPU can be used.*' <<< "$out")'"
else
  [ $rc -eq 0 ] || fail "fsdp-gpu-tests failed on this machine's GPU: $out"
  echo "preflight: a GPU is usable here, and the kernel test passed on it"
fi
echo "preflight: ok: the stage $STAGE is all run-all.sh's build needs"
