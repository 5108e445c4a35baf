// Link prediction (issue 40): an edge split with the held-out edges out of the message-passing
// graph, negative pairs drawn per source without a global edge list, the dot-product decoder and
// its binary cross-entropy, the ranking metrics, and full-graph training of an encoder on them.
#pragma once

#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"
#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/trainer.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::gnn {

/// Node pairs (src[i], dst[i]).
struct NodePairs {
  std::vector<GlobalId> src, dst;
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(src.size()); }
  void add(GlobalId u, GlobalId v) {
    src.push_back(u);
    dst.push_back(v);
  }
};

/// The edges of a graph split for link prediction (PyG's RandomLinkSplit, OGB's stored splits):
/// positive pairs, each undirected edge once as (u, v) with u < v, and for validation and test
/// as many negative pairs, fixed for the run.
struct EdgeSplit {
  NodePairs train, val, test;
  NodePairs val_negative, test_negative;
};

/// Splits the undirected edges of the symmetric `adjacency` ([n, n], columns sorted; self-loops
/// ignored): the edges in an order drawn from `seed` alone (a Philox key of each pair, so the
/// same graph splits the same whatever order its edges come in), the first round(test ·
/// E) are test, the next round(val · E) validation, the rest training. The negatives are uniform
/// pairs u ≠ v that are no edge of the graph, as many as each split's positives, drawn from
/// `seed`. Throws InvalidArgument for fractions outside [0, 1) or summing to 1 or more, and for
/// a graph with no edge to hold out ("the graph has no edges": link prediction needs them).
EdgeSplit split_edges(const Csr& adjacency, double val_fraction, double test_fraction,
                      std::uint64_t seed);

/// The message-passing graph of a split: the symmetric adjacency of its training edges alone
/// ([num_nodes, num_nodes], on `backend`), so validation and test edges are never aggregated.
Csr training_graph(const BackendPtr& backend, const EdgeSplit& split, std::int64_t num_nodes);

/// One negative pair per positive: (src[i], w) with w uniform in [0, num_nodes) (DGL's uniform
/// sampler: the source kept, the destination corrupted), drawn again — up to 16 times — while w
/// is src[i] or a neighbour of it in `adjacency` (whose row src[i] the caller holds). Keyed by
/// (seed, epoch, index), so a rank draws the negatives of its own positives with no global edge
/// list, the same on any rank count. Written into `out`, whose storage is reused (an epoch's
/// negatives touch no fresh memory).
void sample_negatives(const NodePairs& positives, const Csr& adjacency, std::int64_t num_nodes,
                      std::uint64_t seed, std::uint32_t epoch, NodePairs& out);

/// The dot-product decoder: score[i] = z[src[i]] · z[dst[i]] (z: [n, d] in host memory; the
/// pairs' ids are rows of z).
std::vector<double> dot_scores(ConstDenseView<float> z, const NodePairs& pairs);

/// Binary cross-entropy of the dot-product scores, positives labelled 1 and negatives 0, each
/// side a mean (PyG's GAE: mean softplus(−s⁺) + mean softplus(s⁻)). Adds its gradient to dz
/// ([n, d], host), which the caller zeroes. Returns the loss.
double link_loss(ConstDenseView<float> z, const NodePairs& positives, const NodePairs& negatives,
                 DenseView<float> dz);

/// The link-prediction metrics of positive and negative scores: ROC-AUC, average precision,
/// MRR against the negatives and Hits@K for each K of `ks`.
LinkMetrics measure_links(std::span<const double> positive, std::span<const double> negative,
                          std::span<const int> ks);

/// A link-prediction task on one process's graph: the split (row ids of the encoder's input),
/// the message-passing adjacency negatives avoid, the Ks of Hits@K.
struct LinkTask {
  const EdgeSplit* split = nullptr;
  const Csr* adjacency = nullptr; ///< the training graph (training_graph)
  std::int64_t num_nodes = 0;
  std::vector<int> hits_k = {20, 50, 100};
};

/// Trains the encoder `model` (features → embeddings [n, d]) with the dot-product decoder for
/// config.epochs full-graph steps: each epoch one negative per training edge (sample_negatives),
/// link_loss, backward, Adam; every config.eval_every epochs the validation and test metrics
/// (SplitMetrics::roc_auc and ::link; the training split's loss), the best epoch the one of
/// the highest validation ROC-AUC. One process (a distributed encoder needs the embeddings of
/// pairs whose ends live on other ranks: not yet). Throws InvalidArgument for an empty training
/// split.
TrainResult train_link_predictor(const BackendPtr& backend, Sequential<float>& model,
                                 Input<float> features, const LinkTask& task,
                                 const TrainConfig& config,
                                 const std::function<void(const EpochStats&)>& on_epoch = {},
                                 const TrainControl& control = {});

} // namespace tessera::gnn
