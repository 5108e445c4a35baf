// Rank-local loading: row shares cover the graph, a block read from a native folder is the slice
// of the whole load, and a bad range or a bad file inside the block is refused naming the file.
#include "dataset_test_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/row_block.hpp"
#include "tessera/io/array_file.hpp"

#include <cmath>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

/// The options of every load here: generator seed 3.
LoadOptions seed_3(int split_index = 0) {
  LoadOptions options;
  options.seed = 3;
  options.split_index = split_index;
  return options;
}

RowBlock load_rows(const std::string& spec, RowRange rows, int split_index = 0) {
  return load_dataset_rows(cpu(), spec, seed_3(split_index), rows);
}

/// 200 SBM nodes with dense features, a few labels unknown (and so in no part of the split), and
/// a split.
Dataset dense_dataset() {
  Dataset ds = load("sbm:nodes=200,classes=4,avg-degree=6,features=5", 3);
  for (std::size_t i = 0; i < ds.labels.size(); i += 7)
    ds.labels[i] = -1;
  for (auto* part : {&ds.train_idx, &ds.val_idx, &ds.test_idx}) {
    std::erase_if(*part, [&](std::int32_t id) { return ds.labels[id] < 0; });
  }
  return ds;
}

/// The dense dataset with its features kept sparse: the positive entries only.
Dataset sparse_dataset() {
  Dataset ds = dense_dataset();
  const Dense& x = *ds.features.dense;
  std::int64_t nnz = 0;
  for (std::int64_t k = 0; k < x.size(); ++k)
    nnz += x.data()[k] > 0.0f ? 1 : 0;
  Csr sparse(cpu(), x.rows(), x.cols(), nnz);
  std::int64_t k = 0;
  for (std::int64_t r = 0; r < x.rows(); ++r) {
    for (std::int64_t c = 0; c < x.cols(); ++c) {
      if (x.data()[r * x.cols() + c] <= 0.0f) continue;
      sparse.col()[k] = static_cast<LocalId>(c);
      sparse.val()[k++] = x.data()[r * x.cols() + c];
    }
    sparse.row_ptr()[r + 1] = k;
  }
  ds.features.dense.reset();
  ds.features.sparse = std::move(sparse);
  return ds;
}

/// Row ranges worth trying on `n` rows: empty ones, the first and last rows, all rows, and the
/// shares of 1 to 5 ranks.
std::vector<RowRange> ranges_of(std::int64_t n) {
  std::vector<RowRange> ranges = {{0, 0}, {n / 2, n / 2}, {n, n}, {0, 7}, {n - 5, n}, {0, n}};
  for (int ranks = 1; ranks <= 5; ++ranks) {
    for (int rank = 0; rank < ranks; ++rank)
      ranges.push_back(row_share(n, rank, ranks));
  }
  return ranges;
}

std::vector<std::int64_t> ids_inside(const std::vector<std::int32_t>& ids, RowRange rows) {
  std::vector<std::int64_t> inside;
  for (const std::int32_t id : ids) {
    if (id >= rows.first && id < rows.last) inside.push_back(id);
  }
  return inside;
}

