#!/usr/bin/env bash
# Fuzzes one harness of tests/fuzz with libFuzzer, for a while.
#
#   scripts/fuzz.sh NAME [SECONDS]
#
# Builds fsdp-fuzz-NAME with clang and -fsanitize=fuzzer plus $SANITIZE
# (default address,undefined; SANITIZE= for none) into build-fuzz-<sanitizers>/,
# then runs it for SECONDS (default 60) on one core, starting from the saved
# inputs in tests/fuzz/corpus/NAME. New interesting inputs go to
# build-fuzz-*/corpus/NAME (not the source tree); an input that breaks the
# harness is written to build-fuzz-*/crashes/NAME/ and the run fails. Add such
# an input to tests/fuzz/corpus/NAME once it is fixed: the replay test keeps it.
# Installs clang-19 and its libFuzzer runtime if they are missing (not needed
# by the ordinary build or CI).
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:?usage: scripts/fuzz.sh NAME [SECONDS]}"
seconds="${2:-60}"
SANITIZE="${SANITIZE-address,undefined}"
if [ ! -d "tests/fuzz/corpus/$name" ]; then
  echo "fuzz.sh: no saved inputs tests/fuzz/corpus/$name (is '$name' a harness?)" >&2
  exit 2
fi
if ! command -v clang++-19 >/dev/null || [ ! -d /usr/lib/llvm-19/lib/clang/19/lib/linux ] ||
   ! ls /usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer*.a >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    clang-19 libclang-rt-19-dev
fi
flags="-fsanitize=fuzzer-no-link${SANITIZE:+,$SANITIZE} -fno-omit-frame-pointer -g"
dir="build-fuzz-${SANITIZE:-none}"
dir="${dir//,/-}"
if [ ! -f "$dir/build.ninja" ]; then
  cmake -G Ninja -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFSDP_FUZZ=ON -DFSDP_ENABLE_CUDA=OFF \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="${SANITIZE:+-fsanitize=$SANITIZE}" \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
fi
ninja -C "$dir" ${NINJA_JOBS:+-j "$NINJA_JOBS"} "fsdp-fuzz-$name"
mkdir -p "$dir/corpus/$name" "$dir/crashes/$name"
# allow_user_poisoning=0: LLVM's allocators poison their slabs by hand when
# their headers see ASan, and the harness links the prebuilt (uninstrumented)
# MLIR libraries, whose copies never unpoison them: MLIRContext's start-up
# read "use-after-poison" on every input. Sanitizer checks are unchanged.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allow_user_poisoning=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
exec "$dir/bin/fsdp-fuzz-$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="$dir/crashes/$name/" "$dir/corpus/$name" "tests/fuzz/corpus/$name"
