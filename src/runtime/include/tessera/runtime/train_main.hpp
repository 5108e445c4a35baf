// A whole training program in one call: what tessera-train is, for any model.
#pragma once

#include "tessera/gnn/model.hpp"

#include <string>

namespace tessera::runtime {

/// What a training program built on train_main is: its --help text, its model (empty builder:
/// the GCN of Kipf & Welling, with its flags --layers, --order and --decay-all-layers) and the
/// defaults of the settings every model reads (the flags --dropout, ... start from them).
struct TrainProgram {
  std::string description;
  gnn::ModelBuilder model_builder;
  std::string model_name = "GCN";
  gnn::ModelConfig model;
};

/// The main() of a training program. Under mpirun it starts MPI and trains across the ranks
/// (each holds one tile of the graph); otherwise it is a one-rank job without MPI. Parses the
/// standard flags (--help lists them: dataset, sizes, optimizer, epochs, seed, device, partition
/// store, --report, ...) into a TrainJob, trains, and prints progress and results on rank 0.
/// Any error is printed as "[rank r] error: ..." and ends the whole job. Returns the exit
/// status for main to return.
int train_main(int argc, char** argv, const TrainProgram& program);

/// The main() of tessera-mlp: a plain MLP classifier trained in shuffled mini-batches on a
/// dataset's node features (run_mlp_job), on the same start, flags and errors as train_main.
int mlp_main(int argc, char** argv);

/// The main() of tessera-predict: a checkpoint's model applied to a graph (run_predict_job),
/// the metrics printed and the per-node outputs written, on the same start, flags and errors.
int predict_main(int argc, char** argv);

} // namespace tessera::runtime
