// CUDA optimizer kernels: Adam / AdamW with the CPU kernel's scalars (optimizer.cu), and zeroing.
#include "tessera/kernels/optimizer_kernels.hpp"

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "launch.hpp"

#include <cmath>

namespace tessera::kernels::cuda {

template <typename T>
void adam_step(const Backend& backend, std::span<T> param, std::span<const T> grad, std::span<T> m,
               std::span<T> v, const AdamConfig& config, std::int64_t step) {
  if (param.empty()) return;
  // The scalars exactly as the CPU kernel computes them (bias corrections in double).
  const double lr = config.lr, wd = config.weight_decay;
  const double bc1 = 1.0 - std::pow(static_cast<double>(config.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(config.beta2), static_cast<double>(step));
  launch::adam_step(param.data(), grad.data(), m.data(), v.data(),
                    static_cast<std::int64_t>(param.size()), static_cast<T>(lr / bc1),
                    static_cast<T>(std::sqrt(bc2)), static_cast<T>(config.beta1),
                    static_cast<T>(config.beta2), static_cast<T>(config.eps),
                    static_cast<T>(config.decoupled ? 1.0 - lr * wd : 1.0),
                    static_cast<T>(config.decoupled ? 0.0 : wd), as_cuda(backend).stream());
  check_launch("adam_step");
}

template <typename T> void zero(const Backend& backend, std::span<T> x) {
  backend.zero_bytes(x.data(), x.size_bytes());
}

TESSERA_INSTANTIATE_OPTIMIZER_KERNELS(float);
TESSERA_INSTANTIATE_OPTIMIZER_KERNELS(double);

} // namespace tessera::kernels::cuda
