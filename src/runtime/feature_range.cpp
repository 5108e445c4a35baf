// The range of the input features, and the words for one that overflows float32 arithmetic.
#include "feature_range.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>

namespace tessera::runtime {

namespace {

double max_abs(const float* values, std::int64_t count) {
  float largest = 0.0f; // one pass at load, as fast as the memory streams
  for (std::int64_t i = 0; i < count; ++i)
    largest = std::max(largest, std::abs(values[i]));
  return largest;
}

} // namespace

double max_abs_feature(const graph::Features& features) {
  if (features.dense) return max_abs(features.dense->data(), features.dense->size());
  if (features.sparse) return max_abs(features.sparse->val(), features.sparse->nnz());
  return 0.0;
}

std::string describe_normalization(const std::string& dataset, std::optional<bool> asked,
                                   bool recipe) {
  if (asked) {
    return *asked ? "features: row-normalized (--normalize-features true)"
                  : "features: as stored (--normalize-features false)";
  }
  if (recipe) {
    return fmt::format("features: row-normalized, the published recipe of {} (bag-of-words "
                       "citation data; --normalize-features false keeps them as stored)",
                       dataset);
  }
  return fmt::format("features: as stored ({} has no row-normalization recipe; "
                     "--normalize-features true divides each row by its sum)",
                     dataset);
}

std::string describe_extreme_features(double max_abs, bool normalized) {
  if (!(max_abs >= kExtremeFeature)) return "";
  return fmt::format("the input features reach {:.3g} in absolute value{}: float32 products and "
                     "sums of values this large overflow or lose their precision whatever the "
                     "learning rate; scale the features{}",
                     max_abs, normalized ? " after row normalization" : "",
                     normalized ? "" : " (--normalize-features true divides each row by its sum)");
}

} // namespace tessera::runtime
