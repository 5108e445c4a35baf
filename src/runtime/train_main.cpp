// train_main: tessera-train's main for any model (flags, MPI start, progress, report, errors).
// The only place below the apps that parses flags or prints.
#include "tessera/runtime/train_main.hpp"

#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/runtime/train_job.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fmt/core.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace tessera::runtime {

namespace {

struct Options {
  std::string dataset = "sbm:nodes=20000,classes=8,avg-degree=10,p-in=0.7,features=64,noise=2";
  std::string data_dir = datasets::default_data_dir();
  std::string layers;
  std::int64_t hidden = 16;
  int num_layers = 2;
  float dropout = 0.5f; // the program's default (TrainProgram::model)
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
  app.add_option("--hidden", o.hidden, "hidden width")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--num-layers", o.num_layers, "number of graph layers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--dropout", o.dropout, "dropout probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999));
  app.add_option("--lr", o.lr, "learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", o.weight_decay, "weight decay")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--optimizer", o.optimizer, "adam (L2 decay) or adamw (decoupled decay)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adam", "adamw"}));
  if (gcn) {
    app.add_flag(
        "--decay-all-layers", o.decay_all_layers,
        "apply weight decay to every layer (default: first layer only, as Kipf & Welling)");
  }
  app.add_option("--epochs", o.epochs, "training epochs")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--eval-every", o.eval_every, "evaluate every k epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of weights, dropout and generated data")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", o.device,
                 "where each rank trains: cpu, cuda (GPU of the rank's place on its node) or auto "
                 "(a GPU when the node has one for the rank, else the CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--split", o.split_index, "which stored split to use (minesweeper has 10)")
      ->capture_default_str();
  app.add_option("--normalize-features", o.normalize_features,
                 "row-normalize input features (Kipf & Welling, PyG NormalizeFeatures)")
      ->capture_default_str();
  if (gcn) {
    app.add_option("--order", o.order, "GCN product order: auto, aggregate-first, transform-first")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "aggregate-first", "transform-first"}));
  }
  app.add_option("--log-every", o.log_every,
                 "print a log line every k epochs when not on a terminal")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
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

/// The flags' defaults for `program`: its model settings.
Options defaults_of(const TrainProgram& program) {
  Options o;
  o.dropout = program.model.dropout;
  o.order = to_string(program.model.order);
  o.decay_all_layers = !program.model.decay_first_layer_only;
  return o;
}

TrainJob make_job(const Options& o, const TrainProgram& program) {
  TrainJob job;
  job.dataset = o.dataset;
  job.load.data_dir = o.data_dir;
  job.load.split_index = o.split_index;
  job.load.seed = o.seed;
  job.threads = o.threads;
  job.device = parse_device_choice(o.device);
  job.normalize_features = o.normalize_features;
  if (!o.layers.empty()) job.shape.layer_sizes = gnn::parse_layer_sizes(o.layers);
  job.shape.hidden = o.hidden;
  job.shape.num_layers = o.num_layers;
  job.model = program.model;
  job.model.dropout = o.dropout;
  job.model.order = parse_gcn_order(o.order);
  job.model.decay_first_layer_only = !o.decay_all_layers;
  job.model_builder = program.model_builder;
  job.model_name = program.model_name;
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
      : epochs_(epochs), log_every_(log_every),
        tty_(isatty(STDOUT_FILENO) != 0 && !comm::launched_by_mpi()) {}

  void operator()(const gnn::EpochStats& s) {
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

} // namespace

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
  Options options = defaults_of(program);
  add_flags(app, options, !program.model_builder);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
  }

  try {
    TrainJob job = make_job(options, program);
    job.comm = comm;
    // With a store, the dataset is the store's unless named explicitly (then it must match).
    if (!options.partition_dir.empty() && app.count("--dataset") == 0) job.dataset.clear();
    const auto [fail_rank, fail_epoch] = parse_failure(options.inject_failure);
    ProgressPrinter progress(options.epochs, options.log_every);
    const auto on_epoch = [&](const gnn::EpochStats& s) {
      if (rank == 0) progress(s);
      if (rank == fail_rank && s.epoch == fail_epoch) {
        throw std::runtime_error(fmt::format("injected failure after epoch {}", s.epoch));
      }
    };
    const RunSummary summary = run_train_job(
        job, [](const std::string& line) { fmt::print("{}\n", line); }, on_epoch);
    if (rank == 0) {
      const gnn::TrainResult& result = summary.result;
      fmt::print("test accuracy {:.2f}% (epoch {} of best validation accuracy {:.2f}%); "
                 "final test accuracy {:.2f}%\n",
                 100.0 * result.test_at_best_val.accuracy, result.best_epoch,
                 100.0 * result.best_val.accuracy, 100.0 * result.final_test.accuracy);
      fmt::print("median epoch {:.2f} ms; peak memory {:.1f} MiB\n", result.median_step_ms,
                 static_cast<double>(summary.per_rank.front().peak_rss_bytes) / (1 << 20));
      if (summary.ranks > 1) fmt::print("{}", rank_table(summary));
      if (!options.report.empty()) {
        write_report(summary, options.report);
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

} // namespace tessera::runtime
