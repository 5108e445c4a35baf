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

/// tessera-mlp's flags: the shared ones with its defaults, and its own.
struct Options : TrainingFlags {
  Options() : TrainingFlags("blobs:samples=10000,features=64,classes=4") {
    hidden = 64;
    epochs = 20;
  }
  std::int64_t batch_size = 256;
  OffloadFlags offload;
};

void add_flags(CLI::App& app, Options& o) {
  start_everyday_flags(app);
  add_training_flags(app, o,
                     {"name under --data-dir (cora, minesweeper, ...), FORMAT:PATH, a graph "
                      "generator (sbm:..., rmat:...; their node features) or "
                      "blobs:samples=N,features=F,classes=C[,separation=S,noise=N,seed=S]",
                      "layer sizes IN-HIDDEN...-CLASSES, e.g. 4096-8192-8192-16 (overrides "
                      "--hidden and --num-layers; IN and CLASSES must be the data's)",
                      "Linear layer"});
  add_integer_option(app, "--batch-size", o.batch_size, 1, std::int64_t{1} << 31,
                     "samples per step over all ranks (each rank takes its share)")
      ->capture_default_str();
  add_offload_flags(app, o.offload, "parameters, gradients, Adam state and activations");
}

MlpJob make_job(const Options& o) {
  MlpJob job;
  job.dataset = o.dataset;
  job.load = o.load_options();
  job.normalize_features = o.normalize_choice();
  job.threads = o.threads;
  job.device = parse_device_choice(o.device);
  if (!o.layers.empty()) {
    try {
      job.shape.layer_sizes = parse_layer_sizes(o.layers);
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
