// Link prediction's edge split in a job (run_train_job and run_predict_job): drawn over the
// ranks or read from a stored split, the message-passing graph cut down to its training edges,
// and the split written for other tools.
#pragma once

#include "job_graph.hpp"
#include "tessera/comm/communicator.hpp"
#include "tessera/gnn/link_prediction.hpp"
#include "tessera/runtime/train_job.hpp"

#include <memory>
#include <string>
#include <vector>

namespace tessera::runtime {

/// Link prediction on this rank: its share of the split and its rows of the training graph, the
/// global ids the pairs use.
struct LinkData {
  gnn::EdgeSplit split;
  Csr training;              ///< the training graph's owned rows (the model gets a copy)
  std::vector<GlobalId> ids; ///< [n_local] global id of each local row
};

/// Link prediction's split of the job's graph: drawn by job.train.seed over the ranks, or read
/// from job.link.split_in; the held-out edges (everything but the training pairs) taken out of
/// the tile's adjacency and its degrees (the ghost rows' from their owners). Collective.
LinkData split_job_edges(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                         JobGraph& g, const BackendPtr& host, const Log& say);

/// The pair decoder `link` asks for on `backend` (weights drawn from `seed`): an MLP decoder, or
/// nullptr for the dot product. Throws InvalidArgument naming the flag for an unknown decoder
/// or a shape out of range.
std::unique_ptr<gnn::MlpDecoder> make_link_decoder(const LinkOptions& link,
                                                   const BackendPtr& backend, std::uint64_t seed);

/// Refuses a decoder make_link_decoder cannot make, naming the flag.
void check_link_decoder(const LinkOptions& link);

/// `model`'s parameters, then the decoder's (when there is one): what a link model's optimizer
/// steps and its checkpoints and exported weights hold.
std::vector<Parameter<float>*> link_model_parameters(Sequential<float>& model,
                                                     gnn::MlpDecoder* decoder);

/// Writes `split` (every rank's share) to `path` as LinkOptions::split_out describes: rank 0
/// writes every part with its pairs in (u, v) order, the same file whatever the rank count.
/// Collective.
void write_link_split(const std::string& path, comm::Communicator& comm,
                      const gnn::EdgeSplit& split);

} // namespace tessera::runtime
