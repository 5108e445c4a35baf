// The MLP job on one rank: the batch schedule, determinism, learning blobs and Cora's sparse
// features, the report, and the refusals naming the flag (several ranks: tests/mpi/mlp_test.cpp).
#include "tessera/tessera.hpp"
#include "test_data.hpp"

#include <algorithm>
#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <unistd.h>

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kEasyBlobs = "blobs:samples=2000,features=24,classes=3,seed=5";

runtime::MlpJob blobs_job(int epochs) {
  runtime::MlpJob job;
  job.dataset = kEasyBlobs;
  job.threads = 1;
  job.shape.hidden = 32;
  job.epochs = epochs;
  job.batch_size = 64;
  job.seed = 3;
  return job;
}

/// Train ids 0, 3, 6, ... (not contiguous, as a real split's).
std::vector<std::int32_t> spaced_ids(int n) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    ids[static_cast<std::size_t>(i)] = 3 * i;
  return ids;
}

TEST(BatchSchedule, EveryEpochVisitsEveryTrainIdExactlyOnceInItsBatches) {
  const std::vector<std::int32_t> ids = spaced_ids(103);
  runtime::BatchSchedule schedule(ids, 10, 7);

  for (std::uint32_t epoch = 1; epoch <= 3; ++epoch) {
    schedule.start_epoch(epoch);
    std::vector<std::int32_t> seen;
    for (std::int64_t b = 0; b < schedule.num_batches(); ++b) {
      const auto batch = schedule.batch(b);
      seen.insert(seen.end(), batch.begin(), batch.end());
    }

    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(schedule.num_batches(), 11);
    EXPECT_EQ(seen, ids) << "epoch " << epoch;
  }
}

TEST(BatchSchedule, TheOrderDiffersBetweenEpochsAndSeedsButNotBetweenRuns) {
  const std::vector<std::int32_t> ids = spaced_ids(200);
  runtime::BatchSchedule a(ids, 16, 1), b(ids, 16, 1), other_seed(ids, 16, 2);

  a.start_epoch(1);
  const std::vector<std::int32_t> epoch1(a.order().begin(), a.order().end());
  a.start_epoch(2);
  b.start_epoch(2);
  other_seed.start_epoch(2);

  EXPECT_FALSE(std::equal(epoch1.begin(), epoch1.end(), a.order().begin()));
  EXPECT_TRUE(std::equal(a.order().begin(), a.order().end(), b.order().begin()));
  EXPECT_FALSE(std::equal(a.order().begin(), a.order().end(), other_seed.order().begin()));
}

TEST(BatchSchedule, RankSharesAreContiguousAndMakeUpTheBatchForAnyRankCount) {
  runtime::BatchSchedule schedule(spaced_ids(23), 10, 4); // batches of 10, 10 and 3
  schedule.start_epoch(1);

  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (std::int64_t b = 0; b < schedule.num_batches(); ++b) {
      const auto batch = schedule.batch(b);
      std::vector<std::int32_t> joined;
      for (int r = 0; r < ranks; ++r) {
        const auto share = schedule.share(b, r, ranks);
        EXPECT_LE(std::ssize(share), schedule.max_share(ranks));
        joined.insert(joined.end(), share.begin(), share.end());
      }

      EXPECT_TRUE(std::equal(joined.begin(), joined.end(), batch.begin(), batch.end()))
          << ranks << " ranks, batch " << b;
    }
  }
}

TEST(BatchSchedule, RefusesABatchSizeBelowOne) {
  EXPECT_THAT([] { runtime::BatchSchedule(spaced_ids(5), 0, 0); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("--batch-size"), HasSubstr("got 0"))));
}

