// tessera-train --task link as a library call (issue 40): a generated graph's held-out edges
// learned, the report's ranking keys, the same run twice, a stored split trained on as the
// drawn one it records, and what link prediction refuses (a stored split of another graph too).
#include "tessera/datasets/numpy_files.hpp"
#include "tessera/tessera.hpp"

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

runtime::TrainJob link_job() {
  runtime::TrainJob job;
  job.dataset = "sbm:nodes=1500,classes=6,avg-degree=10,p-in=0.9,features=16,noise=1";
  job.task = runtime::Task::Link;
  job.link.embedding_width = 8;
  job.link.hits_k = {10, 50};
  job.shape.hidden = 16;
  job.model.dropout = 0.0f;
  job.train.epochs = 40;
  job.train.eval_every = 5;
  job.train.metric = gnn::Metric::RocAuc;
  job.train.adam.weight_decay = 0.0f;
  return job;
}

TEST(LinkJob, LearnsAGeneratedGraphsHeldOutEdgesAndReportsTheRankingMetrics) {
  const runtime::RunSummary summary = runtime::run_train_job(link_job());
  const gnn::SplitMetrics& test = summary.result.test_at_best_val;

  ASSERT_TRUE(test.roc_auc.has_value());
  EXPECT_GT(*test.roc_auc, 0.8) << "edges mostly join nodes of a class: an encoder sees it";
  ASSERT_TRUE(test.link.has_value());
  EXPECT_GT(test.link->average_precision, 0.75);
  ASSERT_EQ(test.link->hits.size(), 2u);
  EXPECT_EQ(test.link->hits[0].first, 10);
  EXPECT_EQ(summary.classes, 8) << "the model's output is the embedding width";
  const std::string report = runtime::report_json(summary);
  for (const char* key : {"\"test_roc_auc\"", "\"test_ap\"", "\"test_mrr\"", "\"test_hits@10\"",
                          "\"test_hits@50\"", "\"best_val_roc_auc\""})
    EXPECT_THAT(report, HasSubstr(key));
}

TEST(LinkJob, TheSameSeedGivesTheSameRunAndAnotherSeedAnotherSplit) {
  runtime::TrainJob job = link_job();
  job.train.epochs = 5;
  const auto a = runtime::run_train_job(job);
  const auto b = runtime::run_train_job(job);
  job.train.seed = 1;
  const auto c = runtime::run_train_job(job);

  ASSERT_EQ(a.result.history.size(), b.result.history.size());
  for (std::size_t e = 0; e < a.result.history.size(); ++e)
    EXPECT_EQ(a.result.history[e].train_loss, b.result.history[e].train_loss);
  EXPECT_NE(a.result.history.back().train_loss, c.result.history.back().train_loss);
}

TEST(LinkJob, AMemoryBudgetTrainsAsPlainMemory) {
  runtime::TrainJob plain = link_job();
  plain.train.epochs = 6;
  plain.train.eval_every = 3;
  runtime::TrainJob budget = plain;
  budget.offload.device_bytes = 256 << 10; // a fraction of the model's working set
  budget.offload.chunk_bytes = 32 << 10;
  const auto a = runtime::run_train_job(plain);
  const auto b = runtime::run_train_job(budget);

  ASSERT_EQ(a.result.history.size(), b.result.history.size());
  for (std::size_t e = 0; e < a.result.history.size(); ++e)
    EXPECT_NEAR(b.result.history[e].train_loss, a.result.history[e].train_loss,
                1e-5 * a.result.history[e].train_loss);
  EXPECT_NEAR(b.result.final_test.roc_auc.value(), a.result.final_test.roc_auc.value(), 1e-4);
  EXPECT_GT(b.result.history.back().offload.evictions, 0u) << "the budget made chunks move";
}

