//===- StreamsTest.cpp - Streams, events and memory as CUDA defines them --===//
//
// The emulated device's streams run on threads of their own; these tests
// hold a stream at a gate (work enqueued through emu_device.h that waits for
// the test to open it) to see what CUDA promises while work is pending: what
// runs in order, what waits for an event's record as of the wait, what the
// legacy default stream waits for, that a pageable source is staged at the
// call, that a sticky error drops queued work and is returned by every call.
// No test waits on a clock: a wrong order shows as a wrong value, or as a
// query that says "not ready" where it must not (or the reverse).
//
//===----------------------------------------------------------------------===//
#include "tests/cuda-emu/emu_device.h"
#include "tests/cuda-emu/emu_report.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

// Holds a stream: everything enqueued on it after hold() waits for open().
// Opened on destruction too, so that a failed test leaves no stream stuck.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool opened = false;
  bool hold(cudaStream_t s) {
    return cuda_emu::enqueue(s, "gate", {}, [this] {
      std::unique_lock<std::mutex> l(m);
      cv.wait(l, [&] { return opened; });
    });
  }
  void open() {
    {
      std::lock_guard<std::mutex> l(m);
      opened = true;
    }
    cv.notify_all();
  }
  ~Gate() { open(); }
};

struct Streams {
  std::vector<cudaStream_t> s;
  explicit Streams(int n, unsigned flags = cudaStreamNonBlocking) : s(size_t(n)) {
    for (auto &x : s)
      EXPECT_EQ(cudaStreamCreateWithFlags(&x, flags), cudaSuccess);
  }
  ~Streams() {
    for (auto x : s)
      cudaStreamDestroy(x);
  }
  cudaStream_t operator[](int i) const { return s[size_t(i)]; }
};

int *deviceInts(size_t n) {
  int *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(int)), cudaSuccess);
  return p;
}

__global__ void selfTestAddOne(int *x) { x[threadIdx.x] += 1; }

TEST(CudaEmulatorStreams, WorkRunsLaterOnTheStreamInOrder) {
  Streams st(1);
  int *x = deviceInts(32);
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreate(&done), cudaSuccess);
  Gate gate;
  ASSERT_TRUE(gate.hold(st[0]));
  ASSERT_EQ(cudaMemsetAsync(x, 0, 32 * sizeof(int), st[0]), cudaSuccess);
  FSDP_LAUNCH(selfTestAddOne, 1, 32, 0, st[0], x);
  FSDP_LAUNCH(selfTestAddOne, 1, 32, 0, st[0], x);
  ASSERT_EQ(cudaEventRecord(done, st[0]), cudaSuccess);
  // Nothing has run: the memory is still NaN bytes, the stream and the event
  // are not ready.
  EXPECT_EQ(x[0], -1);
  EXPECT_EQ(cudaStreamQuery(st[0]), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  gate.open();
  ASSERT_EQ(cudaEventSynchronize(done), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st[0]), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(st[0]), cudaSuccess);
  for (int i = 0; i < 32; ++i)
    ASSERT_EQ(x[i], 2) << i;
  cudaEventDestroy(done);
  cudaFree(x);
}

TEST(CudaEmulatorStreams, WaitEventOrdersStreamsAsOfTheWait) {
  Streams st(3);
  int *x = deviceInts(1), *y = deviceInts(1);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  Gate first, second;
  ASSERT_TRUE(first.hold(st[0]));
  ASSERT_EQ(cudaMemsetAsync(x, 7, 1, st[0]), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, st[0]), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(st[1], e, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y, x, 1, cudaMemcpyDeviceToDevice, st[1]), cudaSuccess);
  // Recording e again, on a stream held at another gate, does not move the
  // wait already enqueued.
  ASSERT_TRUE(second.hold(st[2]));
  ASSERT_EQ(cudaEventRecord(e, st[2]), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(st[1]), cudaErrorNotReady);
  first.open();
  ASSERT_EQ(cudaStreamSynchronize(st[1]), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<unsigned char *>(y)[0], 7);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady); // its latest record: behind the second gate
  second.open();
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  // An event never recorded is complete, and waiting for it is no wait.
  cudaEvent_t never;
  ASSERT_EQ(cudaEventCreate(&never), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(never), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(st[1], never, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(st[1], never, 1), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamSynchronize(st[1]), cudaSuccess);
  cudaEventDestroy(never);
  cudaEventDestroy(e);
  cudaFree(x);
  cudaFree(y);
}

