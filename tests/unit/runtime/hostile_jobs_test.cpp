// Jobs given hostile sizes and splits (issue 37): sizes from a file or a flag that no memory
// holds are refused naming where they came from before anything is allocated; a run without a
// validation split reports its final epoch; a one-class split cannot be scored by ROC-AUC.
#include "model_memory.hpp"
#include "tessera/tessera.hpp"

#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kSbm = "sbm:nodes=400,classes=2,avg-degree=6,p-in=0.8,features=6,noise=1";
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

/// A temporary file path for one test, removed at the end.
class TempFile {
public:
  explicit TempFile(const std::string& name)
      : path_((fs::temp_directory_path() /
               ("tessera-hostile-" + std::to_string(getpid()) + "-" + name))
                  .string()) {}
  ~TempFile() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

runtime::TrainJob small_job(const std::string& dataset) {
  runtime::TrainJob job;
  job.dataset = dataset;
  job.threads = 1;
  job.shape.hidden = 8;
  job.train.epochs = 4;
  return job;
}

// ---- sizes that no memory holds are named before anything is allocated -------------------------

TEST(ModelMemory, WideFirstLayerIsRefusedNamingWhereTheInputWidthComesFrom) {
  EXPECT_THAT(
      [] {
        runtime::check_model_memory({1000000000, 16, 3}, 100, 0.0,
                                    {"FILE: array 'attr_shape'", "--hidden", "the data"}, 8 * kGiB);
      },
      ::testing::ThrowsMessage<InvalidArgument>(
          AllOf(HasSubstr("layer 1's weights [1000000000, 16]"), HasSubstr("238.4 GiB"),
                HasSubstr("input width 1000000000 (FILE: array 'attr_shape')"),
                HasSubstr("more than this machine's 8.0 GiB"))));
}

TEST(ModelMemory, WideHiddenLayerIsRefusedNamingTheFlag) {
  EXPECT_THAT(
      [] {
        runtime::check_model_memory({64, 10000000, 10000000, 3}, 10, 0.0, {"", "--hidden", ""},
                                    8 * kGiB);
      },
      ::testing::ThrowsMessage<InvalidArgument>(
          AllOf(HasSubstr("[10000000, 10000000]"), HasSubstr("--hidden 10000000"))));
}

TEST(ModelMemory, ManyRowsOfAWideLayerAreRefusedNamingRowsAndWidth) {
  EXPECT_THAT(
      [] {
        runtime::check_model_memory({8, 4096, 2}, 1000000, 0.0, {"", "--hidden", "dataset 'big'"},
                                    8 * kGiB);
      },
      ::testing::ThrowsMessage<InvalidArgument>(
          AllOf(HasSubstr("1000000 rows (dataset 'big') at --hidden 4096"))));
}

TEST(ModelMemory, ModelThatFitsPasses) {
  EXPECT_NO_THROW(runtime::check_model_memory({1433, 16, 7}, 2708, 2708.0 * 1433 * 4,
                                              {"", "--hidden", ""}, 8 * kGiB));
}

TEST(ModelMemory, TrainJobOfAnAttrShapeOfABillionColumnsIsRefusedNamingTheArray) {
  // The sparse features hold a few entries: only the model's first layer is huge.
  const TempFile file("wide.npz");
  datasets::Dataset data = datasets::load_dataset(make_cpu_backend(1), kSbm, {});
  Csr wide(make_cpu_backend(1), data.num_nodes, 1000000000, data.num_nodes);
  for (std::int64_t i = 0; i < data.num_nodes; ++i) {
    wide.row_ptr()[i + 1] = i + 1;
    wide.col()[i] = static_cast<LocalId>(i * 1000);
    wide.val()[i] = 1.0f;
  }
  data.features = {};
  data.features.sparse = std::move(wide);
  datasets::save_npz(data, file.path());

  EXPECT_THAT([&] { runtime::run_train_job(small_job("npz:" + file.path())); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("[1000000000, 8]"), HasSubstr("wide.npz: array 'attr_shape'"),
                        HasSubstr("Nothing was allocated"))));
}

TEST(ModelMemory, HiddenWidthOfTenMillionIsRefusedNamingTheFlag) {
  runtime::TrainJob job = small_job(kSbm);
  job.shape.hidden = 10000000;

  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("--hidden 10000000")));
}

