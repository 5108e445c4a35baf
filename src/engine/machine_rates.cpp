// STREAM triad and sgemm measurements, and the SpMM byte model.
#include "tessera/engine/machine_rates.hpp"

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/ops/ops.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <sys/mman.h>

namespace tessera {

namespace {

/// The rate of `work` units per run of `run`: `repeats` timed runs after one untimed.
template <typename F> MeasuredRate measure_rate(double work, int repeats, F&& run) {
  run(); // warm-up: first touch, page faults, BLAS's buffers, frequency ramp
  std::vector<double> rates;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    const Stopwatch clock;
    run();
    rates.push_back(work / clock.seconds());
  }
  std::sort(rates.begin(), rates.end());
  return {rates.back(), median(rates), rates.front(), static_cast<int>(rates.size())};
}

/// "48M", "32K" or bytes as sysfs writes a cache size, in bytes; 0 when unreadable.
std::int64_t parse_cache_size(const std::string& text) {
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const char suffix = used < text.size() ? text[used] : '\0';
  if (suffix == 'K') return value << 10;
  if (suffix == 'M') return value << 20;
  if (suffix == 'G') return value << 30;
  return value;
}

/// Float arrays the triad sweeps, with huge pages asked for (fewer first-touch faults).
struct HostArray {
  explicit HostArray(std::int64_t elements)
      : bytes(static_cast<std::size_t>(elements) * sizeof(float)),
        data(static_cast<float*>(std::aligned_alloc(std::size_t{2} << 20, round_up(bytes)))) {
    if (data == nullptr) throw std::bad_alloc();
    madvise(data, round_up(bytes), MADV_HUGEPAGE);
  }
  ~HostArray() { std::free(data); }
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;
  static std::size_t round_up(std::size_t n) {
    const std::size_t page = std::size_t{2} << 20;
    return (n + page - 1) / page * page;
  }
  std::size_t bytes;
  float* data;
};

} // namespace

std::string MeasuredRate::describe(const std::string& unit) const {
  return fmt::format("{:.1f} {} (median {:.1f}, worst {:.1f}, {} runs)", best, unit, median, worst,
                     runs);
}

std::int64_t last_level_cache_bytes() {
  namespace fs = std::filesystem;
  int best_level = 0;
  std::int64_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/devices/system/cpu/cpu0/cache", ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    int level = 0;
    std::string size;
    std::ifstream(entry.path() / "level") >> level;
    std::ifstream(entry.path() / "size") >> size;
    if (level > best_level) {
      best_level = level;
      bytes = parse_cache_size(size);
    }
  }
  return bytes;
}

std::int64_t default_triad_elements() {
  const std::int64_t floor = std::int64_t{64} << 20;
  return std::max(floor, 4 * last_level_cache_bytes() / static_cast<std::int64_t>(sizeof(float)));
}

MeasuredRate stream_triad(std::int64_t elements, int repeats) {
  HostArray a(elements), b(elements), c(elements);
  float* pa = a.data;
  float* pb = b.data;
  float* pc = c.data;
  // Touched first by the threads that sweep them, in the same static schedule.
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < elements; ++i) {
    pa[i] = 0.0f;
    pb[i] = 1.0f;
    pc[i] = 2.0f;
  }
  const float s = 3.0f;
  const double bytes = 3.0 * static_cast<double>(elements) * sizeof(float);
  return measure_rate(bytes / 1e9, repeats, [&] {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < elements; ++i)
      pa[i] = pb[i] + s * pc[i];
  });
}

MeasuredRate stream_read(std::int64_t elements, int repeats) {
  HostArray a(elements);
  float* pa = a.data;
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < elements; ++i)
    pa[i] = 1.0f;
  volatile float sink = 0.0f; // keeps the sums from being optimized away
  const double bytes = static_cast<double>(elements) * sizeof(float);
  // 64 lanes of partial sums (four AVX-512 registers): one running sum would be a chain of
  // dependent adds, bound by their latency instead of by memory.
  constexpr std::int64_t kLanes = 64;
  const std::int64_t blocks = elements / kLanes;
  return measure_rate(bytes / 1e9, repeats, [&] {
    float sum = 0.0f;
#pragma omp parallel reduction(+ : sum)
    {
      float lanes[kLanes] = {};
#pragma omp for schedule(static)
      for (std::int64_t block = 0; block < blocks; ++block) {
        const float* p = pa + block * kLanes;
#pragma omp simd
        for (std::int64_t j = 0; j < kLanes; ++j)
          lanes[j] += p[j];
      }
      for (const float lane : lanes)
        sum += lane;
    }
    for (std::int64_t i = blocks * kLanes; i < elements; ++i)
      sum += pa[i];
    sink = sum;
  });
}

MeasuredRate sgemm_rate(std::int64_t m, std::int64_t n, std::int64_t k, int repeats) {
  const BackendPtr cpu = make_cpu_backend();
  Dense a = Dense::zeros(cpu, m, k), b = Dense::zeros(cpu, k, n), c = Dense::zeros(cpu, m, n);
  a.fill(0.5f);
  b.fill(0.25f);
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return measure_rate(flops / 1e9, repeats, [&] {
    ops::gemm(*cpu, Transpose::No, Transpose::No, 1.0f, a.cview(), b.cview(), 0.0f, c.view());
  });
}

double spmm_model_bytes(std::int64_t rows, std::int64_t nnz, std::int64_t width,
                        std::size_t b_element_bytes) {
  const double r = static_cast<double>(rows), z = static_cast<double>(nnz);
  const double w = static_cast<double>(width) * sizeof(float);
  const double b_row = static_cast<double>(width) * static_cast<double>(b_element_bytes);
  return (r + 1) * sizeof(Offset) + z * (sizeof(LocalId) + sizeof(float)) + z * b_row + r * w;
}

} // namespace tessera
