// Backend-agnostic tensor operations: each checks shapes, then dispatches to the backend's kernel.
#pragma once

#include <cstdint>
#include <span>

#include "tessera/core/device.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera::ops {

/// Global vertex id of each local row, for random draws that must not depend on the tiling:
/// ids[r] when ids is set, else offset + r.
struct RowIds {
  const GlobalId* ids = nullptr;
  GlobalId offset = 0;
  GlobalId operator()(std::int64_t r) const noexcept { return ids != nullptr ? ids[r] : offset + r; }
};

enum class Transpose { No, Yes };

// ---- sparse ----------------------------------------------------------------------------------

/// C = A · B. A: [m, k] CSR, B: [k, n], C: [m, n] (overwritten).
template <typename T>
void spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c);

/// C = Aᵀ · B without forming Aᵀ. A: [m, k] CSR, B: [m, n], C: [k, n] (overwritten).
/// Meant for small k (the weight gradient of a sparse input); large k should transpose A once.
template <typename T>
void spmm_transpose(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c);

// ---- dense -----------------------------------------------------------------------------------

/// C = alpha · op(A) · op(B) + beta · C through BLAS. op(A): [m, k], op(B): [k, n], C: [m, n].
template <typename T>
void gemm(const Backend& backend, Transpose trans_a, Transpose trans_b, T alpha,
          ConstDenseView<T> a, ConstDenseView<T> b, T beta, DenseView<T> c);

/// y = x (same shape). Used where a layer must not alias its input.
template <typename T>
void copy(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);

/// out[i, :] = x[rows[i], :] (packs the rows a halo sends). x: [n, f], rows: [m] in [0, n)
/// in the backend's memory (checked on the CPU, trusted on a GPU), out: [m, f].
template <typename T>
void gather_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,
                 DenseView<T> out);

/// out[rows[i], :] += x[i, :] (adds received halo rows into their owners). x: [m, f], rows: [m]
/// distinct, in [0, n), out: [n, f].
template <typename T>
void scatter_add_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,
                      DenseView<T> out);

/// x[r, :] += bias for every row. x: [n, f], bias: [f].
template <typename T>
void add_bias(const Backend& backend, DenseView<T> x, std::span<const T> bias);

/// d_bias (+)= column sums of dy. dy: [n, f], d_bias: [f]. Accumulates when `accumulate`.
template <typename T>
void bias_grad(const Backend& backend, ConstDenseView<T> dy, std::span<T> d_bias, bool accumulate);

/// y = max(x, 0). x, y: [n, f]; y may alias x.
template <typename T>
void relu_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y);

/// dx = dy where y > 0, else 0. y is the forward output. dx may alias dy.
template <typename T>
void relu_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                   DenseView<T> dx);

/// y = x · mask / (1 - p), mask[r, c] = uniform(key, rows(r), c) >= p. y may alias x.
template <typename T>
void dropout_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y, float p,
                     const RngKey& key, RowIds rows);

/// dx = dy · mask / (1 - p) with the same mask as the forward (redrawn, not stored).
template <typename T>
void dropout_backward(const Backend& backend, ConstDenseView<T> dy, DenseView<T> dx, float p,
                      const RngKey& key, RowIds rows);

/// y = max(x, 0) · mask / (1 - p) with dropout_forward's mask: ReLU then dropout in one pass.
template <typename T>
void relu_dropout_forward(const Backend& backend, ConstDenseView<T> x, DenseView<T> y, float p,
                          const RngKey& key, RowIds rows);

/// Backward of relu_dropout_forward from its output y: dx = dy / (1 - p) where y > 0, else 0
/// (y > 0 exactly where the input was positive and kept, so no mask is redrawn).
template <typename T>
void relu_dropout_backward(const Backend& backend, ConstDenseView<T> y, ConstDenseView<T> dy,
                           DenseView<T> dx, float p);

/// Dropout on the stored values of a sparse matrix with the dense mask semantics:
/// out_val[k] = in_val[k] · mask(row, col[k]) / (1 - p). Same structure, values only.
template <typename T>
void dropout_csr_values(const Backend& backend, CsrView<T> in, std::span<T> out_val, float p,
                        const RngKey& key, RowIds rows);

// ---- loss ------------------------------------------------------------------------------------

/// Masked softmax cross-entropy over the rows listed in `rows`.
/// logits: [n, c]; labels: [n] in [0, c); d_logits: [n, c] is overwritten with
/// d(loss)/d(logits) (zero outside `rows`) when non-empty. Loss and gradient are divided by
/// `normalizer` (the global count of selected rows). Returns the sum of -log p over `rows`
/// divided by normalizer.
template <typename T>
double softmax_cross_entropy(const Backend& backend, ConstDenseView<T> logits,
                             std::span<const std::int32_t> labels,
                             std::span<const std::int32_t> rows, double normalizer,
                             DenseView<T> d_logits);

/// Number of `rows` whose argmax over logits equals the label (ties: lowest index).
template <typename T>
std::int64_t count_correct(const Backend& backend, ConstDenseView<T> logits,
                           std::span<const std::int32_t> labels,
                           std::span<const std::int32_t> rows);

// ---- optimizer -------------------------------------------------------------------------------

/// Hyper-parameters of one Adam/AdamW step.
struct AdamConfig {
  float lr = 0.01f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  /// false: Adam with L2 (decay added to the gradient, as torch.optim.Adam);
  /// true: AdamW (decoupled decay, as torch.optim.AdamW).
  bool decoupled = false;
};

/// One Adam step on a flat parameter array. `step` counts from 1 (bias correction).
/// param, grad, m, v: the same length.
template <typename T>
void adam_step(const Backend& backend, std::span<T> param, std::span<const T> grad,
               std::span<T> m, std::span<T> v, const AdamConfig& config, std::int64_t step);

/// Sets every element to zero.
template <typename T>
void zero(const Backend& backend, std::span<T> x);

}  // namespace tessera::ops

namespace tessera::ops {

/// y += alpha · x over flat arrays of the same length.
template <typename T>
void axpy(const Backend& backend, T alpha, std::span<const T> x, std::span<T> y);

}  // namespace tessera::ops
