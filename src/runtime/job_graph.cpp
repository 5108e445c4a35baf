// Step 1 of a training job: load or receive this rank's tile, order it, plan its halo and
// fetch the ghost input rows once.
#include "job_graph.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/ops/ops.hpp"
#include "tessera/partition/store.hpp"

#include <fmt/core.h>

namespace tessera::runtime {

namespace {

constexpr int kTileTag = 7200;
constexpr int kFeatureTag = 7300;

/// Refuses data without features or class labels, naming the dataset: whole (in memory) or a
/// store's part (every part of a store has the dataset's feature width and class count).
void check_trainable(const std::string& dataset, const graph::Features& features,
                     std::int32_t num_classes) {
  if (features.cols() == 0) {
    throw InvalidArgument("dataset '" + dataset +
                          "' has no node features; it can be partitioned but not trained on");
  }
  if (num_classes < 2) {
    throw InvalidArgument("dataset '" + dataset + "' has no class labels to train on");
  }
}

std::string describe(const datasets::Dataset& d, double seconds) {
  return fmt::format("dataset {}: {} nodes, {} edges, {} features ({}), {} classes, split "
                     "{}/{}/{} ({:.2f} s)",
                     d.name, d.num_nodes, d.adjacency.nnz() / 2, d.features.cols(),
                     d.features.is_sparse() ? "sparse" : "dense", d.num_classes, d.train_idx.size(),
                     d.val_idx.size(), d.test_idx.size(), seconds);
}

/// Rank 0 loads the whole graph and, for several ranks, partitions it and sends every other rank
/// its tile; the others receive theirs. Only rank 0 ever holds the whole graph.
partition::LocalGraph tile_in_memory(const TrainJob& job, comm::Communicator& comm,
                                     const BackendPtr& host, std::string& dataset_name,
                                     const Log& say) {
  std::vector<std::byte> name;
  partition::LocalGraph own;
  if (comm.rank() == 0) {
    const Stopwatch clock;
    datasets::Dataset data = datasets::load_dataset(host, job.dataset, job.load);
    check_trainable(data.name, data.features, data.has_labels() ? data.num_classes : 0);
    if (!data.has_split()) {
      datasets::make_random_split(data, 0.6, 0.2, job.train.seed);
      say("no published split: using a random 60/20/20 split");
    }
    say(describe(data, clock.seconds()));
    const auto* text = reinterpret_cast<const std::byte*>(data.name.data());
    name.assign(text, text + data.name.size());
    if (comm.size() == 1) {
      own = partition::whole_graph_tile(std::move(data));
    } else {
      partition::Options options = job.partition;
      options.num_parts = comm.size();
      options.feature_width = data.features.cols();
      const Stopwatch cut;
      const partition::Partition parts = partition::partition_graph(data.adjacency, options);
      const partition::Quality quality = partition::measure(data.adjacency, parts);
      say(fmt::format("partitioned {} into {} tiles with {} in {:.2f} s: halo volume {} rows "
                      "per exchange ({:.3f} of a 1D broadcast)",
                      data.name, comm.size(), partition::to_string(options.method), cut.seconds(),
                      quality.total_volume,
                      quality.broadcast_volume == 0
                          ? 0.0
                          : static_cast<double>(quality.total_volume) /
                                static_cast<double>(quality.broadcast_volume)));
      for (int q = 1; q < comm.size(); ++q) {
        comm.send(partition::tile_to_bytes(partition::build_local_graph(data, parts, q)), q,
                  kTileTag);
      }
      own = partition::build_local_graph(data, parts, 0);
    }
  } else {
    own = partition::tile_from_bytes(host, comm.receive(0, kTileTag));
  }
  comm.broadcast(name, 0);
  dataset_name.assign(reinterpret_cast<const char*>(name.data()), name.size());
  return own;
}

/// This rank's part of the job's partition store (refused when made for another rank count or
/// another dataset).
partition::LocalGraph tile_from_store(const TrainJob& job, const comm::Communicator& comm,
                                      std::string& dataset_name, const Log& say) {
  const partition::Manifest manifest = partition::read_manifest(job.partition_dir);
  if (!job.dataset.empty() && job.dataset != manifest.dataset) {
    throw InvalidArgument(fmt::format("partition store '{}' was made for dataset '{}', this job "
                                      "names '{}' (omit --dataset to use the store's)",
                                      job.partition_dir, manifest.dataset, job.dataset));
  }
  dataset_name = manifest.dataset;
  const Stopwatch clock;
  partition::LocalGraph tile = partition::load_part(job.partition_dir, comm.rank(), comm.size());
  say(fmt::format("partition store {}: dataset {} ({} nodes) in {} parts by {}; rank 0 read its "
                  "part in {:.2f} s",
                  job.partition_dir, manifest.dataset, manifest.num_nodes, manifest.num_parts,
                  manifest.method, clock.seconds()));
  check_trainable(dataset_name, tile.features, tile.num_classes);
  return tile;
}

/// The layer-0 input: owned rows followed (with the cache) by the ghost rows, fetched once here
/// and reused by every epoch: [n_owned (+ n_ghost), F]. Sparse features stay sparse when
/// cached (or on one rank); otherwise they are made dense, as layer 0 then gathers rows every
/// epoch. Features that need no ghost rows are taken over, not copied.
graph::Features input_features(partition::LocalGraph& tile,
                               const std::shared_ptr<comm::Communicator>& comm,
                               const std::shared_ptr<const comm::HaloPlan>& plan,
                               const BackendPtr& host, bool cache, comm::HaloStats& fetch) {
  graph::Features out;
  // Point-to-point only: a rank with no ghost and no reader of its rows may skip the fetch.
  const bool exchanges = plan->n_ghost() > 0 || plan->num_send_rows() > 0;
  if (tile.features.sparse && (cache || comm->size() == 1)) {
    out.sparse = exchanges ? comm::gather_sparse_rows(*comm, *plan, *tile.features.sparse, &fetch)
                           : std::move(*tile.features.sparse);
    return out;
  }
  const std::int64_t n_owned = tile.n_owned(), f = tile.features.cols();
  const std::int64_t rows = cache ? plan->n_local() : n_owned;
  Dense x;
  if (tile.features.dense && rows == n_owned) {
    x = std::move(*tile.features.dense);
  } else {
    x = Dense::zeros(host, rows, f);
    if (tile.features.dense) {
      ops::copy(*host, tile.features.dense->cview(), x.view().slice_rows(0, n_owned));
    } else {
      const Csr& s = *tile.features.sparse;
      for (std::int64_t r = 0; r < n_owned; ++r) {
        for (Offset k = s.row_ptr()[r]; k < s.row_ptr()[r + 1]; ++k)
          x(r, s.col()[k]) = s.val()[k];
      }
    }
  }
  if (cache && exchanges) {
    comm::HaloExchange<float> once(comm, plan, host, kFeatureTag);
    once.gather(x.view());
    fetch = once.stats();
  }
  out.dense = std::move(x);
  return out;
}

} // namespace

JobGraph get_job_graph(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                       const BackendPtr& host, const Log& say) {
  JobGraph g;
  Stopwatch clock;
  g.tile = job.partition_dir.empty() ? tile_in_memory(job, *comm, host, g.dataset, say)
                                     : tile_from_store(job, *comm, g.dataset, say);
  if (job.normalize_features) datasets::row_normalize_features(g.tile.features);
  g.load_s = clock.seconds();

  clock.restart();
  g.n_interior = partition::order_interior_first(g.tile);
  g.plan = std::make_shared<const comm::HaloPlan>(
      comm::HaloPlan::build(*comm, g.tile.owned_ids, g.tile.ghost_ids, g.tile.ghost_owner));
  g.features =
      input_features(g.tile, comm, g.plan, host, job.cache_input_features, g.feature_fetch);
  g.tile.features = {};
  g.setup_s = clock.seconds();
  return g;
}

} // namespace tessera::runtime
