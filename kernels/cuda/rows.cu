// Device kernels of the dense family that cuBLAS does not cover: bias, axpy, scale, row gather
// and scatter-add (halo pack / unpack), and value permutation (transposed CSR values).
#include "bf16.cuh"
#include "grid.cuh"
#include "launch.hpp"

namespace tessera::kernels::cuda::launch {

namespace {

template <typename T>
__global__ void add_bias_kernel(T* x, const T* bias, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = thread_index(); i < rows * cols; i += grid_stride())
    x[i] += bias[i % cols];
}

template <typename T> __global__ void axpy_kernel(T alpha, const T* x, T* y, std::int64_t size) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    y[i] += alpha * x[i];
}

template <typename T> __global__ void scale_kernel(T alpha, T* x, std::int64_t size) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    x[i] *= alpha;
}

template <typename T>
__global__ void gather_rows_kernel(const T* x, const std::int32_t* rows, T* out, std::int64_t count,
                                   std::int64_t cols) {
  for (std::int64_t i = thread_index(); i < count * cols; i += grid_stride()) {
    const std::int64_t r = i / cols, c = i % cols;
    out[i] = x[static_cast<std::int64_t>(rows[r]) * cols + c];
  }
}

template <typename T>
__global__ void scatter_add_rows_kernel(const T* x, const std::int32_t* rows, T* out,
                                        std::int64_t count, std::int64_t cols) {
  // Rows are distinct: no two threads add into the same element.
  for (std::int64_t i = thread_index(); i < count * cols; i += grid_stride()) {
    const std::int64_t r = i / cols, c = i % cols;
    out[static_cast<std::int64_t>(rows[r]) * cols + c] += x[i];
  }
}

template <typename T>
__global__ void permute_values_kernel(const T* in, const std::int64_t* perm, T* out,
                                      std::int64_t size) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    out[i] = in[perm[i]];
}

__global__ void round_to_bf16_kernel(const float* x, std::uint16_t* y, std::int64_t size) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride())
    y[i] = bf16_bits(x[i]);
}

/// One warp per output row, each lane over columns lane, lane + 32, ...
__global__ void spmm_bf16_kernel(const std::int64_t* row_ptr, const std::int32_t* col,
                                 const float* val, const std::uint16_t* b, float* c,
                                 std::int64_t rows, std::int64_t cols) {
  const std::int64_t warps = grid_stride() / 32;
  for (std::int64_t r = thread_index() / 32; r < rows; r += warps) {
    const std::int64_t begin = row_ptr[r], end = row_ptr[r + 1];
    for (std::int64_t j = threadIdx.x % 32; j < cols; j += 32) {
      float acc = 0.0f;
      for (std::int64_t k = begin; k < end; ++k) {
        const float x = __uint_as_float(static_cast<std::uint32_t>(b[col[k] * cols + j]) << 16);
        acc = fmaf(val[k], x, acc);
      }
      c[r * cols + j] = acc;
    }
  }
}

} // namespace

void round_to_bf16(const float* x, std::uint16_t* y, std::int64_t size, cudaStream_t stream) {
  round_to_bf16_kernel<<<blocks_for(size), kBlock, 0, stream>>>(x, y, size);
}

void spmm_bf16(const std::int64_t* row_ptr, const std::int32_t* col, const float* val,
               const std::uint16_t* b, float* c, std::int64_t rows, std::int64_t cols,
               cudaStream_t stream) {
  spmm_bf16_kernel<<<blocks_for(rows * 32), kBlock, 0, stream>>>(row_ptr, col, val, b, c, rows,
                                                                 cols);
}

template <typename T>
void add_bias(T* x, const T* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  add_bias_kernel<<<blocks_for(rows * cols), kBlock, 0, stream>>>(x, bias, rows, cols);
}

template <typename T> void axpy(T alpha, const T* x, T* y, std::int64_t size, cudaStream_t stream) {
  axpy_kernel<<<blocks_for(size), kBlock, 0, stream>>>(alpha, x, y, size);
}

template <typename T> void scale(T alpha, T* x, std::int64_t size, cudaStream_t stream) {
  scale_kernel<<<blocks_for(size), kBlock, 0, stream>>>(alpha, x, size);
}

template <typename T>
void gather_rows(const T* x, const std::int32_t* rows, T* out, std::int64_t count,
                 std::int64_t cols, cudaStream_t stream) {
  gather_rows_kernel<<<blocks_for(count * cols), kBlock, 0, stream>>>(x, rows, out, count, cols);
}

template <typename T>
void scatter_add_rows(const T* x, const std::int32_t* rows, T* out, std::int64_t count,
                      std::int64_t cols, cudaStream_t stream) {
  scatter_add_rows_kernel<<<blocks_for(count * cols), kBlock, 0, stream>>>(x, rows, out, count,
                                                                           cols);
}

template <typename T>
void permute_values(const T* in, const std::int64_t* perm, T* out, std::int64_t size,
                    cudaStream_t stream) {
  permute_values_kernel<<<blocks_for(size), kBlock, 0, stream>>>(in, perm, out, size);
}

#define TESSERA_INSTANTIATE(T)                                                                     \
  template void add_bias<T>(T*, const T*, std::int64_t, std::int64_t, cudaStream_t);               \
  template void axpy<T>(T, const T*, T*, std::int64_t, cudaStream_t);                              \
  template void scale<T>(T, T*, std::int64_t, cudaStream_t);                                       \
  template void gather_rows<T>(const T*, const std::int32_t*, T*, std::int64_t, std::int64_t,      \
                               cudaStream_t);                                                      \
  template void scatter_add_rows<T>(const T*, const std::int32_t*, T*, std::int64_t, std::int64_t, \
                                    cudaStream_t);                                                 \
  template void permute_values<T>(const T*, const std::int64_t*, T*, std::int64_t, cudaStream_t);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

} // namespace tessera::kernels::cuda::launch