TEST(CudaEmulatorStreams, LegacyStreamWaitsForBlockingStreamsOnly) {
  Streams blocking(1, cudaStreamDefault), nonBlocking(1);
  int *x = deviceInts(1);
  {
    Gate gate;
    ASSERT_TRUE(gate.hold(nonBlocking[0]));
    ASSERT_EQ(cudaMemsetAsync(x, 1, 1, nullptr), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess); // not held by the gate
    EXPECT_EQ(cudaStreamQuery(nonBlocking[0]), cudaErrorNotReady);
  }
  {
    Gate gate;
    ASSERT_TRUE(gate.hold(blocking[0]));
    ASSERT_EQ(cudaMemsetAsync(x, 2, 1, nullptr), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(nullptr), cudaErrorNotReady);
    EXPECT_EQ(reinterpret_cast<unsigned char *>(x)[0], 1);
    gate.open();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(reinterpret_cast<unsigned char *>(x)[0], 2);
  }
  cudaFree(x);
}

TEST(CudaEmulatorStreams, CopiesStagePageableAndDeferPinned) {
  Streams st(1);
  int *x = deviceInts(4);
  int *pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 4 * sizeof(int)), cudaSuccess);
  std::vector<int> pageable = {1, 2, 3, 4};
  Gate gate;
  ASSERT_TRUE(gate.hold(st[0]));
  ASSERT_EQ(cudaMemcpyAsync(x, pageable.data(), 16, cudaMemcpyHostToDevice, st[0]), cudaSuccess);
  pageable.assign(4, 0); // staged at the call: the copy still moves 1, 2, 3, 4
  ASSERT_EQ(cudaMemcpyAsync(pinned, x, 16, cudaMemcpyDeviceToHost, st[0]), cudaSuccess);
  EXPECT_EQ(pinned[0], -1); // pinned: written when the stream gets there
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(st[0]), cudaSuccess);
  EXPECT_EQ(std::vector<int>(pinned, pinned + 4), (std::vector<int>{1, 2, 3, 4}));
  // Each kind of memory is freed by its own call only.
  EXPECT_EQ(cudaFreeHost(x), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(pinned), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaMemsetAsync(pinned, 0, 4, st[0]), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(x), cudaSuccess);
}

// Pinned host memory: a copy into it and the host's read of it (declared by
// hostAccess, as the device executor declares its reads of the losses and
// the norm) conflict unless the host synchronized after the copy; a query
// that saw the copy done is not an order for the checker.
TEST(CudaEmulatorStreams, HostAccessesToPinnedMemoryAreChecked) {
  cuda_emu::takeStreamOrderReports();
  Streams st(1);
  int *x = deviceInts(4);
  int *pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 4 * sizeof(int)), cudaSuccess);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, x, 16, cudaMemcpyDeviceToHost, st[0]), cudaSuccess);
  cuda_emu::hostAccess(pinned, 16, false, "the host's read");
  std::vector<std::string> r = cuda_emu::takeStreamOrderReports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].find("written by cudaMemcpyAsync on stream"), std::string::npos) << r[0];
  EXPECT_NE(r[0].find("then read by the host's read on the host"), std::string::npos) << r[0];
  // Seen done by a query: still not ordered.
  ASSERT_EQ(cudaEventRecord(e, st[0]), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, x, 16, cudaMemcpyDeviceToHost, st[0]), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, st[0]), cudaSuccess);
  while (cudaEventQuery(e) == cudaErrorNotReady) {
  }
  cuda_emu::hostAccess(pinned, 16, false, "the host's read");
  EXPECT_EQ(cuda_emu::takeStreamOrderReports().size(), 1u);
  // After a synchronization: ordered.
  ASSERT_EQ(cudaMemcpyAsync(pinned, x, 16, cudaMemcpyDeviceToHost, st[0]), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, st[0]), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  cuda_emu::hostAccess(pinned, 16, false, "the host's read");
  EXPECT_TRUE(cuda_emu::takeStreamOrderReports().empty());
  // The host writes the pinned source of a copy still queued: a race; a copy
  // enqueued after the host's write is ordered after it.
  Gate gate;
  ASSERT_TRUE(gate.hold(st[0]));
  ASSERT_EQ(cudaMemcpyAsync(x, pinned, 16, cudaMemcpyHostToDevice, st[0]), cudaSuccess);
  cuda_emu::hostAccess(pinned, 16, true, "the host's write");
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(st[0]), cudaSuccess);
  r = cuda_emu::takeStreamOrderReports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].find("then written by the host's write on the host"), std::string::npos) << r[0];
  cuda_emu::hostAccess(pinned, 16, true, "the host's write");
  ASSERT_EQ(cudaMemcpyAsync(x, pinned, 16, cudaMemcpyHostToDevice, st[0]), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st[0]), cudaSuccess);
  EXPECT_TRUE(cuda_emu::takeStreamOrderReports().empty());
  cudaEventDestroy(e);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(x), cudaSuccess);
}

