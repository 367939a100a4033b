//===- fsdp-calibrate.cpp - measure this machine for the cost model -------===//
//
//   fsdp-calibrate -o FILE.json [--quick]
//
// Measures what the CPU backends run on: the sgemm rate by size (one BLAS
// thread, as each rank has), the memory bandwidth, the cost of one small
// kernel, and the threads backend's collectives by size and group, fitted to
// latency + bytes / bandwidth. Writes a cluster file for fsdp-plan --cluster.
//
//===----------------------------------------------------------------------===//
#include "runtime/Blas.h"
#include "runtime/Communicator.h"
#include "runtime/kernels/cpu.h"
#include "tools/Version.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace fsdp;
using Clock = std::chrono::steady_clock;

// The median of `reps` timings: what a step of training sees on a machine
// shared with others, where the best case would be optimistic.
template <typename F> static double best(int reps, F f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto s = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - s).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// Seconds for one collective over `n` thread ranks, `bytes` of full buffer.
static double collective(bool gather, int n, int64_t bytes, int reps) {
  auto world = runtime::createThreadsWorld(n, n);
  int64_t count = bytes / 4 / n;
  std::vector<double> times(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto comm = runtime::threadsCommunicator(world, r);
      std::vector<float> full(count * n, 1.0f), shard(count, 0.0f);
      double sum = 0;
      comm->allReduceScalar(runtime::Group::World, &sum);
      times[r] = best(reps, [&] {
        if (gather)
          comm->allGather(runtime::Group::Shard, shard.data(), full.data(), count * 4);
        else
          comm->reduceScatterAdd(runtime::Group::Shard, full.data(), shard.data(), count);
      });
    });
  for (auto &t : threads)
    t.join();
  return *std::max_element(times.begin(), times.end());
}

static const char *kUsage =
    "usage: fsdp-calibrate -o FILE.json [--quick]\n"
    "Measures this machine for the CPU backends (sgemm rate by size, memory\n"
    "bandwidth, the threads backend's collectives) and writes a cluster file for\n"
    "fsdp-plan --cluster.\n"
    "  -o FILE.json   the cluster file to write (required)\n"
    "  --quick        3 repetitions of each measurement instead of 9\n"
    "  --help, --version\n";

