// General layers on the module contract: Linear, ReLU and Dropout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/engine/module.hpp"

namespace tessera {

/// Glorot/Xavier uniform initialization of w: [in, out] from the counter RNG, keyed by
/// (seed, layer) so every rank and backend draws the same weights.
template <typename T>
void glorot_uniform(DenseT<T>& w, std::uint64_t seed, std::uint32_t layer);

/// Buffers of one [n, width] matrix that grow on first use and are reused after.
template <typename T>
class Workspace {
 public:
  explicit Workspace(BackendPtr backend) : backend_(std::move(backend)) {}
  /// A [rows, cols] view of this buffer, reallocated only when the shape changes.
  DenseView<T> get(std::int64_t rows, std::int64_t cols) {
    if (matrix_.rows() != rows || matrix_.cols() != cols) matrix_ = DenseT<T>(backend_, rows, cols);
    return matrix_.view();
  }
  std::size_t bytes() const { return matrix_.bytes(); }

 private:
  BackendPtr backend_;
  DenseT<T> matrix_;
};

/// y = x · W + b. x: [n, in] dense or sparse, W: [in, out], b: [out].
template <typename T>
class Linear final : public Module<T> {
 public:
  Linear(BackendPtr backend, std::int64_t in_features, std::int64_t out_features, bool bias,
         std::uint64_t seed, std::uint32_t layer_index);

  Context<T> forward(const Step& step, Input<T> x) override;
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::vector<Parameter<T>*> parameters() override;
  std::string name() const override;
  std::size_t bytes() const override;

  Parameter<T>& weight() { return weight_; }

 private:
  BackendPtr backend_;
  Parameter<T> weight_;  // [in, out]
  Parameter<T> bias_;    // [1, out], empty when there is no bias
  Workspace<T> output_;  // [n, out]
  Workspace<T> d_input_; // [n, in]
};


/// Inverted dropout with masks drawn from the counter RNG keyed by (seed, epoch, layer,
/// global row id, column): identical on any tiling and backend. Identity when not training.
/// A sparse input stays sparse (only its stored values are dropped).
template <typename T>
class Dropout final : public Module<T> {
 public:
  Dropout(BackendPtr backend, float p, std::uint32_t layer_index);

  Context<T> forward(const Step& step, Input<T> x) override;
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override;
  std::size_t bytes() const override;

 private:
  BackendPtr backend_;
  float p_;
  std::uint32_t layer_;
  Workspace<T> output_;
  Buffer<T> sparse_values_;  // dropped values of a sparse input
  Workspace<T> d_input_;
};

/// ReLU followed by dropout, fused: one pass forward and one backward, and no mask redrawn in
/// backward (the output is positive exactly where the input was positive and kept). Draws the
/// same masks as Dropout with the same layer index.
template <typename T>
class ReluDropout : public Module<T> {
 public:
  ReluDropout(BackendPtr backend, float p, std::uint32_t layer_index);

  Context<T> forward(const Step& step, Input<T> x) override;
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override;
  std::size_t bytes() const override { return output_.bytes() + d_input_.bytes(); }

 private:
  BackendPtr backend_;
  float p_;
  std::uint32_t layer_;
  Workspace<T> output_;
  Workspace<T> d_input_;
};

/// y = max(x, 0): ReLU+Dropout with p = 0, so both share one pass and one backward.
template <typename T>
class Relu final : public ReluDropout<T> {
 public:
  explicit Relu(BackendPtr backend) : ReluDropout<T>(std::move(backend), 0.0f, 0) {}
  std::string name() const override { return "ReLU"; }
};

}  // namespace tessera
