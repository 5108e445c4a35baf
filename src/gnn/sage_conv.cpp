// SageConv forward and backward: a self term and a mean-aggregated neighbour term.
#include "tessera/gnn/sage_conv.hpp"

#include "src/engine/weight_products.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

template <typename T>
SageConv<T>::SageConv(BackendPtr backend, const CsrT<T>& mean, const CsrT<T>& mean_t,
                      std::int64_t in_features, std::int64_t out_features, bool bias,
                      std::uint64_t seed, std::uint32_t layer_index, GcnOrder order)
    : backend_(backend), aggregation_(backend, mean, mean_t),
      transform_first_(order == GcnOrder::TransformThenAggregate ||
                       (order == GcnOrder::Auto && out_features < in_features)),
      // The two weights get different random fields: layer_index for one, a shifted one for
      // the other, so they are independent.
      self_weight_(detail::make_weight<T>(backend, "sage" + std::to_string(layer_index) + ".self",
                                          in_features, out_features, seed, 2 * layer_index)),
      neigh_weight_(detail::make_weight<T>(backend,
                                           "sage" + std::to_string(layer_index) + ".neighbour",
                                           in_features, out_features, seed, 2 * layer_index + 1)),
      bias_(detail::make_bias<T>(backend, "sage" + std::to_string(layer_index) + ".bias",
                                 out_features, bias)),
      mid_(backend), self_(backend), output_(backend), d_mid_(backend), d_input_(backend),
      scratch_(backend) {}

template <typename T> Context<T> SageConv<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t in = self_weight_.value.rows(), out = self_weight_.value.cols();
  const std::int64_t n = aggregation_.rows();
  aggregation_.check_layer_input(name(), x, in);
  DenseView<T> y = output_.get(n, out);
  if (transform_first_) { // y = M·(x·W_neigh) + x·W_self
    DenseView<T> xw = aggregation_.local_input(out);
    detail::multiply_weight(*backend_, x, neigh_weight_.value.cview(), xw.slice_rows(0, x.rows()));
    aggregation_.forward_local(out, y);
  } else { // y = (M·x)·W_neigh + x·W_self
    if (x.is_sparse()) {
      throw InvalidArgument(name() + ": aggregate-first needs a dense input");
    }
    DenseView<T> mx = mid_.get(n, in);
    aggregation_.forward(x.dense, mx);
    ops::gemm(*backend_, ops::Transpose::No, ops::Transpose::No, T{1}, ConstDenseView<T>(mx),
              neigh_weight_.value.cview(), T{0}, y);
  }
  DenseView<T> self = self_.get(n, out); // x·W_self over the owned rows, added to y
  detail::multiply_weight(*backend_, x.first_rows(n), self_weight_.value.cview(), self);
  ops::axpy(*backend_, T{1}, std::span<const T>(self.data, static_cast<std::size_t>(self.size())),
            std::span<T>(y.data, static_cast<std::size_t>(y.size())));
  detail::add_bias(*backend_, y, bias_);
  return Context<T>{x, Input<T>(ConstDenseView<T>(y)), step};
}

template <typename T>
ConstDenseView<T> SageConv<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                        GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t in = self_weight_.value.rows();
  const std::int64_t n = aggregation_.rows();
  if (input_mode != GradientMode::Ignore && ctx.input.is_sparse()) {
    throw InvalidArgument(name() + ": no gradient for a sparse input");
  }
  detail::bias_gradient(*backend_, d_output, bias_, param_mode);
  detail::weight_gradient(*backend_, ctx.input.first_rows(n), d_output, self_weight_, param_mode,
                          scratch_);
  DenseView<T> dx;
  if (transform_first_) {
    // d(xW) = Mᵀ·dy; dW_neigh = xᵀ·d(xW); dx = d(xW)·W_neighᵀ + dy·W_selfᵀ.
    const DenseView<T> d_xw = aggregation_.backward(d_output); // [input rows, out]
    detail::weight_gradient(*backend_, ctx.input, ConstDenseView<T>(d_xw), neigh_weight_,
                            param_mode, scratch_);
    if (input_mode == GradientMode::Ignore) return {};
    dx = d_input_.get(ctx.input.rows(), in);
    const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
    ops::gemm(*backend_, ops::Transpose::No, ops::Transpose::Yes, T{1}, ConstDenseView<T>(d_xw),
              neigh_weight_.value.cview(), beta, dx);
  } else {
    // dW_neigh = (Mx)ᵀ·dy; d(Mx) = dy·W_neighᵀ; dx = Mᵀ·d(Mx) + dy·W_selfᵀ.
    DenseView<T> mx = mid_.get(n, in);
    detail::weight_gradient(*backend_, Input<T>(ConstDenseView<T>(mx)), d_output, neigh_weight_,
                            param_mode, scratch_);
    if (input_mode == GradientMode::Ignore) return {};
    if (input_mode == GradientMode::Accumulate) {
      throw InvalidArgument(name() + ": aggregate-first backward overwrites its input gradient");
    }
    DenseView<T> d_mx = d_mid_.get(n, in);
    ops::gemm(*backend_, ops::Transpose::No, ops::Transpose::Yes, T{1}, d_output,
              neigh_weight_.value.cview(), T{0}, d_mx);
    dx = aggregation_.backward(ConstDenseView<T>(d_mx));
  }
  ops::gemm(*backend_, ops::Transpose::No, ops::Transpose::Yes, T{1}, d_output,
            self_weight_.value.cview(), T{1}, dx.slice_rows(0, n));
  return dx;
}

template <typename T> std::vector<Parameter<T>*> SageConv<T>::parameters() {
  if (bias_.value.empty()) return {&self_weight_, &neigh_weight_};
  return {&self_weight_, &neigh_weight_, &bias_};
}

template <typename T> std::string SageConv<T>::name() const {
  return "SAGEConv(" + std::to_string(self_weight_.value.rows()) + " -> " +
         std::to_string(self_weight_.value.cols()) + ", mean, " +
         (transform_first_ ? "transform-first" : "aggregate-first") + ")";
}

template <typename T> std::size_t SageConv<T>::bytes() const {
  return 2 * (self_weight_.value.bytes() + neigh_weight_.value.bytes() + bias_.value.bytes()) +
         aggregation_.bytes() + mid_.bytes() + self_.bytes() + output_.bytes() + d_mid_.bytes() + d_input_.bytes() +
         scratch_.bytes();
}

template class SageConv<float>;
template class SageConv<double>;

} // namespace tessera
