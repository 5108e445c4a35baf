// What a training job did, gathered once from every rank into one typed value: the JSON report
// and the per-rank table are both written from it.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/gnn/trainer.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::runtime {

/// One rank's figures. Per-epoch ones are medians over the training steps after the first
/// (which allocates); per-layer bytes are totals over the run, training and evaluation.
struct RankFigures {
  double epoch_ms = 0.0;   ///< a training step
  double compute_ms = 0.0; ///< of it: neither communication nor waiting
  double comm_ms = 0.0;    ///< of it: posting halo messages and the gradient/loss allreduce
  double wait_ms = 0.0;    ///< of it: blocked waiting for halo rows
  double halo_bytes_sent = 0.0, halo_bytes_received = 0.0; ///< per training step
  std::int64_t owned_rows = 0, ghost_rows = 0, interior_rows = 0;
  double load_s = 0.0;  ///< getting the rank's graph: loading, partitioning, receiving
  double setup_s = 0.0; ///< halo plan, cached ghost input rows, matrices, the model
  /// Bytes of the aggregation matrices, the layer-0 input and the model's parameters and
  /// buffers; the process's peak resident memory.
  std::int64_t graph_bytes = 0, feature_bytes = 0, model_bytes = 0, peak_rss_bytes = 0;
  /// Under a memory budget (zero without): bytes moved between the tiers and time stalled on
  /// chunk copies per training epoch (evaluation included), and the device tier's peak.
  double offload_moved_bytes = 0.0, offload_stall_ms = 0.0;
  std::int64_t offload_peak_device_bytes = 0;
  /// Per aggregating layer, in model order: halo bytes over the run (0 for cached inputs).
  std::vector<std::int64_t> layer_bytes_sent, layer_bytes_received;
  /// Per GCN layer when the cost model ran (a distributed GCN without a budget), else empty:
  /// its predicted step (forward + backward, ms) and the median measured one (host time).
  std::vector<double> layer_predicted_ms, layer_measured_ms;
  /// Sampled training (zero otherwise), medians over the epochs: steps and the epoch's time,
  /// the time a step waited for its batch, and per step the seeds, the edges sampled, the input
  /// rows, those another rank owns found in the hot-feature cache and fetched, and the bytes
  /// received.
  std::int64_t steps = 0;
  double batch_epoch_ms = 0.0, batch_wait_ms = 0.0, batch_exchange_ms = 0.0;
  double seeds = 0.0, sampled_edges = 0.0, input_rows = 0.0, cache_hits = 0.0, fetched_rows = 0.0;
  double batch_bytes = 0.0;
};

/// A stall of one rank (comm::Stall), for the summary.
struct RankStall {
  int rank = 0;
  comm::Stall stall;
};

/// Every rank's stalls, in rank order. Collective over `comm` (one broadcast per rank).
std::vector<RankStall> gather_stalls(comm::Communicator& comm,
                                     const std::vector<comm::Stall>& mine);

/// "rank 1 waited 12.3 s (15 median epochs) for the halo exchange of layer 1 (forward) during
/// epoch 7", one line per stall.
std::string describe_stalls(const std::vector<RankStall>& stalls);

/// One re-cut of the graph while training (TrainJob::rebalance_threshold).
struct RebalanceStep {
  int epoch = 0;                 ///< after this epoch
  double imbalance_before = 0.0; ///< max / mean of the ranks' compute per epoch that triggered it
  /// The same, measured over the epochs after the move; 0 when training ended first.
  double imbalance_after = 0.0;
  /// [ranks] the part weights the new cut follows (relative, the largest 1): the shares that
  /// equalize the ranks' times as fitted to the measured epochs
  std::vector<double> shares;
  std::int64_t rows_moved = 0;  ///< rows whose owner changed
  std::int64_t bytes_moved = 0; ///< tile bytes rank 0 sent to the other ranks
  double seconds = 0.0;         ///< cutting, sending, rebuilding halo plans and the model
};

/// What a job did, the same on every rank.
struct RunSummary {
  // ---- what ran ----
  std::string dataset_spec; ///< as the job named it (empty: a store's dataset)
  std::string model_name;
  /// The model's widths {in, hidden..., classes}, and the settings it was built from.
  std::vector<std::int64_t> layer_sizes;
  gnn::ModelConfig model;
  gnn::TrainConfig train;
  bool normalize_features = true; ///< whether the input features were row-normalized
  std::string backend; ///< rank 0's, e.g. "cpu (2 threads, OpenBLAS SkylakeX)"
  int threads = 0;
  std::string blas_core;

