// The graph a model is built on: its aggregation matrices and, on a rank of a distributed job,
// the halo exchanges of its layers. What a custom model needs to run on one process or P ranks.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/comm/layer_exchange.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace tessera::gnn {

/// The sparse matrices a graph layer aggregates with, all [n_owned, n_local] rows of the whole
/// graph's matrix (degrees are global degrees, so every tiling gives the same values).
enum class AggregationKind {
  Gcn,  ///< Â = D^-1/2 (A + I) D^-1/2 (GcnConv)
  Mean, ///< D⁻¹A, the mean over the neighbours (SageConv)
  Sum,  ///< A with unit weights, no self-loops (GinAggregate)
  /// A + I's pattern (GatConv; its values are Â's and unread): the transpose is always built,
  /// with the edge of A + I that each of its edges is (ModelGraph::transpose_edges)
  Attention
};

/// One process's graph, or one rank's tile of it, as a model builder sees it. Matrices are
/// built on first request, in the backend's memory, and live as long as this object (which
/// outlives training). On one process (or the one tile of a one-rank job) n_owned = n_local = n
/// and nothing is exchanged.
///
/// On a rank's tile the owned rows come first, interior ones (no ghost neighbour) before the
/// others; ghost rows follow. The layer-0 input holds the ghost rows when the job caches input
/// features (input_rows() = n_local); past layer 0 every layer's input is the owned rows and
/// its halo brings the ghosts. A layer built on Aggregation (GcnConv, SageConv, GinAggregate,
/// or a user's) runs distributed by `layer.distribute(graph.halo(i), graph.n_interior())`.
class ModelGraph {
public:
  /// `backend` may be a ChunkManager's allocator: the matrices are then Matrix tensors in its
  /// chunks and the model's buffers its tensors.
  /// One process: adjacency: [n, n] symmetric, no self-loops needed (host memory).
  ModelGraph(BackendPtr backend, Csr adjacency, std::int64_t in_features, std::int64_t classes);
  /// One rank's tile: adjacency: [n_owned, n_local] rows of the owned vertices (host memory);
  /// degree: [n_local] global degrees without self-loops; comm: the job's ranks, what halos go
  /// through (on the backend's memory when it can); input_has_ghost_rows: the layer-0 input is
  /// [n_local, F]. With one rank the tile is the whole graph and nothing is exchanged.
  ModelGraph(BackendPtr backend, Csr adjacency, std::vector<std::int64_t> degree,
             std::int64_t in_features, std::int64_t classes,
             std::shared_ptr<comm::Communicator> comm, std::shared_ptr<const comm::HaloPlan> plan,
             std::int64_t n_interior, bool input_has_ghost_rows);

  /// Where the model runs and its matrices live.
  const BackendPtr& backend() const noexcept { return backend_; }
  /// Width F of the input features and number of classes (the logits' width).
  std::int64_t in_features() const noexcept { return in_features_; }
  std::int64_t num_classes() const noexcept { return classes_; }
  /// The job's ranks (nullptr on one process): what a layer that sums over ranks uses.
  comm::Communicator* comm() const noexcept { return comm_.get(); }
  /// Whether this is one tile of a job of several ranks (halo() can then return exchanges).
  bool distributed() const noexcept { return comm_ != nullptr && comm_->size() > 1; }
  /// Rows this process or rank owns (the logits' rows), and those plus its ghost rows.
  std::int64_t n_owned() const noexcept { return n_owned_; }
  std::int64_t n_local() const noexcept { return n_local_; }
  /// Owned rows [0, n_interior) read no ghost row.
  std::int64_t n_interior() const noexcept { return n_interior_; }
  /// Rows of the layer-0 input: n_local with cached ghost input rows, else n_owned.
  std::int64_t input_rows() const noexcept { return input_has_ghost_rows_ ? n_local_ : n_owned_; }

  /// The aggregation matrix of `kind`, [n_owned, n_local], and its transpose, [n_local, n_owned]
  /// (the same object when the matrix is symmetric: Â and A on one process).
  const Csr& matrix(AggregationKind kind);
  const Csr& transpose(AggregationKind kind);
  /// For AggregationKind::Attention: [nnz] in the matrices' memory, transpose(kind)'s edge q is
  /// matrix(kind)'s edge transpose_edges(kind)[q]. Empty for the other kinds.
  const Buffer<Offset>& transpose_edges(AggregationKind kind);

