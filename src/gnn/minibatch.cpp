// Sampled mini-batch training: batches of seeds, their blocks, a step each; full-graph
// evaluation.
#include "tessera/gnn/minibatch.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/optimizer.hpp"
#include "tessera/ops/ops.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <fmt/core.h>
#include <mutex>
#include <numeric>
#include <thread>

namespace tessera::gnn {

namespace {

/// A block as the matrix its layer aggregates with: [dst, src], values 1, host memory.
Csr block_matrix(const BackendPtr& host, const Block& b) {
  Csr m(host, b.dst, b.num_src(), b.edges());
  std::copy(b.row_ptr.begin(), b.row_ptr.end(), m.row_ptr());
  std::copy(b.col.begin(), b.col.end(), m.col());
  std::fill(m.val(), m.val() + b.edges(), 1.0f);
  return m;
}

/// `values` in `backend`'s memory (`buffer`, reused), as a span there.
template <typename T>
std::span<const T> on_backend(const BackendPtr& backend, std::span<const T> values,
                              Buffer<T>& buffer) {
  if (backend->kind() == DeviceKind::Cpu) return values;
  if (buffer.size() != static_cast<std::int64_t>(values.size())) {
    buffer = Buffer<T>(backend, static_cast<std::int64_t>(values.size()));
  }
  backend->copy_from_host(buffer.data(), values.data(), values.size_bytes());
  return {buffer.data(), values.size()};
}

Input<float> whole_input(const graph::Features& f) {
  if (f.dense) return f.dense->cview();
  return f.sparse->view();
}

/// An epoch's steps over the ranks: a step takes ranks × batch_size seeds, each rank's share (its
/// batch) in proportion to the training nodes it owns, so that every rank takes the same steps
/// and a rank that owns more (a faster one, where the partition is weighted by speed) takes more
/// seeds a step. In one process the batch is batch_size.
struct StepPlan {
  std::int64_t batch = 0;          // this rank's seeds a step (the last step's may be fewer)
  std::int64_t steps = 0;          // the most batches any rank has
  std::vector<std::int64_t> seeds; // [steps] each step's seeds over all ranks
};

StepPlan plan_steps(comm::Communicator* comm, std::int64_t train, std::int64_t batch_size) {
  const std::vector<double> counts = comm != nullptr
                                         ? comm->allgather(static_cast<double>(train))
                                         : std::vector<double>{static_cast<double>(train)};
  std::int64_t total = 0;
  for (const double c : counts)
    total += static_cast<std::int64_t>(c);
  // ceil(c · ranks · batch_size / total), at least 1: exact in 128 bits at any size.
  __extension__ using Wide = unsigned __int128;
  const auto batch_of = [&](double c) {
    const Wide wanted = static_cast<Wide>(static_cast<std::int64_t>(c)) * counts.size() *
                        static_cast<std::uint64_t>(batch_size);
    const auto whole = static_cast<Wide>(std::max<std::int64_t>(total, 1));
    return std::max<std::int64_t>(1, static_cast<std::int64_t>((wanted + whole - 1) / whole));
  };
  StepPlan plan;
  plan.batch = batch_of(static_cast<double>(train));
  for (const double c : counts) {
    const std::int64_t b = batch_of(c);
    plan.steps = std::max(plan.steps, (static_cast<std::int64_t>(c) + b - 1) / b);
  }
  plan.seeds.assign(static_cast<std::size_t>(plan.steps), 0);
  for (const double c : counts) {
    const std::int64_t b = batch_of(c);
    for (std::int64_t k = 0; k < plan.steps; ++k) {
      plan.seeds[static_cast<std::size_t>(k)] +=
          std::clamp<std::int64_t>(static_cast<std::int64_t>(c) - k * b, 0, b);
    }
  }
  return plan;
}

/// The trained model's weights into its full-graph twin (the same builder: the same parameters
/// in the same order).
void copy_weights(Sequential<float>& from, Sequential<float>& to) {
  const std::vector<Parameter<float>*> a = from.parameters(), b = to.parameters();
  if (a.size() != b.size()) {
    throw DimensionMismatch(fmt::format("the full-graph model has {} parameters, the sampled "
                                        "one {}: build both with one builder",
                                        b.size(), a.size()));
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i]->value.rows() != b[i]->value.rows() || a[i]->value.cols() != b[i]->value.cols()) {
      throw DimensionMismatch(fmt::format("parameter {} ('{}') is {}x{} in the sampled model and "
                                          "{}x{} in the full-graph one",
                                          i, a[i]->name, a[i]->value.rows(), a[i]->value.cols(),
                                          b[i]->value.rows(), b[i]->value.cols()));
    }
    std::vector<float> host(static_cast<std::size_t>(a[i]->value.rows() * a[i]->value.cols()));
    a[i]->value.backend()->copy_to_host(host.data(), a[i]->value.data(), a[i]->value.bytes());
    b[i]->value.backend()->copy_from_host(b[i]->value.data(), host.data(), b[i]->value.bytes());
  }
}