int main(int argc, char **argv) {
  runtime::chooseBlasKernels(argv);
  std::string out;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o" && i + 1 < argc)
      out = argv[++i];
    else if (a == "--quick")
      quick = true;
    else if (a == "--version") {
      std::printf("fsdp-calibrate (fsdp) %s\n", FSDP_VERSION);
      return 0;
    } else if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      std::fprintf(stderr, "%s", kUsage);
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "fsdp-calibrate: error: -o FILE.json is required\n");
    return 2;
  }
  // A file that cannot be written is an error now, not after the measuring.
  {
    std::string probe = out + ".tmp";
    std::ofstream f(probe);
    if (!f) {
      std::fprintf(stderr, "fsdp-calibrate: error: cannot write %s\n", out.c_str());
      return 1;
    }
    f.close();
    std::remove(probe.c_str());
  }
  openblas_set_num_threads(1);
  int reps = quick ? 3 : 9;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());

  // sgemm by shape, m x k times k x n over a grid of sizes, on operands
  // reused from call to call: a small model's step works within this
  // machine's large last-level cache (measured: predictions within a few
  // percent this way, 25% high with operands rotated through 64 MiB).
  // FSDP_CALIBRATE_COLD=1 rotates them, for models far beyond the cache.
  nlohmann::json rates = nlohmann::json::array();
  std::printf("matmul (one thread, OpenBLAS %s kernels), GFLOP/s by m x k x n\n",
              openblas_get_corename());
  std::vector<int> sizes =
      quick ? std::vector<int>{64, 512, 4096} : std::vector<int>{32, 128, 512, 2048, 8192};
  const size_t coldBytes = 64 << 20; // beyond the last-level cache
  std::vector<float> pool(coldBytes / 4, 0.5f);
  for (int m : sizes)
    for (int k : sizes)
      for (int n : sizes) {
        double flops = 2.0 * m * k * n;
        if (flops > 4e9 || (size_t)(m * k + k * n + m * n) * 4 > coldBytes / 4)
          continue;
        size_t per = (size_t)m * k + (size_t)k * n + (size_t)m * n;
        size_t slots =
            std::getenv("FSDP_CALIBRATE_COLD") ? std::max<size_t>(1, pool.size() / per) : 1;
        size_t slot = 0;
        int calls = std::max(3, (int)std::min(200.0, 2e8 / flops));
        auto run = [&] {
          for (int i = 0; i < calls; ++i) {
            float *base = pool.data() + (slot++ % slots) * per;
            kernels::linearForward(base, base + (size_t)m * k, nullptr,
                                   base + (size_t)m * k + (size_t)k * n, m, k, n,
                                   kernels::Layout::InOut);
          }
        };
        double t = best(reps, run) / calls;
        rates.push_back({m, k, n, flops / t});
        if (!quick || (m == k && k == n))
          std::printf("  %5d x %5d x %5d  %8.2f\n", m, k, n, flops / t / 1e9);
      }

  // Memory bandwidth: a streaming add over arrays far larger than the caches.
  int64_t n = quick ? (8 << 20) : (32 << 20);
  std::vector<float> x(n, 1.0f), y(n, 2.0f), z(n);
  double t = best(reps, [&] { kernels::add(x.data(), y.data(), z.data(), n); });
  double bandwidth = 3.0 * n * 4 / t;
  std::printf("memory bandwidth (add, %lld MiB arrays): %.1f GB/s\n", (long long)(n * 4 >> 20),
              bandwidth / 1e9);

  // Ranks side by side: the same work on every core at once runs slower than
  // alone (shared caches, memory, turbo); the cost model divides by this.
  double parallel = 1.0;
  if (cores > 1) {
    int m = 512, k = 256, n = 512;
    auto work = [&] {
      std::vector<float> a((size_t)m * k, 0.5f), b((size_t)k * n, 0.25f), c((size_t)m * n);
      std::vector<float> x(1 << 20, 1.0f), y(1 << 20);
      for (int i = 0; i < 40; ++i) {
        kernels::linearForward(a.data(), b.data(), nullptr, c.data(), m, k, n,
                               kernels::Layout::InOut);
        kernels::geluForward(x.data(), y.data(), (int64_t)x.size(), true);
      }
    };
    // Alone and side by side in turns, the median of the pairs' ratios: a
    // machine whose speed drifts (other tenants) moves both of a pair alike,
    // where two blocks of runs one after the other would each see a
    // different machine.
    auto seconds = [](auto f) {
      auto s = Clock::now();
      f();
      return std::chrono::duration<double>(Clock::now() - s).count();
    };
    std::vector<double> ratios;
    for (int r = 0; r < reps; ++r) {
      double alone = seconds(work);
      double together = seconds([&] {
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < cores; ++t)
          ts.emplace_back(work);
        for (auto &t : ts)
          t.join();
      });
      ratios.push_back(alone / together);
    }
    std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
    parallel = std::min(1.0, ratios[ratios.size() / 2]);
  }
  std::printf("parallel efficiency of %u ranks on %u cores: %.2f\n", cores, cores, parallel);

  // Element-wise arithmetic: GELU's tanh on data in cache, counted as the
  // cost model counts it (20 operations an element).
  int64_t m = 1 << 16;
  std::vector<float> gx(m, 0.3f), gy(m);
  double gt = best(reps * 3, [&] { kernels::geluForward(gx.data(), gy.data(), m, true); });
  double vector = 20.0 * m / gt;
  std::printf("element-wise arithmetic (gelu): %.1f GFLOP/s by the model's count\n", vector / 1e9);

  // The fixed cost of a small kernel.
  std::vector<float> tiny(64, 1.0f);
  double overhead = best(reps,
                         [&] {
                           for (int i = 0; i < 1000; ++i)
                             kernels::add(tiny.data(), tiny.data(), tiny.data() + 32, 32);
                         }) /
                    1000;
  std::printf("small-kernel overhead: %.1f ns\n", overhead * 1e9);

  // --offload's figures. A CPU rank's host pool is more of the same
  // memory: the copy to and from it is a memcpy, and the host's AdamW is
  // the kernel a rank runs, over data not in cache.
  int64_t hn = n; // as many elements as the bandwidth's arrays: far larger than the caches
  std::vector<float> hp(hn, 0.5f), hg(hn, 0.01f), hm(hn, 0.f), hv(hn, 0.f), hc(hn);
  int64_t adamStep = 0;
  double adamT = best(reps, [&] {
    kernels::adamw(hp.data(), hg.data(), hm.data(), hv.data(), nullptr, hn, ++adamStep, 1e-3, 0.9,
                   0.999, 1e-8, 0.01, 1.0);
  });
  double adamwRate = double(hn) / adamT;
  double copyT = best(reps, [&] { std::memcpy(hc.data(), hp.data(), size_t(hn) * 4); });
  double hostLink = double(hn) * 4 / copyT;
  std::printf("host AdamW: %.3g elements/s; host copy (memcpy): %.2f GB/s\n", adamwRate,
              hostLink / 1e9);

  // Threads-backend collectives: fit t = (n-1) latency + bytes (n-1)/n / bw.
  double sxx = 0, sxy = 0, sx = 0, sy = 0, sxz = 0, szz = 0, szy = 0, sz = 0;
  int samples = 0;
  std::vector<std::tuple<int, int64_t, double, double>> measured;
  for (int ranks : {2, 4})
    for (int64_t bytes : {int64_t(16) << 10, int64_t(256) << 10, int64_t(4) << 20}) {
      double g = collective(true, ranks, bytes, reps);
      double r = collective(false, ranks, bytes, reps);
      measured.push_back({ranks, bytes, g, r});
      for (double s : {g, r}) {
        double xv = (double)bytes * (ranks - 1) / ranks, zv = ranks - 1;
        sxx += xv * xv;
        sxy += xv * s;
        sx += xv;
        sy += s;
        sxz += xv * zv;
        szz += zv * zv;
        szy += zv * s;
        sz += zv;
        ++samples;
      }
    }
  // Least squares for s = zv * latency + xv / bw (no intercept).
  double det = sxx * szz - sxz * sxz;
  double invBw = det != 0 ? (sxy * szz - szy * sxz) / det : 1e-9;
  double latency = det != 0 ? (szy * sxx - sxy * sxz) / det : 0;
  if (invBw <= 0)
    invBw = 1e-10;
  latency = std::max(0.0, latency);
  std::printf("threads collectives: latency %.2f us a step, bus bandwidth %.2f GB/s\n",
              latency * 1e6, 1 / invBw / 1e9);
  for (auto [ranks, bytes, g, r] : measured)
    std::printf("  %d ranks, %8lld bytes: all_gather %8.1f us, reduce_scatter %8.1f us\n", ranks,
                (long long)bytes, g * 1e6, r * 1e6);

  double peak = 0;
  for (auto &r : rates)
    peak = std::max(peak, r[3].get<double>());
  nlohmann::ordered_json cluster = {
      {"format", "fsdp-cluster"},
      {"version", 1},
      {"device", "cpu"},
      {"name", std::string("this machine (fsdp-calibrate, OpenBLAS ") + openblas_get_corename() +
                   " kernels, " + std::to_string(cores) + " cores)"},
      {"ranks_per_node", 1024},
      {"cores", cores},
      {"memory_bytes", (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE)},
      {"compute",
       {{"f32_flops", peak},
        {"bf16_flops", peak},
        {"matmul_efficiency", 1.0},
        {"memory_bandwidth", bandwidth},
        {"memory_efficiency", 1.0},
        {"op_overhead_s", overhead},
        {"vector_flops", vector},
        {"parallel_efficiency", parallel},
        {"gemm_rates", rates}}},
      {"intra_node", {{"bandwidth", 1 / invBw}, {"latency_s", latency}, {"efficiency", 1.0}}},
      {"inter_node", {{"bandwidth", 1 / invBw}, {"latency_s", latency}, {"efficiency", 1.0}}},
      {"host_link", {{"bandwidth", hostLink}, {"latency_s", overhead}, {"efficiency", 1.0}}},
      {"host",
       {{"memory_bytes", (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE)},
        {"adamw_elements_per_s", adamwRate}}},
      {"sources",
       {{"all", "measured by fsdp-calibrate"},
        {"host_link", "a memcpy of an array as large as memory_bandwidth's (a CPU rank's host "
                      "pool is the same memory)"},
        {"host", "kernels::adamw on one thread over arrays as large as memory_bandwidth's"}}}};
  std::ofstream f(out + ".tmp");
  f << cluster.dump(2) << "\n";
  f.close();
  if (!f || std::rename((out + ".tmp").c_str(), out.c_str()) != 0) {
    std::fprintf(stderr, "fsdp-calibrate: error: cannot write %s\n", out.c_str());
    return 1;
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
