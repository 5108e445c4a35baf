// ModelGraph: aggregation matrices built on demand, and one halo exchange per aggregating layer.
#include "tessera/gnn/model_graph.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/graph/graph.hpp"

#include <fmt/core.h>
#include <iterator>

namespace tessera::gnn {

ModelGraph::ModelGraph(BackendPtr backend, Csr adjacency, std::int64_t in_features,
                       std::int64_t classes)
    : backend_(std::move(backend)), adjacency_(std::move(adjacency)), in_features_(in_features),
      classes_(classes), n_owned_(adjacency_.rows()), n_local_(adjacency_.cols()), n_interior_(0),
      input_has_ghost_rows_(true) {
  if (adjacency_.rows() != adjacency_.cols()) {
    throw DimensionMismatch("the graph's adjacency must be square, got " + adjacency_.shape());
  }
}

ModelGraph::ModelGraph(BackendPtr backend, Csr adjacency, std::vector<std::int64_t> degree,
                       std::int64_t in_features, std::int64_t classes,
                       std::shared_ptr<comm::Communicator> comm,
                       std::shared_ptr<const comm::HaloPlan> plan, std::int64_t n_interior,
                       bool input_has_ghost_rows)
    : backend_(std::move(backend)), adjacency_(std::move(adjacency)), degree_(std::move(degree)),
      in_features_(in_features), classes_(classes), comm_(std::move(comm)), plan_(std::move(plan)),
      n_owned_(adjacency_.rows()), n_local_(adjacency_.cols()), n_interior_(n_interior),
      input_has_ghost_rows_(input_has_ghost_rows) {
  if (plan_ == nullptr || comm_ == nullptr || plan_->n_owned() != n_owned_ ||
      plan_->n_local() != n_local_ || static_cast<std::int64_t>(degree_.size()) != n_local_ ||
      n_interior < 0 || n_interior > n_owned_) {
    throw DimensionMismatch(
        "tile adjacency " + adjacency_.shape() + " with " + std::to_string(degree_.size()) +
        " degrees and " + std::to_string(n_interior) + " interior rows does not fit its halo plan");
  }
}

ModelGraph::Built& ModelGraph::build(AggregationKind kind) {
  const auto index = static_cast<std::size_t>(kind);
  if (index >= std::size(built_)) throw InvalidArgument("unknown aggregation kind");
  Built& b = built_[index];
  if (b.ready) return b;
  if (adjacency_.rows() == 0 && n_owned_ > 0) {
    throw InvalidArgument("the graph's adjacency was released: ask for every matrix while "
                          "building the model");
  }
  switch (kind) {
  case AggregationKind::Gcn:
  case AggregationKind::Attention:
    b.host = block_            ? graph::gcn_normalize_block(adjacency_)
             : degree_.empty() ? graph::gcn_normalize(adjacency_)
                               : graph::gcn_normalize_tile(adjacency_, degree_);
    break;
  case AggregationKind::Mean:
    b.host = graph::mean_aggregation(adjacency_);
    break;
  case AggregationKind::Sum:
    b.host = graph::sum_aggregation(adjacency_);
    break;
  }
  // Without ghost rows the rows and columns are the same vertices: Â and A of an undirected
  // graph are symmetric there (on one process, or a tile no edge leaves); D⁻¹A is not.
  b.symmetric = !block_ && n_local_ == n_owned_ && kind != AggregationKind::Mean &&
                kind != AggregationKind::Attention;
  const BackendPtr memory =
      in_backend_memory() ? memory_for(backend_, TensorKind::Matrix) : b.host.backend();
  if (kind == AggregationKind::Attention) {
    std::vector<Offset> edge_of;
    b.host_t = graph::transpose(b.host, edge_of);
    b.edge_of = Buffer<Offset>(memory, static_cast<std::int64_t>(edge_of.size()));
    memory->copy_from_host(b.edge_of.data(), edge_of.data(), edge_of.size() * sizeof(Offset));
  } else if (!b.symmetric) {
    b.host_t = graph::transpose(b.host);
  }
  if (in_backend_memory()) {
    b.device = to_backend(b.host, memory);
    b.host = Csr();
    if (!b.symmetric) {
      b.device_t = to_backend(b.host_t, memory);
      b.host_t = Csr();
    }
  }
  b.ready = true;
  return b;
}

bool ModelGraph::in_backend_memory() const noexcept {
  return backend_->kind() != DeviceKind::Cpu || manager_of(backend_) != nullptr;
}

std::unique_ptr<ModelGraph> ModelGraph::blocks(BackendPtr backend, int layers,
                                               std::int64_t in_features, std::int64_t classes) {
  if (layers < 1) throw InvalidArgument("mini-batch graphs need at least one layer");
  const BackendPtr host = make_cpu_backend(); // blocks arrive in host memory
  auto set = std::make_unique<ModelGraph>(backend, Csr(host, 0, 0, 0), in_features, classes);
  for (int i = 0; i < layers; ++i) {
    auto g = std::make_unique<ModelGraph>(backend, Csr(host, 0, 0, 0), in_features, classes);
    g->block_ = true;
    set->layers_.push_back(std::move(g));
  }
  return set;
}

ModelGraph& ModelGraph::layer(int i) {
  if (layers_.empty()) return *this;
  if (i < 0 || i >= static_cast<int>(layers_.size())) {
    throw InvalidArgument(
        fmt::format("graph layer {} of a model on {} mini-batch blocks", i, layers_.size()));
  }
  return *layers_[static_cast<std::size_t>(i)];
}

void ModelGraph::set_blocks(std::vector<Csr> blocks) {
  if (layers_.empty()) throw InvalidArgument("set_blocks: not a set of mini-batch graphs");
  if (blocks.size() != layers_.size()) {
    throw InvalidArgument(
        fmt::format("{} blocks for a model of {} graph layers", blocks.size(), layers_.size()));
  }
  for (std::size_t i = 0; i + 1 < blocks.size(); ++i) {
    if (blocks[i].rows() != blocks[i + 1].cols()) {
      throw DimensionMismatch(fmt::format("block {} has {} destinations, block {} reads {} "
                                          "sources: they do not chain",
                                          i, blocks[i].rows(), i + 1, blocks[i + 1].cols()));
    }
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    ModelGraph& g = *layers_[i];
    g.adjacency_ = std::move(blocks[i]);
    g.n_owned_ = g.adjacency_.rows();
    g.n_local_ = g.adjacency_.cols();
    for (std::size_t k = 0; k < std::size(g.built_); ++k) {
      if (!g.built_[k].ready) continue;
      g.built_[k].ready = false; // rebuilt into the same matrices the layers hold
      g.build(static_cast<AggregationKind>(k));
    }
  }
}

const Csr& ModelGraph::matrix(AggregationKind kind) {
  Built& b = build(kind);
  return in_backend_memory() ? b.device : b.host;
}

const Csr& ModelGraph::transpose(AggregationKind kind) {
  Built& b = build(kind);
  if (b.symmetric) return matrix(kind);
  return in_backend_memory() ? b.device_t : b.host_t;
}

const Buffer<Offset>& ModelGraph::transpose_edges(AggregationKind kind) {
  return build(kind).edge_of;
}

comm::LayerExchange<float>* ModelGraph::halo(int layer) {
  if (layer < 0) throw InvalidArgument("halo: negative layer index " + std::to_string(layer));
  if (!distributed() || (layer == 0 && input_has_ghost_rows_)) return nullptr;
  if (static_cast<int>(halos_.size()) <= layer) halos_.resize(static_cast<std::size_t>(layer) + 1);
  auto& h = halos_[static_cast<std::size_t>(layer)];
  if (h == nullptr) {
    // Its staging buffers stay out of the chunks: messages land in them at any time. Under a
    // budget its waits bring in the chunks the epoch's trace needs next.
    ChunkManager* memory = manager_of(backend_);
    h = comm::make_layer_exchange<float>(comm_, plan_,
                                         memory != nullptr ? memory->backend() : backend_, layer,
                                         exchange_options(layer));
    if (memory != nullptr) h->set_idle_work([memory] { return memory->work_ahead(); });
  }
  return h.get();
}

void ModelGraph::set_exchange_options(const comm::ExchangeOptions& options) {
  options.validate();
  for (const auto& h : halos_) {
    if (h != nullptr) {
      throw InvalidArgument("set the exchange options before building the model: layer "
                            "exchanges were already made");
    }
  }
  exchange_ = options;
  layer_exchange_.clear();
}

void ModelGraph::set_exchange_options(const comm::ExchangeOptions& options, int layer) {
  if (layer < 0) throw InvalidArgument("negative layer index " + std::to_string(layer));
  options.validate();
  if (halo_of(layer) != nullptr) {
    throw InvalidArgument("set layer " + std::to_string(layer) +
                          "'s exchange options before building the model: its exchange was "
                          "already made");
  }
  const auto i = static_cast<std::size_t>(layer);
  if (layer_exchange_.size() <= i) layer_exchange_.resize(i + 1);
  layer_exchange_[i] = options;
}

const comm::ExchangeOptions& ModelGraph::exchange_options(int layer) const {
  const auto i = static_cast<std::size_t>(layer);
  if (layer >= 0 && i < layer_exchange_.size() && layer_exchange_[i]) return *layer_exchange_[i];
  return exchange_;
}

const comm::LayerExchange<float>* ModelGraph::halo_of(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(halos_.size())) return nullptr;
  return halos_[static_cast<std::size_t>(layer)].get();
}

comm::HaloStats ModelGraph::halo_totals() const {
  comm::HaloStats sum;
  for (const auto& h : halos_) {
    if (h != nullptr) sum += h->stats();
  }
  return sum;
}

std::size_t ModelGraph::bytes() const {
  std::size_t total = adjacency_.bytes();
  for (const Built& b : built_) {
    total += b.host.bytes() + b.host_t.bytes() + b.device.bytes() + b.device_t.bytes() +
             b.edge_of.bytes();
  }
  return total;
}

} // namespace tessera::gnn
