// mlp_main: tessera-mlp's flags and run on the shared program main (program_main.hpp).
#include "program_main.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/runtime/cli_options.hpp"
#include "tessera/runtime/job_paths.hpp"
#include "tessera/runtime/mlp_job.hpp"
#include "tessera/runtime/offload_options.hpp"
#include "tessera/runtime/progress_display.hpp"
#include "tessera/runtime/run_summary.hpp"
#include "tessera/runtime/train_main.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/core.h>
#include <optional>
#include <string>

namespace tessera::runtime {

namespace {

struct Options {
  std::string dataset = "blobs:samples=10000,features=64,classes=4";
  std::string data_dir = datasets::default_data_dir();
  std::string layers;
  std::int64_t hidden = 64;
  int num_layers = 2;
  float dropout = 0.5f;
  float lr = 0.01f;
  float weight_decay = 5e-4f;
  std::string optimizer = "adam";
  std::int64_t batch_size = 256;
  int epochs = 20;
  int eval_every = 1;
  std::uint64_t seed = 0;
  std::optional<std::uint64_t> split_seed; // not given: seed
  int threads = 0;
  std::string device = "cpu";
  int split_index = 0;
  std::string normalize_features = "auto";
  int log_every = 10;
  std::string metric = "accuracy";
  std::string report;
  bool allow_split_overlap = false;
  std::optional<double> peer_timeout;
  OffloadFlags offload;
};

void add_flags(CLI::App& app, Options& o) {
  start_everyday_flags(app);
  add_path_option(app, "--dataset", o.dataset,
                  "name under --data-dir (cora, minesweeper, ...), FORMAT:PATH, a graph generator "
                  "(sbm:..., rmat:...; their node features) or "
                  "blobs:samples=N,features=F,classes=C[,separation=S,noise=N,seed=S]")
      ->capture_default_str();
  add_path_option(app, "--data-dir", o.data_dir, "folder of named datasets ($TESSERA_DATA_DIR)")
      ->capture_default_str();
  app.add_option("--layers", o.layers,
                 "layer sizes IN-HIDDEN...-CLASSES, e.g. 4096-8192-8192-16 (overrides --hidden "
                 "and --num-layers; IN and CLASSES must be the data's)");
  add_integer_option(app, "--hidden", o.hidden, 1, std::int64_t{1} << 30, "hidden width")
      ->capture_default_str();
  add_integer_option(app, "--num-layers", o.num_layers, 1, 1000, "number of Linear layers")
      ->capture_default_str();
  add_number_option(app, "--dropout", o.dropout, 0, false, 0.999,
                    "dropout probability before every Linear layer")
      ->capture_default_str();
  add_number_option(app, "--lr", o.lr, 0, true, 1e6, "learning rate")->capture_default_str();
  add_number_option(app, "--weight-decay", o.weight_decay, 0, false, 1e6,
                    "weight decay (weights, not biases)")
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "adam (L2 decay) or adamw (decoupled decay)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adam", "adamw"}));
  add_integer_option(app, "--batch-size", o.batch_size, 1, std::int64_t{1} << 31,
                     "samples per step over all ranks (each rank takes its share)")
      ->capture_default_str();
  add_integer_option(app, "--epochs", o.epochs, 0, 100000000, "training epochs")
      ->capture_default_str();
  app.add_option("--metric", o.metric,
                 "what selects the best validation epoch and leads the summary: accuracy, or "
                 "roc-auc (binary tasks)")
      ->capture_default_str()
      ->check(CLI::IsMember({"accuracy", "roc-auc"}));
  add_integer_option(app, "--eval-every", o.eval_every, 1, 100000000,
                     "evaluate every k epochs (and after the last)")
      ->capture_default_str();
  add_seed_option(app, "--seed", o.seed, "seed of weights, batch order, dropout and generated data")
      ->capture_default_str();
  add_seed_option(app, "--split-seed", o.split_seed,
                  "seed of the random 60/20/20 split drawn for data without one (default: --seed)");
  add_integer_option(app, "--threads", o.threads, 0, 1 << 20,
                     "CPU threads (0: OMP_NUM_THREADS or all cores; at most 4 per core)")
      ->capture_default_str();
  app.add_option("--device", o.device, "where each rank trains: cpu, cuda or auto")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_integer_option(app, "--split", o.split_index, 0, 1000000,
                     "which stored split to use (minesweeper has 10)")
      ->capture_default_str();
  add_split_overlap_flag(app, o.allow_split_overlap);
  app.add_option("--normalize-features", o.normalize_features,
                 "row-normalize the features: true, false, or auto (only when none is negative, "
                 "as bag-of-words)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "true", "false"}));
  add_integer_option(app, "--log-every", o.log_every, 1, 100000000,
                     "print a line every k epochs when not on a terminal")
      ->capture_default_str();
  add_path_option(app, "--report", o.report, "write a JSON run report to this path");
  add_number_option(app, "--peer-timeout", o.peer_timeout, 0, true, 1e9,
                    "seconds a rank may wait for another before the job ends naming it "
                    "(default: the larger of 60 and 50 x the slowest epoch so far; 600 "
                    "before the first epoch ends)");
  add_offload_flags(app, o.offload, "parameters, gradients, Adam state and activations");
  group_flags(app, kTuningFlags,
              {"--allow-split-overlap", "--peer-timeout", "--device-memory", "--host-memory",
               "--offload-dir", "--chunk-size", "--eviction-policy"});
}

