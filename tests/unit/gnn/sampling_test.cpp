// Neighbour sampling (issue 41): blocks in the layout the layers read (destinations first),
// fanouts honoured without replacement, every sampled edge an edge of the graph, the same
// draws for the same seed, and seed batches that cover the training nodes once per epoch.
#include "tessera/tessera.hpp"
#include "test_models.hpp"

#include <algorithm>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <set>

namespace tessera::gnn {
namespace {

using tessera::testing::random_graph;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::int64_t degree(const Csr& a, GlobalId u) {
  return a.row_ptr()[u + 1] - a.row_ptr()[u];
}

bool has_edge(const Csr& a, GlobalId u, GlobalId v) {
  return std::binary_search(a.col() + a.row_ptr()[u], a.col() + a.row_ptr()[u + 1], v);
}

TEST(Sampling, BlocksPutTheDestinationsFirstAndSampleEdgesOfTheGraphUpToTheFanout) {
  const Csr a = random_graph(400, 12, 1);
  const std::vector<GlobalId> seeds = {5, 17, 3, 200, 399};
  const SampledBatch batch = sample_blocks(a, seeds, {{4, 3}, false, 7}, 0);

  ASSERT_EQ(batch.blocks.size(), 2u);
  EXPECT_EQ(std::vector<GlobalId>(batch.seeds().begin(), batch.seeds().end()), seeds);
  const Block& last = batch.blocks[1];  // the seeds' hop, fanout 4
  const Block& first = batch.blocks[0]; // the next hop, fanout 3
  EXPECT_EQ(first.dst, last.num_src()) << "the first layer computes what the last one reads";
  EXPECT_EQ(std::vector<GlobalId>(first.src.begin(), first.src.begin() + first.dst), last.src);
  for (const auto& [block, fanout] : {std::pair{&last, 4}, std::pair{&first, 3}}) {
    ASSERT_EQ(block->row_ptr.size(), static_cast<std::size_t>(block->dst) + 1);
    EXPECT_EQ(std::set<GlobalId>(block->src.begin(), block->src.end()).size(), block->src.size())
        << "each source once";
    for (std::int64_t r = 0; r < block->dst; ++r) {
      const GlobalId u = block->src[static_cast<std::size_t>(r)];
      const auto begin = block->row_ptr[static_cast<std::size_t>(r)];
      const auto end = block->row_ptr[static_cast<std::size_t>(r) + 1];
      EXPECT_EQ(end - begin, std::min<std::int64_t>(fanout, degree(a, u) - has_edge(a, u, u)));
      std::set<GlobalId> drawn;
      for (auto k = begin; k < end; ++k) {
        const GlobalId v =
            block->src[static_cast<std::size_t>(block->col[static_cast<std::size_t>(k)])];
        EXPECT_TRUE(has_edge(a, u, v)) << u << " - " << v << " is no edge";
        EXPECT_NE(u, v);
        drawn.insert(v);
      }
      EXPECT_EQ(drawn.size(), static_cast<std::size_t>(end - begin)) << "without replacement";
    }
  }
}

TEST(Sampling, TheSameSeedDrawsTheSameBlocksAndAllTakesEveryNeighbour) {
  const Csr a = random_graph(300, 10, 2);
  const std::vector<GlobalId> seeds = {1, 2, 3};
  const auto cols = [](const SampledBatch& b) { return b.blocks.front().src; };
  EXPECT_EQ(cols(sample_blocks(a, seeds, {{3, 2}, false, 4}, 1)),
            cols(sample_blocks(a, seeds, {{3, 2}, false, 4}, 1)));
  EXPECT_NE(cols(sample_blocks(a, seeds, {{3, 2}, false, 4}, 1)),
            cols(sample_blocks(a, seeds, {{3, 2}, false, 4}, 2)))
      << "another epoch draws again";
  const SampledBatch all = sample_blocks(a, seeds, {{-1}, false, 4}, 0);
  std::int64_t edges = 0;
  for (const GlobalId s : seeds)
    edges += degree(a, s) - has_edge(a, s, s);
  EXPECT_EQ(all.blocks[0].edges(), edges);
  const SampledBatch replaced = sample_blocks(a, seeds, {{50}, true, 4}, 0);
  EXPECT_EQ(replaced.blocks[0].edges(), 150) << "with replacement: the fanout whatever the degree";
}

TEST(Sampling, SeedBatchesCoverTheTrainingNodesOncePerEpochInAnOrderOfTheSeed) {
  std::vector<GlobalId> train(1000);
  for (std::size_t i = 0; i < train.size(); ++i)
    train[i] = static_cast<GlobalId>(3 * i);
  const auto batches = seed_batches(train, 128, 9, 1);
  ASSERT_EQ(batches.size(), 8u);
  EXPECT_EQ(batches.back().size(), 1000u - 7 * 128);
  std::vector<GlobalId> all;
  for (const auto& b : batches)
    all.insert(all.end(), b.begin(), b.end());
  EXPECT_NE(all, train) << "shuffled";
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, train);
  EXPECT_EQ(seed_batches(train, 128, 9, 1), batches);
  EXPECT_NE(seed_batches(train, 128, 9, 2), batches);
}

TEST(Sampling, FanoutsAndBatchSizesThatCannotWorkAreRefused) {
  const Csr a = random_graph(50, 4, 3);
  const std::vector<GlobalId> seeds = {1};
  EXPECT_THAT(
      [&] {
        sample_blocks(a, seeds, {{5, 0}, false, 0}, 0);
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("fanout 0 of hop 2")));
  EXPECT_THAT(
      [&] {
        sample_blocks(a, seeds, {{-2}, false, 0}, 0);
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("fanout -2")));
  EXPECT_THAT(
      [&] {
        sample_blocks(a, seeds, {{}, false, 0}, 0);
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("a fanout per layer")));
  const std::vector<GlobalId> outside = {50};
  EXPECT_THAT(
      [&] {
        sample_blocks(a, outside, {{2}, false, 0}, 0);
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("seed 50 is not a node")));
  const std::vector<int> three = {2, 2, 2};
  EXPECT_THAT([&] { check_fanouts(three, 2); },
              ThrowsMessage<InvalidArgument>(HasSubstr("3 fanouts for a model of 2 graph layers")));
  EXPECT_THAT([&] { seed_batches(seeds, 0, 0, 0); },
              ThrowsMessage<InvalidArgument>(HasSubstr("batch size must be >= 1")));
}

TEST(Sampling, ARankSamplerInOneProcessDrawsAsSampleBlocksAfterARefusedBatch) {
  const Csr a = random_graph(200, 8, 4);
  graph::Features features;
  features.dense = Dense(a.backend(), 200, 3);
  for (std::int64_t i = 0; i < 600; ++i)
    features.dense->data()[i] = static_cast<float>(i);
  const SamplerOptions how{{3, 2}, false, 9};
  RankSampler sampler(RankGraph{&a, {}, 200, nullptr}, features, how);
  const std::vector<GlobalId> repeated = {4, 7, 9, 4};
  EXPECT_THAT([&] { sampler.sample(repeated, 1); },
              ThrowsMessage<InvalidArgument>(HasSubstr("seed 4 appears twice")));
  // The refused batch left no trace: the next one is sample_blocks's.
  const std::vector<GlobalId> seeds = {7, 9, 4, 150};
  const SampledBatch mine = sampler.sample(seeds, 1);
  const SampledBatch expected = sample_blocks(a, seeds, how, 1);
  ASSERT_EQ(mine.blocks.size(), expected.blocks.size());
  for (std::size_t i = 0; i < mine.blocks.size(); ++i) {
    EXPECT_EQ(mine.blocks[i].src, expected.blocks[i].src);
    EXPECT_EQ(mine.blocks[i].col, expected.blocks[i].col);
  }
  std::vector<float> inputs;
  sampler.gather_features(mine.input_nodes(), inputs);
  for (std::size_t i = 0; i < mine.input_nodes().size(); ++i)
    EXPECT_EQ(inputs[3 * i + 2], static_cast<float>(3 * mine.input_nodes()[i] + 2));
  std::vector<float> too_small(2);
  EXPECT_THROW(sampler.gather_features(mine.input_nodes(), std::span<float>(too_small)),
               DimensionMismatch);
}

} // namespace
} // namespace tessera::gnn
