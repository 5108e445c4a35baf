// Contract of the SpMM kernel family: sparse (CSR) times dense products, one twin per backend.
#pragma once

#include "tessera/core/bf16.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

// Declared once, expanded into every backend namespace below. Shapes are checked by src/ops.
#define TESSERA_DECLARE_SPMM_KERNELS                                                               \
  /* C = A · B + beta · C. a: [m, k], b: [k, n], c: [m, n]; beta = 0 never reads C. */           \
  template <typename T>                                                                            \
  void spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c,             \
            T beta = T{0});                                                                        \
  /* C = A · B with B stored in bfloat16: the sums (in float32, in spmm's order) of B widened. */ \
  void spmm_bf16(const Backend& backend, CsrView<float> a, ConstDenseView<Bf16> b,                 \
                 DenseView<float> c);                                                              \
  /* C = Aᵀ · B. a: [m, k], b: [m, n], c: [k, n] overwritten; k small. */                       \
  template <typename T>                                                                            \
  void spmm_transpose(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c);

/// Explicit instantiation of the family for value type T, used by every backend's source.
#define TESSERA_INSTANTIATE_SPMM_KERNELS(T)                                                        \
  template void spmm<T>(const Backend&, CsrView<T>, ConstDenseView<T>, DenseView<T>, T);           \
  template void spmm_transpose<T>(const Backend&, CsrView<T>, ConstDenseView<T>, DenseView<T>)

namespace tessera::kernels {
namespace cpu {
TESSERA_DECLARE_SPMM_KERNELS
} // namespace cpu
namespace cuda {
TESSERA_DECLARE_SPMM_KERNELS
} // namespace cuda
} // namespace tessera::kernels

#undef TESSERA_DECLARE_SPMM_KERNELS
