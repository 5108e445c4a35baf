// predict_main: tessera-predict's main — a checkpoint's model applied to a graph (flags, MPI
// start, the metrics, the per-node outputs, the report, errors).
#include "program_main.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/io/files.hpp"
#include "tessera/runtime/cli_options.hpp"
#include "tessera/runtime/job_paths.hpp"
#include "tessera/runtime/offload_options.hpp"
#include "tessera/runtime/predict_job.hpp"
#include "tessera/runtime/progress_display.hpp"
#include "tessera/runtime/run_summary.hpp"
#include "tessera/runtime/train_main.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tessera::runtime {

namespace {

struct PredictOptions {
  std::string checkpoint;
  std::string dataset;
  std::string data_dir = datasets::default_data_dir();
  std::string partition_dir;
  std::string partition_method = "metis";
  int split_index = 0;
  bool allow_split_overlap = false;
  std::optional<std::uint64_t> seed, split_seed;
  std::string normalize_features = "auto";
  int threads = 0;
  std::string device = "cpu";
  std::string metric = "accuracy";
  std::string report;
  std::optional<double> peer_timeout;
  OffloadFlags offload;
  NodeOutputFlags outputs;
  std::string pairs;
  std::string link_split_in;
};

void add_flags(CLI::App& app, PredictOptions& o) {
  start_everyday_flags(app);
  add_path_option(app, "--checkpoint", o.checkpoint,
                  "checkpoint folder of a training run (tessera-train --checkpoint-dir): its "
                  "latest weights")
      ->required();
  add_path_option(app, "--dataset", o.dataset,
                  "the graph to predict on (a name under --data-dir, FORMAT:PATH or a generator, "
                  "as tessera-train takes it), with the feature width and classes the model was "
                  "trained for; default: the dataset of the checkpoint");
  add_path_option(app, "--data-dir", o.data_dir, "folder of named datasets ($TESSERA_DATA_DIR)")
      ->capture_default_str();
  add_path_option(app, "--partition-dir", o.partition_dir,
                  "partition store with one part per rank: each rank loads only its part");
  app.add_option("--partition-method", o.partition_method,
                 "under mpirun without --partition-dir: how rank 0 cuts the graph (metis, "
                 "metis-recursive, hypergraph, block, random)")
      ->capture_default_str()
      ->check(CLI::IsMember({"metis", "metis-recursive", "hypergraph", "block", "random"}));
  add_integer_option(app, "--split", o.split_index, 0, 1000000,
                     "which stored split the metrics use (minesweeper has 10)")
      ->capture_default_str();
  add_split_overlap_flag(app, o.allow_split_overlap);
  add_seed_option(app, "--seed", o.seed,
                  "seed of generated data (default: the checkpoint's, so a generated graph is the "
                  "one trained on; sbm:...,structure-seed=S draws another of the same classes)");
  add_seed_option(app, "--split-seed", o.split_seed,
                  "seed of the random 60/20/20 split drawn for data without one (default: the "
                  "checkpoint's seed, the split training drew)");
  app.add_option("--normalize-features", o.normalize_features,
                 "row-normalize the features: true, false, or auto: as the training run did")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "true", "false"}));
  add_integer_option(app, "--threads", o.threads, 0, 1000000000,
                     "CPU threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str();
  app.add_option("--device", o.device, "where each rank computes: cpu, cuda or auto")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--metric", o.metric,
                 "the metric the summary leads with: accuracy, or roc-auc (binary tasks)")
      ->capture_default_str()
      ->check(CLI::IsMember({"accuracy", "roc-auc"}));
  add_node_output_flags(app, o.outputs);
  add_path_option(app, "--pairs", o.pairs,
                  "with a link-prediction checkpoint: score the node pairs of FILE.npz (array "
                  "'pairs', int [2, E]); --predictions gets each pair's probability");
  add_path_option(app, "--link-split-in", o.link_split_in,
                  "with a link-prediction checkpoint: encode with the training edges of this "
                  "split (tessera-train --link-split-out), as training did; default: every edge "
                  "of the graph");
  add_path_option(app, "--report", o.report, "write a JSON report (metrics, model, data)");
  add_number_option(app, "--peer-timeout", o.peer_timeout, 0, true, 1e9,
                    "seconds a rank may wait for another before the job ends naming it");
  add_offload_flags(app, o.offload, "features, matrices, activations and weights");
  group_flags(app, kTuningFlags,
              {"--partition-method", "--allow-split-overlap", "--split-seed", "--peer-timeout"});
}

