// build_job_model: the model of a training or inference job on this rank's graph.
#include "job_model.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/gnn/models.hpp"
#include "tessera/gnn/scheduler.hpp"
#include "tessera/runtime/cli_options.hpp"
#include "tessera/runtime/offload_options.hpp"
#include "tessera/runtime/simulation.hpp"

#include <algorithm>
#include <fmt/core.h>

namespace tessera::runtime {

namespace {

/// A copy of the features in `backend`'s memory.
graph::Features features_on(const graph::Features& f, const BackendPtr& backend) {
  graph::Features out;
  if (f.dense) out.dense = to_backend(*f.dense, backend);
  if (f.sparse) out.sparse = to_backend(*f.sparse, backend);
  return out;
}

/// The cost model's part in a distributed GCN job: measures this rank's rates on its Â and lets
/// the scheduler (gnn::schedule_layers) give each layer its product order and exchange — under
/// --schedule auto among every exchange the job allows and, with --order auto, both orders; under
/// --schedule fixed the job's own, predicted. Collective.
void schedule_layers(const TrainJob& job, comm::Communicator& comm, const BackendPtr& backend,
                     const JobGraph& g, const std::vector<comm::LinkEstimate>& links, JobModel& m,
                     const Log& say) {
  const Csr& a_hat = m.graph->matrix(gnn::AggregationKind::Gcn);
  const bool choose = job.schedule == Schedule::Auto;
  gnn::ScheduleRequest request;
  request.layer_sizes = m.spec.layer_sizes;
  request.order = job.model.order;
  request.choose_order = choose && job.model.order == GcnOrder::Auto;
  request.cache_input_features = job.cache_input_features;
  request.n_owned = g.tile.n_owned();
  request.n_local = g.tile.n_owned() + g.tile.n_ghost();
  request.candidates =
      choose ? gnn::exchange_candidates(job.exchange, job.allowed_modes, job.allowed_precisions)
             : std::vector<comm::ExchangeOptions>{job.exchange};
  const gnn::CostModel model(gnn::measure_rank_rates(backend, a_hat, gnn::schedule_shapes(request),
                                                     [&comm] { comm.barrier(); }),
                             links, g.plan, request.n_owned, request.n_local, g.n_interior,
                             a_hat.nnz());
  bool inexact = false;
  const std::vector<gnn::LayerPlan> plans = gnn::schedule_layers(request, model, comm);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const gnn::LayerPlan& plan = plans[i];
    m.graph->set_exchange_options(plan.exchange, static_cast<int>(i));
    m.spec.layer_orders.push_back(plan.shape.transform_first ? GcnOrder::TransformThenAggregate
                                                             : GcnOrder::AggregateThenTransform);
    m.predicted.push_back(plan.predicted);
    inexact = inexact || plan.inexact();
    const gnn::LayerPrediction& p = plan.predicted;
    say(fmt::format("layer {} ({} -> {}, {}): {}; predicted {:.1f} ms a step on rank 0 (compute "
                    "{:.1f}, halo wait {:.1f}), {:.1f} on the slowest rank{}",
                    i, plan.shape.in, plan.shape.out,
                    plan.shape.transform_first ? "transform-first" : "aggregate-first",
                    plan.shape.has_halo ? comm::describe(plan.exchange) : "no halo", p.total_ms(),
                    p.compute_ms, p.wait_ms, plan.slowest_ms,
                    plan.other_order_ms
                        ? fmt::format("; the other order {:.1f}", *plan.other_order_ms)
                        : std::string()));
  }
  if (inexact) {
    say("halo exchanges are inexact in training (evaluation and the ghost input features stay "
        "exact)");
  }
}

} // namespace

