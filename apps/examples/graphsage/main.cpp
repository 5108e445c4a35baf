// GraphSAGE (Hamilton et al., mean aggregator) built on Tessera's public API: trains on one
// process, or across the ranks of `mpirun -np P` with each rank holding one tile of the graph.
//   tessera-example-graphsage --dataset cora
//   mpirun -np 2 tessera-example-graphsage --dataset cora
#include <tessera/tessera.hpp>

int main(int argc, char** argv) {
  tessera::runtime::TrainProgram program;
  program.description = "Train GraphSAGE (mean aggregator, separate self and neighbour weights) "
                        "on one dataset; under mpirun -np P, across P ranks.";
  program.model_name = "GraphSAGE";
  program.model_builder = tessera::gnn::build_graphsage;
  program.model.decay_first_layer_only = false;  // weight decay on every weight
  return tessera::runtime::train_main(argc, argv, program);
}
