// Tiles: ghosts grouped by owner, the local CSR equals the global rows remapped, every edge lands
// in exactly one tile, and RCM only permutes the owned rows.
#include "tessera/core/error.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/partition/local_graph.hpp"
#include "unit/datasets/dataset_test_util.hpp"

#include <algorithm>
#include <cstdint>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera::partition {
namespace {

using datasets::Dataset;
using datasets::tests::cpu;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

/// A dataset on `num_nodes` vertices with the given undirected edges, dense features
/// x[v] = (v, 10 v), labels v % 3 and the given split.
Dataset make_dataset(std::int64_t num_nodes,
                     const std::vector<std::pair<GlobalId, GlobalId>>& edges,
                     std::vector<std::int32_t> train = {}, std::vector<std::int32_t> val = {},
                     std::vector<std::int32_t> test = {}) {
  graph::EdgeList list;
  list.num_nodes = num_nodes;
  for (const auto& [u, v] : edges)
    list.add(u, v);
  Dataset ds;
  ds.name = "hand-made";
  ds.num_nodes = num_nodes;
  ds.adjacency = graph::build_symmetric_csr(cpu(), list);
  Dense x(cpu(), num_nodes, 2);
  for (std::int64_t v = 0; v < num_nodes; ++v) {
    x(v, 0) = static_cast<float>(v);
    x(v, 1) = static_cast<float>(10 * v);
  }
  ds.features.dense = std::move(x);
  for (std::int64_t v = 0; v < num_nodes; ++v)
    ds.labels.push_back(static_cast<std::int32_t>(v % 3));
  ds.num_classes = 3;
  ds.train_idx = std::move(train);
  ds.val_idx = std::move(val);
  ds.test_idx = std::move(test);
  return ds;
}

/// 8 vertices, 14 edges; with kOwner8, part 0 owns {0, 1, 6}.
Dataset eight_vertex_dataset() {
  return make_dataset(8,
                      {{0, 1},
                       {0, 2},
                       {1, 2},
                       {1, 3},
                       {2, 4},
                       {3, 4},
                       {3, 5},
                       {4, 6},
                       {5, 6},
                       {5, 7},
                       {6, 7},
                       {0, 7},
                       {0, 4},
                       {3, 7}},
                      {0, 1, 2}, {3, 6}, {4, 5, 7});
}
const std::vector<std::int32_t> kOwner8 = {0, 0, 1, 2, 1, 2, 0, 1};

/// A 5 x 4 grid graph (row-major ids), cut into ids < 10 and ids >= 10.
Dataset grid_dataset() {
  std::vector<std::pair<GlobalId, GlobalId>> edges;
  for (GlobalId r = 0; r < 5; ++r) {
    for (GlobalId c = 0; c < 4; ++c) {
      if (c + 1 < 4) edges.emplace_back(r * 4 + c, r * 4 + c + 1);
      if (r + 1 < 5) edges.emplace_back(r * 4 + c, (r + 1) * 4 + c);
    }
  }
  return make_dataset(20, edges, {0, 5, 11, 19}, {3, 12}, {7, 8, 15});
}

Partition split_at(std::int64_t num_nodes, GlobalId first_of_part_1) {
  Partition p{2, {}};
  for (GlobalId v = 0; v < num_nodes; ++v)
    p.owner.push_back(v < first_of_part_1 ? 0 : 1);
  return p;
}

/// The global id of each local vertex: owned rows, then ghosts.
std::vector<GlobalId> local_to_global(const LocalGraph& tile) {
  std::vector<GlobalId> ids = tile.owned_ids;
  ids.insert(ids.end(), tile.ghost_ids.begin(), tile.ghost_ids.end());
  return ids;
}

/// (global column, value) pairs of a row, sorted by column.
using Row = std::vector<std::pair<GlobalId, float>>;

Row global_row(const Csr& a, GlobalId v) {
  Row row;
  for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k)
    row.emplace_back(a.col()[k], a.val()[k]);
  return row;
}

/// Each owned row of `tile`, mapped back to global ids, equals the dataset's row; local columns
/// are strictly ascending; features and labels follow owned_ids.
void expect_tile_matches_dataset(const Dataset& ds, const LocalGraph& tile) {
  const std::vector<GlobalId> global = local_to_global(tile);
  ASSERT_EQ(tile.adjacency.rows(), tile.n_owned());
  ASSERT_EQ(tile.adjacency.cols(), tile.n_owned() + tile.n_ghost());
  for (std::int64_t i = 0; i < tile.n_owned(); ++i) {
    Row row;
    for (Offset k = tile.adjacency.row_ptr()[i]; k < tile.adjacency.row_ptr()[i + 1]; ++k) {
      if (k > tile.adjacency.row_ptr()[i]) {
        ASSERT_LT(tile.adjacency.col()[k - 1], tile.adjacency.col()[k]) << "local row " << i;
      }
      row.emplace_back(global[tile.adjacency.col()[k]], tile.adjacency.val()[k]);
    }
    std::sort(row.begin(), row.end());
    EXPECT_EQ(row, global_row(ds.adjacency, tile.owned_ids[i])) << "local row " << i;
    const Dense& x = *ds.features.dense;
    EXPECT_EQ((*tile.features.dense)(i, 0), x(tile.owned_ids[i], 0));
    EXPECT_EQ((*tile.features.dense)(i, 1), x(tile.owned_ids[i], 1));
    EXPECT_EQ(tile.labels[i], ds.labels[tile.owned_ids[i]]);
  }
}