MlpJob make_job(const Options& o) {
  MlpJob job;
  job.dataset = o.dataset;
  job.load.data_dir = o.data_dir;
  job.load.split_index = o.split_index;
  job.load.allow_split_overlap = o.allow_split_overlap;
  job.load.seed = o.seed;
  if (o.normalize_features != "auto") job.normalize_features = o.normalize_features == "true";
  job.threads = o.threads;
  job.device = parse_device_choice(o.device);
  if (!o.layers.empty()) {
    try {
      job.shape.layer_sizes = gnn::parse_layer_sizes(o.layers);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--layers: ") + e.what());
    }
  }
  job.shape.hidden = o.hidden;
  job.shape.num_layers = o.num_layers;
  job.dropout = o.dropout;
  job.epochs = o.epochs;
  job.batch_size = o.batch_size;
  job.adam.lr = o.lr;
  job.adam.weight_decay = o.weight_decay;
  job.adam.decoupled = o.optimizer == "adamw";
  job.eval_every = o.eval_every;
  job.metric = gnn::parse_metric(o.metric);
  job.seed = o.seed;
  job.split_seed = o.split_seed;
  job.offload = offload_config(o.offload);
  job.peer_timeout = o.peer_timeout;
  return job;
}

void print_result(const MlpResult& r, const std::string& report) {
  if (r.history.empty()) {
    fmt::print("no epochs trained: no accuracy to report\n");
  } else if (r.test_samples == 0) {
    fmt::print("no test samples: validation accuracy {:.2f}% at epoch {}\n",
               100.0 * r.best_val.accuracy, r.best_epoch);
  } else {
    fmt::print("{}\n", describe_final_result({r.job.metric, r.test_at_best_val, r.best_val,
                                              r.final_test, r.best_epoch, r.val_samples > 0}));
  }
  fmt::print("median step {:.2f} ms ({:.0f} samples/s); peak memory {:.1f} MiB\n", r.median_step_ms,
             r.samples_per_s, static_cast<double>(r.peak_rss_bytes) / (1 << 20));
  if (r.offloaded) {
    fmt::print("offload (rank 0): {}\n", describe_offload(r.offload));
  }
  if (!report.empty()) fmt::print("report written to {}\n", report);
}

} // namespace

int mlp_main(int argc, char** argv) {
  Options options;
  ProgramParts parts;
  parts.description =
      "Train a plain MLP classifier in shuffled mini-batches on the node features of a dataset or "
      "on generated blobs; under mpirun -np P, data-parallel over P ranks that split every global "
      "batch.";
  parts.add_flags = [&](CLI::App& app) { add_flags(app, options); };
  parts.run = [&](const CLI::App&, const std::shared_ptr<comm::Communicator>& comm) {
    const int rank = comm->rank();
    MlpJob job = make_job(options);
    job.comm = comm;
    // A report that cannot be written, or would overwrite an input, fails now.
    refuse_outputs_over_inputs(
        {{"--report", options.report, false}, {"--offload-dir", job.offload.offload_dir, true}},
        datasets::dataset_inputs(job.dataset, job.load));
    if (rank == 0 && !options.report.empty()) check_report_path(options.report);
    const StdoutProgress loading(rank == 0);
    EpochLinePrinter progress(options.epochs, options.log_every);
    const MlpResult result = run_mlp_job(
        job,
        [](const std::string& line) {
          fmt::print("{}\n", line);
          std::fflush(stdout);
        },
        [&](const MlpEpoch& e) {
          if (rank != 0) return;
          std::string line =
              fmt::format("epoch {:>4}/{}  loss {:.4f}  {:8.2f} ms/step  {:8.1f} ms", e.epoch,
                          options.epochs, e.train_loss, e.step_ms, e.epoch_ms);
          if (e.evaluated) {
            line += fmt::format("  train {}  val {}", describe_split_metric(e.train),
                                describe_split_metric(e.val));
          }
          progress(e.epoch, line);
        });
    if (rank == 0) {
      if (!options.report.empty()) write_mlp_report(result, options.report);
      print_result(result, options.report);
    }
  };
  return program_main(argc, argv, parts);
}

} // namespace tessera::runtime
