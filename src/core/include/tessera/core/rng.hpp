// Counter-based random numbers (Philox4x32-10): a value is a pure function of
// (seed, epoch, stream, global row id, column), so any rank or backend draws the same one.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace tessera {

/// What a random draw is for (weight init, dropout masks, generated datasets, random splits and
/// partitions); combined with the layer index into a stream id, so no two purposes share draws.
enum class RngPurpose : std::uint32_t {
  WeightInit = 1,
  Dropout = 2,
  Generator = 3,
  Split = 4,
  HaloRounding = 5,       ///< stochastic rounding of compressed halo messages
  AttentionDropout = 6,   ///< dropout of graph-attention coefficients (per edge and head)
  FanInInit = 7,          ///< weights and biases drawn as PyTorch's nn.Linear starts
  LinkSplit = 8,          ///< the order that splits edges for link prediction, its negatives
  NegativeSampling = 9,   ///< the negative pairs of a link-prediction training step
  NeighbourSampling = 10, ///< the neighbours a mini-batch's blocks sample, per hop
  BatchOrder = 11         ///< the order of the training nodes cut into an epoch's mini-batches
};

/// Selects one independent random field. Draws are keyed additionally by (row, column).
struct RngKey {
  std::uint64_t seed = 0;    ///< the run's seed
  std::uint32_t epoch = 0;   ///< 0 for draws made once (weights, splits)
  std::uint32_t stream = 0;  ///< (layer << 4) | purpose, as make() builds it

  /// The key for `purpose` in `layer` at `epoch`.
  static constexpr RngKey make(std::uint64_t seed, RngPurpose purpose, std::uint32_t layer,
                               std::uint32_t epoch = 0) noexcept {
    return {seed, epoch, (layer << 4) | static_cast<std::uint32_t>(purpose)};
  }
};

namespace detail {
constexpr void philox_round(std::array<std::uint32_t, 4>& ctr,
                            const std::array<std::uint32_t, 2>& key) noexcept {
  const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * ctr[0];
  const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * ctr[2];
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
  ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
}
}  // namespace detail

/// Philox4x32 with 10 rounds (Salmon et al., SC'11): four 32-bit outputs per counter.
constexpr std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> ctr,
                                                  std::array<std::uint32_t, 2> key) noexcept {
  for (int round = 0; round < 10; ++round) {
    detail::philox_round(ctr, key);
    key[0] += 0x9E3779B9u;
    key[1] += 0xBB67AE85u;
  }
  return ctr;
}

/// Four raw 32-bit values for columns [4 * col_block, 4 * col_block + 4) of `row`.
/// Rows may be any global id below 2^48.
constexpr std::array<std::uint32_t, 4> random_bits4(const RngKey& key, std::int64_t row,
                                                    std::uint32_t col_block) noexcept {
  const auto r = static_cast<std::uint64_t>(row);
  const std::array<std::uint32_t, 4> ctr = {
      col_block, static_cast<std::uint32_t>(r),
      static_cast<std::uint32_t>((r >> 32) & 0xFFFFu) | (key.stream << 16), key.epoch};
  return philox4x32(ctr, {static_cast<std::uint32_t>(key.seed),
                          static_cast<std::uint32_t>(key.seed >> 32) ^ (key.stream >> 16)});
}

/// A uniform float in [0, 1) with 24 random bits.
constexpr float bits_to_unit_float(std::uint32_t bits) noexcept {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

/// The uniform [0, 1) draw at (row, col) of the field `key`.
constexpr float uniform(const RngKey& key, std::int64_t row, std::int64_t col) noexcept {
  const auto c = static_cast<std::uint32_t>(col);
  return bits_to_unit_float(random_bits4(key, row, c >> 2)[c & 3u]);
}

/// A standard normal draw at (row, col) of `key` (Box-Muller on the pair of words it shares).
inline float normal(const RngKey& key, std::int64_t row, std::int64_t col) noexcept {
  const auto c = static_cast<std::uint32_t>(col);
  const auto bits = random_bits4(key, row, c >> 1);
  const std::uint32_t w = (c & 1u) * 2;
  const float u1 = (static_cast<float>(bits[w] >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  const float u2 = bits_to_unit_float(bits[w + 1]);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530717958647692f * u2);
}

/// A uniform integer in [0, bound) at (row, col) of `key` (bound < 2^32; bias below 2^-32 * bound).
constexpr std::uint32_t uniform_index(const RngKey& key, std::int64_t row, std::int64_t col,
                                      std::uint32_t bound) noexcept {
  const auto c = static_cast<std::uint32_t>(col);
  const std::uint64_t bits = random_bits4(key, row, c >> 2)[c & 3u];
  return static_cast<std::uint32_t>((bits * bound) >> 32);
}

}  // namespace tessera