TEST(MlpJob, SameSeedGivesIdenticalLosses) {
  const runtime::MlpJob job = blobs_job(3);

  const runtime::MlpResult first = runtime::run_mlp_job(job);
  const runtime::MlpResult second = runtime::run_mlp_job(job);

  ASSERT_EQ(first.history.size(), 3u);
  ASSERT_EQ(second.history.size(), 3u);
  for (std::size_t e = 0; e < first.history.size(); ++e) {
    EXPECT_EQ(first.history[e].train_loss, second.history[e].train_loss) << "epoch " << e + 1;
  }
}

TEST(MlpJob, AnotherSeedDrawsOtherBatchesAndMasks) {
  runtime::MlpJob job = blobs_job(1);
  const runtime::MlpResult first = runtime::run_mlp_job(job);
  job.seed = 4;

  const runtime::MlpResult second = runtime::run_mlp_job(job);

  EXPECT_NE(first.history[0].train_loss, second.history[0].train_loss);
}

TEST(MlpJob, LearnsThreeClassBlobsInAFewEpochs) {
  const runtime::MlpJob job = blobs_job(4);

  const runtime::MlpResult result = runtime::run_mlp_job(job);

  EXPECT_EQ(result.layer_sizes, (std::vector<std::int64_t>{24, 32, 3}));
  EXPECT_EQ(result.steps_per_epoch, (result.train_samples + 63) / 64);
  EXPECT_LT(result.history.back().train_loss, result.history.front().train_loss);
  EXPECT_GT(result.final_test.accuracy, 0.9);
  EXPECT_GT(result.best_val.accuracy, 0.9);
}

TEST(MlpJob, LearnsCoraFromItsSparseFeaturesAlone) {
  TESSERA_REQUIRE_DATA("cora_planetoid/cora_planetoid.npz");
  runtime::MlpJob job;
  job.dataset = "cora";
  job.load.data_dir = testing::shared_data_dir();
  job.threads = 1;
  job.shape.hidden = 64;
  job.epochs = 100;
  job.batch_size = 32; // 140 training nodes: 5 steps per epoch, the last of 12

  const runtime::MlpResult result = runtime::run_mlp_job(job);

  EXPECT_TRUE(result.sparse_features);
  EXPECT_TRUE(result.normalized_features); // bag-of-words: non-negative
  EXPECT_EQ(result.steps_per_epoch, 5);
  // Published MLP baseline on the public split: ~57-59 %; chance is 1/7 (and 30 % for the
  // largest class), far below.
  EXPECT_GT(result.test_at_best_val.accuracy, 0.5);
}

TEST(MlpJob, ReportHoldsTheConfigMetricsAndEveryEpoch) {
  runtime::MlpJob job = blobs_job(3);
  job.eval_every = 2;
  const runtime::MlpResult result = runtime::run_mlp_job(job);

  const auto report = nlohmann::json::parse(runtime::mlp_report_json(result));

  EXPECT_EQ(report["config"]["batch_size"], 64);
  EXPECT_EQ(report["config"]["layer_sizes"], nlohmann::json({24, 32, 3}));
  EXPECT_EQ(report["dataset"]["classes"], 3);
  ASSERT_EQ(report["epochs"].size(), 3u);
  EXPECT_DOUBLE_EQ(report["epochs"][2]["loss"].get<double>(), result.history[2].train_loss);
  EXPECT_DOUBLE_EQ(report["metrics"]["test_accuracy"].get<double>(),
                   result.test_at_best_val.accuracy);
  EXPECT_FALSE(result.history[0].evaluated); // every 2nd epoch and after the last
  EXPECT_TRUE(result.history[1].evaluated);
  EXPECT_TRUE(result.history[2].evaluated);
}

