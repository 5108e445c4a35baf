// The run summary written out: as the JSON report, and as the per-rank table.
#include "tessera/runtime/run_summary.hpp"

#include "tessera/core/report.hpp"
#include "tessera/io/files.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <numeric>

namespace tessera::runtime {

namespace {

struct Spread {
  double max = 0.0, mean = 0.0, min = 0.0;
};

/// max / mean / min over the ranks of one figure.
template <typename F> Spread spread(const RunSummary& s, F figure) {
  std::vector<double> values;
  for (const RankFigures& f : s.per_rank)
    values.push_back(static_cast<double>(figure(f)));
  if (values.empty()) return {};
  return {*std::max_element(values.begin(), values.end()),
          std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size()),
          *std::min_element(values.begin(), values.end())};
}

template <typename F>
void set_spread(RunReport& r, const std::string& key, const RunSummary& s, F figure) {
  const Spread v = spread(s, figure);
  r.set(key + ".max", v.max);
  r.set(key + ".mean", v.mean);
  r.set(key + ".min", v.min);
}

void report_config(RunReport& r, const RunSummary& s) {
  r.set("config.dataset", s.dataset_spec);
  r.set("config.model", s.model_name);
  r.set("config.layer_sizes", std::vector<double>(s.layer_sizes.begin(), s.layer_sizes.end()));
  r.set("config.dropout", static_cast<double>(s.model.dropout));
  r.set("config.bias", s.model.bias);
  r.set("config.order", to_string(s.model.order));
  r.set("config.decay_first_layer_only", s.model.decay_first_layer_only);
  r.set("config.epochs", s.train.epochs);
  r.set("config.lr", static_cast<double>(s.train.adam.lr));
  r.set("config.weight_decay", static_cast<double>(s.train.adam.weight_decay));
  r.set("config.optimizer", s.train.adam.decoupled ? "adamw" : "adam");
  r.set("config.seed", static_cast<std::int64_t>(s.train.seed));
  r.set("config.eval_every", s.train.eval_every);
  r.set("config.normalize_features", s.normalize_features);
  r.set("backend", s.backend);
  r.set("threads", s.threads);
  r.set("blas_core", s.blas_core);
}

void report_data(RunReport& r, const RunSummary& s) {
  r.set("dataset.name", s.dataset);
  r.set("dataset.nodes", s.nodes);
  r.set("dataset.edges", s.edges);
  r.set("dataset.features", s.features);
  r.set("dataset.sparse_features", s.sparse_features);
  r.set("dataset.classes", s.classes);
  r.set("distributed.ranks", s.ranks);
  r.set("distributed.communicator", s.communicator);
  r.set("distributed.partition", s.partition);
  r.set("distributed.cache_input_features", s.cache_input_features);
  set_spread(r, "distributed.owned_nodes", s, [](const RankFigures& f) { return f.owned_rows; });
  set_spread(r, "distributed.ghost_nodes", s, [](const RankFigures& f) { return f.ghost_rows; });
  set_spread(r, "distributed.interior_nodes", s,
             [](const RankFigures& f) { return f.interior_rows; });
}

void report_costs(RunReport& r, const RunSummary& s) {
  r.set("timing.load_s", spread(s, [](const RankFigures& f) { return f.load_s; }).max);
  r.set("timing.setup_s", spread(s, [](const RankFigures& f) { return f.setup_s; }).max);
  r.set("timing.epoch_ms_median", s.result.median_step_ms);
  set_spread(r, "timing.epoch_ms", s, [](const RankFigures& f) { return f.epoch_ms; });
  set_spread(r, "timing.compute_ms", s, [](const RankFigures& f) { return f.compute_ms; });
  set_spread(r, "timing.comm_ms", s, [](const RankFigures& f) { return f.comm_ms; });
  set_spread(r, "timing.wait_ms", s, [](const RankFigures& f) { return f.wait_ms; });
  const gnn::PhaseTimes& phases = s.result.phases;
  r.set("timing.phases_s.forward", phases.forward);
  r.set("timing.phases_s.loss", phases.loss);
  r.set("timing.phases_s.backward", phases.backward);
  r.set("timing.phases_s.optimizer", phases.optimizer);
  r.set("timing.phases_s.evaluate", phases.evaluate);

  set_spread(r, "comm.halo_bytes_sent_per_epoch", s,
             [](const RankFigures& f) { return f.halo_bytes_sent; });
  set_spread(r, "comm.halo_bytes_received_per_epoch", s,
             [](const RankFigures& f) { return f.halo_bytes_received; });
  r.set("comm.halo_bytes_per_epoch", s.halo_bytes_per_epoch);
  if (s.broadcast_1d_bytes_per_epoch) {
    r.set("comm.broadcast_1d_bytes_per_epoch", *s.broadcast_1d_bytes_per_epoch);
  }
  // Per aggregating layer: one value per rank.
  const std::size_t layers = s.per_rank.empty() ? 0 : s.per_rank.front().layer_bytes_sent.size();
  for (std::size_t i = 0; i < layers; ++i) {
    std::vector<double> sent, received;
    for (const RankFigures& f : s.per_rank) {
      sent.push_back(static_cast<double>(f.layer_bytes_sent[i]));
      received.push_back(static_cast<double>(f.layer_bytes_received[i]));
    }
    r.set(fmt::format("comm.layer_bytes_sent.conv{}", i), sent);
    r.set(fmt::format("comm.layer_bytes_received.conv{}", i), received);
  }
  r.set("halo.cache_hit_rows", s.cache_hit_rows);
  r.set("halo.feature_fetch_bytes", s.feature_fetch_bytes);

  set_spread(r, "memory.graph_bytes", s, [](const RankFigures& f) { return f.graph_bytes; });
  set_spread(r, "memory.feature_bytes", s, [](const RankFigures& f) { return f.feature_bytes; });
  set_spread(r, "memory.model_bytes", s, [](const RankFigures& f) { return f.model_bytes; });
  set_spread(r, "memory.peak_rss_bytes", s, [](const RankFigures& f) { return f.peak_rss_bytes; });
}

void report_result(RunReport& r, const gnn::TrainResult& result) {
  r.set("metrics.test_accuracy", result.test_at_best_val.accuracy);
  r.set("metrics.best_val_accuracy", result.best_val.accuracy);
  r.set("metrics.best_epoch", result.best_epoch);
  r.set("metrics.final_test_accuracy", result.final_test.accuracy);
  r.set("metrics.final_loss", result.history.empty() ? 0.0 : result.history.back().train_loss);
  for (const gnn::EpochStats& e : result.history) {
    r.append("epochs", {{"epoch", e.epoch},
                        {"loss", e.train_loss},
                        {"step_ms", e.step_ms},
                        {"train_accuracy", e.train.accuracy},
                        {"val_accuracy", e.val.accuracy},
                        {"val_loss", e.val.loss},
                        {"test_accuracy", e.test.accuracy}});
  }
}

} // namespace

