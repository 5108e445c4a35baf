// Symmetric CSR construction, GCN normalization, transposition, degree statistics and column
// tiles.
#include "tessera/core/error.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/ops/ops.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace {

BackendPtr cpu() {
  static const BackendPtr backend = make_cpu_backend();
  return backend;
}

std::vector<std::vector<float>> to_dense(const Csr& a) {
  std::vector<std::vector<float>> d(a.rows(), std::vector<float>(a.cols(), 0.0f));
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) d[r][a.col()[k]] += a.val()[k];
  }
  return d;
}

graph::EdgeList edges_of(std::int64_t n, std::initializer_list<std::pair<int, int>> pairs) {
  graph::EdgeList e;
  e.num_nodes = n;
  for (auto [u, v] : pairs) e.add(u, v);
  return e;
}

TEST(BuildSymmetricCsr, SymmetrizesDeduplicatesAndDropsSelfLoops) {
  const graph::EdgeList e = edges_of(4, {{0, 1}, {1, 0}, {0, 1}, {2, 2}, {3, 1}});

  const Csr a = graph::build_symmetric_csr(cpu(), e);

  EXPECT_EQ(a.nnz(), 4);  // {0,1} and {1,3}, both directions
  const std::vector<std::vector<float>> expected = {
      {0, 1, 0, 0}, {1, 0, 0, 1}, {0, 0, 0, 0}, {0, 1, 0, 0}};
  EXPECT_EQ(to_dense(a), expected);
  EXPECT_TRUE(graph::is_symmetric(a));
}

TEST(BuildSymmetricCsr, KeepsSelfLoopsWhenAsked) {
  const Csr a = graph::build_symmetric_csr(cpu(), edges_of(3, {{1, 1}, {0, 2}}), true);

  EXPECT_EQ(a.nnz(), 3);
  EXPECT_EQ(to_dense(a)[1][1], 1.0f);
}

TEST(BuildSymmetricCsr, ColumnsAreSortedInEveryRow) {
  const Csr a = graph::build_symmetric_csr(cpu(), edges_of(5, {{4, 0}, {2, 0}, {0, 3}, {1, 0}}));

  for (Offset k = a.row_ptr()[0] + 1; k < a.row_ptr()[1]; ++k) EXPECT_LT(a.col()[k - 1], a.col()[k]);
}

TEST(BuildSymmetricCsr, EndpointOutOfRangeThrowsNamingTheEdge) {
  const graph::EdgeList e = edges_of(3, {{0, 1}, {1, 3}});

  try {
    graph::build_symmetric_csr(cpu(), e);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("edge 1 (1, 3)"), std::string::npos) << error.what();
  }
}

TEST(GcnNormalize, EqualsDenseFormula) {
  const Csr a = graph::build_symmetric_csr(cpu(), edges_of(4, {{0, 1}, {1, 2}, {1, 3}}));

  const Csr a_hat = graph::gcn_normalize(a);

  const std::vector<double> degree = {2, 4, 2, 2};  // with the self-loop
  const auto d = to_dense(a_hat);
  const auto raw = to_dense(a);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const double aij = raw[i][j] + (i == j ? 1.0 : 0.0);
      EXPECT_NEAR(d[i][j], aij / std::sqrt(degree[i] * degree[j]), 1e-6) << i << "," << j;
    }
  }
}

TEST(MeanAggregation, RowsAverageTheNeighboursWithoutSelfLoops) {
  const Csr a = graph::build_symmetric_csr(cpu(), edges_of(4, {{0, 0}, {0, 1}, {0, 2}, {1, 2}}), true);

  const auto m = to_dense(graph::mean_aggregation(a));

  EXPECT_FLOAT_EQ(m[0][0], 0.0f);  // the self-loop is not a neighbour
  EXPECT_FLOAT_EQ(m[0][1], 0.5f);
  EXPECT_FLOAT_EQ(m[0][2], 0.5f);
  EXPECT_FLOAT_EQ(m[1][0], 0.5f);
  EXPECT_FLOAT_EQ(m[2][1], 0.5f);
  for (int j = 0; j < 4; ++j) EXPECT_FLOAT_EQ(m[3][j], 0.0f);  // isolated: aggregates zero
}