TEST(MlpJob, RocAucSelectsTheEpochOfTheBestValidationRocAucAndIsReported) {
  runtime::MlpJob job = blobs_job(8);
  job.dataset = "blobs:samples=600,features=8,classes=2,separation=1.5,noise=1,seed=4";
  job.metric = gnn::Metric::RocAuc;

  const runtime::MlpResult r = runtime::run_mlp_job(job);
  const auto report = nlohmann::json::parse(runtime::mlp_report_json(r));

  double best = -1.0;
  int best_epoch = 0;
  for (const runtime::MlpEpoch& e : r.history) {
    ASSERT_TRUE(e.val.roc_auc.has_value()) << "epoch " << e.epoch;
    if (*e.val.roc_auc > best) best = *e.val.roc_auc, best_epoch = e.epoch;
  }
  EXPECT_EQ(r.best_epoch, best_epoch);
  EXPECT_EQ(r.test_at_best_val.roc_auc, r.history[best_epoch - 1].test.roc_auc);
  EXPECT_GT(*r.test_at_best_val.roc_auc, 0.6);
  EXPECT_EQ(report["config"]["metric"], "roc-auc");
  EXPECT_DOUBLE_EQ(report["metrics"]["best_val_roc_auc"].get<double>(), best);
  EXPECT_TRUE(report["epochs"][0].contains("val_roc_auc"));
}

TEST(MlpJob, RocAucOfAMulticlassTaskIsRefusedBeforeTraining) {
  runtime::MlpJob job = blobs_job(2);
  job.metric = gnn::Metric::RocAuc;
  int epochs_trained = 0;

  EXPECT_THAT(
      [&] { runtime::run_mlp_job(job, {}, [&](const runtime::MlpEpoch&) { ++epochs_trained; }); },
      ::testing::ThrowsMessage<InvalidArgument>(
          AllOf(HasSubstr("binary tasks"), HasSubstr("3 classes: use accuracy"))));
  EXPECT_EQ(epochs_trained, 0);
}

TEST(MlpJob, LayersNotMatchingTheDataAreRefusedNamingTheFlag) {
  runtime::MlpJob job = blobs_job(1);
  job.shape.layer_sizes = {24, 16, 5}; // the data has 3 classes

  EXPECT_THAT([&] { runtime::run_mlp_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("--layers 24-16-5"),
                                                              HasSubstr("24 input features"),
                                                              HasSubstr("3 classes"))));
}

TEST(MlpJob, ABatchSizeBelowOneIsRefusedNamingTheFlag) {
  runtime::MlpJob job = blobs_job(1);
  job.batch_size = 0;

  EXPECT_THAT([&] { runtime::run_mlp_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("--batch-size must be >= 1")));
}

TEST(MlpJob, ADatasetWithoutFeaturesIsRefusedNamingIt) {
  runtime::MlpJob job = blobs_job(1);
  job.dataset = "sbm:nodes=100,classes=2,features=0";

  EXPECT_THAT([&] { runtime::run_mlp_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("sbm:nodes=100"), HasSubstr("no node features"))));
}

TEST(Blobs, ASeedInTheSpecFixesTheDataWhateverTheRunSeed) {
  const BackendPtr cpu = make_cpu_backend(1);
  datasets::LoadOptions one, other;
  other.seed = 99;

  const datasets::Dataset a = datasets::load_dataset(cpu, kEasyBlobs, one);
  const datasets::Dataset b = datasets::load_dataset(cpu, kEasyBlobs, other);
  const datasets::Dataset unseeded = datasets::load_dataset(cpu, "blobs:samples=2000", other);

  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.train_idx, b.train_idx);
  ASSERT_EQ(a.features.dense->size(), b.features.dense->size());
  EXPECT_TRUE(std::equal(a.features.dense->data(),
                         a.features.dense->data() + a.features.dense->size(),
                         b.features.dense->data()));
  EXPECT_EQ(a.adjacency.nnz(), 0);
  EXPECT_EQ(unseeded.name, "blobs:samples=2000,features=64,classes=4,separation=6,noise=1");
}

TEST(Blobs, AnUnknownParameterIsRefusedNamingItAndTheValidOnes) {
  const BackendPtr cpu = make_cpu_backend(1);

  EXPECT_THAT([&] { datasets::load_dataset(cpu, "blobs:samples=10,width=3", {}); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("unknown blobs parameter 'width'"), HasSubstr("features"))));
}

} // namespace
} // namespace tessera

