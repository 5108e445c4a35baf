// run_mlp_job: the data on every rank → the MLP and Adam → epochs of shuffled mini-batches over
// global sample ids, the gradients summed over ranks while backward runs → the result and its
// report. One path for any rank count.
#include "tessera/runtime/mlp_job.hpp"

#include "feature_range.hpp"
#include "job_graph.hpp"
#include "metric_report.hpp"
#include "model_memory.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/engine/data_parallel.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/gnn/metrics.hpp"
#include "tessera/io/files.hpp"
#include "tessera/runtime/offload_options.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>

namespace tessera::runtime {

namespace {

/// The stream of RngPurpose::Split that orders the batches (stream 0 is make_random_split's).
constexpr std::uint32_t kBatchOrderStream = 1;

/// Positions [⌊rank·m/ranks⌋, ⌊(rank+1)·m/ranks⌋) of `ids` (m of them): rank's contiguous share.
std::span<const std::int32_t> contiguous_share(std::span<const std::int32_t> ids, int rank,
                                               int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    throw InvalidArgument(
        fmt::format("rank {} of {} ranks: expects 0 <= rank < ranks", rank, ranks));
  }
  const auto m = static_cast<std::int64_t>(ids.size());
  const std::int64_t begin = rank * m / ranks;
  const std::int64_t end = (rank + 1) * m / ranks;
  return ids.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
}

} // namespace

// ---- BatchSchedule -----------------------------------------------------------------------------

BatchSchedule::BatchSchedule(std::vector<std::int32_t> train_ids, std::int64_t batch_size,
                             std::uint64_t seed)
    : order_(std::move(train_ids)), batch_size_(batch_size), seed_(seed) {
  if (order_.empty()) {
    throw InvalidArgument("the training split is empty: there are no samples to draw batches from");
  }
  if (batch_size < 1) {
    throw InvalidArgument("--batch-size must be >= 1, got " + std::to_string(batch_size));
  }
  std::sort(order_.begin(), order_.end());
}

void BatchSchedule::start_epoch(std::uint32_t epoch) {
  // A key per id, not per position: the order depends on the set of ids alone, so every rank
  // and every rank count draws it the same.
  const RngKey key = RngKey::make(seed_, RngPurpose::Split, kBatchOrderStream, epoch);
  keyed_.resize(order_.size());
  for (std::size_t i = 0; i < order_.size(); ++i) {
    const auto bits = random_bits4(key, order_[i], 0);
    keyed_[i] = {(std::uint64_t{bits[0]} << 32) | bits[1], order_[i]};
  }
  std::sort(keyed_.begin(), keyed_.end()); // ties (2^-64) broken by id: still deterministic
  for (std::size_t i = 0; i < order_.size(); ++i)
    order_[i] = keyed_[i].second;
}

std::int64_t BatchSchedule::num_batches() const noexcept {
  const auto n = static_cast<std::int64_t>(order_.size());
  return (n + batch_size_ - 1) / batch_size_;
}

std::span<const std::int32_t> BatchSchedule::batch(std::int64_t b) const {
  if (b < 0 || b >= num_batches()) {
    throw InvalidArgument(fmt::format("batch {} of an epoch of {} batches: expects 0 <= b < {}", b,
                                      num_batches(), num_batches()));
  }
  const auto n = static_cast<std::int64_t>(order_.size());
  const std::int64_t begin = b * batch_size_;
  const std::int64_t end = std::min(begin + batch_size_, n);
  return std::span<const std::int32_t>(order_).subspan(static_cast<std::size_t>(begin),
                                                       static_cast<std::size_t>(end - begin));
}

std::span<const std::int32_t> BatchSchedule::share(std::int64_t b, int rank, int ranks) const {
  return contiguous_share(batch(b), rank, ranks);
}

std::int64_t BatchSchedule::max_share(int ranks) const noexcept {
  const std::int64_t largest = std::min<std::int64_t>(batch_size_, std::ssize(order_));
  return (largest + ranks - 1) / std::max(ranks, 1);
}

