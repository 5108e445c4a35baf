// Full-batch node-classification training: epochs of forward, masked loss, backward and Adam,
// with evaluation every k epochs and best-validation tracking.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/optimizer.hpp"
#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/metrics.hpp"
#include "tessera/ops/ops.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessera::gnn {

/// How long and how to train.
struct TrainConfig {
  int epochs = 200;  ///< full-batch steps
  AdamConfig adam{}; ///< learning rate, weight decay, Adam or AdamW
  /// Evaluate (dropout off) every this many epochs and after the last.
  int eval_every = 1;
  std::uint64_t seed = 0; ///< keys every dropout mask (and, in run_train_job, the weights)
  /// What selects the best validation epoch; RocAuc (binary tasks) also measures ROC-AUC.
  Metric metric = Metric::Accuracy;
};

/// The labelled rows of each split and the labels, all local row ids, in host memory (the
/// trainer copies them to a device backend itself).
struct NodeLabels {
  std::span<const std::int32_t> labels;           ///< [n] class of each row (logits' rows)
  std::span<const std::int32_t> train, val, test; ///< rows of each split
};

/// Loss and accuracies of one split at one point in training.
/// Ranking metrics of a link-prediction split (measure_links): its positive pairs' scores
/// against its negative pairs'.
struct LinkMetrics {
  double average_precision = 0.0;
  double mrr = 0.0; ///< mean reciprocal rank of each positive among all the negatives
  std::vector<std::pair<int, double>> hits; ///< (K, Hits@K)
};

struct SplitMetrics {
  double loss = 0.0;     ///< mean softmax cross-entropy over the split
  double accuracy = 0.0; ///< fraction of the split classified correctly, in [0, 1]
  /// Area under the ROC curve of class 1's score, measured with Metric::RocAuc; nullopt
  /// otherwise, or when the split lacks one of the two classes.
  std::optional<double> roc_auc;
  /// A link-prediction split's other metrics (roc_auc holds its ROC-AUC); nullopt for nodes.
  std::optional<LinkMetrics> link;

  /// The value `metric` reads (-1 for a ROC-AUC not measured: below every measured one).
  double score(Metric metric) const noexcept {
    return metric == Metric::RocAuc ? roc_auc.value_or(-1.0) : accuracy;
  }
};

/// What one epoch did (the same on every rank of a distributed run, except the times and
/// bytes, which are this rank's).
struct EpochStats {
  int epoch = 0;           ///< from 1
  double train_loss = 0.0; ///< training-mode loss (dropout on) of this epoch's steps
  /// Forward + loss + backward + optimizer of a step: the epoch's one full-graph step, or the
  /// median of its mini-batch steps.
  double step_ms = 0.0;
  int steps = 1;         ///< optimizer steps this epoch (mini-batches; 1 full-graph)
  double epoch_ms = 0.0; ///< all of its training steps, without evaluation
  /// Of step_ms on this rank: posting messages and the part of the gradient/loss allreduce that
  /// backward did not hide (comm), and blocked waiting for halo rows (wait). Compute is the
  /// rest. Zero on one process.
  double comm_ms = 0.0, wait_ms = 0.0;
  /// Halo bytes this rank sent and received during the step (not the evaluation).
  std::int64_t halo_bytes_sent = 0, halo_bytes_received = 0;
  /// What the chunk manager moved this epoch (training and evaluation), when the model runs
  /// under one (Sequential::use_memory); zero otherwise.
  OffloadStats offload;
  /// Sampled training (zero in full-graph training), this rank's for the epoch: edges of the
  /// blocks sampled, input feature rows gathered, those another rank owns found in the
  /// hot-feature cache and fetched, bytes received for sampling and features, and the median
  /// time a step waited for its batch (from its start until the blocks and input rows were
  /// ready: sampling inline counts as waiting).
  std::int64_t sampled_edges = 0, input_rows = 0, cache_hits = 0, fetched_rows = 0;
  std::int64_t batch_bytes = 0;
  /// The seeds this rank trained on this epoch (over ranks each rank's batch is its share of a
  /// step's, by the training nodes it owns).
  std::int64_t seeds = 0;
  double batch_wait_ms = 0.0;
  /// Of a step's wait, on average: the sampler's exchanges with the other ranks (their waits
  /// for each other included; zero in one process).
  double batch_exchange_ms = 0.0;
  /// Per module of the model: milliseconds of this step's forward and backward in it.
  std::vector<double> module_ms;
  bool evaluated = false;        ///< whether the metrics below were measured this epoch
  SplitMetrics train, val, test; ///< eval-mode metrics when evaluated
};

