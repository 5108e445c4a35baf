// Writing and reading a graph's adjacency, features, labels and split as array files.
#include "tessera/io/graph_files.hpp"

#include "tessera/core/error.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"
#include "tessera/io/json_fields.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

namespace tessera::io {

namespace {

namespace fs = std::filesystem;

template <typename T> std::span<const T> span_of(const T* data, std::int64_t count) {
  return {data, static_cast<std::size_t>(count)};
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw FormatError("array file '" + path + "': " + problem);
}

std::string file_in(const std::string& folder, const std::string& name) {
  return (fs::path(folder) / name).string();
}

void write_csr(const std::string& folder, const std::string& prefix, const Csr& m,
               std::vector<std::uint32_t>& crcs) {
  const auto file = [&](const char* suffix) { return file_in(folder, prefix + suffix); };
  crcs.push_back(
      write_array(file("_row_ptr.bin"), span_of(m.row_ptr(), m.rows() + 1), m.rows() + 1));
  crcs.push_back(write_array(file("_col.bin"), span_of(m.col(), m.nnz()), m.nnz()));
  crcs.push_back(write_array(file("_val.bin"), span_of(m.val(), m.nnz()), m.nnz()));
}

/// The three files of a [rows, cols] CSR of `nnz` entries, their headers checked.
struct CsrFiles {
  CsrFiles(const std::string& folder, const std::string& prefix, std::int64_t rows,
           std::int64_t cols, std::int64_t nnz)
      : row_ptr(file_in(folder, prefix + "_row_ptr.bin"), false, rows + 1),
        col(file_in(folder, prefix + "_col.bin"), false, nnz),
        val(file_in(folder, prefix + "_val.bin"), false, nnz), cols(cols) {}

  void append_crcs(std::vector<std::uint32_t>& crcs) const {
    crcs.insert(crcs.end(), {row_ptr.crc(), col.crc(), val.crc()});
  }

  /// Rows [first, last) as a [last - first, cols] CSR whose row pointers start at 0, checking
  /// what they hold: row pointers non-decreasing, 0 at row 0, nnz at the last row, column ids in
  /// [0, cols). Reads only those rows' row pointers and entries.
  Csr read_rows(std::int64_t first, std::int64_t last) const {
    const std::int64_t rows = row_ptr.rows() - 1, nnz = col.rows();
    check_row_range("CSR of '" + row_ptr.path() + "'", first, last, rows);
    const std::vector<Offset> ptr = row_ptr.read_rows(first, last + 1);
    const Offset begin = ptr.front(), end = ptr.back();
    if ((first == 0 && begin != 0) || (last == rows && end != nnz) || begin < 0 || end > nnz) {
      fail(row_ptr.path(), "row pointers of rows [" + std::to_string(first) + ", " +
                               std::to_string(last) + "] run from " + std::to_string(begin) +
                               " to " + std::to_string(end) + ", expected 0 at row 0, " +
                               std::to_string(nnz) + " at row " + std::to_string(rows) +
                               " and values in between");
    }
    for (std::size_t i = 1; i < ptr.size(); ++i) {
      if (ptr[i - 1] > ptr[i]) {
        fail(row_ptr.path(), "row pointers decrease at row " +
                                 std::to_string(first + static_cast<std::int64_t>(i) - 1));
      }
    }
    Csr out(make_cpu_backend(), last - first, cols, end - begin);
    for (std::size_t i = 0; i < ptr.size(); ++i)
      out.row_ptr()[i] = ptr[i] - begin;
    const auto entries = static_cast<std::size_t>(end - begin);
    col.read_rows(begin, end, {out.col(), entries});
    for (std::size_t k = 0; k < entries; ++k) {
      if (out.col()[k] < 0 || out.col()[k] >= cols) {
        fail(col.path(), "column id " + std::to_string(out.col()[k]) + " at entry " +
                             std::to_string(begin + static_cast<Offset>(k)) + " is outside [0, " +
                             std::to_string(cols) + ")");
      }
    }
    val.read_rows(begin, end, {out.val(), entries});
    return out;
  }