// ---- the model ---------------------------------------------------------------------------------

MlpModel build_mlp(const BackendPtr& backend, const std::vector<std::int64_t>& layer_sizes,
                   float dropout, bool bias, std::uint64_t seed, const AdamConfig& adam) {
  if (layer_sizes.size() < 2) {
    throw InvalidArgument(fmt::format("an MLP needs at least an input and an output size, got {}",
                                      fmt::join(layer_sizes, "-")));
  }
  if (*std::min_element(layer_sizes.begin(), layer_sizes.end()) < 1) {
    throw InvalidArgument(
        fmt::format("MLP layer sizes must be >= 1, got {}", fmt::join(layer_sizes, "-")));
  }
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    throw InvalidArgument(fmt::format("--dropout must be in [0, 1), got {}", dropout));
  }
  MlpModel m;
  const std::size_t linears = layer_sizes.size() - 1;
  // Dropout before every Linear, as the GCN of Kipf & Welling (and their MLP baseline) does;
  // before the later ones it is fused with the ReLU. Mask streams are keyed by the index of
  // the Linear they feed, weights by the Linear's own.
  if (dropout > 0.0f) m.model.add(std::make_unique<Dropout<float>>(backend, dropout, 0));
  for (std::size_t i = 0; i < linears; ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    m.model.add(std::make_unique<Linear<float>>(backend, layer_sizes[i], layer_sizes[i + 1], bias,
                                                seed, layer));
    if (i + 1 == linears) break;
    if (dropout > 0.0f) {
      m.model.add(std::make_unique<ReluDropout<float>>(backend, dropout, layer + 1));
    } else {
      m.model.add(std::make_unique<Relu<float>>(backend));
    }
  }
  m.optimizer = std::make_unique<Adam<float>>(backend, m.model.parameters(), adam);
  return m;
}

