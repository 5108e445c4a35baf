// bfloat16 on the device: the CPU's rounding (tessera/core/bf16.hpp), bit for bit.
#pragma once

#include <cstdint>

namespace tessera::kernels::cuda::launch {

/// `value` rounded to the nearest bfloat16, ties to even (NaN to 0x7FC0), as its bits.
__device__ inline std::uint16_t bf16_bits(float value) {
  if (value != value) return 0x7FC0;
  std::uint32_t bits = __float_as_uint(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

} // namespace tessera::kernels::cuda::launch