/// The global ids of a tile's local split.
std::set<GlobalId> split_globals(const LocalGraph& tile, const std::vector<std::int32_t>& idx) {
  std::set<GlobalId> out;
  for (const std::int32_t i : idx)
    out.insert(tile.owned_ids[i]);
  return out;
}

TEST(LocalGraph, GhostsAreGroupedByOwnerAndSortedWithinAGroup) {
  const Dataset ds = eight_vertex_dataset();

  const LocalGraph tile = build_local_graph(ds, Partition{3, kOwner8}, 0);

  EXPECT_THAT(tile.owned_ids, ElementsAre(0, 1, 6));
  EXPECT_THAT(tile.ghost_ids, ElementsAre(2, 4, 7, 3, 5));
  EXPECT_THAT(tile.ghost_owner, ElementsAre(1, 1, 1, 2, 2));
  EXPECT_EQ(tile.part, 0);
  EXPECT_EQ(tile.num_parts, 3);
  EXPECT_EQ(tile.num_global_nodes, 8);
}

TEST(LocalGraph, LocalCsrIsTheGlobalRowsRemapped) {
  const Dataset ds = eight_vertex_dataset();

  const LocalGraph tile = build_local_graph(ds, Partition{3, kOwner8}, 0);

  // Local ids: 0→0, 1→1, 6→2, then ghosts 2→3, 4→4, 7→5, 3→6, 5→7.
  const Csr& a = tile.adjacency;
  EXPECT_EQ(a.shape(), shape_string(3, 8));
  EXPECT_THAT(std::vector<Offset>(a.row_ptr(), a.row_ptr() + 4), ElementsAre(0, 4, 7, 10));
  EXPECT_THAT(std::vector<LocalId>(a.col(), a.col() + a.nnz()),
              ElementsAre(1, 3, 4, 5, 0, 3, 6, 4, 5, 7));
  expect_tile_matches_dataset(ds, tile);
}

TEST(LocalGraph, DegreeIsTheGlobalDegreeOfEveryLocalVertex) {
  const Dataset ds = eight_vertex_dataset();

  const LocalGraph tile = build_local_graph(ds, Partition{3, kOwner8}, 0);

  EXPECT_THAT(tile.degree, ElementsAre(4, 3, 3, 3, 4, 4, 4, 3));
}

TEST(LocalGraph, FeaturesLabelsAndSplitAreRemappedToOwnedRows) {
  const Dataset ds = eight_vertex_dataset();

  const LocalGraph tile = build_local_graph(ds, Partition{3, kOwner8}, 0);

  const Dense& x = *tile.features.dense;
  EXPECT_EQ(x.shape(), shape_string(3, 2));
  EXPECT_THAT(std::vector<float>(x.data(), x.data() + x.size()), ElementsAre(0, 0, 1, 10, 6, 60));
  EXPECT_THAT(tile.labels, ElementsAre(0, 1, 0));
  EXPECT_EQ(tile.num_classes, 3);
  EXPECT_THAT(tile.train_idx, ElementsAre(0, 1));
  EXPECT_THAT(tile.val_idx, ElementsAre(2));
  EXPECT_THAT(tile.test_idx, IsEmpty());
}

TEST(LocalGraph, EveryGlobalEdgeAppearsExactlyOnceAcrossTiles) {
  Dataset ds = eight_vertex_dataset();
  for (Offset k = 0; k < ds.adjacency.nnz(); ++k)
    ds.adjacency.val()[k] = static_cast<float>(k);
  const Partition partition{3, kOwner8};

  std::map<std::tuple<GlobalId, GlobalId, float>, int> seen;
  for (int p = 0; p < 3; ++p) {
    const LocalGraph tile = build_local_graph(ds, partition, p);
    expect_tile_matches_dataset(ds, tile);
    const std::vector<GlobalId> global = local_to_global(tile);
    for (std::int64_t i = 0; i < tile.n_owned(); ++i) {
      for (Offset k = tile.adjacency.row_ptr()[i]; k < tile.adjacency.row_ptr()[i + 1]; ++k) {
        ++seen[{tile.owned_ids[i], global[tile.adjacency.col()[k]], tile.adjacency.val()[k]}];
      }
    }
  }

  ASSERT_EQ(static_cast<std::int64_t>(seen.size()), ds.adjacency.nnz());
  for (const auto& [edge, count] : seen)
    EXPECT_EQ(count, 1);
}

