// OpenMP and BLAS dense kernels: GEMM through cblas, copy, axpy, bias add and bias gradient.
#include "tessera/kernels/dense_kernels.hpp"

#include "parallel.hpp"
#include "tessera/core/error.hpp"

#include <cblas.h>
#include <climits>
#include <cstdint>
#include <omp.h>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera::kernels::cpu {
namespace {

CBLAS_TRANSPOSE to_cblas(Transpose t) {
  return t == Transpose::Yes ? CblasTrans : CblasNoTrans;
}

/// BLAS here takes 32-bit dimensions.
int blas_int(std::int64_t value, const char* what) {
  if (value > INT_MAX) {
    throw InvalidArgument(std::string("gemm: ") + what + " = " + std::to_string(value) +
                          " exceeds the BLAS index range (2^31 - 1)");
  }
  return static_cast<int>(value);
}

/// c = beta · c, with beta = 0 overwriting (as BLAS does, so NaNs in c do not survive).
template <typename T> void scale(T beta, DenseView<T> c) {
  const std::int64_t size = c.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    c.data[i] = beta == T{0} ? T{0} : beta * c.data[i];
}

} // namespace

template <typename T>
void gemm(const Backend&, Transpose trans_a, Transpose trans_b, T alpha,
          ConstDenseView<T> a, ConstDenseView<T> b, T beta, DenseView<T> c) {
  const std::int64_t m = c.rows;
  const std::int64_t n = c.cols;
  const std::int64_t k = trans_a == Transpose::No ? a.cols : a.rows;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // The product is empty; BLAS would also reject the leading dimension 0 of A or B.
    scale(beta, c);
    return;
  }
  // From here every operand has rows and columns >= 1, so every leading dimension is >= 1.
  const int bm = blas_int(m, "m");
  const int bn = blas_int(n, "n");
  const int bk = blas_int(k, "k");
  const int lda = blas_int(a.cols, "lda");
  const int ldb = blas_int(b.cols, "ldb");
  const int ldc = blas_int(c.cols, "ldc");
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), bm, bn, bk, alpha, a.data, lda,
                b.data, ldb, beta, c.data, ldc);
  } else {
    static_assert(std::is_same_v<T, double>);
    cblas_dgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), bm, bn, bk, alpha, a.data, lda,
                b.data, ldb, beta, c.data, ldc);
  }
}

template <typename T> void copy(const Backend&, ConstDenseView<T> x, DenseView<T> y) {
  if (x.data == y.data) return;
  const std::int64_t size = x.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    y.data[i] = x.data[i];
}

namespace {

/// rows[i] must index one of `n` rows (a serial pass, small next to the copy that follows).
void check_row_ids(const char* op, std::span<const LocalId> rows, std::int64_t n) {
  for (const LocalId r : rows) {
    if (r < 0 || r >= n) {
      throw InvalidArgument(std::string(op) + ": row " + std::to_string(r) + " outside [0, " +
                            std::to_string(n) + ")");
    }
  }
}

} // namespace

template <typename T>
void gather_rows(const Backend&, ConstDenseView<T> x, std::span<const LocalId> rows,
                 DenseView<T> out) {
  check_row_ids("gather_rows", rows, x.rows);
  const std::int64_t f = x.cols;
  const auto m = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < m; ++i) {
    const T* src = x.data + static_cast<std::int64_t>(rows[i]) * f;
    T* dst = out.data + i * f;
#pragma omp simd
    for (std::int64_t c = 0; c < f; ++c) dst[c] = src[c];
  }
}

template <typename T>
void scatter_add_rows(const Backend&, ConstDenseView<T> x, std::span<const LocalId> rows,
                      DenseView<T> out) {
  check_row_ids("scatter_add_rows", rows, out.rows);
  const std::int64_t f = x.cols;
  const auto m = static_cast<std::int64_t>(rows.size());
  // Rows are distinct, so threads never write the same output row.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < m; ++i) {
    const T* src = x.data + i * f;
    T* dst = out.data + static_cast<std::int64_t>(rows[i]) * f;
#pragma omp simd
    for (std::int64_t c = 0; c < f; ++c) dst[c] += src[c];
  }
}

template <typename T> void add_bias(const Backend&, DenseView<T> x, std::span<const T> bias) {
  const std::int64_t f = x.cols;
  const T* bias_data = bias.data();
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < x.rows; ++r) {
    T* row = x.row(r);
#pragma omp simd
    for (std::int64_t j = 0; j < f; ++j)
      row[j] += bias_data[j];
  }
}

template <typename T> void axpy(const Backend&, T alpha, std::span<const T> x, std::span<T> y) {
  const auto size = static_cast<std::int64_t>(y.size());
  const T* in = x.data();
  T* out = y.data();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    out[i] += alpha * in[i];
}

template <typename T>
void bias_grad(const Backend&, ConstDenseView<T> dy, std::span<T> d_bias, bool accumulate) {
  const std::int64_t f = dy.cols;
  if (f == 0) return;
  // Each thread sums a fixed slice of rows in double; the partials are added in thread order,
  // so the result is the same run to run for a given thread count.
  const int max_threads = omp_get_max_threads();
  double* partial = reusable_scratch<double>(static_cast<std::size_t>(f) * max_threads);
#pragma omp parallel
  {
    const int thread = omp_get_thread_num();
    const int threads = omp_get_num_threads();
    double* sum = partial + thread * f;
    for (std::int64_t j = 0; j < f; ++j)
      sum[j] = 0.0;
    const Range rows = static_range(dy.rows, thread, threads);
    for (std::int64_t r = rows.begin; r < rows.end; ++r) {
      const T* row = dy.row(r);
#pragma omp simd
      for (std::int64_t j = 0; j < f; ++j)
        sum[j] += row[j];
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (std::int64_t j = 0; j < f; ++j) {
      double total = accumulate ? static_cast<double>(d_bias[j]) : 0.0;
      for (int t = 0; t < threads; ++t)
        total += partial[t * f + j];
      d_bias[j] = static_cast<T>(total);
    }
  }
}

TESSERA_INSTANTIATE_DENSE_KERNELS(float);
TESSERA_INSTANTIATE_DENSE_KERNELS(double);

} // namespace tessera::kernels::cpu
