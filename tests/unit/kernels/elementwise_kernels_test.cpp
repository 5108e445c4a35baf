// The CPU elementwise kernels (ReLU, ELU, GELU, dropout) and their float math against naive loops
// and the RNG's definition.
#include "cpu/random_lanes.hpp"
#include "cpu/vector_math.hpp"
#include "tessera/kernels/elementwise_kernels.hpp"
#include "tessera/ops/ops.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera::testing {
namespace {

const RngKey kKey = RngKey::make(42, RngPurpose::Dropout, 1, 3);

/// x · mask / (1 - p) by the definition of the mask, in double.
template <typename T>
std::vector<double> dropout_ref(const DenseT<T>& x, float p, const RngKey& key, RowIds rows) {
  std::vector<double> y(static_cast<std::size_t>(x.size()));
  for (std::int64_t r = 0; r < x.rows(); ++r) {
    for (std::int64_t c = 0; c < x.cols(); ++c) {
      const bool keep = uniform(key, rows(r), c) >= p;
      y[r * x.cols() + c] = keep ? double{x(r, c)} / (1.0 - p) : 0.0;
    }
  }
  return y;
}

template <typename T> class ElementwiseKernels : public ::testing::Test {
protected:
  BackendPtr backend = make_cpu_backend();
};
TYPED_TEST_SUITE(ElementwiseKernels, ValueTypes);

TYPED_TEST(ElementwiseKernels, ReluForwardIsEquivalentToRef) {
  using T = TypeParam;
  for (const auto& [n, f] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {7, 3}, {33, 65}, {0, 4}}) {
    SCOPED_TRACE(::testing::Message() << "[" << n << ", " << f << "]");
    const auto x = random_dense<T>(this->backend, n, f, 1);
    DenseT<T> y(this->backend, n, f);
    std::vector<double> ref(static_cast<std::size_t>(x.size()));
    for (std::int64_t i = 0; i < x.size(); ++i)
      ref[i] = std::max(0.0, double{x.data()[i]});

    kernels::cpu::relu_forward(*this->backend, x.cview(), y.view());

    expect_all_near(ref, y.data(), y.size());
  }
}

TYPED_TEST(ElementwiseKernels, ReluForwardWorksInPlaceAndKeepsNaN) {
  using T = TypeParam;
  DenseT<T> x(this->backend, 1, 4);
  x(0, 0) = T{-1};
  x(0, 1) = T{0};
  x(0, 2) = T{2};
  x(0, 3) = std::numeric_limits<T>::quiet_NaN();

  kernels::cpu::relu_forward(*this->backend, x.cview(), x.view());

  EXPECT_EQ(x(0, 0), T{0});
  EXPECT_EQ(x(0, 1), T{0});
  EXPECT_EQ(x(0, 2), T{2});
  EXPECT_TRUE(std::isnan(x(0, 3)));
}

TYPED_TEST(ElementwiseKernels, ReluBackwardIsEquivalentToRef) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->backend, 33, 65, 1);
  const auto dy = random_dense<T>(this->backend, 33, 65, 2);
  DenseT<T> y(this->backend, 33, 65);
  DenseT<T> dx(this->backend, 33, 65);
  kernels::cpu::relu_forward(*this->backend, x.cview(), y.view());
  std::vector<double> ref(static_cast<std::size_t>(x.size()));
  for (std::int64_t i = 0; i < x.size(); ++i)
    ref[i] = x.data()[i] > 0 ? dy.data()[i] : 0.0;

  kernels::cpu::relu_backward(*this->backend, y.cview(), dy.cview(), dx.view(), T{1});

  expect_all_near(ref, dx.data(), dx.size());
}

TYPED_TEST(ElementwiseKernels, DropoutIsEquivalentToRef) {
  using T = TypeParam;
  for (const auto& [n, f] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, 1}, {7, 3}, {33, 65}, {5, 4}, {0, 3}}) {
    SCOPED_TRACE(::testing::Message() << "[" << n << ", " << f << "]");
    const auto x = random_dense<T>(this->backend, n, f, 1);
    DenseT<T> y(this->backend, n, f);
    const RowIds rows{nullptr, 1000};

    kernels::cpu::dropout(*this->backend, x.cview(), y.view(), 0.4f, kKey, rows, false);

    expect_all_near(dropout_ref(x, 0.4f, kKey, rows), y.data(), y.size());
  }
}

