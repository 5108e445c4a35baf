// Sampled training over ranks (issue 41): each rank's blocks are the ones one process samples
// for the same seeds — its own nodes drawn here, the others' by their owners —, input rows come
// from owners or the hot-feature cache with the values one process reads, a rank without seeds
// still answers the others, and a sampled job on P ranks learns and repeats itself exactly —
// sampled ahead on a thread of its own, over a duplicate of the job's communicator, as inline.
#include "mpi/mpi_test_main.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <gtest/gtest.h>
#include <string>
#include <tessera/tessera.hpp>
#include <thread>
#include <vector>

namespace tessera {
namespace {

using testing::world;

constexpr const char* kGraph = "sbm:nodes=600,classes=4,avg-degree=8,p-in=0.8,features=8,noise=1";

void expect_same_blocks(const gnn::SampledBatch& a, const gnn::SampledBatch& b) {
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (std::size_t i = 0; i < a.blocks.size(); ++i) {
    SCOPED_TRACE("block " + std::to_string(i));
    EXPECT_EQ(a.blocks[i].dst, b.blocks[i].dst);
    EXPECT_EQ(a.blocks[i].src, b.blocks[i].src);
    EXPECT_EQ(a.blocks[i].row_ptr, b.blocks[i].row_ptr);
    EXPECT_EQ(a.blocks[i].col, b.blocks[i].col);
  }
}

/// Node v's input row as one process reads it.
std::vector<float> row_of(const datasets::Dataset& data, GlobalId v) {
  const std::int64_t f = data.features.cols();
  std::vector<float> row(static_cast<std::size_t>(f), 0.0f);
  if (data.features.dense) {
    const float* from = data.features.dense->data() + v * f;
    std::copy(from, from + f, row.begin());
  } else {
    const Csr& s = *data.features.sparse;
    for (Offset k = s.row_ptr()[v]; k < s.row_ptr()[v + 1]; ++k)
      row[static_cast<std::size_t>(s.col()[k])] = s.val()[k];
  }
  return row;
}

/// This rank's tile of a METIS cut of `data`, and the global id of each of its rows.
struct Tile {
  partition::LocalGraph tile;
  std::vector<GlobalId> ids;
};

Tile tile_of(const datasets::Dataset& data) {
  partition::Options options;
  options.num_parts = world()->size();
  Tile t{partition::build_local_graph(data, partition::partition_graph(data.adjacency, options),
                                      world()->rank()),
         {}};
  t.ids = t.tile.owned_ids;
  t.ids.insert(t.ids.end(), t.tile.ghost_ids.begin(), t.tile.ghost_ids.end());
  return t;
}

TEST(SamplingOverRanks, BlocksAndInputRowsAreOneProcesssForTheSameSeeds) {
  const datasets::Dataset data = datasets::load_dataset(make_cpu_backend(1), kGraph, {});
  const Tile cut = tile_of(data);
  const partition::LocalGraph& tile = cut.tile;
  const std::vector<GlobalId>& ids = cut.ids;
  const gnn::RankGraph rows{&tile.adjacency, ids, data.num_nodes, world().get()};
  for (const bool replace : {false, true}) {
    for (const std::size_t cache : {std::size_t{0}, std::size_t{1} << 20}) {
      SCOPED_TRACE(std::string(replace ? "with" : "without") + " replacement, cache " +
                   std::to_string(cache));
      const gnn::SamplerOptions how{{4, 3}, replace, 7};
      gnn::RankSampler sampler(rows, tile.features, how, cache);
      if (world()->size() > 1 && cache > 0) {
        EXPECT_GT(sampler.cached_rows(), 0);
      }
      for (std::uint32_t epoch = 1; epoch <= 2; ++epoch) {
        // Rank 1 has no batch in epoch 2: it still answers the others.
        std::vector<GlobalId> seeds;
        if (!(epoch == 2 && world()->rank() == 1)) {
          for (std::size_t i = 0; i < tile.owned_ids.size() && seeds.size() < 25; i += 3)
            seeds.push_back(tile.owned_ids[i]);
        }
        const gnn::SampledBatch mine = sampler.sample(seeds, epoch);
        std::vector<float> inputs;
        sampler.gather_features(mine.input_nodes(), inputs);
        if (seeds.empty()) {
          EXPECT_EQ(mine.blocks.front().num_src(), 0);
          continue;
        }
        expect_same_blocks(gnn::sample_blocks(data.adjacency, seeds, how, epoch), mine);
        const auto f = static_cast<std::size_t>(data.features.cols());
        ASSERT_EQ(inputs.size(), mine.input_nodes().size() * f);
        for (std::size_t i = 0; i < mine.input_nodes().size(); ++i) {
          const std::vector<float> expected = row_of(data, mine.input_nodes()[i]);
          ASSERT_TRUE(std::equal(expected.begin(), expected.end(), inputs.begin() + i * f))
              << "input row of node " << mine.input_nodes()[i];
        }
      }
      const gnn::SamplingStats& stats = sampler.stats();
      if (world()->size() > 1) {
        EXPECT_GT(stats.remote_sampled, 0);
        EXPECT_GT(stats.sampled_for_others, 0);
        if (cache > 0) {
          EXPECT_GT(stats.cache_hits, 0);
        } else {
          EXPECT_EQ(stats.cache_hits, 0);
          EXPECT_GT(stats.fetched_rows, 0);
        }
      }
    }
  }
}

TEST(SamplingOverRanks, ASeedAnotherRankOwnsIsRefusedOnThatRank) {
  const datasets::Dataset data = datasets::load_dataset(make_cpu_backend(1), kGraph, {});
  if (world()->size() < 2) GTEST_SKIP() << "needs two ranks";
  const Tile cut = tile_of(data);
  const partition::LocalGraph& tile = cut.tile;
  const std::vector<GlobalId>& ids = cut.ids;
  gnn::RankSampler sampler(gnn::RankGraph{&tile.adjacency, ids, data.num_nodes, world().get()},
                           tile.features, gnn::SamplerOptions{{2, 2}, false, 1});
  // Only this rank's own check: the call throws before any exchange.
  GlobalId foreign = 0;
  while (std::find(tile.owned_ids.begin(), tile.owned_ids.end(), foreign) != tile.owned_ids.end())
    ++foreign;
  const std::vector<GlobalId> seeds{foreign};
  try {
    sampler.sample(seeds, 1);
    ADD_FAILURE() << "a seed of another rank was sampled";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("is owned by rank"), std::string::npos) << e.what();
  }
}

runtime::TrainJob sampled_job() {
  runtime::TrainJob job;
  job.dataset = kGraph;
  job.model_builder = gnn::builder_for(gnn::ModelKind::Sage);
  job.model_name = gnn::display_name(gnn::ModelKind::Sage);
  job.shape.hidden = 16;
  job.train.epochs = 8;
  job.train.eval_every = 4;
  job.threads = 1;
  job.sampled.enabled = true;
  job.sampled.fanouts = {5, 5};
  job.sampled.batch_size = 48 / world()->size(); // per rank: 48 seeds a step over the ranks
  job.sampled.cache_bytes = 4096;
  job.comm = world();
  return job;
}

TEST(ConcurrentDuplicate, CarriesItsOwnSumsWhileTheJobsCommunicatorCarriesOthers) {
  ASSERT_TRUE(comm::mpi_thread_multiple()) << "Debian's Open MPI gives MPI_THREAD_MULTIPLE";
  const std::shared_ptr<comm::Communicator> copy = world()->concurrent_duplicate();
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->rank(), world()->rank());
  EXPECT_EQ(copy->size(), world()->size());
  const double ranks = world()->size();
  std::vector<double> theirs(64), ours(64);
  std::thread other([&] {
    for (int round = 0; round < 50; ++round) {
      std::fill(theirs.begin(), theirs.end(), 1.0);
      copy->allreduce_sum(std::span<double>(theirs));
    }
  });
  for (int round = 0; round < 50; ++round) {
    std::fill(ours.begin(), ours.end(), 2.0);
    world()->allreduce_sum(std::span<double>(ours));
  }
  other.join();
  EXPECT_EQ(theirs, std::vector<double>(64, ranks));
  EXPECT_EQ(ours, std::vector<double>(64, 2.0 * ranks));
}

