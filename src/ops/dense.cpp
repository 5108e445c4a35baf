// Dispatch of the dense ops (GEMM, copy, axpy, bias) to the backend's kernels.
#include "tessera/kernels/dense_kernels.hpp"
#include "checks.hpp"
#include "tessera/ops/ops.hpp"

namespace tessera::ops {

template <typename T>
void gemm(const Backend& backend, Transpose trans_a, Transpose trans_b, T alpha,
          ConstDenseView<T> a, ConstDenseView<T> b, T beta, DenseView<T> c) {
  // op(X) as a shape: [rows, cols] of X, swapped when transposed.
  const auto op_shape = [](Transpose t, ConstDenseView<T> x) {
    return t == Transpose::No ? ConstDenseView<T>(nullptr, x.rows, x.cols)
                              : ConstDenseView<T>(nullptr, x.cols, x.rows);
  };
  const ConstDenseView<T> op_a = op_shape(trans_a, a);
  const ConstDenseView<T> op_b = op_shape(trans_b, b);
  if (op_a.cols != op_b.rows) {
    detail::throw_mismatch("gemm", "op(A).cols == op(B).rows", "op(A)", detail::shape(op_a),
                           "op(B)", detail::shape(op_b));
  }
  if (c.rows != op_a.rows || c.cols != op_b.cols) {
    detail::throw_mismatch("gemm", "C of shape [op(A).rows, op(B).cols]", "op(A) · op(B)",
                           shape_string(op_a.rows, op_b.cols), "C", detail::shape(c));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::gemm(backend, trans_a, trans_b, alpha, a, b, beta, c);
  case DeviceKind::Cuda:
    return kernels::cuda::gemm(backend, trans_a, trans_b, alpha, a, b, beta, c);
  }
}

template <typename T> void copy(const Backend& backend, ConstDenseView<T> x, DenseView<T> y) {
  detail::check_same_shape("copy", "x", x, "y", y);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::copy(backend, x, y);
  case DeviceKind::Cuda:
    return kernels::cuda::copy(backend, x, y);
  }
}

void round_to_bf16(const Backend& backend, ConstDenseView<float> x, DenseView<Bf16> y) {
  detail::check_same_shape("round_to_bf16", "x", x, "y", y);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::round_to_bf16(backend, x, y);
  case DeviceKind::Cuda:
    return kernels::cuda::round_to_bf16(backend, x, y);
  }
}

template <typename T>
void gather_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,
                 DenseView<T> out) {
  if (out.rows != static_cast<std::int64_t>(rows.size()) || out.cols != x.cols) {
    detail::throw_mismatch("gather_rows", "out of [rows.size(), x.cols]", "x", detail::shape(x),
                           "out", detail::shape(out));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::gather_rows(backend, x, rows, out);
  case DeviceKind::Cuda:
    return kernels::cuda::gather_rows(backend, x, rows, out);
  }
}

template <typename T>
void scatter_add_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,
                      DenseView<T> out) {
  if (x.rows != static_cast<std::int64_t>(rows.size()) || out.cols != x.cols) {
    detail::throw_mismatch("scatter_add_rows", "x of [rows.size(), out.cols]", "x",
                           detail::shape(x), "out", detail::shape(out));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::scatter_add_rows(backend, x, rows, out);
  case DeviceKind::Cuda:
    return kernels::cuda::scatter_add_rows(backend, x, rows, out);
  }
}

template <typename T>
void add_bias(const Backend& backend, DenseView<T> x, std::span<const T> bias) {
  if (static_cast<std::int64_t>(bias.size()) != x.cols) {
    detail::throw_mismatch("add_bias", "bias of x.cols entries", "x", detail::shape(x), "bias",
                           detail::shape(bias));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::add_bias(backend, x, bias);
  case DeviceKind::Cuda:
    return kernels::cuda::add_bias(backend, x, bias);
  }
}

template <typename T>
void axpy(const Backend& backend, T alpha, std::span<const T> x, std::span<T> y) {
  if (x.size() != y.size()) {
    detail::throw_mismatch("axpy", "x and y of the same length", "x", detail::shape(x), "y",
                           detail::shape(y));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::axpy(backend, alpha, x, y);
  case DeviceKind::Cuda:
    return kernels::cuda::axpy(backend, alpha, x, y);
  }
}

template <typename T>
void bias_grad(const Backend& backend, ConstDenseView<T> dy, std::span<T> d_bias, bool accumulate) {
  if (static_cast<std::int64_t>(d_bias.size()) != dy.cols) {
    detail::throw_mismatch("bias_grad", "d_bias of dy.cols entries", "dy", detail::shape(dy),
                           "d_bias", detail::shape(d_bias));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::bias_grad(backend, dy, d_bias, accumulate);
  case DeviceKind::Cuda:
    return kernels::cuda::bias_grad(backend, dy, d_bias, accumulate);
  }
}

template void gemm<float>(const Backend&, Transpose, Transpose, float, ConstDenseView<float>,
                          ConstDenseView<float>, float, DenseView<float>);
template void gemm<double>(const Backend&, Transpose, Transpose, double, ConstDenseView<double>,
                           ConstDenseView<double>, double, DenseView<double>);
template void copy<float>(const Backend&, ConstDenseView<float>, DenseView<float>);
template void copy<double>(const Backend&, ConstDenseView<double>, DenseView<double>);
template void gather_rows<float>(const Backend&, ConstDenseView<float>, std::span<const LocalId>,
                                 DenseView<float>);
template void gather_rows<double>(const Backend&, ConstDenseView<double>,
                                  std::span<const LocalId>, DenseView<double>);
template void scatter_add_rows<float>(const Backend&, ConstDenseView<float>,
                                      std::span<const LocalId>, DenseView<float>);
template void scatter_add_rows<double>(const Backend&, ConstDenseView<double>,
                                       std::span<const LocalId>, DenseView<double>);
template void add_bias<float>(const Backend&, DenseView<float>, std::span<const float>);
template void add_bias<double>(const Backend&, DenseView<double>, std::span<const double>);
template void axpy<float>(const Backend&, float, std::span<const float>, std::span<float>);
template void axpy<double>(const Backend&, double, std::span<const double>, std::span<double>);
template void bias_grad<float>(const Backend&, ConstDenseView<float>, std::span<float>, bool);
template void bias_grad<double>(const Backend&, ConstDenseView<double>, std::span<double>, bool);

} // namespace tessera::ops
