// Link prediction (issue 40): an edge split with the held-out edges out of the message-passing
// graph, negative pairs drawn per source without a global edge list, the dot-product decoder and
// its binary cross-entropy, the ranking metrics, and full-graph training of an encoder on them.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/module.hpp"
#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/rank_graph.hpp"
#include "tessera/gnn/trainer.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace tessera::gnn {

class MlpDecoder;

/// The Ks of Hits@K reported unless asked otherwise (OGB's ogbl-collab reports Hits@50).
inline std::vector<int> default_hits_k() { return {20, 50, 100}; }

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

/// split_edges over the ranks of a distributed graph: this rank's share of the very split one
/// process gets of the whole graph — the positive pairs (u, v), u < v, whose u it owns, and the
/// negatives whose source it owns, in global ids — with no edge list gathered anywhere (the
/// cut-off keys of the test and validation parts are selected over the ranks, 16 bits per
/// allreduce). `training` receives this rank's rows of the training graph: `graph.adjacency`
/// without the held-out edges (both ends' rows lose them) and without self-loops, on its
/// backend, the same columns. Collective over graph.comm; throws as split_edges, and
/// InvalidArgument for ids that do not cover graph.num_nodes once.
EdgeSplit split_edges(const RankGraph& graph, double val_fraction, double test_fraction,
                      std::uint64_t seed, Csr& training);

/// A split given whole (a stored one, which every rank read), shared out as split_edges(RankGraph)
/// shares its own: this rank's positive pairs, as (min, max), whose first end it owns, and the
/// negatives whose source it owns, positives sorted; `training` receives this rank's rows of the
/// training graph, the edges of `graph` that are training pairs. Collective over graph.comm.
/// Throws InvalidArgument on every rank for a pair naming a node outside the graph or a node with
/// itself, and for a training pair that is no edge of the graph (a split of another graph),
/// naming the part and the pair's place in it.
EdgeSplit share_split(const EdgeSplit& whole, const RankGraph& graph, Csr& training);

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

/// The scores of `pairs` (global ids, the same list on every rank; by `decoder`, or the dot
/// product when null), in their order,
/// on every rank, from each rank's embeddings of the nodes it owns (z: host, [n_owned, d];
/// `owned`: their global ids, empty in one process, where z holds every node). Each rank scores
/// the pairs whose source it owns, the other ends fetched from their owners. Collective over
/// `comm` (nullptr: one process). Throws InvalidArgument for a pair naming a node outside
/// [0, num_nodes), naming its place.
std::vector<double> score_pairs(ConstDenseView<float> z, const NodePairs& pairs,
                                std::span<const GlobalId> owned, std::int64_t num_nodes,
                                comm::Communicator* comm, MlpDecoder* decoder = nullptr);

/// Binary cross-entropy of the dot-product scores, positives labelled 1 and negatives 0, each
/// side a mean (PyG's GAE: mean softplus(−s⁺) + mean softplus(s⁻)). Adds its gradient to dz
/// ([n, d], host), which the caller zeroes. Returns the loss.
double link_loss(ConstDenseView<float> z, const NodePairs& positives, const NodePairs& negatives,
                 DenseView<float> dz);

/// The link-prediction metrics of positive and negative scores: ROC-AUC, average precision,
/// MRR against the negatives and Hits@K for each K of `ks`.
LinkMetrics measure_links(std::span<const double> positive, std::span<const double> negative,
                          std::span<const int> ks);

/// The MLP decoder of a pair (OGB's LinkPredictor): the ends' embeddings multiplied elementwise,
/// then `layers` Linear layers with ReLU between them, the last to one score. Its parameters are
/// named "decoder.linearK.weight" and "decoder.linearK.bias" (K from 0), Glorot weights drawn
/// from `seed` in fields apart from the encoder's. The pair features in, the scores out and the
/// gradients travel through host memory; the layers run on `backend` (not under a chunk
/// manager).
class MlpDecoder {
public:
  /// Throws InvalidArgument for a width or hidden width below 1 or fewer than 1 layer.
  MlpDecoder(BackendPtr backend, std::int64_t width, std::int64_t hidden, int layers,
             std::uint64_t seed);
  MlpDecoder(const MlpDecoder&) = delete;
  MlpDecoder& operator=(const MlpDecoder&) = delete;

