// Datasets stored as .npz: Planetoid / gnn-benchmark CSR keys and the heterophilous benchmark.
#include "assembly.hpp"
#include "loaders.hpp"
#include "npz.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/graph_files.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <utility>

namespace tessera::datasets::detail {

namespace {

/// Fails naming `key` unless its shape is `expected` (a dimension of -1 matches any size).
void expect_shape(const NpzReader& npz, const std::string& key, const NpyInfo& info,
                  const std::vector<std::int64_t>& expected) {
  bool ok = info.shape.size() == expected.size();
  for (std::size_t d = 0; ok && d < expected.size(); ++d) {
    ok = expected[d] < 0 || expected[d] == info.shape[d];
  }
  if (!ok) {
    std::string want = "(";
    for (std::size_t d = 0; d < expected.size(); ++d) {
      want += (d > 0 ? ", " : "") +
              (expected[d] < 0 ? std::string("any") : std::to_string(expected[d]));
    }
    npz.fail(key, "expected shape " + want + (expected.size() == 1 ? ",)" : ")") + ", found " +
                      info.shape_string());
  }
}

/// Fails naming `key` unless it holds integers, saying what the loader reads there (`what`, e.g.
/// "node ids") and what the file holds: a boolean mask read as ids would be the ids 0 and 1, and
/// floats are no ids either.
void expect_integers(const NpzReader& npz, const std::string& key, const NpyInfo& info,
                     const std::string& what) {
  if (info.holds_integers()) return;
  if (info.dtype == DType::Bool) {
    npz.fail(key, "holds booleans (dtype " + info.descr + "), but the loader reads " + what +
                      " there, as integers: a boolean mask is not a list of ids (save "
                      "np.flatnonzero(mask) as int64, or a mask under the name of a mask)");
  }
  if (info.dtype) {
    npz.fail(key, "holds " + info.descr + " values, but the loader reads " + what +
                      " there: expected an integer dtype (<i8, <i4, |i1, |u1)");
  }
  // Strings and objects: check_readable's message says what they are when read.
}

/// A 1-d integer array of `key` holding `what` ("node ids"), optionally of length `length`.
std::vector<std::int64_t> read_vector(const NpzReader& npz, const std::string& key,
                                      const std::string& what, std::int64_t length = -1) {
  const NpyInfo info = npz.info(key);
  expect_shape(npz, key, info, {length});
  expect_integers(npz, key, info, what);
  return npz.read<std::int64_t>(key).data;
}

/// The 0-d integer array of `key` holding `what` ("a class count").
std::int64_t read_scalar(const NpzReader& npz, const std::string& key, const std::string& what) {
  const NpyInfo info = npz.info(key);
  expect_shape(npz, key, info, {});
  expect_integers(npz, key, info, what);
  return npz.read<std::int64_t>(key).data.front();
}

/// The masks of `key`: [S, N] (S splits) or [N] (one), booleans or the integers 0 and 1 (floats
/// and other integers are refused, naming the value). Row k marks split k's nodes.
struct Masks {
  std::int64_t splits = 0;
  std::vector<std::uint8_t> values; ///< [splits, N]
};
Masks read_masks(const NpzReader& npz, const std::string& key, std::int64_t num_nodes) {
  const NpyInfo info = npz.info(key);
  if (info.shape.size() == 1)
    expect_shape(npz, key, info, {num_nodes});
  else
    expect_shape(npz, key, info, {-1, num_nodes});
  if (info.dtype != DType::Bool && !info.holds_integers()) {
    npz.fail(key, "holds " + info.descr +
                      " values, but the loader reads a mask there: expected booleans (|b1) or "
                      "the integers 0 and 1");
  }
  Masks masks;
  masks.splits = info.shape.size() == 1 ? 1 : info.shape[0];
  masks.values = npz.read<std::uint8_t>(key).data;
  for (std::size_t i = 0; i < masks.values.size(); ++i) {
    if (masks.values[i] > 1) {
      npz.fail(key, "value " + std::to_string(masks.values[i]) + " at index " + std::to_string(i) +
                        " is not a mask value (expected 0 or 1, or booleans)");
    }
  }
  return masks;
}

/// The splits marked by the three mask arrays `keys` (train, val, test), which must hold as many
/// splits each.
std::vector<Split> splits_from_masks(const NpzReader& npz, const char* const (&keys)[3],
                                     std::int64_t num_nodes) {
  Masks masks[3];
  for (int p = 0; p < 3; ++p)
    masks[p] = read_masks(npz, keys[p], num_nodes);
  for (int p = 1; p < 3; ++p) {
    if (masks[p].splits != masks[0].splits) {
      throw FormatError(npz.path() + ": '" + keys[0] + "' holds " +
                        std::to_string(masks[0].splits) + " split(s) but '" + keys[p] + "' " +
                        std::to_string(masks[p].splits) +
                        ": every mask array must hold one row per split");
    }
  }
  std::vector<Split> splits(static_cast<std::size_t>(masks[0].splits));
  for (std::size_t k = 0; k < splits.size(); ++k) {
    std::vector<std::int32_t>* parts[3] = {&splits[k].train, &splits[k].val, &splits[k].test};
    for (int p = 0; p < 3; ++p) {
      const std::uint8_t* row = masks[p].values.data() + static_cast<std::int64_t>(k) * num_nodes;
      for (std::int64_t i = 0; i < num_nodes; ++i) {
        if (row[i] != 0) parts[p]->push_back(static_cast<std::int32_t>(i));
      }
    }
  }
  return splits;
}

/// Puts split `split_index` of `splits` in use in `ds` (and keeps them all when several).
void use_splits(Dataset& ds, std::vector<Split> splits, int split_index, const std::string& path) {
  if (split_index < 0 || split_index >= static_cast<std::int64_t>(splits.size())) {
    refuse_split_index(split_index, static_cast<std::int64_t>(splits.size()), path);
  }
  ds.split_stored = true;
  ds.train_idx = splits[split_index].train;
  ds.val_idx = splits[split_index].val;
  ds.test_idx = splits[split_index].test;
  if (splits.size() > 1) ds.all_splits = std::move(splits);
}

/// Checks a CSR row pointer over `nnz` entries: starts at 0, never decreases, ends at nnz.
void check_row_pointer(const NpzReader& npz, const std::string& key,
                       const std::vector<std::int64_t>& indptr, std::int64_t nnz) {
  if (indptr.empty()) npz.fail(key, "empty row pointer (expected num_rows + 1 entries)");
  if (indptr.front() != 0)
    npz.fail(key, "starts at " + std::to_string(indptr.front()) + ", expected 0");
  for (std::size_t i = 1; i < indptr.size(); ++i) {
    if (indptr[i] < indptr[i - 1]) {
      npz.fail(key, "decreases at index " + std::to_string(i) + " (" +
                        std::to_string(indptr[i - 1]) + " then " + std::to_string(indptr[i]) + ")");
    }
  }
  if (indptr.back() != nnz) {
    npz.fail(key, "ends at " + std::to_string(indptr.back()) + " but there are " +
                      std::to_string(nnz) + " column indices");
  }
}

/// Fails naming `key` at the first value outside [0, bound).
void check_ids(const NpzReader& npz, const std::string& key, std::span<const std::int64_t> ids,
               std::int64_t bound) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= bound) {
      npz.fail(key, "value " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                        " is outside [0, " + std::to_string(bound) + ")");
    }
  }
}

