// Step 1 of a training job: this rank's share of the graph, ready to build a model on.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/failure.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/graph/features.hpp"
#include "tessera/partition/local_graph.hpp"
#include "tessera/runtime/balance.hpp"
#include "tessera/runtime/train_job.hpp"

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tessera::runtime {

using Log = std::function<void(const std::string&)>;

/// This rank's tile — the whole graph on a one-rank job — with the owned rows interior first,
/// the halo plan over it, and the layer-0 input.
struct JobGraph {
  std::string dataset; ///< the dataset's name
  /// partition::dataset_checksum of the whole data, when the job checkpoints or resumes (empty
  /// otherwise): a checkpoint records it, a resume compares it.
  std::string dataset_checksum;
  /// Where the feature width comes from, for messages ("FILE: array 'attr_shape'"; empty when
  /// generated).
  std::string feature_source;
  /// The data had no split and rank 0 drew the default one with job.split_seed.
  bool split_drawn = false;
  /// Whether the data's recipe row-normalizes its features (datasets::Dataset::row_normalize,
  /// a store's Manifest::row_normalize), and whether this job did (job.normalize_features, else
  /// the recipe).
  bool recipe_row_normalize = false;
  bool row_normalized = false;
  /// Owned-then-ghost numbering; its features moved into `features`.
  partition::LocalGraph tile;
  std::int64_t n_interior = 0; ///< owned rows [0, n_interior) read no ghost row
  std::shared_ptr<const comm::HaloPlan> plan;
  /// The layer-0 input in host memory: [n_owned + n_ghost, F] with the ghost rows fetched once
  /// (the cache), else [n_owned, F]. Released once a model holds a copy in the backend's memory
  /// or in chunks.
  graph::Features features;
  comm::HaloStats feature_fetch; ///< what fetching the ghost input rows moved
  /// Nonzeros / entries of the whole feature matrix, and whether job.feature_layout made this
  /// tile store them otherwise than they were loaded.
  double feature_density = 0.0;
  /// The largest absolute value of the layer-0 input over every rank (after normalization).
  double feature_max_abs = 0.0;
  bool features_converted = false;
  double load_s = 0.0;  ///< loading and, in memory, partitioning and handing out
  double setup_s = 0.0; ///< interior ordering, halo plan, ghost input rows
};

/// Speed-aware balancing of an in-memory cut (job.balance): where the ranks' speeds are
/// measured, what the parts were cut for and, on rank 0 of a job that may re-cut them
/// (rebalancing), the whole graph and its current cut.
struct Balancing {
  BackendPtr backend;    ///< this rank's compute backend: where its speed is measured
  double slowdown = 1.0; ///< this rank's simulated slowdown (--simulate-rank-speed)
  /// Set by get_job_graph when the parts were balanced (job.balance given or measured, more
  /// than one rank, in memory).
  std::optional<BalanceTargets> targets;
  bool keep_graph = false;                ///< rank 0 keeps `whole` and `parts` to re-cut
  std::optional<datasets::Dataset> whole; ///< rank 0 only
  partition::Partition parts;             ///< rank 0 only: the current cut
};

/// Gets this rank's graph for `job`: from its part of job.partition_dir, or from rank 0, which
/// loads the dataset (adding the default split when it has none:
/// datasets::use_default_split_when_missing), partitions it for the ranks and hands out the
/// tiles; row-normalizes the features when asked. `say` logs on rank 0.
/// Before any halo exchange every rank checks, in one collective, that every part loaded and
/// that all tiles agree on part count, graph size, dataset, classes, labels and features: a
/// failure on one rank is thrown on every rank, naming the rank and its file. With both
/// partition_dir and dataset, rank 0 loads the dataset and the store is refused (on every rank)
/// unless it was cut from that data (dataset checksum). Collective over `comm`. Throws
/// InvalidArgument when the data cannot be trained on (no features or labels, one node, one
/// class), naming the dataset and what it holds.
/// With job.balance (in memory, several ranks), the parts' shares follow the ranks' speeds —
/// given, or measured by every rank on a probe (measure_balance_targets) once rank 0 has loaded
/// the data — and vertices weigh their cost-model cost; recorded in `balancing`.
/// Whether the ranks cut the graph together from their own rows (every rank reads only its share;
/// no rank holds the whole graph): ptscotch always, hypergraph over several ranks. Otherwise rank
/// 0 loads and cuts the whole graph (or the ranks load a partition store).
bool cut_from_rows(const TrainJob& job, int ranks);

JobGraph get_job_graph(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                       const BackendPtr& host, const Log& say, Balancing& balancing);

/// Cuts rank 0's kept graph again for part weights `shares` (balancing.keep_graph; the targets
/// keep the first cut's speeds), sends every rank its new
/// tile and prepares it as get_job_graph does; fills `step`'s rows and bytes moved. Collective.
JobGraph recut_job_graph(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                         const BackendPtr& host, Balancing& balancing,
                         const std::vector<double>& shares, RebalanceStep& step);

} // namespace tessera::runtime
