// The CPU dense kernels (GEMM, copy, bias) against naive loops.
#include "tessera/kernels/dense_kernels.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <tuple>
#include <vector>

namespace tessera::testing {
namespace {

/// alpha · op(A) · op(B) + beta · C by the definition, in double.
template <typename T>
std::vector<double> gemm_ref(Transpose ta, Transpose tb, double alpha, const DenseT<T>& a,
                             const DenseT<T>& b, double beta, const DenseT<T>& c) {
  const std::int64_t k = ta == Transpose::No ? a.cols() : a.rows();
  std::vector<double> out(static_cast<std::size_t>(c.size()));
  for (std::int64_t i = 0; i < c.rows(); ++i) {
    for (std::int64_t j = 0; j < c.cols(); ++j) {
      double sum = 0.0;
      for (std::int64_t l = 0; l < k; ++l) {
        const double x = ta == Transpose::No ? a(i, l) : a(l, i);
        const double y = tb == Transpose::No ? b(l, j) : b(j, l);
        sum += x * y;
      }
      out[i * c.cols() + j] = alpha * sum + (beta == 0.0 ? 0.0 : beta * c(i, j));
    }
  }
  return out;
}

template <typename T> class DenseKernels : public ::testing::Test {
protected:
  BackendPtr backend = make_cpu_backend();
};
TYPED_TEST_SUITE(DenseKernels, ValueTypes);

TYPED_TEST(DenseKernels, GemmMatchesHandComputedProduct) {
  using T = TypeParam;
  // [[1, 2], [3, 4]] · [[5, 6], [7, 8]] = [[19, 22], [43, 50]]; alpha = 2, beta = 1, C = 1.
  DenseT<T> a(this->backend, 2, 2);
  DenseT<T> b(this->backend, 2, 2);
  DenseT<T> c(this->backend, 2, 2);
  for (int i = 0; i < 4; ++i) {
    a.data()[i] = static_cast<T>(i + 1);
    b.data()[i] = static_cast<T>(i + 5);
  }
  c.fill(T{1});

  kernels::cpu::gemm(*this->backend, Transpose::No, Transpose::No, T{2}, a.cview(), b.cview(), T{1},
                     c.view());

  EXPECT_EQ(c(0, 0), T{39});
  EXPECT_EQ(c(0, 1), T{45});
  EXPECT_EQ(c(1, 0), T{87});
  EXPECT_EQ(c(1, 1), T{101});
}

TYPED_TEST(DenseKernels, GemmIsEquivalentToRef) {
  using T = TypeParam;
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 1},
      {7, 3, 5},
      {33, 65, 17},
      {128, 128, 16},
      // Tall-skinny shapes of a GCN's output layer, which run on the narrow kernels (m >= 4096
      // rows, or k >= 4096 shared rows transposed): x·W, d(xW)·Wᵀ, xᵀ·d(xW); and one beside them.
      {4101, 128, 16},
      {4101, 16, 128},
      {128, 4101, 16},
      {4100, 24, 32},
      // A hidden layer's x·W and xᵀ·d(xW) on the column panels (rows not a multiple of the six
      // a tile takes, fewer than six, two and three panels), and one whose width is not whole
      // panels (BLAS).
      {4101, 128, 128},
      {4099, 40, 192},
      {128, 4101, 128},
      {40, 4099, 192},
      {5, 4099, 128},
      {4100, 128, 96}};
  for (const auto& [m, k, n] : shapes) {
    for (const auto ta : {Transpose::No, Transpose::Yes}) {
      for (const auto tb : {Transpose::No, Transpose::Yes}) {
        SCOPED_TRACE(::testing::Message()
                     << "m " << m << " k " << k << " n " << n << " ta " << (ta == Transpose::Yes)
                     << " tb " << (tb == Transpose::Yes));
        const auto a = ta == Transpose::No ? random_dense<T>(this->backend, m, k, 1)
                                           : random_dense<T>(this->backend, k, m, 1);
        const auto b = tb == Transpose::No ? random_dense<T>(this->backend, k, n, 2)
                                           : random_dense<T>(this->backend, n, k, 2);
        const auto c0 = random_dense<T>(this->backend, m, n, 3);
        const auto ref = gemm_ref(ta, tb, 0.5, a, b, -1.5, c0);
        for (const int threads : {1, 2}) { // the per-thread sums of aᵀ·b added in thread order
          SCOPED_TRACE(::testing::Message() << threads << " threads");
          const ThreadCount scope(threads);
          auto c = random_dense<T>(this->backend, m, n, 3);

          kernels::cpu::gemm(*this->backend, ta, tb, T{0.5}, a.cview(), b.cview(), T{-1.5},
                             c.view());

          // A float sum of k terms errs by about sqrt(k) roundings: OpenBLAS's AVX2 kernels
          // reach 1.3e-5 at k = 4101 (this 1e-5 tolerance holds to k = 256).
          expect_all_near(ref, c.data(), c.size(),
                          std::max(1.0, std::sqrt(static_cast<double>(k) / 256.0)));
        }
      }
    }
  }
}