PredictJob make_job(const CLI::App& app, const PredictOptions& o,
                    const std::shared_ptr<comm::Communicator>& comm) {
  PredictJob job;
  job.checkpoint_dir = o.checkpoint;
  job.dataset = o.dataset;
  job.load.data_dir = o.data_dir;
  job.load.split_index = o.split_index;
  job.load.allow_split_overlap = o.allow_split_overlap;
  job.data_seed = o.seed;
  job.split_seed = o.split_seed;
  if (o.normalize_features != "auto") job.normalize_features = o.normalize_features == "true";
  job.threads = o.threads;
  job.device = parse_device_choice(o.device);
  job.comm = comm;
  job.partition_dir = o.partition_dir;
  job.partition.method = partition::parse_method(o.partition_method);
  job.offload = offload_config(o.offload);
  job.metric = gnn::parse_metric(o.metric);
  job.outputs = o.outputs.outputs();
  job.pairs = o.pairs;
  job.link_split_in = o.link_split_in;
  job.peer_timeout = o.peer_timeout;
  refuse_flags_ignored_with_store(app, o.partition_dir);
  if (app.count("--embedding-layer") > 0 && o.outputs.embeddings.empty()) {
    throw InvalidArgument("--embedding-layer chooses the layer --embeddings writes, which is not "
                          "given");
  }
  std::vector<std::string> inputs = datasets::dataset_inputs(job.dataset, job.load);
  inputs.push_back(job.partition_dir);
  inputs.push_back(job.checkpoint_dir);
  inputs.push_back(job.pairs);
  inputs.push_back(job.link_split_in);
  refuse_outputs_over_inputs({{"--report", o.report, false},
                              {"--predictions", job.outputs.predictions, false},
                              {"--export-weights", job.outputs.weights, false},
                              {"--embeddings", job.outputs.embeddings, false},
                              {"--offload-dir", job.offload.offload_dir, true}},
                             inputs);
  return job;
}

/// "accuracy 81.30%", "accuracy 81.30%, ROC-AUC 0.9123".
std::string metric_text(const gnn::SplitMetrics& m) {
  std::string text = fmt::format("accuracy {:.2f}%", 100.0 * m.accuracy);
  if (m.roc_auc) text += fmt::format(", ROC-AUC {:.4f}", *m.roc_auc);
  return text;
}

std::string report_text(const PredictSummary& s, const PredictOptions& o) {
  nlohmann::ordered_json r;
  r["format"] = kReportFormat;
  r["program"] = "tessera-predict";
  r["checkpoint"] = o.checkpoint;
  r["model"] = {{"name", s.model_name},
                {"layer_sizes", s.layer_sizes},
                {"epochs_trained", s.checkpoint_epoch},
                {"trained_on", s.trained_on}};
  r["dataset"] = {{"name", s.dataset},    {"same_as_trained_on", s.same_data},
                  {"nodes", s.nodes},     {"features", s.features},
                  {"classes", s.classes}, {"row_normalized", s.row_normalized}};
  r["ranks"] = s.ranks;
  r["task"] = s.task;
  if (s.task == "link") r["pairs"] = s.pairs;
  nlohmann::ordered_json metrics;
  const char* names[3] = {"train", "val", "test"};
  for (int i = 0; i < 3; ++i) {
    const gnn::SplitMetrics& m = s.metrics[static_cast<std::size_t>(i)];
    const std::string name = names[i];
    metrics[name + "_nodes"] = s.split_rows[static_cast<std::size_t>(i)];
    if (s.split_rows[static_cast<std::size_t>(i)] == 0) continue;
    metrics[name + "_accuracy"] = m.accuracy;
    metrics[name + "_loss"] = m.loss;
    if (m.roc_auc) metrics[name + "_roc_auc"] = *m.roc_auc;
  }
  r["metrics"] = metrics;
  r["outputs"] = {{"predictions", o.outputs.predictions},
                  {"embeddings", o.outputs.embeddings},
                  {"nodes", o.outputs.nodes}};
  r["seconds"] = s.seconds;
  return io::json_text(r);
}

void print_summary(const PredictSummary& s, const PredictOptions& o) {
  const char* names[3] = {"train", "validation", "test"};
  for (int i = 0; i < 3; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (s.split_rows[k] == 0) continue;
    fmt::print("{} ({} nodes): {}\n", names[i], s.split_rows[k], metric_text(s.metrics[k]));
  }
  if (s.task == "link") {
    fmt::print("link-prediction encoder: {} pairs scored\n", s.pairs);
  }
  fmt::print("{} on {}{}, {} nodes, in {:.2f} s\n", s.model_name, s.dataset,
             s.same_data ? " (the data it was trained on)" : "", s.nodes, s.seconds);
  if (!o.report.empty()) {
    io::write_text_file(o.report, report_text(s, o));
    fmt::print("report written to {}\n", o.report);
  }
}

} // namespace

int predict_main(int argc, char** argv) {
  PredictOptions options;
  ProgramParts parts;
  parts.description = "Apply a trained model (a tessera-train checkpoint) to a graph — the one it "
                      "was trained on or another with the same features and classes — and write "
                      "each node's predictions and embeddings (a link-prediction model's: node "
                      "pairs' probabilities, --pairs); under mpirun -np P, across P ranks "
                      "that each hold one tile of the graph.";
  parts.add_flags = [&](CLI::App& app) { add_flags(app, options); };
  parts.run = [&](const CLI::App& app, const std::shared_ptr<comm::Communicator>& comm) {
    const PredictJob job = make_job(app, options, comm);
    if (comm->rank() == 0 && !options.report.empty()) check_report_path(options.report);
    const PredictSummary summary = run_predict_job(job, [](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    });
    if (comm->rank() == 0) print_summary(summary, options);
  };
  return program_main(argc, argv, parts);
}

} // namespace tessera::runtime