namespace {

// ---- the data ----------------------------------------------------------------------------------

struct MlpData {
  datasets::Dataset ds; ///< features, labels and split in host memory; no graph
  bool normalized = false;
  double load_s = 0.0;
};

MlpData load_data(const MlpJob& job, const BackendPtr& host) {
  const Stopwatch clock;
  MlpData d;
  d.ds = datasets::load_dataset(host, job.dataset, job.load);
  if (d.ds.features.cols() == 0) {
    throw InvalidArgument("dataset '" + d.ds.name +
                          "' has no node features: an MLP classifies samples by their features "
                          "(--dataset)");
  }
  if (!d.ds.has_labels() || d.ds.num_classes < 1) {
    throw InvalidArgument("dataset '" + d.ds.name + "' has no labels to train a classifier on");
  }
  if (d.ds.num_classes < 2) {
    // One class: every prediction is right, and a 100% accuracy would say nothing.
    throw InvalidArgument("dataset '" + d.ds.name +
                          "' has 1 class: at least 2 are needed to train a classifier");
  }
  if (!datasets::use_default_split_when_missing(d.ds, job.split_seed.value_or(job.load.seed)) &&
      job.split_seed) {
    throw InvalidArgument("a split seed (--split-seed) draws a random split, but dataset '" +
                          d.ds.name + "' has its own: drop the split seed");
  }
  d.normalized = job.normalize_features.value_or(d.ds.row_normalize);
  if (d.normalized) datasets::row_normalize_features(d.ds.features);
  d.ds.adjacency = Csr(); // an MLP does not read the graph
  d.load_s = clock.seconds();
  return d;
}

/// {in, hidden..., classes} for the data; the errors name the flags that set them.
std::vector<std::int64_t> layer_sizes_for(const MlpJob& job, const datasets::Dataset& ds) {
  const std::int64_t in = ds.features.cols();
  const std::int64_t classes = ds.num_classes;
  if (job.metric == gnn::Metric::RocAuc && classes != 2) {
    throw InvalidArgument(fmt::format("ROC-AUC (--metric roc-auc) is for binary tasks; dataset "
                                      "'{}' has {} classes: use accuracy",
                                      ds.name, classes));
  }
  const std::vector<std::int64_t>& sizes = job.shape.layer_sizes;
  if (!sizes.empty() && (sizes.size() < 2 || sizes.front() != in || sizes.back() != classes)) {
    throw InvalidArgument(fmt::format("--layers {}: the first size must be the {} input features "
                                      "and the last the {} classes of dataset '{}'",
                                      fmt::join(sizes, "-"), in, classes, ds.name));
  }
  if (sizes.empty() && (job.shape.num_layers < 1 || job.shape.hidden < 1)) {
    throw InvalidArgument(fmt::format("--num-layers must be >= 1 and --hidden >= 1, got {} and {}",
                                      job.shape.num_layers, job.shape.hidden));
  }
  return job.shape.resolve(in, classes);
}

void check_job(const MlpJob& job) {
  if (job.epochs < 0)
    throw InvalidArgument(fmt::format("--epochs must be >= 0, got {}", job.epochs));
  if (job.batch_size < 1) {
    throw InvalidArgument(fmt::format("--batch-size must be >= 1, got {}", job.batch_size));
  }
  if (job.eval_every < 1) {
    throw InvalidArgument(fmt::format("--eval-every must be >= 1, got {}", job.eval_every));
  }
  if (!(job.adam.lr > 0.0f))
    throw InvalidArgument(fmt::format("--lr must be > 0, got {}", job.adam.lr));
  if (!(job.adam.weight_decay >= 0.0f)) {
    throw InvalidArgument(
        fmt::format("--weight-decay must be >= 0, got {}", job.adam.weight_decay));
  }
}

/// A batch's samples gathered into buffers on the backend, allocated once for `capacity` rows:
/// the input rows ([n, F], dense, or CSR for sparse features), their labels and global ids, and
/// the row list [0, n) the loss reads.
class BatchInput {
public:
  BatchInput(const BackendPtr& backend, const datasets::Dataset& data, std::int64_t capacity)
      : backend_(backend), data_(data), on_host_(backend->kind() == DeviceKind::Cpu),
        sample_rows_(backend, capacity), labels_(backend, capacity), global_ids_(backend, capacity),
        rows_(backend, capacity) {
    const graph::Features& f = data.features;
    if (f.dense) {
      // Dense features live where the kernels read them; the batch rows are gathered there.
      if (!on_host_) device_features_ = to_backend(*f.dense, backend);
      dense_ = on_host_ ? f.dense->cview() : device_features_.cview();
      input_ = Dense(backend, capacity, f.cols()); // [capacity, F]
    }
    std::vector<std::int32_t> iota(static_cast<std::size_t>(capacity));
    for (std::size_t i = 0; i < iota.size(); ++i)
      iota[i] = static_cast<std::int32_t>(i);
    backend->copy_from_host(rows_.data(), iota.data(), iota.size() * sizeof(std::int32_t));
    host_labels_.reserve(iota.size());
    host_ids_.reserve(iota.size());
  }

  /// Gathers `ids` (at most capacity of them) and returns their [n, F] input; labels(), rows()
  /// and row_ids() describe these n samples until the next gather.
  Input<float> gather(std::span<const std::int32_t> ids) {
    n_ = ids.size();
    host_labels_.clear();
    host_ids_.clear();
    for (const std::int32_t id : ids) {
      host_labels_.push_back(data_.labels[static_cast<std::size_t>(id)]);
      host_ids_.push_back(id);
    }
    backend_->copy_from_host(labels_.data(), host_labels_.data(), n_ * sizeof(std::int32_t));
    backend_->copy_from_host(global_ids_.data(), host_ids_.data(), n_ * sizeof(GlobalId));
    if (data_.features.sparse) return gather_sparse(ids);
    backend_->copy_from_host(sample_rows_.data(), ids.data(), n_ * sizeof(LocalId));
    const DenseView<float> x = input_.view().slice_rows(0, static_cast<std::int64_t>(n_));
    ops::gather_rows<float>(*backend_, dense_, std::span<const LocalId>(sample_rows_.data(), n_),
                            x);
    return Input<float>(ConstDenseView<float>(x));
  }

