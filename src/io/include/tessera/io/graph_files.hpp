// The file set of one graph in a folder of array files: adjacency CSR, features, labels and
// split. Native datasets and partition-store tiles both hold one.
#pragma once

#include "tessera/core/tensor.hpp"
#include "tessera/graph/features.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::io {

/// "dense", "sparse" or "none": how features are stored.
const char* feature_kind(const graph::Features& features);

/// Index of the first NaN or infinite value of `values`, or values.size() when every one is
/// finite.
std::size_t first_non_finite(std::span<const float> values) noexcept;

/// Throws FormatError "`path`: <what> <value> at row r, column c is not finite (NaN and infinite
/// values are refused)" for the first NaN or infinite value of `matrix`: inputs are checked at
/// load so that a bad value never trains silently to a NaN loss. `first_row` is the number the
/// message gives the matrix's row 0 (rows [first_row, ...) of a larger matrix).
void require_finite(const Csr& matrix, const std::string& path, std::string_view what,
                    std::int64_t first_row = 0);
void require_finite(const Dense& matrix, const std::string& path, std::string_view what,
                    std::int64_t first_row = 0);

/// What a reader must know before reading a graph file set (kept in the folder's JSON).
struct GraphFilesShape {
  std::int64_t rows = 0; ///< adjacency rows (= feature rows, label count)
  std::int64_t cols = 0; ///< adjacency columns
  std::int64_t nnz = 0;
  std::string feature_kind = "none";
  std::int64_t feature_width = 0;
  std::int64_t feature_nnz = 0; ///< sparse features only
};

/// The shape of the file set write_graph_files writes for these arrays.
GraphFilesShape graph_files_shape(const Csr& adjacency, const graph::Features& features);

/// Adds the shape's counts (nnz, feature_kind, feature_width, feature_nnz) to the JSON that
/// describes a folder (native dataset.json, a store's part.json).
void add_shape(nlohmann::ordered_json& description, const GraphFilesShape& shape);

/// The shape recorded by add_shape, for a [rows, cols] adjacency. Throws
/// nlohmann::json::exception when a field is missing, FormatError naming `path` when a count is
/// negative.
GraphFilesShape read_shape(const nlohmann::json& description, std::int64_t rows, std::int64_t cols,
                           const std::string& path);

/// A graph file set read back, or rows [first, last) of one (read_graph_file_rows).
struct GraphFiles {
  Csr adjacency;                    ///< [rows, cols], or [last - first, cols]
  graph::Features features;         ///< [rows, F], or [last - first, F]; none without features
  std::vector<std::int32_t> labels; ///< [rows], or [last - first]; empty without labels
  /// Row ids of the split: all of them, or those in [first, last).
  std::vector<std::int32_t> train_idx, val_idx, test_idx;
};

/// Writes, in this order: adj_row_ptr.bin, adj_col.bin, adj_val.bin; features.bin (dense) or
/// feat_row_ptr.bin, feat_col.bin, feat_val.bin (sparse) or nothing; labels.bin, train_idx.bin,
/// val_idx.bin, test_idx.bin. Appends each file's payload CRC to `crcs`.
void write_graph_files(const std::string& folder, const Csr& adjacency,
                       const graph::Features& features, std::span<const std::int32_t> labels,
                       std::span<const std::int32_t> train, std::span<const std::int32_t> val,
                       std::span<const std::int32_t> test, std::vector<std::uint32_t>& crcs);

/// Moves a file set's arrays into the members of the same names of `target` (a Dataset, a tile).
template <typename Target> void move_graph_files(GraphFiles&& files, Target& target) {
  target.adjacency = std::move(files.adjacency);
  target.features = std::move(files.features);
  target.labels = std::move(files.labels);
  target.train_idx = std::move(files.train_idx);
  target.val_idx = std::move(files.val_idx);
  target.test_idx = std::move(files.test_idx);
}

/// Reads the file set written by write_graph_files and checks it against `shape`: CSR row
/// pointers and column ids in range, one label per row (or none), split ids in [0, rows).
/// Appends the CRCs in file order. Throws IoError / FormatError naming the file.
GraphFiles read_graph_files(const std::string& folder, const GraphFilesShape& shape,
                            std::vector<std::uint32_t>& crcs);

/// The split files alone (train_idx.bin, val_idx.bin, test_idx.bin) of `folder`: a further split
/// of a native dataset that stores several. write_split_files creates the folder; read_split_files
/// reads every id, checked to be a row in [0, rows), into `into`'s split; read_split_file_rows
/// only the ids in [first, last), as read_graph_file_rows does. Throws IoError / FormatError
/// naming the file.
void write_split_files(const std::string& folder, std::span<const std::int32_t> train,
                       std::span<const std::int32_t> val, std::span<const std::int32_t> test);
void read_split_files(const std::string& folder, std::int64_t rows, GraphFiles& into);
void read_split_file_rows(const std::string& folder, std::int64_t rows, std::int64_t first,
                          std::int64_t last, GraphFiles& into);

/// Rows [first, last) of the file set written by write_graph_files, each file read only where
/// those rows lie (memory O(last - first + their entries)): their adjacency and feature rows
/// (row pointers from 0), their labels, and the ids of each split inside [first, last), found by
/// binary search, so split files must be ascending (write_graph_files' callers write them so).
/// Checks what read_graph_files checks that the rows hold: the headers against `shape`, row
/// pointers non-decreasing (0 at row 0, nnz at the last), column ids in range, one label per row
/// or none, split ids ascending (and inside [0, rows) at the ends of the file, for the rows at
/// the ends of the graph; and within the rows, each id once). The CRCs are not checked
/// (array_file.hpp) unless the rows are all rows. Throws InvalidArgument naming the file and the
/// range when [first, last) is not inside [0, shape.rows], IoError / FormatError naming the file.
GraphFiles read_graph_file_rows(const std::string& folder, const GraphFilesShape& shape,
                                std::int64_t first, std::int64_t last);

} // namespace tessera::io
