// The GCN builder, the training loop's determinism, and learning on a generated graph.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/tessera.hpp"
#include "test_data.hpp"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr const char* kEasySbm = "sbm:nodes=3000,classes=4,avg-degree=10,p-in=0.9,features=16,noise=1";

gnn::TrainJob small_job(const std::string& dataset, int epochs) {
  gnn::TrainJob job;
  job.dataset = dataset;
  job.load.data_dir = testing::shared_data_dir();
  job.train.epochs = epochs;
  return job;
}

TEST(ParseLayerSizes, ReadsDashSeparatedSizes) {
  EXPECT_EQ(gnn::parse_layer_sizes("1433-16-7"), (std::vector<std::int64_t>{1433, 16, 7}));
}

TEST(ParseLayerSizes, RejectsMalformedText) {
  for (const char* bad : {"", "16", "16-", "a-7", "16--7", "0-7", "-3-7"}) {
    EXPECT_THROW(gnn::parse_layer_sizes(bad), InvalidArgument) << bad;
  }
}

TEST(BuildGcn, StacksDropoutConvAndFusedReluDropoutAndPicksTheNarrowerOrder) {
  const BackendPtr cpu = make_cpu_backend();
  graph::EdgeList e;
  e.num_nodes = 3;
  e.add(0, 1);
  const Csr a = graph::gcn_normalize(graph::build_symmetric_csr(cpu, e));
  gnn::GcnConfig config;
  config.layer_sizes = {8, 16, 3};

  Sequential<float> model = gnn::build_gcn(cpu, a, a, config, 0);

  ASSERT_EQ(model.modules().size(), 4u);
  EXPECT_THAT(model.modules()[0]->name(), HasSubstr("Dropout"));
  EXPECT_THAT(model.modules()[1]->name(), HasSubstr("8 -> 16, aggregate-first"));
  EXPECT_THAT(model.modules()[2]->name(), HasSubstr("ReLU+Dropout"));
  EXPECT_THAT(model.modules()[3]->name(), HasSubstr("16 -> 3, transform-first"));
  EXPECT_EQ(model.num_parameters(), 8 * 16 + 16 + 16 * 3 + 3);
}

TEST(Training, SameSeedGivesIdenticalLosses) {
  const gnn::TrainJob job = small_job(kEasySbm, 5);

  const auto first = gnn::run_train_job(job, {}).result;
  const auto second = gnn::run_train_job(job, {}).result;

  for (int e = 0; e < 5; ++e) {
    EXPECT_EQ(first.history[e].train_loss, second.history[e].train_loss) << "epoch " << e + 1;
  }
}

TEST(Training, LearnsAGeneratedCommunityGraph) {
  gnn::TrainJob job = small_job(kEasySbm, 100);

  const gnn::TrainResult result = gnn::run_train_job(job, {}).result;

  EXPECT_LT(result.history.back().train_loss, result.history.front().train_loss);
  EXPECT_GT(result.test_at_best_val.accuracy, 0.8);
}

TEST(Training, BothProductOrdersComputeTheSameFunction) {
  gnn::TrainJob job = small_job(kEasySbm, 3);
  job.hidden = 32;
  job.model.order = GcnOrder::AggregateThenTransform;
  const auto aggregate_first = gnn::run_train_job(job, {}).result;
  job.model.order = GcnOrder::TransformThenAggregate;

  const auto transform_first = gnn::run_train_job(job, {}).result;

  for (int e = 0; e < 3; ++e) {
    EXPECT_NEAR(aggregate_first.history[e].train_loss, transform_first.history[e].train_loss,
                1e-5 * aggregate_first.history[e].train_loss);
  }
}

TEST(Training, DatasetWithoutFeaturesIsRefusedWithItsName) {
  TESSERA_REQUIRE_DATA("metis_4elt/4elt.graph");
  const gnn::TrainJob job = small_job("4elt", 1);

  try {
    gnn::run_train_job(job, {});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("no node features"));
  }
}

TEST(Training, LayerSizesThatDoNotFitTheDataAreRefused) {
  gnn::TrainJob job = small_job(kEasySbm, 1);
  job.layer_sizes = {10, 16, 4};

  EXPECT_THROW(gnn::run_train_job(job, {}), InvalidArgument);
}