/// One step's batch, ready: its blocks as the matrices the layers take, its input rows, and what
/// sampling it did.
struct ReadyBatch {
  SampledBatch batch;
  std::vector<Csr> blocks;
  std::vector<float> inputs; // [input rows, F] (its storage reused from batch to batch)
  SamplingStats did;         // the sampler's counters for this batch alone
  std::exception_ptr error;  // sampling it failed (thrown by BatchPrefetcher::next)
};

SamplingStats operator+(const SamplingStats& a, const SamplingStats& b) {
  return {a.batches + b.batches,
          a.sampled_edges + b.sampled_edges,
          a.remote_sampled + b.remote_sampled,
          a.sampled_for_others + b.sampled_for_others,
          a.input_rows + b.input_rows,
          a.cache_hits + b.cache_hits,
          a.fetched_rows + b.fetched_rows,
          a.sample_bytes + b.sample_bytes,
          a.feature_bytes + b.feature_bytes,
          a.sample_exchange_seconds + b.sample_exchange_seconds,
          a.feature_exchange_seconds + b.feature_exchange_seconds};
}

SamplingStats operator-(const SamplingStats& a, const SamplingStats& b) {
  return {a.batches - b.batches,
          a.sampled_edges - b.sampled_edges,
          a.remote_sampled - b.remote_sampled,
          a.sampled_for_others - b.sampled_for_others,
          a.input_rows - b.input_rows,
          a.cache_hits - b.cache_hits,
          a.fetched_rows - b.fetched_rows,
          a.sample_bytes - b.sample_bytes,
          a.feature_bytes - b.feature_bytes,
          a.sample_exchange_seconds - b.sample_exchange_seconds,
          a.feature_exchange_seconds - b.feature_exchange_seconds};
}

/// Samples `seeds` for step k of `epoch` into `ready`. Collective over the sampler's ranks.
void prepare(RankSampler& sampler, const BackendPtr& host, std::span<const GlobalId> seeds,
             std::uint32_t epoch, std::int64_t k, ReadyBatch& ready) {
  if (comm::Communicator* comm = sampler.comm()) // where a wait that times out stood
    comm->peer_watch().set_step(fmt::format("epoch {} step {} (sampling)", epoch, k + 1));
  const SamplingStats before = sampler.stats();
  ready.batch = sampler.sample(seeds, epoch);
  sampler.gather_features(ready.batch.input_nodes(), ready.inputs);
  ready.blocks.clear();
  if (!seeds.empty()) {
    for (const Block& b : ready.batch.blocks)
      ready.blocks.push_back(block_matrix(host, b));
  }
  ready.did = sampler.stats() - before;
}

/// This rank's seeds of step k of an epoch (none once its batches are done: it samples for the
/// others).
std::span<const GlobalId> step_seeds(const std::vector<std::vector<GlobalId>>& mine,
                                     std::int64_t k) {
  if (k >= static_cast<std::int64_t>(mine.size())) return {};
  return mine[static_cast<std::size_t>(k)];
}