  std::span<const std::int32_t> labels() const noexcept { return {labels_.data(), n_}; }
  std::span<const std::int32_t> host_labels() const noexcept { return host_labels_; }
  std::span<const std::int32_t> rows() const noexcept { return {rows_.data(), n_}; }
  RowIds row_ids() const noexcept { return RowIds{global_ids_.data(), 0}; }

private:
  /// The batch's rows of the sparse features as a CSR of their own, built on the host and
  /// copied to a device backend (its buffers grow to the largest batch seen).
  Input<float> gather_sparse(std::span<const std::int32_t> ids) {
    const Csr& f = *data_.features.sparse;
    host_row_ptr_.assign(1, 0);
    host_col_.clear();
    host_val_.clear();
    for (const std::int32_t id : ids) {
      const Offset begin = f.row_ptr()[id], end = f.row_ptr()[id + 1];
      host_col_.insert(host_col_.end(), f.col() + begin, f.col() + end);
      host_val_.insert(host_val_.end(), f.val() + begin, f.val() + end);
      host_row_ptr_.push_back(static_cast<Offset>(host_col_.size()));
    }
    const auto nnz = static_cast<std::int64_t>(host_col_.size());
    CsrView<float> x{static_cast<std::int64_t>(n_), f.cols(), host_row_ptr_.data(),
                     host_col_.data(), host_val_.data()};
    if (on_host_) return Input<float>(x);
    if (device_row_ptr_.size() < std::ssize(host_row_ptr_)) {
      device_row_ptr_ = Buffer<Offset>(backend_, std::ssize(host_row_ptr_));
    }
    if (device_col_.size() < nnz) {
      device_col_ = Buffer<LocalId>(backend_, nnz);
      device_val_ = Buffer<float>(backend_, nnz);
    }
    backend_->copy_from_host(device_row_ptr_.data(), host_row_ptr_.data(),
                             host_row_ptr_.size() * sizeof(Offset));
    backend_->copy_from_host(device_col_.data(), host_col_.data(),
                             host_col_.size() * sizeof(LocalId));
    backend_->copy_from_host(device_val_.data(), host_val_.data(),
                             host_val_.size() * sizeof(float));
    x.row_ptr = device_row_ptr_.data();
    x.col = device_col_.data();
    x.val = device_val_.data();
    return Input<float>(x);
  }

  BackendPtr backend_;
  const datasets::Dataset& data_;
  bool on_host_;
  Dense device_features_;       // dense features on a device backend (empty on the CPU)
  ConstDenseView<float> dense_; // the dense features where the kernels read them
  Dense input_;                 // [capacity, F] the dense batch input
  Buffer<LocalId> sample_rows_; // [capacity] the batch's rows of the dense features
  Buffer<std::int32_t> labels_; // [capacity]
  Buffer<GlobalId> global_ids_; // [capacity] key the dropout masks
  Buffer<std::int32_t> rows_;   // [capacity] 0, 1, 2, ...: the loss reads every batch row
  std::vector<std::int32_t> host_labels_;
  std::vector<GlobalId> host_ids_;
  std::vector<Offset> host_row_ptr_; // the sparse batch: [n + 1]
  std::vector<LocalId> host_col_;    // [nnz]
  std::vector<float> host_val_;      // [nnz]
  Buffer<Offset> device_row_ptr_;
  Buffer<LocalId> device_col_;
  Buffer<float> device_val_;
  std::size_t n_ = 0;
};

/// Sums the weight gradients over the ranks in buckets as backward produces them; on one rank
/// there is nothing to sum.
class GradientSum {
public:
  GradientSum(comm::Communicator& comm, const BackendPtr& backend, Sequential<float>& model) {
    if (comm.size() > 1)
      parallel_ = std::make_unique<DataParallel>(comm, backend, model.parameters());
  }

  /// For Sequential::backward: called as each module's gradients are written.
  void ready(const Parameter<float>& p) {
    if (parallel_) parallel_->gradient_ready(p);
  }

