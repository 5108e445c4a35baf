// Inference with a trained model: a checkpoint's weights applied to a graph — the one it was
// trained on or another with the same feature width and classes — in one process or across the
// ranks of a partition store, with the metrics where the graph has labels and the per-node
// outputs (predictions, embeddings) written as numpy reads them.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/gnn/trainer.hpp"
#include "tessera/ops/backends.hpp"
#include "tessera/runtime/train_job.hpp"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tessera::runtime {

/// One inference run: the checkpoint, the graph, where it runs and what it writes.
struct PredictJob {
  /// A checkpoint folder (tessera-train --checkpoint-dir): its latest checkpoint's weights.
  std::string checkpoint_dir;
  /// The graph, as TrainJob takes it: a load_dataset spec and/or a partition store with one part
  /// per rank; neither: the dataset the checkpoint was trained on, by its name (a named or
  /// generated dataset). load.seed is ignored: data_seed seeds the generators (unset: the
  /// checkpoint's seed, so a generated graph is the one trained on). Data without a split gets
  /// the default one from split_seed (unset: the checkpoint's seed, the split training drew).
  std::string dataset;
  datasets::LoadOptions load;
  std::optional<std::uint64_t> data_seed;
  std::optional<std::uint64_t> split_seed;
  std::string partition_dir;
  partition::Options partition; ///< the in-memory cut of a distributed run without a store
  /// Row-normalize the input features; unset: as the checkpoint's run did (else the data's
  /// recipe, for a checkpoint that did not record it).
  std::optional<bool> normalize_features;
  int threads = 0;
  DeviceChoice device = DeviceChoice::Cpu;
  std::shared_ptr<comm::Communicator> comm; ///< null: this process alone
  OffloadConfig offload;                    ///< a memory budget, as in training
  /// The metric the summary leads with (RocAuc also measures each split's ROC-AUC).
  gnn::Metric metric = gnn::Metric::Accuracy;
  NodeOutputs outputs;
  /// With a link-prediction checkpoint: the node pairs to score, an .npz holding `pairs` (int
  /// [2, E]: sources, then destinations). outputs.predictions then receives each pair's
  /// probability, the sigmoid of its decoder's score (.npy: float32 [E]; .npz: src, dst,
  /// score, probability), in the file's order.
  std::string pairs;
  /// With a link-prediction checkpoint: encode with the message-passing graph of this stored
  /// split (its train_pos edges, as training saw them: tessera-train --link-split-out), so the
  /// held-out pairs score as they did in training. Empty: the graph as given, every edge.
  std::string link_split_in;
  /// A model of a program's own builder (checkpoint model names that are not built in); empty:
  /// the built-in model the checkpoint names.
  gnn::ModelBuilder model_builder;
  std::optional<double> peer_timeout;
};

/// What an inference run did: the model, the graph and the metrics.
struct PredictSummary {
  std::string model_name;
  std::vector<std::int64_t> layer_sizes;
  int checkpoint_epoch = 0; ///< epochs the checkpoint's weights were trained for
  std::string trained_on;   ///< the dataset the checkpoint was trained on
  std::string dataset;      ///< the dataset predicted on
  bool same_data = false;   ///< whether it is the data trained on (the same checksum)
  std::int64_t nodes = 0, features = 0, classes = 0;
  bool row_normalized = false;
  int ranks = 1;
  std::string task = "node"; ///< what the checkpoint's model was trained for (node or link)
  std::int64_t pairs = 0;    ///< pairs scored (PredictJob::pairs)
  /// Train, validation and test metrics (evaluation step: dropout off) and the splits' sizes.
  std::array<gnn::SplitMetrics, 3> metrics;
  std::array<std::int64_t, 3> split_rows{};
  double seconds = 0.0; ///< loading, building and inference
};

/// Runs `job`: reads the checkpoint (every rank), gets this rank's graph as run_train_job does,
/// builds the checkpoint's model on it, puts the weights in, measures the metrics and writes the
/// outputs. Refuses, before any inference, a graph the model cannot read (another feature width
/// or class count: InvalidArgument naming both and the checkpoint) and a checkpoint of a model
/// it cannot build. Collective over job.comm; the same summary on every rank. P ranks predict
/// what one process predicts (up to float reassociation).
PredictSummary run_predict_job(const PredictJob& job,
                               const std::function<void(const std::string&)>& log = {});

} // namespace tessera::runtime
