// save_npz(): a Dataset as an uncompressed .npz with Planetoid-style keys, readable by numpy.
#include "npz.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/datasets/dataset.hpp"

#include <span>

namespace tessera::datasets {

namespace {

using detail::NpzWriter;

/// Writes <prefix>_indptr, _indices, _shape (and _data when `with_values`) of `matrix`.
void add_csr(NpzWriter& out, const std::string& prefix, const Csr& matrix, bool with_values) {
  const std::int64_t rows = matrix.rows(), nnz = matrix.nnz();
  const std::vector<Offset> empty_row_ptr = {0};
  const std::span<const Offset> row_ptr =
      matrix.row_ptr() != nullptr
          ? std::span<const Offset>(matrix.row_ptr(), static_cast<std::size_t>(rows) + 1)
          : std::span<const Offset>(empty_row_ptr);
  out.add<std::int64_t>(prefix + "_indptr", {rows + 1}, row_ptr);
  out.add<std::int64_t>(prefix + "_indices", {nnz},
                        std::span<const LocalId>(matrix.col(), static_cast<std::size_t>(nnz)));
  if (with_values) {
    out.add<float>(prefix + "_data", {nnz},
                   std::span<const float>(matrix.val(), static_cast<std::size_t>(nnz)));
  }
  const std::int64_t shape[2] = {rows, matrix.cols()};
  out.add<std::int64_t>(prefix + "_shape", {2}, std::span<const std::int64_t>(shape));
}

void add_ids(NpzWriter& out, const std::string& key, const std::vector<std::int32_t>& ids) {
  out.add<std::int64_t>(key, {static_cast<std::int64_t>(ids.size())},
                        std::span<const std::int32_t>(ids));
}

/// Every stored split as train_masks, val_masks, test_masks: |b1 [S, N], row k split k's part
/// (the heterophilous benchmark's layout, which np.load and load_dataset read back).
void add_masks(NpzWriter& out, const Dataset& dataset) {
  const auto splits = static_cast<std::int64_t>(dataset.all_splits.size());
  const std::int64_t n = dataset.num_nodes;
  const std::pair<const char*, std::vector<std::int32_t> Split::*> parts[] = {
      {"train_masks", &Split::train}, {"val_masks", &Split::val}, {"test_masks", &Split::test}};
  std::vector<std::uint8_t> masks(static_cast<std::size_t>(splits * n));
  for (const auto& [key, part] : parts) {
    std::fill(masks.begin(), masks.end(), 0);
    for (std::int64_t k = 0; k < splits; ++k) {
      for (const std::int32_t id : dataset.all_splits[k].*part)
        masks[static_cast<std::size_t>(k * n + id)] = 1;
    }
    out.add<bool>(key, {splits, n}, std::span<const std::uint8_t>(masks));
  }
}

} // namespace

void save_npz(const Dataset& dataset, const std::string& path) {
  const std::int64_t n = dataset.num_nodes;
  if (dataset.adjacency.rows() != n ||
      (dataset.features.rows() > 0 && dataset.features.rows() != n) ||
      (dataset.has_labels() && static_cast<std::int64_t>(dataset.labels.size()) != n)) {
    throw InvalidArgument("save_npz: dataset '" + dataset.name + "' is inconsistent: " +
                          std::to_string(n) + " nodes, adjacency " + dataset.adjacency.shape() +
                          ", " + std::to_string(dataset.features.rows()) + " feature rows, " +
                          std::to_string(dataset.labels.size()) + " labels");
  }
  const ProgressStage progress("writing " + path);
  NpzWriter out(path);
  add_csr(out, "adj", dataset.adjacency, false);
  if (dataset.features.sparse) {
    add_csr(out, "attr", *dataset.features.sparse, true);
  } else if (dataset.features.dense) {
    const Dense& x = *dataset.features.dense;
    out.add<float>("features", {x.rows(), x.cols()},
                   std::span<const float>(x.data(), static_cast<std::size_t>(x.size())));
  }
  if (dataset.has_labels()) {
    add_ids(out, "labels", dataset.labels);
    const std::int64_t num_classes = dataset.num_classes;
    out.add<std::int64_t>("num_classes", {}, std::span<const std::int64_t>(&num_classes, 1));
  }
  if (dataset.row_normalize) {
    const std::int64_t yes = 1;
    out.add<std::int64_t>("row_normalize_features", {}, std::span<const std::int64_t>(&yes, 1));
  }
  if (dataset.all_splits.size() > 1) {
    add_masks(out, dataset);
  } else if (dataset.has_split()) {
    add_ids(out, "train_idx", dataset.train_idx);
    add_ids(out, "val_idx", dataset.val_idx);
    add_ids(out, "test_idx", dataset.test_idx);
  }
  out.commit();
}

} // namespace tessera::datasets
