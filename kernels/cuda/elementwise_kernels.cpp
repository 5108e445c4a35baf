// CUDA elementwise kernels: ReLU and dropout with the CPU's counter-based masks (elementwise.cu).
#include "tessera/kernels/elementwise_kernels.hpp"

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "launch.hpp"

namespace tessera::kernels::cuda {

namespace {

launch::RowIds device_rows(RowIds rows) {
  return {rows.ids, rows.offset};
}

} // namespace

template <typename T>
void relu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y) {
  if (x.size() == 0) return;
  launch::relu_forward(x.data, y.data, x.size(), as_cuda(backend).stream());
  check_launch("relu_forward");
}

template <typename T>
void column_sums(const Backend& backend, ConstDenseView<T> a, ConstDenseView<T> b,
                 std::span<T> sum_a, std::span<T> sum_ab) {
  if (a.cols == 0) return;
  launch::column_sums(a.data, b.data, sum_a.data(), sum_ab.data(), a.rows, a.cols,
                      as_cuda(backend).stream());
  check_launch("column_sums");
}

template <typename T>
void batch_norm_apply(const Backend& backend, ConstDenseView<T> x, std::span<const T> mean,
                      std::span<const T> rstd, std::span<const T> gamma, std::span<const T> beta,
                      DenseView<T> y, DenseView<T> xhat) {
  if (x.size() == 0) return;
  launch::batch_norm_apply(x.data, mean.data(), rstd.data(), gamma.data(), beta.data(), y.data,
                           xhat.data, x.rows, x.cols, as_cuda(backend).stream());
  check_launch("batch_norm_apply");
}

template <typename T>
void batch_norm_backward(const Backend& backend, ConstDenseView<T> dy, ConstDenseView<T> xhat,
                         std::span<const T> rstd, std::span<const T> gamma,
                         std::span<const T> mean_dy, std::span<const T> mean_dy_xhat,
                         DenseView<T> dx) {
  if (dy.size() == 0) return;
  launch::batch_norm_backward(dy.data, xhat.data, rstd.data(), gamma.data(), mean_dy.data(),
                              mean_dy_xhat.data(), dx.data, dy.rows, dy.cols,
                              as_cuda(backend).stream());
  check_launch("batch_norm_backward");
}

template <typename T>
void gelu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y) {
  if (x.size() == 0) return;
  launch::gelu_forward(x.data, y.data, x.size(), as_cuda(backend).stream());
  check_launch("gelu_forward");
}

template <typename T>
void gelu_backward(const Backend& backend, ConstDenseView<T> x, ConstDenseView<T> dy,
                   DenseView<T> dx) {
  if (x.size() == 0) return;
  launch::gelu_backward(x.data, dy.data, dx.data, x.size(), as_cuda(backend).stream());
  check_launch("gelu_backward");
}

template <typename T>
void layer_norm_forward(const Backend& backend, ConstDenseView<T> x, std::span<const T> gamma,
                        std::span<const T> beta, T eps, DenseView<T> y, DenseView<T> xhat,
                        std::span<T> rstd) {
  if (x.rows == 0) return;
  launch::layer_norm_forward(x.data, gamma.data(), beta.data(), eps, y.data, xhat.data, rstd.data(),
                             x.rows, x.cols, as_cuda(backend).stream());
  check_launch("layer_norm_forward");
}

template <typename T>
void layer_norm_backward(const Backend& backend, ConstDenseView<T> dy, ConstDenseView<T> xhat,
                         std::span<const T> rstd, std::span<const T> gamma, DenseView<T> dx,
                         DenseView<T> dy_xhat) {
  if (dy.rows == 0) return;
  launch::layer_norm_backward(dy.data, xhat.data, rstd.data(), gamma.data(), dx.data, dy_xhat.data,
                              dy.rows, dy.cols, as_cuda(backend).stream());
  check_launch("layer_norm_backward");
}

template <typename T>
void elu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y) {
  if (x.size() == 0) return;
  launch::elu_forward(x.data, y.data, x.size(), as_cuda(backend).stream());
  check_launch("elu_forward");
}

template <typename T>
void elu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                  DenseView<T> dx, T y_scale) {
  if (y.size() == 0) return;
  launch::elu_backward(y.data, dy.data, dx.data, y.size(), y_scale, as_cuda(backend).stream());
  check_launch("elu_backward");
}

template <typename T>
void relu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                   DenseView<T> dx, T scale) {
  if (y.size() == 0) return;
  launch::relu_backward(y.data, dy.data, dx.data, y.size(), scale, as_cuda(backend).stream());
  check_launch("relu_backward");
}

template <typename T>
void dropout(const Backend& backend, ConstDenseView<T> x, DenseView<T> y, float p,
             const RngKey& key, RowIds rows, bool relu) {
  if (x.size() == 0) return;
  launch::dropout<T>(x.data, y.data, nullptr, x.rows, x.cols, p, key, device_rows(rows), relu,
                     as_cuda(backend).stream());
  check_launch("dropout");
}

void dropout_to_bf16(const Backend& backend, ConstDenseView<float> x, DenseView<Bf16> y, float p,
                     const RngKey& key, RowIds rows) {
  if (x.size() == 0) return;
  launch::dropout_to_bf16(x.data, reinterpret_cast<std::uint16_t*>(y.data), x.rows, x.cols, p, key,
                          device_rows(rows), as_cuda(backend).stream());
  check_launch("dropout_to_bf16");
}

template <typename T>
void bias_activation(const Backend& backend, DenseView<T> y, std::span<const T> bias, float p,
                     const RngKey& key, RowIds rows, bool relu) {
  if (y.size() == 0) return;
  launch::dropout<T>(y.data, y.data, bias.empty() ? nullptr : bias.data(), y.rows, y.cols, p, key,
                     device_rows(rows), relu, as_cuda(backend).stream());
  check_launch("bias_activation");
}

template <typename T>
void dropout_csr_values(const Backend& backend, CsrView<T> in, std::span<T> out_val, float p,
                        const RngKey& key, RowIds rows) {
  if (in.rows == 0) return;
  launch::dropout_csr_values(in.row_ptr, in.col, in.val, out_val.data(), in.rows, p, key,
                             device_rows(rows), as_cuda(backend).stream());
  check_launch("dropout_csr_values");
}

TESSERA_INSTANTIATE_ELEMENTWISE_KERNELS(float);
TESSERA_INSTANTIATE_ELEMENTWISE_KERNELS(double);

} // namespace tessera::kernels::cuda
