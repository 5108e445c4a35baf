// GraphSAGE (Hamilton et al., mean aggregator) built on Tessera's public API: trains on one
// process, or across the ranks of `mpirun -np P` with each rank holding one tile of the graph.
//   tessera-example-graphsage --dataset cora
//   mpirun -np 2 tessera-example-graphsage --dataset cora
#include <tessera/tessera.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace {

using namespace tessera;

/// Dropout → SAGEConv → ReLU+Dropout → ... → SAGEConv, sizes in → hidden... → classes. Every
/// SAGE layer reads the mean-aggregation matrix D⁻¹A of this process's graph (or rank's tile)
/// and, distributed, exchanges its ghost rows through the halo the graph hands it.
Sequential<float> build_graphsage(gnn::ModelGraph& graph, const gnn::ModelSpec& spec) {
  const std::vector<std::int64_t>& sizes = spec.layer_sizes;
  const float dropout = spec.config.dropout;
  const Csr& mean = graph.matrix(gnn::AggregationKind::Mean);
  const Csr& mean_t = graph.transpose(gnn::AggregationKind::Mean);
  const BackendPtr& backend = graph.backend();
  Sequential<float> model;
  model.add(std::make_unique<Dropout<float>>(backend, dropout, 0));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    auto sage = std::make_unique<SageConv<float>>(backend, mean, mean_t, sizes[i], sizes[i + 1],
                                                  spec.config.bias, spec.seed, layer,
                                                  spec.config.order);
    sage->distribute(graph.halo(static_cast<int>(i)), graph.n_interior());
    model.add(std::move(sage));
    if (i + 2 < sizes.size()) {
      model.add(std::make_unique<ReluDropout<float>>(backend, dropout, layer + 1));
    }
  }
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::TrainProgram program;
  program.description = "Train GraphSAGE (mean aggregator, separate self and neighbour weights) "
                        "on one dataset; under mpirun -np P, across P ranks.";
  program.model_name = "GraphSAGE";
  program.model_builder = build_graphsage;
  program.model.decay_first_layer_only = false;  // weight decay on every weight
  return runtime::train_main(argc, argv, program);
}