/// The batches of `steps` steps of each epoch first..last in order, sampled on a thread of its
/// own up to `depth` ahead of the steps (a bounded queue): sampling overlaps training. Over
/// ranks the sampler's communicator must be the thread's alone (a concurrent duplicate of the
/// job's), and the threads of all ranks sample the same batches in the same order.
class BatchPrefetcher {
public:
  BatchPrefetcher(RankSampler& sampler, BackendPtr host, std::vector<GlobalId> train,
                  std::int64_t batch_size, std::int64_t steps, std::uint64_t seed, int first_epoch,
                  int last_epoch, int depth)
      : sampler_(sampler), host_(std::move(host)), train_(std::move(train)),
        batch_size_(batch_size), steps_(steps), seed_(seed), first_(first_epoch), last_(last_epoch),
        depth_(static_cast<std::size_t>(depth)), slots_(static_cast<std::size_t>(depth) + 1) {
    thread_ = std::thread([this] { run(); });
  }
  /// Stops at once: a wait of the sampler's on its peers is cancelled (over ranks its
  /// communicator is unusable after; the job is ending with an error — finish() ends cleanly).
  ~BatchPrefetcher() {
    if (!thread_.joinable()) return;
    {
      const std::lock_guard lock(mutex_);
      stop_ = abandon_ = true;
    }
    if (comm::Communicator* comm = sampler_.comm()) comm->peer_watch().cancel();
    changed_.notify_all();
    thread_.join();
  }
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  /// Ends the thread where every rank's ends when all have taken the same batches (training
  /// ended or stopped on every rank after the same step): with the queue full, or after the last
  /// batch. Over ranks a thread in the middle of a batch needs its peers' to finish it.
  void finish() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
      abandon_ = sampler_.comm() == nullptr || sampler_.comm()->size() == 1; // no peer waits
    }
    changed_.notify_all();
    thread_.join();
  }

  /// The next batch in epoch order (the previous one's slot is free again); blocks until it is
  /// ready, and rethrows what sampling it threw. Valid until the next call.
  ReadyBatch& next() {
    std::unique_lock lock(mutex_);
    ++taken_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return produced_ >= taken_; });
    ReadyBatch& ready = slots_[(taken_ - 1) % slots_.size()];
    if (ready.error) std::rethrow_exception(ready.error);
    return ready;
  }

private:
  void run() {
    std::size_t index = 0;
    for (int epoch = first_; epoch <= last_; ++epoch) {
      const auto e = static_cast<std::uint32_t>(epoch);
      const std::vector<std::vector<GlobalId>> mine = seed_batches(train_, batch_size_, seed_, e);
      for (std::int64_t k = 0; k < steps_; ++k) {
        {
          // Batch `index` takes the slot of batch index - depth - 1, which the steps have left.
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [&] { return stop_ || index < taken_ + depth_; });
          if (abandon_ || index >= taken_ + depth_) return;
        }
        ReadyBatch& ready = slots_[index % slots_.size()];
        try {
          prepare(sampler_, host_, step_seeds(mine, k), e, k, ready);
        } catch (...) {
          ready.error = std::current_exception();
        }
        {
          const std::lock_guard lock(mutex_);
          produced_ = ++index;
        }
        changed_.notify_all();
        if (ready.error) return;
      }
    }
  }

  RankSampler& sampler_;
  BackendPtr host_;
  std::vector<GlobalId> train_;
  std::int64_t batch_size_, steps_;
  std::uint64_t seed_;
  int first_, last_;
  std::size_t depth_;
  std::vector<ReadyBatch> slots_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t produced_ = 0, taken_ = 0;
  bool stop_ = false, abandon_ = false;
  std::thread thread_; // last: it starts once the rest is made
};