TEST(SumAggregation, UnitWeightsWithoutSelfLoops) {
  const Csr a = graph::build_symmetric_csr(cpu(), edges_of(3, {{0, 0}, {0, 1}, {1, 2}}), true);

  const auto m = to_dense(graph::sum_aggregation(a));

  EXPECT_FLOAT_EQ(m[0][0], 0.0f);
  EXPECT_FLOAT_EQ(m[0][1], 1.0f);
  EXPECT_FLOAT_EQ(m[1][0], 1.0f);
  EXPECT_FLOAT_EQ(m[1][2], 1.0f);
  EXPECT_FLOAT_EQ(m[2][1], 1.0f);
}

TEST(MeanAggregation, OfATilesRowsUsesEveryNeighbourLocalOrGhost) {
  // Star 0-{1,2,3}: a tile owning {0} (local 0) with ghosts 1, 2, 3 sees all of 0's neighbours.
  Csr tile(cpu(), 1, 4, 3);
  tile.row_ptr()[0] = 0;
  tile.row_ptr()[1] = 3;
  for (int k = 0; k < 3; ++k) {
    tile.col()[k] = k + 1;
    tile.val()[k] = 1.0f;
  }

  const Csr m = graph::mean_aggregation(tile);

  ASSERT_EQ(m.rows(), 1);
  ASSERT_EQ(m.cols(), 4);
  ASSERT_EQ(m.nnz(), 3);
  for (int k = 0; k < 3; ++k) EXPECT_FLOAT_EQ(m.val()[k], 1.0f / 3.0f);
  EXPECT_THROW(graph::mean_aggregation(graph::transpose(tile)), DimensionMismatch);
}

TEST(GcnNormalizeTile, EqualsTheWholeGraphsRowsWithGlobalDegrees) {
  // Path 0-1-2-3; the tile owns {1, 2} (local 0, 1) and reads ghosts 0 and 3 (local 2, 3).
  const Csr whole = graph::gcn_normalize(
      graph::build_symmetric_csr(cpu(), edges_of(4, {{0, 1}, {1, 2}, {2, 3}})));
  const Csr rows = graph::build_symmetric_csr(cpu(), edges_of(4, {{0, 1}, {0, 2}, {1, 3}}));
  Csr tile_rows(cpu(), 2, 4, 4);  // the first two rows of `rows`: local edges of owned 0 and 1
  std::copy_n(rows.row_ptr(), 3, tile_rows.row_ptr());
  std::copy_n(rows.col(), 4, tile_rows.col());
  std::copy_n(rows.val(), 4, tile_rows.val());
  const std::vector<std::int64_t> degree = {2, 2, 1, 1};  // of global 1, 2, 0, 3

  const Csr tile = graph::gcn_normalize_tile(tile_rows, degree);

  const auto w = to_dense(whole);
  const auto t = to_dense(tile);
  const int global[4] = {1, 2, 0, 3};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_FLOAT_EQ(t[i][j], w[global[i]][global[j]]) << i << "," << j;
}

TEST(GcnNormalizeTile, RefusesADegreeListOfTheWrongLength) {
  const Csr a = graph::build_symmetric_csr(cpu(), edges_of(3, {{0, 1}}));
  const std::vector<std::int64_t> degree = {1, 1};

  EXPECT_THROW(graph::gcn_normalize_tile(a, degree), DimensionMismatch);
}

