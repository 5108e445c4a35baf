// Node features: one matrix per graph, dense or sparse (bag-of-words), as loaded, partitioned,
// stored and trained on.
#pragma once

#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <optional>

namespace tessera::graph {

/// Node features: a dense matrix, or a sparse one when most entries are zero (bag-of-words).
/// At most one of dense / sparse is set; neither for structure-only formats (metis, mtx).
struct Features {
  std::optional<Dense> dense; ///< [num_nodes, num_features]
  std::optional<Csr> sparse;  ///< [num_nodes, num_features]

  /// Shape of whichever is set ([0, 0] for none), and whether it is the sparse one.
  std::int64_t rows() const { return dense ? dense->rows() : sparse ? sparse->rows() : 0; }
  std::int64_t cols() const { return dense ? dense->cols() : sparse ? sparse->cols() : 0; }
  bool is_sparse() const { return sparse.has_value(); }
};

} // namespace tessera::graph