/// Seconds spent in each phase over the whole run.
struct PhaseTimes {
  double forward = 0.0, loss = 0.0, backward = 0.0, optimizer = 0.0, evaluate = 0.0;
};

/// One parameter of a model as a checkpoint holds it, in host memory: its values and Adam's
/// moments, each [rows * cols].
struct ParameterState {
  std::string name; ///< the parameter's name ("gcn0.weight"), checked on restore
  std::int64_t rows = 0, cols = 0;
  std::vector<float> value, adam_m, adam_v;
};

/// Where training stands after an epoch: everything the next epochs depend on. Dropout masks
/// and weight init are functions of (seed, epoch, ...), so there is no generator state: a run
/// restored from this continues exactly as the run that made it.
struct TrainState {
  int epoch = 0;                          ///< epochs completed
  std::vector<ParameterState> parameters; ///< in model order
  std::int64_t adam_steps = 0;            ///< Adam's bias-correction count
  int best_epoch = 0;                     ///< 0: no evaluation yet
  SplitMetrics best_val, test_at_best_val, final_test;
};

/// Which evaluated epoch a run reports: the one of best validation score (the earliest on ties),
/// or, for data without a validation split, the last one evaluated (an empty split scores 0
/// every epoch, which would otherwise select the first).
class EpochSelection {
public:
  /// `best_so_far` continues a resumed run: the score of its selected epoch (-1: none yet).
  EpochSelection(Metric metric, bool has_validation, double best_so_far = -1.0)
      : metric_(metric), has_validation_(has_validation), best_(best_so_far) {}

  /// Takes `epoch` with these metrics into `result` (best_epoch, best_val, test_at_best_val)
  /// when it is better than the selected one, or, without validation, later.
  template <typename Result>
  void consider(int epoch, const SplitMetrics& val, const SplitMetrics& test, Result& result) {
    if (has_validation_ && !(val.score(metric_) > best_)) return;
    best_ = val.score(metric_);
    result.best_epoch = epoch;
    result.best_val = val;
    result.test_at_best_val = test;
  }

private:
  Metric metric_;
  bool has_validation_;
  double best_;
};

/// A whole run: every epoch and the metrics that matter at its end.
struct TrainResult {
  std::vector<EpochStats> history; ///< one entry per epoch, in order
  /// Epoch of the best validation TrainConfig::metric (earliest on ties); without a validation
  /// split (val_rows 0), the last epoch evaluated.
  int best_epoch = 0;
  SplitMetrics best_val;         ///< validation metrics at best_epoch
  SplitMetrics test_at_best_val; ///< test metrics at best_epoch (what papers report)
  SplitMetrics final_test;       ///< test metrics after the last epoch
  PhaseTimes phases;
  double median_step_ms = 0.0; ///< median of EpochStats::step_ms
  /// Rows of each split over all ranks (a split without rows has no metrics to report).
  std::int64_t train_rows = 0, val_rows = 0, test_rows = 0;
  /// Set when TrainControl::pause_after ended the run early: the state to resume from.
  std::optional<TrainState> paused;
};

