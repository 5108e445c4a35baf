// Partitioning where no rank holds the whole graph: each rank reads its share of a native
// dataset's rows, the ranks cut it together, and each assembles its own tile — which must be the
// tile build_local_graph cuts from the whole graph for the same partition, measure the same, and
// make the same store; a store that one rank cannot write gets no manifest.
#include "mpi/mpi_test_main.hpp"
#include "mpi/same_training.hpp"
#include "mpi/shared_folder.hpp"
#include "unit/partition/tile_test_util.hpp"

#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string>
#include <tessera/tessera.hpp>
#include <vector>

namespace tessera {
namespace {

namespace fs = std::filesystem;
using partition::tests::expect_same_tile;
using ::testing::HasSubstr;
using testing::SharedFolder;
using testing::world;
namespace tp = partition;

constexpr const char* kDense = "sbm:nodes=700,classes=4,avg-degree=6,p-in=0.8,features=8,noise=1";
constexpr const char* kSparse = "rmat:scale=9,edge-factor=8,features=32,classes=5";

BackendPtr cpu() {
  return make_cpu_backend(1);
}

/// `spec` loaded whole on every rank, and saved as a native dataset by rank 0 into `dir`.
datasets::Dataset whole_and_native(const std::string& spec, const std::string& dir) {
  datasets::Dataset data = datasets::load_dataset(cpu(), spec, {});
  datasets::use_default_split_when_missing(data, 0);
  if (world()->rank() == 0) datasets::save_native(data, dir);
  world()->barrier();
  return data;
}

datasets::RowBlock my_rows(const std::string& dir, std::int64_t nodes) {
  return datasets::load_dataset_rows(cpu(), dir, {},
                                     datasets::row_share(nodes, world()->rank(), world()->size()));
}

/// Every rank's owners of its rows, joined in rank order: the whole partition.
tp::Partition gather(const std::vector<std::int32_t>& mine) {
  tp::Partition whole;
  whole.num_parts = world()->size();
  for (int r = 0; r < world()->size(); ++r) {
    std::vector<std::byte> bytes;
    if (r == world()->rank()) {
      const auto view = std::as_bytes(std::span(mine));
      bytes.assign(view.begin(), view.end());
    }
    world()->broadcast(bytes, r);
    const auto* owners = reinterpret_cast<const std::int32_t*>(bytes.data());
    whole.owner.insert(whole.owner.end(), owners, owners + bytes.size() / sizeof(std::int32_t));
  }
  return whole;
}

void expect_same_quality(const tp::Quality& a, const tp::Quality& b) {
  EXPECT_EQ(a.edge_cut, b.edge_cut);
  EXPECT_EQ(a.total_volume, b.total_volume);
  EXPECT_EQ(a.part_nodes, b.part_nodes);
  EXPECT_EQ(a.send, b.send);
  EXPECT_EQ(a.recv, b.recv);
  EXPECT_DOUBLE_EQ(a.vertex_balance, b.vertex_balance);
  EXPECT_DOUBLE_EQ(a.edge_balance, b.edge_balance);
  EXPECT_EQ(a.broadcast_volume, b.broadcast_volume);
}

struct Case {
  const char* spec;
  tp::Method method;
  tp::Reorder reorder;
};

class DistributedTiles : public ::testing::TestWithParam<Case> {};

TEST_P(DistributedTiles, EqualTheTilesCutFromTheWholeGraph) {
  const Case c = GetParam();
  const SharedFolder folder("tiles");
  const datasets::Dataset whole = whole_and_native(c.spec, folder.file("data"));
  datasets::RowBlock block = my_rows(folder.file("data"), whole.num_nodes);
  EXPECT_EQ(tp::dataset_checksum(block, *world()), tp::dataset_checksum(whole));

  tp::Options options;
  options.num_parts = world()->size();
  options.method = c.method;
  options.vertex_weight = tp::VertexWeight::Degree;
  const std::vector<std::int32_t> owner = tp::partition_rows(block, options, *world());
  const tp::Partition partition = gather(owner);
  // The graph partitioners cut distributed data their own way; the baselines as in memory.
  if (c.method == tp::Method::Block || c.method == tp::Method::Random) {
    EXPECT_EQ(partition.owner, tp::partition_graph(whole.adjacency, options).owner);
  }
  const tp::LocalGraph tile =
      tp::build_tile_from_rows(cpu(), std::move(block), owner, *world(), c.reorder);
  expect_same_tile(tile, tp::build_local_graph(whole, partition, world()->rank(), c.reorder));
  expect_same_quality(tp::measure_tiles(tile, *world()), tp::measure(whole.adjacency, partition));
}

INSTANTIATE_TEST_SUITE_P(Methods, DistributedTiles,
                         ::testing::Values(Case{kDense, tp::Method::PtScotch, tp::Reorder::None},
                                           Case{kDense, tp::Method::Block, tp::Reorder::Rcm},
                                           Case{kSparse, tp::Method::Random, tp::Reorder::None},
                                           Case{kSparse, tp::Method::PtScotch, tp::Reorder::Rcm},
                                           Case{kSparse, tp::Method::Hypergraph,
                                                tp::Reorder::None}));

class DistributedCut : public ::testing::TestWithParam<tp::Method> {};

TEST_P(DistributedCut, IsBalancedDeterministicAndBetterThanRandom) {
  const SharedFolder folder("cut");
  const datasets::Dataset whole = whole_and_native(kDense, folder.file("data"));
  const datasets::RowBlock block = my_rows(folder.file("data"), whole.num_nodes);
  tp::Options options;
  options.num_parts = world()->size();
  options.method = GetParam();
  const auto first = tp::partition_rows(block, options, *world());
  EXPECT_EQ(tp::partition_rows(block, options, *world()), first);
  const tp::Quality quality = tp::measure(whole.adjacency, gather(first));
  EXPECT_LE(quality.vertex_balance, 1.06);
  if (world()->size() > 1) {
    options.method = tp::Method::Random;
    const auto random = tp::partition_rows(block, options, *world());
    EXPECT_LT(quality.total_volume, tp::measure(whole.adjacency, gather(random)).total_volume / 2);
  }
}

INSTANTIATE_TEST_SUITE_P(GraphPartitioners, DistributedCut,
                         ::testing::Values(tp::Method::PtScotch, tp::Method::Hypergraph),
                         [](const auto& info) { return tp::to_string(info.param); });

TEST(DistributedPartition, RefusesAPartCountOtherThanTheRanksAndAForeignBlock) {
  const SharedFolder folder("refuse");
  const datasets::Dataset whole = whole_and_native(kDense, folder.file("data"));
  const datasets::RowBlock block = my_rows(folder.file("data"), whole.num_nodes);
  tp::Options options;
  options.num_parts = world()->size() + 1;
  options.method = tp::Method::PtScotch;
  EXPECT_THROW(
      {
        try {
          tp::partition_rows(block, options, *world());
        } catch (const InvalidArgument& e) {
          EXPECT_THAT(e.what(), HasSubstr("one part per rank"));
          throw;
        }
      },
      InvalidArgument);
  if (world()->size() > 1) {
    options.num_parts = world()->size();
    const datasets::RowBlock all =
        datasets::load_dataset_rows(cpu(), folder.file("data"), {}, {0, whole.num_nodes});
    EXPECT_THROW(tp::partition_rows(all, options, *world()), InvalidArgument);
  }
}

TEST(DistributedStore, EqualsTheStoreWrittenFromTheWholeGraph) {
  const SharedFolder folder("store");
  const datasets::Dataset whole = whole_and_native(kSparse, folder.file("data"));
  datasets::RowBlock block = my_rows(folder.file("data"), whole.num_nodes);
  tp::Options options;
  options.num_parts = world()->size();
  options.method = tp::Method::PtScotch;
  const std::string checksum = tp::dataset_checksum(block, *world());
  const auto owner = tp::partition_rows(block, options, *world());
  const tp::Partition partition = gather(owner);
  const tp::LocalGraph tile = tp::build_tile_from_rows(cpu(), std::move(block), owner, *world());
  const tp::Quality quality = tp::measure_tiles(tile, *world());
  tp::write_store_from_tiles(folder.file("store"), tile,
                             {whole.name, checksum, whole.row_normalize}, options,
                             tp::Reorder::None, quality, *world());
  if (world()->rank() == 0) {
    tp::write_store(folder.file("reference"), whole, partition, options, tp::Reorder::None,
                    quality);
  }
  world()->barrier();
  const tp::Manifest written = tp::read_manifest(folder.file("store"));
  const tp::Manifest reference = tp::read_manifest(folder.file("reference"));
  EXPECT_EQ(written.dataset_checksum, reference.dataset_checksum);
  EXPECT_EQ(written.part_checksums, reference.part_checksums);
  EXPECT_EQ(written.part_json_checksums, reference.part_json_checksums);
  EXPECT_EQ(written.part_nodes, reference.part_nodes);
  expect_same_tile(
      tp::load_part(folder.file("store"), world()->rank(), world()->size(), whole.name), tile);
}

TEST(DistributedStore, ARankThatDisagreesLeavesNoManifest) {
  if (world()->size() < 2) GTEST_SKIP() << "needs two ranks";
  const SharedFolder folder("disagree");
  const datasets::Dataset whole = whole_and_native(kDense, folder.file("data"));
  datasets::RowBlock block = my_rows(folder.file("data"), whole.num_nodes);
  tp::Options options;
  options.num_parts = world()->size();
  options.method = tp::Method::Block;
  const auto owner = tp::partition_rows(block, options, *world());
  const tp::LocalGraph tile = tp::build_tile_from_rows(cpu(), std::move(block), owner, *world());
  // The last rank was handed another dataset's name.
  const bool odd = world()->rank() == world()->size() - 1;
  const std::string name = odd ? "another" : whole.name;
  const std::string store = folder.file("store");
  try {
    tp::write_store_from_tiles(store, tile, {name, "00000000"}, options, tp::Reorder::None,
                               tp::measure_tiles(tile, *world()), *world());
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no manifest"));
    EXPECT_THAT(e.what(), HasSubstr("rank " + std::to_string(world()->size() - 1)));
    EXPECT_THAT(e.what(), HasSubstr("\"another\""));
  }
  EXPECT_FALSE(fs::exists(fs::path(store) / "manifest.json"));
  EXPECT_THROW(tp::load_part(store, world()->rank()), IoError);
}

runtime::TrainJob small_job(const std::string& dataset) {
  runtime::TrainJob job;
  job.dataset = dataset;
  job.threads = 1;
  job.shape.hidden = 8;
  job.train.epochs = 3;
  job.comm = world();
  return job;
}

class TrainingCutFromRows : public ::testing::TestWithParam<tp::Method> {};

TEST_P(TrainingCutFromRows, AJobCutFromTheRanksRowsTrainsAsTheStoreOfItsCutFromTheWholeGraph) {
  const SharedFolder folder("train");
  const datasets::Dataset whole = whole_and_native(kDense, folder.file("data"));
  runtime::TrainJob distributed = small_job(folder.file("data"));
  distributed.partition.method = GetParam();
  const gnn::TrainResult trained = runtime::run_train_job(distributed).result;

  // The same cut, each tile built from the whole graph by one process.
  const datasets::RowBlock block = my_rows(folder.file("data"), whole.num_nodes);
  tp::Options options;
  options.num_parts = world()->size();
  options.method = GetParam();
  options.feature_width = whole.features.cols();
  const tp::Partition partition = gather(tp::partition_rows(block, options, *world()));
  if (world()->rank() == 0) {
    tp::write_store(folder.file("store"), whole, partition, options, tp::Reorder::None,
                    tp::measure(whole.adjacency, partition));
  }
  world()->barrier();
  runtime::TrainJob reference = small_job("");
  reference.partition_dir = folder.file("store");
  testing::expect_same_training(runtime::run_train_job(reference).result, trained);
}

TEST_P(TrainingCutFromRows, DataWithoutASplitIsRefusedOnEveryRank) {
  // In one process the hypergraph method cuts the whole graph, which may draw a split.
  if (GetParam() == tp::Method::Hypergraph && world()->size() == 1) GTEST_SKIP() << "one rank";
  const SharedFolder folder("nosplit");
  if (world()->rank() == 0) {
    datasets::Dataset data = datasets::load_dataset(cpu(), kDense, {});
    data.train_idx.clear(); // the generator's split
    data.val_idx.clear();
    data.test_idx.clear();
    datasets::save_native(data, folder.file("data"));
  }
  world()->barrier();
  runtime::TrainJob job = small_job(folder.file("data"));
  job.partition.method = GetParam();
  try {
    runtime::run_train_job(job);
    ADD_FAILURE() << "rank " << world()->rank() << ": no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("has no split"));
    EXPECT_THAT(e.what(), HasSubstr("--partition-method " + tp::to_string(GetParam())));
    EXPECT_THAT(e.what(), HasSubstr("--add-split"));
  }
}

INSTANTIATE_TEST_SUITE_P(GraphPartitioners, TrainingCutFromRows,
                         ::testing::Values(tp::Method::PtScotch, tp::Method::Hypergraph),
                         [](const auto& info) { return tp::to_string(info.param); });

/// Zoltan's other models through its parameters: PHG's graph model, and Zoltan's PT-Scotch; and a
/// PT-Scotch strategy by flags and by string. Each a valid, balanced cut of the ranks' rows.
TEST(DistributedCut, OtherModelsAndStrategiesCutTheRanksRows) {
  const SharedFolder folder("models");
  const datasets::Dataset whole = whole_and_native(kDense, folder.file("data"));
  const datasets::RowBlock block = my_rows(folder.file("data"), whole.num_nodes);
  tp::Options graph;
  graph.num_parts = world()->size();
  graph.method = tp::Method::Hypergraph;
  graph.zoltan_params = {{"LB_METHOD", "GRAPH"}, {"GRAPH_PACKAGE", "PHG"}};
  tp::Options zoltan_scotch = graph;
  zoltan_scotch.zoltan_params = {{"LB_METHOD", "GRAPH"}, {"GRAPH_PACKAGE", "SCOTCH"}};
  tp::Options flags;
  flags.num_parts = world()->size();
  flags.method = tp::Method::PtScotch;
  flags.scotch_strategy = "speed+scalability";
  tp::Options text = flags;
  // Fewer, shorter FM passes than Scotch's speed strategy (pass=-1: until no gain).
  text.scotch_strategy = "r{sep=m{asc=b{width=3,bnd=q{strat=f{move=20,pass=2,bal=0.05}},org=q{"
                         "strat=f{move=20,pass=2,bal=0.05}}},low=q{strat=h{pass=10}f{move=20,"
                         "pass=2,bal=0.05}},seq=q{strat=h{pass=10}f{move=20,pass=2,bal=0.05}},"
                         "vert=1000,rat=0.8},seq=r{job=t,map=t,poli=S,sep=h{pass=10}f{move=20,"
                         "pass=2,bal=0.05}},bal=0.05}";
  for (const tp::Options& options : {graph, zoltan_scotch, flags, text}) {
    SCOPED_TRACE(options.scotch_strategy.empty() ? options.zoltan_params.back().second
                                                 : options.scotch_strategy);
    const tp::Quality quality =
        tp::measure(whole.adjacency, gather(tp::partition_rows(block, options, *world())));
    EXPECT_EQ(std::ssize(quality.part_nodes), world()->size());
    EXPECT_LE(quality.vertex_balance, 1.06);
  }
}

TEST(DistributedCut, AParameterZoltanDoesNotKnowFailsEveryRankNamingIt) {
  if (world()->size() < 2) GTEST_SKIP() << "one part needs no cut";
  const SharedFolder folder("unknown");
  const datasets::Dataset whole = whole_and_native(kDense, folder.file("data"));
  const datasets::RowBlock block = my_rows(folder.file("data"), whole.num_nodes);
  tp::Options options;
  options.num_parts = world()->size();
  options.method = tp::Method::Hypergraph;
  options.zoltan_params = {{"PHG_NO_SUCH_PARAMETER", "1"}};
  try {
    tp::partition_rows(block, options, *world());
    ADD_FAILURE() << "rank " << world()->rank() << ": no error";
  } catch (const Error& e) { // PartitionerError on the rank that names it first
    EXPECT_THAT(e.what(), HasSubstr("PHG_NO_SUCH_PARAMETER"));
  }
}

} // namespace
} // namespace tessera