TEST(LinkJob, WhatLinkPredictionCannotDoIsRefusedBeforeLoading) {
  runtime::TrainJob predictions = link_job();
  predictions.outputs.predictions = "p.npy";
  runtime::TrainJob split = link_job();
  split.link.val_fraction = 0.6;
  split.link.test_fraction = 0.5;
  runtime::TrainJob no_edges = link_job();
  no_edges.dataset = "sbm:nodes=100,avg-degree=0,features=4";

  EXPECT_THAT([&] { runtime::run_train_job(predictions); },
              ThrowsMessage<InvalidArgument>(HasSubstr("--embeddings writes the encoder's")));
  EXPECT_THAT([&] { runtime::run_train_job(split); },
              ThrowsMessage<InvalidArgument>(HasSubstr("leave edges to train on")));
  EXPECT_THAT([&] { runtime::run_train_job(no_edges); },
              ThrowsMessage<InvalidArgument>(HasSubstr("the graph has no edges")));
}

/// A temporary file for one test, removed at its end.
class TempFile {
public:
  explicit TempFile(const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               ("tessera-link-" + std::to_string(getpid()) + "-" + name))
                  .string()) {}
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

TEST(LinkJob, AStoredSplitTrainsAsTheDrawnSplitItRecords) {
  const TempFile file("split.npz");
  runtime::TrainJob drawn = link_job();
  drawn.train.epochs = 6;
  drawn.link.split_out = file.path();
  const auto a = runtime::run_train_job(drawn);
  runtime::TrainJob stored = link_job();
  stored.train.epochs = 6;
  stored.train.seed = 5; // the weights' seed differs: only the split is the same
  stored.link.split_in = file.path();
  runtime::TrainJob again = drawn;
  again.link.split_out.clear();
  again.link.split_in = file.path();
  const auto b = runtime::run_train_job(again);

  ASSERT_EQ(a.result.history.size(), b.result.history.size());
  for (std::size_t e = 0; e < a.result.history.size(); ++e)
    EXPECT_EQ(a.result.history[e].train_loss, b.result.history[e].train_loss);
  EXPECT_EQ(a.result.final_test.roc_auc, b.result.final_test.roc_auc);
  EXPECT_NO_THROW(runtime::run_train_job(stored));
}

/// Writes the five arrays of a split of a 4-node graph, `train` its training pairs.
void write_split(const std::string& path, const std::vector<std::int64_t>& train,
                 const std::vector<std::int64_t>& shape = {}) {
  const std::vector<std::int64_t> pair = {0, 2};
  std::vector<datasets::NumpyArray> arrays;
  arrays.push_back({"train_pos",
                    shape.empty()
                        ? std::vector<std::int64_t>{2, static_cast<std::int64_t>(train.size() / 2)}
                        : shape,
                    std::span<const std::int64_t>(train)});
  for (const char* name : {"val_pos", "val_neg", "test_pos", "test_neg"})
    arrays.push_back({name, {2, 1}, std::span<const std::int64_t>(pair)});
  datasets::write_npz(path, arrays);
}

TEST(LinkJob, AStoredSplitOfAnotherGraphIsRefusedNamingThePairAndTheFile) {
  const TempFile graph("graph.npz"), split("bad.npz");
  {
    // The path 0 - 1 - 2 - 3 as an npz dataset.
    datasets::Dataset path = datasets::load_dataset(
        make_cpu_backend(1), "sbm:nodes=4,classes=2,avg-degree=0,features=2", {});
    graph::EdgeList edges;
    edges.num_nodes = 4;
    for (GlobalId v = 0; v < 3; ++v)
      edges.add(v, v + 1);
    path.adjacency = graph::build_symmetric_csr(make_cpu_backend(1), edges);
    datasets::save_npz(path, graph.path());
  }
  runtime::TrainJob job = link_job();
  job.dataset = "npz:" + graph.path();
  job.train.epochs = 1;
  job.link.split_in = split.path();
  const auto refused = [&](const std::string& what) {
    EXPECT_THAT([&] { runtime::run_train_job(job); },
                ThrowsMessage<Error>(AllOf(HasSubstr(split.path()), HasSubstr(what))));
  };

  write_split(split.path(), {0, 1, 1, 2}); // pairs (0, 1) and (1, 2): edges
  EXPECT_NO_THROW(runtime::run_train_job(job));
  // [2, E]: the sources, then the destinations.
  write_split(split.path(), {0, 1, 1, 9});
  refused("train_pos pair 1 (1, 9) names a node outside the graph's 4 nodes");
  write_split(split.path(), {0, 3, 1, 0});
  refused("train_pos pair 1 (3, 0) is no edge of the graph");
  write_split(split.path(), {0, 1, 2, 2});
  refused("train_pos pair 0 (0, 2) is no edge of the graph");
  write_split(split.path(), {0, 1, 2, 3}, {4, 1});
  refused("array 'train_pos' has shape (4, 1), expected (2, E)");
  job.link.split_in = graph.path();
  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ThrowsMessage<Error>(HasSubstr("array 'train_pos': missing")));
}

