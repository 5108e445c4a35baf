// CUDA dense entry points for builds without CUDA.
#include "tessera/kernels/dense_kernels.hpp"

#include "not_compiled.hpp"

namespace tessera::kernels::cuda {

template <typename T>
void gemm(const Backend&, Transpose, Transpose, T, ConstDenseView<T>, ConstDenseView<T>,
          T, DenseView<T>) {
  not_compiled("gemm");
}

template <typename T> void copy(const Backend&, ConstDenseView<T>, DenseView<T>) {
  not_compiled("copy");
}

void round_to_bf16(const Backend&, ConstDenseView<float>, DenseView<Bf16>) {
  not_compiled("round_to_bf16");
}

template <typename T>
void gather_rows(const Backend&, ConstDenseView<T>, std::span<const LocalId>, DenseView<T>) {
  not_compiled("gather_rows");
}

template <typename T>
void scatter_add_rows(const Backend&, ConstDenseView<T>, std::span<const LocalId>, DenseView<T>) {
  not_compiled("scatter_add_rows");
}

template <typename T> void add_bias(const Backend&, DenseView<T>, std::span<const T>) {
  not_compiled("add_bias");
}

template <typename T> void axpy(const Backend&, T, std::span<const T>, std::span<T>) {
  not_compiled("axpy");
}

template <typename T> void bias_grad(const Backend&, ConstDenseView<T>, std::span<T>, bool) {
  not_compiled("bias_grad");
}

TESSERA_INSTANTIATE_DENSE_KERNELS(float);
TESSERA_INSTANTIATE_DENSE_KERNELS(double);

} // namespace tessera::kernels::cuda
