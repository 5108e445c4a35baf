// A collective the partitioning steps need beyond the Communicator's own.
#pragma once

#include "tessera/comm/communicator.hpp"

#include <cstdint>
#include <vector>

namespace tessera::partition::detail {

/// Every rank's `value`, in rank order (an all-to-all of one value). Collective.
inline std::vector<std::int64_t> allgather(std::int64_t value, comm::Communicator& comm) {
  return comm.alltoall(std::vector<std::int64_t>(static_cast<std::size_t>(comm.size()), value));
}

} // namespace tessera::partition::detail
