// Neighbour sampling for mini-batch training (issue 41): shuffled seed batches, and for each
// batch the per-layer blocks of sampled neighbours the layers consume, renumbered compactly.
#pragma once

#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"

#include <cstdint>
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

/// Checks fanouts as sample_blocks takes them (InvalidArgument naming the first bad one and
/// what is allowed; `layers`, when given, the count they must have).
void check_fanouts(std::span<const int> fanouts, int layers = 0);

} // namespace tessera::gnn
