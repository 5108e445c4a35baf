// Contract of the optimizer kernel family: Adam/AdamW steps and zeroing, one twin per backend.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/op_params.hpp"

#include <cstdint>
#include <span>

// Declared once, expanded into every backend namespace below. Sizes are checked by src/ops.
#define TESSERA_DECLARE_OPTIMIZER_KERNELS                                                          \
  /* One Adam (decoupled = false) or AdamW step; param, grad, m, v: [size]; step >= 1. */          \
  template <typename T>                                                                            \
  void adam_step(const Backend& backend, std::span<T> param, std::span<const T> grad,              \
                 std::span<T> m, std::span<T> v, const AdamConfig& config,                    \
                 std::int64_t step);                                                               \
  /* x = 0. */                                                                                     \
  template <typename T> void zero(const Backend& backend, std::span<T> x);

/// Explicit instantiation of the family for value type T, used by every backend's source.
#define TESSERA_INSTANTIATE_OPTIMIZER_KERNELS(T)                                                   \
  template void adam_step<T>(const Backend&, std::span<T>, std::span<const T>, std::span<T>,       \
                             std::span<T>, const AdamConfig&, std::int64_t);                  \
  template void zero<T>(const Backend&, std::span<T>)

namespace tessera::kernels {
namespace cpu {
TESSERA_DECLARE_OPTIMIZER_KERNELS
} // namespace cpu
namespace cuda {
TESSERA_DECLARE_OPTIMIZER_KERNELS
} // namespace cuda
} // namespace tessera::kernels

#undef TESSERA_DECLARE_OPTIMIZER_KERNELS
