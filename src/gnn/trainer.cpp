// The full-batch training loop for node classification.
#include "tessera/gnn/trainer.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/engine/data_parallel.hpp"
#include "tessera/engine/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fmt/core.h>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::gnn {

namespace {

void check_labels(const NodeLabels& labels, std::int64_t rows, bool distributed) {
  if (static_cast<std::int64_t>(labels.labels.size()) != rows) {
    throw DimensionMismatch("labels have " + std::to_string(labels.labels.size()) +
                            " entries for " + std::to_string(rows) + " nodes");
  }
  // A rank of a distributed run may own no training node; the global split is checked apart.
  if (labels.train.empty() && !distributed) throw InvalidArgument("the training split is empty");
  for (auto split : {labels.train, labels.val, labels.test}) {
    for (const std::int32_t r : split) {
      if (r < 0 || r >= rows) {
        throw InvalidArgument("split names node " + std::to_string(r) + " outside [0, " +
                              std::to_string(rows) + ")");
      }
    }
  }
}

/// This rank's share of a split's metrics: loss and accuracy divided by the global count, so
/// the shares of all ranks sum to the split's metrics.
SplitMetrics measure(const Backend& backend, ConstDenseView<float> logits, const NodeLabels& labels,
                     std::span<const std::int32_t> rows, double count) {
  if (rows.empty()) return {};
  SplitMetrics m;
  m.loss = ops::softmax_cross_entropy<float>(backend, logits, labels.labels, rows, count, {});
  m.accuracy =
      static_cast<double>(ops::count_correct<float>(backend, logits, labels.labels, rows)) / count;
  return m;
}

/// Global sizes of the three splits.
struct SplitCounts {
  double train = 0.0, val = 0.0, test = 0.0;
};

/// The labels and splits where the backend's kernels read them: the caller's host arrays on the
/// CPU, device copies otherwise.
class LabelsOnBackend {
public:
  LabelsOnBackend(const BackendPtr& backend, const NodeLabels& host) : view_(host) {
    if (backend->kind() == DeviceKind::Cpu) return;
    const auto upload = [&](std::span<const std::int32_t> values, Buffer<std::int32_t>& buffer) {
      buffer = Buffer<std::int32_t>(backend, static_cast<std::int64_t>(values.size()));
      backend->copy_from_host(buffer.data(), values.data(), values.size_bytes());
      return std::span<const std::int32_t>(buffer.data(), values.size());
    };
    view_ = {upload(host.labels, labels_), upload(host.train, train_), upload(host.val, val_),
             upload(host.test, test_)};
  }
  const NodeLabels& view() const noexcept { return view_; }

private:
  NodeLabels view_;
  Buffer<std::int32_t> labels_, train_, val_, test_;
};

/// The splits' sizes over all ranks. Collective over `comm` (nullptr: one process).
SplitCounts global_counts(const NodeLabels& labels, comm::Communicator* comm) {
  std::vector<std::int64_t> counts{static_cast<std::int64_t>(labels.train.size()),
                                   static_cast<std::int64_t>(labels.val.size()),
                                   static_cast<std::int64_t>(labels.test.size())};
  if (comm != nullptr) comm->allreduce_sum(std::span<std::int64_t>(counts));
  return {static_cast<double>(counts[0]), static_cast<double>(counts[1]),
          static_cast<double>(counts[2])};
}

/// global_counts of a run that trains: an empty training split is refused.
SplitCounts split_counts(const NodeLabels& labels, comm::Communicator* comm) {
  const SplitCounts counts = global_counts(labels, comm);
  if (counts.train == 0) throw InvalidArgument("the training split is empty");
  return counts;
}

/// This rank's shares of an evaluation's metrics (`shares`, and each split's binary scores in
/// `scores` with ROC-AUC) summed over the ranks: the metrics, the same on every rank.
/// Collective over `comm` (nullptr: one process).
void sum_shares(SplitMetrics (&shares)[3], BinaryScores* scores, comm::Communicator* comm) {
  if (comm != nullptr) {
    double sums[] = {shares[0].loss,     shares[0].accuracy, shares[1].loss,
                     shares[1].accuracy, shares[2].loss,     shares[2].accuracy};
    comm->allreduce_sum(std::span<double>(sums));
    for (int i = 0; i < 3; ++i) { // the ranking metrics, when measured, are over all ranks
      shares[i].loss = sums[2 * i];
      shares[i].accuracy = sums[2 * i + 1];
    }
  }
  if (scores != nullptr) {
    const auto values = roc_auc_over_ranks(std::span<const BinaryScores>(scores, 3), comm);
    for (int i = 0; i < 3; ++i)
      shares[i].roc_auc = values[static_cast<std::size_t>(i)];
  }
}

/// This rank's shares of one evaluation of `logits` (and the binary scores, when `scores`).
void measure_splits(const Backend& be, ConstDenseView<float> logits, const NodeLabels& labels,
                    const NodeLabels& host_labels, const SplitCounts& counts,
                    std::vector<float>& host_logits, SplitMetrics (&shares)[3],
                    BinaryScores* scores) {
  shares[0] = measure(be, logits, labels, labels.train, counts.train);
  shares[1] = measure(be, logits, labels, labels.val, counts.val);
  shares[2] = measure(be, logits, labels, labels.test, counts.test);
  if (scores != nullptr) {
    const ConstDenseView<float> on_host = logits_on_host(be, logits, host_logits);
    scores[0].append(on_host, host_labels.labels, host_labels.train);
    scores[1].append(on_host, host_labels.labels, host_labels.val);
    scores[2].append(on_host, host_labels.labels, host_labels.test);
  }
}

/// "SIGTERM" and the like.
std::string signal_name(int signal) {
  switch (signal) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGUSR1:
    return "SIGUSR1";
  default:
    return "signal " + std::to_string(signal);
  }
}

