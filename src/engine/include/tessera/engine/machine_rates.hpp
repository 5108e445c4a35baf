// Rates of the machine a rank runs on, measured in the process that uses them: STREAM triad
// bandwidth, the GEMM rate, and the byte model an SpMM is measured against. What benchmarks
// quote ratios to and the scheduler's cost model predicts with.
#pragma once

#include <cstdint>

namespace tessera {

/// Median STREAM triad bandwidth (a[i] = b[i] + s·c[i], 3 arrays of `elements` floats counted)
/// in GB/s over `repeats` runs with the current OpenMP thread count, in host memory.
double stream_triad_gbps(std::int64_t elements = std::int64_t{64} << 20, int repeats = 5);

/// Median sgemm rate in GFLOP/s of C[m, n] = A[m, k] · B[k, n] through the library's GEMM op on
/// the host's BLAS.
double sgemm_gflops(std::int64_t m, std::int64_t n, std::int64_t k, int repeats = 5);

/// Bytes the no-reuse model counts for C = A·B with A [rows, ·] CSR of `nnz` nonzeros and
/// `width` float columns in B and C: row pointers + column ids + values + one B row per nonzero
/// + C written.
double spmm_model_bytes(std::int64_t rows, std::int64_t nnz, std::int64_t width);

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