TYPED_TEST(DenseKernels, GemmWithEmptyInnerDimensionScalesC) {
  using T = TypeParam;
  const DenseT<T> a(this->backend, 3, 0);
  const DenseT<T> b(this->backend, 0, 2);
  DenseT<T> scaled(this->backend, 3, 2);
  DenseT<T> overwritten(this->backend, 3, 2);
  scaled.fill(T{4});
  overwritten.fill(std::numeric_limits<T>::quiet_NaN());

  kernels::cpu::gemm(*this->backend, Transpose::No, Transpose::No, T{1}, a.cview(), b.cview(),
                     T{0.5}, scaled.view());
  kernels::cpu::gemm(*this->backend, Transpose::No, Transpose::No, T{1}, a.cview(), b.cview(), T{0},
                     overwritten.view());

  expect_all_near(std::vector<double>(6, 2.0), scaled.data(), scaled.size());
  expect_all_near(std::vector<double>(6, 0.0), overwritten.data(), overwritten.size());
}

TYPED_TEST(DenseKernels, CopyIsEquivalentToRef) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->backend, 33, 65, 1);
  DenseT<T> y(this->backend, 33, 65);

  kernels::cpu::copy(*this->backend, x.cview(), y.view());

  expect_all_near(as_doubles(x.data(), x.size()), y.data(), y.size());
}

TYPED_TEST(DenseKernels, GatherRowsIsEquivalentToRef) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->backend, 20, 33, 2);
  const std::vector<LocalId> rows = {19, 0, 7, 7, 3};  // repeats allowed
  DenseT<T> out(this->backend, 5, 33);

  kernels::cpu::gather_rows(*this->backend, x.cview(), std::span<const LocalId>(rows), out.view());

  std::vector<double> ref;
  for (const LocalId r : rows)
    for (std::int64_t c = 0; c < 33; ++c) ref.push_back(static_cast<double>(x(r, c)));
  expect_all_near(ref, out.data(), out.size());
}

TYPED_TEST(DenseKernels, ScatterAddRowsIsEquivalentToRef) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->backend, 4, 17, 3);
  auto out = random_dense<T>(this->backend, 9, 17, 4);
  const std::vector<LocalId> rows = {8, 2, 5, 0};
  std::vector<double> ref = as_doubles(out.data(), out.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::int64_t c = 0; c < 17; ++c)
      ref[rows[i] * 17 + c] += static_cast<double>(x(static_cast<std::int64_t>(i), c));

  kernels::cpu::scatter_add_rows(*this->backend, x.cview(), std::span<const LocalId>(rows),
                                 out.view());

  expect_all_near(ref, out.data(), out.size());
}