TEST(CudaEmulatorStreams, GemmRunsOnTheHandlesStream) {
  Streams st(1);
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(h, st[0]), CUBLAS_STATUS_SUCCESS);
  float *a = nullptr, *c = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&c, 4), cudaSuccess);
  EXPECT_EQ(cublasSetWorkspace(h, c, 4), CUBLAS_STATUS_SUCCESS);
  std::vector<float> host(1);
  EXPECT_EQ(cublasSetWorkspace(h, host.data(), 4), CUBLAS_STATUS_INVALID_VALUE);
  *a = 3;
  const float one = 1, zero = 0;
  Gate gate;
  ASSERT_TRUE(gate.hold(st[0]));
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, a, CUDA_R_32F, 1, a,
                         CUDA_R_32F, 1, &zero, c, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(std::isnan(*c));
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(st[0]), cudaSuccess);
  EXPECT_EQ(*c, 9.0f);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(c);
}

__global__ void selfTestStuck(int *) { __syncwarp(0x3u); } // lane 1 exits: never completes

TEST(CudaEmulatorStreams, AStickyErrorDropsQueuedWorkAndStays) {
  Streams st(2);
  int *x = deviceInts(32);
  ASSERT_EQ(cudaMemsetAsync(x, 0, 4, st[0]), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st[0]), cudaSuccess);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  Gate gate;
  ASSERT_TRUE(gate.hold(st[0]));
  FSDP_LAUNCH(selfTestStuck, 1, 1, 0, st[0], x);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess); // the launch itself is fine
  ASSERT_EQ(cudaMemsetAsync(x, 1, 4, st[0]), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, st[0]), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(st[1], e, 0), cudaSuccess);
  gate.open();
  EXPECT_EQ(cudaStreamSynchronize(st[1]), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaEventSynchronize(e), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaMemsetAsync(x, 2, 4, st[1]), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaEventRecord(e, st[1]), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure); // sticky: not cleared by reading
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cuda_emu::takeFailures().size(), 1u);
  EXPECT_EQ(x[0], 0); // the memset after the failed kernel never ran
  cuda_emu::resetDevice();
  cudaEventDestroy(e);
  cudaFree(x);
}

TEST(CudaEmulatorStreams, HandlesAndTiming) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -100), cudaSuccess);
  int least = 1, greatest = 1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, 8u), cudaErrorInvalidValue);
  cudaEvent_t a, b, untimed;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle); // never recorded
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(untimed), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, untimed), cudaErrorInvalidResourceHandle);
  // Work enqueued before the destroy still runs; the handle is gone at once.
  int *x = deviceInts(1);
  {
    Gate gate;
    ASSERT_TRUE(gate.hold(s));
    ASSERT_EQ(cudaMemsetAsync(x, 5, 1, s), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
    EXPECT_EQ(cudaMemsetAsync(x, 6, 1, s), cudaErrorInvalidResourceHandle);
    EXPECT_EQ(cudaEventRecord(a, s), cudaErrorInvalidResourceHandle);
    EXPECT_FALSE(cuda_emu::enqueue(s, "after destroy", {}, [] {}));
    EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<unsigned char *>(x)[0], 5);
  EXPECT_EQ(cudaEventDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(a), cudaErrorInvalidResourceHandle);
  cudaEventDestroy(b);
  cudaEventDestroy(untimed);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(count), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(count - 1), cudaSuccess);
  cudaFree(x);
}

TEST(CudaEmulatorStreams, MemoryHasACapacity) {
  cuda_emu::setMemoryCapacity(1 << 20);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  EXPECT_EQ(cudaMalloc(&a, (1 << 20) + 1), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaMalloc(&a, 1 << 19), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 1 << 19), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&c, 1), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&c, 1), cudaSuccess); // charged as 256
  void *d = nullptr, *e = nullptr;
  EXPECT_EQ(cudaMalloc(&d, (1 << 19) - 256), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&e, 1), cudaErrorMemoryAllocation);
  cudaFree(d);
  cudaFree(b);
  cudaFree(c);
  cuda_emu::setMemoryCapacity(0);
}