TEST(GcnNormalizeBlock, CountsDegreesWithinTheBlockDestinationsInSourcesOut) {
  // Destinations 0 and 1 (sources 0 and 1) of sources {0, 1, 2}: 0 drew {1, 2}, 1 drew {0}.
  Csr block(cpu(), 2, 3, 3);
  const Offset row_ptr[] = {0, 2, 3};
  const LocalId col[] = {1, 2, 0};
  std::copy_n(row_ptr, 3, block.row_ptr());
  std::copy_n(col, 3, block.col());
  std::fill_n(block.val(), 3, 1.0f);

  const auto t = to_dense(graph::gcn_normalize_block(block));

  // With self-loops: in(0) = 3, in(1) = 2; out(0) = 2, out(1) = 2, out(2) = 1.
  const double expected[2][3] = {{1 / std::sqrt(6.0), 1 / std::sqrt(6.0), 1 / std::sqrt(3.0)},
                                 {1 / std::sqrt(4.0), 1 / std::sqrt(4.0), 0.0}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_FLOAT_EQ(t[i][j], expected[i][j]) << i << "," << j;
  EXPECT_THROW(graph::gcn_normalize_block(graph::transpose(block)), DimensionMismatch);
}

TEST(GcnNormalize, IsolatedNodeGetsUnitSelfLoop) {
  const Csr a_hat = graph::gcn_normalize(graph::build_symmetric_csr(cpu(), edges_of(3, {{0, 1}})));

  EXPECT_FLOAT_EQ(to_dense(a_hat)[2][2], 1.0f);
  EXPECT_EQ(a_hat.nnz(), 5);
}

TEST(GcnNormalize, ExistingSelfLoopIsNotDoubled) {
  const Csr a = graph::build_symmetric_csr(cpu(), edges_of(2, {{0, 0}, {0, 1}}), true);

  const Csr a_hat = graph::gcn_normalize(a);

  EXPECT_EQ(a_hat.nnz(), 4);
  EXPECT_NEAR(to_dense(a_hat)[0][0], 1.0 / 2.0, 1e-6);  // degree of row 0 is 2
}

TEST(Transpose, TransposesARectangularMatrix) {
  Csr a(cpu(), 2, 3, 3);
  const Offset rp[] = {0, 2, 3};
  const LocalId col[] = {0, 2, 1};
  const float val[] = {1, 2, 3};
  std::copy(rp, rp + 3, a.row_ptr());
  std::copy(col, col + 3, a.col());
  std::copy(val, val + 3, a.val());

  const Csr t = graph::transpose(a);

  const std::vector<std::vector<float>> expected = {{1, 0}, {0, 3}, {2, 0}};
  EXPECT_EQ(t.rows(), 3);
  EXPECT_EQ(to_dense(t), expected);
}

TEST(DegreeStats, SummarizesRowDegrees) {
  const Csr a = graph::build_symmetric_csr(cpu(), edges_of(5, {{0, 1}, {0, 2}, {0, 3}}));

  const graph::DegreeStats s = graph::degree_stats(a);

  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 6.0 / 5.0);
  EXPECT_EQ(s.median, 1);
  EXPECT_EQ(s.isolated, 1);
}

/// S · X on the CPU, C = S · X + beta · C.
void spmm(const Csr& s, const Dense& x, Dense& c, float beta) {
  ops::spmm(*cpu(), s.view(), x.cview(), c.view(), beta);
}

/// The message of the InvalidArgument that split_columns throws for `bounds` ("" if none).
std::string split_error(const Csr& s, const std::vector<std::int64_t>& bounds) {
  try {
    graph::split_columns(s, bounds);
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  return "";
}

TEST(SplitColumns, TilesHoldTheirColumnsInTheOrderOfS) {
  // Row 0 stores its columns out of order; the tiles must keep that order.
  const auto s = testing::make_csr<float>(
      cpu(), 6, {{{5, 1.f}, {1, 2.f}, {3, 3.f}, {0, 4.f}}, {}, {{2, 5.f}, {4, 6.f}}});
  const std::vector<std::int64_t> bounds = {0, 2, 4, 6};

  const std::vector<Csr> tiles = graph::split_columns(s, bounds);

  ASSERT_EQ(tiles.size(), 3u);
  const std::vector<std::vector<std::vector<std::pair<LocalId, float>>>> expected = {
      {{{1, 2.f}, {0, 4.f}}, {}, {}}, {{{3, 3.f}}, {}, {{2, 5.f}}}, {{{5, 1.f}}, {}, {{4, 6.f}}}};
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    SCOPED_TRACE(::testing::Message() << "tile " << t);
    EXPECT_EQ(tiles[t].rows(), 3);
    EXPECT_EQ(tiles[t].cols(), 6);
    for (std::int64_t r = 0; r < 3; ++r) {
      std::vector<std::pair<LocalId, float>> row;
      for (Offset k = tiles[t].row_ptr()[r]; k < tiles[t].row_ptr()[r + 1]; ++k)
        row.emplace_back(tiles[t].col()[k], tiles[t].val()[k]);
      EXPECT_EQ(row, expected[t][r]) << "row " << r;
    }
  }
}

