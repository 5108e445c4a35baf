// ROC-AUC by ranks, and the metric names.
#include "tessera/gnn/metrics.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace tessera::gnn {

Metric parse_metric(const std::string& name) {
  if (name == "accuracy") return Metric::Accuracy;
  if (name == "roc-auc") return Metric::RocAuc;
  throw InvalidArgument("unknown metric '" + name + "'; metrics: accuracy, roc-auc");
}

const char* to_string(Metric metric) noexcept {
  return metric == Metric::RocAuc ? "roc-auc" : "accuracy";
}

std::optional<double> roc_auc(std::span<const double> scores,
                              std::span<const std::uint8_t> positive) {
  if (scores.size() != positive.size()) {
    throw InvalidArgument("roc_auc: " + std::to_string(scores.size()) + " scores for " +
                          std::to_string(positive.size()) + " labels");
  }
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) {
      throw InvalidArgument("roc_auc: score " + std::to_string(i) + " is NaN");
    }
  }
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Walk groups of equal scores upward: every positive in a group beats the negatives below it
  // and ties with the negatives in it.
  double wins = 0.0, negatives_below = 0.0, total_positive = 0.0;
  for (std::size_t begin = 0; begin < order.size();) {
    std::size_t end = begin;
    double group_positive = 0.0, group_negative = 0.0;
    while (end < order.size() && scores[order[end]] == scores[order[begin]]) {
      (positive[order[end]] != 0 ? group_positive : group_negative) += 1.0;
      ++end;
    }
    wins += group_positive * (negatives_below + 0.5 * group_negative);
    negatives_below += group_negative;
    total_positive += group_positive;
    begin = end;
  }
  if (total_positive == 0.0 || negatives_below == 0.0) return std::nullopt;
  return wins / (total_positive * negatives_below);
}

} // namespace tessera::gnn