/// Labels of `key`: -1 (unknown) or a class id; the class count they imply is bounded by
/// count_classes.
std::vector<std::int32_t> read_labels(const NpzReader& npz, const std::string& key,
                                      std::int64_t num_nodes) {
  const auto values = read_vector(npz, key, "class ids", num_nodes);
  std::vector<std::int32_t> labels(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < -1 || values[i] > std::numeric_limits<std::int32_t>::max()) {
      npz.fail(key, "label " + std::to_string(values[i]) + " of node " + std::to_string(i) +
                        " is not a class id (expected >= 0, or -1 for unknown)");
    }
    labels[i] = static_cast<std::int32_t>(values[i]);
  }
  return labels;
}

/// "PATH: array 'key'", naming an array in messages of the shared checks.
std::string array_name(const NpzReader& npz, const std::string& key) {
  return npz.path() + ": array '" + key + "'";
}

/// Where label `node` is in an npz array.
std::string node_place(std::int64_t node) {
  return "node " + std::to_string(node);
}

/// Node ids of one part of a split, ascending (repeats kept, for check_split to name); an absent
/// key is an empty part.
std::vector<std::int32_t> read_split(const NpzReader& npz, const std::string& key,
                                     std::int64_t num_nodes) {
  if (!npz.contains(key)) return {};
  const auto ids = read_vector(npz, key, "node ids");
  check_ids(npz, key, ids, num_nodes);
  std::vector<std::int32_t> out(ids.begin(), ids.end());
  std::sort(out.begin(), out.end());
  return out;
}

