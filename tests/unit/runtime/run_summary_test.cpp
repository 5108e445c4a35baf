// The run summary written out: the JSON report has every figure the scripts read, per-rank
// figures as max / mean / min, and is written whole; the rank table shows the same numbers.
#include "tessera/tessera.hpp"

#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace tessera {
namespace {

using ::testing::HasSubstr;

/// A summary of two ranks, by hand.
runtime::RunSummary two_ranks() {
  runtime::RunSummary s;
  s.model_name = "GCN";
  s.layer_sizes = {8, 16, 3};
  s.dataset = "toy";
  s.nodes = 100;
  s.edges = 500;
  s.ranks = 2;
  s.per_rank.resize(2);
  s.per_rank[0].epoch_ms = 10.0;
  s.per_rank[1].epoch_ms = 30.0;
  s.per_rank[0].wait_ms = 1.0;
  s.per_rank[1].wait_ms = 3.0;
  s.per_rank[0].halo_bytes_sent = 1 << 20;
  s.per_rank[1].halo_bytes_sent = 3 << 20;
  s.per_rank[0].layer_bytes_sent = {0, 7};
  s.per_rank[1].layer_bytes_sent = {0, 9};
  s.per_rank[0].layer_bytes_received = {0, 9};
  s.per_rank[1].layer_bytes_received = {0, 7};
  s.halo_bytes_per_epoch = 4 << 20;
  s.broadcast_1d_bytes_per_epoch = 40 << 20;
  s.result.median_step_ms = 12.5;
  s.result.test_rows = 20;
  s.result.history.resize(3);
  for (int e = 0; e < 3; ++e)
    s.result.history[e].epoch = e + 1;
  return s;
}

TEST(RunSummary, ReportSpreadsPerRankFiguresAndKeepsTheScriptsKeys) {
  const runtime::RunSummary s = two_ranks();

  const nlohmann::json r = nlohmann::json::parse(runtime::report_json(s));

  EXPECT_EQ(r["timing"]["epoch_ms"]["max"], 30.0);
  EXPECT_EQ(r["timing"]["epoch_ms"]["mean"], 20.0);
  EXPECT_EQ(r["timing"]["epoch_ms"]["min"], 10.0);
  EXPECT_EQ(r["timing"]["wait_ms"]["max"], 3.0);
  EXPECT_EQ(r["timing"]["epoch_ms_median"], 12.5);
  EXPECT_EQ(r["comm"]["halo_bytes_per_epoch"], 4 << 20);
  EXPECT_EQ(r["comm"]["broadcast_1d_bytes_per_epoch"], 40 << 20);
  EXPECT_EQ(r["comm"]["layer_bytes_sent"]["conv1"], (std::vector<double>{7, 9}));
  EXPECT_EQ(r["comm"]["layer_bytes_received"]["conv1"], (std::vector<double>{9, 7}));
  EXPECT_EQ(r["dataset"]["edges"], 500);
  EXPECT_EQ(r["distributed"]["ranks"], 2);
  EXPECT_EQ(r["config"]["layer_sizes"], (std::vector<double>{8, 16, 3}));
  EXPECT_EQ(r["epochs"].size(), 3u);
  for (const char* key : {"test_accuracy", "final_test_accuracy", "best_epoch"}) {
    EXPECT_TRUE(r["metrics"].contains(key)) << key;
  }
  EXPECT_TRUE(r["memory"]["peak_rss_bytes"].contains("max"));
}

TEST(RunSummary, ReportOmitsTheBroadcastEstimateWhenThereIsNone) {
  runtime::RunSummary s = two_ranks();
  s.broadcast_1d_bytes_per_epoch.reset();

  const nlohmann::json r = nlohmann::json::parse(runtime::report_json(s));

  EXPECT_FALSE(r["comm"].contains("broadcast_1d_bytes_per_epoch"));
}

TEST(RunSummary, GatherOnOneRankGivesTheRanksOwnFigures) {
  const auto comm = comm::make_self_communicator();
  runtime::RankFigures mine = two_ranks().per_rank[1];
  mine.owned_rows = 123;
  mine.peak_rss_bytes = std::int64_t{5} << 30;

  const std::vector<runtime::RankFigures> all = runtime::gather_rank_figures(*comm, mine);

  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].epoch_ms, 30.0);
  EXPECT_EQ(all[0].owned_rows, 123);
  EXPECT_EQ(all[0].peak_rss_bytes, std::int64_t{5} << 30);
  EXPECT_EQ(all[0].layer_bytes_sent, (std::vector<std::int64_t>{0, 9}));
  EXPECT_EQ(all[0].layer_bytes_received, (std::vector<std::int64_t>{0, 7}));
}

TEST(RunSummary, RankTableShowsTheSpreadAndTheTotals) {
  const std::string table = runtime::rank_table(two_ranks());

  EXPECT_THAT(table, HasSubstr("epoch                       30.00      20.00      10.00  ms"));
  EXPECT_THAT(table, HasSubstr("waiting for halos"));
  EXPECT_THAT(table, HasSubstr("halo bytes per epoch, all ranks: 4.00 MiB (10.0x less than a 1D "
                               "broadcast)"));
}

TEST(RunSummary, WriteReplacesTheFileAndLeavesNoTemporary) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera-report-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "run.json";
  std::ofstream(path) << "old";

  runtime::write_report(two_ranks(), path.string());

  std::ifstream in(path);
  const nlohmann::json r = nlohmann::json::parse(in);
  EXPECT_EQ(r["dataset"]["name"], "toy");
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  std::filesystem::remove_all(dir);
}

TEST(RunSummary, WriteToAMissingFolderThrowsIoErrorNamingIt) {
  EXPECT_THAT([] { runtime::write_report(two_ranks(), "/nonexistent-folder/run.json"); },
              ::testing::ThrowsMessage<IoError>(HasSubstr("/nonexistent-folder/run.json")));
}

TEST(RunSummary, OfARealJobAgreesWithItsResult) {
  runtime::TrainJob job;
  job.dataset = "sbm:nodes=600,classes=3,avg-degree=6,p-in=0.9,features=8,noise=0.5";
  job.train.epochs = 4;

  const runtime::RunSummary s = runtime::run_train_job(job);
  const nlohmann::json r = nlohmann::json::parse(runtime::report_json(s));

  EXPECT_EQ(r["epochs"].size(), 4u);
  EXPECT_EQ(r["metrics"]["test_accuracy"], s.result.test_at_best_val.accuracy);
  EXPECT_EQ(r["dataset"]["nodes"], 600);
  EXPECT_EQ(r["config"]["layer_sizes"], (std::vector<double>{8, 16, 3}));
  EXPECT_GT(r["dataset"]["edges"].get<double>(), 600.0); // Â: self-loops and both directions
  EXPECT_GT(r["memory"]["peak_rss_bytes"]["max"].get<double>(), 0.0);
}

} // namespace
} // namespace tessera
