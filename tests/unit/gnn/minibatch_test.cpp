// Sampled mini-batch training (issue 41): with every neighbour and one batch of all training
// nodes it is full-graph training, step for step; the same seed gives the same run; with
// fanouts it learns a generated graph as full-graph training does; what cannot work is refused.
#include "tessera/gnn/minibatch.hpp"
#include "tessera/tessera.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::gnn {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr const char* kSbm = "sbm:nodes=1500,classes=4,avg-degree=8,p-in=0.6,features=16,noise=2";

datasets::Dataset data() {
  return datasets::load_dataset(make_cpu_backend(1), kSbm, {"", 0, 3});
}

ModelSpec sage_spec(const datasets::Dataset& d, float dropout) {
  ModelSpec spec;
  spec.layer_sizes = {d.features.cols(), 16, d.num_classes};
  spec.config.dropout = dropout;
  spec.seed = 5;
  return spec;
}

NodeLabels labels_of(const datasets::Dataset& d) {
  return {d.labels, d.train_idx, d.val_idx, d.test_idx};
}

TrainConfig config(int epochs) {
  TrainConfig c;
  c.epochs = epochs;
  c.adam.lr = 0.01f;
  c.seed = 2;
  return c;
}

/// Sampled training of a 2-layer model (GraphSAGE unless `kind` says) on `d`.
TrainResult sampled(const datasets::Dataset& d, const MiniBatchConfig& batches, int epochs,
                    float dropout, ModelKind kind = ModelKind::Sage,
                    const NodeLabels* labels = nullptr) {
  const BackendPtr cpu = make_cpu_backend(1);
  auto graph = ModelGraph::blocks(cpu, 2, d.features.cols(), d.num_classes);
  Sequential<float> model = builder_for(kind)(*graph, sage_spec(d, dropout));
  return train_sampled_node_classifier(cpu, model, *graph, d.adjacency, d.features,
                                       labels != nullptr ? *labels : labels_of(d), config(epochs),
                                       batches);
}

TrainResult full(const datasets::Dataset& d, int epochs, float dropout,
                 ModelKind kind = ModelKind::Sage, const NodeLabels* labels = nullptr) {
  const BackendPtr cpu = make_cpu_backend(1);
  ModelGraph graph(cpu, to_backend(d.adjacency, d.adjacency.backend()), d.features.cols(),
                   d.num_classes);
  Sequential<float> model = builder_for(kind)(graph, sage_spec(d, dropout));
  const Input<float> x = d.features.dense ? Input<float>(d.features.dense->cview())
                                          : Input<float>(d.features.sparse->view());
  return train_node_classifier(cpu, model, x, labels != nullptr ? *labels : labels_of(d),
                               config(epochs));
}

TEST(MiniBatch, EveryNeighbourInOneBatchIsFullGraphTrainingStepForStep) {
  const datasets::Dataset d = data();
  const auto train = static_cast<std::int64_t>(d.train_idx.size());
  const TrainResult a = full(d, 8, 0.0f);
  const TrainResult b = sampled(d, {{-1, -1}, false, train}, 8, 0.0f);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (std::size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_NEAR(b.history[e].train_loss, a.history[e].train_loss, 1e-5 * a.history[e].train_loss)
        << "epoch " << e + 1;
    EXPECT_EQ(b.history[e].steps, 1);
  }
  EXPECT_NEAR(b.final_test.accuracy, a.final_test.accuracy, 1e-9);
}

TEST(MiniBatch, GcnAndGinOnBlocksOfEveryNodeAndNeighbourAreFullGraphTraining) {
  // GCN's block normalisation counts degrees within the block (DGL's GraphConv on blocks): with
  // every node a seed and every neighbour sampled, each block is the whole graph.
  const datasets::Dataset d = data();
  std::vector<std::int32_t> every(static_cast<std::size_t>(d.num_nodes));
  for (std::size_t v = 0; v < every.size(); ++v)
    every[v] = static_cast<std::int32_t>(v);
  const NodeLabels all{d.labels, every, d.val_idx, d.test_idx};
  for (const ModelKind kind : {ModelKind::Gcn, ModelKind::Gin, ModelKind::Sage}) {
    SCOPED_TRACE(display_name(kind));
    const TrainResult a = full(d, 5, 0.0f, kind, &all);
    const TrainResult b = sampled(d, {{-1, -1}, false, d.num_nodes}, 5, 0.0f, kind, &all);
    ASSERT_EQ(a.history.size(), b.history.size());
    for (std::size_t e = 0; e < a.history.size(); ++e) {
      EXPECT_NEAR(b.history[e].train_loss, a.history[e].train_loss, 1e-5 * a.history[e].train_loss)
          << "epoch " << e + 1;
    }
    EXPECT_NEAR(b.final_test.accuracy, a.final_test.accuracy, 1e-9);
  }
}

TEST(MiniBatch, TheSameSeedGivesTheSameRunAndFanoutsLearnAsTheFullGraphDoes) {
  const datasets::Dataset d = data();
  const MiniBatchConfig batches{{10, 5}, false, 64};
  const TrainResult a = sampled(d, batches, 30, 0.2f);
  MiniBatchConfig inline_batches = batches; // each step samples its own batch: the same batches
  inline_batches.prefetch = 0;
  const TrainResult b = sampled(d, inline_batches, 30, 0.2f);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (std::size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].train_loss, b.history[e].train_loss);
    EXPECT_EQ(a.history[e].sampled_edges, b.history[e].sampled_edges);
    EXPECT_GT(a.history[e].sampled_edges, 0);
  }
  EXPECT_GT(a.history.front().steps, 1) << "several batches an epoch";
  const TrainResult whole = full(d, 30, 0.2f);
  EXPECT_GT(a.final_test.accuracy, whole.final_test.accuracy - 0.05)
      << "sampled " << a.final_test.accuracy << ", full graph " << whole.final_test.accuracy;
}

TEST(MiniBatch, FanoutsThatDoNotFitTheModelAndEmptyBatchesAreRefused) {
  const datasets::Dataset d = data();
  EXPECT_THAT(
      [&] {
        sampled(d, {{10}, false, 64}, 1, 0.0f);
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("1 fanouts for a model of 2 graph layers")));
  EXPECT_THAT(
      [&] {
        sampled(d, {{10, 0}, false, 64}, 1, 0.0f);
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("fanout 0 of hop 2")));
  EXPECT_THAT(
      [&] {
        sampled(d, {{10, 5}, false, 0}, 1, 0.0f);
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("batch size must be >= 1")));
}

} // namespace
} // namespace tessera::gnn
