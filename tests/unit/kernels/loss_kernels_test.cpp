// The CPU loss kernels against a double-precision reference and finite differences.
#include "tessera/kernels/loss_kernels.hpp"
#include "tessera/core/error.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <vector>

namespace tessera::testing {
namespace {

/// Sum over `rows` of -log softmax(logits[r])[label[r]] / normalizer, from the definition.
template <typename T>
double cross_entropy_ref(const DenseT<T>& logits, const std::vector<std::int32_t>& labels,
                         const std::vector<std::int32_t>& rows, double normalizer) {
  double loss = 0.0;
  for (const std::int32_t r : rows) {
    double sum = 0.0;
    for (std::int64_t j = 0; j < logits.cols(); ++j)
      sum += std::exp(double{logits(r, j)});
    loss -= std::log(std::exp(double{logits(r, labels[r])}) / sum);
  }
  return loss / normalizer;
}

/// Labels in [0, classes) and every third row selected.
struct Selection {
  std::vector<std::int32_t> labels;
  std::vector<std::int32_t> rows;
};

Selection make_selection(std::int64_t n, std::int32_t classes) {
  Selection s;
  for (std::int64_t r = 0; r < n; ++r) {
    s.labels.push_back(static_cast<std::int32_t>((r * 7 + 3) % classes));
    if (r % 3 == 0) s.rows.push_back(static_cast<std::int32_t>(r));
  }
  return s;
}

template <typename T> class LossKernels : public ::testing::Test {
protected:
  BackendPtr backend = make_cpu_backend();
};
TYPED_TEST_SUITE(LossKernels, ValueTypes);

TYPED_TEST(LossKernels, SoftmaxCrossEntropyOfUniformLogitsIsLogC) {
  using T = TypeParam;
  const DenseT<T> logits = DenseT<T>::zeros(this->backend, 2, 4);
  const std::vector<std::int32_t> labels = {1, 3};
  const std::vector<std::int32_t> rows = {0, 1};
  DenseT<T> grad(this->backend, 2, 4);

  const double loss = kernels::cpu::softmax_cross_entropy<T>(*this->backend, logits.cview(), labels,
                                                             rows, 2.0, grad.view());

  // Each row: -log(1/4); mean over 2 rows. Gradient (1/4 - onehot) / 2.
  EXPECT_NEAR(loss, std::log(4.0), 1e-6);
  EXPECT_NEAR(grad(0, 0), 0.125, 1e-7);
  EXPECT_NEAR(grad(0, 1), -0.375, 1e-7);
  EXPECT_NEAR(grad(1, 3), -0.375, 1e-7);
}

TYPED_TEST(LossKernels, SoftmaxCrossEntropyIsEquivalentToRef) {
  using T = TypeParam;
  for (const auto& [n, c] :
       std::vector<std::pair<std::int64_t, std::int32_t>>{{1, 1}, {7, 3}, {33, 65}, {100, 16}}) {
    SCOPED_TRACE(::testing::Message() << "[" << n << ", " << c << "]");
    auto logits = random_dense<T>(this->backend, n, c, 1);
    for (std::int64_t i = 0; i < logits.size(); ++i)
      logits.data()[i] *= T{5};
    const auto [labels, rows] = make_selection(n, c);
    DenseT<T> grad(this->backend, n, c);
    const double normalizer = 2.0 * static_cast<double>(rows.size());

    const double loss = kernels::cpu::softmax_cross_entropy<T>(
        *this->backend, logits.cview(), labels, rows, normalizer, grad.view());

    EXPECT_TRUE(near<T>(cross_entropy_ref(logits, labels, rows, normalizer), loss))
        << cross_entropy_ref(logits, labels, rows, normalizer) << " vs " << loss;
  }
}

TYPED_TEST(LossKernels, SoftmaxCrossEntropyIsStableForHugeLogits) {
  using T = TypeParam;
  DenseT<T> logits(this->backend, 1, 3);
  logits(0, 0) = T{1000};
  logits(0, 1) = T{0};
  logits(0, 2) = T{-1000};
  const std::vector<std::int32_t> labels = {1};
  const std::vector<std::int32_t> rows = {0};

  const double loss =
      kernels::cpu::softmax_cross_entropy<T>(*this->backend, logits.cview(), labels, rows, 1.0, {});

  EXPECT_NEAR(loss, 1000.0, 1e-6);
}

TEST(LossKernelsDouble, SoftmaxCrossEntropyGradientMatchesFiniteDifferences) {
  const auto backend = make_cpu_backend();
  auto logits = random_dense<double>(backend, 9, 5, 4);
  const Selection selection = make_selection(9, 5);
  DenseT<double> grad(backend, 9, 5);
  const double normalizer = 3.0;
  const auto loss_at = [&] {
    return kernels::cpu::softmax_cross_entropy<double>(*backend, logits.cview(), selection.labels,
                                                       selection.rows, normalizer, {});
  };

  kernels::cpu::softmax_cross_entropy<double>(*backend, logits.cview(), selection.labels,
                                              selection.rows, normalizer, grad.view());

  const double h = 1e-6;
  for (std::int64_t i = 0; i < logits.size(); ++i) {
    const double saved = logits.data()[i];
    logits.data()[i] = saved + h;
    const double up = loss_at();
    logits.data()[i] = saved - h;
    const double down = loss_at();
    logits.data()[i] = saved;
    EXPECT_NEAR(grad.data()[i], (up - down) / (2 * h), 1e-8) << "element " << i;
  }
}

TYPED_TEST(LossKernels, SoftmaxCrossEntropyGradientIsZeroOutsideRows) {
  using T = TypeParam;
  const auto logits = random_dense<T>(this->backend, 10, 4, 2);
  const auto [labels, rows] = make_selection(10, 4);
  DenseT<T> grad(this->backend, 10, 4);
  grad.fill(std::numeric_limits<T>::quiet_NaN());

  kernels::cpu::softmax_cross_entropy<T>(*this->backend, logits.cview(), labels, rows, 1.0,
                                         grad.view());

  for (std::int64_t r = 0; r < 10; ++r) {
    if (r % 3 == 0) continue;
    for (std::int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(grad(r, j), T{0}) << "row " << r;
  }
}

TYPED_TEST(LossKernels, SoftmaxCrossEntropyRejectsLabelOutsideClassesNamingTheRow) {
  using T = TypeParam;
  const auto logits = random_dense<T>(this->backend, 6, 3, 2);
  const std::vector<std::int32_t> labels = {0, 1, 2, 0, 3, 1};
  const std::vector<std::int32_t> rows = {0, 4};

  EXPECT_THAT(
      [&] {
        kernels::cpu::softmax_cross_entropy<T>(*this->backend, logits.cview(), labels, rows, 1.0,
                                               {});
      },
      ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr("row 4")));
}

TYPED_TEST(LossKernels, CountCorrectTakesLowestIndexOnTies) {
  using T = TypeParam;
  DenseT<T> logits(this->backend, 3, 3);
  const T values[] = {1, 1, 0,  // tie between 0 and 1: argmax 0
                      0, 2, 2,  // tie between 1 and 2: argmax 1
                      3, 0, 5}; // argmax 2
  for (int i = 0; i < 9; ++i)
    logits.data()[i] = values[i];
  const std::vector<std::int32_t> labels = {0, 2, 2};
  const std::vector<std::int32_t> all = {0, 1, 2};
  const std::vector<std::int32_t> second_only = {1};

  const auto correct = kernels::cpu::count_correct<T>(*this->backend, logits.cview(), labels, all);
  const auto none =
      kernels::cpu::count_correct<T>(*this->backend, logits.cview(), labels, second_only);

  EXPECT_EQ(correct, 2);
  EXPECT_EQ(none, 0);
}

TYPED_TEST(LossKernels, CountCorrectIsEquivalentToRef) {
  using T = TypeParam;
  const auto logits = random_dense<T>(this->backend, 500, 7, 3);
  const auto [labels, rows] = make_selection(500, 7);
  std::int64_t expected = 0;
  for (const std::int32_t r : rows) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < 7; ++j)
      best = logits(r, j) > logits(r, best) ? j : best;
    expected += best == labels[r] ? 1 : 0;
  }

  const auto correct = kernels::cpu::count_correct<T>(*this->backend, logits.cview(), labels, rows);

  EXPECT_EQ(correct, expected);
}

} // namespace
} // namespace tessera::testing