  /// Waits for every sum; returns the seconds spent waiting. Collective.
  double finish() {
    if (!parallel_) return 0.0;
    parallel_->finish();
    return parallel_->last_wait_seconds();
  }

private:
  std::unique_ptr<DataParallel> parallel_;
};

/// What backward would hand DataParallel when this rank's share of a batch is empty: zero
/// gradients, in backward's order (modules last to first), so every rank marks the same
/// parameters in the same order.
void zero_gradients(Sequential<float>& model, const Backend& backend, GradientSum& sum) {
  const auto& modules = model.modules();
  for (auto module = modules.rbegin(); module != modules.rend(); ++module) {
    for (Parameter<float>* p : (*module)->parameters()) {
      Pins pins(model.memory());
      pins.add(p->grad.data(), p->grad.bytes(), Access::Write);
      backend.zero_bytes(p->grad.data(), p->grad.bytes());
      sum.ready(*p);
    }
  }
}

/// This rank's share of a split's metrics (its contiguous share of the split's ids, in chunks
/// of the batch capacity): loss and accuracy divided by the split's global size, so the shares
/// of all ranks sum to the split's metrics. With `scores`, each sample's binary score and label
/// are added to it too (for ROC-AUC).
gnn::SplitMetrics measure_share(Sequential<float>& model, BatchInput& input, const Backend& backend,
                                std::span<const std::int32_t> ids, double count, Step step,
                                std::int64_t chunk, gnn::BinaryScores* scores) {
  gnn::SplitMetrics share;
  std::vector<float> host_logits;
  for (std::size_t begin = 0; begin < ids.size(); begin += static_cast<std::size_t>(chunk)) {
    const auto part =
        ids.subspan(begin, std::min(ids.size() - begin, static_cast<std::size_t>(chunk)));
    const Input<float> x = input.gather(part);
    step.rows = input.row_ids();
    const ConstDenseView<float> logits = model.forward(step, x);
    share.loss +=
        ops::softmax_cross_entropy<float>(backend, logits, input.labels(), input.rows(), count, {});
    share.accuracy += static_cast<double>(ops::count_correct<float>(backend, logits, input.labels(),
                                                                    input.rows())) /
                      count;
    if (scores != nullptr) {
      scores->append(gnn::logits_on_host(backend, logits, host_logits), input.host_labels());
    }
  }
  return share;
}

/// The median of `values`, the first left out when there are others (it allocates).
double median_after_first(std::vector<double> values) {
  if (values.size() > 1) values.erase(values.begin());
  return median(std::move(values));
}

} // namespace

