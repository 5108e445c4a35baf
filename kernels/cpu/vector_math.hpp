// Float e^x, e^x - 1 and the normal CDF in plain arithmetic that the compiler vectorizes: the
// activation kernels (ELU, GELU) call them per element inside `omp simd` loops, where libm's
// scalar expm1f/erff cost more than the rest of the pass. Double keeps libm (its gradient checks
// need double precision).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace tessera::kernels::cpu {

template <std::size_t N, std::size_t... I>
inline float horner_steps(float x, const float (&c)[N], std::index_sequence<I...>) noexcept {
  float p = c[0];
  ((p = std::fma(p, x, c[I + 1])), ...);
  return p;
}

/// c[0]·x^(N-1) + ... + c[N-1] by Horner's rule, one fused multiply-add a step (the highest
/// coefficient first), unrolled at compile time: a loop here stayed a loop inside the
/// vectorized callers and doubled the cost of the softmax and ELU.
template <std::size_t N> inline float horner(float x, const float (&c)[N]) noexcept {
  return horner_steps(x, c, std::make_index_sequence<N - 1>{});
}

/// e^x within 2 ulp for x in [-87, 88]; 0 below about -87.7, e^88 above 88; NaN stays NaN.
/// Cody-Waite reduction x = n·ln2 + r, |r| <= ln2/2, and r's Taylor series to degree 7.
inline float exp_float(float x) noexcept {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;    // ln 2 to 10 bits: n·kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f; // ln 2 - kLn2Hi
  constexpr float kRound = 12582912.0f;     // 1.5·2^23: adding and subtracting it rounds
  // Clamped by selects, not std::clamp's branches, so loops vectorize; NaN passes through.
  float c = x < -88.0f ? -88.0f : x;
  c = c > 88.0f ? 88.0f : c;
  float n = (c * kLog2e + kRound) - kRound;
  n = n == n ? n : 0.0f; // a NaN's exponent would be an undefined conversion; r stays NaN
  const float r = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, c));
  const float p = horner(r, {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                             1.0f / 6.0f, 0.5f, 1.0f, 1.0f});
  // n in [-127, 127]: 2^n as a float's exponent field (n = -127 gives 0).
  const float scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  return p * scale;
}

/// e^x - 1 for x <= 88, accurate near 0 (its Taylor series below |x| = 0.5, e^x - 1 above).
inline float expm1_float(float x) noexcept {
  const float small =
      x * horner(x, {1.0f / 362880.0f, 1.0f / 40320.0f, 1.0f / 5040.0f, 1.0f / 720.0f,
                     1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f});
  const float large = exp_float(x) - 1.0f;
  return std::fabs(x) < 0.5f ? small : large;
}

/// The standard normal CDF Φ(x) = erfc(-x/√2)/2, within 1e-7 absolute everywhere and, relative,
/// within 3e-6 for |x| <= 6 and 1e-5 for x >= -11 (Φ(-11) is 2e-28).
/// Near 0 (z = |x|/√2 < 0.75) from erf's Taylor series to z^17; beyond, erfc(z) as
/// t·e^(P(t) - z²) with t = 1/(1 + z/2) and P a degree-9 Chebyshev fit of log(erfc(z)·e^(z²)/t)
/// over z in [0, 10] (the form of Numerical Recipes' erfcc; the coefficients were fitted for
/// Tessera), its exponent's rounding error carried separately (-z² is not a float).
inline float normal_cdf_float(float x) noexcept {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  constexpr float kTwoOverSqrtPi = 1.12837916709551257390f;
  const float z = std::fabs(x) * kInvSqrt2;
  // erf(z) = 2/√π · Σ (-1)^n z^(2n+1) / (n!(2n+1)).
  const float z2 = z * z;
  const float q = horner(z2, {-1.0f / 685440.0f, 1.0f / 75600.0f, -1.0f / 9360.0f, 1.0f / 1320.0f,
                              -1.0f / 216.0f, 1.0f / 42.0f, -1.0f / 10.0f, 1.0f / 3.0f});
  const float half_erf = 0.5f * kTwoOverSqrtPi * z * std::fma(-q, z2, 1.0f); // z·(1 - z²·q)
  // erfc(z) = t·e^(P(t) - z²); erfc(10) is below the smallest normal float.
  const float zc = z > 10.0f ? 10.0f : z; // NaN passes through
  const float t = 1.0f / std::fma(0.5f, zc, 1.0f);
  const float p =
      horner(t, {1.705782871e-01f, -8.111995619e-01f, 1.441537783e+00f, -1.046039304e+00f,
                 1.849500598e-01f, -1.270266252e-01f, 7.404764936e-02f, 3.792311631e-01f,
                 9.994024429e-01f, -1.265481644e+00f});
  // P - z² = hi + lo: z² = zc2 + zc2_lo exactly, and hi = P - z2 rounded, its error by two-sum.
  const float zc2 = zc * zc;
  const float zc2_lo = std::fma(zc, zc, -zc2);
  const float hi = p - zc2;
  const float back = hi - p;
  const float lo = ((p - (hi - back)) + (-zc2 - back)) - zc2_lo;
  const float e = exp_float(hi);
  const float half_erfc = 0.5f * t * std::fma(e, lo, e);
  const float below = z < 0.75f ? 0.5f - half_erf : half_erfc; // Φ(-|x|)
  return x < 0.0f ? below : 1.0f - below;
}

} // namespace tessera::kernels::cpu
