// Device kernels of the elementwise family: ReLU and dropout with the CPU's Philox masks.
#include "bf16.cuh"
#include "grid.cuh"
#include "launch.hpp"

namespace tessera::kernels::cuda::launch {

namespace {

template <typename T> __global__ void relu_forward_kernel(const T* x, T* y, std::int64_t size) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    y[i] = x[i] < T{0} ? T{0} : x[i]; // NaN propagates, as on the CPU
}

template <typename T>
__global__ void relu_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t size, T scale) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    dx[i] = y[i] > T{0} ? scale * dy[i] : T{0};
}

template <typename T> __global__ void elu_forward_kernel(const T* x, T* y, std::int64_t size) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    y[i] = x[i] > T{0} ? x[i] : expm1(x[i]);
}

template <typename T>
__global__ void elu_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t size, T y_scale) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    dx[i] = y[i] > T{0} ? dy[i] : dy[i] * (y[i] * y_scale + T{1});
}

template <typename T> __global__ void gelu_forward_kernel(const T* x, T* y, std::int64_t size) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    y[i] = T(0.5) * x[i] * (T(1) + erf(x[i] * T(0.70710678118654752440)));
}

template <typename T>
__global__ void gelu_backward_kernel(const T* x, const T* dy, T* dx, std::int64_t size) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride()) {
    const T v = x[i];
    const T cdf = T(0.5) * (T(1) + erf(v * T(0.70710678118654752440)));
    dx[i] = dy[i] * (cdf + v * T(0.39894228040143267794) * exp(T(-0.5) * v * v));
  }
}

/// One thread per column, its rows in order (the CPU twin's sums).
template <typename T>
__global__ void column_sums_kernel(const T* a, const T* b, T* sum_a, T* sum_ab, std::int64_t rows,
                                   std::int64_t cols) {
  for (std::int64_t c = thread_index(); c < cols; c += grid_stride()) {
    double s = 0.0, p = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const double v = a[r * cols + c];
      s += v;
      p += v * static_cast<double>(b[r * cols + c]);
    }
    sum_a[c] = static_cast<T>(s);
    sum_ab[c] = static_cast<T>(p);
  }
}

template <typename T>
__global__ void batch_norm_apply_kernel(const T* x, const T* mean, const T* rstd, const T* gamma,
                                        const T* beta, T* y, T* xhat, std::int64_t size,
                                        std::int64_t cols) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride()) {
    const std::int64_t c = i % cols;
    const T normalized = (x[i] - mean[c]) * rstd[c];
    xhat[i] = normalized;
    y[i] = normalized * gamma[c] + beta[c];
  }
}

template <typename T>
__global__ void batch_norm_backward_kernel(const T* dy, const T* xhat, const T* rstd,
                                           const T* gamma, const T* mean_dy, const T* mean_dy_xhat,
                                           T* dx, std::int64_t size, std::int64_t cols) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride()) {
    const std::int64_t c = i % cols;
    dx[i] = gamma[c] * rstd[c] * (dy[i] - mean_dy[c] - xhat[i] * mean_dy_xhat[c]);
  }
}

/// One thread per row, in the CPU twin's order (sums in double).
template <typename T>
__global__ void layer_norm_forward_kernel(const T* x, const T* gamma, const T* beta, T eps, T* y,
                                          T* xhat, T* rstd, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = thread_index(); r < rows; r += grid_stride()) {
    const T* in = x + r * cols;
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c)
      sum += in[c];
    const double mean = cols > 0 ? sum / static_cast<double>(cols) : 0.0;
    double squares = 0.0;
    for (std::int64_t c = 0; c < cols; ++c)
      squares += (in[c] - mean) * (in[c] - mean);
    const T inv = static_cast<T>(1.0 / sqrt((cols > 0 ? squares / static_cast<double>(cols) : 0.0) +
                                            static_cast<double>(eps)));
    rstd[r] = inv;
    for (std::int64_t c = 0; c < cols; ++c) {
      const T normalized = (in[c] - static_cast<T>(mean)) * inv;
      xhat[r * cols + c] = normalized;
      y[r * cols + c] = normalized * gamma[c] + beta[c];
    }
  }
}

template <typename T>
__global__ void layer_norm_backward_kernel(const T* dy, const T* xhat, const T* rstd,
                                           const T* gamma, T* dx, T* dy_xhat, std::int64_t rows,
                                           std::int64_t cols) {
  for (std::int64_t r = thread_index(); r < rows; r += grid_stride()) {
    const T* g_row = dy + r * cols;
    const T* normalized = xhat + r * cols;
    double sum_g = 0.0, sum_gx = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double g = g_row[c] * gamma[c];
      sum_g += g;
      sum_gx += g * normalized[c];
    }
    const T mean_g = static_cast<T>(cols > 0 ? sum_g / static_cast<double>(cols) : 0.0);
    const T mean_gx = static_cast<T>(cols > 0 ? sum_gx / static_cast<double>(cols) : 0.0);
    for (std::int64_t c = 0; c < cols; ++c) {
      dy_xhat[r * cols + c] = g_row[c] * normalized[c];
      dx[r * cols + c] = rstd[r] * (g_row[c] * gamma[c] - mean_g - normalized[c] * mean_gx);
    }
  }
}

