// Full-batch node-classification training: epochs of forward, masked loss, backward and Adam,
// with evaluation every k epochs and best-validation tracking.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/engine/sequential.hpp"
#include "tessera/ops/ops.hpp"

namespace tessera::gnn {

/// How long and how to train.
struct TrainConfig {
  int epochs = 200;        ///< full-batch steps
  AdamConfig adam{};  ///< learning rate, weight decay, Adam or AdamW
  /// Evaluate (dropout off) every this many epochs and after the last.
  int eval_every = 1;
  std::uint64_t seed = 0;  ///< keys every dropout mask (and, in run_train_job, the weights)
};

/// The labelled rows of each split and the labels, all local row ids, in host memory (the
/// trainer copies them to a device backend itself).
struct NodeLabels {
  std::span<const std::int32_t> labels;             ///< [n] class of each row (logits' rows)
  std::span<const std::int32_t> train, val, test;  ///< rows of each split
};

/// Loss and accuracies of one split at one point in training.
struct SplitMetrics {
  double loss = 0.0;      ///< mean softmax cross-entropy over the split
  double accuracy = 0.0;  ///< fraction of the split classified correctly, in [0, 1]
};

/// What one epoch did (the same on every rank of a distributed run, except the times and
/// bytes, which are this rank's).
struct EpochStats {
  int epoch = 0;               ///< from 1
  double train_loss = 0.0;     ///< training-mode loss (dropout on) of this epoch's step
  double step_ms = 0.0;        ///< forward + loss + backward + optimizer
  /// Of step_ms on this rank: posting messages and the gradient/loss allreduce (comm), and
  /// blocked waiting for halo rows (wait). Compute is the rest. Zero on one process.
  double comm_ms = 0.0, wait_ms = 0.0;
  /// Halo bytes this rank sent and received during the step (not the evaluation).
  std::int64_t halo_bytes_sent = 0, halo_bytes_received = 0;
  bool evaluated = false;         ///< whether the metrics below were measured this epoch
  SplitMetrics train, val, test;  ///< eval-mode metrics when evaluated
};

/// Seconds spent in each phase over the whole run.
struct PhaseTimes {
  double forward = 0.0, loss = 0.0, backward = 0.0, optimizer = 0.0, evaluate = 0.0;
};

/// A whole run: every epoch and the metrics that matter at its end.
struct TrainResult {
  std::vector<EpochStats> history;  ///< one entry per epoch, in order
  int best_epoch = 0;           ///< epoch of the highest validation accuracy (earliest on ties)
  SplitMetrics best_val;        ///< validation metrics at best_epoch
  SplitMetrics test_at_best_val; ///< test metrics at best_epoch (what papers report)
  SplitMetrics final_test;      ///< test metrics after the last epoch
  PhaseTimes phases;
  double median_step_ms = 0.0;  ///< median of EpochStats::step_ms
};

/// What a rank of a job adds to training: the job's ranks, the global id of every local row
/// (dropout masks follow global ids, so any tiling draws the same masks), and the time the
/// model's halo exchanges spent (read after each step).
struct Distribution {
  comm::Communicator* comm = nullptr;  ///< where gradients and metrics are summed
  RowIds rows;
  /// What the model's halo exchanges have done so far on this rank, summed over layers.
  std::function<comm::HaloStats()> halo_totals;
};

/// Trains `model` on `features` for config.epochs full-batch steps on `backend`, where the model
/// and the features live. `on_epoch` (optional) is called after every epoch. Buffers are
/// allocated in the first epoch and reused after.
///
/// With `distribution`, each rank passes its tile (logits of its owned rows; labels and splits
/// in local ids): losses and accuracies are normalized by the global counts, the weight
/// gradients are summed over ranks in one fused allreduce per step, and every rank returns the
/// same metrics. Collective.
TrainResult train_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                  Input<float> features, const NodeLabels& labels,
                                  const TrainConfig& config,
                                  const std::function<void(const EpochStats&)>& on_epoch = {},
                                  const Distribution* distribution = nullptr);

}  // namespace tessera::gnn
