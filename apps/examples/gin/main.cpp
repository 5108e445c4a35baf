// GIN as its paper writes it (Xu et al.: each layer h = MLP((1 + ε)·x + A·x) with a two-layer
// MLP), a model the library's builders do not offer, built on Tessera's public API: trains on one
// process, or across the ranks of `mpirun -np P`. (The library's gnn::build_gin uses one Linear
// per layer.)
//   tessera-example-gin --dataset cora
//   mpirun -np 2 tessera-example-gin --dataset cora
#include <tessera/tessera.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace {

using namespace tessera;

/// Layer i: h = Linear_b(ReLU(Linear_a((1 + ε_i)·x + A·x))), ReLU+Dropout between layers,
/// dropout on the input. The first layer moves Linear_a before the aggregation — Linear(no bias)
/// then the aggregation with the bias, the same function — so it aggregates hidden-wide rows
/// instead of the (sparse, wide) input features; the others aggregate first.
Sequential<float> build_gin_mlp(gnn::ModelGraph& graph, const gnn::ModelSpec& spec) {
  const std::vector<std::int64_t>& sizes = spec.layer_sizes;
  const float dropout = spec.config.dropout;
  const Csr& sum = graph.matrix(gnn::AggregationKind::Sum);
  const Csr& sum_t = graph.transpose(gnn::AggregationKind::Sum);
  const BackendPtr& backend = graph.backend();
  Sequential<float> model;
  model.add(std::make_unique<Dropout<float>>(backend, dropout, 0));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    const bool first = i == 0;
    const std::int64_t hidden = sizes[i + 1];
    auto gin = std::make_unique<GinAggregate<float>>(backend, sum, sum_t, first ? hidden : sizes[i],
                                                     /*epsilon=*/0.0f, layer, /*bias=*/first);
    gin->distribute(graph.halo(static_cast<int>(i)), graph.n_interior());
    // The MLP's two Linear layers draw their weights from two random fields per layer.
    auto linear_a = std::make_unique<Linear<float>>(backend, sizes[i], hidden, /*bias=*/!first,
                                                    spec.seed, 2 * layer);
    if (first) {
      model.add(std::move(linear_a));
      model.add(std::move(gin));
    } else {
      model.add(std::move(gin));
      model.add(std::move(linear_a));
    }
    model.add(std::make_unique<Relu<float>>(backend));
    model.add(
        std::make_unique<Linear<float>>(backend, hidden, hidden, true, spec.seed, 2 * layer + 1));
    if (i + 2 < sizes.size()) {
      model.add(std::make_unique<ReluDropout<float>>(backend, dropout, layer + 1));
    }
  }
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::TrainProgram program;
  program.description = "Train GIN with two-layer MLPs (sum aggregation, learnable epsilon) on "
                        "one dataset; under mpirun -np P, across P ranks.";
  program.model_name = "GIN-MLP";
  program.model_builder = build_gin_mlp;
  program.model.decay_first_layer_only = false;  // weight decay on every weight
  return runtime::train_main(argc, argv, program);
}
