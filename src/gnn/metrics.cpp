// ROC-AUC by ranks, and the metric names.
#include "tessera/gnn/metrics.hpp"

#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
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

namespace {

/// Throws InvalidArgument unless the spans match and no score is NaN (`what` names the metric).
void check_scores(const char* what, std::span<const double> scores, std::size_t labels) {
  if (scores.size() != labels) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(scores.size()) +
                          " scores for " + std::to_string(labels) + " labels");
  }
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) {
      throw InvalidArgument(std::string(what) + ": score " + std::to_string(i) + " is NaN");
    }
  }
}

} // namespace

std::optional<double> average_precision(std::span<const double> scores,
                                        std::span<const std::uint8_t> positive) {
  check_scores("average_precision", scores, positive.size());
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  double total_positive = 0.0;
  for (const std::uint8_t p : positive)
    total_positive += p != 0 ? 1.0 : 0.0;
  if (total_positive == 0.0) return std::nullopt;
  // Walk groups of equal scores downward: each group is one threshold.
  double true_positive = 0.0, seen = 0.0, recall_before = 0.0, sum = 0.0;
  for (std::size_t begin = 0; begin < order.size();) {
    std::size_t end = begin;
    while (end < order.size() && scores[order[end]] == scores[order[begin]]) {
      true_positive += positive[order[end]] != 0 ? 1.0 : 0.0;
      seen += 1.0;
      ++end;
    }
    const double recall = true_positive / total_positive;
    sum += (recall - recall_before) * (true_positive / seen);
    recall_before = recall;
    begin = end;
  }
  return sum;
}

double hits_at_k(std::span<const double> positive, std::span<const double> negative, int k) {
  if (k < 1) throw InvalidArgument("hits_at_k: K must be >= 1, got " + std::to_string(k));
  if (positive.empty()) return 0.0;
  if (negative.size() < static_cast<std::size_t>(k)) return 1.0;
  std::vector<double> top(negative.begin(), negative.end());
  std::nth_element(top.begin(), top.begin() + (k - 1), top.end(), std::greater<>());
  const double kth = top[static_cast<std::size_t>(k - 1)];
  const auto above =
      std::count_if(positive.begin(), positive.end(), [kth](double score) { return score > kth; });
  return static_cast<double>(above) / static_cast<double>(positive.size());
}

double mean_reciprocal_rank(std::span<const double> positive, std::span<const double> negative) {
  if (positive.empty()) return 0.0;
  std::vector<double> sorted(negative.begin(), negative.end());
  std::sort(sorted.begin(), sorted.end());
  double sum = 0.0;
  for (const double score : positive) {
    const auto below_or_equal = std::upper_bound(sorted.begin(), sorted.end(), score);
    const auto below = std::lower_bound(sorted.begin(), sorted.end(), score);
    const auto above = static_cast<double>(sorted.end() - below_or_equal);
    const auto equal = static_cast<double>(below_or_equal - below);
    sum += 1.0 / (1.0 + above + 0.5 * equal);
  }
  return sum / static_cast<double>(positive.size());
}

ConstDenseView<float> logits_on_host(const Backend& backend, ConstDenseView<float> logits,
                                     std::vector<float>& buffer) {
  if (backend.kind() == DeviceKind::Cpu) return logits;
  buffer.resize(static_cast<std::size_t>(logits.size()));
  backend.copy_to_host(buffer.data(), logits.data, buffer.size() * sizeof(float));
  return {buffer.data(), logits.rows, logits.cols};
}

namespace {

void append_row(BinaryScores& out, ConstDenseView<float> logits, std::int32_t label,
                std::int64_t row) {
  out.scores.push_back(static_cast<double>(logits(row, 1)) - static_cast<double>(logits(row, 0)));
  out.positive.push_back(label == 1 ? 1 : 0);
}

} // namespace

void BinaryScores::append(ConstDenseView<float> logits, std::span<const std::int32_t> labels,
                          std::span<const std::int32_t> rows) {
  for (const std::int32_t r : rows)
    append_row(*this, logits, labels[static_cast<std::size_t>(r)], r);
}

void BinaryScores::append(ConstDenseView<float> logits, std::span<const std::int32_t> labels) {
  for (std::int64_t r = 0; r < logits.rows; ++r)
    append_row(*this, logits, labels[static_cast<std::size_t>(r)], r);
}

std::vector<BinaryScores> gather_binary_scores(std::span<const BinaryScores> splits,
                                               comm::Communicator* comm) {
  std::vector<BinaryScores> all(splits.begin(), splits.end());
  if (comm == nullptr || comm->size() == 1) return all;
  for (std::size_t i = 0; i < splits.size(); ++i) {
    all[i].scores = comm::all_gather<double>(*comm, splits[i].scores);
    all[i].positive = comm::all_gather<std::uint8_t>(*comm, splits[i].positive);
  }
  return all;
}

std::vector<std::optional<double>> roc_auc_over_ranks(std::span<const BinaryScores> splits,
                                                      comm::Communicator* comm) {
  std::vector<std::optional<double>> result;
  for (const BinaryScores& s : gather_binary_scores(splits, comm))
    result.push_back(roc_auc(s.scores, s.positive));
  return result;
}

void check_roc_auc_splits(std::span<const std::int32_t> labels, RocAucSplits splits,
                          comm::Communicator* comm) {
  // [split][class 0 / class 1] over every rank.
  std::vector<std::int64_t> counts(4, 0);
  const std::span<const std::int32_t> parts[2] = {splits.val, splits.test};
  for (std::size_t p = 0; p < 2; ++p) {
    for (const std::int32_t row : parts[p])
      ++counts[2 * p + (labels[static_cast<std::size_t>(row)] == 1 ? 1 : 0)];
  }
  if (comm != nullptr) comm->allreduce_sum(std::span<std::int64_t>(counts));
  const char* names[2] = {"validation", "test"};
  for (std::size_t p = 0; p < 2; ++p) {
    const std::int64_t negative = counts[2 * p], positive = counts[2 * p + 1];
    if (negative + positive == 0 || (negative > 0 && positive > 0)) continue;
    throw InvalidArgument(
        std::string("ROC-AUC is undefined on the ") + names[p] + " split: its " +
        std::to_string(negative + positive) + " nodes are all of class " +
        (positive > 0 ? "1" : "0") + " (class 0: " + std::to_string(negative) +
        ", class 1: " + std::to_string(positive) +
        "); it needs nodes of both classes (use a split that has them, or the accuracy metric)");
  }
}

} // namespace tessera::gnn
