// Using a trained model (issue 40): the training run's per-node outputs, tessera-predict's job
// from its checkpoint giving the same outputs and metrics (with and without a memory budget),
// embeddings of a hidden layer, and the refusals — another feature width, another model, a
// layer the model lacks, an output that is no numpy file; and a link-prediction checkpoint scoring
// a list of pairs as training scored them, refusing pairs of nodes the graph lacks.
#include "tessera/datasets/numpy_files.hpp"
#include "tessera/tessera.hpp"
#include "test_data.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <iterator>
#include <unistd.h>

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr const char* kSbm = "sbm:nodes=2000,classes=4,avg-degree=8,p-in=0.5,features=16,noise=3";

/// A folder of its own, removed at the end.
class Folder {
public:
  Folder() {
    static int counter = 0;
    path_ =
        std::filesystem::temp_directory_path() /
        ("tessera-predict-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~Folder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
  std::filesystem::path path_;
};

/// The float32 values and shape of an .npy file written by write_npy.
struct Npy {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

Npy read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_GT(bytes.size(), 10u) << path;
  if (bytes.size() <= 10) return {};
  const std::size_t header =
      10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
  const std::string dict = bytes.substr(10, header - 10);
  Npy out;
  const std::size_t open = dict.find("'shape': (") + 10;
  std::string dims = dict.substr(open, dict.find(')', open) - open);
  for (std::size_t at = 0; at < dims.size();) {
    const std::size_t comma = dims.find(',', at);
    const std::string dim = dims.substr(at, comma == std::string::npos ? comma : comma - at);
    if (dim.find_first_not_of(' ') != std::string::npos) out.shape.push_back(std::stoll(dim));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  out.values.resize((bytes.size() - header) / sizeof(float));
  std::memcpy(out.values.data(), bytes.data() + header, out.values.size() * sizeof(float));
  return out;
}

/// A 2-layer model trained on kSbm for a few epochs with a checkpoint, writing predictions and
/// embeddings of every node.
runtime::TrainJob trained_job(const Folder& folder, const std::string& model = "sage") {
  runtime::TrainJob job;
  job.dataset = kSbm;
  job.train.epochs = 8;
  job.shape.hidden = 8;
  if (model != "gcn") {
    job.model_builder = gnn::builder_for(gnn::parse_model_kind(model));
    job.model_name = gnn::display_name(gnn::parse_model_kind(model));
  }
  job.checkpoint_dir = folder.file("checkpoint");
  job.outputs.predictions = folder.file("train-predictions.npy");
  job.outputs.embeddings = folder.file("train-embeddings.npy");
  return job;
}

runtime::PredictJob predict_job(const Folder& folder) {
  runtime::PredictJob job;
  job.checkpoint_dir = folder.file("checkpoint");
  job.outputs.predictions = folder.file("predictions.npy");
  job.outputs.embeddings = folder.file("embeddings.npy");
  return job;
}

void expect_near(const Npy& a, const Npy& b, double tolerance) {
  ASSERT_EQ(a.shape, b.shape);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (std::size_t i = 0; i < a.values.size(); ++i)
    ASSERT_NEAR(a.values[i], b.values[i], tolerance) << "element " << i;
}

TEST(PredictJob, PredictsFromTheCheckpointWhatTheTrainingRunEndedWith) {
  const Folder folder;
  const runtime::RunSummary trained = runtime::run_train_job(trained_job(folder));
  const runtime::PredictSummary predicted = runtime::run_predict_job(predict_job(folder));

  const Npy train_p = read_npy(folder.file("train-predictions.npy"));
  const Npy p = read_npy(folder.file("predictions.npy"));
  EXPECT_EQ(p.shape, (std::vector<std::int64_t>{2000, 4}));
  expect_near(train_p, p, 1e-6);
  for (std::int64_t r = 0; r < 2000; ++r) {
    double sum = 0.0;
    for (int c = 0; c < 4; ++c)
      sum += p.values[static_cast<std::size_t>(4 * r + c)];
    ASSERT_NEAR(sum, 1.0, 1e-5) << "row " << r << " holds probabilities";
  }
  const Npy e = read_npy(folder.file("embeddings.npy"));
  EXPECT_EQ(e.shape, (std::vector<std::int64_t>{2000, 8}));
  expect_near(read_npy(folder.file("train-embeddings.npy")), e, 1e-6);

  EXPECT_EQ(predicted.metrics[2].accuracy, trained.result.final_test.accuracy);
  EXPECT_EQ(predicted.checkpoint_epoch, 8);
  EXPECT_TRUE(predicted.same_data);
  EXPECT_EQ(predicted.model_name, "GraphSAGE");
  EXPECT_EQ(predicted.split_rows[2], 1600);
}

TEST(PredictJob, AMemoryBudgetPredictsWhatPlainMemoryPredicts) {
  const Folder folder;
  runtime::run_train_job(trained_job(folder, "gcn"));
  runtime::PredictJob budgeted = predict_job(folder);
  budgeted.outputs.predictions = folder.file("budgeted.npy");
  budgeted.outputs.embeddings = folder.file("budgeted-embeddings.npy");
  budgeted.offload.device_bytes = 256 << 10;
  budgeted.offload.chunk_bytes = 32 << 10;

  const runtime::PredictSummary plain = runtime::run_predict_job(predict_job(folder));
  const runtime::PredictSummary chunked = runtime::run_predict_job(budgeted);

  expect_near(read_npy(folder.file("predictions.npy")), read_npy(folder.file("budgeted.npy")),
              1e-6);
  expect_near(read_npy(folder.file("embeddings.npy")),
              read_npy(folder.file("budgeted-embeddings.npy")), 1e-6);
  EXPECT_EQ(plain.metrics[2].accuracy, chunked.metrics[2].accuracy);
}

TEST(PredictJob, AGraphOfAnotherFeatureWidthOrClassCountIsRefusedNamingBoth) {
  const Folder folder;
  runtime::run_train_job(trained_job(folder));
  runtime::PredictJob wider = predict_job(folder);
  wider.dataset = "sbm:nodes=500,classes=4,features=20";
  runtime::PredictJob more = predict_job(folder);
  more.dataset = "sbm:nodes=500,classes=5,features=16";

  EXPECT_THAT([&] { runtime::run_predict_job(wider); },
              ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("reads 16 input features"),
                                                   HasSubstr("has 20"), HasSubstr("GraphSAGE"))));
  EXPECT_THAT(
      [&] { runtime::run_predict_job(more); },
      ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("predicts 4 classes"), HasSubstr("has 5"))));
  EXPECT_FALSE(std::filesystem::exists(folder.file("predictions.npy")));
}

