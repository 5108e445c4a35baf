// Dispatch of the sparse ops (SpMM and its transpose) to the backend's kernels.
#include "tessera/kernels/spmm_kernels.hpp"
#include "checks.hpp"
#include "tessera/ops/ops.hpp"

namespace tessera::ops {

namespace {

/// Throws DimensionMismatch naming `op` unless A: [m, k], B: [k, n] and C: [m, n].
template <typename T, typename B>
void check_product_shapes(const char* op, CsrView<T> a, ConstDenseView<B> b, DenseView<T> c) {
  if (a.cols != b.rows) {
    detail::throw_mismatch(op, "A.cols == B.rows", "A", detail::shape(a), "B", detail::shape(b));
  }
  if (c.rows != a.rows || c.cols != b.cols) {
    detail::throw_mismatch(op, "C of shape [A.rows, B.cols]", "A · B", shape_string(a.rows, b.cols),
                           "C", detail::shape(c));
  }
}

} // namespace

template <typename T>
void spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c, T beta) {
  check_product_shapes("spmm", a, b, c);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::spmm(backend, a, b, c, beta);
  case DeviceKind::Cuda:
    return kernels::cuda::spmm(backend, a, b, c, beta);
  }
}

void spmm_bf16(const Backend& backend, CsrView<float> a, ConstDenseView<Bf16> b,
               DenseView<float> c) {
  check_product_shapes("spmm_bf16", a, b, c);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::spmm_bf16(backend, a, b, c);
  case DeviceKind::Cuda:
    return kernels::cuda::spmm_bf16(backend, a, b, c);
  }
}

template <typename T>
void spmm_transpose(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c) {
  if (a.rows != b.rows) {
    detail::throw_mismatch("spmm_transpose", "A.rows == B.rows", "A", detail::shape(a), "B",
                           detail::shape(b));
  }
  if (c.rows != a.cols || c.cols != b.cols) {
    detail::throw_mismatch("spmm_transpose", "C of shape [A.cols, B.cols]", "Aᵀ · B",
                           shape_string(a.cols, b.cols), "C", detail::shape(c));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::spmm_transpose(backend, a, b, c);
  case DeviceKind::Cuda:
    return kernels::cuda::spmm_transpose(backend, a, b, c);
  }
}

template void spmm<float>(const Backend&, CsrView<float>, ConstDenseView<float>, DenseView<float>,
                          float);
template void spmm<double>(const Backend&, CsrView<double>, ConstDenseView<double>,
                           DenseView<double>, double);
template void spmm_transpose<float>(const Backend&, CsrView<float>, ConstDenseView<float>,
                                    DenseView<float>);
template void spmm_transpose<double>(const Backend&, CsrView<double>, ConstDenseView<double>,
                                     DenseView<double>);

} // namespace tessera::ops
