// The device kernels of kernels/cuda, as plain launch functions: raw device pointers, sizes and
// the stream. The .cu files define them; the contract implementations (.cpp) call them. Kept
// free of Tessera's tensor headers so nvcc compiles only device code.
#pragma once

#include "tessera/core/rng.hpp"

#include <cstdint>
#include <cuda_runtime_api.h>

namespace tessera::kernels::cuda::launch {

/// Global id of local row r: ids[r] when ids is set, else offset + r (RowIds).
struct RowIds {
  const std::int64_t* ids = nullptr;
  std::int64_t offset = 0;
};

// ---- elementwise.cu ----
template <typename T> void relu_forward(const T* x, T* y, std::int64_t size, cudaStream_t stream);
template <typename T>
void relu_backward(const T* y, const T* dy, T* dx, std::int64_t size, T scale, cudaStream_t stream);
/// BatchNorm's pieces (elementwise_kernels.hpp): column sums (one thread per column), the
/// normalization with given statistics and its backward (one thread per element).
template <typename T>
void column_sums(const T* a, const T* b, T* sum_a, T* sum_ab, std::int64_t rows, std::int64_t cols,
                 cudaStream_t stream);
template <typename T>
void batch_norm_apply(const T* x, const T* mean, const T* rstd, const T* gamma, const T* beta, T* y,
                      T* xhat, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
template <typename T>
void batch_norm_backward(const T* dy, const T* xhat, const T* rstd, const T* gamma,
                         const T* mean_dy, const T* mean_dy_xhat, T* dx, std::int64_t rows,
                         std::int64_t cols, cudaStream_t stream);
/// GELU (erf form) and its backward from the input.
template <typename T> void gelu_forward(const T* x, T* y, std::int64_t size, cudaStream_t stream);
template <typename T>
void gelu_backward(const T* x, const T* dy, T* dx, std::int64_t size, cudaStream_t stream);
/// LayerNorm over each row of [rows, cols] (elementwise_kernels.hpp): one thread per row.
template <typename T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, T eps, T* y, T* xhat, T* rstd,
                        std::int64_t rows, std::int64_t cols, cudaStream_t stream);
template <typename T>
void layer_norm_backward(const T* dy, const T* xhat, const T* rstd, const T* gamma, T* dx,
                         T* dy_xhat, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
/// ELU (α = 1) and its backward from the output: dx = dy where y > 0, else dy · (y + 1).
template <typename T> void elu_forward(const T* x, T* y, std::int64_t size, cudaStream_t stream);
template <typename T>
void elu_backward(const T* y, const T* dy, T* dx, std::int64_t size, T y_scale,
                  cudaStream_t stream);
/// y = a(x + bias) · mask / (1 - p) with the CPU's mask: keep where uniform(key, id(r), c) >= p
/// (nothing drawn when p = 0). bias: [cols] or null; y may be x.
template <typename T>
void dropout(const T* x, T* y, const T* bias, std::int64_t rows, std::int64_t cols, float p,
             RngKey key, RowIds ids, bool relu, cudaStream_t stream);
/// y = x · mask / (1 - p) rounded to bfloat16 bits (dropout's mask and the CPU's rounding).
void dropout_to_bf16(const float* x, std::uint16_t* y, std::int64_t rows, std::int64_t cols,
                     float p, RngKey key, RowIds ids, cudaStream_t stream);
template <typename T>
void dropout_csr_values(const std::int64_t* row_ptr, const std::int32_t* col, const T* val, T* out,
                        std::int64_t rows, float p, RngKey key, RowIds ids, cudaStream_t stream);

// ---- rows.cu: dense helpers ----
template <typename T>
void add_bias(T* x, const T* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
template <typename T> void axpy(T alpha, const T* x, T* y, std::int64_t size, cudaStream_t stream);
/// x = alpha · x.
template <typename T> void scale(T alpha, T* x, std::int64_t size, cudaStream_t stream);
template <typename T>
void gather_rows(const T* x, const std::int32_t* rows, T* out, std::int64_t count,
                 std::int64_t cols, cudaStream_t stream);
template <typename T>
void scatter_add_rows(const T* x, const std::int32_t* rows, T* out, std::int64_t count,
                      std::int64_t cols, cudaStream_t stream);
/// y = x rounded to bfloat16 bits (to nearest, ties to even; NaN to 0x7FC0), as the CPU does.
void round_to_bf16(const float* x, std::uint16_t* y, std::int64_t size, cudaStream_t stream);
/// c = A · b for A in CSR (row r's entries at [row_ptr[r], row_ptr[r + 1]) of col / val) and b
/// [A.cols, cols] in bfloat16 bits, summed in float32 in the order of A's entries.
void spmm_bf16(const std::int64_t* row_ptr, const std::int32_t* col, const float* val,
               const std::uint16_t* b, float* c, std::int64_t rows, std::int64_t cols,
               cudaStream_t stream);
/// out[k] = in[perm[k]] (the values of a transposed CSR from its permutation).
template <typename T>
void permute_values(const T* in, const std::int64_t* perm, T* out, std::int64_t size,
                    cudaStream_t stream);

// ---- attention.cu: the graph-attention family (attention_kernels.hpp), H = heads ----
/// alpha [nnz, H] of a's edges (row_ptr / col of `rows` rows): softmax per row and head of
/// leaky(dst[r, h] + src[col[p], h]).
template <typename T>
void edge_softmax(const std::int64_t* row_ptr, const std::int32_t* col, const T* dst, const T* src,
                  T slope, T* alpha, std::int64_t rows, std::int64_t heads, cudaStream_t stream);
/// out [rows, cols] = per head, Σ of alpha · x rows (cols = H · F).
template <typename T>
void edge_spmm(const std::int64_t* row_ptr, const std::int32_t* col, const T* alpha, const T* x,
               T* out, std::int64_t rows, std::int64_t cols, std::int64_t heads,
               cudaStream_t stream);
/// out [nnz, H] = alpha with edge_dropout's mask.
template <typename T>
void edge_dropout(const std::int64_t* row_ptr, const std::int32_t* col, const T* alpha, float prob,
                  RngKey key, RowIds ids, T* out, std::int64_t rows, std::int64_t heads,
                  cudaStream_t stream);
/// d_edge [nnz, H] and d_dst [rows, H] of edge_softmax_backward.
template <typename T>
void edge_softmax_backward(const std::int64_t* row_ptr, const std::int32_t* col, const T* dst,
                           const T* src, T slope, const T* alpha, const T* weights, const T* x,
                           const T* d_out, T* d_dst, T* d_edge, std::int64_t rows,
                           std::int64_t cols, std::int64_t heads, cudaStream_t stream);
/// d_x [rows, cols] and d_src [rows, H] over aᵀ's rows (edge_of: aᵀ's edge → a's edge).
template <typename T>
void edge_spmm_transpose(const std::int64_t* row_ptr, const std::int32_t* col,
                         const std::int64_t* edge_of, const T* alpha, const T* d_out,
                         const T* d_edge, T* d_x, T* d_src, std::int64_t rows, std::int64_t cols,
                         std::int64_t heads, cudaStream_t stream);

// ---- loss.cu ----
/// Per selected row i: loss_per_row[i] = -log softmax(logits[rows[i]])[label]; d_logits rows
/// (when non-null, already zeroed) get (softmax - onehot) · inv_norm. *bad is set to 1 + i for
/// a row or label out of range.
template <typename T>
void softmax_cross_entropy(const T* logits, std::int64_t n, std::int64_t c,
                           const std::int32_t* labels, const std::int32_t* rows,
                           std::int64_t selected, double inv_norm, T* d_logits,
                           double* loss_per_row, std::int64_t* bad, cudaStream_t stream);
/// *correct += selected rows whose argmax (lowest index on ties) is the label.
template <typename T>
void count_correct(const T* logits, std::int64_t n, std::int64_t c, const std::int32_t* labels,
                   const std::int32_t* rows, std::int64_t selected, unsigned long long* correct,
                   std::int64_t* bad, cudaStream_t stream);
/// *sum = the sum of values[0, size) in a fixed order (deterministic).
void sum(const double* values, std::int64_t size, double* sum, void* scratch,
         std::size_t scratch_bytes, cudaStream_t stream);
/// Scratch bytes sum() needs for `size` values.
std::size_t sum_scratch_bytes(std::int64_t size);

// ---- optimizer.cu ----
/// One Adam / AdamW step with the CPU kernel's order of operations.
template <typename T>
void adam_step(T* param, const T* grad, T* m, T* v, std::int64_t size, T step_size, T bc2_sqrt,
               T beta1, T beta2, T eps, T shrink, T l2, cudaStream_t stream);

} // namespace tessera::kernels::cuda::launch