// ---- a split without validation, and a split of one class under ROC-AUC -----------------------

TEST(HostileSplits, RunWithoutValidationReportsItsFinalEpoch) {
  const TempFile file("noval.npz");
  datasets::Dataset data = datasets::load_dataset(make_cpu_backend(1), kSbm, {});
  data.val_idx.clear();
  datasets::save_npz(data, file.path());
  runtime::TrainJob job = small_job("npz:" + file.path());
  job.train.eval_every = 3; // evaluated at epochs 3 and 4

  const runtime::RunSummary summary = runtime::run_train_job(job);

  EXPECT_EQ(summary.result.val_rows, 0);
  EXPECT_EQ(summary.result.best_epoch, 4);
  EXPECT_EQ(summary.result.test_at_best_val.accuracy, summary.result.final_test.accuracy);
  EXPECT_THAT(runtime::describe_final_result(
                  {gnn::Metric::Accuracy, summary.result.test_at_best_val, summary.result.best_val,
                   summary.result.final_test, summary.result.best_epoch, false}),
              AllOf(HasSubstr("no validation split"), HasSubstr("at the final epoch 4"),
                    ::testing::Not(HasSubstr("0.00"))));
}

TEST(HostileSplits, ValidationOfOneClassIsRefusedUnderRocAucBeforeTraining) {
  const TempFile file("oneclass.npz");
  datasets::Dataset data = datasets::load_dataset(make_cpu_backend(1), kSbm, {});
  std::vector<std::int32_t> val;
  for (const std::int32_t id : data.val_idx) {
    if (data.labels[id] == 1) val.push_back(id);
  }
  data.val_idx = val;
  datasets::save_npz(data, file.path());
  runtime::TrainJob job = small_job("npz:" + file.path());
  job.train.metric = gnn::Metric::RocAuc;
  int epochs = 0;

  EXPECT_THAT([&] { runtime::run_train_job(job, {}, [&](const gnn::EpochStats&) { ++epochs; }); },
              ::testing::ThrowsMessage<InvalidArgument>(AllOf(
                  HasSubstr("undefined on the validation split"), HasSubstr("all of class 1"))));
  EXPECT_EQ(epochs, 0);
}

// ---- a loss that diverges on extreme features says so -----------------------------------------

TEST(HostileFeatures, DivergenceOnFeaturesOf1e38NamesTheirRangeNotOnlyTheLearningRate) {
  const TempFile file("huge.npz");
  datasets::Dataset data = datasets::load_dataset(make_cpu_backend(1), kSbm, {});
  Dense& x = *data.features.dense;
  for (std::int64_t i = 0; i < x.size(); ++i)
    x.data()[i] = x.data()[i] >= 0 ? 1e38f : -1e38f;
  datasets::save_npz(data, file.path());
  runtime::TrainJob job = small_job("npz:" + file.path());
  job.normalize_features = false;
  job.train.adam.lr = 100.0f;

  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ::testing::ThrowsMessage<gnn::TrainingStopped>(
                  AllOf(HasSubstr("training diverged"),
                        HasSubstr("the input features reach 1e+38 in absolute value"),
                        HasSubstr("--normalize-features true"))));
}

// ---- no output over an input ----------------------------------------------------------------

TEST(JobPaths, AnOutputThatIsAnInputOrLiesInsideOneIsRefusedNamingBoth) {
  const fs::path dir =
      fs::temp_directory_path() / ("tessera-job-paths-" + std::to_string(getpid()));
  fs::create_directories(dir / "store");
  const std::string data = (dir / "data.npz").string(), store = (dir / "store").string();
  std::ofstream(data) << "the dataset";
  fs::create_hard_link(data, dir / "link.npz");
  const std::vector<std::string> inputs{data, store};
  const auto refused = [&](const runtime::JobOutput& output, const std::string& relation) {
    EXPECT_THAT([&] { runtime::refuse_outputs_over_inputs({output}, inputs); },
                ::testing::ThrowsMessage<IoError>(
                    AllOf(HasSubstr(output.flag + " '" + output.path + "' " + relation),
                          HasSubstr("an input of this job"))))
        << output.path;
  };

  refused({"--report", data, false}, "is");
  refused({"--report", (dir / "." / "data.npz").string(), false}, "is");
  refused({"--report", (dir / "link.npz").string(), false}, "is"); // the same inode
  refused({"--report", (dir / "store" / "manifest.json").string(), false}, "lies inside");
  refused({"--checkpoint-dir", (dir / "store" / "new").string(), true}, "lies inside");
  refused({"--out", dir.string(), true}, "holds");
  EXPECT_NO_THROW(runtime::refuse_outputs_over_inputs(
      {{"--report", (dir / "report.json").string(), false},
       {"--checkpoint-dir", (dir / "storefront").string(), true},
       {"--offload-dir", "", true}},
      inputs));
  fs::remove_all(dir);
}

