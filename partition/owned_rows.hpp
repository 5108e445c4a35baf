// What a tile is built from: the rows a part owns, as the whole graph has them (global ids), and
// how the owners and degrees of their remote neighbours are found. The in-memory path
// (build_local_graph) gathers the rows from the whole dataset; the distributed path
// (build_tile_from_rows) receives them from the ranks that read them. One assembly for both.
#pragma once

#include "tessera/core/types.hpp"
#include "tessera/graph/features.hpp"
#include "tessera/partition/local_graph.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace tessera::partition::detail {

/// Split membership of a row, as bits.
enum SplitBit : std::uint8_t { kTrain = 1, kVal = 2, kTest = 4 };

/// The rows one part owns, in ascending global id.
struct OwnedRows {
  std::vector<GlobalId> ids;        ///< [n] ascending
  std::vector<Offset> row_ptr{0};   ///< [n + 1]
  std::vector<GlobalId> col;        ///< neighbours (global ids, self-loops kept), sorted per row
  std::vector<float> val;           ///< the adjacency's values
  std::vector<std::int64_t> degree; ///< [n] neighbours without a self-loop
  graph::Features features;         ///< [n, F] or none
  std::vector<std::int32_t> labels; ///< [n] or empty
  std::vector<std::uint8_t> split;  ///< [n] SplitBit flags
};

/// What assemble_tile learns about the remote neighbours: for ids (ascending, distinct, none
/// owned), fills each one's owning part and degree (without self-loop).
using GhostLookup =
    std::function<void(std::span<const GlobalId> ids, std::vector<std::int32_t>& owner,
                       std::vector<std::int64_t>& degree)>;

/// The tile of `part` from its owned rows: ghosts grouped by owner then id, local CSR with
/// re-sorted columns, split as local row ids, owned rows reordered when `reorder` is Rcm (on the
/// owned-owned subgraph). Throws InvalidArgument when the tile has more local vertices than a
/// LocalId holds. Matrices on `backend`.
LocalGraph assemble_tile(const BackendPtr& backend, OwnedRows&& rows, int part, int num_parts,
                         std::int64_t num_global_nodes, std::int32_t num_classes,
                         const GhostLookup& lookup, Reorder reorder);

} // namespace tessera::partition::detail
