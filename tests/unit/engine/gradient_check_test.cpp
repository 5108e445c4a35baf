// Finite-difference gradient checks in float64 for the layers without a graph.
#include "tessera/engine/layers.hpp"
#include "unit/gradient_check.hpp"

#include <gtest/gtest.h>

namespace tessera {
namespace {

using testing::check_module;
using testing::cpu;
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

} // namespace
} // namespace tessera
