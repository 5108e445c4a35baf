// Evaluation metrics beyond accuracy: what selects the best epoch, and ROC-AUC for binary tasks
// (how the heterophilous benchmark and OGB report them).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace tessera::gnn {

/// The metric that selects the best validation epoch and that the summary leads with.
enum class Metric {
  Accuracy, ///< fraction of the split classified correctly
  RocAuc,   ///< area under the ROC curve of class 1's score (binary tasks only)
};

/// "accuracy" or "roc-auc"; InvalidArgument naming the choices otherwise.
Metric parse_metric(const std::string& name);
const char* to_string(Metric metric) noexcept;

/// Area under the ROC curve of `scores` separating the examples where `positive` is nonzero from
/// the others: the probability that a random positive scores above a random negative, ties
/// counting one half (the Mann–Whitney statistic, what scikit-learn's roc_auc_score returns).
/// Any score that ranks like the positive class's probability gives the same value. nullopt
/// when either class is absent (the curve is undefined). O(n log n). Throws InvalidArgument for
/// spans of different lengths or a NaN score.
std::optional<double> roc_auc(std::span<const double> scores,
                              std::span<const std::uint8_t> positive);

} // namespace tessera::gnn
