// SageConv forward and backward: a self term and a mean-aggregated neighbour term.
#include "tessera/gnn/sage_conv.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/row_blocks.hpp"
#include "tessera/engine/weight_products.hpp"

namespace tessera {

template <typename T>
SageConv<T>::SageConv(BackendPtr backend, const CsrT<T>& mean, const CsrT<T>& mean_t,
                      std::int64_t in_features, std::int64_t out_features, bool bias,
                      std::uint64_t seed, std::uint32_t layer_index, GcnOrder order)
    : backend_(backend), neighbours_(backend, mean, mean_t,
                                     tessera::transforms_first(order, in_features, out_features)),
      // The two weights get different random fields: layer_index for one, a shifted one for
      // the other, so they are independent.
      self_weight_(make_weight<T>(backend, "sage" + std::to_string(layer_index) + ".self",
                                  in_features, out_features, seed, 2 * layer_index)),
      neigh_weight_(make_weight<T>(backend, "sage" + std::to_string(layer_index) + ".neighbour",
                                   in_features, out_features, seed, 2 * layer_index + 1)),
      bias_(make_bias<T>(backend, "sage" + std::to_string(layer_index) + ".bias", out_features,
                         bias)),
      output_(backend), scratch_(backend) {
  this->register_parameter(self_weight_);
  this->register_parameter(neigh_weight_);
  this->register_parameter(bias_);
}

template <typename T> Context<T> SageConv<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t out = self_weight_.value.cols();
  const std::int64_t n = neighbours_.aggregation().rows();
  neighbours_.aggregation().check_layer_input(name(), x, self_weight_.value.rows());
  ChunkManager* blocks = own_memory(*this, backend_, x);
  DenseView<T> y = output_.get(n, out); // M·x·W_neigh + x·W_self + b
  neighbours_.forward(step, name(), x, neigh_weight_.value.cview(), y, blocks);
  // y += x·W_self over the owned rows, added by the product itself (no [n, out] buffer).
  const Input<T> owned = x.first_rows(n);
  std::vector<RowTensor> tensors = input_rows(sparse_rows_, *backend_, owned, blocks);
  tensors.push_back(rows_of(y, Access::ReadWrite));
  for_row_blocks(blocks, n, tensors, [&](std::int64_t b, std::int64_t e) {
    const DenseView<T> y_rows = y.slice_rows(b, e);
    multiply_weight(*backend_, owned.slice_rows(b, e), self_weight_.value.cview(), y_rows, T{1});
    add_bias(*backend_, y_rows, bias_);
  });
  return Context<T>{x, Input<T>(ConstDenseView<T>(y)), step};
}

template <typename T>
ConstDenseView<T> SageConv<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                        GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t n = neighbours_.aggregation().rows();
  ChunkManager* blocks = own_memory(*this, backend_, ctx.input);
  const Input<T> owned = ctx.input.first_rows(n);
  {
    // weight_gradient sums a sparse x's blocks through this [in, out] buffer
    Pins sum(blocks);
    hold_gradient_sum(sum, owned, self_weight_, param_mode, scratch_);
    std::vector<RowTensor> tensors = input_rows(sparse_rows_, *backend_, owned, blocks);
    tensors.push_back(rows_of(d_output, Access::Read));
    for_row_blocks(blocks, n, tensors, [&](std::int64_t b, std::int64_t e) {
      const ConstDenseView<T> dy = d_output.slice_rows(b, e);
      bias_gradient(*backend_, dy, bias_, block_mode(param_mode, b));
      weight_gradient(*backend_, owned.slice_rows(b, e), dy, self_weight_,
                      block_mode(param_mode, b), scratch_);
    });
  }
  // dx = (neighbour term's dx) + dy·W_selfᵀ on the owned rows.
  const DenseView<T> dx = neighbours_.backward(name(), ctx.input, d_output, neigh_weight_,
                                               input_mode, param_mode, blocks);
  if (input_mode == GradientMode::Ignore) return {};
  for_row_blocks(blocks, n, {rows_of(d_output, Access::Read), rows_of(dx, Access::ReadWrite)},
                 [&](std::int64_t b, std::int64_t e) {
                   ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1},
                             d_output.slice_rows(b, e), self_weight_.value.cview(), T{1},
                             dx.slice_rows(b, e));
                 });
  return dx;
}

template <typename T>
bool SageConv<T>::acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const {
  // What Sequential would acquire at once: the neighbour product's working set, the parameters
  // and their gradients.
  const std::int64_t out = self_weight_.value.cols();
  const std::size_t parameters =
      2 * (self_weight_.value.bytes() + neigh_weight_.value.bytes() + bias_.value.bytes());
  return exceeds_budget(memory, neighbours_.working_set_bytes(memory, x, out) + parameters);
}

template <typename T> std::string SageConv<T>::name() const {
  return "SAGEConv(" + std::to_string(self_weight_.value.rows()) + " -> " +
         std::to_string(self_weight_.value.cols()) + ", mean, " +
         (neighbours_.transforms_first() ? "transform-first" : "aggregate-first") + ")";
}

template <typename T> std::size_t SageConv<T>::bytes() const {
  return 2 * (self_weight_.value.bytes() + neigh_weight_.value.bytes() + bias_.value.bytes()) +
         neighbours_.bytes() + output_.bytes() + scratch_.bytes();
}

template class SageConv<float>;
template class SageConv<double>;

} // namespace tessera
