// The CPU optimizer kernels against a hand-computed two-step Adam/AdamW example.
#include "tessera/kernels/optimizer_kernels.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <vector>

namespace tessera::testing {
namespace {

/// param, m and v after a step.
struct AdamState {
  double param;
  double m;
  double v;
};

template <typename T> class OptimizerKernels : public ::testing::Test {
protected:
  BackendPtr backend = make_cpu_backend();

  /// Two steps from param = 1, m = v = 0 with gradients 0.5 then -0.25 (the same for every
  /// element of a 37-element array, to cover the vector body and tail), checked after each.
  void expect_two_steps(const AdamConfig& config, const AdamState& first,
                        const AdamState& second) {
    const std::size_t size = 37;
    std::vector<T> param(size, T{1});
    std::vector<T> m(size, T{0});
    std::vector<T> v(size, T{0});
    // Relative, and loose even for double: the hyper-parameters are floats, the hand-computed
    // values use the decimal ones (1 - 0.999f is 0.001 · (1 - 1.3e-5)).
    const auto tolerance = [](double expected) { return 2e-5 * std::abs(expected); };
    const AdamState* expected[] = {&first, &second};
    const T grads[] = {T{0.5}, T{-0.25}};
    for (int step = 1; step <= 2; ++step) {
      const std::vector<T> grad(size, grads[step - 1]);

      kernels::cpu::adam_step(*backend, std::span<T>(param), std::span<const T>(grad),
                              std::span<T>(m), std::span<T>(v), config, step);

      for (std::size_t i = 0; i < size; ++i) {
        const AdamState& want = *expected[step - 1];
        ASSERT_NEAR(param[i], want.param, tolerance(want.param)) << "step " << step;
        ASSERT_NEAR(m[i], want.m, tolerance(want.m)) << "step " << step;
        ASSERT_NEAR(v[i], want.v, tolerance(want.v)) << "step " << step;
      }
    }
  }
};
TYPED_TEST_SUITE(OptimizerKernels, ValueTypes);

AdamConfig config(float weight_decay, bool decoupled) {
  AdamConfig c;
  c.lr = 0.1f;
  c.beta1 = 0.9f;
  c.beta2 = 0.999f;
  c.eps = 1e-8f;
  c.weight_decay = weight_decay;
  c.decoupled = decoupled;
  return c;
}

TYPED_TEST(OptimizerKernels, AdamMatchesHandComputedSteps) {
  // Step 1: m = 0.1·0.5 = 0.05, v = 0.001·0.25 = 0.00025; bias-corrected m̂ = 0.5, √v̂ = 0.5,
  //         param = 1 - 0.1·0.5/0.5 = 0.9 (+2e-9 from eps).
  // Step 2: m = 0.045 - 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225;
  //         m̂ = 0.02/0.19, √v̂ = √(0.00031225/0.001999) = 0.3952254,
  //         param = 0.9 - 0.1·0.1052632/0.3952254 = 0.8733663.
  this->expect_two_steps(config(0.0f, false), {0.900000002, 0.05, 0.00025},
                         {0.873366298708, 0.02, 0.00031225});
}

TYPED_TEST(OptimizerKernels, AdamAddsWeightDecayToTheGradient) {
  // Step 1: g = 0.5 + 0.1·1 = 0.6: m = 0.06, v = 0.00036, m̂ = √v̂ = 0.6, param = 0.9.
  // Step 2: g = -0.25 + 0.1·0.9 = -0.16: m = 0.054 - 0.016 = 0.038,
  //         v = 0.00035964 + 0.0000256 = 0.00038524; m̂ = 0.2, √v̂ = 0.4389947,
  //         param = 0.9 - 0.1·0.2/0.4389947 = 0.8544414.
  this->expect_two_steps(config(0.1f, false), {0.900000001667, 0.06, 0.00036},
                         {0.854441367462, 0.0380000000167, 0.000385239999947});
}

TYPED_TEST(OptimizerKernels, AdamWDecaysTheParameterBeforeTheUpdate) {
  // Moments as without decay. Step 1: param = 1·(1 - 0.1·0.1) - 0.1 = 0.89.
  // Step 2: param = 0.89·0.99 - 0.0266337 = 0.8544663.
  this->expect_two_steps(config(0.1f, true), {0.890000002, 0.05, 0.00025},
                         {0.854466298688, 0.02, 0.00031225});
}

TYPED_TEST(OptimizerKernels, ZeroSetsEveryElement) {
  using T = TypeParam;
  std::vector<T> x(1001, std::numeric_limits<T>::quiet_NaN());

  kernels::cpu::zero(*this->backend, std::span<T>(x));

  EXPECT_EQ(x, std::vector<T>(1001, T{0}));
}

} // namespace
} // namespace tessera::testing
