//===- SelfTest.cpp - The emulator checked against CUDA's definitions -----===//
//
// What runtime/kernels/cuda.cu does not exercise, or must never get wrong:
// shuffle widths, votes and partial masks, shared memory poisoned again for
// every block, a deadlock and a bad mask reported, CUDA's launch limits,
// host pointers refused, and cuBLAS's column-major GEMM with its refusals.
// The kernels here are named selfTest* (main.cpp leaves them out of the
// count of runtime/kernels' kernels).
//
//===----------------------------------------------------------------------===//
#include "tests/cuda-emu/emu_report.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace {

template <class T> struct Buf {
  T *p = nullptr;
  size_t n;
  explicit Buf(size_t count) : n(count) { cudaMalloc(&p, sizeof(T) * count); }
  ~Buf() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost);
    return h;
  }
};

__global__ void selfTestShuffles(int *down8, int *xor16, int *idx8, int *up2) {
  const int t = threadIdx.x;
  down8[t] = __shfl_down_sync(0xffffffffu, t, 3, 8);
  xor16[t] = __shfl_xor_sync(0xffffffffu, t, 16, 16);
  idx8[t] = __shfl_sync(0xffffffffu, t, 5, 8);
  up2[t] = __shfl_up_sync(0xffffffffu, t, 2);
}

TEST(CudaEmulator, ShuffleWidths) {
  Buf<int> down8(64), xor16(64), idx8(64), up2(64);
  FSDP_LAUNCH(selfTestShuffles, 1, 64, 0, nullptr, down8.p, xor16.p, idx8.p, up2.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto d = down8.get(), x = xor16.get(), i = idx8.get(), u = up2.get();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(d[t], lane % 8 + 3 < 8 ? t + 3 : t) << t;
    // width 16, lane mask 16: lanes 0-15 would read a later segment (their
    // own value), lanes 16-31 an earlier one.
    EXPECT_EQ(x[t], lane < 16 ? t : t - 16) << t;
    EXPECT_EQ(i[t], t / 8 * 8 + 5) << t;
    EXPECT_EQ(u[t], lane >= 2 ? t - 2 : t) << t;
  }
}

__global__ void selfTestVotes(unsigned *ballot, int *anyLow, int *allLow) {
  const int lane = threadIdx.x & 31;
  ballot[threadIdx.x] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  if (lane < 16) { // a partial mask, only its lanes there
    anyLow[threadIdx.x] = __any_sync(0x0000ffffu, lane == 7);
    allLow[threadIdx.x] = __all_sync(0x0000ffffu, lane < 15);
  }
}

TEST(CudaEmulator, VotesAndPartialMasks) {
  Buf<unsigned> ballot(32);
  Buf<int> anyLow(32), allLow(32);
  FSDP_LAUNCH(selfTestVotes, 1, 32, 0, nullptr, ballot.p, anyLow.p, allLow.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  unsigned expect = 0;
  for (int l = 0; l < 32; l += 3)
    expect |= 1u << l;
  const std::vector<unsigned> b = ballot.get();
  const std::vector<int> a = anyLow.get(), al = allLow.get();
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(b[t], expect);
  for (int t = 0; t < 16; ++t) {
    EXPECT_EQ(a[t], 1);
    EXPECT_EQ(al[t], 0);
  }
}

// Block 0 writes its shared array; block 1 must find NaN again, and so must
// a read of dynamic shared memory before any write.
__global__ void selfTestSharedPoison(float *seen, float *seenDynamic) {
  FSDP_SHARED(float, s, [4]);
  FSDP_DYNAMIC_SHARED(float, dyn);
  if (threadIdx.x == 0) {
    seen[blockIdx.x] = s[0];
    seenDynamic[blockIdx.x] = dyn[1];
    s[0] = 1.0f;
    dyn[1] = 2.0f;
  }
  __syncthreads();
}

TEST(CudaEmulator, SharedMemoryIsNaNForEveryBlock) {
  Buf<float> seen(2), seenDynamic(2);
  FSDP_LAUNCH(selfTestSharedPoison, 2, 32, 64, nullptr, seen.p, seenDynamic.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (float v : seen.get())
    EXPECT_TRUE(std::isnan(v));
  for (float v : seenDynamic.get())
    EXPECT_TRUE(std::isnan(v));
}

// Half the warp at __syncthreads, half at __syncwarp: neither can complete.
__global__ void selfTestDeadlock(int *out) {
  if (threadIdx.x < 16)
    __syncthreads();
  else
    __syncwarp();
  out[threadIdx.x] = 1;
}

__global__ void selfTestMaskWithoutOwnLane(int *out) {
  out[threadIdx.x] = __shfl_sync(0x1u, int(threadIdx.x), 0);
}

TEST(CudaEmulator, DeadlockAndBadMaskFailTheLaunch) {
  Buf<int> out(32);
  FSDP_LAUNCH(selfTestDeadlock, 1, 32, 0, nullptr, out.p);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  auto failures = cuda_emu::takeFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("deadlock"), std::string::npos) << failures[0];
  cuda_emu::resetDevice();
  FSDP_LAUNCH(selfTestMaskWithoutOwnLane, 1, 32, 0, nullptr, out.p);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  failures = cuda_emu::takeFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("leaves out its own lane"), std::string::npos) << failures[0];
}

