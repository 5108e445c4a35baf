// train_main: tessera-train's main for any model (flags, MPI start, progress, report, errors).
#include "tessera/gnn/train_main.hpp"

#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/datasets/dataset.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fmt/core.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace tessera::gnn {

namespace {

struct Options {
  std::string dataset = "sbm:nodes=20000,classes=8,avg-degree=10,p-in=0.7,features=64,noise=2";
  std::string data_dir = datasets::default_data_dir();
  std::string layers;
  std::int64_t hidden = 16;
  int num_layers = 2;
  float dropout = 0.5f;
  float lr = 0.01f;
  float weight_decay = 5e-4f;
  std::string optimizer = "adam";
  bool decay_all_layers = false;
  int epochs = 200;
  int eval_every = 1;
  std::uint64_t seed = 0;
  int threads = 0;
  std::string device = "cpu";
  int split_index = 0;
  bool normalize_features = true;
  std::string order = "auto";
  int log_every = 10;
  std::string report;
  std::string partition_dir;
  std::string partition_method = "metis";
  bool no_feature_cache = false;
  std::string inject_failure;
};

/// The flags every program has, and the GCN's own when `gcn`.
void add_flags(CLI::App& app, Options& o, bool gcn) {
  app.add_option("--dataset", o.dataset,
                 "name under --data-dir (cora, minesweeper, facebook, email-eu-core, ...), "
                 "FORMAT:PATH (npz:, linqs:, snap:, metis:, musae:, mtx:) or a generator "
                 "(sbm:nodes=N,..., rmat:scale=S,...)")
      ->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "folder of named datasets ($TESSERA_DATA_DIR)")
      ->capture_default_str();
  if (gcn) {
    app.add_option("--layers", o.layers,
                   "layer sizes, e.g. 1433-16-7 (overrides --hidden/--num-layers)");
  }
  app.add_option("--hidden", o.hidden, "hidden width")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--num-layers", o.num_layers, "number of graph layers")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--dropout", o.dropout, "dropout probability")->capture_default_str()->check(CLI::Range(0.0, 0.999));
  app.add_option("--lr", o.lr, "learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", o.weight_decay, "weight decay")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--optimizer", o.optimizer, "adam (L2 decay) or adamw (decoupled decay)")
      ->capture_default_str()->check(CLI::IsMember({"adam", "adamw"}));
  if (gcn) {
    app.add_flag("--decay-all-layers", o.decay_all_layers,
                 "apply weight decay to every layer (default: first layer only, as Kipf & Welling)");
  }
  app.add_option("--epochs", o.epochs, "training epochs")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--eval-every", o.eval_every, "evaluate every k epochs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of weights, dropout and generated data")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--device", o.device,
                 "where each rank trains: cpu, cuda (GPU of the rank's place on its node) or auto "
                 "(a GPU when the node has one for the rank, else the CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--split", o.split_index, "which stored split to use (minesweeper has 10)")->capture_default_str();
  app.add_option("--normalize-features", o.normalize_features,
                 "row-normalize input features (Kipf & Welling, PyG NormalizeFeatures)")
      ->capture_default_str();
  if (gcn) {
    app.add_option("--order", o.order, "GCN product order: auto, aggregate-first, transform-first")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "aggregate-first", "transform-first"}));
  }
  app.add_option("--log-every", o.log_every, "print a log line every k epochs when not on a terminal")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--report", o.report, "write a JSON run report to this path");
  app.add_option("--partition-dir", o.partition_dir,
                 "partition store (tessera-partition --out) with one part per rank; each rank "
                 "loads only its part (default: rank 0 partitions the graph in memory)");
  app.add_option("--partition-method", o.partition_method,
                 "in-memory partitioning: metis, metis-recursive, block or random")
      ->capture_default_str()
      ->check(CLI::IsMember({"metis", "metis-recursive", "block", "random"}));
  app.add_flag("--no-feature-cache", o.no_feature_cache,
               "fetch ghost input features every epoch instead of once (to measure the cache)");
  app.add_option("--inject-failure", o.inject_failure,
                 "testing: RANK:EPOCH makes that rank throw after that epoch")
      ->group("Testing");
}