TYPED_TEST(ElementwiseKernels, DropoutDropsAFractionPAndScalesTheRest) {
  using T = TypeParam;
  DenseT<T> x(this->backend, 1000, 257);
  x.fill(T{1});
  DenseT<T> y(this->backend, 1000, 257);
  const float p = 0.3f;

  kernels::cpu::dropout(*this->backend, x.cview(), y.view(), p, kKey, {}, false);

  std::int64_t dropped = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) {
    if (y.data()[i] == T{0}) {
      ++dropped;
    } else {
      ASSERT_NEAR(y.data()[i], 1.0 / (1.0 - p), 1e-6);
    }
  }
  // 257000 Bernoulli(0.3) draws: the standard deviation of the fraction is about 0.0009.
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(y.size()), p, 0.005);
}

TYPED_TEST(ElementwiseKernels, DropoutBackwardReusesForwardMask) {
  using T = TypeParam;
  DenseT<T> x(this->backend, 50, 37);
  x.fill(T{2});
  DenseT<T> y(this->backend, 50, 37);
  DenseT<T> dy(this->backend, 50, 37);
  dy.fill(T{1});
  DenseT<T> dx(this->backend, 50, 37);
  const RowIds rows{nullptr, 7};

  kernels::cpu::dropout(*this->backend, x.cview(), y.view(), 0.5f, kKey, rows, false);
  kernels::cpu::dropout(*this->backend, dy.cview(), dx.view(), 0.5f, kKey, rows, false);

  for (std::int64_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(y.data()[i] == T{0}, dx.data()[i] == T{0}) << "element " << i;
    ASSERT_EQ(y.data()[i], T{2} * dx.data()[i]) << "element " << i;
  }
}

TYPED_TEST(ElementwiseKernels, DropoutMaskFollowsGlobalRowIds) {
  using T = TypeParam;
  // Rows 10..19 of a matrix, processed as a tile with offset 10 and with an explicit id list,
  // get the same mask as in the whole matrix.
  const auto whole = random_dense<T>(this->backend, 30, 13, 1);
  DenseT<T> whole_out(this->backend, 30, 13);
  DenseT<T> tile_out(this->backend, 10, 13);
  DenseT<T> listed_out(this->backend, 10, 13);
  std::vector<GlobalId> ids(10);
  for (int i = 0; i < 10; ++i)
    ids[i] = 10 + i;
  const ConstDenseView<T> tile = whole.cview().slice_rows(10, 20);

  kernels::cpu::dropout(*this->backend, whole.cview(), whole_out.view(), 0.5f, kKey, {}, false);
  kernels::cpu::dropout(*this->backend, tile, tile_out.view(), 0.5f, kKey, {nullptr, 10}, false);
  kernels::cpu::dropout(*this->backend, tile, listed_out.view(), 0.5f, kKey, {ids.data(), 0}, false);

  const auto expected = as_doubles(whole_out.data() + 10 * 13, 10 * 13);
  expect_all_near(expected, tile_out.data(), tile_out.size());
  expect_all_near(expected, listed_out.data(), listed_out.size());
}

TYPED_TEST(ElementwiseKernels, DropoutIsIdenticalWithOneAndTwoThreads) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->backend, 301, 67, 9);
  DenseT<T> one(this->backend, 301, 67);
  DenseT<T> two(this->backend, 301, 67);

  {
    const ThreadCount threads(1);
    kernels::cpu::dropout(*this->backend, x.cview(), one.view(), 0.25f, kKey, {}, false);
  }
  {
    const ThreadCount threads(2);
    kernels::cpu::dropout(*this->backend, x.cview(), two.view(), 0.25f, kKey, {}, false);
  }

  for (std::int64_t i = 0; i < one.size(); ++i)
    ASSERT_EQ(one.data()[i], two.data()[i]) << i;
}