/// The block holds rows `rows` of `whole`, compared row by row.
void expect_rows_of(const RowBlock& block, const Dataset& whole, RowRange rows) {
  EXPECT_EQ(block.name, whole.name);
  EXPECT_EQ(block.num_nodes, whole.num_nodes);
  EXPECT_EQ(block.num_classes, whole.num_classes);
  ASSERT_EQ(block.rows.first, rows.first);
  ASSERT_EQ(block.rows.last, rows.last);
  ASSERT_EQ(block.row_ptr.size(), static_cast<std::size_t>(rows.size() + 1));
  EXPECT_EQ(block.row_ptr.front(), 0);
  ASSERT_EQ(block.col.size(), static_cast<std::size_t>(block.row_ptr.back()));
  const Csr& a = whole.adjacency;
  for (std::int64_t i = 0; i < rows.size(); ++i) {
    const std::int64_t r = rows.first + i;
    const std::vector<std::int64_t> expected(a.col() + a.row_ptr()[r],
                                             a.col() + a.row_ptr()[r + 1]);
    const std::vector<std::int64_t> got(block.col.begin() + block.row_ptr[i],
                                        block.col.begin() + block.row_ptr[i + 1]);
    ASSERT_EQ(got, expected) << "row " << r;
  }
  ASSERT_EQ(block.features.dense.has_value(), whole.features.dense.has_value());
  ASSERT_EQ(block.features.sparse.has_value(), whole.features.sparse.has_value());
  if (whole.features.dense) {
    const Dense& x = *whole.features.dense;
    ASSERT_EQ(block.features.rows(), rows.size());
    ASSERT_EQ(block.features.cols(), x.cols());
    const std::vector<float> expected(x.data() + rows.first * x.cols(),
                                      x.data() + rows.last * x.cols());
    const std::vector<float> got(block.features.dense->data(),
                                 block.features.dense->data() + block.features.dense->size());
    EXPECT_EQ(got, expected);
  }
  if (whole.features.sparse) {
    const Csr& x = *whole.features.sparse;
    const Csr& y = *block.features.sparse;
    ASSERT_EQ(y.rows(), rows.size());
    ASSERT_EQ(y.cols(), x.cols());
    for (std::int64_t i = 0; i < rows.size(); ++i) {
      const std::int64_t r = rows.first + i;
      ASSERT_EQ(y.row_ptr()[i + 1] - y.row_ptr()[i], x.row_ptr()[r + 1] - x.row_ptr()[r]);
      for (Offset k = 0; k < y.row_ptr()[i + 1] - y.row_ptr()[i]; ++k) {
        ASSERT_EQ(y.col()[y.row_ptr()[i] + k], x.col()[x.row_ptr()[r] + k]) << "row " << r;
        ASSERT_EQ(y.val()[y.row_ptr()[i] + k], x.val()[x.row_ptr()[r] + k]) << "row " << r;
      }
    }
  }
  if (whole.has_labels()) {
    EXPECT_EQ(block.labels, std::vector<std::int32_t>(whole.labels.begin() + rows.first,
                                                      whole.labels.begin() + rows.last));
  } else {
    EXPECT_TRUE(block.labels.empty());
  }
  EXPECT_EQ(block.train_idx, ids_inside(whole.train_idx, rows));
  EXPECT_EQ(block.val_idx, ids_inside(whole.val_idx, rows));
  EXPECT_EQ(block.test_idx, ids_inside(whole.test_idx, rows));
}

/// Overwrites element `index` of the array file `path` with `value` (the CRC is left stale).
template <typename T> void poke(const std::string& path, std::int64_t index, T value) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(io::kArrayHeaderBytes + index * sizeof(T)));
  file.write(reinterpret_cast<const char*>(&value), sizeof value);
}

/// A native folder of the dense dataset, for the refusals.
class DatasetsRowBlockRefusals : public ::testing::Test {
protected:
  void SetUp() override { save_native(dense_dataset(), folder()); }
  std::string folder() const { return dir_.file("g"); }
  std::string file(const std::string& name) const { return folder() + "/" + name; }

  TempDir dir_;
};

