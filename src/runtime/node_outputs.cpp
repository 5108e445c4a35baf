// Predictions and embeddings out: every rank's owned rows of the chosen nodes in an evaluation
// step, sent to rank 0 with their global ids, put in node order and written as .npy or .npz.
#include "node_outputs.hpp"

#include "tessera/comm/failure.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/datasets/numpy_files.hpp"
#include "tessera/gnn/metrics.hpp"
#include "tessera/gnn/trainer.hpp"
#include "tessera/io/files.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <fmt/core.h>
#include <numeric>

namespace tessera::runtime {

std::string to_string(NodeSet nodes) {
  switch (nodes) {
  case NodeSet::All:
    return "all";
  case NodeSet::Train:
    return "train";
  case NodeSet::Val:
    return "val";
  case NodeSet::Test:
    return "test";
  }
  return "unknown";
}

NodeSet parse_node_set(const std::string& text) {
  for (const NodeSet nodes : {NodeSet::All, NodeSet::Train, NodeSet::Val, NodeSet::Test}) {
    if (text == to_string(nodes)) return nodes;
  }
  throw InvalidArgument("unknown node set '" + text + "'; valid: all, train, val, test");
}

namespace {

/// Rows of a matrix gathered from every rank: the global id of each row and its values.
struct GatheredRows {
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> labels; // -1 for a node without one
  std::vector<float> values;        // [ids.size(), cols]
  std::int64_t cols = 0;
};

/// This rank's owned rows of `nodes` (local ids, increasing).
std::vector<std::int32_t> chosen_rows(const partition::LocalGraph& tile, NodeSet nodes) {
  std::vector<std::int32_t> rows;
  switch (nodes) {
  case NodeSet::All:
    rows.resize(static_cast<std::size_t>(tile.n_owned()));
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
  case NodeSet::Train:
    rows = tile.train_idx;
    break;
  case NodeSet::Val:
    rows = tile.val_idx;
    break;
  case NodeSet::Test:
    rows = tile.test_idx;
    break;
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

/// Every rank's `rows` of `matrix` (host memory, [n_owned, cols]) on rank 0, sorted by global id
/// (empty elsewhere). Collective over `comm`.
GatheredRows gather_rows(comm::Communicator& comm, const partition::LocalGraph& tile,
                         std::span<const std::int32_t> rows, ConstDenseView<float> matrix) {
  const auto cols = static_cast<std::size_t>(matrix.cols);
  // This rank's part: a count, the ids, the labels, then the values.
  const std::int64_t count = static_cast<std::int64_t>(rows.size());
  const auto part_bytes = [cols](std::size_t n) {
    return sizeof(std::int64_t) * (1 + 2 * n) + sizeof(float) * n * cols;
  };
  std::vector<std::byte> part(part_bytes(rows.size()));
  std::byte* at = part.data();
  std::memcpy(at, &count, sizeof count);
  at += sizeof count;
  for (const std::int32_t r : rows) {
    const std::int64_t id = tile.owned_ids[static_cast<std::size_t>(r)];
    std::memcpy(at, &id, sizeof id);
    at += sizeof id;
  }
  for (const std::int32_t r : rows) {
    const std::int64_t label = tile.labels.empty() ? -1 : tile.labels[static_cast<std::size_t>(r)];
    std::memcpy(at, &label, sizeof label);
    at += sizeof label;
  }
  for (const std::int32_t r : rows) {
    std::memcpy(at, matrix.data + static_cast<std::size_t>(r) * cols, sizeof(float) * cols);
    at += sizeof(float) * cols;
  }
  GatheredRows all;
  all.cols = matrix.cols;
  if (comm.rank() != 0) {
    comm.send(part, 0, comm::tags::kNodeOutputs);
    return all;
  }
  std::vector<std::int64_t> ids, labels;
  std::vector<float> values;
  for (int peer = 0; peer < comm.size(); ++peer) {
    const std::vector<std::byte> bytes =
        peer == 0 ? std::move(part) : comm.receive(peer, comm::tags::kNodeOutputs);
    std::int64_t n = 0;
    if (bytes.size() >= sizeof n) std::memcpy(&n, bytes.data(), sizeof n);
    if (n < 0 || bytes.size() != part_bytes(static_cast<std::size_t>(n))) {
      throw FormatError(fmt::format("rank {} sent {} bytes of per-node outputs for {} rows of {} "
                                    "columns",
                                    peer, bytes.size(), n, cols));
    }
    const std::byte* from = bytes.data() + sizeof n;
    const std::size_t first = ids.size();
    ids.resize(first + static_cast<std::size_t>(n));
    std::memcpy(ids.data() + first, from, sizeof(std::int64_t) * static_cast<std::size_t>(n));
    from += sizeof(std::int64_t) * static_cast<std::size_t>(n);
    labels.resize(first + static_cast<std::size_t>(n));
    std::memcpy(labels.data() + first, from, sizeof(std::int64_t) * static_cast<std::size_t>(n));
    from += sizeof(std::int64_t) * static_cast<std::size_t>(n);
    values.resize(values.size() + static_cast<std::size_t>(n) * cols);
    std::memcpy(values.data() + first * cols, from,
                sizeof(float) * static_cast<std::size_t>(n) * cols);
  }
  std::vector<std::size_t> order(ids.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return ids[a] < ids[b]; });
  all.ids.resize(ids.size());
  all.labels.resize(ids.size());
  all.values.resize(values.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    all.ids[k] = ids[order[k]];
    all.labels[k] = labels[order[k]];
    std::copy_n(values.data() + order[k] * cols, cols, all.values.data() + k * cols);
  }
  return all;
}

/// Each row's softmax, computed in double.
std::vector<float> softmax_rows(const GatheredRows& logits) {
  const auto cols = static_cast<std::size_t>(logits.cols);
  std::vector<float> out(logits.values.size());
  for (std::size_t r = 0; r < logits.ids.size(); ++r) {
    const float* z = logits.values.data() + r * cols;
    const double top = *std::max_element(z, z + cols);
    double sum = 0.0;
    for (std::size_t c = 0; c < cols; ++c)
      sum += std::exp(static_cast<double>(z[c]) - top);
    for (std::size_t c = 0; c < cols; ++c)
      out[r * cols + c] = static_cast<float>(std::exp(static_cast<double>(z[c]) - top) / sum);
  }
  return out;
}

/// Each row's most probable class (the first of a tie).
std::vector<std::int64_t> argmax_rows(const GatheredRows& logits) {
  const auto cols = static_cast<std::size_t>(logits.cols);
  std::vector<std::int64_t> out(logits.ids.size());
  for (std::size_t r = 0; r < out.size(); ++r) {
    const float* z = logits.values.data() + r * cols;
    out[r] = std::max_element(z, z + cols) - z;
  }
  return out;
}

/// Runs `write` on rank 0; a failure there ends every rank with its message. Collective.
void write_on_root(comm::Communicator& comm, const std::function<void()>& write) {
  std::exception_ptr failure;
  if (comm.rank() == 0) {
    try {
      write();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  comm::share_failure(comm, 0, failure, "could not write the model's outputs");
}

std::vector<std::int64_t> shape_of(const GatheredRows& rows) {
  return {static_cast<std::int64_t>(rows.ids.size()), rows.cols};
}

} // namespace

void check_node_outputs(const NodeOutputs& outputs, int rank) {
  if (!outputs.weights.empty()) {
    if (!datasets::is_npz_path(outputs.weights)) {
      throw InvalidArgument("--export-weights " + outputs.weights +
                            ": expects a file ending in .npz (one array per parameter)");
    }
    if (rank == 0) io::check_output_file(outputs.weights);
  }
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string&>{"--predictions", outputs.predictions},
        {"--embeddings", outputs.embeddings}}) {
    if (path.empty()) continue;
    if (!datasets::is_npy_path(path) && !datasets::is_npz_path(path)) {
      throw InvalidArgument(fmt::format("{} {}: expects a file ending in .npy (one array) or .npz "
                                        "(arrays with the node ids)",
                                        flag, path));
    }
    if (rank == 0) io::check_output_file(path);
  }
  const std::pair<const char*, const std::string*> paths[] = {
      {"--predictions", &outputs.predictions},
      {"--embeddings", &outputs.embeddings},
      {"--export-weights", &outputs.weights}};
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = i + 1; j < 3; ++j) {
      if (!paths[i].second->empty() && *paths[i].second == *paths[j].second) {
        throw InvalidArgument(fmt::format("{} and {} name the same file '{}'", paths[i].first,
                                          paths[j].first, *paths[i].second));
      }
    }
  }
  if (outputs.embedding_layer < 0) {
    throw InvalidArgument(fmt::format("the embedding layer must be >= 1 (0: the last), got {}",
                                      outputs.embedding_layer));
  }
}

