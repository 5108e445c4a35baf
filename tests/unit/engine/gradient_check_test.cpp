// Finite-difference gradient checks in float64 for the layers without a graph.
#include "tessera/engine/layers.hpp"
#include "tessera/engine/sequential.hpp"
#include "tessera/ops/ops.hpp"
#include "unit/gradient_check.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <memory>

namespace tessera {
namespace {

using testing::check_module;
using testing::cpu;
using testing::dot;
using testing::expect_parameter_gradients_match;
using testing::Matrix;
using testing::random_matrix;

TEST(GradientCheck, LinearMatchesFiniteDifferences) {
  Linear<double> linear(cpu(), 4, 3, true, 7, 0);
  Matrix x = random_matrix(5, 4, 6);

  check_module(linear, x, 3, Step{});
}

TEST(GradientCheck, ReluMatchesFiniteDifferences) {
  Relu<double> relu(cpu());
  Matrix x = random_matrix(6, 5, 8); // values away from 0 with probability ~1

  check_module(relu, x, 5, Step{});
}

TEST(GradientCheck, DropoutMatchesFiniteDifferencesWithItsMask) {
  Dropout<double> dropout(cpu(), 0.4f, 2);
  Matrix x = random_matrix(9, 7, 9);
  const Step step{42, 3, true, {}};

  check_module(dropout, x, 7, step);
}

TEST(GradientCheck, ReluDropoutMatchesFiniteDifferencesWithItsMask) {
  ReluDropout<double> relu_dropout(cpu(), 0.4f, 1);
  Matrix x = random_matrix(9, 7, 14);
  const Step step{42, 3, true, {}};

  check_module(relu_dropout, x, 7, step);
}

TEST(GradientCheck, EluAndGeluMatchFiniteDifferences) {
  Elu<double> elu(cpu());
  Gelu<double> gelu(cpu());
  Matrix x = random_matrix(6, 5, 21);
  check_module(elu, x, 5, Step{});
  check_module(gelu, x, 5, Step{});
}

TEST(GradientCheck, EluDropoutMatchesFiniteDifferencesWithItsMask) {
  EluDropout<double> elu_dropout(cpu(), 0.4f, 2);
  Matrix x = random_matrix(9, 7, 15);
  const Step step{42, 3, true, {}};

  check_module(elu_dropout, x, 7, step);
  check_module(elu_dropout, x, 7, Step{42, 3, false, {}}); // evaluation: ELU alone
}

TEST(EluDropout, ComputesWhatEluThenDropoutCompute) {
  // The same weights (same seeds), ELU and Dropout(p, layer 1) apart or fused.
  const auto chain = [](bool fused) {
    Sequential<double> model;
    model.add(std::make_unique<Linear<double>>(cpu(), 4, 6, true, 3, 0));
    if (fused) {
      model.add(std::make_unique<EluDropout<double>>(cpu(), 0.5f, 1));
    } else {
      model.add(std::make_unique<Elu<double>>(cpu()));
      model.add(std::make_unique<Dropout<double>>(cpu(), 0.5f, 1));
    }
    model.add(std::make_unique<Linear<double>>(cpu(), 6, 3, true, 3, 1));
    return model;
  };
  Sequential<double> apart = chain(false), fused = chain(true);
  EXPECT_EQ(fused.modules()[1]->name(), "ELU+Dropout(p=0.5)");
  const Matrix x = random_matrix(11, 4, 27);
  const Matrix r = random_matrix(11, 3, 28);
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "evaluation");
    const Step step{9, 2, training, {}};
    const ConstDenseView<double> want = apart.forward(step, x.cview());
    const ConstDenseView<double> got = fused.forward(step, x.cview());
    for (std::int64_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got.data[i], want.data[i]) << "output " << i; // the same operations, in order
    apart.backward(r.cview());
    fused.backward(r.cview());
    const auto want_grads = apart.parameters(), got_grads = fused.parameters();
    ASSERT_EQ(got_grads.size(), want_grads.size());
    for (std::size_t p = 0; p < want_grads.size(); ++p) {
      for (std::int64_t i = 0; i < want_grads[p]->grad.size(); ++i) {
        const double w = want_grads[p]->grad.data()[i];
        // ELU's derivative reads the dropped output scaled back: a rounding apart.
        EXPECT_NEAR(got_grads[p]->grad.data()[i], w, 1e-14 * (1.0 + std::abs(w)))
            << want_grads[p]->name << " " << i;
      }
    }
  }
  // One output and one input gradient where the pair held two of each.
  EXPECT_LT(fused.bytes(), apart.bytes());
}

