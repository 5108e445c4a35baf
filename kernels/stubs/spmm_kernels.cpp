// CUDA SpMM entry points for builds without CUDA.
#include "tessera/kernels/spmm_kernels.hpp"

#include "not_compiled.hpp"

namespace tessera::kernels::cuda {

template <typename T> void spmm(const Backend&, CsrView<T>, ConstDenseView<T>, DenseView<T>, T) {
  not_compiled("spmm");
}

void spmm_bf16(const Backend&, CsrView<float>, ConstDenseView<Bf16>, DenseView<float>) {
  not_compiled("spmm_bf16");
}

template <typename T>
void spmm_transpose(const Backend&, CsrView<T>, ConstDenseView<T>, DenseView<T>) {
  not_compiled("spmm_transpose");
}

TESSERA_INSTANTIATE_SPMM_KERNELS(float);
TESSERA_INSTANTIATE_SPMM_KERNELS(double);

} // namespace tessera::kernels::cuda