GcnOrder parse_order(const std::string& text) {
  if (text == "aggregate-first") return GcnOrder::AggregateThenTransform;
  if (text == "transform-first") return GcnOrder::TransformThenAggregate;
  return GcnOrder::Auto;
}

TrainJob make_job(const Options& o) {
  TrainJob job;
  job.dataset = o.dataset;
  job.load.data_dir = o.data_dir;
  job.load.split_index = o.split_index;
  job.load.seed = o.seed;
  job.threads = o.threads;
  job.device = parse_device_choice(o.device);
  job.normalize_features = o.normalize_features;
  if (!o.layers.empty()) job.layer_sizes = parse_layer_sizes(o.layers);
  job.hidden = o.hidden;
  job.num_layers = o.num_layers;
  job.model.dropout = o.dropout;
  job.model.order = parse_order(o.order);
  job.model.decay_first_layer_only = !o.decay_all_layers;
  job.train.epochs = o.epochs;
  job.train.eval_every = o.eval_every;
  job.train.seed = o.seed;
  job.train.adam.lr = o.lr;
  job.train.adam.weight_decay = o.weight_decay;
  job.train.adam.decoupled = o.optimizer == "adamw";
  job.partition_dir = o.partition_dir;
  job.partition.method = partition::parse_method(o.partition_method);
  job.partition.seed = o.seed;
  job.cache_input_features = !o.no_feature_cache;
  return job;
}

/// Prints progress: one rewritten line on a terminal, a plain line every k epochs otherwise
/// (mpirun hands every rank a pseudo-terminal even when its own output goes to a file).
class ProgressPrinter {
 public:
  ProgressPrinter(int epochs, int log_every)
      : epochs_(epochs), log_every_(log_every), tty_(isatty(STDOUT_FILENO) != 0 && !comm::launched_by_mpi()) {}

  void operator()(const EpochStats& s) {
    const std::string line = fmt::format(
        "epoch {:>4}/{}  loss {:.4f}  train {:6.2f}%  val {:6.2f}%  {:7.2f} ms", s.epoch, epochs_,
        s.train_loss, 100.0 * s.train.accuracy, 100.0 * s.val.accuracy, s.step_ms);
    if (tty_) {
      fmt::print("\r{}", line);
      if (s.epoch == epochs_) fmt::print("\n");
      std::fflush(stdout);
    } else if (s.epoch % log_every_ == 0 || s.epoch == epochs_ || s.epoch == 1) {
      fmt::print("{}\n", line);
    }
  }

 private:
  int epochs_;
  int log_every_;
  bool tty_;
};

/// --inject-failure RANK:EPOCH → {rank, epoch}; {-1, -1} when not given.
std::pair<int, int> parse_failure(const std::string& text) {
  if (text.empty()) return {-1, -1};
  const auto colon = text.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    return {std::stoi(text.substr(0, colon)), std::stoi(text.substr(colon + 1))};
  } catch (const std::exception&) {
    throw InvalidArgument("--inject-failure expects RANK:EPOCH, got '" + text + "'");
  }
}