/// The stored split(s) of a Planetoid-style npz: train_idx / val_idx / test_idx (node ids; any
/// of them marks the data as split) or train_masks / val_masks / test_masks ([S, N] masks, as
/// save_npz writes several splits). Both at once is ambiguous and refused.
void read_csr_npz_splits(const NpzReader& npz, Dataset& ds, int split_index) {
  static const char* const kIds[3] = {"train_idx", "val_idx", "test_idx"};
  static const char* const kMasks[3] = {"train_masks", "val_masks", "test_masks"};
  const auto any_of = [&](const char* const(&keys)[3]) {
    return std::any_of(std::begin(keys), std::end(keys),
                       [&](const char* key) { return npz.contains(key); });
  };
  const bool ids = any_of(kIds), masks = any_of(kMasks);
  if (ids && masks) {
    throw FormatError(npz.path() + ": holds a split both as ids (train_idx, ...) and as masks "
                                   "(train_masks, ...): keep one of them");
  }
  if (ids) {
    Split split{read_split(npz, kIds[0], ds.num_nodes), read_split(npz, kIds[1], ds.num_nodes),
                read_split(npz, kIds[2], ds.num_nodes)};
    use_splits(ds, {std::move(split)}, split_index, npz.path());
    ds.origin.split = npz.path() + ": arrays 'train_idx', 'val_idx', 'test_idx'";
  } else if (masks) {
    use_splits(ds, splits_from_masks(npz, kMasks, ds.num_nodes), split_index, npz.path());
    ds.origin.split = npz.path() + ": arrays 'train_masks', 'val_masks', 'test_masks'";
  }
}

/// The feature CSR stored as attr_indptr / attr_indices / attr_data / attr_shape.
Csr read_sparse_features(const BackendPtr& backend, const NpzReader& npz, std::int64_t num_nodes) {
  const auto indptr = read_vector(npz, "attr_indptr", "row pointers", num_nodes + 1);
  auto indices = read_vector(npz, "attr_indices", "feature ids");
  const auto nnz = static_cast<std::int64_t>(indices.size());
  check_row_pointer(npz, "attr_indptr", indptr, nnz);
  std::int64_t cols = 0;
  if (npz.contains("attr_shape")) {
    const auto shape = read_vector(npz, "attr_shape", "a shape", 2);
    if (shape[0] != num_nodes) {
      npz.fail("attr_shape", "has " + std::to_string(shape[0]) + " rows, the graph " +
                                 std::to_string(num_nodes) + " nodes");
    }
    cols = shape[1];
    if (cols < 0) {
      npz.fail("attr_shape", "has " + std::to_string(cols) + " columns: a feature count is >= 0");
    }
  } else {
    for (const auto c : indices)
      cols = std::max(cols, c + 1);
  }
  check_node_count(cols, npz.path() + ": array 'attr_shape'");
  check_ids(npz, "attr_indices", indices, cols);
  SparseEntries entries;
  entries.row.resize(indices.size());
  for (std::int64_t r = 0; r < num_nodes; ++r) {
    std::fill(entries.row.begin() + indptr[r], entries.row.begin() + indptr[r + 1], r);
  }
  entries.col.assign(indices.begin(), indices.end());
  if (npz.contains("attr_data")) {
    expect_shape(npz, "attr_data", npz.info("attr_data"), {nnz});
    entries.val = npz.read<float>("attr_data").data;
  } else {
    entries.val.assign(indices.size(), 1.0f);
  }
  return build_csr(backend, num_nodes, cols, entries);
}