TEST(SplitColumns, SumOfTileProductsIsTheProduct) {
  const Csr s = testing::random_csr<float>(cpu(), 83, 101, 0.15, 7, 9);
  const Dense x = testing::random_dense<float>(cpu(), 101, 37, 8);
  Dense expected(cpu(), 83, 37);
  spmm(s, x, expected, 0.0f);
  const std::vector<std::int64_t> bounds = {0, 13, 13, 50, 51, 101};
  Dense y(cpu(), 83, 37);
  y.fill(std::numeric_limits<float>::quiet_NaN());

  const std::vector<Csr> tiles = graph::split_columns(s, bounds);
  for (std::size_t t = 0; t < tiles.size(); ++t)
    spmm(tiles[t], x, y, t == 0 ? 0.0f : 1.0f);

  ASSERT_EQ(tiles.size(), 5u);
  Offset nnz = 0;
  for (const Csr& tile : tiles)
    nnz += tile.nnz();
  EXPECT_EQ(nnz, s.nnz());
  float scale = 0.0f;
  for (std::int64_t i = 0; i < expected.size(); ++i)
    scale = std::max(scale, std::abs(expected.data()[i]));
  for (std::int64_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y.data()[i], expected.data()[i], 1e-6f * scale) << "element " << i;
}

TEST(SplitColumns, EmptyColumnRangesGiveEmptyTilesOfTheFullShape) {
  // Columns 2 and 3 hold no entries; [4, 4) is no column at all.
  const auto s = testing::make_csr<float>(cpu(), 6, {{{0, 1.f}, {5, 2.f}}, {{1, 3.f}}});
  const std::vector<std::int64_t> bounds = {0, 2, 4, 4, 6};

  const std::vector<Csr> tiles = graph::split_columns(s, bounds);

  ASSERT_EQ(tiles.size(), 4u);
  for (const std::size_t t : {std::size_t{1}, std::size_t{2}}) {
    SCOPED_TRACE(::testing::Message() << "tile " << t);
    EXPECT_EQ(tiles[t].rows(), 2);
    EXPECT_EQ(tiles[t].cols(), 6);
    EXPECT_EQ(tiles[t].nnz(), 0);
    EXPECT_EQ(std::vector<Offset>(tiles[t].row_ptr(), tiles[t].row_ptr() + 3),
              std::vector<Offset>(3, 0));
  }
  EXPECT_EQ(tiles[0].nnz(), 2);
  EXPECT_EQ(tiles[3].nnz(), 1);
}

TEST(SplitColumns, BadBoundsThrowNamingTheBound) {
  const auto s = testing::make_csr<float>(cpu(), 6, {{{0, 1.f}, {5, 2.f}}});

  const std::string not_from_zero = split_error(s, {1, 6});
  const std::string not_to_cols = split_error(s, {0, 3, 5});
  const std::string descending = split_error(s, {0, 4, 2, 6});
  const std::string too_few = split_error(s, {0});

  EXPECT_NE(not_from_zero.find("bounds[0] = 1"), std::string::npos) << not_from_zero;
  EXPECT_NE(not_from_zero.find("must be 0"), std::string::npos) << not_from_zero;
  EXPECT_NE(not_to_cols.find("bounds[2] = 5"), std::string::npos) << not_to_cols;
  EXPECT_NE(not_to_cols.find("column count 6"), std::string::npos) << not_to_cols;
  EXPECT_NE(descending.find("bounds[2] = 2"), std::string::npos) << descending;
  EXPECT_NE(descending.find("ascending"), std::string::npos) << descending;
  EXPECT_NE(too_few.find("at least 2"), std::string::npos) << too_few;
}

TEST(SplitColumns, OneTileAloneIsThatTileAndATileBeyondTheBoundsIsRefused) {
  const Csr s = testing::random_csr<float>(cpu(), 40, 50, 0.2, 3, 4);
  const std::vector<std::int64_t> bounds = {0, 10, 35, 50};
  const std::vector<Csr> tiles = graph::split_columns(s, bounds);

  const Csr middle = graph::column_tile(s, std::span<const std::int64_t>(bounds), 1);

  ASSERT_EQ(middle.nnz(), tiles[1].nnz());
  EXPECT_TRUE(std::equal(middle.row_ptr(), middle.row_ptr() + 41, tiles[1].row_ptr()));
  EXPECT_TRUE(std::equal(middle.col(), middle.col() + middle.nnz(), tiles[1].col()));
  EXPECT_TRUE(std::equal(middle.val(), middle.val() + middle.nnz(), tiles[1].val()));
  try {
    graph::column_tile(s, std::span<const std::int64_t>(bounds), 3);
    FAIL() << "tile 3 of 3 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tile 3 of 3 column tiles"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera
