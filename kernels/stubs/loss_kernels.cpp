// CUDA loss entry points for builds without CUDA.
#include "tessera/kernels/loss_kernels.hpp"

#include "not_compiled.hpp"

namespace tessera::kernels::cuda {

template <typename T>
double softmax_cross_entropy(const Backend&, ConstDenseView<T>, std::span<const std::int32_t>,
                             std::span<const std::int32_t>, double, DenseView<T>) {
  not_compiled("softmax_cross_entropy");
}

template <typename T>
std::int64_t count_correct(const Backend&, ConstDenseView<T>, std::span<const std::int32_t>,
                           std::span<const std::int32_t>) {
  not_compiled("count_correct");
}

TESSERA_INSTANTIATE_LOSS_KERNELS(float);
TESSERA_INSTANTIATE_LOSS_KERNELS(double);

} // namespace tessera::kernels::cuda
