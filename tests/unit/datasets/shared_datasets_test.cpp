// Every shared dataset loads by name with the counts of shared/datasets/README.md.
#include "dataset_test_util.hpp"
#include "tessera/core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::int64_t undirected_edges(const Dataset& ds) {
  return ds.adjacency.nnz() / 2;
}

TEST(DatasetsShared, LoadsCoraPlanetoidWithPublishedCounts) {
  TESSERA_REQUIRE_DATA("cora_planetoid/cora_planetoid.npz");

  const Dataset ds = load("cora");

  EXPECT_EQ(ds.name, "cora");
  EXPECT_EQ(ds.num_nodes, 2708);
  EXPECT_EQ(undirected_edges(ds), 5278);
  ASSERT_TRUE(ds.features.is_sparse());
  EXPECT_EQ(ds.features.cols(), 1433);
  EXPECT_EQ(ds.features.sparse->nnz(), 49216);
  EXPECT_EQ(ds.num_classes, 7);
  EXPECT_EQ(ds.train_idx.size(), 140u);
  EXPECT_EQ(ds.val_idx.size(), 500u);
  EXPECT_EQ(ds.test_idx.size(), 1000u);
  EXPECT_TRUE(std::is_sorted(ds.test_idx.begin(), ds.test_idx.end()));
  expect_canonical_adjacency(ds);
}

TEST(DatasetsShared, LoadsCoraLinqsWithTheSameCountsAsPlanetoid) {
  TESSERA_REQUIRE_DATA("cora_linqs/cora.content.gz");
  TESSERA_REQUIRE_DATA("cora_planetoid/cora_planetoid.npz");

  const Dataset linqs = load("cora-linqs");
  const Dataset planetoid = load("cora");

  EXPECT_EQ(linqs.num_nodes, planetoid.num_nodes);
  EXPECT_EQ(undirected_edges(linqs), undirected_edges(planetoid));
  EXPECT_EQ(linqs.features.cols(), 1433);
  EXPECT_EQ(linqs.features.sparse->nnz(), planetoid.features.sparse->nnz());
  EXPECT_EQ(linqs.num_classes, 7);
  EXPECT_FALSE(linqs.has_split());
  expect_canonical_adjacency(linqs);
}

TEST(DatasetsShared, LoadsCoraGnnBenchmarkSymmetrizedAndSkipsStringArrays) {
  TESSERA_REQUIRE_DATA("gnn_benchmark/cora.npz");

  const Dataset ds = load("cora-gnnbench");

  EXPECT_EQ(ds.num_nodes, 2708);
  EXPECT_EQ(undirected_edges(ds), 5278);
  EXPECT_EQ(ds.features.cols(), 1433);
  EXPECT_EQ(ds.num_classes, 7);
  expect_canonical_adjacency(ds);
}

TEST(DatasetsShared, LoadsMinesweeperWithTenStoredSplits) {
  TESSERA_REQUIRE_DATA("heterophilous_graphs/minesweeper.npz");

  const Dataset first = load("minesweeper", 0, 0);
  const Dataset last = load("minesweeper", 0, 9);

  EXPECT_EQ(first.num_nodes, 10000);
  EXPECT_EQ(undirected_edges(first), 39402);
  ASSERT_TRUE(first.features.dense.has_value());
  EXPECT_EQ(first.features.cols(), 7);
  EXPECT_EQ(first.num_classes, 2);
  EXPECT_EQ(first.train_idx.size(), 5000u);
  EXPECT_EQ(first.val_idx.size(), 2500u);
  EXPECT_EQ(first.test_idx.size(), 2500u);
  EXPECT_NE(first.train_idx, last.train_idx);
  expect_canonical_adjacency(first);
}

TEST(DatasetsShared, MinesweeperSplitIndexOutOfRangeThrowsInvalidArgument) {
  TESSERA_REQUIRE_DATA("heterophilous_graphs/minesweeper.npz");

  EXPECT_THAT([] { load("minesweeper", 0, 10); },
              ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("stores 10 splits"), HasSubstr("accepted: 0 to 9"))));
}

TEST(DatasetsShared, LoadsFacebookPagePageFromMusaeFiles) {
  TESSERA_REQUIRE_DATA("facebook_page_page/facebook_edges.csv.gz");

  const Dataset ds = load("facebook");

  EXPECT_EQ(ds.num_nodes, 22470);
  EXPECT_EQ(undirected_edges(ds), 170823);
  ASSERT_TRUE(ds.features.is_sparse());
  EXPECT_EQ(ds.features.cols(), 4714);
  EXPECT_EQ(ds.num_classes, 4);
  expect_canonical_adjacency(ds);
}

TEST(DatasetsShared, LoadsEmailEuCoreWithDepartmentsAndIdentityFeatures) {
  TESSERA_REQUIRE_DATA("email_eu_core/email-Eu-core.txt.gz");

  const Dataset ds = load("email-eu-core");

  EXPECT_EQ(ds.num_nodes, 1005);
  EXPECT_EQ(undirected_edges(ds), 16064);
  EXPECT_EQ(ds.num_classes, 42);
  ASSERT_TRUE(ds.features.is_sparse());
  EXPECT_EQ(ds.features.cols(), 1005);
  EXPECT_EQ(ds.features.sparse->nnz(), 1005);
  EXPECT_EQ(ds.features.sparse->col()[7], 7);
  expect_canonical_adjacency(ds);
}

TEST(DatasetsShared, LoadsSlashdotAsGraphWithoutFeaturesOrLabels) {
  TESSERA_REQUIRE_DATA("snap_soc_slashdot0902/soc-Slashdot0902.txt.gz");

  const Dataset ds = load("slashdot");

  EXPECT_EQ(ds.num_nodes, 82168);
  EXPECT_EQ(undirected_edges(ds), 504230);
  EXPECT_EQ(ds.features.rows(), 0);
  EXPECT_FALSE(ds.has_labels());
  EXPECT_EQ(ds.num_classes, 0);
}

TEST(DatasetsShared, Loads4eltMetisGraph) {
  TESSERA_REQUIRE_DATA("metis_4elt/4elt.graph");

  const Dataset ds = load("4elt");

  EXPECT_EQ(ds.num_nodes, 15606);
  EXPECT_EQ(undirected_edges(ds), 45878);
  EXPECT_EQ(ds.features.rows(), 0);
  expect_canonical_adjacency(ds);
}

TEST(DatasetsShared, UnknownNameThrowsInvalidArgumentListingKnownNames) {
  EXPECT_THAT([] { load("citeseer"); }, ThrowsMessage<InvalidArgument>(AllOf(
                                            HasSubstr("citeseer"), HasSubstr("cora, cora-linqs"))));
}

TEST(DatasetsShared, MissingDataFolderThrowsIoErrorNamingPathAndDataDirFlag) {
  LoadOptions options;
  options.data_dir = "/nonexistent/tessera-data";

  EXPECT_THAT([&] { load_dataset(cpu(), "cora", options); },
              ThrowsMessage<IoError>(
                  AllOf(HasSubstr("/nonexistent/tessera-data/cora_planetoid/cora_planetoid.npz"),
                        HasSubstr("data folder"), HasSubstr("TESSERA_DATA_DIR"),
                        HasSubstr("scripts/fetch_datasets.sh cora"))));
}

} // namespace
} // namespace tessera::datasets::tests
