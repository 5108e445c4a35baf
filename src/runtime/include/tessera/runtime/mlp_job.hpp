// One plain-MLP classifier run, from a dataset spec to a typed result: what tessera-mlp does, as a
// library call. Shuffled mini-batches over global sample ids, data-parallel over any rank count
// (a process on its own is a one-rank job), on the same engine as the GNN path.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/optimizer.hpp"
#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/gnn/trainer.hpp"
#include "tessera/ops/backends.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tessera::runtime {

/// Everything an MLP run needs: the data, where it runs, the model and how to train it.
struct MlpJob {
  // ---- the data ----
  /// A load_dataset spec: any Tessera dataset (its node features and labels; the graph is not
  /// used) or a generated one such as blobs:samples=100000,features=4096,classes=16.
  std::string dataset = "blobs:samples=10000,features=64,classes=4";
  datasets::LoadOptions load;
  /// Row-normalize the features (Kipf & Welling's preprocessing). Unset: as the dataset's recipe
  /// (datasets::Dataset::row_normalize: the Planetoid/LINQS citation sets).
  std::optional<bool> normalize_features;

  // ---- where it runs ----
  int threads = 0; ///< CPU threads; 0: OpenMP's default
  DeviceChoice device = DeviceChoice::Cpu;
  /// Where the parameters, their gradients, Adam's moments and the activations live: with a
  /// device budget (or a host or disk tier) they are packed into chunks of a ChunkManager that
  /// moves them between the tiers; with none (the default) they are plain device memory. The
  /// batch buffers (input rows, labels, logits' gradient) stay outside it: [batch, width] each.
  OffloadConfig offload;
  /// The job's ranks; null: this process alone, a one-rank job that never starts MPI.
  std::shared_ptr<comm::Communicator> comm;
  /// How long a rank may wait for another before the job ends naming it (comm::PeerWatch;
  /// --peer-timeout); unset: derived from the epochs so far.
  std::optional<double> peer_timeout;

  // ---- the model ----
  /// Widths {in, hidden..., classes} (in and classes must be the data's), or hidden ×
  /// num_layers Linear layers.
  gnn::ModelShape shape;
  float dropout = 0.5f; ///< before every Linear layer, the first one included, in [0, 1)
  bool bias = true;

  // ---- the training ----
  int epochs = 20;
  /// Samples per optimizer step over all ranks (the last batch of an epoch may be smaller).
  std::int64_t batch_size = 256;
  AdamConfig adam{};  ///< weight decay applies to the weights, not the biases
  int eval_every = 1; ///< evaluate (dropout off) every this many epochs and after the last
  /// What selects the best validation epoch; RocAuc (binary tasks only: refused at setup for
  /// data of another class count) also measures each split's ROC-AUC at every evaluation.
  gnn::Metric metric = gnn::Metric::Accuracy;
  std::uint64_t seed = 0; ///< keys the weights, the batch order and the dropout masks
  /// Seed of the random 60/20/20 split drawn for data without one; unset: load.seed. Refused
  /// for data with its own split (it would be ignored).
  std::optional<std::uint64_t> split_seed;
};

/// What one epoch did. The loss and metrics are the same on every rank; times are this rank's.
using MlpEpoch = gnn::EpochStats;

/// A whole MLP run: what ran, every epoch and the metrics that matter at its end. The same on
/// every rank except where a figure says it is the maximum over ranks.
struct MlpResult {
  MlpJob job; ///< the job as given (its communicator dropped)

  // ---- the data ----
  std::string dataset; ///< its name
  std::int64_t samples = 0, features = 0, classes = 0;
  bool sparse_features = false;
  bool normalized_features = false; ///< whether the features were row-normalized
  std::int64_t train_samples = 0, val_samples = 0, test_samples = 0;

  // ---- the model and where it ran ----
  std::vector<std::int64_t> layer_sizes; ///< {in, hidden..., classes}
  std::int64_t parameters = 0;           ///< trainable scalars
  std::string model_summary;             ///< one line per module
  /// Bytes of the parameters, their gradients and the activation buffers; of Adam's state.
  std::int64_t model_bytes = 0, optimizer_bytes = 0;
  std::string backend; ///< rank 0's, e.g. "cpu (2 threads, OpenBLAS SkylakeX)"
  int threads = 0;
  std::string blas_core;
  int ranks = 1;
  std::string communicator;
  std::int64_t steps_per_epoch = 0;

