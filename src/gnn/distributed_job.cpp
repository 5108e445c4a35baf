// run_train_job over P ranks: each rank gets its tile (from a partition store, or from rank 0,
// which partitions in memory), builds its Â and halo plan, and trains its rows of one model.
#include "src/gnn/job_parts.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/partition/local_graph.hpp"
#include "tessera/partition/store.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace tessera::gnn::detail {

namespace {

constexpr int kTileTag = 7200;
constexpr int kFeatureTag = 7300;

/// Rank 0 loads and partitions the whole graph and sends every other rank its tile; the others
/// receive theirs. Only rank 0 ever holds the whole graph.
partition::LocalGraph partition_in_memory(const TrainJob& job, comm::Communicator& comm,
                                          const BackendPtr& backend, std::string& dataset_name,
                                          const std::function<void(const std::string&)>& say) {
  std::vector<std::byte> name;
  partition::LocalGraph own;
  if (comm.rank() == 0) {
    datasets::Dataset data = datasets::load_dataset(backend, job.dataset, job.load);
    check_trainable(data);
    if (!data.has_split()) {
      datasets::make_random_split(data, 0.6, 0.2, job.train.seed);
      say("no published split: using a random 60/20/20 split");
    }
    partition::Options options = job.partition;
    options.num_parts = comm.size();
    options.feature_width = data.features.cols();
    const Stopwatch clock;
    const partition::Partition parts = partition::partition_graph(data.adjacency, options);
    const partition::Quality quality = partition::measure(data.adjacency, parts);
    say(fmt::format("partitioned {} ({} nodes) into {} tiles with {} in {:.2f} s: halo volume {} "
                    "rows per exchange ({:.3f} of a 1D broadcast)",
                    data.name, data.num_nodes, comm.size(), partition::to_string(options.method),
                    clock.seconds(), quality.total_volume,
                    quality.broadcast_volume == 0
                        ? 0.0
                        : static_cast<double>(quality.total_volume) /
                              static_cast<double>(quality.broadcast_volume)));
    for (int q = 1; q < comm.size(); ++q) {
      comm.send(partition::tile_to_bytes(partition::build_local_graph(data, parts, q)), q,
                kTileTag);
    }
    own = partition::build_local_graph(data, parts, 0);
    const auto* text = reinterpret_cast<const std::byte*>(data.name.data());
    name.assign(text, text + data.name.size());
  } else {
    own = partition::tile_from_bytes(backend, comm.receive(0, kTileTag));
  }
  comm.broadcast(name, 0);
  dataset_name.assign(reinterpret_cast<const char*>(name.data()), name.size());
  return own;
}

/// This rank's part of the job's partition store (refused when made for another rank count or
/// another dataset).
partition::LocalGraph load_from_store(const TrainJob& job, const comm::Communicator& comm,
                                      std::string& dataset_name) {
  const partition::Manifest manifest = partition::read_manifest(job.partition_dir);
  if (!job.dataset.empty() && job.dataset != manifest.dataset) {
    throw InvalidArgument(fmt::format("partition store '{}' was made for dataset '{}', this job "
                                      "names '{}' (omit --dataset to use the store's)",
                                      job.partition_dir, manifest.dataset, job.dataset));
  }
  dataset_name = manifest.dataset;
  return partition::load_part(job.partition_dir, comm.rank(), comm.size());
}

/// The layer-0 input: owned rows followed (with the cache) by the ghost rows, fetched once here
/// and reused by every epoch: [n_owned (+ n_ghost), F]. Sparse features stay sparse when
/// cached; without the cache they are made dense, as the layer then gathers rows every epoch.
datasets::Features input_features(partition::LocalGraph& tile,
                                  const std::shared_ptr<comm::Communicator>& comm,
                                  const std::shared_ptr<const comm::HaloPlan>& plan,
                                  const BackendPtr& backend, bool cache, comm::HaloStats& fetch) {
  datasets::Features out;
  if (tile.features.sparse && cache) {
    out.sparse = comm::gather_sparse_rows(*comm, *plan, *tile.features.sparse, &fetch);
    return out;
  }
  const std::int64_t n_owned = tile.n_owned(), f = tile.features.cols();
  Dense x = Dense::zeros(backend, cache ? plan->n_local() : n_owned, f);
  if (tile.features.dense) {
    ops::copy(*backend, tile.features.dense->cview(), x.view().slice_rows(0, n_owned));
  } else {
    const Csr& s = *tile.features.sparse;
    for (std::int64_t r = 0; r < n_owned; ++r) {
      for (Offset k = s.row_ptr()[r]; k < s.row_ptr()[r + 1]; ++k)
        x(r, s.col()[k]) = s.val()[k];
    }
  }
  if (cache) {
    comm::HaloExchange<float> once(comm, plan, backend, kFeatureTag);
    once.gather(x.view());
    fetch = once.stats();
  }
  out.dense = std::move(x);
  return out;
}

/// max / mean / min of one value over the ranks, under `key`. Collective.
void report_spread(RunReport& report, comm::Communicator& comm, const std::string& key,
                   double value) {
  const std::vector<double> all = comm.allgather(value);
  report.set(key + ".max", *std::max_element(all.begin(), all.end()));
  report.set(key + ".mean",
             std::accumulate(all.begin(), all.end(), 0.0) / static_cast<double>(all.size()));
  report.set(key + ".min", *std::min_element(all.begin(), all.end()));
}

/// Medians over the training steps after the first (which allocates) of one per-epoch figure.
template <typename F> double step_median(const TrainResult& result, F figure) {
  std::vector<double> values;
  for (const EpochStats& s : result.history) {
    if (s.epoch > 1 || result.history.size() == 1) values.push_back(figure(s));
  }
  return median(std::move(values));
}

} // namespace