/// How a run may be continued, saved and stopped (all optional).
struct TrainControl {
  /// Continue after resume->epoch with its weights, Adam state and best validation (a state of
  /// this model's parameters, from any rank count: weights are replicated).
  const TrainState* resume = nullptr;
  /// on_checkpoint receives the state every this many epochs, after the last epoch and when a
  /// stop is asked (0: only then). Called on every rank with the same state.
  int checkpoint_every = 0;
  std::function<void(const TrainState&)> on_checkpoint;
  /// Polled after every epoch: a nonzero value (a signal number) asks to stop. When any rank
  /// asks, every rank finishes the epoch, checkpoints and throws TrainingStopped.
  std::function<int()> stop_requested;
  /// Called after every epoch but the last, after the checkpoint (collective: on every rank
  /// with that rank's stats, and it must answer the same everywhere): true ends training there,
  /// and TrainResult::paused holds the state to resume from (on another tiling, say).
  std::function<bool(const EpochStats&)> pause_after;
};

/// Thrown by every rank of a run at the same epoch when training cannot or should not go on:
/// a stop was asked (signal() is its number) or the loss or a metric is not finite (signal()
/// is 0). Every rank throws it, so the job may end without aborting.
class TrainingStopped : public Error {
public:
  TrainingStopped(const std::string& message, int epoch, int signal)
      : Error(message), epoch_(epoch), signal_(signal) {}
  /// The last epoch that completed (its checkpoint, if any, is written) or that diverged.
  int epoch() const noexcept { return epoch_; }
  int signal() const noexcept { return signal_; }

private:
  int epoch_ = 0;
  int signal_ = 0;
};

/// What a rank of a job adds to training: the job's ranks, the global id of every local row
/// (dropout masks follow global ids, so any tiling draws the same masks), and the time the
/// model's halo exchanges spent (read after each step).
struct Distribution {
  comm::Communicator* comm = nullptr; ///< where gradients and metrics are summed
  RowIds rows;
  /// What the model's halo exchanges have done so far on this rank, summed over layers.
  std::function<comm::HaloStats()> halo_totals;
};

/// What one trainer does in an epoch, for the epoch loop every trainer shares (run_epochs):
/// full-graph training and mini-batch training differ only here.
struct EpochWork {
  int epochs = 0;     ///< the run's last epoch
  int eval_every = 1; ///< evaluate every this many epochs and after the last
  Metric metric = Metric::Accuracy;
  /// Global sizes of the splits (an empty validation split selects the last evaluated epoch).
  std::int64_t train_rows = 0, val_rows = 0, test_rows = 0;
  /// For the message of a diverged evaluation: the learning rate to lower, and why else the
  /// loss may not be finite (e.g. extreme features; may be empty).
  float lr = 0.0f;
  std::string divergence_note;
  /// Runs the epoch's training steps and fills `stats`: train_loss (summed over ranks: the same
  /// on every rank, checked finite with check_finite before the weights step), step_ms,
  /// epoch_ms, steps and what else it measures; adds its time per phase to `phases`.
  std::function<void(int epoch, EpochStats& stats, PhaseTimes& phases)> train;
  /// This rank's shares of the train, val and test metrics in evaluation mode (loss and
  /// accuracy divided by the global split sizes, so the ranks' shares sum to the split's) and,
  /// when `scores` is given (ROC-AUC), each of its rows' binary scores in scores[0..2].
  std::function<void(int epoch, SplitMetrics (&shares)[3], BinaryScores* scores)> evaluate;
  /// With Metric::RocAuc: whether run_epochs hands `evaluate` the scores to fill and measures
  /// each split's ROC-AUC over the ranks (true), or `evaluate` measures the ranking metrics
  /// (roc_auc, link) over all ranks itself, the same on every rank (false: link prediction).
  bool gathers_scores = true;
};

/// Throws TrainingStopped when `value` (the same on every rank) is not finite, naming `what`,
/// the epoch and the learning rate to lower, and `note` when there is one: every rank throws at
/// the same epoch.
void check_finite(double value, const char* what, int epoch, float lr,
                  const std::string& note = {});

