// Writing and reading a graph's adjacency, features, labels and split as array files.
#include "tessera/io/graph_files.hpp"

#include "tessera/core/error.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace tessera::io {

namespace {

namespace fs = std::filesystem;

template <typename T> std::span<const T> span_of(const T* data, std::int64_t count) {
  return {data, static_cast<std::size_t>(count)};
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw FormatError("array file '" + path + "': " + problem);
}

void write_csr(const std::string& folder, const std::string& prefix, const Csr& m,
               std::vector<std::uint32_t>& crcs) {
  const auto file = [&](const char* suffix) {
    return (fs::path(folder) / (prefix + suffix)).string();
  };
  crcs.push_back(
      write_array(file("_row_ptr.bin"), span_of(m.row_ptr(), m.rows() + 1), m.rows() + 1));
  crcs.push_back(write_array(file("_col.bin"), span_of(m.col(), m.nnz()), m.nnz()));
  crcs.push_back(write_array(file("_val.bin"), span_of(m.val(), m.nnz()), m.nnz()));
}

/// Reads prefix_row_ptr/col/val as a [rows, cols] CSR of nnz entries, checking its structure.
Csr read_csr(const std::string& folder, const std::string& prefix, std::int64_t rows,
             std::int64_t cols, std::int64_t nnz, std::vector<std::uint32_t>& crcs) {
  const auto file = [&](const char* suffix) {
    return (fs::path(folder) / (prefix + suffix)).string();
  };
  auto row_ptr = read_array<Offset>(file("_row_ptr.bin"), false, rows + 1);
  auto col = read_array<LocalId>(file("_col.bin"), false, nnz);
  auto val = read_array<float>(file("_val.bin"), false, nnz);
  crcs.insert(crcs.end(), {row_ptr.crc, col.crc, val.crc});
  const std::string path = file("_row_ptr.bin");
  if (row_ptr.data.front() != 0 || row_ptr.data.back() != nnz) {
    fail(path, "row pointers run from " + std::to_string(row_ptr.data.front()) + " to " +
                   std::to_string(row_ptr.data.back()) + ", expected 0 to " + std::to_string(nnz));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    if (row_ptr.data[r] > row_ptr.data[r + 1]) {
      fail(path, "row pointers decrease at row " + std::to_string(r));
    }
  }
  for (std::int64_t k = 0; k < nnz; ++k) {
    if (col.data[k] < 0 || col.data[k] >= cols) {
      fail(file("_col.bin"), "column id " + std::to_string(col.data[k]) + " at entry " +
                                 std::to_string(k) + " is outside [0, " + std::to_string(cols) +
                                 ")");
    }
  }
  Csr out(make_cpu_backend(), rows, cols, nnz);
  std::copy(row_ptr.data.begin(), row_ptr.data.end(), out.row_ptr());
  std::copy(col.data.begin(), col.data.end(), out.col());
  std::copy(val.data.begin(), val.data.end(), out.val());
  return out;
}

/// Reads a split file and checks every id is a row in [0, rows).
std::vector<std::int32_t> read_rows(const std::string& path, std::int64_t rows,
                                    std::vector<std::uint32_t>& crcs) {
  auto ids = read_array<std::int32_t>(path, false);
  crcs.push_back(ids.crc);
  for (std::size_t i = 0; i < ids.data.size(); ++i) {
    if (ids.data[i] < 0 || ids.data[i] >= rows) {
      fail(path, "row id " + std::to_string(ids.data[i]) + " at position " + std::to_string(i) +
                     " is outside the rows [0, " + std::to_string(rows) + ")");
    }
  }
  return std::move(ids.data);
}

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

void require_finite(const Csr& matrix, const std::string& path, std::string_view what) {
  const std::span<const float> values(matrix.val(), static_cast<std::size_t>(matrix.nnz()));
  const std::size_t k = first_non_finite(values);
  if (k == values.size()) return;
  const Offset* row_ptr = matrix.row_ptr();
  const auto row =
      std::upper_bound(row_ptr, row_ptr + matrix.rows() + 1, static_cast<Offset>(k)) - row_ptr - 1;
  fail_not_finite(path, what, values[k], row, matrix.col()[k]);
}

void require_finite(const Dense& matrix, const std::string& path, std::string_view what) {
  const std::span<const float> values(matrix.data(), static_cast<std::size_t>(matrix.size()));
  const std::size_t k = first_non_finite(values);
  if (k == values.size()) return;
  const auto cols = static_cast<std::size_t>(matrix.cols());
  fail_not_finite(path, what, values[k], static_cast<std::int64_t>(k / cols),
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
  description.at("nnz").get_to(shape.nnz);
  description.at("feature_kind").get_to(shape.feature_kind);
  description.at("feature_width").get_to(shape.feature_width);
  description.at("feature_nnz").get_to(shape.feature_nnz);
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
  const auto file = [&](const char* name) { return (fs::path(folder) / name).string(); };
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
  const auto file = [&](const char* name) { return (fs::path(folder) / name).string(); };
  GraphFiles g;
  g.adjacency = read_csr(folder, "adj", shape.rows, shape.cols, shape.nnz, crcs);
  if (shape.feature_kind == "dense") {
    auto x = read_array<float>(file("features.bin"), true, shape.rows, shape.feature_width);
    crcs.push_back(x.crc);
    Dense dense(make_cpu_backend(), shape.rows, shape.feature_width);
    std::copy(x.data.begin(), x.data.end(), dense.data());
    g.features.dense = std::move(dense);
  } else if (shape.feature_kind == "sparse") {
    g.features.sparse =
        read_csr(folder, "feat", shape.rows, shape.feature_width, shape.feature_nnz, crcs);
  } else if (shape.feature_kind != "none") {
    fail(folder, "feature kind '" + shape.feature_kind + "', expected dense, sparse or none");
  }
  auto labels = read_array<std::int32_t>(file("labels.bin"), false);
  crcs.push_back(labels.crc);
  if (!labels.data.empty() && static_cast<std::int64_t>(labels.data.size()) != shape.rows) {
    fail(file("labels.bin"), std::to_string(labels.data.size()) + " labels for " +
                                 std::to_string(shape.rows) + " rows");
  }
  g.labels = std::move(labels.data);
  g.train_idx = read_rows(file("train_idx.bin"), shape.rows, crcs);
  g.val_idx = read_rows(file("val_idx.bin"), shape.rows, crcs);
  g.test_idx = read_rows(file("test_idx.bin"), shape.rows, crcs);
  return g;
}

} // namespace tessera::io
