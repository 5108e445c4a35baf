// Reference rates of this machine, measured in the same process as the benchmark that uses
// them: STREAM triad bandwidth and the BLAS sgemm rate.
#pragma once

#include <cstdint>

namespace tessera::bench {

/// Median STREAM triad bandwidth (a[i] = b[i] + s·c[i], 3 arrays of `elements` floats counted)
/// in GB/s over `repeats` runs with the current OpenMP thread count.
double stream_triad_gbps(std::int64_t elements = std::int64_t{64} << 20, int repeats = 5);

/// Median sgemm rate in GFLOP/s of C[m, n] = A[m, k] · B[k, n] through the library's GEMM op.
double sgemm_gflops(std::int64_t m, std::int64_t n, std::int64_t k, int repeats = 5);

/// Bytes the no-reuse model counts for C = A·B with A [rows, ·] CSR of `nnz` nonzeros and
/// `width` columns in B and C: row pointers + column ids + values + one B row per nonzero +
/// C written.
double spmm_bytes(std::int64_t rows, std::int64_t nnz, std::int64_t width);

}  // namespace tessera::bench