TEST(ConcurrentDuplicate, ACancelledWaitEndsAtOnceNamingTheCancel) {
  if (world()->size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::shared_ptr<comm::Communicator> copy = world()->concurrent_duplicate();
  ASSERT_NE(copy, nullptr);
  // Rank 0 waits for a message rank 1 sends only after the cancel: the abandoned receive lands
  // in memory that outlives it.
  static std::array<std::byte, 8> landing{};
  constexpr int kTag = 7399;
  if (world()->rank() == 0) {
    std::string error;
    std::thread waiting([&] {
      const std::vector<comm::RecvMessage> recvs{{1, landing}};
      try {
        copy->start_exchange({}, recvs, kTag)->wait();
      } catch (const PeerTimeout& e) {
        error = e.what();
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto start = std::chrono::steady_clock::now();
    copy->peer_watch().cancel();
    waiting.join();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    EXPECT_NE(error.find("were cancelled"), std::string::npos) << error;
    EXPECT_THROW(copy->barrier(), PeerTimeout) << "a cancelled communicator stays unusable";
  }
  world()->barrier();
  if (world()->rank() == 1) {
    const std::array<std::byte, 8> message{};
    const std::vector<comm::SendMessage> sends{{0, message}};
    copy->start_exchange(sends, {}, kTag)->wait();
  }
  world()->barrier();
}

TEST(SampledJobOverRanks, LearnsAndTheSameSeedGivesTheSameRun) {
  const gnn::TrainResult a = runtime::run_train_job(sampled_job()).result;
  const gnn::TrainResult b = runtime::run_train_job(sampled_job()).result;
  ASSERT_EQ(a.history.size(), b.history.size());
  for (std::size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].train_loss, b.history[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].steps, b.history[e].steps);
    EXPECT_GT(a.history[e].sampled_edges, 0);
  }
  EXPECT_EQ(a.final_test.accuracy, b.final_test.accuracy);
  // Other batches than one process draws (of the same global size), so not the same run: about
  // as accurate.
  runtime::TrainJob alone = sampled_job();
  alone.comm = nullptr;
  alone.sampled.batch_size = 48;
  const gnn::TrainResult one = runtime::run_train_job(alone).result;
  EXPECT_GT(a.final_test.accuracy, 0.8) << "a sampled GraphSAGE on a 4-block SBM";
  EXPECT_LE(a.final_test.accuracy, 1.0);
  EXPECT_NEAR(a.final_test.accuracy, one.final_test.accuracy, 0.05);
  EXPECT_NEAR(a.final_test.loss, one.final_test.loss, 0.25 * one.final_test.loss);
  // Every rank ran as many steps as the rank with the most training nodes has batches.
  std::vector<double> steps{static_cast<double>(a.history.front().steps)};
  steps = world()->allgather(steps[0]);
  EXPECT_EQ(*std::min_element(steps.begin(), steps.end()),
            *std::max_element(steps.begin(), steps.end()));
}

TEST(SampledJobOverRanks, EveryRankTakesTheSameStepsWithABatchInProportionToItsTrainingNodes) {
  // Parts weighted by speed (rank r at r + 1): a faster rank owns more training nodes, and it
  // takes more seeds a step rather than more steps.
  runtime::TrainJob job = sampled_job();
  job.balance = partition::Balance::Given;
  for (int r = 0; r < world()->size(); ++r)
    job.rank_speeds.push_back(r + 1.0);
  job.rebalance_threshold = 0;
  const gnn::TrainResult result = runtime::run_train_job(job).result;
  const gnn::EpochStats& first = result.history.front();
  const std::vector<double> seeds = world()->allgather(static_cast<double>(first.seeds));
  const std::vector<double> steps = world()->allgather(static_cast<double>(first.steps));
  const auto ranks = static_cast<std::int64_t>(seeds.size());
  double total = 0.0;
  for (const double s : seeds)
    total += s;
  // Each rank's batch: ceil(its training nodes · ranks · batch size / all of them).
  std::int64_t most = 0;
  for (std::int64_t r = 0; r < ranks; ++r) {
    const auto own = static_cast<std::int64_t>(seeds[static_cast<std::size_t>(r)]);
    const std::int64_t share =
        (own * ranks * job.sampled.batch_size + static_cast<std::int64_t>(total) - 1) /
        static_cast<std::int64_t>(total);
    most = std::max(most, (own + share - 1) / share);
    EXPECT_EQ(steps[static_cast<std::size_t>(r)], steps.front()) << "rank " << r;
  }
  EXPECT_EQ(first.steps, most) << "as many steps as the rank with the most batches has";
  if (ranks > 1) {
    EXPECT_GT(seeds.back(), 1.5 * seeds.front()) << "the fastest rank owns more training nodes";
    EXPECT_LE(static_cast<double>(first.steps),
              std::ceil(total / static_cast<double>(ranks * job.sampled.batch_size)) + 1)
        << "no rank runs steps on its own";
  }
  for (const gnn::EpochStats& e : result.history)
    EXPECT_EQ(e.seeds, first.seeds) << "every training node once an epoch";
}

TEST(SampledJobOverRanks, TheDefaultCacheTakesAsManyRemoteRowsAsTheRankOwnsAndChangesNoValue) {
  if (world()->size() < 2) GTEST_SKIP() << "needs two ranks";
  runtime::TrainJob none = sampled_job();
  none.sampled.cache_bytes = 0;
  runtime::TrainJob as_owned = sampled_job();
  as_owned.sampled.cache_bytes.reset(); // the default: the bytes of the rank's own rows
  const gnn::TrainResult a = runtime::run_train_job(none).result;
  const gnn::TrainResult b = runtime::run_train_job(as_owned).result;
  ASSERT_EQ(a.history.size(), b.history.size());
  std::int64_t fetched_without = 0, fetched_with = 0, hits = 0;
  for (std::size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].train_loss, b.history[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].cache_hits, 0);
    fetched_without += a.history[e].fetched_rows;
    fetched_with += b.history[e].fetched_rows;
    hits += b.history[e].cache_hits;
  }
  EXPECT_GT(hits, 0);
  EXPECT_LT(fetched_with, fetched_without / 2) << "most remote rows are cached";
  EXPECT_EQ(a.final_test.accuracy, b.final_test.accuracy);
}

