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
  std::int64_t batch_size = 512; ///< seeds per step (the last batch of an epoch may be smaller)
};

/// Trains `model` — built on `graph` (ModelGraph::blocks, one graph per fanout) — by sampled
/// mini-batches for config.epochs epochs: each epoch the training nodes shuffled into batches
/// (seed_batches, from config.seed and the epoch), and for each batch its blocks (sample_blocks
/// over `adjacency`, the whole graph: [n, n], host memory) set into `graph`, the input nodes'
/// features gathered, forward, the mean cross-entropy over its seeds, backward and one Adam step.
/// EpochStats::train_loss is the mean over the epoch's seeds, `steps` its batches and step_ms
/// their median. Every config.eval_every epochs and after the last, full-graph inference (every
/// layer's block the whole graph) measures the splits as train_node_classifier does. One
/// process; `features` and `labels` in host memory. Throws InvalidArgument for fanouts that do
/// not fit the graph layers (check_fanouts), a batch size below 1 or above the training set, or
/// no training node.
TrainResult train_sampled_node_classifier(
    const BackendPtr& backend, Sequential<float>& model, ModelGraph& graph, const Csr& adjacency,
    const graph::Features& features, const NodeLabels& labels, const TrainConfig& config,
    const MiniBatchConfig& batches, const std::function<void(const EpochStats&)>& on_epoch = {},
    const TrainControl& control = {});

} // namespace tessera::gnn
