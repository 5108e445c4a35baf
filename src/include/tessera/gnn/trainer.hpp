// Full-batch node-classification training: epochs of forward, masked loss, backward and Adam,
// with evaluation every k epochs and best-validation tracking.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tessera/engine/sequential.hpp"
#include "tessera/ops/ops.hpp"

namespace tessera::gnn {

struct TrainConfig {
  int epochs = 200;
  ops::AdamConfig adam{};
  /// Evaluate (dropout off) every this many epochs and after the last.
  int eval_every = 1;
  std::uint64_t seed = 0;
};

/// The labelled rows of each split and the labels, all local row ids.
struct NodeLabels {
  std::span<const std::int32_t> labels;
  std::span<const std::int32_t> train, val, test;
};

/// Loss and accuracies of one split at one point in training.
struct SplitMetrics {
  double loss = 0.0;
  double accuracy = 0.0;
};

struct EpochStats {
  int epoch = 0;               ///< from 1
  double train_loss = 0.0;     ///< training-mode loss (dropout on) of this epoch's step
  double step_ms = 0.0;        ///< forward + loss + backward + optimizer
  bool evaluated = false;
  SplitMetrics train, val, test;  ///< eval-mode metrics when evaluated
};

/// Seconds spent in each phase over the whole run.
struct PhaseTimes {
  double forward = 0.0, loss = 0.0, backward = 0.0, optimizer = 0.0, evaluate = 0.0;
};

struct TrainResult {
  std::vector<EpochStats> history;
  int best_epoch = 0;           ///< epoch of the highest validation accuracy (earliest on ties)
  SplitMetrics best_val;        ///< validation metrics at best_epoch
  SplitMetrics test_at_best_val;
  SplitMetrics final_test;      ///< test metrics after the last epoch
  PhaseTimes phases;
  double median_step_ms = 0.0;
};

/// Trains `model` on `features` for config.epochs full-batch steps. `on_epoch` (optional) is
/// called after every epoch. Buffers are allocated in the first epoch and reused after.
TrainResult train_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                  Input<float> features, const NodeLabels& labels,
                                  const TrainConfig& config,
                                  const std::function<void(const EpochStats&)>& on_epoch = {});

}  // namespace tessera::gnn