  std::int64_t width() const noexcept { return width_; }
  /// Every layer's parameters, in order.
  std::vector<Parameter<float>*> parameters();

  /// The scores of pairs given by their features h ([n, width], host: z_u ⊙ z_v), [n]. In a
  /// training step it keeps what backward needs.
  std::vector<double> forward(const Step& step, ConstDenseView<float> h);
  /// Back-propagates the scores' gradient (host, [n], of the last training forward): writes each
  /// parameter's gradient (on_gradient receives it, last layer first) and the features' gradient
  /// into dh ([n, width], host).
  void backward(std::span<const float> d_score, DenseView<float> dh,
                const std::function<void(Parameter<float>&)>& on_gradient = {});

private:
  BackendPtr backend_;
  std::int64_t width_;
  std::vector<std::unique_ptr<Module<float>>> layers_;
  std::vector<Context<float>> contexts_;
  // The features and the scores' gradient on the backend: grown to the largest pair count
  // (training's and evaluation's alternate), never reallocated for a smaller one.
  Workspace<float> h_, d_score_;
  std::vector<float> host_scores_;
};

/// A link-prediction task: this rank's share of the split (global ids; in one process, rows of
/// the encoder's input), the training graph's rows the negatives avoid, the Ks of Hits@K.
struct LinkTask {
  const EdgeSplit* split = nullptr;
  /// The training graph's owned rows, [n_owned, n_local] (training_graph in one process; the
  /// `training` of split_edges(RankGraph) on a rank).
  const Csr* adjacency = nullptr;
  /// [n_local] global id of each local row, the owned rows first (the encoder's output rows);
  /// empty: the identity (one process).
  std::span<const GlobalId> ids;
  std::int64_t num_nodes = 0; ///< of the whole graph
  std::vector<int> hits_k = default_hits_k();
  /// The pair decoder trained with the encoder (its parameters summed over ranks and in the
  /// checkpoints after the encoder's); nullptr: the dot product.
  MlpDecoder* decoder = nullptr;
};

/// Trains the encoder `model` (features → embeddings [n, d]) with the dot-product decoder for
/// config.epochs full-graph steps: each epoch one negative per training edge (sample_negatives),
/// link_loss, backward, Adam; every config.eval_every epochs the validation and test metrics
/// (SplitMetrics::roc_auc and ::link) and every split's loss and accuracy (a pair right when its
/// score's sign is its label's), the best epoch the one of the highest validation ROC-AUC.
///
/// With `distribution`, each rank passes its share of the split (split_edges(RankGraph)) and its
/// tile's encoder: every step the embeddings of the pair ends other ranks own come from their
/// owners (one exchange of rows, planned per epoch, as the negatives change) and their
/// gradients go back to them; losses divide by the global pair counts, the weight gradients are
/// summed over ranks, and the validation and test scores reach every rank for the ranking
/// metrics — so P ranks train as one process does on the same split and negatives. Collective.
/// Keeps a [num_nodes] owner and row index of every node on every rank (8 bytes a node).
/// A model under a memory budget (Sequential::use_memory, `backend` its allocator) trains under
/// it. Throws InvalidArgument for an empty training split.
TrainResult train_link_predictor(const BackendPtr& backend, Sequential<float>& model,
                                 Input<float> features, const LinkTask& task,
                                 const TrainConfig& config,
                                 const std::function<void(const EpochStats&)>& on_epoch = {},
                                 const Distribution* distribution = nullptr,
                                 const TrainControl& control = {});

} // namespace tessera::gnn