TEST(ModelGraph, BuildsEachAggregationOnceAndHasNoHaloOnOneProcess) {
  const auto cpu = make_cpu_backend(1);
  auto data = datasets::load_dataset(cpu, kEasySbm, {});
  const std::int64_t n = data.num_nodes;
  gnn::ModelGraph graph(cpu, std::move(data.adjacency), 16, 4);

  const Csr& gcn = graph.matrix(gnn::AggregationKind::Gcn);
  EXPECT_EQ(&graph.matrix(gnn::AggregationKind::Gcn), &gcn);
  EXPECT_EQ(&graph.transpose(gnn::AggregationKind::Gcn), &gcn);  // symmetric on one process
  const Csr& mean = graph.matrix(gnn::AggregationKind::Mean);
  EXPECT_NE(&graph.transpose(gnn::AggregationKind::Mean), &mean);
  EXPECT_EQ(graph.transpose(gnn::AggregationKind::Mean).rows(), n);
  EXPECT_EQ(graph.halo(0), nullptr);
  EXPECT_EQ(graph.halo(1), nullptr);
  EXPECT_EQ(graph.input_rows(), n);

  graph.release_adjacency();
  EXPECT_THAT([&] { graph.matrix(gnn::AggregationKind::Sum); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("adjacency was released")));
}

TEST(ModelGraph, TileWithoutGhostsStillExchangesAtLayerZeroWhenInputsAreNotCached) {
  // A rank that reads no ghost row may still send rows to others: whether layer 0 exchanges is
  // the job's choice, the same on every rank, not this rank's row counts.
  const auto cpu = make_cpu_backend(1);
  const auto comm = comm::make_self_communicator();
  const std::vector<GlobalId> owned{0, 1};
  const auto plan = std::make_shared<const comm::HaloPlan>(
      comm::HaloPlan::build(*comm, owned, {}, {}));
  Csr tile(cpu, 2, 2, 2);
  tile.row_ptr()[0] = 0;
  tile.row_ptr()[1] = 1;
  tile.row_ptr()[2] = 2;
  tile.col()[0] = 1;
  tile.col()[1] = 0;
  tile.val()[0] = tile.val()[1] = 1.0f;

  gnn::ModelGraph uncached(cpu, tile.cast<float>(), {1, 1}, 3, 2, comm, plan, 0, false);
  gnn::ModelGraph cached(cpu, tile.cast<float>(), {1, 1}, 3, 2, comm, plan, 0, true);

  EXPECT_NE(uncached.halo(0), nullptr);
  EXPECT_EQ(cached.halo(0), nullptr);
  EXPECT_NE(cached.halo(1), nullptr);
}

TEST(Aggregation, InputOfTheWrongRowCountIsRefusedWithTheShapes) {
  const auto cpu = make_cpu_backend(1);
  const auto data = datasets::load_dataset(cpu, kEasySbm, {});
  const Csr a = graph::gcn_normalize(data.adjacency);
  Aggregation<float> aggregation(cpu, a, a);
  Dense x = Dense::zeros(cpu, 10, 3), y = Dense::zeros(cpu, a.rows(), 3);

  EXPECT_THAT([&] { aggregation.forward(x.cview(), y.view()); },
              ::testing::ThrowsMessage<DimensionMismatch>(HasSubstr("[10, 3]")));
}

TEST(Training, CustomModelBuilderTrainsAndIsNamedInTheReport) {
  gnn::TrainJob job = small_job(kEasySbm, 30);
  job.model_name = "SAGE";
  job.model_builder = [](gnn::ModelGraph& g, const gnn::TrainJob& j) {
    Sequential<float> model;
    model.add(std::make_unique<SageConv<float>>(
        g.backend(), g.matrix(gnn::AggregationKind::Mean), g.transpose(gnn::AggregationKind::Mean),
        g.in_features(), j.hidden, true, j.train.seed, 0));
    model.add(std::make_unique<Relu<float>>(g.backend()));
    model.add(std::make_unique<SageConv<float>>(
        g.backend(), g.matrix(gnn::AggregationKind::Mean), g.transpose(gnn::AggregationKind::Mean),
        j.hidden, g.num_classes(), true, j.train.seed, 1));
    return model;
  };

  const gnn::TrainOutcome out = gnn::run_train_job(job, {});

  EXPECT_GT(out.result.test_at_best_val.accuracy, 0.9);
  EXPECT_THAT(out.report.dump(), HasSubstr("\"model\": \"SAGE\""));
  EXPECT_FALSE(out.report.has("config.layer_sizes"));
}

}  // namespace
}  // namespace tessera
