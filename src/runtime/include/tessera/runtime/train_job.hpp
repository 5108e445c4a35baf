// One training run from a dataset spec to a run summary: what tessera-train does, as a library
// call. One path for any rank count: a process on its own is a one-rank job.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/gnn/link_prediction.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/gnn/trainer.hpp"
#include "tessera/ops/backends.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera/runtime/run_summary.hpp"
#include "tessera/runtime/simulation.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime {

/// How the layers' exchanges are chosen (--schedule).
enum class Schedule {
  Fixed, ///< every layer as the flags say
  Auto   ///< per layer, by the cost model, among what the user allows
};
/// "fixed" or "auto" (the flag's values: parse_schedule in cli_options.hpp).
std::string to_string(Schedule schedule);

/// Which nodes per-node outputs hold (NodeOutputs::nodes, --predict-nodes).
enum class NodeSet {
  All,   ///< every node of the graph
  Train, ///< the nodes of the training split
  Val,   ///< ... of the validation split
  Test   ///< ... of the test split
};
/// "all", "train", "val", "test".
std::string to_string(NodeSet nodes);
/// The set named `text`; InvalidArgument naming the valid names otherwise.
NodeSet parse_node_set(const std::string& text);

/// Per-node outputs of a trained model (--predictions, --embeddings), computed in an evaluation
/// step (dropout off) with the weights training ended with (those its last checkpoint holds),
/// gathered from every rank and written by rank 0 in increasing node id, as numpy reads them.
/// A path ending in .npy gets one float32 array; one ending in .npz an archive with the node
/// ids beside it.
struct NodeOutputs {
  /// .npy: [rows, classes] float32, each row's class probabilities (the softmax of its logits);
  /// .npz: node_id (int64 [rows]), predicted (int64 [rows], the most probable class, the first
  /// of a tie), label (int64 [rows], the data's class; -1 where it has none), probabilities and
  /// logits (float32 [rows, classes]). Empty: not written.
  std::string predictions;
  /// .npy: [rows, width] float32, the representation of layer embedding_layer; .npz: node_id
  /// and embeddings. Empty: not written.
  std::string embeddings;
  /// Whose representation `embeddings` holds: hidden layer (GCN, GraphSAGE, GIN, GAT, MLP) or
  /// residual block k, from 1 (gnn::infer); 0: the last one (what the output layer reads).
  int embedding_layer = 0;
  /// The rows: every node, or the nodes of one split.
  NodeSet nodes = NodeSet::All;
  /// Whether the model's output is itself the nodes' representation (link prediction's
  /// encoder): embedding_layer 0 then writes it, and predictions are refused.
  bool output_is_embedding = false;
  /// The model's weights as an .npz other tools load: one float32 array per parameter, keyed by
  /// its name ("conv0.weight", [in, out] as x·W reads it), and `tessera_model`, the UTF-8 bytes
  /// (uint8) of the run's JSON as a checkpoint records it (model name, layer sizes, settings,
  /// row normalization). Empty: not written.
  std::string weights;
};

/// What a run trains the model for (--task).
enum class Task {
  Node, ///< node classification: the model's outputs are each node's class logits
  Link  ///< link prediction: the model encodes nodes, a dot product of two scores their link
};
/// "node" or "link"; parse_task: InvalidArgument naming the valid names for anything else.
std::string to_string(Task task);
Task parse_task(const std::string& text);

/// Link prediction's settings (Task::Link; gnn::split_edges, gnn::train_link_predictor).
struct LinkOptions {
  double val_fraction = 0.05, test_fraction = 0.10; ///< of the edges, held out of message passing
  std::int64_t embedding_width = 16;                ///< the encoder's output width
  std::vector<int> hits_k = gnn::default_hits_k();  ///< the Ks of Hits@K
  /// Where to record the split (an .npz of int64 [2, E] node-id pairs: train_pos, val_pos,
  /// val_neg, test_pos, test_neg, as PyG's edge_label_index); empty: not written.
  std::string split_out;
  /// A stored split to train on instead (an .npz as split_out writes it; ids in [0, nodes), each
  /// training pair an edge of the graph); the message-passing graph is its training edges, and
  /// the fractions are not used. Empty: drawn.
  std::string split_in;
  /// The pair decoder: "dot" (the embeddings' dot product) or "mlp" (gnn::MlpDecoder: the
  /// ends' elementwise product through decoder_layers Linear layers of decoder_hidden units,
  /// ReLU between; 0: the embedding width).
  std::string decoder = "dot";
  std::int64_t decoder_hidden = 0;
  int decoder_layers = 2;
};

