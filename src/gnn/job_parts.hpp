// Pieces shared by the single-process and the distributed training job.
#pragma once

#include "tessera/core/error.hpp"
#include "tessera/gnn/train_job.hpp"

#include <fmt/core.h>
#include <optional>

namespace tessera::gnn::detail {

inline void check_trainable(const datasets::Dataset& d) {
  if (d.features.cols() == 0) {
    throw InvalidArgument("dataset '" + d.name +
                          "' has no node features; it can be partitioned but not trained on");
  }
  if (!d.has_labels() || d.num_classes < 2) {
    throw InvalidArgument("dataset '" + d.name + "' has no class labels to train on");
  }
}

/// A copy of the features in `backend`'s memory.
inline datasets::Features features_on(const datasets::Features& f, const BackendPtr& backend) {
  datasets::Features out;
  if (f.dense) out.dense = to_backend(*f.dense, backend);
  if (f.sparse) out.sparse = to_backend(*f.sparse, backend);
  return out;
}

inline Input<float> feature_input(const datasets::Features& f) {
  if (f.is_sparse()) return Input<float>(f.sparse->view());
  return Input<float>(f.dense->cview());
}

/// gcn: the resolved GCN configuration, or null for a custom model.
inline void report_config(RunReport& r, const TrainJob& job, const GcnConfig* gcn) {
  r.set("config.dataset", job.dataset);
  r.set("config.model", gcn != nullptr ? std::string("GCN") : job.model_name);
  r.set("config.epochs", job.train.epochs);
  r.set("config.lr", static_cast<double>(job.train.adam.lr));
  r.set("config.weight_decay", static_cast<double>(job.train.adam.weight_decay));
  r.set("config.optimizer", job.train.adam.decoupled ? "adamw" : "adam");
  r.set("config.dropout", static_cast<double>(job.model.dropout));
  r.set("config.seed", static_cast<std::int64_t>(job.train.seed));
  r.set("config.eval_every", job.train.eval_every);
  r.set("config.normalize_features", job.normalize_features);
  if (gcn != nullptr) {
    std::vector<double> sizes(gcn->layer_sizes.begin(), gcn->layer_sizes.end());
    r.set("config.layer_sizes", sizes);
  }
}

inline void report_result(RunReport& r, const TrainResult& result) {
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

/// The job's model configuration with layer sizes resolved against the data.
inline GcnConfig model_config(const TrainJob& job, std::int64_t features, std::int64_t classes) {
  GcnConfig config = job.model;
  config.layer_sizes = job.layer_sizes.empty()
                           ? layer_sizes(features, job.hidden, job.num_layers, classes)
                           : job.layer_sizes;
  if (config.layer_sizes.front() != features || config.layer_sizes.back() != classes) {
    throw InvalidArgument(fmt::format("layer sizes start at {} and end at {}, but the dataset has "
                                      "{} features and {} classes",
                                      config.layer_sizes.front(), config.layer_sizes.back(),
                                      features, classes));
  }
  return config;
}

/// The job's model on `graph`: its builder's, or the GCN of its fields (whose resolved
/// configuration `gcn` receives). Releases the graph's adjacency once the model is built.
inline Sequential<float> build_model(const TrainJob& job, ModelGraph& graph,
                                     std::optional<GcnConfig>& gcn) {
  Sequential<float> model;
  if (job.model_builder) {
    model = job.model_builder(graph, job);
  } else {
    gcn = model_config(job, graph.in_features(), graph.num_classes());
    model = build_gcn(graph, *gcn, job.train.seed);
  }
  graph.release_adjacency();
  if (model.modules().empty()) {
    throw InvalidArgument("the builder of model '" + job.model_name + "' returned no layers");
  }
  return model;
}

/// run_train_job over several ranks (distributed_job.cpp).
TrainOutcome run_distributed_job(const TrainJob& job,
                                 const std::function<void(const std::string&)>& log,
                                 const std::function<void(const EpochStats&)>& on_epoch);

} // namespace tessera::gnn::detail