TEST(SampledJobOverRanks, UnderAMemoryBudgetEvaluationRunsInChunksAndTheRunIsTheSame) {
  // The steps train in memory (a batch's blocks change every step); the full-graph model that
  // evaluates lives in chunks under each rank's budget, and evaluates as without one.
  const runtime::RunSummary free = runtime::run_train_job(sampled_job());
  runtime::TrainJob budgeted = sampled_job();
  budgeted.offload.chunk_bytes = std::size_t{4} << 10;
  budgeted.offload.device_bytes = std::size_t{32} << 10;
  const runtime::RunSummary run = runtime::run_train_job(budgeted);
  EXPECT_TRUE(run.offloaded);
  EXPECT_GT(run.offload_total.device_to_host_bytes, 0U) << "chunks left the device tier";
  EXPECT_LE(run.offload_total.peak_device_bytes, budgeted.offload.device_bytes);
  ASSERT_EQ(free.result.history.size(), run.result.history.size());
  for (std::size_t e = 0; e < run.result.history.size(); ++e) {
    EXPECT_EQ(free.result.history[e].train_loss, run.result.history[e].train_loss)
        << "epoch " << e + 1;
  }
  EXPECT_EQ(free.result.final_test.accuracy, run.result.final_test.accuracy);
  // The chunked layers sum in blocks of rows: the same to rounding.
  EXPECT_NEAR(free.result.final_test.loss, run.result.final_test.loss,
              1e-5 * free.result.final_test.loss);
}

