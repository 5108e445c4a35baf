// Data-parallel MLP training: P ranks splitting every global batch train what one process trains
// — the same per-epoch loss (relative 1e-5) with dropout on — for a global batch that P does not
// divide and a last batch smaller than P (ranks with nothing to do still take part in the sums).
#include "mpi/mpi_test_main.hpp"
#include "test_data.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <tessera/tessera.hpp>

namespace tessera {
namespace {

using testing::world;

/// 501 samples: 401 train, so batches of 50 end with one of a single sample.
runtime::MlpJob blobs_job() {
  runtime::MlpJob job;
  job.dataset = "blobs:samples=501,features=20,classes=4,separation=3,seed=2";
  job.threads = 1;
  job.shape.layer_sizes = {20, 24, 16, 4};
  job.dropout = 0.5f;
  job.epochs = 4;
  job.batch_size = 50;
  job.seed = 11;
  return job;
}

void expect_same_training(const runtime::MlpResult& one, const runtime::MlpResult& many) {
  ASSERT_EQ(one.history.size(), many.history.size());
  for (std::size_t e = 0; e < one.history.size(); ++e) {
    const runtime::MlpEpoch& a = one.history[e];
    const runtime::MlpEpoch& b = many.history[e];
    SCOPED_TRACE("epoch " + std::to_string(a.epoch));
    EXPECT_EQ(a.steps, b.steps);
    EXPECT_NEAR(b.train_loss, a.train_loss, 1e-5 * std::abs(a.train_loss));
    EXPECT_NEAR(b.val.loss, a.val.loss, 1e-5 * std::abs(a.val.loss));
    // Reassociated sums may flip the argmax of a near tie: at most one sample.
    EXPECT_NEAR(b.val.accuracy, a.val.accuracy, 1.0 / static_cast<double>(one.val_samples) + 1e-12);
    EXPECT_NEAR(b.test.accuracy, a.test.accuracy,
                1.0 / static_cast<double>(one.test_samples) + 1e-12);
  }
}

runtime::MlpResult serial(runtime::MlpJob job) {
  job.comm = nullptr;
  return runtime::run_mlp_job(job);
}

runtime::MlpResult distributed(runtime::MlpJob job) {
  job.comm = world();
  return runtime::run_mlp_job(job);
}

TEST(DataParallelMlp, BlobsMatchOneProcessEveryEpochWithDropout) {
  const runtime::MlpJob job = blobs_job();

  const runtime::MlpResult one = serial(job);
  const runtime::MlpResult many = distributed(job);

  ASSERT_EQ(one.train_samples % job.batch_size, 1); // the last batch: one sample, one rank
  EXPECT_EQ(many.ranks, world()->size());
  expect_same_training(one, many);
}

TEST(DataParallelMlp, RocAucOfABinaryTaskMatchesOneProcess) {
  // Every rank's scores reach every rank; reassociated sums may reorder a near tie of scores.
  runtime::MlpJob job = blobs_job();
  job.dataset = "blobs:samples=501,features=20,classes=2,separation=1,noise=2,seed=2";
  job.shape.layer_sizes = {20, 24, 16, 2};
  job.metric = gnn::Metric::RocAuc;

  const runtime::MlpResult one = serial(job);
  const runtime::MlpResult many = distributed(job);

  expect_same_training(one, many);
  for (std::size_t e = 0; e < one.history.size(); ++e) {
    ASSERT_TRUE(one.history[e].val.roc_auc && many.history[e].val.roc_auc);
    EXPECT_NEAR(*many.history[e].val.roc_auc, *one.history[e].val.roc_auc, 1e-3);
    EXPECT_NEAR(*many.history[e].test.roc_auc, *one.history[e].test.roc_auc, 1e-3);
  }
}

TEST(DataParallelMlp, EachRankUnderItsOwnBudgetMatchesOneProcessWithout) {
  runtime::MlpJob job = blobs_job();
  runtime::MlpJob budgeted = job;
  budgeted.offload.chunk_bytes = std::size_t{16} << 10;
  budgeted.offload.device_bytes = std::size_t{128} << 10;

  const runtime::MlpResult one = serial(job);
  const runtime::MlpResult many = distributed(budgeted);

  ASSERT_TRUE(many.offloaded);
  expect_same_training(one, many);
}

TEST(DataParallelMlp, CoraSparseFeaturesMatchOneProcessEveryEpoch) {
  TESSERA_REQUIRE_DATA("cora_planetoid/cora_planetoid.npz");
  runtime::MlpJob job;
  job.dataset = "cora";
  job.load.data_dir = testing::shared_data_dir();
  job.threads = 1;
  job.shape.hidden = 32;
  job.dropout = 0.5f;
  job.epochs = 5;
  job.batch_size = 32; // 140 training nodes: the last batch has 12

  const runtime::MlpResult one = serial(job);
  const runtime::MlpResult many = distributed(job);

  expect_same_training(one, many);
}

} // namespace
} // namespace tessera
