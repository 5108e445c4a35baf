// The counter-based generator: known-answer vectors, keying and distribution.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/core/rng.hpp"

namespace tessera {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  using Words = std::array<std::uint32_t, 4>;

  const Words zero = philox4x32({0, 0, 0, 0}, {0, 0});
  const Words ones = philox4x32({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u});
  const Words pi = philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                              {0xa4093822u, 0x299f31d0u});

  EXPECT_EQ(zero, (Words{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(ones, (Words{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(pi, (Words{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Rng, DrawIsAPureFunctionOfItsKeyAndCoordinates) {
  const RngKey key = RngKey::make(7, RngPurpose::Dropout, 1, 3);

  EXPECT_EQ(uniform(key, 123456789012LL, 5), uniform(key, 123456789012LL, 5));
  EXPECT_NE(uniform(key, 10, 5), uniform(key, 11, 5));
  EXPECT_NE(uniform(key, 10, 5), uniform(key, 10, 6));
  EXPECT_NE(uniform(key, 10, 5), uniform(RngKey::make(7, RngPurpose::Dropout, 1, 4), 10, 5));
  EXPECT_NE(uniform(key, 10, 5), uniform(RngKey::make(7, RngPurpose::Dropout, 2, 3), 10, 5));
  EXPECT_NE(uniform(key, 10, 5), uniform(RngKey::make(8, RngPurpose::Dropout, 1, 3), 10, 5));
  EXPECT_NE(uniform(key, 10, 5), uniform(RngKey::make(7, RngPurpose::WeightInit, 1, 3), 10, 5));
}

TEST(Rng, UniformAndNormalHaveTheRightMoments) {
  const RngKey key = RngKey::make(1, RngPurpose::Generator, 0);
  constexpr int n = 200000;
  double sum_u = 0, sum_u2 = 0, sum_z = 0, sum_z2 = 0;
  float lo = 1.0f, hi = 0.0f;

  for (int i = 0; i < n; ++i) {
    const float u = uniform(key, i / 8, i % 8);
    const float z = normal(key, i / 8, i % 8);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum_u += u;
    sum_u2 += u * u;
    sum_z += z;
    sum_z2 += z * z;
  }

  EXPECT_GE(lo, 0.0f);
  EXPECT_LT(hi, 1.0f);
  EXPECT_NEAR(sum_u / n, 0.5, 0.005);
  EXPECT_NEAR(sum_u2 / n - 0.25, 1.0 / 12.0 - 0.0, 0.005);
  EXPECT_NEAR(sum_z / n, 0.0, 0.01);
  EXPECT_NEAR(sum_z2 / n, 1.0, 0.02);
}

TEST(Rng, UniformIndexStaysBelowBound) {
  const RngKey key = RngKey::make(3, RngPurpose::Generator, 0);
  std::array<int, 5> histogram{};

  for (int i = 0; i < 50000; ++i) ++histogram.at(uniform_index(key, i, 0, 5));

  for (const int count : histogram) EXPECT_NEAR(count, 10000, 500);
}

}  // namespace
}  // namespace tessera