/// The CSR arrays as an adjacency when they already are one in the form load_dataset promises
/// (sorted unique columns, no self-loops, symmetric: Planetoid files and save_npz output), which
/// spares rebuilding it; nullopt otherwise. Ids must be in range. With unique entries, symmetry
/// is checked in one streaming pass: the sums of hash(r, c) and hash(c, r) over all entries agree
/// exactly when the set equals its transpose (up to a 2^-64 chance), where a binary search per
/// entry would miss the cache on every lookup.
std::optional<Csr> as_canonical_adjacency(const BackendPtr& backend,
                                          const std::vector<std::int64_t>& indptr,
                                          const std::vector<std::int64_t>& indices) {
  const auto n = static_cast<std::int64_t>(indptr.size()) - 1;
  bool sorted = true;
  std::uint64_t forward = 0, backward = 0;
#pragma omp parallel for reduction(&& : sorted) reduction(+ : forward, backward) schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t k = indptr[r]; k < indptr[r + 1]; ++k) {
      const std::int64_t c = indices[k];
      sorted = sorted && c != r && (k == indptr[r] || indices[k - 1] < c);
      forward += pair_hash(r, c);
      backward += pair_hash(c, r);
    }
  }
  if (!sorted || forward != backward) return std::nullopt;
  Csr a(backend, n, n, static_cast<std::int64_t>(indices.size()));
  std::copy(indptr.begin(), indptr.end(), a.row_ptr());
#pragma omp parallel for schedule(static)
  for (std::int64_t k = 0; k < a.nnz(); ++k) {
    a.col()[k] = static_cast<LocalId>(indices[k]);
    a.val()[k] = 1.0f;
  }
  return a;
}

/// Throws FormatError for an npz without the keys of a loadable layout: for pickled Python objects
/// (np.savez of scipy matrices, the adj_matrix / attr_matrix layout of many GNN repositories) it
/// names the converter, which can unpickle them; otherwise it lists the keys found.
[[noreturn]] void refuse_unknown_layout(const NpzReader& npz) {
  std::string present;
  for (const auto& key : npz.keys()) {
    const NpyInfo info = npz.info(key);
    if (info.descr.size() >= 2 && info.descr[1] == 'O') {
      npz.fail(key, "holds pickled Python objects (dtype '" + info.descr +
                        "'), which only Python can read; convert the file once with "
                        "`python3 scripts/convert_dataset.py npz " +
                        npz.path() +
                        " OUT.npz` (Tessera's source tree; it unpickles only numpy arrays, scipy "
                        "sparse matrices and plain containers, and refuses a pickle naming "
                        "anything else) and load npz:OUT.npz");
    }
    present += (present.empty() ? "" : ", ") + key;
  }
  throw FormatError(npz.path() +
                    ": not a dataset npz: expected Planetoid / gnn-benchmark keys (adj_indptr, "
                    "adj_indices, ...) or heterophilous keys (edges, node_features, ...), found: " +
                    present);
}

