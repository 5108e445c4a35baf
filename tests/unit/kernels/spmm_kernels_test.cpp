// The CPU SpMM kernels against naive loops, and the nonzero-balanced row split they use.
#include "cpu/parallel.hpp"
#include "tessera/kernels/dense_kernels.hpp"
#include "tessera/kernels/spmm_kernels.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <tuple>
#include <vector>

namespace tessera::testing {
namespace {

/// C = A · B by the definition, in double.
template <typename T> std::vector<double> spmm_ref(const CsrT<T>& a, const DenseT<T>& b) {
  std::vector<double> c(static_cast<std::size_t>(a.rows() * b.cols()), 0.0);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (std::int64_t k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      for (std::int64_t j = 0; j < b.cols(); ++j) {
        c[r * b.cols() + j] += double{a.val()[k]} * double{b(a.col()[k], j)};
      }
    }
  }
  return c;
}

/// C = Aᵀ · B by the definition, in double.
template <typename T> std::vector<double> spmm_transpose_ref(const CsrT<T>& a, const DenseT<T>& b) {
  std::vector<double> c(static_cast<std::size_t>(a.cols() * b.cols()), 0.0);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (std::int64_t k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      for (std::int64_t j = 0; j < b.cols(); ++j) {
        c[a.col()[k] * b.cols() + j] += double{a.val()[k]} * double{b(r, j)};
      }
    }
  }
  return c;
}

template <typename T> class SpmmKernels : public ::testing::Test {
protected:
  BackendPtr backend = make_cpu_backend();

  /// Output filled with NaN, so a row the kernel forgets to write fails the comparison.
  DenseT<T> poisoned(std::int64_t rows, std::int64_t cols) {
    DenseT<T> out(backend, rows, cols);
    out.fill(std::numeric_limits<T>::quiet_NaN());
    return out;
  }
};
TYPED_TEST_SUITE(SpmmKernels, ValueTypes);

TYPED_TEST(SpmmKernels, SpmmMatchesHandComputedProduct) {
  using T = TypeParam;
  // A = [[1, 0, 2],     B = [[1, 2],     A·B = [[11, 14],
  //      [0, 0, 0],          [3, 4],             [ 0,  0],
  //      [0, 3, 0]]          [5, 6]]             [ 9, 12]]
  const auto a = make_csr<T>(this->backend, 3, {{{0, T{1}}, {2, T{2}}}, {}, {{1, T{3}}}});
  DenseT<T> b(this->backend, 3, 2);
  for (int i = 0; i < 6; ++i)
    b.data()[i] = static_cast<T>(i + 1);
  auto c = this->poisoned(3, 2);

  kernels::cpu::spmm(*this->backend, a.view(), b.cview(), c.view());

  EXPECT_EQ(c(0, 0), T{11});
  EXPECT_EQ(c(0, 1), T{14});
  EXPECT_EQ(c(1, 0), T{0});
  EXPECT_EQ(c(1, 1), T{0});
  EXPECT_EQ(c(2, 0), T{9});
  EXPECT_EQ(c(2, 1), T{12});
}

TYPED_TEST(SpmmKernels, SpmmIsEquivalentToRef) {
  using T = TypeParam;
  // Widths cover every column block: below one vector, odd, one past a block, several blocks.
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 1},     {7, 5, 3},     {33, 20, 65}, {50, 64, 16}, {41, 17, 127},
      {29, 31, 128}, {64, 40, 129}, {17, 9, 257}, {5, 3, 1000}};
  for (const auto& [m, k, n] : shapes) {
    SCOPED_TRACE(::testing::Message() << "A [" << m << ", " << k << "], B cols " << n);
    const auto a = random_csr<T>(this->backend, m, k, 0.3, 11 * m + n, 4);
    const auto b = random_dense<T>(this->backend, k, n, 7 * k + n);
    auto c = this->poisoned(m, n);

    kernels::cpu::spmm(*this->backend, a.view(), b.cview(), c.view());

    expect_all_near(spmm_ref(a, b), c.data(), c.size());
  }
}