TEST(PredictJob, WeightsOfAnotherModelAreRefusedNamingTheParameter) {
  const Folder folder;
  runtime::run_train_job(trained_job(folder, "gcn"));
  runtime::PredictJob as_gin = predict_job(folder);
  as_gin.model_builder = gnn::builder_for(gnn::ModelKind::Gin);

  EXPECT_THAT([&] { runtime::run_predict_job(as_gin); },
              ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("does not fit the model 'GCN 16-8-4'"), HasSubstr("parameter"))));
}

TEST(PredictJob, ALayerTheModelLacksOrAnOutputThatIsNoNumpyFileIsRefusedBeforeTraining) {
  const Folder folder;
  runtime::TrainJob deep = trained_job(folder);
  deep.outputs.embedding_layer = 2; // a 2-layer model has one hidden layer
  runtime::TrainJob text = trained_job(folder);
  text.checkpoint_dir = folder.file("checkpoint-2");
  text.outputs.predictions = folder.file("p.txt");

  EXPECT_THAT([&] { runtime::run_train_job(deep); },
              ThrowsMessage<InvalidArgument>(HasSubstr("1 hidden layer(s)")));
  EXPECT_THAT([&] { runtime::run_train_job(text); },
              ThrowsMessage<InvalidArgument>(HasSubstr("expects a file ending in .npy")));
  EXPECT_FALSE(std::filesystem::exists(folder.file("checkpoint/latest.json")));
  EXPECT_FALSE(std::filesystem::exists(folder.file("checkpoint-2"))) << "refused before claiming";
}

