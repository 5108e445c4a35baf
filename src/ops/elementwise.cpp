// Dispatch of the elementwise ops (ReLU, dropout) to the backend's kernels.
#include "checks.hpp"
#include "tessera/kernels/elementwise_kernels.hpp"
#include "tessera/ops/ops.hpp"

namespace tessera::ops {

template <typename T>
void relu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y) {
  detail::check_same_shape("relu_forward", "x", x, "y", y);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::relu_forward(backend, x, y);
  case DeviceKind::Cuda:
    return kernels::cuda::relu_forward(backend, x, y);
  }
}

template <typename T>
void elu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y) {
  detail::check_same_shape("elu_forward", "x", x, "y", y);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::elu_forward(backend, x, y);
  case DeviceKind::Cuda:
    return kernels::cuda::elu_forward(backend, x, y);
  }
}

template <typename T>
void elu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                  DenseView<T> dx, T y_scale) {
  detail::check_same_shape("elu_backward", "y", y, "dy", dy);
  detail::check_same_shape("elu_backward", "dy", dy, "dx", dx);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::elu_backward(backend, y, dy, dx, y_scale);
  case DeviceKind::Cuda:
    return kernels::cuda::elu_backward(backend, y, dy, dx, y_scale);
  }
}

template <typename T>
void gelu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y) {
  detail::check_same_shape("gelu_forward", "x", x, "y", y);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::gelu_forward(backend, x, y);
  case DeviceKind::Cuda:
    return kernels::cuda::gelu_forward(backend, x, y);
  }
}

template <typename T>
void gelu_backward(const Backend& backend, ConstDenseView<T> x, ConstDenseView<T> dy,
                   DenseView<T> dx) {
  detail::check_same_shape("gelu_backward", "x", x, "dy", dy);
  detail::check_same_shape("gelu_backward", "dy", dy, "dx", dx);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::gelu_backward(backend, x, dy, dx);
  case DeviceKind::Cuda:
    return kernels::cuda::gelu_backward(backend, x, dy, dx);
  }
}

namespace {

/// LayerNorm's vectors: gamma and beta [f] for rows of width f, rstd [n].
void check_norm_vectors(const char* op, std::int64_t rows, std::int64_t cols, std::size_t gamma,
                        std::size_t beta, std::size_t rstd) {
  if (gamma != static_cast<std::size_t>(cols) || beta != static_cast<std::size_t>(cols) ||
      rstd != static_cast<std::size_t>(rows)) {
    throw DimensionMismatch(std::string(op) + ": rows " + shape_string(rows, cols) +
                            " need gamma and beta of " + std::to_string(cols) + " and rstd of " +
                            std::to_string(rows) + ", got " + std::to_string(gamma) + ", " +
                            std::to_string(beta) + " and " + std::to_string(rstd));
  }
}

} // namespace

namespace {

/// Every vector of a per-column op of rows `cols` wide has `cols` entries.
void check_column_vectors(const char* op, std::int64_t cols,
                          std::initializer_list<std::size_t> sizes) {
  for (const std::size_t size : sizes) {
    if (size != static_cast<std::size_t>(cols)) {
      throw DimensionMismatch(std::string(op) + ": per-column vectors of rows " +
                              std::to_string(cols) + " wide need " + std::to_string(cols) +
                              " entries, got " + std::to_string(size));
    }
  }
}

} // namespace

template <typename T>
void column_sums(const Backend& backend, ConstDenseView<T> a, ConstDenseView<T> b,
                 std::span<T> sum_a, std::span<T> sum_ab) {
  detail::check_same_shape("column_sums", "a", a, "b", b);
  check_column_vectors("column_sums", a.cols, {sum_a.size(), sum_ab.size()});
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::column_sums(backend, a, b, sum_a, sum_ab);
  case DeviceKind::Cuda:
    return kernels::cuda::column_sums(backend, a, b, sum_a, sum_ab);
  }
}

template <typename T>
void batch_norm_apply(const Backend& backend, ConstDenseView<T> x, std::span<const T> mean,
                      std::span<const T> rstd, std::span<const T> gamma, std::span<const T> beta,
                      DenseView<T> y, DenseView<T> xhat) {
  detail::check_same_shape("batch_norm_apply", "x", x, "y", y);
  detail::check_same_shape("batch_norm_apply", "x", x, "xhat", xhat);
  check_column_vectors("batch_norm_apply", x.cols,
                       {mean.size(), rstd.size(), gamma.size(), beta.size()});
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::batch_norm_apply(backend, x, mean, rstd, gamma, beta, y, xhat);
  case DeviceKind::Cuda:
    return kernels::cuda::batch_norm_apply(backend, x, mean, rstd, gamma, beta, y, xhat);
  }
}

