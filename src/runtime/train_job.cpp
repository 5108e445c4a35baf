// run_train_job: this rank's graph → the model on it → training → the summary, one path for
// any rank count (a process on its own is a one-rank job over the self communicator).
#include "tessera/runtime/train_job.hpp"

#include "job_graph.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/io/files.hpp"
#include "tessera/runtime/checkpoint.hpp"
#include "tessera/runtime/offload_options.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fmt/core.h>
#include <optional>

namespace tessera::runtime {

namespace {

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
  double build_s = 0.0;

  /// The layer-0 input training reads, in the backend's memory.
  const graph::Features& input(const JobGraph& g) const {
    return on_host ? g.features : device_features;
  }
};

/// A copy of the features in `backend`'s memory.
graph::Features features_on(const graph::Features& f, const BackendPtr& backend) {
  graph::Features out;
  if (f.dense) out.dense = to_backend(*f.dense, backend);
  if (f.sparse) out.sparse = to_backend(*f.sparse, backend);
  return out;
}

Input<float> input_of(const graph::Features& f) {
  if (f.is_sparse()) return Input<float>(f.sparse->view());
  return Input<float>(f.dense->cview());
}

JobModel build_job_model(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                         const BackendPtr& backend, JobGraph& g, const Log& say) {
  const Stopwatch clock;
  JobModel m;
  // With a budget or a tier the model lives in chunks: one manager per rank, each its own budget.
  if (uses_chunks(job.offload)) {
    OffloadConfig config = job.offload;
    config.rank = comm->rank();
    m.memory = std::make_unique<ChunkManager>(backend, config);
    say(describe_memory(*m.memory));
  }
  m.model_backend = m.memory ? m.memory->allocator(TensorKind::Activation) : backend;
  // GPU ranks exchange halos and sum gradients through NCCL when every rank has a GPU; with
  // any CPU rank in the job, everything goes through MPI and host memory.
  std::vector<std::int64_t> gpu_ranks{backend->kind() == DeviceKind::Cuda ? 1 : 0};
  comm->allreduce_sum(std::span<std::int64_t>(gpu_ranks));
  const bool nccl = gpu_ranks[0] == comm->size() && comm->size() > 1 && comm::nccl_compiled();
  m.device_comm = nccl ? comm::make_nccl_communicator(comm, backend) : comm;
  if (job.simulated_link.gigabits_per_second > 0) { // (said below, in describe())
    m.device_comm = comm::simulate_link(m.device_comm, job.simulated_link);
  }
  if (comm->size() > 1 && g.plan != nullptr) { // what the cost model will read: say rank 0's
    std::vector<int> peers;
    for (const auto* blocks : {&g.plan->send_blocks(), &g.plan->recv_blocks()}) {
      for (const comm::HaloPlan::Block& b : *blocks)
        peers.push_back(b.peer);
    }
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    const auto clock = comm::steady_link_clock();
    for (const comm::LinkEstimate& link : comm::measure_links(*m.device_comm, peers, *clock)) {
      say(fmt::format("link to rank {}: {:.1f} µs, {:.1f} Gb/s (measured)", link.peer,
                      link.latency_us, link.gigabits_per_second));
    }
  }
  if (comm->size() > 1) {
    say(fmt::format("{} of {} ranks on GPUs; halos and gradients through {}", gpu_ranks[0],
                    comm->size(), m.device_comm->describe()));
  }

  partition::LocalGraph& tile = g.tile;
  std::vector<GlobalId> local_ids = tile.owned_ids; // [n_local]: dropout masks follow them
  local_ids.insert(local_ids.end(), tile.ghost_ids.begin(), tile.ghost_ids.end());
  m.row_ids = Buffer<GlobalId>(backend, static_cast<std::int64_t>(local_ids.size()));
  backend->copy_from_host(m.row_ids.data(), local_ids.data(), local_ids.size() * sizeof(GlobalId));
  m.on_host = backend->kind() == DeviceKind::Cpu && !m.memory;
  if (!m.on_host) {
    m.device_features = features_on(g.features, memory_for(m.model_backend, TensorKind::Input));
  }

  m.adjacency_nnz = tile.adjacency.nnz();
  m.graph = std::make_unique<gnn::ModelGraph>(
      m.model_backend, std::move(tile.adjacency), std::move(tile.degree), g.features.cols(),
      tile.num_classes, m.device_comm, g.plan, g.n_interior, job.cache_input_features);
  m.graph->set_exchange_options(job.exchange);
  const comm::ExchangeOptions exact;
  if (comm->size() > 1 &&
      (job.exchange.mode != exact.mode || job.exchange.precision != exact.precision)) {
    say("halo exchanges: " + comm::describe(job.exchange) +
        " (inexact in training; evaluation and the ghost input features stay exact)");
  }
  m.spec = {job.shape.resolve(g.features.cols(), tile.num_classes), job.model, job.train.seed};
  m.model =
      job.model_builder ? job.model_builder(*m.graph, m.spec) : gnn::build_gcn(*m.graph, m.spec);
  m.graph->release_adjacency();
  // In the backend's memory or the chunks now: a host copy beside them would only add to the
  // resident memory (under a budget, beside the device and host tiers).
  if (!m.on_host) g.features = graph::Features{};
  m.model.use_memory(m.memory.get());
  if (m.model.modules().empty()) {
    throw InvalidArgument("the builder of model '" + job.model_name + "' returned no layers");
  }
  m.build_s = clock.seconds();
  if (comm->size() > 1) {
    say(fmt::format("tiles ready in {:.2f} s (load {:.2f} s): rank 0 owns {} rows ({} interior), "
                    "reads {} ghosts",
                    g.load_s + g.setup_s + m.build_s, g.load_s, tile.n_owned(), g.n_interior,
                    tile.n_ghost()));
  }
  say(fmt::format("model {}: {} parameters (built in {:.2f} s)\n{}", job.model_name,
                  m.model.num_parameters(), m.build_s, m.model.summary()));
  return m;
}

/// Median over the training steps after the first (which allocates) of one per-epoch figure.
template <typename F> double step_median(const gnn::TrainResult& result, F figure) {
  std::vector<double> values;
  for (const gnn::EpochStats& s : result.history) {
    if (s.epoch > 1 || result.history.size() == 1) values.push_back(figure(s));
  }
  return median(std::move(values));
}

RankFigures figures_of(const JobGraph& g, const JobModel& m, const gnn::TrainResult& result,
                       int layers) {
  RankFigures f;
  f.epoch_ms = step_median(result, [](const gnn::EpochStats& s) { return s.step_ms; });
  f.comm_ms = step_median(result, [](const gnn::EpochStats& s) { return s.comm_ms; });
  f.wait_ms = step_median(result, [](const gnn::EpochStats& s) { return s.wait_ms; });
  f.compute_ms = f.epoch_ms - f.comm_ms - f.wait_ms;
  f.halo_bytes_sent = step_median(
      result, [](const gnn::EpochStats& s) { return static_cast<double>(s.halo_bytes_sent); });
  f.halo_bytes_received = step_median(
      result, [](const gnn::EpochStats& s) { return static_cast<double>(s.halo_bytes_received); });
  f.owned_rows = g.tile.n_owned();
  f.ghost_rows = g.tile.n_ghost();
  f.interior_rows = g.n_interior;
  f.load_s = g.load_s;
  f.setup_s = g.setup_s + m.build_s;
  const graph::Features& input = m.input(g);
  f.graph_bytes = static_cast<std::int64_t>(m.graph->bytes());
  f.feature_bytes =
      static_cast<std::int64_t>(input.dense ? input.dense->bytes() : input.sparse->bytes());
  f.model_bytes = static_cast<std::int64_t>(m.model.bytes());
  f.peak_rss_bytes = peak_rss_bytes();
  f.offload_moved_bytes = step_median(result, [](const gnn::EpochStats& s) {
    return static_cast<double>(s.offload.moved_bytes());
  });
  f.offload_stall_ms =
      step_median(result, [](const gnn::EpochStats& s) { return s.offload.stall_seconds * 1e3; });
  if (m.memory) {
    f.offload_peak_device_bytes = static_cast<std::int64_t>(m.memory->total().peak_device_bytes);
  }
  for (int i = 0; i < layers; ++i) {
    const comm::LayerExchange<float>* halo = m.graph->halo_of(i);
    const comm::HaloStats stats = halo != nullptr ? halo->stats() : comm::HaloStats{};
    f.layer_bytes_sent.push_back(stats.bytes_sent);
    f.layer_bytes_received.push_back(stats.bytes_received);
  }
  return f;
}

/// What CAGNET's 1D scheme would move per epoch for the GCN of these sizes: every rank
/// receives every other rank's rows of each exchanged matrix (the narrower of x and x·W),
/// forward and (past layer 0) backward.
double broadcast_1d_bytes(const std::vector<std::int64_t>& sizes, int ranks, std::int64_t nodes) {
  double bytes = 0.0;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    bytes += static_cast<double>((ranks - 1) * nodes * std::min(sizes[i], sizes[i + 1]) *
                                 static_cast<std::int64_t>(sizeof(float))) *
             (i == 0 ? 1.0 : 2.0);
  }
  return bytes;
}