TEST(GradientCheck, LayerNormMatchesFiniteDifferencesIncludingItsScaleAndShift) {
  LayerNorm<double> norm(cpu(), 7, "norm");
  // A scale and shift away from their start (ones and zeros), so their gradients matter.
  const auto params = norm.parameters();
  for (std::int64_t c = 0; c < 7; ++c) {
    params[0]->value.data()[c] = 1.0 + 0.1 * static_cast<double>(c);
    params[1]->value.data()[c] = -0.05 * static_cast<double>(c);
  }
  Matrix x = random_matrix(5, 7, 22);
  check_module(norm, x, 7, Step{});

  // Each row normalized: mean 0 and variance 1 (before the scale and shift).
  LayerNorm<double> plain(cpu(), 7, "plain", 0.0);
  const ConstDenseView<double> y = plain.forward(Step{}, x.cview()).output.dense;
  for (std::int64_t r = 0; r < 5; ++r) {
    double sum = 0, squares = 0;
    for (std::int64_t c = 0; c < 7; ++c) {
      sum += y(r, c);
      squares += y(r, c) * y(r, c);
    }
    EXPECT_NEAR(sum / 7, 0.0, 1e-12);
    EXPECT_NEAR(squares / 7, 1.0, 1e-12);
  }
}

TEST(GradientCheck, BatchNormMatchesFiniteDifferencesCountingAllRowsOrTheFirstOnes) {
  // Counting the first 4 of 6 rows: the last two (a tile's ghost copies) are normalized with the
  // others' statistics, and their gradients still reach the statistics.
  for (const std::int64_t counted : {std::int64_t{-1}, std::int64_t{4}}) {
    SCOPED_TRACE(counted);
    BatchNorm<double> norm(cpu(), 5, "norm", nullptr, counted);
    const auto params = norm.parameters();
    for (std::int64_t c = 0; c < 5; ++c) {
      params[0]->value.data()[c] = 1.0 + 0.2 * static_cast<double>(c);
      params[1]->value.data()[c] = 0.1 * static_cast<double>(c);
    }
    Matrix x = random_matrix(6, 5, 30);
    check_module(norm, x, 5, Step{});
  }
  // Every column of the counted rows normalized: mean 0, variance 1.
  BatchNorm<double> plain(cpu(), 3, "plain", nullptr, -1, 0.0);
  const Matrix x = random_matrix(8, 3, 31);
  const ConstDenseView<double> y = plain.forward(Step{}, x.cview()).output.dense;
  for (std::int64_t c = 0; c < 3; ++c) {
    double sum = 0, squares = 0;
    for (std::int64_t r = 0; r < 8; ++r) {
      sum += y(r, c);
      squares += y(r, c) * y(r, c);
    }
    EXPECT_NEAR(sum / 8, 0.0, 1e-12);
    EXPECT_NEAR(squares / 8, 1.0, 1e-12);
  }
}

TEST(GradientCheck, AResidualBranchInAChainMatchesFiniteDifferences) {
  // Linear → [x + Linear(GELU(LayerNorm(x)))] → Linear: the skip's gradient reaches the first
  // Linear through ResidualStart.
  Sequential<double> model;
  model.add(std::make_unique<Linear<double>>(cpu(), 4, 6, true, 1, 0));
  auto start = std::make_unique<ResidualStart<double>>(cpu());
  ResidualStart<double>& opened = *start;
  model.add(std::move(start));
  model.add(std::make_unique<LayerNorm<double>>(cpu(), 6, "norm"));
  model.add(std::make_unique<Linear<double>>(cpu(), 6, 6, true, 1, 1));
  model.add(std::make_unique<Gelu<double>>(cpu()));
  model.add(std::make_unique<ResidualAdd<double>>(cpu(), opened));
  model.add(std::make_unique<Linear<double>>(cpu(), 6, 3, true, 1, 2));
  const Matrix x = random_matrix(5, 4, 23);
  const Matrix r = random_matrix(5, 3, 24);
  const auto objective = [&] { return dot(model.forward(Step{}, x.cview()), r.cview()); };

  model.forward(Step{}, x.cview());
  model.backward(r.cview());

  expect_parameter_gradients_match(objective, model.parameters());
}