  ArrayReader<Offset> row_ptr;
  ArrayReader<LocalId> col;
  ArrayReader<float> val;
  std::int64_t cols;
};

/// The files of a graph file set, their headers checked against `shape`.
struct GraphFileSet {
  GraphFileSet(const std::string& folder, const GraphFilesShape& shape)
      : adjacency(folder, "adj", shape.rows, shape.cols, shape.nnz),
        labels(file_in(folder, "labels.bin"), false),
        train(file_in(folder, "train_idx.bin"), false), val(file_in(folder, "val_idx.bin"), false),
        test(file_in(folder, "test_idx.bin"), false) {
    if (shape.feature_kind == "dense") {
      dense_features.emplace(file_in(folder, "features.bin"), true, shape.rows,
                             shape.feature_width);
    } else if (shape.feature_kind == "sparse") {
      sparse_features.emplace(folder, "feat", shape.rows, shape.feature_width, shape.feature_nnz);
    } else if (shape.feature_kind != "none") {
      fail(folder, "feature kind '" + shape.feature_kind + "', expected dense, sparse or none");
    }
    if (labels.rows() != 0 && labels.rows() != shape.rows) {
      fail(labels.path(),
           std::to_string(labels.rows()) + " labels for " + std::to_string(shape.rows) + " rows");
    }
  }

  /// The CRCs of the headers in file order (write_graph_files').
  void append_crcs(std::vector<std::uint32_t>& crcs) const {
    adjacency.append_crcs(crcs);
    if (dense_features) crcs.push_back(dense_features->crc());
    if (sparse_features) sparse_features->append_crcs(crcs);
    crcs.insert(crcs.end(), {labels.crc(), train.crc(), val.crc(), test.crc()});
  }

  /// Rows [first, last) of the features ([last - first, F]); none when the set has none.
  graph::Features read_features(std::int64_t first, std::int64_t last) const {
    graph::Features features;
    if (dense_features) {
      Dense x(make_cpu_backend(), last - first, dense_features->cols());
      dense_features->read_rows(first, last, {x.data(), static_cast<std::size_t>(x.size())});
      features.dense = std::move(x);
    } else if (sparse_features) {
      features.sparse = sparse_features->read_rows(first, last);
    }
    return features;
  }

  /// Rows [first, last) of the labels; none when the set has none.
  std::vector<std::int32_t> read_labels(std::int64_t first, std::int64_t last) const {
    return labels.rows() == 0 ? std::vector<std::int32_t>{} : labels.read_rows(first, last);
  }

  CsrFiles adjacency;
  std::optional<ArrayReader<float>> dense_features;
  std::optional<CsrFiles> sparse_features;
  ArrayReader<std::int32_t> labels, train, val, test;
};

[[noreturn]] void fail_row_id(const std::string& path, std::int32_t id, std::int64_t position,
                              std::int64_t rows) {
  fail(path, "row id " + std::to_string(id) + " at position " + std::to_string(position) +
                 " is outside the rows [0, " + std::to_string(rows) + ")");
}

/// Every id of a split file, each checked to be a row in [0, rows).
std::vector<std::int32_t> read_ids(const ArrayReader<std::int32_t>& file, std::int64_t rows) {
  std::vector<std::int32_t> ids = file.read_rows(0, file.rows());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= rows) {
      fail_row_id(file.path(), ids[i], static_cast<std::int64_t>(i), rows);
    }
  }
  return ids;
}

