// Pieces every loader uses to turn parsed records into a Dataset: sparse features, labels, names.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"
#include "tessera/graph/features.hpp"
#include "tessera/graph/graph.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tessera::datasets {
struct Dataset;
struct Split;
} // namespace tessera::datasets

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

/// The edges of a "source,target" CSV, one per line, node ids in [0, num_nodes); with
/// `header_allowed` a first line whose first field is no number is a header and skipped.
/// FormatError "path:line: ..." for anything else, naming `nodes_from` (what fixed the node
/// count, e.g. "the target file") for an id out of range.
graph::EdgeList read_edge_csv(const std::string& path, std::int64_t num_nodes, bool header_allowed,
                              const std::string& nodes_from);

/// The [n, n] identity as sparse features (a one-hot vector per node), for data without features.
Csr identity_features(const BackendPtr& backend, std::int64_t num_nodes);

/// Where row `row` of an array came from, for messages ("line 12", "index 5 of array 'labels'").
/// An empty RowPlace says "row <row>".
using RowPlace = std::function<std::string(std::int64_t row)>;

/// Extra classes accepted beyond the labelled rows (classes may have no member, but not many).
inline constexpr std::int64_t kClassSlack = 1024;

/// The most classes a dataset with `labelled` labelled rows may have: class ids are dense, so a
/// count far above the labelled rows is a corrupt or mistyped label, and everything sized by the
/// class count (logits, per-class tallies) would be sized by that one number.
std::int64_t max_class_count(std::int64_t labelled) noexcept;

/// 1 + the largest label, or 0 when there is none (labels of -1 mean unknown). Throws
/// FormatError naming `file`, the label and its place when that count is above
/// max_class_count(labelled rows): "FILE: label 1000000 at line 3 means 1000001 classes for 1
/// labelled rows ...".
std::int32_t count_classes(std::span<const std::int32_t> labels, const std::string& file,
                           const RowPlace& place = {});

/// Checks labels against a class count read from `count_source` (a file and field, e.g.
/// "DIR/dataset.json: num_classes"): the count is at least 0 and at most
/// max_class_count(labelled rows), every label lies in [-1, num_classes). Throws FormatError
/// naming `count_source` or `labels_file` and the row.
void check_classes(std::span<const std::int32_t> labels, std::int64_t num_classes,
                   const std::string& labels_file, const std::string& count_source,
                   const RowPlace& place = {});

/// The part of check_classes that holds for any rows of a dataset: every label lies in
/// [-1, num_classes). Throws FormatError naming `labels_file`, the label and its place.
void check_labels(std::span<const std::int32_t> labels, std::int64_t num_classes,
                  const std::string& labels_file, const std::string& count_source,
                  const RowPlace& place = {});

/// The most nodes a graph may have when its records mention `mentioned` distinct node ids: ids
/// number the rows, so every id up to the largest gets a row; allowing at most this many keeps
/// memory proportional to the data rather than to the largest number in it (2 x mentioned +
/// 1024: gaps are fine, a lone id of 2,000,000,000 is not).
std::int64_t max_node_count(std::int64_t mentioned) noexcept;

/// The files a loader read, named in messages about what came from each (empty: not read).
struct Sources {
  std::string features{}; ///< the feature values
  std::string edges{};    ///< the adjacency values
  std::string labels{};   ///< the labels
  /// Where num_classes came from when stored ("FILE: num_classes"); empty when counted.
  std::string class_count{};
};

/// The checks every loader runs on the dataset it built, naming the file each array came from:
/// features and adjacency values finite (row and column named), labels in [-1, num_classes) and
/// num_classes within max_class_count. Throws FormatError. Records the sources of the features
/// and labels in dataset.origin where the loader has not named them already.
void check_loaded(Dataset& dataset, const Sources& sources);

/// The part of check_loaded that holds for rows [first_row, ...) of a dataset: features and
/// adjacency values finite. Messages number the rows from `first_row`. Throws FormatError.
void check_finite(const Csr& adjacency, const graph::Features& features, const Sources& sources,
                  std::int64_t first_row);

/// A 64-bit hash of the ordered pair (r, c) (the splitmix64 finalizer): summed over a matrix's
/// entries as (r, c) and as (c, r), the two sums agree exactly when its pattern is symmetric (up
/// to a 2^-64 chance), in one streaming pass.
std::uint64_t pair_hash(std::int64_t r, std::int64_t c) noexcept;

/// The form a Dataset's adjacency has, checked on rows [first_row, ...) of one read from a file
/// that claims it (a native dataset): columns in [0, cols), ascending and unique in each row, no
/// self-loop, every value 1. Throws FormatError naming `col_file` or `val_file`, the row (numbered
/// from `first_row`) and the column.
void check_adjacency_rows(const Csr& adjacency, std::int64_t first_row, const std::string& col_file,
                          const std::string& val_file);

/// check_adjacency_rows over a whole [N, N] adjacency, and its symmetry: an entry (r, c) without
/// (c, r) is refused naming it.
void check_adjacency(const Csr& adjacency, const std::string& col_file,
                     const std::string& val_file);

/// Throws InvalidArgument "split index 3 is out of range: 'SOURCE' stores 1 split (accepted: 0)"
/// for `split_index` (LoadOptions::split_index).
[[noreturn]] void refuse_split_index(int split_index, std::int64_t num_splits,
                                     const std::string& source);

/// Refuses (as refuse_split_index) a `split_index` other than 0 that does not name one of the
/// `num_splits` splits `source` stores: for loaders that would otherwise ignore it. 0, the
/// default, is accepted with or without a stored split.
void check_split_index(int split_index, std::int64_t num_splits, const std::string& source);

/// The checks of one stored split, whose parts come from `source` (Dataset::Origin::split, e.g.
/// "FILE: arrays train_idx, val_idx, test_idx"); `which` names it among several ("split 3 of 10 "
/// or ""). Refused with FormatError naming the source, the split and the part:
///  - no train part or no test part (a stored split without one is not a split to train and test
///    on; a random one is drawn only for data that stores none, see make_random_split);
///  - ids not ascending, or one id listed twice in a part;
///  - parts that share nodes, naming the two parts, how many nodes collide and the first, unless
///    `allow_overlap` (--allow-split-overlap);
///  - a node of any part that is unlabelled (-1 in `labels`, from `labels_source`), which no loss
///    or accuracy can use.
/// A split without a validation part is accepted (training then selects no epoch by it).
void check_split(const Split& split, std::span<const std::int32_t> labels,
                 const std::string& source, const std::string& labels_source,
                 const std::string& which, bool allow_overlap);

/// The part of check_split that holds for the rows [first_row, ...) of a dataset, whose `labels`
/// are those rows' (ids are global): each part ascending without repeats, labelled, and the parts
/// disjoint unless `allow_overlap`. Empty parts are fine (a block of rows may hold none).
void check_split_parts(const Split& split, std::span<const std::int32_t> labels,
                       std::int64_t first_row, const std::string& source,
                       const std::string& labels_source, const std::string& which,
                       bool allow_overlap);

/// check_split of every split `dataset` stores (each of all_splits, or its one split), with the
/// sources its origin names. Does nothing for data without a stored split.
void check_stored_splits(const Dataset& dataset, bool allow_overlap);

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

/// The empty dataset a single-file loader fills: named after `path` (name_from_path), after
/// checking that `backend` is a host backend (require_host).
Dataset dataset_for_file(const BackendPtr& backend, const std::string& path);

} // namespace tessera::datasets::detail
