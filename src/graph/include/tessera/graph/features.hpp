// Node features: one matrix per graph, dense or sparse (bag-of-words), as loaded, partitioned,
// stored and trained on.
#pragma once

#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <optional>
#include <string>

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

/// How the features a model reads are stored: as loaded, or chosen by density.
enum class FeatureLayout {
  Auto,   ///< sparse features dense from kDenseFeatureDensity nonzeros; dense ones stay dense
  Sparse, ///< CSR
  Dense,  ///< a row-major matrix
};

/// "auto", "sparse" or "dense"; InvalidArgument naming the choices otherwise.
FeatureLayout parse_feature_layout(const std::string& text);
const char* to_string(FeatureLayout layout) noexcept;

/// The density from which a GCN trains faster on dense features than on CSR ones, measured with
/// scripts/bench/feature_layout.sh (a 2-layer GCN, hidden 64, on 7,650 nodes × 745 features,
/// the shape of Amazon Photo): the epochs cross between 10 and 15 % nonzeros on one thread and
/// between 15 and 20 % on two (at 26 %, dense is 1.9x faster on one thread); dense storage also
/// costs 4 / density bytes per nonzero against CSR's 8.
inline constexpr double kDenseFeatureDensity = 0.12;

/// Whether `layout` stores features of `density` (nonzeros / entries), loaded sparse or not,
/// dense. Auto keeps dense features dense (some layers take only dense input).
bool stores_dense(FeatureLayout layout, bool loaded_sparse, double density) noexcept;

/// `features` stored the other way, in the same backend's host memory: a CSR's entries placed in
/// a zero matrix, or a dense matrix's nonzeros as a CSR (sorted columns). The values are the
/// same, so training computes the same function (up to float summation order).
Features with_layout(const Features& features, bool dense);

} // namespace tessera::graph