TYPED_TEST(ElementwiseKernels, DropoutCsrValuesAgreeWithDenseDropout) {
  using T = TypeParam;
  // The same values stored densely and sparsely get the same mask at the same (row, col).
  const auto a = random_csr<T>(this->backend, 45, 70, 0.2, 3, 6);
  DenseT<T> dense = DenseT<T>::zeros(this->backend, 45, 70);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (std::int64_t k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      dense(r, a.col()[k]) = a.val()[k];
    }
  }
  DenseT<T> dense_out(this->backend, 45, 70);
  std::vector<T> sparse_out(static_cast<std::size_t>(a.nnz()));
  const RowIds rows{nullptr, 123};

  kernels::cpu::dropout(*this->backend, dense.cview(), dense_out.view(), 0.5f, kKey, rows, false);
  kernels::cpu::dropout_csr_values(*this->backend, a.view(), std::span<T>(sparse_out), 0.5f, kKey,
                                   rows);

  std::vector<double> expected;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (std::int64_t k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      expected.push_back(dense_out(r, a.col()[k]));
    }
  }
  expect_all_near(expected, sparse_out.data(), a.nnz());
}

TYPED_TEST(ElementwiseKernels, DropoutCsrValuesIsIdenticalWithOneAndTwoThreads) {
  using T = TypeParam;
  const auto a = random_csr<T>(this->backend, 200, 90, 0.1, 8, 5);
  std::vector<T> one(static_cast<std::size_t>(a.nnz()));
  std::vector<T> two(static_cast<std::size_t>(a.nnz()));

  {
    const ThreadCount threads(1);
    kernels::cpu::dropout_csr_values(*this->backend, a.view(), std::span<T>(one), 0.3f, kKey, {});
  }
  {
    const ThreadCount threads(2);
    kernels::cpu::dropout_csr_values(*this->backend, a.view(), std::span<T>(two), 0.3f, kKey, {});
  }

  EXPECT_EQ(one, two);
}


TYPED_TEST(ElementwiseKernels, ReluDropoutEqualsReluThenDropout) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->backend, 37, 70, 11);
  DenseT<T> relu(this->backend, 37, 70), composed(this->backend, 37, 70),
      fused(this->backend, 37, 70);
  const RowIds rows{nullptr, 5};

  ops::relu_forward(*this->backend, x.cview(), relu.view());
  ops::dropout_forward(*this->backend, relu.cview(), composed.view(), 0.3f, kKey, rows);
  ops::relu_dropout_forward(*this->backend, x.cview(), fused.view(), 0.3f, kKey, rows);

  for (std::int64_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(composed.data()[i], fused.data()[i]) << i;
}

TYPED_TEST(ElementwiseKernels, ReluDropoutBackwardEqualsDropoutThenReluBackward) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->backend, 29, 67, 12);
  const auto dy = random_dense<T>(this->backend, 29, 67, 13);
  DenseT<T> relu(this->backend, 29, 67), y(this->backend, 29, 67), d_relu(this->backend, 29, 67),
      composed(this->backend, 29, 67), fused(this->backend, 29, 67);
  ops::relu_forward(*this->backend, x.cview(), relu.view());
  ops::relu_dropout_forward(*this->backend, x.cview(), y.view(), 0.4f, kKey, {});

  ops::dropout_backward(*this->backend, dy.cview(), d_relu.view(), 0.4f, kKey, {});
  ops::relu_backward(*this->backend, relu.cview(), d_relu.cview(), composed.view());
  ops::relu_dropout_backward(*this->backend, y.cview(), dy.cview(), fused.view(), 0.4f);

  expect_all_near(as_doubles(composed.data(), composed.size()), fused.data(), fused.size());
}

