// Aggregation: S · x and Sᵀ · dy with the halo exchange overlapped with the rows that need none.
#include "tessera/gnn/aggregation.hpp"

#include "tessera/core/error.hpp"

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
void Aggregation<T>::check_rows(const char* what, std::int64_t rows, std::int64_t f) const {
  if (rows != input_rows() || f <= 0) {
    throw DimensionMismatch(std::string("aggregation over ") + s_->shape() + ": " + what + " " +
                            shape_string(rows, f) + " should have " +
                            std::to_string(input_rows()) + " rows" +
                            (halo_ != nullptr ? " (the owned rows; the halo brings the ghosts)"
                                              : " (owned and ghost rows)"));
  }
}

template <typename T>
void Aggregation<T>::forward(ConstDenseView<T> x, DenseView<T> y) {
  check_rows("input", x.rows, x.cols);
  if (halo_ == nullptr) {
    ops::spmm(*backend_, s_->view(), x, y);
    return;
  }
  ops::copy(*backend_, x, local_input(x.cols).slice_rows(0, rows()));
  forward_local(x.cols, y);
}

template <typename T>
void Aggregation<T>::forward_local(std::int64_t f, DenseView<T> y) {
  const DenseView<T> x = local_input(f);
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

template class Aggregation<float>;
template class Aggregation<double>;

}  // namespace tessera