TYPED_TEST(DenseKernels, AddBiasIsEquivalentToRef) {
  using T = TypeParam;
  for (const auto& [n, f] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {7, 3}, {33, 65}, {0, 5}}) {
    SCOPED_TRACE(::testing::Message() << "[" << n << ", " << f << "]");
    auto x = random_dense<T>(this->backend, n, f, 1);
    const auto bias = random_dense<T>(this->backend, 1, f, 2);
    std::vector<double> ref(static_cast<std::size_t>(n * f));
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t j = 0; j < f; ++j)
        ref[r * f + j] = double{x(r, j)} + double{bias(0, j)};
    }

    kernels::cpu::add_bias(*this->backend, x.view(),
                           std::span<const T>(bias.data(), static_cast<std::size_t>(f)));

    expect_all_near(ref, x.data(), x.size());
  }
}

TYPED_TEST(DenseKernels, AxpyIsEquivalentToRef) {
  using T = TypeParam;
  for (const std::int64_t size : {0, 1, 7, 1001}) {
    SCOPED_TRACE(::testing::Message() << "size " << size);
    const auto x = random_dense<T>(this->backend, 1, size, 1);
    auto y = random_dense<T>(this->backend, 1, size, 2);
    std::vector<double> ref(static_cast<std::size_t>(size));
    for (std::int64_t i = 0; i < size; ++i)
      ref[i] = double{y.data()[i]} - 0.5 * x.data()[i];

    kernels::cpu::axpy(*this->backend, T{-0.5},
                       std::span<const T>(x.data(), static_cast<std::size_t>(size)),
                       std::span<T>(y.data(), static_cast<std::size_t>(size)));

    expect_all_near(ref, y.data(), size);
  }
}

/// Column sums by the definition, in double.
template <typename T> std::vector<double> column_sums(const DenseT<T>& dy) {
  std::vector<double> sums(static_cast<std::size_t>(dy.cols()), 0.0);
  for (std::int64_t r = 0; r < dy.rows(); ++r) {
    for (std::int64_t j = 0; j < dy.cols(); ++j)
      sums[j] += dy(r, j);
  }
  return sums;
}

TYPED_TEST(DenseKernels, BiasGradIsEquivalentToRef) {
  using T = TypeParam;
  for (const auto& [n, f] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {7, 3}, {1000, 65}, {0, 5}}) {
    SCOPED_TRACE(::testing::Message() << "[" << n << ", " << f << "]");
    const auto dy = random_dense<T>(this->backend, n, f, 1);
    std::vector<T> d_bias(static_cast<std::size_t>(f), std::numeric_limits<T>::quiet_NaN());

    kernels::cpu::bias_grad(*this->backend, dy.cview(), std::span<T>(d_bias), false);

    expect_all_near(column_sums(dy), d_bias.data(), f);
  }
}

TYPED_TEST(DenseKernels, BiasGradAccumulatesWhenAsked) {
  using T = TypeParam;
  const auto dy = random_dense<T>(this->backend, 17, 9, 1);
  std::vector<T> d_bias(9, T{1});
  auto ref = column_sums(dy);
  for (double& value : ref)
    value += 1.0;

  kernels::cpu::bias_grad(*this->backend, dy.cview(), std::span<T>(d_bias), true);

  expect_all_near(ref, d_bias.data(), 9);
}

TYPED_TEST(DenseKernels, BiasGradIsReproducibleForAThreadCount) {
  using T = TypeParam;
  const auto dy = random_dense<T>(this->backend, 10007, 16, 5);
  std::vector<T> first(16);
  std::vector<T> second(16);
  const ThreadCount threads(2);

  kernels::cpu::bias_grad(*this->backend, dy.cview(), std::span<T>(first), false);
  kernels::cpu::bias_grad(*this->backend, dy.cview(), std::span<T>(second), false);

  EXPECT_EQ(first, second);
}

} // namespace
} // namespace tessera::testing