/// The ids of an ascending split file that lie in [first, last), found by two binary searches of
/// single-id reads and read as one range: memory O(those ids), not O(the file).
std::vector<std::int32_t> read_ids_in(const ArrayReader<std::int32_t>& file, std::int64_t rows,
                                      std::int64_t first, std::int64_t last) {
  const auto id_at = [&file](std::int64_t position) {
    std::int32_t id = 0;
    file.read_rows(position, position + 1, {&id, 1});
    return id;
  };
  const auto lower_bound = [&](std::int64_t value) {
    std::int64_t low = 0, high = file.rows();
    while (low < high) {
      const std::int64_t mid = low + (high - low) / 2;
      if (id_at(mid) < value) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    return low;
  };
  // Whatever the file holds, a search ends with id[begin - 1] < first <= id[begin], and the next
  // rank, whose rows start at `last`, searches the same bound: the ranks' windows abut. Each
  // checks its window is ascending, and the ranks holding row 0 and the last row check the ids
  // before and after all windows, so together they check the whole file is ascending and inside
  // [0, rows).
  const std::int64_t begin = lower_bound(first), end = lower_bound(last);
  if (first == 0 && begin > 0) fail_row_id(file.path(), id_at(begin - 1), begin - 1, rows);
  if (last == rows && end < file.rows()) fail_row_id(file.path(), id_at(end), end, rows);
  std::vector<std::int32_t> ids = file.read_rows(begin, end);
  for (std::size_t i = 1; i < ids.size(); ++i) {
    if (ids[i - 1] >= ids[i]) {
      fail(file.path(), (ids[i - 1] == ids[i]
                             ? "row id " + std::to_string(ids[i]) + " is listed twice, at position "
                             : std::string("row ids are not ascending at "
                                           "position ")) +
                            std::to_string(begin + static_cast<std::int64_t>(i)) + " (" +
                            std::to_string(ids[i]) + " after " + std::to_string(ids[i - 1]) + ")");
    }
  }
  return ids;
}

/// The three split files of `folder`.
struct SplitFileSet {
  explicit SplitFileSet(const std::string& folder)
      : train(file_in(folder, "train_idx.bin"), false), val(file_in(folder, "val_idx.bin"), false),
        test(file_in(folder, "test_idx.bin"), false) {}
  ArrayReader<std::int32_t> train, val, test;
};

} // namespace

std::size_t first_non_finite(std::span<const float> values) noexcept {
  // Blocks of a branch-free test on the exponent bits (all ones: NaN or infinite), which the
  // compiler vectorizes; only a block that holds a bad value is searched.
  constexpr std::size_t kBlock = 4096;
  const auto bad = [](float v) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return (bits & 0x7F800000u) == 0x7F800000u;
  };
  for (std::size_t begin = 0; begin < values.size(); begin += kBlock) {
    const std::size_t end = std::min(values.size(), begin + kBlock);
    bool any = false;
    for (std::size_t i = begin; i < end; ++i)
      any |= bad(values[i]);
    if (!any) continue;
    for (std::size_t i = begin; i < end; ++i) {
      if (bad(values[i])) return i;
    }
  }
  return values.size();
}

namespace {

[[noreturn]] void fail_not_finite(const std::string& path, std::string_view what, float value,
                                  std::int64_t row, std::int64_t col) {
  throw FormatError(path + ": " + std::string(what) + " " + std::to_string(value) + " at row " +
                    std::to_string(row) + ", column " + std::to_string(col) +
                    " is not finite (NaN and infinite values are refused)");
}

} // namespace

void require_finite(const Csr& matrix, const std::string& path, std::string_view what,
                    std::int64_t first_row) {
  const std::span<const float> values(matrix.val(), static_cast<std::size_t>(matrix.nnz()));
  const std::size_t k = first_non_finite(values);
  if (k == values.size()) return;
  const Offset* row_ptr = matrix.row_ptr();
  const auto row =
      std::upper_bound(row_ptr, row_ptr + matrix.rows() + 1, static_cast<Offset>(k)) - row_ptr - 1;
  fail_not_finite(path, what, values[k], first_row + row, matrix.col()[k]);
}

void require_finite(const Dense& matrix, const std::string& path, std::string_view what,
                    std::int64_t first_row) {
  const std::span<const float> values(matrix.data(), static_cast<std::size_t>(matrix.size()));
  const std::size_t k = first_non_finite(values);
  if (k == values.size()) return;
  const auto cols = static_cast<std::size_t>(matrix.cols());
  fail_not_finite(path, what, values[k], first_row + static_cast<std::int64_t>(k / cols),
                  static_cast<std::int64_t>(k % cols));
}

const char* feature_kind(const graph::Features& features) {
  return features.dense ? "dense" : features.sparse ? "sparse" : "none";
}

GraphFilesShape graph_files_shape(const Csr& adjacency, const graph::Features& features) {
  return {adjacency.rows(),       adjacency.cols(), adjacency.nnz(),
          feature_kind(features), features.cols(),  features.sparse ? features.sparse->nnz() : 0};
}

void add_shape(nlohmann::ordered_json& description, const GraphFilesShape& shape) {
  description["nnz"] = shape.nnz;
  description["feature_kind"] = shape.feature_kind;
  description["feature_width"] = shape.feature_width;
  description["feature_nnz"] = shape.feature_nnz;
}