Dense read_dense(const BackendPtr& backend, const NpzReader& npz, const std::string& key,
                 std::int64_t num_nodes) {
  // Checked against the member's bytes before the matrix is sized by the header's shape.
  const NpyInfo info = npz.readable_info(key);
  expect_shape(npz, key, info, {num_nodes, -1});
  Dense out(backend, num_nodes, info.shape[1]);
  npz.read_into<float>(key, std::span<float>(out.data(), static_cast<std::size_t>(out.size())));
  return out;
}

} // namespace

Dataset load_csr_npz(const BackendPtr& backend, const std::string& path, int split_index) {
  require_host(backend);
  const NpzReader npz(path);
  if (!npz.contains("adj_indptr")) refuse_unknown_layout(npz);
  Dataset ds;
  ds.name = name_from_path(path);

  const auto indptr = read_vector(npz, "adj_indptr", "row pointers");
  if (indptr.empty()) npz.fail("adj_indptr", "empty row pointer (expected num_nodes + 1 entries)");
  ds.num_nodes = static_cast<std::int64_t>(indptr.size()) - 1;
  check_node_count(ds.num_nodes, path);
  if (npz.contains("adj_shape")) {
    const auto shape = read_vector(npz, "adj_shape", "a shape", 2);
    if (shape[0] != ds.num_nodes || shape[1] != ds.num_nodes) {
      npz.fail("adj_shape", "is (" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) +
                                "), expected a square (" + std::to_string(ds.num_nodes) + ", " +
                                std::to_string(ds.num_nodes) + ") from adj_indptr");
    }
  }
  graph::EdgeList edges;
  edges.num_nodes = ds.num_nodes;
  edges.dst = read_vector(npz, "adj_indices", "node ids");
  check_row_pointer(npz, "adj_indptr", indptr, static_cast<std::int64_t>(edges.dst.size()));
  check_ids(npz, "adj_indices", edges.dst, ds.num_nodes);
  if (npz.contains("adj_data")) {
    // Edges weigh 1 in a Dataset, but a NaN or infinite stored weight means corrupt data.
    expect_shape(npz, "adj_data", npz.info("adj_data"),
                 {static_cast<std::int64_t>(edges.dst.size())});
    const auto data = npz.read<float>("adj_data").data;
    const std::size_t k = io::first_non_finite(data);
    if (k < data.size()) {
      const auto row =
          std::upper_bound(indptr.begin(), indptr.end(), static_cast<std::int64_t>(k)) -
          indptr.begin() - 1;
      npz.fail("adj_data", "edge value " + std::to_string(data[k]) + " at index " +
                               std::to_string(k) + " (row " + std::to_string(row) + ", column " +
                               std::to_string(edges.dst[k]) +
                               ") is not finite (NaN and infinite values are refused)");
    }
  }
  if (std::optional<Csr> canonical = as_canonical_adjacency(backend, indptr, edges.dst)) {
    ds.adjacency = std::move(*canonical);
  } else {
    edges.src.resize(edges.dst.size());
    for (std::int64_t r = 0; r < ds.num_nodes; ++r) {
      std::fill(edges.src.begin() + indptr[r], edges.src.begin() + indptr[r + 1], r);
    }
    ds.adjacency = graph::build_symmetric_csr(backend, edges);
  }

  if (npz.contains("attr_indptr")) {
    ds.features.sparse = read_sparse_features(backend, npz, ds.num_nodes);
  } else if (npz.contains("features")) {
    ds.features.dense = read_dense(backend, npz, "features", ds.num_nodes);
  }
  std::string class_count;
  if (npz.contains("labels")) {
    ds.labels = read_labels(npz, "labels", ds.num_nodes);
    ds.num_classes = count_classes(ds.labels, array_name(npz, "labels"), node_place);
    if (npz.contains("num_classes")) {
      const std::int64_t stored = read_scalar(npz, "num_classes", "a class count");
      // Checked before the narrowing cast: within max_class_count and above every label.
      class_count = array_name(npz, "num_classes");
      check_classes(ds.labels, stored, array_name(npz, "labels"), class_count, node_place);
      ds.num_classes = static_cast<std::int32_t>(stored);
    }
  }
  if (npz.contains("row_normalize_features")) {
    const std::int64_t value =
        read_scalar(npz, "row_normalize_features", "whether rows are normalized (0 or 1)");
    if (value != 0 && value != 1) {
      npz.fail("row_normalize_features", "holds " + std::to_string(value) + ", expected 0 or 1");
    }
    ds.row_normalize = value == 1;
  }
  read_csr_npz_splits(npz, ds, split_index);
  const Sources sources{.features =
                            array_name(npz, npz.contains("attr_indptr") ? "attr_data" : "features"),
                        .edges = array_name(npz, "adj_data"),
                        .labels = array_name(npz, "labels"),
                        .class_count = class_count};
  check_loaded(ds, sources);
  ds.origin.features =
      npz.contains("attr_indptr") ? array_name(npz, "attr_shape") : array_name(npz, "features");
  ds.origin.labels = sources.labels;
  return ds;
}

