// Device kernels of the loss family: masked softmax cross-entropy (per-row losses, summed in a
// fixed order by CUB) and argmax accuracy.
#include "grid.cuh"
#include "launch.hpp"

#include <cub/device/device_reduce.cuh>

namespace tessera::kernels::cuda::launch {

namespace {

/// Index of the largest of x[0, c), the lowest on ties (as the CPU kernel).
template <typename T> __device__ std::int64_t argmax(const T* x, std::int64_t c) {
  std::int64_t best = 0;
  for (std::int64_t j = 1; j < c; ++j)
    if (x[j] > x[best]) best = j;
  return best;
}

/// Row r and its label, or -1 after flagging the first bad selection.
__device__ bool valid(const std::int32_t* labels, std::int32_t r, std::int64_t n, std::int64_t c,
                      std::int64_t i, std::int64_t* bad) {
  if (r < 0 || r >= n || labels[r] < 0 || labels[r] >= c) {
    *bad = i + 1;
    return false;
  }
  return true;
}

template <typename T>
__global__ void softmax_cross_entropy_kernel(const T* logits, std::int64_t n, std::int64_t c,
                                             const std::int32_t* labels, const std::int32_t* rows,
                                             std::int64_t selected, double inv_norm, T* d_logits,
                                             double* loss_per_row, std::int64_t* bad) {
  for (std::int64_t i = thread_index(); i < selected; i += grid_stride()) {
    const std::int32_t r = rows[i];
    if (!valid(labels, r, n, c, i, bad)) {
      loss_per_row[i] = 0.0;
      continue;
    }
    const T* x = logits + static_cast<std::int64_t>(r) * c;
    const T max = x[argmax(x, c)];
    double sum = 0.0;
    for (std::int64_t j = 0; j < c; ++j)
      sum += exp(static_cast<double>(x[j] - max));
    const double log_sum = log(sum);
    const std::int32_t label = labels[r];
    loss_per_row[i] = -(static_cast<double>(x[label] - max) - log_sum);
    if (d_logits != nullptr) {
      T* g = d_logits + static_cast<std::int64_t>(r) * c;
      for (std::int64_t j = 0; j < c; ++j) {
        const double prob = exp(static_cast<double>(x[j] - max) - log_sum);
        g[j] = static_cast<T>((prob - (j == label ? 1.0 : 0.0)) * inv_norm);
      }
    }
  }
}

template <typename T>
__global__ void count_correct_kernel(const T* logits, std::int64_t n, std::int64_t c,
                                     const std::int32_t* labels, const std::int32_t* rows,
                                     std::int64_t selected, unsigned long long* correct,
                                     std::int64_t* bad) {
  for (std::int64_t i = thread_index(); i < selected; i += grid_stride()) {
    const std::int32_t r = rows[i];
    if (!valid(labels, r, n, c, i, bad)) continue;
    if (argmax(logits + static_cast<std::int64_t>(r) * c, c) == labels[r]) atomicAdd(correct, 1ull);
  }
}

} // namespace

template <typename T>
void softmax_cross_entropy(const T* logits, std::int64_t n, std::int64_t c,
                           const std::int32_t* labels, const std::int32_t* rows,
                           std::int64_t selected, double inv_norm, T* d_logits,
                           double* loss_per_row, std::int64_t* bad, cudaStream_t stream) {
  softmax_cross_entropy_kernel<<<blocks_for(selected), kBlock, 0, stream>>>(
      logits, n, c, labels, rows, selected, inv_norm, d_logits, loss_per_row, bad);
}

template <typename T>
void count_correct(const T* logits, std::int64_t n, std::int64_t c, const std::int32_t* labels,
                   const std::int32_t* rows, std::int64_t selected, unsigned long long* correct,
                   std::int64_t* bad, cudaStream_t stream) {
  count_correct_kernel<<<blocks_for(selected), kBlock, 0, stream>>>(logits, n, c, labels, rows,
                                                                    selected, correct, bad);
}

std::size_t sum_scratch_bytes(std::int64_t size) {
  std::size_t bytes = 0;
  cub::DeviceReduce::Sum(nullptr, bytes, static_cast<const double*>(nullptr),
                         static_cast<double*>(nullptr), size);
  return bytes;
}

void sum(const double* values, std::int64_t size, double* sum, void* scratch,
         std::size_t scratch_bytes, cudaStream_t stream) {
  cub::DeviceReduce::Sum(scratch, scratch_bytes, values, sum, size, stream);
}

#define TESSERA_INSTANTIATE(T)                                                                     \
  template void softmax_cross_entropy<T>(const T*, std::int64_t, std::int64_t,                     \
                                         const std::int32_t*, const std::int32_t*, std::int64_t,   \
                                         double, T*, double*, std::int64_t*, cudaStream_t);        \
  template void count_correct<T>(const T*, std::int64_t, std::int64_t, const std::int32_t*,        \
                                 const std::int32_t*, std::int64_t, unsigned long long*,           \
                                 std::int64_t*, cudaStream_t);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

} // namespace tessera::kernels::cuda::launch
