// GCNConv forward and backward in either product order.
#include "tessera/gnn/gcn_conv.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/row_blocks.hpp"
#include "tessera/engine/weight_products.hpp"

#include <algorithm>

namespace tessera {

std::string to_string(GcnOrder order) {
  switch (order) {
  case GcnOrder::AggregateThenTransform:
    return "aggregate-first";
  case GcnOrder::TransformThenAggregate:
    return "transform-first";
  case GcnOrder::Auto:
    break;
  }
  return "auto";
}

GcnOrder parse_gcn_order(const std::string& text) {
  for (const GcnOrder order :
       {GcnOrder::Auto, GcnOrder::AggregateThenTransform, GcnOrder::TransformThenAggregate}) {
    if (text == to_string(order)) return order;
  }
  throw InvalidArgument("unknown product order '" + text +
                        "'; valid: auto, aggregate-first, transform-first");
}

template <typename T>
GcnConv<T>::GcnConv(BackendPtr backend, const CsrT<T>& adjacency, const CsrT<T>& adjacency_t,
                    std::int64_t in_features, std::int64_t out_features, bool bias,
                    std::uint64_t seed, std::uint32_t layer_index, GcnOrder order)
    : backend_(backend), product_(backend, adjacency, adjacency_t,
                                  tessera::transforms_first(order, in_features, out_features)),
      weight_(make_weight<T>(backend, "conv" + std::to_string(layer_index) + ".weight", in_features,
                             out_features, seed, layer_index)),
      bias_(make_bias<T>(backend, "conv" + std::to_string(layer_index) + ".bias", out_features,
                         bias)),
      output_(backend) {}

template <typename T> Context<T> GcnConv<T>::forward(const Step& step, Input<T> x) {
  // Distributed, the input holds the owned rows only and the halo brings the ghost rows.
  product_.aggregation().check_layer_input(name(), x, weight_.value.rows());
  DenseView<T> y = output_.get(product_.aggregation().rows(), weight_.value.cols());
  ChunkManager* blocks = own_memory(*this, backend_, x);
  product_.forward(step, name(), x, weight_.value.cview(), y, blocks);
  for_row_blocks(
      blocks, y.rows, {rows_of(y, Access::ReadWrite)},
      [&](std::int64_t b, std::int64_t e) { add_bias(*backend_, y.slice_rows(b, e), bias_); });
  return Context<T>{x, Input<T>(ConstDenseView<T>(y)), step};
}

template <typename T>
ConstDenseView<T> GcnConv<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                       GradientMode input_mode, GradientMode param_mode) {
  ChunkManager* blocks = own_memory(*this, backend_, ctx.input);
  for_row_blocks(blocks, d_output.rows, {rows_of(d_output, Access::Read)},
                 [&](std::int64_t b, std::int64_t e) {
                   bias_gradient(*backend_, d_output.slice_rows(b, e), bias_,
                                 block_mode(param_mode, b));
                 });
  return product_.backward(name(), ctx.input, d_output, weight_, input_mode, param_mode, blocks);
}

template <typename T>
bool GcnConv<T>::acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const {
  // What Sequential would acquire at once: the product's working set, the parameters and their
  // gradients.
  const std::size_t parameters = 2 * (weight_.value.bytes() + bias_.value.bytes());
  return exceeds_budget(memory,
                        product_.working_set_bytes(memory, x, weight_.value.cols()) + parameters);
}

template <typename T> std::vector<Parameter<T>*> GcnConv<T>::parameters() {
  if (bias_.value.empty()) return {&weight_};
  return {&weight_, &bias_};
}

template <typename T> std::string GcnConv<T>::name() const {
  return "GCNConv(" + std::to_string(weight_.value.rows()) + " -> " +
         std::to_string(weight_.value.cols()) + ", " +
         (product_.transforms_first() ? "transform-first" : "aggregate-first") + ")";
}

template <typename T> std::size_t GcnConv<T>::bytes() const {
  return 2 * (weight_.value.bytes() + bias_.value.bytes()) + product_.bytes() + output_.bytes();
}

template class GcnConv<float>;
template class GcnConv<double>;

} // namespace tessera