/// The model's parameters and Adam's state in host memory, after `epoch` epochs.
TrainState save_state(int epoch, const Adam<float>& optimizer, const TrainResult& result) {
  TrainState state;
  state.epoch = epoch;
  const AdamState<float> adam = optimizer.state();
  state.adam_steps = adam.steps;
  const std::vector<Parameter<float>*>& parameters = optimizer.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter<float>& p = *parameters[i];
    ParameterState saved{p.name, p.value.rows(), p.value.cols(), {}, adam.m[i], adam.v[i]};
    saved.value.resize(static_cast<std::size_t>(p.value.size()));
    p.value.backend()->copy_to_host(saved.value.data(), p.value.data(),
                                    saved.value.size() * sizeof(float));
    state.parameters.push_back(std::move(saved));
  }
  state.best_epoch = result.best_epoch;
  state.best_val = result.best_val;
  state.test_at_best_val = result.test_at_best_val;
  state.final_test = result.final_test;
  return state;
}

/// Throws DimensionMismatch unless `saved` are `parameters`: the same count, and every name and
/// shape.
void check_weights(const std::vector<Parameter<float>*>& parameters,
                   const std::vector<ParameterState>& saved_parameters) {
  if (saved_parameters.size() != parameters.size()) {
    throw DimensionMismatch("the saved state holds " + std::to_string(saved_parameters.size()) +
                            " parameters, the model has " + std::to_string(parameters.size()));
  }
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter<float>& p = *parameters[i];
    const ParameterState& saved = saved_parameters[i];
    const auto n = static_cast<std::size_t>(p.value.size());
    if (saved.name != p.name || saved.rows != p.value.rows() || saved.cols != p.value.cols() ||
        saved.value.size() != n) {
      throw DimensionMismatch("parameter " + std::to_string(i) + " of the saved state is '" +
                              saved.name + "' [" + std::to_string(saved.rows) + ", " +
                              std::to_string(saved.cols) + "], the model's is '" + p.name + "' [" +
                              std::to_string(p.value.rows()) + ", " +
                              std::to_string(p.value.cols()) + "]");
    }
  }
}

/// Puts `state`'s weights into the model and its moments into the optimizer, after checking
/// that it is a state of this model (every name and shape) and of a run that has epochs left.
void restore_state(const TrainState& state, int epochs, Adam<float>& optimizer,
                   TrainResult& result) {
  if (state.epoch < 0 || state.epoch >= epochs) {
    throw InvalidArgument("the state to resume is after epoch " + std::to_string(state.epoch) +
                          ", but training has " + std::to_string(epochs) +
                          " epochs: nothing is left to train (raise the epoch count)");
  }
  check_weights(optimizer.parameters(), state.parameters);
  AdamState<float> adam;
  adam.steps = state.adam_steps;
  for (const ParameterState& saved : state.parameters) {
    adam.m.push_back(saved.adam_m);
    adam.v.push_back(saved.adam_v);
  }
  optimizer.load_state(adam); // checks the moments' sizes before the weights change
  load_weights(optimizer.parameters(), state.parameters);
  result.best_epoch = state.best_epoch;
  result.best_val = state.best_val;
  result.test_at_best_val = state.test_at_best_val;
  result.final_test = state.final_test;
}

} // namespace