__global__ void selfTestNothing(int *) {}

TEST(CudaEmulator, LaunchLimitsAndPointers) {
  Buf<int> out(1);
  FSDP_LAUNCH(selfTestNothing, 1, 1025, 0, nullptr, out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  FSDP_LAUNCH(selfTestNothing, dim3(1, 65536), 32, 0, nullptr, out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  FSDP_LAUNCH(selfTestNothing, 1, 32, 64 * 1024, nullptr, out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaFuncSetAttribute(selfTestNothing, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
      cudaSuccess);
  FSDP_LAUNCH(selfTestNothing, 1, 32, 64 * 1024, nullptr, out.p);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(selfTestNothing, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 228 * 1024),
            cudaErrorInvalidValue);
  int host = 0;
  FSDP_LAUNCH(selfTestNothing, 1, 32, 0, nullptr, &host);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cuda_emu::takeFailures().size(), 1u);
  cuda_emu::resetDevice();
}

TEST(CudaEmulator, GemmIsColumnMajorAndRefusesBadLeadingDimensions) {
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  // Column-major A (2 x 3) = [1 2 3; 4 5 6], B (3 x 2) = [1 0; 0 1; 1 1].
  const std::vector<float> a = {1, 4, 2, 5, 3, 6}, b = {1, 0, 1, 0, 1, 1};
  Buf<float> dA(6), dB(6), dC(4);
  cudaMemcpy(dA.p, a.data(), sizeof(float) * 6, cudaMemcpyHostToDevice);
  cudaMemcpy(dB.p, b.data(), sizeof(float) * 6, cudaMemcpyHostToDevice);
  const float one = 1, zero = 0;
  // C = A B = [4 5; 10 11] (beta 0: C's NaN is not read).
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, dA.p, CUDA_R_32F, 2, dB.p,
                         CUDA_R_32F, 3, &zero, dC.p, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dC.get(), (std::vector<float>{4, 10, 5, 11}));
  // C = Bᵀ Aᵀ = (A B)ᵀ = [4 10; 5 11].
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_T, 2, 2, 3, &one, dB.p, CUDA_R_32F, 3, dA.p,
                         CUDA_R_32F, 2, &zero, dC.p, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dC.get(), (std::vector<float>{4, 5, 10, 11}));
  // lda below A's rows, ldc below C's rows: refused as cuBLAS does.
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, dA.p, CUDA_R_32F, 1, dB.p,
                         CUDA_R_32F, 3, &zero, dC.p, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, dA.p, CUDA_R_32F, 2, dB.p,
                         CUDA_R_32F, 3, &zero, dC.p, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  // A leading dimension that reads past B's allocation is a fault.
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, dA.p, CUDA_R_32F, 2, dB.p,
                         CUDA_R_32F, 4, &zero, dC.p, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cuda_emu::takeFailures().size(), 1u);
  cuda_emu::resetDevice();
  cublasDestroy(h);
}