template <typename T>
void batch_norm_backward(const Backend& backend, ConstDenseView<T> dy, ConstDenseView<T> xhat,
                         std::span<const T> rstd, std::span<const T> gamma,
                         std::span<const T> mean_dy, std::span<const T> mean_dy_xhat,
                         DenseView<T> dx) {
  detail::check_same_shape("batch_norm_backward", "dy", dy, "xhat", xhat);
  detail::check_same_shape("batch_norm_backward", "dy", dy, "dx", dx);
  check_column_vectors("batch_norm_backward", dy.cols,
                       {rstd.size(), gamma.size(), mean_dy.size(), mean_dy_xhat.size()});
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::batch_norm_backward(backend, dy, xhat, rstd, gamma, mean_dy, mean_dy_xhat,
                                             dx);
  case DeviceKind::Cuda:
    return kernels::cuda::batch_norm_backward(backend, dy, xhat, rstd, gamma, mean_dy, mean_dy_xhat,
                                              dx);
  }
}

template <typename T>
void layer_norm_forward(const Backend& backend, ConstDenseView<T> x, std::span<const T> gamma,
                        std::span<const T> beta, T eps, DenseView<T> y, DenseView<T> xhat,
                        std::span<T> rstd) {
  const char* op = "layer_norm_forward";
  detail::check_same_shape(op, "x", x, "y", y);
  detail::check_same_shape(op, "x", x, "xhat", xhat);
  check_norm_vectors(op, x.rows, x.cols, gamma.size(), beta.size(), rstd.size());
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::layer_norm_forward(backend, x, gamma, beta, eps, y, xhat, rstd);
  case DeviceKind::Cuda:
    return kernels::cuda::layer_norm_forward(backend, x, gamma, beta, eps, y, xhat, rstd);
  }
}

template <typename T>
void layer_norm_backward(const Backend& backend, ConstDenseView<T> dy, ConstDenseView<T> xhat,
                         std::span<const T> rstd, std::span<const T> gamma, DenseView<T> dx,
                         DenseView<T> dy_xhat) {
  const char* op = "layer_norm_backward";
  detail::check_same_shape(op, "dy", dy, "xhat", xhat);
  detail::check_same_shape(op, "dy", dy, "dx", dx);
  detail::check_same_shape(op, "dy", dy, "dy_xhat", dy_xhat);
  check_norm_vectors(op, dy.rows, dy.cols, gamma.size(), gamma.size(), rstd.size());
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::layer_norm_backward(backend, dy, xhat, rstd, gamma, dx, dy_xhat);
  case DeviceKind::Cuda:
    return kernels::cuda::layer_norm_backward(backend, dy, xhat, rstd, gamma, dx, dy_xhat);
  }
}

namespace {

/// dx = scale · dy where y > 0, else 0: the backward of ReLU (scale 1) and of ReLU-dropout.
template <typename T>
void relu_backward_map(const char* op, const Backend& backend, ConstDenseView<T> y,
                       ConstDenseView<T> dy, DenseView<T> dx, T scale) {
  detail::check_same_shape(op, "y", y, "dy", dy);
  detail::check_same_shape(op, "dy", dy, "dx", dx);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::relu_backward(backend, y, dy, dx, scale);
  case DeviceKind::Cuda:
    return kernels::cuda::relu_backward(backend, y, dy, dx, scale);
  }
}

/// out = a(in) · mask / (1 - p), a = ReLU or identity; forward and backward of dropout.
template <typename T>
void dropout_map(const char* op, const Backend& backend, ConstDenseView<T> in, DenseView<T> out,
                 float p, const RngKey& key, RowIds rows, bool relu) {
  detail::check_same_shape(op, "input", in, "output", out);
  detail::check_probability(op, p);
  if (p == 0.0f) return relu ? relu_forward(backend, in, out) : copy(backend, in, out);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::dropout(backend, in, out, p, key, rows, relu);
  case DeviceKind::Cuda:
    return kernels::cuda::dropout(backend, in, out, p, key, rows, relu);
  }
}

} // namespace

template <typename T>
void relu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                   DenseView<T> dx) {
  relu_backward_map("relu_backward", backend, y, dy, dx, T{1});
}

template <typename T>
void relu_dropout_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y, float p,
                          const RngKey& key, RowIds rows) {
  dropout_map("relu_dropout_forward", backend, x, y, p, key, rows, true);
}