void check_finite(double value, const char* what, int epoch, float lr, const std::string& note) {
  if (std::isfinite(value)) return;
  throw TrainingStopped(fmt::format("the {} is {} at epoch {}: training diverged; try a lower "
                                    "learning rate (now {:g}){}",
                                    what,
                                    std::isnan(value) ? "nan"
                                    : value > 0       ? "inf"
                                                      : "-inf",
                                    epoch, lr, note.empty() ? "" : "; but " + note),
                        epoch, 0);
}

TrainResult run_epochs(const EpochWork& work, Sequential<float>& model, Adam<float>& optimizer,
                       comm::Communicator* comm,
                       const std::function<void(const EpochStats&)>& on_epoch,
                       const TrainControl& control) {
  if (work.epochs < 0 || work.eval_every < 1 || control.checkpoint_every < 0) {
    throw InvalidArgument(fmt::format("epochs must be >= 0, eval_every >= 1 and checkpoint_every "
                                      ">= 0, got {}, {} and {}",
                                      work.epochs, work.eval_every, control.checkpoint_every));
  }
  TrainResult result;
  result.train_rows = work.train_rows;
  result.val_rows = work.val_rows;
  result.test_rows = work.test_rows;
  if (control.resume != nullptr) {
    restore_state(*control.resume, work.epochs, optimizer, result);
  }
  const int first_epoch = control.resume != nullptr ? control.resume->epoch + 1 : 1;
  result.history.reserve(static_cast<std::size_t>(std::max(work.epochs - first_epoch + 1, 0)));
  std::vector<double> step_ms;
  EpochSelection selection(work.metric, work.val_rows > 0,
                           result.best_epoch > 0 ? result.best_val.score(work.metric) : -1.0);
  const bool auc = work.metric == Metric::RocAuc && work.gathers_scores;
  // Under a memory budget, an epoch is the unit whose access order repeats (the trace the
  // eviction policy and the prefetcher read).
  ChunkManager* memory = model.memory();
  for (int epoch = first_epoch; epoch <= work.epochs; ++epoch) {
    if (memory != nullptr) memory->begin_epoch();
    EpochStats stats;
    stats.epoch = epoch;
    work.train(epoch, stats, result.phases);
    step_ms.push_back(stats.step_ms);
    if (comm != nullptr) comm->peer_watch().epoch_ended(stats.epoch_ms / 1e3);

    if (epoch % work.eval_every == 0 || epoch == work.epochs) {
      if (comm != nullptr) comm->peer_watch().set_step(fmt::format("epoch {} (evaluation)", epoch));
      const Stopwatch clock;
      SplitMetrics shares[3];
      BinaryScores scores[3];
      work.evaluate(epoch, shares, auc ? scores : nullptr);
      sum_shares(shares, auc ? scores : nullptr, comm);
      stats.evaluated = true;
      stats.train = shares[0];
      stats.val = shares[1];
      stats.test = shares[2];
      check_finite(stats.train.loss, "training loss in evaluation", epoch, work.lr,
                   work.divergence_note);
      check_finite(stats.val.loss, "validation loss", epoch, work.lr, work.divergence_note);
      check_finite(stats.test.loss, "test loss", epoch, work.lr, work.divergence_note);
      result.phases.evaluate += clock.seconds();
      selection.consider(epoch, stats.val, stats.test, result);
      result.final_test = stats.test;
    }
    if (memory != nullptr) stats.offload = memory->end_epoch();
    result.history.push_back(stats);
    if (on_epoch) on_epoch(stats);

    // Every rank learns whether any was asked to stop, in one small allreduce, so all stop
    // after the same epoch and write (or skip) the same checkpoint.
    double stop = control.stop_requested ? static_cast<double>(control.stop_requested()) : 0.0;
    if (comm != nullptr && comm->size() > 1 && control.stop_requested) {
      comm->allreduce_max(std::span<double>(&stop, 1));
    }
    const bool due = control.checkpoint_every > 0 && epoch % control.checkpoint_every == 0;
    if (control.on_checkpoint && (due || epoch == work.epochs || stop != 0.0)) {
      control.on_checkpoint(save_state(epoch, optimizer, result));
    }
    if (stop != 0.0) {
      const int signal = static_cast<int>(stop);
      throw TrainingStopped("training stopped by " + signal_name(signal) + " after epoch " +
                                std::to_string(epoch) + " of " + std::to_string(work.epochs),
                            epoch, signal);
    }
    if (epoch < work.epochs && control.pause_after && control.pause_after(stats)) {
      result.paused = save_state(epoch, optimizer, result);
      break;
    }
  }
  result.median_step_ms = median(std::move(step_ms));
  return result;
}

