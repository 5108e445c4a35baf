// The products every weighted layer shares: y = x·W for dense or sparse x, dW from x and dy, the
// bias and its gradient, and making a Glorot-initialized weight. For layers in any layer above.
#pragma once

#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/module.hpp"

namespace tessera {

/// y = x · W + beta · y (beta 0 overwrites y without reading it, 1 adds to it). x: [n, in] dense
/// or sparse, w: [in, out], y: [n, out].
template <typename T>
void multiply_weight(const Backend& backend, Input<T> x, ConstDenseView<T> w, DenseView<T> y,
                     T beta = T{0}) {
  if (x.is_sparse()) {
    ops::spmm(backend, x.sparse, w, y, beta);
  } else {
    ops::gemm(backend, Transpose::No, Transpose::No, T{1}, x.dense, w, beta, y);
  }
}

/// dW (=|+=) xᵀ · dy per mode. x: [n, in], dy: [n, out], dW: [in, out]. A sparse x that
/// accumulates goes through `scratch` ([in, out]).
template <typename T>
void weight_gradient(const Backend& backend, Input<T> x, ConstDenseView<T> dy, Parameter<T>& w,
                     GradientMode mode, Workspace<T>& scratch) {
  if (mode == GradientMode::Ignore) return;
  DenseView<T> dw = w.grad.view();
  if (!x.is_sparse()) {
    const T beta = mode == GradientMode::Accumulate ? T{1} : T{0};
    ops::gemm(backend, Transpose::Yes, Transpose::No, T{1}, x.dense, dy, beta, dw);
  } else if (mode == GradientMode::Overwrite) {
    ops::spmm_transpose(backend, x.sparse, dy, dw);
  } else {
    DenseView<T> tmp = scratch.get(dw.rows, dw.cols);
    ops::spmm_transpose(backend, x.sparse, dy, tmp);
    ops::axpy(backend, T{1}, std::span<const T>(tmp.data, tmp.size()),
              std::span<T>(dw.data, dw.size()));
  }
}

/// Keeps weight_gradient's sum buffer for a sparse x acquired in `pins` (when they have a
/// manager) while the gradient is summed over row blocks: each block after the first
/// accumulates through it.
template <typename T>
void hold_gradient_sum(Pins& pins, const Input<T>& x, const Parameter<T>& w, GradientMode mode,
                       Workspace<T>& scratch) {
  if (pins.manager() == nullptr || !x.is_sparse() || mode == GradientMode::Ignore) return;
  pins.add_dense(ConstDenseView<T>(scratch.get(w.value.rows(), w.value.cols())), Access::ReadWrite);
}

/// Bias gradient per mode. dy: [n, out]; bias: [1, out] or empty.
template <typename T>
void bias_gradient(const Backend& backend, ConstDenseView<T> dy, Parameter<T>& bias,
                   GradientMode mode) {
  if (mode == GradientMode::Ignore || bias.value.empty()) return;
  ops::bias_grad(backend, dy, std::span<T>(bias.grad.data(), bias.grad.size()),
                 mode == GradientMode::Accumulate);
}

/// out += bias on every row (no-op without bias).
template <typename T>
void add_bias(const Backend& backend, DenseView<T> out, const Parameter<T>& bias) {
  if (bias.value.empty()) return;
  ops::add_bias(backend, out, std::span<const T>(bias.value.data(), bias.value.size()));
}

/// A weight [in, out] with Glorot init (keyed by seed and layer) and a zero gradient.
template <typename T>
Parameter<T> make_weight(const BackendPtr& backend, std::string name, std::int64_t in,
                         std::int64_t out, std::uint64_t seed, std::uint32_t layer) {
  // Under a chunk manager values and gradients each get their own run of chunks, so the gradients
  // of neighbouring layers are adjacent (data-parallel buckets without a packing copy).
  Parameter<T> p{std::move(name), DenseT<T>(memory_for(backend, TensorKind::Weight), in, out),
                 DenseT<T>::zeros(memory_for(backend, TensorKind::WeightGrad), in, out), true};
  glorot_uniform(p.value, seed, layer);
  return p;
}

/// The bias [1, out] of zeros without weight decay, or an empty parameter when not enabled.
template <typename T>
Parameter<T> make_bias(const BackendPtr& backend, std::string name, std::int64_t out,
                       bool enabled) {
  if (!enabled) return Parameter<T>{std::move(name), {}, {}, false};
  // No weight decay on biases, as in PyTorch GCN recipes that decay only weights.
  return Parameter<T>{std::move(name),
                      DenseT<T>::zeros(memory_for(backend, TensorKind::Weight), 1, out),
                      DenseT<T>::zeros(memory_for(backend, TensorKind::WeightGrad), 1, out), false};
}

} // namespace tessera
