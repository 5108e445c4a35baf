// tessera-train: train a GCN on one dataset, in one process or across the ranks of mpirun, and
// report accuracy, timings, communication and memory.
#include <tessera/tessera.hpp>

int main(int argc, char** argv) {
  tessera::runtime::TrainProgram program;
  program.description = "Train a graph neural network (a GCN unless --model says sage, gin or "
                        "gat) on one dataset; under mpirun -np P, across P ranks that each hold "
                        "one tile of the graph.";
  return tessera::runtime::train_main(argc, argv, program);
}
