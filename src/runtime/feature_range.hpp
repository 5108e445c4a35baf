// How large the input features are, and what a run says when they are large enough to overflow
// float32 arithmetic: a loss that diverges on such features is no matter of the learning rate.
#pragma once

#include "tessera/graph/features.hpp"

#include <optional>
#include <string>

namespace tessera::runtime {

/// From this absolute value on, features are called extreme: products and sums of a few layers
/// of them leave float32's range (about 3.4e38) or its precision.
inline constexpr double kExtremeFeature = 1e6;

/// The largest absolute value of `features` (host memory; 0 for none).
double max_abs_feature(const graph::Features& features);

/// The log line of a job's feature normalization: what `asked` (--normalize-features) chose, or
/// else what the `recipe` of `dataset` (datasets::Dataset::row_normalize) did.
std::string describe_normalization(const std::string& dataset, std::optional<bool> asked,
                                   bool recipe);

/// "the input features reach 1e+38 in absolute value, ..." when `max_abs` is at least
/// kExtremeFeature (saying whether they were row-normalized), else "".
std::string describe_extreme_features(double max_abs, bool normalized);

} // namespace tessera::runtime
