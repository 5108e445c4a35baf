// The pieces of the partitioning methods that the whole-graph path (partition_graph) and the
// distributed one (partition_rows) share, so both cut the same way.
#pragma once

#include "tessera/partition/partition.hpp"

#include <cstdint>
#include <mpi.h>
#include <span>
#include <string>
#include <vector>

namespace tessera::partition::detail {

/// The option checks of partition_graph for a graph of `nodes` vertices. Throws InvalidArgument.
void validate_options(std::int64_t nodes, const Options& options);

/// Each part's target share of the total vertex weight, summing to 1.
std::vector<double> target_shares(const Options& options);

/// What a vertex with `degree` neighbours (no self-loop) weighs under options.vertex_weight, at
/// least 1 so that isolated vertices still count.
std::int64_t vertex_weight(std::int64_t degree, const Options& options);

/// The block method: the cumulative weight at which parts 1 .. P-1 begin, of `total`.
std::vector<double> block_targets(const Options& options, double total);
/// The block method's first vertex of each part ([P + 1], the last `nodes`) from `below`: [P - 1]
/// the number of vertices whose weight midpoint lies below each target; nudged so that every
/// part holds at least one vertex.
std::vector<std::int64_t> block_begins(std::span<const std::int64_t> below, std::int64_t nodes,
                                       int parts);

/// The random method's owners of vertices [first, last).
std::vector<std::int32_t> random_owner(std::int64_t first, std::int64_t last,
                                       const Options& options);

/// A graph's rows in ParMETIS's (and PT-Scotch's) distributed form, 64-bit: rank r holds vertices
/// [vtxdist[r], vtxdist[r + 1]), their neighbours (global ids, no self-loops) and weights.
struct DistGraph {
  std::vector<std::int64_t> vtxdist, xadj{0}, adjncy, vwgt; ///< vwgt empty: uniform
};

/// What scotch_part returns: success, or the step that failed.
enum class ScotchStatus {
  Ok,
  GraphBuild,   ///< SCOTCH_dgraphInit / SCOTCH_dgraphBuild refused the graph
  Strategy,     ///< SCOTCH_stratDgraphMapBuild
  Architecture, ///< SCOTCH_archCmpltw refused the part weights
  Map,          ///< SCOTCH_dgraphMap failed
  PartUnset,    ///< Scotch said yes but left a vertex without a part in [0, P)
};

/// Whether `strategy` (Options::scotch_strategy) is a strategy string in Scotch's grammar rather
/// than flag names.
bool is_strategy_string(const std::string& strategy);
/// The SCOTCH_STRAT... flags `strategy` names (flag names joined by '+'; empty: speed). Throws
/// InvalidArgument naming the valid names for any other name.
std::int64_t scotch_strategy_flags(const std::string& strategy);

/// The Scotch call a status names ("SCOTCH_dgraphMap", ...; "" for Ok).
const char* scotch_call(ScotchStatus status);

/// Cuts `graph` with PT-Scotch's k-way mapping (SCOTCH_dgraphMap onto a complete graph of
/// options.num_parts parts weighted by the target shares; Scotch's speed strategy, 5 %
/// imbalance) on `comm`, collective over it, and fills `owner` with the part of each of this
/// rank's vertices. Never throws: the ranks agree on failure afterwards.
ScotchStatus scotch_part(DistGraph& graph, const Options& options, MPI_Comm comm,
                         std::vector<std::int32_t>& owner);

} // namespace tessera::partition::detail
