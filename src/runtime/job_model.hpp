// Step 2 of a training or inference job: the model on this rank's graph, and what it reads in
// the backend's memory (run_train_job and run_predict_job build it alike).
#pragma once

#include "job_graph.hpp"
#include "tessera/comm/communicator.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/cost_model.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/gnn/sampling.hpp"
#include "tessera/runtime/train_job.hpp"

#include <memory>
#include <vector>

namespace tessera::runtime {

/// --mode sampled: the model trained on mini-batch blocks and the sampler of its batches. The
/// job's full-graph model (JobModel::model, the same builder) is its twin: evaluation, outputs
/// and summaries read it, with the trained weights copied in.
struct SampledModel {
  /// Where the steps train: the job's backend itself, not the chunks (a batch's blocks change
  /// every step; under a memory budget the chunk engine holds the full-graph model, which
  /// evaluates).
  BackendPtr backend;
  Csr adjacency;             // this rank's rows of the graph, which the sampler draws from
  std::vector<GlobalId> ids; // [n_local] global id of each local row
  std::unique_ptr<gnn::ModelGraph> graph; // one graph per layer; the layers point into it
  Sequential<float> model;
  std::unique_ptr<gnn::RankSampler> sampler;
};

/// Step 2: the model on this rank's graph, and what training reads in the backend's memory.
struct JobModel {
  /// The chunks every tensor of the model lives in, under the job's budget (null without one).
  /// First, so it outlives every buffer in them.
  std::unique_ptr<ChunkManager> memory;
  /// Where the model's tensors are allocated: the manager's allocator, or the backend itself.
  BackendPtr model_backend;
  /// Where halos and gradients go: NCCL when every rank has a GPU, else the job's ranks.
  std::shared_ptr<comm::Communicator> device_comm;
  std::unique_ptr<gnn::ModelGraph> graph; // layers point into it: it stays where it is
  gnn::ModelSpec spec;
  Sequential<float> model;
  graph::Features device_features; // the layer-0 input in the backend's memory or the chunks
  bool on_host = true;             // training reads the host input (CPU, no budget)
  Buffer<GlobalId> row_ids;        // [n_local] global id of each local row (dropout masks)
  std::int64_t adjacency_nnz = 0;  // of this rank's rows of A
  std::unique_ptr<SampledModel> sampled; // --mode sampled
  double build_s = 0.0;
  /// Per GCN layer (the default model, distributed, without a budget): what the cost model
  /// predicted for its step under the exchange it runs with; empty otherwise.
  std::vector<gnn::LayerPrediction> predicted;

  /// The layer-0 input training reads, in the backend's memory.
  const graph::Features& input(const JobGraph& g) const {
    return on_host ? g.features : device_features;
  }
};

/// The width of the model's output: the classes, or link prediction's embedding width.
std::int64_t output_width(const TrainJob& job, const JobGraph& g);

/// The layer-0 input `f` as a model reads it.
Input<float> input_of(const graph::Features& f);

/// Builds job's model on this rank's graph `g` (moving its adjacency into the model's graph):
/// the chunks of a memory budget, the device communicator, the cost model's schedule of a
/// distributed GCN, the layers and the layer-0 input in the backend's memory. `say` logs (on rank
/// 0). Collective.
JobModel build_job_model(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                         const BackendPtr& backend, JobGraph& g, const Log& say);

} // namespace tessera::runtime
