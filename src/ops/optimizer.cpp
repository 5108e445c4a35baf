// Dispatch of the optimizer ops (Adam/AdamW step, zero) to the backend's kernels.
#include "tessera/kernels/optimizer_kernels.hpp"
#include "checks.hpp"
#include "tessera/ops/ops.hpp"

#include <cmath>

namespace tessera::ops {
namespace {

/// The ranges torch.optim.Adam accepts: lr, eps, weight_decay >= 0 and betas in [0, 1).
void check_config(const AdamConfig& config) {
  const auto fail = [](const char* what, float value, const char* expected) {
    throw InvalidArgument(std::string("adam_step: ") + what + " = " + std::to_string(value) +
                          ", expected " + expected);
  };
  if (!(config.lr >= 0.0f)) fail("lr", config.lr, ">= 0");
  if (!(config.eps >= 0.0f)) fail("eps", config.eps, ">= 0");
  if (!(config.weight_decay >= 0.0f)) fail("weight_decay", config.weight_decay, ">= 0");
  if (!(config.beta1 >= 0.0f && config.beta1 < 1.0f)) fail("beta1", config.beta1, "in [0, 1)");
  if (!(config.beta2 >= 0.0f && config.beta2 < 1.0f)) fail("beta2", config.beta2, "in [0, 1)");
}

} // namespace

template <typename T>
void adam_step(const Backend& backend, std::span<T> param, std::span<const T> grad, std::span<T> m,
               std::span<T> v, const AdamConfig& config, std::int64_t step) {
  constexpr const char* op = "adam_step";
  const auto param_shape = detail::shape(param);
  if (grad.size() != param.size()) {
    detail::throw_mismatch(op, "grad of param's size", "param", param_shape, "grad",
                           detail::shape(grad));
  }
  if (m.size() != param.size()) {
    detail::throw_mismatch(op, "m of param's size", "param", param_shape, "m", detail::shape(m));
  }
  if (v.size() != param.size()) {
    detail::throw_mismatch(op, "v of param's size", "param", param_shape, "v", detail::shape(v));
  }
  if (step < 1) {
    throw InvalidArgument(std::string(op) + ": step counts from 1, got " + std::to_string(step));
  }
  check_config(config);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::adam_step(backend, param, grad, m, v, config, step);
  case DeviceKind::Cuda:
    return kernels::cuda::adam_step(backend, param, grad, m, v, config, step);
  }
}

template <typename T> void zero(const Backend& backend, std::span<T> x) {
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::zero(backend, x);
  case DeviceKind::Cuda:
    return kernels::cuda::zero(backend, x);
  }
}

template void adam_step<float>(const Backend&, std::span<float>, std::span<const float>,
                               std::span<float>, std::span<float>, const AdamConfig&, std::int64_t);
template void adam_step<double>(const Backend&, std::span<double>, std::span<const double>,
                                std::span<double>, std::span<double>, const AdamConfig&,
                                std::int64_t);
template void zero<float>(const Backend&, std::span<float>);
template void zero<double>(const Backend&, std::span<double>);

} // namespace tessera::ops