TEST(DatasetsRowShare, SharesCoverTheRowsInOrderAndDifferByAtMostOne) {
  for (const std::int64_t n : {0, 1, 7, 10, 1000003}) {
    for (int ranks = 1; ranks <= 7; ++ranks) {
      std::int64_t next = 0;
      for (int rank = 0; rank < ranks; ++rank) {
        const RowRange share = row_share(n, rank, ranks);

        EXPECT_EQ(share.first, next) << n << " rows, rank " << rank << " of " << ranks;
        EXPECT_TRUE(share.size() == n / ranks || share.size() == n / ranks + 1);
        EXPECT_EQ(share.size() == n / ranks + 1, rank < n % ranks);
        next = share.last;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(DatasetsRowShare, TheRankOfARowIsTheOneWhoseShareHoldsIt) {
  for (const std::int64_t n : {1, 7, 10, 1000}) {
    for (int ranks = 1; ranks <= 7; ++ranks) {
      for (int rank = 0; rank < ranks; ++rank) {
        const RowRange share = row_share(n, rank, ranks);
        for (std::int64_t row = share.first; row < share.last; ++row)
          EXPECT_EQ(row_share_rank(row, n, ranks), rank) << row << " of " << n << ", " << ranks;
      }
    }
  }
  EXPECT_THROW(row_share_rank(10, 10, 2), InvalidArgument);
  EXPECT_THROW(row_share_rank(-1, 10, 2), InvalidArgument);
  EXPECT_THROW(row_share_rank(0, 10, 0), InvalidArgument);
}

TEST(DatasetsRowShare, RankOutsideTheJobIsRefused) {
  EXPECT_THROW(row_share(10, 3, 3), InvalidArgument);
  EXPECT_THROW(row_share(10, -1, 2), InvalidArgument);
  EXPECT_THROW(row_share(10, 0, 0), InvalidArgument);
  EXPECT_THROW(row_share(-1, 0, 1), InvalidArgument);
}

TEST(DatasetsRowBlock, NativeRowsOfDenseFeaturesEqualTheRowsOfTheWholeLoad) {
  const TempDir dir;
  save_native(dense_dataset(), dir.file("g"));
  const Dataset whole = load(dir.file("g"));

  for (const RowRange rows : ranges_of(whole.num_nodes)) {
    const RowBlock block = load_rows(dir.file("g"), rows);

    expect_rows_of(block, whole, rows);
  }
}

TEST(DatasetsRowBlock, NativeRowsOfSparseFeaturesEqualTheRowsOfTheWholeLoad) {
  const TempDir dir;
  save_native(sparse_dataset(), dir.file("g"));
  const Dataset whole = load("native:" + dir.file("g"));

  for (const RowRange rows : ranges_of(whole.num_nodes)) {
    const RowBlock block = load_rows("native:" + dir.file("g"), rows);

    expect_rows_of(block, whole, rows);
  }
}

TEST(DatasetsRowBlock, GraphWithoutFeaturesLabelsOrSplitGivesEmptyOnes) {
  const TempDir dir;
  save_native(load("snap:" + dir.write("g.txt", "0 1\n1 2\n2 3\n5 0\n")), dir.file("g"));
  const Dataset whole = load(dir.file("g"));

  const RowBlock block = load_rows(dir.file("g"), {2, 6});

  expect_rows_of(block, whole, {2, 6});
  EXPECT_FALSE(block.features.dense || block.features.sparse);
}

TEST(DatasetsRowBlock, OtherSpecsGiveTheRowsOfTheWholeLoad) {
  const std::string spec = "sbm:nodes=150,classes=3,avg-degree=5,features=4";
  const Dataset whole = load(spec, 3);

  for (const RowRange rows : {RowRange{0, 0}, RowRange{0, 150}, row_share(150, 2, 4)}) {
    const RowBlock block = load_rows(spec, rows);

    expect_rows_of(block, whole, rows);
  }
}

TEST(DatasetsRowBlock, EachRanksShareIsItsRowShareOfTheWholeLoad) {
  const TempDir dir;
  save_native(sparse_dataset(), dir.file("g"));
  const std::string generated = "sbm:nodes=150,classes=3,avg-degree=5,features=4";

  for (const std::string& spec : {dir.file("g"), generated}) {
    const Dataset whole = load(spec, 3);
    for (int rank = 0; rank < 3; ++rank) {
      const RowBlock block = load_dataset_share(cpu(), spec, seed_3(), rank, 3);

      expect_rows_of(block, whole, row_share(whole.num_nodes, rank, 3));
    }
    EXPECT_THROW(load_dataset_share(cpu(), spec, seed_3(), 3, 3), InvalidArgument);
  }
}

TEST_F(DatasetsRowBlockRefusals, RangePastTheEndIsRefusedNamingTheFileTheRangeAndTheRowCount) {
  EXPECT_THAT(
      [&] {
        load_rows(folder(), {190, 205});
      },
      ThrowsMessage<InvalidArgument>(AllOf(HasSubstr(file("adj_row_ptr.bin")),
                                           HasSubstr("rows [190, 205)"),
                                           HasSubstr("rows [0, 200)"))));
  EXPECT_THAT(
      [&] {
        load_rows(folder(), {20, 10});
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("rows [20, 10) are not a range")));
}

TEST(DatasetsRowBlock, RangePastTheEndOfAGeneratedDatasetIsRefusedNamingTheSpec) {
  const std::string spec = "sbm:nodes=50,classes=2,avg-degree=4,features=2";

  EXPECT_THAT(
      [&] {
        load_rows(spec, {40, 51});
      },
      ThrowsMessage<InvalidArgument>(
          AllOf(HasSubstr(spec), HasSubstr("rows [40, 51)"), HasSubstr("rows [0, 50)"))));
}

TEST_F(DatasetsRowBlockRefusals, SplitIndexBeyondTheStoredSplitIsRefusedAsByTheWholeLoad) {
  EXPECT_THAT(
      [&] {
        load_rows(folder(), {0, 10}, 1);
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("stores 1 split")));
}

TEST_F(DatasetsRowBlockRefusals, BadHeaderIsRefusedNamingTheFile) {
  std::fstream(file("features.bin"), std::ios::in | std::ios::out | std::ios::binary).put('X');

  EXPECT_THAT(
      [&] {
        load_rows(folder(), {0, 10});
      },
      ThrowsMessage<FormatError>(AllOf(HasSubstr(file("features.bin")), HasSubstr("bad magic"))));
}

TEST_F(DatasetsRowBlockRefusals, ShortPayloadIsRefusedNamingTheFile) {
  std::filesystem::resize_file(file("adj_col.bin"),
                               std::filesystem::file_size(file("adj_col.bin")) - 4);

  EXPECT_THAT(
      [&] {
        load_rows(folder(), {0, 10});
      },
      ThrowsMessage<FormatError>(AllOf(HasSubstr(file("adj_col.bin")), HasSubstr("truncated"))));
}

TEST_F(DatasetsRowBlockRefusals, ColumnIdOutOfRangeInTheRowsIsRefusedNamingFileAndEntry) {
  const Dataset whole = load(folder());
  const RowRange rows = row_share(200, 1, 4);
  const Offset entry = whole.adjacency.row_ptr()[rows.first] + 2;
  poke<LocalId>(file("adj_col.bin"), entry, 200);

  EXPECT_THAT([&] { load_rows(folder(), rows); },
              ThrowsMessage<FormatError>(AllOf(
                  HasSubstr(file("adj_col.bin")), HasSubstr("column id 200"),
                  HasSubstr("at entry " + std::to_string(entry)), HasSubstr("outside [0, 200)"))));
}

TEST_F(DatasetsRowBlockRefusals, DecreasingRowPointerIsRefusedNamingFileAndRow) {
  poke<Offset>(file("adj_row_ptr.bin"), 12, 0);

  EXPECT_THAT(
      [&] {
        load_rows(folder(), {5, 20});
      },
      ThrowsMessage<FormatError>(
          AllOf(HasSubstr(file("adj_row_ptr.bin")), HasSubstr("decrease at row 11"))));
}

TEST_F(DatasetsRowBlockRefusals, LabelOutOfRangeIsRefusedNamingFileAndRow) {
  poke<std::int32_t>(file("labels.bin"), 57, 9);

  EXPECT_THAT(
      [&] {
        load_rows(folder(), {50, 100});
      },
      ThrowsMessage<FormatError>(
          AllOf(HasSubstr(file("labels.bin")), HasSubstr("label 9 at row 57"))));
}

TEST_F(DatasetsRowBlockRefusals, NanFeatureIsRefusedNamingFileAndRow) {
  poke<float>(file("features.bin"), 57 * 5 + 3, std::numeric_limits<float>::quiet_NaN());

  EXPECT_THAT(
      [&] {
        load_rows(folder(), {50, 100});
      },
      ThrowsMessage<FormatError>(
          AllOf(HasSubstr(file("features.bin")), HasSubstr("row 57, column 3"))));
}

TEST_F(DatasetsRowBlockRefusals, ABadValueOutsideTheRowsIsNotRead) {
  poke<float>(file("features.bin"), 150 * 5, std::numeric_limits<float>::quiet_NaN());

  const RowBlock block = load_rows(folder(), {0, 100});

  EXPECT_EQ(block.rows.size(), 100);
  EXPECT_THROW(load_rows(folder(), {100, 200}), FormatError);
}

TEST_F(DatasetsRowBlockRefusals, UnsortedSplitIsRefusedNamingFileAndPosition) {
  const Dataset whole = load(folder());
  const auto& train = whole.train_idx;
  // Two ids swapped: the block that holds both sees them out of order.
  const auto at = std::lower_bound(train.begin(), train.end(), 40) - train.begin();
  const RowRange rows{0, train[at + 1] + 1};
  poke<std::int32_t>(file("train_idx.bin"), at, train[at + 1]);
  poke<std::int32_t>(file("train_idx.bin"), at + 1, train[at]);

  EXPECT_THAT([&] { load_rows(folder(), rows); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr(file("train_idx.bin")),
                        HasSubstr("not ascending at position " + std::to_string(at + 1)))));
}

TEST_F(DatasetsRowBlockRefusals, SplitIdPastTheLastRowIsRefusedByTheBlockThatEndsTheGraph) {
  const Dataset whole = load(folder());
  const auto last = static_cast<std::int64_t>(whole.test_idx.size()) - 1;
  poke<std::int32_t>(file("test_idx.bin"), last, 250);

  const RowBlock first_half = load_rows(folder(), {0, 100});
  EXPECT_THAT(
      [&] {
        load_rows(folder(), {100, 200});
      },
      ThrowsMessage<FormatError>(AllOf(HasSubstr(file("test_idx.bin")),
                                       HasSubstr("row id 250 at position " + std::to_string(last)),
                                       HasSubstr("outside the rows [0, 200)"))));

  EXPECT_EQ(first_half.test_idx, ids_inside(whole.test_idx, {0, 100}));
}

} // namespace
} // namespace tessera::datasets::tests
