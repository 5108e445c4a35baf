// Backend-agnostic tensor operations: each checks shapes, then dispatches to the backend's kernel.
#pragma once

#include "tessera/core/bf16.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/op_params.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <span>

namespace tessera::ops {

// Every op runs on `backend` (queued on its stream for CUDA) and takes views and spans in that
// backend's memory; shape mismatches throw DimensionMismatch naming the op and both shapes.

// ---- sparse ----------------------------------------------------------------------------------

/// C = A · B + beta · C. A: [m, k] CSR, B: [k, n], C: [m, n]. beta = 0 overwrites C without
/// reading it (NaNs in it do not survive); beta = 1 accumulates, which is how a product split
/// over column tiles of A (graph::split_columns) sums its parts. The CUDA backend keeps a
/// cuSPARSE plan per matrix (keyed by its pointers and n): A's structure must not change while
/// its memory lives; its values may.
template <typename T>
void spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c, T beta = T{0});

/// C = A · B with B stored in bfloat16 and the sums in float32: the same sums, in the same order
/// on a CPU, as spmm over B widened to float32 (bit for bit there). A: [m, k], B: [k, n],
/// C: [m, n] (overwritten). On CUDA a kernel of our own (cuSPARSE takes one type for B and C).
void spmm_bf16(const Backend& backend, CsrView<float> a, ConstDenseView<Bf16> b,
               DenseView<float> c);

/// C = Aᵀ · B without forming Aᵀ. A: [m, k] CSR, B: [m, n], C: [k, n] (overwritten).
/// Meant for small k (the weight gradient of a sparse input); large k should transpose A once.
/// CUDA plans as for spmm.
template <typename T>
void spmm_transpose(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c);

// ---- graph attention (GAT): kernels/include/tessera/kernels/attention_kernels.hpp says what
// each computes. a: [m, k] (destinations × sources, values unread); H heads of F features:
// x: [k, H·F]; per-edge arrays [nnz(a), H] at a's edge positions. The shapes are checked (the
// per-edge arrays' rows against a's edges where a lies in host memory). -----------------------

template <typename T>
void edge_softmax(const Backend& backend, CsrView<T> a, ConstDenseView<T> score_dst,
                  ConstDenseView<T> score_src, T slope, DenseView<T> alpha);
template <typename T>
void edge_spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> alpha, ConstDenseView<T> x,
               DenseView<T> out);
/// rows: global ids of a's rows and columns (both local rows of one numbering); 0 <= prob < 1.
template <typename T>
void edge_dropout(const Backend& backend, CsrView<T> a, ConstDenseView<T> alpha, float prob,
                  const RngKey& key, RowIds rows, DenseView<T> out);
/// weights: what edge_spmm multiplied by (alpha itself, or alpha after edge_dropout).
template <typename T>
void edge_softmax_backward(const Backend& backend, CsrView<T> a, ConstDenseView<T> score_dst,
                           ConstDenseView<T> score_src, T slope, ConstDenseView<T> alpha,
                           ConstDenseView<T> weights, ConstDenseView<T> x, ConstDenseView<T> d_out,
                           DenseView<T> d_score_dst, DenseView<T> d_edge);
/// Through at = aᵀ, whose edge q is edge edge_of[q] of a (edge_of in the backend's memory).
template <typename T>
void edge_spmm_transpose(const Backend& backend, CsrView<T> at, const Offset* edge_of,
                         ConstDenseView<T> weights, ConstDenseView<T> d_out,
                         ConstDenseView<T> d_edge, DenseView<T> d_x, DenseView<T> d_score_src);

// ---- dense -----------------------------------------------------------------------------------

/// C = alpha · op(A) · op(B) + beta · C through BLAS. op(A): [m, k], op(B): [k, n], C: [m, n].
/// beta = 0 overwrites C (NaNs in it do not survive). The CPU backend throws InvalidArgument for
/// a dimension above 2^31 - 1.
template <typename T>
void gemm(const Backend& backend, Transpose trans_a, Transpose trans_b, T alpha,
          ConstDenseView<T> a, ConstDenseView<T> b, T beta, DenseView<T> c);

/// y = x rounded to bfloat16, to nearest with ties to even (NaN stays NaN, ±inf stays ±inf);
/// the same bits on every backend. x, y: [n, f].
void round_to_bf16(const Backend& backend, ConstDenseView<float> x, DenseView<Bf16> y);

/// y = x (same shape [n, f]; y may be x). Used where a layer must not alias its input.
template <typename T>
void copy(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);

/// out[i, :] = x[rows[i], :] (packs the rows a halo sends). x: [n, f], rows: [m] in [0, n)
/// in the backend's memory (checked on the CPU, trusted on a GPU), out: [m, f].
template <typename T>
void gather_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,
                 DenseView<T> out);

/// out[rows[i], :] += x[i, :] (adds received halo rows into their owners). x: [m, f], rows: [m]
/// distinct, in [0, n) (range checked on the CPU, trusted on a GPU), out: [n, f].
template <typename T>
void scatter_add_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,
                      DenseView<T> out);