template <typename T>
void bias_activation(const Backend& backend, DenseView<T> y, std::span<const T> bias, float p,
                     const RngKey& key, RowIds rows, bool relu) {
  if (!bias.empty() && static_cast<std::int64_t>(bias.size()) != y.cols) {
    detail::throw_mismatch("bias_activation", "bias of y.cols entries", "y", detail::shape(y),
                           "bias", detail::shape(bias));
  }
  detail::check_probability("bias_activation", p);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::bias_activation(backend, y, bias, p, key, rows, relu);
  case DeviceKind::Cuda:
    return kernels::cuda::bias_activation(backend, y, bias, p, key, rows, relu);
  }
}

template <typename T>
void relu_dropout_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                           DenseView<T> dx, float p) {
  detail::check_probability("relu_dropout_backward", p);
  relu_backward_map("relu_dropout_backward", backend, y, dy, dx,
                    static_cast<T>(1.0 / (1.0 - static_cast<double>(p))));
}

template <typename T>
void dropout_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y, float p,
                     const RngKey& key, RowIds rows) {
  dropout_map("dropout_forward", backend, x, y, p, key, rows, false);
}

void dropout_to_bf16(const Backend& backend, ConstDenseView<float> x, DenseView<Bf16> y, float p,
                     const RngKey& key, RowIds rows) {
  detail::check_same_shape("dropout_to_bf16", "input", x, "output", y);
  detail::check_probability("dropout_to_bf16", p);
  if (p == 0.0f) return round_to_bf16(backend, x, y);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::dropout_to_bf16(backend, x, y, p, key, rows);
  case DeviceKind::Cuda:
    return kernels::cuda::dropout_to_bf16(backend, x, y, p, key, rows);
  }
}

template <typename T>
void dropout_backward(const Backend& backend, ConstDenseView<T> dy, DenseView<T> dx, float p,
                      const RngKey& key, RowIds rows) {
  dropout_map("dropout_backward", backend, dy, dx, p, key, rows, false);
}

namespace detail {

/// row_ptr[0] and row_ptr[rows] of a view in `backend`'s memory: one copy each, through the
/// backend (on the CPU too: a memory budget's allocator acquires what a copy reads).
template <typename T> std::pair<Offset, Offset> entry_range(const Backend& backend, CsrView<T> a) {
  if (a.rows == 0) return {0, 0};
  Offset first = 0, last = 0;
  backend.copy_to_host(&first, a.row_ptr, sizeof(Offset));
  backend.copy_to_host(&last, a.row_ptr + a.rows, sizeof(Offset));
  return {first, last};
}

} // namespace detail

template <typename T> std::int64_t nnz(const Backend& backend, CsrView<T> a) {
  const auto [first, last] = detail::entry_range(backend, a);
  return last - first;
}

template <typename T>
void dropout_csr_values(const Backend& backend, CsrView<T> in, std::span<T> out_val, float p,
                        const RngKey& key, RowIds rows) {
  const auto [first, last] = detail::entry_range(backend, in);
  if (static_cast<std::int64_t>(out_val.size()) < last) { // indexed by the whole matrix's entries
    detail::throw_mismatch("dropout_csr_values", "out_val of at least row_ptr[n] entries", "in.val",
                           detail::shape_of_size(last), "out_val", detail::shape(out_val));
  }
  detail::check_probability("dropout_csr_values", p);
  if (p == 0.0f) {
    const ConstDenseView<T> values(in.val + first, 1, last - first);
    return copy(backend, values, DenseView<T>(out_val.data() + first, 1, last - first));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::dropout_csr_values(backend, in, out_val, p, key, rows);
  case DeviceKind::Cuda:
    return kernels::cuda::dropout_csr_values(backend, in, out_val, p, key, rows);
  }
}

template void gelu_forward<float>(const Backend&, ConstDenseView<float>, DenseView<float>);
template void gelu_backward<float>(const Backend&, ConstDenseView<float>, ConstDenseView<float>,
                                   DenseView<float>);
template void layer_norm_forward<float>(const Backend&, ConstDenseView<float>,
                                        std::span<const float>, std::span<const float>, float,
                                        DenseView<float>, DenseView<float>, std::span<float>);
template void layer_norm_backward<float>(const Backend&, ConstDenseView<float>,
                                         ConstDenseView<float>, std::span<const float>,
                                         std::span<const float>, DenseView<float>,
                                         DenseView<float>);
