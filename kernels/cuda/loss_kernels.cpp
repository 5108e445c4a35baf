// CUDA loss kernels: per-row losses on the device, summed in a fixed order, with the checks of
// the selection done on the device and reported here.
#include "tessera/kernels/loss_kernels.hpp"

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "launch.hpp"
#include "tessera/core/error.hpp"

#include <cstring>
#include <fmt/core.h>

namespace tessera::kernels::cuda {

namespace {

/// Device scratch of a loss call: a flag for a bad selection, then one result, then per-row
/// values.
struct LossScratch {
  std::int64_t* bad;
  double* result;
  double* per_row;
};

LossScratch loss_scratch(const CudaBackend& be, std::int64_t selected) {
  auto* base = static_cast<char*>(be.scratch(
      kLossScratch, 2 * sizeof(double) + static_cast<std::size_t>(selected) * sizeof(double)));
  be.zero_bytes(base, 2 * sizeof(double));
  return {reinterpret_cast<std::int64_t*>(base), reinterpret_cast<double*>(base + sizeof(double)),
          reinterpret_cast<double*>(base + 2 * sizeof(double))};
}

/// Copies the flag and the result back; throws for a bad selection.
double finish(const CudaBackend& be, const LossScratch& s, std::span<const std::int32_t> rows,
              const char* op) {
  double host[2] = {0.0, 0.0}; // [flag, result]
  be.copy_to_host(host, s.bad, sizeof(host));
  std::int64_t bad = 0;
  std::memcpy(&bad, &host[0], sizeof(bad));
  if (bad != 0) {
    throw InvalidArgument(fmt::format("{}: rows[{}] names a row outside the logits or a label "
                                      "outside [0, classes) ({} rows selected)",
                                      op, bad - 1, rows.size()));
  }
  return host[1];
}

} // namespace

template <typename T>
double softmax_cross_entropy(const Backend& backend, ConstDenseView<T> logits,
                             std::span<const std::int32_t> labels,
                             std::span<const std::int32_t> rows, double normalizer,
                             DenseView<T> d_logits) {
  const auto& be = as_cuda(backend);
  const bool want_grad = d_logits.size() > 0;
  if (want_grad)
    be.zero_bytes(d_logits.data, static_cast<std::size_t>(d_logits.size()) * sizeof(T));
  const auto selected = static_cast<std::int64_t>(rows.size());
  if (selected == 0) return 0.0;
  const LossScratch s = loss_scratch(be, selected);
  launch::softmax_cross_entropy(logits.data, logits.rows, logits.cols, labels.data(), rows.data(),
                                selected, 1.0 / normalizer, want_grad ? d_logits.data : nullptr,
                                s.per_row, s.bad, be.stream());
  check_launch("softmax_cross_entropy");
  const std::size_t bytes = launch::sum_scratch_bytes(selected);
  launch::sum(s.per_row, selected, s.result, be.scratch(kReduceScratch, bytes), bytes, be.stream());
  check_launch("sum");
  return finish(be, s, rows, "softmax_cross_entropy") / normalizer;
}

template <typename T>
std::int64_t count_correct(const Backend& backend, ConstDenseView<T> logits,
                           std::span<const std::int32_t> labels,
                           std::span<const std::int32_t> rows) {
  const auto& be = as_cuda(backend);
  const auto selected = static_cast<std::int64_t>(rows.size());
  if (selected == 0) return 0;
  const LossScratch s = loss_scratch(be, 0);
  launch::count_correct(logits.data, logits.rows, logits.cols, labels.data(), rows.data(), selected,
                        reinterpret_cast<unsigned long long*>(s.result), s.bad, be.stream());
  check_launch("count_correct");
  const double result = finish(be, s, rows, "count_correct");
  std::uint64_t correct = 0;
  std::memcpy(&correct, &result, sizeof(correct));
  return static_cast<std::int64_t>(correct);
}

TESSERA_INSTANTIATE_LOSS_KERNELS(float);
TESSERA_INSTANTIATE_LOSS_KERNELS(double);

} // namespace tessera::kernels::cuda
