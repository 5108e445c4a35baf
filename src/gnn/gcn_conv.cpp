// GCNConv forward and backward in either product order.
#include "tessera/gnn/gcn_conv.hpp"

#include "src/engine/weight_products.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

template <typename T>
GcnConv<T>::GcnConv(BackendPtr backend, const CsrT<T>& adjacency, const CsrT<T>& adjacency_t,
                    std::int64_t in_features, std::int64_t out_features, bool bias,
                    std::uint64_t seed, std::uint32_t layer_index, GcnOrder order)
    : backend_(backend), adjacency_(&adjacency), adjacency_t_(&adjacency_t),
      transform_first_(order == GcnOrder::TransformThenAggregate ||
                       (order == GcnOrder::Auto && out_features < in_features)),
      weight_(detail::make_weight<T>(backend, "conv" + std::to_string(layer_index) + ".weight",
                                     in_features, out_features, seed, layer_index)),
      bias_(detail::make_bias<T>(backend, "conv" + std::to_string(layer_index) + ".bias",
                                 out_features, bias)),
      mid_(backend), x_local_(backend), output_(backend), d_mid_(backend), d_input_(backend) {
  if (adjacency.rows() != adjacency_t.cols() || adjacency.cols() != adjacency_t.rows()) {
    throw DimensionMismatch("GcnConv: adjacency " + adjacency.shape() + " and its transpose " +
                            adjacency_t.shape() + " do not match");
  }
}

template <typename T>
void GcnConv<T>::distribute(comm::HaloExchange<T>* halo, std::int64_t n_interior) {
  if (halo == nullptr || halo->plan().n_owned() != adjacency_->rows() ||
      halo->plan().n_local() != adjacency_->cols() || n_interior < 0 ||
      n_interior > adjacency_->rows()) {
    throw DimensionMismatch(name() + ": the halo plan does not fit adjacency " +
                            adjacency_->shape() + " with " + std::to_string(n_interior) +
                            " interior rows");
  }
  halo_ = halo;
  n_interior_ = n_interior;
}

namespace {

/// y = Â · x, the interior rows [0, n_interior) while `request` is in flight, the rest after.
/// Â: [m, n_local], x: [n_local, f] whose ghost rows `request` is filling, y: [m, f].
template <typename T>
void aggregate_overlapped(const Backend& backend, comm::HaloExchange<T>& halo,
                          typename comm::HaloExchange<T>::Request& request, CsrView<T> a,
                          std::int64_t n_interior, ConstDenseView<T> x, DenseView<T> y) {
  ops::spmm(backend, a.row_slice(0, n_interior), x, y.slice_rows(0, n_interior));
  halo.wait(request);
  ops::spmm(backend, a.row_slice(n_interior, a.rows), x, y.slice_rows(n_interior, a.rows));
}

/// dx = Âᵀ · dy on all local rows, ghost rows first so their scatter-add to the owners runs
/// while the owned rows are computed; the owners' contributions are added last. Âᵀ: [n_local,
/// n_owned], dy: [n_owned, f], dx: [n_local, f]; on return dx's owned rows are complete.
template <typename T>
void transpose_aggregate_overlapped(const Backend& backend, comm::HaloExchange<T>& halo,
                                    CsrView<T> a_t, ConstDenseView<T> dy, DenseView<T> dx) {
  const std::int64_t n_owned = halo.plan().n_owned();
  ops::spmm(backend, a_t.row_slice(n_owned, a_t.rows), dy, dx.slice_rows(n_owned, a_t.rows));
  auto request = halo.start_scatter_add(dx);
  ops::spmm(backend, a_t.row_slice(0, n_owned), dy, dx.slice_rows(0, n_owned));
  halo.wait(request);
}

} // namespace

