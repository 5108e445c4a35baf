// The graph models a user picks by name — GCN, GraphSAGE, GIN and GAT — as model builders over a
// ModelGraph, so each trains on one process, across ranks and under a memory budget alike.
#pragma once

#include "tessera/engine/sequential.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/gnn/model_graph.hpp"

#include <optional>
#include <string>

namespace tessera::gnn {

/// The models built in.
enum class ModelKind {
  Gcn,  ///< Kipf & Welling (build_gcn)
  Sage, ///< GraphSAGE, mean aggregator (build_graphsage)
  Gin,  ///< GIN with a learnable ε (build_gin)
  Gat,  ///< GAT (build_gat)
  Mlp   ///< no graph: an MLP of the node features (build_mlp; with build_residual, the ResNet
        ///< baseline of Platonov et al.)
};

/// "gcn", "sage", "gin", "gat", "mlp".
std::string to_string(ModelKind kind);
/// The kind named `text`; InvalidArgument naming the valid names otherwise.
ModelKind parse_model_kind(const std::string& text);
/// The model's name in reports and checkpoints: "GCN", "GraphSAGE", "GIN", "GAT".
std::string display_name(ModelKind kind);
/// The builder of `kind`.
ModelBuilder builder_for(ModelKind kind);
/// The name of `kind` built of residual blocks (build_residual): "GCN (residual blocks)".
std::string residual_name(ModelKind kind);
/// The builder of the built-in model named `name` (display_name or residual_name, as
/// checkpoints record it); nullopt for another name (a program's own builder).
std::optional<ModelBuilder> builder_named(const std::string& name);
/// The graph layers of the built-in model named `name` with `layers` layers (layer sizes less
/// one): one per residual block for residual_name models (an input and an output Linear around
/// them), none for the MLP, else one per layer. What mini-batch graphs (ModelGraph::blocks) and
/// sampling fanouts must count. Unknown names count as one per layer.
int graph_layers(const std::string& name, int layers);

/// Dropout → SAGEConv → ReLU+Dropout → ... → SAGEConv (Hamilton et al., mean aggregator): each
/// layer's self and neighbour weights, over D⁻¹A and its transpose.
Sequential<float> build_graphsage(ModelGraph& graph, const ModelSpec& spec);

/// Layer i: h = Linear_i((1 + ε_i)·x + A·x) (Xu et al.), ReLU+Dropout between layers, dropout on
/// the input. The first layer moves its Linear before the aggregation — Linear(no bias) then
/// the aggregation with the bias, the same function — so it aggregates hidden-wide rows instead
/// of the (sparse, wide) input features; the others aggregate first, as GIN is written.
Sequential<float> build_gin(ModelGraph& graph, const ModelSpec& spec);

/// Dropout → GATConv (config.heads heads, concatenated) → ELU → Dropout → ... → GATConv
/// (config.output_heads heads, averaged) (Veličković et al.): spec.layer_sizes are widths per
/// head, so hidden layer i outputs heads · sizes[i + 1] features. Attention dropout
/// config.attention_dropout, slope config.negative_slope, self-loops added (A + I).
Sequential<float> build_gat(ModelGraph& graph, const ModelSpec& spec);

/// Dropout → Linear → ReLU+Dropout → ... → Linear over each node's own features: the graph-free
/// baseline. On a tile whose input holds ghost rows it keeps the owned ones first.
Sequential<float> build_mlp(ModelGraph& graph, const ModelSpec& spec);

/// The recipe of today's strong baselines (Platonov et al., ICLR 2023): Linear(in → d) →
/// Dropout → GELU → blocks → Norm → Linear(d → classes), each block
///   x + Dropout(Linear(GELU(Dropout(Conv(Norm(x)))))),
/// Conv the graph layer of `kind` mapping d to m·d (GCN: Â·x·W; GraphSAGE: x·W_self + mean·W_neigh;
/// GAT: attention with config.heads heads of d / heads concatenated, each head's scores reading
/// every head's features as the paper's GATModule (GatOptions::full_scores), then a Linear to m·d;
/// GIN: the (1 + ε) aggregation, then a Linear; Mlp: a Linear, no graph: the paper's ResNet), m =
/// config.feed_forward_multiplier, Norm per config.norm. The layer sizes are {in, d × blocks,
/// classes}: d is the hidden width (every hidden size must be equal) and there is one block per
/// hidden size. config.init FanIn starts every layer as the paper's PyTorch code: U(±1/√fan_in)
/// weights and biases (GraphSAGE's fan-in 2d, self and neighbour rows together).
/// config.one_logit ends in Linear(d → 1) → BinaryLogit (two classes only). Throws
/// InvalidArgument for sizes that do not fit.
Sequential<float> build_residual(ModelGraph& graph, const ModelSpec& spec, ModelKind kind);

} // namespace tessera::gnn