namespace tessera {
namespace {

/// Five hidden layers of 128: parameters, gradients and Adam's moments ~1.4 MiB in all, so a
/// 352 KiB device budget (22 chunks of 16 KiB) holds a quarter of them.
runtime::MlpJob deep_blobs_job() {
  runtime::MlpJob job = blobs_job(3);
  job.shape.layer_sizes = {24, 128, 128, 128, 128, 128, 3};
  return job;
}

OffloadConfig quarter_budget() {
  OffloadConfig offload;
  offload.chunk_bytes = std::size_t{16} << 10;
  offload.device_bytes = std::size_t{352} << 10;
  return offload;
}

TEST(MlpJobOffload, AQuarterBudgetTrainsExactlyTheUnbudgetedModel) {
  const runtime::MlpJob plain = deep_blobs_job();
  runtime::MlpJob budgeted = plain;
  budgeted.offload = quarter_budget();

  const runtime::MlpResult a = runtime::run_mlp_job(plain);
  const runtime::MlpResult b = runtime::run_mlp_job(budgeted);

  ASSERT_TRUE(b.offloaded);
  EXPECT_GE(a.model_bytes + a.optimizer_bytes, 4 * static_cast<std::int64_t>(352 << 10));
  ASSERT_EQ(a.history.size(), b.history.size());
  for (std::size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].train_loss, b.history[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].val.loss, b.history[e].val.loss) << "epoch " << e + 1;
  }
  EXPECT_GT(b.offload.device_to_host_bytes, 0u);
  EXPECT_LE(b.offload.peak_device_bytes, budgeted.offload.device_bytes);
}

TEST(MlpJobOffload, TheDiskTierTrainsExactlyTheSameModelAndLeavesNoFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessera-mlp-offload-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const runtime::MlpJob plain = deep_blobs_job();
  runtime::MlpJob budgeted = plain;
  budgeted.offload = quarter_budget();
  budgeted.offload.host_bytes = std::size_t{256} << 10;
  budgeted.offload.offload_dir = dir.string();

  const runtime::MlpResult a = runtime::run_mlp_job(plain);
  const runtime::MlpResult b = runtime::run_mlp_job(budgeted);

  for (std::size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].train_loss, b.history[e].train_loss) << "epoch " << e + 1;
  }
  EXPECT_GT(b.offload.host_to_disk_bytes, 0u);
  EXPECT_LE(b.offload.peak_host_bytes, budgeted.offload.host_bytes);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(MlpJobOffload, FarthestNextUseMovesNoMoreThanLru) {
  runtime::MlpJob belady = deep_blobs_job();
  belady.epochs = 4;
  belady.offload = quarter_budget();
  runtime::MlpJob lru = belady;
  lru.offload.policy = EvictionPolicy::Lru;

  const runtime::MlpResult b = runtime::run_mlp_job(belady);
  const runtime::MlpResult l = runtime::run_mlp_job(lru);

  // The first two epochs allocate and record the trace (both evict by recency): compare after.
  std::uint64_t moved_b = 0, moved_l = 0;
  for (std::size_t e = 2; e < b.history.size(); ++e) {
    moved_b += b.history[e].offload.moved_bytes();
    moved_l += l.history[e].offload.moved_bytes();
  }
  EXPECT_LT(moved_b, moved_l);
}

TEST(MlpJobOffload, ABudgetBelowOneLayersNeedNamesTheBudget) {
  runtime::MlpJob job = deep_blobs_job();
  job.offload.chunk_bytes = std::size_t{16} << 10;
  job.offload.device_bytes = std::size_t{32} << 10;

  EXPECT_THAT([&] { runtime::run_mlp_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("device memory budget (32 KiB")));
}

}  // namespace
}  // namespace tessera