TYPED_TEST(SpmmKernels, SpmmWritesZeroRowsForEmptyRows) {
  using T = TypeParam;
  const auto a = random_csr<T>(this->backend, 40, 30, 0.2, 3, 2); // every other row empty
  const auto b = random_dense<T>(this->backend, 30, 19, 4);
  auto c = this->poisoned(40, 19);

  kernels::cpu::spmm(*this->backend, a.view(), b.cview(), c.view());

  for (std::int64_t r = 0; r < 40; r += 2) {
    for (std::int64_t j = 0; j < 19; ++j)
      EXPECT_EQ(c(r, j), T{0}) << "row " << r;
  }
  expect_all_near(spmm_ref(a, b), c.data(), c.size());
}

TYPED_TEST(SpmmKernels, SpmmHandlesEmptyMatrices) {
  using T = TypeParam;
  const auto no_rows = random_csr<T>(this->backend, 0, 5, 0.5, 1);
  const auto no_nonzeros = random_csr<T>(this->backend, 6, 5, 0.0, 1);
  const auto b = random_dense<T>(this->backend, 5, 3, 2);
  auto c0 = this->poisoned(0, 3);
  auto c1 = this->poisoned(6, 3);

  kernels::cpu::spmm(*this->backend, no_rows.view(), b.cview(), c0.view());
  kernels::cpu::spmm(*this->backend, no_nonzeros.view(), b.cview(), c1.view());

  expect_all_near(std::vector<double>(18, 0.0), c1.data(), c1.size());
}

TYPED_TEST(SpmmKernels, SpmmIsTheSameWithOneAndTwoThreads) {
  using T = TypeParam;
  const auto a = random_csr<T>(this->backend, 301, 77, 0.1, 5, 7);
  const auto b = random_dense<T>(this->backend, 77, 33, 6);
  auto one = this->poisoned(301, 33);
  auto two = this->poisoned(301, 33);

  {
    const ThreadCount threads(1);
    kernels::cpu::spmm(*this->backend, a.view(), b.cview(), one.view());
  }
  {
    const ThreadCount threads(2);
    kernels::cpu::spmm(*this->backend, a.view(), b.cview(), two.view());
  }

  for (std::int64_t i = 0; i < one.size(); ++i)
    ASSERT_EQ(one.data()[i], two.data()[i]) << i;
}

TYPED_TEST(SpmmKernels, SpmmOfARowSliceIsThoseRowsOfTheWholeProduct) {
  using T = TypeParam;
  const auto a = random_csr<T>(this->backend, 97, 40, 0.2, 8, 5);
  const auto b = random_dense<T>(this->backend, 40, 19, 9);
  const std::vector<double> whole = spmm_ref(a, b);

  for (const int threads : {1, 2}) {
    const ThreadCount scope(threads);
    auto c = this->poisoned(60, 19);
    kernels::cpu::spmm(*this->backend, a.view().row_slice(37, 97), b.cview(), c.view());

    SCOPED_TRACE(::testing::Message() << threads << " threads");
    expect_all_near(std::vector<double>(whole.begin() + 37 * 19, whole.end()), c.data(), c.size());
  }
  EXPECT_EQ(a.view().row_slice(37, 97).nnz(), a.row_ptr()[97] - a.row_ptr()[37]);
}

TYPED_TEST(SpmmKernels, SpmmTransposeMatchesHandComputedProduct) {
  using T = TypeParam;
  // A = [[1, 0],   B = [[1, 2],   Aᵀ·B = [[1·1 + 3·5, 1·2 + 3·6],  = [[16, 20],
  //      [0, 2],        [3, 4],           [2·3,       2·4      ]]     [ 6,  8]]
  //      [3, 0]]        [5, 6]]
  const auto a = make_csr<T>(this->backend, 2, {{{0, T{1}}}, {{1, T{2}}}, {{0, T{3}}}});
  DenseT<T> b(this->backend, 3, 2);
  for (int i = 0; i < 6; ++i)
    b.data()[i] = static_cast<T>(i + 1);
  auto c = this->poisoned(2, 2);

  kernels::cpu::spmm_transpose(*this->backend, a.view(), b.cview(), c.view());

  EXPECT_EQ(c(0, 0), T{16});
  EXPECT_EQ(c(0, 1), T{20});
  EXPECT_EQ(c(1, 0), T{6});
  EXPECT_EQ(c(1, 1), T{8});
}