std::int64_t output_width(const TrainJob& job, const JobGraph& g) {
  return job.task == Task::Link ? job.link.embedding_width : g.tile.num_classes;
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
  // GPU ranks exchange halos with each other through NCCL (two or more of them) and with CPU
  // ranks through MPI, staged through host memory; gradients are summed through NCCL when
  // every rank has a GPU, else through MPI (staged on the GPU ranks).
  std::vector<std::int64_t> gpu_ranks{backend->kind() == DeviceKind::Cuda ? 1 : 0};
  comm->allreduce_sum(std::span<std::int64_t>(gpu_ranks));
  const bool nccl = gpu_ranks[0] >= 2 && comm::nccl_compiled();
  m.device_comm = nccl ? comm::make_nccl_communicator(comm, backend) : comm;
  m.device_comm = simulated_link(job.simulation, m.device_comm, *comm,
                                 job.shape.resolve(g.features.cols(), output_width(job, g)),
                                 job.cache_input_features, g.plan.get());
  std::vector<comm::LinkEstimate> links;
  if (comm->size() > 1 && g.plan != nullptr) { // what the cost model reads: say rank 0's
    std::vector<int> peers;
    for (const auto* blocks : {&g.plan->send_blocks(), &g.plan->recv_blocks()}) {
      for (const comm::HaloPlan::Block& b : *blocks)
        peers.push_back(b.peer);
    }
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    const auto clock = comm::steady_link_clock();
    links = comm::measure_links(*m.device_comm, peers, *clock);
    for (const comm::LinkEstimate& link : links) {
      say(fmt::format("link to rank {}: {:.1f} µs, {:.1f} Gb/s (measured)", link.peer,
                      link.latency_us, link.gigabits_per_second));
    }
  }
  if (comm->size() > 1) {
    const std::int64_t gpus = gpu_ranks[0];
    std::string how = "halos and gradients through " + m.device_comm->describe();
    if (gpus > 0 && gpus < comm->size()) {
      how = nccl ? "halos between GPU ranks through NCCL, with CPU ranks through MPI staged in "
                   "host memory; gradient sums through MPI (staged)"
                 : "halos and gradients through " + comm->describe() +
                       ", the GPU rank's staged in host memory";
    }
    say(fmt::format("{} of {} ranks on GPUs; {}", gpus, comm->size(), how));
  }

  partition::LocalGraph& tile = g.tile;
  // Every rank holds the same class count, so every rank refuses alike, before any training.
  if (job.task == Task::Node && job.train.metric == gnn::Metric::RocAuc && tile.num_classes != 2) {
    throw InvalidArgument(fmt::format("ROC-AUC (--metric roc-auc) is for binary tasks; dataset "
                                      "'{}' has {} classes: use accuracy",
                                      g.dataset, tile.num_classes));
  }
  std::vector<GlobalId> local_ids = tile.owned_ids; // [n_local]: dropout masks follow them
  local_ids.insert(local_ids.end(), tile.ghost_ids.begin(), tile.ghost_ids.end());
  m.row_ids = Buffer<GlobalId>(backend, static_cast<std::int64_t>(local_ids.size()));
  backend->copy_from_host(m.row_ids.data(), local_ids.data(), local_ids.size() * sizeof(GlobalId));
  m.on_host = backend->kind() == DeviceKind::Cpu && !m.memory;
  if (!m.on_host) {
    m.device_features = features_on(g.features, memory_for(m.model_backend, TensorKind::Input));
  }

  m.adjacency_nnz = tile.adjacency.nnz();
  if (job.sampled.enabled) { // a graph per layer, each batch's blocks set into them
    m.sampled = std::make_unique<SampledModel>();
    m.sampled->backend = backend;
    m.sampled->adjacency = to_backend(tile.adjacency, make_cpu_backend());
    m.sampled->ids = local_ids;
    const int layers =
        static_cast<int>(job.shape.resolve(g.features.cols(), output_width(job, g)).size()) - 1;
    m.sampled->graph = gnn::ModelGraph::blocks(backend, gnn::graph_layers(job.model_name, layers),
                                               g.features.cols(), output_width(job, g));
  }
  m.graph = std::make_unique<gnn::ModelGraph>(
      m.model_backend, std::move(tile.adjacency), std::move(tile.degree), g.features.cols(),
      output_width(job, g), m.device_comm, g.plan, g.n_interior, job.cache_input_features);
  m.graph->set_exchange_options(job.exchange);
  m.spec = {job.shape.resolve(g.features.cols(), output_width(job, g)), job.model, job.train.seed};
  const comm::ExchangeOptions exact;
  if (!job.model_builder && comm->size() > 1 && !m.memory && !job.sampled.enabled) {
    schedule_layers(job, *comm, backend, g, links, m, say);
  } else if (comm->size() > 1 &&
             (job.exchange.mode != exact.mode || job.exchange.precision != exact.precision)) {
    say("halo exchanges: " + comm::describe(job.exchange) +
        " (inexact in training; evaluation and the ghost input features stay exact)");
  }
  m.model =
      job.model_builder ? job.model_builder(*m.graph, m.spec) : gnn::build_gcn(*m.graph, m.spec);
  m.graph->release_adjacency();
  if (m.sampled) {
    SampledModel& sampled = *m.sampled;
    sampled.model = job.model_builder ? job.model_builder(*sampled.graph, m.spec)
                                      : gnn::build_gcn(*sampled.graph, m.spec);
    // One process over the whole graph in its own order: the sampler reads the columns as ids.
    bool identity = comm->size() == 1;
    for (std::size_t i = 0; identity && i < sampled.ids.size(); ++i)
      identity = sampled.ids[i] == static_cast<GlobalId>(i);
    const gnn::RankGraph rows{&sampled.adjacency,
                              identity ? std::span<const GlobalId>() : sampled.ids,
                              tile.num_global_nodes, identity ? nullptr : comm.get()};
    sampled.sampler = std::make_unique<gnn::RankSampler>(
        rows, g.features,
        gnn::SamplerOptions{job.sampled.fanouts, job.sampled.replace, job.train.seed},
        job.sampled.cache_bytes.value_or(static_cast<std::size_t>(sampled.adjacency.rows()) *
                                         static_cast<std::size_t>(g.features.cols()) *
                                         sizeof(float)));
    if (comm->size() > 1) {
      say(fmt::format("hot-feature cache of rank 0: {} rows ({:.1f} MiB)",
                      sampled.sampler->cached_rows(),
                      static_cast<double>(sampled.sampler->cache_bytes()) / (1 << 20)));
    }
  }
  // In the backend's memory or the chunks now: a host copy beside them would only add to the
  // resident memory (under a budget, beside the device and host tiers).
  if (!m.on_host && !m.sampled) g.features = graph::Features{}; // the sampler reads them
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

} // namespace tessera::runtime
