// The run summary written out: as the JSON report, and as the per-rank table. Every per-rank
// figure is listed once (kPerRank), with its report key and its row in the table.
#include "tessera/runtime/run_summary.hpp"

#include "metric_report.hpp"
#include "tessera/core/report.hpp"
#include "tessera/io/files.hpp"
#include "tessera/io/text_input.hpp"
#include "tessera/runtime/offload_options.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sys/stat.h>
#include <type_traits>
#include <variant>

namespace tessera::runtime {

namespace {

constexpr double kMiB = 1 << 20;

/// A figure's place in RankFigures, whatever its type.
using Field = std::variant<double RankFigures::*, std::int64_t RankFigures::*>;

double get(const RankFigures& f, Field field) {
  return std::visit([&](auto member) { return static_cast<double>(f.*member); }, field);
}

void set(RankFigures& f, Field field, double value) {
  std::visit(
      [&](auto member) { f.*member = static_cast<std::decay_t<decltype(f.*member)>>(value); },
      field);
}

/// One per-rank figure: where the report puts its max / mean / min, and its row in the table
/// (none when `label` is null), in `unit` after dividing by `scale`.
struct PerRank {
  const char* key;
  const char* label;
  double scale;
  const char* unit;
  Field field;
};

/// Every scalar of RankFigures, once: what is gathered, reported and tabled.
const PerRank kPerRank[] = {
    {"timing.epoch_ms", "epoch", 1.0, "ms", &RankFigures::epoch_ms},
    {"timing.compute_ms", "compute", 1.0, "ms", &RankFigures::compute_ms},
    {"timing.comm_ms", "communication", 1.0, "ms", &RankFigures::comm_ms},
    {"timing.wait_ms", "waiting for halos", 1.0, "ms", &RankFigures::wait_ms},
    {"comm.halo_bytes_sent_per_epoch", "halo sent", kMiB, "MiB", &RankFigures::halo_bytes_sent},
    {"comm.halo_bytes_received_per_epoch", "halo received", kMiB, "MiB",
     &RankFigures::halo_bytes_received},
    {"distributed.owned_nodes", "owned rows", 1.0, "", &RankFigures::owned_rows},
    {"distributed.ghost_nodes", "ghost rows", 1.0, "", &RankFigures::ghost_rows},
    {"distributed.interior_nodes", nullptr, 1.0, "", &RankFigures::interior_rows},
    {"timing.load_s", nullptr, 1.0, "s", &RankFigures::load_s},
    {"timing.setup_s", nullptr, 1.0, "s", &RankFigures::setup_s},
    {"memory.graph_bytes", nullptr, 1.0, "", &RankFigures::graph_bytes},
    {"memory.feature_bytes", nullptr, 1.0, "", &RankFigures::feature_bytes},
    {"memory.model_bytes", nullptr, 1.0, "", &RankFigures::model_bytes},
    {"memory.peak_rss_bytes", "peak memory", kMiB, "MiB", &RankFigures::peak_rss_bytes},
    {"memory.offload_moved_bytes_per_epoch", "moved between tiers", kMiB, "MiB",
     &RankFigures::offload_moved_bytes},
    {"memory.offload_stall_ms", "stalled on chunk copies", 1.0, "ms",
     &RankFigures::offload_stall_ms},
    {"memory.offload_peak_device_bytes", nullptr, 1.0, "", &RankFigures::offload_peak_device_bytes},
    {"batch.steps_per_epoch", "steps per epoch", 1.0, "", &RankFigures::steps},
    {"batch.epoch_ms", "epoch of steps", 1.0, "ms", &RankFigures::batch_epoch_ms},
    {"batch.wait_ms", "waiting for a batch", 1.0, "ms", &RankFigures::batch_wait_ms},
    {"batch.exchange_ms", "of it exchanging", 1.0, "ms", &RankFigures::batch_exchange_ms},
    {"batch.seeds_per_step", "seeds a step", 1.0, "", &RankFigures::seeds},
    {"batch.sampled_edges_per_step", "sampled edges a step", 1.0, "", &RankFigures::sampled_edges},
    {"batch.input_rows_per_step", "input rows a step", 1.0, "", &RankFigures::input_rows},
    {"batch.cache_hits_per_step", "cached rows a step", 1.0, "", &RankFigures::cache_hits},
    {"batch.fetched_rows_per_step", "fetched rows a step", 1.0, "", &RankFigures::fetched_rows},
    {"batch.bytes_received_per_step", "batch bytes a step", kMiB, "MiB", &RankFigures::batch_bytes},
};

struct Spread {
  double max = 0.0, mean = 0.0, min = 0.0;
};

/// max / mean / min over the ranks of one figure.
Spread spread(const RunSummary& s, const PerRank& figure) {
  std::vector<double> values;
  for (const RankFigures& f : s.per_rank)
    values.push_back(get(f, figure.field));
  if (values.empty()) return {};
  return {*std::max_element(values.begin(), values.end()),
          std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size()),
          *std::min_element(values.begin(), values.end())};
}

void report_config(RunReport& r, const RunSummary& s) {
  r.set("config.dataset", s.dataset_spec);
  r.set("config.model", s.model_name);
  r.set("config.layer_sizes", std::vector<double>(s.layer_sizes.begin(), s.layer_sizes.end()));
  r.set("config.dropout", static_cast<double>(s.model.dropout));
  r.set("config.bias", s.model.bias);
  r.set("config.order", to_string(s.model.order));
  r.set("config.activation_dtype", to_string(s.model.activation_dtype));
  r.set("config.decay_first_layer_only", s.model.decay_first_layer_only);
  r.set("config.epochs", s.train.epochs);
  r.set("config.lr", static_cast<double>(s.train.adam.lr));
  r.set("config.weight_decay", static_cast<double>(s.train.adam.weight_decay));
  r.set("config.optimizer", s.train.adam.decoupled ? "adamw" : "adam");
  r.set("config.seed", static_cast<std::int64_t>(s.train.seed));
  r.set("config.eval_every", s.train.eval_every);
  r.set("config.metric", gnn::to_string(s.train.metric));
  r.set("config.mode", s.mode);
  if (s.mode == "sampled") {
    r.set("config.fanouts", std::vector<double>(s.fanouts.begin(), s.fanouts.end()));
    r.set("config.batch_size", s.batch_size);
    r.set("config.feature_cache_bytes", s.feature_cache_bytes);
    r.set("config.prefetch_batches", s.prefetch_batches);
  }
  r.set("split.source", s.split_source);
  if (s.split_source == "random") r.set("split.seed", static_cast<std::int64_t>(s.split_seed));
  r.set("config.normalize_features", s.normalize_features);
  r.set("backend", s.backend);
  r.set("threads", s.threads);
  r.set("blas_core", s.blas_core);
  r.set("dataset.name", s.dataset);
  r.set("dataset.nodes", s.nodes);
  r.set("dataset.edges", s.edges);
  r.set("dataset.features", s.features);
  r.set("dataset.sparse_features", s.sparse_features);
  r.set("dataset.feature_density", s.feature_density);
  r.set("dataset.classes", s.classes);
  r.set("distributed.ranks", s.ranks);
  r.set("distributed.communicator", s.communicator);
  r.set("distributed.partition", s.partition);
  r.set("distributed.halo_exchange", s.halo_exchange);
  for (std::size_t i = 0; i < s.layer_exchange.size(); ++i)
    r.set(fmt::format("distributed.layer_exchange.conv{}", i), s.layer_exchange[i]);
  r.set("distributed.cache_input_features", s.cache_input_features);
  r.set("distributed.balance", s.balance);
  r.set("distributed.rank_speeds", s.rank_speeds);
  r.set("distributed.row_cost", s.row_cost);
  for (std::size_t i = 0; i < s.rebalances.size(); ++i) {
    const RebalanceStep& step = s.rebalances[i];
    r.append("rebalances", {{"epoch", step.epoch},
                            {"imbalance_before", step.imbalance_before},
                            {"imbalance_after", step.imbalance_after},
                            {"rows_moved", static_cast<double>(step.rows_moved)},
                            {"bytes_moved", static_cast<double>(step.bytes_moved)},
                            {"seconds", step.seconds}});
    r.set(fmt::format("distributed.rebalance_shares.move{}", i + 1), step.shares);
  }
}

void report_figures(RunReport& r, const RunSummary& s) {
  for (const PerRank& figure : kPerRank) {
    const Spread v = spread(s, figure);
    const std::string key = figure.key;
    r.set(key + ".max", v.max);
    r.set(key + ".mean", v.mean);
    r.set(key + ".min", v.min);
    std::vector<double> values; // rank by rank, for per-rank plots
    for (const RankFigures& f : s.per_rank)
      values.push_back(get(f, figure.field));
    r.set(key + ".per_rank", values);
  }
  r.set("timing.epoch_ms_median", s.result.median_step_ms);
  r.set("timing.balanced_epoch_ms", s.balanced_epoch_ms);
  const gnn::PhaseTimes& phases = s.result.phases;
  r.set("timing.phases_s.forward", phases.forward);
  r.set("timing.phases_s.loss", phases.loss);
  r.set("timing.phases_s.backward", phases.backward);
  r.set("timing.phases_s.optimizer", phases.optimizer);
  r.set("timing.phases_s.evaluate", phases.evaluate);
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
  const std::size_t timed = s.per_rank.empty() ? 0 : s.per_rank.front().layer_predicted_ms.size();
  for (std::size_t i = 0; i < timed; ++i) {
    std::vector<double> predicted, measured;
    for (const RankFigures& f : s.per_rank) {
      predicted.push_back(f.layer_predicted_ms[i]);
      measured.push_back(f.layer_measured_ms[i]);
    }
    r.set(fmt::format("schedule.layer_predicted_ms.conv{}", i), predicted);
    r.set(fmt::format("schedule.layer_measured_ms.conv{}", i), measured);
  }
  r.set("halo.cache_hit_rows", s.cache_hit_rows);
  r.set("halo.feature_fetch_bytes", s.feature_fetch_bytes);
  r.set("memory.offloaded", s.offloaded);
  if (s.offloaded) set_offload_report(r, "memory", s.offload, s.offload_total);
}

void report_stalls(RunReport& r, const std::vector<RankStall>& stalls) {
  r.set("comm.stalls", static_cast<std::int64_t>(stalls.size()));
  for (const RankStall& s : stalls) {
    r.append("stalls", {{"rank", static_cast<double>(s.rank)},
                        {"seconds", s.stall.seconds},
                        {"epochs", s.stall.epochs}});
  }
}

void report_result(RunReport& r, const gnn::TrainResult& result) {
  r.set("split.train", result.train_rows);
  r.set("split.val", result.val_rows);
  r.set("split.test", result.test_rows);
  report_final_metrics(
      r, {result.best_val, result.test_at_best_val, result.final_test, result.best_epoch,
          result.history.empty() ? 0.0 : result.history.back().train_loss, result.val_rows > 0,
          result.history.empty() ? 0 : result.history.back().epoch, result.test_rows > 0});
  for (const gnn::EpochStats& e : result.history) {
    ReportFields fields{{"epoch", e.epoch}, {"loss", e.train_loss}, {"step_ms", e.step_ms}};
    add_epoch_fields(fields, e.train, e.val, e.test, e.offload);
    r.append("epochs", fields);
  }
}

} // namespace

