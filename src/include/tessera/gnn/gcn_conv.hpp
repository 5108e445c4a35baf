// GCNConv (Kipf & Welling): H' = Â · H · W + b with Â = D^-1/2 (A + I) D^-1/2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/engine/layers.hpp"
#include "tessera/engine/module.hpp"

namespace tessera {

/// Which product a GCN layer computes first. Both give the same function; the cheaper one
/// multiplies (and, distributed, moves) the narrower matrix.
enum class GcnOrder {
  Auto,                 ///< transform first when out < in, else aggregate first
  AggregateThenTransform,  ///< (Â · H) · W
  TransformThenAggregate   ///< Â · (H · W)
};

/// One graph convolution over a fixed normalized adjacency. The adjacency and its transpose
/// (the same object for a symmetric graph) must outlive the layer.
template <typename T>
class GcnConv final : public Module<T> {
 public:
  /// adjacency: Â, [n, n]; adjacency_t: Âᵀ (pass adjacency again when symmetric).
  GcnConv(BackendPtr backend, const CsrT<T>& adjacency, const CsrT<T>& adjacency_t,
          std::int64_t in_features, std::int64_t out_features, bool bias, std::uint64_t seed,
          std::uint32_t layer_index, GcnOrder order = GcnOrder::Auto);

  /// x: [n, in] dense or sparse → [n, out].
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: [n, out] → d_input [n, in] (not available for a sparse input).
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::vector<Parameter<T>*> parameters() override;
  std::string name() const override;
  std::size_t bytes() const override;

  bool transforms_first() const noexcept { return transform_first_; }
  Parameter<T>& weight() { return weight_; }
  const Parameter<T>& weight() const { return weight_; }

 private:
  BackendPtr backend_;
  const CsrT<T>* adjacency_;
  const CsrT<T>* adjacency_t_;
  bool transform_first_;
  Parameter<T> weight_;  // [in, out]
  Parameter<T> bias_;    // [1, out] or empty
  Workspace<T> mid_;     // [n, out] = x·W (transform first) or [n, in] = Â·x (aggregate first)
  Workspace<T> output_;  // [n, out]
  Workspace<T> d_mid_;   // gradient of mid_
  Workspace<T> d_input_; // [n, in]
};

}  // namespace tessera
