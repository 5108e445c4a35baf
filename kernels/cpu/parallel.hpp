// How the OpenMP kernels split work: equal slices of an index range, and CSR row ranges of equal
// cost.
#pragma once

#include "tessera/core/types.hpp"

#include <cstdint>
#include <vector>

namespace tessera::kernels::cpu {

/// A half-open range [begin, end).
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

/// Slice `part` of `parts` near-equal contiguous slices of [0, n).
inline Range static_range(std::int64_t n, int part, int parts) noexcept {
  return {n * part / parts, n * (part + 1) / parts};
}

/// First row of part `part` (0 <= part <= parts) when the rows of a CSR matrix are cut into
/// `parts` contiguous ranges of equal cost. A row costs one unit plus one per nonzero: in the
/// row-major kernels a nonzero streams one input row and a row writes one output row, so empty
/// rows are cheap but not free, and a matrix with all its nonzeros in a few rows still splits.
/// Binary search on row_ptr[r] + r, which is strictly increasing.
inline std::int64_t balanced_row_begin(const Offset* row_ptr, std::int64_t rows, int part,
                                       int parts) noexcept {
  // row_ptr[0] is non-zero for a row slice of a larger matrix (CsrView::row_slice).
  const std::int64_t total = row_ptr[rows] - row_ptr[0] + rows;
  const std::int64_t target = row_ptr[0] + total * part / parts; // total < 2^48: no overflow
  std::int64_t lo = 0;
  std::int64_t hi = rows;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (row_ptr[mid] + mid < target) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// Rows of part `part` of `parts` equal-cost ranges (see balanced_row_begin).
inline Range balanced_rows(const Offset* row_ptr, std::int64_t rows, int part, int parts) noexcept {
  return {balanced_row_begin(row_ptr, rows, part, parts),
          balanced_row_begin(row_ptr, rows, part + 1, parts)};
}

/// At least `n` elements of scratch for the calling thread, uninitialized, reused across calls:
/// the per-thread partial sums of the reductions cost no allocation after the first epoch.
template <typename T> T* reusable_scratch(std::size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

} // namespace tessera::kernels::cpu
