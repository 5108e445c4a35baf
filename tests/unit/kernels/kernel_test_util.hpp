// Shared pieces of the kernel tests: random inputs, a CSR builder, tolerances and a thread guard.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>
#include <omp.h>
#include <random>
#include <vector>

namespace tessera::testing {

using ValueTypes = ::testing::Types<float, double>;

/// Tolerance abs + rel·|ref| of a kernel result of type T against a reference in double.
template <typename T> struct Tolerance {
  static constexpr double abs = sizeof(T) == 4 ? 1e-5 : 1e-12;
  static constexpr double rel = sizeof(T) == 4 ? 1e-5 : 1e-12;
};

template <typename T> bool near(double ref, double got, double scale = 1.0) {
  return std::abs(ref - got) <= scale * (Tolerance<T>::abs + Tolerance<T>::rel * std::abs(ref));
}

/// Expects every element of `got` within tolerance of `ref` (same size), naming the first miss.
/// `scale` widens the tolerance for long sums, whose rounding error grows with the count of terms
/// and depends on the order a BLAS adds them in (which differs between its CPU kernels).
template <typename T>
void expect_all_near(const std::vector<double>& ref, const T* got, std::int64_t size,
                     double scale = 1.0) {
  ASSERT_EQ(static_cast<std::int64_t>(ref.size()), size);
  for (std::int64_t i = 0; i < size; ++i) {
    if (!near<T>(ref[i], static_cast<double>(got[i]), scale)) {
      ADD_FAILURE() << "element " << i << ": expected " << ref[i] << ", got " << got[i];
      return;
    }
  }
}

/// A [rows, cols] matrix of uniform values in [-1, 1).
template <typename T>
DenseT<T> random_dense(const BackendPtr& backend, std::int64_t rows, std::int64_t cols,
                       std::uint64_t seed) {
  DenseT<T> out(backend, rows, cols);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (std::int64_t i = 0; i < out.size(); ++i)
    out.data()[i] = static_cast<T>(dist(gen));
  return out;
}

/// A CSR matrix from per-row (column, value) lists; columns must be sorted within each row.
template <typename T>
CsrT<T> make_csr(const BackendPtr& backend, std::int64_t cols,
                 const std::vector<std::vector<std::pair<LocalId, T>>>& rows) {
  std::int64_t nnz = 0;
  for (const auto& row : rows)
    nnz += static_cast<std::int64_t>(row.size());
  CsrT<T> out(backend, static_cast<std::int64_t>(rows.size()), cols, nnz);
  std::int64_t k = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (const auto& [c, v] : rows[r]) {
      out.col()[k] = c;
      out.val()[k] = v;
      ++k;
    }
    out.row_ptr()[r + 1] = k;
  }
  return out;
}

/// A random [rows, cols] CSR matrix: each entry present with probability `density`, every
/// `empty_every`-th row (when > 0) left empty, values uniform in [-1, 1).
template <typename T>
CsrT<T> random_csr(const BackendPtr& backend, std::int64_t rows, std::int64_t cols, double density,
                   std::uint64_t seed, std::int64_t empty_every = 0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::bernoulli_distribution present(density);
  std::vector<std::vector<std::pair<LocalId, T>>> lists(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (empty_every > 0 && r % empty_every == 0) continue;
    for (std::int64_t c = 0; c < cols; ++c) {
      if (present(gen)) lists[r].emplace_back(static_cast<LocalId>(c), static_cast<T>(dist(gen)));
    }
  }
  return make_csr<T>(backend, cols, lists);
}

/// Sets the OpenMP thread count for one scope and restores it afterwards.
class ThreadCount {
public:
  explicit ThreadCount(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ThreadCount() { omp_set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

private:
  int saved_;
};

/// The values of a matrix as doubles (for comparisons).
template <typename T> std::vector<double> as_doubles(const T* data, std::int64_t size) {
  return std::vector<double>(data, data + size);
}

} // namespace tessera::testing