/// train_sampled_node_classifier; without a full-graph model, evaluation sets every layer's block
/// to `whole` (one process) and reads `whole_input`.
TrainResult train_sampled(const BackendPtr& backend, Sequential<float>& model, ModelGraph& graph,
                          RankSampler& sampler, const NodeLabels& labels, const TrainConfig& config,
                          const MiniBatchConfig& batches, const FullGraphModel& evaluation,
                          const Csr* whole, Input<float> whole_input,
                          const std::function<void(const EpochStats&)>& on_epoch,
                          const TrainControl& control) {
  if (!graph.is_blocks()) {
    throw InvalidArgument("sampled training needs a model built on ModelGraph::blocks");
  }
  comm::Communicator* comm = sampler.comm();
  const bool ranks = comm != nullptr && comm->size() > 1;
  const int layers = graph.block_layers();
  check_fanouts(batches.fanouts, layers);
  if (batches.batch_size < 1) {
    throw InvalidArgument(fmt::format("the batch size must be >= 1, got {}", batches.batch_size));
  }
  if (evaluation.model == nullptr && (ranks || whole == nullptr)) {
    throw InvalidArgument("sampled training over ranks evaluates with a full-graph model: give "
                          "one (FullGraphModel)");
  }
  std::vector<std::int64_t> counts{static_cast<std::int64_t>(labels.train.size()),
                                   static_cast<std::int64_t>(labels.val.size()),
                                   static_cast<std::int64_t>(labels.test.size())};
  if (ranks) comm->allreduce_sum(std::span<std::int64_t>(counts));
  if (counts[0] == 0) throw InvalidArgument("no training node to draw batches from");
  if (batches.batch_size > counts[0]) {
    throw InvalidArgument(fmt::format("the batch size {} is larger than the training set ({} "
                                      "nodes): every batch would be the whole set; give at most "
                                      "{}",
                                      batches.batch_size, counts[0], counts[0]));
  }
  std::vector<GlobalId> train(labels.train.size());
  for (std::size_t i = 0; i < train.size(); ++i) {
    const std::int32_t r = labels.train[i];
    if (r < 0 || r >= sampler.num_owned()) {
      throw InvalidArgument(fmt::format("training node {} is row {}, outside this rank's {} rows",
                                        i, r, sampler.num_owned()));
    }
    train[i] = sampler.global_id(r);
  }
  const StepPlan plan =
      plan_steps(comm, static_cast<std::int64_t>(train.size()), batches.batch_size);
  const BackendPtr host = make_cpu_backend();
  Adam<float> optimizer(backend, model.parameters(), config.adam);
  // Over ranks the gradients are summed after backward in one allreduce, packed in parameter
  // order (a rank out of batches has no backward to overlap it with; the weights are small).
  std::vector<float> gradients;
  const auto sum_gradients = [&] {
    const std::vector<Parameter<float>*> parameters = model.parameters();
    std::size_t total = 0;
    for (const Parameter<float>* p : parameters)
      total += static_cast<std::size_t>(p->grad.size());
    gradients.resize(total);
    std::size_t at = 0;
    for (const Parameter<float>* p : parameters) {
      backend->copy_to_host(gradients.data() + at, p->grad.data(), p->grad.bytes());
      at += static_cast<std::size_t>(p->grad.size());
    }
    comm->allreduce_sum(std::span<float>(gradients));
    at = 0;
    for (Parameter<float>* p : parameters) {
      backend->copy_from_host(p->grad.data(), gradients.data() + at, p->grad.bytes());
      at += static_cast<std::size_t>(p->grad.size());
    }
  };
  Workspace<float> x(backend), d_logits(backend); // the largest batch's, reused
  std::vector<std::int32_t> batch_labels, batch_rows;
  Buffer<std::int32_t> labels_buffer, rows_buffer;
  Buffer<GlobalId> ids_buffer;

  EpochWork work;
  work.epochs = config.epochs;
  work.eval_every = config.eval_every;
  work.metric = config.metric;
  work.gathers_scores = false; // evaluate_node_classifier measures ROC-AUC itself
  work.train_rows = counts[0];
  work.val_rows = counts[1];
  work.test_rows = counts[2];
  work.lr = config.adam.lr;
  // The batches are sampled ahead on a thread (from the first epoch trained, known at the first
  // call). Over ranks its exchanges go over a concurrent duplicate of the job's communicator
  // (every rank's sampler on it, so ranks may differ in `prefetch`); without one (MPI below
  // MPI_THREAD_MULTIPLE) batches are sampled inline, on the job's.
  std::shared_ptr<comm::Communicator> sampler_comm;
  if (ranks) sampler_comm = comm->concurrent_duplicate();
  const bool ahead = batches.prefetch > 0 && (!ranks || sampler_comm != nullptr);
  struct UseCommunicator { // the sampler back on the job's communicator at the end
    RankSampler& sampler;
    comm::Communicator* job;
    ~UseCommunicator() {
      if (job != nullptr) sampler.use_communicator(job);
    }
  } const restore{sampler, sampler_comm ? comm : nullptr};
  if (sampler_comm) sampler.use_communicator(sampler_comm.get());
  std::unique_ptr<BatchPrefetcher> prefetcher;
  ReadyBatch inline_batch;
  work.train = [&](int epoch, EpochStats& stats, PhaseTimes& phases) {
    const Stopwatch epoch_clock;
    std::vector<double> step_ms, wait_ms;
    SamplingStats did;
    double loss = 0.0; // this rank's seeds' summed cross-entropy
    std::int64_t seeds_trained = 0;
    const auto e = static_cast<std::uint32_t>(epoch);
    if (ahead && !prefetcher) {
      prefetcher =
          std::make_unique<BatchPrefetcher>(sampler, host, train, plan.batch, plan.steps,
                                            config.seed, epoch, config.epochs, batches.prefetch);
    }
    const std::vector<std::vector<GlobalId>> mine =
        ahead ? std::vector<std::vector<GlobalId>>{}
              : seed_batches(train, plan.batch, config.seed, e);
    for (std::int64_t k = 0; k < plan.steps; ++k) {
      const Stopwatch step_clock;
      Stopwatch phase;
      ReadyBatch* ready = &inline_batch;
      if (ahead) {
        ready = &prefetcher->next();
      } else {
        prepare(sampler, host, step_seeds(mine, k), e, k, inline_batch);
      }
      const SampledBatch& batch = ready->batch;
      const std::span<const GlobalId> seeds = batch.seeds();
      did = did + ready->did;
      const auto rows = static_cast<std::int64_t>(batch.input_nodes().size());
      ConstDenseView<float> inputs{ready->inputs.data(), rows, sampler.feature_width()};
      if (backend->kind() != DeviceKind::Cpu) {
        const DenseView<float> on_device = x.get(rows, sampler.feature_width());
        backend->copy_from_host(on_device.data, ready->inputs.data(),
                                ready->inputs.size() * sizeof(float));
        inputs = ConstDenseView<float>(on_device);
      }
      wait_ms.push_back(step_clock.seconds() * 1e3);
      const double divisor = static_cast<double>(plan.seeds[static_cast<std::size_t>(k)]);
      if (!seeds.empty()) {
        graph.set_blocks(std::move(ready->blocks));
        const std::span<const GlobalId> ids = on_backend(backend, batch.input_nodes(), ids_buffer);
        const Step step{config.seed, e, true, RowIds{ids.data(), 0}};
        const ConstDenseView<float> logits = model.forward(step, inputs);
        phases.forward += phase.seconds();
        phase.restart();
        batch_labels.resize(seeds.size());
        batch_rows.resize(seeds.size());
        for (std::size_t i = 0; i < seeds.size(); ++i) {
          batch_labels[i] = labels.labels[static_cast<std::size_t>(sampler.owned_row(seeds[i]))];
          batch_rows[i] = static_cast<std::int32_t>(i);
        }
        const DenseView<float> d_out = d_logits.get(logits.rows, logits.cols);
        const double batch_loss = ops::softmax_cross_entropy<float>(
            *backend, logits, on_backend<std::int32_t>(backend, batch_labels, labels_buffer),
            on_backend<std::int32_t>(backend, batch_rows, rows_buffer), divisor, d_out);
        loss += batch_loss * divisor;
        seeds_trained += static_cast<std::int64_t>(seeds.size());
        phases.loss += phase.seconds();
        phase.restart();
        model.backward(d_out);
        phases.backward += phase.seconds();
      } else { // no batch left here: a zero gradient to the sum
        for (Parameter<float>* p : model.parameters())
          ops::zero<float>(*backend, std::span<float>(p->grad.data(), p->grad.size()));
      }
      phase.restart();
      if (comm != nullptr)
        comm->peer_watch().set_step(fmt::format("epoch {} step {}", epoch, k + 1));
      if (ranks) sum_gradients();
      optimizer.step();
      phases.optimizer += phase.seconds();
      step_ms.push_back(step_clock.seconds() * 1e3);
    }
    if (ranks) comm->allreduce_sum(std::span<double>(&loss, 1));
    stats.train_loss = loss / static_cast<double>(counts[0]);
    check_finite(stats.train_loss, "training loss", epoch, config.adam.lr);
    stats.steps = static_cast<int>(step_ms.size());
    stats.step_ms = median(std::move(step_ms));
    stats.batch_wait_ms = median(std::move(wait_ms));
    stats.epoch_ms = epoch_clock.seconds() * 1e3;
    stats.seeds = seeds_trained;
    stats.sampled_edges = did.sampled_edges;
    stats.input_rows = did.input_rows;
    stats.cache_hits = did.cache_hits;
    stats.fetched_rows = did.fetched_rows;
    stats.batch_bytes = did.sample_bytes + did.feature_bytes;
    stats.batch_exchange_ms = 1e3 * (did.sample_exchange_seconds + did.feature_exchange_seconds) /
                              static_cast<double>(std::max<std::int64_t>(plan.steps, 1));
  };
  work.evaluate = [&](int, SplitMetrics(&shares)[3], BinaryScores*) {
    std::array<SplitMetrics, 3> m;
    if (evaluation.model != nullptr) {
      copy_weights(model, *evaluation.model);
      m = evaluate_node_classifier(backend, *evaluation.model, evaluation.features, labels,
                                   config.metric, evaluation.distribution);
    } else { // one process: every layer's block the whole graph
      std::vector<Csr> blocks;
      for (int i = 0; i < layers; ++i)
        blocks.push_back(to_backend(*whole, host));
      graph.set_blocks(std::move(blocks));
      m = evaluate_node_classifier(backend, model, whole_input, labels, config.metric);
    }
    for (int i = 0; i < 3; ++i) {
      shares[i] = m[static_cast<std::size_t>(i)];
      // The full-graph model's metrics are already over all ranks; run_epochs sums the shares:
      // rank 0's are the whole.
      if (ranks && comm->rank() != 0) shares[i].loss = shares[i].accuracy = 0.0;
    }
  };
  // Every rank ends training after the same step (an error aside): the sampling threads end
  // together (an error ends this one at once, ~BatchPrefetcher).
  try {
    TrainResult result = run_epochs(work, model, optimizer, comm, on_epoch, control);
    if (prefetcher) prefetcher->finish();
    return result;
  } catch (const TrainingStopped&) {
    if (prefetcher) prefetcher->finish();
    throw;
  }
}

} // namespace