TEST(JobPaths, DatasetInputsAreTheFilesALoadWouldRead) {
  datasets::LoadOptions options;
  options.data_dir = "/data";

  EXPECT_EQ(datasets::dataset_inputs("cora", options),
            (std::vector<std::string>{"/data/cora_planetoid/cora_planetoid.npz"}));
  EXPECT_EQ(datasets::dataset_inputs("npz:/x/g.npz", options),
            (std::vector<std::string>{"/x/g.npz"}));
  EXPECT_EQ(datasets::dataset_inputs("musae:/m/fb_edges.csv.gz", options),
            (std::vector<std::string>{"/m/fb_edges.csv.gz", "/m/fb_target.csv", "/m/fb.json"}));
  EXPECT_TRUE(datasets::dataset_inputs(kSbm, options).empty());
}

TEST(JobPaths, AReportReplacesOnlyAnEarlierReport) {
  const TempFile file("report.json");
  // Nothing there yet, an empty file, a report of tessera-train: replaced.
  EXPECT_NO_THROW(runtime::check_report_path(file.path()));
  std::ofstream(file.path()).flush();
  EXPECT_NO_THROW(runtime::check_report_path(file.path()));
  std::ofstream(file.path()) << runtime::report_json(runtime::RunSummary{});
  EXPECT_NO_THROW(runtime::check_report_path(file.path()));
  // A report written before reports said what they are: its config and metrics tell it.
  std::ofstream(file.path()) << R"({"config": {"dataset": "cora"}, "metrics": {}})";
  EXPECT_NO_THROW(runtime::check_report_path(file.path()));
  // Anything else is kept: JSON of another tool, text, binary bytes.
  for (const std::string& other :
       std::vector<std::string>{R"({"name": "my notes"})", "ids,labels\n0,1\n",
                                std::string("\x7f"
                                            "ELF\0\1",
                                            6)}) {
    std::ofstream(file.path(), std::ios::binary) << other;
    EXPECT_THAT([&] { runtime::check_report_path(file.path()); },
                ::testing::ThrowsMessage<IoError>(
                    AllOf(HasSubstr(file.path()), HasSubstr("not a Tessera run report"))))
        << other;
  }
}

TEST(HostileSplits, MlpOnOneClassIsRefusedNotReportedAsPerfect) {
  runtime::MlpJob job;
  job.dataset = "blobs:samples=100,features=8,classes=1";
  job.epochs = 1;
  // Was "test accuracy 100.00%": every prediction of a one-class model is right.
  EXPECT_THAT([&] { runtime::run_mlp_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("1 class: at least 2")));
}

TEST(HostileSplits, AReportOfNoEpochsHoldsNoMetricsNotZeros) {
  runtime::TrainJob job = small_job(kSbm);
  job.train.epochs = 0;
  // Was test_accuracy 0.0 and best_val_accuracy 0.0: numbers no run measured.
  const nlohmann::json report =
      nlohmann::json::parse(runtime::report_json(runtime::run_train_job(job)));
  const nlohmann::json& metrics = report.at("metrics");
  EXPECT_EQ(metrics.at("epochs_trained"), 0);
  EXPECT_EQ(metrics.at("selected_by"), "none: no epochs trained");
  EXPECT_FALSE(metrics.contains("test_accuracy"));
  EXPECT_FALSE(metrics.contains("best_val_accuracy"));

  job.train.epochs = 2;
  const nlohmann::json trained =
      nlohmann::json::parse(runtime::report_json(runtime::run_train_job(job)));
  EXPECT_EQ(trained.at("metrics").at("epochs_trained"), 2);
  EXPECT_TRUE(trained.at("metrics").contains("test_accuracy"));
}

} // namespace
} // namespace tessera