TEST(PredictJob, ALinkCheckpointScoresPairsAsTrainingScoredThem) {
  const Folder folder;
  runtime::TrainJob train;
  train.dataset = kSbm;
  train.task = runtime::Task::Link;
  train.link.embedding_width = 8;
  train.shape.hidden = 16;
  train.train.epochs = 6;
  train.checkpoint_dir = folder.file("checkpoint");
  train.outputs.embeddings = folder.file("train-embeddings.npy");
  train.link.split_out = folder.file("split.npz");
  const runtime::RunSummary trained = runtime::run_train_job(train);

  // The test pairs, positives then negatives, as the pairs to score.
  const datasets::IntegerArray pos =
      datasets::read_npz_integers(folder.file("split.npz"), "test_pos");
  const datasets::IntegerArray neg =
      datasets::read_npz_integers(folder.file("split.npz"), "test_neg");
  const std::int64_t n = pos.shape[1];
  std::vector<std::int64_t> pairs(static_cast<std::size_t>(4 * n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    pairs[k] = pos.values[k];
    pairs[static_cast<std::size_t>(n) + k] = neg.values[k];
    pairs[static_cast<std::size_t>(2 * n) + k] = pos.values[static_cast<std::size_t>(n) + k];
    pairs[static_cast<std::size_t>(3 * n) + k] = neg.values[static_cast<std::size_t>(n) + k];
  }
  const datasets::NumpyArray array{"pairs", {2, 2 * n}, std::span<const std::int64_t>(pairs)};
  datasets::write_npz(folder.file("pairs.npz"), std::span(&array, 1));

  runtime::PredictJob job;
  job.checkpoint_dir = folder.file("checkpoint");
  job.pairs = folder.file("pairs.npz");
  job.link_split_in = folder.file("split.npz"); // encode with the training edges, as training did
  job.outputs.predictions = folder.file("probabilities.npy");
  const runtime::PredictSummary predicted = runtime::run_predict_job(job);
  EXPECT_EQ(predicted.task, "link");
  EXPECT_EQ(predicted.pairs, 2 * n);

  // Each probability is sigmoid(z_u · z_v) of the training run's final embeddings, and their
  // ranking gives the final test ROC-AUC.
  const Npy p = read_npy(folder.file("probabilities.npy"));
  const Npy z = read_npy(folder.file("train-embeddings.npy"));
  ASSERT_EQ(p.shape, (std::vector<std::int64_t>{2 * n}));
  std::vector<double> scores;
  for (std::int64_t i = 0; i < 2 * n; ++i) {
    const auto u = pairs[static_cast<std::size_t>(i)];
    const auto v = pairs[static_cast<std::size_t>(2 * n + i)];
    double dot = 0.0;
    for (std::int64_t c = 0; c < 8; ++c)
      dot += static_cast<double>(z.values[static_cast<std::size_t>(8 * u + c)]) *
             z.values[static_cast<std::size_t>(8 * v + c)];
    ASSERT_NEAR(p.values[static_cast<std::size_t>(i)], 1.0 / (1.0 + std::exp(-dot)), 1e-6);
    scores.push_back(p.values[static_cast<std::size_t>(i)]);
  }
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(n), 1);
  labels.resize(static_cast<std::size_t>(2 * n), 0);
  EXPECT_NEAR(gnn::roc_auc(scores, labels).value(), trained.result.final_test.roc_auc.value(),
              1e-4);

  // Pairs of nodes the graph lacks, and pairs without a link model, are refused.
  const std::vector<std::int64_t> outside = {0, 2000, 1, 2};
  const datasets::NumpyArray bad{"pairs", {2, 2}, std::span<const std::int64_t>(outside)};
  datasets::write_npz(folder.file("bad.npz"), std::span(&bad, 1));
  job.pairs = folder.file("bad.npz");
  EXPECT_THAT([&] { runtime::run_predict_job(job); },
              ThrowsMessage<InvalidArgument>(AllOf(
                  HasSubstr(folder.file("bad.npz")),
                  HasSubstr("pair 1 (2000, 2) names a node outside the graph's 2000 nodes"))));
  job.pairs.clear();
  EXPECT_THAT([&] { runtime::run_predict_job(job); },
              ThrowsMessage<InvalidArgument>(HasSubstr("--pairs FILE.npz names (give it)")));
}

} // namespace
} // namespace tessera