TEST(SampledJobOverRanks, SamplingAheadOnAThreadIsTheInlineRunWhateverEachRankAsks) {
  runtime::TrainJob inline_job = sampled_job();
  inline_job.sampled.prefetch = 0;
  const gnn::TrainResult a = runtime::run_train_job(inline_job).result;
  runtime::TrainJob ahead = sampled_job();
  ahead.sampled.prefetch = 3;
  const gnn::TrainResult b = runtime::run_train_job(ahead).result;
  // Ranks that differ: the ones ahead sample on their thread, the others inline, all over the
  // same duplicate communicator.
  runtime::TrainJob mixed = sampled_job();
  mixed.sampled.prefetch = world()->rank() % 2 == 0 ? 1 : 0;
  const gnn::TrainResult c = runtime::run_train_job(mixed).result;
  ASSERT_EQ(a.history.size(), b.history.size());
  ASSERT_EQ(a.history.size(), c.history.size());
  for (std::size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].train_loss, b.history[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].train_loss, c.history[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].sampled_edges, b.history[e].sampled_edges);
    EXPECT_EQ(a.history[e].fetched_rows, b.history[e].fetched_rows);
  }
  EXPECT_EQ(a.final_test.accuracy, b.final_test.accuracy);
}

TEST(SampledJobOverRanks, AStopAfterAnEpochEndsEveryRanksSamplingThreadTogether) {
  // Rank 0 alone asks to stop after epoch 2 while every rank's thread samples up to 4 batches
  // ahead, some into epoch 3: every rank stops there, and the job's communicator goes on.
  runtime::TrainJob job = sampled_job();
  job.sampled.prefetch = 4;
  int epochs = 0;
  job.stop_requested = [&] { return ++epochs == 2 && world()->rank() == 0 ? 15 : 0; };
  try {
    runtime::run_train_job(job);
    ADD_FAILURE() << "training was not stopped";
  } catch (const gnn::TrainingStopped& e) {
    EXPECT_EQ(e.epoch(), 2);
  }
  const gnn::TrainResult after = runtime::run_train_job(sampled_job()).result;
  EXPECT_EQ(after.history.size(), 8U);
}

} // namespace
} // namespace tessera