TrainResult train_sampled_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                          ModelGraph& graph, RankSampler& sampler,
                                          const NodeLabels& labels, const TrainConfig& config,
                                          const MiniBatchConfig& batches,
                                          const FullGraphModel& evaluation,
                                          const std::function<void(const EpochStats&)>& on_epoch,
                                          const TrainControl& control) {
  return train_sampled(backend, model, graph, sampler, labels, config, batches, evaluation, nullptr,
                       {}, on_epoch, control);
}

TrainResult train_sampled_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                          ModelGraph& graph, const Csr& adjacency,
                                          const graph::Features& features, const NodeLabels& labels,
                                          const TrainConfig& config, const MiniBatchConfig& batches,
                                          const std::function<void(const EpochStats&)>& on_epoch,
                                          const TrainControl& control) {
  if (adjacency.rows() != adjacency.cols() || adjacency.rows() != features.rows()) {
    throw DimensionMismatch(fmt::format("sampled training: a graph of {} for features of {} rows",
                                        adjacency.shape(), features.rows()));
  }
  check_fanouts(batches.fanouts, graph.is_blocks() ? graph.block_layers() : 0);
  RankSampler sampler(RankGraph{&adjacency, {}, adjacency.rows(), nullptr}, features,
                      SamplerOptions{batches.fanouts, batches.replace, config.seed});
  return train_sampled(backend, model, graph, sampler, labels, config, batches, {}, &adjacency,
                       whole_input(features), on_epoch, control);
}

} // namespace tessera::gnn