void check_embedding_layer(const NodeOutputs& outputs, const JobModel& m) {
  if (outputs.embeddings.empty()) return;
  const std::size_t layers = m.model.layer_ends().size();
  if (layers == 0 && !outputs.output_is_embedding) {
    throw InvalidArgument("--embeddings: the model has no hidden layer whose output is a "
                          "representation of the nodes (one graph layer maps the features to "
                          "the classes): use --predictions, or more layers");
  }
  if (static_cast<std::size_t>(outputs.embedding_layer) > layers) {
    throw InvalidArgument(fmt::format("--embedding-layer {}: the model has {} hidden layer(s) "
                                      "whose output is a representation (1..{})",
                                      outputs.embedding_layer, layers, layers));
  }
}

void write_node_outputs(const NodeOutputs& outputs, comm::Communicator& comm, const JobGraph& g,
                        JobModel& m, const Log& say) {
  if (outputs.predictions.empty() && outputs.embeddings.empty()) return;
  gnn::Distribution distribution;
  distribution.comm = m.device_comm.get();
  distribution.rows = RowIds{m.row_ids.data(), 0};
  const std::vector<std::int32_t> rows = chosen_rows(g.tile, outputs.nodes);
  const Input<float> input = input_of(m.input(g));
  const Backend& backend = *m.model_backend;
  std::vector<float> buffer;
  const std::string which =
      outputs.nodes == NodeSet::All ? "every node" : "the " + to_string(outputs.nodes) + " nodes";
  if (!outputs.predictions.empty()) {
    const ConstDenseView<float> logits =
        gnn::infer(m.model, input, 0, g.tile.n_owned(), &distribution);
    const GatheredRows all =
        gather_rows(comm, g.tile, rows, gnn::logits_on_host(backend, logits, buffer));
    write_on_root(comm, [&] {
      const std::vector<float> probabilities = softmax_rows(all);
      const std::vector<std::int64_t> shape = shape_of(all);
      if (datasets::is_npy_path(outputs.predictions)) {
        datasets::write_npy(outputs.predictions,
                            {"probabilities", shape, std::span<const float>(probabilities)});
      } else {
        const std::vector<std::int64_t> predicted = argmax_rows(all);
        const datasets::NumpyArray arrays[] = {
            {"node_id", {shape[0]}, std::span<const std::int64_t>(all.ids)},
            {"predicted", {shape[0]}, std::span<const std::int64_t>(predicted)},
            {"label", {shape[0]}, std::span<const std::int64_t>(all.labels)},
            {"probabilities", shape, std::span<const float>(probabilities)},
            {"logits", shape, std::span<const float>(all.values)}};
        datasets::write_npz(outputs.predictions, arrays);
      }
      say(fmt::format("predictions of {} ({} rows, {} classes) written to {}", which, shape[0],
                      shape[1], outputs.predictions));
    });
  }
  if (!outputs.embeddings.empty()) {
    // Layer 0 is the model's output where that is the representation (link prediction).
    const int layer = outputs.embedding_layer > 0 || outputs.output_is_embedding
                          ? outputs.embedding_layer
                          : static_cast<int>(m.model.layer_ends().size());
    const ConstDenseView<float> embeddings =
        gnn::infer(m.model, input, layer, g.tile.n_owned(), &distribution);
    const GatheredRows all =
        gather_rows(comm, g.tile, rows, gnn::logits_on_host(backend, embeddings, buffer));
    write_on_root(comm, [&] {
      const std::vector<std::int64_t> shape = shape_of(all);
      if (datasets::is_npy_path(outputs.embeddings)) {
        datasets::write_npy(outputs.embeddings,
                            {"embeddings", shape, std::span<const float>(all.values)});
      } else {
        const datasets::NumpyArray arrays[] = {
            {"node_id", {shape[0]}, std::span<const std::int64_t>(all.ids)},
            {"embeddings", shape, std::span<const float>(all.values)}};
        datasets::write_npz(outputs.embeddings, arrays);
      }
      say(fmt::format("embeddings of {} for {} ({} rows of {}) written to {}",
                      layer == 0 ? std::string("the encoder's output")
                                 : "layer " + std::to_string(layer),
                      which, shape[0], shape[1], outputs.embeddings));
    });
  }
}

void write_model_weights(const NodeOutputs& outputs, const CheckpointRun& run,
                         comm::Communicator& comm, const std::vector<Parameter<float>*>& parameters,
                         const Log& say) {
  if (outputs.weights.empty()) return;
  write_on_root(comm, [&] {
    std::vector<std::vector<float>> values(parameters.size());
    std::vector<datasets::NumpyArray> arrays;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const Parameter<float>& p = *parameters[i];
      values[i].resize(static_cast<std::size_t>(p.value.size()));
      p.value.backend()->copy_to_host(values[i].data(), p.value.data(),
                                      values[i].size() * sizeof(float));
      arrays.push_back(
          {p.name, {p.value.rows(), p.value.cols()}, std::span<const float>(values[i])});
    }
    const std::string text = run_json_text(run);
    arrays.push_back({"tessera_model",
                      {static_cast<std::int64_t>(text.size())},
                      std::span<const std::uint8_t>(
                          reinterpret_cast<const std::uint8_t*>(text.data()), text.size())});
    datasets::write_npz(outputs.weights, arrays);
    say(fmt::format("weights of {} ({} parameters) written to {}", run.model_name,
                    parameters.size(), outputs.weights));
  });
}

} // namespace tessera::runtime