/// Step 4: what the job did, gathered from every rank. Collective.
RunSummary summarize(const TrainJob& job, comm::Communicator& comm, const BackendPtr& backend,
                     const JobGraph& g, const JobModel& m, gnn::TrainResult result) {
  RunSummary s;
  s.dataset_spec = job.dataset;
  s.model_name = job.model_name;
  s.layer_sizes = m.spec.layer_sizes;
  s.model = job.model;
  s.train = job.train;
  s.normalize_features = job.normalize_features;
  s.backend = backend->describe();
  s.threads = backend->num_threads();
  s.blas_core = blas_core_name();

  s.dataset = g.dataset;
  s.nodes = g.tile.num_global_nodes;
  s.features = m.graph->in_features();
  s.sparse_features = m.input(g).is_sparse();
  s.classes = m.graph->num_classes();
  // Entries of Â (self-loops included) when the model is the GCN: what PyTorch's GCN multiplies.
  const bool gcn = !job.model_builder;
  std::vector<std::int64_t> totals{gcn ? m.graph->matrix(gnn::AggregationKind::Gcn).nnz()
                                       : m.adjacency_nnz,
                                   g.feature_fetch.bytes_received};
  comm.allreduce_sum(std::span<std::int64_t>(totals));
  s.edges = totals[0];
  s.feature_fetch_bytes = totals[1];

  s.ranks = comm.size();
  s.communicator = m.device_comm->describe();
  s.partition = comm.size() == 1 ? "none (one rank)"
                : job.partition_dir.empty()
                    ? partition::to_string(job.partition.method) + " (in memory)"
                    : job.partition_dir;
  s.halo_exchange = comm.size() == 1 ? "none (one rank)" : comm::describe(job.exchange);
  s.cache_input_features = job.cache_input_features;
  const int layers = std::max(m.graph->num_layers_asked(), gcn ? m.spec.num_layers() : 0);
  s.per_rank = gather_rank_figures(comm, figures_of(g, m, result, layers));
  for (const RankFigures& f : s.per_rank)
    s.halo_bytes_per_epoch += f.halo_bytes_sent;
  if (gcn) s.broadcast_1d_bytes_per_epoch = broadcast_1d_bytes(s.layer_sizes, s.ranks, s.nodes);
  // Every forward pass reads the ghost input rows from the cache instead of the network.
  const auto passes = static_cast<std::int64_t>(result.history.size()) +
                      std::count_if(result.history.begin(), result.history.end(),
                                    [](const gnn::EpochStats& e) { return e.evaluated; });
  if (job.cache_input_features) {
    for (const RankFigures& f : s.per_rank)
      s.cache_hit_rows += f.ghost_rows * passes;
  }
  if (m.memory) {
    s.offloaded = true;
    s.offload = m.memory->config();
    s.offload_total = m.memory->total();
  }
  s.result = std::move(result);
  return s;
}