TrainResult train_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                  Input<float> features, const NodeLabels& host_labels,
                                  const TrainConfig& config,
                                  const std::function<void(const EpochStats&)>& on_epoch,
                                  const Distribution* distribution, const TrainControl& control) {
  comm::Communicator* comm = distribution != nullptr ? distribution->comm : nullptr;
  const RowIds row_ids = distribution != nullptr ? distribution->rows : RowIds{};
  const auto halo_totals = [&]() -> comm::HaloStats {
    if (distribution == nullptr || !distribution->halo_totals) return {};
    return distribution->halo_totals();
  };
  const Backend& be = *backend;
  Adam<float> optimizer(backend, model.parameters(), config.adam);
  // Weight gradients are summed over the ranks in buckets while backward still runs.
  std::optional<DataParallel> gradient_sum;
  std::function<void(Parameter<float>&)> on_gradient;
  if (comm != nullptr && comm->size() > 1) {
    gradient_sum.emplace(*comm, backend, model.parameters());
    on_gradient = [&gradient_sum](Parameter<float>& p) { gradient_sum->gradient_ready(p); };
  }
  Dense d_logits; // [n, classes], allocated on the first epoch
  const SplitCounts counts = split_counts(host_labels, comm);
  const LabelsOnBackend labels_on_backend(backend, host_labels);
  const NodeLabels& labels = labels_on_backend.view();
  if (config.metric == Metric::RocAuc) {
    check_roc_auc_splits(host_labels.labels, {host_labels.val, host_labels.test}, comm);
  }
  std::vector<float> host_logits; // the evaluation's logits on the host, for ROC-AUC off the CPU
  ChunkManager* memory = model.memory();
  // Where the job stands, for the watchdog's messages.
  const auto at_step = [&](int epoch, const char* phase) {
    if (comm != nullptr) comm->peer_watch().set_step(fmt::format("epoch {} ({})", epoch, phase));
  };
  bool checked = false; // the labels against the model's first logits

  EpochWork work;
  work.epochs = config.epochs;
  work.eval_every = config.eval_every;
  work.metric = config.metric;
  work.train_rows = static_cast<std::int64_t>(counts.train);
  work.val_rows = static_cast<std::int64_t>(counts.val);
  work.test_rows = static_cast<std::int64_t>(counts.test);
  work.lr = config.adam.lr;
  work.train = [&](int epoch, EpochStats& stats, PhaseTimes& phases) {
    at_step(epoch, "forward");
    const Step train_step{config.seed, static_cast<std::uint32_t>(epoch), true, row_ids};
    const comm::HaloStats halo_before = halo_totals();
    double allreduce_s = 0.0;
    const std::vector<double> module_before = model.module_seconds();
    Stopwatch step_clock, phase;
    const ConstDenseView<float> logits = model.forward(train_step, features);
    phases.forward += phase.seconds();
    if (!checked) {
      check_labels(host_labels, logits.rows, comm != nullptr);
      if (config.metric == Metric::RocAuc && logits.cols != 2) {
        throw InvalidArgument("ROC-AUC is for binary tasks (two classes); this model predicts " +
                              std::to_string(logits.cols) + " classes: use accuracy");
      }
      checked = true;
    }
    phase.restart();
    if (d_logits.rows() != logits.rows || d_logits.cols() != logits.cols) {
      d_logits = Dense(backend, logits.rows, logits.cols);
    }
    {
      Pins pins(memory); // the logits stay on the device until the next forward or backward
      pins.add_dense(d_logits.cview(), Access::Write);
      stats.train_loss = ops::softmax_cross_entropy<float>(be, logits, labels.labels, labels.train,
                                                           counts.train, d_logits.view());
    }
    phases.loss += phase.seconds();
    phase.restart();
    at_step(epoch, "backward and gradient sum");
    model.backward(d_logits.cview(), GradientMode::Overwrite, on_gradient);
    phases.backward += phase.seconds();
    for (std::size_t i = 0; i < module_before.size(); ++i)
      stats.module_ms.push_back(1e3 * (model.module_seconds()[i] - module_before[i]));
    phase.restart();
    if (gradient_sum) {
      const Stopwatch reduce_clock;
      gradient_sum->finish();
      comm->allreduce_sum(std::span<double>(&stats.train_loss, 1));
      allreduce_s = reduce_clock.seconds();
    }
    // Before the update, so the weights a checkpoint of an earlier epoch holds stay finite.
    check_finite(stats.train_loss, "training loss", epoch, config.adam.lr);
    optimizer.step();
    phases.optimizer += phase.seconds();
    stats.step_ms = step_clock.seconds() * 1e3;
    stats.epoch_ms = stats.step_ms;
    const comm::HaloStats halo_after = halo_totals();
    stats.comm_ms = 1e3 * (allreduce_s + halo_after.start_seconds - halo_before.start_seconds);
    stats.wait_ms = 1e3 * (halo_after.wait_seconds - halo_before.wait_seconds);
    stats.halo_bytes_sent = halo_after.bytes_sent - halo_before.bytes_sent;
    stats.halo_bytes_received = halo_after.bytes_received - halo_before.bytes_received;
  };
  work.evaluate = [&](int epoch, SplitMetrics(&shares)[3], BinaryScores* scores) {
    const Step eval_step{config.seed, static_cast<std::uint32_t>(epoch), false, row_ids};
    const ConstDenseView<float> eval_logits = model.forward(eval_step, features);
    measure_splits(be, eval_logits, labels, host_labels, counts, host_logits, shares, scores);
  };
  return run_epochs(work, model, optimizer, comm, on_epoch, control);
}

