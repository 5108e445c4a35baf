// Aggregation: S · x and Sᵀ · dy with the halo exchange overlapped with the rows that need none.
#include "tessera/gnn/aggregation.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/weight_products.hpp"

namespace tessera {

template <typename T>
Aggregation<T>::Aggregation(BackendPtr backend, const CsrT<T>& s, const CsrT<T>& s_t)
    : backend_(std::move(backend)), s_(&s), s_t_(&s_t), local_(backend_), d_local_(backend_) {
  if (s.rows() > s.cols() || s_t.rows() != s.cols() || s_t.cols() != s.rows()) {
    throw DimensionMismatch("aggregation matrix " + s.shape() + " and its transpose " +
                            s_t.shape() + " do not match (S must be [n_owned, n_local])");
  }
}

template <typename T>
void Aggregation<T>::distribute(comm::HaloExchange<T>* halo, std::int64_t n_interior) {
  if (halo != nullptr &&
      (halo->plan().n_owned() != rows() || halo->plan().n_local() != local_rows() ||
       n_interior < 0 || n_interior > rows())) {
    throw DimensionMismatch("the halo plan (" + std::to_string(halo->plan().n_owned()) +
                            " owned, " + std::to_string(halo->plan().n_local()) +
                            " local rows) does not fit aggregation matrix " + s_->shape() +
                            " with " + std::to_string(n_interior) + " interior rows");
  }
  halo_ = halo;
  n_interior_ = halo != nullptr ? n_interior : 0;
}

template <typename T>
void Aggregation<T>::check_layer_input(const std::string& layer, Input<T> x,
                                      std::int64_t width) const {
  if (x.cols() != width || x.rows() != input_rows()) {
    throw DimensionMismatch(layer + ": input " + shape_string(x.rows(), x.cols()) + " should be " +
                            shape_string(input_rows(), width));
  }
  if (halo_ != nullptr && x.is_sparse()) {
    throw InvalidArgument(layer + ": a sparse input must come with its ghost rows");
  }
}

template <typename T>
void Aggregation<T>::forward(ConstDenseView<T> x, DenseView<T> y) {
  check_layer_input("aggregation over " + s_->shape(), Input<T>(x), x.cols);
  if (halo_ == nullptr) {
    Pins pins(manager_of(backend_));
    pins.add_csr(s_->view());
    ops::spmm(*backend_, s_->view(), x, y);
    return;
  }
  ops::copy(*backend_, x, local_input(x.cols).slice_rows(0, rows()));
  forward_local(x.cols, y);
}

template <typename T>
void Aggregation<T>::forward_local(std::int64_t f, DenseView<T> y) {
  const DenseView<T> x = local_input(f);
  // Under a memory budget the matrix is in chunks: on the device only while it multiplies.
  Pins pins(manager_of(backend_));
  pins.add_csr(s_->view());
  if (halo_ == nullptr) {
    ops::spmm(*backend_, s_->view(), ConstDenseView<T>(x), y);
    return;
  }
  // The interior rows read owned rows only: they aggregate while the ghost rows travel.
  auto request = halo_->start_gather(x);
  const CsrView<T> s = s_->view();
  ops::spmm(*backend_, s.row_slice(0, n_interior_), ConstDenseView<T>(x),
            y.slice_rows(0, n_interior_));
  halo_->wait(request);
  ops::spmm(*backend_, s.row_slice(n_interior_, rows()), ConstDenseView<T>(x),
            y.slice_rows(n_interior_, rows()));
}

template <typename T>
DenseView<T> Aggregation<T>::backward(ConstDenseView<T> dy) {
  if (dy.rows != rows()) {
    throw DimensionMismatch("aggregation over " + s_->shape() + ": gradient " +
                            shape_string(dy.rows, dy.cols) + " should have " +
                            std::to_string(rows()) + " rows");
  }
  DenseView<T> dx = d_local_.get(local_rows(), dy.cols);
  Pins pins(manager_of(backend_));
  pins.add_csr(s_t_->view());
  if (halo_ == nullptr) {
    ops::spmm(*backend_, s_t_->view(), dy, dx);
    return dx;
  }
  // Ghost rows first, so their scatter-add to the owners runs while the owned rows compute;
  // the owners' contributions for this rank's rows are added at wait().
  const CsrView<T> s_t = s_t_->view();
  ops::spmm(*backend_, s_t.row_slice(rows(), local_rows()), dy,
            dx.slice_rows(rows(), local_rows()));
  auto request = halo_->start_scatter_add(dx);
  ops::spmm(*backend_, s_t.row_slice(0, rows()), dy, dx.slice_rows(0, rows()));
  halo_->wait(request);
  return dx.slice_rows(0, rows());
}

template <typename T>
AggregateTransform<T>::AggregateTransform(BackendPtr backend, const CsrT<T>& s,
                                          const CsrT<T>& s_t, bool transform_first)
    : backend_(std::move(backend)), aggregation_(backend_, s, s_t),
      transform_first_(transform_first), mid_(backend_), d_mid_(backend_), d_input_(backend_),
      scratch_(backend_) {}

template <typename T>
void AggregateTransform<T>::forward(const std::string& layer, Input<T> x, ConstDenseView<T> w,
                                    DenseView<T> y) {
  if (transform_first_) {  // y = S · (x·W), the ghost rows of x·W from their owners
    DenseView<T> xw = aggregation_.local_input(w.cols);
    multiply_weight(*backend_, x, w, xw.slice_rows(0, x.rows()));
    aggregation_.forward_local(w.cols, y);
    return;
  }
  if (x.is_sparse()) {
    throw InvalidArgument(layer + ": aggregate-first needs a dense input; use transform-first "
                                  "for sparse features");
  }
  DenseView<T> sx = mid_.get(aggregation_.rows(), w.rows);  // y = (S · x) · W
  aggregation_.forward(x.dense, sx);
  ops::gemm(*backend_, Transpose::No, Transpose::No, T{1}, ConstDenseView<T>(sx), w,
            T{0}, y);
}

template <typename T>
DenseView<T> AggregateTransform<T>::backward(const std::string& layer, Input<T> x,
                                             ConstDenseView<T> dy, Parameter<T>& w,
                                             GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t in = w.value.rows();
  if (input_mode != GradientMode::Ignore && x.is_sparse()) {
    throw InvalidArgument(layer + ": no gradient for a sparse input");
  }
  if (transform_first_) {
    // d(xW) = Sᵀ·dy (distributed, the ghost rows' share is added at their owners);
    // dW = xᵀ·d(xW); dx = d(xW)·Wᵀ.
    const DenseView<T> d_xw = aggregation_.backward(dy);  // [input rows, out]
    weight_gradient(*backend_, x, ConstDenseView<T>(d_xw), w, param_mode, scratch_);
    if (input_mode == GradientMode::Ignore) return {};
    DenseView<T> dx = d_input_.get(x.rows(), in);
    const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
    ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, ConstDenseView<T>(d_xw),
              w.value.cview(), beta, dx);
    return dx;
  }
  // dW = (Sx)ᵀ·dy; d(Sx) = dy·Wᵀ; dx = Sᵀ·d(Sx).
  const DenseView<T> sx = mid_.get(aggregation_.rows(), in);
  weight_gradient(*backend_, Input<T>(ConstDenseView<T>(sx)), dy, w, param_mode,
                          scratch_);
  if (input_mode == GradientMode::Ignore) return {};
  if (input_mode == GradientMode::Accumulate) {
    throw InvalidArgument(layer + ": aggregate-first backward overwrites its input gradient");
  }
  DenseView<T> d_sx = d_mid_.get(aggregation_.rows(), in);
  ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, dy, w.value.cview(), T{0},
            d_sx);
  return aggregation_.backward(ConstDenseView<T>(d_sx));
}

template class Aggregation<float>;
template class Aggregation<double>;
template class AggregateTransform<float>;
template class AggregateTransform<double>;

}  // namespace tessera
