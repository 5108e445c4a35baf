// CUDA graph-attention entry points for builds without CUDA.
#include "tessera/kernels/attention_kernels.hpp"

#include "not_compiled.hpp"

namespace tessera::kernels::cuda {

template <typename T>
void edge_softmax(const Backend&, CsrView<T>, ConstDenseView<T>, ConstDenseView<T>, T,
                  DenseView<T>) {
  not_compiled("edge_softmax");
}

template <typename T>
void edge_spmm(const Backend&, CsrView<T>, ConstDenseView<T>, ConstDenseView<T>, DenseView<T>) {
  not_compiled("edge_spmm");
}

template <typename T>
void edge_dropout(const Backend&, CsrView<T>, ConstDenseView<T>, float, const RngKey&, RowIds,
                  DenseView<T>) {
  not_compiled("edge_dropout");
}

template <typename T>
void edge_softmax_backward(const Backend&, CsrView<T>, ConstDenseView<T>, ConstDenseView<T>, T,
                           ConstDenseView<T>, ConstDenseView<T>, ConstDenseView<T>,
                           ConstDenseView<T>, DenseView<T>, DenseView<T>) {
  not_compiled("edge_softmax_backward");
}

template <typename T>
void edge_spmm_transpose(const Backend&, CsrView<T>, const Offset*, ConstDenseView<T>,
                         ConstDenseView<T>, ConstDenseView<T>, DenseView<T>, DenseView<T>) {
  not_compiled("edge_spmm_transpose");
}

TESSERA_INSTANTIATE_ATTENTION_KERNELS(float);
TESSERA_INSTANTIATE_ATTENTION_KERNELS(double);

} // namespace tessera::kernels::cuda
