// Neighbour sampling for mini-batch training (issue 41): shuffled seed batches, and for each
// batch the per-layer blocks of sampled neighbours the layers consume, renumbered compactly.
#pragma once

#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"
#include "tessera/gnn/rank_graph.hpp"
#include "tessera/graph/features.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tessera::gnn {

/// How neighbours are drawn: per hop from the seeds, fanouts[0] for the seeds' own neighbours
/// (PyG's num_neighbors order; DGL's fanouts list the same numbers input layer first), -1 for
/// all of them; uniformly without replacement (all of them when a node has no more), or with
/// replacement.
struct SamplerOptions {
  std::vector<int> fanouts;
  bool replace = false;
  std::uint64_t seed = 0;
};

/// The sampled edges of one hop as a bipartite graph: destination rows, source columns. The
/// sources are numbered compactly with the destinations first (DGL's block layout): source i < dst
/// is destination i itself, so a layer's input rows [0, dst) are its output rows — the layout of
/// a rank's tile (owned rows, then the others).
struct Block {
  std::int64_t dst = 0;        ///< destination rows (the first dst sources)
  std::vector<GlobalId> src;   ///< [num_src] global id of each source, destinations first
  std::vector<Offset> row_ptr; ///< [dst + 1]
  std::vector<LocalId> col;    ///< [edges] source index of each sampled edge, per row ascending

  std::int64_t num_src() const noexcept { return static_cast<std::int64_t>(src.size()); }
  std::int64_t edges() const noexcept { return static_cast<std::int64_t>(col.size()); }
};

/// One mini-batch: its seeds' blocks, blocks[0] the input layer's (the farthest hop) and
/// blocks.back() the seeds' own (its destinations are the seeds, in order).
struct SampledBatch {
  std::vector<Block> blocks;
  /// The nodes whose input features the first layer reads: blocks[0].src.
  std::span<const GlobalId> input_nodes() const { return blocks.front().src; }
  /// The seeds: the last block's destinations.
  std::span<const GlobalId> seeds() const {
    return std::span<const GlobalId>(blocks.back().src)
        .first(static_cast<std::size_t>(blocks.back().dst));
  }
};

/// The blocks of `seeds` (distinct node ids of `graph`, a symmetric [n, n] adjacency with sorted
/// columns, self-loops ignored) for one epoch: hop h draws up to fanouts[h] neighbours of each
/// node of the frontier, keyed by (seed, epoch, hop, node) alone — the same node draws the same
/// neighbours at the same hop in any batch and on any rank. Throws InvalidArgument for no
/// fanouts, a fanout that is 0 or below -1, or a seed outside the graph or repeated.
SampledBatch sample_blocks(const Csr& graph, std::span<const GlobalId> seeds,
                           const SamplerOptions& options, std::uint32_t epoch);

/// The training nodes `train` shuffled for `epoch` (an order drawn from (seed, epoch) and each
/// node's id alone) and cut into batches of `batch_size` (the last may be smaller). Throws
/// InvalidArgument for a batch size below 1.
std::vector<std::vector<GlobalId>> seed_batches(std::span<const GlobalId> train,
                                                std::int64_t batch_size, std::uint64_t seed,
                                                std::uint32_t epoch);

/// What a RankSampler has done on this rank since it was made.
struct SamplingStats {
  std::int64_t batches = 0;       ///< sample() calls
  std::int64_t sampled_edges = 0; ///< edges of the blocks made
  /// Frontier nodes this rank asked their owners to sample, and sampled for other ranks.
  std::int64_t remote_sampled = 0, sampled_for_others = 0;
  std::int64_t input_rows = 0; ///< input feature rows gathered (gather_features)
  /// Of those, rows another rank owns: found in the hot-feature cache, or fetched.
  std::int64_t cache_hits = 0, fetched_rows = 0;
  /// Bytes this rank received and sent for sampling requests and answers, and for feature rows
  /// (the cache's one-off fill not included).
  std::int64_t sample_bytes = 0, feature_bytes = 0;
  /// Seconds in the exchanges with other ranks (waiting for them included), for sampling and
  /// for feature rows.
  double sample_exchange_seconds = 0.0, feature_exchange_seconds = 0.0;
};

/// Neighbour sampling and input features over the ranks of a distributed graph (DistDGL's mode),
/// or in one process. Each rank samples the blocks of seeds it owns; a frontier node owned by
/// another rank is sampled by its owner (batched requests per hop, point to point) with the very
/// draws sample_blocks makes — they are keyed by (seed, epoch, hop, node) alone, so a batch's
/// blocks are the ones one process samples for the same seeds. Input rows owned elsewhere come
/// from their owners, except those of the hot-feature cache: the rows of the remote nodes most
/// often next to this rank's rows (most edges from its rows; ties by id), as many as
/// `cache_bytes` holds, fetched once when the sampler is made.
///
/// Collective calls (the constructor, sample, gather_features) must be made by every rank in
/// the same order, each with its own seeds or nodes (possibly none). Not thread-safe.
class RankSampler {
public:
  /// graph: this rank's rows (comm null or of one rank: the whole graph, ids empty or the
  /// identity); features: [n_owned or more, F] rows of the owned nodes first (host memory).
  /// Throws InvalidArgument for bad fanouts, features of fewer rows than owned nodes, and ids
  /// that are not one partition of the graph. Collective.
  RankSampler(const RankGraph& graph, const graph::Features& features, SamplerOptions options,
              std::size_t cache_bytes = 0);
  ~RankSampler();
  RankSampler(const RankSampler&) = delete;
  RankSampler& operator=(const RankSampler&) = delete;

  /// The blocks of `seeds` (nodes this rank owns, distinct) for `epoch`, as sample_blocks makes
  /// them. Throws InvalidArgument for a seed outside the graph, not owned here, or repeated.
  /// Collective.
  SampledBatch sample(std::span<const GlobalId> seeds, std::uint32_t epoch);
  /// The input features of `nodes` (global ids) into `out` as [nodes, F] row-major (resized).
  /// Collective.
  void gather_features(std::span<const GlobalId> nodes, std::vector<float>& out);
  /// The same into `out` ([nodes · F] host memory, e.g. a CPU backend's buffer the first layer
  /// reads: no copy between). Throws DimensionMismatch for another size. Collective.
  void gather_features(std::span<const GlobalId> nodes, std::span<float> out);

  /// The row of owned node `v` (its place among this rank's rows), -1 if another rank owns it.
  std::int64_t owned_row(GlobalId v) const;
  /// The global id of owned row `r`.
  GlobalId global_id(std::int64_t r) const;
  std::int64_t num_owned() const noexcept;
  /// The ranks its collective calls run over (nullptr in one process).
  comm::Communicator* comm() const noexcept;
  /// From here on the collective calls run over `comm` (which must outlive that use): the same
  /// ranks with the same numbers, e.g. the job communicator's concurrent_duplicate(), so that a
  /// thread of its own samples while the job's communicator carries the steps. Throws
  /// InvalidArgument for a null communicator or one of other ranks. Not collective.
  void use_communicator(comm::Communicator* comm);
  std::int64_t feature_width() const noexcept;
  /// Rows and bytes of the hot-feature cache.
  std::int64_t cached_rows() const noexcept;
  std::size_t cache_bytes() const noexcept;
  const SamplingStats& stats() const noexcept;

private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Checks fanouts as sample_blocks takes them (InvalidArgument naming the first bad one and
/// what is allowed; `layers`, when given, the count they must have).
void check_fanouts(std::span<const int> fanouts, int layers = 0);

} // namespace tessera::gnn
