// Per-node outputs of a trained model (NodeOutputs: --predictions, --embeddings): computed on
// every rank in an evaluation step, gathered on rank 0 in node order, written as numpy reads them.
#pragma once

#include "job_graph.hpp"
#include "job_model.hpp"
#include "tessera/runtime/checkpoint.hpp"
#include "tessera/runtime/train_job.hpp"

#include <string>

namespace tessera::runtime {

/// Refuses outputs that could not be written, before any work: a path that ends in neither .npy
/// nor .npz (naming `flags`' flag), the same file for both, and (on rank 0) a path
/// io::check_output_file refuses. Throws InvalidArgument or IoError.
void check_node_outputs(const NodeOutputs& outputs, int rank);

/// Refuses an embedding layer the model does not mark (the same on every rank), naming the
/// layers it has. Call once the model is built, before training.
void check_embedding_layer(const NodeOutputs& outputs, const JobModel& m);

/// Computes `outputs` with the model's current weights on every rank, gathers the rows on rank 0
/// and writes them there. Collective over `comm`. `say` logs on rank 0 what was written.
void write_node_outputs(const NodeOutputs& outputs, comm::Communicator& comm, const JobGraph& g,
                        JobModel& m, const Log& say);

/// Writes outputs.weights (when set) from the current values of `parameters` (a model's, and a
/// link decoder's after them), on rank 0 (weights are replicated), with `run` (the run's
/// checkpoint record) beside them. Collective over `comm` (a failure on rank 0 ends every rank
/// with its message).
void write_model_weights(const NodeOutputs& outputs, const CheckpointRun& run,
                         comm::Communicator& comm, const std::vector<Parameter<float>*>& parameters,
                         const Log& say);

} // namespace tessera::runtime