/// An output element: T itself, or (Out = uint16) its bfloat16 bits.
template <typename Out, typename T> __device__ inline Out stored(T value) {
  if constexpr (sizeof(Out) == 2) {
    return bf16_bits(value);
  } else {
    return value;
  }
}

/// y = a(x + bias) · mask / (1 - p), stored as Out; bias may be null, and p = 0 draws nothing.
/// One thread per (row, block of four columns): one Philox call gives its four draws.
template <typename T, typename Out>
__global__ void dropout_kernel(const T* x, Out* y, const T* bias, std::int64_t rows,
                               std::int64_t cols, float p, RngKey key, RowIds ids, bool relu,
                               T scale) {
  const std::int64_t blocks_per_row = (cols + 3) / 4;
  for (std::int64_t i = thread_index(); i < rows * blocks_per_row; i += grid_stride()) {
    const std::int64_t r = i / blocks_per_row;
    const auto block = static_cast<std::uint32_t>(i % blocks_per_row);
    std::array<std::uint32_t, 4> bits{};
    if (p > 0.0f) bits = random_bits4(key, row_id(ids, r), block);
    for (int j = 0; j < 4; ++j) {
      const std::int64_t c = 4 * static_cast<std::int64_t>(block) + j;
      if (c >= cols) break;
      const T in = bias != nullptr ? x[r * cols + c] + bias[c] : x[r * cols + c];
      const T kept = p == 0.0f || bits_to_unit_float(bits[j]) >= p ? scale : T{0};
      y[r * cols + c] = stored<Out>((relu && in < T{0} ? T{0} : in) * kept);
    }
  }
}

template <typename T>
__global__ void dropout_csr_kernel(const std::int64_t* row_ptr, const std::int32_t* col,
                                   const T* val, T* out, std::int64_t rows, float p, RngKey key,
                                   RowIds ids, T scale) {
  for (std::int64_t r = thread_index(); r < rows; r += grid_stride()) {
    const std::int64_t id = row_id(ids, r);
    for (std::int64_t k = row_ptr[r]; k < row_ptr[r + 1]; ++k) {
      const auto c = static_cast<std::uint32_t>(col[k]);
      const auto bits = random_bits4(key, id, c / 4);
      out[k] = val[k] * (bits_to_unit_float(bits[c % 4]) >= p ? scale : T{0});
    }
  }
}

} // namespace

template <typename T> void relu_forward(const T* x, T* y, std::int64_t size, cudaStream_t stream) {
  relu_forward_kernel<<<blocks_for(size), kBlock, 0, stream>>>(x, y, size);
}

template <typename T>
void relu_backward(const T* y, const T* dy, T* dx, std::int64_t size, T scale,
                   cudaStream_t stream) {
  relu_backward_kernel<<<blocks_for(size), kBlock, 0, stream>>>(y, dy, dx, size, scale);
}

template <typename T>
void column_sums(const T* a, const T* b, T* sum_a, T* sum_ab, std::int64_t rows, std::int64_t cols,
                 cudaStream_t stream) {
  column_sums_kernel<<<blocks_for(cols), kBlock, 0, stream>>>(a, b, sum_a, sum_ab, rows, cols);
}

template <typename T>
void batch_norm_apply(const T* x, const T* mean, const T* rstd, const T* gamma, const T* beta, T* y,
                      T* xhat, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  batch_norm_apply_kernel<<<blocks_for(rows * cols), kBlock, 0, stream>>>(
      x, mean, rstd, gamma, beta, y, xhat, rows * cols, cols);
}

template <typename T>
void batch_norm_backward(const T* dy, const T* xhat, const T* rstd, const T* gamma,
                         const T* mean_dy, const T* mean_dy_xhat, T* dx, std::int64_t rows,
                         std::int64_t cols, cudaStream_t stream) {
  batch_norm_backward_kernel<<<blocks_for(rows * cols), kBlock, 0, stream>>>(
      dy, xhat, rstd, gamma, mean_dy, mean_dy_xhat, dx, rows * cols, cols);
}

template <typename T> void gelu_forward(const T* x, T* y, std::int64_t size, cudaStream_t stream) {
  gelu_forward_kernel<<<blocks_for(size), kBlock, 0, stream>>>(x, y, size);
}

