// The full-batch training loop for node classification.
#include "tessera/gnn/trainer.hpp"

#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/engine/optimizer.hpp"

namespace tessera::gnn {

namespace {

void check_labels(const NodeLabels& labels, std::int64_t rows) {
  if (static_cast<std::int64_t>(labels.labels.size()) != rows) {
    throw DimensionMismatch("labels have " + std::to_string(labels.labels.size()) +
                            " entries for " + std::to_string(rows) + " nodes");
  }
  if (labels.train.empty()) throw InvalidArgument("the training split is empty");
  for (auto split : {labels.train, labels.val, labels.test}) {
    for (const std::int32_t r : split) {
      if (r < 0 || r >= rows) {
        throw InvalidArgument("split names node " + std::to_string(r) + " outside [0, " +
                              std::to_string(rows) + ")");
      }
    }
  }
}

SplitMetrics measure(const Backend& backend, ConstDenseView<float> logits,
                     const NodeLabels& labels, std::span<const std::int32_t> rows) {
  if (rows.empty()) return {};
  const auto count = static_cast<double>(rows.size());
  SplitMetrics m;
  m.loss = ops::softmax_cross_entropy<float>(backend, logits, labels.labels, rows, count, {});
  m.accuracy =
      static_cast<double>(ops::count_correct<float>(backend, logits, labels.labels, rows)) / count;
  return m;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  return values[mid];
}

}  // namespace

TrainResult train_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                  Input<float> features, const NodeLabels& labels,
                                  const TrainConfig& config,
                                  const std::function<void(const EpochStats&)>& on_epoch) {
  check_labels(labels, features.rows());
  if (config.epochs < 0 || config.eval_every < 1) {
    throw InvalidArgument("epochs must be >= 0 and eval_every >= 1");
  }
  const Backend& be = *backend;
  Adam<float> optimizer(backend, model.parameters(), config.adam);
  Dense d_logits;  // [n, classes], allocated on the first epoch
  const auto train_count = static_cast<double>(labels.train.size());

  TrainResult result;
  result.history.reserve(static_cast<std::size_t>(config.epochs));
  std::vector<double> step_ms;
  step_ms.reserve(static_cast<std::size_t>(config.epochs));
  double best_val_accuracy = -1.0;

  for (int epoch = 1; epoch <= config.epochs; ++epoch) {
    EpochStats stats;
    stats.epoch = epoch;
    const Step train_step{config.seed, static_cast<std::uint32_t>(epoch), true, {}};

    Stopwatch step_clock, phase;
    const ConstDenseView<float> logits = model.forward(train_step, features);
    result.phases.forward += phase.seconds();
    phase.restart();
    if (d_logits.rows() != logits.rows || d_logits.cols() != logits.cols) {
      d_logits = Dense(backend, logits.rows, logits.cols);
    }
    stats.train_loss = ops::softmax_cross_entropy<float>(be, logits, labels.labels, labels.train,
                                                         train_count, d_logits.view());
    result.phases.loss += phase.seconds();
    phase.restart();
    model.backward(d_logits.cview());
    result.phases.backward += phase.seconds();
    phase.restart();
    optimizer.step();
    result.phases.optimizer += phase.seconds();
    stats.step_ms = step_clock.seconds() * 1e3;
    step_ms.push_back(stats.step_ms);

    if (epoch % config.eval_every == 0 || epoch == config.epochs) {
      phase.restart();
      const Step eval_step{config.seed, static_cast<std::uint32_t>(epoch), false, {}};
      const ConstDenseView<float> eval_logits = model.forward(eval_step, features);
      stats.evaluated = true;
      stats.train = measure(be, eval_logits, labels, labels.train);
      stats.val = measure(be, eval_logits, labels, labels.val);
      stats.test = measure(be, eval_logits, labels, labels.test);
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

}  // namespace tessera::gnn
