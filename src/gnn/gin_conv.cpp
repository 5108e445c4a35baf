// GinAggregate forward and backward: a neighbour sum plus the (1 + ε)-scaled node itself.
#include "tessera/gnn/gin_conv.hpp"

#include "tessera/engine/weight_products.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

template <typename T>
GinAggregate<T>::GinAggregate(BackendPtr backend, const CsrT<T>& adjacency,
                              const CsrT<T>& adjacency_t, std::int64_t features, T epsilon,
                              std::uint32_t layer_index, bool bias)
    : backend_(backend), aggregation_(backend, adjacency, adjacency_t), features_(features),
      epsilon_{"gin" + std::to_string(layer_index) + ".epsilon", DenseT<T>(backend, 1, 1),
               DenseT<T>::zeros(backend, 1, 1), false},
      bias_(make_bias<T>(backend, "gin" + std::to_string(layer_index) + ".bias", features,
                                 bias)),
      output_(backend) {
  backend->copy_from_host(epsilon_.value.data(), &epsilon, sizeof(T));
}

template <typename T> T GinAggregate<T>::one_plus_epsilon() const {
  T epsilon{};
  backend_->copy_to_host(&epsilon, epsilon_.value.data(), sizeof(T));
  return T{1} + epsilon;
}

template <typename T> Context<T> GinAggregate<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t n = aggregation_.rows();
  if (x.is_sparse() || x.cols() != features_ || x.rows() != aggregation_.input_rows()) {
    throw DimensionMismatch(name() + ": needs a dense input of " +
                            shape_string(aggregation_.input_rows(), features_) + ", got " +
                            shape_string(x.rows(), x.cols()) + (x.is_sparse() ? " (sparse)" : ""));
  }
  DenseView<T> h = output_.get(n, features_);
  aggregation_.forward(x.dense, h); // A·x
  scale_ = one_plus_epsilon(); // read once per step (a device read on a GPU); backward reuses it
  const ConstDenseView<T> own = x.dense.slice_rows(0, n);
  ops::axpy(*backend_, scale_, std::span<const T>(own.data, static_cast<std::size_t>(own.size())),
            std::span<T>(h.data, static_cast<std::size_t>(h.size())));
  add_bias(*backend_, h, bias_);
  return Context<T>{x, Input<T>(ConstDenseView<T>(h)), step};
}

template <typename T>
ConstDenseView<T> GinAggregate<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                            GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t n = aggregation_.rows();
  const std::int64_t size = n * features_;
  bias_gradient(*backend_, d_output, bias_, param_mode);
  if (param_mode != GradientMode::Ignore) {
    // dε = Σ dh ⊙ x over the owned rows: the [1, size]·[size, 1] product of the flattened
    // matrices.
    const ConstDenseView<T> dh_row(d_output.data, 1, size), x_row(ctx.input.dense.data, 1, size);
    const T beta = param_mode == GradientMode::Accumulate ? T{1} : T{0};
    ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, dh_row, x_row, beta,
              epsilon_.grad.view());
  }
  if (input_mode == GradientMode::Ignore) return {};
  if (input_mode == GradientMode::Accumulate) {
    throw InvalidArgument(name() + ": backward overwrites its input gradient");
  }
  const DenseView<T> dx = aggregation_.backward(d_output); // Aᵀ·dh, [input rows, f]
  ops::axpy(*backend_, scale_, std::span<const T>(d_output.data, static_cast<std::size_t>(size)),
            std::span<T>(dx.data, static_cast<std::size_t>(size)));
  return dx;
}

template <typename T> std::vector<Parameter<T>*> GinAggregate<T>::parameters() {
  if (bias_.value.empty()) return {&epsilon_};
  return {&epsilon_, &bias_};
}

template <typename T> std::string GinAggregate<T>::name() const {
  return "GINAggregate(" + std::to_string(features_) + ", sum, learnable eps" +
         (bias_.value.empty() ? "" : ", bias") + ")";
}

template <typename T> std::size_t GinAggregate<T>::bytes() const {
  return 2 * (epsilon_.value.bytes() + bias_.value.bytes()) + aggregation_.bytes() +
         output_.bytes();
}

template class GinAggregate<float>;
template class GinAggregate<double>;

} // namespace tessera