TYPED_TEST(SpmmKernels, SpmmTransposeIsEquivalentToRef) {
  using T = TypeParam;
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 1}, {7, 3, 5}, {65, 33, 7}, {200, 16, 64}, {0, 4, 3}, {9, 6, 0}};
  for (const auto& [m, k, n] : shapes) {
    SCOPED_TRACE(::testing::Message() << "A [" << m << ", " << k << "], B cols " << n);
    const auto a = random_csr<T>(this->backend, m, k, 0.3, 13 * m + n, 5);
    const auto b = random_dense<T>(this->backend, m, n, 3 * m + n);
    auto c = this->poisoned(k, n);

    kernels::cpu::spmm_transpose(*this->backend, a.view(), b.cview(), c.view());

    expect_all_near(spmm_transpose_ref(a, b), c.data(), c.size());
  }
}

TYPED_TEST(SpmmKernels, SpmmTransposeIsEquivalentToRefWithOneAndTwoThreads) {
  using T = TypeParam;
  const auto a = random_csr<T>(this->backend, 120, 9, 0.4, 21, 3);
  const auto b = random_dense<T>(this->backend, 120, 13, 22);
  const auto ref = spmm_transpose_ref(a, b);

  for (const int thread_count : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << thread_count << " threads");
    auto c = this->poisoned(9, 13);
    {
      const ThreadCount threads(thread_count);
      kernels::cpu::spmm_transpose(*this->backend, a.view(), b.cview(), c.view());
    }

    expect_all_near(ref, c.data(), c.size());
  }
}

// ---- the row split -----------------------------------------------------------------------------

/// Cost of rows [begin, end) in the model of balanced_rows: one per row plus one per nonzero.
std::int64_t cost(const std::vector<Offset>& row_ptr, std::int64_t begin, std::int64_t end) {
  return (row_ptr[end] - row_ptr[begin]) + (end - begin);
}

TEST(BalancedRows, SpmmBalancesNonzerosNotRows) {
  // Row 0 holds 1000 nonzeros (cost 1001), rows 1..1000 one each (cost 2): total 3001. Half of
  // it is row 0 plus 250 light rows, where an equal row count would cut at row 500.
  std::vector<Offset> row_ptr = {0, 1000};
  for (int r = 0; r < 1000; ++r)
    row_ptr.push_back(row_ptr.back() + 1);
  const std::int64_t rows = 1001;

  const auto first = kernels::cpu::balanced_rows(row_ptr.data(), rows, 0, 2);
  const auto second = kernels::cpu::balanced_rows(row_ptr.data(), rows, 1, 2);

  EXPECT_EQ(first.begin, 0);
  EXPECT_EQ(first.end, 251);
  EXPECT_EQ(second.begin, 251);
  EXPECT_EQ(second.end, rows);
}

TEST(BalancedRows, SpmmBalancesEmptyRows) {
  // 3000 empty rows then 10 rows of 300 nonzeros: empty rows are cheap but not free, so the
  // parts cover every row, are contiguous, and each costs at most the ideal plus one row.
  std::vector<Offset> row_ptr(3001, 0);
  for (int r = 0; r < 10; ++r)
    row_ptr.push_back(row_ptr.back() + 300);
  const auto rows = static_cast<std::int64_t>(row_ptr.size()) - 1;
  const std::int64_t total = cost(row_ptr, 0, rows);
  const std::int64_t heaviest_row = 301;

  for (const int parts : {1, 2, 3, 7, 64}) {
    SCOPED_TRACE(::testing::Message() << parts << " parts");
    std::int64_t expected_begin = 0;
    for (int part = 0; part < parts; ++part) {
      const auto range = kernels::cpu::balanced_rows(row_ptr.data(), rows, part, parts);

      EXPECT_EQ(range.begin, expected_begin);
      EXPECT_LE(range.begin, range.end);
      EXPECT_LE(cost(row_ptr, range.begin, range.end), total / parts + heaviest_row);
      expected_begin = range.end;
    }
    EXPECT_EQ(expected_begin, rows);
  }
}

/// x rounded to bfloat16 by the kernel, and the same values widened back to float32.
struct RoundedFeatures {
  DenseT<Bf16> bf16;
  DenseT<float> widened;
};

