// Pieces every loader uses to turn parsed records into a Dataset: sparse features, labels, names.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::datasets::detail {

/// Throws InvalidArgument unless `backend` is a host backend: loaders fill tensors in place.
void require_host(const BackendPtr& backend);

/// Throws FormatError "<where>: ..." when num_nodes does not fit the 32-bit column ids of a CSR.
void check_node_count(std::int64_t num_nodes, const std::string& where);

/// Nonzeros of a sparse matrix gathered in any order.
struct SparseEntries {
  std::vector<std::int64_t> row;
  std::vector<LocalId> col;
  std::vector<float> val;

  void add(std::int64_t r, LocalId c, float v) {
    row.push_back(r);
    col.push_back(c);
    val.push_back(v);
  }
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(row.size()); }
};

/// A [rows, cols] CSR of `entries` with sorted columns; a repeated (row, col) keeps its first
/// value. Entries must lie inside the shape (callers validate them with file context).
Csr build_csr(const BackendPtr& backend, std::int64_t rows, std::int64_t cols,
              const SparseEntries& entries);

/// The [n, n] identity as sparse features (a one-hot vector per node), for data without features.
Csr identity_features(const BackendPtr& backend, std::int64_t num_nodes);

/// 1 + the largest label, or 0 when there is none (labels of -1 mean unknown).
std::int32_t count_classes(const std::vector<std::int32_t>& labels);

/// Class ids for per-node class names: distinct names sorted, id = position. Empty names (nodes
/// without a class) get -1.
struct EncodedClasses {
  std::vector<std::int32_t> labels;
  std::vector<std::string> names; ///< sorted; names[id]
};
EncodedClasses encode_class_names(const std::vector<std::string>& name_of_node);

/// A permutation of [0, n) drawn with Fisher-Yates from the counter generator `key`: a pure
/// function of (key, n), independent of the thread count.
std::vector<std::int32_t> random_permutation(std::int64_t n, const RngKey& key);

/// The dataset name a file suggests: its file name without ".gz" and without the extension.
std::string name_from_path(const std::string& path);

} // namespace tessera::datasets::detail