std::vector<RankFigures> gather_rank_figures(comm::Communicator& comm, const RankFigures& mine) {
  // One row per rank, each rank filling its own: a sum over ranks is then an exact gather.
  const std::size_t layers = mine.layer_bytes_sent.size();
  const std::size_t timed = mine.layer_predicted_ms.size();
  const std::size_t width = std::size(kPerRank) + 2 * layers + 2 * timed;
  std::vector<double> rows(static_cast<std::size_t>(comm.size()) * width, 0.0);
  double* row = rows.data() + static_cast<std::size_t>(comm.rank()) * width;
  for (const PerRank& figure : kPerRank)
    *row++ = get(mine, figure.field);
  for (std::size_t i = 0; i < layers; ++i) {
    *row++ = static_cast<double>(mine.layer_bytes_sent[i]);
    *row++ = static_cast<double>(mine.layer_bytes_received[i]);
  }
  for (std::size_t i = 0; i < timed; ++i) {
    *row++ = mine.layer_predicted_ms[i];
    *row++ = mine.layer_measured_ms[i];
  }
  comm.allreduce_sum(std::span<double>(rows));

  std::vector<RankFigures> all(static_cast<std::size_t>(comm.size()));
  for (std::size_t r = 0; r < all.size(); ++r) {
    const double* at = rows.data() + r * width;
    for (const PerRank& figure : kPerRank)
      set(all[r], figure.field, *at++);
    for (std::size_t i = 0; i < layers; ++i) {
      all[r].layer_bytes_sent.push_back(static_cast<std::int64_t>(*at++));
      all[r].layer_bytes_received.push_back(static_cast<std::int64_t>(*at++));
    }
    for (std::size_t i = 0; i < timed; ++i) {
      all[r].layer_predicted_ms.push_back(*at++);
      all[r].layer_measured_ms.push_back(*at++);
    }
  }
  return all;
}

