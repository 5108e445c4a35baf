// One rank's tile of a partitioned graph: owned rows and the ghost rows they read, in local
// numbering, with the owned rows' features, labels and split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/tensor.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/partition/partition.hpp"

namespace tessera::partition {

/// A tile. Local numbering: owned rows [0, n_owned) in ascending global id (or in RCM order when
/// reordered), then ghost rows [n_owned, n_owned + n_ghost) grouped by owner part (ascending),
/// sorted by global id within a group — so each neighbour's block arrives contiguously.
struct LocalGraph {
  int part = 0;                           ///< this tile's part (the rank that trains it)
  int num_parts = 0;                      ///< P
  std::int64_t num_global_nodes = 0;      ///< nodes of the whole graph
  std::vector<GlobalId> owned_ids;        ///< [n_owned] global id of each owned row
  std::vector<GlobalId> ghost_ids;        ///< [n_ghost] global id of each ghost row
  std::vector<std::int32_t> ghost_owner;  ///< [n_ghost] owning part, non-decreasing
  /// Global degree (neighbours in the whole graph, no self-loop) of every local vertex,
  /// [n_owned + n_ghost]: what a rank needs to normalize its rows without the whole graph.
  std::vector<std::int64_t> degree;
  /// Rows of A for the owned vertices: [n_owned, n_owned + n_ghost], local column ids, sorted.
  Csr adjacency;
  graph::Features features;              ///< [n_owned, F]: owned rows only
  std::vector<std::int32_t> labels;         ///< [n_owned] or empty
  std::int32_t num_classes = 0;             ///< of the whole dataset
  std::vector<std::int32_t> train_idx, val_idx, test_idx;  ///< local owned row ids

  /// Owned and ghost row counts.
  std::int64_t n_owned() const { return static_cast<std::int64_t>(owned_ids.size()); }
  std::int64_t n_ghost() const { return static_cast<std::int64_t>(ghost_ids.size()); }
};

/// Reorderings applied to the owned rows of each tile: None keeps ascending global id; Rcm is
/// reverse Cuthill-McKee on the owned-owned subgraph (Boost.Graph), giving neighbours nearby ids.
enum class Reorder { None, Rcm };

/// The tile of `part`, cut from the whole dataset (in host memory) by whoever holds it: the
/// partitioning rank or write_store. Its matrices live on the dataset's backend. Throws
/// InvalidArgument when the partition does not cover the dataset, `part` or an owner is outside
/// [0, num_parts), or the tile has more local vertices than a LocalId holds.
LocalGraph build_local_graph(const datasets::Dataset& dataset, const Partition& partition,
                             int part, Reorder reorder = Reorder::None);

/// The one tile of a one-part partition, taking the dataset's arrays over instead of copying
/// them: owned rows 0..n-1 in order, no ghosts, the adjacency, features, labels and splits as
/// they are. Equal to build_local_graph of a partition with every vertex in part 0. Host memory.
LocalGraph whole_graph_tile(datasets::Dataset&& dataset);

/// Renumbers the owned rows so the interior ones (no ghost neighbour) come first, keeping the
/// relative order within each group; returns the interior count. Everything indexed by owned
/// row (ids, degrees, adjacency rows and columns, features, labels, splits) follows; a tile
/// already in that order is left as it is (no copy). Lets a rank aggregate rows [0, n_interior)
/// while the ghost rows are still in flight. Host memory.
std::int64_t order_interior_first(LocalGraph& tile);

/// The tile as one byte string (host memory), to hand a tile from the partitioning rank to its
/// owner.
std::vector<std::byte> tile_to_bytes(const LocalGraph& tile);
/// The tile tile_to_bytes wrote, its matrices filled in host memory on `backend` (a CPU one).
/// Throws FormatError when the bytes are not a whole, consistent tile.
LocalGraph tile_from_bytes(const BackendPtr& backend, std::span<const std::byte> bytes);

}  // namespace tessera::partition