  // ---- the data ----
  std::string dataset; ///< its name
  /// Where the split came from: "dataset" (the data's own), "random" (60/20/20 drawn with
  /// split_seed: the data had none) or "store" (the partition store's parts). Its sizes are
  /// TrainResult's train_rows, val_rows and test_rows.
  std::string split_source = "dataset";
  std::uint64_t split_seed = 0;
  std::int64_t nodes = 0;
  /// Nonzeros of the matrix the GCN multiplies (Â, self-loops included), or of the adjacency
  /// for other models: what PyTorch's GCN is compared on.
  std::int64_t edges = 0;
  std::int64_t features = 0;
  bool sparse_features = false; ///< as trained on (TrainJob::feature_layout)
  double feature_density = 0.0; ///< nonzeros / entries of the feature matrix
  std::int64_t classes = 0;

  // ---- the ranks ----
  int ranks = 1;
  std::string communicator;  ///< "one process", "MPI (4 ranks)", "NCCL ... over MPI ..."
  std::string partition;     ///< "metis (in memory)", the store's folder, or "none (one rank)"
  std::string halo_exchange; ///< "exact, fp32 messages", "stale, ...", or "none (one rank)"
  /// Per aggregating layer: how it exchanged ("no halo" for cached inputs; the scheduler's
  /// pick under --schedule auto).
  std::vector<std::string> layer_exchange;
  /// "full" or "sampled" (mini-batches: TrainJob::sampled), with the sampled run's settings.
  std::string mode = "full";
  std::vector<int> fanouts;
  std::int64_t batch_size = 0;
  std::int64_t feature_cache_bytes = 0;
  int prefetch_batches = 0; ///< batches sampled ahead on a thread (0: inline, as over ranks)
  bool cache_input_features = true;
  std::vector<RankFigures> per_rank; ///< [ranks]
  /// Halo bytes all ranks send per training step, and what CAGNET's 1D broadcast would move for
  /// the same layers (estimated for the GCN only).
  double halo_bytes_per_epoch = 0.0;
  std::optional<double> broadcast_1d_bytes_per_epoch;
  std::int64_t cache_hit_rows = 0;      ///< ghost input rows served from the cache, all ranks
  std::int64_t feature_fetch_bytes = 0; ///< what fetching them once moved, all ranks

  // ---- balancing ----
  std::string balance = "none";    ///< none, given or measured (a store's: as it was cut)
  std::vector<double> rank_speeds; ///< [ranks] what the first cut followed (empty: equal)
  double row_cost = 0.0;           ///< a row's cost in nonzeros, what vertices weighed
  std::vector<RebalanceStep> rebalances;
  /// Median training step after the last rebalance (its first epoch excluded); 0 without one.
  double balanced_epoch_ms = 0.0;

  // ---- memory budgets ----
  bool offloaded = false;     ///< whether each rank's tensors lived in a ChunkManager
  OffloadConfig offload;      ///< the job's budgets
  OffloadStats offload_total; ///< what this rank's tiers did over the run (rank 0 reports)

  // ---- what training did ----
  gnn::TrainResult result; ///< metrics, best epoch, per-epoch history, phase times
  /// Waits on peers longer than comm::PeerWatch::kStallEpochs median epochs that ended, on
  /// every rank (a stopped rank that was continued, a node that paused): what no limit ended.
  std::vector<RankStall> stalls;
};

/// Every rank's figures, in rank order, from each rank's own (`mine`; every rank must have the
/// same number of layers). Collective over `comm`.
std::vector<RankFigures> gather_rank_figures(comm::Communicator& comm, const RankFigures& mine);

/// The summary as the JSON run report (config, dataset, distributed, timing, comm, halo,
/// memory, metrics and the per-epoch history; per-rank figures as max / mean / min).
std::string report_json(const RunSummary& summary);

/// Writes report_json to `path` (a temporary file in its folder, then renamed). Throws IoError
/// naming the file.
void write_report(const RunSummary& summary, const std::string& path);

/// The "format" every run report (tessera-train's, tessera-mlp's) carries.
inline constexpr const char* kReportFormat = "tessera-run-report";

/// The preflight of a report, for before training: throws IoError naming `path` when it could not
/// be written later (io::check_output_file's rules), or when it is an existing file that is not a
/// Tessera run report — a report replaces only an earlier report (or an empty file), never a
/// dataset, a program or any other file. Creates nothing that stays.
void check_report_path(const std::string& path);

/// The per-rank spread of the figures (max, mean, min over ranks), one line each, and the
/// halo bytes all ranks move: what train_main prints after a run of several ranks.
std::string rank_table(const RunSummary& summary);

} // namespace tessera::runtime
