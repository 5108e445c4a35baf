// What METIS's 32-bit index type can hold, checked before any array is handed to METIS.
#pragma once

#include <cstdint>

namespace tessera::partition::detail {

/// Throws MetisError naming both counts when a graph of `nodes` vertices and `nnz` stored
/// nonzeros (self-loops already dropped) does not fit METIS's idx_t (32-bit in Debian's build).
void check_metis_limits(std::int64_t nodes, std::int64_t nnz);

} // namespace tessera::partition::detail