/// Sampled mini-batch training's settings (TrainJob::sampled; gnn::train_sampled_node_classifier).
struct SampledOptions {
  bool enabled = false;                ///< --mode sampled (false: full-graph training)
  std::vector<int> fanouts = {25, 10}; ///< per hop from the seeds, one per graph layer; -1: all
  std::int64_t batch_size = 512;       ///< seeds per step (per rank on average: MiniBatchConfig)
  bool replace = false;                ///< sample neighbours with replacement
  /// Bytes of each rank's hot-feature cache: the input rows of the remote nodes most often next
  /// to its rows, fetched once (gnn::RankSampler); 0: none. Unset (the default): the bytes of
  /// the rank's own input rows — as many remote rows as it owns. Unused on one rank.
  std::optional<std::size_t> cache_bytes;
  /// Batches sampled ahead on a thread of their own in one process (gnn::MiniBatchConfig).
  int prefetch = 2;
};

/// Everything a training run needs: the data, where it runs, the model and how to train it.
struct TrainJob {
  // ---- the data ----
  std::string dataset; ///< a load_dataset spec; may be empty with partition_dir (the store's)
  datasets::LoadOptions load;
  /// Seed of the random 60/20/20 split drawn for data without one
  /// (datasets::use_default_split_when_missing); unset: train.seed. Set for data that has a
  /// split, it is refused (it would be ignored).
  std::optional<std::uint64_t> split_seed;
  /// Row-normalize the input features; not set: as the data's recipe says
  /// (datasets::Dataset::row_normalize: the Planetoid/LINQS citation sets).
  std::optional<bool> normalize_features;
  /// How the input features are stored for training: Auto stores them dense from
  /// graph::kDenseFeatureDensity nonzeros (where dense trains faster), CSR below.
  graph::FeatureLayout feature_layout = graph::FeatureLayout::Auto;

  // ---- where it runs ----
  int threads = 0; ///< CPU threads; 0: OpenMP's default
  /// Where each rank trains (select_backend with the rank's place on its node). The data is
  /// loaded and prepared on the host either way.
  DeviceChoice device = DeviceChoice::Cpu;
  /// The job's ranks; null: this process alone, a one-rank job that never starts MPI.
  std::shared_ptr<comm::Communicator> comm;
  /// A partition store with one part per rank: each rank loads only its part (and `dataset`,
  /// when given, must be the data the store was cut from: the same checksum, whatever its name).
  /// Empty: rank 0 loads the graph, cuts it with `partition`
  /// (not at all for one rank) and sends every rank its tile.
  std::string partition_dir;
  partition::Options partition;
  /// Speed-aware balancing of the in-memory cut (several ranks, no partition_dir): what the
  /// parts' shares follow — equal (None), the speeds in rank_speeds (Given), or the speeds the
  /// ranks measure at start with the cost model (Measured); balanced, a vertex weighs its
  /// cost-model cost (degree + 1 + the row cost). Balanced jobs also rebalance: see below.
  partition::Balance balance = partition::Balance::None;
  std::vector<double> rank_speeds; ///< Given: one positive speed per rank
  /// Balanced jobs re-cut the graph at an epoch boundary when max / mean of the ranks' measured
  /// compute per epoch exceeds this, refitting the speeds from the measured times (> 1; 0:
  /// never), at most rebalance_max_moves times. The computed function does not change.
  double rebalance_threshold = 1.1;
  int rebalance_max_moves = 3;
  /// What the job simulates, for tests and benchmarks (the testing seam): slower ranks, a
  /// network link, a failure; nothing by default.
  Simulation simulation;
  /// Memory budgets (--device-memory, --host-memory, --offload-dir, ...): with a budget or a
  /// tier, each rank's features, matrices, activations, weights, gradients and Adam state live
  /// in a ChunkManager of its own and move in chunks; default: none, everything stays put.
  OffloadConfig offload;
  /// Ghost input features are fetched once and reused every epoch (exact). Off only to measure
  /// what the cache saves.
  bool cache_input_features = true;
  /// How the layers' halo messages travel: the mode (--staleness, --halo-skip-threshold) and
  /// the rows' precision (--halo-precision); exact fp32 by default, the others opt-in and
  /// inexact.
  comm::ExchangeOptions exchange;
  /// Fixed: every layer exchanges with `exchange`. Auto (--schedule auto): each layer gets the
  /// exchange the cost model predicts fastest on the slowest rank, among `exchange` and the
  /// modes and precisions allowed here (--allow-inexact; none: exact fp32 or `exchange`).
  Schedule schedule = Schedule::Fixed;
  std::vector<comm::HaloMode> allowed_modes;
  std::vector<comm::HaloPrecision> allowed_precisions;

