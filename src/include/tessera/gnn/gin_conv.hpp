// GIN's aggregation (Xu et al.): h = (1 + ε)·x + A·x with a learnable ε, the sum over each
// node's neighbours and itself. The MLP that GIN applies to h follows as ordinary layers.
#pragma once

#include "tessera/engine/layers.hpp"
#include "tessera/engine/module.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// h = (1 + ε)·x + A·x over a fixed adjacency A (no self-loops) and its transpose (the same
/// object for a symmetric graph); both must outlive the layer. ε is a [1, 1] parameter
/// (initial value `epsilon`, no weight decay).
template <typename T> class GinAggregate final : public Module<T> {
public:
  GinAggregate(BackendPtr backend, const CsrT<T>& adjacency, const CsrT<T>& adjacency_t,
               std::int64_t features, T epsilon = T{0}, std::uint32_t layer_index = 0);

  /// x: [n, f] dense → [n, f].
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: [n, f] → d_input [n, f]; dε = Σ d_output ⊙ x.
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::vector<Parameter<T>*> parameters() override { return {&epsilon_}; }
  std::string name() const override;
  std::size_t bytes() const override;

private:
  /// 1 + ε, read from wherever ε lives.
  T one_plus_epsilon() const;

  BackendPtr backend_;
  const CsrT<T>* adjacency_;
  const CsrT<T>* adjacency_t_;
  std::int64_t features_;
  Parameter<T> epsilon_; // [1, 1]
  Workspace<T> output_;  // [n, f]
  T scale_ = T{1};       // 1 + ε as of the last forward
  Workspace<T> d_input_; // [n, f]
};

} // namespace tessera
