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
Sequential<float> build_graphsage(gnn::ModelGraph& graph, const gnn::TrainJob& job) {
  const std::vector<std::int64_t> sizes =
      gnn::layer_sizes(graph.in_features(), job.hidden, job.num_layers, graph.num_classes());
  const Csr& mean = graph.matrix(gnn::AggregationKind::Mean);
  const Csr& mean_t = graph.transpose(gnn::AggregationKind::Mean);
  const BackendPtr& backend = graph.backend();
  Sequential<float> model;
  model.add(std::make_unique<Dropout<float>>(backend, job.model.dropout, 0));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    auto sage = std::make_unique<SageConv<float>>(backend, mean, mean_t, sizes[i], sizes[i + 1],
                                                  /*bias=*/true, job.train.seed, layer);
    sage->distribute(graph.halo(static_cast<int>(i)), graph.n_interior());
    model.add(std::move(sage));
    if (i + 2 < sizes.size()) {
      model.add(std::make_unique<ReluDropout<float>>(backend, job.model.dropout, layer + 1));
    }
  }
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  gnn::TrainProgram program;
  program.description = "Train GraphSAGE (mean aggregator, separate self and neighbour weights) "
                        "on one dataset; under mpirun -np P, across P ranks.";
  program.model_name = "GraphSAGE";
  program.model_builder = build_graphsage;
  return gnn::train_main(argc, argv, program);
}