  // ---- the model ----
  gnn::ModelShape shape;  ///< the widths: explicit layer sizes, or hidden × num_layers
  gnn::ModelConfig model; ///< dropout, bias, product order, weight-decay scope
  /// Builds the model on this rank's graph (empty: the GCN of Kipf & Welling, gnn::build_gcn),
  /// named `model_name` in logs and the summary.
  gnn::ModelBuilder model_builder;
  std::string model_name = "GCN";

  // ---- the training ----
  /// Node classification, or link prediction with `link`'s split and encoder width (on any rank
  /// count, the same split and negatives; the split's seed is train.seed, its validation ROC-AUC
  /// selects the epoch; no rebalancing yet).
  Task task = Task::Node;
  /// Sampled mini-batch training instead of full-graph (GraphSAGE, CPU, in memory for now).
  SampledOptions sampled;
  LinkOptions link;
  gnn::TrainConfig train; ///< epochs, Adam, evaluation cadence, and the seed of weights and masks

  // ---- checkpoints and stopping ----
  /// Rank 0 claims this folder at the start (io::OutputFolder, kind "checkpoint"; an existing
  /// checkpoint folder only with replace_checkpoints or when it is resume_dir) and writes a
  /// checkpoint there every checkpoint_every epochs, after the last and when stopped. Empty:
  /// none.
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  bool replace_checkpoints = false;
  /// Continue from the latest checkpoint in this folder (empty: start at epoch 1): it must be
  /// of the same data and model shape, made at any rank count.
  std::string resume_dir;
  /// Polled after every epoch on every rank: a nonzero signal number stops training after that
  /// epoch on every rank (with a checkpoint when checkpoint_dir is set); see gnn::TrainControl.
  std::function<int()> stop_requested;
  /// How long a rank may wait for a peer (a halo, a collective, a gradient sum) before the job
  /// ends naming it (comm::PeerWatch; --peer-timeout). Unset: the larger of 60 s and 50 x the
  /// slowest epoch so far, 10 minutes before the first epoch ends.
  std::optional<double> peer_timeout;
  /// Predictions and embeddings written after training (none by default).
  NodeOutputs outputs;
  /// Called on every rank once the data and the model are ready, just before the first epoch
  /// (tessera-train's signal handler ends the process at once before it, and asks for a stop
  /// after an epoch from then on).
  std::function<void()> training_starts;
};

/// Runs `job` in four steps — this rank's graph (the whole graph on one rank, else its tile);
/// the model on it; training; the summary — and returns the summary, the same on every rank.
/// `log` receives human-readable setup lines (on rank 0); `on_epoch` each epoch's stats (on
/// every rank; it may throw to end the job). Collective over job.comm's ranks: every rank
/// returns the same metrics, and P ranks train what one process trains (up to float
/// reassociation). Throws InvalidArgument, IoError or FormatError naming what is wrong with the
/// job or its data, before training where it can (a checkpoint folder that cannot be written
/// fails before loading); gnn::TrainingStopped on every rank when a stop is asked or the loss
/// diverges.
RunSummary run_train_job(const TrainJob& job,
                         const std::function<void(const std::string&)>& log = {},
                         const std::function<void(const gnn::EpochStats&)>& on_epoch = {});

} // namespace tessera::runtime
