// tessera-mlp: train a plain MLP classifier in shuffled mini-batches on the node features of any
// Tessera dataset or on generated blobs of any width; under mpirun -np P, data-parallel.
#include <tessera/tessera.hpp>

int main(int argc, char** argv) { return tessera::runtime::mlp_main(argc, argv); }
