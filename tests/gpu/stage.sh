#!/usr/bin/env bash
# Run HERE (the development machine, with the full build): stages into
# gpu-stage/ (git-ignored) what tests/gpu/run-all.sh needs on a GPU machine
# that has CUDA, CMake, ninja and PyTorch but no LLVM/MLIR, nlohmann-json,
# GoogleTest or OpenBLAS (tests/gpu/preflight.sh then checks, with the
# system's copies hidden, that the stage is all the build needs):
#
#   gpu-stage/include/nlohmann/   nlohmann-json's headers (/usr/include/nlohmann)
#   gpu-stage/include/cblas.h     OpenBLAS's headers (cblas.h, openblas_config.h,
#                                 f77blas.h), for runtime/kernels/cpu.cpp
#   gpu-stage/googletest/         GoogleTest's sources (/usr/src/googletest)
#   gpu-stage/lib/                libopenblas.so.0 and its libgfortran/libquadmath
#   gpu-stage/plans/*.json        programs fsdp-plan wrote here (it needs MLIR)
#   gpu-stage/data.bin            tokens (the GPL-3 as bytes)
#   gpu-stage/MANIFEST            what is there, and from where
#
#   tests/gpu/stage.sh                       # fsdp-plan from build/bin
#   BIN=build-x/bin tests/gpu/stage.sh       # another build
#
# Then carry gpu-stage to the GPU machine and run tests/gpu/run-all.sh there
# (tests/gpu/README.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${BIN:-$ROOT/build/bin}"
STAGE="${STAGE:-$ROOT/gpu-stage}"
PY="${PY:-/usr/bin/python3}"
PLAN="$BIN/fsdp-plan"
[ -x "$PLAN" ] || { echo "stage.sh: no fsdp-plan at $PLAN (build first, or set BIN)" >&2; exit 1; }

rm -rf "$STAGE"
mkdir -p "$STAGE/include" "$STAGE/lib" "$STAGE/plans"

cp -r /usr/include/nlohmann "$STAGE/include/"
# OpenBLAS's headers, where the multiarch cblas.h link leads (Debian:
# /usr/include/x86_64-linux-gnu/openblas-pthread/); plain files.
cblas="$(readlink -f /usr/include/x86_64-linux-gnu/cblas.h 2>/dev/null || true)"
[ -f "$cblas" ] || cblas="$(readlink -f /usr/include/cblas.h 2>/dev/null || true)"
[ -f "$cblas" ] || { echo "stage.sh: no OpenBLAS cblas.h (apt-get install libopenblas-dev)" >&2; exit 1; }
for h in cblas.h openblas_config.h f77blas.h; do
  if [ -f "$(dirname "$cblas")/$h" ]; then
    cp "$(readlink -f "$(dirname "$cblas")/$h")" "$STAGE/include/$h"
  fi
done
[ -f "$STAGE/include/openblas_config.h" ] || { echo "stage.sh: no openblas_config.h next to $cblas" >&2; exit 1; }
cp -r /usr/src/googletest "$STAGE/googletest"
# The shared library and what it needs beyond glibc (Debian 12's; newer
# glibcs load them). Plain files, no links: links do not travel.
blas="$(readlink -f /usr/lib/x86_64-linux-gnu/libopenblas.so.0)"
cp "$blas" "$STAGE/lib/libopenblas.so.0"
for dep in libgfortran.so.5 libquadmath.so.0; do
  cp "$(readlink -f "/lib/x86_64-linux-gnu/$dep")" "$STAGE/lib/$dep"
done

# Plans. World size 1 (one GPU there). A program is planned for its target's
# kernels (their scratch): NAME.json for the GPU (--cluster of an H200, the
# cuda target) and NAME-cpu.json, the same plan for the CPU, which the
# threads backend runs for the comparison. Small models at f32 and bf16, and
# GPT-2 medium in bf16 for the benchmark (predicted on an H200).
GPU_CLUSTER="$ROOT/models/hardware/H200-SXM.json"
plan() { "$PLAN" "$@" > /dev/null; }
both() { # NAME, then fsdp-plan's arguments
  local name="$1"
  shift
  plan "$@" --cluster "$GPU_CLUSTER" -o "$STAGE/plans/$name.json"
  plan "$@" -o "$STAGE/plans/$name-cpu.json"
}
both gpt2-tiny "$ROOT/models/gpt2-tiny/config.json" --world-size 1 --micro-batch 4 --seq-len 64
both llama-tiny "$ROOT/models/llama-tiny/config.json" --world-size 1 --micro-batch 4 --seq-len 64
both gpt2-tiny-bf16 "$ROOT/models/gpt2-tiny/config.json" --world-size 1 --micro-batch 4 \
  --seq-len 64 --param-dtype bf16 --reduce-dtype bf16 --grad-accum 3
both llama-tiny-ckpt "$ROOT/models/llama-tiny/config.json" --world-size 1 --micro-batch 4 \
  --seq-len 64 --activation-checkpointing blocks
# Two ranks on one node: only for the error path there (NCCL takes one GPU a
# rank; two ranks on one GPU must fail cleanly, not hang).
plan "$ROOT/models/llama-tiny/config.json" --world-size 2 --micro-batch 2 --seq-len 64 \
  --cluster "$GPU_CLUSTER" -o "$STAGE/plans/llama-tiny-2.json"
plan "$ROOT/models/gpt2-medium/config.json" --no-dropout --world-size 1 --micro-batch 8 \
  --seq-len 1024 --param-dtype bf16 --cluster "$GPU_CLUSTER" \
  -o "$STAGE/plans/gpt2-medium-bf16.json"

"$PY" "$ROOT/tests/e2e/make_data.py" "$STAGE/data.bin" --text /usr/share/common-licenses/GPL-3 \
  > /dev/null

{
  echo "staged $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "nlohmann-json: /usr/include/nlohmann"
  echo "googletest: /usr/src/googletest"
  echo "openblas: $blas"
  echo "openblas headers: $(dirname "$cblas")"
  ls -1 "$STAGE/plans"
} > "$STAGE/MANIFEST"
du -sh "$STAGE"
size=$(du -sm "$STAGE" | cut -f1)
if [ "$size" -gt 60 ]; then
  echo "stage.sh: $STAGE is ${size} MiB, over the 60 MiB to carry" >&2
  exit 1
fi