TEST(LocalGraph, RcmPermutesOwnedRowsAndKeepsTheTileConsistent) {
  const Dataset ds = grid_dataset();
  const Partition partition = split_at(20, 10);

  for (int p = 0; p < 2; ++p) {
    const LocalGraph plain = build_local_graph(ds, partition, p, Reorder::None);
    const LocalGraph rcm = build_local_graph(ds, partition, p, Reorder::Rcm);

    std::vector<GlobalId> sorted = rcm.owned_ids;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, plain.owned_ids);
    EXPECT_EQ(rcm.ghost_ids, plain.ghost_ids);
    EXPECT_EQ(rcm.ghost_owner, plain.ghost_owner);
    expect_tile_matches_dataset(ds, rcm);
    EXPECT_EQ(split_globals(rcm, rcm.train_idx), split_globals(plain, plain.train_idx));
    EXPECT_EQ(split_globals(rcm, rcm.val_idx), split_globals(plain, plain.val_idx));
    EXPECT_EQ(split_globals(rcm, rcm.test_idx), split_globals(plain, plain.test_idx));
    EXPECT_TRUE(std::is_sorted(rcm.train_idx.begin(), rcm.train_idx.end()));
    for (std::int64_t i = 0; i < rcm.n_owned() + rcm.n_ghost(); ++i) {
      EXPECT_EQ(rcm.degree[i], static_cast<std::int64_t>(
                                   global_row(ds.adjacency, local_to_global(rcm)[i]).size()));
    }
  }
}

TEST(LocalGraph, RcmGivesAScrambledPathBandwidthOne) {
  // The path 0 - 5 - 1 - 4 - 2 - 3: in id order neighbours are up to 5 rows apart.
  const Dataset ds = make_dataset(6, {{0, 5}, {5, 1}, {1, 4}, {4, 2}, {2, 3}});

  const LocalGraph tile =
      build_local_graph(ds, Partition{1, std::vector<std::int32_t>(6, 0)}, 0, Reorder::Rcm);

  // The path in order from either end.
  EXPECT_THAT(tile.owned_ids, AnyOf(ElementsAre(3, 2, 4, 1, 5, 0), ElementsAre(0, 5, 1, 4, 2, 3)));
  for (std::int64_t i = 0; i < tile.n_owned(); ++i) {
    for (Offset k = tile.adjacency.row_ptr()[i]; k < tile.adjacency.row_ptr()[i + 1]; ++k) {
      EXPECT_LE(std::abs(tile.adjacency.col()[k] - i), 1) << "row " << i;
    }
  }
}

TEST(LocalGraph, SparseFeaturesKeepOwnedRowsInLocalOrder) {
  Dataset ds = eight_vertex_dataset();
  Csr sparse(cpu(), 8, 5, 8);
  for (std::int64_t v = 0; v < 8; ++v) {
    sparse.col()[v] = static_cast<LocalId>(v % 5);
    sparse.val()[v] = static_cast<float>(v + 1);
    sparse.row_ptr()[v + 1] = v + 1;
  }
  ds.features.dense.reset();
  ds.features.sparse = std::move(sparse);

  const LocalGraph tile = build_local_graph(ds, Partition{3, kOwner8}, 0);

  const Csr& x = *tile.features.sparse;
  EXPECT_EQ(x.shape(), shape_string(3, 5));
  EXPECT_THAT(std::vector<LocalId>(x.col(), x.col() + x.nnz()), ElementsAre(0, 1, 1));
  EXPECT_THAT(std::vector<float>(x.val(), x.val() + x.nnz()), ElementsAre(1, 2, 7));
}

TEST(OrderInteriorFirst, RowsWithoutGhostsComeFirstAndTheTileStaysConsistent) {
  const Dataset ds = grid_dataset();
  LocalGraph tile = build_local_graph(ds, split_at(20, 10), 0);
  const std::set<GlobalId> train_before = split_globals(tile, tile.train_idx);
  const std::set<GlobalId> test_before = split_globals(tile, tile.test_idx);

  const std::int64_t n_interior = order_interior_first(tile);

  // Part 0 holds grid rows 0-1 and half of row 2 (ids 0..9); ids 6..9 touch part 1.
  EXPECT_EQ(n_interior, 6);
  for (std::int64_t r = 0; r < tile.n_owned(); ++r) {
    bool reads_ghost = false;
    for (Offset k = tile.adjacency.row_ptr()[r]; k < tile.adjacency.row_ptr()[r + 1]; ++k)
      reads_ghost = reads_ghost || tile.adjacency.col()[k] >= tile.n_owned();
    EXPECT_EQ(reads_ghost, r >= n_interior) << "row " << r;
  }
  expect_tile_matches_dataset(ds, tile);
  EXPECT_EQ(split_globals(tile, tile.train_idx), train_before);
  EXPECT_EQ(split_globals(tile, tile.test_idx), test_before);
  EXPECT_TRUE(std::is_sorted(tile.train_idx.begin(), tile.train_idx.end()));
  EXPECT_THAT(std::vector<std::int64_t>(tile.degree.begin(), tile.degree.begin() + 2),
              ElementsAre(2, 3)); // ids 0 and 1, corner and edge of the grid
}