template <typename T>
void gelu_backward(const T* x, const T* dy, T* dx, std::int64_t size, cudaStream_t stream) {
  gelu_backward_kernel<<<blocks_for(size), kBlock, 0, stream>>>(x, dy, dx, size);
}

template <typename T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, T eps, T* y, T* xhat, T* rstd,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  layer_norm_forward_kernel<<<blocks_for(rows), kBlock, 0, stream>>>(x, gamma, beta, eps, y, xhat,
                                                                     rstd, rows, cols);
}

template <typename T>
void layer_norm_backward(const T* dy, const T* xhat, const T* rstd, const T* gamma, T* dx,
                         T* dy_xhat, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  layer_norm_backward_kernel<<<blocks_for(rows), kBlock, 0, stream>>>(dy, xhat, rstd, gamma, dx,
                                                                      dy_xhat, rows, cols);
}

template <typename T> void elu_forward(const T* x, T* y, std::int64_t size, cudaStream_t stream) {
  elu_forward_kernel<<<blocks_for(size), kBlock, 0, stream>>>(x, y, size);
}

template <typename T>
void elu_backward(const T* y, const T* dy, T* dx, std::int64_t size, T y_scale,
                  cudaStream_t stream) {
  elu_backward_kernel<<<blocks_for(size), kBlock, 0, stream>>>(y, dy, dx, size, y_scale);
}

template <typename T>
void dropout(const T* x, T* y, const T* bias, std::int64_t rows, std::int64_t cols, float p,
             RngKey key, RowIds ids, bool relu, cudaStream_t stream) {
  const T scale = T{1} / (T{1} - static_cast<T>(p));
  dropout_kernel<<<blocks_for(rows * ((cols + 3) / 4)), kBlock, 0, stream>>>(
      x, y, bias, rows, cols, p, key, ids, relu, scale);
}

void dropout_to_bf16(const float* x, std::uint16_t* y, std::int64_t rows, std::int64_t cols,
                     float p, RngKey key, RowIds ids, cudaStream_t stream) {
  const float scale = 1.0f / (1.0f - p);
  dropout_kernel<<<blocks_for(rows * ((cols + 3) / 4)), kBlock, 0, stream>>>(
      x, y, static_cast<const float*>(nullptr), rows, cols, p, key, ids, false, scale);
}

template <typename T>
void dropout_csr_values(const std::int64_t* row_ptr, const std::int32_t* col, const T* val, T* out,
                        std::int64_t rows, float p, RngKey key, RowIds ids, cudaStream_t stream) {
  const T scale = T{1} / (T{1} - static_cast<T>(p));
  dropout_csr_kernel<<<blocks_for(rows), kBlock, 0, stream>>>(row_ptr, col, val, out, rows, p, key,
                                                              ids, scale);
}

#define TESSERA_INSTANTIATE(T)                                                                     \
  template void relu_forward<T>(const T*, T*, std::int64_t, cudaStream_t);                         \
  template void relu_backward<T>(const T*, const T*, T*, std::int64_t, T, cudaStream_t);           \
  template void elu_forward<T>(const T*, T*, std::int64_t, cudaStream_t);                          \
  template void gelu_forward<T>(const T*, T*, std::int64_t, cudaStream_t);                         \
  template void column_sums<T>(const T*, const T*, T*, T*, std::int64_t, std::int64_t,             \
                               cudaStream_t);                                                      \
  template void batch_norm_apply<T>(const T*, const T*, const T*, const T*, const T*, T*, T*,      \
                                    std::int64_t, std::int64_t, cudaStream_t);                     \
  template void batch_norm_backward<T>(const T*, const T*, const T*, const T*, const T*, const T*, \
                                       T*, std::int64_t, std::int64_t, cudaStream_t);              \
  template void gelu_backward<T>(const T*, const T*, T*, std::int64_t, cudaStream_t);              \
  template void layer_norm_forward<T>(const T*, const T*, const T*, T, T*, T*, T*, std::int64_t,   \
                                      std::int64_t, cudaStream_t);                                 \
  template void layer_norm_backward<T>(const T*, const T*, const T*, const T*, T*, T*,             \
                                       std::int64_t, std::int64_t, cudaStream_t);                  \
  template void elu_backward<T>(const T*, const T*, T*, std::int64_t, T, cudaStream_t);            \
  template void dropout<T>(const T*, T*, const T*, std::int64_t, std::int64_t, float, RngKey,      \
                           RowIds, bool, cudaStream_t);                                            \
  template void dropout_csr_values<T>(const std::int64_t*, const std::int32_t*, const T*, T*,      \
                                      std::int64_t, float, RngKey, RowIds, cudaStream_t);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

} // namespace tessera::kernels::cuda::launch
