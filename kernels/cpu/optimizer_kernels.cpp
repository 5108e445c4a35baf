// OpenMP optimizer kernels: one fused Adam/AdamW update per element, and zeroing.
#include "tessera/kernels/optimizer_kernels.hpp"

#include <cmath>
#include <cstdint>

namespace tessera::kernels::cpu {

template <typename T>
void adam_step(const Backend&, std::span<T> param, std::span<const T> grad, std::span<T> m,
               std::span<T> v, const AdamConfig& config, std::int64_t step) {
  // The order of operations follows torch.optim.Adam / AdamW (single-tensor path): bias
  // corrections in double, step_size = lr / bc1, denom = sqrt(v) / sqrt(bc2) + eps.
  const double lr = config.lr;
  const double wd = config.weight_decay;
  const double bc1 = 1.0 - std::pow(static_cast<double>(config.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(config.beta2), static_cast<double>(step));
  const auto step_size = static_cast<T>(lr / bc1);
  const auto bc2_sqrt = static_cast<T>(std::sqrt(bc2));
  const auto beta1 = static_cast<T>(config.beta1);
  const auto beta2 = static_cast<T>(config.beta2);
  const auto eps = static_cast<T>(config.eps);
  // AdamW shrinks the parameter before the update; Adam adds wd · param to the gradient.
  const auto shrink = static_cast<T>(config.decoupled ? 1.0 - lr * wd : 1.0);
  const auto l2 = static_cast<T>(config.decoupled ? 0.0 : wd);
  const auto size = static_cast<std::int64_t>(param.size());
  T* p = param.data();
  const T* g = grad.data();
  T* m1 = m.data();
  T* m2 = v.data();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i) {
    const T gi = g[i] + l2 * p[i];
    const T mi = beta1 * m1[i] + (T{1} - beta1) * gi;
    const T vi = beta2 * m2[i] + (T{1} - beta2) * gi * gi;
    m1[i] = mi;
    m2[i] = vi;
    p[i] = p[i] * shrink - step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
  }
}

template <typename T> void zero(const Backend&, std::span<T> x) {
  const auto size = static_cast<std::int64_t>(x.size());
  T* data = x.data();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    data[i] = T{0};
}

TESSERA_INSTANTIATE_OPTIMIZER_KERNELS(float);
TESSERA_INSTANTIATE_OPTIMIZER_KERNELS(double);

} // namespace tessera::kernels::cpu
