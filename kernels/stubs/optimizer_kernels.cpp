// CUDA optimizer entry points for builds without CUDA.
#include "tessera/kernels/optimizer_kernels.hpp"

#include "not_compiled.hpp"

namespace tessera::kernels::cuda {

template <typename T>
void adam_step(const Backend&, std::span<T>, std::span<const T>, std::span<T>, std::span<T>,
               const AdamConfig&, std::int64_t) {
  not_compiled("adam_step");
}

template <typename T> void zero(const Backend&, std::span<T>) {
  not_compiled("zero");
}

TESSERA_INSTANTIATE_OPTIMIZER_KERNELS(float);
TESSERA_INSTANTIATE_OPTIMIZER_KERNELS(double);

} // namespace tessera::kernels::cuda
