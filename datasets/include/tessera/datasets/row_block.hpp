// Rank-local loading: the contiguous block of a dataset's rows that one rank of a distributed job
// reads, so that no rank holds the whole graph before it is partitioned.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/graph/features.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera::datasets {

/// Rows [first, last) of a graph.
struct RowRange {
  std::int64_t first = 0, last = 0;
  std::int64_t size() const noexcept { return last - first; }
};

/// Rank `rank`'s contiguous share of `num_nodes` rows among `ranks`: sizes differ by at most one,
/// lower ranks get the extra rows, and the shares of ranks 0, 1, ... cover [0, num_nodes) in
/// order. Throws InvalidArgument unless num_nodes >= 0 and 0 <= rank < ranks.
RowRange row_share(std::int64_t num_nodes, int rank, int ranks);

/// The rank whose row_share(num_nodes, rank, ranks) holds `row`. Throws InvalidArgument unless
/// 0 <= row < num_nodes and ranks >= 1.
int row_share_rank(std::int64_t row, std::int64_t num_nodes, int ranks);

/// The rows [rows.first, rows.last) of a dataset: what one rank of a distributed job holds.
/// Edges weigh 1, as in a Dataset, so the adjacency has no values.
struct RowBlock {
  std::string name;
  std::int64_t num_nodes = 0; ///< of the whole graph
  std::int32_t num_classes = 0;
  RowRange rows;
  std::vector<std::int64_t> row_ptr; ///< [rows.size() + 1], starting at 0
  std::vector<std::int64_t> col;     ///< [row_ptr.back()] global column ids, sorted within a row
  graph::Features features; ///< [rows.size(), F], dense or sparse as stored; none without features
  std::vector<std::int32_t> labels; ///< [rows.size()], -1 unknown; empty without labels
  /// The split's global ids inside `rows`, ascending.
  std::vector<std::int64_t> train_idx, val_idx, test_idx;
  bool row_normalize = false; ///< Dataset::row_normalize of the whole dataset
};

/// Loads rows `rows` of `spec` (any spec load_dataset takes). A native dataset (its folder, or
/// native:DIR) is read only where those rows lie in every file: memory O(rows + their nonzeros),
/// split files searched rather than read whole. Any other spec is loaded whole by load_dataset and
/// cut to the rows: the same block, at the memory of the whole dataset.
///
/// Checks what load_dataset checks that the rows hold, naming the file and the position: the
/// files' headers, row pointers, column ids in [0, N), finite features and edge values, labels in
/// [-1, num_classes), split ids in range and, as the search needs, ascending. For a native dataset,
/// what needs a whole file is left out: the CRCs (checked only when the rows are all rows), the
/// bound of the class count by the labelled rows (its bound by the node count holds), and the order
/// and range of the split ids outside the block's window (the blocks of all ranks of row_share
/// together check every id). The adjacency's symmetry needs every block: see symmetry_sums.
///
/// Throws like load_dataset, and InvalidArgument naming the file (the spec when not native), the
/// range and the row count when `rows` is not inside [0, num_nodes].
RowBlock load_dataset_rows(const BackendPtr& backend, const std::string& spec,
                           const LoadOptions& options, RowRange rows);

/// Rank `rank`'s share of `spec` among `ranks`: load_dataset_rows of row_share(num_nodes, rank,
/// ranks), for a caller that does not know the node count (a native dataset's comes from its
/// dataset.json before any row is read). Throws as load_dataset_rows and row_share.
RowBlock load_dataset_share(const BackendPtr& backend, const std::string& spec,
                            const LoadOptions& options, int rank, int ranks);

/// The block's terms of a symmetry test of the whole adjacency: summed over the blocks of every
/// row (an allreduce), both sums are 0 exactly when each entry (r, c) has its mirror (c, r) (up
/// to a 2^-64 chance). Each entry adds the difference of 32 bits of hash(r, c) and of hash(c, r),
/// so no sum over fewer than 2^31 entries overflows.
std::array<std::int64_t, 2> symmetry_sums(const RowBlock& block);

/// Throws FormatError naming `name` unless the symmetry_sums of all blocks, summed, are 0.
void check_symmetry_sums(std::span<const std::int64_t> sums, const std::string& name);

} // namespace tessera::datasets
