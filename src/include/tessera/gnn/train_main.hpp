// A whole training program in one call: what tessera-train is, for any model.
#pragma once

#include <string>

#include "tessera/gnn/train_job.hpp"

namespace tessera::gnn {

/// What a training program built on train_main is: its --help text and, for a custom model,
/// the model's name and builder.
struct TrainProgram {
  std::string description;
  /// Empty: the GCN of Kipf & Welling, with its flags (--layers, --order, --decay-all-layers).
  ModelBuilder model_builder;
  std::string model_name = "GCN";
};

/// The main() of a training program. Under mpirun it starts MPI and trains across the ranks
/// (each holds one tile of the graph); otherwise it is a one-rank job without MPI. Parses the
/// standard flags (--help lists them: dataset, sizes, optimizer, epochs, seed, device, partition
/// store, --report, ...) into a TrainJob, trains, and prints progress and results on rank 0.
/// Any error is printed as "[rank r] error: ..." and ends the whole job. Returns the exit
/// status for main to return.
int train_main(int argc, char** argv, const TrainProgram& program);

}  // namespace tessera::gnn
