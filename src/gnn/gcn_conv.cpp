// GCNConv forward and backward in either product order.
#include "tessera/gnn/gcn_conv.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/row_blocks.hpp"
#include "tessera/engine/weight_products.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <span>

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
                    std::uint64_t seed, std::uint32_t layer_index, GcnOrder order,
                    GcnActivation activation)
    : backend_(backend), product_(backend, adjacency, adjacency_t,
                                  tessera::transforms_first(order, in_features, out_features)),
      weight_(make_weight<T>(backend, "conv" + std::to_string(layer_index) + ".weight", in_features,
                             out_features, seed, layer_index)),
      bias_(make_bias<T>(backend, "conv" + std::to_string(layer_index) + ".bias", out_features,
                         bias)),
      activation_(activation), output_(backend), d_before_(backend) {
  this->register_parameter(weight_);
  this->register_parameter(bias_);
  if (!(activation.dropout >= 0.0f && activation.dropout < 1.0f)) {
    throw InvalidArgument("GCNConv: dropout probability must be in [0, 1), got " +
                          std::to_string(activation.dropout));
  }
}

template <typename T> void GcnConv<T>::set_input_dropout(float p, std::uint32_t dropout_layer) {
  if (p > 0.0f && product_.transforms_first()) {
    throw InvalidArgument(name() + ": dropout on the input is fused into aggregate-first layers "
                                   "only; put a Dropout module before a transform-first one");
  }
  product_.aggregation().set_input_dropout(p, dropout_layer);
}

template <typename T> Context<T> GcnConv<T>::forward(const Step& step, Input<T> x) {
  // Distributed, the input holds the owned rows only and the halo brings the ghost rows.
  product_.aggregation().check_layer_input(name(), x, weight_.value.rows());
  DenseView<T> y = output_.get(product_.aggregation().rows(), weight_.value.cols());
  ChunkManager* blocks = own_memory(*this, backend_, x);
  const float p = step.training ? activation_.dropout : 0.0f;
  const RngKey key =
      RngKey::make(step.seed, RngPurpose::Dropout, activation_.dropout_layer, step.epoch);
  const std::span<const T> bias(bias_.value.data(), bias_.value.size());
  typename AggregateTransform<T>::RowEpilogue epilogue;
  if (!bias.empty() || activation_.relu || p > 0.0f) {
    epilogue = [&](std::int64_t b, std::int64_t e) {
      ops::bias_activation(*backend_, y.slice_rows(b, e), bias, p, key, rows_from(step.rows, b),
                           activation_.relu);
    };
  }
  product_.forward(step, name(), x, weight_.value.cview(), y, blocks, epilogue);
  return Context<T>{x, Input<T>(ConstDenseView<T>(y)), step};
}

