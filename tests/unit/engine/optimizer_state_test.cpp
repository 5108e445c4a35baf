// Adam's state taken out and put back: a copy continues exactly as the original, and a state of
// another set of parameters is refused naming the parameter.
#include "tessera/core/error.hpp"
#include "tessera/engine/optimizer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::HasSubstr;

Parameter<float> parameter(const BackendPtr& backend, const std::string& name, int rows, int cols,
                           float seed) {
  Parameter<float> p{name, DenseT<float>(backend, rows, cols), DenseT<float>(backend, rows, cols)};
  for (std::int64_t i = 0; i < p.value.size(); ++i) {
    p.value.data()[i] = seed * static_cast<float>(i % 7) - 0.3f;
    p.grad.data()[i] = 0.1f * static_cast<float>(i % 5) - seed;
  }
  return p;
}

TEST(AdamState, RestoredCopyContinuesBitForBitAsTheOriginal) {
  const BackendPtr cpu = make_cpu_backend(1);
  Parameter<float> a = parameter(cpu, "w", 3, 5, 0.7f);
  Parameter<float> b = parameter(cpu, "w", 3, 5, 0.7f);
  const AdamConfig config{0.01f, 0.9f, 0.999f, 1e-8f, 5e-4f, false};
  Adam<float> original(cpu, {&a}, config);
  for (int i = 0; i < 3; ++i)
    original.step();
  for (std::int64_t i = 0; i < a.value.size(); ++i)
    b.value.data()[i] = a.value.data()[i];
  Adam<float> copy(cpu, {&b}, config);

  copy.load_state(original.state());
  original.step();
  copy.step();

  EXPECT_EQ(copy.steps(), 4);
  for (std::int64_t i = 0; i < a.value.size(); ++i) {
    EXPECT_EQ(b.value.data()[i], a.value.data()[i]) << "element " << i;
  }
}

TEST(AdamState, StateOfAnotherShapeIsRefusedNamingTheParameter) {
  const BackendPtr cpu = make_cpu_backend(1);
  Parameter<float> small = parameter(cpu, "small", 2, 2, 0.5f);
  Parameter<float> large = parameter(cpu, "large", 4, 2, 0.5f);
  Adam<float> from(cpu, {&small}, AdamConfig{});
  Adam<float> to(cpu, {&large}, AdamConfig{});

  EXPECT_THAT([&] { to.load_state(from.state()); },
              ::testing::ThrowsMessage<DimensionMismatch>(HasSubstr("'large'")));
}

} // namespace
} // namespace tessera