/// The run a checkpoint of this job belongs to.
CheckpointRun checkpoint_run(const TrainJob& job, const comm::Communicator& comm, const JobGraph& g,
                             const JobModel& m) {
  CheckpointRun run;
  run.dataset = g.dataset;
  run.num_nodes = g.tile.num_global_nodes;
  run.features = m.graph->in_features();
  run.classes = m.graph->num_classes();
  run.model_name = job.model_name;
  run.layer_sizes = m.spec.layer_sizes;
  run.seed = job.train.seed;
  run.adam = job.train.adam;
  run.model = job.model;
  run.epochs = job.train.epochs;
  run.ranks = comm.size();
  return run;
}

/// Whether two folder names are the same folder (either may not exist yet).
bool same_folder(const std::string& a, const std::string& b) {
  std::error_code error;
  const auto canonical_a = std::filesystem::weakly_canonical(a, error);
  const auto canonical_b = std::filesystem::weakly_canonical(b, error);
  return !error && canonical_a == canonical_b;
}

} // namespace

RunSummary run_train_job(const TrainJob& job, const std::function<void(const std::string&)>& log,
                         const std::function<void(const gnn::EpochStats&)>& on_epoch) {
  const std::shared_ptr<comm::Communicator> comm =
      job.comm != nullptr ? job.comm : comm::make_self_communicator();
  const Log say = [&](const std::string& line) {
    if (log && comm->rank() == 0) log(line);
  };
  if (job.checkpoint_every < 0) {
    throw InvalidArgument("checkpoint_every must be >= 0 (0: after the last epoch only), got " +
                          std::to_string(job.checkpoint_every));
  }
  // Claimed before any work, so a folder that cannot take checkpoints fails now, not after the
  // first N epochs; held (locked) until training ends. Rank 0 alone writes: weights are
  // replicated. The checkpoint to resume is read before the data, by every rank (as every rank
  // reads its part of a store). A failure on any rank fails every rank, before any other
  // collective could leave the rest waiting.
  std::optional<io::OutputFolder> checkpoint_folder;
  std::optional<Checkpoint> resume;
  std::exception_ptr failure;
  try {
    if (!job.checkpoint_dir.empty() && comm->rank() == 0) {
      const bool resuming_here =
          !job.resume_dir.empty() && same_folder(job.resume_dir, job.checkpoint_dir);
      checkpoint_folder.emplace(job.checkpoint_dir, "checkpoint",
                                job.replace_checkpoints || resuming_here);
    }
    if (!job.resume_dir.empty()) resume = read_checkpoint(job.resume_dir);
  } catch (...) {
    failure = std::current_exception();
  }
  share_first_failure(*comm, failure, "could not open the checkpoint folders");

  // The data is read and prepared on the host; the model runs on this rank's backend.
  const BackendPtr host = make_cpu_backend(job.threads);
  const BackendPtr backend = select_backend(job.device, comm->local_rank(), job.threads);
  say(comm->size() == 1
          ? "backend: " + backend->describe()
          : fmt::format("backend of rank 0: {}; {}", backend->describe(), comm->describe()));
  if (const std::string warning = blas_performance_warning(); !warning.empty()) {
    say("warning: " + warning);
  }

  JobGraph graph = get_job_graph(job, comm, host, say);
  JobModel model = build_job_model(job, comm, backend, graph, say);
  gnn::Distribution distribution;
  distribution.comm = model.device_comm.get();
  distribution.rows = RowIds{model.row_ids.data(), 0};
  distribution.halo_totals = [&model] { return model.graph->halo_totals(); };
  const partition::LocalGraph& tile = graph.tile;
  const gnn::NodeLabels labels{tile.labels, tile.train_idx, tile.val_idx, tile.test_idx};
  const CheckpointRun run = checkpoint_run(job, *comm, graph, model);
  gnn::TrainControl control;
  if (resume) {
    for (const std::string& note : check_resumable(job.resume_dir, resume->run, run))
      say(note);
    say(fmt::format("resuming from {} after epoch {}", job.resume_dir, resume->state.epoch));
    control.resume = &resume->state;
  }
  control.checkpoint_every = job.checkpoint_every;
  if (!job.checkpoint_dir.empty()) {
    control.on_checkpoint = [&](const gnn::TrainState& state) {
      if (comm->rank() == 0)
        write_checkpoint(job.checkpoint_dir, {kCheckpointFormatVersion, run, state});
    };
  }
  control.stop_requested = job.stop_requested;
  gnn::TrainResult result =
      gnn::train_node_classifier(model.model_backend, model.model, input_of(model.input(graph)),
                                 labels, job.train, on_epoch, &distribution, control);
  return summarize(job, *comm, backend, graph, model, std::move(result));
}

} // namespace tessera::runtime
