// GPU kernel rates: cuSPARSE SpMM effective bandwidth against a device-to-device copy measured
// in the same run (target: SpMM >= 50 % of the copy at width >= 64), and the GEMM rate of the
// GCN layer's dense product. Median of timed repetitions after a warm-up, each closed by a
// stream synchronization.
//
//   tessera-bench-cuda [--scale S] [--repeats R]     (R-MAT 2^S nodes, edge factor 16)

#include <CLI/CLI.hpp>
#include <cstdint>
#include <exception>
#include <fmt/core.h>
#include <tessera/tessera.hpp>
#include <vector>

namespace {

using tessera::BackendPtr;
using tessera::Stopwatch;

/// Median seconds of `run` over `repeats` timed calls after two untimed ones.
template <typename F> double median_seconds(const BackendPtr& gpu, int repeats, F&& run) {
  for (int i = 0; i < 2; ++i)
    run();
  gpu->synchronize();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const Stopwatch clock;
    run();
    gpu->synchronize();
    times.push_back(clock.seconds());
  }
  return tessera::median(std::move(times));
}

int run(int scale, int repeats) {
  if (tessera::cuda_device_count() == 0) {
    fmt::print("no CUDA device visible ({}): nothing to measure\n",
               tessera::cuda_compiled() ? "no GPU" : "this build has no CUDA backend");
    return 0;
  }
  const BackendPtr gpu = tessera::make_cuda_backend(0);
  const BackendPtr cpu = tessera::make_cpu_backend();
  fmt::print("device: {}\n", gpu->describe());

  // Device-to-device copy of 1 GiB: read + write counted.
  const std::int64_t copy_floats = std::int64_t{1} << 28;
  tessera::Dense src = tessera::Dense::zeros(gpu, 1, copy_floats);
  tessera::Dense dst(gpu, 1, copy_floats);
  const double copy_s =
      median_seconds(gpu, repeats, [&] { tessera::ops::copy(*gpu, src.cview(), dst.view()); });
  const double copy_gbps = 2.0 * static_cast<double>(src.bytes()) / copy_s / 1e9;

  tessera::datasets::LoadOptions load;
  const auto data = tessera::datasets::load_dataset(
      cpu, fmt::format("rmat:scale={},edge-factor=16,features=1,classes=2", scale), load);
  const tessera::Csr a_hat = tessera::graph::gcn_normalize(data.adjacency);
  const tessera::Csr a = tessera::to_backend(a_hat, gpu);
  fmt::print("graph: R-MAT scale {}: {} nodes, {} nonzeros in A-hat\n", scale, a.rows(), a.nnz());
  fmt::print("{:>6} {:>12} {:>12} {:>14}\n", "width", "SpMM ms", "SpMM GB/s", "SpMM / copy");
  for (const std::int64_t width : {16, 32, 64, 128, 256}) {
    const tessera::Dense b = tessera::Dense::zeros(gpu, a.cols(), width);
    tessera::Dense c(gpu, a.rows(), width);
    const double s = median_seconds(
        gpu, repeats, [&] { tessera::ops::spmm(*gpu, a.view(), b.cview(), c.view()); });
    const double gbps = tessera::spmm_model_bytes(a.rows(), a.nnz(), width) / s / 1e9;
    fmt::print("{:>6} {:>12.3f} {:>12.1f} {:>14.2f}{}\n", width, 1e3 * s, gbps, gbps / copy_gbps,
               width >= 64 ? (gbps / copy_gbps >= 0.5 ? "  (target >= 0.5: met)"
                                                      : "  (target >= 0.5: MISSED)")
                           : "");
  }
  fmt::print("device-to-device copy: {:.1f} GB/s\n", copy_gbps);

  const std::int64_t m = a.rows(), k = 128, n = 128;
  const tessera::Dense x = tessera::Dense::zeros(gpu, m, k);
  const tessera::Dense w = tessera::Dense::zeros(gpu, k, n);
  tessera::Dense y(gpu, m, n);
  const double gemm_s = median_seconds(gpu, repeats, [&] {
    tessera::ops::gemm(*gpu, tessera::Transpose::No, tessera::Transpose::No, 1.0f,
                       x.cview(), w.cview(), 0.0f, y.view());
  });
  fmt::print("sgemm [{}, {}] x [{}, {}]: {:.0f} GFLOP/s\n", m, k, k, n,
             2.0 * static_cast<double>(m * k * n) / gemm_s / 1e9);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"cuSPARSE SpMM bandwidth against a device-to-device copy, and the GEMM rate."};
  int scale = 20;
  int repeats = 10;
  app.add_option("--scale", scale, "R-MAT scale: 2^S nodes, edge factor 16")
      ->capture_default_str()
      ->check(CLI::Range(4, 26));
  app.add_option("--repeats", repeats, "timed repetitions (median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(scale, repeats);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