/// The epoch loop of every trainer: epochs from the start (or after control.resume), `work.train`
/// each, an evaluation every work.eval_every epochs and after the last (the shares summed over
/// `comm`, ROC-AUC with Metric::RocAuc, every loss checked finite, the epoch selected by
/// EpochSelection), the chunk manager's epochs when the model runs under one, the watchdog's
/// epoch times, `on_epoch`, and control's checkpoints, stops and pauses. `optimizer` is the one
/// `work.train` steps (its state goes into checkpoints). Collective over `comm` (nullptr: one
/// process). Checkpoints hold the optimizer's parameters (the model's, and any others it
/// updates, such as a link decoder's), in its order.
TrainResult run_epochs(const EpochWork& work, Sequential<float>& model, Adam<float>& optimizer,
                       comm::Communicator* comm,
                       const std::function<void(const EpochStats&)>& on_epoch = {},
                       const TrainControl& control = {});

/// Trains `model` on `features` for config.epochs full-batch steps on `backend`, where the model
/// and the features live. `on_epoch` (optional) is called after every epoch. Buffers are
/// allocated in the first epoch and reused after. A model that runs under a ChunkManager
/// (Sequential::use_memory, `backend` its allocator) trains under its budget, one epoch per
/// ChunkManager epoch.
///
/// With `distribution`, each rank passes its tile (logits of its owned rows; labels and splits
/// in local ids): losses and accuracies are normalized by the global counts, the weight
/// gradients are summed over ranks by DataParallel (each bucket's allreduce starts while the
/// rest of backward runs), and every rank returns the same metrics. Collective.
///
/// With config.metric RocAuc (a binary task: two outputs) every evaluation also measures each
/// split's ROC-AUC over all ranks (every rank's scores reach every rank), and the best epoch is
/// the one of the highest validation ROC-AUC; InvalidArgument for a model of other than two
/// outputs.
///
/// `control` resumes from a state, hands out checkpoints and polls for a stop (see
/// TrainControl). Throws TrainingStopped (on every rank, at the same epoch) when a stop is
/// asked, or when the training loss or an evaluation metric is not finite — the message names
/// the epoch and suggests a lower learning rate; InvalidArgument for a resume state at or past
/// config.epochs, DimensionMismatch for one of another model.
TrainResult train_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                  Input<float> features, const NodeLabels& labels,
                                  const TrainConfig& config,
                                  const std::function<void(const EpochStats&)>& on_epoch = {},
                                  const Distribution* distribution = nullptr,
                                  const TrainControl& control = {});

/// The model's output in an evaluation step (dropout off: what every evaluation scores), the
/// weights as they are. layer 0: the logits of the owned rows, [n_owned, classes]; layer k >= 1:
/// the representation of the model's k-th marked layer (Sequential::layer_ends: hidden layer k,
/// or residual block k), its first `owned_rows` rows (the owned rows come first). Valid until the
/// model's next forward or backward. With `distribution`, collective (the layers exchange their
/// halos). Throws InvalidArgument for a layer the model does not mark, naming how many it has.
ConstDenseView<float> infer(Sequential<float>& model, Input<float> features, int layer,
                            std::int64_t owned_rows, const Distribution* distribution = nullptr);

/// The metrics of the train, validation and test splits in one evaluation step with the weights
/// as they are — what training's evaluation measures (losses and accuracies over all ranks, and
/// each split's ROC-AUC with Metric::RocAuc) — for labels in `labels` (an empty split scores 0).
/// Collective with `distribution`.
std::array<SplitMetrics, 3> evaluate_node_classifier(const BackendPtr& backend,
                                                     Sequential<float>& model,
                                                     Input<float> features,
                                                     const NodeLabels& labels, Metric metric,
                                                     const Distribution* distribution = nullptr);

/// Puts the weights of `parameters` (a checkpoint's, in model order) into `model`, after checking
/// that they are this model's: the same count, and every name and shape (DimensionMismatch
/// naming the first that differs, before any weight changes).
void load_weights(Sequential<float>& model, const std::vector<ParameterState>& parameters);
/// load_weights for a list of parameters (a model's and a decoder's, in the order a checkpoint
/// of their optimizer holds them).
void load_weights(const std::vector<Parameter<float>*>& targets,
                  const std::vector<ParameterState>& parameters);

} // namespace tessera::gnn
