//===- cuda_emu.h - What runtime/kernels/cuda.cu uses, on the CPU --*- C++ -*-===//
//
// A test tool, never part of the runtime: with this header (through the
// cuda_runtime.h and cublas_v2.h next to it) runtime/kernels/cuda.cu compiles
// as host C++ and its host wrappers launch the kernels on an emulated device.
//
//   * A launch checks the configuration as CUDA does (block <= 1024 threads,
//     grid.y and grid.z <= 65535, dynamic shared memory over 48 KiB only
//     after cudaFuncSetAttribute, at most 227 KiB) and reports a bad one
//     through cudaGetLastError; every pointer argument must be null or inside
//     a cudaMalloc'ed allocation.
//   * Then it runs every block of the grid, one after the other; the threads
//     of a block are fibers (one stack each) on one OS thread, resumed in
//     turn, forwards and backwards on alternate rounds. __syncthreads waits
//     for every thread of the block; the warp operations wait for the lanes
//     of their mask, which must all exist, be alive and pass the same mask.
//     A deadlock, a bad mask or a bad width stops the launch with a message,
//     and the device reports cudaErrorLaunchFailure from then on.
//   * Shared memory, static and dynamic, is filled with NaN bytes (0xff)
//     before each block; so is cudaMalloc'ed memory: a value read before it
//     is written shows.
//   * Every stream (the legacy default stream, nullptr, too) runs its work
//     on an OS thread of its own, in order: launches, cudaMemcpyAsync,
//     cudaMemsetAsync, cublasGemmEx on the handle's stream, event records
//     and waits, and other emulated libraries' work (emu_device.h). Launches
//     run one at a time (the fiber scheduler is one), whatever their stream.
//     Events, stream and device synchronization behave as CUDA specifies;
//     a failed kernel's error is sticky: every call after it returns it, and
//     work still queued is dropped. A copy from pageable host memory is
//     staged before the call returns, one to pageable host memory completes
//     before it returns, as CUDA's do; pinned memory (cudaMallocHost) is read
//     and written when the stream gets to the copy.
//   * Device memory is a pool of FSDP_EMULATED_GPU_MEMORY bytes (default 80
//     GiB); each allocation is its own mapping with a PROT_NONE page before
//     and after it. FSDP_EMULATED_GPUS devices (default 1) share that pool.
//   * A stream-order checker (emu.cpp) reports the accesses of two streams
//     to the same device bytes, one a write, that no event wait or host
//     synchronization orders; a launch's accesses are its work label's
//     (emu_device.h) or its pointer arguments' allocations.
//   * cublasGemmEx is a reference column-major GEMM (f32 operands: double
//     accumulation; CUDA_R_16BF operands and result: f32 accumulation, the
//     result rounded to bf16 to nearest even) that refuses what cuBLAS
//     refuses (leading dimensions) and every type combination it does not
//     implement, and checks that every operand it reads or writes lies
//     inside one allocation.
//
// No two kernels run at once and a fiber runs until it waits, so an atomic
// is a plain read-modify-write.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TESTS_CUDA_EMU_CUDA_EMU_H
#define FSDP_TESTS_CUDA_EMU_CUDA_EMU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "emu_device.h"

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The CUDA runtime's values for the errors the emulator reports.
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};
// Flags, with the CUDA runtime's values.
enum : unsigned {
  cudaStreamDefault = 0,
  cudaStreamNonBlocking = 1,
  cudaEventDefault = 0,
  cudaEventBlockingSync = 1,
  cudaEventDisableTiming = 2,
  cudaEventInterprocess = 4,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
template <class T> cudaError_t cudaMalloc(T **ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(ptr), bytes);
}
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
template <class T> cudaError_t cudaMallocHost(T **ptr, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void **>(ptr), bytes);
}
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream = nullptr);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority);
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char *cudaGetErrorString(cudaError_t error);
cudaError_t cudaFuncSetAttributeRaw(const void *kernel, cudaFuncAttribute attr, int value);
template <class F> cudaError_t cudaFuncSetAttribute(F *kernel, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttributeRaw(reinterpret_cast<const void *>(kernel), attr, value);
}