std::string report_json(const RunSummary& summary) {
  RunReport report;
  report_config(report, summary);
  report_data(report, summary);
  report_costs(report, summary);
  report_result(report, summary.result);
  return report.dump() + "\n";
}

void write_report(const RunSummary& summary, const std::string& path) {
  io::write_text_file(path, report_json(summary));
}

std::string rank_table(const RunSummary& s) {
  std::string out = "per rank (median epoch)     max       mean        min\n";
  const auto row = [&](const char* label, auto figure, double scale, const char* unit) {
    const Spread v = spread(s, figure);
    out += fmt::format("  {:<22} {:>10.2f} {:>10.2f} {:>10.2f}  {}\n", label, v.max * scale,
                       v.mean * scale, v.min * scale, unit);
  };
  constexpr double mib = 1.0 / (1 << 20);
  row(
      "epoch", [](const RankFigures& f) { return f.epoch_ms; }, 1.0, "ms");
  row(
      "compute", [](const RankFigures& f) { return f.compute_ms; }, 1.0, "ms");
  row(
      "communication", [](const RankFigures& f) { return f.comm_ms; }, 1.0, "ms");
  row(
      "waiting for halos", [](const RankFigures& f) { return f.wait_ms; }, 1.0, "ms");
  row(
      "halo sent", [](const RankFigures& f) { return f.halo_bytes_sent; }, mib, "MiB");
  row(
      "halo received", [](const RankFigures& f) { return f.halo_bytes_received; }, mib, "MiB");
  row(
      "owned rows", [](const RankFigures& f) { return f.owned_rows; }, 1.0, "");
  row(
      "ghost rows", [](const RankFigures& f) { return f.ghost_rows; }, 1.0, "");
  row(
      "peak memory", [](const RankFigures& f) { return f.peak_rss_bytes; }, mib, "MiB");
  std::string ratio; // estimated for the GCN only
  if (s.broadcast_1d_bytes_per_epoch && s.halo_bytes_per_epoch > 0) {
    ratio = fmt::format(" ({:.1f}x less than a 1D broadcast)",
                        *s.broadcast_1d_bytes_per_epoch / s.halo_bytes_per_epoch);
  }
  out += fmt::format("halo bytes per epoch, all ranks: {:.2f} MiB{}; ghost input rows served "
                     "from the cache: {}\n",
                     s.halo_bytes_per_epoch * mib, ratio, s.cache_hit_rows);
  return out;
}

} // namespace tessera::runtime
