// GCNConv forward and backward in either product order.
#include "tessera/gnn/gcn_conv.hpp"

#include "src/engine/weight_products.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

template <typename T>
GcnConv<T>::GcnConv(BackendPtr backend, const CsrT<T>& adjacency, const CsrT<T>& adjacency_t,
                    std::int64_t in_features, std::int64_t out_features, bool bias,
                    std::uint64_t seed, std::uint32_t layer_index, GcnOrder order)
    : backend_(backend), aggregation_(backend, adjacency, adjacency_t),
      transform_first_(order == GcnOrder::TransformThenAggregate ||
                       (order == GcnOrder::Auto && out_features < in_features)),
      weight_(detail::make_weight<T>(backend, "conv" + std::to_string(layer_index) + ".weight",
                                     in_features, out_features, seed, layer_index)),
      bias_(detail::make_bias<T>(backend, "conv" + std::to_string(layer_index) + ".bias",
                                 out_features, bias)),
      mid_(backend), output_(backend), d_mid_(backend), d_input_(backend) {}

template <typename T> Context<T> GcnConv<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t in = weight_.value.rows(), out = weight_.value.cols();
  const std::int64_t n = aggregation_.rows();
  // Distributed, the input holds the owned rows only and the halo brings the ghost rows.
  aggregation_.check_layer_input(name(), x, in);
  DenseView<T> y = output_.get(n, out);
  if (transform_first_) { // y = Â · (x·W), the ghost rows of x·W from their owners
    DenseView<T> xw = aggregation_.local_input(out);
    detail::multiply_weight(*backend_, x, weight_.value.cview(), xw.slice_rows(0, x.rows()));
    aggregation_.forward_local(out, y);
  } else { // y = (Â · x) · W
    if (x.is_sparse()) {
      throw InvalidArgument(name() + ": aggregate-first needs a dense input; use transform-first "
                                     "for sparse features");
    }
    DenseView<T> ax = mid_.get(n, in);
    aggregation_.forward(x.dense, ax);
    ops::gemm(*backend_, ops::Transpose::No, ops::Transpose::No, T{1}, ConstDenseView<T>(ax),
              weight_.value.cview(), T{0}, y);
  }
  detail::add_bias(*backend_, y, bias_);
  return Context<T>{x, Input<T>(ConstDenseView<T>(y)), step};
}

template <typename T>
ConstDenseView<T> GcnConv<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                       GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t in = weight_.value.rows();
  const std::int64_t n = aggregation_.rows();
  if (input_mode != GradientMode::Ignore && ctx.input.is_sparse()) {
    throw InvalidArgument(name() + ": no gradient for a sparse input");
  }
  detail::bias_gradient(*backend_, d_output, bias_, param_mode);
  if (transform_first_) {
    // y = Â·(x·W): d(xW) = Âᵀ·dy (distributed, the ghost rows' share is added at their owners);
    // dW = xᵀ·d(xW); dx = d(xW)·Wᵀ.
    const DenseView<T> d_xw = aggregation_.backward(d_output); // [input rows, out]
    detail::weight_gradient(*backend_, ctx.input, ConstDenseView<T>(d_xw), weight_, param_mode,
                            d_input_);
    if (input_mode == GradientMode::Ignore) return {};
    DenseView<T> dx = d_input_.get(ctx.input.rows(), in);
    const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
    ops::gemm(*backend_, ops::Transpose::No, ops::Transpose::Yes, T{1}, ConstDenseView<T>(d_xw),
              weight_.value.cview(), beta, dx);
    return dx;
  }
  // y = (Â·x)·W: dW = (Âx)ᵀ·dy; d(Âx) = dy·Wᵀ; dx = Âᵀ·d(Âx).
  DenseView<T> ax = mid_.get(n, in);
  detail::weight_gradient(*backend_, Input<T>(ConstDenseView<T>(ax)), d_output, weight_, param_mode,
                          d_input_);
  if (input_mode == GradientMode::Ignore) return {};
  if (input_mode == GradientMode::Accumulate) {
    throw InvalidArgument(name() + ": aggregate-first backward overwrites its input gradient");
  }
  DenseView<T> d_ax = d_mid_.get(n, in);
  ops::gemm(*backend_, ops::Transpose::No, ops::Transpose::Yes, T{1}, d_output,
            weight_.value.cview(), T{0}, d_ax);
  return aggregation_.backward(ConstDenseView<T>(d_ax));
}

template <typename T> std::vector<Parameter<T>*> GcnConv<T>::parameters() {
  if (bias_.value.empty()) return {&weight_};
  return {&weight_, &bias_};
}

template <typename T> std::string GcnConv<T>::name() const {
  return "GCNConv(" + std::to_string(weight_.value.rows()) + " -> " +
         std::to_string(weight_.value.cols()) + ", " +
         (transform_first_ ? "transform-first" : "aggregate-first") + ")";
}

template <typename T> std::size_t GcnConv<T>::bytes() const {
  return 2 * (weight_.value.bytes() + bias_.value.bytes()) + aggregation_.bytes() + mid_.bytes() +
         output_.bytes() + d_mid_.bytes() + d_input_.bytes();
}

template class GcnConv<float>;
template class GcnConv<double>;

} // namespace tessera
