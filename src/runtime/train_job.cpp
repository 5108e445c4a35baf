// run_train_job: this rank's graph → the model on it → training → the summary, one path for
// any rank count (a process on its own is a one-rank job over the self communicator).
#include "tessera/runtime/train_job.hpp"

#include "feature_range.hpp"
#include "job_graph.hpp"
#include "job_model.hpp"
#include "link_split.hpp"
#include "node_outputs.hpp"
#include "tessera/comm/failure.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/datasets/numpy_files.hpp"
#include "tessera/gnn/cost_model.hpp"
#include "tessera/gnn/link_prediction.hpp"
#include "tessera/gnn/minibatch.hpp"
#include "tessera/gnn/models.hpp"
#include "tessera/gnn/scheduler.hpp"
#include "tessera/io/files.hpp"
#include "tessera/runtime/balance.hpp"
#include "tessera/runtime/checkpoint.hpp"
#include "tessera/runtime/cli_options.hpp"
#include "tessera/runtime/offload_options.hpp"
#include "tessera/runtime/simulation.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fmt/core.h>
#include <optional>

namespace tessera::runtime {

std::string to_string(Task task) {
  return task == Task::Link ? "link" : "node";
}

Task parse_task(const std::string& text) {
  if (text == "node") return Task::Node;
  if (text == "link") return Task::Link;
  throw InvalidArgument("unknown task '" + text + "'; valid: node, link");
}

std::string to_string(Schedule schedule) {
  return schedule == Schedule::Auto ? "auto" : "fixed";
}

namespace {

/// Median over the training steps after the first (which allocates: epoch 1, or the first after
/// a resume or a rebalance) of one per-epoch figure.
template <typename F> double step_median(const gnn::TrainResult& result, F figure) {
  std::vector<double> values;
  for (std::size_t i = 0; i < result.history.size(); ++i) {
    if (i > 0 || result.history.size() == 1) values.push_back(figure(result.history[i]));
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
  // The GCN layers' measured steps, set against the cost model's predictions.
  std::size_t conv = 0;
  const auto& modules = m.model.modules();
  for (std::size_t k = 0; k < modules.size() && conv < m.predicted.size(); ++k) {
    if (modules[k]->name().rfind("GCNConv", 0) != 0) continue;
    f.layer_predicted_ms.push_back(m.predicted[conv++].total_ms());
    f.layer_measured_ms.push_back(step_median(result, [k](const gnn::EpochStats& s) {
      return k < s.module_ms.size() ? s.module_ms[k] : 0.0;
    }));
  }
  if (m.sampled) {
    const auto per_step = [&](auto field) {
      return step_median(result, [field](const gnn::EpochStats& s) {
        return static_cast<double>(s.*field) / std::max(s.steps, 1);
      });
    };
    f.steps = static_cast<std::int64_t>(
        step_median(result, [](const gnn::EpochStats& s) { return s.steps; }));
    f.batch_epoch_ms = step_median(result, [](const gnn::EpochStats& s) { return s.epoch_ms; });
    f.batch_wait_ms = step_median(result, [](const gnn::EpochStats& s) { return s.batch_wait_ms; });
    f.batch_exchange_ms =
        step_median(result, [](const gnn::EpochStats& s) { return s.batch_exchange_ms; });
    f.seeds = per_step(&gnn::EpochStats::seeds);
    f.sampled_edges = per_step(&gnn::EpochStats::sampled_edges);
    f.input_rows = per_step(&gnn::EpochStats::input_rows);
    f.cache_hits = per_step(&gnn::EpochStats::cache_hits);
    f.fetched_rows = per_step(&gnn::EpochStats::fetched_rows);
    f.batch_bytes = per_step(&gnn::EpochStats::batch_bytes);
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

/// Step 4: what the job did, gathered from every rank: `result` over the whole run, `last` of
/// the final tiling (the per-rank figures; the same as `result` without a rebalance).
/// Collective.
RunSummary summarize(const TrainJob& job, comm::Communicator& comm, const BackendPtr& backend,
                     const JobGraph& g, const JobModel& m, gnn::TrainResult result,
                     const gnn::TrainResult& last) {
  RunSummary s;
  s.dataset_spec = job.dataset;
  s.model_name = job.model_name;
  s.layer_sizes = m.spec.layer_sizes;
  s.model = job.model;
  s.train = job.train;
  s.normalize_features = g.row_normalized;
  s.backend = backend->describe();
  s.threads = backend->num_threads();
  s.blas_core = blas_core_name();

  s.dataset = g.dataset;
  s.split_source = !job.partition_dir.empty() ? "store" : g.split_drawn ? "random" : "dataset";
  s.split_seed = job.split_seed.value_or(job.train.seed);
  s.nodes = g.tile.num_global_nodes;
  s.features = m.graph->in_features();
  s.sparse_features = m.input(g).is_sparse();
  s.feature_density = g.feature_density;
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
                    ? partition::to_string(job.partition.method) + " (in memory" +
                          (job.balance == partition::Balance::None
                               ? ")"
                               : ", balance " + partition::to_string(job.balance) + ")")
                    : job.partition_dir;
  s.halo_exchange = comm.size() == 1                 ? "none (one rank)"
                    : job.schedule == Schedule::Auto ? "auto (per layer: layer_exchange)"
                                                     : comm::describe(job.exchange);
  s.cache_input_features = job.cache_input_features;
  if (job.sampled.enabled) {
    s.mode = "sampled";
    s.fanouts = job.sampled.fanouts;
    s.batch_size = job.sampled.batch_size;
    s.feature_cache_bytes =
        job.sampled.cache_bytes ? static_cast<std::int64_t>(*job.sampled.cache_bytes) : -1;
    // Over ranks the sampler thread needs a communicator of its own (MPI_THREAD_MULTIPLE).
    s.prefetch_batches = comm.size() == 1 || comm::mpi_thread_multiple() ? job.sampled.prefetch : 0;
  }
  const int layers = std::max(m.graph->num_layers_asked(), gcn ? m.spec.num_layers() : 0);
  s.per_rank = gather_rank_figures(comm, figures_of(g, m, last, layers));
  for (int i = 0; i < layers && comm.size() > 1; ++i) {
    s.layer_exchange.push_back(
        m.graph->halo_of(i) != nullptr ? comm::describe(m.graph->exchange_options(i)) : "no halo");
  }
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
  run.dataset_checksum = g.dataset_checksum;
  run.num_nodes = g.tile.num_global_nodes;
  run.features = m.graph->in_features();
  run.classes = m.graph->num_classes();
  run.model_name = job.model_name;
  run.layer_sizes = m.spec.layer_sizes;
  run.seed = job.train.seed;
  run.adam = job.train.adam;
  run.model = job.model;
  run.row_normalized = g.row_normalized;
  run.epochs = job.train.epochs;
  run.ranks = comm.size();
  run.task = to_string(job.task);
  if (job.task == Task::Link && job.link.decoder == "mlp") {
    run.decoder = "mlp";
    run.decoder_hidden =
        job.link.decoder_hidden > 0 ? job.link.decoder_hidden : job.link.embedding_width;
    run.decoder_layers = job.link.decoder_layers;
  }
  return run;
}

/// Whether two folder names are the same folder (either may not exist yet).
bool same_folder(const std::string& a, const std::string& b) {
  std::error_code error;
  const auto canonical_a = std::filesystem::weakly_canonical(a, error);
  const auto canonical_b = std::filesystem::weakly_canonical(b, error);
  return !error && canonical_a == canonical_b;
}

/// Refuses what sampled training cannot do yet, before anything is loaded.
void check_sampled(const TrainJob& job, int ranks) {
  if (!job.sampled.enabled) return;
  const auto refuse = [](const std::string& why) {
    throw InvalidArgument("--mode sampled " + why);
  };
  if (ranks > 1 && job.balance != partition::Balance::None && job.rebalance_threshold > 0) {
    refuse("does not rebalance yet: drop --rebalance-threshold, or give --rebalance-threshold 0");
  }
  if (job.task != Task::Node) refuse("trains node classifiers: drop --task link");
  const int layers = job.shape.layer_sizes.empty()
                         ? job.shape.num_layers
                         : static_cast<int>(job.shape.layer_sizes.size()) - 1;
  if (!gnn::builder_named(job.model_name)) {
    refuse("trains the built-in models (--model gcn, sage, gin or gat, with or without "
           "--residual), not " +
           job.model_name);
  }
  if (gnn::graph_layers(job.model_name, layers) == 0) {
    refuse("samples neighbours for graph layers; " + job.model_name + " has none");
  }
  if (job.device != DeviceChoice::Cpu) refuse("runs on the CPU for now (--device cpu)");
  try {
    gnn::check_fanouts(job.sampled.fanouts, gnn::graph_layers(job.model_name, layers));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("--fanouts: ") + e.what());
  }
  if (job.sampled.prefetch < 0) {
    refuse(fmt::format("needs --prefetch-batches >= 0 (0: sample each batch inline), got {}",
                       job.sampled.prefetch));
  }
  if (job.sampled.batch_size < 1) {
    refuse(fmt::format("needs a batch size >= 1, got {}", job.sampled.batch_size));
  }
}

/// Refuses what link prediction cannot do yet, before anything is loaded.
void check_link_task(const TrainJob& job, int ranks) {
  if (job.task != Task::Link) return;
  if (ranks > 1 && job.balance != partition::Balance::None && job.rebalance_threshold > 0) {
    throw InvalidArgument("--task link does not rebalance yet (a re-cut would split the edges "
                          "again): drop --rebalance-threshold, or give --rebalance-threshold 0");
  }
  check_link_decoder(job.link);
  if (job.link.decoder == "mlp" && uses_chunks(job.offload)) {
    throw InvalidArgument("--decoder mlp does not run under a memory budget yet: drop "
                          "--device-memory, --host-memory and --offload-dir, or use --decoder dot");
  }
  if (!job.outputs.predictions.empty()) {
    throw InvalidArgument("--predictions writes class probabilities, which link prediction "
                          "has none of: --embeddings writes the encoder's output");
  }
  const double val = job.link.val_fraction, test = job.link.test_fraction;
  if (!(val >= 0 && test >= 0 && val + test < 1)) {
    throw InvalidArgument(fmt::format("--link-split {},{}: the validation and test fractions of "
                                      "the edges must be >= 0 and leave edges to train on (sum "
                                      "below 1)",
                                      val, test));
  }
  if (job.link.embedding_width < 1) {
    throw InvalidArgument(
        fmt::format("the embedding width must be >= 1, got {}", job.link.embedding_width));
  }
  for (const int k : job.link.hits_k) {
    if (k < 1) throw InvalidArgument(fmt::format("Hits@K needs K >= 1, got {}", k));
  }
  if (!job.link.split_in.empty() && !datasets::is_npz_path(job.link.split_in)) {
    throw InvalidArgument("--link-split-in " + job.link.split_in +
                          ": expects an .npz file (as --link-split-out writes)");
  }
  if (!job.link.split_out.empty()) {
    if (!datasets::is_npz_path(job.link.split_out)) {
      throw InvalidArgument("--link-split-out " + job.link.split_out +
                            ": expects a file ending in .npz");
    }
    io::check_output_file(job.link.split_out);
  }
}

/// Refuses balancing settings that cannot work for this job, naming the flag and the value.
void check_balancing(const TrainJob& job, int ranks) {
  check_flags("--rank-speeds",
              [&] { partition::check_rank_speeds(job.balance, job.rank_speeds, ranks); });
  if (job.balance != partition::Balance::None && !job.partition_dir.empty()) {
    throw InvalidArgument("--balance " + partition::to_string(job.balance) +
                          " balances the in-memory cut; partition store '" + job.partition_dir +
                          "' was cut already (cut it for the ranks' speeds with tessera-partition "
                          "--balance given --rank-speeds ...)");
  }
  if (job.rebalance_threshold != 0 && !(job.rebalance_threshold > 1)) {
    throw InvalidArgument(fmt::format("--rebalance-threshold {}: expects a ratio > 1 (max / mean "
                                      "of the ranks' compute), or 0 for never",
                                      job.rebalance_threshold));
  }
  if (job.rebalance_max_moves < 0) {
    throw InvalidArgument(
        fmt::format("rebalance_max_moves must be >= 0, got {}", job.rebalance_max_moves));
  }
}

/// Every rank's work on its tile, what the rebalancer divides by measured time: nonzeros of
/// its rows of Â (self-loops included) + row_cost per owned row. Collective (an allgather).
std::vector<double> rank_work(comm::Communicator& comm, const JobGraph& g, const JobModel& m,
                              double row_cost) {
  std::vector<double> work(static_cast<std::size_t>(comm.size()), 0.0);
  const auto rows = static_cast<double>(g.tile.n_owned());
  work[static_cast<std::size_t>(comm.rank())] =
      static_cast<double>(m.adjacency_nnz) + rows * (1.0 + row_cost);
  comm.allreduce_sum(std::span<double>(work));
  return work;
}

/// Appends a run continued on another tiling (`next`) to the run so far (`run`): the epochs, the
/// phase times and the metrics at its end (`next` resumed from `run`'s state, so its best
/// validation already covers the earlier epochs).
void join(gnn::TrainResult& run, const gnn::TrainResult& next) {
  std::vector<gnn::EpochStats> history = std::move(run.history);
  const gnn::PhaseTimes phases = run.phases;
  run = next;
  run.paused.reset();
  history.insert(history.end(), next.history.begin(), next.history.end());
  run.history = std::move(history);
  run.phases.forward += phases.forward;
  run.phases.loss += phases.loss;
  run.phases.backward += phases.backward;
  run.phases.optimizer += phases.optimizer;
  run.phases.evaluate += phases.evaluate;
  std::vector<double> steps;
  for (const gnn::EpochStats& e : run.history)
    steps.push_back(e.step_ms);
  run.median_step_ms = median(std::move(steps));
}

} // namespace

RunSummary run_train_job(const TrainJob& job, const std::function<void(const std::string&)>& log,
                         const std::function<void(const gnn::EpochStats&)>& on_epoch) {
  const std::shared_ptr<comm::Communicator> comm =
      job.comm != nullptr ? job.comm : comm::make_self_communicator();
  const Log say = [&](const std::string& line) {
    if (log && comm->rank() == 0) log(line);
  };
  check_balancing(job, comm->size());
  check_link_task(job, comm->size());
  check_sampled(job, comm->size());
  job.simulation.check(comm->size(), job.train.epochs);
  comm->peer_watch().set_limit(job.peer_timeout);
  comm->peer_watch().set_step("loading the data");
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
    check_node_outputs(job.outputs, comm->rank());
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

  Balancing balancing;
  balancing.backend = backend;
  balancing.slowdown = job.simulation.slowdown(comm->rank());
  // Re-cutting needs rank 0's whole graph, which a cut from the ranks' rows never has.
  const bool distributed_cut = job.partition_dir.empty() && cut_from_rows(job, comm->size());
  const bool rebalancing = job.balance != partition::Balance::None && job.rebalance_threshold > 0 &&
                           comm->size() > 1 && !distributed_cut;
  if (job.balance != partition::Balance::None && job.rebalance_threshold > 0 && distributed_cut) {
    say(fmt::format("note: no rebalancing with --partition-method {} over ranks (a re-cut needs "
                    "the whole graph on rank 0); the first cut follows the ranks' speeds",
                    partition::to_string(job.partition.method)));
  }
  balancing.keep_graph = rebalancing;
  comm->peer_watch().set_step("loading and cutting the graph");
  JobGraph graph = get_job_graph(job, comm, host, say, balancing);
  std::optional<LinkData> link;
  if (job.task == Task::Link) {
    link = split_job_edges(job, comm, graph, host, say);
    if (!job.link.split_out.empty()) {
      write_link_split(job.link.split_out, *comm, link->split);
      say("link split written to " + job.link.split_out);
    }
  }
  NodeOutputs outputs = job.outputs;
  outputs.output_is_embedding = job.task == Task::Link;
  say(describe_normalization(graph.dataset, job.normalize_features, graph.recipe_row_normalize));
  if (const std::string note =
          describe_extreme_features(graph.feature_max_abs, graph.row_normalized);
      !note.empty()) {
    say("warning: " + note);
  }
  std::optional<JobModel> model; // reset before a rebuild: its members go in reverse order
  comm->peer_watch().set_step("building the model");
  model.emplace(build_job_model(job, comm, backend, graph, say));
  check_embedding_layer(outputs, *model);
  // The pair decoder of --task link (nullptr: the dot product), trained beside the encoder.
  const std::unique_ptr<gnn::MlpDecoder> decoder =
      link ? make_link_decoder(job.link, backend, job.train.seed) : nullptr;
  const CheckpointRun run = checkpoint_run(job, *comm, graph, *model);
  gnn::TrainControl control;
  if (resume) {
    for (const std::string& note : check_resumable(job.resume_dir, resume->run, run))
      say(note);
    if (resume->format_version < kCheckpointFormatVersion) {
      // Written before checkpoint.json was sealed: an edit of it goes unnoticed.
      say(fmt::format("note: checkpoint {} is of format {}, written before checkpoint.json was "
                      "sealed in latest.json (format {}): its best epoch and metrics are taken "
                      "as written",
                      job.resume_dir, resume->format_version, kCheckpointFormatVersion));
    }
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

  // Rebalancing: every epoch the ranks share their compute; the rebalancer says when to re-cut.
  std::optional<Rebalancer> rebalancer;
  std::vector<double> next_shares;
  const double row_cost = balancing.targets ? balancing.targets->row_cost : 0.0;
  if (rebalancing) {
    rebalancer.emplace(job.rebalance_threshold, job.rebalance_max_moves);
    rebalancer->start(rank_work(*comm, graph, *model, row_cost));
    control.pause_after = [&](const gnn::EpochStats& stats) {
      if (rebalancer->settled()) return false; // the same on every rank: no more gathers
      std::vector<double> compute(static_cast<std::size_t>(comm->size()), 0.0);
      compute[static_cast<std::size_t>(comm->rank())] =
          std::max(0.0, stats.step_ms - stats.comm_ms - stats.wait_ms);
      comm->allreduce_sum(std::span<double>(compute)); // an allgather
      std::optional<std::vector<double>> shares = rebalancer->after_epoch(compute);
      if (shares) next_shares = std::move(*shares);
      return shares.has_value();
    };
  }

  const auto epoch_done = [&](const gnn::EpochStats& stats) {
    if (on_epoch) on_epoch(stats);
    job.simulation.after_epoch(comm->rank(), stats.epoch);
  };
  if (job.training_starts) job.training_starts();
  comm->peer_watch().set_step("the start of training");
  gnn::TrainResult result, last; // the whole run, and the run on the current tiling
  std::vector<RebalanceStep> steps;
  gnn::TrainState paused;
  for (;;) {
    gnn::Distribution distribution;
    distribution.comm = model->device_comm.get();
    distribution.rows = RowIds{model->row_ids.data(), 0};
    distribution.halo_totals = [&model] { return model->graph->halo_totals(); };
    const partition::LocalGraph& tile = graph.tile;
    const gnn::NodeLabels labels{tile.labels, tile.train_idx, tile.val_idx, tile.test_idx};
    try {
      const SlowerDevice slower(model->model, balancing.slowdown, [&model] {
        const comm::HaloStats stats = model->graph->halo_totals();
        return stats.start_seconds + stats.wait_seconds;
      });
      // Sampled steps train their own model (no halo: all of a step's time is compute).
      std::optional<SlowerDevice> slower_steps;
      if (model->sampled) slower_steps.emplace(model->sampled->model, balancing.slowdown, nullptr);
      if (link) {
        const gnn::LinkTask task{&link->split,          &link->training, link->ids,
                                 tile.num_global_nodes, job.link.hits_k, decoder.get()};
        last = gnn::train_link_predictor(model->model_backend, model->model,
                                         input_of(model->input(graph)), task, job.train, epoch_done,
                                         &distribution, control);
      } else if (job.sampled.enabled) {
        const gnn::MiniBatchConfig batches{job.sampled.fanouts, job.sampled.replace,
                                           job.sampled.batch_size, job.sampled.prefetch};
        const gnn::FullGraphModel evaluation{&model->model, input_of(model->input(graph)),
                                             comm->size() > 1 ? &distribution : nullptr};
        SampledModel& sampled = *model->sampled;
        last = gnn::train_sampled_node_classifier(sampled.backend, sampled.model, *sampled.graph,
                                                  *sampled.sampler, labels, job.train, batches,
                                                  evaluation, epoch_done, control);
      } else {
        last = gnn::train_node_classifier(model->model_backend, model->model,
                                          input_of(model->input(graph)), labels, job.train,
                                          epoch_done, &distribution, control);
      }
    } catch (const gnn::TrainingStopped& e) {
      // A diverged loss on extreme features is no matter of the learning rate: say so.
      const std::string note =
          describe_extreme_features(graph.feature_max_abs, graph.row_normalized);
      if (e.signal() != 0 || note.empty()) throw;
      throw gnn::TrainingStopped(std::string(e.what()) + "; but " + note, e.epoch(), 0);
    }
    join(result, last);
    if (!last.paused) break;

    // Re-cut for the fitted speeds at this epoch boundary and continue from the state: the
    // weights and Adam's moments are replicated, and dropout follows global ids.
    RebalanceStep step;
    step.epoch = last.paused->epoch;
    step.imbalance_before = rebalancer->last_imbalance();
    step.shares = next_shares;
    const Stopwatch clock;
    model.reset();
    const bool split_drawn = graph.split_drawn;
    std::string checksum = std::move(graph.dataset_checksum);
    graph = recut_job_graph(job, comm, host, balancing, next_shares, step);
    graph.split_drawn = split_drawn;
    graph.dataset_checksum = std::move(checksum);
    model.emplace(build_job_model(job, comm, backend, graph, [](const std::string&) {}));
    step.seconds = clock.seconds();
    say(fmt::format("rebalanced after epoch {}: compute imbalance {:.2f} (max / mean over the "
                    "ranks) > {:.2f}; part shares now {}; moved {} rows ({:.1f} MiB) in {:.2f} s",
                    step.epoch, step.imbalance_before, job.rebalance_threshold,
                    speeds_text(step.shares), step.rows_moved,
                    static_cast<double>(step.bytes_moved) / (1 << 20), step.seconds));
    steps.push_back(std::move(step));
    rebalancer->start(rank_work(*comm, graph, *model, row_cost));
    paused = std::move(*last.paused);
    control.resume = &paused;
  }
  comm->peer_watch().set_step("writing the per-node outputs");
  write_node_outputs(outputs, *comm, graph, *model, say);
  write_model_weights(job.outputs, run, *comm, link_model_parameters(model->model, decoder.get()),
                      say);
  for (std::size_t i = 0; i < steps.size(); ++i) // one measurement (or 0) per move
    steps[i].imbalance_after = rebalancer->imbalance_after()[i];
  RunSummary summary = summarize(job, *comm, backend, graph, *model, std::move(result), last);
  summary.stalls = gather_stalls(*comm, comm->peer_watch().stalls());
  summary.balance = partition::to_string(job.balance);
  if (balancing.targets) summary.rank_speeds = balancing.targets->speeds; // the first cut's
  summary.row_cost = row_cost;
  summary.rebalances = std::move(steps);
  if (!summary.rebalances.empty()) summary.balanced_epoch_ms = summary.per_rank.front().epoch_ms;
  return summary;
}

} // namespace tessera::runtime