template <typename T> Context<T> GcnConv<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t in = weight_.value.rows(), out = weight_.value.cols();
  const std::int64_t n = adjacency_->rows(), n_local = adjacency_->cols();
  // Distributed, the input holds the owned rows only and the halo brings the ghost rows.
  const bool exchange = halo_ != nullptr;
  if (x.cols() != in || x.rows() != (exchange ? n : n_local)) {
    throw DimensionMismatch(name() + ": input " + shape_string(x.rows(), x.cols()) +
                            " does not fit adjacency " + adjacency_->shape() + " and weight " +
                            weight_.value.shape());
  }
  if (exchange && x.is_sparse()) {
    throw InvalidArgument(name() + ": a sparse input must come with its ghost rows");
  }
  DenseView<T> y = output_.get(n, out);
  if (transform_first_) {
    DenseView<T> xw = mid_.get(n_local, out); // [n_local, out]: x·W, ghost rows from the halo
    if (exchange) {
      detail::multiply_weight(*backend_, x, weight_.value.cview(), xw.slice_rows(0, n));
      auto request = halo_->start_gather(xw);
      aggregate_overlapped(*backend_, *halo_, request, adjacency_->view(), n_interior_,
                           ConstDenseView<T>(xw), y);
    } else {
      detail::multiply_weight(*backend_, x, weight_.value.cview(), xw);
      ops::spmm(*backend_, adjacency_->view(), ConstDenseView<T>(xw), y);
    }
  } else {
    if (x.is_sparse()) {
      throw InvalidArgument(name() + ": aggregate-first needs a dense input; use transform-first "
                                     "for sparse features");
    }
    DenseView<T> ax = mid_.get(n, in); // [n, in]
    if (exchange) {
      DenseView<T> x_local = x_local_.get(n_local, in); // [n_local, in]
      ops::copy(*backend_, x.dense, x_local.slice_rows(0, n));
      auto request = halo_->start_gather(x_local);
      aggregate_overlapped(*backend_, *halo_, request, adjacency_->view(), n_interior_,
                           ConstDenseView<T>(x_local), ax);
    } else {
      ops::spmm(*backend_, adjacency_->view(), x.dense, ax);
    }
    ops::gemm(*backend_, ops::Transpose::No, ops::Transpose::No, T{1}, ConstDenseView<T>(ax),
              weight_.value.cview(), T{0}, y);
  }
  detail::add_bias(*backend_, y, bias_);
  return Context<T>{x, Input<T>(ConstDenseView<T>(y)), step};
}

template <typename T>
ConstDenseView<T> GcnConv<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                       GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t in = weight_.value.rows(), out = weight_.value.cols();
  const std::int64_t n = adjacency_->rows(), n_local = adjacency_->cols();
  const bool exchange = halo_ != nullptr;
  if (input_mode != GradientMode::Ignore && ctx.input.is_sparse()) {
    throw InvalidArgument(name() + ": no gradient for a sparse input");
  }
  detail::bias_gradient(*backend_, d_output, bias_, param_mode);
  const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
  if (transform_first_) {
    // y = Â·(x·W): d(xW) = Âᵀ·dy; dW = xᵀ·d(xW); dx = d(xW)·Wᵀ. Distributed, the ghost rows of
    // d(xW) belong to their owners' rows of x·W and are added there.
    DenseView<T> d_xw = d_mid_.get(n_local, out); // [n_local, out]
    if (exchange) {
      transpose_aggregate_overlapped(*backend_, *halo_, adjacency_t_->view(), d_output, d_xw);
      d_xw = d_xw.slice_rows(0, n);
    } else {
      ops::spmm(*backend_, adjacency_t_->view(), d_output, d_xw);
    }
    detail::weight_gradient(*backend_, ctx.input, ConstDenseView<T>(d_xw), weight_, param_mode,
                            d_input_);
    if (input_mode == GradientMode::Ignore) return {};
    DenseView<T> dx = d_input_.get(ctx.input.rows(), in);
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
  DenseView<T> dx = d_input_.get(n_local, in); // [n_local, in]
  if (exchange) {
    transpose_aggregate_overlapped(*backend_, *halo_, adjacency_t_->view(), ConstDenseView<T>(d_ax),
                                   dx);
    return dx.slice_rows(0, n);
  }
  ops::spmm(*backend_, adjacency_t_->view(), ConstDenseView<T>(d_ax), dx);
  return dx;
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
  return 2 * (weight_.value.bytes() + bias_.value.bytes()) + mid_.bytes() + x_local_.bytes() +
         output_.bytes() + d_mid_.bytes() + d_input_.bytes();
}

template class GcnConv<float>;
template class GcnConv<double>;

} // namespace tessera
