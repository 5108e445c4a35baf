// The full-batch training loop for node classification.
#include "tessera/gnn/trainer.hpp"

#include "tessera/comm/gradient_allreduce.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/engine/optimizer.hpp"

#include <algorithm>
#include <optional>
#include <utility>

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

SplitCounts split_counts(const NodeLabels& labels, comm::Communicator* comm) {
  std::vector<std::int64_t> counts{static_cast<std::int64_t>(labels.train.size()),
                                   static_cast<std::int64_t>(labels.val.size()),
                                   static_cast<std::int64_t>(labels.test.size())};
  if (comm != nullptr) comm->allreduce_sum(std::span<std::int64_t>(counts));
  if (counts[0] == 0) throw InvalidArgument("the training split is empty");
  return {static_cast<double>(counts[0]), static_cast<double>(counts[1]),
          static_cast<double>(counts[2])};
}

} // namespace

TrainResult train_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                  Input<float> features, const NodeLabels& host_labels,
                                  const TrainConfig& config,
                                  const std::function<void(const EpochStats&)>& on_epoch,
                                  const Distribution* distribution) {
  if (config.epochs < 0 || config.eval_every < 1) {
    throw InvalidArgument("epochs must be >= 0 and eval_every >= 1");
  }
  comm::Communicator* comm = distribution != nullptr ? distribution->comm : nullptr;
  const RowIds row_ids = distribution != nullptr ? distribution->rows : RowIds{};
  const auto halo_totals = [&]() -> comm::HaloStats {
    if (distribution == nullptr || !distribution->halo_totals) return {};
    return distribution->halo_totals();
  };
  const Backend& be = *backend;
  Adam<float> optimizer(backend, model.parameters(), config.adam);
  std::optional<comm::GradientAllreduce> gradient_sum;
  if (comm != nullptr && comm->size() > 1) {
    std::vector<Dense*> gradients;
    for (Parameter<float>* p : model.parameters()) gradients.push_back(&p->grad);
    gradient_sum.emplace(*comm, backend, std::move(gradients));
  }
  Dense d_logits; // [n, classes], allocated on the first epoch
  const SplitCounts counts = split_counts(host_labels, comm);
  const LabelsOnBackend labels_on_backend(backend, host_labels);
  const NodeLabels& labels = labels_on_backend.view();

  TrainResult result;
  result.history.reserve(static_cast<std::size_t>(config.epochs));
  std::vector<double> step_ms;
  step_ms.reserve(static_cast<std::size_t>(config.epochs));
  double best_val_accuracy = -1.0;

  for (int epoch = 1; epoch <= config.epochs; ++epoch) {
    EpochStats stats;
    stats.epoch = epoch;
    const Step train_step{config.seed, static_cast<std::uint32_t>(epoch), true, row_ids};
    const comm::HaloStats halo_before = halo_totals();
    double allreduce_s = 0.0;

    Stopwatch step_clock, phase;
    const ConstDenseView<float> logits = model.forward(train_step, features);
    result.phases.forward += phase.seconds();
    if (epoch == 1) check_labels(host_labels, logits.rows, comm != nullptr);
    phase.restart();
    if (d_logits.rows() != logits.rows || d_logits.cols() != logits.cols) {
      d_logits = Dense(backend, logits.rows, logits.cols);
    }
    stats.train_loss = ops::softmax_cross_entropy<float>(be, logits, labels.labels, labels.train,
                                                         counts.train, d_logits.view());
    result.phases.loss += phase.seconds();
    phase.restart();
    model.backward(d_logits.cview());
    result.phases.backward += phase.seconds();
    phase.restart();
    if (gradient_sum) {
      const Stopwatch reduce_clock;
      gradient_sum->run();
      comm->allreduce_sum(std::span<double>(&stats.train_loss, 1));
      allreduce_s = reduce_clock.seconds();
    }
    optimizer.step();
    result.phases.optimizer += phase.seconds();
    stats.step_ms = step_clock.seconds() * 1e3;
    const comm::HaloStats halo_after = halo_totals();
    stats.comm_ms = 1e3 * (allreduce_s + halo_after.start_seconds - halo_before.start_seconds);
    stats.wait_ms = 1e3 * (halo_after.wait_seconds - halo_before.wait_seconds);
    stats.halo_bytes_sent = halo_after.bytes_sent - halo_before.bytes_sent;
    stats.halo_bytes_received = halo_after.bytes_received - halo_before.bytes_received;
    step_ms.push_back(stats.step_ms);

    if (epoch % config.eval_every == 0 || epoch == config.epochs) {
      phase.restart();
      const Step eval_step{config.seed, static_cast<std::uint32_t>(epoch), false, row_ids};
      const ConstDenseView<float> eval_logits = model.forward(eval_step, features);
      stats.evaluated = true;
      stats.train = measure(be, eval_logits, labels, labels.train, counts.train);
      stats.val = measure(be, eval_logits, labels, labels.val, counts.val);
      stats.test = measure(be, eval_logits, labels, labels.test, counts.test);
      if (comm != nullptr) {
        double shares[] = {stats.train.loss,   stats.train.accuracy, stats.val.loss,
                           stats.val.accuracy, stats.test.loss,      stats.test.accuracy};
        comm->allreduce_sum(std::span<double>(shares));
        stats.train = {shares[0], shares[1]};
        stats.val = {shares[2], shares[3]};
        stats.test = {shares[4], shares[5]};
      }
      result.phases.evaluate += phase.seconds();
      if (stats.val.accuracy > best_val_accuracy) {
        best_val_accuracy = stats.val.accuracy;
        result.best_epoch = epoch;
        result.best_val = stats.val;
        result.test_at_best_val = stats.test;
      }
      result.final_test = stats.test;
    }
    result.history.push_back(stats);
    if (on_epoch) on_epoch(stats);
  }
  result.median_step_ms = median(std::move(step_ms));
  return result;
}

} // namespace tessera::gnn
