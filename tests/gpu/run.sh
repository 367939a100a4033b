#!/usr/bin/env bash
# Builds and runs the CUDA kernel tests (tests/gpu/KernelsGpuTest.cpp) on a
# machine with an NVIDIA GPU. The build is standalone (the repository's main
# CMake project does not know these files): a small CMake project is written
# into the build directory, compiling runtime/kernels/cuda.cu, the CPU
# kernels (runtime/kernels/cpu.cpp and cpu_bf16.cpp, same flags as
# runtime/CMakeLists.txt) and the test. Results: GoogleTest JSON plus a summary, under $OUT (or
# ./gpu-results). With FSDP_REQUIRE_GPU=1: no usable GPU fails the tests.
#
#   tests/gpu/run.sh                  # sm_90 (H100/H200)
#   CUDA_ARCH=80 tests/gpu/run.sh     # other architectures
#   JOBS=16 BUILD_DIR=/tmp/b tests/gpu/run.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RESULTS="${OUT:-$PWD/gpu-results}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu-tests}"
CUDA_ARCH="${CUDA_ARCH:-90}"
JOBS="${JOBS:-$(nproc)}"
NVCC="${NVCC:-/usr/local/cuda/bin/nvcc}"
mkdir -p "$RESULTS" "$BUILD_DIR/src"

cat > "$BUILD_DIR/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.24)
project(fsdp-kernels-gpu-tests LANGUAGES C CXX CUDA)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CUDA_STANDARD 17)
find_package(CUDAToolkit REQUIRED)
find_package(GTest REQUIRED)
find_library(FSDP_OPENBLAS_LIBRARY NAMES openblas REQUIRED)
add_library(FSDPCudaKernels STATIC ${FSDP_ROOT}/runtime/kernels/cuda.cu)
target_include_directories(FSDPCudaKernels PUBLIC ${FSDP_ROOT})
target_link_libraries(FSDPCudaKernels PUBLIC CUDA::cudart CUDA::cublas)
target_compile_options(FSDPCudaKernels PRIVATE -O3 -Xcompiler=-Wall)
add_library(FSDPKernelsCpu STATIC ${FSDP_ROOT}/runtime/kernels/cpu.cpp
            ${FSDP_ROOT}/runtime/kernels/cpu_bf16.cpp)
target_include_directories(FSDPKernelsCpu PUBLIC ${FSDP_ROOT})
target_link_libraries(FSDPKernelsCpu PUBLIC ${FSDP_OPENBLAS_LIBRARY})
target_compile_options(FSDPKernelsCpu PRIVATE -O3 -fno-trapping-math -fno-math-errno)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  target_compile_options(FSDPKernelsCpu PRIVATE -march=x86-64-v2)
endif()
add_executable(fsdp-kernels-gpu-tests ${FSDP_ROOT}/tests/gpu/KernelsGpuTest.cpp)
target_link_libraries(fsdp-kernels-gpu-tests PRIVATE FSDPCudaKernels FSDPKernelsCpu
                      GTest::gtest GTest::gtest_main CUDA::cudart CUDA::cublas)
target_compile_options(fsdp-kernels-gpu-tests PRIVATE -O2 -Wall -Wextra)
CMAKE

status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  cmake -S "$BUILD_DIR/src" -B "$BUILD_DIR/build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DFSDP_ROOT="$ROOT"
  start=$(date +%s)
  cmake --build "$BUILD_DIR/build" -j"$JOBS" --target fsdp-kernels-gpu-tests
  echo "build seconds: $(( $(date +%s) - start ))"
} > "$RESULTS/build.log" 2>&1 || status=$?

if [ "$status" -ne 0 ]; then
  tail -50 "$RESULTS/build.log"
  printf '{"stage": "build", "ok": false, "exit_code": %d}\n' "$status" > "$RESULTS/summary.json"
  exit "$status"
fi

set +e
FSDP_REQUIRE_GPU=1 "$BUILD_DIR/build/fsdp-kernels-gpu-tests" --gtest_output="json:$RESULTS/gtest.json" \
  2>&1 | tee "$RESULTS/test.log"
status=${PIPESTATUS[0]}
set -e
skipped=$(grep -c '^\[  SKIPPED \]' "$RESULTS/test.log" || true)
printf '{"stage": "test", "ok": %s, "exit_code": %d, "skipped_lines": %d, "gtest_json": "gtest.json"}\n' \
  "$([ "$status" -eq 0 ] && echo true || echo false)" "$status" "$skipped" > "$RESULTS/summary.json"
cat "$RESULTS/summary.json"
exit "$status"
