// CUDA elementwise entry points for builds without CUDA.
#include "tessera/kernels/elementwise_kernels.hpp"

#include "not_compiled.hpp"

namespace tessera::kernels::cuda {

template <typename T> void relu_forward(const Backend&, ConstDenseView<T>, DenseView<T>) {
  not_compiled("relu_forward");
}

template <typename T>
void relu_backward(const Backend&, ConstDenseView<T>, ConstDenseView<T>, DenseView<T>, T) {
  not_compiled("relu_backward");
}

template <typename T>
void column_sums(const Backend&, ConstDenseView<T>, ConstDenseView<T>, std::span<T>, std::span<T>) {
  not_compiled("column_sums");
}

template <typename T>
void batch_norm_apply(const Backend&, ConstDenseView<T>, std::span<const T>, std::span<const T>,
                      std::span<const T>, std::span<const T>, DenseView<T>, DenseView<T>) {
  not_compiled("batch_norm_apply");
}

template <typename T>
void batch_norm_backward(const Backend&, ConstDenseView<T>, ConstDenseView<T>, std::span<const T>,
                         std::span<const T>, std::span<const T>, std::span<const T>, DenseView<T>) {
  not_compiled("batch_norm_backward");
}

template <typename T> void gelu_forward(const Backend&, ConstDenseView<T>, DenseView<T>) {
  not_compiled("gelu_forward");
}

template <typename T>
void gelu_backward(const Backend&, ConstDenseView<T>, ConstDenseView<T>, DenseView<T>) {
  not_compiled("gelu_backward");
}

template <typename T>
void layer_norm_forward(const Backend&, ConstDenseView<T>, std::span<const T>, std::span<const T>,
                        T, DenseView<T>, DenseView<T>, std::span<T>) {
  not_compiled("layer_norm_forward");
}

template <typename T>
void layer_norm_backward(const Backend&, ConstDenseView<T>, ConstDenseView<T>, std::span<const T>,
                         std::span<const T>, DenseView<T>, DenseView<T>) {
  not_compiled("layer_norm_backward");
}

template <typename T> void elu_forward(const Backend&, ConstDenseView<T>, DenseView<T>) {
  not_compiled("elu_forward");
}

template <typename T>
void elu_backward(const Backend&, ConstDenseView<T>, ConstDenseView<T>, DenseView<T>, T) {
  not_compiled("elu_backward");
}

template <typename T>
void dropout(const Backend&, ConstDenseView<T>, DenseView<T>, float, const RngKey&, RowIds,
             bool) {
  not_compiled("dropout");
}

void dropout_to_bf16(const Backend&, ConstDenseView<float>, DenseView<Bf16>, float, const RngKey&,
                     RowIds) {
  not_compiled("dropout_to_bf16");
}

template <typename T>
void bias_activation(const Backend&, DenseView<T>, std::span<const T>, float, const RngKey&, RowIds,
                     bool) {
  not_compiled("bias_activation");
}

template <typename T>
void dropout_csr_values(const Backend&, CsrView<T>, std::span<T>, float, const RngKey&,
                        RowIds) {
  not_compiled("dropout_csr_values");
}

TESSERA_INSTANTIATE_ELEMENTWISE_KERNELS(float);
TESSERA_INSTANTIATE_ELEMENTWISE_KERNELS(double);

} // namespace tessera::kernels::cuda
