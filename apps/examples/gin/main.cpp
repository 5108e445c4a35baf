// GIN (Xu et al.: sum aggregation with a learnable ε, then an MLP) built on Tessera's public
// API: trains on one process, or across the ranks of `mpirun -np P`.
//   tessera-example-gin --dataset cora
//   mpirun -np 2 tessera-example-gin --dataset cora
#include <tessera/tessera.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace {

using namespace tessera;

/// Layer i: h = Linear_i((1 + ε_i)·x + A·x), ReLU+Dropout between layers, dropout on the input.
/// The first layer moves its Linear before the aggregation — Linear(no bias) then GIN with the
/// bias, the same function — so it aggregates hidden-wide rows instead of the (sparse, wide)
/// input features; the others aggregate first, as GIN is written.
Sequential<float> build_gin(gnn::ModelGraph& graph, const gnn::ModelSpec& spec) {
  const std::vector<std::int64_t>& sizes = spec.layer_sizes;
  const float dropout = spec.config.dropout;
  const Csr& sum = graph.matrix(gnn::AggregationKind::Sum);
  const Csr& sum_t = graph.transpose(gnn::AggregationKind::Sum);
  const BackendPtr& backend = graph.backend();
  const std::uint64_t seed = spec.seed;
  Sequential<float> model;
  model.add(std::make_unique<Dropout<float>>(backend, dropout, 0));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    const bool first = i == 0;
    const std::int64_t width = first ? sizes[1] : sizes[i];  // of the aggregated rows
    auto gin = std::make_unique<GinAggregate<float>>(backend, sum, sum_t, width, /*epsilon=*/0.0f,
                                                     layer, /*bias=*/first);
    gin->distribute(graph.halo(static_cast<int>(i)), graph.n_interior());
    auto linear = std::make_unique<Linear<float>>(backend, sizes[i], sizes[i + 1],
                                                  /*bias=*/!first, seed, layer);
    if (first) {
      model.add(std::move(linear));
      model.add(std::move(gin));
    } else {
      model.add(std::move(gin));
      model.add(std::move(linear));
    }
    if (i + 2 < sizes.size()) {
      model.add(std::make_unique<ReluDropout<float>>(backend, dropout, layer + 1));
    }
  }
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::TrainProgram program;
  program.description = "Train GIN (sum aggregation, learnable epsilon, a Linear per layer) on "
                        "one dataset; under mpirun -np P, across P ranks.";
  program.model_name = "GIN";
  program.model_builder = build_gin;
  program.model.decay_first_layer_only = false;  // weight decay on every weight
  return runtime::train_main(argc, argv, program);
}