  /// The halo exchange for the aggregating layer `layer` (0, 1, ... in model order), made on
  /// first request with the exchange options; nullptr when that layer's input already holds its
  /// ghost rows (one process; layer 0 with cached input features). Every rank must ask for the
  /// same layers.
  comm::LayerExchange<float>* halo(int layer);
  /// The exchange made for `layer`, or nullptr.
  const comm::LayerExchange<float>* halo_of(int layer) const;
  /// One past the highest layer that has an exchange (0 on one process).
  int num_layers_asked() const noexcept { return static_cast<int>(halos_.size()); }
  /// What every halo has moved so far, summed over layers.
  comm::HaloStats halo_totals() const;
  /// How every layer's halo messages travel (mode and precision; exact fp32 unless set): call
  /// before building the model. Throws InvalidArgument for options out of range, or once an
  /// exchange was made with other options. The ghost input features are fetched exactly either
  /// way.
  void set_exchange_options(const comm::ExchangeOptions& options);
  /// The same for aggregating layer `layer` alone (a scheduler's per-layer plan; every rank must
  /// give each layer the same options).
  void set_exchange_options(const comm::ExchangeOptions& options, int layer);
  /// The options layer `layer`'s exchange is (or will be) made with.
  const comm::ExchangeOptions& exchange_options(int layer) const;

  /// Mini-batch graphs (sampled training, issue 41): one graph per graph layer, each holding
  /// that layer's block [dst, src] of the current batch (set_blocks) — no halo, the input rows
  /// the block's sources, destinations first, as a tile's owned rows come first. Layer i of a
  /// model reads layer(i). Matrices are built as usual and rebuilt in place when the blocks
  /// change, so the layers' references to them stay valid.
  static std::unique_ptr<ModelGraph> blocks(BackendPtr backend, int layers,
                                            std::int64_t in_features, std::int64_t classes);
  /// The graph graph layer `i` aggregates over: this one, or in mini-batch mode block i's.
  /// Throws InvalidArgument for a layer beyond the mini-batch graphs.
  ModelGraph& layer(int i);
  /// Mini-batch mode: graph layer i's adjacency becomes blocks[i] ([dst_i, src_i], host
  /// memory), every matrix built so far rebuilt from it. Throws InvalidArgument outside
  /// mini-batch mode or for another count of blocks, DimensionMismatch for blocks that do not
  /// chain (block i's destinations are block i+1's sources).
  void set_blocks(std::vector<Csr> blocks);
  /// Whether this is a set of mini-batch graphs, and how many (0 in full-graph mode).
  bool is_blocks() const noexcept { return !layers_.empty(); }
  int block_layers() const noexcept { return static_cast<int>(layers_.size()); }

  /// Frees the adjacency kept for building matrices (call once the model is built).
  void release_adjacency() { adjacency_ = Csr(); }
  /// Bytes of the matrices built so far (and of the adjacency while kept).
  std::size_t bytes() const;

private:
  struct Built {
    Csr host, host_t;     // on the host
    Csr device, device_t; // copies in the backend's memory (in_backend_memory())
    Buffer<Offset> edge_of; // Attention: host_t's (device_t's) edges as edges of host (device)
    bool ready = false;
    bool symmetric = false;
  };
  Built& build(AggregationKind kind);
  /// Whether matrices are copied into the backend's memory (a device, or chunks under a memory
  /// budget) rather than used where they were built.
  bool in_backend_memory() const noexcept;

  BackendPtr backend_;
  Csr adjacency_;
  std::vector<std::int64_t> degree_; // empty on one process
  std::int64_t in_features_, classes_;
  std::shared_ptr<comm::Communicator> comm_;
  std::shared_ptr<const comm::HaloPlan> plan_;
  comm::ExchangeOptions exchange_;
  std::vector<std::optional<comm::ExchangeOptions>> layer_exchange_; // by layer, overrides
  std::int64_t n_owned_, n_local_, n_interior_;
  // The job's choice (the same on every rank), not a row count: a rank without ghost rows must
  // still take part in the layer-0 exchange when the others make one.
  bool input_has_ghost_rows_;
  Built built_[4];
  bool block_ = false;                              // a mini-batch graph's block (never symmetric)
  std::vector<std::unique_ptr<ModelGraph>> layers_; // mini-batch mode: one per graph layer
  std::vector<std::unique_ptr<comm::LayerExchange<float>>> halos_; // by layer, null for none
};

} // namespace tessera::gnn