TYPED_TEST(ElementwiseKernels, BiasActivationEqualsBiasThenReluDropoutInPlace) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->backend, 37, 70, 14);
  const auto bias = random_dense<T>(this->backend, 1, 70, 15);
  const std::span<const T> b(bias.data(), 70);
  const RowIds rows{nullptr, 5};
  for (const float p : {0.0f, 0.3f}) {
    for (const bool relu : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << (relu ? ", relu" : ""));
      DenseT<T> composed = to_backend(x, this->backend), fused = to_backend(x, this->backend);
      ops::add_bias(*this->backend, composed.view(), b);
      if (relu) {
        ops::relu_dropout_forward(*this->backend, composed.cview(), composed.view(), p, kKey, rows);
      } else {
        ops::dropout_forward(*this->backend, composed.cview(), composed.view(), p, kKey, rows);
      }

      ops::bias_activation(*this->backend, fused.view(), b, p, kKey, rows, relu);

      for (std::int64_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(composed.data()[i], fused.data()[i]) << i;
    }
  }
  // Without a bias: the activation alone.
  DenseT<T> relu_only = to_backend(x, this->backend), expected(this->backend, 37, 70);
  ops::relu_forward(*this->backend, x.cview(), expected.view());
  ops::bias_activation(*this->backend, relu_only.view(), std::span<const T>{}, 0.0f, kKey, rows,
                       true);
  for (std::int64_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(expected.data()[i], relu_only.data()[i]) << i;
}

TYPED_TEST(ElementwiseKernels, BiasActivationRefusesABiasOfAnotherWidthAndABadProbability) {
  using T = TypeParam;
  DenseT<T> y = random_dense<T>(this->backend, 3, 4, 16);
  const std::vector<T> short_bias(3);
  EXPECT_THROW(ops::bias_activation(*this->backend, y.view(), std::span<const T>(short_bias), 0.0f,
                                    kKey, {}, true),
               DimensionMismatch);
  EXPECT_THROW(
      ops::bias_activation(*this->backend, y.view(), std::span<const T>{}, 1.0f, kKey, {}, true),
      InvalidArgument);
}

TEST(DropoutToBf16, IsDropoutThenRoundingBitForBitWithOneAndTwoThreads) {
  const BackendPtr backend = make_cpu_backend();
  const auto x = random_dense<float>(backend, 53, 137, 17); // a column tail past 2 x 64
  const RowIds rows{nullptr, 11};
  for (const float p : {0.0f, 0.5f}) {
    Dense dropped(backend, 53, 137);
    ops::dropout_forward(*backend, x.cview(), dropped.view(), p, kKey, rows);
    DenseT<Bf16> want(backend, 53, 137);
    ops::round_to_bf16(*backend, dropped.cview(), want.view());
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << ", " << threads << " threads");
      const ThreadCount scope(threads);
      DenseT<Bf16> got(backend, 53, 137);

      ops::dropout_to_bf16(*backend, x.cview(), got.view(), p, kKey, rows);

      for (std::int64_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(got.data()[i].bits, want.data()[i].bits) << i;
    }
  }
  DenseT<Bf16> y(backend, 53, 137);
  EXPECT_THROW(ops::dropout_to_bf16(*backend, x.cview(), y.view(), 1.0f, kKey, rows),
               InvalidArgument);
}

TEST(RandomLanesAt, MatchesRandomBits4ForEveryLane) {
  const RngKey key = RngKey::make(0x123456789abcULL, RngPurpose::AttentionDropout, 3, 7);
  std::int64_t rows[kernels::cpu::RandomLanesAt::kLanes];
  std::uint32_t blocks[kernels::cpu::RandomLanesAt::kLanes];
  for (int i = 0; i < kernels::cpu::RandomLanesAt::kLanes; ++i) {
    rows[i] = i % 3 == 0 ? std::int64_t{123456789012} + i : 17 * i; // ids above 2^32 too
    blocks[i] = 0x9E3779B9u * static_cast<std::uint32_t>(i);
  }
  const kernels::cpu::RandomLanesAt lanes(key, rows, blocks);
  for (int i = 0; i < kernels::cpu::RandomLanesAt::kLanes; ++i) {
    for (int j = 0; j < 4; ++j) {
      ASSERT_EQ(lanes.word[j][i], random_bits4(key, rows[i], blocks[i])[j])
          << "lane " << i << " word " << j;
    }
  }
}

