// Device kernels of the graph-attention family: one thread per (row, head) for the softmax and
// its backward (a row's edges in order, as the CPU twin sums them), one per output element for
// the weighted sums. No atomics: the source side runs over aᵀ's rows.
#include "grid.cuh"
#include "launch.hpp"

#include <cmath>

namespace tessera::kernels::cuda::launch {

namespace {

template <typename T> __device__ inline T leaky(T v, T slope) {
  return v > T(0) ? v : slope * v;
}

template <typename T>
__global__ void edge_softmax_kernel(const std::int64_t* row_ptr, const std::int32_t* col,
                                    const T* dst, const T* src, T slope, T* alpha,
                                    std::int64_t rows, std::int64_t heads) {
  for (std::int64_t i = thread_index(); i < rows * heads; i += grid_stride()) {
    const std::int64_t r = i / heads, h = i % heads;
    const std::int64_t begin = row_ptr[r], end = row_ptr[r + 1];
    if (begin == end) continue;
    const T d = dst[i];
    T largest = leaky(d + src[static_cast<std::int64_t>(col[begin]) * heads + h], slope);
    for (std::int64_t p = begin; p < end; ++p) {
      const T e = leaky(d + src[static_cast<std::int64_t>(col[p]) * heads + h], slope);
      alpha[p * heads + h] = e;
      largest = e > largest ? e : largest;
    }
    T sum = T(0);
    for (std::int64_t p = begin; p < end; ++p) {
      const T w = exp(alpha[p * heads + h] - largest);
      alpha[p * heads + h] = w;
      sum += w;
    }
    const T inverse = T(1) / sum;
    for (std::int64_t p = begin; p < end; ++p)
      alpha[p * heads + h] *= inverse;
  }
}

/// out[r, c] = Σ over row r's edges p of alpha[e, c / F] · x[col[p], c], where e is p (a's own
/// edges: edge_spmm) or edge_of[p] (aᵀ's edges, whose weights lie at a's: the source side).
template <typename T>
__global__ void weighted_rows_kernel(const std::int64_t* row_ptr, const std::int32_t* col,
                                     const std::int64_t* edge_of, const T* alpha, const T* x,
                                     T* out, std::int64_t rows, std::int64_t cols,
                                     std::int64_t heads) {
  const std::int64_t width = cols / heads;
  for (std::int64_t i = thread_index(); i < rows * cols; i += grid_stride()) {
    const std::int64_t r = i / cols, c = i % cols, h = c / width;
    T sum = T(0);
    for (std::int64_t p = row_ptr[r]; p < row_ptr[r + 1]; ++p) {
      const std::int64_t e = edge_of != nullptr ? edge_of[p] : p;
      sum += alpha[e * heads + h] * x[static_cast<std::int64_t>(col[p]) * cols + c];
    }
    out[i] = sum;
  }
}

/// One thread per (row, head): the row's edges in order, as the CPU twin draws them.
template <typename T>
__global__ void edge_dropout_kernel(const std::int64_t* row_ptr, const std::int32_t* col,
                                    const T* alpha, float prob, RngKey key, RowIds ids, T* out,
                                    std::int64_t rows, std::int64_t heads) {
  const T scale = T(1) / (T(1) - static_cast<T>(prob));
  for (std::int64_t i = thread_index(); i < rows * heads; i += grid_stride()) {
    const std::int64_t r = i / heads, h = i % heads;
    const std::int64_t dst = row_id(ids, r) * ((heads + 3) / 4) + h / 4;
    for (std::int64_t p = row_ptr[r]; p < row_ptr[r + 1]; ++p) {
      const auto src = static_cast<std::uint32_t>(row_id(ids, col[p]));
      const bool keep = bits_to_unit_float(random_bits4(key, dst, src)[h % 4]) >= prob;
      out[p * heads + h] = keep ? alpha[p * heads + h] * scale : T(0);
    }
  }
}

template <typename T>
__global__ void edge_softmax_backward_kernel(const std::int64_t* row_ptr, const std::int32_t* col,
                                             const T* dst, const T* src, T slope, const T* alpha,
                                             const T* weights, const T* x, const T* d_out, T* d_dst,
                                             T* d_edge, std::int64_t rows, std::int64_t cols,
                                             std::int64_t heads) {
  const std::int64_t width = cols / heads;
  for (std::int64_t i = thread_index(); i < rows * heads; i += grid_stride()) {
    const std::int64_t r = i / heads, h = i % heads;
    const std::int64_t begin = row_ptr[r], end = row_ptr[r + 1];
    const T* dy = d_out + r * cols + h * width;
    T weighted = T(0);
    for (std::int64_t p = begin; p < end; ++p) {
      const T* source = x + static_cast<std::int64_t>(col[p]) * cols + h * width;
      T dot = T(0);
      for (std::int64_t f = 0; f < width; ++f)
        dot += dy[f] * source[f];
      const T term = weights[p * heads + h] * dot;
      d_edge[p * heads + h] = term;
      weighted += term;
    }
    T row_sum = T(0);
    for (std::int64_t p = begin; p < end; ++p) {
      const T pre = dst[i] + src[static_cast<std::int64_t>(col[p]) * heads + h];
      const T d_e =
          (d_edge[p * heads + h] - alpha[p * heads + h] * weighted) * (pre > T(0) ? T(1) : slope);
      d_edge[p * heads + h] = d_e;
      row_sum += d_e;
    }
    d_dst[i] = row_sum;
  }
}

template <typename T>
__global__ void edge_spmm_transpose_score_kernel(const std::int64_t* row_ptr,
                                                 const std::int64_t* edge_of, const T* d_edge,
                                                 T* d_src, std::int64_t rows, std::int64_t heads) {
  for (std::int64_t i = thread_index(); i < rows * heads; i += grid_stride()) {
    const std::int64_t j = i / heads, h = i % heads;
    T sum = T(0);
    for (std::int64_t q = row_ptr[j]; q < row_ptr[j + 1]; ++q)
      sum += d_edge[edge_of[q] * heads + h];
    d_src[i] = sum;
  }
}

} // namespace

template <typename T>
void edge_softmax(const std::int64_t* row_ptr, const std::int32_t* col, const T* dst, const T* src,
                  T slope, T* alpha, std::int64_t rows, std::int64_t heads, cudaStream_t stream) {
  edge_softmax_kernel<<<blocks_for(rows * heads), kBlock, 0, stream>>>(row_ptr, col, dst, src,
                                                                       slope, alpha, rows, heads);
}

template <typename T>
void edge_spmm(const std::int64_t* row_ptr, const std::int32_t* col, const T* alpha, const T* x,
               T* out, std::int64_t rows, std::int64_t cols, std::int64_t heads,
               cudaStream_t stream) {
  weighted_rows_kernel<<<blocks_for(rows * cols), kBlock, 0, stream>>>(row_ptr, col, nullptr, alpha,
                                                                       x, out, rows, cols, heads);
}

template <typename T>
void edge_dropout(const std::int64_t* row_ptr, const std::int32_t* col, const T* alpha, float prob,
                  RngKey key, RowIds ids, T* out, std::int64_t rows, std::int64_t heads,
                  cudaStream_t stream) {
  edge_dropout_kernel<<<blocks_for(rows * heads), kBlock, 0, stream>>>(row_ptr, col, alpha, prob,
                                                                       key, ids, out, rows, heads);
}

template <typename T>
void edge_softmax_backward(const std::int64_t* row_ptr, const std::int32_t* col, const T* dst,
                           const T* src, T slope, const T* alpha, const T* weights, const T* x,
                           const T* d_out, T* d_dst, T* d_edge, std::int64_t rows,
                           std::int64_t cols, std::int64_t heads, cudaStream_t stream) {
  edge_softmax_backward_kernel<<<blocks_for(rows * heads), kBlock, 0, stream>>>(
      row_ptr, col, dst, src, slope, alpha, weights, x, d_out, d_dst, d_edge, rows, cols, heads);
}

template <typename T>
void edge_spmm_transpose(const std::int64_t* row_ptr, const std::int32_t* col,
                         const std::int64_t* edge_of, const T* alpha, const T* d_out,
                         const T* d_edge, T* d_x, T* d_src, std::int64_t rows, std::int64_t cols,
                         std::int64_t heads, cudaStream_t stream) {
  weighted_rows_kernel<<<blocks_for(rows * cols), kBlock, 0, stream>>>(
      row_ptr, col, edge_of, alpha, d_out, d_x, rows, cols, heads);
  edge_spmm_transpose_score_kernel<<<blocks_for(rows * heads), kBlock, 0, stream>>>(
      row_ptr, edge_of, d_edge, d_src, rows, heads);
}

#define TESSERA_INSTANTIATE_ATTENTION_LAUNCHERS(T)                                                 \
  template void edge_softmax<T>(const std::int64_t*, const std::int32_t*, const T*, const T*, T,   \
                                T*, std::int64_t, std::int64_t, cudaStream_t);                     \
  template void edge_spmm<T>(const std::int64_t*, const std::int32_t*, const T*, const T*, T*,     \
                             std::int64_t, std::int64_t, std::int64_t, cudaStream_t);              \
  template void edge_dropout<T>(const std::int64_t*, const std::int32_t*, const T*, float, RngKey, \
                                RowIds, T*, std::int64_t, std::int64_t, cudaStream_t);             \
  template void edge_softmax_backward<T>(                                                          \
      const std::int64_t*, const std::int32_t*, const T*, const T*, T, const T*, const T*,         \
      const T*, const T*, T*, T*, std::int64_t, std::int64_t, std::int64_t, cudaStream_t);         \
  template void edge_spmm_transpose<T>(const std::int64_t*, const std::int32_t*,                   \
                                       const std::int64_t*, const T*, const T*, const T*, T*, T*,  \
                                       std::int64_t, std::int64_t, std::int64_t, cudaStream_t)
TESSERA_INSTANTIATE_ATTENTION_LAUNCHERS(float);
TESSERA_INSTANTIATE_ATTENTION_LAUNCHERS(double);

} // namespace tessera::kernels::cuda::launch