std::vector<RankStall> gather_stalls(comm::Communicator& comm,
                                     const std::vector<comm::Stall>& mine) {
  std::vector<RankStall> all;
  for (int root = 0; root < comm.size(); ++root) {
    // Each stall as four lines: step, what, seconds and epochs (steps hold no newline).
    std::string text;
    if (root == comm.rank()) {
      for (const comm::Stall& s : mine)
        text += fmt::format("{}\n{}\n{}\n{}\n", s.step, s.what, s.seconds, s.epochs);
    }
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                                 reinterpret_cast<const std::byte*>(text.data()) + text.size());
    comm.broadcast(bytes, root);
    text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    std::vector<std::string> lines;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = text.find('\n', at);
      lines.push_back(text.substr(at, end - at));
      at = end + 1;
    }
    for (std::size_t i = 0; i + 3 < lines.size(); i += 4) {
      all.push_back(
          {root, {lines[i], lines[i + 1], std::stod(lines[i + 2]), std::stod(lines[i + 3])}});
    }
  }
  return all;
}

std::string describe_stalls(const std::vector<RankStall>& stalls) {
  std::string text;
  for (const RankStall& s : stalls) {
    text += fmt::format("stall: rank {} waited {:.1f} s ({:.0f} median epochs) for {} during {}\n",
                        s.rank, s.stall.seconds, s.stall.epochs, s.stall.what, s.stall.step);
  }
  return text;
}