TEST(WholeGraphTile, EqualsTheOneTileOfAOnePartPartitionWithoutACopy) {
  Dataset ds = eight_vertex_dataset();
  const LocalGraph cut = build_local_graph(ds, Partition{1, std::vector<std::int32_t>(8, 0)}, 0);
  const Dense& features = *ds.features.dense;
  const float* feature_data = features.data();

  const LocalGraph whole = whole_graph_tile(std::move(ds));

  EXPECT_EQ(whole.num_parts, 1);
  EXPECT_EQ(whole.num_global_nodes, 8);
  EXPECT_EQ(whole.owned_ids, cut.owned_ids);
  EXPECT_THAT(whole.ghost_ids, IsEmpty());
  EXPECT_EQ(whole.degree, cut.degree);
  EXPECT_EQ(whole.labels, cut.labels);
  EXPECT_EQ(whole.train_idx, cut.train_idx);
  EXPECT_EQ(whole.val_idx, cut.val_idx);
  EXPECT_EQ(whole.test_idx, cut.test_idx);
  ASSERT_EQ(whole.adjacency.nnz(), cut.adjacency.nnz());
  for (Offset k = 0; k < cut.adjacency.nnz(); ++k)
    EXPECT_EQ(whole.adjacency.col()[k], cut.adjacency.col()[k]);
  EXPECT_EQ(whole.features.dense->data(), feature_data); // taken over, not copied
}

TEST(OrderInteriorFirst, AnAllInteriorTileIsLeftAsItIs) {
  LocalGraph tile = whole_graph_tile(eight_vertex_dataset());
  const float* feature_data = tile.features.dense->data();
  const std::vector<GlobalId> owned = tile.owned_ids;

  EXPECT_EQ(order_interior_first(tile), 8);

  EXPECT_EQ(tile.owned_ids, owned);
  EXPECT_EQ(tile.features.dense->data(), feature_data);
}

TEST(TileBytes, RoundTripGivesTheSameTile) {
  const Dataset ds = eight_vertex_dataset();
  const LocalGraph tile = build_local_graph(ds, Partition{3, kOwner8}, 1);

  const LocalGraph back = tile_from_bytes(cpu(), tile_to_bytes(tile));

  EXPECT_EQ(back.part, 1);
  EXPECT_EQ(back.num_parts, 3);
  EXPECT_EQ(back.num_global_nodes, 8);
  EXPECT_EQ(back.owned_ids, tile.owned_ids);
  EXPECT_EQ(back.ghost_ids, tile.ghost_ids);
  EXPECT_EQ(back.ghost_owner, tile.ghost_owner);
  EXPECT_EQ(back.degree, tile.degree);
  EXPECT_EQ(back.train_idx, tile.train_idx);
  EXPECT_EQ(back.val_idx, tile.val_idx);
  EXPECT_EQ(back.test_idx, tile.test_idx);
  expect_tile_matches_dataset(ds, back);
}

TEST(TileBytes, TruncatedOrPaddedBytesAreRefused) {
  const Dataset ds = eight_vertex_dataset();
  const std::vector<std::byte> bytes =
      tile_to_bytes(build_local_graph(ds, Partition{3, kOwner8}, 0));

  for (const std::size_t size :
       {std::size_t{0}, std::size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_THROW(tile_from_bytes(cpu(), std::span(bytes).first(size)), FormatError) << size;
  }
  std::vector<std::byte> padded = bytes;
  padded.push_back(std::byte{0});
  EXPECT_THROW(tile_from_bytes(cpu(), padded), FormatError);
}

TEST(LocalGraph, RefusesAPartOutsideThePartitionAndAShortOwnerVector) {
  const Dataset ds = eight_vertex_dataset();

  EXPECT_THROW(build_local_graph(ds, Partition{3, kOwner8}, 3), InvalidArgument);
  EXPECT_THROW(build_local_graph(ds, Partition{3, {0, 1, 2}}, 0), InvalidArgument);
}

} // namespace
} // namespace tessera::partition
