// Philox draws for 16 consecutive column blocks of one row at once, laid out so the compiler
// vectorizes the rounds (one SIMD lane per block). Bit-identical to random_bits4().
#pragma once

#include <cstdint>

#include "tessera/core/rng.hpp"

namespace tessera::kernels::cpu {

/// Draws of columns [4·first_block, 4·first_block + 64) of one row, in column order:
/// draws[4i + j] is exactly random_bits4(key, row, first_block + i)[j].
struct RandomLanes {
  static constexpr int kLanes = 16;
  static constexpr int kColumns = 4 * kLanes;
  alignas(64) std::uint32_t draws[kColumns];

  RandomLanes(const RngKey& key, std::int64_t row, std::uint32_t first_block) noexcept {
    const auto r = static_cast<std::uint64_t>(row);
    const auto row_lo = static_cast<std::uint32_t>(r);
    const std::uint32_t row_hi = static_cast<std::uint32_t>((r >> 32) & 0xFFFFu) | (key.stream << 16);
    std::uint32_t k0 = static_cast<std::uint32_t>(key.seed);
    std::uint32_t k1 = static_cast<std::uint32_t>(key.seed >> 32) ^ (key.stream >> 16);
    // One SIMD lane per block: x0..x3 are the four counter words of the 16 blocks.
    alignas(64) std::uint32_t x0[kLanes], x1[kLanes], x2[kLanes], x3[kLanes];
#pragma omp simd
    for (int i = 0; i < kLanes; ++i) {
      x0[i] = first_block + static_cast<std::uint32_t>(i);
      x1[i] = row_lo;
      x2[i] = row_hi;
      x3[i] = key.epoch;
    }
    for (int round = 0; round < 10; ++round) {
#pragma omp simd
      for (int i = 0; i < kLanes; ++i) {
        const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * x0[i];
        const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * x2[i];
        const std::uint32_t y0 = static_cast<std::uint32_t>(p1 >> 32) ^ x1[i] ^ k0;
        const std::uint32_t y2 = static_cast<std::uint32_t>(p0 >> 32) ^ x3[i] ^ k1;
        x1[i] = static_cast<std::uint32_t>(p1);
        x3[i] = static_cast<std::uint32_t>(p0);
        x0[i] = y0;
        x2[i] = y2;
      }
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int i = 0; i < kLanes; ++i) {
      draws[4 * i] = x0[i];
      draws[4 * i + 1] = x1[i];
      draws[4 * i + 2] = x2[i];
      draws[4 * i + 3] = x3[i];
    }
  }
};

}  // namespace tessera::kernels::cpu