MlpResult run_mlp_job(const MlpJob& job, const std::function<void(const std::string&)>& log,
                      const std::function<void(const MlpEpoch&)>& on_epoch) {
  const std::shared_ptr<comm::Communicator> comm =
      job.comm != nullptr ? job.comm : comm::make_self_communicator();
  const int rank = comm->rank();
  const int ranks = comm->size();
  const auto say = [&](const std::string& line) {
    if (log && rank == 0) log(line);
  };
  check_job(job);
  const BackendPtr host = make_cpu_backend(job.threads);
  const BackendPtr backend = select_backend(job.device, comm->local_rank(), job.threads);
  say(ranks == 1 ? "backend: " + backend->describe()
                 : fmt::format("backend of rank 0: {}; {}", backend->describe(), comm->describe()));
  if (const std::string warning = blas_performance_warning(); !warning.empty()) {
    say("warning: " + warning);
  }

  comm->peer_watch().set_limit(job.peer_timeout);
  comm->peer_watch().set_step("loading the data");
  // Every rank loads the whole data set: any rank's batches reach any sample. A failure on one
  // rank (a file it cannot read) fails every rank with its message instead of a hang.
  MlpData data;
  std::vector<std::int64_t> sizes;
  std::exception_ptr failure;
  try {
    data = load_data(job, host);
    sizes = layer_sizes_for(job, data.ds);
    // Before the model is built: a width from the data or a flag that no memory holds is refused
    // naming it. Each rank holds one batch share of activations.
    if (job.offload.offload_dir.empty()) {
      check_model_memory(sizes, std::min<std::int64_t>(job.batch_size, data.ds.num_nodes), 0.0,
                         {data.ds.origin.features,
                          job.shape.layer_sizes.empty() ? "--hidden" : "--layers", "--batch-size"});
    }
  } catch (...) {
    failure = std::current_exception();
  }
  share_first_failure(*comm, failure, "could not prepare the data");
  const datasets::Dataset& ds = data.ds;
  const std::string features_note =
      describe_extreme_features(max_abs_feature(ds.features), data.normalized);
  if (!features_note.empty()) say("warning: " + features_note);
  say(fmt::format("dataset {}: {} samples, {} {} features{}, {} classes; {} train, {} val, {} test",
                  ds.name, ds.num_nodes, ds.features.cols(),
                  ds.features.is_sparse() ? "sparse" : "dense",
                  data.normalized ? " (row-normalized)" : "", ds.num_classes, ds.train_idx.size(),
                  ds.val_idx.size(), ds.test_idx.size()));

  const Stopwatch setup_clock;
  // With a budget or a tier the model lives in chunks: one manager per rank, each its own budget.
  std::unique_ptr<ChunkManager> memory;
  if (uses_chunks(job.offload)) {
    OffloadConfig config = job.offload;
    config.rank = rank;
    memory = std::make_unique<ChunkManager>(backend, config);
    say(describe_memory(*memory));
  }
  const BackendPtr model_backend = memory ? memory->allocator(TensorKind::Activation) : backend;
  MlpModel m = build_mlp(model_backend, sizes, job.dropout, job.bias, job.seed, job.adam);
  m.model.use_memory(memory.get());
  BatchSchedule schedule(ds.train_idx, job.batch_size, job.seed);
  const std::int64_t capacity = schedule.max_share(ranks);
  BatchInput input(backend, ds, capacity);
  Dense d_logits(backend, capacity, ds.num_classes); // [capacity, classes]
  GradientSum gradient_sum(*comm, model_backend, m.model);
  const double setup_s = setup_clock.seconds();
  say(fmt::format(
      "model MLP {}: {} parameters, {:.1f} MiB with Adam's state (built in {:.2f} s)\n{}",
      fmt::join(sizes, "-"), m.model.num_parameters(),
      static_cast<double>(m.model.bytes() + m.optimizer->bytes()) / (1 << 20), setup_s,
      m.model.summary()));
  say(fmt::format("{} steps per epoch of a global batch of {}{}", schedule.num_batches(),
                  job.batch_size,
                  ranks > 1 ? fmt::format(" ({} ranks, at most {} samples each)", ranks, capacity)
                            : std::string()));

  MlpResult result;
  result.job = job;
  result.job.comm = nullptr;
  const Backend& be = *backend;
  const auto count = [](const std::vector<std::int32_t>& ids) {
    return static_cast<double>(ids.size());
  };
  const double train_count = count(ds.train_idx);
  std::vector<double> all_steps_ms;
  if (job.metric == gnn::Metric::RocAuc) {
    // Every rank holds the whole dataset: no collective.
    gnn::check_roc_auc_splits(ds.labels, {ds.val_idx, ds.test_idx}, nullptr);
  }
  gnn::EpochWork work;
  work.epochs = job.epochs;
  work.eval_every = job.eval_every;
  work.metric = job.metric;
  work.train_rows = std::ssize(ds.train_idx);
  work.val_rows = std::ssize(ds.val_idx);
  work.test_rows = std::ssize(ds.test_idx);
  work.lr = job.adam.lr;
  work.divergence_note = features_note;
  work.train = [&](int epoch, MlpEpoch& stats, gnn::PhaseTimes&) {
    stats.steps = static_cast<int>(schedule.num_batches());
    schedule.start_epoch(static_cast<std::uint32_t>(epoch));
    std::vector<double> steps_ms;
    double loss_share = 0.0, wait_s = 0.0;
    comm->peer_watch().set_step(fmt::format("epoch {}", epoch));
    const Stopwatch epoch_clock;
    for (std::int64_t b = 0; b < schedule.num_batches(); ++b) {
      const Stopwatch step_clock;
      const std::span<const std::int32_t> ids = schedule.share(b, rank, ranks);
      const auto batch_count = static_cast<double>(schedule.batch(b).size());
      if (!ids.empty()) {
        const Input<float> x = input.gather(ids);
        const Step step{job.seed, static_cast<std::uint32_t>(epoch), true, input.row_ids()};
        const ConstDenseView<float> logits = m.model.forward(step, x);
        const DenseView<float> d = d_logits.view().slice_rows(0, logits.rows);
        // Divided by the global batch size: the ranks' gradients sum to the batch's gradient.
        loss_share += ops::softmax_cross_entropy<float>(be, logits, input.labels(), input.rows(),
                                                        batch_count, d) *
                      batch_count / train_count;
        m.model.backward(d, GradientMode::Overwrite,
                         [&](const Parameter<float>& p) { gradient_sum.ready(p); });
      } else {
        zero_gradients(m.model, be, gradient_sum);
      }
      wait_s += gradient_sum.finish();
      m.optimizer->step();
      steps_ms.push_back(step_clock.seconds() * 1e3);
    }
    be.synchronize();
    stats.epoch_ms = epoch_clock.seconds() * 1e3;
    stats.step_ms = median(steps_ms);
    stats.comm_ms = wait_s * 1e3;
    all_steps_ms.insert(all_steps_ms.end(), steps_ms.begin(), steps_ms.end());
    comm->allreduce_sum(std::span<double>(&loss_share, 1));
    stats.train_loss = loss_share;
    gnn::check_finite(stats.train_loss, "training loss", epoch, job.adam.lr, features_note);
  };
  work.evaluate = [&](int epoch, gnn::SplitMetrics(&shares)[3], gnn::BinaryScores* scores) {
    const Step eval{job.seed, static_cast<std::uint32_t>(epoch), false, {}};
    const std::vector<std::int32_t>* splits[3] = {&ds.train_idx, &ds.val_idx, &ds.test_idx};
    for (int i = 0; i < 3; ++i) {
      shares[i] = measure_share(m.model, input, be, contiguous_share(*splits[i], rank, ranks),
                                count(*splits[i]), eval, capacity,
                                scores != nullptr ? &scores[i] : nullptr);
    }
  };
  gnn::TrainResult trained = gnn::run_epochs(work, m.model, *m.optimizer, comm.get(), on_epoch);
  result.history = std::move(trained.history);
  result.best_epoch = trained.best_epoch;
  result.best_val = trained.best_val;
  result.test_at_best_val = trained.test_at_best_val;
  result.final_test = trained.final_test;

  result.dataset = ds.name;
  result.samples = ds.num_nodes;
  result.features = ds.features.cols();
  result.classes = ds.num_classes;
  result.sparse_features = ds.features.is_sparse();
  result.normalized_features = data.normalized;
  result.train_samples = std::ssize(ds.train_idx);
  result.val_samples = std::ssize(ds.val_idx);
  result.test_samples = std::ssize(ds.test_idx);
  result.layer_sizes = sizes;
  result.parameters = m.model.num_parameters();
  result.model_summary = m.model.summary();
  result.model_bytes = static_cast<std::int64_t>(m.model.bytes());
  result.optimizer_bytes = static_cast<std::int64_t>(m.optimizer->bytes());
  result.backend = backend->describe();
  result.threads = backend->num_threads();
  result.blas_core = blas_core_name();
  result.ranks = ranks;
  result.communicator = comm->describe();
  result.steps_per_epoch = schedule.num_batches();
  // The slowest rank sets the pace of a data-parallel step.
  double slowest[] = {median_after_first(all_steps_ms), data.load_s, setup_s,
                      static_cast<double>(peak_rss_bytes())};
  comm->allreduce_max(std::span<double>(slowest));
  result.median_step_ms = slowest[0];
  result.load_s = slowest[1];
  result.setup_s = slowest[2];
  result.peak_rss_bytes = static_cast<std::int64_t>(slowest[3]);
  if (memory) {
    result.offloaded = true;
    result.device_slots = memory->device_slots();
    result.offload = memory->total();
  }
  const auto batch =
      static_cast<double>(std::min<std::int64_t>(job.batch_size, result.train_samples));
  result.samples_per_s = result.median_step_ms > 0.0 ? batch / (result.median_step_ms / 1e3) : 0.0;
  return result;
}

