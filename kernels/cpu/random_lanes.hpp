// Philox draws for 16 consecutive column blocks of one row at once, laid out so the compiler
// vectorizes the rounds (one SIMD lane per block). Bit-identical to random_bits4().
#pragma once

#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "tessera/core/rng.hpp"

namespace tessera::kernels::cpu {

/// Philox4x32-10 on `Lanes` counters at once, x[j][i] word j of lane i, keyed (k0, k1): the
/// rounds of philox4x32 with one SIMD lane per counter (the compiler vectorizes the lane loops).
template <int Lanes>
inline void philox_rounds(std::uint32_t (&x)[4][Lanes], std::uint32_t k0,
                          std::uint32_t k1) noexcept {
  for (int round = 0; round < 10; ++round) {
#pragma omp simd
    for (int i = 0; i < Lanes; ++i) {
      const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * x[0][i];
      const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * x[2][i];
      const std::uint32_t y0 = static_cast<std::uint32_t>(p1 >> 32) ^ x[1][i] ^ k0;
      const std::uint32_t y2 = static_cast<std::uint32_t>(p0 >> 32) ^ x[3][i] ^ k1;
      x[1][i] = static_cast<std::uint32_t>(p1);
      x[3][i] = static_cast<std::uint32_t>(p0);
      x[0][i] = y0;
      x[2][i] = y2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

/// Draws of 16 arbitrary (row, block) counters at once: word[j][i] is exactly
/// random_bits4(key, rows[i], blocks[i])[j]. For draws keyed per edge (attention dropout), where
/// neighbouring draws share no row.
struct RandomLanesAt {
  static constexpr int kLanes = 16;
  alignas(64) std::uint32_t word[4][kLanes];

  RandomLanesAt(const RngKey& key, const std::int64_t* rows, const std::uint32_t* blocks) noexcept {
#pragma omp simd
    for (int i = 0; i < kLanes; ++i) {
      const auto r = static_cast<std::uint64_t>(rows[i]);
      word[0][i] = blocks[i];
      word[1][i] = static_cast<std::uint32_t>(r);
      word[2][i] = static_cast<std::uint32_t>((r >> 32) & 0xFFFFu) | (key.stream << 16);
      word[3][i] = key.epoch;
    }
    philox_rounds<kLanes>(word, static_cast<std::uint32_t>(key.seed),
                          static_cast<std::uint32_t>(key.seed >> 32) ^ (key.stream >> 16));
  }
};

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
    const auto k0 = static_cast<std::uint32_t>(key.seed);
    const std::uint32_t k1 = static_cast<std::uint32_t>(key.seed >> 32) ^ (key.stream >> 16);
#if defined(__AVX512F__)
    generate_avx512(first_block, row_lo, row_hi, key.epoch, k0, k1);
#else
    generate_portable(first_block, row_lo, row_hi, key.epoch, k0, k1);
#endif
  }

 private:
  /// Lane-parallel Philox in plain C++ (the compiler vectorizes the lane loops).
  void generate_portable(std::uint32_t first_block, std::uint32_t row_lo, std::uint32_t row_hi,
                         std::uint32_t epoch, std::uint32_t k0, std::uint32_t k1) noexcept {
    // One SIMD lane per block: x0..x3 are the four counter words of the 16 blocks.
    alignas(64) std::uint32_t x[4][kLanes];
#pragma omp simd
    for (int i = 0; i < kLanes; ++i) {
      x[0][i] = first_block + static_cast<std::uint32_t>(i);
      x[1][i] = row_lo;
      x[2][i] = row_hi;
      x[3][i] = epoch;
    }
    philox_rounds<kLanes>(x, k0, k1);
    for (int i = 0; i < kLanes; ++i) {
      for (int j = 0; j < 4; ++j)
        draws[4 * i + j] = x[j][i];
    }
  }

#if defined(__AVX512F__)
// GCC 12 warns falsely inside its own _mm512_set1_epi32 (GCC bug 105593).
#pragma GCC diagnostic push
#if !defined(__clang__) // clang has no -Wmaybe-uninitialized, and warns that it has none
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
  /// The two 32-bit halves of every 64-bit lane swapped (a shuffle, off the port the multiplies
  /// and shifts share).
  static __m512i swap_halves(__m512i x) noexcept {
    return _mm512_shuffle_epi32(x, static_cast<_MM_PERM_ENUM>(0xB1));
  }

  /// (hi, lo) of the 32x32-bit products m · x in all 16 lanes (two even/odd vpmuludq; the
  /// halves moved by shuffles rather than 64-bit shifts: the rounds were bound by the one port
  /// that multiplies and shifts).
  static void mulhilo(__m512i m, __m512i x, __m512i& hi, __m512i& lo) noexcept {
    const __m512i even = _mm512_mul_epu32(x, m);
    const __m512i odd = _mm512_mul_epu32(swap_halves(x), m);
    lo = _mm512_mask_blend_epi32(0xAAAA, even, swap_halves(odd));
    hi = _mm512_mask_blend_epi32(0xAAAA, swap_halves(even), odd);
  }

  /// The same rounds on AVX-512 registers, then a 4x16 transpose into column order.
  void generate_avx512(std::uint32_t first_block, std::uint32_t row_lo, std::uint32_t row_hi,
                       std::uint32_t epoch, std::uint32_t k0, std::uint32_t k1) noexcept {
    const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
    const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
    __m512i x0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first_block)),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512i x1 = _mm512_set1_epi32(static_cast<int>(row_lo));
    __m512i x2 = _mm512_set1_epi32(static_cast<int>(row_hi));
    __m512i x3 = _mm512_set1_epi32(static_cast<int>(epoch));
    for (int round = 0; round < 10; ++round) {
      __m512i hi0, lo0, hi1, lo1;
      mulhilo(m0, x0, hi0, lo0);
      mulhilo(m1, x2, hi1, lo1);
      // hi ^ x ^ k in one three-way xor (ternary logic 0x96).
      x0 = _mm512_ternarylogic_epi32(hi1, x1, _mm512_set1_epi32(static_cast<int>(k0)), 0x96);
      x2 = _mm512_ternarylogic_epi32(hi0, x3, _mm512_set1_epi32(static_cast<int>(k1)), 0x96);
      x1 = lo1;
      x3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // Interleave so draws[4i + j] = xj[i]: 32-bit and 64-bit unpacks gather the four words of
    // each block inside 128-bit lanes, then two 128-bit shuffles order the lanes.
    const __m512i t0 = _mm512_unpacklo_epi32(x0, x1), t1 = _mm512_unpackhi_epi32(x0, x1);
    const __m512i t2 = _mm512_unpacklo_epi32(x2, x3), t3 = _mm512_unpackhi_epi32(x2, x3);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
    const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    _mm512_store_si512(draws, _mm512_shuffle_i32x4(v0, v1, 0x88));
    _mm512_store_si512(draws + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));
    _mm512_store_si512(draws + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));
    _mm512_store_si512(draws + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));
  }
#pragma GCC diagnostic pop
#endif
};

}  // namespace tessera::kernels::cpu
