// Contract of the elementwise kernel family: ReLU and counter-RNG dropout, one twin per backend.
#pragma once

#include "tessera/core/bf16.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/op_params.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/tensor.hpp"

#include <span>

// Declared once, expanded into every backend namespace below. Shapes and p are checked by src/ops.
#define TESSERA_DECLARE_ELEMENTWISE_KERNELS                                                         \
  /* y = max(x, 0). x, y: [n, f]; y may be x. */                                                    \
  template <typename T>                                                                             \
  void relu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);                   \
  /* dx = scale · dy where y > 0, else 0. y, dy, dx: [n, f]; dx may be dy. */                      \
  template <typename T>                                                                             \
  void relu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,             \
                     DenseView<T> dx, T scale);                                                     \
  /* y = x where x > 0, else exp(x) − 1 (ELU, α = 1). x, y: [n, f]; y may be x. */               \
  template <typename T>                                                                             \
  void elu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);                    \
  /* From ELU's output y (scaled by 1 / y_scale: a dropout's output): dx = dy where y > 0, else     \
     dy · (y · y_scale + 1). dx may be dy. */                                                     \
  template <typename T>                                                                             \
  void elu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,              \
                    DenseView<T> dx, T y_scale);                                                    \
  /* y = GELU(x) = x · Φ(x) (the erf form, PyTorch's nn.GELU()). x, y: [n, f]; y may be x. */     \
  template <typename T>                                                                             \
  void gelu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);                   \
  /* dx = dy · (Φ(x) + x · φ(x)) from GELU's input x. dx may be dy. */                          \
  template <typename T>                                                                             \
  void gelu_backward(const Backend& backend, ConstDenseView<T> x, ConstDenseView<T> dy,             \
                     DenseView<T> dx);                                                              \
  /* Per row r of x [n, f]: mean μ, variance σ² (biased), rstd[r] = 1 / sqrt(σ² + eps),        \
     xhat = (x − μ) · rstd[r], y = xhat · gamma + beta (gamma, beta: [f]). y, xhat: [n, f]. */ \
  template <typename T>                                                                             \
  void layer_norm_forward(const Backend& backend, ConstDenseView<T> x, std::span<const T> gamma,    \
                          std::span<const T> beta, T eps, DenseView<T> y, DenseView<T> xhat,        \
                          std::span<T> rstd);                                                       \
  /* From the forward's xhat and rstd: g = dy · gamma, dx = rstd · (g − mean(g) − xhat ·     \
     mean(g · xhat)) per row; dy_xhat = dy · xhat (whose column sums are dgamma). */              \
  template <typename T>                                                                             \
  void layer_norm_backward(const Backend& backend, ConstDenseView<T> dy, ConstDenseView<T> xhat,    \
                           std::span<const T> rstd, std::span<const T> gamma, DenseView<T> dx,      \
                           DenseView<T> dy_xhat);                                                   \
  /* Column sums of a [n, f] and of a · b ([n, f]), summed in double: sum_a, sum_ab: [f]. */       \
  template <typename T>                                                                             \
  void column_sums(const Backend& backend, ConstDenseView<T> a, ConstDenseView<T> b,                \
                   std::span<T> sum_a, std::span<T> sum_ab);                                        \
  /* BatchNorm with given statistics: xhat = (x − mean) · rstd, y = xhat · gamma + beta, all    \
     vectors [f] over the columns of x, y, xhat [n, f]. */                                          \
  template <typename T>                                                                             \
  void batch_norm_apply(const Backend& backend, ConstDenseView<T> x, std::span<const T> mean,       \
                        std::span<const T> rstd, std::span<const T> gamma,                          \
                        std::span<const T> beta, DenseView<T> y, DenseView<T> xhat);                \
  /* dx = gamma · rstd · (dy − mean_dy − xhat · mean_dy_xhat), the means over every row the  \
     statistics covered; vectors [f]. */                                                            \
  template <typename T>                                                                             \
  void batch_norm_backward(const Backend& backend, ConstDenseView<T> dy, ConstDenseView<T> xhat,    \
                           std::span<const T> rstd, std::span<const T> gamma,                       \
                           std::span<const T> mean_dy, std::span<const T> mean_dy_xhat,             \
                           DenseView<T> dx);                                                        \
  /* y = a(x) · mask / (1 - p), mask[r, c] = uniform(key, rows(r), c) >= p; 0 <= p < 1; */         \
  /* a = max(·, 0) when relu, else the identity. Forward and backward of dropout are this map. */  \
  /* x, y: [n, f]; y may be x. */                                                                   \
  template <typename T>                                                                             \
  void dropout(const Backend& backend, ConstDenseView<T> x, DenseView<T> y, float p,                \
               const RngKey& key, RowIds rows, bool relu);                                          \
  /* y = x · mask / (1 - p) rounded to bfloat16, dropout's mask; 0 < p < 1. x, y: [n, f]. */       \
  void dropout_to_bf16(const Backend& backend, ConstDenseView<float> x, DenseView<Bf16> y,          \
                       float p, const RngKey& key, RowIds rows);                                    \
  /* y = a(y + bias) · mask / (1 - p) in place, dropout's mask (none drawn when p = 0): the */     \
  /* epilogue a layer applies to the rows its product just wrote. y: [n, f]; bias: [f] or */        \
  /* empty. */                                                                                      \
  template <typename T>                                                                             \
  void bias_activation(const Backend& backend, DenseView<T> y, std::span<const T> bias, float p,    \
                       const RngKey& key, RowIds rows, bool relu);                                  \
  /* out_val[k] = in.val[k] · mask(r, in.col[k]) / (1 - p) with the dense mask; out_val: [nnz]. */ \
  template <typename T>                                                                             \
  void dropout_csr_values(const Backend& backend, CsrView<T> in, std::span<T> out_val, float p,     \
                          const RngKey& key, RowIds rows);

