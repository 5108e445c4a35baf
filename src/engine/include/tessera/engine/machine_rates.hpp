// Rates of the machine a rank runs on, measured in the process that uses them: STREAM triad
// bandwidth, the GEMM rate, and the byte model an SpMM is measured against. What benchmarks
// quote ratios to and the scheduler's cost model predicts with.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

/// A rate measured the STREAM way: timed runs after one untimed warm-up, the best of them (what
/// STREAM reports, and what a ratio to it should divide by) with the median and the worst to
/// show how much the machine wandered meanwhile.
struct MeasuredRate {
  double best = 0.0;
  double median = 0.0;
  double worst = 0.0;
  int runs = 0;

  /// "28.1 GB/s (median 27.5, worst 25.0, 10 runs)" for unit "GB/s".
  std::string describe(const std::string& unit) const;
};

/// The size in bytes of the host's last-level cache (from sysfs), 0 when it does not say.
std::int64_t last_level_cache_bytes();

/// The STREAM triad array length used when none is given: every array at least 4x the
/// last-level cache (STREAM's rule, so no sweep is served from cache) and at least 64 Mi floats.
std::int64_t default_triad_elements();

/// STREAM triad bandwidth (a[i] = b[i] + s·c[i]; 3 arrays of `elements` floats counted, the
/// write-allocate traffic not) in GB/s over `repeats` sweeps with the current OpenMP thread
/// count, in host memory first touched by the threads that sweep it.
MeasuredRate stream_triad(std::int64_t elements = default_triad_elements(), int repeats = 10);

/// Read-only bandwidth in GB/s: the sum of one array of `elements` floats (the bytes read
/// counted) over `repeats` sweeps after a warm-up, with the current OpenMP thread count. What a
/// read-mostly kernel such as SpMM can hope for: the triad also pays a write-allocate read.
MeasuredRate stream_read(std::int64_t elements = default_triad_elements(), int repeats = 10);

/// The sgemm rate in GFLOP/s of C[m, n] = A[m, k] · B[k, n] through the library's GEMM op on the
/// host's BLAS, over `repeats` runs after a warm-up.
MeasuredRate sgemm_rate(std::int64_t m, std::int64_t n, std::int64_t k, int repeats = 5);

/// Bytes the no-reuse model counts for C = A·B with A [rows, ·] CSR of `nnz` nonzeros and
/// `width` columns in B and C (float32 C, B's elements of `b_element_bytes`): row pointers +
/// column ids + values + one B row per nonzero + C written.
double spmm_model_bytes(std::int64_t rows, std::int64_t nnz, std::int64_t width,
                        std::size_t b_element_bytes = sizeof(float));

/// The median time in seconds of `repeats` calls of `run`.
template <typename F> double median_seconds(int repeats, F&& run);

} // namespace tessera

#include "tessera/core/timer.hpp"

#include <algorithm>
#include <vector>

namespace tessera {

template <typename F> double median_seconds(int repeats, F&& run) {
  std::vector<double> seconds;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    const Stopwatch clock;
    run();
    seconds.push_back(clock.seconds());
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

} // namespace tessera
