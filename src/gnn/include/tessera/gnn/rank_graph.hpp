// One rank's rows of a distributed graph, as link prediction and sampling over ranks read them.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"

#include <cstdint>
#include <span>

namespace tessera::gnn {

/// One rank's rows of a graph, as a distributed job holds them (a partition's tile).
struct RankGraph {
  /// [n_owned, n_local]: the rows of the nodes this rank owns, local column ids, sorted.
  const Csr* adjacency = nullptr;
  /// [n_local] the global id of each local row, the owned rows first (empty: the identity, the
  /// whole graph in one process).
  std::span<const GlobalId> ids;
  std::int64_t num_nodes = 0;         ///< of the whole graph
  comm::Communicator* comm = nullptr; ///< the job's ranks (nullptr: one process)
};

} // namespace tessera::gnn
