// Link prediction over ranks: each rank's share of the edge split is the one-process split's
// pairs whose source it owns, its rows of the training graph lose exactly the held-out edges,
// and a link job on P ranks (in memory and from a partition store) trains as one process does on
// the same split and negatives, writing the same split file, and trains so again on that file;
// tessera-predict's pair scores on P ranks are one process's.
#include "mpi/mpi_test_main.hpp"
#include "mpi/same_training.hpp"
#include "mpi/shared_folder.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <set>
#include <string>
#include <tessera/datasets/numpy_files.hpp>
#include <tessera/gnn/link_prediction.hpp>
#include <tessera/tessera.hpp>
#include <utility>
#include <vector>

namespace tessera {
namespace {

using testing::SharedFolder;
using testing::world;

constexpr const char* kGraph = "sbm:nodes=500,classes=4,avg-degree=8,p-in=0.8,features=8,noise=1";

datasets::Dataset graph() {
  return datasets::load_dataset(make_cpu_backend(1), kGraph, {});
}

using PairList = std::vector<std::pair<GlobalId, GlobalId>>;

/// The pairs of `pairs` whose source `keep` accepts, sorted.
template <typename Keep> PairList sorted_pairs(const gnn::NodePairs& pairs, Keep keep) {
  PairList out;
  for (std::int64_t i = 0; i < pairs.size(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (keep(pairs.src[k])) out.emplace_back(pairs.src[k], pairs.dst[k]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(LinkSplitOverRanks, EachRankHoldsTheOneProcessSplitsPairsOfItsNodes) {
  const datasets::Dataset data = graph();
  const gnn::EdgeSplit one = gnn::split_edges(data.adjacency, 0.05, 0.10, 3);
  const Csr one_training = gnn::training_graph(make_cpu_backend(1), one, data.num_nodes);

  partition::Options options;
  options.num_parts = world()->size();
  const partition::LocalGraph tile = partition::build_local_graph(
      data, partition::partition_graph(data.adjacency, options), world()->rank());
  std::vector<GlobalId> ids = tile.owned_ids;
  ids.insert(ids.end(), tile.ghost_ids.begin(), tile.ghost_ids.end());
  Csr training;
  const gnn::EdgeSplit mine = gnn::split_edges(
      gnn::RankGraph{&tile.adjacency, ids, data.num_nodes, world().get()}, 0.05, 0.10, 3, training);

  const std::set<GlobalId> owned(tile.owned_ids.begin(), tile.owned_ids.end());
  const auto here = [&](GlobalId u) { return owned.count(u) == 1; };
  const auto all = [](GlobalId) { return true; };
  const std::pair<const gnn::NodePairs*, const gnn::NodePairs*> parts[] = {
      {&one.train, &mine.train},
      {&one.val, &mine.val},
      {&one.test, &mine.test},
      {&one.val_negative, &mine.val_negative},
      {&one.test_negative, &mine.test_negative}};
  for (const auto& [whole, share] : parts)
    EXPECT_EQ(sorted_pairs(*share, all), sorted_pairs(*whole, here));
  // The training graph's rows: the one-process rows of the same nodes, in global ids.
  ASSERT_EQ(training.rows(), tile.n_owned());
  for (std::int64_t r = 0; r < tile.n_owned(); ++r) {
    const GlobalId u = tile.owned_ids[static_cast<std::size_t>(r)];
    std::vector<GlobalId> got, want(one_training.col() + one_training.row_ptr()[u],
                                    one_training.col() + one_training.row_ptr()[u + 1]);
    for (Offset k = training.row_ptr()[r]; k < training.row_ptr()[r + 1]; ++k)
      got.push_back(ids[static_cast<std::size_t>(training.col()[k])]);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "row of node " << u;
  }
}

runtime::TrainJob link_job(const std::string& split_out) {
  runtime::TrainJob job;
  job.dataset = kGraph;
  job.task = runtime::Task::Link;
  job.threads = 1;
  job.shape.hidden = 16;
  job.link.embedding_width = 8;
  job.link.split_out = split_out;
  job.train.epochs = 6;
  job.train.eval_every = 2;
  return job;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(LinkJobOverRanks, TrainsAsOneProcessOnTheSameSplitAndNegatives) {
  const SharedFolder folder("link");
  const std::string mine = folder.file("split-" + std::to_string(world()->rank()) + ".npz");
  const gnn::TrainResult one = runtime::run_train_job(link_job(mine)).result;
  for (const std::string& model : {std::string("GCN"), std::string("GraphSAGE")}) {
    SCOPED_TRACE(model);
    runtime::TrainJob job = link_job(model == "GCN" ? folder.file("split-ranks.npz") : "");
    job.model_builder = gnn::builder_named(model).value();
    job.model_name = model;
    job.comm = world();
    runtime::TrainJob alone = link_job("");
    alone.model_builder = job.model_builder;
    alone.model_name = model;
    const gnn::TrainResult many = runtime::run_train_job(job).result;
    testing::expect_same_training(runtime::run_train_job(alone).result, many);
    ASSERT_TRUE(many.test_at_best_val.link.has_value());
    EXPECT_GT(*many.test_at_best_val.roc_auc, 0.5);
  }
  world()->barrier();
  EXPECT_EQ(bytes_of(folder.file("split-ranks.npz")), bytes_of(mine))
      << "the split file differs from the one-process run's";
  // The recorded split, read back by every rank: the same training again.
  runtime::TrainJob stored = link_job("");
  stored.link.split_in = mine;
  stored.comm = world();
  testing::expect_same_training(one, runtime::run_train_job(stored).result);
}

TEST(LinkJobOverRanks, AnMlpDecoderTrainsAsInOneProcess) {
  runtime::TrainJob alone = link_job("");
  alone.link.decoder = "mlp";
  runtime::TrainJob job = alone;
  job.comm = world();
  testing::expect_same_training(runtime::run_train_job(alone).result,
                                runtime::run_train_job(job).result);
}

TEST(LinkJobOverRanks, TrainsFromAPartitionStoreAsInMemory) {
  const SharedFolder folder("link-store");
  const std::string store = folder.file("store");
  if (world()->rank() == 0) {
    const datasets::Dataset data = graph();
    partition::Options options;
    options.num_parts = world()->size();
    const partition::Partition parts = partition::partition_graph(data.adjacency, options);
    partition::write_store(store, data, parts, options, partition::Reorder::None,
                           partition::measure(data.adjacency, parts));
  }
  world()->barrier();
  runtime::TrainJob from_store = link_job("");
  from_store.dataset.clear();
  from_store.partition_dir = store;
  from_store.comm = world();
  testing::expect_same_training(runtime::run_train_job(link_job("")).result,
                                runtime::run_train_job(from_store).result);
}

TEST(LinkJobOverRanks, APairListScoresOnRanksAsInOneProcess) {
  const SharedFolder folder("link-pairs");
  runtime::TrainJob train = link_job(folder.file("split.npz"));
  train.checkpoint_dir = folder.file("checkpoint");
  train.comm = world();
  runtime::run_train_job(train);
  if (world()->rank() == 0) {
    std::vector<std::int64_t> pairs;
    for (std::int64_t i = 0; i < 200; ++i) // sources, then destinations
      pairs.push_back((i * 37) % 500);
    for (std::int64_t i = 0; i < 200; ++i)
      pairs.push_back((i * 91 + 5) % 500);
    const datasets::NumpyArray array{"pairs", {2, 200}, std::span<const std::int64_t>(pairs)};
    datasets::write_npz(folder.file("pairs.npz"), std::span(&array, 1));
  }
  world()->barrier();
  runtime::PredictJob job;
  job.checkpoint_dir = folder.file("checkpoint");
  job.pairs = folder.file("pairs.npz");
  job.link_split_in = folder.file("split.npz");
  job.threads = 1;
  job.outputs.predictions = folder.file("ranks.npy");
  job.comm = world();
  EXPECT_EQ(runtime::run_predict_job(job).pairs, 200);
  job.comm = nullptr;
  job.outputs.predictions = folder.file("alone-" + std::to_string(world()->rank()) + ".npy");
  runtime::run_predict_job(job);
  world()->barrier();
  const std::string a = bytes_of(folder.file("ranks.npy")), b = bytes_of(job.outputs.predictions);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 200 * sizeof(float));
  const std::size_t header = a.size() - 200 * sizeof(float);
  for (std::size_t i = 0; i < 200; ++i) {
    float x = 0, y = 0;
    std::memcpy(&x, a.data() + header + i * sizeof(float), sizeof x);
    std::memcpy(&y, b.data() + header + i * sizeof(float), sizeof y);
    EXPECT_NEAR(x, y, 1e-6) << "pair " << i;
  }
}

} // namespace
} // namespace tessera