std::string report_json(const RunSummary& summary) {
  RunReport report;
  report.set("format", kReportFormat);
  report_config(report, summary);
  report_figures(report, summary);
  report_result(report, summary.result);
  report_stalls(report, summary.stalls);
  return report.dump() + "\n";
}

namespace {

/// Whether `text` is a run report: one that says so, or one written before reports did (a JSON
/// object with the config and metrics a report always has).
bool is_run_report(const std::string& text) {
  const nlohmann::json report = nlohmann::json::parse(text, nullptr, false);
  if (report.is_discarded() || !report.is_object()) return false;
  if (report.value("format", "") == kReportFormat) return true;
  return report.contains("config") && report["config"].is_object() && report.contains("metrics") &&
         report["metrics"].is_object();
}

} // namespace

void check_report_path(const std::string& path) {
  io::check_output_file(path);
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_size == 0) return;
  // Bounded: a report holds a few MiB of epochs; anything larger is no report of ours.
  constexpr std::size_t kMaxReportBytes = std::size_t{256} << 20;
  bool report = false;
  try {
    report = is_run_report(io::read_text_file(path, kMaxReportBytes));
  } catch (const Error&) {
    report = false; // binary, too large or unreadable: not a report
  }
  if (!report) {
    throw IoError("--report '" + path +
                  "' is an existing file that is not a Tessera run report: "
                  "a report replaces only an earlier report; remove the file or choose another "
                  "path");
  }
}

void write_report(const RunSummary& summary, const std::string& path) {
  io::write_text_file(path, report_json(summary));
}

std::string rank_table(const RunSummary& s) {
  std::string out = "per rank (median epoch)     max       mean        min\n";
  for (const PerRank& figure : kPerRank) {
    if (figure.label == nullptr) continue;
    if (s.mode != "sampled" && std::string_view(figure.key).starts_with("batch.")) continue;
    const Spread v = spread(s, figure);
    out +=
        fmt::format("  {:<22} {:>10.2f} {:>10.2f} {:>10.2f}  {}\n", figure.label,
                    v.max / figure.scale, v.mean / figure.scale, v.min / figure.scale, figure.unit);
  }
  if (s.offloaded) out += "offload (rank 0): " + describe_offload(s.offload_total) + "\n";
  std::string ratio; // estimated for the GCN only
  if (s.broadcast_1d_bytes_per_epoch && s.halo_bytes_per_epoch > 0) {
    ratio = fmt::format(" ({:.1f}x less than a 1D broadcast)",
                        *s.broadcast_1d_bytes_per_epoch / s.halo_bytes_per_epoch);
  }
  out += fmt::format("halo bytes per epoch, all ranks: {:.2f} MiB{}; ghost input rows served "
                     "from the cache: {}\n",
                     s.halo_bytes_per_epoch / kMiB, ratio, s.cache_hit_rows);
  const std::size_t timed = s.per_rank.empty() ? 0 : s.per_rank.front().layer_predicted_ms.size();
  if (timed > 0) out += "layer step, ms (median)  predicted  measured  (slowest rank of each)\n";
  for (std::size_t i = 0; i < timed; ++i) {
    double predicted = 0.0, measured = 0.0;
    for (const RankFigures& f : s.per_rank) {
      predicted = std::max(predicted, f.layer_predicted_ms[i]);
      measured = std::max(measured, f.layer_measured_ms[i]);
    }
    out += fmt::format("  conv{:<20} {:>10.1f} {:>9.1f}  ({:+.0f} %)\n", i, predicted, measured,
                       measured > 0 ? 100.0 * (predicted / measured - 1.0) : 0.0);
  }
  return out;
}

} // namespace tessera::runtime