template <typename T>
ConstDenseView<T> GcnConv<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                       GradientMode input_mode, GradientMode param_mode) {
  // The input gradient through the dropout on the input (set_input_dropout), in place.
  const Aggregation<T>& aggregation = product_.aggregation();
  const float p_in = ctx.step.training ? aggregation.input_dropout() : 0.0f;
  const auto through_input_dropout = [&](DenseView<T> dx) {
    if (p_in > 0.0f && dx.data != nullptr) {
      ops::dropout_backward(*backend_, ConstDenseView<T>(dx), dx, p_in,
                            RngKey::make(ctx.step.seed, RngPurpose::Dropout,
                                         aggregation.input_dropout_layer(), ctx.step.epoch),
                            ctx.step.rows);
    }
    return ConstDenseView<T>(dx);
  };
  ChunkManager* blocks = own_memory(*this, backend_, ctx.input);
  const float p = ctx.step.training ? activation_.dropout : 0.0f;
  if (!activation_.relu && p == 0.0f) { // no activation: d_output is the gradient at y
    for_row_blocks(blocks, d_output.rows, {rows_of(d_output, Access::Read)},
                   [&](std::int64_t b, std::int64_t e) {
                     bias_gradient(*backend_, d_output.slice_rows(b, e), bias_,
                                   block_mode(param_mode, b));
                   });
    return through_input_dropout(
        product_.backward(name(), ctx.input, d_output, weight_, input_mode, param_mode, blocks));
  }
  // Rows [b, e) of the gradient before the activation into `d`, and their bias gradient.
  const ConstDenseView<T> y = ctx.output.dense;
  const RngKey key =
      RngKey::make(ctx.step.seed, RngPurpose::Dropout, activation_.dropout_layer, ctx.step.epoch);
  const auto activation_backward = [&](std::int64_t b, std::int64_t e, DenseView<T> d) {
    if (activation_.relu) { // y > 0 exactly where the input was positive and kept
      ops::relu_dropout_backward(*backend_, y.slice_rows(b, e), d_output.slice_rows(b, e), d, p);
    } else {
      ops::dropout_backward(*backend_, d_output.slice_rows(b, e), d, p, key,
                            rows_from(ctx.step.rows, b));
    }
    bias_gradient(*backend_, ConstDenseView<T>(d), bias_, block_mode(param_mode, b));
  };
  if (blocks == nullptr && !product_.transforms_first()) {
    // Block by block: the gradient before the activation lives in a cache-sized buffer only.
    return through_input_dropout(product_.backward_from_blocks(
        name(),
        [&](std::int64_t b, std::int64_t e) {
          const DenseView<T> d = d_before_.get(e - b, d_output.cols);
          activation_backward(b, e, d);
          return ConstDenseView<T>(d);
        },
        weight_, input_mode, param_mode));
  }
  const DenseView<T> d_before = d_before_.get(d_output.rows, d_output.cols);
  for_row_blocks(
      blocks, d_output.rows,
      {rows_of(y, Access::Read), rows_of(d_output, Access::Read), rows_of(d_before, Access::Write)},
      [&](std::int64_t b, std::int64_t e) {
        activation_backward(b, e, d_before.slice_rows(b, e));
      });
  const DenseView<T> dx = product_.backward(name(), ctx.input, ConstDenseView<T>(d_before), weight_,
                                            input_mode, param_mode, blocks);
  discard(backend_, d_before);
  return through_input_dropout(dx);
}

template <typename T>
bool GcnConv<T>::acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const {
  // What Sequential would acquire at once: the product's working set, the parameters and their
  // gradients.
  // With an activation, backward also reads the output and writes the gradient before it
  // (aggregate-first on a CPU: a cache block of it at a time).
  const std::size_t parameters = 2 * (weight_.value.bytes() + bias_.value.bytes());
  const std::size_t output =
      static_cast<std::size_t>(product_.aggregation().rows() * weight_.value.cols()) * sizeof(T);
  const bool blocked = !product_.transforms_first() && backend_->kind() == DeviceKind::Cpu;
  const std::size_t activation =
      activation_.relu || activation_.dropout > 0.0f ? (blocked ? 1 : 2) * output : 0;
  return exceeds_budget(memory, product_.working_set_bytes(memory, x, weight_.value.cols()) +
                                    parameters + activation);
}

template <typename T> std::string GcnConv<T>::name() const {
  std::string text = "GCNConv(" + std::to_string(weight_.value.rows()) + " -> " +
                     std::to_string(weight_.value.cols()) + ", " +
                     (product_.transforms_first() ? "transform-first" : "aggregate-first");
  if (const float p = product_.aggregation().input_dropout(); p > 0.0f) {
    text += fmt::format(", input Dropout(p={:g})", p);
  }
  text += ")";
  if (activation_.relu) text += " + ReLU";
  if (activation_.dropout > 0.0f) text += fmt::format(" + Dropout(p={:g})", activation_.dropout);
  if (product_.aggregation().input_dtype() != ActivationDType::Fp32) {
    text += ", aggregates " + to_string(product_.aggregation().input_dtype());
  }
  return text;
}

template <typename T> std::size_t GcnConv<T>::bytes() const {
  return 2 * (weight_.value.bytes() + bias_.value.bytes()) + product_.bytes() + output_.bytes() +
         d_before_.bytes();
}

template class GcnConv<float>;
template class GcnConv<double>;

} // namespace tessera
