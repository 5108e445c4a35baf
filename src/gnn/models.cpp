// The built-in models by name, and the builders of GraphSAGE, GIN and GAT.
#include "tessera/gnn/models.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/gnn/gat_conv.hpp"
#include "tessera/gnn/gcn_conv.hpp"
#include "tessera/gnn/gin_conv.hpp"
#include "tessera/gnn/sage_conv.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>
#include <memory>

namespace tessera::gnn {

namespace {

constexpr ModelKind kKinds[] = {ModelKind::Gcn, ModelKind::Sage, ModelKind::Gin, ModelKind::Gat,
                                ModelKind::Mlp};

/// A graph-free model's first module on a tile whose input holds ghost rows: keep the owned.
void keep_owned_rows(ModelGraph& graph, Sequential<float>& model) {
  if (graph.input_rows() > graph.n_owned()) {
    model.add(std::make_unique<FirstRows<float>>(graph.backend(), graph.n_owned()));
  }
}

/// Marks the parameters of graph layer `layer` for weight decay as spec says.
void set_decay(Module<float>& module, const ModelSpec& spec, int layer) {
  for (Parameter<float>* p : module.parameters()) {
    if (p->decay) p->decay = spec.decays(layer); // biases never decay
  }
}

} // namespace

std::string to_string(ModelKind kind) {
  switch (kind) {
  case ModelKind::Gcn:
    return "gcn";
  case ModelKind::Sage:
    return "sage";
  case ModelKind::Gin:
    return "gin";
  case ModelKind::Gat:
    return "gat";
  case ModelKind::Mlp:
    return "mlp";
  }
  return "unknown";
}

ModelKind parse_model_kind(const std::string& text) {
  for (const ModelKind kind : kKinds) {
    if (text == to_string(kind)) return kind;
  }
  throw InvalidArgument("unknown model '" + text + "'; valid: gcn, sage, gin, gat, mlp");
}

std::string display_name(ModelKind kind) {
  switch (kind) {
  case ModelKind::Gcn:
    return "GCN";
  case ModelKind::Sage:
    return "GraphSAGE";
  case ModelKind::Gin:
    return "GIN";
  case ModelKind::Gat:
    return "GAT";
  case ModelKind::Mlp:
    return "MLP";
  }
  return "unknown";
}

ModelBuilder builder_for(ModelKind kind) {
  switch (kind) {
  case ModelKind::Gcn:
    return [](ModelGraph& graph, const ModelSpec& spec) { return build_gcn(graph, spec); };
  case ModelKind::Sage:
    return build_graphsage;
  case ModelKind::Gin:
    return build_gin;
  case ModelKind::Gat:
    return build_gat;
  case ModelKind::Mlp:
    return build_mlp;
  }
  throw InvalidArgument("unknown model kind");
}

std::string residual_name(ModelKind kind) {
  return display_name(kind) + " (residual blocks)";
}

int graph_layers(const std::string& name, int layers) {
  for (const ModelKind kind : kKinds) {
    if (name == residual_name(kind)) return kind == ModelKind::Mlp ? 0 : layers - 1;
  }
  return name == display_name(ModelKind::Mlp) ? 0 : layers;
}

std::optional<ModelBuilder> builder_named(const std::string& name) {
  for (const ModelKind kind : kKinds) {
    if (name == display_name(kind)) return builder_for(kind);
    if (name == residual_name(kind)) {
      return [kind](ModelGraph& graph, const ModelSpec& spec) {
        return build_residual(graph, spec, kind);
      };
    }
  }
  return std::nullopt;
}

Sequential<float> build_graphsage(ModelGraph& graph, const ModelSpec& spec) {
  refuse_residual_settings(spec, "build_graphsage");
  const std::vector<std::int64_t>& sizes = spec.layer_sizes;
  const float dropout = spec.config.dropout;
  const BackendPtr& backend = graph.backend();
  Sequential<float> model;
  model.add(std::make_unique<Dropout<float>>(backend, dropout, 0));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    // Each layer its own graph on mini-batch blocks; one graph for all in full-graph training.
    ModelGraph& g = graph.layer(static_cast<int>(i));
    const Csr& mean = g.matrix(AggregationKind::Mean);
    const Csr& mean_t = g.transpose(AggregationKind::Mean);
    auto sage = std::make_unique<SageConv<float>>(backend, mean, mean_t, sizes[i], sizes[i + 1],
                                                  spec.config.bias, spec.seed, layer,
                                                  spec.order_of(static_cast<int>(i)));
    sage->distribute(graph.halo(static_cast<int>(i)), graph.n_interior());
    set_decay(*sage, spec, static_cast<int>(i));
    model.add(std::move(sage));
    if (i + 2 < sizes.size()) {
      model.add(std::make_unique<ReluDropout<float>>(backend, dropout, layer + 1));
      model.end_layer();
    }
  }
  return model;
}

