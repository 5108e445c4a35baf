// A Quality from per-part counts, however they were counted: over the whole graph (measure) or
// over the tiles of the ranks (measure_tiles).
#pragma once

#include "tessera/partition/partition.hpp"

#include <cstdint>
#include <vector>

namespace tessera::partition::detail {

/// The Quality of a partition of a `nodes`-vertex graph into `parts` parts with `cut_entries`
/// undirected edges between parts and, per part ([parts] each), its vertices, its rows' stored
/// nonzeros and the rows it sends and receives per exchange.
Quality summarize_quality(int parts, std::int64_t nodes, std::int64_t cut_entries,
                          std::vector<std::int64_t> part_nodes,
                          std::vector<std::int64_t> part_nonzeros, std::vector<std::int64_t> send,
                          std::vector<std::int64_t> recv);

} // namespace tessera::partition::detail
