// run_train_job: dataset → Â → GCN → training → report.
#include "tessera/gnn/train_job.hpp"

#include "src/gnn/job_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/graph.hpp"

#include <fmt/core.h>

namespace tessera::gnn {

TrainOutcome run_train_job(const TrainJob& job, const std::function<void(const std::string&)>& log,
                           const std::function<void(const EpochStats&)>& on_epoch) {
  if (job.comm != nullptr && (job.comm->size() > 1 || !job.partition_dir.empty())) {
    return detail::run_distributed_job(job, log, on_epoch);
  }
  const auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  TrainOutcome out;
  RunReport& report = out.report;
  const BackendPtr host = make_cpu_backend(job.threads);
  const BackendPtr backend =
      select_backend(job.device, job.comm ? job.comm->local_rank() : 0, job.threads);
  say("backend: " + backend->describe());
  if (const std::string warning = blas_performance_warning(); !warning.empty()) {
    say("warning: " + warning);
  }

  Stopwatch clock;
  datasets::Dataset data = datasets::load_dataset(host, job.dataset, job.load);
  detail::check_trainable(data);
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
  const std::int64_t adjacency_nnz = data.adjacency.nnz();
  // The model reads its matrices and the features in the backend's memory.
  ModelGraph graph(backend, std::move(data.adjacency), data.features.cols(), data.num_classes);
  std::optional<GcnConfig> gcn;
  Sequential<float> model = detail::build_model(job, graph, gcn);
  const double build_s = clock.seconds();
  const bool on_host = backend->kind() == DeviceKind::Cpu;
  const datasets::Features features =
      on_host ? datasets::Features{} : detail::features_on(data.features, backend);
  say(fmt::format("model {}: {} parameters (built in {:.2f} s)\n{}", job.model_name,
                  model.num_parameters(), build_s, model.summary()));

  const NodeLabels labels{data.labels, data.train_idx, data.val_idx, data.test_idx};
  out.result = train_node_classifier(backend, model,
                                     detail::feature_input(on_host ? data.features : features),
                                     labels, job.train, on_epoch);

  detail::report_config(report, job, gcn ? &*gcn : nullptr);
  report.set("backend", backend->describe());
  report.set("threads", backend->num_threads());
  report.set("blas_core", blas_core_name());
  report.set("dataset.name", data.name);
  report.set("dataset.nodes", data.num_nodes);
  // Entries of Â (self-loops included) when the model uses it: what PyTorch's GCN multiplies.
  report.set("dataset.edges", gcn ? graph.matrix(AggregationKind::Gcn).nnz() : adjacency_nnz);
  report.set("dataset.features", data.features.cols());
  report.set("dataset.sparse_features", data.features.is_sparse());
  report.set("dataset.classes", static_cast<std::int64_t>(data.num_classes));
  report.set("timing.load_s", load_s);
  report.set("timing.build_s", build_s);
  detail::report_result(report, out.result);
  const std::size_t feature_bytes =
      data.features.is_sparse() ? data.features.sparse->bytes() : data.features.dense->bytes();
  report.set("memory.graph_bytes", static_cast<std::int64_t>(graph.bytes()));
  report.set("memory.feature_bytes", static_cast<std::int64_t>(feature_bytes));
  report.set("memory.model_bytes", static_cast<std::int64_t>(model.bytes()));
  report.set("memory.peak_rss_bytes", peak_rss_bytes());
  return out;
}

} // namespace tessera::gnn
