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

}  // namespace
}  // namespace tessera
