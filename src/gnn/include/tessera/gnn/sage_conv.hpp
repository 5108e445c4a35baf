// GraphSAGE with the mean aggregator (Hamilton et al.): y = x·W_self + (M·x)·W_neigh + b, with
// M = D⁻¹A the mean over each node's neighbours (graph::mean_aggregation).
#pragma once

#include "tessera/engine/layers.hpp"
#include "tessera/engine/module.hpp"
#include "tessera/gnn/aggregation.hpp"
#include "tessera/gnn/gcn_conv.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// One SAGE layer over a fixed mean-aggregation matrix M and its transpose (both must outlive
/// the layer). Separate self and neighbour weights; the neighbour product runs in the order
/// that multiplies the narrower matrix (as GcnConv's; transform-first for sparse input).
/// On a rank's tile M is [n_owned, n_local] and the layer runs distributed like GcnConv (see
/// Aggregation): without a halo the input holds its ghost rows, with one it is the owned rows.
template <typename T> class SageConv final : public Module<T> {
public:
  /// mean: M, [n_owned, n_local]; mean_t: Mᵀ (not M itself: M is not symmetric).
  SageConv(BackendPtr backend, const CsrT<T>& mean, const CsrT<T>& mean_t, std::int64_t in_features,
           std::int64_t out_features, bool bias, std::uint64_t seed, std::uint32_t layer_index,
           GcnOrder order = GcnOrder::Auto);

  /// x: [n, in] dense or sparse → [n, out].
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: [n, out] → d_input [n, in] (not available for a sparse input).
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override;
  std::size_t bytes() const override;
  bool backward_reads_output() const override { return false; }
  /// When its working set (M, input, output, x·W_self, the products between) may exceed the
  /// budget: both terms over row blocks, the neighbour term over 2-D tiles of M, halos packed
  /// block by block (Aggregation::forward_tiled).
  bool acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const override;

  /// Exchanges the ghost rows through `halo` (outliving the layer; nullptr: no exchange); the
  /// owned rows [0, n_interior) read no ghost. Every rank must do the same.
  void distribute(comm::LayerExchange<T>* halo, std::int64_t n_interior) {
    neighbours_.aggregation().distribute(halo, n_interior);
  }

private:
  BackendPtr backend_;
  AggregateTransform<T> neighbours_; // M · x · W_neigh in either order
  Parameter<T> self_weight_;         // [in, out]
  Parameter<T> neigh_weight_;        // [in, out]
  Parameter<T> bias_;                // [1, out] or empty
  Workspace<T> output_;              // [n, out]
  Workspace<T> scratch_;             // weight-gradient scratch for sparse inputs
  SparseRows sparse_rows_;           // a sparse x's row offsets, when the layer runs in row blocks
};

} // namespace tessera