Dataset load_heterophilous_npz(const BackendPtr& backend, const std::string& path,
                               int split_index) {
  require_host(backend);
  const NpzReader npz(path);
  Dataset ds;
  ds.name = name_from_path(path);

  const NpyInfo feature_info = npz.info("node_features");
  expect_shape(npz, "node_features", feature_info, {-1, -1});
  ds.num_nodes = feature_info.shape[0];
  check_node_count(ds.num_nodes, path);
  ds.features.dense = read_dense(backend, npz, "node_features", ds.num_nodes);
  ds.labels = read_labels(npz, "node_labels", ds.num_nodes);
  ds.num_classes = count_classes(ds.labels, array_name(npz, "node_labels"), node_place);

  const NpyInfo edge_info = npz.info("edges");
  expect_shape(npz, "edges", edge_info, {-1, 2});
  expect_integers(npz, "edges", edge_info, "node ids");
  const auto pairs = npz.read<std::int64_t>("edges").data;
  check_ids(npz, "edges", pairs, ds.num_nodes);
  graph::EdgeList edges;
  edges.num_nodes = ds.num_nodes;
  edges.src.resize(pairs.size() / 2);
  edges.dst.resize(pairs.size() / 2);
  for (std::size_t e = 0; e < edges.src.size(); ++e) {
    edges.src[e] = pairs[2 * e];
    edges.dst[e] = pairs[2 * e + 1];
  }
  ds.adjacency = graph::build_symmetric_csr(backend, edges);

  static const char* const kMasks[3] = {"train_masks", "val_masks", "test_masks"};
  use_splits(ds, splits_from_masks(npz, kMasks, ds.num_nodes), split_index, path);
  ds.origin.split = npz.path() + ": arrays 'train_masks', 'val_masks', 'test_masks'";
  check_loaded(ds, {.features = array_name(npz, "node_features"),
                    .edges = array_name(npz, "edges"),
                    .labels = array_name(npz, "node_labels")});
  ds.origin.features = array_name(npz, "node_features");
  ds.origin.labels = array_name(npz, "node_labels");
  return ds;
}

namespace {

bool has_heterophilous_keys(const NpzReader& npz) {
  return npz.contains("edges") && npz.contains("node_features");
}

} // namespace

bool is_heterophilous_npz(const std::string& path) {
  return has_heterophilous_keys(NpzReader(path));
}

Dataset load_any_npz(const BackendPtr& backend, const std::string& path, int split_index) {
  const bool heterophilous = is_heterophilous_npz(path);
  return heterophilous ? load_heterophilous_npz(backend, path, split_index)
                       : load_csr_npz(backend, path, split_index);
}

} // namespace tessera::datasets::detail
