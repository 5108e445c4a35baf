// Building the GCN of Kipf & Welling from a layer-size list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/gcn_conv.hpp"
#include "tessera/gnn/model_graph.hpp"

namespace tessera::gnn {

/// Architecture of a GCN: [in, hidden..., classes], dropout before every convolution, ReLU
/// between convolutions.
struct GcnConfig {
  std::vector<std::int64_t> layer_sizes;
  float dropout = 0.5f;
  bool bias = true;
  GcnOrder order = GcnOrder::Auto;
  /// Kipf & Welling (and PyG's example) decay only the first layer's weights.
  bool decay_first_layer_only = true;
};

/// Parses "1433-16-7" into {1433, 16, 7}. Throws InvalidArgument on malformed text.
std::vector<std::int64_t> parse_layer_sizes(const std::string& text);

/// {in, hidden × (num_layers - 1), classes}.
std::vector<std::int64_t> layer_sizes(std::int64_t in, std::int64_t hidden, int num_layers,
                                      std::int64_t classes);

/// Dropout → GCNConv → ReLU+Dropout → ... → GCNConv over Â (and Âᵀ, the same object for a
/// symmetric graph). Weights are initialized from `seed`.
template <typename T>
Sequential<T> build_gcn(const BackendPtr& backend, const CsrT<T>& adjacency,
                        const CsrT<T>& adjacency_t, const GcnConfig& config, std::uint64_t seed);

/// The same GCN on a model graph (one process or one rank's tile): convolution i aggregates
/// with graph.matrix(AggregationKind::Gcn) and exchanges through graph.halo(i).
Sequential<float> build_gcn(ModelGraph& graph, const GcnConfig& config, std::uint64_t seed);

}  // namespace tessera::gnn