RoundedFeatures rounded(const BackendPtr& backend, const DenseT<float>& x) {
  RoundedFeatures out{DenseT<Bf16>(backend, x.rows(), x.cols()),
                      DenseT<float>(backend, x.rows(), x.cols())};
  kernels::cpu::round_to_bf16(*backend, x.cview(), out.bf16.view());
  for (std::int64_t i = 0; i < x.size(); ++i)
    out.widened.data()[i] = to_float(out.bf16.data()[i]);
  return out;
}

TEST(SpmmBf16, IsSpmmOverTheRoundedInputBitForBit) {
  const BackendPtr backend = make_cpu_backend();
  // Every column block and tail (as SpmmIsEquivalentToRef), one and two threads, a row slice.
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 1}, {33, 20, 65}, {41, 17, 127}, {29, 31, 128}, {64, 40, 129}, {17, 9, 257}};
  for (const auto& [m, k, n] : shapes) {
    const auto a = random_csr<float>(backend, m, k, 0.3, 11 * m + n, 4);
    const RoundedFeatures b = rounded(backend, random_dense<float>(backend, k, n, 7 * k + n));
    DenseT<float> want(backend, m, n), got(backend, m, n);
    kernels::cpu::spmm(*backend, a.view(), b.widened.cview(), want.view());
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "A [" << m << ", " << k << "], B cols " << n << ", "
                                        << threads << " threads");
      const ThreadCount scope(threads);
      got.fill(std::numeric_limits<float>::quiet_NaN());
      kernels::cpu::spmm_bf16(*backend, a.view(), b.bf16.cview(), got.view());
      for (std::int64_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got.data()[i], want.data()[i]) << "element " << i;
      const std::int64_t half = m / 2;
      DenseT<float> tail(backend, m - half, n);
      kernels::cpu::spmm_bf16(*backend, a.view().row_slice(half, m), b.bf16.cview(), tail.view());
      for (std::int64_t i = 0; i < tail.size(); ++i)
        ASSERT_EQ(tail.data()[i], want.data()[half * n + i]) << "row slice, element " << i;
    }
  }
}

TEST(RoundToBf16, RoundsToNearestEvenAndKeepsSpecialValues) {
  const BackendPtr backend = make_cpu_backend();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1; 1 + 3·2^-8 to 1 + 2^-6.
  // Subnormals keep their top bits; past the largest bfloat16 (by half a step) is infinity.
  const std::vector<float> in = {
      0.0f, -0.0f, 1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f,    1e-40f, 3.39e38f, 3.4e38f,
      inf,  -inf,  nan,  0.1f,           1.0f + 0x1p-9f,     65504.0f, -1e-3f};
  const std::vector<float> want = {
      0.0f, -0.0f, 1.0f, 1.0f, 1.0f + 0x1p-6f, -2.5f, 0x1p-133f, 0x1.FEp127f,
      inf,  inf,   -inf, nan,  0x1.9Ap-4f,     1.0f,  65536.0f,  -0x1.06p-10f};
  DenseT<float> x(backend, 1, static_cast<std::int64_t>(in.size()));
  std::copy(in.begin(), in.end(), x.data());
  DenseT<Bf16> y(backend, 1, x.cols());

  kernels::cpu::round_to_bf16(*backend, x.cview(), y.view());

  for (std::size_t i = 0; i < in.size(); ++i) {
    const float got = to_float(y.data()[i]);
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i;
    } else {
      EXPECT_EQ(got, want[i]) << "element " << i << " (" << in[i] << ")";
      EXPECT_EQ(std::signbit(got), std::signbit(want[i])) << "element " << i;
    }
    EXPECT_EQ(y.data()[i].bits, to_bf16(in[i]).bits) << "element " << i << ": kernel vs scalar";
  }
}

TEST(BalancedRows, SpmmSplitsMatricesWithoutNonzerosByRows) {
  const std::vector<Offset> row_ptr(101, 0);

  const auto first = kernels::cpu::balanced_rows(row_ptr.data(), 100, 0, 2);
  const auto second = kernels::cpu::balanced_rows(row_ptr.data(), 100, 1, 2);

  EXPECT_EQ(first.end, 50);
  EXPECT_EQ(second.begin, 50);
  EXPECT_EQ(second.end, 100);
}

} // namespace
} // namespace tessera::testing
