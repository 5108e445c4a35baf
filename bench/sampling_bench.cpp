// Neighbour sampling's hot paths, in one process: drawing a batch's blocks (sampled edges per
// second) and gathering its input rows (rows and bytes per second). The sampler is the slower
// half of a sampled step at 1M nodes over ranks (docs/guide/training.md): these are the numbers
// to move.
//
//   tessera-bench-sampling                  an SBM of TESSERA_BENCH_NODES nodes (default 1M),
//                                           128 features, average degree 16, 10 % training seeds

#include <benchmark/benchmark.h>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <tessera/core/device.hpp>
#include <tessera/datasets/dataset.hpp>
#include <tessera/gnn/sampling.hpp>
#include <vector>

namespace {

std::int64_t bench_nodes() {
  const char* env = std::getenv("TESSERA_BENCH_NODES");
  if (env == nullptr || *env == '\0') return 1'000'000;
  const long long nodes = std::atoll(env);
  if (nodes < 1000 || nodes > 100'000'000) {
    throw std::invalid_argument("TESSERA_BENCH_NODES must be an integer in [1000, 1e8], got '" +
                                std::string(env) + "'");
  }
  return nodes;
}

/// The graph, its features and the training seeds, made once.
struct Data {
  tessera::datasets::Dataset data;
  std::vector<tessera::GlobalId> train; // every 10th node
};

const Data& data() {
  static const Data d = [] {
    Data made{tessera::datasets::load_dataset(
                  tessera::make_cpu_backend(1),
                  "sbm:nodes=" + std::to_string(bench_nodes()) +
                      ",classes=16,avg-degree=16,p-in=0.3,features=128,noise=6",
                  {}),
              {}};
    for (tessera::GlobalId v = 0; v < made.data.num_nodes; v += 10)
      made.train.push_back(v);
    return made;
  }();
  return d;
}

/// A sampler over the whole graph with fanouts (range 1, range 2).
tessera::gnn::RankSampler make_sampler(const benchmark::State& state) {
  const Data& d = data();
  return tessera::gnn::RankSampler(
      tessera::gnn::RankGraph{&d.data.adjacency, {}, d.data.num_nodes, nullptr}, d.data.features,
      tessera::gnn::SamplerOptions{
          {static_cast<int>(state.range(1)), static_cast<int>(state.range(2))}, false, 1});
}

/// Batches of range(0) seeds in epoch 1's order.
std::vector<std::vector<tessera::GlobalId>> batches(const benchmark::State& state) {
  return tessera::gnn::seed_batches(data().train, state.range(0), 1, 1);
}

/// Drawing the blocks of one batch after another.
void BM_SampleBlocks(benchmark::State& state) {
  tessera::gnn::RankSampler sampler = make_sampler(state);
  const std::vector<std::vector<tessera::GlobalId>> seeds = batches(state);
  std::size_t k = 0;
  for (auto _ : state) {
    const tessera::gnn::SampledBatch batch = sampler.sample(seeds[k++ % seeds.size()], 1);
    benchmark::DoNotOptimize(batch.blocks.data());
  }
  const auto& stats = sampler.stats();
  state.counters["edges/s"] =
      benchmark::Counter(static_cast<double>(stats.sampled_edges), benchmark::Counter::kIsRate);
  state.counters["edges/batch"] =
      static_cast<double>(stats.sampled_edges) / static_cast<double>(stats.batches);
}
BENCHMARK(BM_SampleBlocks)
    ->ArgNames({"batch", "fanout1", "fanout2"})
    ->Args({1024, 15, 10})
    ->Args({512, 25, 10})
    ->Unit(benchmark::kMillisecond);

/// Gathering the input rows of sampled batches (sampled before the timing) into one reused
/// buffer, as a step's first layer reads them.
void BM_GatherFeatures(benchmark::State& state) {
  tessera::gnn::RankSampler sampler = make_sampler(state);
  const std::vector<std::vector<tessera::GlobalId>> seeds = batches(state);
  std::vector<tessera::gnn::SampledBatch> sampled;
  for (std::size_t k = 0; k < 8 && k < seeds.size(); ++k)
    sampled.push_back(sampler.sample(seeds[k], 1));
  std::vector<float> rows;
  std::size_t k = 0;
  double bytes = 0.0;
  for (auto _ : state) {
    const std::span<const tessera::GlobalId> nodes = sampled[k++ % sampled.size()].input_nodes();
    sampler.gather_features(nodes, rows);
    benchmark::DoNotOptimize(rows.data());
    bytes += static_cast<double>(rows.size() * sizeof(float));
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(sampler.stats().input_rows),
                                                benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GatherFeatures)
    ->ArgNames({"batch", "fanout1", "fanout2"})
    ->Args({1024, 15, 10})
    ->Args({512, 25, 10})
    ->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