TrainOutcome run_distributed_job(const TrainJob& job,
                                 const std::function<void(const std::string&)>& log,
                                 const std::function<void(const EpochStats&)>& on_epoch) {
  comm::Communicator& comm = *job.comm;
  const auto say = [&](const std::string& line) {
    if (log && comm.rank() == 0) log(line);
  };
  TrainOutcome out;
  RunReport& report = out.report;
  // Tiles are read and prepared on the host; the model runs on this rank's backend.
  const BackendPtr host = make_cpu_backend(job.threads);
  const BackendPtr backend = select_backend(job.device, comm.local_rank(), job.threads);
  say(fmt::format("backend of rank 0: {}; {}", backend->describe(), comm.describe()));
  if (const std::string warning = blas_performance_warning(); !warning.empty()) {
    say("warning: " + warning);
  }

  Stopwatch clock;
  std::string dataset_name;
  partition::LocalGraph tile = job.partition_dir.empty()
                                   ? partition_in_memory(job, comm, host, dataset_name, say)
                                   : load_from_store(job, comm, dataset_name);
  if (tile.features.cols() == 0 || tile.num_classes < 2) {
    throw InvalidArgument("dataset '" + dataset_name +
                          "' has no features or no class labels "
                          "to train on");
  }
  if (job.normalize_features) datasets::row_normalize_features(tile.features);
  const double load_s = clock.seconds();

  clock.restart();
  const std::int64_t n_interior = partition::order_interior_first(tile);
  const auto plan = std::make_shared<const comm::HaloPlan>(
      comm::HaloPlan::build(comm, tile.owned_ids, tile.ghost_ids, tile.ghost_owner));
  std::vector<GlobalId> local_ids = tile.owned_ids; // [n_local]: dropout masks follow them
  local_ids.insert(local_ids.end(), tile.ghost_ids.begin(), tile.ghost_ids.end());
  comm::HaloStats feature_fetch;
  const datasets::Features host_features =
      input_features(tile, job.comm, plan, host, job.cache_input_features, feature_fetch);
  tile.features = {};
  // What the model reads, in the backend's memory (the host arrays themselves on the CPU).
  const bool on_host = backend->kind() == DeviceKind::Cpu;
  const datasets::Features device_features =
      on_host ? datasets::Features{} : features_on(host_features, backend);
  const datasets::Features& features = on_host ? host_features : device_features;
  Buffer<GlobalId> ids(backend, static_cast<std::int64_t>(local_ids.size()));
  backend->copy_from_host(ids.data(), local_ids.data(), local_ids.size() * sizeof(GlobalId));

  // GPU ranks exchange halos and sum gradients through NCCL when every rank has a GPU; with
  // any CPU rank in the job, everything goes through MPI and host memory.
  std::vector<std::int64_t> gpu_ranks{backend->kind() == DeviceKind::Cuda ? 1 : 0};
  comm.allreduce_sum(std::span<std::int64_t>(gpu_ranks));
  const bool nccl = gpu_ranks[0] == comm.size() && comm.size() > 1 && comm::nccl_compiled();
  const std::shared_ptr<comm::Communicator> device_comm =
      nccl ? comm::make_nccl_communicator(job.comm, backend) : job.comm;
  say(fmt::format("{} of {} ranks on GPUs; halos and gradients through {}", gpu_ranks[0],
                  comm.size(), device_comm->describe()));
  const std::int64_t n_owned = tile.n_owned(), n_ghost = tile.n_ghost();
  ModelGraph graph(backend, std::move(tile.adjacency), std::move(tile.degree), features.cols(),
                   tile.num_classes, device_comm, plan, n_interior, job.cache_input_features);
  std::optional<GcnConfig> gcn;
  Sequential<float> model = build_model(job, graph, gcn);
  const double setup_s = clock.seconds();
  say(fmt::format("tiles ready in {:.2f} s (load {:.2f} s): rank 0 owns {} rows ({} interior), "
                  "reads {} ghosts",
                  load_s + setup_s, load_s, n_owned, n_interior, n_ghost));
  say(fmt::format("model {}: {} parameters\n{}", job.model_name, model.num_parameters(),
                  model.summary()));

  Distribution distribution;
  distribution.comm = device_comm.get();
  distribution.rows = ops::RowIds{ids.data(), 0};
  distribution.halo_totals = [&graph] { return graph.halo_totals(); };
  const NodeLabels labels{tile.labels, tile.train_idx, tile.val_idx, tile.test_idx};
  out.result = train_node_classifier(backend, model, feature_input(features), labels, job.train,
                                     on_epoch, &distribution);

  // ---- report: the same on every rank (collective) ----
  const TrainResult& result = out.result;
  report_config(report, job, gcn ? &*gcn : nullptr);
  report.set("backend", backend->describe());
  report.set("threads", backend->num_threads());
  report.set("blas_core", blas_core_name());
  report.set("dataset.name", dataset_name);
  report.set("dataset.nodes", tile.num_global_nodes);
  report.set("dataset.features", features.cols());
  report.set("dataset.classes", static_cast<std::int64_t>(tile.num_classes));
  report.set("distributed.ranks", comm.size());
  report.set("distributed.communicator", device_comm->describe());
  report.set("distributed.partition",
             job.partition_dir.empty() ? partition::to_string(job.partition.method) + " (in memory)"
                                       : job.partition_dir);
  report.set("distributed.cache_input_features", job.cache_input_features);
  report_spread(report, comm, "distributed.owned_nodes", static_cast<double>(n_owned));
  report_spread(report, comm, "distributed.ghost_nodes", static_cast<double>(n_ghost));
  report_spread(report, comm, "distributed.interior_nodes", static_cast<double>(n_interior));
  report.set("timing.load_s", load_s);
  report.set("timing.setup_s", setup_s);
  report_result(report, result);

  const double step = step_median(result, [](const EpochStats& s) { return s.step_ms; });
  const double comm_ms = step_median(result, [](const EpochStats& s) { return s.comm_ms; });
  const double wait_ms = step_median(result, [](const EpochStats& s) { return s.wait_ms; });
  report_spread(report, comm, "timing.epoch_ms", step);
  report_spread(report, comm, "timing.compute_ms", step - comm_ms - wait_ms);
  report_spread(report, comm, "timing.comm_ms", comm_ms);
  report_spread(report, comm, "timing.wait_ms", wait_ms);
  const double sent = step_median(
      result, [](const EpochStats& s) { return static_cast<double>(s.halo_bytes_sent); });
  const double received = step_median(
      result, [](const EpochStats& s) { return static_cast<double>(s.halo_bytes_received); });
  report_spread(report, comm, "comm.halo_bytes_sent_per_epoch", sent);
  report_spread(report, comm, "comm.halo_bytes_received_per_epoch", received);
  std::vector<double> total_sent{sent};
  comm.allreduce_sum(std::span<double>(total_sent));
  report.set("comm.halo_bytes_per_epoch", total_sent[0]);
  // What CAGNET's 1D scheme would move for the same GCN layers: every rank receives every
  // other rank's rows of each exchanged matrix (the narrower of x and x·W), forward and (past
  // layer 0) backward. Estimated for GCN models only.
  std::vector<std::int64_t> gcn_widths;
  for (const auto& module : model.modules()) {
    if (const auto* conv = dynamic_cast<const GcnConv<float>*>(module.get())) {
      gcn_widths.push_back(std::min(conv->weight().value.rows(), conv->weight().value.cols()));
    }
  }
  if (!gcn_widths.empty()) {
    double broadcast = 0.0;
    for (std::size_t i = 0; i < gcn_widths.size(); ++i) {
      broadcast += static_cast<double>((comm.size() - 1) * tile.num_global_nodes *
                                       gcn_widths[i] * sizeof(float)) *
                   (i == 0 ? 1.0 : 2.0);
    }
    report.set("comm.broadcast_1d_bytes_per_epoch", broadcast);
  }
  // Per aggregating layer and rank, over the whole run (training and evaluation); zero for a
  // layer that reads cached rows.
  const int layers = std::max(static_cast<int>(gcn_widths.size()), graph.num_layers_asked());
  for (int i = 0; i < layers; ++i) {
    const comm::HaloExchange<float>* halo = graph.halo_of(i);
    const comm::HaloStats stats = halo != nullptr ? halo->stats() : comm::HaloStats{};
    report.set(fmt::format("comm.layer_bytes_sent.conv{}", i),
               comm.allgather(static_cast<double>(stats.bytes_sent)));
    report.set(fmt::format("comm.layer_bytes_received.conv{}", i),
               comm.allgather(static_cast<double>(stats.bytes_received)));
  }
  // Every forward pass reads the ghost input rows from the cache instead of the network.
  const auto passes = static_cast<std::int64_t>(result.history.size()) +
                      std::count_if(result.history.begin(), result.history.end(),
                                    [](const EpochStats& s) { return s.evaluated; });
  std::vector<std::int64_t> cache{job.cache_input_features ? n_ghost * passes : 0,
                                  feature_fetch.bytes_received};
  comm.allreduce_sum(std::span<std::int64_t>(cache));
  report.set("halo.cache_hit_rows", cache[0]);
  report.set("halo.feature_fetch_bytes", cache[1]);
  report.set("memory.graph_bytes", static_cast<std::int64_t>(graph.bytes()));
  report.set("memory.feature_bytes",
             static_cast<std::int64_t>(features.dense ? features.dense->bytes()
                                                      : features.sparse->bytes()));
  report.set("memory.model_bytes", static_cast<std::int64_t>(model.bytes()));
  report_spread(report, comm, "memory.peak_rss_bytes", static_cast<double>(peak_rss_bytes()));
  return out;
}

} // namespace tessera::gnn::detail
