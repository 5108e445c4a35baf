// SageConv forward and backward: a self term and a mean-aggregated neighbour term.
#include "tessera/gnn/sage_conv.hpp"

#include "tessera/engine/weight_products.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

template <typename T>
SageConv<T>::SageConv(BackendPtr backend, const CsrT<T>& mean, const CsrT<T>& mean_t,
                      std::int64_t in_features, std::int64_t out_features, bool bias,
                      std::uint64_t seed, std::uint32_t layer_index, GcnOrder order)
    : backend_(backend),
      neighbours_(backend, mean, mean_t,
                  tessera::transforms_first(order, in_features, out_features)),
      // The two weights get different random fields: layer_index for one, a shifted one for
      // the other, so they are independent.
      self_weight_(make_weight<T>(backend, "sage" + std::to_string(layer_index) + ".self",
                                          in_features, out_features, seed, 2 * layer_index)),
      neigh_weight_(make_weight<T>(backend,
                                           "sage" + std::to_string(layer_index) + ".neighbour",
                                           in_features, out_features, seed, 2 * layer_index + 1)),
      bias_(make_bias<T>(backend, "sage" + std::to_string(layer_index) + ".bias",
                                 out_features, bias)),
      self_(backend), output_(backend), scratch_(backend) {}

template <typename T> Context<T> SageConv<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t out = self_weight_.value.cols();
  const std::int64_t n = neighbours_.aggregation().rows();
  neighbours_.aggregation().check_layer_input(name(), x, self_weight_.value.rows());
  DenseView<T> y = output_.get(n, out); // M·x·W_neigh + x·W_self + b
  neighbours_.forward(name(), x, neigh_weight_.value.cview(), y);
  DenseView<T> self = self_.get(n, out); // x·W_self over the owned rows
  multiply_weight(*backend_, x.first_rows(n), self_weight_.value.cview(), self);
  ops::axpy(*backend_, T{1}, std::span<const T>(self.data, static_cast<std::size_t>(self.size())),
            std::span<T>(y.data, static_cast<std::size_t>(y.size())));
  add_bias(*backend_, y, bias_);
  return Context<T>{x, Input<T>(ConstDenseView<T>(y)), step};
}

template <typename T>
ConstDenseView<T> SageConv<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                        GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t n = neighbours_.aggregation().rows();
  bias_gradient(*backend_, d_output, bias_, param_mode);
  weight_gradient(*backend_, ctx.input.first_rows(n), d_output, self_weight_, param_mode,
                          scratch_);
  // dx = (neighbour term's dx) + dy·W_selfᵀ on the owned rows.
  const DenseView<T> dx = neighbours_.backward(name(), ctx.input, d_output, neigh_weight_,
                                               input_mode, param_mode);
  if (input_mode == GradientMode::Ignore) return {};
  ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, d_output,
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
         (neighbours_.transforms_first() ? "transform-first" : "aggregate-first") + ")";
}

template <typename T> std::size_t SageConv<T>::bytes() const {
  return 2 * (self_weight_.value.bytes() + neigh_weight_.value.bytes() + bias_.value.bytes()) +
         neighbours_.bytes() + self_.bytes() + output_.bytes() + scratch_.bytes();
}

template class SageConv<float>;
template class SageConv<double>;

} // namespace tessera