/// Explicit instantiation of the family for value type T, used by every backend's source.
#define TESSERA_INSTANTIATE_ELEMENTWISE_KERNELS(T)                                                 \
  template void relu_forward<T>(const Backend&, ConstDenseView<T>, DenseView<T>);                  \
  template void relu_backward<T>(const Backend&, ConstDenseView<T>, ConstDenseView<T>,             \
                                 DenseView<T>, T);                                                 \
  template void elu_forward<T>(const Backend&, ConstDenseView<T>, DenseView<T>);                   \
  template void gelu_forward<T>(const Backend&, ConstDenseView<T>, DenseView<T>);                  \
  template void column_sums<T>(const Backend&, ConstDenseView<T>, ConstDenseView<T>, std::span<T>, \
                               std::span<T>);                                                      \
  template void batch_norm_apply<T>(const Backend&, ConstDenseView<T>, std::span<const T>,         \
                                    std::span<const T>, std::span<const T>, std::span<const T>,    \
                                    DenseView<T>, DenseView<T>);                                   \
  template void batch_norm_backward<T>(const Backend&, ConstDenseView<T>, ConstDenseView<T>,       \
                                       std::span<const T>, std::span<const T>, std::span<const T>, \
                                       std::span<const T>, DenseView<T>);                          \
  template void gelu_backward<T>(const Backend&, ConstDenseView<T>, ConstDenseView<T>,             \
                                 DenseView<T>);                                                    \
  template void layer_norm_forward<T>(const Backend&, ConstDenseView<T>, std::span<const T>,       \
                                      std::span<const T>, T, DenseView<T>, DenseView<T>,           \
                                      std::span<T>);                                               \
  template void layer_norm_backward<T>(const Backend&, ConstDenseView<T>, ConstDenseView<T>,       \
                                       std::span<const T>, std::span<const T>, DenseView<T>,       \
                                       DenseView<T>);                                              \
  template void elu_backward<T>(const Backend&, ConstDenseView<T>, ConstDenseView<T>,              \
                                DenseView<T>, T);                                                  \
  template void dropout<T>(const Backend&, ConstDenseView<T>, DenseView<T>, float, const RngKey&,  \
                           RowIds, bool);                                                          \
  template void bias_activation<T>(const Backend&, DenseView<T>, std::span<const T>, float,        \
                                   const RngKey&, RowIds, bool);                                   \
  template void dropout_csr_values<T>(const Backend&, CsrView<T>, std::span<T>, float,             \
                                      const RngKey&, RowIds)

namespace tessera::kernels {
namespace cpu {
TESSERA_DECLARE_ELEMENTWISE_KERNELS
} // namespace cpu
namespace cuda {
TESSERA_DECLARE_ELEMENTWISE_KERNELS
} // namespace cuda
} // namespace tessera::kernels

#undef TESSERA_DECLARE_ELEMENTWISE_KERNELS
