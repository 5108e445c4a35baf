// Sampled mini-batch training of a node classifier (issue 41): a step per batch of seed nodes
// on the blocks their sampled neighbourhoods make, evaluation by full-graph inference.
#pragma once

#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/model_graph.hpp"
#include "tessera/gnn/sampling.hpp"
#include "tessera/gnn/trainer.hpp"
#include "tessera/graph/features.hpp"

#include <cstdint>
#include <functional>

namespace tessera::gnn {

/// How sampled training draws its batches.
struct MiniBatchConfig {
  std::vector<int> fanouts;      ///< per hop from the seeds (sample_blocks), one per graph layer
  bool replace = false;          ///< sample with replacement
  /// Seeds per step (the last batch of an epoch may be smaller); over ranks the mean per rank:
  /// each rank's batch is its share of ranks × batch_size, by the training nodes it owns.
  std::int64_t batch_size = 512;
  /// Batches sampled ahead on a thread of their own (a bounded queue); 0: each step samples its
  /// batch itself. Over ranks the thread exchanges on a concurrent duplicate of the job's
  /// communicator: without one (MPI below MPI_THREAD_MULTIPLE) batches are sampled inline.
  int prefetch = 2;
};

/// The full-graph twin sampled training evaluates with: a model of the same builder and spec on
/// the whole graph (over ranks, on this rank's tile with its halos), whose weights are overwritten
/// by the trained model's before each evaluation — exact full-graph inference, distributed as
/// the full-graph path is.
struct FullGraphModel {
  Sequential<float>* model = nullptr;
  Input<float> features;                      ///< its layer-0 input
  const Distribution* distribution = nullptr; ///< over ranks: its rows and halos
};

/// Trains `model` — built on `graph` (ModelGraph::blocks, one graph per fanout) — by sampled
/// mini-batches for config.epochs epochs: each epoch this rank's training nodes shuffled into
/// batches (seed_batches, from config.seed and the epoch) and for each batch its blocks
/// (sampler.sample) set into `graph`, the input nodes' features gathered
/// (sampler.gather_features), forward, the cross-entropy over its seeds, backward and one Adam
/// step. Over ranks every rank runs the same number of steps — as many as the rank with the
/// most batches (a rank out of batches samples for the others and adds zero gradients) —, each
/// step's loss is the mean over all ranks' seeds of that step, and the weight gradients are
/// summed over the ranks. EpochStats::train_loss is the mean over the epoch's seeds, `steps` its
/// steps, step_ms their median, and the batch figures what the sampler did. Every
/// config.eval_every epochs and after the last, `evaluation`'s full-graph model (nullptr in one
/// process: every layer's block set to the whole graph) measures the splits as
/// train_node_classifier does. `labels`: this rank's owned rows (host memory). Throws
/// InvalidArgument for fanouts that do not fit the graph layers (check_fanouts), a batch size
/// below 1 or above the training set (over all ranks), no training node, or no full-graph model
/// over ranks. Collective over the sampler's ranks.
TrainResult train_sampled_node_classifier(
    const BackendPtr& backend, Sequential<float>& model, ModelGraph& graph, RankSampler& sampler,
    const NodeLabels& labels, const TrainConfig& config, const MiniBatchConfig& batches,
    const FullGraphModel& evaluation = {},
    const std::function<void(const EpochStats&)>& on_epoch = {}, const TrainControl& control = {});

/// In one process: the sampler of `adjacency` (the whole graph: [n, n], host memory) and
/// `features` (host), evaluation in place.
TrainResult train_sampled_node_classifier(
    const BackendPtr& backend, Sequential<float>& model, ModelGraph& graph, const Csr& adjacency,
    const graph::Features& features, const NodeLabels& labels, const TrainConfig& config,
    const MiniBatchConfig& batches, const std::function<void(const EpochStats&)>& on_epoch = {},
    const TrainControl& control = {});

} // namespace tessera::gnn