/// The per-rank spread of the distributed figures, as a short table.
void print_distributed_table(const RunReport& report) {
  const auto row = [&](const char* label, const std::string& key, double scale, const char* unit) {
    fmt::print("  {:<22} {:>10.2f} {:>10.2f} {:>10.2f}  {}\n", label,
               report.get_number(key + ".max") * scale, report.get_number(key + ".mean") * scale,
               report.get_number(key + ".min") * scale, unit);
  };
  fmt::print("per rank (median epoch)     max       mean        min\n");
  row("epoch", "timing.epoch_ms", 1.0, "ms");
  row("compute", "timing.compute_ms", 1.0, "ms");
  row("communication", "timing.comm_ms", 1.0, "ms");
  row("waiting for halos", "timing.wait_ms", 1.0, "ms");
  row("halo sent", "comm.halo_bytes_sent_per_epoch", 1.0 / (1 << 20), "MiB");
  row("halo received", "comm.halo_bytes_received_per_epoch", 1.0 / (1 << 20), "MiB");
  row("owned rows", "distributed.owned_nodes", 1.0, "");
  row("ghost rows", "distributed.ghost_nodes", 1.0, "");
  row("peak memory", "memory.peak_rss_bytes", 1.0 / (1 << 20), "MiB");
  const double moved = report.get_number("comm.halo_bytes_per_epoch");
  const auto cached = static_cast<std::int64_t>(report.get_number("halo.cache_hit_rows"));
  std::string ratio;  // estimated for GCN models only
  if (report.has("comm.broadcast_1d_bytes_per_epoch") && moved > 0) {
    ratio = fmt::format(" ({:.1f}x less than a 1D broadcast)",
                        report.get_number("comm.broadcast_1d_bytes_per_epoch") / moved);
  }
  fmt::print("halo bytes per epoch, all ranks: {:.2f} MiB{}; ghost input rows served from the "
             "cache: {}\n",
             moved / (1 << 20), ratio, cached);
}

}  // namespace

int train_main(int argc, char** argv, const TrainProgram& program) {
  std::unique_ptr<comm::MpiEnvironment> mpi;
  std::shared_ptr<comm::Communicator> comm;
  try {
    // Without a launcher this is a one-rank job: MPI (and its plugins) is not even started.
    if (comm::launched_by_mpi()) {
      mpi = std::make_unique<comm::MpiEnvironment>(&argc, &argv);
      comm = comm::make_mpi_communicator();
    } else {
      comm = comm::make_self_communicator();
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "[rank {}] error: {}\n", comm::world_rank(), e.what());
    return 1;
  }
  const int rank = comm->rank();

  CLI::App app{program.description};
  Options options;
  add_flags(app, options, !program.model_builder);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
  }

  try {
    TrainJob job = make_job(options);
    job.comm = comm;
    job.model_builder = program.model_builder;
    job.model_name = program.model_name;
    // With a store, the dataset is the store's unless named explicitly (then it must match).
    if (!options.partition_dir.empty() && app.count("--dataset") == 0) job.dataset.clear();
    const auto [fail_rank, fail_epoch] = parse_failure(options.inject_failure);
    ProgressPrinter progress(options.epochs, options.log_every);
    const auto on_epoch = [&](const EpochStats& s) {
      if (rank == 0) progress(s);
      if (rank == fail_rank && s.epoch == fail_epoch) {
        throw std::runtime_error(fmt::format("injected failure after epoch {}", s.epoch));
      }
    };
    const TrainOutcome outcome = run_train_job(
        job, [&](const std::string& line) { if (rank == 0) fmt::print("{}\n", line); }, on_epoch);
    if (rank == 0) {
      fmt::print("test accuracy {:.2f}% (epoch {} of best validation accuracy {:.2f}%); "
                 "final test accuracy {:.2f}%\n",
                 100.0 * outcome.result.test_at_best_val.accuracy, outcome.result.best_epoch,
                 100.0 * outcome.result.best_val.accuracy,
                 100.0 * outcome.result.final_test.accuracy);
      fmt::print("median epoch {:.2f} ms; peak memory {:.1f} MiB\n", outcome.result.median_step_ms,
                 static_cast<double>(peak_rss_bytes()) / (1 << 20));
      if (outcome.report.has("distributed.ranks")) print_distributed_table(outcome.report);
      if (!options.report.empty()) {
        outcome.report.write(options.report);
        fmt::print("report written to {}\n", options.report);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "[rank {}] error: {}\n", rank, e.what());
    std::fflush(stderr);
    // Other ranks may be waiting in a collective for this one: end the whole job now.
    if (comm->size() > 1) comm->abort(1);
    return 1;
  }
  return 0;
}

} // namespace tessera::gnn
