// Finite-difference gradient checks in float64: random inputs, and the comparison of a module's
// analytic gradients (input and parameters) with central differences. For the layer tests of
// engine and gnn.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/engine/module.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

namespace tessera::testing {

using Matrix = DenseT<double>;

inline BackendPtr cpu() {
  static const BackendPtr backend = make_cpu_backend();
  return backend;
}

inline Matrix random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Matrix m(cpu(), rows, cols);
  for (std::int64_t i = 0; i < m.size(); ++i)
    m.data()[i] = dist(gen);
  return m;
}

inline double dot(ConstDenseView<double> a, ConstDenseView<double> b) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < a.size(); ++i)
    sum += a.data[i] * b.data[i];
  return sum;
}

/// Compares d(sum(forward(x) ⊙ r))/d(value) with central differences for every entry of value.
inline void expect_gradient_matches(const std::function<double()>& objective, double* value,
                                    std::int64_t count, const double* analytic,
                                    const std::string& what) {
  constexpr double h = 1e-6;
  for (std::int64_t i = 0; i < count; ++i) {
    const double saved = value[i];
    value[i] = saved + h;
    const double up = objective();
    value[i] = saved - h;
    const double down = objective();
    value[i] = saved;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << what << " entry " << i;
  }
}

/// Compares every parameter's gradient (as computed now) with central differences of
/// `objective` in that parameter's values.
inline void expect_parameter_gradients_match(const std::function<double()>& objective,
                                             const std::vector<Parameter<double>*>& parameters) {
  for (Parameter<double>* p : parameters) {
    const std::vector<double> grad(p->grad.data(), p->grad.data() + p->grad.size());
    expect_gradient_matches(objective, p->value.data(), p->value.size(), grad.data(), p->name);
  }
}

/// Checks input and parameter gradients of `module` on a dense input [n, in].
inline void check_module(Module<double>& module, Matrix& x, std::int64_t out_cols, const Step& step,
                         bool check_input = true) {
  const Matrix r = random_matrix(x.rows(), out_cols, 99);
  const auto objective = [&] {
    return dot(module.forward(step, x.cview()).output.dense, r.cview());
  };

  const Context<double> ctx = module.forward(step, x.cview());
  const ConstDenseView<double> dx =
      module.backward(ctx, r.cview(), check_input ? GradientMode::Overwrite : GradientMode::Ignore,
                      GradientMode::Overwrite);
  const Matrix dx_copy = [&] {
    Matrix copy(cpu(), x.rows(), x.cols());
    if (check_input) std::copy(dx.data, dx.data + dx.size(), copy.data());
    return copy;
  }();

  if (check_input) expect_gradient_matches(objective, x.data(), x.size(), dx_copy.data(), "input");
  expect_parameter_gradients_match(objective, module.parameters());
}

} // namespace tessera::testing
