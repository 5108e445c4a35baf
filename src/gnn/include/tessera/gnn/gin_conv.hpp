// GIN's aggregation (Xu et al.): h = (1 + ε)·x + A·x with a learnable ε, the sum over each
// node's neighbours and itself. The MLP that GIN applies to h follows as ordinary layers.
#pragma once

#include "tessera/engine/layers.hpp"
#include "tessera/engine/module.hpp"
#include "tessera/gnn/aggregation.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// h = (1 + ε)·x + A·x (+ b) over a fixed adjacency A (no self-loops, graph::sum_aggregation) and
/// its transpose (the same object for a symmetric graph); both must outlive the layer. ε is a [1,
/// 1] parameter (initial value `epsilon`, no weight decay); b an optional [1, f] bias. With the
/// bias, Linear(no bias) → GinAggregate equals GIN's aggregate-then-Linear exactly, and
/// aggregates the narrower matrix (the way to run GIN on wide sparse features). On a rank's tile A
/// is [n_owned, n_local] and the layer runs distributed like GcnConv (see Aggregation).
template <typename T> class GinAggregate final : public Module<T> {
public:
  /// adjacency: A, [n_owned, n_local]; adjacency_t: Aᵀ; features: f, the width of x and h.
  GinAggregate(BackendPtr backend, const CsrT<T>& adjacency, const CsrT<T>& adjacency_t,
               std::int64_t features, T epsilon = T{0}, std::uint32_t layer_index = 0,
               bool bias = false);

  /// x: [n, f] dense (n: the input rows of Aggregation) → [n_owned, f].
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: [n_owned, f] → d_input [n, f]; dε = Σ d_output ⊙ x (over the owned rows),
  /// db = Σ over rows of d_output.
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override;
  std::size_t bytes() const override;
  /// When its working set (A, input, output, their gradients) may exceed the budget: A·x over
  /// 2-D tiles, the rest in row blocks, halos packed block by block (Aggregation::forward_tiled).
  bool acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const override;
  bool backward_reads_output() const override { return false; }

  /// Exchanges the ghost rows through `halo` (outliving the layer; nullptr: no exchange); the
  /// owned rows [0, n_interior) read no ghost. Every rank must do the same.
  void distribute(comm::LayerExchange<T>* halo, std::int64_t n_interior) {
    aggregation_.distribute(halo, n_interior);
  }

private:
  /// 1 + ε, read from wherever ε lives.
  T one_plus_epsilon() const;

  BackendPtr backend_;
  Aggregation<T> aggregation_; // A · x and Aᵀ · dh
  std::int64_t features_;
  Parameter<T> epsilon_; // [1, 1]
  Parameter<T> bias_;    // [1, f] or empty
  Workspace<T> output_;  // [n_owned, f]
  T scale_ = T{1};       // 1 + ε as of the last forward
};

} // namespace tessera