TEST(Residual, ABranchThatEndsWithFewerRowsAddsTheSkipToItsFirstRows) {
  ResidualStart<double> start(cpu());
  ResidualAdd<double> add(cpu(), start);
  const Matrix x = random_matrix(5, 3, 25);
  const Matrix branch = random_matrix(3, 3, 26); // the first 3 rows, as a graph layer's owned ones
  start.forward(Step{}, x.cview());
  const ConstDenseView<double> y = add.forward(Step{}, branch.cview()).output.dense;
  ASSERT_EQ(y.rows, 3);
  for (std::int64_t i = 0; i < y.size(); ++i)
    EXPECT_DOUBLE_EQ(y.data[i], x.data()[i] + branch.data()[i]);

  const Matrix dy = random_matrix(3, 3, 27);
  const Matrix d_branch = random_matrix(5, 3, 28); // the branch's input gradient, all 5 rows
  add.backward(Context<double>{}, dy.cview(), GradientMode::Overwrite, GradientMode::Ignore);
  const ConstDenseView<double> dx = start.backward(Context<double>{}, d_branch.cview(),
                                                   GradientMode::Overwrite, GradientMode::Ignore);
  for (std::int64_t i = 0; i < dx.size(); ++i) {
    const double skip = i < dy.size() ? dy.data()[i] : 0.0;
    EXPECT_DOUBLE_EQ(dx.data[i], d_branch.data()[i] + skip);
  }
  const Matrix wide = random_matrix(3, 4, 29);
  EXPECT_THROW(add.forward(Step{}, wide.cview()), DimensionMismatch);
}

TEST(FirstRows, KeepsTheFirstRowsAndGivesTheOthersAZeroGradient) {
  FirstRows<double> keep(cpu(), 2);
  const Matrix x = random_matrix(4, 3, 40);
  const Context<double> ctx = keep.forward(Step{}, x.cview());
  ASSERT_EQ(ctx.output.rows(), 2);
  EXPECT_EQ(ctx.output.dense.data, x.data()); // a view, not a copy
  const Matrix dy = random_matrix(2, 3, 41);
  const ConstDenseView<double> dx =
      keep.backward(ctx, dy.cview(), GradientMode::Overwrite, GradientMode::Ignore);
  ASSERT_EQ(dx.rows, 4);
  for (std::int64_t i = 0; i < dx.size(); ++i)
    EXPECT_EQ(dx.data[i], i < dy.size() ? dy.data()[i] : 0.0);
  const Matrix short_input = random_matrix(1, 3, 42);
  EXPECT_THROW(keep.forward(Step{}, short_input.cview()), DimensionMismatch);
}

TEST(GradientCheck, BinaryLogitMatchesFiniteDifferences) {
  BinaryLogit<double> head(cpu());
  Matrix x = random_matrix(6, 1, 43);
  check_module(head, x, 2, Step{});
}

TEST(BinaryLogit, SoftmaxCrossEntropyOverItsLogitsIsBinaryCrossEntropyOnTheOne) {
  // [0, z]: −log softmax picks log(1 + e^z) − y·z, PyTorch's BCEWithLogits, and its gradient
  // through the head σ(z) − y.
  BinaryLogit<double> head(cpu());
  const Matrix z = random_matrix(5, 1, 44);
  const ConstDenseView<double> logits = head.forward(Step{}, z.cview()).output.dense;
  ASSERT_EQ(logits.cols, 2);
  const std::vector<std::int32_t> labels = {0, 1, 1, 0, 1};
  const std::vector<std::int32_t> rows = {0, 1, 2, 3, 4};
  Matrix d_logits(cpu(), 5, 2);
  const double loss =
      ops::softmax_cross_entropy<double>(*cpu(), logits, labels, rows, 5.0, d_logits.view());
  double bce = 0;
  for (std::int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(logits.data[2 * i], 0.0);
    EXPECT_EQ(logits.data[2 * i + 1], z.data()[i]);
    bce += std::log1p(std::exp(z.data()[i])) - labels[static_cast<std::size_t>(i)] * z.data()[i];
  }
  EXPECT_NEAR(loss, bce / 5, 1e-12);
  const ConstDenseView<double> dz = head.backward(Context<double>{}, d_logits.cview(),
                                                  GradientMode::Overwrite, GradientMode::Ignore);
  for (std::int64_t i = 0; i < 5; ++i) {
    const double sigma = 1 / (1 + std::exp(-z.data()[i]));
    EXPECT_NEAR(dz.data[i], (sigma - labels[static_cast<std::size_t>(i)]) / 5, 1e-12);
  }
  const Matrix wide = random_matrix(5, 2, 45);
  EXPECT_THROW(head.forward(Step{}, wide.cview()), DimensionMismatch);
}

} // namespace
} // namespace tessera
