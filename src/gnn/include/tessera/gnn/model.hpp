// What a graph model is built from — its widths, settings shared by every model, the seed — and
// the GCN of Kipf & Welling built from them.
#pragma once

#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/gcn_conv.hpp"
#include "tessera/gnn/model_graph.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera::gnn {

/// A model's widths, spelled once: explicit layer sizes, or a hidden width and a layer count.
/// The input width and the class count come from the data (resolve()).
struct ModelShape {
  /// {in, hidden..., classes}; when empty, hidden and num_layers give the shape.
  std::vector<std::int64_t> layer_sizes;
  std::int64_t hidden = 16; ///< width of every hidden layer
  int num_layers = 2;       ///< graph layers, >= 1

  /// {in, hidden..., classes}: layer_sizes, which must start at `in` and end at `classes`, or
  /// {in, hidden × (num_layers - 1), classes}. Throws InvalidArgument naming what disagrees.
  std::vector<std::int64_t> resolve(std::int64_t in, std::int64_t classes) const;
};

/// The widest a layer may be (its columns are 32-bit ids); ModelShape::resolve refuses more.
inline constexpr std::int64_t kMaxLayerWidth = 2147483647;

/// The normalization of a residual block's input (ModelConfig::norm).
enum class NormKind {
  None,  ///< none
  Layer, ///< LayerNorm of each row
  Batch  ///< BatchNorm over the rows of every rank (statistics summed across ranks)
};

/// How a model's weights start (ModelConfig::init).
enum class WeightInit {
  Glorot, ///< Glorot/Xavier uniform weights and zero biases (PyG's and DGL's layers)
  FanIn   ///< PyTorch's nn.Linear: weights and biases U(±1/√fan_in) (build_residual only)
};

/// "none", "layer", "batch".
std::string to_string(NormKind kind);
/// "glorot", "fan-in".
std::string to_string(WeightInit init);
/// The start named `text`; InvalidArgument naming the valid ones otherwise.
WeightInit parse_weight_init(const std::string& text);
/// The kind named `text`; InvalidArgument naming the valid ones otherwise.
NormKind parse_norm_kind(const std::string& text);

/// The settings every graph model reads, whatever its layers (GCN, GraphSAGE, GIN or a custom
/// builder's): a builder applies those that mean something for its layers. A builder's own
/// settings (GIN's initial ε, say) are its own to carry.
struct ModelConfig {
  float dropout = 0.5f; ///< dropout probability before each graph layer, in [0, 1)
  bool bias = true;     ///< whether the layers add a bias
  /// Product order of the layers that offer two (GcnConv, SageConv's neighbour term).
  GcnOrder order = GcnOrder::Auto;
  /// Weight decay on the first layer's parameters only (Kipf & Welling's GCN), else on every
  /// layer's.
  bool decay_first_layer_only = true;
  /// How the graph layers store what they aggregate (GcnConv::set_activation_dtype).
  ActivationDType activation_dtype = ActivationDType::Fp32;
  /// Attention (GAT): heads of every hidden layer (concatenated, so a hidden layer of width F
  /// gives heads·F features), heads of the output layer (averaged), dropout of the attention
  /// coefficients while training, and the LeakyReLU slope of the scores.
  std::int64_t heads = 8;
  std::int64_t output_heads = 1;
  float attention_dropout = 0.6f;
  float negative_slope = 0.2f;
  /// Residual blocks (build_residual): the normalization of each block's input and of the
  /// output, and the feed-forward sub-layer's width as a multiple of the hidden width.
  NormKind norm = NormKind::Layer;
  std::int64_t feed_forward_multiplier = 1;
  /// How the weights start. FanIn is the start of the PyTorch code whose recipe build_residual
  /// reproduces; the other builders draw Glorot weights and refuse FanIn.
  WeightInit init = WeightInit::Glorot;
  /// build_residual on two classes: one output logit z and the logits [0, z] (BinaryLogit), so
  /// training is binary cross-entropy on z, as the PyTorch code's one-target head.
  bool one_logit = false;
};

/// One model to build: its widths resolved against the data, the settings, and the seed every
/// weight is drawn from (so every rank builds the same model).
struct ModelSpec {
  std::vector<std::int64_t>
      layer_sizes; ///< {in, hidden..., classes}: layer i is sizes[i] → sizes[i + 1]
  ModelConfig config;
  std::uint64_t seed = 0;
  /// Product order per graph layer (a scheduler's plan); a layer past its end takes
  /// config.order.
  std::vector<GcnOrder> layer_orders = {};

  int num_layers() const noexcept { return static_cast<int>(layer_sizes.size()) - 1; }
  /// The product order of graph layer `layer`.
  GcnOrder order_of(int layer) const noexcept {
    return layer >= 0 && layer < static_cast<int>(layer_orders.size())
               ? layer_orders[static_cast<std::size_t>(layer)]
               : config.order;
  }
  /// Whether the parameters of graph layer `layer` decay (config.decay_first_layer_only).
  bool decays(int layer) const noexcept { return !config.decay_first_layer_only || layer == 0; }
};

/// Throws InvalidArgument when `spec` asks `builder` (named in the message) for what only
/// build_residual offers: another start than Glorot's, or one output logit.
void refuse_residual_settings(const ModelSpec& spec, const std::string& builder);

/// Builds a model on one process's graph or one rank's tile: its aggregating layers take their
/// matrices and halos from `graph`. The model maps the layer-0 input ([graph.input_rows(), F])
/// to logits of the owned rows ([graph.n_owned(), classes]); F and classes are the spec's first
/// and last sizes. Weights must be drawn from spec.seed alone.
using ModelBuilder = std::function<Sequential<float>(ModelGraph& graph, const ModelSpec& spec)>;

/// Dropout → GCNConv → ReLU+Dropout → ... → GCNConv over Â (and Âᵀ, the same object for a
/// symmetric graph), sizes spec.layer_sizes. With config.activation_dtype Bf16 every GCNConv
/// aggregates in bfloat16, and an aggregate-first first layer applies the input dropout itself
/// (GcnConv::set_input_dropout: the same function, one pass fewer).
template <typename T>
Sequential<T> build_gcn(const BackendPtr& backend, const CsrT<T>& adjacency,
                        const CsrT<T>& adjacency_t, const ModelSpec& spec);

/// The same GCN on a model graph (one process or one rank's tile): convolution i aggregates
/// with graph.matrix(AggregationKind::Gcn) and exchanges through graph.halo(i). A ModelBuilder.
Sequential<float> build_gcn(ModelGraph& graph, const ModelSpec& spec);

} // namespace tessera::gnn
