// Evaluation metrics beyond accuracy: what selects the best epoch, and ROC-AUC for binary tasks
// (how the heterophilous benchmark and OGB report them).
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

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

/// Average precision of `scores` separating the examples where `positive` is nonzero from the
/// others: Σ_k (R_k − R_{k−1})·P_k over the distinct scores from the highest down, ties taken
/// together (what scikit-learn's average_precision_score returns). nullopt without a positive.
/// Throws as roc_auc.
std::optional<double> average_precision(std::span<const double> scores,
                                        std::span<const std::uint8_t> positive);

/// Hits@K as OGB's link-prediction evaluator counts it: the fraction of `positive` scores above
/// the K-th highest of `negative` (strictly; all of them when there are fewer than K negatives).
/// 0 without positives. Throws InvalidArgument for k < 1.
double hits_at_k(std::span<const double> positive, std::span<const double> negative, int k);

/// Mean reciprocal rank of each positive score among the negatives: its rank is 1 + the
/// negatives above it + half those equal to it (OGB's mean of the optimistic and pessimistic
/// ranks), every positive ranked against all of `negative` (shared negatives, as the split's
/// sampled ones are). 0 without positives.
double mean_reciprocal_rank(std::span<const double> positive, std::span<const double> negative);

/// `logits` readable on the host: the view itself on a CPU backend, else a copy in `buffer`.
ConstDenseView<float> logits_on_host(const Backend& backend, ConstDenseView<float> logits,
                                     std::vector<float>& buffer);

/// A binary task's examples of one split, collected for roc_auc: each row's score is logit 1 −
/// logit 0, the log-odds of class 1, which ranks rows as its softmax probability does.
struct BinaryScores {
  std::vector<double> scores;
  std::vector<std::uint8_t> positive; ///< 1 where the label is 1

  /// Appends rows `rows` of host `logits` ([*, 2]) whose labels are labels[row] (host).
  void append(ConstDenseView<float> logits, std::span<const std::int32_t> labels,
              std::span<const std::int32_t> rows);
  /// Appends every row of host `logits` ([n, 2]), labelled labels[0, n).
  void append(ConstDenseView<float> logits, std::span<const std::int32_t> labels);
};

/// Each of `splits` with the examples every rank holds of it, in rank order, on every rank.
/// Collective with `comm` (null or one rank: the splits as they are).
std::vector<BinaryScores> gather_binary_scores(std::span<const BinaryScores> splits,
                                               comm::Communicator* comm);

/// The ROC-AUC of each of `splits` over the examples every rank holds of it (nullopt where one
/// class is absent), the same on every rank. Collective with `comm` (null: this process's only).
std::vector<std::optional<double>> roc_auc_over_ranks(std::span<const BinaryScores> splits,
                                                      comm::Communicator* comm);

/// The splits a binary task's ROC-AUC is measured on (validation, which selects the epoch, and
/// test), as node ids into `labels`.
struct RocAucSplits {
  std::span<const std::int32_t> val, test;
};

/// Refuses (InvalidArgument, before any training) a validation or test split whose nodes, over
/// all ranks, are all of one class: ROC-AUC is undefined there, so the metric could neither
/// select an epoch nor report one. An empty split passes (nothing is measured on it). Names the
/// split and its class counts. Collective with `comm` (one allreduce; null: this process only).
void check_roc_auc_splits(std::span<const std::int32_t> labels, RocAucSplits splits,
                          comm::Communicator* comm);

} // namespace tessera::gnn
