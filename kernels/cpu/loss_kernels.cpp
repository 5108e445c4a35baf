// OpenMP loss kernels: masked softmax cross-entropy with its gradient, and argmax accuracy.
#include "tessera/kernels/loss_kernels.hpp"

#include "parallel.hpp"
#include "tessera/core/error.hpp"

#include <cmath>
#include <cstdint>
#include <omp.h>
#include <string>
#include <vector>

namespace tessera::kernels::cpu {
namespace {

/// Throws InvalidArgument for the first selected row outside [0, n) or whose label is outside
/// [0, c). A serial pass: |rows| reads, small next to the n·c work that follows.
void check_selection(std::span<const std::int32_t> labels, std::span<const std::int32_t> rows,
                     std::int64_t n, std::int64_t c, const char* op) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::int32_t r = rows[i];
    if (r < 0 || r >= n) {
      throw InvalidArgument(std::string(op) + ": rows[" + std::to_string(i) + "] = " +
                            std::to_string(r) + " is outside [0, " + std::to_string(n) + ")");
    }
    if (labels[r] < 0 || labels[r] >= c) {
      throw InvalidArgument(std::string(op) + ": label of row " + std::to_string(r) + " is " +
                            std::to_string(labels[r]) + ", expected a class in [0, " +
                            std::to_string(c) + ")");
    }
  }
}

/// Index of the largest value of x[0, c), the lowest on ties.
template <typename T> std::int64_t argmax(const T* x, std::int64_t c) noexcept {
  std::int64_t best = 0;
  for (std::int64_t j = 1; j < c; ++j) {
    if (x[j] > x[best]) best = j;
  }
  return best;
}

} // namespace

template <typename T>
double softmax_cross_entropy(const Backend&, ConstDenseView<T> logits,
                             std::span<const std::int32_t> labels,
                             std::span<const std::int32_t> rows, double normalizer,
                             DenseView<T> d_logits) {
  const std::int64_t c = logits.cols;
  check_selection(labels, rows, logits.rows, c, "softmax_cross_entropy");
  const bool want_grad = d_logits.size() > 0;
  const auto selected = static_cast<std::int64_t>(rows.size());
  const double inv_norm = 1.0 / normalizer;
  // Per-thread loss sums added in thread order: reproducible for a given thread count.
  const auto max_threads = static_cast<std::size_t>(omp_get_max_threads());
  double* partial = reusable_scratch<double>(max_threads);
  std::fill(partial, partial + max_threads, 0.0);
#pragma omp parallel
  {
    if (want_grad) {
      const std::int64_t size = d_logits.size();
#pragma omp for simd schedule(static)
      for (std::int64_t i = 0; i < size; ++i)
        d_logits.data[i] = T{0};
    }
    double loss = 0.0;
    std::vector<double> shifted(static_cast<std::size_t>(c)); // exp(x_j - max) of a row
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < selected; ++i) {
      const std::int32_t r = rows[i];
      const T* x = logits.row(r);
      // log softmax(x)_j = x_j - max - log(sum exp(x - max)): no overflow, no log(0).
      const T max = x[argmax(x, c)];
      double sum = 0.0;
      for (std::int64_t j = 0; j < c; ++j) {
        shifted[static_cast<std::size_t>(j)] = std::exp(static_cast<double>(x[j] - max));
        sum += shifted[static_cast<std::size_t>(j)];
      }
      const std::int32_t label = labels[r];
      loss -= static_cast<double>(x[label] - max) - std::log(sum);
      if (want_grad) { // softmax from the exponentials above: one exp per entry, not two
        T* g = d_logits.row(r);
        const double inv_sum = 1.0 / sum;
        for (std::int64_t j = 0; j < c; ++j) {
          const double prob = shifted[static_cast<std::size_t>(j)] * inv_sum;
          g[j] = static_cast<T>((prob - (j == label ? 1.0 : 0.0)) * inv_norm);
        }
      }
    }
    partial[omp_get_thread_num()] = loss;
  }
  double total = 0.0;
  for (std::size_t t = 0; t < max_threads; ++t)
    total += partial[t];
  return total * inv_norm;
}

template <typename T>
std::int64_t count_correct(const Backend&, ConstDenseView<T> logits,
                           std::span<const std::int32_t> labels,
                           std::span<const std::int32_t> rows) {
  const std::int64_t c = logits.cols;
  check_selection(labels, rows, logits.rows, c, "count_correct");
  const auto selected = static_cast<std::int64_t>(rows.size());
  std::int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct)
  for (std::int64_t i = 0; i < selected; ++i) {
    const std::int32_t r = rows[i];
    if (argmax(logits.row(r), c) == labels[r]) ++correct;
  }
  return correct;
}

TESSERA_INSTANTIATE_LOSS_KERNELS(float);
TESSERA_INSTANTIATE_LOSS_KERNELS(double);

} // namespace tessera::kernels::cpu
