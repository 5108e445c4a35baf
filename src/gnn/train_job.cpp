// run_train_job: dataset → Â → GCN → training → report.
#include "tessera/gnn/train_job.hpp"

#include <fmt/core.h>

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/graph.hpp"

namespace tessera::gnn {

namespace {

void check_trainable(const datasets::Dataset& d) {
  if (d.features.cols() == 0) {
    throw InvalidArgument("dataset '" + d.name +
                          "' has no node features; it can be partitioned but not trained on");
  }
  if (!d.has_labels() || d.num_classes < 2) {
    throw InvalidArgument("dataset '" + d.name + "' has no class labels to train on");
  }
}

Input<float> feature_input(const datasets::Features& f) {
  if (f.is_sparse()) return Input<float>(f.sparse->view());
  return Input<float>(f.dense->cview());
}

void report_config(RunReport& r, const TrainJob& job, const GcnConfig& model) {
  r.set("config.dataset", job.dataset);
  r.set("config.epochs", job.train.epochs);
  r.set("config.lr", static_cast<double>(job.train.adam.lr));
  r.set("config.weight_decay", static_cast<double>(job.train.adam.weight_decay));
  r.set("config.optimizer", job.train.adam.decoupled ? "adamw" : "adam");
  r.set("config.dropout", static_cast<double>(model.dropout));
  r.set("config.seed", static_cast<std::int64_t>(job.train.seed));
  r.set("config.eval_every", job.train.eval_every);
  r.set("config.normalize_features", job.normalize_features);
  std::vector<double> sizes(model.layer_sizes.begin(), model.layer_sizes.end());
  r.set("config.layer_sizes", sizes);
}

void report_result(RunReport& r, const TrainResult& result) {
  r.set("metrics.test_accuracy", result.test_at_best_val.accuracy);
  r.set("metrics.best_val_accuracy", result.best_val.accuracy);
  r.set("metrics.best_epoch", result.best_epoch);
  r.set("metrics.final_test_accuracy", result.final_test.accuracy);
  r.set("metrics.final_loss", result.history.empty() ? 0.0 : result.history.back().train_loss);
  r.set("timing.epoch_ms_median", result.median_step_ms);
  r.set("timing.phases_s.forward", result.phases.forward);
  r.set("timing.phases_s.loss", result.phases.loss);
  r.set("timing.phases_s.backward", result.phases.backward);
  r.set("timing.phases_s.optimizer", result.phases.optimizer);
  r.set("timing.phases_s.evaluate", result.phases.evaluate);
  for (const EpochStats& s : result.history) {
    r.append("epochs", {{"epoch", s.epoch},
                        {"loss", s.train_loss},
                        {"step_ms", s.step_ms},
                        {"train_accuracy", s.train.accuracy},
                        {"val_accuracy", s.val.accuracy},
                        {"val_loss", s.val.loss},
                        {"test_accuracy", s.test.accuracy}});
  }
}

}  // namespace

TrainOutcome run_train_job(const TrainJob& job, const std::function<void(const std::string&)>& log,
                           const std::function<void(const EpochStats&)>& on_epoch) {
  const auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  TrainOutcome out;
  RunReport& report = out.report;
  const BackendPtr backend = make_cpu_backend(job.threads);
  say("backend: " + backend->describe());
  if (const std::string warning = blas_performance_warning(); !warning.empty()) {
    say("warning: " + warning);
  }

  Stopwatch clock;
  datasets::Dataset data = datasets::load_dataset(backend, job.dataset, job.load);
  check_trainable(data);
  if (!data.has_split()) {
    datasets::make_random_split(data, 0.6, 0.2, job.train.seed);
    say("no published split: using a random 60/20/20 split");
  }
  if (job.normalize_features) datasets::row_normalize_features(data.features);
  const double load_s = clock.seconds();
  say(fmt::format("dataset {}: {} nodes, {} edges, {} features ({}), {} classes, split {}/{}/{} "
                  "({:.2f} s)",
                  data.name, data.num_nodes, data.adjacency.nnz() / 2, data.features.cols(),
                  data.features.is_sparse() ? "sparse" : "dense", data.num_classes,
                  data.train_idx.size(), data.val_idx.size(), data.test_idx.size(), load_s));

  clock.restart();
  const Csr a_hat = graph::gcn_normalize(data.adjacency);
  data.adjacency = Csr();  // Â replaces A; the raw adjacency is not needed for training
  const double normalize_s = clock.seconds();

  GcnConfig model_config = job.model;
  model_config.layer_sizes =
      job.layer_sizes.empty()
          ? layer_sizes(data.features.cols(), job.hidden, job.num_layers, data.num_classes)
          : job.layer_sizes;
  if (model_config.layer_sizes.front() != data.features.cols() ||
      model_config.layer_sizes.back() != data.num_classes) {
    throw InvalidArgument(fmt::format("layer sizes start at {} and end at {}, but the dataset has "
                                      "{} features and {} classes",
                                      model_config.layer_sizes.front(),
                                      model_config.layer_sizes.back(), data.features.cols(),
                                      data.num_classes));
  }
  Sequential<float> model = build_gcn(backend, a_hat, a_hat, model_config, job.train.seed);
  say(fmt::format("model: {} parameters\n{}", model.num_parameters(), model.summary()));

  const NodeLabels labels{data.labels, data.train_idx, data.val_idx, data.test_idx};
  out.result = train_node_classifier(backend, model, feature_input(data.features), labels,
                                     job.train, on_epoch);

  report_config(report, job, model_config);
  report.set("backend", backend->describe());
  report.set("threads", backend->num_threads());
  report.set("blas_core", blas_core_name());
  report.set("dataset.name", data.name);
  report.set("dataset.nodes", data.num_nodes);
  report.set("dataset.edges", a_hat.nnz());
  report.set("dataset.features", data.features.cols());
  report.set("dataset.sparse_features", data.features.is_sparse());
  report.set("dataset.classes", static_cast<std::int64_t>(data.num_classes));
  report.set("timing.load_s", load_s);
  report.set("timing.normalize_s", normalize_s);
  report_result(report, out.result);
  const std::size_t feature_bytes =
      data.features.is_sparse() ? data.features.sparse->bytes() : data.features.dense->bytes();
  report.set("memory.graph_bytes", static_cast<std::int64_t>(a_hat.bytes()));
  report.set("memory.feature_bytes", static_cast<std::int64_t>(feature_bytes));
  report.set("memory.model_bytes", static_cast<std::int64_t>(model.bytes()));
  report.set("memory.peak_rss_bytes", peak_rss_bytes());
  return out;
}

}  // namespace tessera::gnn