/// x[r, :] += bias for every row. x: [n, f], bias: [f]. Throws DimensionMismatch otherwise.
template <typename T>
void add_bias(const Backend& backend, DenseView<T> x, std::span<const T> bias);

/// d_bias (+)= column sums of dy. dy: [n, f], d_bias: [f]. Accumulates when `accumulate`.
template <typename T>
void bias_grad(const Backend& backend, ConstDenseView<T> dy, std::span<T> d_bias, bool accumulate);

/// y = max(x, 0). x, y: [n, f]; y may alias x.
template <typename T>
void relu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);

/// dx = dy where y > 0, else 0. y (the forward output), dy, dx: [n, f]; dx may alias dy.
template <typename T>
void relu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                   DenseView<T> dx);

/// y = x where x > 0, else exp(x) − 1 (ELU with α = 1, GAT's activation). x, y: [n, f]; y may
/// alias x.
template <typename T> void elu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);

/// From ELU's output y: dx = dy where y > 0, else dy · (y · y_scale + 1). y_scale is 1 for ELU's
/// output itself; after an inverted dropout y holds ELU's output / (1 − p) (zero where dropped,
/// where dy is zero too), and y_scale = 1 − p. y, dy, dx: [n, f]; dx may alias dy.
template <typename T>
void elu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                  DenseView<T> dx, T y_scale = T{1});

/// y = GELU(x) = x · Φ(x), the erf form (PyTorch's nn.GELU()). x, y: [n, f]; y may alias x.
template <typename T>
void gelu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);

/// dx = dy · (Φ(x) + x · φ(x)) from GELU's input x. x, dy, dx: [n, f]; dx may alias dy.
template <typename T>
void gelu_backward(const Backend& backend, ConstDenseView<T> x, ConstDenseView<T> dy,
                   DenseView<T> dx);

/// LayerNorm of each row: y = (x − mean) / sqrt(var + eps) · gamma + beta, keeping xhat (the
/// normalized rows, [n, f]) and rstd ([n], 1 / sqrt(var + eps)) for the backward. gamma, beta:
/// [f]. Throws DimensionMismatch for other shapes.
template <typename T>
void layer_norm_forward(const Backend& backend, ConstDenseView<T> x, std::span<const T> gamma,
                        std::span<const T> beta, T eps, DenseView<T> y, DenseView<T> xhat,
                        std::span<T> rstd);

/// LayerNorm's backward from the forward's xhat and rstd: dx, and dy_xhat = dy · xhat (its
/// column sums are d gamma; dy's are d beta). All [n, f] but rstd [n] and gamma [f].
template <typename T>
void layer_norm_backward(const Backend& backend, ConstDenseView<T> dy, ConstDenseView<T> xhat,
                         std::span<const T> rstd, std::span<const T> gamma, DenseView<T> dx,
                         DenseView<T> dy_xhat);

/// Column sums of a and of a · b (both [n, f]) into sum_a and sum_ab ([f]), summed in double
/// in row order (BatchNorm's statistics: b = a for the sums of squares).
template <typename T>
void column_sums(const Backend& backend, ConstDenseView<T> a, ConstDenseView<T> b,
                 std::span<T> sum_a, std::span<T> sum_ab);

/// BatchNorm with given per-column statistics: xhat = (x − mean) · rstd, y = xhat · gamma + beta.
/// x, y, xhat: [n, f]; the vectors [f].
template <typename T>
void batch_norm_apply(const Backend& backend, ConstDenseView<T> x, std::span<const T> mean,
                      std::span<const T> rstd, std::span<const T> gamma, std::span<const T> beta,
                      DenseView<T> y, DenseView<T> xhat);

/// BatchNorm's input gradient: dx = gamma · rstd · (dy − mean_dy − xhat · mean_dy_xhat), with the
/// means of dy and dy · xhat over every row the statistics covered (every rank's). [n, f] and [f].
template <typename T>
void batch_norm_backward(const Backend& backend, ConstDenseView<T> dy, ConstDenseView<T> xhat,
                         std::span<const T> rstd, std::span<const T> gamma,
                         std::span<const T> mean_dy, std::span<const T> mean_dy_xhat,
                         DenseView<T> dx);

/// y = x · mask / (1 - p), mask[r, c] = uniform(key, rows(r), c) >= p. x, y: [n, f]; y may
/// alias x; rows gives the global ids of the n rows. Throws InvalidArgument unless 0 <= p < 1.
template <typename T>
void dropout_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y, float p,
                     const RngKey& key, RowIds rows);

/// dx = dy · mask / (1 - p) with the same mask as the forward (redrawn, not stored): pass the
/// forward's key and rows. dy, dx: [n, f]; dx may alias dy. Throws InvalidArgument unless
/// 0 <= p < 1.
template <typename T>
void dropout_backward(const Backend& backend, ConstDenseView<T> dy, DenseView<T> dx, float p,
                      const RngKey& key, RowIds rows);

