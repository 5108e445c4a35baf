// Heterogeneous ranks: parts sized by the ranks' speeds, and re-cut while training, compute what
// one process computes (losses within 1e-5 across every move) at every rank count.
#include "mpi/mpi_test_main.hpp"
#include "mpi/same_training.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <tessera/tessera.hpp>

namespace tessera {
namespace {

using testing::expect_same_training;
using ::testing::HasSubstr;
using testing::world;

runtime::TrainJob community_job() {
  runtime::TrainJob job;
  job.dataset = "sbm:nodes=4000,classes=4,avg-degree=8,p-in=0.8,features=24,noise=1.5";
  job.threads = 1;
  job.shape.hidden = 32;
  job.shape.num_layers = 3;
  job.model.dropout = 0.5f;
  job.train.epochs = 20;
  job.train.seed = 11;
  // Row-normalized, as these tests were tuned: with the features as stored (the default for
  // generated data), validation accuracy ties between epochs 9 and 13 and the sanitizer build's
  // reassociated losses broke the tie the other way at 3 ranks.
  job.normalize_features = true;
  return job;
}

TEST(Balancing, RunsReCutWhileTrainingMatchOneProcessEveryEpoch) {
  // Cut for equal speeds while the last rank runs at half speed, and a threshold any imbalance
  // exceeds: the job re-cuts every window, the most it may (3 moves).
  runtime::TrainJob job = community_job();
  const gnn::TrainResult one = runtime::run_train_job(job).result;

  const int ranks = world()->size();
  job.comm = world();
  job.balance = partition::Balance::Given;
  job.rank_speeds.assign(static_cast<std::size_t>(ranks), 1.0);
  job.rebalance_threshold = 1.0001;
  if (ranks > 1) job.simulation.rank_speeds = {{ranks - 1, 0.5}};
  const runtime::RunSummary many = runtime::run_train_job(job);

  expect_same_training(one, many.result);
  EXPECT_EQ(many.result.best_epoch, one.best_epoch);
  if (ranks == 1) {
    EXPECT_TRUE(many.rebalances.empty());
    return;
  }
  ASSERT_GE(many.rebalances.size(), 1u);
  EXPECT_LE(many.rebalances.size(), 3u);
  for (const runtime::RebalanceStep& step : many.rebalances) {
    EXPECT_GT(step.imbalance_before, 1.0001);
    EXPECT_GT(step.bytes_moved, 0);
    EXPECT_EQ(step.shares.size(), static_cast<std::size_t>(ranks));
  }
  EXPECT_GT(many.balanced_epoch_ms, 0.0);
}

TEST(Balancing, MeasuredSpeedsGiveASlowRankFewerRows) {
  const int ranks = world()->size();
  if (ranks == 1) GTEST_SKIP() << "one rank has nothing to balance";
  runtime::TrainJob job = community_job();
  job.train.epochs = 2;
  job.comm = world();
  job.balance = partition::Balance::Measured;
  job.rebalance_threshold = 0; // the first cut only
  job.simulation.rank_speeds = {{ranks - 1, 0.25}};

  const runtime::RunSummary run = runtime::run_train_job(job);

  ASSERT_EQ(run.rank_speeds.size(), static_cast<std::size_t>(ranks));
  EXPECT_LT(run.rank_speeds.back(), 0.6);
  EXPECT_GT(run.row_cost, 0.0);
  EXPECT_LT(run.per_rank.back().owned_rows, run.per_rank.front().owned_rows);
  EXPECT_TRUE(run.rebalances.empty());
}

TEST(Balancing, SpeedsOfTheWrongLengthAreRefusedOnEveryRankBeforeLoading) {
  runtime::TrainJob job = community_job();
  job.comm = world();
  job.balance = partition::Balance::Given;
  job.rank_speeds.assign(static_cast<std::size_t>(world()->size() + 1), 1.0);

  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("--rank-speeds")));
}

} // namespace
} // namespace tessera

namespace tessera {
namespace {

TEST(MixedDevices, ACudaRankAmongCpuRanksTrainsWhatOneProcessTrains) {
  // Rank 0 on the GPU, the others on CPUs: halos and gradient sums between them staged through
  // host memory (and through NCCL between GPU ranks, when there are two).
  if (!cuda_compiled() || cuda_device_count() == 0) GTEST_SKIP() << "no GPU here";
  if (testing::world()->size() == 1) GTEST_SKIP() << "one rank cannot mix devices";
  runtime::TrainJob job = community_job();
  const gnn::TrainResult one = runtime::run_train_job(job).result;
  job.comm = testing::world();
  job.device = job.comm->rank() == 0 ? DeviceChoice::Cuda : DeviceChoice::Cpu;

  const gnn::TrainResult many = runtime::run_train_job(job).result;

  ASSERT_EQ(many.history.size(), one.history.size());
  for (std::size_t e = 0; e < one.history.size(); ++e) {
    SCOPED_TRACE("epoch " + std::to_string(one.history[e].epoch));
    EXPECT_NEAR(many.history[e].train_loss, one.history[e].train_loss,
                1e-4 * std::abs(one.history[e].train_loss));
  }
}

} // namespace
} // namespace tessera
