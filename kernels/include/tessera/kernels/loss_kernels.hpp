// Contract of the loss kernel family: masked softmax cross-entropy and accuracy, one twin per
// backend.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <span>

// Declared once, expanded into every backend namespace below. Shapes are checked by src/ops;
// the kernels check the values of `rows` and of the selected labels (they may live on the device).
#define TESSERA_DECLARE_LOSS_KERNELS                                                               \
  /* Sum over `rows` of -log softmax(logits[r])[labels[r]], divided by normalizer; d_logits */     \
  /* ([n, c], or empty for no gradient) gets the gradient of that, zero outside `rows`. */         \
  /* logits: [n, c], labels: [n], rows: distinct ids in [0, n). */                                 \
  template <typename T>                                                                            \
  double softmax_cross_entropy(                                                                    \
      const Backend& backend, ConstDenseView<T> logits, std::span<const std::int32_t> labels,      \
      std::span<const std::int32_t> rows, double normalizer, DenseView<T> d_logits);               \
  /* Number of `rows` whose argmax (lowest index on ties) equals the label. */                     \
  template <typename T>                                                                            \
  std::int64_t count_correct(const Backend& backend, ConstDenseView<T> logits,                     \
                             std::span<const std::int32_t> labels,                                 \
                             std::span<const std::int32_t> rows);

/// Explicit instantiation of the family for value type T, used by every backend's source.
#define TESSERA_INSTANTIATE_LOSS_KERNELS(T)                                                        \
  template double softmax_cross_entropy<T>(const Backend&, ConstDenseView<T>,                      \
                                           std::span<const std::int32_t>,                          \
                                           std::span<const std::int32_t>, double, DenseView<T>);   \
  template std::int64_t count_correct<T>(const Backend&, ConstDenseView<T>,                        \
                                         std::span<const std::int32_t>,                            \
                                         std::span<const std::int32_t>)

namespace tessera::kernels {
namespace cpu {
TESSERA_DECLARE_LOSS_KERNELS
} // namespace cpu
namespace cuda {
TESSERA_DECLARE_LOSS_KERNELS
} // namespace cuda
} // namespace tessera::kernels

#undef TESSERA_DECLARE_LOSS_KERNELS
