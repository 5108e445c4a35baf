// Argument checks shared by the ops: every mismatch names the op and quotes both shapes.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"

#include <cstddef>
#include <span>
#include <string>

namespace tessera::ops::detail {

template <typename T> std::string shape(DenseView<T> x) {
  return shape_string(x.rows, x.cols);
}

template <typename T> std::string shape(CsrView<T> x) {
  return shape_string(x.rows, x.cols);
}

/// "[size]". Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "[" + std::string.
inline std::string shape_of_size(std::size_t size) {
  std::string text = "[";
  text += std::to_string(size);
  text += ']';
  return text;
}

template <typename T> std::string shape(std::span<T> x) {
  return shape_of_size(x.size());
}

/// Throws DimensionMismatch: "<op>: expected <rule>, but <name_a> is <a> and <name_b> is <b>".
[[noreturn]] inline void throw_mismatch(const char* op, const char* rule, const char* name_a,
                                        const std::string& a, const char* name_b,
                                        const std::string& b) {
  throw DimensionMismatch(std::string(op) + ": expected " + rule + ", but " + name_a + " is " + a +
                          " and " + name_b + " is " + b);
}

/// Throws DimensionMismatch unless x and y have the same shape.
template <typename X, typename Y>
void check_same_shape(const char* op, const char* name_x, DenseView<X> x, const char* name_y,
                      DenseView<Y> y) {
  if (x.rows != y.rows || x.cols != y.cols) {
    const std::string rule = std::string(name_x) + " and " + name_y + " of the same shape";
    throw_mismatch(op, rule.c_str(), name_x, shape(x), name_y, shape(y));
  }
}

/// Throws InvalidArgument unless 0 <= p < 1 (NaN included).
inline void check_probability(const char* op, float p) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw InvalidArgument(std::string(op) + ": dropout probability must be in [0, 1), got " +
                          std::to_string(p));
  }
}

/// For switches over DeviceKind in functions that return a value: a kind no case handled.
[[noreturn]] inline void throw_unknown_backend(const char* op, const Backend& backend) {
  throw InvalidArgument(std::string(op) + ": no kernel for backend " + backend.describe());
}

} // namespace tessera::ops::detail