Sequential<float> build_mlp(ModelGraph& graph, const ModelSpec& spec) {
  refuse_residual_settings(spec, "build_mlp");
  const std::vector<std::int64_t>& sizes = spec.layer_sizes;
  const BackendPtr& backend = graph.backend();
  Sequential<float> model;
  keep_owned_rows(graph, model);
  model.add(std::make_unique<Dropout<float>>(backend, spec.config.dropout, 0));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    auto linear = std::make_unique<Linear<float>>(backend, sizes[i], sizes[i + 1], spec.config.bias,
                                                  spec.seed, layer);
    set_decay(*linear, spec, static_cast<int>(i));
    model.add(std::move(linear));
    if (i + 2 < sizes.size()) {
      model.add(std::make_unique<ReluDropout<float>>(backend, spec.config.dropout, layer + 1));
      model.end_layer();
    }
  }
  return model;
}

Sequential<float> build_gin(ModelGraph& graph, const ModelSpec& spec) {
  refuse_residual_settings(spec, "build_gin");
  const std::vector<std::int64_t>& sizes = spec.layer_sizes;
  const float dropout = spec.config.dropout;
  const BackendPtr& backend = graph.backend();
  Sequential<float> model;
  model.add(std::make_unique<Dropout<float>>(backend, dropout, 0));
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    const bool first = i == 0;
    const std::int64_t width = first ? sizes[1] : sizes[i]; // of the aggregated rows
    ModelGraph& g = graph.layer(static_cast<int>(i));       // a block each on mini-batch graphs
    auto gin =
        std::make_unique<GinAggregate<float>>(backend, g.matrix(AggregationKind::Sum),
                                              g.transpose(AggregationKind::Sum), width, 0.0f, layer,
                                              /*bias=*/first && spec.config.bias);
    gin->distribute(graph.halo(static_cast<int>(i)), graph.n_interior());
    auto linear = std::make_unique<Linear<float>>(backend, sizes[i], sizes[i + 1],
                                                  !first && spec.config.bias, spec.seed, layer);
    set_decay(*linear, spec, static_cast<int>(i));
    if (first) {
      model.add(std::move(linear));
      model.add(std::move(gin));
    } else {
      model.add(std::move(gin));
      model.add(std::move(linear));
    }
    if (i + 2 < sizes.size()) {
      model.add(std::make_unique<ReluDropout<float>>(backend, dropout, layer + 1));
      model.end_layer();
    }
  }
  return model;
}

Sequential<float> build_gat(ModelGraph& graph, const ModelSpec& spec) {
  refuse_residual_settings(spec, "build_gat");
  const std::vector<std::int64_t>& sizes = spec.layer_sizes;
  const ModelConfig& config = spec.config;
  const BackendPtr& backend = graph.backend();
  Sequential<float> model;
  model.add(std::make_unique<Dropout<float>>(backend, config.dropout, 0));
  std::int64_t in = sizes.front();
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    const bool last = i + 2 == sizes.size();
    GatOptions options;
    options.heads = last ? config.output_heads : config.heads;
    options.concat = !last;
    options.negative_slope = config.negative_slope;
    options.attention_dropout = config.attention_dropout;
    options.bias = config.bias;
    ModelGraph& g = graph.layer(static_cast<int>(i)); // a block each on mini-batch graphs
    auto conv = std::make_unique<GatConv<float>>(
        backend, g.matrix(AggregationKind::Attention), g.transpose(AggregationKind::Attention),
        g.transpose_edges(AggregationKind::Attention), in, sizes[i + 1], options, spec.seed, layer);
    conv->distribute(graph.halo(static_cast<int>(i)));
    set_decay(*conv, spec, static_cast<int>(i));
    in = conv->out_features();
    model.add(std::move(conv));
    // ELU and the next layer's input dropout in one module (the masks of Dropout(layer + 1)).
    if (!last) {
      model.add(std::make_unique<EluDropout<float>>(backend, config.dropout, layer + 1));
      model.end_layer();
    }
  }
  return model;
}

