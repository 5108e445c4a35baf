// Sampled mini-batch training: batches of seeds, their blocks, a step each; full-graph
// evaluation.
#include "tessera/gnn/minibatch.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/optimizer.hpp"
#include "tessera/ops/ops.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/core.h>
#include <numeric>

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

/// The rows `nodes` of `features` (host) as a dense [nodes, F] matrix on `backend`, in `out`
/// (grown, never shrunk: a batch's fresh memory would cost its first touch every step).
ConstDenseView<float> gather_rows(const Backend& backend, const graph::Features& features,
                                  std::span<const GlobalId> nodes, std::vector<float>& host,
                                  Workspace<float>& out) {
  const std::int64_t f = features.cols();
  host.assign(static_cast<std::size_t>(static_cast<std::int64_t>(nodes.size()) * f), 0.0f);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    float* row = host.data() + static_cast<std::int64_t>(i) * f;
    if (features.dense) {
      const float* from = features.dense->data() + nodes[i] * f;
      std::copy(from, from + f, row);
    } else {
      const Csr& s = *features.sparse;
      for (Offset k = s.row_ptr()[nodes[i]]; k < s.row_ptr()[nodes[i] + 1]; ++k)
        row[s.col()[k]] = s.val()[k];
    }
  }
  const DenseView<float> x = out.get(static_cast<std::int64_t>(nodes.size()), f);
  backend.copy_from_host(x.data, host.data(), host.size() * sizeof(float));
  return x;
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

} // namespace

TrainResult train_sampled_node_classifier(const BackendPtr& backend, Sequential<float>& model,
                                          ModelGraph& graph, const Csr& adjacency,
                                          const graph::Features& features, const NodeLabels& labels,
                                          const TrainConfig& config, const MiniBatchConfig& batches,
                                          const std::function<void(const EpochStats&)>& on_epoch,
                                          const TrainControl& control) {
  if (!graph.is_blocks()) {
    throw InvalidArgument("sampled training needs a model built on ModelGraph::blocks");
  }
  const int layers = graph.block_layers();
  check_fanouts(batches.fanouts, layers);
  if (batches.batch_size < 1) {
    throw InvalidArgument(fmt::format("the batch size must be >= 1, got {}", batches.batch_size));
  }
  if (labels.train.empty()) throw InvalidArgument("no training node to draw batches from");
  if (batches.batch_size > static_cast<std::int64_t>(labels.train.size())) {
    throw InvalidArgument(fmt::format("the batch size {} is larger than the training set ({} "
                                      "nodes): every batch would be the whole set; give at most "
                                      "{}",
                                      batches.batch_size, labels.train.size(),
                                      labels.train.size()));
  }
  if (adjacency.rows() != adjacency.cols() || adjacency.rows() != features.rows()) {
    throw DimensionMismatch(fmt::format("sampled training: a graph of {} for features of {} rows",
                                        adjacency.shape(), features.rows()));
  }
  const BackendPtr host = adjacency.backend();
  const std::vector<GlobalId> train(labels.train.begin(), labels.train.end());
  const SamplerOptions sampler{batches.fanouts, batches.replace, config.seed};
  Adam<float> optimizer(backend, model.parameters(), config.adam);
  Workspace<float> x(backend), d_logits(backend); // the largest batch's, reused
  std::vector<float> host_x;
  std::vector<std::int32_t> batch_labels, batch_rows;
  Buffer<std::int32_t> labels_buffer, rows_buffer;
  Buffer<GlobalId> ids_buffer;
  const auto full_graph = [&] { // every layer's block the whole graph
    std::vector<Csr> whole;
    for (int i = 0; i < layers; ++i)
      whole.push_back(to_backend(adjacency, host));
    graph.set_blocks(std::move(whole));
  };

  EpochWork work;
  work.epochs = config.epochs;
  work.eval_every = config.eval_every;
  work.metric = config.metric;
  work.gathers_scores = false; // evaluate_node_classifier measures ROC-AUC itself
  work.train_rows = static_cast<std::int64_t>(labels.train.size());
  work.val_rows = static_cast<std::int64_t>(labels.val.size());
  work.test_rows = static_cast<std::int64_t>(labels.test.size());
  work.lr = config.adam.lr;
  work.train = [&](int epoch, EpochStats& stats, PhaseTimes& phases) {
    const Stopwatch epoch_clock;
    std::vector<double> step_ms;
    double loss = 0.0;
    const auto e = static_cast<std::uint32_t>(epoch);
    for (const std::vector<GlobalId>& seeds :
         seed_batches(train, batches.batch_size, config.seed, e)) {
      const Stopwatch step_clock;
      Stopwatch phase;
      const SampledBatch batch = sample_blocks(adjacency, seeds, sampler, e);
      std::vector<Csr> blocks;
      for (const Block& b : batch.blocks)
        blocks.push_back(block_matrix(host, b));
      graph.set_blocks(std::move(blocks));
      const ConstDenseView<float> inputs =
          gather_rows(*backend, features, batch.input_nodes(), host_x, x);
      const std::span<const GlobalId> ids = on_backend(backend, batch.input_nodes(), ids_buffer);
      const Step step{config.seed, e, true, RowIds{ids.data(), 0}};
      const ConstDenseView<float> logits = model.forward(step, inputs);
      phases.forward += phase.seconds();
      phase.restart();
      const auto n = static_cast<std::int64_t>(seeds.size());
      batch_labels.resize(seeds.size());
      batch_rows.resize(seeds.size());
      for (std::size_t i = 0; i < seeds.size(); ++i) {
        batch_labels[i] = labels.labels[static_cast<std::size_t>(seeds[i])];
        batch_rows[i] = static_cast<std::int32_t>(i);
      }
      const DenseView<float> d_out = d_logits.get(logits.rows, logits.cols);
      const double batch_loss = ops::softmax_cross_entropy<float>(
          *backend, logits, on_backend<std::int32_t>(backend, batch_labels, labels_buffer),
          on_backend<std::int32_t>(backend, batch_rows, rows_buffer), static_cast<double>(n),
          d_out);
      phases.loss += phase.seconds();
      phase.restart();
      model.backward(d_out);
      phases.backward += phase.seconds();
      check_finite(batch_loss, "training loss", epoch, config.adam.lr);
      phase.restart();
      optimizer.step();
      phases.optimizer += phase.seconds();
      loss += batch_loss * static_cast<double>(n);
      step_ms.push_back(step_clock.seconds() * 1e3);
    }
    stats.train_loss = loss / static_cast<double>(train.size());
    stats.steps = static_cast<int>(step_ms.size());
    std::sort(step_ms.begin(), step_ms.end());
    stats.step_ms = step_ms[step_ms.size() / 2];
    stats.epoch_ms = epoch_clock.seconds() * 1e3;
  };
  work.evaluate = [&](int, SplitMetrics(&shares)[3], BinaryScores*) {
    full_graph();
    const std::array<SplitMetrics, 3> m =
        evaluate_node_classifier(backend, model, whole_input(features), labels, config.metric);
    for (int i = 0; i < 3; ++i)
      shares[i] = m[static_cast<std::size_t>(i)];
  };
  return run_epochs(work, model, optimizer, nullptr, on_epoch, control);
}

} // namespace tessera::gnn