  // ---- what training did ----
  std::vector<MlpEpoch> history; ///< one entry per epoch, in order
  int best_epoch = 0;            ///< of the best validation job.metric (earliest on ties)
  gnn::SplitMetrics best_val, test_at_best_val, final_test;
  /// Median optimizer step over the run, the first (which allocates) left out; maximum over
  /// ranks. And samples per second it gives.
  double median_step_ms = 0.0;
  double samples_per_s = 0.0;
  double load_s = 0.0;  ///< loading (or generating) and preparing the data, maximum over ranks
  double setup_s = 0.0; ///< building the model and the batch buffers, maximum over ranks
  std::int64_t peak_rss_bytes = 0; ///< maximum over ranks
  bool offloaded = false;          ///< whether a chunk manager held the model (job.offload)
  std::int64_t device_slots = 0;   ///< chunks its device tier holds at once
  OffloadStats offload;            ///< its whole run (this rank's)
};

/// The order in which the training samples are visited, one epoch at a time: a permutation of
/// the global training ids keyed by (seed, epoch) through the counter RNG, so every rank (and
/// any rank count) draws the same one. Global batch b is positions [b·B, min((b+1)·B, n)) of it;
/// rank r of P takes the contiguous share [⌊r·m/P⌋, ⌊(r+1)·m/P⌋) of a batch of m samples.
class BatchSchedule {
public:
  /// train_ids: [n] global sample ids (any order; the order is not used). Throws
  /// InvalidArgument for an empty set or batch_size < 1.
  BatchSchedule(std::vector<std::int32_t> train_ids, std::int64_t batch_size, std::uint64_t seed);

  /// Shuffles for `epoch` (from 1): ids sorted by a 64-bit random key of (seed, epoch, id).
  void start_epoch(std::uint32_t epoch);
  /// [n] this epoch's order (the ids ascending before the first start_epoch).
  std::span<const std::int32_t> order() const noexcept { return order_; }
  /// Global batches per epoch: ⌈n / B⌉.
  std::int64_t num_batches() const noexcept;
  /// Global batch b: [m] ids, m = B except perhaps for the last.
  std::span<const std::int32_t> batch(std::int64_t b) const;
  /// Rank `rank`'s contiguous share of batch b (empty when the batch has fewer ids than ranks
  /// and this rank's share rounds to none).
  std::span<const std::int32_t> share(std::int64_t b, int rank, int ranks) const;
  /// The largest share any rank takes of any batch: ⌈B / ranks⌉ (at most n).
  std::int64_t max_share(int ranks) const noexcept;

private:
  std::vector<std::int32_t> order_;
  std::int64_t batch_size_;
  std::uint64_t seed_;
  std::vector<std::pair<std::uint64_t, std::int32_t>> keyed_; // reused by start_epoch
};

/// An MLP classifier and its optimizer, both on one backend: the model's parameters, gradients
/// and activation buffers and Adam's state all allocate there.
struct MlpModel {
  Sequential<float> model;
  std::unique_ptr<Adam<float>> optimizer; ///< over model.parameters()
};

/// Builds `layer_sizes` ({in, hidden..., classes}, at least two) as Dropout(p) → Linear →
/// ReLU+Dropout(p) → Linear → ... → Linear (no dropout modules when p = 0), weights
/// Glorot-initialized from (seed, layer), and Adam over every parameter with weight decay on the
/// weights only. Every rank building the same spec gets the same weights. Throws
/// InvalidArgument for fewer than two sizes, a size < 1 or p outside [0, 1).
MlpModel build_mlp(const BackendPtr& backend, const std::vector<std::int64_t>& layer_sizes,
                   float dropout, bool bias, std::uint64_t seed, const AdamConfig& adam);

/// Runs `job`: each rank loads the data (generated data identically on every rank), builds the
/// model, trains job.epochs epochs of shuffled mini-batches and returns the result, the same on
/// every rank. Each step every rank runs forward and backward on its share of the global batch
/// (the loss divided by the global batch size; dropout masks keyed by global sample id), the
/// gradients are summed over ranks in buckets while backward runs (DataParallel), and Adam
/// steps: P ranks train what one process trains, up to float reassociation. `log` receives
/// setup lines (rank 0); `on_epoch` each epoch (every rank; it may throw to end the job).
/// Collective over job.comm's ranks. Throws InvalidArgument naming the flag (--layers,
/// --batch-size, ...) for a job that does not fit its data, IoError / FormatError for data that
/// cannot be read, gnn::TrainingStopped on every rank when the loss diverges.
MlpResult run_mlp_job(const MlpJob& job, const std::function<void(const std::string&)>& log = {},
                      const std::function<void(const MlpEpoch&)>& on_epoch = {});

/// The result as a JSON run report (config, dataset, model, distributed, timing, memory,
/// metrics and the per-epoch history).
std::string mlp_report_json(const MlpResult& result);

/// Writes mlp_report_json to `path` (a temporary file in its folder, then renamed). Throws
/// IoError naming the file.
void write_mlp_report(const MlpResult& result, const std::string& path);

} // namespace tessera::runtime
