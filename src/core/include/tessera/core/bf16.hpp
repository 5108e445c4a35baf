// bfloat16 storage: the upper half of a float32 (same exponent, 7-bit mantissa). Values are
// stored in it and computed on as float32.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace tessera {

/// A bfloat16 value as its 16 bits. Kernels widen it to float32 exactly (a shift).
struct Bf16 {
  std::uint16_t bits;
};

/// `value` rounded to the nearest bfloat16, ties to even (NaN stays NaN, ±inf stays ±inf).
inline Bf16 to_bf16(float value) {
  if (std::isnan(value)) return Bf16{0x7FC0};
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return Bf16{static_cast<std::uint16_t>(bits >> 16)};
}

/// The float32 `half` stands for (exact).
inline float to_float(Bf16 half) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(half.bits) << 16);
}

} // namespace tessera
