// Choosing how node features are stored: dense or CSR by density, and converting between them.
#include "tessera/graph/features.hpp"

#include "tessera/core/error.hpp"

namespace tessera::graph {

FeatureLayout parse_feature_layout(const std::string& text) {
  for (const FeatureLayout layout :
       {FeatureLayout::Auto, FeatureLayout::Sparse, FeatureLayout::Dense}) {
    if (text == to_string(layout)) return layout;
  }
  throw InvalidArgument("unknown feature layout '" + text + "'; layouts: auto, sparse, dense");
}

const char* to_string(FeatureLayout layout) noexcept {
  switch (layout) {
  case FeatureLayout::Sparse:
    return "sparse";
  case FeatureLayout::Dense:
    return "dense";
  case FeatureLayout::Auto:
    break;
  }
  return "auto";
}

bool stores_dense(FeatureLayout layout, bool loaded_sparse, double density) noexcept {
  if (layout == FeatureLayout::Auto) return !loaded_sparse || density >= kDenseFeatureDensity;
  return layout == FeatureLayout::Dense;
}

Features with_layout(const Features& features, bool dense) {
  Features out;
  if (dense && features.sparse) {
    const Csr& s = *features.sparse;
    out.dense = Dense::zeros(s.backend(), s.rows(), s.cols());
    Dense& x = *out.dense;
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < s.rows(); ++r) {
      for (Offset k = s.row_ptr()[r]; k < s.row_ptr()[r + 1]; ++k)
        x(r, s.col()[k]) = s.val()[k];
    }
  } else if (!dense && features.dense) {
    const Dense& x = *features.dense;
    std::int64_t nnz = 0;
    for (std::int64_t i = 0; i < x.size(); ++i)
      nnz += x.data()[i] != 0.0f ? 1 : 0;
    out.sparse = Csr(x.backend(), x.rows(), x.cols(), nnz);
    Csr& s = *out.sparse;
    Offset k = 0;
    for (std::int64_t r = 0; r < x.rows(); ++r) {
      for (std::int64_t c = 0; c < x.cols(); ++c) {
        if (const float v = x(r, c); v != 0.0f) {
          s.col()[k] = static_cast<LocalId>(c);
          s.val()[k++] = v;
        }
      }
      s.row_ptr()[r + 1] = k;
    }
  } else {
    throw InvalidArgument(std::string("with_layout: the features are already ") +
                          (dense ? "dense" : "sparse") + " (or absent)");
  }
  return out;
}

} // namespace tessera::graph