// CUDA_R_16BF operands and result with CUBLAS_COMPUTE_32F: f32 accumulation
// in order, alpha and beta in f32, the result rounded once to nearest even;
// other type combinations are refused.
TEST(CudaEmulator, GemmBf16RoundsOnceToNearestEvenAndRefusesMixedTypes) {
  auto bf = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return uint16_t(bits >> 16); // exact for the values below
  };
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float one = 1, zero = 0;
  auto gemm = [&](int m, int n, int k, const void *A, int lda, const void *B, int ldb, float beta,
                  void *C, cudaDataType_t ab = CUDA_R_16BF, cudaDataType_t c = CUDA_R_16BF,
                  cublasComputeType_t compute = CUBLAS_COMPUTE_32F) {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, ab, lda, B, ab, ldb, &beta,
                        C, c, m, compute, CUBLAS_GEMM_DEFAULT);
  };
  // A (2 x 3) = [1 2 3; 4 5 6], B (3 x 2) = [1 0; 0 1; 1 1]: C = [4 5; 10 11].
  const std::vector<uint16_t> a = {bf(1), bf(4), bf(2), bf(5), bf(3), bf(6)},
                              b = {bf(1), bf(0), bf(1), bf(0), bf(1), bf(1)};
  Buf<uint16_t> dA(6), dB(6), dC(4);
  cudaMemcpy(dA.p, a.data(), 12, cudaMemcpyHostToDevice);
  cudaMemcpy(dB.p, b.data(), 12, cudaMemcpyHostToDevice);
  ASSERT_EQ(gemm(2, 2, 3, dA.p, 2, dB.p, 3, zero, dC.p), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dC.get(), (std::vector<uint16_t>{bf(4), bf(10), bf(5), bf(11)}));
  // beta 1 adds C (read as bf16) in f32 before the rounding: [5 5; 10 12].
  const std::vector<uint16_t> c0 = {bf(1), bf(0), bf(0), bf(1)};
  cudaMemcpy(dC.p, c0.data(), 8, cudaMemcpyHostToDevice);
  ASSERT_EQ(gemm(2, 2, 3, dA.p, 2, dB.p, 3, one, dC.p), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dC.get(), (std::vector<uint16_t>{bf(5), bf(10), bf(5), bf(12)}));
  // Ties: 1 + 2^-8 rounds down to 1 (even), 1 + 3 * 2^-8 up to 1 + 2^-6.
  // f32 accumulation in order: 2^24 + 1 - 2^24 is 0, not 1.
  const std::vector<uint16_t> x = {bf(1), bf(1), bf(1)},
                              y = {bf(1), bf(0.00390625f), bf(1), bf(0.01171875f), bf(16777216.0f),
                                   bf(1), bf(-16777216.0f)};
  Buf<uint16_t> dX(3), dY(7), dZ(3);
  cudaMemcpy(dX.p, x.data(), 6, cudaMemcpyHostToDevice);
  cudaMemcpy(dY.p, y.data(), 14, cudaMemcpyHostToDevice);
  ASSERT_EQ(gemm(1, 2, 2, dX.p, 1, dY.p, 2, zero, dZ.p), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(gemm(1, 1, 3, dX.p, 1, dY.p + 4, 3, zero, dZ.p + 2), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dZ.get(), (std::vector<uint16_t>{bf(1), bf(1.015625f), bf(0)}));
  // Mixed or other types, another compute type: refused, C untouched.
  Buf<float> dF(4);
  EXPECT_EQ(gemm(2, 2, 3, dA.p, 2, dB.p, 3, zero, dF.p, CUDA_R_16BF, CUDA_R_32F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(gemm(2, 2, 3, dA.p, 2, dB.p, 3, zero, dC.p, CUDA_R_16F, CUDA_R_16F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(gemm(2, 2, 3, dA.p, 2, dB.p, 3, zero, dC.p, CUDA_R_16BF, CUDA_R_16BF,
                 CUBLAS_COMPUTE_32F_FAST_TF32),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(dC.get(), (std::vector<uint16_t>{bf(5), bf(10), bf(5), bf(12)}));
  // Extents count two-byte elements: ldb 4 reads 7 of B's 6.
  EXPECT_EQ(gemm(2, 2, 3, dA.p, 2, dB.p, 4, zero, dC.p), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cuda_emu::takeFailures().size(), 1u);
  cuda_emu::resetDevice();
  cublasDestroy(h);
}

} // namespace