TEST(LinkJob, AnMlpDecoderLearnsAndTessera_predictRebuildsItFromTheCheckpoint) {
  const TempFile split("mlp-split.npz"), pairs("mlp-pairs.npz"), scores("mlp-scores.npy");
  const TempFile checkpoint("mlp-checkpoint");
  runtime::TrainJob job = link_job();
  job.link.decoder = "mlp";
  job.link.decoder_hidden = 12;
  job.link.split_out = split.path();
  job.checkpoint_dir = checkpoint.path();
  const runtime::RunSummary trained = runtime::run_train_job(job);
  ASSERT_TRUE(trained.result.final_test.roc_auc.has_value());
  EXPECT_GT(*trained.result.final_test.roc_auc, 0.75);

  // The test pairs, positives then negatives.
  const datasets::IntegerArray pos = datasets::read_npz_integers(split.path(), "test_pos");
  const datasets::IntegerArray neg = datasets::read_npz_integers(split.path(), "test_neg");
  const std::int64_t n = pos.shape[1];
  std::vector<std::int64_t> both;
  for (const int row : {0, 1}) {
    const auto at = static_cast<std::ptrdiff_t>(row * n);
    both.insert(both.end(), pos.values.begin() + at, pos.values.begin() + at + n);
    both.insert(both.end(), neg.values.begin() + at, neg.values.begin() + at + n);
  }
  const datasets::NumpyArray array{"pairs", {2, 2 * n}, std::span<const std::int64_t>(both)};
  datasets::write_npz(pairs.path(), std::span(&array, 1));
  runtime::PredictJob predict;
  predict.checkpoint_dir = checkpoint.path();
  predict.pairs = pairs.path();
  predict.link_split_in = split.path();
  predict.outputs.predictions = scores.path();
  EXPECT_EQ(runtime::run_predict_job(predict).pairs, 2 * n);

  // The probabilities rank the test pairs as training's last evaluation did.
  std::ifstream in(scores.path(), std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::size_t header = bytes.size() - static_cast<std::size_t>(2 * n) * sizeof(float);
  std::vector<double> probability(static_cast<std::size_t>(2 * n));
  for (std::size_t k = 0; k < probability.size(); ++k) {
    float p = 0.0f;
    std::memcpy(&p, bytes.data() + header + k * sizeof(float), sizeof p);
    probability[k] = p;
  }
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(n), 1);
  labels.resize(static_cast<std::size_t>(2 * n), 0);
  EXPECT_NEAR(gnn::roc_auc(probability, labels).value(), *trained.result.final_test.roc_auc, 1e-4);
  std::filesystem::remove_all(checkpoint.path());
}

TEST(LinkJob, DecoderSettingsThatCannotWorkAreRefused) {
  runtime::TrainJob unknown = link_job();
  unknown.link.decoder = "bilinear";
  runtime::TrainJob budget = link_job();
  budget.link.decoder = "mlp";
  budget.offload.device_bytes = 1 << 20;
  runtime::TrainJob layers = link_job();
  layers.link.decoder = "mlp";
  layers.link.decoder_layers = 0;
  EXPECT_THAT([&] { runtime::run_train_job(unknown); },
              ThrowsMessage<InvalidArgument>(HasSubstr("--decoder bilinear: expects dot or mlp")));
  EXPECT_THAT(
      [&] { runtime::run_train_job(budget); },
      ThrowsMessage<InvalidArgument>(HasSubstr("--decoder mlp does not run under a memory")));
  EXPECT_THAT([&] { runtime::run_train_job(layers); },
              ThrowsMessage<InvalidArgument>(HasSubstr("--decoder-layers 0")));
}

} // namespace
} // namespace tessera
