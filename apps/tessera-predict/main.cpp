// tessera-predict: apply a trained model (a tessera-train checkpoint) to a graph, in one process
// or across the ranks of mpirun, and write each node's predictions and embeddings.
#include <tessera/tessera.hpp>

int main(int argc, char** argv) {
  return tessera::runtime::predict_main(argc, argv);
}