void load_weights(Sequential<float>& model, const std::vector<ParameterState>& parameters) {
  load_weights(model.parameters(), parameters);
}

void load_weights(const std::vector<Parameter<float>*>& targets,
                  const std::vector<ParameterState>& parameters) {
  check_weights(targets, parameters);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    Parameter<float>& p = *targets[i];
    const std::vector<float>& value = parameters[i].value;
    p.value.backend()->copy_from_host(p.value.data(), value.data(), value.size() * sizeof(float));
  }
}

ConstDenseView<float> infer(Sequential<float>& model, Input<float> features, int layer,
                            std::int64_t owned_rows, const Distribution* distribution) {
  const RowIds row_ids = distribution != nullptr ? distribution->rows : RowIds{};
  const Step step{0, 0, false, row_ids}; // evaluation: no dropout, no mask to key
  const std::vector<std::size_t>& ends = model.layer_ends();
  if (layer < 0 || layer > static_cast<int>(ends.size())) {
    throw InvalidArgument(fmt::format("the model has {} hidden layer(s) whose output is a "
                                      "representation of the rows (1..{}); layer {} is not one",
                                      ends.size(), ends.size(), layer));
  }
  if (layer == 0) return model.forward(step, features);
  const ConstDenseView<float> out =
      model.forward(step, features, ends[static_cast<std::size_t>(layer - 1)]);
  if (out.rows < owned_rows) {
    throw DimensionMismatch(fmt::format("layer {} gives {} rows, fewer than the {} owned rows",
                                        layer, out.rows, owned_rows));
  }
  return {out.data, owned_rows, out.cols};
}

std::array<SplitMetrics, 3> evaluate_node_classifier(const BackendPtr& backend,
                                                     Sequential<float>& model,
                                                     Input<float> features,
                                                     const NodeLabels& host_labels, Metric metric,
                                                     const Distribution* distribution) {
  comm::Communicator* comm = distribution != nullptr ? distribution->comm : nullptr;
  const SplitCounts counts = global_counts(host_labels, comm);
  const LabelsOnBackend labels_on_backend(backend, host_labels);
  const NodeLabels& labels = labels_on_backend.view();
  const ConstDenseView<float> logits = infer(model, features, 0, 0, distribution);
  check_labels(host_labels, logits.rows, true);
  const bool auc = metric == Metric::RocAuc;
  if (auc && logits.cols != 2) {
    throw InvalidArgument("ROC-AUC is for binary tasks (two classes); this model predicts " +
                          std::to_string(logits.cols) + " classes: use accuracy");
  }
  std::vector<float> host_logits;
  SplitMetrics shares[3];
  BinaryScores scores[3];
  measure_splits(*backend, logits, labels, host_labels, counts, host_logits, shares,
                 auc ? scores : nullptr);
  sum_shares(shares, auc ? scores : nullptr, comm);
  return {shares[0], shares[1], shares[2]};
}

} // namespace tessera::gnn
