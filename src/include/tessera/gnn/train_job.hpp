// One training run from a dataset spec to a report: what tessera-train does, as a library call.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/report.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/gnn/model_graph.hpp"
#include "tessera/gnn/trainer.hpp"
#include "tessera/partition/partition.hpp"

namespace tessera::gnn {

struct TrainJob;  // below

/// Builds a model on one process's graph or one rank's tile: its aggregating layers take their
/// matrices and halos from `graph`, its input width and class count too; `job` carries the
/// sizes, dropout and seed the job was given. The model maps the layer-0 input
/// ([graph.input_rows(), F]) to logits of the owned rows ([graph.n_owned(), classes]). Weights
/// must be drawn from job.train.seed alone, so every rank builds the same model.
using ModelBuilder = std::function<Sequential<float>(ModelGraph& graph, const TrainJob& job)>;

/// Everything a training run needs: the GCN of Kipf & Welling by default, or any model.
struct TrainJob {
  std::string dataset;
  datasets::LoadOptions load;
  int threads = 0;  ///< 0: OpenMP's default
  /// Where each rank trains (select_backend with the rank's place on its node). The data is
  /// loaded and prepared on the host either way.
  DeviceChoice device = DeviceChoice::Cpu;
  bool normalize_features = true;
  /// Explicit sizes ({in, ..., classes}); when empty: in, hidden × (num_layers - 1), classes.
  std::vector<std::int64_t> layer_sizes;
  std::int64_t hidden = 16;
  int num_layers = 2;
  GcnConfig model;  ///< layer_sizes inside are filled from the fields above
  TrainConfig train;
  /// A custom model (empty: the GCN of `model`), and its name in logs and the report. The
  /// builder reads hidden, num_layers and model.dropout as it sees fit.
  ModelBuilder model_builder;
  std::string model_name = "GCN";

  /// The job's ranks. Null or one rank without partition_dir: the whole graph in one process.
  std::shared_ptr<comm::Communicator> comm;
  /// A partition store with one part per rank: each rank loads only its part (and `dataset`,
  /// when given, must be the store's dataset). Empty: rank 0 loads and partitions the graph
  /// with `partition` and sends every rank its tile.
  std::string partition_dir;
  partition::Options partition;
  /// Ghost input features are fetched once and reused every epoch (exact). Off only to measure
  /// what the cache saves.
  bool cache_input_features = true;
};

/// What run_train_job returns (on every rank).
struct TrainOutcome {
  TrainResult result;
  /// Configuration, dataset, per-phase times, memory and metrics.
  RunReport report;
};

/// Loads the dataset (or this rank's tile), builds the model on it, trains, and fills the
/// report. `log` receives human-readable setup lines; `on_epoch` each epoch's stats. With a
/// communicator of several ranks (or a partition store): collective, every rank returns the
/// same metrics, and the report holds per-rank figures as max/mean/min.
TrainOutcome run_train_job(const TrainJob& job, const std::function<void(const std::string&)>& log,
                           const std::function<void(const EpochStats&)>& on_epoch = {});

}  // namespace tessera::gnn
