// GCNConv (Kipf & Welling): H' = Â · H · W + b with Â = D^-1/2 (A + I) D^-1/2.
#pragma once

#include "tessera/comm/halo_exchange.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/module.hpp"
#include "tessera/gnn/aggregation.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// Which product a GCN layer computes first. Both give the same function; the cheaper one
/// multiplies (and, distributed, moves) the narrower matrix.
enum class GcnOrder {
  Auto,                   ///< transform first when out < in, else aggregate first
  AggregateThenTransform, ///< (Â · H) · W
  TransformThenAggregate  ///< Â · (H · W)
};

/// "auto", "aggregate-first" or "transform-first".
std::string to_string(GcnOrder order);
/// The order named by to_string; throws InvalidArgument for any other text.
GcnOrder parse_gcn_order(const std::string& text);

/// Whether a layer of this order and widths computes x·W before aggregating.
constexpr bool transforms_first(GcnOrder order, std::int64_t in, std::int64_t out) noexcept {
  return order == GcnOrder::TransformThenAggregate || (order == GcnOrder::Auto && out < in);
}

/// What a GCN layer applies to its output after the bias, in the same pass (as DGL's GraphConv
/// takes an activation): ReLU when `relu`, then dropout with probability `dropout` while
/// training, its masks keyed as a Dropout module's of layer index `dropout_layer`. The default
/// applies nothing. GCNConv + this equals GCNConv, ReluDropout(dropout, dropout_layer) in a
/// Sequential, with fewer passes over memory and no separate pre-activation buffer.
struct GcnActivation {
  bool relu = false;
  float dropout = 0.0f;
  std::uint32_t dropout_layer = 0;
};

/// One graph convolution over a fixed normalized adjacency. The adjacency and its transpose
/// (the same object for a symmetric graph) must outlive the layer.
///
/// On one rank's tile the adjacency is Â: [n_owned, n_local] in owned-then-ghost numbering.
/// Without a halo the input is [n_local, in] with its ghost rows present (the cached input
/// features of layer 0): nothing is exchanged, and the input gradient, which would miss the
/// other ranks' share, must not be asked for. With a halo (distribute()) the input is
/// [n_owned, in] and the ghost rows are gathered from their owners — of x (aggregate first) or
/// of x·W (transform first), whichever is narrower — while the interior rows aggregate; the
/// backward scatter-adds the ghost rows' gradient (same width) to their owners, only when a
/// gradient needs it. Every rank must give the same layers a halo.
///
/// The bias and the activation run over each block of rows right after the product writes it
/// (aggregate-first on a CPU: blocks of about 2 MiB, still in cache), not as passes of their own.
template <typename T> class GcnConv final : public Module<T> {
public:
  /// adjacency: Â, [n, n]; adjacency_t: Âᵀ (pass adjacency again when symmetric).
  GcnConv(BackendPtr backend, const CsrT<T>& adjacency, const CsrT<T>& adjacency_t,
          std::int64_t in_features, std::int64_t out_features, bool bias, std::uint64_t seed,
          std::uint32_t layer_index, GcnOrder order = GcnOrder::Auto,
          GcnActivation activation = {});

  /// x: [n, in] dense or sparse → [n, out].
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: [n, out] → d_input [n, in] (not available for a sparse input).
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override;
  std::size_t bytes() const override;
  /// ReLU's backward reads the output (positive exactly where the input was positive and kept).
  bool backward_reads_output() const override { return activation_.relu; }
  /// Aggregate-first keeps Â·x for its backward, not x.
  bool backward_reads_input() const override { return transforms_first(); }
  /// When its working set (S, input, output, the product between) may exceed the budget:
  /// products over row blocks and 2-D tiles of S, and halos packed block by block
  /// (Aggregation::forward_tiled).
  bool acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const override;

  /// Makes the layer exchange its ghost rows through `halo` (outliving the layer; nullptr: no
  /// exchange); the owned rows [0, n_interior) read no ghost (partition::order_interior_first).
  void distribute(comm::LayerExchange<T>* halo, std::int64_t n_interior) {
    product_.aggregation().distribute(halo, n_interior);
  }
  /// The layer's exchanges (nullptr when not distributed).
  const comm::LayerExchange<T>* halo() const noexcept { return product_.aggregation().halo(); }
  /// Stores what the layer aggregates (x aggregate-first, x·W transform-first) in `dtype`
  /// (Aggregation::set_input_dtype: Bf16 for float32 layers, not under a memory budget).
  void set_activation_dtype(ActivationDType dtype) {
    product_.aggregation().set_input_dtype(dtype);
  }
  /// Applies dropout(p) to the layer's input itself while training, its masks keyed as
  /// Dropout(p, dropout_layer)'s: the layer computes what that module before it would, in the
  /// pass that stores its input for the product (with bf16, the rounding: one pass over the input
  /// instead of two and no float32 copy of it). Aggregate-first only (InvalidArgument otherwise:
  /// x·W would need the dropped x whole); not under a memory budget.
  void set_input_dropout(float p, std::uint32_t dropout_layer);

  /// Whether the layer computes Â·(x·W) (else (Â·x)·W).
  bool transforms_first() const noexcept { return product_.transforms_first(); }
  /// The weight, [in, out].
  Parameter<T>& weight() { return weight_; }
  const Parameter<T>& weight() const { return weight_; }

private:
  BackendPtr backend_;
  AggregateTransform<T> product_; // Â · x · W in either order
  Parameter<T> weight_;           // [in, out]
  Parameter<T> bias_;             // [1, out] or empty
  GcnActivation activation_;
  Workspace<T> output_;   // [n, out]
  Workspace<T> d_before_; // [n, out]: the gradient before the activation
};

} // namespace tessera