// ---- the report ------------------------------------------------------------------------------

std::string mlp_report_json(const MlpResult& r) {
  RunReport report;
  const MlpJob& job = r.job;
  report.set("format", kReportFormat);
  report.set("config.program", "tessera-mlp");
  report.set("config.dataset", job.dataset);
  report.set("config.layer_sizes", std::vector<double>(r.layer_sizes.begin(), r.layer_sizes.end()));
  report.set("config.dropout", static_cast<double>(job.dropout));
  report.set("config.bias", job.bias);
  report.set("config.epochs", job.epochs);
  report.set("config.batch_size", job.batch_size);
  report.set("config.lr", static_cast<double>(job.adam.lr));
  report.set("config.weight_decay", static_cast<double>(job.adam.weight_decay));
  report.set("config.optimizer", job.adam.decoupled ? "adamw" : "adam");
  report.set("config.seed", static_cast<std::int64_t>(job.seed));
  report.set("config.eval_every", job.eval_every);
  report.set("config.metric", gnn::to_string(job.metric));
  report.set("config.normalize_features", r.normalized_features);
  report.set("backend", r.backend);
  report.set("threads", r.threads);
  report.set("blas_core", r.blas_core);
  report.set("dataset.name", r.dataset);
  report.set("dataset.samples", r.samples);
  report.set("dataset.features", r.features);
  report.set("dataset.sparse_features", r.sparse_features);
  report.set("dataset.classes", r.classes);
  report.set("dataset.train_samples", r.train_samples);
  report.set("dataset.val_samples", r.val_samples);
  report.set("dataset.test_samples", r.test_samples);
  report.set("model.parameters", r.parameters);
  report.set("memory.model_bytes", r.model_bytes);
  report.set("memory.optimizer_bytes", r.optimizer_bytes);
  report.set("memory.peak_rss_bytes", r.peak_rss_bytes);
  report.set("memory.offloaded", r.offloaded);
  if (r.offloaded) set_offload_report(report, "memory", job.offload, r.offload);
  report.set("distributed.ranks", r.ranks);
  report.set("distributed.communicator", r.communicator);
  report.set("timing.steps_per_epoch", r.steps_per_epoch);
  report.set("timing.step_ms_median", r.median_step_ms);
  report.set("timing.samples_per_s", r.samples_per_s);
  report.set("timing.load_s", r.load_s);
  report.set("timing.setup_s", r.setup_s);
  report_final_metrics(report,
                       {r.best_val, r.test_at_best_val, r.final_test, r.best_epoch,
                        r.history.empty() ? 0.0 : r.history.back().train_loss, r.val_samples > 0,
                        r.history.empty() ? 0 : static_cast<int>(r.history.back().epoch),
                        r.test_samples > 0});
  for (const MlpEpoch& e : r.history) {
    ReportFields fields{{"epoch", e.epoch},
                        {"loss", e.train_loss},
                        {"epoch_ms", e.epoch_ms},
                        {"step_ms", e.step_ms},
                        {"comm_ms", e.comm_ms}};
    add_epoch_fields(fields, e.train, e.val, e.test, e.offload);
    report.append("epochs", fields);
  }
  return report.dump() + "\n";
}

void write_mlp_report(const MlpResult& result, const std::string& path) {
  io::write_text_file(path, mlp_report_json(result));
}

} // namespace tessera::runtime