template void gelu_forward<double>(const Backend&, ConstDenseView<double>, DenseView<double>);
template void gelu_backward<double>(const Backend&, ConstDenseView<double>, ConstDenseView<double>,
                                    DenseView<double>);
template void layer_norm_forward<double>(const Backend&, ConstDenseView<double>,
                                         std::span<const double>, std::span<const double>, double,
                                         DenseView<double>, DenseView<double>, std::span<double>);
template void layer_norm_backward<double>(const Backend&, ConstDenseView<double>,
                                          ConstDenseView<double>, std::span<const double>,
                                          std::span<const double>, DenseView<double>,
                                          DenseView<double>);
template void column_sums<float>(const Backend&, ConstDenseView<float>, ConstDenseView<float>,
                                 std::span<float>, std::span<float>);
template void batch_norm_apply<float>(const Backend&, ConstDenseView<float>, std::span<const float>,
                                      std::span<const float>, std::span<const float>,
                                      std::span<const float>, DenseView<float>, DenseView<float>);
template void batch_norm_backward<float>(const Backend&, ConstDenseView<float>,
                                         ConstDenseView<float>, std::span<const float>,
                                         std::span<const float>, std::span<const float>,
                                         std::span<const float>, DenseView<float>);
template void column_sums<double>(const Backend&, ConstDenseView<double>, ConstDenseView<double>,
                                  std::span<double>, std::span<double>);
template void batch_norm_apply<double>(const Backend&, ConstDenseView<double>,
                                       std::span<const double>, std::span<const double>,
                                       std::span<const double>, std::span<const double>,
                                       DenseView<double>, DenseView<double>);
template void batch_norm_backward<double>(const Backend&, ConstDenseView<double>,
                                          ConstDenseView<double>, std::span<const double>,
                                          std::span<const double>, std::span<const double>,
                                          std::span<const double>, DenseView<double>);
template void elu_forward<float>(const Backend&, ConstDenseView<float>, DenseView<float>);
template void elu_forward<double>(const Backend&, ConstDenseView<double>, DenseView<double>);
template void elu_backward<float>(const Backend&, ConstDenseView<float>, ConstDenseView<float>,
                                  DenseView<float>, float);
template void elu_backward<double>(const Backend&, ConstDenseView<double>, ConstDenseView<double>,
                                   DenseView<double>, double);
template void relu_forward<float>(const Backend&, ConstDenseView<float>, DenseView<float>);
template void relu_forward<double>(const Backend&, ConstDenseView<double>, DenseView<double>);
template void relu_backward<float>(const Backend&, ConstDenseView<float>, ConstDenseView<float>,
                                   DenseView<float>);
template void relu_backward<double>(const Backend&, ConstDenseView<double>, ConstDenseView<double>,
                                    DenseView<double>);
template void relu_dropout_forward<float>(const Backend&, ConstDenseView<float>, DenseView<float>,
                                          float, const RngKey&, RowIds);
template void relu_dropout_forward<double>(const Backend&, ConstDenseView<double>,
                                           DenseView<double>, float, const RngKey&, RowIds);
template void bias_activation<float>(const Backend&, DenseView<float>, std::span<const float>,
                                     float, const RngKey&, RowIds, bool);
template void bias_activation<double>(const Backend&, DenseView<double>, std::span<const double>,
                                      float, const RngKey&, RowIds, bool);
template void relu_dropout_backward<float>(const Backend&, ConstDenseView<float>,
                                           ConstDenseView<float>, DenseView<float>, float);
template void relu_dropout_backward<double>(const Backend&, ConstDenseView<double>,
                                            ConstDenseView<double>, DenseView<double>, float);
template void dropout_forward<float>(const Backend&, ConstDenseView<float>, DenseView<float>, float,
                                     const RngKey&, RowIds);
template void dropout_forward<double>(const Backend&, ConstDenseView<double>, DenseView<double>,
                                      float, const RngKey&, RowIds);
template void dropout_backward<float>(const Backend&, ConstDenseView<float>, DenseView<float>,
                                      float, const RngKey&, RowIds);
template void dropout_backward<double>(const Backend&, ConstDenseView<double>, DenseView<double>,
                                       float, const RngKey&, RowIds);
template std::int64_t nnz<float>(const Backend&, CsrView<float>);
template std::int64_t nnz<double>(const Backend&, CsrView<double>);
template void dropout_csr_values<float>(const Backend&, CsrView<float>, std::span<float>, float,
                                        const RngKey&, RowIds);
template void dropout_csr_values<double>(const Backend&, CsrView<double>, std::span<double>, float,
                                         const RngKey&, RowIds);

} // namespace tessera::ops