GraphFilesShape read_shape(const nlohmann::json& description, std::int64_t rows, std::int64_t cols,
                           const std::string& path) {
  GraphFilesShape shape;
  shape.rows = rows;
  shape.cols = cols;
  get_integer(description, "nnz", shape.nnz, path);
  description.at("feature_kind").get_to(shape.feature_kind);
  get_integer(description, "feature_width", shape.feature_width, path);
  get_integer(description, "feature_nnz", shape.feature_nnz, path);
  if (rows < 0 || cols < 0 || shape.nnz < 0 || shape.feature_width < 0 || shape.feature_nnz < 0) {
    throw FormatError(path + ": negative size in the description");
  }
  return shape;
}

void write_graph_files(const std::string& folder, const Csr& adjacency,
                       const graph::Features& features, std::span<const std::int32_t> labels,
                       std::span<const std::int32_t> train, std::span<const std::int32_t> val,
                       std::span<const std::int32_t> test, std::vector<std::uint32_t>& crcs) {
  create_folder(folder);
  const auto file = [&](const char* name) { return file_in(folder, name); };
  write_csr(folder, "adj", adjacency, crcs);
  if (features.dense) {
    const Dense& x = *features.dense;
    crcs.push_back(
        write_array(file("features.bin"), span_of(x.data(), x.size()), x.rows(), x.cols()));
  } else if (features.sparse) {
    write_csr(folder, "feat", *features.sparse, crcs);
  }
  const auto ints = [&](const char* name, std::span<const std::int32_t> values) {
    crcs.push_back(write_array(file(name), values, static_cast<std::int64_t>(values.size())));
  };
  ints("labels.bin", labels);
  ints("train_idx.bin", train);
  ints("val_idx.bin", val);
  ints("test_idx.bin", test);
}

GraphFiles read_graph_files(const std::string& folder, const GraphFilesShape& shape,
                            std::vector<std::uint32_t>& crcs) {
  const GraphFileSet files(folder, shape);
  files.append_crcs(crcs);
  GraphFiles g;
  g.adjacency = files.adjacency.read_rows(0, shape.rows);
  g.features = files.read_features(0, shape.rows);
  g.labels = files.read_labels(0, shape.rows);
  g.train_idx = read_ids(files.train, shape.rows);
  g.val_idx = read_ids(files.val, shape.rows);
  g.test_idx = read_ids(files.test, shape.rows);
  return g;
}

void write_split_files(const std::string& folder, std::span<const std::int32_t> train,
                       std::span<const std::int32_t> val, std::span<const std::int32_t> test) {
  create_folder(folder);
  for (const auto& [name, ids] : {std::pair{"train_idx.bin", train}, std::pair{"val_idx.bin", val},
                                  std::pair{"test_idx.bin", test}}) {
    write_array(file_in(folder, name), ids, static_cast<std::int64_t>(ids.size()));
  }
}

void read_split_files(const std::string& folder, std::int64_t rows, GraphFiles& into) {
  const SplitFileSet files(folder);
  into.train_idx = read_ids(files.train, rows);
  into.val_idx = read_ids(files.val, rows);
  into.test_idx = read_ids(files.test, rows);
}

void read_split_file_rows(const std::string& folder, std::int64_t rows, std::int64_t first,
                          std::int64_t last, GraphFiles& into) {
  const SplitFileSet files(folder);
  into.train_idx = read_ids_in(files.train, rows, first, last);
  into.val_idx = read_ids_in(files.val, rows, first, last);
  into.test_idx = read_ids_in(files.test, rows, first, last);
}

GraphFiles read_graph_file_rows(const std::string& folder, const GraphFilesShape& shape,
                                std::int64_t first, std::int64_t last) {
  const GraphFileSet files(folder, shape);
  GraphFiles g;
  g.adjacency = files.adjacency.read_rows(first, last);
  g.features = files.read_features(first, last);
  g.labels = files.read_labels(first, last);
  g.train_idx = read_ids_in(files.train, shape.rows, first, last);
  g.val_idx = read_ids_in(files.val, shape.rows, first, last);
  g.test_idx = read_ids_in(files.test, shape.rows, first, last);
  return g;
}

} // namespace tessera::io
