// Contract of the dense kernel family: GEMM, copy, axpy and bias, one twin per backend.
#pragma once

#include "tessera/core/bf16.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/op_params.hpp"
#include "tessera/core/tensor.hpp"

#include <span>

// Declared once, expanded into every backend namespace below. Shapes are checked by src/ops;
// row ids are checked by the CPU kernels and trusted by the device ones (they live there).
#define TESSERA_DECLARE_DENSE_KERNELS                                                              \
  /* C = alpha · op(A) · op(B) + beta · C. op(A): [m, k], op(B): [k, n], c: [m, n]. */          \
  template <typename T>                                                                            \
  void gemm(const Backend& backend, Transpose trans_a, Transpose trans_b, T alpha,                 \
            ConstDenseView<T> a, ConstDenseView<T> b, T beta, DenseView<T> c);                     \
  /* y = x; x, y: [n, f]; y may be x. */                                                           \
  template <typename T> void copy(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);    \
  /* y = x rounded to bfloat16 (to nearest, ties to even). x, y: [n, f]. */                        \
  void round_to_bf16(const Backend& backend, ConstDenseView<float> x, DenseView<Bf16> y);          \
  /* x[r, :] += bias. x: [n, f], bias: [f]. */                                                     \
  template <typename T>                                                                            \
  void add_bias(const Backend& backend, DenseView<T> x, std::span<const T> bias);                  \
  /* y += alpha · x. x, y: [size]. */                                                             \
  template <typename T>                                                                            \
  void axpy(const Backend& backend, T alpha, std::span<const T> x, std::span<T> y);                \
  /* d_bias (+)= column sums of dy. dy: [n, f], d_bias: [f]. */                                    \
  template <typename T>                                                                            \
  void bias_grad(const Backend& backend, ConstDenseView<T> dy, std::span<T> d_bias,                \
                 bool accumulate);                                                                 \
  /* out[i, :] = x[rows[i], :]. x: [n, f], rows: [m], out: [m, f]. */                              \
  template <typename T>                                                                            \
  void gather_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,     \
                   DenseView<T> out);                                                              \
  /* out[rows[i], :] += x[i, :]. x: [m, f], rows: [m] distinct, out: [n, f]. */                    \
  template <typename T>                                                                            \
  void scatter_add_rows(const Backend& backend, ConstDenseView<T> x,                               \
                        std::span<const LocalId> rows, DenseView<T> out);

/// Explicit instantiation of the family for value type T, used by every backend's source.
#define TESSERA_INSTANTIATE_DENSE_KERNELS(T)                                                       \
  template void gemm<T>(const Backend&, Transpose, Transpose, T, ConstDenseView<T>,      \
                        ConstDenseView<T>, T, DenseView<T>);                                       \
  template void copy<T>(const Backend&, ConstDenseView<T>, DenseView<T>);                          \
  template void add_bias<T>(const Backend&, DenseView<T>, std::span<const T>);                     \
  template void axpy<T>(const Backend&, T, std::span<const T>, std::span<T>);                      \
  template void bias_grad<T>(const Backend&, ConstDenseView<T>, std::span<T>, bool);              \
  template void gather_rows<T>(const Backend&, ConstDenseView<T>, std::span<const LocalId>,        \
                               DenseView<T>);                                                      \
  template void scatter_add_rows<T>(const Backend&, ConstDenseView<T>, std::span<const LocalId>,   \
                                    DenseView<T>)

namespace tessera::kernels {
namespace cpu {
TESSERA_DECLARE_DENSE_KERNELS
} // namespace cpu
namespace cuda {
TESSERA_DECLARE_DENSE_KERNELS
} // namespace cuda
} // namespace tessera::kernels

#undef TESSERA_DECLARE_DENSE_KERNELS
