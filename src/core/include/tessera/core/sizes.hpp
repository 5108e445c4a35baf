// Products of sizes taken from files and flags, with overflow checks: the one place a shape or a
// count times an element size becomes a number, so a header of shape (200, 2^62) cannot wrap to
// a small count and pass the checks made with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>

namespace tessera {

/// The product of `dims` (1 for none), or nullopt when a dimension is negative or the product is
/// above `limit` (by default the largest int64). Callers name the file and array (or the flag) in
/// their error when it is nullopt.
constexpr std::optional<std::int64_t>
checked_product(std::span<const std::int64_t> dims,
                std::int64_t limit = std::numeric_limits<std::int64_t>::max()) noexcept {
  std::int64_t product = 1;
  bool zero = false;
  for (const std::int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) zero = true;
  }
  if (zero) return 0; // (0, 2^62) holds no element; (2^62, 2^62, 0) neither
  for (const std::int64_t d : dims) {
    if (product > limit / d) return std::nullopt;
    product *= d;
  }
  return product;
}

constexpr std::optional<std::int64_t>
checked_product(std::initializer_list<std::int64_t> dims,
                std::int64_t limit = std::numeric_limits<std::int64_t>::max()) noexcept {
  return checked_product(std::span<const std::int64_t>(dims.begin(), dims.size()), limit);
}

/// "(200, 4611686018427387904)": a shape for messages, as numpy prints it ("(5,)" for one
/// dimension, "()" for none).
inline std::string shape_text(std::span<const std::int64_t> dims) {
  std::string text = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(dims[i]);
  }
  if (dims.size() == 1) text += ",";
  return text + ")";
}

} // namespace tessera
