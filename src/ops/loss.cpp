// Dispatch of the loss ops (softmax cross-entropy, accuracy count) to the backend's kernels.
#include "tessera/kernels/loss_kernels.hpp"
#include "checks.hpp"
#include "tessera/ops/ops.hpp"

#include <cmath>

namespace tessera::ops {
namespace {

template <typename T>
void check_labels(const char* op, ConstDenseView<T> logits, std::span<const std::int32_t> labels) {
  if (static_cast<std::int64_t>(labels.size()) != logits.rows) {
    detail::throw_mismatch(op, "one label per row of logits", "logits", detail::shape(logits),
                           "labels", detail::shape(labels));
  }
}

} // namespace

template <typename T>
double softmax_cross_entropy(const Backend& backend, ConstDenseView<T> logits,
                             std::span<const std::int32_t> labels,
                             std::span<const std::int32_t> rows, double normalizer,
                             DenseView<T> d_logits) {
  constexpr const char* op = "softmax_cross_entropy";
  check_labels(op, logits, labels);
  if (d_logits.size() > 0) detail::check_same_shape(op, "logits", logits, "d_logits", d_logits);
  if (!(normalizer > 0.0) || !std::isfinite(normalizer)) {
    throw InvalidArgument(std::string(op) + ": normalizer must be positive and finite, got " +
                          std::to_string(normalizer));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::softmax_cross_entropy(backend, logits, labels, rows, normalizer, d_logits);
  case DeviceKind::Cuda:
    return kernels::cuda::softmax_cross_entropy(backend, logits, labels, rows, normalizer,
                                                d_logits);
  }
  detail::throw_unknown_backend(op, backend);
}

template <typename T>
std::int64_t count_correct(const Backend& backend, ConstDenseView<T> logits,
                           std::span<const std::int32_t> labels,
                           std::span<const std::int32_t> rows) {
  constexpr const char* op = "count_correct";
  check_labels(op, logits, labels);
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::count_correct(backend, logits, labels, rows);
  case DeviceKind::Cuda:
    return kernels::cuda::count_correct(backend, logits, labels, rows);
  }
  detail::throw_unknown_backend(op, backend);
}

template double softmax_cross_entropy<float>(const Backend&, ConstDenseView<float>,
                                             std::span<const std::int32_t>,
                                             std::span<const std::int32_t>, double,
                                             DenseView<float>);
template double softmax_cross_entropy<double>(const Backend&, ConstDenseView<double>,
                                              std::span<const std::int32_t>,
                                              std::span<const std::int32_t>, double,
                                              DenseView<double>);
template std::int64_t count_correct<float>(const Backend&, ConstDenseView<float>,
                                           std::span<const std::int32_t>,
                                           std::span<const std::int32_t>);
template std::int64_t count_correct<double>(const Backend&, ConstDenseView<double>,
                                            std::span<const std::int32_t>,
                                            std::span<const std::int32_t>);

} // namespace tessera::ops