namespace cuda_emu {

// The running CUDA thread's view.
struct ThreadView {
  uint3 threadIdx, blockIdx;
  dim3 blockDim, gridDim;
};
const ThreadView &view();

// Called by launch(): validates the configuration and the stream (false:
// refused, the error is set for cudaGetLastError), then enqueues the grid on
// the stream: body runs once per thread of every block.
bool configure(const void *kernel, const char *spelled, dim3 grid, dim3 block, size_t shmem,
               cudaStream_t stream);
void checkPointerArgument(const void *kernel, int index, const void *ptr);
// `pointers`: the launch's pointer arguments, each standing for its whole
// allocation (bytes 0), written unless it points to const: what the
// stream-order checker takes for the kernel's accesses when no work label
// (emu_device.h) says better.
void enqueueGrid(const void *kernel, cudaStream_t stream, dim3 grid, dim3 block, size_t shmem,
                 std::vector<Access> pointers, std::function<void()> body);

template <class T> void checkArgument(const void *kernel, int index, const T &arg) {
  if constexpr (std::is_pointer_v<T>)
    checkPointerArgument(kernel, index, static_cast<const void *>(arg));
}
template <class T> void pointerArgument(std::vector<Access> &out, const T &arg) {
  if constexpr (std::is_pointer_v<T>)
    if (arg)
      out.push_back(
          {static_cast<const void *>(arg), 0, !std::is_const_v<std::remove_pointer_t<T>>});
}

// A launch: the arguments are converted to the kernel's parameter types and
// copied, as <<<>>> does, then the grid is enqueued on the stream.
template <class... P, class... A>
void launch(const char *spelled, void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem,
            cudaStream_t stream, A &&...args) {
  static_assert(sizeof...(P) == sizeof...(A), "wrong number of kernel arguments");
  const void *id = reinterpret_cast<const void *>(kernel);
  if (!configure(id, spelled, grid, block, shmem, stream))
    return;
  auto params = std::make_shared<std::tuple<std::decay_t<P>...>>(std::forward<A>(args)...);
  int index = 0;
  std::apply([&](const auto &...p) { (checkArgument(id, index++, p), ...); }, *params);
  std::vector<Access> pointers;
  std::apply([&](const auto &...p) { (pointerArgument(pointers, p), ...); }, *params);
  enqueueGrid(id, stream, grid, block, shmem, std::move(pointers),
              [kernel, params] { std::apply(kernel, *params); });
}

// Shared memory of the running block: a static array (by name, filled with
// 0xff when the block's first thread reaches it) and the launch's dynamic one.
void *staticShared(const char *name, size_t bytes);
void *dynamicShared();
template <class A> A &staticSharedArray(const char *name) {
  return *static_cast<A *>(staticShared(name, sizeof(A)));
}

// Warp operations. op names the operation (the lanes of a mask must all be
// at the same one); value is the lane's payload, src the lane whose payload
// it receives (for a vote: its predicate). Returns the received payload, or
// for a vote the ballot of the mask's lanes.
enum class WarpOp { Sync, Shuffle, Ballot, Any, All };
uint64_t warpExchange(WarpOp op, unsigned mask, uint64_t value, int src);
void syncThreads();
int laneId();

template <class T> T shuffleFrom(unsigned mask, T v, int src) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a wide type");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = warpExchange(WarpOp::Shuffle, mask, bits, src);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
// Source lanes as CUDA defines them for a width (a power of two <= 32;
// checked where the lanes meet): out of the lane's segment, its own.
int checkedWidth(int width);
inline int shflSrc(int srcLane, int width) {
  width = checkedWidth(width);
  return (laneId() & ~(width - 1)) + (srcLane & (width - 1));
}
inline int shflDownSrc(unsigned delta, int width) {
  width = checkedWidth(width);
  const int lane = laneId();
  return (lane & (width - 1)) + int(delta) < width ? lane + int(delta) : lane;
}
inline int shflUpSrc(unsigned delta, int width) {
  width = checkedWidth(width);
  const int lane = laneId();
  return (lane & (width - 1)) >= int(delta) ? lane - int(delta) : lane;
}
inline int shflXorSrc(int laneMask, int width) {
  width = checkedWidth(width);
  const int lane = laneId(), src = lane ^ laneMask;
  // Earlier segments may be read, later ones give the lane its own value.
  return (src & ~(width - 1)) > (lane & ~(width - 1)) ? lane : src;
}

} // namespace cuda_emu

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define threadIdx (::cuda_emu::view().threadIdx)
#define blockIdx (::cuda_emu::view().blockIdx)
#define blockDim (::cuda_emu::view().blockDim)
#define gridDim (::cuda_emu::view().gridDim)

#define FSDP_LAUNCH(kernel, grid, block, shmem, stream, ...)                                       \
  ::cuda_emu::launch(#kernel, kernel, (grid), (block), (shmem), (stream), __VA_ARGS__)
#define FSDP_SHARED(type, name, dims) auto &name = ::cuda_emu::staticSharedArray<type dims>(#name)
#define FSDP_DYNAMIC_SHARED(type, name)                                                            \
  type *const name = static_cast<type *>(::cuda_emu::dynamicShared())

inline void __syncthreads() { ::cuda_emu::syncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::cuda_emu::warpExchange(::cuda_emu::WarpOp::Sync, mask, 0, 0);
}
template <class T> T __shfl_sync(unsigned mask, T v, int srcLane, int width = 32) {
  return ::cuda_emu::shuffleFrom(mask, v, ::cuda_emu::shflSrc(srcLane, width));
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::cuda_emu::shuffleFrom(mask, v, ::cuda_emu::shflDownSrc(delta, width));
}
template <class T> T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::cuda_emu::shuffleFrom(mask, v, ::cuda_emu::shflUpSrc(delta, width));
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {
  return ::cuda_emu::shuffleFrom(mask, v, ::cuda_emu::shflXorSrc(laneMask, width));
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return unsigned(::cuda_emu::warpExchange(::cuda_emu::WarpOp::Ballot, mask, pred != 0, 0));
}
inline int __any_sync(unsigned mask, int pred) {
  return int(::cuda_emu::warpExchange(::cuda_emu::WarpOp::Any, mask, pred != 0, 0));
}
inline int __all_sync(unsigned mask, int pred) {
  return int(::cuda_emu::warpExchange(::cuda_emu::WarpOp::All, mask, pred != 0, 0));
}

template <class T> T atomicAdd(T *address, T v) {
  const T old = *address;
  *address = old + v;
  return old;
}

// Intrinsics: IEEE round-to-nearest single operations (no contraction:
// separate statements) and bit casts.
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fdiv_rn(float a, float b) {
  volatile float r = a / b;
  return r;
}
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }

#endif