/// y = x · mask / (1 - p) rounded to bfloat16, with dropout_forward's mask: dropout and
/// round_to_bf16 in one pass (p = 0: the rounding alone). x, y: [n, f]. Throws InvalidArgument
/// unless 0 <= p < 1.
void dropout_to_bf16(const Backend& backend, ConstDenseView<float> x, DenseView<Bf16> y, float p,
                     const RngKey& key, RowIds rows);

/// y = max(x, 0) · mask / (1 - p) with dropout_forward's mask: ReLU then dropout in one pass.
/// x, y: [n, f]; y may alias x. Throws InvalidArgument unless 0 <= p < 1.
template <typename T>
void relu_dropout_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y, float p,
                          const RngKey& key, RowIds rows);

/// y = a(y + bias) · mask / (1 - p) in place, a = ReLU when `relu`, else the identity, with
/// dropout_forward's mask (none drawn when p = 0): a layer's bias, activation and dropout in one
/// pass over rows its product just wrote. y: [n, f]; bias: [f] or empty; rows gives the global
/// ids of y's rows. Throws DimensionMismatch for another bias length, InvalidArgument unless
/// 0 <= p < 1.
template <typename T>
void bias_activation(const Backend& backend, DenseView<T> y, std::span<const T> bias, float p,
                     const RngKey& key, RowIds rows, bool relu);

/// Backward of relu_dropout_forward from its output y: dx = dy / (1 - p) where y > 0, else 0
/// (y > 0 exactly where the input was positive and kept, so no mask is redrawn). y, dy, dx:
/// [n, f]; dx may alias dy. Throws InvalidArgument unless 0 <= p < 1.
template <typename T>
void relu_dropout_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                           DenseView<T> dx, float p);

/// Entries of a CSR view whose arrays live in `backend`'s memory (CsrView::nnz() reads row_ptr
/// directly, so it only works for host memory): two offsets copied to the host on a device.
template <typename T>
std::int64_t nnz(const Backend& backend, CsrView<T> a);

/// Dropout on the stored values of a sparse matrix with the dense mask semantics:
/// out_val[k] = in_val[k] · mask(row, col[k]) / (1 - p). Same structure, values only.
/// in: [n, f] CSR, whole or a row slice (entries keep the whole matrix's numbering); out_val:
/// the values of the whole matrix, at least row_ptr[n] of them, of which entries
/// [row_ptr[0], row_ptr[n]) are written. Throws InvalidArgument unless 0 <= p < 1, and
/// DimensionMismatch for a shorter out_val.
template <typename T>
void dropout_csr_values(const Backend& backend, CsrView<T> in, std::span<T> out_val, float p,
                        const RngKey& key, RowIds rows);

// ---- loss ------------------------------------------------------------------------------------

/// Masked softmax cross-entropy over the rows listed in `rows`.
/// logits: [n, c]; labels: [n], in [0, c) at the selected rows; rows: distinct ids in [0, n);
/// d_logits: [n, c] is overwritten with d(loss)/d(logits) (zero outside `rows`) when
/// non-empty. Loss and gradient are divided by `normalizer` (the global count of selected
/// rows). Returns the sum of -log p over `rows` divided by normalizer; on CUDA it waits for the
/// result. Throws InvalidArgument for a normalizer that is not positive and finite, or a
/// selected row or label out of range.
template <typename T>
double softmax_cross_entropy(const Backend& backend, ConstDenseView<T> logits,
                             std::span<const std::int32_t> labels,
                             std::span<const std::int32_t> rows, double normalizer,
                             DenseView<T> d_logits);

/// Number of `rows` whose argmax over logits equals the label (ties: lowest index). logits:
/// [n, c], labels: [n], rows: ids in [0, n); range errors as for softmax_cross_entropy.
template <typename T>
std::int64_t count_correct(const Backend& backend, ConstDenseView<T> logits,
                           std::span<const std::int32_t> labels,
                           std::span<const std::int32_t> rows);

// ---- optimizer -------------------------------------------------------------------------------

/// One Adam step on a flat parameter array, in torch.optim's order of operations; updates param,
/// m and v in place. `step` counts from 1 (bias correction). param, grad, m, v: the same length.
/// Throws InvalidArgument for step < 1 or a config outside the ranges AdamConfig documents.
template <typename T>
void adam_step(const Backend& backend, std::span<T> param, std::span<const T> grad,
               std::span<T> m, std::span<T> v, const AdamConfig& config, std::int64_t step);

/// Sets every element of x to zero.
template <typename T>
void zero(const Backend& backend, std::span<T> x);

}  // namespace tessera::ops

namespace tessera::ops {

/// y += alpha · x over flat arrays of the same length (DimensionMismatch otherwise).
template <typename T>
void axpy(const Backend& backend, T alpha, std::span<const T> x, std::span<T> y);

}  // namespace tessera::ops