// The stream-order checker: conflicting accesses (a write among them) of two
// streams are reported unless an event wait, the legacy stream's implicit
// wait or a host synchronization orders them; decided at enqueue, so the
// gates make no difference.
TEST(CudaEmulatorStreams, StreamOrderRacesAreReportedUnlessOrdered) {
  cuda_emu::takeStreamOrderReports();
  Streams st(2);
  Streams blocking(1, cudaStreamDefault);
  int *x = deviceInts(64);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  Gate gate;
  ASSERT_TRUE(gate.hold(st[0]));
  ASSERT_EQ(cudaMemsetAsync(x, 0, 64, st[0]), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(x + 8, 1, 64, st[1]), cudaSuccess); // bytes [32, 64) overlap
  std::vector<std::string> r = cuda_emu::takeStreamOrderReports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].find("bytes [32, 64) of the 256-byte allocation"), std::string::npos) << r[0];
  EXPECT_NE(r[0].find("written by cudaMemsetAsync on stream"), std::string::npos) << r[0];
  // Ordered by an event: nothing to report; reads of both streams neither.
  ASSERT_EQ(cudaEventRecord(e, st[1]), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(st[0], e, 0), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(x, 2, 256, st[0]), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, st[0]), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(st[1], e, 0), cudaSuccess);
  int *y = deviceInts(64);
  ASSERT_EQ(cudaMemcpyAsync(y, x, 256, cudaMemcpyDeviceToDevice, st[1]), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y + 32, x, 128, cudaMemcpyDeviceToDevice, st[1]), cudaSuccess);
  EXPECT_TRUE(cuda_emu::takeStreamOrderReports().empty());
  // Unordered again: y read after st[1] wrote it, x written after st[1]
  // read it: two pairs.
  ASSERT_EQ(cudaMemcpyAsync(x, y, 4, cudaMemcpyDeviceToDevice, st[0]), cudaSuccess);
  r = cuda_emu::takeStreamOrderReports();
  ASSERT_EQ(r.size(), 2u);
  // In either order (the checker's, by operation).
  auto has = [&](const char *first, const char *then) {
    return std::count_if(r.begin(), r.end(), [&](const std::string &x) {
      size_t at = x.find(first);
      return at != std::string::npos && x.find(then, at) != std::string::npos;
    });
  };
  EXPECT_EQ(has(": written by cudaMemcpyAsync on stream", "then read by cudaMemcpyAsync"), 1)
      << r[0] << "\n"
      << r[1];
  EXPECT_EQ(has(": read by cudaMemcpyAsync on stream", "then written by cudaMemcpyAsync"), 1)
      << r[0] << "\n"
      << r[1];
  gate.open();
  // The host waited for both: what it enqueues next is ordered after them.
  ASSERT_EQ(cudaStreamSynchronize(st[0]), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st[1]), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(y, 3, 256, st[0]), cudaSuccess);
  EXPECT_TRUE(cuda_emu::takeStreamOrderReports().empty());
  // The legacy stream waits for a blocking stream (and the reverse), not
  // for a non-blocking one.
  ASSERT_EQ(cudaMemsetAsync(x, 4, 4, blocking[0]), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(x, 5, 4, nullptr), cudaSuccess);
  EXPECT_TRUE(cuda_emu::takeStreamOrderReports().empty());
  ASSERT_EQ(cudaMemsetAsync(x, 6, 4, st[1]), cudaSuccess);
  EXPECT_EQ(cuda_emu::takeStreamOrderReports().size(), 1u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaEventDestroy(e);
  cudaFree(x);
  cudaFree(y);
}

// setWaitDrop (FSDP_EMU_DROP_WAIT=N): the N-th wait from now on is not
// enqueued, and what it ordered is reported.
TEST(CudaEmulatorStreams, ADroppedWaitIsReported) {
  cuda_emu::takeStreamOrderReports();
  Streams st(2);
  int *x = deviceInts(1);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  cuda_emu::setWaitDrop(2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cudaMemsetAsync(x, i, 4, st[0]), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(e, st[0]), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(st[1], e, 0), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(x, i, 4, st[1]), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(e, st[1]), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(st[0], e, 0), cudaSuccess);
    EXPECT_EQ(cuda_emu::takeStreamOrderReports().size(), size_t(i)) << "round " << i;
  }
  cuda_emu::setWaitDrop(0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaEventDestroy(e);
  cudaFree(x);
}

__global__ void selfTestWriteBefore(int *x) { x[-1] = 0; }

TEST(CudaEmulatorStreamsDeathTest, AGuardPageLiesBeforeEachAllocation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int *x = deviceInts(1024); // a whole page: its start is the page after the guard
        FSDP_LAUNCH(selfTestWriteBefore, 1, 1, 0, nullptr, x);
        cudaDeviceSynchronize();
      },
      testing::ExitedWithCode(3), "kernel selfTestWriteBefore.*outside device");
}

} // namespace