TEST(RandomLanes, MatchesRandomBits4ForEveryColumn) {
  const RngKey key = RngKey::make(0x123456789abcULL, RngPurpose::Dropout, 3, 7);

  for (const std::int64_t row : {std::int64_t{0}, std::int64_t{5}, std::int64_t{123456789012}}) {
    for (const std::uint32_t block : {0u, 16u, 1000u}) {
      const kernels::cpu::RandomLanes lanes(key, row, block);
      for (int c = 0; c < kernels::cpu::RandomLanes::kColumns; ++c) {
        ASSERT_EQ(lanes.draws[c], random_bits4(key, row, block + c / 4)[c % 4])
            << "row " << row << " block " << block << " column " << c;
      }
    }
  }
}

/// Relative error of got against ref, with ref's magnitude floored at `tiny`.
double relative_error(double ref, double got, double tiny = 1e-30) {
  return std::abs(got - ref) / std::max(std::abs(ref), tiny);
}

TEST(VectorMath, ExpIsWithinTwoUlpAndSaturatesAtTheEnds) {
  double worst = 0.0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    worst = std::max(worst, relative_error(std::exp(double{x}), kernels::cpu::exp_float(x)));
  }
  EXPECT_LT(worst, 2.5e-7); // 2 ulp of float
  EXPECT_EQ(kernels::cpu::exp_float(0.0f), 1.0f);
  EXPECT_EQ(kernels::cpu::exp_float(-1000.0f), 0.0f);
  EXPECT_EQ(kernels::cpu::exp_float(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isfinite(kernels::cpu::exp_float(1000.0f)));
  EXPECT_TRUE(std::isnan(kernels::cpu::exp_float(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VectorMath, Expm1IsAccurateNearZeroAndTendsToMinusOne) {
  double worst = 0.0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -30.0f + 40.0f * static_cast<float>(i) / 200000.0f;
    worst = std::max(worst, relative_error(std::expm1(double{x}), kernels::cpu::expm1_float(x)));
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(kernels::cpu::expm1_float(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(kernels::cpu::expm1_float(1e-10f), 1e-10f); // no cancellation
  EXPECT_EQ(kernels::cpu::expm1_float(-200.0f), -1.0f);
  EXPECT_TRUE(std::isnan(kernels::cpu::expm1_float(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VectorMath, NormalCdfIsWithinItsStatedError) {
  double worst_abs = 0.0, worst_rel_6 = 0.0, worst_rel_11 = 0.0;
  for (int i = 0; i <= 400000; ++i) {
    const float x = -14.0f + 28.0f * static_cast<float>(i) / 400000.0f;
    const double ref = 0.5 * std::erfc(-double{x} / std::sqrt(2.0));
    const double got = kernels::cpu::normal_cdf_float(x);
    worst_abs = std::max(worst_abs, std::abs(got - ref));
    if (std::abs(x) <= 6.0f) worst_rel_6 = std::max(worst_rel_6, relative_error(ref, got));
    if (x >= -11.0f) worst_rel_11 = std::max(worst_rel_11, relative_error(ref, got));
  }
  EXPECT_LT(worst_abs, 1e-7);
  EXPECT_LT(worst_rel_6, 3e-6);
  EXPECT_LT(worst_rel_11, 1e-5);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(kernels::cpu::normal_cdf_float(inf), 1.0f);
  EXPECT_EQ(kernels::cpu::normal_cdf_float(-inf), 0.0f);
  EXPECT_TRUE(std::isnan(kernels::cpu::normal_cdf_float(std::numeric_limits<float>::quiet_NaN())));
}

/// Inputs spread over [-8, 8] (both branches of ELU, GELU's tails), a NaN and the infinities.
template <typename T> DenseT<T> activation_inputs(const BackendPtr& backend) {
  DenseT<T> x = random_dense<T>(backend, 37, 45, 11);
  for (std::int64_t i = 0; i < x.size(); ++i)
    x.data()[i] = static_cast<T>(8) * x.data()[i];
  x.data()[0] = std::numeric_limits<T>::quiet_NaN();
  x.data()[1] = std::numeric_limits<T>::infinity();
  x.data()[2] = -std::numeric_limits<T>::infinity();
  x.data()[3] = T{0};
  return x;
}

/// Expects a and b to agree as near<T>, NaN where the reference is NaN.
template <typename T> void expect_matches(const std::vector<double>& ref, const DenseT<T>& got) {
  for (std::int64_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got.data()[i]);
    if (std::isnan(ref[i])) {
      EXPECT_TRUE(std::isnan(g)) << "element " << i;
    } else if (std::isinf(ref[i])) {
      EXPECT_EQ(ref[i], g) << "element " << i;
    } else {
      EXPECT_TRUE(near<T>(ref[i], g))
          << "element " << i << ": expected " << ref[i] << ", got " << g;
    }
  }
}

/// Runs an activation's forward and backward kernels on activation_inputs and checks both against
/// `ref(v, dy)` = {y, dx} in double. `backward_reads_output`: ELU's backward takes y, GELU's x.
template <typename T, typename Forward, typename Backward, typename Ref>
void expect_activation(const BackendPtr& backend, Forward forward, Backward backward,
                       bool backward_reads_output, Ref ref) {
  const DenseT<T> x = activation_inputs<T>(backend);
  const DenseT<T> dy = random_dense<T>(backend, x.rows(), x.cols(), 12);
  DenseT<T> y(backend, x.rows(), x.cols()), dx(backend, x.rows(), x.cols());
  forward(*backend, x.cview(), y.view());
  backward(*backend, backward_reads_output ? y.cview() : x.cview(), dy.cview(), dx.view());
  std::vector<double> y_ref(static_cast<std::size_t>(x.size())), dx_ref(y_ref.size());
  for (std::int64_t i = 0; i < x.size(); ++i)
    std::tie(y_ref[i], dx_ref[i]) = ref(double{x.data()[i]}, double{dy.data()[i]});
  expect_matches(y_ref, y);
  expect_matches(dx_ref, dx);
}

TYPED_TEST(ElementwiseKernels, EluMatchesItsDefinitionForwardAndBackward) {
  using T = TypeParam;
  const auto backward = [](const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                           DenseView<T> dx) {
    kernels::cpu::elu_backward(backend, y, dy, dx, T{1});
  };
  expect_activation<T>(this->backend, kernels::cpu::elu_forward<T>, backward, true,
                       [](double v, double g) {
                         const double d = v > 0.0 ? g : std::isnan(v) ? v : g * std::exp(v);
                         return std::pair{v > 0.0 ? v : std::expm1(v), d};
                       });
}

// After an inverted dropout the output is ELU's / (1 - p): the derivative reads it scaled back.
TYPED_TEST(ElementwiseKernels, EluBackwardFromADroppedOutputScalesItBack) {
  using T = TypeParam;
  const DenseT<T> x = activation_inputs<T>(this->backend);
  const DenseT<T> dy = random_dense<T>(this->backend, x.rows(), x.cols(), 13);
  const T keep = T(0.4);
  DenseT<T> y(this->backend, x.rows(), x.cols()), dx(this->backend, x.rows(), x.cols());
  kernels::cpu::elu_forward(*this->backend, x.cview(), y.view());
  for (std::int64_t i = 0; i < y.size(); ++i)
    y.data()[i] /= keep;
  kernels::cpu::elu_backward(*this->backend, y.cview(), dy.cview(), dx.view(), keep);
  std::vector<double> ref(static_cast<std::size_t>(x.size()));
  for (std::int64_t i = 0; i < x.size(); ++i) {
    const double v = x.data()[i], g = dy.data()[i];
    ref[static_cast<std::size_t>(i)] = v > 0.0 ? g : std::isnan(v) ? v : g * std::exp(v);
  }
  expect_matches(ref, dx);
}

TYPED_TEST(ElementwiseKernels, GeluMatchesItsDefinitionForwardAndBackward) {
  using T = TypeParam;
  expect_activation<T>(this->backend, kernels::cpu::gelu_forward<T>, kernels::cpu::gelu_backward<T>,
                       false, [](double v, double g) {
                         const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
                         const double pdf =
                             std::exp(-0.5 * v * v) / std::sqrt(2.0 * std::acos(-1.0));
                         return std::pair{v * cdf, g * (cdf + v * pdf)};
                       });
}

} // namespace
} // namespace tessera::testing
