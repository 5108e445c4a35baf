// Model shapes and layer-size parsing, and the GCN builder.
#include "tessera/gnn/model.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/layers.hpp"

#include <charconv>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessera::gnn {

std::string to_string(NormKind kind) {
  switch (kind) {
  case NormKind::None:
    return "none";
  case NormKind::Layer:
    return "layer";
  case NormKind::Batch:
    return "batch";
  }
  return "unknown";
}

NormKind parse_norm_kind(const std::string& text) {
  for (const NormKind kind : {NormKind::None, NormKind::Layer, NormKind::Batch}) {
    if (text == to_string(kind)) return kind;
  }
  throw InvalidArgument("unknown normalization '" + text + "'; valid: none, layer, batch");
}

std::string to_string(WeightInit init) {
  return init == WeightInit::FanIn ? "fan-in" : "glorot";
}

WeightInit parse_weight_init(const std::string& text) {
  for (const WeightInit init : {WeightInit::Glorot, WeightInit::FanIn}) {
    if (text == to_string(init)) return init;
  }
  throw InvalidArgument("unknown weight initialization '" + text + "'; valid: glorot, fan-in");
}

void refuse_residual_settings(const ModelSpec& spec, const std::string& builder) {
  if (spec.config.init != WeightInit::Glorot) {
    throw InvalidArgument(builder + " draws Glorot weights; the " + to_string(spec.config.init) +
                          " start is the residual blocks' (build_residual)");
  }
  if (spec.config.one_logit) {
    throw InvalidArgument(builder + " ends in a logit per class; one output logit is the residual "
                                    "blocks' (build_residual)");
  }
}

std::vector<std::int64_t> ModelShape::resolve(std::int64_t in, std::int64_t classes) const {
  if (!layer_sizes.empty()) {
    if (layer_sizes.size() < 2 || layer_sizes.front() != in || layer_sizes.back() != classes) {
      throw InvalidArgument(fmt::format("layer sizes {} must start at the {} input features and "
                                        "end at the {} classes of the data",
                                        fmt::join(layer_sizes, "-"), in, classes));
    }
    for (const std::int64_t width : layer_sizes) {
      if (width < 1 || width > kMaxLayerWidth) {
        throw InvalidArgument(fmt::format("layer sizes {}: width {} is outside [1, 2^31 - 1]",
                                          fmt::join(layer_sizes, "-"), width));
      }
    }
    return layer_sizes;
  }
  if (hidden > kMaxLayerWidth) {
    throw InvalidArgument(
        fmt::format("hidden width {} is above the largest a layer may have, 2^31 - 1", hidden));
  }
  if (num_layers < 1 || hidden < 1) {
    throw InvalidArgument(fmt::format("a model needs at least one layer and a positive hidden "
                                      "width, got {} layers of width {}",
                                      num_layers, hidden));
  }
  std::vector<std::int64_t> sizes{in};
  for (int i = 1; i < num_layers; ++i)
    sizes.push_back(hidden);
  sizes.push_back(classes);
  return sizes;
}

namespace {

/// The GCN of `spec`, convolution i over matrices(i): a pair of pointers to Â and Âᵀ.
template <typename T, typename Matrices>
Sequential<T> gcn_layers(const BackendPtr& backend, Matrices matrices, const ModelSpec& spec) {
  if (spec.layer_sizes.size() < 2) {
    throw InvalidArgument("a GCN needs at least an input and an output size");
  }
  const ModelConfig& config = spec.config;
  Sequential<T> model;
  const std::size_t num_convs = spec.layer_sizes.size() - 1;
  // With bf16 activations an aggregate-first first layer drops its input as it rounds it.
  const bool fused_input_dropout =
      config.activation_dtype == ActivationDType::Bf16 &&
      !transforms_first(spec.order_of(0), spec.layer_sizes[0], spec.layer_sizes[1]);
  for (std::size_t i = 0; i < num_convs; ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    // Every convolution but the last ends in ReLU and the dropout before the next one, applied
    // with its bias as the product writes its rows (GcnActivation); the input gets its own.
    if (i == 0 && !fused_input_dropout) {
      model.add(std::make_unique<Dropout<T>>(backend, config.dropout, layer));
    }
    GcnActivation activation;
    if (i + 1 < num_convs) activation = {true, config.dropout, layer + 1};
    const auto [adjacency, adjacency_t] = matrices(static_cast<int>(i));
    auto conv = std::make_unique<GcnConv<T>>(backend, *adjacency, *adjacency_t, spec.layer_sizes[i],
                                             spec.layer_sizes[i + 1], config.bias, spec.seed, layer,
                                             spec.order_of(static_cast<int>(i)), activation);
    for (Parameter<T>* p : conv->parameters())
      p->decay = spec.decays(static_cast<int>(i));
    conv->set_activation_dtype(config.activation_dtype);
    if (i == 0 && fused_input_dropout) conv->set_input_dropout(config.dropout, layer);
    model.add(std::move(conv));
    if (i + 1 < num_convs) model.end_layer(); // the convolution applied ReLU (and dropout)
  }
  return model;
}

} // namespace

template <typename T>
Sequential<T> build_gcn(const BackendPtr& backend, const CsrT<T>& adjacency,
                        const CsrT<T>& adjacency_t, const ModelSpec& spec) {
  return gcn_layers<T>(
      backend, [&](int) { return std::pair(&adjacency, &adjacency_t); }, spec);
}

Sequential<float> build_gcn(ModelGraph& graph, const ModelSpec& spec) {
  refuse_residual_settings(spec, "build_gcn");
  // Each convolution its own graph on mini-batch blocks; one graph for all in full-graph training.
  Sequential<float> model = gcn_layers<float>(
      graph.backend(),
      [&](int i) {
        ModelGraph& g = graph.layer(i);
        return std::pair(&g.matrix(AggregationKind::Gcn), &g.transpose(AggregationKind::Gcn));
      },
      spec);
  int layer = 0;
  for (const auto& module : model.modules()) {
    if (auto* conv = dynamic_cast<GcnConv<float>*>(module.get())) {
      conv->distribute(graph.halo(layer), graph.n_interior());
      ++layer;
    }
  }
  return model;
}

template Sequential<float> build_gcn(const BackendPtr&, const CsrT<float>&, const CsrT<float>&,
                                     const ModelSpec&);
template Sequential<double> build_gcn(const BackendPtr&, const CsrT<double>&, const CsrT<double>&,
                                      const ModelSpec&);

} // namespace tessera::gnn