namespace {

/// The normalization `kind` of rows `width` wide (nullptr for none); `name` prefixes its
/// parameters.
std::unique_ptr<Module<float>> make_norm(ModelGraph& graph, NormKind kind, std::int64_t width,
                                         const std::string& name) {
  switch (kind) {
  case NormKind::None:
    return nullptr;
  case NormKind::Layer:
    return std::make_unique<LayerNorm<float>>(graph.backend(), width, name);
  case NormKind::Batch:
    // On mini-batch blocks every row of a call is a distinct node of the batch: all count.
    return std::make_unique<BatchNorm<float>>(graph.backend(), width, name, graph.comm(),
                                              graph.is_blocks() ? -1 : graph.n_owned());
  }
  return nullptr;
}

/// Draws every parameter of `layer` again as PyTorch's nn.Linear starts: U(±1/√fan_in), weights
/// and biases alike, parameter k from stream 8·`stream` + k.
void start_fan_in(Module<float>& layer, std::int64_t fan_in, std::uint64_t seed,
                  std::uint32_t stream) {
  std::uint32_t k = 0;
  for (Parameter<float>* p : layer.parameters())
    fan_in_uniform(p->value, fan_in, seed, 8 * stream + k++);
}

} // namespace

Sequential<float> build_residual(ModelGraph& graph, const ModelSpec& spec, ModelKind kind) {
  const std::vector<std::int64_t>& sizes = spec.layer_sizes;
  const ModelConfig& config = spec.config;
  if (sizes.size() < 3 || std::adjacent_find(sizes.begin() + 1, sizes.end() - 1,
                                             std::not_equal_to<>()) != sizes.end() - 1) {
    throw InvalidArgument(fmt::format("residual blocks need one hidden width for every block, "
                                      "got layer sizes {}",
                                      fmt::join(sizes, "-")));
  }
  // {in, d × blocks, classes}: one block per hidden size.
  const std::int64_t width = sizes[1], blocks = static_cast<std::int64_t>(sizes.size()) - 2;
  const std::int64_t inner = width * config.feed_forward_multiplier;
  if (config.feed_forward_multiplier < 1) {
    throw InvalidArgument("the feed-forward multiplier must be at least 1");
  }
  if (config.one_logit && sizes.back() != 2) {
    throw InvalidArgument(
        fmt::format("one output logit is for two classes; the data has {}", sizes.back()));
  }
  if (kind == ModelKind::Gat && width % config.heads != 0) {
    throw InvalidArgument(fmt::format("GAT blocks split the hidden width {} over {} heads: it must "
                                      "be a multiple of the heads",
                                      width, config.heads));
  }
  const BackendPtr& backend = graph.backend();
  const float dropout = config.dropout;
  // Random fields: graph layers use their block index (and multiples of it); the Linear layers
  // their own range above them.
  constexpr std::uint32_t kLinearStreams = 1u << 12;
  // With config.init FanIn every layer starts as the paper's PyTorch code does: U(±1/√fan_in),
  // fan_in the width of its input (GraphSAGE: self and neighbour rows together, 2d, as the
  // paper's Linear on their concatenation; GAT: the scores, Linear(d → heads) there, too).
  const auto fan_in_start = [&](Module<float>& layer, std::int64_t fan_in, std::uint32_t stream) {
    if (config.init == WeightInit::FanIn) start_fan_in(layer, fan_in, spec.seed, stream);
  };
  const auto linear = [&](std::int64_t in, std::int64_t out, std::uint32_t stream, int decay_as) {
    auto layer = std::make_unique<Linear<float>>(backend, in, out, config.bias, spec.seed,
                                                 kLinearStreams + stream);
    set_decay(*layer, spec, decay_as);
    fan_in_start(*layer, in, kLinearStreams + stream);
    return layer;
  };
  Sequential<float> model;
  if (kind == ModelKind::Mlp) keep_owned_rows(graph, model);
  model.add(linear(sizes.front(), width, 0, 0));
  model.add(std::make_unique<Dropout<float>>(backend, dropout, 0));
  model.add(std::make_unique<Gelu<float>>(backend));
  for (std::int64_t b = 0; b < blocks; ++b) {
    const auto block = static_cast<std::uint32_t>(b);
    const int layer = static_cast<int>(b);
    auto start = std::make_unique<ResidualStart<float>>(backend);
    ResidualStart<float>& opened = *start;
    model.add(std::move(start));
    if (auto norm = make_norm(graph, config.norm, width, "block" + std::to_string(b) + ".norm")) {
      model.add(std::move(norm));
    }
    // Each block its own graph on mini-batch blocks (none for the MLP); one graph otherwise.
    ModelGraph& g = kind == ModelKind::Mlp ? graph : graph.layer(layer);
    switch (kind) {
    case ModelKind::Gcn: {
      auto conv = std::make_unique<GcnConv<float>>(
          backend, g.matrix(AggregationKind::Gcn), g.transpose(AggregationKind::Gcn), width, inner,
          config.bias, spec.seed, block, spec.order_of(layer));
      conv->distribute(graph.halo(layer), graph.n_interior());
      set_decay(*conv, spec, layer);
      fan_in_start(*conv, width, block);
      model.add(std::move(conv));
      break;
    }
    case ModelKind::Sage: {
      auto conv = std::make_unique<SageConv<float>>(
          backend, g.matrix(AggregationKind::Mean), g.transpose(AggregationKind::Mean), width,
          inner, config.bias, spec.seed, block, spec.order_of(layer));
      conv->distribute(graph.halo(layer), graph.n_interior());
      set_decay(*conv, spec, layer);
      fan_in_start(*conv, 2 * width, block);
      model.add(std::move(conv));
      break;
    }
    case ModelKind::Gat: {
      GatOptions options;
      options.heads = config.heads;
      options.negative_slope = config.negative_slope;
      options.attention_dropout = config.attention_dropout;
      options.bias = config.bias;
      options.full_scores = true; // the paper's GATModule
      auto conv = std::make_unique<GatConv<float>>(
          backend, g.matrix(AggregationKind::Attention), g.transpose(AggregationKind::Attention),
          g.transpose_edges(AggregationKind::Attention), width, width / config.heads, options,
          spec.seed, block);
      conv->distribute(graph.halo(layer));
      set_decay(*conv, spec, layer);
      fan_in_start(*conv, width, block);
      model.add(std::move(conv));
      model.add(linear(width, inner, 1 + 2 * block, layer));
      break;
    }
    case ModelKind::Mlp:
      model.add(linear(width, inner, 1 + 2 * block, layer));
      break;
    case ModelKind::Gin: {
      auto conv = std::make_unique<GinAggregate<float>>(backend, g.matrix(AggregationKind::Sum),
                                                        g.transpose(AggregationKind::Sum), width,
                                                        0.0f, block, false);
      conv->distribute(graph.halo(layer), graph.n_interior());
      model.add(std::move(conv));
      model.add(linear(width, inner, 1 + 2 * block, layer));
      break;
    }
    }
    model.add(std::make_unique<Dropout<float>>(backend, dropout, 1 + 2 * block));
    model.add(std::make_unique<Gelu<float>>(backend));
    model.add(linear(inner, width, 2 + 2 * block, layer));
    model.add(std::make_unique<Dropout<float>>(backend, dropout, 2 + 2 * block));
    model.add(std::make_unique<ResidualAdd<float>>(backend, opened));
    model.end_layer();
  }
  if (auto norm = make_norm(graph, config.norm, width, "output.norm")) model.add(std::move(norm));
  const auto output = 2 + 2 * static_cast<std::uint32_t>(blocks);
  if (config.one_logit) {
    model.add(linear(width, 1, output, 0));
    model.add(std::make_unique<BinaryLogit<float>>(backend));
  } else {
    model.add(linear(width, sizes.back(), output, 0));
  }
  return model;
}

} // namespace tessera::gnn
