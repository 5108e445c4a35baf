// GinAggregate forward and backward: a neighbour sum plus the (1 + ε)-scaled node itself.
#include "tessera/gnn/gin_conv.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/row_blocks.hpp"
#include "tessera/engine/weight_products.hpp"

namespace tessera {

template <typename T>
GinAggregate<T>::GinAggregate(BackendPtr backend, const CsrT<T>& adjacency,
                              const CsrT<T>& adjacency_t, std::int64_t features, T epsilon,
                              std::uint32_t layer_index, bool bias)
    : backend_(backend), aggregation_(backend, adjacency, adjacency_t),
      features_(features), epsilon_{"gin" + std::to_string(layer_index) + ".epsilon",
                                    DenseT<T>(backend, 1, 1), DenseT<T>::zeros(backend, 1, 1),
                                    false},
      bias_(make_bias<T>(backend, "gin" + std::to_string(layer_index) + ".bias", features, bias)),
      output_(backend) {
  this->register_parameter(epsilon_);
  this->register_parameter(bias_);
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
  ChunkManager* blocks = own_memory(*this, backend_, x);
  DenseView<T> h = output_.get(n, features_);
  if (blocks == nullptr) {
    aggregation_.forward(step, x.dense, h); // A·x
  } else {
    aggregation_.forward_tiled(step, x.dense, h);
  }
  scale_ = one_plus_epsilon(); // read once per step (a device read on a GPU); backward reuses it
  const ConstDenseView<T> own = x.dense.slice_rows(0, n);
  for_row_blocks(blocks, n, {rows_of(own, Access::Read), rows_of(h, Access::ReadWrite)},
                 [&](std::int64_t b, std::int64_t e) {
                   const ConstDenseView<T> x_rows = own.slice_rows(b, e);
                   const DenseView<T> h_rows = h.slice_rows(b, e);
                   ops::axpy(
                       *backend_, scale_,
                       std::span<const T>(x_rows.data, static_cast<std::size_t>(x_rows.size())),
                       std::span<T>(h_rows.data, static_cast<std::size_t>(h_rows.size())));
                   add_bias(*backend_, h_rows, bias_);
                 });
  return Context<T>{x, Input<T>(ConstDenseView<T>(h)), step};
}

template <typename T>
ConstDenseView<T> GinAggregate<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                            GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t n = aggregation_.rows();
  ChunkManager* blocks = own_memory(*this, backend_, ctx.input);
  const ConstDenseView<T> own = ctx.input.dense.slice_rows(0, n);
  for_row_blocks(blocks, n, {rows_of(d_output, Access::Read), rows_of(own, Access::Read)},
                 [&](std::int64_t b, std::int64_t e) {
                   const ConstDenseView<T> dy = d_output.slice_rows(b, e);
                   const GradientMode mode = block_mode(param_mode, b);
                   bias_gradient(*backend_, dy, bias_, mode);
                   if (mode == GradientMode::Ignore) return;
                   // dε = Σ dh ⊙ x over the owned rows: the [1, size]·[size, 1] product of the
                   // flattened matrices.
                   const std::int64_t size = dy.size();
                   const ConstDenseView<T> dh_row(dy.data, 1, size),
                       x_row(own.slice_rows(b, e).data, 1, size);
                   const T beta = mode == GradientMode::Accumulate ? T{1} : T{0};
                   ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, dh_row, x_row, beta,
                             epsilon_.grad.view());
                 });
  if (input_mode == GradientMode::Ignore) return {};
  if (input_mode == GradientMode::Accumulate) {
    throw InvalidArgument(name() + ": backward overwrites its input gradient");
  }
  // Aᵀ·dh, [input rows, f]
  const DenseView<T> dx =
      blocks == nullptr ? aggregation_.backward(d_output) : aggregation_.backward_tiled(d_output);
  for_row_blocks(blocks, n, {rows_of(d_output, Access::Read), rows_of(dx, Access::ReadWrite)},
                 [&](std::int64_t b, std::int64_t e) {
                   const ConstDenseView<T> dy = d_output.slice_rows(b, e);
                   const DenseView<T> dx_rows = dx.slice_rows(b, e);
                   ops::axpy(*backend_, scale_,
                             std::span<const T>(dy.data, static_cast<std::size_t>(dy.size())),
                             std::span<T>(dx_rows.data, static_cast<std::size_t>(dx_rows.size())));
                 });
  return dx;
}

template <typename T>
bool GinAggregate<T>::acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const {
  // What Sequential would acquire at once: A (and Aᵀ), the input and its gradient, the output,
  // and distributed the input with its ghost rows and their gradient.
  if (x.is_sparse()) return false; // refused by forward
  const auto row = static_cast<std::size_t>(features_) * sizeof(T);
  const auto rows = static_cast<std::size_t>(aggregation_.rows());
  const auto local = static_cast<std::size_t>(aggregation_.local_rows());
  const std::size_t ghosts = aggregation_.halo() != nullptr ? 2 * local * row : 0;
  return exceeds_budget(memory, aggregation_.matrix_bytes() +
                                    2 * static_cast<std::size_t>(x.dense.size()) * sizeof(T) +
                                    rows * row + ghosts);
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
