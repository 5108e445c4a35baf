// Helpers of the dataset tests: a temporary folder, file writing and tensor comparisons.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/datasets/dataset.hpp"
#include "test_data.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace tessera::datasets::tests {

inline BackendPtr cpu() {
  static const BackendPtr backend = make_cpu_backend();
  return backend;
}

/// A fresh folder under the system temp folder, removed with its contents on destruction.
class TempDir {
public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ =
        std::filesystem::temp_directory_path() /
        ("tessera-datasets-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The path of `name` inside the folder.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// Writes `content` to `name` and returns its path.
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream out(file(name), std::ios::binary);
    out << content;
    return file(name);
  }

private:
  std::filesystem::path path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Loads `spec` with the shared data folder and `seed`.
inline Dataset load(const std::string& spec, std::uint64_t seed = 0, int split_index = 0) {
  LoadOptions options;
  options.data_dir = tessera::testing::shared_data_dir();
  options.seed = seed;
  options.split_index = split_index;
  return load_dataset(cpu(), spec, options);
}

inline void expect_same_csr(const Csr& a, const Csr& b) {
  ASSERT_EQ(a.rows(), b.rows());
  ASSERT_EQ(a.cols(), b.cols());
  ASSERT_EQ(a.nnz(), b.nnz());
  for (std::int64_t r = 0; r <= a.rows(); ++r)
    ASSERT_EQ(a.row_ptr()[r], b.row_ptr()[r]) << "row " << r;
  for (std::int64_t k = 0; k < a.nnz(); ++k) {
    ASSERT_EQ(a.col()[k], b.col()[k]) << "entry " << k;
    ASSERT_EQ(a.val()[k], b.val()[k]) << "entry " << k;
  }
}

inline void expect_same_dense(const Dense& a, const Dense& b) {
  ASSERT_EQ(a.rows(), b.rows());
  ASSERT_EQ(a.cols(), b.cols());
  for (std::int64_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(a.data()[i], b.data()[i]) << "element " << i;
}

/// Everything load_dataset promises about the adjacency: square, sorted unique columns, no
/// self-loops, values 1, symmetric.
inline void expect_canonical_adjacency(const Dataset& ds) {
  const Csr& a = ds.adjacency;
  ASSERT_EQ(a.rows(), ds.num_nodes);
  ASSERT_EQ(a.cols(), ds.num_nodes);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      ASSERT_NE(a.col()[k], r) << "self-loop at row " << r;
      ASSERT_EQ(a.val()[k], 1.0f);
      if (k > a.row_ptr()[r]) {
        ASSERT_LT(a.col()[k - 1], a.col()[k]) << "row " << r;
      }
    }
  }
  // Symmetric: the count of (r, c) with r < c equals that with r > c, and each has a mirror.
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      const LocalId c = a.col()[k];
      const LocalId* first = a.col() + a.row_ptr()[c];
      const LocalId* last = a.col() + a.row_ptr()[c + 1];
      ASSERT_TRUE(std::binary_search(first, last, static_cast<LocalId>(r)))
          << "(" << r << ", " << c << ") has no mirror";
    }
  }
}

/// Compares what datasets and partition tiles both hold: adjacency, features, labels, split.
template <typename Graph>
void expect_same_graph_fields(const Graph& a, const Graph& b) {
  expect_same_csr(a.adjacency, b.adjacency);
  ASSERT_EQ(a.features.dense.has_value(), b.features.dense.has_value());
  ASSERT_EQ(a.features.sparse.has_value(), b.features.sparse.has_value());
  if (a.features.dense) expect_same_dense(*a.features.dense, *b.features.dense);
  if (a.features.sparse) expect_same_csr(*a.features.sparse, *b.features.sparse);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.train_idx, b.train_idx);
  EXPECT_EQ(a.val_idx, b.val_idx);
  EXPECT_EQ(a.test_idx, b.test_idx);
}

inline void expect_same_dataset(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.num_nodes, b.num_nodes);
  expect_same_graph_fields(a, b);
}

} // namespace tessera::datasets::tests
